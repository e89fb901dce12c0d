"""Reductions: sums, means, moments, extrema and their indices, boolean reductions, cumulative ops, norms."""
from __future__ import annotations

import math

from typing import Any, Callable

import numpy as np

from reference_engine.dtypes import DType
from reference_engine.kernels.registry import kernel, KERNELS
from reference_engine.kernels.common import _array, _axes, _BOOL, _np_dtype, _wrap_dim


# ----------------------------------------------------------------------------- reductions
# The sums call np.add.reduce: what np.sum calls on an array, without its Python wrapper (about
# a microsecond, a sixth of a 64x10 sum; np.sum is the same values, dtypes and errors).
@kernel("sum")
def sum_all(x, dtype=None):
    return np.add.reduce(_array(x), None, _np_dtype(dtype))


@kernel("sum.dim_IntList")
def sum_dim(x, dim, keepdim=False, dtype=None):
    x = _array(x)
    return np.add.reduce(x, _axes(dim, x.ndim), _np_dtype(dtype), None, keepdim)


@kernel("mean.dim")
def mean_dim(x, dim, keepdim=False, dtype=None):
    x = _array(x)
    axes = _axes(dim, x.ndim)
    count = x.size if axes is None else int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.sum(x, axis=axes, keepdims=keepdim, dtype=_np_dtype(dtype))
        return np.true_divide(total, count, dtype=total.dtype)


@kernel("var_mean.dim")
def var_mean_dim(x, dim, unbiased=True, keepdim=False):
    x = _array(x)
    axes = _axes(dim, x.ndim)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.mean(x, axis=axes, keepdims=keepdim)
        var = np.var(x, axis=axes, keepdims=keepdim, ddof=1 if unbiased else 0)
    return var, mean


def _value_selecting(values: Callable[..., Any], indices: Callable[..., Any]) -> Callable[..., Any]:
    """``max.dim`` / ``min.dim``: the extreme along ``dim`` and its (first) index."""
    def reduce(x, dim, keepdim=False):
        x = _array(x)
        if x.ndim == 0:
            _wrap_dim(dim, 0)
            return x.copy(), np.zeros((), np.int64)
        axis = _wrap_dim(dim, x.ndim)
        if x.shape[axis] == 0:
            raise IndexError(f"cannot reduce over dimension {dim} of size 0")
        return values(x, axis=axis, keepdims=keepdim), indices(x, axis=axis, keepdims=keepdim).astype(np.int64)

    return reduce


KERNELS["max.dim"] = _value_selecting(np.max, np.argmax)


def _index_reduction(pick: Callable[..., Any], what: str) -> Callable[..., Any]:
    """``argmax`` / ``argmin``: the first extreme (a NaN counts as the extreme, as in torch);
    over the flattened tensor when ``dim`` is None (``keepdim`` then keeps every dim as 1)."""
    def reduce(x, dim=None, keepdim=False):
        x = _array(x)
        if dim is None:
            if x.size == 0:
                raise RuntimeError(f"{what}(): Expected reduction dim to be specified for input.numel() == 0.")
            index = np.asarray(pick(x.reshape(-1)), dtype=np.int64)
            return index.reshape((1,) * x.ndim) if keepdim else index
        if x.ndim == 0:
            _wrap_dim(dim, 0)
            return np.zeros((), np.int64)
        axis = _wrap_dim(dim, x.ndim)
        if x.shape[axis] == 0:
            raise IndexError(f"{what}(): Expected reduction dim {dim} to have non-zero size.")
        return pick(x, axis=axis, keepdims=keepdim).astype(np.int64)

    return reduce


KERNELS["argmax"] = _index_reduction(np.argmax, "argmax")
KERNELS["argmin"] = _index_reduction(np.argmin, "argmin")


