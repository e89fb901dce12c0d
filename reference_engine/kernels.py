"""NumPy kernels: the value semantics of every declared operator.

``KERNELS["name.overload"]`` takes the schema's arguments positionally, in
schema order, with tensors as NumPy arrays (or, for wrapped numbers, Python
scalars), and returns arrays. Trailing arguments that mean nothing on a
single-device NumPy engine (layout, device, pin_memory, memory_format...) are
accepted and ignored (``*_options``). Kernels never record a graph: the
autograd layer of :mod:`reference_engine.dispatch` is above them.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from reference_engine.dtypes import DType
from reference_engine.factories import default_generator

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


@kernel("log")
def log(x):
    if type(x) is np.ndarray and x.dtype.kind != "f":
        x = x.astype(_FLOAT32)
    with np.errstate(divide="ignore", invalid="ignore"):
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
    if type(condition) is np.ndarray and condition.dtype != _BOOL:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{_TORCH_DTYPE_NAMES[condition.dtype.name]}")
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


# ----------------------------------------------------------------------------- linear algebra
#: C++'s names of the element types, as torch's matrix products print them.
_CPP_TYPE_NAMES = {"float64": "double", "float32": "float", "int64": "long int", "bool": "bool"}


@kernel("mm")
def mm(x, other):
    if x.dtype is not other.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_CPP_TYPE_NAMES[x.dtype.name]} "
                           f"!= {_CPP_TYPE_NAMES[other.dtype.name]}")
    if x.dtype == _BOOL:
        raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
    return np.matmul(x, other)


def _add_product(bias, product, beta, alpha):
    """``beta * bias + alpha * product``; torch ignores the bias values (even NaN) when beta is 0."""
    product = _scale(product, alpha)
    if beta == 0:
        return np.broadcast_to(product, np.broadcast_shapes(np.shape(bias), product.shape)).copy()
    return product + _scale(bias, beta)


@kernel("addmm")
def addmm(bias, mat1, mat2, beta=1, alpha=1):
    return _add_product(bias, np.matmul(mat1, mat2), beta, alpha)


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


@kernel("reshape", view=True)
def reshape(x, size):
    x = _array(x)
    return np.reshape(x, _infer_size(size, x.size))


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


@kernel("expand", view=True)
def expand(x, size, implicit=False):
    x = _array(x)
    lead = len(size) - x.ndim
    if lead < 0:
        raise RuntimeError(f"expand: the number of sizes provided ({len(size)}) must be greater or "
                           f"equal to the number of dimensions in the tensor ({x.ndim})")
    target = [x.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(size)]
    return np.broadcast_to(x, target)


@kernel("expand_as", view=True)
def expand_as(x, other):
    return expand(x, list(np.shape(other)))


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


def _first_out_of_bounds(index: np.ndarray, size: int) -> int | None:
    """The first entry of ``index`` outside ``[0, size)``, else None. torch's gather, scatter,
    index_add and index_copy refuse negative indices (no wrapping); index_fill wraps them."""
    bad = (index < 0) | (index >= size)
    return int(index[bad].flat[0]) if bad.any() else None


def _check_index(index: np.ndarray, size: int, dim: int) -> None:
    """torch's bounds check of gather / scatter / scatter_add / index_add."""
    bad = _first_out_of_bounds(index, size)
    if bad is not None:
        raise RuntimeError(f"index {bad} is out of bounds for dimension {dim} with size {size}")


def _scatter_coordinates(index: np.ndarray, dim: int) -> tuple[np.ndarray, ...]:
    grid = list(np.indices(index.shape, sparse=True))
    grid[dim] = index
    return tuple(np.broadcast_arrays(*grid))


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
    x, index, src = _array(x), _array(index), _array(src)
    if x.ndim == 0:      # a 0-d tensor scatters like a 1-element vector
        return scatter_add(x.reshape(1), dim, index.reshape(1), src.reshape(1)).reshape(())
    out = x.copy()
    axis = _wrap_dim(dim, x.ndim)
    _check_index(index, x.shape[axis], axis)
    if index.size:
        np.add.at(out, _scatter_coordinates(index, axis), _fit_to(src, index.shape, axis))
    return out


# ----------------------------------------------------------------------------- softmax
def _keep(x: np.ndarray, dim: int) -> int | None:
    return None if x.ndim == 0 else _wrap_dim(dim, x.ndim)


def _check_softmax_input(name: str, x: np.ndarray, dim: int) -> None:
    """torch has no integer or bool softmax kernel (pass ``dtype=`` to compute in a float)."""
    if x.dtype.kind != "f":
        last = x.ndim == 0 or _wrap_dim(dim, x.ndim) == x.ndim - 1
        raise NotImplementedError(f'"{name}_{"lastdim_" if last else ""}kernel_impl" not implemented for '
                                  f"'{_TORCH_DTYPE_NAMES[x.dtype.name]}'")


@kernel("_softmax")
def softmax(x, dim, half_to_float=False):
    x = _array(x)
    _check_softmax_input("softmax", x, dim)
    axis = _keep(x, dim)
    shifted = x - np.max(x, axis=axis, keepdims=True) if x.size else x
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


@kernel("_log_softmax")
def log_softmax(x, dim, half_to_float=False):
    x = _array(x)
    _check_softmax_input("log_softmax", x, dim)
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


@kernel("new_ones")
def new_ones(x, size, dtype=None, *_options):
    return np.ones(size, dtype=_np_dtype(dtype) or _array(x).dtype)


@kernel("new_full")
def new_full(x, size, fill_value, dtype=None, *_options):
    return np.full(size, fill_value, dtype=_np_dtype(dtype) or _array(x).dtype)

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


