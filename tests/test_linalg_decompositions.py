"""The decomposition helpers of ``formulas/linalg_decompositions.py`` against torch, run with torch as
the operator backend (complex dtypes and batches, which the corpus proof's float64 OpInfo samples
do not all reach): each backward equals torch's gradient, each jvp torch's forward AD or, where
torch 2.13's forward AD is not the derivative, central finite differences. The entries that call
them are proven compiled (gradcheck and gradgradcheck, and against torch, on OpInfo samples) by
``transpile coverage --corpus``."""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pytest

import formulas.linalg_decompositions as ld
from formulas.torch.backend import TorchBackend

torch = pytest.importorskip("torch")
fwAD = pytest.importorskip("torch.autograd.forward_ad")


@pytest.fixture(scope="module")
def backend() -> TorchBackend:
    return TorchBackend.for_library()


def _randn(*shape, dtype=torch.float64, seed=0):
    return torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def _spd(*shape, dtype=torch.float64, seed=0):
    """A well-conditioned Hermitian positive definite matrix (eigenvalues >= n)."""
    a = _randn(*shape, dtype=dtype, seed=seed)
    return a @ a.mH + shape[-1] * torch.eye(shape[-1], dtype=dtype)


def _factor(upper, dtype=torch.float64):
    return torch.linalg.cholesky(_spd(2, 3, 3, dtype=dtype), upper=upper)


class Case(NamedTuple):
    """``op(*inputs)`` in torch, and the helper's gradients for ``inputs`` given the output gradient."""
    name: str
    inputs: Callable[[], tuple]
    op: Callable
    backward: Callable          # (backend, grad, output, *inputs) -> gradients of inputs
    jvp: Callable               # (backend, output, inputs, tangents) -> output tangent
    tangent_of_op: bool = True  # torch's forward AD is the derivative (else: finite differences)


def _hermitian_tangent(t):
    return t + t.mH


CASES = [
    case
    for dtype in (torch.float64, torch.complex128)
    for upper in (False, True)
    for case in (
        Case(f"cholesky {dtype} upper={upper}", lambda d=dtype: (_spd(2, 3, 3, dtype=d),),
             lambda a, u=upper: torch.linalg.cholesky_ex(a, upper=u)[0],
             lambda b, g, out, a, u=upper: (b.run(ld.cholesky_backward, g, u, out),),
             lambda b, out, inputs, tangents, u=upper: b.run(ld.cholesky_jvp, tangents[0], out, u)),
        Case(f"cholesky_inverse {dtype} upper={upper}", lambda d=dtype, u=upper: (_factor(u, d),),
             lambda f, u=upper: torch.cholesky_inverse(f, u),
             lambda b, g, out, f, u=upper: (b.run(ld.cholesky_inverse_backward, g, f, u, out),),
             lambda b, out, inputs, tangents, u=upper: b.run(ld.cholesky_inverse_jvp, inputs[0], tangents[0], out, u),
             tangent_of_op=False),
        Case(f"cholesky_solve {dtype} upper={upper} broadcast",
             lambda d=dtype, u=upper: (_randn(3, 2, dtype=d, seed=5), _factor(u, d)),
             lambda rhs, f, u=upper: torch.cholesky_solve(rhs, f, u),
             lambda b, g, out, rhs, f, u=upper: b.run(ld.cholesky_solve_backward, g, rhs, f, out, u, [True, True]),
             lambda b, out, inputs, tangents, u=upper: b.run(ld.cholesky_solve_jvp, out, inputs[1], tangents[1],
                                                              tangents[0], u)),
    )
]


def _tangents(case, inputs):
    tangents = [_randn(*x.shape, dtype=x.dtype, seed=7 + i) for i, x in enumerate(inputs)]
    if case.name.startswith("cholesky "):
        tangents = [_hermitian_tangent(t) for t in tangents]      # A moves among Hermitian matrices
    if not case.tangent_of_op:      # a factor's tangent: its triangle, real on the diagonal
        tangents = [t - 1j * torch.diag_embed(t.diagonal(0, -2, -1).imag) if t.is_complex() else t
                    for t in tangents]
    return tangents


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_backward_equals_torch(backend, case):
    inputs = [x.requires_grad_() for x in case.inputs()]
    out = case.op(*inputs)
    grad = _randn(*out.shape, dtype=out.dtype, seed=11)
    expected = torch.autograd.grad(out, inputs, grad)
    got = case.backward(backend, grad, out.detach(), *[x.detach() for x in inputs])
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        if case.name.startswith("cholesky ") and g.is_complex():
            # torch's complex gradient is another matrix with the same Hermitian part, the part that
            # acts on Hermitian directions (ours is Hermitian itself)
            e = (e + e.mH) / 2
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_jvp_equals_the_derivative(backend, case):
    inputs = case.inputs()
    tangents = _tangents(case, inputs)
    out = case.op(*inputs)
    if case.tangent_of_op:
        with fwAD.dual_level():
            expected = fwAD.unpack_dual(case.op(*[fwAD.make_dual(x, t) for x, t in zip(inputs, tangents)])).tangent
    else:
        eps = 1e-6
        expected = (case.op(*[x + eps * t for x, t in zip(inputs, tangents)])
                    - case.op(*[x - eps * t for x, t in zip(inputs, tangents)])) / (2 * eps)
    got = case.jvp(backend, out, inputs, tangents)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-7)
