"""``engine.nn.functional``: torch.nn.functional's signatures over the declared operators.

Each function takes torch's arguments (``reduction='mean'``, ``inplace=False``,
``F.embedding(input, weight)``...) and calls the operator of the formula library that
computes it, so values and gradients are the formulas'. A name torch has and this module
lacks is an AttributeError saying so.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from reference_engine import functions
from reference_engine.dispatch import dispatcher
from reference_engine.missing import missing_attribute
from reference_engine.tensor import Tensor

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def _reduction(reduction: str, size_average: bool | None = None, reduce: bool | None = None) -> int:
    """The ``int reduction`` of the schemas, from torch's string (or its legacy
    ``size_average`` / ``reduce`` flags, which win when given, as in torch)."""
    if size_average is not None or reduce is not None:
        warnings.warn("size_average and reduce args will be deprecated, please use reduction='"
                      f"{_legacy(size_average, reduce)}' instead.", stacklevel=3)
        reduction = _legacy(size_average, reduce)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _REDUCTIONS[reduction]


def _legacy(size_average: bool | None, reduce: bool | None) -> str:
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


def _call(name: str, *args: Any) -> Any:
    return dispatcher.call(name, args, {})


def _maybe_inplace(name: str, input: Tensor, inplace: bool, *args: Any) -> Tensor:
    if not inplace:
        return _call(name, input, *args)
    if name == "relu":
        return input.relu_()
    raise NotImplementedError(f"{name}(..., inplace=True) is not offered by the reference engine; "
                              f"use inplace=False")


# ----------------------------------------------------------------------------- activations
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.relu``; ``inplace=True`` is ``input.relu_()``."""
    return _maybe_inplace("relu", input, inplace)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.relu6`` (``inplace=True`` raises NotImplementedError)."""
    return _maybe_inplace("relu6", input, inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.elu`` (``inplace=True`` raises NotImplementedError)."""
    return _maybe_inplace("elu", input, inplace, alpha)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.selu`` (``inplace=True`` raises NotImplementedError)."""
    return _maybe_inplace("selu", input, inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.celu`` (``inplace=True`` raises NotImplementedError)."""
    return _maybe_inplace("celu", input, inplace, alpha)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.leaky_relu`` (``inplace=True`` raises NotImplementedError)."""
    return _maybe_inplace("leaky_relu", input, inplace, negative_slope)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.hardtanh`` (``inplace=True`` raises NotImplementedError)."""
    return _maybe_inplace("hardtanh", input, inplace, min_val, max_val)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.hardsigmoid`` (``inplace=True`` raises NotImplementedError)."""
    return _maybe_inplace("hardsigmoid", input, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.hardswish`` (``inplace=True`` raises NotImplementedError)."""
    return _maybe_inplace("hardswish", input, inplace)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.silu`` (``inplace=True`` raises NotImplementedError)."""
    return _maybe_inplace("silu", input, inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.mish`` (``inplace=True`` raises NotImplementedError)."""
    return _maybe_inplace("mish", input, inplace)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.threshold`` (``inplace=True`` raises NotImplementedError)."""
    return _maybe_inplace("threshold", input, inplace, threshold, value)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``torch.nn.functional.gelu``."""
    return dispatcher.call("gelu", (input,), {"approximate": approximate})


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``torch.nn.functional.softplus``."""
    return _call("softplus", input, beta, threshold)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``torch.nn.functional.softshrink``."""
    return _call("softshrink", input, lambd)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``torch.nn.functional.hardshrink``."""
    return _call("hardshrink", input, lambd)


def logsigmoid(input: Tensor) -> Tensor:
    """``torch.nn.functional.logsigmoid``: the declared ``log_sigmoid``."""
    return _call("log_sigmoid", input)


def sigmoid(input: Tensor) -> Tensor:
    """``torch.nn.functional.sigmoid``."""
    return _call("sigmoid", input)


def tanh(input: Tensor) -> Tensor:
    """``torch.nn.functional.tanh``."""
    return _call("tanh", input)


def _softmax_dim(name: str, ndim: int) -> int:
    """torch's implicit softmax dimension (deprecated there too, with the same warning)."""
    dim = 0 if ndim in (0, 1, 3) else 1
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
                  f"dim=X as an argument.", stacklevel=3)
    return dim


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """``torch.nn.functional.softmax``; without ``dim``, torch's implicit dimension and its deprecation
    warning."""
    return input.softmax(_softmax_dim("softmax", input.dim()) if dim is None else dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """``torch.nn.functional.log_softmax``; without ``dim``, torch's implicit dimension and its deprecation
    warning."""
    return input.log_softmax(_softmax_dim("log_softmax", input.dim()) if dim is None else dim, dtype)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """``torch.nn.functional.softmin``: the softmax of ``-input``; without ``dim``, torch's implicit
    dimension and warning."""
    return (-input).softmax(_softmax_dim("softmin", input.dim()) if dim is None else dim, dtype)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Tensor | None = None) -> Tensor:
    """``input`` divided by its ``p``-norm along ``dim``, the norm clamped below at ``eps``."""
    if out is not None:
        raise NotImplementedError("normalize(out=...) is not offered by the reference engine")
    norm = dispatcher.call("norm", (input, p, [dim], True), {})
    return input / dispatcher.call("clamp_min", (norm, eps), {}).expand_as(input)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """An int64 tensor with one more dimension, 1 at each index of ``tensor`` (not differentiable)."""
    indices = tensor._data
    if indices.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if not indices.size:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(indices.max()) + 1
    if indices.size and indices.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if indices.size and indices.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    return Tensor._wrap(np.eye(num_classes, dtype=np.int64)[indices])


