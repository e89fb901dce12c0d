"""Factories: ``zeros_like``, ``ones_like``, ``new_zeros``."""
from __future__ import annotations

import numpy as np

from reference_engine.kernels.registry import kernel
from reference_engine.kernels.common import _array, _np_dtype


# ----------------------------------------------------------------------------- factories
@kernel("zeros_like")
def zeros_like(x, dtype=None, *_options):
    return np.zeros(np.shape(x), dtype=_np_dtype(dtype) or _array(x).dtype)


@kernel("new_zeros")
def new_zeros(x, size, dtype=None, *_options):
    return np.zeros(size, dtype=_np_dtype(dtype) or _array(x).dtype)


@kernel("new_ones")
def new_ones(x, size, dtype=None, *_options):
    return np.ones(size, dtype=_np_dtype(dtype) or _array(x).dtype)


@kernel("new_full")
def new_full(x, size, fill_value, dtype=None, *_options):
    return np.full(size, fill_value, dtype=_np_dtype(dtype) or _array(x).dtype)


@kernel("ones_like")
def ones_like(x, dtype=None, *_options):
    return np.ones(np.shape(x), dtype=_np_dtype(dtype) or _array(x).dtype)
