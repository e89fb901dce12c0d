"""Neural-network functions: softmax, losses, ``linear``, ``embedding``, layer norm, dropout."""
from __future__ import annotations

import math

from typing import Any

import numpy as np

from reference_engine.factories import default_generator
from reference_engine.kernels.registry import kernel
from reference_engine.kernels.common import _array, _np_dtype, _TORCH_DTYPE_NAMES, _wrap_dim
from reference_engine.kernels.pointwise import _floating


# ----------------------------------------------------------------------------- softmax
def _keep(x: np.ndarray, dim: int) -> int | None:
    return None if x.ndim == 0 else _wrap_dim(dim, x.ndim)


def _check_softmax_input(name: str, x: np.ndarray, dim: int) -> None:
    """torch has no integer or bool softmax kernel (pass ``dtype=`` to compute in a float)."""
    if x.dtype.kind != "f":
        last = x.ndim == 0 or _wrap_dim(dim, x.ndim) == x.ndim - 1
        raise NotImplementedError(f'"{name}_{"lastdim_" if last else ""}kernel_impl" not implemented for '
                                  f"'{_TORCH_DTYPE_NAMES[x.dtype.name]}'")


@kernel("_softmax")
def softmax(x, dim, half_to_float=False):
    x = _array(x)
    _check_softmax_input("softmax", x, dim)
    axis = _keep(x, dim)
    shifted = x - np.max(x, axis=axis, keepdims=True) if x.size else x
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


@kernel("_log_softmax")
def log_softmax(x, dim, half_to_float=False):
    x = _array(x)
    _check_softmax_input("log_softmax", x, dim)
    axis = _keep(x, dim)
    shifted = x - np.max(x, axis=axis, keepdims=True) if x.size else x
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


