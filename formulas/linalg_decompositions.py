"""Matrix decompositions and the functions built on them: the FunctionsManual helpers that
derivatives.yaml's ``cholesky``, ``linalg_cholesky_ex``, ``cholesky_solve``, ``cholesky_inverse``,
``triangular_solve``, ``lu_unpack``, ``linalg_lu``, ``linalg_lu_factor_ex``, ``linalg_lu_solve``,
``linalg_pinv``, ``linalg_qr``, ``_linalg_svd``, ``_linalg_eigh``, ``_linalg_det``, ``_linalg_slogdet``,
``_linalg_solve_ex``, ``linalg_lstsq``, ``linalg_householder_product`` and ``ormqr`` call, derived here from the
mathematics.

Conventions: ``X^H`` is the conjugate transpose (``adjoint``); the gradient of a real loss ``l``
for a matrix ``X`` is ``G`` with ``dl = <G, dX> = Re tr(G^H dX)``, torch's convention, so a
linear map's adjoint gives the backward from the jvp. A Cholesky factor ``L`` is lower triangular
with a real positive diagonal and ``A = L L^H``; ``upper`` names the factor ``U = L^H``, ``A = U^H U``.
A factorization's inverse is a triangular solve with the factor (``linalg_solve_triangular``). A
general matrix's (determinants, solves, least squares) is :func:`matrix_inverse`, Gaussian elimination
built from library operators: the forward's ``LU`` and ``pivots`` carry no gradient, so a backward that
read them would not be differentiable again.
"""
from __future__ import annotations

from formulas import Tensor, at, helper
from formulas.helpers import sum_to
from formulas.linalg import linalg_solve_triangular_backward, matrix_transpose, triangle


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



# ----------------------------------------------------------------------------- triangular_solve
@helper
def triangular_solve_backward(grad_solution: Tensor | None, grad_cloned_coefficient: Tensor | None, self: Tensor,
                              A: Tensor, solution: Tensor, upper: bool, transpose: bool, unitriangular: bool,
                              output_mask: list[bool]) -> tuple[Tensor, Tensor]:
    """Gradients of ``(X, A_copy) = triangular_solve(B, A)`` (``op(A) X = B``, ``op(A)`` = ``A^T`` for
    ``transpose``, its triangle named by ``upper``) for ``B`` (``self``) and ``A``: the solve is
    ``linalg_solve_triangular`` with ``op(A)``, whose triangle is the other one when transposed
    (:func:`linalg_solve_triangular_backward`, transposed back for ``A``); the copy of ``A`` passes its
    gradient through whole. Each summed over the batch dims it was broadcast along."""
    grad_self = None
    grad_A = None
    if grad_solution is not None:
        coefficient = matrix_transpose(A) if transpose else A
        grad_coefficient, grad_self = linalg_solve_triangular_backward(
            grad_solution, coefficient, solution, upper != transpose, True, unitriangular, output_mask)
        if grad_coefficient is not None:
            grad_A = matrix_transpose(grad_coefficient) if transpose else grad_coefficient
    if output_mask[1] and grad_cloned_coefficient is not None:
        grad_A = grad_cloned_coefficient if grad_A is None else at.add(grad_A, grad_cloned_coefficient)
    if grad_self is not None:
        grad_self = sum_to(grad_self, self.sizes())
    if grad_A is not None:
        grad_A = sum_to(grad_A, A.sizes())
    return grad_self, grad_A


@helper
def triangular_solve_jvp(solution: Tensor, A: Tensor, A_tangent: Tensor, self_tangent: Tensor, upper: bool,
                         transpose: bool, unitriangular: bool) -> Tensor:
    """Tangent of ``X = triangular_solve(B, A).solution``: ``op(A) dX = dB - op(dA) X``, ``op(dA)`` the
    triangle of the (transposed) tangent the solve reads."""
    coefficient = matrix_transpose(A) if transpose else A
    coefficient_tangent = matrix_transpose(A_tangent) if transpose else A_tangent
    coefficient_upper = upper != transpose
    moved = at.sub(self_tangent, at.matmul(triangle(coefficient_tangent, coefficient_upper, unitriangular), solution))
    return at.linalg_solve_triangular(coefficient, moved, upper=coefficient_upper, unitriangular=unitriangular)


# ----------------------------------------------------------------------------- lu_unpack
@helper
def lu_unpack_backward(grad_L: Tensor | None, grad_U: Tensor | None, m: int, n: int) -> Tensor:
    """Gradient of ``(P, L, U) = lu_unpack(LU)`` for the packed ``m x n`` ``LU``, ``k = min(m, n)``:
    ``L`` is the strict lower triangle of its first ``k`` columns (its unit diagonal is no entry of
    ``LU``), ``U`` the upper triangle of its first ``k`` rows. Each gradient goes back to the entries
    it was read from, padded with zeros to ``m x n``."""
    k = min(m, n)
    grad = None
    if grad_L is not None:
        grad = at.constant_pad_nd(at.tril(grad_L, -1), [0, n - k])
    if grad_U is not None:
        from_U = at.constant_pad_nd(at.triu(grad_U), [0, 0, 0, m - k])
        grad = from_U if grad is None else at.add(grad, from_U)
    return grad


# ----------------------------------------------------------------------------- pseudo-inverse
@helper
def pinv_jvp(A: Tensor, pinvA: Tensor, A_tangent: Tensor) -> Tensor:
    """Tangent of ``B = pinv(A)`` where ``A``'s rank does not change (Golub and Pereyra):
    ``dB = -B dA B + B B^H dA^H (I - A B) + (I - B A) dA^H B^H B``, ``(I - A B) Y`` spelled
    ``Y - A (B Y)``."""
    tangent_h = adjoint(A_tangent)
    pinv_h = adjoint(pinvA)
    inner = at.neg(at.matmul(at.matmul(pinvA, A_tangent), pinvA))
    row_space = at.matmul(at.matmul(pinvA, pinv_h), tangent_h)
    column_space = at.matmul(tangent_h, at.matmul(pinv_h, pinvA))
    return at.add(at.add(inner, at.sub(row_space, at.matmul(at.matmul(row_space, A), pinvA))),
                  at.sub(column_space, at.matmul(pinvA, at.matmul(A, column_space))))


@helper
def pinv_backward(grad: Tensor, pinvA: Tensor, A: Tensor) -> Tensor:
    """Gradient of ``B = pinv(A)`` for ``A``, the adjoint of :func:`pinv_jvp`:
    ``gA = -B^H G B^H + (I - A B) G^H B B^H + B^H B G^H (I - B A)``."""
    grad_h = adjoint(grad)
    pinv_h = adjoint(pinvA)
    inner = at.neg(at.matmul(at.matmul(pinv_h, grad), pinv_h))
    left = at.matmul(grad_h, at.matmul(pinvA, pinv_h))
    right = at.matmul(at.matmul(pinv_h, pinvA), grad_h)
    return at.add(at.add(inner, at.sub(left, at.matmul(A, at.matmul(pinvA, left)))),
                  at.sub(right, at.matmul(at.matmul(right, pinvA), A)))


# ----------------------------------------------------------------------------- QR
@helper
def diagonal_part(x: Tensor) -> Tensor:
    """``x`` with every entry off its diagonal set to zero."""
    return at.sub(at.triu(x), at.triu(x, 1))


@helper
def hermitian_from_upper(w: Tensor) -> Tensor:
    """The Hermitian matrix with ``w``'s strict upper triangle and the real part of its diagonal."""
    strict = at.triu(w, 1)
    diagonal = diagonal_part(w)
    return at.add(at.add(strict, adjoint(strict)), at.mul(at.add(diagonal, at.conj(diagonal)), 0.5))


