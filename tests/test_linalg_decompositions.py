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

import formulas.linalg as la
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
    jvp: Callable | None        # (backend, output, inputs, tangents) -> output tangent; None: no forward derivative
    tangent_of_op: bool = True  # torch's forward AD is the derivative (else: finite differences)


def _hermitian_tangent(t):
    return t + t.mH


CASES = [
    case
    for dtype, upper in ((torch.float64, False), (torch.float64, True), (torch.complex128, True))
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
] + [
    Case(f"triangular_solve {dtype} upper={upper} transpose={transpose} unitriangular={unit} broadcast",
         lambda d=dtype: (_randn(2, 3, 2, dtype=d, seed=1), _randn(3, 3, dtype=d, seed=2) + 3 * torch.eye(3, dtype=d)),
         lambda rhs, a, u=upper, t=transpose, n=unit: torch.triangular_solve(rhs, a, u, t, n)[0],
         lambda b, g, out, rhs, a, u=upper, t=transpose, n=unit: b.run(
             ld.triangular_solve_backward, g, None, rhs, a, out, u, t, n, [True, True]),
         lambda b, out, inputs, tangents, u=upper, t=transpose, n=unit: b.run(
             ld.triangular_solve_jvp, out, inputs[1], tangents[1], tangents[0], u, t, n),
         tangent_of_op=False)       # torch 2.13's forward AD moves the triangle the solve does not read
    for dtype, upper, transpose, unit in ((torch.float64, True, False, False), (torch.float64, False, True, True),
                                          (torch.complex128, False, True, False))
] + [
    Case(f"pinv {dtype} {m}x{n}", lambda d=dtype, m=m, n=n: (_randn(2, m, n, dtype=d),), torch.linalg.pinv,
         lambda b, g, out, a: (b.run(ld.pinv_backward, g, out, a),),
         lambda b, out, inputs, tangents: b.run(ld.pinv_jvp, inputs[0], out, tangents[0]))
    for dtype, m, n in ((torch.float64, 4, 3), (torch.complex128, 3, 4))
] + [
    Case(f"linalg_qr {dtype} {m}x{n} {mode} {outputs}", lambda d=dtype, m=m, n=n: (_randn(2, m, n, dtype=d),),
         lambda a, mode=mode, outputs=outputs: tuple(o for o, keep in zip(torch.linalg.qr(a, mode), outputs) if keep),
         lambda b, g, out, a, mode=mode, outputs=outputs: (b.run(ld.linalg_qr_backward, *_fill(g, outputs),
                                                                  *torch.linalg.qr(a, mode), mode),),
         lambda b, out, inputs, tangents, mode=mode, outputs=outputs: tuple(
             t for t, keep in zip(b.run(ld.linalg_qr_jvp, tangents[0], *torch.linalg.qr(inputs[0], mode), mode),
                                  outputs) if keep))
    for dtype, m, n, mode, outputs in (
        (torch.float64, 4, 3, "reduced", (True, False)), (torch.float64, 3, 5, "reduced", (False, True)),
        (torch.complex128, 3, 3, "complete", (True, True)), (torch.complex128, 3, 5, "reduced", (True, True)))
]


# the singular vectors' gradients on real inputs (a complex singular vector has a free phase, and
# torch refuses a loss that depends on it: see the complex test below)
CASES += [
    Case(f"svd {m}x{n} {outputs}", lambda m=m, n=n: (_randn(2, m, n),),
         lambda a, outputs=outputs: tuple(o for o, keep in zip(torch.linalg.svd(a, full_matrices=False), outputs)
                                          if keep),
         lambda b, g, out, a, outputs=outputs: (b.run(ld.svd_backward, *_fill(g, outputs),
                                                     *torch.linalg.svd(a, full_matrices=False)),),
         lambda b, out, inputs, tangents, outputs=outputs: tuple(
             t for t, keep in zip(b.run(ld.linalg_svd_jvp, tangents[0],
                                        *torch.linalg.svd(inputs[0], full_matrices=False), False), outputs) if keep))
    for m, n, outputs in ((4, 3, (True, True, True)), (3, 5, (True, True, True)), (3, 3, (False, True, False)))
]


