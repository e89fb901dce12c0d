"""More matrix products: ``bmm``, ``dot``, ``mv``, ``outer`` (and ``ger``, its BLAS name), ``matmul`` (batched, broadcast batch
dims), ``addmv``, ``baddbmm``, ``addbmm``, ``addr``.

Every product is bilinear: the gradient of one factor is the incoming gradient multiplied by
the other factor transposed, and the jvp is the product rule.
"""
from __future__ import annotations

from formulas import Tensor, at, derivative, helper
from formulas.helpers import sum_to


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

@derivative("ger(Tensor self, Tensor vec2) -> Tensor")
def ger(self, vec2):
    # ger is outer under its BLAS name
    result = at.ger(self, vec2)
    def backward(grad, *, needs_input_grad):
        grad_self = at.mv(grad, vec2) if needs_input_grad[0] else None
        grad_vec2 = at.mv(at.t(grad), self) if needs_input_grad[1] else None
        return grad_self, grad_vec2
    def jvp(self_t, vec2_t):
        result_t = at.ger(self_t, vec2) + at.ger(self, vec2_t)
        return result_t
    return result, backward


@derivative("matmul(Tensor self, Tensor other) -> Tensor")
def matmul(self, other):
    result = at.matmul(self, other)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        # matmul promotes a vector self (n,) to (1, n) and a vector other (n,) to (n, 1), multiplies
        # with broadcast batch dims, and drops the added dims: undo each step on the gradient
        self_matrix = at.unsqueeze(self, 0) if len(self_sizes) == 1 else self
        other_matrix = at.unsqueeze(other, 1) if len(other_sizes) == 1 else other
        grad_matrix = grad
        if len(other_sizes) == 1:
            grad_matrix = at.unsqueeze(grad_matrix, -1)
        if len(self_sizes) == 1:
            grad_matrix = at.unsqueeze(grad_matrix, -2)
        grad_self = None
        if needs_input_grad[0]:
            grad_self = sum_to(at.matmul(grad_matrix, matrix_transpose(other_matrix)), self_matrix.sizes())
            if len(self_sizes) == 1:
                grad_self = at.reshape(grad_self, self_sizes)
        grad_other = None
        if needs_input_grad[1]:
            grad_other = sum_to(at.matmul(matrix_transpose(self_matrix), grad_matrix), other_matrix.sizes())
            if len(other_sizes) == 1:
                grad_other = at.reshape(grad_other, other_sizes)
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
        # the scalings are skipped when they are 1 (one kernel less each)
        grad_self = sum_to(grad if beta == 1 else at.mul(grad, beta), self_sizes) if needs_input_grad[0] else None
        grad_mat = None
        if needs_input_grad[1]:
            grad_mat = at.outer(grad, vec) if alpha == 1 else at.mul(at.outer(grad, vec), alpha)
        grad_vec = None
        if needs_input_grad[2]:
            grad_vec = at.mv(at.t(mat), grad) if alpha == 1 else at.mul(at.mv(at.t(mat), grad), alpha)
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
        # the scalings are skipped when they are 1 (one kernel less each)
        grad_self = sum_to(grad if beta == 1 else at.mul(grad, beta), self_sizes) if needs_input_grad[0] else None
        grad_vec1 = None
        if needs_input_grad[1]:
            grad_vec1 = at.mv(grad, vec2) if alpha == 1 else at.mul(at.mv(grad, vec2), alpha)
        grad_vec2 = None
        if needs_input_grad[2]:
            grad_vec2 = at.mv(at.t(grad), vec1) if alpha == 1 else at.mul(at.mv(at.t(grad), vec1), alpha)
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