@helper
def qr_tall_backward(grad_Q: Tensor | None, grad_R: Tensor | None, Q: Tensor, R: Tensor) -> Tensor:
    """Gradient of ``A = Q R`` for an ``m x n`` ``A`` with ``m >= n`` (``Q^H Q = I``, ``R`` square upper
    triangular with a real diagonal). With ``M = Q^H dA R^-1``, ``dR R^-1`` is upper triangular with a
    real diagonal and ``C = Q^H dQ`` skew-Hermitian, so ``C`` is the strict lower triangle of ``M``
    minus its adjoint plus the imaginary part of ``M``'s diagonal; ``dR = (M - C) R`` and
    ``dQ = dA R^-1 - Q (M - C)``. The adjoint: with ``W = gR R^H - Q^H gQ`` and ``N`` the Hermitian matrix
    of ``W``'s strict upper triangle and real diagonal (:func:`hermitian_from_upper`),
    ``gA = (gQ + Q N) R^-H``."""
    w = at.zeros_like(R)
    if grad_R is not None:
        w = at.matmul(grad_R, adjoint(R))
    if grad_Q is not None:
        w = at.sub(w, at.matmul(adjoint(Q), grad_Q))
    moved = at.matmul(Q, hermitian_from_upper(w))
    if grad_Q is not None:
        moved = at.add(moved, grad_Q)
    return at.linalg_solve_triangular(adjoint(R), moved, upper=False, left=False)


@helper
def linalg_qr_backward(grad_Q: Tensor | None, grad_R: Tensor | None, Q: Tensor, R: Tensor, mode: str) -> Tensor:
    """Gradient of ``(Q, R) = linalg_qr(A, mode)`` for ``A`` (``m x n``). For ``m >= n``, see
    :func:`qr_tall_backward`. For ``m < n``, ``A = [X | Y]`` with ``X = Q U`` the square QR of ``X``
    and ``Y = Q V`` (``R = [U | V]``): ``dV = dQ^H Y + Q^H dY``, so ``Y`` receives ``Q gV`` and ``Q``'s
    gradient gains ``Y gV^H`` before ``X``'s is formed. ``mode`` does not enter: ``'r'`` (no ``Q``) and
    ``'complete'`` with ``m > n`` (a ``Q`` with columns ``A`` does not determine) do not fit these shapes,
    and the products raise."""
    m = Q.size(-2)
    n = R.size(-1)
    if m >= n:
        return qr_tall_backward(grad_Q, grad_R, Q, R)
    U = at.narrow(R, -1, 0, m)
    V = at.narrow(R, -1, m, n - m)
    grad_U = None
    grad_Y = at.zeros_like(at.matmul(Q, V))
    grad_Q_moved = grad_Q
    if grad_R is not None:
        grad_U = at.narrow(grad_R, -1, 0, m)
        grad_V = at.narrow(grad_R, -1, m, n - m)
        grad_Y = at.matmul(Q, grad_V)
        from_V = at.matmul(at.matmul(Q, V), adjoint(grad_V))
        grad_Q_moved = from_V if grad_Q is None else at.add(grad_Q, from_V)
    return at.cat([qr_tall_backward(grad_Q_moved, grad_U, Q, U), grad_Y], -1)


@helper
def qr_tall_jvp(A_tangent: Tensor, Q: Tensor, R: Tensor) -> tuple[Tensor, Tensor]:
    """Tangents ``(dQ, dR)`` of ``A = Q R`` for ``m >= n`` (derived in :func:`qr_tall_backward`)."""
    right_solved = at.linalg_solve_triangular(R, A_tangent, upper=True, left=False)
    m_matrix = at.matmul(adjoint(Q), right_solved)
    strict = at.tril(m_matrix, -1)
    diagonal = diagonal_part(m_matrix)
    skew = at.add(at.sub(strict, adjoint(strict)), at.mul(at.sub(diagonal, at.conj(diagonal)), 0.5))
    triangular = at.sub(m_matrix, skew)
    return at.sub(right_solved, at.matmul(Q, triangular)), at.matmul(triangular, R)


@helper
def linalg_qr_jvp(A_tangent: Tensor, Q: Tensor, R: Tensor, mode: str) -> tuple[Tensor, Tensor]:
    """Tangents ``(dQ, dR)`` of ``(Q, R) = linalg_qr(A, mode)``; for ``m < n``, ``dU`` and ``dQ`` of the
    square part and ``dV = dQ^H Y + Q^H dY`` (see :func:`linalg_qr_backward`)."""
    m = Q.size(-2)
    n = R.size(-1)
    if m >= n:
        return qr_tall_jvp(A_tangent, Q, R)
    V = at.narrow(R, -1, m, n - m)
    Q_tangent, U_tangent = qr_tall_jvp(at.narrow(A_tangent, -1, 0, m), Q, at.narrow(R, -1, 0, m))
    V_tangent = at.add(at.matmul(adjoint(Q_tangent), at.matmul(Q, V)),
                       at.matmul(adjoint(Q), at.narrow(A_tangent, -1, m, n - m)))
    return Q_tangent, at.cat([U_tangent, V_tangent], -1)


# ----------------------------------------------------------------------------- SVD
@helper
def diagonal_matrix(values: Tensor) -> Tensor:
    """The square matrices with ``values`` (``(..., k)``) on their diagonal."""
    square = at.mul(at.unsqueeze(values, -1), at.unsqueeze(values, -2))
    return at.diagonal_scatter(at.zeros_like(square), values, 0, -2, -1)


@helper
def svd_gaps(S: Tensor) -> Tensor:
    """``F`` with ``F_ij = 1 / (s_j^2 - s_i^2)`` off the diagonal and 0 on it (``S`` distinct, as the
    derivative of the singular vectors needs)."""
    squares = at.mul(S, S)
    gaps = at.sub(at.unsqueeze(squares, -2), at.unsqueeze(squares, -1))
    identity = diagonal_matrix(at.ones_like(S))
    return at.sub(at.reciprocal(at.add(gaps, identity)), identity)


@helper
def imaginary_diagonal(x: Tensor) -> Tensor:
    """``i Im(diag(x))``, the vector of ``(d - conj(d)) / 2`` (zero for a real ``x``)."""
    d = at.diagonal(x, 0, -2, -1)
    return at.mul(at.sub(d, at.conj(d)), 0.5)


