"""Element-wise math: unary and binary ufuncs, comparisons and logical ops, clamps, ``where``, ``lerp``..."""
from __future__ import annotations

import math

from typing import Any, Callable

import numpy as np

from reference_engine.kernels.registry import DEFAULT_KEYWORD_KERNELS, kernel, KERNELS
from reference_engine.kernels.common import (
    _add, _array, _BOOL, _FLOAT32, _multiply, _NUMBERS, _scale, _subtract, _TORCH_DTYPE_NAMES, result_dtype)


# ----------------------------------------------------------------------------- elementwise
# NumPy ufuncs whose semantics are torch's serve as kernels directly (no wrapper frame).
KERNELS["neg"] = np.negative


def _float_ufunc(ufunc: np.ufunc) -> Callable[[Any], Any]:
    """``ufunc`` computing integers and bools in the default float32, as torch does (NumPy
    gives float64, or float16 for bools)."""
    def run(x):
        if type(x) is np.ndarray and x.dtype.kind != "f":
            x = x.astype(_FLOAT32)
        return ufunc(x)

    run.__name__ = ufunc.__name__
    return run


for _name, _ufunc in (("exp", np.exp), ("sin", np.sin), ("cos", np.cos), ("tanh", np.tanh)):
    KERNELS[_name] = _float_ufunc(_ufunc)
KERNELS["mul.Tensor"] = KERNELS["mul.Scalar"] = _multiply


# log and div, which an MLP's step runs (log-softmax, its backward, a mean), take np.errstate as a
# decorator: the same error state at about half its cost as a ``with`` block (1 us of 2 on a
# 64x10 division; no context manager object per call).
@kernel("log")
@np.errstate(divide="ignore", invalid="ignore")
def log(x):
    if type(x) is np.ndarray and x.dtype.kind != "f":
        x = x.astype(_FLOAT32)
    return np.log(x)


@kernel("sigmoid")
def sigmoid(x):
    if type(x) is np.ndarray and x.dtype.kind != "f":
        x = x.astype(_FLOAT32)
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(np.negative(x)))


@kernel("sqrt")
def sqrt(x):
    if type(x) is np.ndarray and x.dtype.kind != "f":
        x = x.astype(_FLOAT32)
    with np.errstate(invalid="ignore"):
        return np.sqrt(x)


@kernel("relu")
def relu(x):
    return np.maximum(x, 0)


@kernel("add.Tensor")
def add(x, other, alpha=1):
    return _add(x, _scale(other, alpha))


@kernel("sub.Tensor")
def sub(x, other, alpha=1):
    return _subtract(x, _scale(other, alpha))


DEFAULT_KEYWORD_KERNELS.update({"add.Tensor": _add, "sub.Tensor": _subtract})


@kernel("div.Tensor", "div.Scalar")
@np.errstate(divide="ignore", invalid="ignore")
def div(x, other):
    if type(x) is np.ndarray and x.dtype.kind == "f" and (
            type(other) in _NUMBERS or (type(other) is np.ndarray and x.dtype is other.dtype)):
        dtype = None        # NumPy's result type is torch's
    else:
        dtype = result_dtype(x, other)
        if dtype.kind != "f":
            dtype = _FLOAT32            # true division of integers: the default float dtype
    return np.true_divide(x, other) if dtype is None else np.true_divide(x, other, dtype=dtype)


@kernel("pow.Tensor_Scalar")
def pow_(x, exponent):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.power(x, exponent)


@kernel("where.self")
def where(condition, x, other):
    if (type(x) is np.ndarray and type(other) is np.ndarray and x.dtype is other.dtype
            and type(condition) is np.ndarray and condition.dtype == _BOOL):
        return np.where(condition, x, other)     # values of one dtype: NumPy's is torch's (a fast path)
    if type(condition) is np.ndarray and condition.dtype != _BOOL:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{_TORCH_DTYPE_NAMES[condition.dtype.name]}")
    out = np.where(condition, x, other)
    dtype = result_dtype(x, other)
    return out if out.dtype == dtype else out.astype(dtype)


