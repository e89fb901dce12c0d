"""Selection by mask or index: ``where.self``, ``gather``, ``scatter_add``."""
from __future__ import annotations

from formulas import at, derivative
from formulas.helpers import sum_to


@derivative("where.self(Tensor condition, Tensor self, Tensor other) -> Tensor")
def where_self(condition, self, other):
    result = at.where(condition, self, other)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        zeros = at.zeros_like(grad)
        grad_self = sum_to(at.where(condition, grad, zeros), self_sizes) if needs_input_grad[1] else None
        grad_other = sum_to(at.where(condition, zeros, grad), other_sizes) if needs_input_grad[2] else None
        return None, grad_self, grad_other
    def jvp(self_t, other_t):
        # the condition is boolean: no tangent
        result_t = at.where(condition, self_t, other_t)
        return result_t
    return result, backward


@derivative("gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor")
def gather(self, dim, index, *, sparse_grad=False):
    result = at.gather(self, dim, index, sparse_grad=sparse_grad)
    def backward(grad):
        # grad added at index into zeros of self's shape (one in-place scatter in ATen's
        # gather_backward, which reads only self's shape); index is integral: no gradient
        return at.gather_backward(grad, self, dim, index, sparse_grad), None
    def jvp(self_t):
        # linear in self; the index has no tangent
        result_t = at.gather(self_t, dim, index, sparse_grad=sparse_grad)
        return result_t
    return result, backward


@derivative("scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor")
def scatter_add(self, dim, index, src):
    result = at.scatter_add(self, dim, index, src)
    def backward(grad, *, needs_input_grad):
        grad_self = grad if needs_input_grad[0] else None
        grad_src = at.gather(grad, dim, index) if needs_input_grad[2] else None
        return grad_self, None, grad_src
    def jvp(self_t, src_t):
        # linear in self and src; the index has no tangent
        result_t = at.scatter_add(self_t, dim, index, src_t)
        return result_t
    return result, backward
