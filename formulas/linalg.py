"""Linear algebra: the matrix products ``mm``, ``addmm``, ``bmm``, ``dot``, ``mv``, ``outer`` (and
``ger``, its BLAS name), ``matmul`` (batched, broadcast batch dims), ``addmv``, ``addr``,
``baddbmm``, ``addbmm``; the triangular solve ``linalg_solve_triangular``; the matrix exponential
``linalg_matrix_exp``; and the vector norms
``linalg_vector_norm``, ``norm.Scalar`` and ``norm.ScalarOpt_dim``.

Every product is bilinear: the gradient of one factor is the incoming gradient multiplied by
the other factor transposed, and the jvp is the product rule. ``x.norm()``, ``x.norm(p, dim,
keepdim)`` and ``torch.norm`` call ``linalg_vector_norm`` in torch 2.13; the ``norm`` overloads
are ATen's own entry points (the engine's ``x.norm(...)`` among them). Every order p is handled:
0, 1, 2, +-inf and any other p, with torch's subgradient 0 where the norm or an element is 0.
"""
from __future__ import annotations

from formulas import Tensor, at, derivative, family_member, helper
from formulas.helpers import is_reduced_dim, maybe_multiply, sum_to


@derivative("mm(Tensor self, Tensor mat2) -> Tensor")
def mm(self, mat2):
    result = at.mm(self, mat2)
    def backward(grad, *, needs_input_grad):
        grad_self = at.mm(grad, at.t(mat2)) if needs_input_grad[0] else None
        grad_mat2 = at.mm(at.t(self), grad) if needs_input_grad[1] else None
        return grad_self, grad_mat2
    def jvp(self_t, mat2_t):
        # product rule
        result_t = at.mm(self_t, mat2) + at.mm(self, mat2_t)
        return result_t
    return result, backward


@derivative("addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor")
def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    result = at.addmm(self, mat1, mat2, beta=beta, alpha=alpha)
    self_sizes = self.sizes()
    def backward(grad, *, needs_input_grad):
        grad_self = sum_to(at.mul(grad, beta), self_sizes) if needs_input_grad[0] else None
        grad_mat1 = at.mul(at.mm(grad, at.t(mat2)), alpha) if needs_input_grad[1] else None
        grad_mat2 = at.mul(at.mm(at.t(mat1), grad), alpha) if needs_input_grad[2] else None
        return grad_self, grad_mat1, grad_mat2
    def jvp(self_t, mat1_t, mat2_t):
        # beta self_t + alpha (mat1_t mat2 + mat1 mat2_t)
        result_t = at.addmm(self_t, mat1_t, mat2, beta=beta, alpha=alpha) + at.mul(at.mm(mat1, mat2_t), alpha)
        return result_t
    return result, backward


@helper
def matrix_transpose(x: Tensor) -> Tensor:
    """``x`` with its last two dims swapped (``x.mT``)."""
    n = x.dim()
    dims = []
    for d in range(n):
        dims.append(d)
    dims[n - 2] = n - 1
    dims[n - 1] = n - 2
    return at.permute(x, dims)


@helper
def fold_batch(x: Tensor) -> Tensor:
    """``x`` (at least 2-D) with its leading dims folded into rows: a matrix of ``x.size(-1)`` columns."""
    n = x.dim()
    rows = 1
    for d in range(n - 1):
        rows = rows * x.size(d)
    return at.reshape(x, [rows, x.size(n - 1)])


@derivative("bmm(Tensor self, Tensor mat2) -> Tensor")
def bmm(self, mat2):
    result = at.bmm(self, mat2)
    def backward(grad, *, needs_input_grad):
        grad_self = at.bmm(grad, matrix_transpose(mat2)) if needs_input_grad[0] else None
        grad_mat2 = at.bmm(matrix_transpose(self), grad) if needs_input_grad[1] else None
        return grad_self, grad_mat2
    def jvp(self_t, mat2_t):
        result_t = at.bmm(self_t, mat2) + at.bmm(self, mat2_t)
        return result_t
    return result, backward


