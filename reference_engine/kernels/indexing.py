"""Indexing: gather/scatter, index_select, masked ops, ``index_add``/``index_fill``/``index_copy``,
``index.Tensor``, ``index_put``."""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from reference_engine.kernels.registry import kernel
from reference_engine.kernels.common import _array, _scale, _wrap_dim


# ----------------------------------------------------------------------------- indexing
def _fit_to(array: np.ndarray, shape: tuple[int, ...], dim: int) -> np.ndarray:
    """``array`` restricted to ``shape`` in every dimension but ``dim`` (torch's gather/scatter rule)."""
    return array[tuple(slice(None) if d == dim else slice(0, s) for d, s in enumerate(shape))]


#: A signed integer dtype's item size -> the unsigned dtype of that size (two's complement: a
#: negative entry read as it is the unsigned integer 2**bits + entry).
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
#: Up to this many entries, Python's ``max`` of their list is cheaper than NumPy's reduction.
_FEW = 32


def _first_out_of_bounds(index: np.ndarray, size: int) -> int | None:
    """The first entry of ``index`` outside ``[0, size)``, else None. torch's gather, scatter,
    index_add and index_copy refuse negative indices (no wrapping); index_fill wraps them."""
    if not index.size:
        return None
    unsigned = _UNSIGNED.get(index.dtype.itemsize) if index.dtype.kind == "i" and index.dtype.isnative else None
    if unsigned is not None:        # one maximum: a negative entry read unsigned is above any size
        entries = index.view(unsigned)
        if (max(entries.ravel().tolist()) if index.size <= _FEW else entries.max()) < size:
            return None
    elif index.min() >= 0 and index.max() < size:     # two reductions, no mask: the common case
        return None
    bad = (index < 0) | (index >= size)
    return int(index[bad].flat[0])


def _check_index(index: np.ndarray, size: int, dim: int) -> None:
    """torch's bounds check of gather / scatter / scatter_add / index_add."""
    bad = _first_out_of_bounds(index, size)
    if bad is not None:
        raise RuntimeError(f"index {bad} is out of bounds for dimension {dim} with size {size}")


def _scatter_coordinates(index: np.ndarray, dim: int) -> tuple[np.ndarray, ...]:
    """The NumPy key of the positions ``index`` names along ``dim``: an open grid (the key's arrays
    broadcast to ``index``'s shape when indexing, in the same C order as broadcast copies)."""
    grid = list(_open_grid(index.shape))
    grid[dim] = index
    return tuple(grid)