CASES += [
    Case(f"linalg_lu {dtype} {m}x{n} {outputs}", lambda d=dtype, m=m, n=n: (_randn(2, m, n, dtype=d),),
         lambda a, outputs=outputs: tuple(o for o, keep in zip(torch.linalg.lu(a)[1:], outputs) if keep),
         lambda b, g, out, a, outputs=outputs: (b.run(ld.linalg_lu_backward, *_fill(g, outputs), *torch.linalg.lu(a),
                                                     True),),
         lambda b, out, inputs, tangents, outputs=outputs: tuple(
             t for t, keep in zip(b.run(ld.linalg_lu_jvp, tangents[0], *torch.linalg.lu(inputs[0]), True), outputs)
             if keep))
    for dtype, m, n, outputs in ((torch.float64, 3, 3, (True, True)), (torch.float64, 4, 3, (False, True)),
                                 (torch.float64, 3, 5, (True, False)), (torch.complex128, 4, 3, (True, True)),
                                 (torch.complex128, 3, 5, (True, True)))
]


def _hermitian(*shape, dtype=torch.float64, seed=0):
    a = _randn(*shape, dtype=dtype, seed=seed)
    return a + a.mH


def _lu_factor_of(m, n, dtype=torch.float64):
    """A fixed LU factorization (pivots are not differentiable) and its packed factor."""
    return torch.linalg.lu_factor(_randn(2, m, n, dtype=dtype, seed=3))


CASES += [
    Case(f"eigh {dtype} {outputs}", lambda d=dtype: (_hermitian(2, 4, 4, dtype=d),),
         lambda a, outputs=outputs: tuple(o for o, keep in zip(torch.linalg.eigh(a), outputs) if keep),
         lambda b, g, out, a, outputs=outputs: (b.run(ld.linalg_eig_backward, *_fill(g, outputs),
                                                     *torch.linalg.eigh(a), True),),
         lambda b, out, inputs, tangents, outputs=outputs: tuple(
             t for t, keep in zip(b.run(ld.linalg_eig_jvp, tangents[0], *torch.linalg.eigh(inputs[0]), True), outputs)
             if keep))
    # a complex eigenvector has a free phase: torch refuses a loss that depends on it
    for dtype, outputs in ((torch.float64, (True, True)), (torch.float64, (False, True)),
                           (torch.complex128, (True, False)))
] + [
    Case(f"lu_factor {dtype} {m}x{n}", lambda d=dtype, m=m, n=n: (_randn(2, m, n, dtype=d),),
         lambda a: torch.linalg.lu_factor(a)[0],
         lambda b, g, out, a: (b.run(ld.lu_factor_ex_backward, g, out, torch.linalg.lu_factor(a)[1], True),),
         lambda b, out, inputs, tangents: b.run(ld.lu_factor_ex_jvp, tangents[0], out,
                                                torch.linalg.lu_factor(inputs[0])[1], True))
    for dtype, m, n in ((torch.float64, 3, 3), (torch.float64, 4, 3), (torch.float64, 3, 5), (torch.complex128, 3, 4))
] + [
    Case(f"lu_solve {dtype} left={left} adjoint={adjoint}",
         lambda d=dtype, left=left: (_lu_factor_of(3, 3, d)[0], _randn(*((2, 3, 2) if left else (2, 2, 3)), dtype=d, seed=4)),
         lambda lu, rhs, d=dtype, left=left, adjoint=adjoint: torch.linalg.lu_solve(
             lu, _lu_factor_of(3, 3, d)[1], rhs, left=left, adjoint=adjoint),
         lambda b, g, out, lu, rhs, d=dtype, left=left, adjoint=adjoint: (
             b.run(ld.linalg_lu_solve_LU, g, lu, _lu_factor_of(3, 3, d)[1], out, left, adjoint),
             torch.linalg.lu_solve(lu, _lu_factor_of(3, 3, d)[1], g, left=left, adjoint=not adjoint)),
         lambda b, out, inputs, tangents, d=dtype, left=left, adjoint=adjoint: b.run(
             ld.linalg_lu_solve_jvp, out, inputs[0], _lu_factor_of(3, 3, d)[1], *tangents, left, adjoint))
    for dtype, left, adjoint in ((torch.float64, True, False), (torch.float64, True, True),
                                 (torch.float64, False, False), (torch.complex128, False, True))
] + [
    Case(f"matrix_exp {dtype} scale={scale}", lambda d=dtype, scale=scale: (_randn(2, 3, 3, dtype=d) * scale,),
         torch.linalg.matrix_exp,
         lambda b, g, out, a: (b.run(la.linalg_matrix_exp_differential, a, g, True),),
         lambda b, out, inputs, tangents: b.run(la.linalg_matrix_exp_differential, inputs[0], tangents[0], False))
    for dtype, scale in ((torch.float64, 0.5), (torch.float64, 3.0), (torch.complex128, 1.0))
]