@derivative("dot(Tensor self, Tensor tensor) -> Tensor")
def dot(self, tensor):
    result = at.dot(self, tensor)
    def backward(grad, *, needs_input_grad):
        # grad is 0-d: it scales the other vector
        grad_self = grad * tensor if needs_input_grad[0] else None
        grad_tensor = grad * self if needs_input_grad[1] else None
        return grad_self, grad_tensor
    def jvp(self_t, tensor_t):
        result_t = at.dot(self_t, tensor) + at.dot(self, tensor_t)
        return result_t
    return result, backward


@derivative("mv(Tensor self, Tensor vec) -> Tensor")
def mv(self, vec):
    result = at.mv(self, vec)
    def backward(grad, *, needs_input_grad):
        grad_self = at.outer(grad, vec) if needs_input_grad[0] else None
        grad_vec = at.mv(at.t(self), grad) if needs_input_grad[1] else None
        return grad_self, grad_vec
    def jvp(self_t, vec_t):
        result_t = at.mv(self_t, vec) + at.mv(self, vec_t)
        return result_t
    return result, backward


@derivative("outer(Tensor self, Tensor vec2) -> Tensor")
@family_member("ger(Tensor self, Tensor vec2) -> Tensor", rename={"outer": "ger"})
def outer(self, vec2):
    result = at.outer(self, vec2)
    def backward(grad, *, needs_input_grad):
        grad_self = at.mv(grad, vec2) if needs_input_grad[0] else None
        grad_vec2 = at.mv(at.t(grad), self) if needs_input_grad[1] else None
        return grad_self, grad_vec2
    def jvp(self_t, vec2_t):
        result_t = at.outer(self_t, vec2) + at.outer(self, vec2_t)
        return result_t
    return result, backward


@derivative("matmul(Tensor self, Tensor other) -> Tensor")
def matmul(self, other):
    result = at.matmul(self, other)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        # result[..., i, j] = sum_k self[..., i, k] other[..., k, j], a vector self (n,) read as one
        # row (1, n) and a vector other (n,) as one column (n, 1), the added dim dropped from result.
        # A vector factor makes its partner's gradient an outer product (one broadcast multiply);
        # a factor without batch dims sums over the partner's batch, which folds into its rows (one mm)
        grad_self = None
        grad_other = None
        if len(self_sizes) == 1 and len(other_sizes) == 1:
            grad_self = grad * other if needs_input_grad[0] else None
            grad_other = grad * self if needs_input_grad[1] else None
        elif len(other_sizes) == 1:
            # grad (..., m): grad_self[..., i, k] = grad[..., i] other[k]
            if needs_input_grad[0]:
                grad_self = at.mul(at.unsqueeze(grad, -1), other)
            if needs_input_grad[1]:
                grad_other = at.mv(at.t(fold_batch(self)), at.reshape(grad, [-1]))
        elif len(self_sizes) == 1:
            # grad (..., p): grad_other[..., k, j] = self[k] grad[..., j]
            if needs_input_grad[0]:
                grad_self = at.reshape(sum_to(at.matmul(at.unsqueeze(grad, -2), matrix_transpose(other)),
                                              [1, self_sizes[0]]), self_sizes)
            if needs_input_grad[1]:
                grad_other = at.mul(at.unsqueeze(self, -1), at.unsqueeze(grad, -2))
        elif len(other_sizes) == 2:
            # self (..., m, n) folds to (rows, n), grad (..., m, p) to (rows, p)
            if needs_input_grad[0]:
                grad_self = at.matmul(grad, at.t(other))
            if needs_input_grad[1]:
                grad_other = at.mm(at.t(fold_batch(self)), fold_batch(grad))
        else:
            if needs_input_grad[0]:
                grad_self = sum_to(at.matmul(grad, matrix_transpose(other)), self_sizes)
            if needs_input_grad[1]:
                grad_other = sum_to(at.matmul(matrix_transpose(self), grad), other_sizes)
        return grad_self, grad_other
    def jvp(self_t, other_t):
        result_t = at.matmul(self_t, other) + at.matmul(self, other_t)
        return result_t
    return result, backward