KERNELS["where.ScalarSelf"] = KERNELS["where.ScalarOther"] = where     # a number on either side


# ----------------------------------------------------------------------------- comparisons
for _name, _ufunc in (("gt", np.greater), ("ge", np.greater_equal), ("lt", np.less),
                      ("le", np.less_equal), ("eq", np.equal), ("ne", np.not_equal)):
    KERNELS[f"{_name}.Tensor"] = KERNELS[f"{_name}.Scalar"] = _ufunc


# ----------------------------------------------------------------------------- logical ops and tests of values
for _name, _ufunc in (("logical_and", np.logical_and), ("logical_or", np.logical_or),
                      ("logical_xor", np.logical_xor), ("logical_not", np.logical_not),
                      ("isnan", np.isnan), ("isfinite", np.isfinite)):
    KERNELS[_name] = _ufunc


# ----------------------------------------------------------------------------- pointwise math
def _floating(x: Any) -> np.ndarray:
    """``x`` as an array of a floating dtype (integers and bools compute in the default float32)."""
    x = _array(x)
    return x if x.dtype.kind == "f" else x.astype(_FLOAT32)


def _float_unary(fn: Callable[[np.ndarray], Any]) -> Callable[[Any], np.ndarray]:
    """``fn`` on a floating array, out-of-domain values NaN or inf without warnings, the input's
    floating dtype kept (torch's unary float ops)."""
    def run(x):
        x = _floating(x)
        with np.errstate(all="ignore"):
            return np.asarray(fn(x), dtype=x.dtype)
    return run


_erf_scalar = np.vectorize(math.erf, otypes=[np.float64])


def _erf(x: np.ndarray) -> np.ndarray:
    return _erf_scalar(x.astype(np.float64)) if x.size else x.astype(np.float64)


def _erfinv(x: np.ndarray) -> np.ndarray:
    """Inverse error function: Winitzki's closed-form start, then Newton steps on ``erf``
    (quadratic convergence; four steps reach float64 rounding on (-1, 1))."""
    x = x.astype(np.float64)
    a = 0.147
    log_term = np.log1p(-x * x)
    first = 2 / (np.pi * a) + log_term / 2
    y = np.sign(x) * np.sqrt(np.sqrt(first * first - log_term / a) - first)
    inside = np.abs(x) < 1
    for _ in range(4):
        step = (_erf(np.where(inside, y, 0.0)) - x) / (2 / np.sqrt(np.pi) * np.exp(-y * y))
        y = np.where(inside, y - step, y)
    return np.where(np.abs(x) == 1, np.sign(x) * np.inf, np.where(np.abs(x) > 1, np.nan, y))


# Modified Bessel functions of the first kind, orders 0 and 1, and their exponentially scaled forms
# e^-|x| I(x). Below |x| = 20 the power series I_v(x) = sum_k (x/2)^(2k+v) / (k! (k+v)!): positive
# terms (no cancellation), the 60th under 1e-40 of the sum. From 20 on Hankel's expansion
# e^-x I_v(x) = (2 pi x)^-1/2 sum_k (-1)^k a_k(v) / x^k, a_k(v) = prod_{j<=k} (4v^2 - (2j-1)^2) / (k! 8^k):
# its terms fall until k ~ 2x, the 30th under 1e-17 of the first. I_0 is even, I_1 odd.
_BESSEL_SERIES_BELOW = 20.0


