"""Fused backward operators (``tanh_backward``, ``threshold_backward``, ``gather_backward``...)."""
from __future__ import annotations

import numpy as np

from reference_engine.kernels.registry import kernel
from reference_engine.kernels.common import _array, _np_dtype, _wrap_dim
from reference_engine.kernels.pointwise import _erf, _floating
from reference_engine.kernels.indexing import added_at
from reference_engine.kernels.nn import _keep, embedding_dense_backward


# ----------------------------------------------------------------------------- fused backward ops
@kernel("tanh_backward")
def tanh_backward(grad_output, output):
    return grad_output * (1 - output * output)


@kernel("sigmoid_backward")
def sigmoid_backward(grad_output, output):
    return grad_output * (1 - output) * output


@kernel("threshold_backward")
def threshold_backward(grad_output, x, threshold):
    grad_output = _array(grad_output)
    return np.where(_array(x) <= threshold, np.zeros((), grad_output.dtype), grad_output)


@kernel("hardtanh_backward")
def hardtanh_backward(grad_output, x, min_val, max_val):
    grad_output, x = _array(grad_output), _array(x)
    return np.where((x <= min_val) | (x >= max_val), np.zeros((), grad_output.dtype), grad_output)


@kernel("leaky_relu_backward")
def leaky_relu_backward(grad_output, x, negative_slope, self_is_result):
    if self_is_result and negative_slope < 0:
        raise RuntimeError("In-place leakyReLu backward calculation is triggered with a negative slope which is "
                           "not supported. This is caused by calling in-place forward function with a negative "
                           "slope, please call out-of-place version instead.")
    grad_output = _array(grad_output)
    return np.where(_array(x) > 0, grad_output, grad_output * negative_slope)


@kernel("hardswish_backward")
def hardswish_backward(grad_output, x):
    grad_output, x = _array(grad_output), _array(x)
    inside = grad_output * (x / 3 + 0.5)
    return np.where(x <= -3, np.zeros((), grad_output.dtype), np.where(x < 3, inside, grad_output))


@kernel("elu_backward")
def elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result):
    grad_output, y = _array(grad_output), _array(self_or_result)
    with np.errstate(all="ignore"):
        negative = y + alpha * scale if is_result else np.exp(y * input_scale) * (alpha * scale)
        slope = np.where(y <= 0, negative * input_scale, scale)       # NaN: the positive branch, as torch
    return (grad_output * slope).astype(np.result_type(grad_output, y), copy=False)


@kernel("gelu_backward")
def gelu_backward(grad_output, x, approximate="none"):
    grad_output, x = _array(grad_output), _floating(x)
    with np.errstate(all="ignore"):
        if approximate == "tanh":
            inner = np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))
            slope = 0.7978845608028654 * (1 + 0.134145 * x * x)
            derivative = 0.5 * (1 + inner) + 0.5 * x * (1 - inner * inner) * slope
        elif approximate == "none":
            derivative = 0.5 * (1 + _erf(x * 0.7071067811865476)) + x * np.exp(-0.5 * x * x) * 0.3989422804014327
        else:
            raise RuntimeError("approximate argument must be either none or tanh.")
    return (grad_output * derivative).astype(np.result_type(grad_output, x), copy=False)


@kernel("softplus_backward")
def softplus_backward(grad_output, x, beta, threshold):
    grad_output, x = _array(grad_output), _floating(x)
    with np.errstate(all="ignore"):
        scaled = x * beta
        slope = np.where(scaled > threshold, 1, 1 / (1 + np.exp(-scaled)))
    return (grad_output * slope).astype(np.result_type(grad_output, x), copy=False)


@kernel("softshrink_backward", "hardshrink_backward")
def shrink_backward(grad_output, x, lambd):
    grad_output = _array(grad_output)
    return np.where(np.abs(_array(x)) <= lambd, np.zeros((), grad_output.dtype), grad_output)


@kernel("_softmax_backward_data")
def softmax_backward_data(grad_output, output, dim, input_dtype):
    grad_output, output = _array(grad_output), _array(output)
    axis = _keep(output, dim)
    grad = output * (grad_output - np.sum(grad_output * output, axis=axis, keepdims=True))
    return grad.astype(_np_dtype(input_dtype), copy=False)