@helper
def svd_backward(grad_U: Tensor | None, grad_S: Tensor | None, grad_Vh: Tensor | None, U: Tensor, S: Tensor,
                 Vh: Tensor) -> Tensor:
    """Gradient of ``A = U diag(S) V^H`` (``m x n``, ``k = min(m, n)`` singular values, distinct and
    nonzero where a singular vector's gradient is asked). With ``P = U^H dA V``, ``dS = Re diag(P)``,
    ``U^H dU = (P S + S P^H) o F + D`` and ``V^H dV = (S P + P^H S) o F - D`` (``F``: :func:`svd_gaps`;
    ``D = diag(i Im diag(P) / 2S)``, the phase ``P``'s diagonal fixes, shared between ``U`` and ``V``),
    ``dU = U (U^H dU) + (I - U U^H) dA V S^-1``, ``dV = V (V^H dV) + (I - V V^H) dA^H U
    S^-1``. Their adjoint, with ``J_U = U^H gU``, ``J_V = V^H gV``, ``gV = gVh^H``:
    ``gA = U [(F o (J_U - J_U^H)) S + S (F o (J_V - J_V^H)) + diag(gS + i Im diag(J_U - J_V) / 2S)] V^H
    + (I - U U^H) gU S^-1 V^H + U S^-1 gV^H (I - V V^H)``. Complex singular vectors are defined up to a
    phase each; a loss that depends on the phase has no gradient (torch raises for it; this returns
    that of the phase convention above)."""
    diagonal = at.zeros_like(S)
    if grad_S is not None:
        diagonal = grad_S
    core = None
    outer = None
    if grad_U is not None or grad_Vh is not None:
        gaps = svd_gaps(S)
        core = at.zeros_like(at.matmul(adjoint(U), U))
        outer = at.zeros_like(at.matmul(U, Vh))
        if grad_U is not None:
            J_U = at.matmul(adjoint(U), grad_U)
            core = at.add(core, at.mul(at.mul(gaps, at.sub(J_U, adjoint(J_U))), at.unsqueeze(S, -2)))
            diagonal = at.add(diagonal, at.div(imaginary_diagonal(J_U), at.mul(S, 2)))
            beside_U = at.sub(grad_U, at.matmul(U, J_U))
            outer = at.add(outer, at.matmul(at.div(beside_U, at.unsqueeze(S, -2)), Vh))
        if grad_Vh is not None:
            grad_V = adjoint(grad_Vh)
            J_V = at.matmul(Vh, grad_V)
            core = at.add(core, at.mul(at.unsqueeze(S, -1), at.mul(gaps, at.sub(J_V, adjoint(J_V)))))
            diagonal = at.sub(diagonal, at.div(imaginary_diagonal(J_V), at.mul(S, 2)))
            beside_V = at.sub(grad_Vh, at.matmul(adjoint(J_V), Vh))
            outer = at.add(outer, at.matmul(U, at.div(beside_V, at.unsqueeze(S, -1))))
    grad_A = at.matmul(at.mul(U, at.unsqueeze(diagonal, -2)), Vh)      # U diag(d) V^H, d real or complex
    if core is not None:
        grad_A = at.add(grad_A, at.matmul(at.matmul(U, core), Vh))
    if outer is not None:
        grad_A = at.add(grad_A, outer)
    return grad_A


@helper
def linalg_svd_jvp(A_tangent: Tensor, U: Tensor, S: Tensor, Vh: Tensor,
                   full_matrices: bool) -> tuple[Tensor, Tensor, Tensor]:
    """Tangents ``(dU, dS, dVh)`` of ``A = U diag(S) V^H`` (derived in :func:`svd_backward`, with its
    phase convention). With ``full_matrices`` the columns of ``U`` and rows of ``Vh`` beyond ``k``, which
    ``A`` does not determine, get a zero tangent, as in torch."""
    k = S.size(-1)
    U_k = at.narrow(U, -1, 0, k) if full_matrices else U
    Vh_k = at.narrow(Vh, -2, 0, k) if full_matrices else Vh
    V = adjoint(Vh_k)
    moved_V = at.matmul(A_tangent, V)
    P = at.matmul(adjoint(U_k), moved_V)
    S_tangent = at.real(at.diagonal(P, 0, -2, -1))
    gaps = svd_gaps(S)
    P_h = adjoint(P)
    row = at.unsqueeze(S, -2)
    column = at.unsqueeze(S, -1)
    phase = diagonal_matrix(at.div(imaginary_diagonal(P), at.mul(S, 2)))
    omega_U = at.add(at.mul(at.add(at.mul(P, row), at.mul(column, P_h)), gaps), phase)
    omega_V = at.sub(at.mul(at.add(at.mul(column, P), at.mul(P_h, row)), gaps), phase)
    U_tangent = at.add(at.matmul(U_k, omega_U), at.div(at.sub(moved_V, at.matmul(U_k, P)), row))
    moved_U = at.matmul(adjoint(A_tangent), U_k)
    V_tangent = at.add(at.matmul(V, omega_V), at.div(at.sub(moved_U, at.matmul(V, P_h)), row))
    Vh_tangent = adjoint(V_tangent)
    if full_matrices:       # the columns of U and rows of Vh beyond k do not move (torch's choice)
        U_tangent = at.constant_pad_nd(U_tangent, [0, U.size(-1) - k])
        Vh_tangent = at.constant_pad_nd(Vh_tangent, [0, 0, 0, Vh.size(-2) - k])
    return U_tangent, S_tangent, Vh_tangent


# ----------------------------------------------------------------------------- LU
@helper
def lu_square_backward(grad_L: Tensor | None, grad_U: Tensor | None, L: Tensor, U: Tensor) -> Tensor:
    """Gradient of ``B = L U`` (square; ``L`` unit lower, ``U`` upper triangular) for ``B``. With
    ``M = L^-1 dB U^-1 = L^-1 dL + dU U^-1`` (strictly lower plus upper), ``dL = L tril(M, -1)`` and
    ``dU = triu(M) U``; the adjoint: ``gB = L^-H (tril(L^H gL, -1) + triu(gU U^H)) U^-H``."""
    middle = at.zeros_like(at.matmul(L, U))
    if grad_L is not None:
        middle = at.tril(at.matmul(adjoint(L), grad_L), -1)
    if grad_U is not None:
        middle = at.add(middle, at.triu(at.matmul(grad_U, adjoint(U))))
    left_solved = at.linalg_solve_triangular(adjoint(L), middle, upper=True, unitriangular=True)
    return at.linalg_solve_triangular(adjoint(U), left_solved, upper=False, left=False)


@helper
def linalg_lu_backward(grad_L: Tensor | None, grad_U: Tensor | None, P: Tensor, L: Tensor, U: Tensor,
                       pivot: bool) -> Tensor:
    """Gradient of ``(P, L, U) = linalg_lu(A)`` (``A = P L U``, ``m x n``) for ``A``: ``P^T A`` is
    factored, so ``gA = P g(P^T A)``. Square: :func:`lu_square_backward`. Tall (``m > n``): the rows
    below the first ``n``, ``A2 = L2 U``, give ``dL2 = (dA2 - L2 dU) U^-1``, so ``A2`` receives
    ``gL2 U^-H`` and ``U``'s gradient loses ``L2^H gL2 U^-H``. Wide (``m < n``): the columns beyond the
    first ``m``, ``A2 = L U2``, give ``dU2 = L^-1 (dA2 - dL U2)``, so ``A2`` receives ``L^-H gU2`` and
    ``L``'s gradient loses ``L^-H gU2 U2^H``. ``pivot=False`` has no ``P`` on the CPU (torch refuses it)."""
    m = L.size(-2)
    n = U.size(-1)
    k = L.size(-1)
    if m == n:
        grad = lu_square_backward(grad_L, grad_U, L, U)
    elif m > n:
        L1 = at.narrow(L, -2, 0, k)
        grad_L1 = None
        grad_below = at.zeros_like(at.narrow(L, -2, k, m - k))
        grad_U_moved = grad_U
        if grad_L is not None:
            grad_L1 = at.narrow(grad_L, -2, 0, k)
            grad_L2 = at.narrow(grad_L, -2, k, m - k)
            grad_below = at.linalg_solve_triangular(adjoint(U), grad_L2, upper=False, left=False)
            from_L2 = at.matmul(adjoint(at.narrow(L, -2, k, m - k)), grad_below)
            grad_U_moved = at.neg(from_L2) if grad_U is None else at.sub(grad_U, from_L2)
        grad = at.cat([lu_square_backward(grad_L1, grad_U_moved, L1, U), grad_below], -2)
    else:
        U1 = at.narrow(U, -1, 0, k)
        grad_U1 = None
        grad_beside = at.zeros_like(at.narrow(U, -1, k, n - k))
        grad_L_moved = grad_L
        if grad_U is not None:
            grad_U1 = at.narrow(grad_U, -1, 0, k)
            grad_beside = at.linalg_solve_triangular(adjoint(L), at.narrow(grad_U, -1, k, n - k), upper=True,
                                                     unitriangular=True)
            from_U2 = at.matmul(grad_beside, adjoint(at.narrow(U, -1, k, n - k)))
            grad_L_moved = at.neg(from_U2) if grad_L is None else at.sub(grad_L, from_U2)
        grad = at.cat([lu_square_backward(grad_L_moved, grad_U1, L, U1), grad_beside], -1)
    return at.matmul(P, grad)


