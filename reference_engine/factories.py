"""PyTorch-like constructors: ``tensor``, ``zeros``, ``ones``, ``randn``, ``arange``...

Python floats default to ``float32`` and ints to ``int64``, as in torch;
NumPy arrays keep their dtype. Random numbers come from a seedable
:class:`Generator` (``manual_seed`` seeds the default one).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from reference_engine.dtypes import DType, float32, to_numpy
from reference_engine.dtypes import from_numpy as engine_dtype
from reference_engine.tensor import Tensor


class Generator:
    """A seedable source of random numbers (NumPy's PCG64)."""

    def __init__(self, seed: int | None = None) -> None:
        self._rng = np.random.default_rng(seed)

    def manual_seed(self, seed: int) -> Generator:
        """Reseed this generator with ``seed``, as ``torch.Generator.manual_seed``; returns it."""
        self._rng = np.random.default_rng(seed)
        return self

    @property
    def numpy(self) -> np.random.Generator:
        """The NumPy generator that draws this generator's random numbers."""
        return self._rng


default_generator = Generator(0)


def manual_seed(seed: int) -> Generator:
    """Seed the default generator."""
    return default_generator.manual_seed(seed)


def _infer_dtype(array: np.ndarray, data: Any) -> np.dtype:
    if isinstance(data, np.ndarray) or isinstance(data, np.generic):
        return engine_dtype(array.dtype).numpy
    if array.dtype.kind == "f":
        return float32.numpy
    if array.dtype.kind in "iu":
        return np.dtype(np.int64)
    if array.dtype.kind == "b":
        return np.dtype(np.bool_)
    if array.size == 0:
        return float32.numpy
    raise TypeError(f"cannot make a tensor from data of type {array.dtype}")


def _nested_data(data: Any) -> Any:
    if isinstance(data, Tensor):
        return data._data
    if isinstance(data, (list, tuple)):
        return [_nested_data(d) for d in data]
    return data


def tensor(data: Any, *, dtype: DType | None = None, requires_grad: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of ``data`` (nested lists, numbers, arrays)."""
    raw = _nested_data(data)
    array = np.array(raw, dtype=to_numpy(dtype))
    if dtype is None:
        array = array.astype(_infer_dtype(array, raw), copy=False)
    return Tensor(array, requires_grad=requires_grad)


def as_tensor(data: Any, *, dtype: DType | None = None) -> Tensor:
    """Like :func:`tensor` but a Tensor of the right dtype is returned as is."""
    if isinstance(data, Tensor) and (dtype is None or data.dtype is dtype):
        return data
    return tensor(data, dtype=dtype)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing ``array``'s memory."""
    return Tensor(array)


def _size(size: tuple) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        return tuple(size[0])
    return tuple(size)


def _filled(fill: Any, size: tuple, dtype: DType | None, requires_grad: bool) -> Tensor:
    array = np.full(_size(size), fill, dtype=to_numpy(dtype) or float32.numpy)
    return Tensor(array, requires_grad=requires_grad)


def zeros(*size: int | Sequence[int], dtype: DType | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros (float32 unless ``dtype``); ``size`` as separate ints or one sequence."""
    return _filled(0, size, dtype, requires_grad)


def ones(*size: int | Sequence[int], dtype: DType | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones (float32 unless ``dtype``); ``size`` as separate ints or one sequence."""
    return _filled(1, size, dtype, requires_grad)


def full(size: Sequence[int], fill_value: Any, *, dtype: DType | None = None,
         requires_grad: bool = False) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value`` (float32 unless ``dtype``)."""
    return _filled(fill_value, (tuple(size),), dtype, requires_grad)


def zeros_like(other: Tensor, *, dtype: DType | None = None, requires_grad: bool = False) -> Tensor:
    """Zeros of ``other``'s shape, in its dtype unless ``dtype``."""
    return Tensor(np.zeros(other.shape, to_numpy(dtype) or other._data.dtype), requires_grad=requires_grad)


def ones_like(other: Tensor, *, dtype: DType | None = None, requires_grad: bool = False) -> Tensor:
    """Ones of ``other``'s shape, in its dtype unless ``dtype``."""
    return Tensor(np.ones(other.shape, to_numpy(dtype) or other._data.dtype), requires_grad=requires_grad)


def randn(*size: int | Sequence[int], dtype: DType | None = None, generator: Generator | None = None,
          requires_grad: bool = False) -> Tensor:
    """Standard normal samples."""
    rng = (generator or default_generator).numpy
    array = rng.standard_normal(_size(size)).astype(to_numpy(dtype) or float32.numpy)
    return Tensor(array, requires_grad=requires_grad)


def rand(*size: int | Sequence[int], dtype: DType | None = None, generator: Generator | None = None,
         requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1)."""
    rng = (generator or default_generator).numpy
    array = rng.random(_size(size)).astype(to_numpy(dtype) or float32.numpy)
    return Tensor(array, requires_grad=requires_grad)


def arange(start: float, end: float | None = None, step: float = 1, *, dtype: DType | None = None,
           requires_grad: bool = False) -> Tensor:
    """``[start, end)`` by ``step``; int64 for integer arguments, float32 otherwise."""
    if end is None:
        start, end = 0, start
    integral = all(isinstance(v, int) for v in (start, end, step))
    default = np.dtype(np.int64) if integral else float32.numpy
    array = np.arange(start, end, step).astype(to_numpy(dtype) or default)
    return Tensor(array, requires_grad=requires_grad)


def linspace(start: float, end: float, steps: int, *, dtype: DType | None = None,
             requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end``, both included (float32 unless ``dtype``)."""
    array = np.linspace(start, end, steps).astype(to_numpy(dtype) or float32.numpy)
    return Tensor(array, requires_grad=requires_grad)


def eye(n: int, m: int | None = None, *, dtype: DType | None = None, requires_grad: bool = False) -> Tensor:
    """The ``n`` x ``m`` (``n`` x ``n`` without ``m``) identity matrix (float32 unless ``dtype``)."""
    return Tensor(np.eye(n, m, dtype=to_numpy(dtype) or float32.numpy), requires_grad=requires_grad)