def _solve_factors(a, rhs, left):
    return torch.ops.aten._linalg_solve_ex(a, rhs, left=left)[1:3]


def _use_A_T(a):
    """The flag derivatives.yaml passes the det jvps: whether ``_linalg_det``'s ``LU`` is ``A^T``'s."""
    return a.is_contiguous() and not a.is_complex()


# det, slogdet and solve: a general A (the helpers' inverse pivots as LAPACK does); a vector B;
# lstsq: tall (with gelsd's residuals) and wide; Householder products: fewer reflectors than columns
CASES += [
    Case(f"det {dtype}", lambda d=dtype: (_randn(2, 4, 4, dtype=d),), torch.linalg.det,
         lambda b, g, out, a: (b.run(ld.linalg_det_backward, g, out, a, *torch.ops.aten._linalg_det(a)[1:]),),
         lambda b, out, inputs, tangents: b.run(ld.linalg_det_jvp, tangents[0], out,
                                                *torch.ops.aten._linalg_det(inputs[0])[1:], _use_A_T(inputs[0])))
    for dtype in (torch.float64, torch.complex128)
] + [
    Case(f"slogdet {dtype}", lambda d=dtype: (_randn(2, 4, 4, dtype=d),), lambda a: tuple(torch.linalg.slogdet(a)),
         lambda b, g, out, a: (b.run(ld.slogdet_backward, *g, a, out[0], *torch.ops.aten._linalg_slogdet(a)[2:]),),
         lambda b, out, inputs, tangents: b.run(ld.slogdet_jvp, *torch.ops.aten._linalg_slogdet(inputs[0])[2:],
                                                tangents[0], out[0], _use_A_T(inputs[0])))
    for dtype in (torch.float64, torch.complex128)
] + [
    Case(f"solve {dtype} left={left} rhs={rhs}", lambda d=dtype, rhs=rhs: (_randn(2, 3, 3, dtype=d), _randn(*rhs, dtype=d, seed=4)),
         lambda a, rhs, left=left: torch.linalg.solve(a, rhs, left=left),
         lambda b, g, out, a, rhs, left=left: b.run(ld.linalg_solve_backward, g, out, a, *_solve_factors(a, rhs, left),
                                                     left, True),
         lambda b, out, inputs, tangents, left=left: b.run(ld.linalg_solve_jvp, *tangents, out,
                                                           *_solve_factors(*inputs, left), left))
    for dtype, left, rhs in ((torch.float64, True, (2, 3, 2)), (torch.float64, False, (2, 4, 3)),
                             (torch.float64, True, (2, 3)), (torch.complex128, False, (2, 2, 3)))
] + [
    Case(f"lstsq {dtype} {m}x{n}", lambda d=dtype, m=m, n=n: (_randn(2, m, n, dtype=d), _randn(2, m, 2, dtype=d, seed=4)),
         lambda a, rhs, m=m, n=n: tuple(torch.linalg.lstsq(a, rhs, driver="gelsd")[:2]) if m > n
         else torch.linalg.lstsq(a, rhs)[0],
         lambda b, g, out, a, rhs, m=m, n=n: b.run(ld.linalg_lstsq_backward, *(g if m > n else (g, None)), a, rhs,
                                                   out[0] if m > n else out, [True, True]),
         lambda b, out, inputs, tangents, m=m, n=n: b.run(ld.linalg_lstsq_solution_jvp, *inputs, *tangents) if m <= n
         else (b.run(ld.linalg_lstsq_solution_jvp, *inputs, *tangents),
               b.run(ld.linalg_lstsq_residuals_jvp, *inputs, *tangents, *out)))
    for dtype, m, n in ((torch.float64, 5, 3), (torch.float64, 3, 4), (torch.complex128, 4, 2))
] + [
    Case(f"householder_product {dtype}", lambda d=dtype: (_randn(2, 5, 3, dtype=d), _randn(2, 2, dtype=d, seed=4)),
         torch.linalg.householder_product,
         lambda b, g, out, a, tau: b.run(ld.householder_product_backward, g, out, a, tau),
         lambda b, out, inputs, tangents: b.run(ld.householder_product_jvp, *tangents, out, *inputs))
    for dtype in (torch.float64, torch.complex128)
] + [
    Case(f"ormqr {dtype} left={left} transpose={transpose}",
         lambda d=dtype, left=left: (_randn(2, 4, 3, dtype=d), _randn(2, 3, dtype=d, seed=4),
                                     _randn(*((2, 4, 2) if left else (2, 2, 4)), dtype=d, seed=5)),
         lambda a, tau, c, left=left, transpose=transpose: torch.ormqr(a, tau, c, left, transpose),
         lambda b, g, out, a, tau, c, left=left, transpose=transpose: b.run(
             ld.ormqr_backward, g, out, a, tau, c, left, transpose, [True, True, True]),
         None)        # derivatives.yaml gives ormqr no forward derivative
    for dtype, left, transpose in ((torch.float64, True, False), (torch.float64, False, True),
                                   (torch.complex128, True, True))
]