@helper
def lu_square_jvp(B_tangent: Tensor, L: Tensor, U: Tensor) -> tuple[Tensor, Tensor]:
    """Tangents ``(dL, dU)`` of ``B = L U`` (square): ``dL = L tril(M, -1)``, ``dU = triu(M) U``,
    ``M = L^-1 dB U^-1``."""
    left_solved = at.linalg_solve_triangular(L, B_tangent, upper=False, unitriangular=True)
    m_matrix = at.linalg_solve_triangular(U, left_solved, upper=True, left=False)
    return at.matmul(L, at.tril(m_matrix, -1)), at.matmul(at.triu(m_matrix), U)


@helper
def linalg_lu_jvp(A_tangent: Tensor, P: Tensor, L: Tensor, U: Tensor, pivot: bool) -> tuple[Tensor, Tensor]:
    """Tangents ``(dL, dU)`` of ``(P, L, U) = linalg_lu(A)`` (derived in :func:`linalg_lu_backward`)."""
    m = L.size(-2)
    n = U.size(-1)
    k = L.size(-1)
    moved = at.matmul(matrix_transpose(P), A_tangent)
    if m == n:
        return lu_square_jvp(moved, L, U)
    if m > n:
        L_top_tangent, U_tangent = lu_square_jvp(at.narrow(moved, -2, 0, k), at.narrow(L, -2, 0, k), U)
        below = at.sub(at.narrow(moved, -2, k, m - k), at.matmul(at.narrow(L, -2, k, m - k), U_tangent))
        L_below_tangent = at.linalg_solve_triangular(U, below, upper=True, left=False)
        return at.cat([L_top_tangent, L_below_tangent], -2), U_tangent
    L_tangent, U_left_tangent = lu_square_jvp(at.narrow(moved, -1, 0, k), L, at.narrow(U, -1, 0, k))
    beside = at.sub(at.narrow(moved, -1, k, n - k), at.matmul(L_tangent, at.narrow(U, -1, k, n - k)))
    U_beside_tangent = at.linalg_solve_triangular(L, beside, upper=False, unitriangular=True)
    return L_tangent, at.cat([U_left_tangent, U_beside_tangent], -1)


# ----------------------------------------------------------------------------- LU factor and solve
@helper
def pivots_permutation(pivots: Tensor, LU: Tensor) -> Tensor:
    """``P`` of ``A = P L U`` from LAPACK's 1-based ``pivots`` of the ``m x n`` ``LU``: row ``i`` was
    swapped with row ``pivots[i] - 1``, for ``i = 0, ..., k - 1`` in turn, so ``P = T_0 T_1 ... T_{k-1}``
    with ``T_i = I - d d^T``, ``d = e_i - e_{pivots[i] - 1}`` (the identity when the row stays). Built
    from comparisons, in ``LU``'s dtype; no gradient flows into it."""
    m = LU.size(-2)
    rows = at.sub(at.cumsum(at.new_ones(LU, [m]), 0), 1)      # 0, 1, ..., m - 1
    ones = at.ones_like(rows)
    zeros = at.zeros_like(rows)
    permutation = diagonal_matrix(ones)
    for i in range(pivots.size(-1)):
        swapped = at.unsqueeze(at.sub(at.select(pivots, -1, i), 1), -1)
        d = at.sub(at.where(at.eq(rows, i), ones, zeros), at.where(at.eq(rows, swapped), ones, zeros))
        permutation = at.matmul(permutation, at.sub(diagonal_matrix(ones), at.mul(at.unsqueeze(d, -1),
                                                                                 at.unsqueeze(d, -2))))
    return permutation


@helper
def unit_lower_factor(LU: Tensor) -> Tensor:
    """``L`` (``m x k``, unit lower triangular) packed in the ``m x n`` ``LU``: its strict lower triangle
    plus the identity."""
    k = min(LU.size(-2), LU.size(-1))
    strict = at.tril(at.narrow(LU, -1, 0, k), -1)
    return at.diagonal_scatter(strict, at.add(at.diagonal(strict, 0, -2, -1), 1.0), 0, -2, -1)


@helper
def upper_factor(LU: Tensor) -> Tensor:
    """``U`` (``k x n``, upper triangular) packed in the ``m x n`` ``LU``."""
    k = min(LU.size(-2), LU.size(-1))
    return at.triu(at.narrow(LU, -2, 0, k))


@helper
def lu_factor_ex_backward(grad: Tensor, LU: Tensor, pivots: Tensor, pivot: bool) -> Tensor:
    """Gradient of ``(LU, pivots) = lu_factor(A)`` for ``A``: ``LU`` packs ``L``'s strict lower triangle
    and ``U``, so ``L`` receives ``grad``'s strict lower triangle (first ``k`` columns) and ``U`` its upper
    triangle (first ``k`` rows), then :func:`linalg_lu_backward` with ``P`` from the pivots."""
    k = min(LU.size(-2), LU.size(-1))
    grad_L = at.tril(at.narrow(grad, -1, 0, k), -1)
    grad_U = at.triu(at.narrow(grad, -2, 0, k))
    return linalg_lu_backward(grad_L, grad_U, pivots_permutation(pivots, LU), unit_lower_factor(LU),
                              upper_factor(LU), pivot)


@helper
def lu_factor_ex_jvp(A_tangent: Tensor, LU: Tensor, pivots: Tensor, pivot: bool) -> Tensor:
    """Tangent of ``LU``: ``dL`` (strictly lower, ``m x k``) and ``dU`` (upper, ``k x n``) of
    :func:`linalg_lu_jvp`, packed as ``LU`` packs ``L`` and ``U``."""
    m = LU.size(-2)
    n = LU.size(-1)
    k = min(m, n)
    L_tangent, U_tangent = linalg_lu_jvp(A_tangent, pivots_permutation(pivots, LU), unit_lower_factor(LU),
                                         upper_factor(LU), pivot)
    return at.add(at.constant_pad_nd(L_tangent, [0, n - k]), at.constant_pad_nd(U_tangent, [0, 0, 0, m - k]))