@kernel("hardtanh_backward")
def hardtanh_backward(grad_output, x, min_val, max_val):
    grad_output, x = _array(grad_output), _array(x)
    return np.where((x <= min_val) | (x >= max_val), np.zeros((), grad_output.dtype), grad_output)


@kernel("leaky_relu_backward")
def leaky_relu_backward(grad_output, x, negative_slope, self_is_result):
    if self_is_result and negative_slope < 0:
        raise RuntimeError("In-place leakyReLu backward calculation is triggered with a negative slope which is "
                           "not supported. This is caused by calling in-place forward function with a negative "
                           "slope, please call out-of-place version instead.")
    grad_output = _array(grad_output)
    return np.where(_array(x) > 0, grad_output, grad_output * negative_slope)


@kernel("hardswish_backward")
def hardswish_backward(grad_output, x):
    grad_output, x = _array(grad_output), _array(x)
    inside = grad_output * (x / 3 + 0.5)
    return np.where(x <= -3, np.zeros((), grad_output.dtype), np.where(x < 3, inside, grad_output))


@kernel("elu_backward")
def elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result):
    grad_output, y = _array(grad_output), _array(self_or_result)
    with np.errstate(all="ignore"):
        negative = y + alpha * scale if is_result else np.exp(y * input_scale) * (alpha * scale)
        slope = np.where(y > 0, scale, negative * input_scale)
    return (grad_output * slope).astype(np.result_type(grad_output, y), copy=False)


@kernel("gelu_backward")
def gelu_backward(grad_output, x, approximate="none"):
    grad_output, x = _array(grad_output), _floating(x)
    with np.errstate(all="ignore"):
        if approximate == "tanh":
            inner = np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))
            slope = 0.7978845608028654 * (1 + 0.134145 * x * x)
            derivative = 0.5 * (1 + inner) + 0.5 * x * (1 - inner * inner) * slope
        elif approximate == "none":
            derivative = 0.5 * (1 + _erf(x * 0.7071067811865476)) + x * np.exp(-0.5 * x * x) * 0.3989422804014327
        else:
            raise RuntimeError("approximate argument must be either none or tanh.")
    return (grad_output * derivative).astype(np.result_type(grad_output, x), copy=False)


@kernel("softplus_backward")
def softplus_backward(grad_output, x, beta, threshold):
    grad_output, x = _array(grad_output), _floating(x)
    with np.errstate(all="ignore"):
        scaled = x * beta
        slope = np.where(scaled > threshold, 1, 1 / (1 + np.exp(-scaled)))
    return (grad_output * slope).astype(np.result_type(grad_output, x), copy=False)


@kernel("softshrink_backward", "hardshrink_backward")
def shrink_backward(grad_output, x, lambd):
    grad_output = _array(grad_output)
    return np.where(np.abs(_array(x)) <= lambd, np.zeros((), grad_output.dtype), grad_output)


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


# ----------------------------------------------------------------------------- more matrix products
def _require_dims(name: str, **arrays: Any) -> None:
    """torch's dimension checks of the fixed-rank products (``bmm`` wants 3-D, ``mv`` 2-D and 1-D...)."""
    for label, (array, ndim) in arrays.items():
        if np.ndim(array) != ndim:
            raise RuntimeError(f"{name}: {label} must be a {ndim}D tensor, got {np.ndim(array)}D")


@kernel("bmm")
def bmm(x, mat2):
    _require_dims("bmm", self=(x, 3), mat2=(mat2, 3))
    return np.matmul(x, mat2)


@kernel("dot")
def dot(x, tensor):
    _require_dims("dot", self=(x, 1), tensor=(tensor, 1))
    return np.asarray(np.dot(x, tensor))


@kernel("mv")
def mv(x, vec):
    _require_dims("mv", self=(x, 2), vec=(vec, 1))
    return np.matmul(x, vec)


@kernel("outer", "ger")
def outer(x, vec2):
    _require_dims("outer", self=(x, 1), vec2=(vec2, 1))
    return np.multiply.outer(x, vec2)


@kernel("matmul")
def matmul(x, other):
    if np.ndim(x) == 0 or np.ndim(other) == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{np.ndim(x)}D and {np.ndim(other)}D")
    return np.asarray(np.matmul(x, other))


@kernel("addmv")
def addmv(x, mat, vec, beta=1, alpha=1):
    return _add_product(x, mv(mat, vec), beta, alpha)


@kernel("addr")
def addr(x, vec1, vec2, beta=1, alpha=1):
    return _add_product(x, outer(vec1, vec2), beta, alpha)


@kernel("baddbmm")
def baddbmm(x, batch1, batch2, beta=1, alpha=1):
    return _add_product(x, bmm(batch1, batch2), beta, alpha)


@kernel("addbmm")
def addbmm(x, batch1, batch2, beta=1, alpha=1):
    return _add_product(x, np.sum(bmm(batch1, batch2), axis=0), beta, alpha)