@pytest.mark.parametrize("m, n", [(4, 3), (3, 5)])
def test_svd_jvp_with_full_matrices_leaves_the_undetermined_vectors_still(backend, m, n):
    """``full_matrices``: the columns of ``U`` and rows of ``Vh`` beyond ``min(m, n)`` get a zero
    tangent, the others those of the reduced SVD (torch's forward AD)."""
    a, tangent = _randn(m, n), _randn(m, n, seed=5)
    with fwAD.dual_level():
        expected = [fwAD.unpack_dual(o).tangent for o in torch.linalg.svd(fwAD.make_dual(a, tangent))]
    got = backend.run(ld.linalg_svd_jvp, tangent, *torch.linalg.svd(a), True)
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("m, n", [(3, 5)])
def test_complex_svd_backward_and_jvp_equal_torch(backend, m, n):
    """Complex ``A``: the jvp equals torch's forward AD (the phase of ``P``'s diagonal shared between
    ``U`` and ``V``, as torch does), and the backward torch's gradient of a loss that does not depend on
    the singular vectors' phases (``|U|``, ``S``, ``|Vh|``)."""
    a = _randn(2, m, n, dtype=torch.complex128).requires_grad_()
    tangent = _randn(2, m, n, dtype=torch.complex128, seed=5)
    with fwAD.dual_level():
        expected = [fwAD.unpack_dual(o).tangent for o in torch.linalg.svd(fwAD.make_dual(a.detach(), tangent),
                                                                          full_matrices=False)]
    factors = [f.detach() for f in torch.linalg.svd(a, full_matrices=False)]
    for got, wanted in zip(backend.run(ld.linalg_svd_jvp, tangent, *factors, False), expected, strict=True):
        torch.testing.assert_close(got, wanted)
    u, s, vh = [f.clone().requires_grad_() for f in factors]
    loss = (u.abs() * _randn(*u.shape, seed=1)).sum() + (s * _randn(*s.shape, seed=2)).sum() \
        + (vh.abs() * _randn(*vh.shape, seed=3)).sum()
    grads = torch.autograd.grad(loss, (u, s, vh))
    outputs = torch.linalg.svd(a, full_matrices=False)
    expected, = torch.autograd.grad(outputs, a, grads)
    torch.testing.assert_close(backend.run(ld.svd_backward, *grads, *factors), expected)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_general_eig_backward_and_jvp_equal_torch_to_second_order(backend, dtype):
    """``linalg_eig`` of a general ``A`` (real or complex; complex eigenvalues and eigenvectors of
    norm 1): the jvp equals torch's forward AD, and the backward torch's gradient of a loss that does
    not depend on the eigenvectors' phases (``L``, ``|V|``), and so do its own derivatives (for
    ``A`` and the loss's weights: what a double backward differentiates)."""
    a = _randn(2, 4, 4, dtype=dtype).requires_grad_()
    tangent = _randn(2, 4, 4, dtype=dtype, seed=5)
    with fwAD.dual_level():
        expected = [fwAD.unpack_dual(o).tangent for o in torch.linalg.eig(fwAD.make_dual(a.detach(), tangent))]
    L, V = torch.linalg.eig(a)
    for got, wanted in zip(backend.run(ld.linalg_eig_jvp, tangent, L.detach(), V.detach(), False), expected,
                           strict=True):
        torch.testing.assert_close(got, wanted)
    weight_L = _randn(*L.shape, dtype=torch.complex128, seed=1).requires_grad_()
    weight_V = _randn(*V.shape, seed=2).requires_grad_()
    grads = torch.autograd.grad((L * weight_L).real.sum() + (V.abs() * weight_V).sum(), (L, V), create_graph=True)
    expected, = torch.autograd.grad((L, V), a, grads, create_graph=True)
    got = backend.run(ld.linalg_eig_backward, *grads, L, V, False)
    got = got.real if not dtype.is_complex else got       # derivatives.yaml's handle_r_to_c
    torch.testing.assert_close(got, expected)
    weight = _randn(*expected.shape, dtype=dtype, seed=3)

    def second(first):
        return torch.autograd.grad((first * weight.conj()).real.sum(), (a, weight_L, weight_V), retain_graph=True)

    for g, e in zip(second(got), second(expected), strict=True):
        torch.testing.assert_close(g, e)