@helper
def lu_solved(Y: Tensor, P: Tensor, L: Tensor, U: Tensor, left: bool, adjoint: bool) -> Tensor:
    """``op(A)^-1 Y`` (``left``) or ``Y op(A)^-1`` for ``A = P L U``, ``op(A)`` = ``A^H`` for ``adjoint``:
    triangular solves with ``L`` and ``U`` and a product with ``P`` (orthogonal, ``P^-1 = P^T``)."""
    if left and not adjoint:        # U^-1 L^-1 P^T Y
        moved = at.linalg_solve_triangular(L, at.matmul(matrix_transpose(P), Y), upper=False, unitriangular=True)
        return at.linalg_solve_triangular(U, moved, upper=True)
    if left:                        # P L^-H U^-H Y
        moved = at.linalg_solve_triangular(adjoint_of(U), Y, upper=False)
        return at.matmul(P, at.linalg_solve_triangular(adjoint_of(L), moved, upper=True, unitriangular=True))
    if not adjoint:                 # Y U^-1 L^-1 P^T
        moved = at.linalg_solve_triangular(U, Y, upper=True, left=False)
        solved = at.linalg_solve_triangular(L, moved, upper=False, left=False, unitriangular=True)
        return at.matmul(solved, matrix_transpose(P))
    moved = at.linalg_solve_triangular(adjoint_of(L), at.matmul(Y, P), upper=True, left=False, unitriangular=True)
    return at.linalg_solve_triangular(adjoint_of(U), moved, upper=False, left=False)     # Y P L^-H U^-H


@helper
def adjoint_of(x: Tensor) -> Tensor:
    """:func:`adjoint` under a name that a flag called ``adjoint`` does not shadow."""
    return adjoint(x)


@helper
def linalg_lu_solve_LU(grad: Tensor, LU: Tensor, pivots: Tensor, result: Tensor, left: bool,
                       adjoint: bool) -> Tensor:
    """Gradient of ``X = lu_solve(LU, pivots, B)`` for the packed ``LU`` (square, ``A = P L U``).
    ``op(A) X = B`` (``left``) or ``X op(A) = B`` gives ``gA`` = ``-A^-H G X^H``, ``-X G^H A^-1``
    (``adjoint``), ``-X^H G A^-H``, ``-A^-H G^H X`` (right, ``adjoint``) with ``G`` the output gradient;
    ``dA = P (dL U + L dU)`` carries it to ``gL = tril(P^T gA U^H, -1)`` and ``gU = triu(L^H P^T gA)``,
    packed as ``LU`` packs them."""
    P = pivots_permutation(pivots, LU)
    L = unit_lower_factor(LU)
    U = upper_factor(LU)
    if left and not adjoint:
        grad_A = at.neg(at.matmul(lu_solved(grad, P, L, U, True, True), adjoint_of(result)))
    elif left:
        grad_A = at.neg(at.matmul(result, adjoint_of(lu_solved(grad, P, L, U, True, False))))
    elif not adjoint:
        grad_A = at.neg(at.matmul(adjoint_of(result), lu_solved(grad, P, L, U, False, True)))
    else:
        grad_A = at.neg(at.matmul(adjoint_of(lu_solved(grad, P, L, U, False, False)), result))
    grad_moved = at.matmul(matrix_transpose(P), grad_A)
    return at.add(at.tril(at.matmul(grad_moved, adjoint_of(U)), -1), at.triu(at.matmul(adjoint_of(L), grad_moved)))


@helper
def linalg_lu_solve_jvp(result: Tensor, LU: Tensor, pivots: Tensor, LU_tangent: Tensor, B_tangent: Tensor,
                        left: bool, adjoint: bool) -> Tensor:
    """Tangent of ``X = lu_solve(LU, pivots, B)``: ``dA = P (dL U + L dU)`` with ``dL`` and ``dU`` the
    strict lower and upper triangles of ``dLU``, and ``dX = op(A)^-1 (dB - op(dA) X)`` (``left``) or
    ``(dB - X op(dA)) op(A)^-1``."""
    P = pivots_permutation(pivots, LU)
    L = unit_lower_factor(LU)
    U = upper_factor(LU)
    A_tangent = at.matmul(P, at.add(at.matmul(at.tril(LU_tangent, -1), U), at.matmul(L, at.triu(LU_tangent))))
    op_tangent = adjoint_of(A_tangent) if adjoint else A_tangent
    moved = at.sub(B_tangent, at.matmul(op_tangent, result) if left else at.matmul(result, op_tangent))
    return lu_solved(moved, P, L, U, left, adjoint)


# ----------------------------------------------------------------------------- eigendecomposition
@helper
def eigenvalue_gaps(L: Tensor) -> Tensor:
    """``E`` with ``E_ij = 1 / (l_j - l_i)`` off the diagonal and 0 on it (eigenvalues distinct, as the
    derivative of the eigenvectors needs)."""
    gaps = at.sub(at.unsqueeze(L, -2), at.unsqueeze(L, -1))
    identity = diagonal_matrix(at.ones_like(L))
    return at.sub(at.reciprocal(at.add(gaps, identity)), identity)


@helper
def linalg_eig_backward(grad_L: Tensor | None, grad_V: Tensor | None, L: Tensor, V: Tensor,
                        is_hermitian: bool) -> Tensor:
    """Gradient of ``A = V diag(L) V^-1`` for ``A`` (eigenvalues distinct where an eigenvector's
    gradient is asked). With ``P = V^-1 dA V``: ``dL = diag(P)`` and ``dV = V C`` with ``C = E o P``
    off the diagonal (``E``: :func:`eigenvalue_gaps`). For a Hermitian ``A`` (``is_hermitian``:
    ``V^-1 = V^H``, ``L`` real, ``E`` real and antisymmetric) ``C`` is skew-Hermitian and torch fixes
    ``diag(C) = 0``; the adjoint, with ``J = V^H gV``, is ``gA = V (diag(gL) + E o (J - J^H) / 2) V^H``,
    Hermitian (``A`` moves among Hermitian matrices, so the gradient is taken there); any other ``A``:
    :func:`general_eig_backward`. A complex eigenvector has a free phase; a loss that depends on it
    has no gradient (torch raises for it; this returns that of ``Im diag(C) = 0``)."""
    if not is_hermitian:
        return general_eig_backward(grad_L, grad_V, L, V)
    inner = at.zeros_like(at.matmul(adjoint(V), V))
    if grad_V is not None:
        J = at.matmul(adjoint(V), grad_V)
        inner = at.mul(eigenvalue_gaps(L), at.mul(at.sub(J, adjoint(J)), 0.5))
    if grad_L is not None:
        inner = at.add(inner, diagonal_matrix(grad_L))
    return at.matmul(at.matmul(V, inner), adjoint(V))


@helper
def general_eig_backward(grad_L: Tensor | None, grad_V: Tensor | None, L: Tensor, V: Tensor) -> Tensor:
    """Gradient of ``A = V diag(L) V^-1`` for a general square ``A`` (``linalg_eig``: complex ``L``
    and ``V``, each eigenvector of norm 1). With ``P = V^-1 dA V``: ``dL = diag(P)``, ``dV = V C``,
    ``C_ij = P_ij / (l_j - l_i)`` off the diagonal, and the diagonal keeps the norms:
    ``Re(v_j^H dv_j) = 0`` gives ``Re c_jj = -Re (V^H V C_off)_jj`` (its imaginary part is the free
    phase, taken 0). The loss moves by ``Re tr(gL^H dL) + Re tr(gV^H V C)``; with ``J = V^H gV`` and
    ``K = J - V^H V diag(Re diag J)`` (the diagonal's share moved onto ``C_off``) that is
    ``Re tr(G^H P)`` with ``G = diag(gL) + conj(E) o K`` off the diagonal, so
    ``gA = V^-H G V^H``."""
    VhV = at.matmul(adjoint(V), V)
    inner = at.zeros_like(VhV)
    if grad_V is not None:
        J = at.matmul(adjoint(V), grad_V)
        K = at.sub(J, at.mul(VhV, at.unsqueeze(at.real(at.diagonal(J, 0, -2, -1)), -2)))
        inner = at.mul(at.conj(eigenvalue_gaps(L)), K)
    if grad_L is not None:
        inner = at.add(inner, diagonal_matrix(grad_L))
    return at.matmul(at.matmul(adjoint(matrix_inverse(V)), inner), adjoint(V))