# ----------------------------------------------------------------------------- neural-network functions
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduce_loss(elements: np.ndarray, reduction: int) -> np.ndarray:
    """torch's ``reduction`` enum (0 none, 1 mean, 2 sum) applied to elementwise losses."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction == 1:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(np.mean(elements) if elements.size else np.float64("nan"), dtype=elements.dtype)
    return np.asarray(np.sum(elements), dtype=elements.dtype) if reduction == 2 else elements


@kernel("linear")
def linear(x, weight, bias=None):
    if np.ndim(weight) == 1 and bias is None:      # torch: input @ weight, the feature dim left out
        return np.matmul(x, weight)
    if np.ndim(weight) != 2:
        raise RuntimeError(f"linear: weight must be a 2D tensor (out_features, in_features), got {np.ndim(weight)}D")
    product = np.matmul(x, np.transpose(weight))
    return product if bias is None else product + bias


@kernel("softmax.int")
def softmax_int(x, dim, dtype=None):
    return softmax(np.asarray(x, dtype=_np_dtype(dtype)), dim)


@kernel("log_softmax.int")
def log_softmax_int(x, dim, dtype=None):
    return log_softmax(np.asarray(x, dtype=_np_dtype(dtype)), dim)


@kernel("mse_loss")
def mse_loss(x, target, reduction=1):
    diff = np.subtract(x, target)
    return _reduce_loss(diff * diff, reduction)


@kernel("l1_loss")
def l1_loss(x, target, reduction=1):
    return _reduce_loss(np.abs(np.subtract(x, target)), reduction)


@kernel("smooth_l1_loss")
def smooth_l1_loss(x, target, reduction=1, beta=1.0):
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    size = np.abs(np.subtract(x, target))
    if beta == 0:
        return _reduce_loss(size, reduction)
    return _reduce_loss(np.where(size < beta, 0.5 * size * size / beta, size - 0.5 * beta), reduction)


@kernel("huber_loss")
def huber_loss(x, target, reduction=1, delta=1.0):
    if delta <= 0:
        raise RuntimeError(f"huber_loss does not support non-positive values for delta.")
    size = np.abs(np.subtract(x, target))
    return _reduce_loss(np.where(size < delta, 0.5 * size * size, delta * (size - 0.5 * delta)), reduction)


def _same_size(name: str, x: np.ndarray, target: np.ndarray) -> None:
    if np.shape(x) != np.shape(target):
        raise ValueError(f"{name}: using a target size ({np.shape(target)}) that is different to the input size "
                         f"({np.shape(x)}) is deprecated. Please ensure they have the same size.")


@kernel("binary_cross_entropy")
def binary_cross_entropy(x, target, weight=None, reduction=1):
    x, target = _array(x), _array(target)
    _same_size("binary_cross_entropy", x, target)
    if x.size and not ((x >= 0) & (x <= 1)).all():
        raise RuntimeError("all elements of input should be between 0 and 1")
    with np.errstate(divide="ignore"):     # torch clamps the logs at -100
        log_x, log_complement = np.maximum(np.log(x), -100), np.maximum(np.log1p(-x), -100)
    elements = -(target * log_x + (1 - target) * log_complement)
    return _reduce_loss(elements if weight is None else elements * weight, reduction)


@kernel("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(x, target, weight=None, pos_weight=None, reduction=1):
    x, target = _array(x), _array(target)
    _same_size("binary_cross_entropy_with_logits", x, target)
    softplus_negative = np.logaddexp(0, -x)          # -log sigmoid(x), stable
    log_weight = 1 if pos_weight is None else 1 + (pos_weight - 1) * target
    elements = (1 - target) * x + log_weight * softplus_negative
    return _reduce_loss(elements if weight is None else elements * weight, reduction)


def _nll_picks(x, target, weight, ignore_index):
    """Per target: the class weight (0 where ignored) and the index of the picked class."""
    x, target = _array(x), _array(target)
    if x.ndim not in (1, 2):
        raise ValueError(f"input tensor should be 1D or 2D, got {x.ndim}D")
    if target.ndim != x.ndim - 1 or (x.ndim == 2 and target.shape[0] != x.shape[0]):
        raise ValueError(f"Expected input batch_size ({x.shape[0] if x.ndim == 2 else 1}) to match target "
                         f"batch_size ({target.shape[0] if target.ndim else 1}).")
    classes = x.shape[-1]
    kept = target != ignore_index
    if ((target[kept] < 0) | (target[kept] >= classes)).any():
        bad = target[kept][(target[kept] < 0) | (target[kept] >= classes)][0]
        raise IndexError(f"Target {bad} is out of bounds.")
    safe = np.where(kept, target, 0)
    class_weight = np.ones(classes, x.dtype) if weight is None else _array(weight)
    return np.where(kept, class_weight[safe], 0).astype(x.dtype), safe


@kernel("nll_loss_forward")
def nll_loss_forward(x, target, weight, reduction, ignore_index):
    x = _array(x)
    row_weight, safe = _nll_picks(x, target, weight, ignore_index)
    picked = np.take_along_axis(x.reshape(-1, x.shape[-1]), safe.reshape(-1, 1), axis=1).reshape(safe.shape)
    elements = -row_weight * picked
    total = np.asarray(np.sum(row_weight), dtype=x.dtype)
    if reduction == 0:      # torch reports the total weight of a 1-D input only
        return elements, total if x.ndim == 1 else np.zeros((), x.dtype)
    if reduction == 2:
        return np.asarray(np.sum(elements), dtype=x.dtype), total
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.sum(elements) / total, dtype=x.dtype), total


@kernel("nll_loss_backward")
def nll_loss_backward(grad_output, x, target, weight, reduction, ignore_index, total_weight):
    x, grad_output = _array(x), _array(grad_output)
    row_weight, safe = _nll_picks(x, target, weight, ignore_index)
    scale = -row_weight * grad_output
    if reduction == 1:
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = scale / total_weight
        # an ignored target contributes nothing, not 0 / 0: with every target ignored the loss
        # is NaN (0 / 0) but its gradient is zero, as torch's
        scale = np.where(np.asarray(target) != ignore_index, scale, 0)
    out = np.zeros(x.shape, grad_output.dtype)
    rows = out.reshape(-1, x.shape[-1])
    np.put_along_axis(rows, safe.reshape(-1, 1), np.broadcast_to(scale, safe.shape).reshape(-1, 1), axis=1)
    return out


@kernel("embedding")
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    weight, indices = _array(weight), _array(indices)
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    if indices.size and (indices.min() < 0 or indices.max() >= weight.shape[0]):
        raise IndexError("index out of range in self")
    return np.take(weight, indices, axis=0)


@kernel("embedding_dense_backward")
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    grad_output, indices = _array(grad_output), _array(indices).reshape(-1)
    rows = grad_output.reshape(indices.size, -1) if indices.size else grad_output.reshape(0, grad_output.shape[-1])
    out = np.zeros((num_weights, rows.shape[1]), grad_output.dtype)
    np.add.at(out, indices, rows)
    if scale_grad_by_freq:
        counts = np.bincount(indices, minlength=num_weights)
        out /= np.maximum(counts, 1)[:, None]
    if padding_idx >= 0:
        out[padding_idx] = 0
    return out
# ----------------------------------------------------------------------------- logical ops, tests of
# values, index and boolean reductions (formulas/comparison.py); reductions (formulas/reductions_more.py)
for _name, _ufunc in (("logical_and", np.logical_and), ("logical_or", np.logical_or),
                      ("logical_xor", np.logical_xor), ("logical_not", np.logical_not),
                      ("isnan", np.isnan), ("isfinite", np.isfinite)):
    KERNELS[_name] = _ufunc


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


@kernel("ones_like")
def ones_like(x, dtype=None, *_options):
    return np.ones(np.shape(x), dtype=_np_dtype(dtype) or _array(x).dtype)


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
# ============================================================================= pointwise math
# and activations (formulas/unary.py, binary.py, activations.py)
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


for _name, _fn in (
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
for _name, _ufunc in (("abs", np.abs), ("sign", np.sign), ("floor", np.floor), ("ceil", np.ceil),
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


@kernel("clamp")
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
    return np.where(x > threshold, x, np.asarray(value, dtype=x.dtype))


@kernel("logit")
def logit(x, eps=None):
    x = _floating(x)
    with np.errstate(all="ignore"):
        clamped = x if eps is None else np.clip(x, eps, 1 - eps)
        return np.log(clamped / (1 - clamped)).astype(x.dtype)



KERNELS["sgn"] = np.sign
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


@kernel("softshrink")
def softshrink(x, lambd=0.5):
    x = _array(x)
    return np.where(x > lambd, x - lambd, np.where(x < -lambd, x + lambd, np.zeros((), x.dtype)))


@kernel("hardshrink")
def hardshrink(x, lambd=0.5):
    x = _array(x)
    return np.where(np.abs(x) > lambd, x, np.zeros((), x.dtype))
# ----------------------------------------------------------------------------- shape and indexing
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


# On real dtypes (the engine's) conjugation and the real part are the identity: torch returns the
# input itself from conj, resolve_conj and real.
@kernel("conj", "resolve_conj", "real", view=True)
def conj(x):
    return _array(x)


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
    _check_index(index, x.shape[axis], axis)
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


# ----------------------------------------------------------------------------- pooling over the last two dims
# of a (C, H, W) or (N, C, H, W) input (formulas/pooling.py): max_pool2d_with_indices, avg_pool2d and their
# backward operators. A window's cells are read one kernel offset at a time, vectorized over the output.
_POOL_PAIR_FORMS = {"kernel_size": "must either be", "stride": "must either be omitted,",
                    "padding": "must either be", "dilation": "must be either"}


def _pool_pair(op: str, name: str, values: list[int], default: tuple[int, int] | None = None) -> tuple[int, int]:
    """A 2-d pooling argument given as one int or two (``default`` when empty, for ``stride``)."""
    if not values and default is not None:
        return default
    if len(values) not in (1, 2):
        raise RuntimeError(f"{op}: {name} {_POOL_PAIR_FORMS[name]} a single int, or a tuple of two ints")
    return values[0], values[-1]


def _pooled_size(size: int, kernel: int, pad: int, stride: int, dilation: int, ceil_mode: bool) -> int:
    """Outputs along one dim: windows of ``kernel`` cells ``dilation`` apart, ``stride`` apart,
    over the input padded by ``pad`` on both sides; with ``ceil_mode`` a last partial window
    counts when it starts inside the input or its left padding."""
    if stride == 0:
        raise RuntimeError("stride should not be zero")
    if pad < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {pad}")
    if pad > int(((kernel - 1) * dilation + 1) / 2):      # C++ division, truncated (kernel may be 0)
        raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={pad}, "
                           f"kernel_size={kernel} and dilation={dilation}")
    span = size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _pool_geometry(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int], pad: tuple[int, int],
                   dilation: tuple[int, int], ceil_mode: bool) -> tuple[int, int]:
    """The output's (height, width), after torch's checks of the arguments against ``x``."""
    out_h = _pooled_size(x.shape[-2], kernel[0], pad[0], stride[0], dilation[0], ceil_mode)
    out_w = _pooled_size(x.shape[-1], kernel[1], pad[1], stride[1], dilation[1], ceil_mode)
    if kernel[0] <= 0 or kernel[1] <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {kernel[0]} kW: {kernel[1]}")
    if stride[0] <= 0 or stride[1] <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dH: {stride[0]} dW: {stride[1]}")
    if dilation[0] <= 0 or dilation[1] <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {dilation[0]} "
                           f"dilationW: {dilation[1]}")
    if x.ndim not in (3, 4) or 0 in x.shape[-3:]:      # only a batch may be empty
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, "
                           f"but got:{list(x.shape)}")
    if kernel[1] // 2 < pad[1] or kernel[0] // 2 < pad[0]:
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got padW = {pad[1]}, "
                           f"padH = {pad[0]}, kW = {kernel[1]}, kH = {kernel[0]}")
    if out_h < 1 or out_w < 1:
        planes, height, width = x.shape[-3:]
        raise RuntimeError(f"Given input size: ({planes}x{height}x{width}). Calculated output size: "
                           f"({planes}x{out_h}x{out_w}). Output size is too small")
    return out_h, out_w


def _max_pool_arguments(x, kernel_size, stride, padding, dilation):
    x = _array(x)
    kernel = _pool_pair("max_pool2d", "kernel_size", kernel_size)
    steps = _pool_pair("max_pool2d", "stride", stride, kernel)
    pad = _pool_pair("max_pool2d", "padding", padding)
    dilation = _pool_pair("max_pool2d", "dilation", dilation)
    if x.ndim not in (3, 4):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    return x, kernel, steps, pad, dilation


def _avg_pool_arguments(x, kernel_size, stride, padding, divisor_override):
    x = _array(x)
    kernel = _pool_pair("avg_pool2d", "kernel_size", kernel_size)
    steps = _pool_pair("avg_pool2d", "stride", stride, kernel)
    pad = _pool_pair("avg_pool2d", "padding", padding)
    if divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    if x.ndim == 0:     # torch reads the planes as size(-3)
        raise IndexError("Dimension specified as -3 but tensor has no dimensions")
    _wrap_dim(-3, x.ndim)
    return x, kernel, steps, pad


def _window_cells(size: int, out: int, stride: int, pad: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Along one dim, the input position of each output's cell at kernel ``offset`` (clipped into
    range) and whether it lies inside the input."""
    positions = np.arange(out) * stride - pad + offset
    inside = (positions >= 0) & (positions < size)
    return np.clip(positions, 0, max(size - 1, 0)), inside