def _fill(grads, keep):
    """The output gradients a backward receives: those of the kept outputs, None for the others."""
    grads = list(grads)
    return [grads.pop(0) if kept else None for kept in keep]


def test_triangular_solve_backward_passes_the_copy_of_A_its_gradient_whole(backend):
    rhs, a = _randn(2, 3, 2, seed=1).requires_grad_(), (_randn(3, 3, seed=2) + 3 * torch.eye(3)).requires_grad_()
    solution, copy = torch.triangular_solve(rhs, a, False)
    grads = _randn(*solution.shape, seed=3), _randn(*copy.shape, seed=4)
    expected = torch.autograd.grad((solution, copy), (rhs, a), grads)
    got = backend.run(ld.triangular_solve_backward, *grads, rhs.detach(), a.detach(), solution.detach(), False, False,
                      False, [True, True])
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("m, n", [(4, 3), (3, 4), (3, 3)])
def test_lu_unpack_backward_returns_each_gradient_to_the_entries_it_was_read_from(backend, m, n):
    lu, pivots = torch.linalg.lu_factor(_randn(2, m, n))
    lu.requires_grad_()
    _, lower, upper = torch.lu_unpack(lu, pivots)
    grad_lower, grad_upper = _randn(*lower.shape, seed=1), _randn(*upper.shape, seed=2)
    for grads, outputs in (((grad_lower, grad_upper), (lower, upper)), ((None, grad_upper), (upper,)),
                           ((grad_lower, None), (lower,))):
        expected, = torch.autograd.grad(outputs, lu, [g for g in grads if g is not None], retain_graph=True)
        torch.testing.assert_close(backend.run(ld.lu_unpack_backward, *grads, m, n), expected)


