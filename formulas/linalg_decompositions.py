"""Matrix decompositions and the functions built on them: the FunctionsManual helpers that
derivatives.yaml's ``cholesky``, ``linalg_cholesky_ex``, ``cholesky_solve`` and ``cholesky_inverse``
call, derived here from the mathematics.

Conventions: ``X^H`` is the conjugate transpose (``adjoint``); the gradient of a real loss ``l``
for a matrix ``X`` is ``G`` with ``dl = <G, dX> = Re tr(G^H dX)``, torch's convention, so a
linear map's adjoint gives the backward from the jvp. A Cholesky factor ``L`` is lower triangular
with a real positive diagonal and ``A = L L^H``; ``upper`` names the factor ``U = L^H``, ``A = U^H U``.
Every inverse is a triangular solve with the factor (``linalg_solve_triangular``), never an
explicit inverse.
"""
from __future__ import annotations

from formulas import Tensor, at, helper
from formulas.helpers import sum_to
from formulas.linalg import matrix_transpose


@helper
def adjoint(x: Tensor) -> Tensor:
    """``x^H``: ``x`` with its last two dims swapped and conjugated (``x.mH``)."""
    return at.conj(matrix_transpose(x))


@helper
def hermitian_part(x: Tensor) -> Tensor:
    """``(x + x^H) / 2``: the projection onto Hermitian matrices, where the gradient of a function
    of a Hermitian matrix lives."""
    return at.mul(at.add(x, adjoint(x)), 0.5)


@helper
def lower_half_diagonal(x: Tensor) -> Tensor:
    """``Phi(x)``: the strict lower triangle of ``x`` and half its diagonal. It inverts
    ``S = Y + Y^H`` for a lower triangular ``Y`` with a real diagonal (``Y = Phi(S)``), and is its own
    adjoint (a mask with real weights 1, 1/2 and 0)."""
    return at.mul(at.add(at.tril(x), at.tril(x, -1)), 0.5)


@helper
def lower_factor(factor: Tensor, upper: bool) -> Tensor:
    """The lower triangular Cholesky factor ``L``: ``factor`` itself, or ``U^H`` for ``upper``."""
    return adjoint(factor) if upper else factor


@helper
def cholesky_solved(b: Tensor, L: Tensor) -> Tensor:
    """``A^-1 b`` for ``A = L L^H``: ``L^-H (L^-1 b)``, two triangular solves."""
    half = at.linalg_solve_triangular(L, b, upper=False)
    return at.linalg_solve_triangular(adjoint(L), half, upper=True)


@helper
def cholesky_backward(grad: Tensor, upper: bool, L: Tensor) -> Tensor:
    """Gradient of ``L = cholesky(A)`` for the Hermitian ``A``. From ``dA = dL L^H + L dL^H``,
    ``L^-1 dA L^-H = L^-1 dL + (L^-1 dL)^H`` with ``L^-1 dL`` lower triangular with a real diagonal,
    so ``dL = L Phi(L^-1 dA L^-H)`` (:func:`lower_half_diagonal`). Its adjoint:
    ``<gL, L Phi(S)> = <L^-H Phi(L^H gL) L^-1, dA>``; the gradient is the Hermitian part of that
    matrix (``A`` moves among Hermitian matrices only). For ``upper``, ``L = U^H`` and ``gL = gU^H``."""
    lower = lower_factor(L, upper)
    grad_lower = adjoint(grad) if upper else grad
    middle = lower_half_diagonal(at.matmul(adjoint(lower), grad_lower))
    left_solved = at.linalg_solve_triangular(adjoint(lower), middle, upper=True)
    return hermitian_part(at.linalg_solve_triangular(lower, left_solved, upper=False, left=False))


@helper
def cholesky_jvp(input_tangent: Tensor, L: Tensor, upper: bool) -> Tensor:
    """Tangent of ``L = cholesky(A)``: ``dL = L Phi(L^-1 dA L^-H)`` (see :func:`cholesky_backward`);
    ``dU = dL^H`` for ``upper``."""
    lower = lower_factor(L, upper)
    left_solved = at.linalg_solve_triangular(lower, input_tangent, upper=False)
    both_solved = at.linalg_solve_triangular(adjoint(lower), left_solved, upper=True, left=False)
    lower_tangent = at.matmul(lower, lower_half_diagonal(both_solved))
    return adjoint(lower_tangent) if upper else lower_tangent