def _bessel_scaled(x: np.ndarray, order: int) -> np.ndarray:
    """``e^-|x| I_order(|x|)`` for order 0 or 1 (the sign of an odd order is the caller's)."""
    a = np.abs(x.astype(np.float64))
    small = np.minimum(a, _BESSEL_SERIES_BELOW)
    half_square = (small / 2) ** 2
    term = (small / 2) ** order / math.factorial(order)
    series = term.copy()
    for k in range(1, 60):
        term = term * half_square / (k * (k + order))
        series = series + term
    large = np.maximum(a, _BESSEL_SERIES_BELOW)
    term, hankel = np.ones_like(large), np.ones_like(large)
    for k in range(1, 30):
        term = term * -(4 * order * order - (2 * k - 1) ** 2) / (k * 8 * large)      # (-1)^k a_k(v) / x^k
        hankel = hankel + term
    return np.where(a < _BESSEL_SERIES_BELOW, series * np.exp(-small), hankel / np.sqrt(2 * np.pi * large))


def _i0e(x: np.ndarray) -> np.ndarray:
    return _bessel_scaled(x, 0)


def _i1e(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * _bessel_scaled(x, 1)


def _unscaled(scaled: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    def run(x: np.ndarray) -> np.ndarray:
        # I(x) overflows to inf past |x| ~ 713; at +-inf it is 0 * inf = NaN, as torch's
        with np.errstate(over="ignore", invalid="ignore"):
            return scaled(x) * np.exp(np.abs(x.astype(np.float64)))
    return run


for _name, _fn in (
        ("i0", _unscaled(_i0e)), ("special_i0e", _i0e), ("special_i1", _unscaled(_i1e)), ("special_i1e", _i1e),
        ("erf", _erf), ("erfc", lambda x: 1 - _erf(x)), ("erfinv", _erfinv),
        ("expm1", np.expm1), ("log1p", np.log1p), ("log2", np.log2), ("log10", np.log10), ("exp2", np.exp2),
        ("rsqrt", lambda x: 1 / np.sqrt(x)), ("reciprocal", np.reciprocal),
        ("asin", np.arcsin), ("acos", np.arccos), ("atan", np.arctan), ("tan", np.tan),
        ("sinh", np.sinh), ("cosh", np.cosh), ("asinh", np.arcsinh), ("acosh", np.arccosh), ("atanh", np.arctanh),
        ("sinc", np.sinc), ("log_sigmoid", lambda x: np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))),
        ("silu", lambda x: x / (1 + np.exp(-x))),
        ("mish", lambda x: x * np.tanh(np.logaddexp(0, x))),
        ("selu", lambda x: 1.0507009873554804934193349852946 * np.where(
            x > 0, x, 1.6732632423543772848170429916717 * np.expm1(x))),
        ("hardswish", lambda x: x * np.minimum(np.maximum(x + 3, 0), 6) / 6),
        ("relu6", lambda x: np.minimum(np.maximum(x, 0), 6))):
    KERNELS[_name] = _float_unary(_fn)

# Ops that keep integer dtypes (torch's abs, sign, square and rounding of an int tensor are ints).
def _sign(x: Any) -> np.ndarray:
    """``np.sign`` but 0 at NaN, as torch's ``sign`` and ``sgn`` of a real tensor."""
    x = np.asarray(x)
    signs = np.sign(x)
    return np.where(np.isnan(x), np.zeros((), signs.dtype), signs) if signs.dtype.kind == "f" else signs


for _name, _ufunc in (("abs", np.abs), ("sign", _sign), ("floor", np.floor), ("ceil", np.ceil),
                      ("round", np.round), ("trunc", np.trunc), ("square", np.square)):
    KERNELS[_name] = _ufunc


@kernel("round.decimals")
def round_decimals(x, decimals):
    return np.round(_array(x), decimals)


@kernel("frac")
def frac(x):
    x = _array(x)
    return x - np.trunc(x)


def _bounded(x: Any, low: Any, high: Any) -> np.ndarray:
    """``min(max(x, low), high)`` in torch's result dtype, a NaN kept, ``None`` bounds left out."""
    x = _array(x)
    dtype = result_dtype(x, *(b for b in (low, high) if b is not None))
    out = x.astype(dtype, copy=True)
    if low is not None:
        out = np.maximum(out, low, dtype=dtype)
    if high is not None:
        out = np.minimum(out, high, dtype=dtype)
    return out