@derivative("addmv(Tensor self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor")
def addmv(self, mat, vec, *, beta=1, alpha=1):
    result = at.addmv(self, mat, vec, beta=beta, alpha=alpha)
    self_sizes = self.sizes()
    def backward(grad, *, needs_input_grad):
        # beta self + alpha mat vec
        grad_self = sum_to(maybe_multiply(grad, beta), self_sizes) if needs_input_grad[0] else None
        grad_mat = maybe_multiply(at.outer(grad, vec), alpha) if needs_input_grad[1] else None
        grad_vec = maybe_multiply(at.mv(at.t(mat), grad), alpha) if needs_input_grad[2] else None
        return grad_self, grad_mat, grad_vec
    def jvp(self_t, mat_t, vec_t):
        # beta self_t + alpha (mat_t vec + mat vec_t)
        result_t = at.addmv(self_t, mat_t, vec, beta=beta, alpha=alpha) + at.mul(at.mv(mat, vec_t), alpha)
        return result_t
    return result, backward


@derivative("addr(Tensor self, Tensor vec1, Tensor vec2, *, Scalar beta=1, Scalar alpha=1) -> Tensor")
def addr(self, vec1, vec2, *, beta=1, alpha=1):
    result = at.addr(self, vec1, vec2, beta=beta, alpha=alpha)
    self_sizes = self.sizes()
    def backward(grad, *, needs_input_grad):
        # beta self + alpha vec1 vec2^T
        grad_self = sum_to(maybe_multiply(grad, beta), self_sizes) if needs_input_grad[0] else None
        grad_vec1 = maybe_multiply(at.mv(grad, vec2), alpha) if needs_input_grad[1] else None
        grad_vec2 = maybe_multiply(at.mv(at.t(grad), vec1), alpha) if needs_input_grad[2] else None
        return grad_self, grad_vec1, grad_vec2
    def jvp(self_t, vec1_t, vec2_t):
        result_t = at.addr(self_t, vec1_t, vec2, beta=beta, alpha=alpha) + at.mul(at.outer(vec1, vec2_t), alpha)
        return result_t
    return result, backward


@derivative("baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor")
def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
    result = at.baddbmm(self, batch1, batch2, beta=beta, alpha=alpha)
    self_sizes = self.sizes()
    def backward(grad, *, needs_input_grad):
        grad_self = sum_to(at.mul(grad, beta), self_sizes) if needs_input_grad[0] else None
        grad_batch1 = at.mul(at.bmm(grad, matrix_transpose(batch2)), alpha) if needs_input_grad[1] else None
        grad_batch2 = at.mul(at.bmm(matrix_transpose(batch1), grad), alpha) if needs_input_grad[2] else None
        return grad_self, grad_batch1, grad_batch2
    def jvp(self_t, batch1_t, batch2_t):
        result_t = (at.baddbmm(self_t, batch1_t, batch2, beta=beta, alpha=alpha)
                    + at.mul(at.bmm(batch1, batch2_t), alpha))
        return result_t
    return result, backward


@derivative("addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor")
def addbmm(self, batch1, batch2, *, beta=1, alpha=1):
    result = at.addbmm(self, batch1, batch2, beta=beta, alpha=alpha)
    self_sizes = self.sizes()
    batches = batch1.size(0)
    rows = batch1.size(1)
    columns = batch2.size(2)
    def backward(grad, *, needs_input_grad):
        # result = beta self + alpha sum_b batch1[b] batch2[b]: every batch sees the same gradient
        grad_self = sum_to(at.mul(grad, beta), self_sizes) if needs_input_grad[0] else None
        grad_batches = at.expand(at.unsqueeze(grad, 0), [batches, rows, columns])
        grad_batch1 = at.mul(at.bmm(grad_batches, matrix_transpose(batch2)), alpha) if needs_input_grad[1] else None
        grad_batch2 = at.mul(at.bmm(matrix_transpose(batch1), grad_batches), alpha) if needs_input_grad[2] else None
        return grad_self, grad_batch1, grad_batch2
    def jvp(self_t, batch1_t, batch2_t):
        result_t = (at.addbmm(self_t, batch1_t, batch2, beta=beta, alpha=alpha)
                    + at.mul(at.sum(at.bmm(batch1, batch2_t), [0], False), alpha))
        return result_t
    return result, backward