@helper
def linalg_eig_jvp(A_tangent: Tensor, L: Tensor, V: Tensor, is_hermitian: bool) -> tuple[Tensor, Tensor]:
    """Tangents ``(dL, dV)`` of ``A = V diag(L) V^-1`` (derived in :func:`linalg_eig_backward`): with
    ``P = V^H dA V`` for a Hermitian ``A``, ``dL = Re diag(P)`` and ``dV = V (E o P)``; any other
    ``A``: :func:`general_eig_jvp`."""
    if not is_hermitian:
        return general_eig_jvp(A_tangent, L, V)
    P = at.matmul(at.matmul(adjoint(V), A_tangent), V)
    return at.real(at.diagonal(P, 0, -2, -1)), at.matmul(V, at.mul(eigenvalue_gaps(L), P))


@helper
def general_eig_jvp(A_tangent: Tensor, L: Tensor, V: Tensor) -> tuple[Tensor, Tensor]:
    """Tangents ``(dL, dV)`` of ``A = V diag(L) V^-1`` for a general ``A`` (derived in
    :func:`general_eig_backward`): ``P = V^-1 dA V`` (``dA`` made complex, as ``V``), ``dL = diag(P)``,
    ``dV = V C`` with ``C = E o P`` off the diagonal and ``diag(C) = -Re diag(V^H V C)`` (norms kept,
    phases still)."""
    P = at.matmul(at.matmul(matrix_inverse(V), at._to_copy(A_tangent, dtype=V.scalar_type())), V)
    C = at.mul(eigenvalue_gaps(L), P)
    kept = at.real(at.diagonal(at.matmul(at.matmul(adjoint(V), V), C), 0, -2, -1))
    return at.diagonal(P, 0, -2, -1), at.sub(at.matmul(V, C), at.mul(V, at.unsqueeze(kept, -2)))


# ----------------------------------------------------------------------------- inverse, determinants, solves
@helper
def matrix_inverse(A: Tensor) -> Tensor:
    """``A^-1`` of a square ``A`` by Gaussian elimination with partial pivoting, carrying the row
    operations on the identity: at step ``j`` the row of largest magnitude at or below ``j`` in column
    ``j`` is swapped with row ``j`` (a product with a permutation, exact), then the rows below ``j`` lose
    their multiple of it; ``U^-1`` (a triangular solve) applied to what the identity became gives
    ``A^-1``. Built from products, one division per step and a triangular solve, so differentiable in
    ``A`` to any order (the pivot choice is piecewise constant). A singular ``A`` (a zero pivot) gives
    infinities and NaN where torch's operators raise or fall back to a rank-deficient formula."""
    n = A.size(-1)
    identity = diagonal_matrix(at.new_ones(A, [n]))
    magnitudes = at.abs(at.new_ones(A, [n, n]))
    at_or_below = at.tril(magnitudes)
    strictly_below = at.tril(at.new_ones(A, [n, n]), -1)
    reduced = A
    moved = at.add(at.zeros_like(A), identity)
    for j in range(n):
        unit = at.narrow(identity, -1, j, 1)
        candidates = at.mul(at.abs(at.narrow(reduced, -1, j, 1)), at.narrow(at_or_below, -1, j, 1))
        largest, row = at.max(candidates, -2, True)
        rows = at.sub(at.cumsum(at.new_ones(row, [n, 1]), 0), 1)
        chosen = at.where(at.eq(rows, row), at.ones_like(unit), at.zeros_like(unit))
        swap = at.sub(unit, chosen)
        swapping = at.sub(identity, at.matmul(swap, matrix_transpose(swap)))
        reduced = at.matmul(swapping, reduced)
        moved = at.matmul(swapping, moved)
        pivot_row = at.narrow(reduced, -2, j, 1)
        multipliers = at.mul(at.div(at.narrow(reduced, -1, j, 1), at.narrow(pivot_row, -1, j, 1)),
                             at.narrow(strictly_below, -1, j, 1))
        reduced = at.sub(reduced, at.matmul(multipliers, pivot_row))
        moved = at.sub(moved, at.matmul(multipliers, at.narrow(moved, -2, j, 1)))
    return at.linalg_solve_triangular(at.triu(reduced), moved, upper=True)


@helper
def matrix_scaled(x: Tensor, scale: Tensor) -> Tensor:
    """Each matrix of ``x`` (``(..., m, n)``) times its number in ``scale`` (``(...)``)."""
    return at.mul(x, at.unsqueeze(at.unsqueeze(scale, -1), -1))


@helper
def inverse_trace(A: Tensor, A_tangent: Tensor) -> Tensor:
    """``tr(A^-1 dA)``, the tangent of ``log det A``: the sum of ``A^-T o dA``."""
    return at.sum(at.mul(matrix_transpose(matrix_inverse(A)), A_tangent), [-2, -1], False)


@helper
def linalg_det_backward(grad: Tensor, det: Tensor, A: Tensor, LU: Tensor, pivots: Tensor) -> Tensor:
    """Gradient of ``d = det(A)``: ``dd = d tr(A^-1 dA)`` (Jacobi's formula), so
    ``Re(conj(g) dd) = Re tr((g conj(d) A^-H)^H dA)`` and ``gA = g conj(d) A^-H``. ``A^-1`` is
    :func:`matrix_inverse`'s (differentiable in ``A``); the forward's ``LU`` and ``pivots`` go unused. A
    singular ``A`` (whose gradient is the adjugate) gives infinities and NaN."""
    return matrix_scaled(adjoint(matrix_inverse(A)), at.mul(grad, at.conj(det)))


@helper
def linalg_det_jvp(A_tangent: Tensor, det: Tensor, LU: Tensor, pivots: Tensor, use_A_T: bool) -> Tensor:
    """Tangent of ``d = det(A)``: ``dd = d tr(A^-1 dA)`` (Jacobi). ``A = P L U`` from the forward's
    ``LU`` and ``pivots`` (of ``A^T`` for ``use_A_T``, which has the same determinant and the
    transposed tangent)."""
    A = at.matmul(pivots_permutation(pivots, LU), at.matmul(unit_lower_factor(LU), upper_factor(LU)))
    if use_A_T:
        return at.mul(det, inverse_trace(A, matrix_transpose(A_tangent)))
    return at.mul(det, inverse_trace(A, A_tangent))


@helper
def slogdet_backward(grad_sign: Tensor | None, grad_logabsdet: Tensor | None, A: Tensor, sign: Tensor,
                     LU: Tensor, pivots: Tensor) -> Tensor:
    """Gradient of ``(s, l) = slogdet(A)``, ``det A = s e^l``. With ``t = tr(A^-1 dA)`` (the tangent of
    ``log det A``): ``dl = Re t`` and ``ds = s i Im t`` (``|s| = 1``; for a real ``A`` the sign is
    constant). ``Re(conj(gs) ds) + gl dl = Re(conj(w) t)`` with ``w = gl + i Im(conj(s) gs)``, so
    ``gA = w A^-H``; ``i Im z`` is spelled ``(z - conj(z)) / 2``. ``LU`` and ``pivots`` go unused."""
    weight = at.zeros_like(sign)
    if grad_logabsdet is not None:
        weight = at.add(weight, grad_logabsdet)
    if grad_sign is not None:
        rotated = at.mul(at.conj(sign), grad_sign)
        weight = at.add(weight, at.mul(at.sub(rotated, at.conj(rotated)), 0.5))
    return matrix_scaled(adjoint(matrix_inverse(A)), weight)