def _boolean_reduction(reduce: Callable[..., Any]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``all`` / ``any`` over every element and along ``dim``: bool tensors."""
    def over_all(x):
        return np.asarray(reduce(x), dtype=_BOOL)

    def along(x, dim, keepdim=False):
        x = _array(x)
        axis = None if x.ndim == 0 else _wrap_dim(dim, x.ndim)
        if x.ndim == 0:
            _wrap_dim(dim, 0)
        return np.asarray(reduce(x, axis=axis, keepdims=keepdim), dtype=_BOOL)

    return over_all, along


KERNELS["all"], KERNELS["all.dim"] = _boolean_reduction(np.all)
KERNELS["any"], KERNELS["any.dim"] = _boolean_reduction(np.any)


def _nonempty(x: np.ndarray, what: str) -> np.ndarray:
    if x.size == 0:
        raise RuntimeError(f"{what}(): Expected reduction dim to be specified for input.numel() == 0. "
                           "Specify the reduction dim with the 'dim' argument.")
    return x


@kernel("max")
def max_all(x):
    x = _nonempty(_array(x), "max")
    return np.asarray(np.max(x))       # np.max propagates NaN, as torch does


@kernel("min")
def min_all(x):
    x = _nonempty(_array(x), "min")
    return np.asarray(np.min(x))


KERNELS["min.dim"] = _value_selecting(np.min, np.argmin)


def _extreme_along(reduce: Callable[..., Any], what: str) -> Callable[..., Any]:
    """``amax`` / ``amin``: over ``dim`` (empty: every dim); a reduced dim must not be empty."""
    def kernel_(x, dim=(), keepdim=False):
        x = _array(x)
        axes = _axes(list(dim), x.ndim)
        reduced = range(x.ndim) if axes is None else axes
        if any(x.shape[a] == 0 for a in reduced):
            raise IndexError(f"{what}(): Expected reduction dim {list(reduced)} to have non-zero size.")
        return np.asarray(reduce(x, axis=axes, keepdims=keepdim))

    return kernel_


KERNELS["amax"] = _extreme_along(np.max, "amax")
KERNELS["amin"] = _extreme_along(np.min, "amin")


@kernel("mean")
def mean_all(x, dtype=None):
    x = _array(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.sum(x, dtype=_np_dtype(dtype))
        return np.asarray(np.true_divide(total, x.size, dtype=total.dtype))


@kernel("logsumexp")
def logsumexp(x, dim, keepdim=False):
    x = _array(x)
    axes = _axes(list(dim), x.ndim)
    if x.size == 0:
        with np.errstate(divide="ignore"):
            return np.log(np.sum(np.exp(x), axis=axes, keepdims=keepdim))
    top = np.max(x, axis=axes, keepdims=True)
    top = np.where(np.isfinite(top), top, 0)       # an infinite maximum: the plain formula
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - top), axis=axes, keepdims=True)) + top
    return out if keepdim else (out.reshape(()) if axes is None else np.squeeze(out, axis=axes))


def _cumulative(accumulate: Callable[..., np.ndarray], x: Any, dim: int, dtype: DType | None) -> np.ndarray:
    """``np.cumsum`` / ``np.cumprod`` along ``dim`` as torch's scans: a 0-d tensor is its own
    result, integer and bool inputs accumulate in int64 unless ``dtype`` says otherwise."""
    x = _array(x)
    if x.ndim == 0:
        _wrap_dim(dim, 0)
        return x.astype(_np_dtype(dtype) or x.dtype, copy=True)
    out = accumulate(x, axis=_wrap_dim(dim, x.ndim), dtype=_np_dtype(dtype))
    return out if dtype is not None or x.dtype.kind == "f" else out.astype(np.int64)


@kernel("cumsum")
def cumsum(x, dim, dtype=None):
    return _cumulative(np.cumsum, x, dim, dtype)


@kernel("prod")
def prod_all(x, dtype=None):
    x = _array(x)
    out = np.prod(x, dtype=_np_dtype(dtype))
    return np.asarray(out if dtype is not None or x.dtype.kind == "f" else out.astype(np.int64))


@kernel("prod.dim_int")
def prod_dim(x, dim, keepdim=False, dtype=None):
    x = _array(x)
    if x.ndim == 0:
        _wrap_dim(dim, 0)
        return x.astype(_np_dtype(dtype) or x.dtype, copy=True)
    out = np.prod(x, axis=_wrap_dim(dim, x.ndim), keepdims=keepdim, dtype=_np_dtype(dtype))
    return out if dtype is not None or x.dtype.kind == "f" else out.astype(np.int64)


def _moment(root: bool) -> Callable[..., Any]:
    """``var.correction`` / ``std.correction``: squared deviations summed over ``dim`` (None or
    empty: every dim) and divided by ``N - correction`` (correction 1 by default)."""
    def kernel_(x, dim=None, correction=None, keepdim=False):
        x = _array(x)
        axes = _axes(dim, x.ndim)
        ddof = 1 if correction is None else correction
        with np.errstate(invalid="ignore", divide="ignore"):
            count = x.size if axes is None else int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
            mean = np.mean(x, axis=axes, keepdims=True) if x.size else np.zeros((1,) * x.ndim, x.dtype)
            total = np.sum((x - mean) ** 2, axis=axes, keepdims=keepdim)
            var = np.true_divide(total, max(count - ddof, 0), dtype=total.dtype)
            return np.asarray(np.sqrt(var) if root else var)

    return kernel_


KERNELS["var.correction"] = _moment(root=False)
KERNELS["std.correction"] = _moment(root=True)


def _unbiased_moment(root: bool, over_dims: bool) -> Callable[..., Any]:
    """``var``/``std`` (all elements) and ``var.dim``/``std.dim``: correction 1 when unbiased, else 0."""
    moment = _moment(root)
    if over_dims:
        return lambda x, dim, unbiased=True, keepdim=False: moment(x, dim, int(unbiased), keepdim)
    return lambda x, unbiased=True: moment(x, None, int(unbiased), False)


KERNELS["var"], KERNELS["var.dim"] = _unbiased_moment(False, False), _unbiased_moment(False, True)
KERNELS["std"], KERNELS["std.dim"] = _unbiased_moment(True, False), _unbiased_moment(True, True)


# ----------------------------------------------------------------------------- cumprod and vector norms
# (formulas/scans.py, formulas/linalg.py)
@kernel("cumprod")
def cumprod(x, dim, dtype=None):
    return _cumulative(np.cumprod, x, dim, dtype)


_TORCH_TYPE_NAMES = {"float64": "Double", "float32": "Float", "int64": "Long", "bool": "Bool"}


def _vector_norm(x: np.ndarray, order: float, axes: tuple[int, ...] | None, keepdim: bool) -> np.ndarray:
    """``(sum |x|^order)^(1/order)`` over ``axes`` (None: every axis); order 0 counts the non-zero
    elements, +-inf is the max / min of ``|x|``."""
    magnitude = np.abs(x)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if order == 0:
            out = np.sum(magnitude != 0, axis=axes, keepdims=keepdim).astype(x.dtype)
        elif order == math.inf:
            out = np.max(magnitude, axis=axes, keepdims=keepdim)
        elif order == -math.inf:
            out = np.min(magnitude, axis=axes, keepdims=keepdim)
        elif order == 1:
            out = np.sum(magnitude, axis=axes, keepdims=keepdim)
        elif order == 2:
            out = np.sqrt(np.sum(magnitude * magnitude, axis=axes, keepdims=keepdim))
        else:
            out = np.sum(magnitude ** order, axis=axes, keepdims=keepdim) ** (1.0 / order)
    return np.asarray(out, dtype=x.dtype)


@kernel("linalg_vector_norm")
def linalg_vector_norm(x, ord=2, dim=None, keepdim=False, dtype=None):
    """The ``ord``-norm over ``dim`` (None or empty: every dim), computed in ``dtype``; torch's
    errors for a non-floating input or ``dtype``, a narrowing ``dtype`` and an inf norm over an
    empty dim."""
    x = _array(x)
    if x.dtype.kind != "f":
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {_TORCH_TYPE_NAMES[x.dtype.name]}")
    if dtype is not None:
        if not dtype.is_floating_point:
            raise RuntimeError("linalg.vector_norm: dtype should be floating point or complex, "
                               f"but got {_TORCH_TYPE_NAMES[dtype.numpy.name]}")
        if dtype.numpy.itemsize < x.dtype.itemsize:
            raise RuntimeError(f"linalg.vector_norm: the dtype of the input ({_TORCH_TYPE_NAMES[x.dtype.name]}) "
                               "should be convertible without narrowing to the specified dtype "
                               f"({_TORCH_TYPE_NAMES[dtype.numpy.name]})")
        x = x.astype(dtype.numpy)
    axes = _axes(dim, x.ndim)
    order = float(ord)
    if math.isinf(order) and x.size == 0:
        label = "inf" if order > 0 else "-inf"
        if axes is None:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {label} norm on an empty tensor because "
                               "the operation does not have an identity")
        for axis in axes:
            if x.shape[axis] == 0:
                raise RuntimeError(f"linalg.vector_norm cannot compute the {label} norm on the dimension "
                                   f"{axis}because this dimension is empty and the operation does not have an "
                                   "identity")
    return _vector_norm(x, order, axes, keepdim)


def _norm_input(x: Any) -> np.ndarray:
    x = _array(x)
    if x.dtype.kind != "f":
        raise RuntimeError("norm(): input dtype should be either floating point or complex. "
                           f"Got {_TORCH_TYPE_NAMES[x.dtype.name]} instead.")
    return x


@kernel("norm.Scalar")
def norm_scalar(x, p=2):
    return linalg_vector_norm(_norm_input(x), p)


@kernel("norm.ScalarOpt_dim")
def norm_scalaropt_dim(x, p, dim, keepdim=False):
    return linalg_vector_norm(_norm_input(x), 2 if p is None else p, dim, keepdim)