# ----------------------------------------------------------------------------- triangular solves
@helper
def triangle(a: Tensor, upper: bool, unitriangular: bool) -> Tensor:
    """The part of ``a`` a triangular solve reads: its upper or lower triangle, without the diagonal
    when ``unitriangular`` (which takes the diagonal as ones)."""
    if upper:
        return at.triu(a, 1 if unitriangular else 0)
    return at.tril(a, -1 if unitriangular else 0)


@helper
def triangular_adjoint_solve(grad: Tensor, self: Tensor, upper: bool, left: bool, unitriangular: bool) -> Tensor:
    """``A^-H grad`` (``grad A^-H`` on the right; ``A`` the triangle ``self`` names): ``B``'s gradient of
    ``X = solve_triangular(A, B)``, a triangular solve with ``A^H``, whose triangle is the other one.
    Not yet summed over broadcast batch dims."""
    return at.linalg_solve_triangular(at.conj(matrix_transpose(self)), grad, upper=not upper, left=left,
                                      unitriangular=unitriangular)


@helper
def triangular_coefficient_gradient(solved: Tensor, result: Tensor, upper: bool, left: bool,
                                    unitriangular: bool) -> Tensor:
    """``A``'s gradient of ``X = solve_triangular(A, B)`` given ``B``'s (``solved``, from
    :func:`triangular_adjoint_solve`): ``dX`` solves ``A dX = dB - dA X``, so ``A`` receives ``-gB X^H``
    (``-X^H gB`` on the right) restricted to the entries the solve reads (the others do not change
    ``X``). Not yet summed over broadcast batch dims."""
    result_h = at.conj(matrix_transpose(result))
    product = at.matmul(solved, result_h) if left else at.matmul(result_h, solved)
    return -triangle(product, upper, unitriangular)


@helper
def linalg_solve_triangular_backward(grad: Tensor, self: Tensor, result: Tensor, upper: bool, left: bool,
                                     unitriangular: bool, output_mask: list[bool]) -> tuple[Tensor, Tensor]:
    """Gradients of ``X = solve_triangular(A, B)`` (``A X = B`` for ``left``, else ``X A = B``; ``A`` the
    triangle ``self`` names) for ``A`` and ``B``, those ``output_mask`` asks for
    (:func:`triangular_adjoint_solve`, :func:`triangular_coefficient_gradient`). Not yet summed over
    broadcast batch dims."""
    grad_self = None
    grad_B = None
    if output_mask[0] or output_mask[1]:
        solved = triangular_adjoint_solve(grad, self, upper, left, unitriangular)
        if output_mask[0]:
            grad_self = triangular_coefficient_gradient(solved, result, upper, left, unitriangular)
        if output_mask[1]:
            grad_B = solved
    return grad_self, grad_B


@helper
def linalg_solve_triangular_forward_AD(A_t: Tensor, B_t: Tensor, A: Tensor, X: Tensor, upper: bool, left: bool,
                                       unitriangular: bool) -> Tensor:
    """Tangent of ``X = solve_triangular(A, B)``: differentiating ``A X = B`` gives ``A dX + dA X = dB``
    (``dX A + X dA = dB`` on the right), so ``dX`` is the same solve of ``dB - dA X`` (``dB - X dA``),
    with ``dA`` the triangle of ``A_t`` the solve reads (the other entries of ``A`` do not change ``X``)."""
    read = triangle(A_t, upper, unitriangular)
    moved = B_t - at.matmul(read, X) if left else B_t - at.matmul(X, read)
    return at.linalg_solve_triangular(A, moved, upper=upper, left=left, unitriangular=unitriangular)


@derivative("linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True, "
            "bool unitriangular=False) -> Tensor")