# ----------------------------------------------------------------------------- layers
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``torch.nn.functional.linear``."""
    return _call("linear", input, weight, bias)


def layer_norm(input: Tensor, normalized_shape: list[int] | tuple[int, ...], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """``torch.nn.functional.layer_norm`` (``normalized_shape`` a list or a tuple)."""
    return _call("layer_norm", input, list(normalized_shape), weight, bias, eps)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """``torch.nn.functional.conv1d``."""
    return _call("conv1d", input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """``torch.nn.functional.conv2d``."""
    return _call("conv2d", input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """``torch.nn.functional.conv_transpose1d``."""
    return _call("conv_transpose1d", input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """``torch.nn.functional.conv_transpose2d``."""
    return _call("conv_transpose2d", input, weight, bias, stride, padding, output_padding, groups, dilation)


max_pool2d = functions.max_pool2d


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """``torch.nn.functional.avg_pool2d``."""
    return _call("avg_pool2d", input, kernel_size, [] if stride is None else stride, padding, ceil_mode,
                 count_include_pad, divisor_override)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """``torch.nn.functional.dropout`` (``inplace=True`` raises NotImplementedError)."""
    if inplace:
        raise NotImplementedError("dropout(..., inplace=True) is not offered by the reference engine; use "
                                  "inplace=False")
    return functions.dropout(input, p, training)


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` picked by the indices ``input`` (the declared ``embedding``)."""
    if max_norm is not None:
        raise NotImplementedError("embedding(max_norm=...) renormalises the weight in place; the reference "
                                  "engine does not offer it")
    if padding_idx is None:
        padding_idx = -1
    elif padding_idx < 0:
        if padding_idx < -weight.size(0):
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx += weight.size(0)
    elif padding_idx >= weight.size(0):
        raise AssertionError("Padding_idx must be within num_embeddings")
    return _call("embedding", weight, input, padding_idx, scale_grad_by_freq, sparse)


def pad(input: Tensor, pad: list[int] | tuple[int, ...], mode: str = "constant", value: float | None = None) -> Tensor:
    """``torch.nn.functional.pad``: the declared ``constant_pad_nd``; modes other than ``'constant'`` raise
    NotImplementedError."""
    if mode != "constant":
        raise NotImplementedError(f"pad(mode='{mode}') is not offered by the reference engine; only 'constant'")
    return _call("constant_pad_nd", input, list(pad), 0 if value is None else value)


# ----------------------------------------------------------------------------- losses
def mse_loss(input: Tensor, target: Tensor, size_average: bool | None = None, reduce: bool | None = None,
             reduction: str = "mean") -> Tensor:
    """``torch.nn.functional.mse_loss``."""
    return _call("mse_loss", input, target, _reduction(reduction, size_average, reduce))


def l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None, reduce: bool | None = None,
            reduction: str = "mean") -> Tensor:
    """``torch.nn.functional.l1_loss``."""
    return _call("l1_loss", input, target, _reduction(reduction, size_average, reduce))


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None, reduce: bool | None = None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """``torch.nn.functional.smooth_l1_loss``."""
    return _call("smooth_l1_loss", input, target, _reduction(reduction, size_average, reduce), beta)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """``torch.nn.functional.huber_loss``."""
    return _call("huber_loss", input, target, _reduction(reduction), delta)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """``torch.nn.functional.binary_cross_entropy``; a target of another shape than the input is a
    ValueError, as in torch."""
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({tuple(target.shape)}) that is different to the input size "
                         f"({tuple(input.shape)}) is deprecated. Please ensure they have the same size.")
    return _call("binary_cross_entropy", input, target, weight, _reduction(reduction, size_average, reduce))


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average: bool | None = None, reduce: bool | None = None,
                                     reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
    """``torch.nn.functional.binary_cross_entropy_with_logits``; a target of another shape than the input is
    a ValueError, as in torch."""
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({tuple(target.shape)}) must be the same as input size "
                         f"({tuple(input.shape)})")
    return _call("binary_cross_entropy_with_logits", input, target, weight, pos_weight,
                 _reduction(reduction, size_average, reduce))


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: bool | None = None,
             ignore_index: int = -100, reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """``torch.nn.functional.nll_loss`` with the legacy ``size_average`` / ``reduce`` flags
    (:func:`reference_engine.functions.nll_loss`)."""
    if size_average is not None or reduce is not None:
        reduction = _legacy(size_average, reduce)
    return functions.nll_loss(input, target, weight, ignore_index, reduction)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: bool | None = None,
                  ignore_index: int = -100, reduce: bool | None = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """``torch.nn.functional.cross_entropy`` with the legacy ``size_average`` / ``reduce`` flags
    (:func:`reference_engine.functions.cross_entropy`)."""
    if size_average is not None or reduce is not None:
        reduction = _legacy(size_average, reduce)
    return functions.cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)


def __getattr__(name: str) -> object:
    raise missing_attribute(__name__, "torch.nn.functional", name)
