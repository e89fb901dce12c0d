"""Formulas exercising the dialect beyond the shipped library: Tensor? and Tensor[] inputs, float[]
arguments, several differentiable outputs (either gradient may be None), needs_input_grad, while
loops in helpers, and tensors the backward reads only through metadata; jvps over the same inputs
(an absent optional tangent, a list of tangents, two output tangents) and one formula without a jvp
(``mean_all``: forward AD through it raises torch's error)."""
from __future__ import annotations

from formulas import at, derivative, helper, nondifferentiable

nondifferentiable(
    "mul.Tensor(Tensor self, Tensor other) -> Tensor",
    "mul.Scalar(Tensor self, Scalar other) -> Tensor",
    "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
    "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    "expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)",
)


@helper
def leading_dims(ndim: int, keep_last: bool) -> list[int]:
    """``[0, 1, ..., ndim - 2]`` (all but the last dim) or every dim."""
    dims = []
    d = 0
    stop = ndim - 1 if keep_last else ndim
    while d < stop:
        dims.append(d)
        d = d + 1
    return dims


@helper
def same_sizes(sizes: list[int]) -> list[int]:
    """``sizes`` itself: a list parameter returned (a view in C++, copied on return)."""
    return sizes


@derivative("axpy(Tensor x, Tensor? y, Scalar alpha=1) -> Tensor")
def axpy(x, y, alpha=1):
    result = at.mul(x, alpha) if y is None else at.add(at.mul(x, alpha), y)
    def backward(grad, *, needs_input_grad):
        grad_x = at.mul(grad, alpha) if needs_input_grad[0] else None
        grad_y = grad if needs_input_grad[1] and y is not None else None
        return grad_x, grad_y
    def jvp(x_t, y_t):
        # an absent optional input has no tangent either
        result_t = at.mul(x_t, alpha) if y_t is None else at.add(at.mul(x_t, alpha), y_t)
        return result_t
    return result, backward


@derivative("moments(Tensor self, int[] dims) -> (Tensor total, Tensor squares)")
def moments(self, dims):
    total = at.sum(self, dims, True)
    squares = at.sum(at.mul(self, self), dims, True)
    def backward(grad_total, grad_squares):
        grad_self = None
        if grad_total is not None:
            grad_self = at.expand(grad_total, self.sizes())
        if grad_squares is not None:
            from_squares = at.mul(at.expand(grad_squares, self.sizes()), at.mul(self, 2.0))
            grad_self = from_squares if grad_self is None else at.add(grad_self, from_squares)
        return grad_self
    def jvp(self_t):
        total_t = at.sum(self_t, dims, True)
        squares_t = at.sum(at.mul(at.mul(self, self_t), 2.0), dims, True)
        return total_t, squares_t
    return (total, squares), backward


@derivative("weighted_sum(Tensor[] tensors, float[] weights) -> Tensor")
def weighted_sum(tensors, weights):
    tensors = list(tensors)   # a rebound input (not captured): a local copy in C++
    result = at.mul(tensors[0], weights[0])
    for i in range(1, len(tensors)):
        result = at.add(result, at.mul(tensors[i], weights[i]))
    def backward(grad):
        grads = []
        for i in range(len(weights)):
            grads.append(at.mul(grad, weights[i]))
        return grads
    def jvp(tensors_t):
        result_t = at.mul(tensors_t[0], weights[0])
        for i in range(1, len(tensors_t)):
            result_t = at.add(result_t, at.mul(tensors_t[i], weights[i]))
        return result_t
    return result, backward


@derivative("rowscale(Tensor self, Tensor scale) -> Tensor")
def rowscale(self, scale):
    result = at.mul(self, scale)
    def backward(grad, *, needs_input_grad):
        grad_self = at.mul(grad, scale) if needs_input_grad[0] else None
        grad_scale = at.sum(at.mul(grad, self), leading_dims(grad.dim(), True), False) if needs_input_grad[1] else None
        return grad_self, grad_scale
    def jvp(self_t, scale_t):
        result_t = at.add(at.mul(self_t, scale), at.mul(self, scale_t))
        return result_t
    return result, backward


@derivative("mean_all(Tensor self) -> Tensor")
def mean_all(self):
    result = at.mul(at.sum(self, leading_dims(self.dim(), False), False), 1.0 / self.numel())
    def backward(grad):
        grad = at.mul(grad, 1.0 / self.numel())   # a rebound parameter: taken by value in C++
        return at.expand(grad, same_sizes(self.sizes()))
    return result, backward