@helper
def slogdet_jvp(LU: Tensor, pivots: Tensor, A_tangent: Tensor, sign: Tensor, use_A_T: bool) -> tuple[Tensor, Tensor]:
    """Tangents ``(ds, dl)`` of ``(s, l) = slogdet(A)`` (see :func:`slogdet_backward`): ``dl = Re t``,
    ``ds = s (t - conj(t)) / 2`` with ``t = tr(A^-1 dA)``, ``A`` from ``LU`` and ``pivots`` (``A^T``'s
    for ``use_A_T``)."""
    A = at.matmul(pivots_permutation(pivots, LU), at.matmul(unit_lower_factor(LU), upper_factor(LU)))
    trace = inverse_trace(A, matrix_transpose(A_tangent) if use_A_T else A_tangent)
    return at.mul(sign, at.mul(at.sub(trace, at.conj(trace)), 0.5)), at.real(trace)


@helper
def linalg_solve_backward(grad: Tensor, result: Tensor, A: Tensor, LU: Tensor, pivots: Tensor, left: bool,
                          B_requires_grad: bool) -> tuple[Tensor, Tensor | None]:
    """Gradients ``(gA, gB)`` of ``X = solve(A, B)``: ``A X = B`` (``left``) gives ``dX = A^-1 (dB - dA X)``,
    so ``gB = A^-H G`` and ``gA = -gB X^H``; ``X A = B`` gives ``gB = G A^-H`` and ``gA = -X^H gB``. A
    vector ``B`` (``X`` one dim less than ``A``) is a one-column matrix; broadcast batch dims are summed
    back. ``A^-1`` is :func:`matrix_inverse`'s (differentiable in ``A``); ``LU`` and ``pivots`` go unused."""
    vector = result.dim() == A.dim() - 1
    G = at.unsqueeze(grad, -1) if vector else grad
    X = at.unsqueeze(result, -1) if vector else result
    inverse_h = adjoint(matrix_inverse(A))
    grad_B = at.matmul(inverse_h, G) if left else at.matmul(G, inverse_h)
    grad_A = at.neg(at.matmul(grad_B, adjoint(X)) if left else at.matmul(adjoint(X), grad_B))
    grad_B_out = None
    if B_requires_grad:
        grad_B_out = at.squeeze(grad_B, -1) if vector else grad_B
    return sum_to(grad_A, A.sizes()), grad_B_out


@helper
def linalg_solve_jvp(A_tangent: Tensor, B_tangent: Tensor, result: Tensor, LU: Tensor, pivots: Tensor,
                     left: bool) -> Tensor:
    """Tangent of ``X = solve(A, B)``: ``dX = A^-1 (dB - dA X)`` (``left``) or ``(dB - X dA) A^-1``, ``A``
    from ``LU`` and ``pivots`` (``A = P L U``); a vector ``B`` is a one-column matrix."""
    A = at.matmul(pivots_permutation(pivots, LU), at.matmul(unit_lower_factor(LU), upper_factor(LU)))
    vector = result.dim() == A.dim() - 1
    X = at.unsqueeze(result, -1) if vector else result
    dB = at.unsqueeze(B_tangent, -1) if vector else B_tangent
    inverse = matrix_inverse(A)
    if left:
        tangent = at.matmul(inverse, at.sub(dB, at.matmul(A_tangent, X)))
    else:
        tangent = at.matmul(at.sub(dB, at.matmul(X, A_tangent)), inverse)
    return at.squeeze(tangent, -1) if vector else tangent


# ----------------------------------------------------------------------------- least squares
@helper
def full_rank_pinv(A: Tensor) -> Tensor:
    """``A^+`` of a full-rank ``m x n`` ``A``: ``(A^H A)^-1 A^H`` (``m >= n``) or ``A^H (A A^H)^-1``, with
    :func:`matrix_inverse` (differentiable in ``A``)."""
    if A.size(-2) >= A.size(-1):
        return at.matmul(matrix_inverse(at.matmul(adjoint(A), A)), adjoint(A))
    return at.matmul(adjoint(A), matrix_inverse(at.matmul(A, adjoint(A))))


@helper
def linalg_lstsq_backward(grad_solution: Tensor | None, grad_residuals: Tensor | None, A: Tensor, B: Tensor,
                          solution: Tensor, output_mask: list[bool]) -> tuple[Tensor | None, Tensor | None]:
    """Gradients ``(gA, gB)`` of ``(X, r) = lstsq(A, B)`` for a full-rank ``A`` (``X = A^+ B``, the
    least-squares solution, of least norm for a wide ``A``): ``gB = A^+H gX`` and ``gA`` is
    :func:`pinv_backward` of ``gX B^H``. The residuals ``r_j = |A x_j - b_j|^2`` (tall ``A`` and a driver
    other than gelsy; empty otherwise): ``A^H (A X - B) = 0`` at the minimum, so ``dr_j`` is
    ``2 Re <E_j, dA x_j - db_j>`` with ``E = A X - B``: ``gA = 2 (E diag(gr)) X^H`` and ``gB = -2 E diag(gr)``.
    Broadcast batch dims are summed back."""
    residual = at.sub(at.matmul(A, solution), B)
    grad_B = at.zeros_like(residual)
    grad_A = at.zeros_like(at.matmul(residual, adjoint(solution)))
    if grad_solution is not None:
        pinvA = full_rank_pinv(A)
        grad_B = at.add(grad_B, at.matmul(adjoint(pinvA), grad_solution))
        grad_A = at.add(grad_A, pinv_backward(at.matmul(grad_solution, adjoint(B)), pinvA, A))
    if grad_residuals is not None and grad_residuals.numel() > 0:
        weighted = at.mul(residual, at.mul(at.unsqueeze(grad_residuals, -2), 2.0))
        grad_B = at.sub(grad_B, weighted)
        grad_A = at.add(grad_A, at.matmul(weighted, adjoint(solution)))
    return (sum_to(grad_A, A.sizes()) if output_mask[0] else None,
            sum_to(grad_B, B.sizes()) if output_mask[1] else None)


@helper
def linalg_lstsq_solution_jvp(A: Tensor, B: Tensor, A_tangent: Tensor, B_tangent: Tensor) -> Tensor:
    """Tangent of the least-squares solution ``X = A^+ B`` (full-rank ``A``): ``dX = d(A^+) B + A^+ dB``
    with ``d(A^+)`` from :func:`pinv_jvp`."""
    pinvA = full_rank_pinv(A)
    return at.add(at.matmul(pinv_jvp(A, pinvA, A_tangent), B), at.matmul(pinvA, B_tangent))


@helper
def linalg_lstsq_residuals_jvp(A: Tensor, B: Tensor, A_tangent: Tensor, B_tangent: Tensor, solution: Tensor,
                               residuals: Tensor) -> Tensor:
    """Tangent of the residuals ``r_j = |A x_j - b_j|^2`` (see :func:`linalg_lstsq_backward`):
    ``dr_j = 2 Re <E_j, dA x_j - db_j>``, ``E = A X - B``; an empty ``r`` (gelsy, or not tall) stays empty."""
    if residuals.numel() == 0:
        return at.zeros_like(residuals)
    residual = at.sub(at.matmul(A, solution), B)
    moved = at.sub(at.matmul(A_tangent, solution), B_tangent)
    return at.mul(at.real(at.sum(at.mul(at.conj(residual), moved), [-2], False)), 2.0)


