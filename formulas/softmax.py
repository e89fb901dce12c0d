"""Softmax and log-softmax along a dim: ATen's ``_softmax``/``_log_softmax`` and the
``softmax.int``/``log_softmax.int`` users call (with an optional dtype). Their backwards call the
fused ``_softmax_backward_data``/``_log_softmax_backward_data`` of ``backward_ops.py``.
"""
from __future__ import annotations

from formulas import Tensor, at, derivative, helper


@helper
def softmax_jvp(self_t: Tensor, result: Tensor, dim: int) -> Tensor:
    """The tangent of ``result = softmax(self)`` along ``dim``: its Jacobian ``diag(y) - y y^T`` is
    symmetric, so the backward's expression ``y (x_t - sum(x_t y))`` on the tangent."""
    return result * (self_t - at.sum(self_t * result, [dim], True))


@helper
def log_softmax_jvp(self_t: Tensor, result: Tensor, dim: int) -> Tensor:
    """The tangent of ``result = log_softmax(self)`` along ``dim``: ``(I - 1 softmax^T) x_t``,
    ``softmax = exp(result)``."""
    return self_t - at.sum(at.exp(result) * self_t, [dim], True)


@derivative("_softmax(Tensor self, int dim, bool half_to_float) -> Tensor")
def _softmax(self, dim, half_to_float):
    result = at._softmax(self, dim, half_to_float)
    self_dtype = self.scalar_type()
    def backward(grad):
        # d softmax_i / d x_j = y_i (delta_ij - y_j), fused in ATen's _softmax_backward_data
        return at._softmax_backward_data(grad, result, dim, self_dtype)
    def jvp(self_t):
        result_t = softmax_jvp(self_t, result, dim)
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
        result_t = log_softmax_jvp(self_t, result, dim)
        return result_t
    return result, backward


@derivative("softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor")
def softmax_int(self, dim, dtype=None):
    result = at.softmax(self, dim, dtype)
    result_dtype = result.scalar_type()
    def backward(grad):
        # d softmax_i / d x_j = y_i (delta_ij - y_j)
        return at._softmax_backward_data(grad, result, dim, result_dtype)
    def jvp(self_t):
        result_t = softmax_jvp(self_t, result, dim)
        return result_t
    return result, backward


@derivative("log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor")
def log_softmax_int(self, dim, dtype=None):
    result = at.log_softmax(self, dim, dtype)
    result_dtype = result.scalar_type()
    def backward(grad):
        # d log_softmax_i / d x_j = delta_ij - softmax_j
        return at._log_softmax_backward_data(grad, result, dim, result_dtype)
    def jvp(self_t):
        result_t = log_softmax_jvp(self_t, result, dim)
        return result_t
    return result, backward