@helper
def factor_gradient(grad_A: Tensor, factor: Tensor, upper: bool) -> Tensor:
    """The gradient of a Cholesky factor from that of ``A`` it forms: ``dA = dL L^H + L dL^H`` gives
    ``gL = (gA + gA^H) L``; ``dA = dU^H U + U^H dU`` gives ``gU = U (gA + gA^H)``. Not restricted to
    the triangle (torch's convention for these entries: the factor is an ordinary matrix argument)."""
    both = at.add(grad_A, adjoint(grad_A))
    return at.matmul(factor, both) if upper else at.matmul(both, factor)


@helper
def factor_tangent(factor: Tensor, tangent: Tensor, upper: bool) -> Tensor:
    """``dA`` of ``A = L L^H`` (``dL L^H + L dL^H``) or of ``A = U^H U`` (``dU^H U + U^H dU``)."""
    if upper:
        half = at.matmul(adjoint(tangent), factor)
    else:
        half = at.matmul(tangent, adjoint(factor))
    return at.add(half, adjoint(half))


@helper
def cholesky_inverse_backward(grad: Tensor, L: Tensor, upper: bool, inverse: Tensor) -> Tensor:
    """Gradient of ``R = cholesky_inverse(L) = A^-1`` (``A`` formed from the factor) for the factor:
    ``dR = -R dA R`` with ``R`` Hermitian gives ``gA = -R G R``, then :func:`factor_gradient`."""
    grad_A = at.neg(at.matmul(at.matmul(inverse, grad), inverse))
    return factor_gradient(grad_A, L, upper)


@helper
def cholesky_inverse_jvp(L: Tensor, L_tangent: Tensor, inverse: Tensor, upper: bool) -> Tensor:
    """Tangent of ``R = cholesky_inverse(L)``: ``dR = -R dA R``, ``dA`` from :func:`factor_tangent` of
    the triangle of ``dL`` the kernel reads (checked by finite differences, with a real diagonal as a
    factor's is; torch 2.13's own forward AD differs from them)."""
    read = at.triu(L_tangent) if upper else at.tril(L_tangent)
    return at.neg(at.matmul(at.matmul(inverse, factor_tangent(L, read, upper)), inverse))


@helper
def cholesky_solve_backward(grad: Tensor, self: Tensor, input2: Tensor, result: Tensor, upper: bool,
                            output_mask: list[bool]) -> tuple[Tensor, Tensor]:
    """Gradients of ``X = cholesky_solve(B, factor) = A^-1 B`` for ``B`` (``self``) and the factor
    (``input2``), those ``output_mask`` asks for. ``dX = A^-1 (dB - dA X)``: ``B`` receives
    ``A^-1 G`` (``A`` is Hermitian) and ``A`` receives ``-A^-1 G X^H``, which
    :func:`factor_gradient` carries to the factor; each summed over the batch dims it was broadcast
    along."""
    grad_self = None
    grad_input2 = None
    if output_mask[0] or output_mask[1]:
        solved = cholesky_solved(grad, lower_factor(input2, upper))
        if output_mask[0]:
            grad_self = sum_to(solved, self.sizes())
        if output_mask[1]:
            grad_A = at.neg(at.matmul(solved, adjoint(result)))
            grad_input2 = sum_to(factor_gradient(grad_A, input2, upper), input2.sizes())
    return grad_self, grad_input2


@helper
def cholesky_solve_jvp(result: Tensor, input2: Tensor, input2_tangent: Tensor, self_tangent: Tensor,
                       upper: bool) -> Tensor:
    """Tangent of ``X = cholesky_solve(B, factor)``: ``dX = A^-1 (dB - dA X)``."""
    moved = at.sub(self_tangent, at.matmul(factor_tangent(input2, input2_tangent, upper), result))
    return cholesky_solved(moved, lower_factor(input2, upper))