# ----------------------------------------------------------------------------- Householder products
@helper
def householder_vectors(input: Tensor, k: int) -> Tensor:
    """The ``m x k`` matrix whose column ``i`` is reflector ``i``'s vector ``v_i``: 1 in row ``i``, the
    entries of ``input``'s column ``i`` below it, 0 above (LAPACK's packing)."""
    strict = at.tril(at.narrow(input, -1, 0, k), -1)
    return at.diagonal_scatter(strict, at.add(at.diagonal(strict, 0, -2, -1), 1.0), 0, -2, -1)


@helper
def householder_reflector(V: Tensor, tau: Tensor, i: int) -> Tensor:
    """``H_i = I - tau_i v_i v_i^H`` (``m x m``) for column ``i`` of ``V``."""
    v = at.narrow(V, -1, i, 1)
    scale = at.unsqueeze(at.narrow(tau, -1, i, 1), -1)
    identity = diagonal_matrix(at.new_ones(V, [V.size(-2)]))
    return at.sub(identity, at.mul(at.matmul(v, adjoint(v)), scale))


@helper
def householder_columns(V: Tensor, tau: Tensor, columns: int) -> list[Tensor]:
    """The right products ``R_i = H_i H_{i+1} ... H_{k-1} E`` for ``i = 0, ..., k`` (``R_k = E``, the first
    ``columns`` columns of the identity), ``R_0 = Q E``."""
    k = tau.size(-1)
    current = at.narrow(diagonal_matrix(at.new_ones(V, [V.size(-2)])), -1, 0, columns)
    products = [current]
    for step in range(k):
        current = at.matmul(householder_reflector(V, tau, k - 1 - step), current)
        products.append(current)
    ordered = []
    for i in range(k + 1):
        ordered.append(products[k - i])
    return ordered


@helper
def householder_gradients(grad: Tensor, input: Tensor, tau: Tensor) -> tuple[Tensor, Tensor]:
    """Gradients ``(g_input, g_tau)`` of ``Y = H_0 H_1 ... H_{k-1} E`` (``E``: the identity's first
    ``grad.size(-1)`` columns; ``H_i = I - tau_i v_i v_i^H``) given ``G``, the gradient of ``Y``.
    ``dY = sum_i L_i dH_i R_{i+1}`` with ``L_i = H_0 ... H_{i-1}`` (:func:`householder_columns` for ``R``),
    so ``dH_i`` receives ``M_i = L_i^H G R_{i+1}^H``; from ``dH_i = -(dtau_i v v^H + tau_i dv v^H +
    tau_i v dv^H)``: ``g_tau_i = -v^H M_i v`` and ``g_v = -(conj(tau_i) M_i v + tau_i M_i^H v)``, of which
    ``input`` receives the entries below the diagonal (the rest of ``v_i`` is fixed)."""
    k = tau.size(-1)
    V = householder_vectors(input, k)
    right = householder_columns(V, tau, grad.size(-1))
    left = diagonal_matrix(at.new_ones(V, [V.size(-2)]))
    vector_grads = []
    tau_grads = []
    for i in range(k):
        v = at.narrow(V, -1, i, 1)
        scale = at.unsqueeze(at.narrow(tau, -1, i, 1), -1)
        moved = at.matmul(at.matmul(adjoint(left), grad), adjoint(right[i + 1]))
        moved_v = at.matmul(moved, v)
        tau_grads.append(at.neg(at.squeeze(at.matmul(adjoint(v), moved_v), -1)))
        vector_grads.append(at.neg(at.add(at.mul(moved_v, at.conj(scale)),
                                          at.mul(at.matmul(adjoint(moved), v), scale))))
        left = at.matmul(left, householder_reflector(V, tau, i))
    grad_V = at.tril(at.cat(vector_grads, -1), -1)
    return at.constant_pad_nd(grad_V, [0, input.size(-1) - k]), at.cat(tau_grads, -1)


@helper
def householder_product_backward(grad: Tensor, result: Tensor, input: Tensor, tau: Tensor) -> tuple[Tensor, Tensor]:
    """Gradients ``(g_input, g_tau)`` of ``Q = householder_product(input, tau)``, the first ``n`` columns
    of ``H_0 ... H_{k-1}`` (:func:`householder_gradients`); recomputed from ``input`` and ``tau``
    (``result`` goes unused), so differentiable again."""
    return householder_gradients(grad, input, tau)


@helper
def householder_product_jvp(input_tangent: Tensor, tau_tangent: Tensor, result: Tensor, input: Tensor,
                            tau: Tensor) -> Tensor:
    """Tangent of ``Q = H_0 ... H_{k-1} E``: ``dQ = sum_i L_i dH_i R_{i+1}`` with
    ``dH_i = -(dtau_i v v^H + tau_i (dv v^H + v dv^H))`` (see :func:`householder_gradients`)."""
    k = tau.size(-1)
    V = householder_vectors(input, k)
    V_tangent = at.tril(at.narrow(input_tangent, -1, 0, k), -1)
    right = householder_columns(V, tau, input.size(-1))
    left = diagonal_matrix(at.new_ones(V, [V.size(-2)]))
    tangent = at.zeros_like(right[0])
    for i in range(k):
        v = at.narrow(V, -1, i, 1)
        dv = at.narrow(V_tangent, -1, i, 1)
        scale = at.unsqueeze(at.narrow(tau, -1, i, 1), -1)
        scale_tangent = at.unsqueeze(at.narrow(tau_tangent, -1, i, 1), -1)
        outer = at.matmul(v, adjoint(v))
        moved = at.add(at.mul(outer, scale_tangent),
                       at.mul(at.add(at.matmul(dv, adjoint(v)), at.matmul(v, adjoint(dv))), scale))
        tangent = at.sub(tangent, at.matmul(at.matmul(left, moved), right[i + 1]))
        left = at.matmul(left, householder_reflector(V, tau, i))
    return tangent


@helper
def ormqr_backward(grad: Tensor, result: Tensor, self: Tensor, input2: Tensor, input3: Tensor, left: bool,
                   transpose: bool, output_mask: list[bool]) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """Gradients of ``Y = op(Q) C`` (``left``) or ``C op(Q)`` for ``ormqr(A = self, tau = input2, C = input3)``:
    ``Q = H_0 ... H_{k-1}`` is square (``A``'s rows), ``op(Q) = Q^H`` for ``transpose``. ``gC = op(Q)^H G``
    (``G op(Q)^H`` on the right); ``Q`` receives ``G C^H`` (``Q C``), ``C G^H`` (``Q^H C``), ``C^H G``
    (``C Q``) or ``G^H C`` (``C Q^H``), carried to ``A`` and ``tau`` by :func:`householder_gradients`."""
    grad_A = None
    grad_tau = None
    grad_C = None
    if output_mask[2]:
        V = householder_vectors(self, input2.size(-1))
        Q = householder_columns(V, input2, self.size(-2))[0]
        op_h = Q if transpose else adjoint(Q)
        grad_C = at.matmul(op_h, grad) if left else at.matmul(grad, op_h)
    if output_mask[0] or output_mask[1]:
        if left:
            grad_Q = at.matmul(input3, adjoint(grad)) if transpose else at.matmul(grad, adjoint(input3))
        else:
            grad_Q = at.matmul(adjoint(grad), input3) if transpose else at.matmul(adjoint(input3), grad)
        grad_A, grad_tau = householder_gradients(grad_Q, self, input2)
        if not output_mask[0]:
            grad_A = None
        if not output_mask[1]:
            grad_tau = None
    return grad_A, grad_tau, grad_C