def _check_pooled_size(tensor: np.ndarray, x: np.ndarray, out_h: int, out_w: int) -> None:
    """torch's check that a backward's ``grad_output`` (or ``indices``) has the forward output's shape."""
    for dim, size in ((x.ndim - 3, x.shape[-3]), (x.ndim - 2, out_h), (x.ndim - 1, out_w)):
        if tensor.ndim != x.ndim or tensor.shape[dim] != size:
            got = tensor.shape[dim] if dim < tensor.ndim else 0
            raise RuntimeError(f"Expected a tensor of dimension {x.ndim} and tensor.size[{dim}] == {size} but got: "
                               f"dimension {tensor.ndim} and tensor.size[{dim}] = {got}")


@kernel("max_pool2d_with_indices")
def max_pool2d_with_indices(x, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    """Each window's maximum and its flat index into the H*W plane: the first maximum in row-major
    order, or the last NaN when the window holds one (as torch's CPU kernel picks)."""
    x, kernel, steps, pad, dilation = _max_pool_arguments(x, kernel_size, stride, padding, dilation)
    out_h, out_w = _pool_geometry(x, kernel, steps, pad, dilation, ceil_mode)
    height, width = x.shape[-2:]
    # a window's index starts at its first cell inside the input (torch's, even when -inf wins)
    first_row = np.arange(out_h) * steps[0] - pad[0]
    first_row = first_row + (-np.minimum(first_row, 0) + dilation[0] - 1) // dilation[0] * dilation[0]
    first_col = np.arange(out_w) * steps[1] - pad[1]
    first_col = first_col + (-np.minimum(first_col, 0) + dilation[1] - 1) // dilation[1] * dilation[1]
    shape = x.shape[:-2] + (out_h, out_w)
    indices = np.broadcast_to(first_row[:, None] * width + first_col[None, :], shape).copy()
    values = np.full(shape, -np.inf).astype(x.dtype) if x.dtype.kind == "f" else np.full(shape, np.iinfo(x.dtype).min)
    for i in range(kernel[0]):
        rows, rows_inside = _window_cells(height, out_h, steps[0], pad[0], i * dilation[0])
        for j in range(kernel[1]):
            cols, cols_inside = _window_cells(width, out_w, steps[1], pad[1], j * dilation[1])
            cell = x[..., rows[:, None], cols[None, :]]
            taken = (rows_inside[:, None] & cols_inside[None, :]) & ((cell > values) | np.isnan(cell))
            values = np.where(taken, cell, values)
            indices = np.where(taken, rows[:, None] * width + cols[None, :], indices)
    return values, indices.astype(np.int64)


@kernel("max_pool2d_with_indices_backward")
def max_pool2d_with_indices_backward(grad_output, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """``grad_output`` added at ``indices`` into zeros of ``x``'s shape (indices outside the plane,
    which torch's forward gives a window lying wholly in the padding, add nothing)."""
    x, kernel, steps, pad, dilation = _max_pool_arguments(x, kernel_size, stride, padding, dilation)
    grad_output, indices = _array(grad_output), _array(indices)
    out_h, out_w = _pool_geometry(x, kernel, steps, pad, dilation, ceil_mode)
    _check_pooled_size(grad_output, x, out_h, out_w)
    _check_pooled_size(indices, x, out_h, out_w)
    if indices.dtype != np.int64:
        found = {"float64": "Double", "float32": "Float", "bool": "Bool"}[indices.dtype.name]
        raise RuntimeError(f"expected scalar type Long but found {found}")
    planes = int(np.prod(x.shape[:-2]))
    plane_size = x.shape[-2] * x.shape[-1]
    flat_indices = indices.reshape(planes, out_h * out_w)
    kept = (flat_indices >= 0) & (flat_indices < plane_size)
    out = np.zeros((planes, plane_size), grad_output.dtype)
    plane_of = np.broadcast_to(np.arange(planes)[:, None], flat_indices.shape)
    np.add.at(out, (plane_of[kept], flat_indices[kept]), grad_output.reshape(planes, out_h * out_w)[kept])
    return out.reshape(x.shape)


def _avg_divisors(size: int, out: int, kernel: int, stride: int, pad: int, count_include_pad: bool) -> np.ndarray:
    """Along one dim, each window's extent that divides: its cells up to the padded input's end,
    or only those inside the input."""
    starts = np.arange(out) * stride - pad
    ends = np.minimum(starts + kernel, size + pad)
    if count_include_pad:
        return ends - starts
    return np.maximum(np.minimum(ends, size) - np.maximum(starts, 0), 0)


def _avg_pool_divisor(x, out_h, out_w, kernel, steps, pad, count_include_pad, divisor_override):
    """Each output's divisor (0 where its window holds no input cell, whose output is 0)."""
    height, width = x.shape[-2:]
    inside = (_avg_divisors(height, out_h, kernel[0], steps[0], pad[0], False)[:, None]
              * _avg_divisors(width, out_w, kernel[1], steps[1], pad[1], False)[None, :])
    if divisor_override is not None:
        divisor = np.full((out_h, out_w), divisor_override)
    elif count_include_pad:
        divisor = (_avg_divisors(height, out_h, kernel[0], steps[0], pad[0], True)[:, None]
                   * _avg_divisors(width, out_w, kernel[1], steps[1], pad[1], True)[None, :])
    else:
        divisor = inside
    return np.where(inside > 0, divisor, 0)


@kernel("avg_pool2d")
def avg_pool2d(x, kernel_size, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Each window's sum of input cells over its divisor: ``divisor_override``, else the window's
    size up to the padded input's end (``count_include_pad``) or its count of input cells."""
    x, kernel, steps, pad = _avg_pool_arguments(x, kernel_size, stride, padding, divisor_override)
    out_h, out_w = _pool_geometry(x, kernel, steps, pad, (1, 1), ceil_mode)
    height, width = x.shape[-2:]
    total = np.zeros(x.shape[:-2] + (out_h, out_w), x.dtype)
    for i in range(kernel[0]):
        rows, rows_inside = _window_cells(height, out_h, steps[0], pad[0], i)
        for j in range(kernel[1]):
            cols, cols_inside = _window_cells(width, out_w, steps[1], pad[1], j)
            inside = rows_inside[:, None] & cols_inside[None, :]
            total = total + np.where(inside, x[..., rows[:, None], cols[None, :]], 0)
    divisor = _avg_pool_divisor(x, out_h, out_w, kernel, steps, pad, count_include_pad, divisor_override)
    safe = np.where(divisor == 0, 1, divisor)
    if x.dtype.kind == "f":
        return np.where(divisor == 0, 0, total / safe).astype(x.dtype)
    return np.where(divisor == 0, 0, np.trunc(total / safe)).astype(x.dtype)     # C++ integer division


@kernel("avg_pool2d_backward")
def avg_pool2d_backward(grad_output, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """Each output's gradient over its divisor, added to every input cell of its window."""
    x, kernel, steps, pad = _avg_pool_arguments(x, kernel_size, stride, padding, divisor_override)
    grad_output = _array(grad_output)
    out_h, out_w = _pool_geometry(x, kernel, steps, pad, (1, 1), ceil_mode)
    _check_pooled_size(grad_output, x, out_h, out_w)
    height, width = x.shape[-2:]
    divisor = _avg_pool_divisor(x, out_h, out_w, kernel, steps, pad, count_include_pad, divisor_override)
    share = np.where(divisor == 0, 0, grad_output / np.where(divisor == 0, 1, divisor)).astype(grad_output.dtype)
    out = np.zeros(x.shape, grad_output.dtype)
    for i in range(kernel[0]):
        rows, rows_inside = _window_cells(height, out_h, steps[0], pad[0], i)
        for j in range(kernel[1]):
            cols, cols_inside = _window_cells(width, out_w, steps[1], pad[1], j)
            # within one kernel offset distinct outputs read distinct cells, so += adds each once
            kept_rows, kept_cols = np.flatnonzero(rows_inside), np.flatnonzero(cols_inside)
            out[..., rows[kept_rows][:, None], cols[kept_cols][None, :]] += \
                share[..., kept_rows[:, None], kept_cols[None, :]]
    return out


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


# ----------------------------------------------------------------------------- layer_norm, dropout, hardsigmoid
def _layer_norm_checks(x: np.ndarray, normalized_shape: list[int], weight: Any, bias: Any) -> None:
    """torch's argument checks of layer normalization."""
    if not normalized_shape:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
                           f"element, but got normalized_shape = {list(normalized_shape)}")
    for name, param in (("weight", weight), ("bias", bias)):
        if param is not None and list(_array(param).shape) != list(normalized_shape):
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                               f"{list(_array(param).shape)} and normalized_shape = {list(normalized_shape)}")
    k = len(normalized_shape)
    if x.ndim < k or list(x.shape[x.ndim - k:]) != list(normalized_shape):
        expected = ", ".join(map(str, normalized_shape))
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {expected}], but got input of size{list(x.shape)}")


@kernel("native_layer_norm")
def native_layer_norm(x, normalized_shape, weight, bias, eps):
    """``(out, mean, rstd)``: ``mean`` and ``rstd`` keep the normalized dims as size 1 (torch's
    mean 0 and rstd NaN when those dims hold no element)."""
    x = _floating(x)
    _layer_norm_checks(x, normalized_shape, weight, bias)
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    kept = x.shape[:x.ndim - len(normalized_shape)] + (1,) * len(normalized_shape)
    with np.errstate(all="ignore"):
        if math.prod(normalized_shape) == 0:
            mean = np.zeros(kept, x.dtype)
            rstd = np.full(kept, np.nan, x.dtype)
        else:
            mean = np.mean(x, axis=axes, keepdims=True)
            centered = x - mean
            variance = np.mean(centered * centered, axis=axes, keepdims=True)
            rstd = 1 / np.sqrt(variance + eps)
        out = (x - mean) * rstd
        if weight is not None:
            out = out * _array(weight)
        if bias is not None:
            out = out + _array(bias)
    return out.astype(x.dtype), mean.astype(x.dtype), rstd.astype(x.dtype)


@kernel("layer_norm")
def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    return native_layer_norm(x, normalized_shape, weight, bias, eps)[0]


@kernel("native_dropout")
def native_dropout(x, p, train):
    """``(output, mask)``: in training (``train`` None or True) each element is kept with probability
    ``1 - p`` (the engine's default generator; torch's random stream cannot be reproduced) and
    scaled by ``1 / (1 - p)``; in evaluation the identity with an all-true mask. As torch, an
    empty input gives an empty mask of its own dtype."""
    x = _array(x)
    if x.size == 0:
        return x.copy(), np.empty(x.shape, x.dtype)
    if train is not None and not train:
        return x.copy(), np.ones(x.shape, np.bool_)
    keep = 1.0 - p
    if not 0.0 <= keep <= 1.0:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={keep}")
    mask = default_generator.numpy.random(x.shape) < keep
    scale = 0.0 if keep == 0.0 else 1.0 / keep
    return x * mask * np.asarray(scale, x.dtype), mask


@kernel("native_dropout_backward")
def native_dropout_backward(grad_output, mask, scale):
    """``grad_output * mask * scale`` (broadcast; a mask of any dtype, as torch's CPU kernel takes)."""
    grad_output = _array(grad_output)
    product = grad_output * _array(mask)
    return product * np.asarray(scale, product.dtype)


KERNELS["hardsigmoid"] = _float_unary(lambda x: np.minimum(np.maximum(x + 3, 0), 6) / 6)


@kernel("hardsigmoid_backward")
def hardsigmoid_backward(grad_output, x):
    grad_output, x = _array(grad_output), _array(x)
    inside = (x > -3) & (x < 3)
    return np.where(inside, grad_output / 6, np.zeros((), grad_output.dtype))


# ----------------------------------------------------------------------------- cumprod and vector norms
# (formulas/reductions_extra.py)
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


# ----------------------------------------------------------------------------- convolution (conv1d, conv2d)
_TORCH_DTYPE_NAMES = {"float64": "Double", "float32": "Float", "float16": "Half", "int64": "Long", "bool": "Bool"}


def _conv_param(values: Any, name: str, spatial: int) -> list[int]:
    """``stride``/``padding``/... as one value per spatial dim; a single value is every dim's."""
    values = [values] if isinstance(values, int) else list(values)
    if len(values) == 1:
        return values * spatial
    if len(values) != spatial:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {spatial} values to match "
                           f"the convolution dimensions, but got {name}={values}")
    return values


