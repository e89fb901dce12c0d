"""Shapes and views: reshape, permute, expand, squeeze, slicing and selecting, cat/stack, split, flips, padding."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from reference_engine.kernels.registry import kernel
from reference_engine.kernels.common import _array, _np_dtype, _wrap_dim


# ----------------------------------------------------------------------------- shapes and views
def _infer_size(size: list[int], numel: int) -> list[int]:
    size = list(size)
    if size.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if -1 in size:      # products of Python ints (math.prod: exact, and a tenth of np.prod's cost)
        known = math.prod(s for s in size if s != -1)
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{size}' is invalid for input of size {numel}")
        size[size.index(-1)] = numel // known
    if math.prod(size) != numel:
        raise RuntimeError(f"shape '{size}' is invalid for input of size {numel}")
    return size


@kernel("reshape", view=True)
def reshape(x, size):
    x = _array(x)
    return x.reshape(_infer_size(size, x.size))


@kernel("view", view=True)
def view(x, size):
    """``reshape`` that never copies: torch refuses a shape the strides cannot express."""
    x = _array(x)
    out = x.view()
    try:
        out.shape = _infer_size(size, x.size)       # NumPy's no-copy reshape, or AttributeError
    except AttributeError:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                           "dimension spans across two contiguous subspaces). Use .reshape(...) instead.") from None
    return out


@kernel("permute", view=True)
def permute(x, dims):
    x = _array(x)
    if len(dims) != x.ndim:
        raise RuntimeError(f"permute: number of dims {len(dims)} does not match the input's {x.ndim}")
    return np.transpose(x, [_wrap_dim(d, x.ndim) for d in dims]) if x.ndim else x.view()


@kernel("t", view=True)
def t(x):
    x = _array(x)
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return x.T


def _matrix_transpose(x, name: str):
    x = _array(x)
    if x.ndim < 2:
        raise RuntimeError(f"tensor.{name} is only supported on matrices or batches of matrices. Got {x.ndim}-D tensor.")
    return np.swapaxes(x, -2, -1)


@kernel("mT", view=True)
def mT(x):
    """The transpose of the last two dims."""
    return _matrix_transpose(x, "mT")


@kernel("mH", view=True)
def mH(x):
    """The conjugate transpose of the last two dims: the transpose on real dtypes."""
    return _matrix_transpose(x, "mH")


@kernel("reshape_as", view=True)
def reshape_as(x, other):
    return reshape(x, list(np.shape(other)))


@kernel("expand", view=True)
def expand(x, size, implicit=False):
    x = _array(x)
    lead = len(size) - x.ndim
    if lead < 0:
        raise RuntimeError(f"expand: the number of sizes provided ({len(size)}) must be greater or "
                           f"equal to the number of dimensions in the tensor ({x.ndim})")
    target = size if -1 not in size else [x.shape[i - lead] if s == -1 and i >= lead else s
                                           for i, s in enumerate(size)]
    if x.flags.c_contiguous and min(target, default=0) >= 0:
        # a C-contiguous x: the view made from its buffer (a stride of 0 where a dim is new or
        # of size 1), np.broadcast_to's read-only view at a fraction of its cost (no iterator)
        strides = [0] * lead
        for n, stride, s in zip(x.shape, x.strides, target[lead:]):
            if n != 1 and n != s:
                break                       # sizes that do not broadcast: NumPy's refusal below
            strides.append(0 if n == 1 else stride)
        else:
            out = np.ndarray(target, x.dtype, x, 0, strides)
            out.setflags(write=False)
            return out
    return np.broadcast_to(x, target)


@kernel("expand_as", view=True)
def expand_as(x, other):
    return expand(x, list(np.shape(other)))


@kernel("unsqueeze", view=True)
def unsqueeze(x, dim):
    x = _array(x)
    axis = _wrap_dim(dim, x.ndim + 1)
    return x.reshape(x.shape[:axis] + (1,) + x.shape[axis:])     # np.expand_dims's view, without its checks


@kernel("narrow", view=True)
def narrow(x, dim, start, length):
    x = _array(x)
    axis = _wrap_dim(dim, x.ndim)
    if start < 0:
        start += x.shape[axis]
    if not 0 <= start <= start + length <= x.shape[axis]:
        raise IndexError(f"start ({start}) + length ({length}) exceeds dimension size ({x.shape[axis]})")
    index = [slice(None)] * x.ndim
    index[axis] = slice(start, start + length)
    return x[tuple(index)]


@kernel("cat")
def cat(tensors, dim=0):
    arrays = [_array(t) for t in tensors]
    ndim = max(a.ndim for a in arrays)
    if any(a.ndim == 0 for a in arrays):
        raise RuntimeError("zero-dimensional tensor cannot be concatenated")
    if ndim > 1:     # torch's legacy rule: 1-d empty tensors are skipped next to higher ranks
        arrays = [a for a in arrays if a.shape != (0,)] or arrays[:1]
    return np.concatenate(arrays, axis=_wrap_dim(dim, ndim))


@kernel("_to_copy")
def to_copy(x, dtype=None, *_options):
    return np.array(x, dtype=_np_dtype(dtype), copy=True)


# ----------------------------------------------------------------------------- squeeze, select, slice, diagonal...
def _squeezable(x: np.ndarray, dims: list[int]) -> tuple[int, ...]:
    """The dims of ``dims`` (wrapped) that have size 1: torch squeezes those, ignores the rest."""
    return tuple(sorted({a for a in (_wrap_dim(d, x.ndim) for d in dims) if x.shape[a] == 1})) if x.ndim else ()


@kernel("squeeze", view=True)
def squeeze(x):
    x = _array(x)
    return x.reshape(tuple(s for s in x.shape if s != 1))


@kernel("squeeze.dim", view=True)
def squeeze_dim(x, dim):
    return squeeze_dims(x, [dim])


@kernel("squeeze.dims", view=True)
def squeeze_dims(x, dim):
    x = _array(x)
    return np.squeeze(x, _squeezable(x, dim)) if x.ndim else x.view()


@kernel("flatten.using_ints", view=True)
def flatten(x, start_dim=0, end_dim=-1):
    x = _array(x)
    if x.ndim == 0:
        return x.reshape(1)
    start, end = _wrap_dim(start_dim, x.ndim), _wrap_dim(end_dim, x.ndim)
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    return x.reshape(x.shape[:start] + (-1 if x.size else math.prod(x.shape[start:end + 1]),) + x.shape[end + 1:])


@kernel("transpose.int", "swapaxes", "swapdims", view=True)
def transpose(x, dim0, dim1):
    x = _array(x)
    if x.ndim == 0:
        _wrap_dim(dim0, 0), _wrap_dim(dim1, 0)
        return x.view()
    return np.swapaxes(x, _wrap_dim(dim0, x.ndim), _wrap_dim(dim1, x.ndim))


@kernel("movedim.int", view=True)
def movedim(x, source, destination):
    x = _array(x)
    if x.ndim == 0:
        _wrap_dim(source, 0), _wrap_dim(destination, 0)
        return x.view()
    return np.moveaxis(x, _wrap_dim(source, x.ndim), _wrap_dim(destination, x.ndim))


@kernel("stack")
def stack(tensors, dim=0):
    arrays = [_array(t) for t in tensors]
    if not arrays:
        raise RuntimeError("stack expects a non-empty TensorList")
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                           f"{' and '.join(str(list(s)) for s in sorted(shapes))}")
    return np.stack(arrays, axis=_wrap_dim(dim, arrays[0].ndim + 1))


@kernel("select.int", view=True)
def select(x, dim, index):
    x = _array(x)
    if x.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    axis = _wrap_dim(dim, x.ndim)
    size = x.shape[axis]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(x.shape)} "
                         f"at dimension {dim}")
    key = [slice(None)] * x.ndim
    key[axis] = index
    return x[(*key, Ellipsis)]          # the Ellipsis keeps a 0-d result a view, not a NumPy scalar


@kernel("select_backward")
def select_backward(grad_output, input_sizes, dim, index):
    grad_output = _array(grad_output)
    out = np.zeros(input_sizes, dtype=grad_output.dtype)
    select(out, dim, index)[...] = grad_output
    return out


def _slice_key(ndim: int, axis: int, start: int, end: int, step: int) -> tuple:
    key = [slice(None)] * ndim
    key[axis] = slice(start, max(start, end), step)
    return tuple(key)


@kernel("slice.Tensor", view=True)
def slice_tensor(x, dim=0, start=None, end=None, step=1):
    x = _array(x)
    if x.ndim == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    axis = _wrap_dim(dim, x.ndim)
    return x[_slice_key(x.ndim, axis, *_slice_bounds(x.shape[axis], start, end), step)]


def _slice_bounds(size: int, start: int | None, end: int | None) -> tuple[int, int]:
    """``slice``'s start and end as torch clamps them: ``None`` is the whole dim, a negative
    bound counts from the end, both lie in ``[0, size]``."""

    def bound(value: int | None, default: int) -> int:
        if value is None:
            return default
        value = value + size if value < 0 else value
        return min(max(value, 0), size)

    return bound(start, 0), bound(end, size)


@kernel("slice_backward")
def slice_backward(grad_output, input_sizes, dim, start, end, step):
    grad_output = _array(grad_output)
    out = np.zeros(input_sizes, dtype=grad_output.dtype)
    out[_slice_key(out.ndim, _wrap_dim(dim, out.ndim), start, end, step)] = grad_output
    return out


@kernel("diagonal", view=True)
def diagonal(x, offset=0, dim1=0, dim2=1):
    x = _array(x)
    a, b = _wrap_dim(dim1, x.ndim), _wrap_dim(dim2, x.ndim)
    if a == b:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    # np.diagonal's view (torch's: the other dims in order, then the diagonal) is read-only:
    # made writable when x is, as torch's view is
    out = x.diagonal(offset, a, b)
    if x.flags.writeable:
        out.setflags(write=True)
    return out


@kernel("diagonal_backward")
def diagonal_backward(grad_output, input_sizes, offset, dim1, dim2):
    grad_output = _array(grad_output)
    out = np.zeros(input_sizes, dtype=grad_output.dtype)
    diagonal(out, offset, dim1, dim2)[...] = grad_output
    return out


@kernel("repeat")
def repeat(x, repeats):
    x = _array(x)
    if len(repeats) < x.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of "
                           "dimensions of tensor")
    return np.tile(x.reshape((1,) * (len(repeats) - x.ndim) + x.shape), repeats)


@kernel("flip")
def flip(x, dims):
    x = _array(x)
    return np.flip(x, tuple(_wrap_dim(d, x.ndim) for d in dims)).copy() if x.ndim else x.copy()


@kernel("roll")
def roll(x, shifts, dims=()):
    x = _array(x)
    if not dims:
        return np.roll(x.reshape(-1), shifts[0]).reshape(x.shape)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    return np.roll(x, tuple(shifts), tuple(_wrap_dim(d, x.ndim) for d in dims))


def _triangle(name: str, numpy_triangle: Callable[..., np.ndarray]) -> Callable[..., Any]:
    """``tril`` / ``triu``: NumPy's, with torch's check that the input is at least 2-d."""

    def triangle(x, diagonal=0):
        x = _array(x)
        if x.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        return numpy_triangle(x, diagonal)

    return kernel(name)(triangle)


tril = _triangle("tril", np.tril)
triu = _triangle("triu", np.triu)


@kernel("clone")
def clone(x, memory_format=None):
    return np.array(x, copy=True)


@kernel("contiguous", view=True)
def contiguous(x, memory_format="contiguous_format"):
    x = _array(x)
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


# On real dtypes (the engine's) conjugation and the real part are the identity: torch returns the
# input itself from conj, resolve_conj and real.
@kernel("conj", "resolve_conj", "real", view=True)
def conj(x):
    return _array(x)


@kernel("conj_physical")
def conj_physical(x):
    """A copy: conjugation is the identity on real dtypes, and conj_physical returns no view."""
    return np.array(_array(x), copy=True)


@kernel("movedim.intlist", view=True)
def movedim_intlist(x, source, destination):
    x = _array(x)
    if len(source) != len(destination):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({source} dims) should contain "
                           f"the same number of dims as destination ({destination} dims)")
    if x.ndim == 0:
        return x.view()
    return np.moveaxis(x, [_wrap_dim(d, x.ndim) for d in source], [_wrap_dim(d, x.ndim) for d in destination])


@kernel("select_scatter")
def select_scatter(x, src, dim, index):
    out = np.array(_array(x), copy=True)
    select(out, dim, index)[...] = src
    return out


@kernel("slice_scatter")
def slice_scatter(x, src, dim=0, start=None, end=None, step=1):
    out = np.array(_array(x), copy=True)
    slice_tensor(out, dim, start, end, step)[...] = src
    return out


@kernel("diagonal_scatter")
def diagonal_scatter(x, src, offset=0, dim1=0, dim2=1):
    out = np.array(_array(x), copy=True)
    diagonal(out, offset, dim1, dim2)[...] = src
    return out


@kernel("unflatten.int", view=True)
def unflatten(x, dim, sizes):
    x = _array(x)
    if x.ndim == 0:
        raise IndexError("unflatten: cannot unflatten a 0-dim tensor")
    axis = _wrap_dim(dim, x.ndim)
    return x.reshape(x.shape[:axis] + tuple(_infer_size(sizes, x.shape[axis])) + x.shape[axis + 1:])


@kernel("narrow_copy")
def narrow_copy(x, dim, start, length):
    return narrow(x, dim, start, length).copy()


@kernel("constant_pad_nd")
def constant_pad_nd(x, pad, value=0):
    """``x`` padded with ``value`` by ``pad``'s (before, after) pairs, from the last dim backwards;
    a negative amount crops."""
    x = _array(x)
    if len(pad) % 2:
        raise RuntimeError(f"Length of pad must be even but instead it equals {len(pad)}")
    if len(pad) // 2 > x.ndim:
        raise RuntimeError("Length of pad should be no more than twice the number of dimensions of the input. "
                           f"Pad length is {len(pad)}while the input has {x.ndim}dimensions.")
    if x.ndim == 0:     # (pad is empty)
        return x.copy()
    crop = [slice(None)] * x.ndim
    widths = [(0, 0)] * x.ndim
    for pair in range(len(pad) // 2):
        axis = x.ndim - 1 - pair
        before, after = pad[2 * pair], pad[2 * pair + 1]
        if x.shape[axis] - max(0, -before) - max(0, -after) < 0:    # torch crops first, then pads
            raise RuntimeError("narrow(): length must be non-negative.")
        crop[axis] = slice(max(0, -before), x.shape[axis] - max(0, -after))
        widths[axis] = (max(0, before), max(0, after))
    return np.pad(x[tuple(crop)], widths, constant_values=np.asarray(value).astype(x.dtype))


@kernel("fliplr")
def fliplr(x):
    x = _array(x)
    if x.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return np.flip(x, 1).copy()


@kernel("flipud")
def flipud(x):
    x = _array(x)
    if x.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return np.flip(x, 0).copy()


@kernel("rot90")
def rot90(x, k=1, dims=(0, 1)):
    x = _array(x)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if x.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {x.ndim}")
    a, b = _wrap_dim(dims[0], x.ndim), _wrap_dim(dims[1], x.ndim)
    if a == b:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {a} and dim1 = {b}")
    return np.rot90(x, k, (a, b)).copy()


@kernel("tile")
def tile(x, dims):
    x = _array(x)
    return np.tile(x, tuple(dims)) if dims or x.ndim else x.copy()


# ----------------------------------------------------------------------------- Tensor[] outputs: split, chunk, unbind
# Each part is a view of its input (``np.split`` and indexing give views), as in torch.
def _split_parts(x: np.ndarray, sizes: list[int], axis: int) -> list[np.ndarray]:
    key = [slice(None)] * x.ndim
    parts, start = [], 0
    for size in sizes:
        key[axis] = slice(start, start + size)
        parts.append(x[tuple(key)])
        start += size
    return parts


@kernel("split_with_sizes", "split.sizes", view=True)
def split_with_sizes(x, split_sizes, dim=0):
    x = _array(x)
    if x.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    axis = _wrap_dim(dim, x.ndim)
    if any(s < 0 for s in split_sizes):
        raise RuntimeError(f"split_with_sizes expects split_sizes have only non-negative entries, but got "
                           f"split_sizes={list(split_sizes)}")
    if sum(split_sizes) != x.shape[axis]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {x.shape[axis]} (input "
                           f"tensor's size at dimension {axis}), but got split_sizes={list(split_sizes)}")
    return _split_parts(x, list(split_sizes), axis)


@kernel("split.Tensor", view=True)
def split(x, split_size, dim=0):
    x = _array(x)
    if x.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    if split_size < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got split_size={split_size}")
    axis = _wrap_dim(dim, x.ndim)
    size = x.shape[axis]
    if split_size == 0 and size != 0:
        raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}")
    count = max(-(-size // split_size), 1) if split_size else 1
    return _split_parts(x, [split_size] * (count - 1) + [size - split_size * (count - 1)], axis)


@kernel("chunk", view=True)
def chunk(x, chunks, dim=0):
    x = _array(x)
    if x.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    axis = _wrap_dim(dim, x.ndim)
    size = x.shape[axis]
    if size == 0:
        return _split_parts(x, [0] * chunks, axis)
    return split(x, -(-size // chunks), axis)


@kernel("unbind.int", view=True)
def unbind(x, dim=0):
    x = _array(x)
    if x.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    axis = _wrap_dim(dim, x.ndim)
    return [x[(slice(None),) * axis + (i, Ellipsis)] for i in range(x.shape[axis])]     # 0-d parts stay views