# ----------------------------------------------------------------------------- neural-network functions
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduce_loss(elements: np.ndarray, reduction: int) -> np.ndarray:
    """torch's ``reduction`` enum (0 none, 1 mean, 2 sum) applied to elementwise losses."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction == 1:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(np.mean(elements) if elements.size else np.float64("nan"), dtype=elements.dtype)
    return np.asarray(np.sum(elements), dtype=elements.dtype) if reduction == 2 else elements


@kernel("linear")
def linear(x, weight, bias=None):
    if np.ndim(weight) == 1 and bias is None:      # torch: input @ weight, the feature dim left out
        return np.matmul(x, weight)
    if np.ndim(weight) != 2:
        raise RuntimeError(f"linear: weight must be a 2D tensor (out_features, in_features), got {np.ndim(weight)}D")
    product = np.matmul(x, np.transpose(weight))
    return product if bias is None else product + bias


@kernel("softmax.int")
def softmax_int(x, dim, dtype=None):
    return softmax(np.asarray(x, dtype=_np_dtype(dtype)), dim)


@kernel("log_softmax.int")
def log_softmax_int(x, dim, dtype=None):
    return log_softmax(np.asarray(x, dtype=_np_dtype(dtype)), dim)


@kernel("mse_loss")
def mse_loss(x, target, reduction=1):
    diff = np.subtract(x, target)
    return _reduce_loss(diff * diff, reduction)


@kernel("l1_loss")
def l1_loss(x, target, reduction=1):
    return _reduce_loss(np.abs(np.subtract(x, target)), reduction)


@kernel("smooth_l1_loss")
def smooth_l1_loss(x, target, reduction=1, beta=1.0):
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    size = np.abs(np.subtract(x, target))
    if beta == 0:
        return _reduce_loss(size, reduction)
    return _reduce_loss(np.where(size < beta, 0.5 * size * size / beta, size - 0.5 * beta), reduction)


@kernel("huber_loss")
def huber_loss(x, target, reduction=1, delta=1.0):
    if delta <= 0:
        raise RuntimeError(f"huber_loss does not support non-positive values for delta.")
    size = np.abs(np.subtract(x, target))
    return _reduce_loss(np.where(size < delta, 0.5 * size * size, delta * (size - 0.5 * delta)), reduction)


def _same_size(name: str, x: np.ndarray, target: np.ndarray) -> None:
    if np.shape(x) != np.shape(target):
        raise ValueError(f"{name}: using a target size ({np.shape(target)}) that is different to the input size "
                         f"({np.shape(x)}) is deprecated. Please ensure they have the same size.")


@kernel("binary_cross_entropy")
def binary_cross_entropy(x, target, weight=None, reduction=1):
    x, target = _array(x), _array(target)
    _same_size("binary_cross_entropy", x, target)
    if x.size and not ((x >= 0) & (x <= 1)).all():
        raise RuntimeError("all elements of input should be between 0 and 1")
    with np.errstate(divide="ignore"):     # torch clamps the logs at -100
        log_x, log_complement = np.maximum(np.log(x), -100), np.maximum(np.log1p(-x), -100)
    elements = -(target * log_x + (1 - target) * log_complement)
    return _reduce_loss(elements if weight is None else elements * weight, reduction)


@kernel("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(x, target, weight=None, pos_weight=None, reduction=1):
    x, target = _array(x), _array(target)
    _same_size("binary_cross_entropy_with_logits", x, target)
    softplus_negative = np.logaddexp(0, -x)          # -log sigmoid(x), stable
    log_weight = 1 if pos_weight is None else 1 + (pos_weight - 1) * target
    elements = (1 - target) * x + log_weight * softplus_negative
    return _reduce_loss(elements if weight is None else elements * weight, reduction)


def _nll_picks(x, target, weight, ignore_index):
    """Per target: the class weight (0 where ignored) and the index of the picked class."""
    x, target = _array(x), _array(target)
    if x.ndim not in (1, 2):
        raise ValueError(f"input tensor should be 1D or 2D, got {x.ndim}D")
    if target.ndim != x.ndim - 1 or (x.ndim == 2 and target.shape[0] != x.shape[0]):
        raise ValueError(f"Expected input batch_size ({x.shape[0] if x.ndim == 2 else 1}) to match target "
                         f"batch_size ({target.shape[0] if target.ndim else 1}).")
    classes = x.shape[-1]
    kept = target != ignore_index
    if ((target[kept] < 0) | (target[kept] >= classes)).any():
        bad = target[kept][(target[kept] < 0) | (target[kept] >= classes)][0]
        raise IndexError(f"Target {bad} is out of bounds.")
    safe = np.where(kept, target, 0)
    class_weight = np.ones(classes, x.dtype) if weight is None else _array(weight)
    return np.where(kept, class_weight[safe], 0).astype(x.dtype), safe


@kernel("nll_loss_forward")
def nll_loss_forward(x, target, weight, reduction, ignore_index):
    x = _array(x)
    row_weight, safe = _nll_picks(x, target, weight, ignore_index)
    picked = np.take_along_axis(x.reshape(-1, x.shape[-1]), safe.reshape(-1, 1), axis=1).reshape(safe.shape)
    with np.errstate(invalid="ignore"):     # an ignored target's entry is skipped, as torch (not 0 * inf)
        elements = np.where(np.asarray(target) == ignore_index, np.zeros((), x.dtype), -row_weight * picked)
    total = np.asarray(np.sum(row_weight), dtype=x.dtype)
    if reduction == 0:      # torch reports the total weight of a 1-D input only
        return elements, total if x.ndim == 1 else np.zeros((), x.dtype)
    if reduction == 2:
        return np.asarray(np.sum(elements), dtype=x.dtype), total
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.sum(elements) / total, dtype=x.dtype), total


@kernel("nll_loss_backward")
def nll_loss_backward(grad_output, x, target, weight, reduction, ignore_index, total_weight):
    x, grad_output = _array(x), _array(grad_output)
    row_weight, safe = _nll_picks(x, target, weight, ignore_index)
    scale = -row_weight * grad_output
    if reduction == 1:
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = scale / total_weight
        # an ignored target contributes nothing, not 0 / 0: with every target ignored the loss
        # is NaN (0 / 0) but its gradient is zero, as torch's
        scale = np.where(np.asarray(target) != ignore_index, scale, 0)
    out = np.zeros(x.shape, grad_output.dtype)
    rows = out.reshape(-1, x.shape[-1])
    np.put_along_axis(rows, safe.reshape(-1, 1), np.broadcast_to(scale, safe.shape).reshape(-1, 1), axis=1)
    return out


@kernel("embedding")
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    weight, indices = _array(weight), _array(indices)
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    if indices.size and (indices.min() < 0 or indices.max() >= weight.shape[0]):
        raise IndexError("index out of range in self")
    return np.take(weight, indices, axis=0)


@kernel("embedding_dense_backward")
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    grad_output, indices = _array(grad_output), _array(indices).reshape(-1)
    rows = grad_output.reshape(indices.size, -1) if indices.size else grad_output.reshape(0, grad_output.shape[-1])
    out = np.zeros((num_weights, rows.shape[1]), grad_output.dtype)
    np.add.at(out, indices, rows)
    if scale_grad_by_freq:
        counts = np.bincount(indices, minlength=num_weights)
        out /= np.maximum(counts, 1)[:, None]
    if padding_idx >= 0:
        out[padding_idx] = 0
    return out


# ----------------------------------------------------------------------------- layer_norm, dropout
def _layer_norm_checks(x: np.ndarray, normalized_shape: list[int], weight: Any, bias: Any) -> None:
    """torch's argument checks of layer normalization."""
    if not normalized_shape:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
                           f"element, but got normalized_shape = {list(normalized_shape)}")
    for name, param in (("weight", weight), ("bias", bias)):
        if param is not None and list(_array(param).shape) != list(normalized_shape):
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                               f"{list(_array(param).shape)} and normalized_shape = {list(normalized_shape)}")
    k = len(normalized_shape)
    if x.ndim < k or list(x.shape[x.ndim - k:]) != list(normalized_shape):
        expected = ", ".join(map(str, normalized_shape))
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {expected}], but got input of size{list(x.shape)}")