def _detached(out):
    return tuple(o.detach() for o in out) if isinstance(out, tuple) else out.detach()


def _tangents(case, inputs):
    tangents = [_randn(*x.shape, dtype=x.dtype, seed=7 + i) for i, x in enumerate(inputs)]
    if case.name.startswith(("cholesky ", "eigh ")):
        tangents = [_hermitian_tangent(t) for t in tangents]      # A moves among Hermitian matrices
    if case.name.startswith("cholesky_inverse"):      # a factor's tangent: real on the diagonal
        tangents = [t - 1j * torch.diag_embed(t.diagonal(0, -2, -1).imag) if t.is_complex() else t
                    for t in tangents]
    return tangents


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_backward_equals_torch(backend, case):
    inputs = [x.requires_grad_() for x in case.inputs()]
    out = case.op(*inputs)
    grad = tuple(_randn(*o.shape, dtype=o.dtype, seed=11 + i) for i, o in enumerate(out)) if isinstance(out, tuple) \
        else _randn(*out.shape, dtype=out.dtype, seed=11)
    expected = torch.autograd.grad(out, inputs, grad)
    got = case.backward(backend, grad, _detached(out), *[x.detach() for x in inputs])
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        if case.name.startswith("cholesky ") and g.is_complex():
            # torch's complex gradient is another matrix with the same Hermitian part, the part that
            # acts on Hermitian directions (ours is Hermitian itself)
            e = (e + e.mH) / 2
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("case", [case for case in CASES if case.jvp is not None], ids=lambda case: case.name)
def test_jvp_equals_the_derivative(backend, case):
    inputs = case.inputs()
    tangents = _tangents(case, inputs)
    out = case.op(*inputs)
    if case.tangent_of_op:
        with fwAD.dual_level():
            dual = case.op(*[fwAD.make_dual(x, t) for x, t in zip(inputs, tangents)])
            expected = tuple(fwAD.unpack_dual(o).tangent for o in dual) if isinstance(dual, tuple) else \
                fwAD.unpack_dual(dual).tangent
    else:
        eps = 1e-6
        expected = (case.op(*[x + eps * t for x, t in zip(inputs, tangents)])
                    - case.op(*[x - eps * t for x, t in zip(inputs, tangents)])) / (2 * eps)
    got = case.jvp(backend, out, inputs, tangents)
    for g, e in zip(*((x,) if isinstance(x, torch.Tensor) else x for x in (got, expected)), strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-7)


SECOND_ORDER = [case for case in CASES
                if case.name.startswith(("eigh ", "lu_factor ", "lu_solve ", "matrix_exp ", "det ", "slogdet ", "solve ",
                                          "lstsq ", "householder_product ", "ormqr ")) and "complex" not in case.name]


@pytest.mark.parametrize("case", SECOND_ORDER, ids=lambda case: case.name)
def test_second_order_equals_torch(backend, case):
    """The helpers' own derivatives (what a double backward differentiates, through the operators a
    helper calls and the outputs it reads) equal torch's second derivatives, for the inputs and the
    output gradient, in float64."""
    inputs = [x.requires_grad_() for x in case.inputs()]
    out = case.op(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    grads = [_randn(*o.shape, dtype=o.dtype, seed=11 + i).requires_grad_() for i, o in enumerate(outs)]
    grad = tuple(grads) if isinstance(out, tuple) else grads[0]
    expected = torch.autograd.grad(out, inputs, grad, create_graph=True)
    got = case.backward(backend, grad, out, *inputs)
    weights = [_randn(*e.shape, dtype=e.dtype, seed=21 + i) for i, e in enumerate(expected)]
    wrt = inputs + grads

    def second(first):
        total = sum((f * w).sum() for f, w in zip(first, weights, strict=True))
        return torch.autograd.grad(total, wrt, retain_graph=True, allow_unused=True, materialize_grads=True)

    for g, e in zip(second(got), second(expected), strict=True):
        torch.testing.assert_close(g, e)
