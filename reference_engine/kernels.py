"""NumPy kernels: the value semantics of every declared operator.

``KERNELS["name.overload"]`` takes the schema's arguments positionally, in
schema order, with tensors as NumPy arrays (or, for wrapped numbers, Python
scalars), and returns arrays. Trailing arguments that mean nothing on a
single-device NumPy engine (layout, device, pin_memory, memory_format...) are
accepted and ignored (``*_options``). Kernels never record a graph: the
autograd layer of :mod:`reference_engine.dispatch` is above them.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from reference_engine.dtypes import DType

KERNELS: dict[str, Callable[..., Any]] = {}

# Kernels whose output may share memory with their first argument (torch view ops).
VIEW_OPS: set[str] = set()

# Kernels for calls that leave every keyword-only argument at its default (``a + b``, where
# ``alpha`` is 1): the same result as KERNELS' with those defaults, without the Python frame.
DEFAULT_KEYWORD_KERNELS: dict[str, Callable[..., Any]] = {}      # filled below


def kernel(*names: str, view: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn`` as the kernel of the operators ``names``."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for name in names:
            KERNELS[name] = fn
            if view:
                VIEW_OPS.add(name)
        return fn

    return register


# ----------------------------------------------------------------------------- helpers
def _np_dtype(dtype: DType | None) -> np.dtype | None:
    return None if dtype is None else dtype.numpy


def _wrap_dim(dim: int, ndim: int) -> int:
    bound = max(ndim, 1)
    if not -bound <= dim < bound:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-bound}, {bound - 1}], "
                         f"but got {dim})")
    return dim + bound if dim < 0 else dim


def _axes(dims: list[int] | None, ndim: int) -> tuple[int, ...] | None:
    """Reduction axes: None or [] mean every dim; a 0-d tensor accepts dim 0 / -1."""
    if not dims:
        return None
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


# ----------------------------------------------------------------------------- elementwise
# NumPy ufuncs whose semantics are torch's serve as kernels directly (no wrapper frame).
for _name, _ufunc in (("neg", np.negative), ("exp", np.exp), ("sin", np.sin), ("cos", np.cos),
                      ("tanh", np.tanh)):
    KERNELS[_name] = _ufunc
KERNELS["mul.Tensor"] = KERNELS["mul.Scalar"] = _multiply


@kernel("log")
def log(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(x)


@kernel("sigmoid")
def sigmoid(x):
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(np.negative(x)))


@kernel("sqrt")
def sqrt(x):
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
def div(x, other):
    if type(x) is np.ndarray and x.dtype.kind == "f" and (
            type(other) in _NUMBERS or (type(other) is np.ndarray and x.dtype is other.dtype)):
        dtype = None        # NumPy's result type is torch's
    else:
        dtype = result_dtype(x, other)
        if dtype.kind != "f":
            dtype = _FLOAT32            # true division of integers: the default float dtype
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(x, other) if dtype is None else np.true_divide(x, other, dtype=dtype)


@kernel("pow.Tensor_Scalar")
def pow_(x, exponent):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.power(x, exponent)


@kernel("where.self")
def where(condition, x, other):
    out = np.where(condition, x, other)
    dtype = result_dtype(x, other)
    return out if out.dtype == dtype else out.astype(dtype)


# ----------------------------------------------------------------------------- comparisons
for _name, _ufunc in (("gt", np.greater), ("ge", np.greater_equal), ("lt", np.less),
                      ("le", np.less_equal), ("eq", np.equal), ("ne", np.not_equal)):
    KERNELS[f"{_name}.Tensor"] = KERNELS[f"{_name}.Scalar"] = _ufunc


# ----------------------------------------------------------------------------- reductions
@kernel("sum")
def sum_all(x, dtype=None):
    return np.sum(x, dtype=_np_dtype(dtype))


@kernel("sum.dim_IntList")
def sum_dim(x, dim, keepdim=False, dtype=None):
    x = _array(x)
    return np.sum(x, axis=_axes(dim, x.ndim), keepdims=keepdim, dtype=_np_dtype(dtype))


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


@kernel("max.dim")
def max_dim(x, dim, keepdim=False):
    x = _array(x)
    if x.ndim == 0:
        _wrap_dim(dim, 0)
        return x.copy(), np.zeros((), np.int64)
    axis = _wrap_dim(dim, x.ndim)
    if x.shape[axis] == 0:
        raise IndexError(f"cannot reduce over dimension {dim} of size 0")
    return np.max(x, axis=axis, keepdims=keepdim), np.argmax(x, axis=axis, keepdims=keepdim).astype(np.int64)


# ----------------------------------------------------------------------------- linear algebra
@kernel("mm")
def mm(x, other):
    return np.matmul(x, other)


@kernel("addmm")
def addmm(bias, mat1, mat2, beta=1, alpha=1):
    product = _scale(np.matmul(mat1, mat2), alpha)
    if beta == 0:      # torch ignores the bias values (even NaN) when beta is 0
        return np.broadcast_to(product, np.broadcast_shapes(np.shape(bias), product.shape)).copy()
    return product + _scale(bias, beta)


# ----------------------------------------------------------------------------- shapes and views
def _infer_size(size: list[int], numel: int) -> list[int]:
    size = list(size)
    if size.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if -1 in size:
        known = int(np.prod([s for s in size if s != -1], dtype=np.int64))
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{size}' is invalid for input of size {numel}")
        size[size.index(-1)] = numel // known
    if int(np.prod(size, dtype=np.int64)) != numel:
        raise RuntimeError(f"shape '{size}' is invalid for input of size {numel}")
    return size


@kernel("view", "reshape", view=True)
def view(x, size):
    x = _array(x)
    return np.reshape(x, _infer_size(size, x.size))


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


@kernel("expand", view=True)
def expand(x, size, implicit=False):
    x = _array(x)
    lead = len(size) - x.ndim
    if lead < 0:
        raise RuntimeError(f"expand: the number of sizes provided ({len(size)}) must be greater or "
                           f"equal to the number of dimensions in the tensor ({x.ndim})")
    target = [x.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(size)]
    return np.broadcast_to(x, target)


@kernel("unsqueeze", view=True)
def unsqueeze(x, dim):
    x = _array(x)
    return np.expand_dims(x, _wrap_dim(dim, x.ndim + 1))


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


# ----------------------------------------------------------------------------- indexing
def _fit_to(array: np.ndarray, shape: tuple[int, ...], dim: int) -> np.ndarray:
    """``array`` restricted to ``shape`` in every dimension but ``dim`` (torch's gather/scatter rule)."""
    return array[tuple(slice(None) if d == dim else slice(0, s) for d, s in enumerate(shape))]


def _scatter_coordinates(index: np.ndarray, dim: int) -> tuple[np.ndarray, ...]:
    grid = list(np.indices(index.shape, sparse=True))
    grid[dim] = index
    return tuple(np.broadcast_arrays(*grid))


@kernel("gather")
def gather(x, dim, index, sparse_grad=False):
    x, index = _array(x), _array(index)
    if x.ndim == 0:
        return np.broadcast_to(x, index.shape).copy()
    axis = _wrap_dim(dim, x.ndim)
    return np.take_along_axis(_fit_to(x, index.shape, axis), index, axis=axis)


@kernel("scatter_add")
def scatter_add(x, dim, index, src):
    x, index, src = _array(x), _array(index), _array(src)
    if x.ndim == 0:      # a 0-d tensor scatters like a 1-element vector
        return scatter_add(x.reshape(1), dim, index.reshape(1), src.reshape(1)).reshape(())
    out = x.copy()
    axis = _wrap_dim(dim, x.ndim)
    if index.size:
        np.add.at(out, _scatter_coordinates(index, axis), _fit_to(src, index.shape, axis))
    return out


# ----------------------------------------------------------------------------- softmax
def _keep(x: np.ndarray, dim: int) -> int | None:
    return None if x.ndim == 0 else _wrap_dim(dim, x.ndim)


@kernel("_softmax")
def softmax(x, dim, half_to_float=False):
    x = _array(x)
    axis = _keep(x, dim)
    shifted = x - np.max(x, axis=axis, keepdims=True) if x.size else x
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


@kernel("_log_softmax")
def log_softmax(x, dim, half_to_float=False):
    x = _array(x)
    axis = _keep(x, dim)
    shifted = x - np.max(x, axis=axis, keepdims=True) if x.size else x
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


# ----------------------------------------------------------------------------- factories
@kernel("zeros_like")
def zeros_like(x, dtype=None, *_options):
    return np.zeros(np.shape(x), dtype=_np_dtype(dtype) or _array(x).dtype)


@kernel("new_zeros")
def new_zeros(x, size, dtype=None, *_options):
    return np.zeros(size, dtype=_np_dtype(dtype) or _array(x).dtype)

# ----------------------------------------------------------------------------- fused backward ops
@kernel("tanh_backward")
def tanh_backward(grad_output, output):
    return grad_output * (1 - output * output)


@kernel("sigmoid_backward")
def sigmoid_backward(grad_output, output):
    return grad_output * (1 - output) * output


@kernel("threshold_backward")
def threshold_backward(grad_output, x, threshold):
    grad_output = _array(grad_output)
    return np.where(_array(x) <= threshold, np.zeros((), grad_output.dtype), grad_output)


@kernel("_softmax_backward_data")
def softmax_backward_data(grad_output, output, dim, input_dtype):
    grad_output, output = _array(grad_output), _array(output)
    axis = _keep(output, dim)
    grad = output * (grad_output - np.sum(grad_output * output, axis=axis, keepdims=True))
    return grad.astype(_np_dtype(input_dtype), copy=False)


@kernel("_log_softmax_backward_data")
def log_softmax_backward_data(grad_output, output, dim, input_dtype):
    grad_output, output = _array(grad_output), _array(output)
    axis = _keep(output, dim)
    grad = grad_output - np.exp(output) * np.sum(grad_output, axis=axis, keepdims=True)
    return grad.astype(_np_dtype(input_dtype), copy=False)


@kernel("value_selecting_reduction_backward")
def value_selecting_reduction_backward(grad, dim, indices, sizes, keepdim):
    grad, indices = _array(grad), _array(indices)
    out = np.zeros(sizes, dtype=grad.dtype)
    if not sizes:
        out[...] = grad
        return out
    if not keepdim:
        grad, indices = np.expand_dims(grad, dim), np.expand_dims(indices, dim)
    np.put_along_axis(out, indices, grad, axis=_wrap_dim(dim, len(sizes)))
    return out


@kernel("gather_backward")
def gather_backward(grad, x, dim, index, sparse_grad=False):
    return scatter_add(np.zeros(np.shape(x), dtype=_array(grad).dtype), dim, index, grad)


# ----------------------------------------------------------------------------- shape and indexing (w-ops-c)
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
    return x.reshape(x.shape[:start] + (-1 if x.size else int(np.prod(x.shape[start:end + 1])),) + x.shape[end + 1:])


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
    # np.diagonal's view is read-only: the same view, writable, from the strides of x from
    # its first diagonal element on
    corner = [slice(None)] * x.ndim
    corner[b if offset >= 0 else a] = slice(abs(offset), None)
    start = x[tuple(corner)]
    length = max(0, min(start.shape[a], start.shape[b]))
    rest = [d for d in range(x.ndim) if d not in (a, b)]
    return np.lib.stride_tricks.as_strided(
        start, shape=tuple(x.shape[d] for d in rest) + (length,),
        strides=tuple(x.strides[d] for d in rest) + (x.strides[a] + x.strides[b],),
        writeable=x.flags.writeable)


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


@kernel("index_select")
def index_select(x, dim, index):
    x, index = _array(x), _array(index)
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if x.ndim == 0:
        if index.size != 1:
            raise IndexError(f"index_select(): Index to scalar can have only 1 value, got {index.size} value(s)")
        return x.reshape(1)[index.reshape(-1)].reshape(())
    return np.take(x, index.reshape(-1), axis=_wrap_dim(dim, x.ndim))


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
    return np.where(np.broadcast_to(mask, x.shape), value.astype(x.dtype), x)


@kernel("masked_scatter")
def masked_scatter(x, mask, source):
    x, mask, source = _array(x), _array(mask), _array(source)
    full = np.broadcast_shapes(x.shape, mask.shape)
    out = np.broadcast_to(x, full).copy()
    selected = np.broadcast_to(mask, full)
    count = int(selected.sum())
    if count > source.size:
        raise RuntimeError("masked_scatter: expected source to have at least as many elements as ones in mask")
    out[selected] = source.reshape(-1)[:count]
    return out


@kernel("masked_select")
def masked_select(x, mask):
    x, mask = _array(x), _array(mask)
    full = np.broadcast_shapes(x.shape, mask.shape)
    return np.broadcast_to(x, full)[np.broadcast_to(mask, full)]


@kernel("scatter.src", "scatter.value")
def scatter(x, dim, index, src):
    x, index = _array(x), _array(index)
    if x.ndim == 0:      # a 0-d tensor scatters like a 1-element vector
        src = _array(src)
        return scatter(x.reshape(1), dim, index.reshape(-1), src.reshape(-1) if src.ndim else src).reshape(())
    out = x.copy()
    axis = _wrap_dim(dim, x.ndim)
    if index.size:
        values = _array(src)
        values = _fit_to(values, index.shape, axis) if values.ndim else values
        out[_scatter_coordinates(index, axis)] = values
    return out


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


def _index_key(ndim: int, dim: int, index: np.ndarray) -> tuple:
    key: list = [slice(None)] * ndim
    key[_wrap_dim(dim, ndim)] = index.reshape(-1)
    return tuple(key)


@kernel("index_add")
def index_add(x, dim, index, source, alpha=1):
    x, index, source = _array(x), _array(index), _array(source)
    out = x.copy().reshape(x.shape or (1,))
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
    out[_index_key(out.ndim, dim, index)] = source.reshape(source.shape or (1,))
    return out.reshape(x.shape)


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