def _check_convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """The checks torch makes before a convolution; returns the per-dim parameters."""
    if weight.ndim < 3:
        raise RuntimeError("weight should have at least three dimensions")
    spatial = weight.ndim - 2
    stride, padding, dilation, output_padding = (
        _conv_param(values, name, spatial) for values, name in
        ((stride, "stride"), (padding, "padding"), (dilation, "dilation"), (output_padding, "output_padding")))
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(op < 0 for op in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if x.ndim != weight.ndim:
        raise RuntimeError(f"Expected {weight.ndim}-dimensional input for {weight.ndim}-dimensional weight "
                           f"{list(weight.shape)}, but got {x.ndim}-dimensional input of size {list(x.shape)} instead")
    if x.dtype != weight.dtype:
        raise RuntimeError(f"expected scalar type {_TORCH_DTYPE_NAMES.get(x.dtype.name, x.dtype.name)} but found "
                           f"{_TORCH_DTYPE_NAMES.get(weight.dtype.name, weight.dtype.name)}")
    if weight.shape[0] < groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at dimension 0, but got "
                           f"weight of size {list(weight.shape)} instead")
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                           f"got weight of size [{list(weight.shape)}] instead")
    in_channels = weight.shape[0] if transposed else weight.shape[1] * groups
    out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
    if x.shape[1] != in_channels:
        given = f"transposed={int(transposed)}" if transposed else f"groups={groups}"
        raise RuntimeError(f"Given {given}, weight of size {list(weight.shape)}, expected input{list(x.shape)} to "
                           f"have {in_channels} channels, but got {x.shape[1]} channels instead")
    if bias is not None and (np.ndim(bias) != 1 or np.shape(bias)[0] != out_channels):
        given = "transposed=1, " if transposed else ""
        raise RuntimeError(f"Given {given}weight of size {list(weight.shape)}, expected bias to be 1-dimensional with "
                           f"{out_channels} elements, but got bias of size {list(np.shape(bias))} instead")
    if transposed:
        if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
            raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                               f"output_padding={output_padding}, stride={stride}, dilation={dilation}")
    else:
        padded = [size + 2 * p for size, p in zip(x.shape[2:], padding)]
        reach = [d * (k - 1) + 1 for k, d in zip(weight.shape[2:], dilation)]
        if any(size < r for size, r in zip(padded, reach)):
            raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel "
                               f"size: ({' x '.join(map(str, reach))}). Kernel size can't be greater than actual "
                               "input size")
    return stride, padding, dilation, output_padding


