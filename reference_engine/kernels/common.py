"""Helpers shared by the kernels: dims, reduction axes, and torch's type promotion of binary operators."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from reference_engine.dtypes import DType


# ----------------------------------------------------------------------------- helpers
def _np_dtype(dtype: DType | None) -> np.dtype | None:
    return None if dtype is None else dtype.numpy


def _wrap_dim(dim: int, ndim: int) -> int:
    bound = ndim if ndim > 0 else 1
    if not -bound <= dim < bound:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-bound}, {bound - 1}], "
                         f"but got {dim})")
    return dim + bound if dim < 0 else dim


def _axes(dims: list[int] | None, ndim: int) -> tuple[int, ...] | None:
    """Reduction axes: None or [] mean every dim; a 0-d tensor accepts dim 0 / -1."""
    if not dims:
        return None
    if len(dims) == 1:      # the common case, without the set and the sort
        axis = _wrap_dim(dims[0], ndim)
        return None if ndim == 0 else (axis,)
    axes = tuple(sorted({_wrap_dim(d, ndim) for d in dims}))
    if len(axes) != len(dims):
        raise RuntimeError(f"dim {dims} appears multiple times in the list of dims")
    return None if ndim == 0 else axes


def _array(x: Any) -> np.ndarray:
    return x if type(x) is np.ndarray else np.asarray(x)


def _scale(x: Any, factor: Any) -> Any:
    return x if factor == 1 else x * factor


# ----------------------------------------------------------------------------- type promotion
# torch's result type of a binary operator (c10's ResultTypeState), which NumPy's differs from
# when dtypes differ: a 0-d tensor takes part only when of a higher category than the other
# operand (float32 tensor * float64 0-d tensor is float32), a Python number (wrapped number)
# likewise, a Python float counting as the default dtype float32; int64 with float32 is float32.
_CATEGORY = {"b": 0, "i": 1, "u": 1, "f": 2}
_FLOAT32, _INT64, _BOOL = np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.bool_)


def _promote(a: np.dtype | None, b: np.dtype | None) -> np.dtype | None:
    if a is None or b is None:
        return a if b is None else b
    key_a, key_b = (_CATEGORY[a.kind], a.itemsize), (_CATEGORY[b.kind], b.itemsize)
    return a if key_a >= key_b else b


def _combine(higher: np.dtype | None, lower: np.dtype | None) -> np.dtype | None:
    """A lower-priority class of operands counts only when of a higher category."""
    if higher is None or lower is None:
        return higher if lower is None else lower
    return higher if _CATEGORY[higher.kind] >= _CATEGORY[lower.kind] else _promote(higher, lower)


def result_dtype(*operands: Any) -> np.dtype:
    """torch's result dtype of kernel operands (arrays, or Python numbers for wrapped numbers)."""
    dimensioned = zero_dim = wrapped = None
    for value in operands:
        if isinstance(value, np.ndarray):
            if value.ndim:
                dimensioned = _promote(dimensioned, value.dtype)
            else:
                zero_dim = _promote(zero_dim, value.dtype)
        elif isinstance(value, (bool, np.bool_)):
            wrapped = _promote(wrapped, _BOOL)
        elif isinstance(value, (int, np.integer)):
            wrapped = _promote(wrapped, _INT64)
        else:
            wrapped = _promote(wrapped, _FLOAT32)
    return _combine(dimensioned, _combine(zero_dim, wrapped))


_NUMBERS = frozenset({float, int, bool})


def _promoting(ufunc: np.ufunc) -> Callable[[Any, Any], Any]:
    """``ufunc`` computing in torch's result dtype. NumPy's is kept where the two agree, the
    common cases, at the cost of a check: arrays of one dtype, and a floating array with a
    Python number (NumPy's weak scalars: ``float32 * 2.5`` is float32)."""
    def kernel(x: Any, y: Any) -> Any:
        if type(x) is np.ndarray:
            if (x.dtype is y.dtype) if type(y) is np.ndarray else (type(y) in _NUMBERS and x.dtype.kind == "f"):
                return ufunc(x, y)
        elif type(y) is np.ndarray and type(x) in _NUMBERS and y.dtype.kind == "f":
            return ufunc(x, y)
        return ufunc(x, y, dtype=result_dtype(x, y))

    kernel.__name__ = ufunc.__name__
    kernel.same_dtype = ufunc       # the dispatcher's fast paths call it when the dtypes are equal
    return kernel


_multiply, _add, _subtract = _promoting(np.multiply), _promoting(np.add), _promoting(np.subtract)


# ----------------------------------------------------------------------------- torch's names of dtypes
_TORCH_DTYPE_NAMES = {"float64": "Double", "float32": "Float", "float16": "Half", "int64": "Long", "bool": "Bool"}
