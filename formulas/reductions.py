"""Reductions: ``sum``, ``sum.dim_IntList``, ``mean.dim``, ``var_mean.dim``, ``max.dim`` and the softmaxes."""
from __future__ import annotations

from formulas import at, derivative
from formulas.helpers import gather_with_keepdimed_indices, reduced_numel, sum_backward, wrap_dim


@derivative("sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", jvp="auto_linear")
def sum_all(self, *, dtype=None):
    result = at.sum(self, dtype=dtype)
    self_sizes = self.sizes()
    def backward(grad):
        return at.expand(grad, self_sizes)
    return result, backward


@derivative("sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
            jvp="auto_linear")
def sum_dim_intlist(self, dim, keepdim=False, *, dtype=None):
    result = at.sum(self, dim, keepdim, dtype=dtype)
    self_sizes = self.sizes()
    def backward(grad):
        return sum_backward(grad, self_sizes, dim, keepdim)
    return result, backward


@derivative("mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
            jvp="auto_linear")
def mean_dim(self, dim, keepdim=False, *, dtype=None):
    result = at.mean(self, dim, keepdim, dtype=dtype)
    self_sizes = self.sizes()
    count = reduced_numel(self_sizes, dim)
    def backward(grad):
        return at.div(sum_backward(grad, self_sizes, dim, keepdim), count)
    return result, backward


@derivative("var_mean.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> (Tensor, Tensor)")
def var_mean_dim(self, dim, unbiased=True, keepdim=False):
    var, mean = at.var_mean(self, dim, unbiased, keepdim)
    self_sizes = self.sizes()
    count = reduced_numel(self_sizes, dim)
    divisor = count - 1 if unbiased else count
    def backward(grad_var, grad_mean):
        # either gradient may be None (only the other output was used)
        grad_self = None
        if grad_var is not None:
            # d var / d x = 2 (x - mean) / divisor: the mean's own dependence on x sums to zero;
            # the factors scale the reduced gradient, before it is expanded
            centered = self - sum_backward(mean, self_sizes, dim, keepdim)
            grad_self = sum_backward(at.div(at.mul(grad_var, 2), divisor), self_sizes, dim, keepdim) * centered
        if grad_mean is not None:
            from_mean = sum_backward(at.div(grad_mean, count), self_sizes, dim, keepdim)
            grad_self = from_mean if grad_self is None else grad_self + from_mean
        return grad_self
    def jvp(self_t):
        # d var = 2 sum((x - mean) x_t) / divisor; d mean = mean(x_t)
        centered = self - sum_backward(mean, self_sizes, dim, keepdim)
        var_t = at.div(at.mul(at.sum(centered * self_t, dim, keepdim), 2), divisor)
        mean_t = at.mean(self_t, dim, keepdim)
        return var_t, mean_t
    return (var, mean), backward


@derivative("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
            output_differentiability=[True, False])
def max_dim(self, dim, keepdim=False):
    values, indices = at.max(self, dim, keepdim)
    self_sizes = self.sizes()
    reduced_dim = wrap_dim(dim, self.dim())
    def backward(grad):
        return at.value_selecting_reduction_backward(grad, reduced_dim, indices, self_sizes, keepdim)
    def jvp(self_t):
        return gather_with_keepdimed_indices(self_t, reduced_dim, indices, keepdim)
    return (values, indices), backward


@derivative("_softmax(Tensor self, int dim, bool half_to_float) -> Tensor")
def _softmax(self, dim, half_to_float):
    result = at._softmax(self, dim, half_to_float)
    self_dtype = self.scalar_type()
    def backward(grad):
        # d softmax_i / d x_j = y_i (delta_ij - y_j), fused in ATen's _softmax_backward_data
        return at._softmax_backward_data(grad, result, dim, self_dtype)
    def jvp(self_t):
        # the Jacobian diag(y) - y y^T is symmetric: the backward's expression on the tangent
        result_t = result * (self_t - at.sum(self_t * result, [dim], True))
        return result_t
    return result, backward


@derivative("_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor")
def _log_softmax(self, dim, half_to_float):
    result = at._log_softmax(self, dim, half_to_float)
    self_dtype = self.scalar_type()
    def backward(grad):
        # d log_softmax_i / d x_j = delta_ij - softmax_j, softmax = exp(result); fused in
        # ATen's _log_softmax_backward_data
        return at._log_softmax_backward_data(grad, result, dim, self_dtype)
    def jvp(self_t):
        # (I - 1 softmax^T) x_t
        result_t = self_t - at.sum(at.exp(result) * self_t, [dim], True)
        return result_t
    return result, backward