def linalg_solve_triangular(self, B, *, upper, left=True, unitriangular=False):
    result = at.linalg_solve_triangular(self, B, upper=upper, left=left, unitriangular=unitriangular)
    self_sizes = self.sizes()
    B_sizes = B.sizes()
    def backward(grad, *, needs_input_grad):
        # the masks stay here, so B's gradient alone (the transpose of a solve in B) reads no result
        solved = triangular_adjoint_solve(grad, self, upper, left, unitriangular)
        grad_self = sum_to(triangular_coefficient_gradient(solved, result, upper, left, unitriangular),
                           self_sizes) if needs_input_grad[0] else None
        grad_B = sum_to(solved, B_sizes) if needs_input_grad[1] else None
        return grad_self, grad_B
    def jvp(self_t, B_t):
        result_t = linalg_solve_triangular_forward_AD(self_t, B_t, self, result, upper, left, unitriangular)
        return result_t
    return result, backward


# ----------------------------------------------------------------------------- matrix exponential
@helper
def linalg_matrix_exp_differential(self: Tensor, grad: Tensor, adjoint: bool) -> Tensor:
    """The differential of ``exp`` at ``A = self`` applied to ``E = grad``, or its adjoint (``adjoint``).
    ``exp([[A, E], [0, A]]) = [[exp(A), D], [0, exp(A)]]`` with ``D = int_0^1 exp(sA) E exp((1-s)A) ds``,
    the differential of ``exp`` at ``A`` in the direction ``E`` (the block matrix's exponential solves
    ``X' = M X``, whose upper right block is ``D``). Its adjoint under ``<X, Y> = Re tr(X^H Y)`` is the
    same integral with ``A^H`` for ``A``: the differential at ``A^H`` applied to the gradient."""
    n = self.size(-1)
    base = at.conj(matrix_transpose(self)) if adjoint else self
    block = at.cat([at.cat([base, grad], -1), at.cat([at.zeros_like(base), base], -1)], -2)
    # a new tensor, not a view of the block's exponential: torch's forward AD wants a view's tangent
    # laid out as its primal, which the override's nested call (this exponential) does not give
    return at.clone(at.narrow(at.narrow(at.linalg_matrix_exp(block), -2, 0, n), -1, n, n))


@derivative("linalg_matrix_exp(Tensor self) -> Tensor")
def linalg_matrix_exp(self):
    result = at.linalg_matrix_exp(self)
    def backward(grad):
        return linalg_matrix_exp_differential(self, grad, True)
    def jvp(self_t):
        result_t = linalg_matrix_exp_differential(self, self_t, False)
        return result_t
    return result, backward


# ----------------------------------------------------------------------------- vector norms
@helper
def is_infinite(value: float) -> bool:
    """Whether ``value`` is +inf or -inf: the only non-zero floats that doubling leaves unchanged."""
    return value != 0.0 and value * 2.0 == value


@helper
def keep_reduced_dims(output: Tensor, dim: list[int] | None, keepdim: bool, ndim: int) -> Tensor:
    """``output`` of a reduction over ``dim`` of an ``ndim``-dim tensor with the reduced dims back
    as size 1 (not expanded), so that it broadcasts against the input."""
    restored = output
    if not keepdim and output.dim() > 0:    # a 0-d output broadcasts as it is
        for d in range(ndim):
            if is_reduced_dim(dim, d, ndim):
                restored = at.unsqueeze(restored, d)
    return restored


