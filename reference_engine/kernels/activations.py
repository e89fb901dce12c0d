"""Activation functions (``relu``'s relatives): ``leaky_relu``, ``elu``, ``gelu``, ``softplus``, shrinks..."""
from __future__ import annotations

import numpy as np

from reference_engine.kernels.registry import kernel, KERNELS
from reference_engine.kernels.common import _array
from reference_engine.kernels.pointwise import _erf, _float_unary, _floating


@kernel("leaky_relu")
def leaky_relu(x, negative_slope=0.01):
    x = _array(x)
    return np.where(x > 0, x, x * negative_slope)


@kernel("elu")
def elu(x, alpha=1, scale=1, input_scale=1):
    x = _floating(x)
    with np.errstate(all="ignore"):
        return np.where(x > 0, x * scale, np.expm1(x * input_scale) * (alpha * scale)).astype(x.dtype)


@kernel("celu")
def celu(x, alpha=1.0):
    x = _floating(x)
    with np.errstate(all="ignore"):
        return np.where(x > 0, x, np.expm1(x / alpha) * alpha).astype(x.dtype)


@kernel("gelu")
def gelu(x, approximate="none"):
    x = _floating(x)
    with np.errstate(all="ignore"):
        if approximate == "tanh":
            out = 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
        elif approximate == "none":
            out = 0.5 * x * (1 + _erf(x * 0.7071067811865476))
        else:
            raise RuntimeError("approximate argument must be either none or tanh.")
    return out.astype(x.dtype)


@kernel("softplus")
def softplus(x, beta=1, threshold=20):
    x = _floating(x)
    with np.errstate(all="ignore"):
        scaled = x * beta
        return np.where(scaled > threshold, x, np.log1p(np.exp(scaled)) / beta).astype(x.dtype)


@kernel("hardtanh")
def hardtanh(x, min_val=-1, max_val=1):
    return np.minimum(np.maximum(_array(x), min_val), max_val)


@kernel("threshold")
def threshold(x, threshold, value):
    x = _array(x)
    return np.where(x <= threshold, np.asarray(value, dtype=x.dtype), x)      # NaN is kept, as torch


@kernel("logit")
def logit(x, eps=None):
    x = _floating(x)
    with np.errstate(all="ignore"):
        clamped = x if eps is None else np.clip(x, eps, 1 - eps)
        return np.log(clamped / (1 - clamped)).astype(x.dtype)


@kernel("softshrink")
def softshrink(x, lambd=0.5):
    x = _array(x)
    return np.where(x > lambd, x - lambd, np.where(x < -lambd, x + lambd, x * 0))     # NaN stays NaN, as torch


@kernel("hardshrink")
def hardshrink(x, lambd=0.5):
    x = _array(x)
    return np.where(np.abs(x) <= lambd, np.zeros((), x.dtype), x)         # NaN stays NaN, as torch


KERNELS["hardsigmoid"] = _float_unary(lambda x: np.minimum(np.maximum(x + 3, 0), 6) / 6)
