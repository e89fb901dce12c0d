"""A `Generator?` argument (random operators) is a non-differentiable argument passed through to ATen:
a package formula with one compiles, draws what torch draws from the same seed, and differentiates
as torch does."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cpp.compiled import REPO, build_library
from transpiler.cpp import generate

torch = pytest.importorskip("torch")

GAMMA = '''\
from formulas import at, derivative, nondifferentiable

nondifferentiable("_standard_gamma_grad(Tensor self, Tensor output) -> Tensor")


@derivative("_standard_gamma(Tensor self, Generator? generator=None) -> Tensor")
def _standard_gamma(self, generator=None):
    result = at._standard_gamma(self, generator)
    def backward(grad):
        # the reparameterized sample's derivative in its shape parameter (ATen's kernel)
        return grad * at._standard_gamma_grad(self, result)
    return result, backward
'''

CHECK = """
import sys, torch
from transpiler.build import load_library
load_library(sys.argv[1])
alpha = torch.linspace(0.5, 4.0, 12, dtype=torch.float64).reshape(3, 4).requires_grad_()
ours = torch.ops.randops._standard_gamma(alpha, generator=torch.Generator().manual_seed(7))
theirs = torch._standard_gamma(alpha, generator=torch.Generator().manual_seed(7))
(g_ours,) = torch.autograd.grad(ours.sum(), alpha)
(g_theirs,) = torch.autograd.grad(theirs.sum(), alpha)
default = torch.ops.randops._standard_gamma(alpha)             # generator=None: the default generator
print(f"same_draw={torch.equal(ours, theirs)} same_grad={torch.allclose(g_ours, g_theirs)} "
      f"default={default.shape == alpha.shape and bool((default > 0).all())}")
"""


def test_a_generator_argument_is_passed_through(tmp_path: Path):
    package, out = tmp_path / "randops", tmp_path / "rand_cpp"
    package.mkdir()
    (package / "gamma.py").write_text(GAMMA)
    assert generate.main(["--formulas", str(package), "--out", str(out)]) == 0
    source = (out / "gamma.cpp").read_text()
    assert "std::optional<at::Generator> generator" in source
    library = build_library(out, REPO / "build")
    checks = subprocess.run([sys.executable, "-c", CHECK, str(library)], capture_output=True, text=True, cwd=REPO)
    assert checks.returncode == 0, checks.stderr[-3000:]
    assert checks.stdout.split() == ["same_draw=True", "same_grad=True", "default=True"]
