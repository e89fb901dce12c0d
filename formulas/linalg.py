"""Matrix products: ``mm``, ``addmm`` and the transpose ``t`` their gradients use."""
from __future__ import annotations

from formulas import at, derivative
from formulas.helpers import sum_to


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


@derivative("t(Tensor(a) self) -> Tensor(a)", jvp="auto_linear")
def t(self):
    result = at.t(self)
    def backward(grad):
        return at.t(grad)
    return result, backward