@kernel("native_layer_norm")
def native_layer_norm(x, normalized_shape, weight, bias, eps):
    """``(out, mean, rstd)``: ``mean`` and ``rstd`` keep the normalized dims as size 1 (torch's
    mean 0 and rstd NaN when those dims hold no element)."""
    x = _floating(x)
    _layer_norm_checks(x, normalized_shape, weight, bias)
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    kept = x.shape[:x.ndim - len(normalized_shape)] + (1,) * len(normalized_shape)
    with np.errstate(all="ignore"):
        if math.prod(normalized_shape) == 0:
            mean = np.zeros(kept, x.dtype)
            rstd = np.full(kept, np.nan, x.dtype)
        else:
            mean = np.mean(x, axis=axes, keepdims=True)
            centered = x - mean
            variance = np.mean(centered * centered, axis=axes, keepdims=True)
            rstd = 1 / np.sqrt(variance + eps)
        out = (x - mean) * rstd
        if weight is not None:
            out = out * _array(weight)
        if bias is not None:
            out = out + _array(bias)
    return out.astype(x.dtype), mean.astype(x.dtype), rstd.astype(x.dtype)


@kernel("layer_norm")
def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    return native_layer_norm(x, normalized_shape, weight, bias, eps)[0]


@kernel("native_dropout")
def native_dropout(x, p, train):
    """``(output, mask)``: in training (``train`` None or True) each element is kept with probability
    ``1 - p`` (the engine's default generator; torch's random stream cannot be reproduced) and
    scaled by ``1 / (1 - p)``; in evaluation the identity with an all-true mask. As torch, an
    empty input gives an empty mask of its own dtype."""
    x = _array(x)
    if x.size == 0:
        return x.copy(), np.empty(x.shape, x.dtype)
    if train is not None and not train:
        return x.copy(), np.ones(x.shape, np.bool_)
    keep = 1.0 - p
    if not 0.0 <= keep <= 1.0:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={keep}")
    mask = default_generator.numpy.random(x.shape) < keep
    scale = 0.0 if keep == 0.0 else 1.0 / keep
    return x * mask * np.asarray(scale, x.dtype), mask


@kernel("native_dropout_backward")
def native_dropout_backward(grad_output, mask, scale):
    """``grad_output * mask * scale`` (broadcast; a mask of any dtype, as torch's CPU kernel takes)."""
    grad_output = _array(grad_output)
    product = grad_output * _array(mask)
    return product * np.asarray(scale, product.dtype)