@helper
def vector_norm_backward(grad: Tensor, self: Tensor, p: float, norm: Tensor, dim: list[int] | None,
                         keepdim: bool) -> Tensor:
    """Gradient of ``norm = (sum |x_i|^p)^(1/p)`` over ``dim`` (``None`` or empty: every dim).

    ``d norm / d x_i = sign(x_i) |x_i|^(p-1) / norm^(p-1)``, which is ``sign(x_i)`` for p = 1 and
    ``x_i / norm`` for p = 2. p = 0 counts the non-zero elements: a step function, gradient 0.
    p = +-inf is ``max``/``min`` of ``|x|``: the gradient ``sign(x_i)`` is shared evenly by the
    elements where ``|x_i|`` is the extreme (none where a NaN makes the norm NaN: gradient 0). Where the norm is 0 the gradient is 0 (the
    subgradient torch picks), and so is ``|x_i|^(p-1)`` at ``x_i = 0`` for p < 1 (where it is
    infinite); ones stand in for those zeros before any division or negative power, so no NaN
    reaches the double backward either. The factor that depends on the norm is computed at the
    reduced size and broadcast once: p = 2 costs one full-size product.
    """
    if p == 0.0:
        return at.zeros_like(self)
    grad_kept = keep_reduced_dims(grad, dim, keepdim, self.dim())
    if p == 1.0:
        return at.sign(self) * grad_kept
    norm_kept = keep_reduced_dims(norm, dim, keepdim, self.dim())
    if is_infinite(p):
        # a NaN norm ties with no element: the count is floored at 1 so the gradient is 0, as torch's
        extreme = at.eq(at.abs(self), norm_kept)
        ties = at.clamp_min(at.sum(extreme, dim, True), 1)
        shares = at.where(extreme, at.sign(self), at.zeros_like(self))
        return shares * at.div(grad_kept, ties)
    norm_is_zero = at.eq(norm_kept, 0.0)
    scale_zeros = at.zeros_like(grad_kept)
    safe_norm = at.where(norm_is_zero, at.ones_like(norm_kept), norm_kept)
    if p == 2.0:
        return self * at.where(norm_is_zero, scale_zeros, grad_kept / safe_norm)
    safe_abs = at.where(at.eq(self, 0.0), at.ones_like(self), at.abs(self))
    scale = at.where(norm_is_zero, scale_zeros, grad_kept / at.pow(safe_norm, p - 1.0))
    return at.sign(self) * at.pow(safe_abs, p - 1.0) * scale


@helper
def vector_norm_jvp(self: Tensor, self_t: Tensor, p: float, norm: Tensor, dim: list[int] | None,
                    keepdim: bool) -> Tensor:
    """Tangent of the p-norm over ``dim``: ``sum_i (d norm / d x_i) t_i`` with the derivative of
    :func:`vector_norm_backward` (its gradient for an incoming gradient of ones)."""
    slope = vector_norm_backward(at.ones_like(norm), self, p, norm, dim, keepdim)
    return at.sum(slope * self_t, dim, keepdim)


@derivative("linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, "
            "ScalarType? dtype=None) -> Tensor")
def linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    result = at.linalg_vector_norm(self, ord, dim, keepdim, dtype=dtype)
    self_dtype = self.scalar_type()
    def backward(grad):
        gradient = vector_norm_backward(grad, self, ord, result, dim, keepdim)
        if dtype is None:
            return gradient
        else:
            return at._to_copy(gradient, dtype=self_dtype)
    def jvp(self_t):
        tangent = vector_norm_jvp(self, self_t, ord, result, dim, keepdim)
        if dtype is None:
            return tangent
        else:
            return at._to_copy(tangent, dtype=dtype)
    return result, backward


@derivative("norm.Scalar(Tensor self, Scalar p=2) -> Tensor")
def norm_scalar(self, p=2):
    result = at.norm(self, p)
    every_dim = []
    for d in range(self.dim()):
        every_dim.append(d)
    def backward(grad):
        return vector_norm_backward(grad, self, p, result, every_dim, False)
    def jvp(self_t):
        result_t = vector_norm_jvp(self, self_t, p, result, every_dim, False)
        return result_t
    return result, backward


@derivative("norm.ScalarOpt_dim(Tensor self, Scalar? p, int[1] dim, bool keepdim=False) -> Tensor")
def norm_scalaropt_dim(self, p, dim, keepdim=False):
    result = at.norm(self, p, dim, keepdim)
    def backward(grad):
        if p is None:       # the 2-norm
            return vector_norm_backward(grad, self, 2.0, result, dim, keepdim)
        else:
            return vector_norm_backward(grad, self, p, result, dim, keepdim)
    def jvp(self_t):
        if p is None:
            return vector_norm_jvp(self, self_t, 2.0, result, dim, keepdim)
        else:
            return vector_norm_jvp(self, self_t, p, result, dim, keepdim)
    return result, backward