@kernel("_log_softmax_backward_data")
def log_softmax_backward_data(grad_output, output, dim, input_dtype):
    grad_output, output = _array(grad_output), _array(output)
    axis = _keep(output, dim)
    grad = grad_output - np.exp(output) * np.sum(grad_output, axis=axis, keepdims=True)
    return grad.astype(_np_dtype(input_dtype), copy=False)


@kernel("value_selecting_reduction_backward")
def value_selecting_reduction_backward(grad, dim, indices, sizes, keepdim):
    grad, indices = _array(grad), _array(indices)
    out = np.zeros(sizes, dtype=grad.dtype)
    if not sizes:
        out[...] = grad
        return out
    if not keepdim:
        grad, indices = np.expand_dims(grad, dim), np.expand_dims(indices, dim)
    np.put_along_axis(out, indices, grad, axis=_wrap_dim(dim, len(sizes)))
    return out


@kernel("gather_backward")
def gather_backward(grad, x, dim, index, sparse_grad=False):
    return added_at(np.zeros(np.shape(x), dtype=_array(grad).dtype), dim, index, grad)


@kernel("hardsigmoid_backward")
def hardsigmoid_backward(grad_output, x):
    grad_output, x = _array(grad_output), _array(x)
    inside = (x > -3) & (x < 3)
    return np.where(inside, grad_output / 6, np.zeros((), grad_output.dtype))


@kernel("silu_backward")
def silu_backward(grad_output, x):
    grad_output, x = _array(grad_output), _floating(x)
    with np.errstate(all="ignore"):
        s = 1 / (1 + np.exp(-x))
        slope = s * (1 + x * (1 - s))
    return (grad_output * slope).astype(np.result_type(grad_output, x), copy=False)


@kernel("mish_backward")
def mish_backward(grad_output, x):
    grad_output, x = _array(grad_output), _floating(x)
    with np.errstate(all="ignore"):
        s = 1 / (1 + np.exp(-x))
        t = np.tanh(np.logaddexp(0, x))
        slope = t + x * s * (1 - t * t)
    return (grad_output * slope).astype(np.result_type(grad_output, x), copy=False)


@kernel("logit_backward")
def logit_backward(grad_output, x, eps=None):
    grad_output, x = _array(grad_output), _floating(x)
    low, high = (0.0, 1.0) if eps is None else (eps, 1 - eps)
    outside = np.nan if eps is None else 0.0          # torch's: NaN outside [0, 1], 0 outside [eps, 1 - eps]
    with np.errstate(all="ignore"):
        grad = np.where((x < low) | (x > high), outside, grad_output / (x * (1 - x)))
    return grad.astype(np.result_type(grad_output, x), copy=False)


@kernel("trace_backward")
def trace_backward(grad, sizes):
    grad = _array(grad)
    out = np.zeros(sizes, dtype=grad.dtype)
    np.fill_diagonal(out, grad)
    return out


@kernel("masked_select_backward")
def masked_select_backward(grad, x, mask):
    grad, mask = _array(grad), _array(mask)
    shape = np.shape(x)
    if shape != mask.shape:         # the mask broadcast with x (as it is when their shapes agree)
        shape = np.broadcast_shapes(shape, mask.shape)
        mask = np.broadcast_to(mask, shape)
    out = np.zeros(shape, dtype=grad.dtype)
    count = np.count_nonzero(mask)
    if grad.ndim != 1 or grad.size != count:    # as torch: grad's first elements, whatever its shape
        if count > grad.size:
            raise RuntimeError("Number of elements of source < number of ones in mask")
        grad = grad.reshape(-1)[:count]
    out[mask] = grad
    return out


@kernel("cummaxmin_backward")
def cummaxmin_backward(grad, x, indices, dim):
    x = _array(x)
    if x.size == 0:
        return x.copy()
    return added_at(np.zeros(x.shape, dtype=_array(grad).dtype), dim, indices, grad)


@kernel("embedding_backward")
def embedding_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq, sparse):
    if sparse:
        raise NotImplementedError("embedding_backward(sparse=True): the reference engine has no sparse tensors")
    return embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq)

