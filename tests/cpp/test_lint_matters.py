"""Why lint matters: a formula that captures an intermediate, forced past the linter with
``--no-lint``, compiles and passes gradcheck, yet its double backward is wrong."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cpp.compiled import build_library
from transpiler.cpp import generate

torch = pytest.importorskip("torch")

# exp(x) * 2 differentiated through the intermediate `doubled` (= 2 exp(x)): the first
# derivative is right, but `doubled` is saved without its history, so the second is zero.
ILLEGAL_CAPTURE = '''\
from formulas import at, derivative


@derivative("exp(Tensor self) -> Tensor")
def exp(self):
    result = at.exp(self)
    doubled = at.mul(result, 2.0)
    def backward(grad):
        return at.mul(grad * doubled, 0.5)
    return result, backward


@derivative("mul.Scalar(Tensor self, Scalar other) -> Tensor")
def mul_scalar(self, other):
    result = at.mul(self, other)
    def backward(grad):
        return at.mul(grad, other)
    return result, backward
'''


def test_illegal_capture_passes_gradcheck_but_fails_gradgradcheck(tmp_path: Path, capsys):
    formulas, out = tmp_path / "formulas", tmp_path / "out_cpp"
    formulas.mkdir()
    (formulas / "leaky.py").write_text(ILLEGAL_CAPTURE)

    assert generate.main(["--formulas", str(formulas), "--out", str(out)]) == 1
    assert "leaky.py:9:30: DB100" in capsys.readouterr().out
    assert not out.exists()

    assert generate.main(["--formulas", str(formulas), "--out", str(out), "--no-lint", "--namespace", "leaky"]) == 0
    library = build_library(out, Path(__file__).resolve().parents[2] / "build", "leaky_formulas")
    # A fresh process: a library that cannot be right is kept out of the session's.
    checks = subprocess.run([sys.executable, "-c", CHECK, str(library)], capture_output=True, text=True)
    assert checks.returncode == 0, checks.stderr[-3000:]
    assert checks.stdout.split() == ["gradcheck=True", "gradgradcheck=False"]


CHECK = """
import sys, torch
torch.ops.load_library(sys.argv[1])
x = torch.linspace(-1.0, 1.0, 5, dtype=torch.float64, requires_grad=True)
exp = torch.ops.leaky.exp.default
print(f"gradcheck={torch.autograd.gradcheck(exp, (x,), raise_exception=False)}")
print(f"gradgradcheck={torch.autograd.gradgradcheck(exp, (x,), raise_exception=False)}")
"""