@functools.lru_cache(maxsize=256)
def _open_grid(shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """``np.indices(shape, sparse=True)``, made once per shape (read-only: shared by the calls)."""
    grid = np.indices(shape, sparse=True)
    for axis in grid:
        axis.flags.writeable = False
    return tuple(grid)


def _scattered(src: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The elements of ``src`` that scatter / scatter_add write: its leading ``index.shape`` block
    (torch reads ``src`` at index's positions, so ``src`` may be larger in any dimension)."""
    if src.shape == index.shape:
        return src
    return src[tuple(slice(0, s) for s in index.shape)]


@kernel("gather")
def gather(x, dim, index, sparse_grad=False):
    x, index = _array(x), _array(index)
    if x.ndim == 0:
        _check_index(index, 1, _wrap_dim(dim, 0))
        return np.broadcast_to(x, index.shape).copy()
    axis = _wrap_dim(dim, x.ndim)
    _check_index(index, x.shape[axis], axis)
    return np.take_along_axis(_fit_to(x, index.shape, axis), index, axis=axis)


@kernel("scatter_add")
def scatter_add(x, dim, index, src):
    return added_at(_array(x).copy(), dim, index, src)


def added_at(out: np.ndarray, dim: int, index: Any, src: Any) -> np.ndarray:
    """``src`` added into ``out`` in place at ``index`` along ``dim`` (scatter_add's work, in index's
    C order); returns ``out``. ``gather_backward`` adds into zeros it made: no second copy."""
    index, src = _array(index), _array(src)
    if out.ndim == 0:      # a 0-d tensor scatters like a 1-element vector
        return added_at(out.reshape(1), dim, index.reshape(1), src.reshape(1)).reshape(())
    axis = _wrap_dim(dim, out.ndim)
    _check_index(index, out.shape[axis], axis)
    if index.size:
        np.add.at(out, _scatter_coordinates(index, axis), _scattered(src, index))
    return out


@kernel("index_select")
def index_select(x, dim, index):
    x, index = _array(x), _array(index)
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if x.ndim == 0:
        if index.size != 1:
            raise IndexError(f"index_select(): Index to scalar can have only 1 value, got {index.size} value(s)")
        if _first_out_of_bounds(index, 1) is not None:
            raise IndexError("index out of range in self")
        return x.reshape(1)[index.reshape(-1)].reshape(())
    axis = _wrap_dim(dim, x.ndim)
    bad = _first_out_of_bounds(index, x.shape[axis])
    if bad is not None:     # torch's two CPU paths word it differently: dim 1 has its own
        if axis == 1:
            raise RuntimeError(f"INDICES element is out of DATA bounds, id={bad} axis_dim={x.shape[axis]}")
        raise IndexError("index out of range in self")
    return np.take(x, index.reshape(-1), axis=axis)


@kernel("index_select_backward")
def index_select_backward(grad, self_sizes, dim, index):
    grad, index = _array(grad), _array(index)
    out = np.zeros(self_sizes, dtype=grad.dtype)
    if out.ndim == 0:
        out = out.reshape(1)
        np.add.at(out, index.reshape(-1), grad.reshape(-1))
        return out.reshape(())
    axis = _wrap_dim(dim, out.ndim)
    key = [slice(None)] * out.ndim
    key[axis] = index.reshape(-1)
    np.add.at(out, tuple(key), grad)
    return out


@kernel("masked_fill.Scalar", "masked_fill.Tensor")
def masked_fill(x, mask, value):
    x, mask = _array(x), _array(mask)
    if mask.dtype != np.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {mask.dtype}")
    value = _array(value)
    if value.ndim:
        raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    full = np.broadcast_shapes(x.shape, mask.shape)     # self broadcasts with the mask, as in torch
    return np.where(np.broadcast_to(mask, full), value.astype(x.dtype), np.broadcast_to(x, full))


@kernel("masked_scatter")
def masked_scatter(x, mask, source):
    x, mask, source = _array(x), _array(mask), _array(source)
    if mask.dtype != np.bool_:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype {mask.dtype}")
    x, selected = _broadcast_with_mask(x, mask)
    out = x.copy()
    count = np.count_nonzero(selected)
    if count > source.size:
        raise RuntimeError("masked_scatter: expected source to have at least as many elements as ones in mask")
    out[selected] = source.reshape(-1)[:count]
    return out


@kernel("masked_select")
def masked_select(x, mask):
    x, mask = _array(x), _array(mask)
    x, mask = _broadcast_with_mask(x, mask)
    return x[mask]


def _broadcast_with_mask(x: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x`` and ``mask`` broadcast to one shape: as they are when their shapes agree (the
    common case, without NumPy's broadcasting machinery, several microseconds a call)."""
    if x.shape == mask.shape:
        return x, mask
    full = np.broadcast_shapes(x.shape, mask.shape)
    return np.broadcast_to(x, full), np.broadcast_to(mask, full)


@kernel("scatter.src", "scatter.value")
def scatter(x, dim, index, src):
    x, index = _array(x), _array(index)
    if x.ndim == 0:      # a 0-d tensor scatters like a 1-element vector
        src = _array(src)
        return scatter(x.reshape(1), dim, index.reshape(-1), src.reshape(-1) if src.ndim else src).reshape(())
    out = x.copy()
    axis = _wrap_dim(dim, x.ndim)
    _check_index(index, x.shape[axis], axis)
    if index.size:
        values = _array(src)
        values = _scattered(values, index) if values.ndim else values
        out[_scatter_coordinates(index, axis)] = values
    return out


def _index_key(ndim: int, dim: int, index: np.ndarray) -> tuple:
    key: list = [slice(None)] * ndim
    key[_wrap_dim(dim, ndim)] = index.reshape(-1)
    return tuple(key)


@kernel("index_add")
def index_add(x, dim, index, source, alpha=1):
    x, index, source = _array(x), _array(index), _array(source)
    out = x.copy().reshape(x.shape or (1,))
    axis = _wrap_dim(dim, out.ndim)
    _check_index(index, out.shape[axis], axis)
    np.add.at(out, _index_key(out.ndim, dim, index), _scale(source.reshape(source.shape or (1,)), alpha))
    return out.reshape(x.shape)


@kernel("index_fill.int_Scalar")
def index_fill(x, dim, index, value):
    x, index = _array(x), _array(index)
    out = x.copy().reshape(x.shape or (1,))
    out[_index_key(out.ndim, dim, index)] = value
    return out.reshape(x.shape)


@kernel("index_copy")
def index_copy(x, dim, index, source):
    x, index, source = _array(x), _array(index), _array(source)
    out = x.copy().reshape(x.shape or (1,))
    axis = _wrap_dim(dim, out.ndim)
    bad = _first_out_of_bounds(index, out.shape[axis])
    if bad is not None:
        raise IndexError(f"index_copy_(): index {bad} is out of bounds for dimension {axis} with size "
                         f"{out.shape[axis]}")
    out[_index_key(out.ndim, dim, index)] = source.reshape(source.shape or (1,))
    return out.reshape(x.shape)


# ----------------------------------------------------------------------------- index.Tensor, index_put
def _index_list_key(x: np.ndarray, indices: list) -> tuple:
    """NumPy's key for torch's ``Tensor?[]`` ``indices`` of ``x``: ``:`` for ``None``, a mask as the
    positions of its true elements (one array per mask dimension); torch's errors for the rest."""
    if not indices:
        raise IndexError("at least one index must be provided")
    if all(index is None for index in indices):
        raise RuntimeError("index: every entry of indices is None; give at least one index tensor "
                           "(torch fails on this input with an internal assert)")
    key: list[Any] = []
    dim = 0
    for index in indices:
        if index is None:
            key.append(slice(None))
            dim += 1
            continue
        index = _array(index)
        if index.dtype in (np.bool_, np.uint8):
            if index.ndim == 0:
                raise RuntimeError("index: a 0-d boolean index tensor is not supported (torch fails on it "
                                   "with an internal assert); index with a 1-d mask")
            if dim + index.ndim > x.ndim:
                raise IndexError(f"too many indices for tensor of dimension {x.ndim} "
                                 f"(got {dim + index.ndim})")
            for j, size in enumerate(index.shape):
                if size != x.shape[dim + j]:
                    raise IndexError(f"The shape of the mask {list(index.shape)} at index {j} does not match "
                                     f"the shape of the indexed tensor {list(x.shape)} at index {dim + j}")
            key.extend(np.nonzero(index.astype(np.bool_)))
            dim += index.ndim
            continue
        if index.dtype not in (np.int64, np.int32):
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        dim += 1
        if dim > x.ndim:
            raise IndexError(f"too many indices for tensor of dimension {x.ndim} (got {len(indices)})")
        size = x.shape[dim - 1]
        outside = (index < -size) | (index >= size)
        if outside.any():
            raise IndexError(f"index {int(index[outside].flat[0])} is out of bounds for dimension {dim - 1} "
                             f"with size {size}")
        key.append(index.astype(np.int64))
    arrays = [k for k in key if isinstance(k, np.ndarray)]
    try:
        np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes "
                         + ", ".join(str(list(a.shape)) for a in arrays)) from None
    return tuple(key)


@kernel("index.Tensor")
def index_tensor(x, indices):
    x = _array(x)
    return np.asarray(x[_index_list_key(x, indices)])


@kernel("index_put")
def index_put(x, indices, values, accumulate=False):
    x = _array(x)
    key = _index_list_key(x, indices)
    target = x[key].shape
    values = np.asarray(values, dtype=x.dtype)
    try:
        fits = values.ndim <= len(target) and np.broadcast_shapes(values.shape, target) == target
    except ValueError:
        fits = False
    if not fits:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast "
                           f"to indexing result of shape {list(target)}")
    out = x.copy()
    if accumulate:
        np.add.at(out, key, np.broadcast_to(values, target))
    else:
        out[key] = values
    return out