def _windows(padded, kernel_sizes, stride, dilation, out_sizes):
    """A strided view of ``padded`` (N, C, *spatial): (N, C, *out_sizes, *kernel_sizes), element
    ``[n, c, *o, *k]`` being ``padded[n, c, *(o * stride + k * dilation)]`` (no copy)."""
    strides = padded.strides
    return np.lib.stride_tricks.as_strided(
        padded, (*padded.shape[:2], *out_sizes, *kernel_sizes),
        (*strides[:2], *(st * s for st, s in zip(strides[2:], stride)),
         *(st * d for st, d in zip(strides[2:], dilation))), writeable=False)


@kernel("convolution")
def convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """N-d convolution (cross-correlation) of ``x`` (N, C_in, *spatial) with ``weight``, or its
    transpose (the adjoint of the convolution with the same weight) when ``transposed``."""
    x, weight = _array(x), _array(weight)
    stride, padding, dilation, output_padding = _check_convolution(
        x, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    spatial = weight.ndim - 2
    batch, kernel_sizes = x.shape[0], weight.shape[2:]
    kernel_axes = tuple(range(-spatial, 0))
    if not transposed:
        out_sizes = [(size + 2 * p - d * (k - 1) - 1) // s + 1
                     for size, k, s, p, d in zip(x.shape[2:], kernel_sizes, stride, padding, dilation)]
        padded = np.pad(x, [(0, 0), (0, 0), *((p, p) for p in padding)]) if any(padding) else x
        windows = _windows(padded, kernel_sizes, stride, dilation, out_sizes)
        group_in, group_out = weight.shape[1], weight.shape[0] // groups
        parts = []
        for g in range(groups):     # im2col (tensordot copies the windows) and one matrix product per group
            columns = windows[:, g * group_in:(g + 1) * group_in]
            kernel_g = weight[g * group_out:(g + 1) * group_out]
            parts.append(np.moveaxis(np.tensordot(columns, kernel_g, ((1, *kernel_axes), (1, *range(2, 2 + spatial)))),
                                     -1, 1))
        out = parts[0] if groups == 1 else np.concatenate(parts, axis=1)
    else:
        # every input element spreads weight-scaled copies over its kernel's reach: the sum of
        # those, cropped by the padding (and extended by output_padding at the end)
        out_sizes = [(size - 1) * s - 2 * p + d * (k - 1) + op + 1 for size, k, s, p, d, op in
                     zip(x.shape[2:], kernel_sizes, stride, padding, dilation, output_padding)]
        if any(size <= 0 for size in out_sizes):
            raise RuntimeError(f"Given input size per channel: {list(x.shape[2:])}, the calculated output size "
                               f"{out_sizes} is too small: reduce the padding")
        group_in, group_out = weight.shape[0] // groups, weight.shape[1]
        full = np.zeros((batch, group_out * groups,
                         *((size - 1) * s + d * (k - 1) + 1 + op for size, k, s, d, op in
                           zip(x.shape[2:], kernel_sizes, stride, dilation, output_padding))),
                        dtype=np.result_type(x, weight))
        for g in range(groups):
            # (N, *spatial, group_out, *kernel): each input position's contribution per kernel offset
            spread = np.tensordot(x[:, g * group_in:(g + 1) * group_in], weight[g * group_in:(g + 1) * group_in],
                                  ((1,), (0,)))
            spread = np.moveaxis(spread, 1 + spatial, 1)
            for offset in np.ndindex(*kernel_sizes):
                target = tuple(slice(k * d, k * d + (size - 1) * s + 1, s) for k, d, s, size in
                               zip(offset, dilation, stride, x.shape[2:]))
                full[(slice(None), slice(g * group_out, (g + 1) * group_out), *target)] += \
                    spread[(Ellipsis, *offset)]
        out = full[(slice(None), slice(None), *(slice(p, p + size) for p, size in zip(padding, out_sizes)))]
    out = np.ascontiguousarray(out, dtype=np.result_type(x, weight))
    if bias is not None:
        out += np.reshape(bias, (-1, *(1,) * spatial))
    return out


def _conv_nd(name, spatial, x, weight, bias, stride, padding, dilation, groups, transposed=False, output_padding=0):
    """``conv{1,2}d`` / ``conv_transpose{1,2}d``: ``convolution`` of a batched or unbatched input."""
    x = _array(x)
    if x.ndim not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) input to {name}, but got "
                           f"input of size: {list(x.shape)}")
    def per_dim(values):        # an int[N] argument given one value means it for every dim
        values = [values] if isinstance(values, int) else list(values)
        return values * spatial if len(values) == 1 else values
    out = convolution(x if x.ndim == spatial + 2 else x[None], weight, bias, per_dim(stride), per_dim(padding),
                      per_dim(dilation), transposed, per_dim(output_padding), groups)
    return out if x.ndim == spatial + 2 else out[0]


@kernel("conv1d")
def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv_nd("conv1d", 1, x, weight, bias, stride, padding, dilation, groups)


@kernel("conv2d")
def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv_nd("conv2d", 2, x, weight, bias, stride, padding, dilation, groups)


@kernel("conv_transpose1d")
def conv_transpose1d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_nd("conv_transpose1d", 1, x, weight, bias, stride, padding, dilation, groups, True, output_padding)


@kernel("conv_transpose2d.input")
def conv_transpose2d_input(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_nd("conv_transpose2d", 2, x, weight, bias, stride, padding, dilation, groups, True, output_padding)
