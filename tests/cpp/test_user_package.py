"""A user's own formula package may call the shipped library's operators: it lints,
transpiles (the shipped schemas resolve its calls), compiles and gradchecks."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cpp.compiled import REPO, build_library
from transpiler.cpp import generate

torch = pytest.importorskip("torch")

SINH = '''\
from formulas import at, derivative


@derivative("sinh(Tensor self) -> Tensor")
def sinh(self):
    result = at.sinh(self)
    def backward(grad):
        # d/dx sinh(x) = cosh(x) = (e^x + e^-x) / 2
        return grad * (at.exp(self) + at.exp(-self)) / 2
    return result, backward
'''

CHECK = """
import sys, torch
torch.ops.load_library(sys.argv[1])
x = torch.linspace(-1.5, 2.0, 7, dtype=torch.float64).reshape(7, 1).expand(7, 3).clone().requires_grad_()
op = torch.ops.formulas.sinh
ok = torch.autograd.gradcheck(op, (x,)) and torch.autograd.gradgradcheck(op, (x,))
(g,) = torch.autograd.grad(op(x).sum(), x, create_graph=True)
(h,) = torch.autograd.grad(g.sum(), x)
same = torch.allclose(g, torch.cosh(x)) and torch.allclose(h, torch.sinh(x))
print(f"gradchecks={ok} matches_torch={same}")
"""


def test_user_package_builds_on_the_shipped_operators(tmp_path: Path):
    package, out = tmp_path / "myops", tmp_path / "my_cpp"
    package.mkdir()
    (package / "sinh.py").write_text(SINH)

    assert generate.main(["--formulas", str(package), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir() if p.suffix == ".cpp") == ["helpers.cpp", "sinh.cpp"]
    library = build_library(out, REPO / "build", "user_sinh")
    checks = subprocess.run([sys.executable, "-c", CHECK, str(library)], capture_output=True, text=True)
    assert checks.returncode == 0, checks.stderr[-3000:]
    assert checks.stdout.split() == ["gradchecks=True", "matches_torch=True"]