@kernel("clamp", "clamp.Tensor")
def clamp(x, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    return _bounded(x, min, max)


@kernel("clamp_min")
def clamp_min(x, min):
    return _bounded(x, min, None)


@kernel("clamp_max")
def clamp_max(x, max):
    return _bounded(x, None, max)


KERNELS["add.Scalar"] = add
KERNELS["sub.Scalar"] = sub


@kernel("rsub.Tensor", "rsub.Scalar")
def rsub(x, other, alpha=1):
    x = _array(x)
    return np.subtract(other, np.asarray(_scale(x, alpha)), dtype=result_dtype(x, other))


def _float_binary(ufunc: np.ufunc) -> Callable[[Any, Any], np.ndarray]:
    """``ufunc`` in torch's result dtype, integers promoted to the default float32."""
    def run(x, y):
        dtype = result_dtype(x, y)
        with np.errstate(all="ignore"):
            return ufunc(x, y, dtype=dtype if dtype.kind == "f" else _FLOAT32)
    return run


for _name, _ufunc in (("atan2", np.arctan2), ("hypot", np.hypot), ("logaddexp", np.logaddexp),
                      ("logaddexp2", np.logaddexp2)):
    KERNELS[_name] = _float_binary(_ufunc)


def _quiet_promoting(ufunc: np.ufunc) -> Callable[[Any, Any], np.ndarray]:
    """``ufunc`` in torch's result dtype (integers stay integers), without warnings."""
    def run(x, y):
        with np.errstate(all="ignore"):
            return ufunc(x, y, dtype=result_dtype(x, y))
    return run


for _name, _ufunc in (("minimum", np.minimum), ("maximum", np.maximum), ("fmin", np.fmin), ("fmax", np.fmax),
                      ("fmod.Tensor", np.fmod), ("fmod.Scalar", np.fmod),
                      ("remainder.Tensor", np.remainder), ("remainder.Scalar", np.remainder),
                      ("pow.Tensor_Tensor", np.power), ("pow.Scalar", np.power)):
    KERNELS[_name] = _quiet_promoting(_ufunc)


@kernel("lerp.Scalar", "lerp.Tensor")
def lerp(x, end, weight):
    # torch's two-sided form: exact at both ends
    with np.errstate(all="ignore"):
        return np.where(np.abs(weight) < 0.5, x + weight * (end - x), end - (end - x) * (1 - np.asarray(weight)))


@kernel("xlogy.Tensor")
def xlogy(x, other):
    dtype = result_dtype(x, other)
    dtype = dtype if dtype.kind == "f" else _FLOAT32
    x, other = _array(x), _array(other)
    with np.errstate(all="ignore"):
        out = np.where((x == 0) & ~np.isnan(other), 0, x * np.log(other))
    return np.asarray(out, dtype=dtype)


KERNELS["sgn"] = _sign
KERNELS["deg2rad"] = _float_unary(lambda x: x * (np.pi / 180))
KERNELS["rad2deg"] = _float_unary(lambda x: x * (180 / np.pi))
KERNELS["copysign.Tensor"] = _float_binary(np.copysign)


@kernel("xlogy.Scalar_Other")
def xlogy_scalar_other(x, other):
    return xlogy(x, np.asarray(other, dtype=np.float64 if _array(x).dtype == np.float64 else _FLOAT32))


@kernel("addcmul")
def addcmul(x, tensor1, tensor2, value=1):
    return _add(x, _scale(_multiply(tensor1, tensor2), value))


@kernel("addcdiv")
def addcdiv(x, tensor1, tensor2, value=1):
    return _add(x, _scale(div(tensor1, tensor2), value))
