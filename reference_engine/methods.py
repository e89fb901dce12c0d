"""Tensor operators and methods, routed through the dispatcher.

Python operators map to declared operators (``a * b`` is ``at.mul``), other
methods are *composite*: built from declared operators (``x.mean()`` is a
sum divided by ``numel``, ``x @ y`` is ``mm``), so they are differentiable
exactly when the operators they use have formulas. Any declared operator
taking ``Tensor self`` first is also a method (``x.exp()``, ``x.sum(0)``).
In-place methods compute out of place, write the result into the tensor's
array, bump its version and, when recording, move the tensor onto the new
node (its old value is kept as a copy for the backward that needs it). An
operand sharing memory with the written tensor is refused as torch refuses it
(:func:`~reference_engine.views.check_operand_overlap`).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from reference_engine import forward_mode
from reference_engine.dispatch import dispatcher, is_torch_tensor
from reference_engine.dtypes import CPU, DType, Device, bool_, float32, float64, int64
from reference_engine.engine import run_backward
from reference_engine.grad_mode import grad_mode
from reference_engine.graph import Node, NotImplementedBackward
from reference_engine.kernels import result_dtype
from reference_engine.tensor import Tensor
from reference_engine.views import (check_expanded_index_put, check_operand_overlap, check_view_write, overlapping,
                                    rebase, regenerate_views, writable)


_packets = dispatcher.packets      # updated in place by Dispatcher.refresh


#: ``at`` as the engine's formulas see it: ``_at.sub`` is the operator's entry point (a keyword
#: at its default, ``alpha=1``, makes the cached positional call).
_at = dispatcher.operators


#: A reference_engine tensor handed to torch, or a torch tensor to the engine: say how to convert.
MIXED_MESSAGE = ("{what}: a torch.Tensor and a reference_engine Tensor do not mix, each library computes on its own "
                 "tensors only; convert with engine.tensor(t.detach().numpy()) or torch.from_numpy(x.detach().numpy())")


def _torch_function(cls: type, func: Any, types: tuple, args: tuple = (), kwargs: dict | None = None) -> Any:
    """torch's override protocol: a torch function given an engine tensor raises, saying so
    (torch would otherwise read it as a sequence of numbers and drop its graph)."""
    raise TypeError(MIXED_MESSAGE.format(what=f"torch's {getattr(func, '__name__', func)}"))


Tensor.__torch_function__ = classmethod(_torch_function)


def _reflected(name: str, commutative: bool = False) -> Callable[[Tensor, Any], Any]:
    """``other <op> self`` for a Python number ``other`` (it becomes a wrapped number); a
    ``commutative`` one is recorded as ``self <op> other``, as torch does (``2 * x`` is ``x * 2``)."""
    def method(self: Tensor, other: Any) -> Any:
        if is_torch_tensor(other):
            raise TypeError(MIXED_MESSAGE.format(what=f"'{name}'"))
        left = other if isinstance(other, Tensor) else Tensor._wrapped_number(other)
        return (_packets.get(name) or dispatcher.packet(name)).call((self, left) if commutative else (left, self), {})

    method.__name__ = f"r{name}"
    return method


for _name in ("add", "sub", "mul", "pow"):
    setattr(Tensor, f"__r{_name}__", _reflected(_name, commutative=_name in ("add", "mul")))
Tensor.__rtruediv__ = _reflected("div")

# Python operators that are declared operators: ``a * b`` is the entry point of ``mul``
# itself (installed, with the other declared operators, by install_operator_methods).
_OPERATOR_METHODS = {"__add__": "add", "__sub__": "sub", "__mul__": "mul", "__truediv__": "div",
                     "__pow__": "pow", "__neg__": "neg", "__gt__": "gt", "__ge__": "ge", "__lt__": "lt",
                     "__le__": "le", "__eq__": "eq", "__ne__": "ne"}


def _matmul(self: Tensor, other: Tensor) -> Tensor:
    """``@`` as torch's ``matmul``: 1-D and 2-D operands through ``mm``; an N-D operand times
    a 2-D one folds its batch into ``mm``'s rows; other batched products broadcast their batch
    dimensions and are a ``mul`` summed over the shared dimension (no ``bmm`` formula)."""
    if type(other) is Tensor:       # a fast path, ahead of the checks: matrices that multiply
        a, b = self._data, other._data
        if a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0]:
            return _at.mm(self, other)
    if self.dim() == 0 or other.dim() == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{self.dim()}D and {other.dim()}D")
    if self.size(-1) != other.size(-2 if other.dim() > 1 else -1):
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, self.shape))} "
                           f"and {'x'.join(map(str, other.shape))})")
    if self.dim() == 2 and other.dim() == 2:
        return dispatcher.call("mm", (self, other), {})
    left = self.unsqueeze(0) if self.dim() == 1 else self
    right = other.unsqueeze(1) if other.dim() == 1 else other
    if right.dim() == 2:
        rows = left.reshape(-1, left.size(-1))
        out = dispatcher.call("mm", (rows, right), {}).reshape(*left.shape[:-1], right.size(1))
    else:       # (..., n, k, 1) * (..., 1, k, m) summed over k
        out = (left.unsqueeze(-1) * right.unsqueeze(-3)).sum(-2)
    size = list(out.shape)      # drop the dimensions a 1-D operand was given
    if other.dim() == 1:
        del size[-1]
    if self.dim() == 1:
        del size[-1 if other.dim() == 1 else -2]
    return out if out.sizes() == size else out.view(size)


Tensor.__matmul__ = _matmul
Tensor.matmul = _matmul


# ----------------------------------------------------------------------------- composites
def _mean(self: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """``mean()`` is the declared ``mean`` (else ``sum() / numel()``); with ``dim`` it is the
    declared ``mean.dim``."""
    if dim is None and not keepdim and _declared("mean", (self,), {"dtype": dtype}):
        return dispatcher.call("mean", (self,), {"dtype": dtype})
    if dim is None and not keepdim:
        return dispatcher.call("sum", (self,), {"dtype": dtype}) / self.numel()
    return dispatcher.call("mean", (self, dim, keepdim), {"dtype": dtype})


def _declared(name: str, args: tuple, kwargs: dict) -> Any:
    """The library's own overload of ``name`` for these arguments, when one is declared
    (a composite below steps aside for it), else None."""
    packet = dispatcher.packets.get(name)
    if packet is None:
        return None
    try:
        return packet.resolve(args, kwargs)
    except TypeError:
        return None


def _max(self: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``max()`` over all elements or ``max(dim)`` (``values``, ``indices``): the declared overloads."""
    return dispatcher.call("max", (self, *args), kwargs)


def _min(self: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``min()`` / ``min(dim, keepdim)``: the declared overloads."""
    if not _declared("min", (self, *args), kwargs) and isinstance(args[0] if args else kwargs.get("other"), Tensor):
        raise TypeError("min(other) (torch.minimum) is not declared in the formula library; "
                        "use where(a < b, a, b)")
    return dispatcher.call("min", (self, *args), kwargs)


def _argmax(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The index of the first maximum (over the flattened tensor when ``dim`` is None)."""
    if _declared("argmax", (self, dim, keepdim), {}):
        return dispatcher.call("argmax", (self, dim, keepdim), {})
    if dim is None:
        return dispatcher.call("max", (self.detach().reshape(-1), 0), {})[1]
    return dispatcher.call("max", (self.detach(), dim, keepdim), {})[1]


def _argmin(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    if _declared("argmin", (self, dim, keepdim), {}):
        return dispatcher.call("argmin", (self, dim, keepdim), {})
    return _argmax(-self.detach(), dim, keepdim)


def _softmax_composite(name: str) -> Callable[..., Tensor]:
    def method(self: Tensor, dim: int, dtype: Any = None) -> Tensor:
        source = self if dtype is None else dispatcher.call("_to_copy", (self,), {"dtype": dtype})
        return dispatcher.call(f"_{name}", (source, dim, False), {})

    method.__name__ = name
    method.__doc__ = f"``{name}(dim, dtype=None)``: the declared ``_{name}`` (cast to ``dtype`` first)."
    return method


def _flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """The dimensions ``start_dim..end_dim`` merged into one (a ``reshape``)."""
    if self.dim() == 0:
        return self.reshape(1)
    start, end = (d % self.dim() for d in (start_dim, end_dim))
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    merged = int(np.prod(self.shape[start:end + 1]))
    return self.reshape(*self.shape[:start], merged, *self.shape[end + 1:])


def _reshape(self: Tensor, *shape: Any) -> Tensor:
    size = list(shape[0]) if len(shape) == 1 and isinstance(shape[0], (list, tuple)) else list(shape)
    return dispatcher.call("reshape", (self, size), {})


def _view(self: Tensor, *shape: Any) -> Tensor:
    size = list(shape[0]) if len(shape) == 1 and isinstance(shape[0], (list, tuple)) else list(shape)
    return dispatcher.call("view", (self, size), {})


def _permute(self: Tensor, *dims: Any) -> Tensor:
    order = list(dims[0]) if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else list(dims)
    return dispatcher.call("permute", (self, order), {})


def _expand(self: Tensor, *sizes: Any) -> Tensor:
    size = list(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)) else list(sizes)
    return dispatcher.call("expand", (self, size), {})


def _transpose(self: Tensor, dim0: int, dim1: int) -> Tensor:
    """``transpose`` as the permutation that swaps two dims."""
    order = list(range(self.dim()))
    if order:
        a, b = order[dim0], order[dim1]
        order[a], order[b] = b, a
    return _permute(self, order)


def _getitem(self: Tensor, key: Any) -> Tensor:
    """Basic indexing (ints, slices, ``None``, ``...``) composed from ``narrow`` (``slice``
    for a stepped slice: views, as torch's), ``reshape``; integer-array and boolean-mask keys
    through ``index.Tensor`` (:func:`_advanced_index`)."""
    keys = key if isinstance(key, tuple) else (key,)
    _check_steps(keys)
    if not _is_basic(keys):
        if _supported_advanced(keys):
            return _advanced_index(*_split_advanced(self, keys))
        if grad_mode.enabled and self._requires_grad:
            raise IndexError(f"indexing a tensor that requires grad with {key!r} is not supported by the "
                             f"reference engine (None, a bool or a stepped slice next to an index array); "
                             f"index in two steps, or under no_grad()")
        index = tuple(k._data if isinstance(k, Tensor) else k for k in keys)
        return Tensor._wrap(np.asarray(self._data[index if isinstance(key, tuple) else index[0]]))
    if Ellipsis in keys:
        at = keys.index(Ellipsis)
        fill = self.dim() - sum(1 for k in keys if k is not None and k is not Ellipsis)
        keys = keys[:at] + (slice(None),) * fill + keys[at + 1:]
    if sum(1 for k in keys if k is not None) > self.dim():
        raise IndexError(f"too many indices for tensor of dimension {self.dim()}")
    out, dim, final_size = self, 0, []
    for k in keys:
        if k is None:
            final_size.append(1)
            continue
        size = self.size(dim)
        if isinstance(k, slice):
            start, stop, step = k.indices(size)
            if step == 1:
                length = max(stop - start, 0)
                out = dispatcher.call("narrow", (out, dim, start, length), {})
            else:
                length = len(range(start, stop, step))
                out = dispatcher.call("slice", (out, dim, start, stop, step), {})
            final_size.append(length)
        else:
            index = int(k)
            if not -size <= index < size:
                raise IndexError(f"index {index} is out of bounds for dimension {dim} with size {size}")
            out = dispatcher.call("narrow", (out, dim, index % size, 1), {})
        dim += 1
    final_size.extend(out.sizes()[dim:])
    return out if out.sizes() == final_size else out.reshape(final_size)



def _check_steps(keys: tuple) -> None:
    """torch's refusal of slices that step backwards (``x[::-1]``; ``flip`` does that)."""
    for k in keys:
        if isinstance(k, slice) and k.step is not None and k.step <= 0:
            raise ValueError("slice step cannot be zero" if k.step == 0 else "step must be greater than zero")


def _supported_advanced(keys: tuple) -> bool:
    """Index arrays with ints, ``:``-like slices and ``...``: what :func:`_advanced_index` records."""
    return not any(k is None or isinstance(k, bool) or (isinstance(k, slice) and k.step not in (None, 1))
                   for k in keys)


def _split_advanced(self: Tensor, keys: tuple) -> tuple[Tensor, list]:
    """Apply the basic part of a key holding index arrays (ints and slices: torch selects
    with them first) and return the rest: index arrays in their places, ``:`` elsewhere."""
    basic: list[Any] = []
    rest: list[Any] = []
    for k in keys:
        if k is Ellipsis or isinstance(k, slice):
            basic.append(k)
            rest.append(k if k is Ellipsis else slice(None))
        elif isinstance(k, (int, np.integer)):
            basic.append(k)
        else:
            array = np.asarray(k._data if isinstance(k, Tensor) else k)
            basic.extend([slice(None)] * (array.ndim if array.dtype == np.bool_ else 1))
            rest.append(array)
    return _getitem(self, tuple(basic)), rest


def _index_list(self: Tensor, keys: list) -> list:
    """``index.Tensor``'s ``Tensor?[]`` for the rest of a key holding index arrays (see
    :func:`_split_advanced`): one entry per dimension of ``self`` from the left, ``None`` for
    ``:``, ``...`` spread over the dimensions no other entry takes (a mask takes one per its
    dimensions), trailing ``:`` left out."""
    taken = sum(k.ndim if isinstance(k, np.ndarray) and k.dtype == np.bool_ else 1
                for k in keys if k is not Ellipsis)
    indices: list = []
    for k in keys:
        if k is Ellipsis:
            indices.extend([None] * max(self.dim() - taken, 0))
        elif isinstance(k, np.ndarray):
            indices.append(Tensor._wrap(k if k.dtype == np.bool_ or k.size else k.astype(np.int64)))
        else:
            indices.append(None)
    while indices and indices[-1] is None:
        indices.pop()
    return indices


def _advanced_index(self: Tensor, keys: list) -> Tensor:
    """``x[key]`` where ``key`` holds integer arrays or boolean masks and ``:``: ``index.Tensor``
    (NumPy's and torch's placement: the broadcast index dimensions replace the indexed ones
    when those are adjacent, else they come first), recorded with its formula."""
    return dispatcher.call("index", (self, _index_list(self, keys)), {})


def _check_written_view(self: Tensor, target: Tensor, key: Any) -> None:
    if target is not self and target._data.size and not np.may_share_memory(target._data, self._data):
        raise RuntimeError(f"item assignment with {key!r}: the indexed region is not a view of the tensor")


def _is_index_put(keys: tuple) -> bool:
    """Index arrays and masks with only ``:`` and ``...`` beside them: a key ``index_put`` writes."""
    return _supported_advanced(keys) and all(
        k is Ellipsis or (isinstance(k, slice) and k == slice(None)) or not isinstance(k, (slice, int, np.integer))
        for k in keys)


def _is_basic(keys: tuple) -> bool:
    return all(k is None or k is Ellipsis or isinstance(k, slice)
               or (isinstance(k, (int, np.integer)) and not isinstance(k, bool)) for k in keys)


Tensor.mean = _mean
Tensor.max = _max
Tensor.min = _min
Tensor.argmax = _argmax
Tensor.argmin = _argmin
Tensor.softmax = _softmax_composite("softmax")
Tensor.log_softmax = _softmax_composite("log_softmax")
Tensor.flatten = _flatten
Tensor.reshape = _reshape
Tensor.view = _view
Tensor.permute = _permute
Tensor.expand = _expand
Tensor.transpose = _transpose
Tensor.T = property(lambda self: _permute(self, list(range(self.dim() - 1, -1, -1))))
Tensor.__getitem__ = _getitem


# ----------------------------------------------------------------------------- NumPy interop
# NumPy's names for ufuncs whose torch operator is spelled differently (others are the same).
_TORCH_NAMES = {"subtract": "sub", "multiply": "mul", "true_divide": "div", "divide": "div",
                "negative": "neg", "power": "pow", "greater": "gt", "greater_equal": "ge", "less": "lt",
                "less_equal": "le", "equal": "eq", "not_equal": "ne", "absolute": "abs", "arcsin": "asin",
                "arccos": "acos", "arctan": "atan", "arctan2": "atan2", "arcsinh": "asinh",
                "arccosh": "acosh", "arctanh": "atanh"}


def _array(self: Tensor, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
    """``np.asarray(t)``: the values (torch's refusal for a tensor that requires grad)."""
    if self._requires_grad:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                           "instead.")
    array = self._data if dtype is None else self._data.astype(dtype, copy=False)
    return array.copy() if copy else array


def _array_ufunc(self: Tensor, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """``np.ones(4) + t``, ``np.sin(t)``: the declared operator of that name (or a composite)
    on engine tensors, recorded; NumPy on the values for other ufuncs when nothing
    requires grad, and a TypeError naming the missing operator when something does."""
    name = _TORCH_NAMES.get(ufunc.__name__, ufunc.__name__)
    args = [Tensor(x) if isinstance(x, np.ndarray) else x.item() if isinstance(x, np.generic) else x
            for x in inputs]
    if "out" in kwargs:
        raise TypeError(f"numpy.{ufunc.__name__}(..., out=...) cannot write into an engine tensor; "
                        f"assign the result instead")
    if method == "__call__" and not kwargs and (name in dispatcher.packets or name in _COMPOSITE_UFUNCS):
        return getattr(Tensor, name)(*args) if name in _COMPOSITE_UFUNCS else dispatcher.call(name, tuple(args), {})
    if grad_mode.enabled and any(isinstance(a, Tensor) and a._requires_grad for a in args):
        raise TypeError(f"numpy.{ufunc.__name__} ({method}) of a tensor that requires grad cannot be recorded: "
                        f"the formula library declares no '{name}' operator; add a formula for it, or "
                        f"use engine operators")
    out = getattr(ufunc, method)(*[a._data if isinstance(a, Tensor) else a for a in args], **kwargs)
    if isinstance(out, tuple):
        return tuple(Tensor._wrap(np.asarray(o)) for o in out)
    return Tensor._wrap(np.asarray(out))


def _dlpack(self: Tensor, **options: Any) -> Any:
    """DLPack export, what ``torch.tensor(t)`` (a copy) and ``torch.as_tensor(t)`` /
    ``torch.from_dlpack(t)`` (the same memory) read; refused, with torch's message, while the
    tensor requires grad."""
    if self._requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    return self._data.__dlpack__(**options)


_COMPOSITE_UFUNCS = frozenset({"matmul"})
Tensor.__array__ = _array
Tensor.__dlpack__ = _dlpack
Tensor.__dlpack_device__ = lambda self: self._data.__dlpack_device__()
Tensor.__array_ufunc__ = _array_ufunc


# ----------------------------------------------------------------------------- in place
def _inplace(self: Tensor, compute: Callable[[Tensor], Tensor], what: str, others: tuple = (),
             ufunc: np.ufunc | None = None, overlap: str | None = "partial", fills: bool = False,
             written: Any = None) -> Tensor:
    """``compute(self)`` written into ``self`` (recorded when an input requires grad, see the
    module docstring). ``ufunc``: the operator's NumPy ufunc, for the fast path below.
    ``overlap``: torch's check of the tensor ``others`` against ``self``'s memory, made ahead
    of both paths, the fast one included (:func:`~reference_engine.views.check_operand_overlap`):
    ``"partial"`` refuses a partial overlap, ``"any"`` also the same memory (``index_put_``),
    None makes none (``fill_`` reads its value as a number). ``fills``: one value for every
    element (``fill_`` of a number, ``zero_``), written into an expanded view as torch writes it
    (:func:`~reference_engine.views.writable`). ``written``: the NumPy key of the only elements
    written (``index_put_`` into an expanded view: an element sharing memory with a written one
    must not be written back with its old value). Torch's checks come in its order: autograd's
    refusals, then its kernel's (elements sharing memory, then the operands)."""
    if forward_mode.state.tangents is not None and any(
            forward_mode.tangent_of(t) is not None for t in (self, *others)):
        raise RuntimeError(f"{what} on a dual tensor inside jvp: the reference engine's forward mode does not "
                           f"track in-place writes; use the out-of-place operator")
    view = getattr(self, "_view", None)
    recording = grad_mode.enabled and (
        self._requires_grad or (view is not None and view.base._requires_grad)
        or any(isinstance(o, Tensor) and o._requires_grad for o in others))
    if recording:
        if view is not None:
            check_view_write(self, view)
        elif self._requires_grad and self._grad_fn is None:
            raise RuntimeError(f"a leaf Variable that requires grad is being used in an in-place operation. "
                               f"({what}: wrap it in no_grad() if this is a parameter update)")
    data = self._data
    if not data.flags.writeable:        # an expanded view (NumPy's array is read-only), or torch's error
        data = writable(self, what, shared=fills or written is not None)
    if others and overlap is not None:
        check_operand_overlap(data, others, what, overlap == "partial")
    if recording:
        old = Tensor._wrap(self._data.copy())     # the value before the write, for the backward
        old._grad_fn, old._output_nr, old._requires_grad = self._grad_fn, self._output_nr, self._requires_grad
        result = compute(old)
    elif ufunc is not None and _same_float_dtype_and_shape(self, others[0]):
        # A fast path (the no_grad parameter update ``p -= p.grad * lr``): operands of one
        # floating dtype and shape, where NumPy's result is torch's and the kernel is the bare
        # ufunc (kernels/common.py), computed straight into the array.
        ufunc(data, others[0]._data, out=data)
        self._bump_version()
        return self
    else:
        result = compute(self)
    if result._data.shape != self._data.shape:
        raise RuntimeError(f"{what}: output with shape {list(self.shape)} doesn't match the broadcast "
                           f"shape {list(result.shape)}")
    if written is None:
        np.copyto(data, result._data, casting="same_kind")
    else:
        data[written] = result._data[written]
    self._bump_version()
    if recording:
        if view is not None:
            rebase(self, view, result)
        else:
            self._grad_fn, self._output_nr, self._requires_grad = result._grad_fn, result._output_nr, True
            regenerate_views(self)
    return self


def _same_float_dtype_and_shape(self: Tensor, other: Any) -> bool:
    """Whether ``other`` is a tensor of ``self``'s floating dtype and shape."""
    if type(other) is not Tensor:
        return False
    data, other_data = self._data, other._data
    return data.dtype is other_data.dtype and data.dtype.kind == "f" and data.shape == other_data.shape


def _add_(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    return _inplace(self, lambda s: _at.add(s, other, alpha=alpha), "add_", (other,),
                    np.add if type(alpha) is int and alpha == 1 else None)


def _sub_(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    return _inplace(self, lambda s: _at.sub(s, other, alpha=alpha), "sub_", (other,),
                    np.subtract if type(alpha) is int and alpha == 1 else None)


def _mul_(self: Tensor, other: Any) -> Tensor:
    return _inplace(self, lambda s: _at.mul(s, other), "mul_", (other,), np.multiply)


def _div_(self: Tensor, other: Any) -> Tensor:
    return _inplace(self, lambda s: _at.div(s, other), "div_", (other,))


def _overwrite(self: Tensor, value: Any, what: str, node_name: str, overlap: str | None = "partial") -> Tensor:
    """``self`` overwritten with ``value`` (a number or a tensor broadcast to ``self``'s shape,
    cast to its dtype), recorded as an :class:`OverwriteBackward` named ``node_name``: the old
    value's gradient is exactly zero (also where the incoming gradient is NaN) and a tensor
    ``value`` receives its part, summed over what it was broadcast to. ``overlap``: as :func:`_inplace`'s."""
    source = value if isinstance(value, Tensor) else None
    if source is not None:
        _check_broadcasts_to(value.shape, self.shape)
        value = value._data
    value = np.asarray(value, dtype=self._data.dtype)
    written = np.broadcast_to(value, np.broadcast_shapes(self._data.shape, value.shape))   # more dims: refused below

    def compute(old: Tensor) -> Tensor:
        result = Tensor._wrap(written.copy())
        if grad_mode.enabled and (old._requires_grad or source is not None and source._requires_grad):
            result._grad_fn, result._output_nr, result._requires_grad = (
                OverwriteBackward(node_name, old, source), 0, True)
        return result

    return _inplace(self, compute, what, () if source is None else (source,), overlap=overlap, fills=source is None)


class OverwriteBackward(Node):
    """``grad_fn`` of ``zero_``, ``fill_`` and ``copy_``, with torch's names and edges: the old
    value (first edge) gets a zero gradient; the tensor written, if any (second edge), gets the
    incoming one summed over what it was broadcast to (the engine casts it to its dtype)."""

    __slots__ = ("node_name", "source_shape")

    def __init__(self, node_name: str, old: Tensor, source: Tensor | None) -> None:
        tensors = [old] if source is None else [old, source]
        edges = [None if not t._requires_grad else (t, 0) if t._grad_fn is None else (t._grad_fn, t._output_nr)
                 for t in tensors]
        super().__init__(edges, [(t._data.shape, t._data.dtype) if t._requires_grad else None for t in tensors], 1)
        self.node_name = node_name
        self.source_shape = None if source is None else source._data.shape

    def name(self) -> str:
        return self.node_name

    def apply(self, grads: list, create_graph: bool) -> tuple[Tensor | None, ...]:
        (grad,) = grads
        old_grad = None if self.edge_targets[0] is None else Tensor._wrap(np.zeros_like(grad._data))
        if len(self.edge_targets) == 1:
            return (old_grad,)
        source_grad = None if self.edge_targets[1] is None else _sum_to(grad, self.source_shape)
        return old_grad, source_grad


def _sum_to(grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``grad`` summed over the dimensions a tensor of ``shape`` was broadcast along (recorded
    under ``create_graph``)."""
    lead = grad.dim() - len(shape)
    dims = [*range(lead), *(lead + i for i, n in enumerate(shape) if n == 1 and grad._data.shape[lead + i] != 1)]
    if dims:
        grad = grad.sum(dims, keepdim=True)
    return grad if grad._data.shape == shape else grad.reshape(list(shape))


def _check_broadcasts_to(source: tuple[int, ...], target: tuple[int, ...]) -> None:
    """torch's error for a source that does not broadcast to the written shape (more dimensions
    than the target: the shape check of :func:`_inplace` reports it)."""
    for dim, (a, b) in enumerate(zip(target[::-1], source[::-1])):
        if b != 1 and a != b:
            raise RuntimeError(f"The size of tensor a ({a}) must match the size of tensor b ({b}) at "
                               f"non-singleton dimension {len(target) - 1 - dim}")


def _zero_(self: Tensor) -> Tensor:
    """Fill with zeros; when recording, the gradient through it is zero."""
    return _overwrite(self, 0, "zero_", "ZeroBackward0")


def _fill_(self: Tensor, value: Any) -> Tensor:
    """Fill with ``value`` (a number or a 0-d tensor, whose gradient is the sum of the incoming one)."""
    if isinstance(value, Tensor) and value.dim() != 0:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} "
                           f"dimensions.")
    return _overwrite(self, value, "fill_", "FillBackward3" if isinstance(value, Tensor) else "FillBackward2",
                      overlap=None)       # torch reads the value as a number: it may be an element of self


def _copy_(self: Tensor, src: Any, non_blocking: bool = False) -> Tensor:
    """Copy ``src``'s values (broadcast to this shape, cast to this dtype) into this tensor."""
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' must be Tensor, not {type(src).__name__}")
    return _overwrite(self, src, "copy_", "torch::autograd::CopyBackwards")


def _relu_(self: Tensor) -> Tensor:
    return _inplace(self, lambda s: dispatcher.call("relu", (s,), {}), "relu_")


def _clamp_(self: Tensor, min: Any = None, max: Any = None) -> Tensor:
    return _inplace(self, lambda s: dispatcher.call("clamp", (s, min, max), {}), "clamp_", (min, max))


def _setitem(self: Tensor, key: Any, value: Any) -> None:
    """Item assignment: with basic keys, a write through the view ``self[key]`` (recorded like
    torch's ``copy_`` into a view); with index arrays or masks an in-place ``index_put``, recorded
    (into the view the ints and slices beside them select first, as torch does); other keys write
    the values without recording."""
    if forward_mode.state.tangents is not None and any(
            forward_mode.tangent_of(t) is not None for t in (self, value)):
        raise RuntimeError("item assignment to or from a dual tensor inside jvp: the reference engine's "
                           "forward mode does not track in-place writes; use where / cat instead")
    keys = key if isinstance(key, tuple) else (key,)
    view = getattr(self, "_view", None)
    recording = grad_mode.enabled and (
        self._requires_grad or (view is not None and view.base._requires_grad)
        or (isinstance(value, Tensor) and value._requires_grad))
    if not recording:
        data = self._data
        if isinstance(value, Tensor) or not data.flags.writeable or not _is_basic(keys):
            data = _check_unrecorded_assignment(self, keys, value)
        data[key] = value._data if isinstance(value, Tensor) else value
        self._bump_version()
        return
    if self._requires_grad and self._grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation (item assignment); wrap it in no_grad() to change its values")
    if not _is_basic(keys):
        if not _supported_advanced(keys):
            raise RuntimeError(f"item assignment with {key!r} on a tensor in the graph is not differentiable "
                               f"in the reference engine (None or a stepped slice beside an index array); "
                               f"assign in two steps, or compute the result out of place (where / cat)")
        target, rest = _split_advanced(self, keys)
        if _is_index_put(keys):
            target = self       # only ':' and '...' beside the index arrays: self itself is written
        _check_written_view(self, target, key)
        indices = _index_list(target, rest)
        written = None
        if overlapping(target._data):       # an expanded view: only the indexed elements are written
            written = tuple(slice(None) if i is None else i._data for i in indices)

        def compute(s: Tensor) -> Tensor:
            result = dispatcher.call("index_put", (s, indices, value, False), {})
            if written is not None:
                check_expanded_index_put(target._data, written, value._data if isinstance(value, Tensor) else value,
                                         stacklevel=4)      # compute, _inplace, _setitem, the user's line
            return result

        _inplace(target, compute, "index_put_", (value, *(i for i in indices if i is not None)), overlap="any",
                 written=written)
        return
    target = _getitem(self, key)
    _check_written_view(self, target, key)

    def source(_: Tensor) -> Tensor:
        if not isinstance(value, Tensor):
            return Tensor._wrap(np.full(target._data.shape, value, dtype=target._data.dtype))
        return value if value._data.shape == target._data.shape else value.expand(target.sizes())

    _inplace(target, source, "copy_", (value,))


def _check_unrecorded_assignment(self: Tensor, keys: tuple, value: Any) -> np.ndarray:
    """The checks :func:`_inplace` makes, for ``self[keys] = value`` written by NumPy (nothing
    recording), and the array to write it into (``self``'s, made writable where it is an
    expanded view: :func:`~reference_engine.views.writable`): a basic key is a ``copy_`` into
    the view it selects, other keys an ``index_put_`` (into the view the ints and slices beside
    the index arrays select), which refuses any overlap of ``self`` with the value or the index
    tensors, and warns into an expanded view (:func:`~reference_engine.views.check_expanded_index_put`)."""
    if _is_basic(keys):
        target = self._data[keys if Ellipsis in keys else (*keys, Ellipsis)]     # a view, also 0-d
        what, operands, same_allowed = "copy_", (value,), True
    else:
        target = (_split_advanced(self, keys)[0] if _supported_advanced(keys) and not _is_index_put(keys)
                  else self)._data
        what, operands, same_allowed = "index_put_", (value, *(k for k in keys if isinstance(k, Tensor))), False
    shared = what == "index_put_" and overlapping(target)
    if shared:
        check_expanded_index_put(self._data, tuple(k._data if isinstance(k, Tensor) else k for k in keys),
                                 value._data if isinstance(value, Tensor) else value,
                                 stacklevel=3)      # this function, _setitem, the user's line
    data = self._data if target.flags.writeable else writable(self, what, target, shared)
    check_operand_overlap(target, operands, what, same_allowed)
    return data


Tensor.add_ = _add_
Tensor.sub_ = _sub_
Tensor.mul_ = _mul_
Tensor.div_ = _div_
Tensor.zero_ = _zero_
Tensor.fill_ = _fill_
Tensor.copy_ = _copy_
Tensor.relu_ = _relu_
Tensor.clamp_ = _clamp_
Tensor.__iadd__ = lambda self, other: _add_(self, other)
Tensor.__isub__ = lambda self, other: _sub_(self, other)
Tensor.__imul__ = lambda self, other: _mul_(self, other)
Tensor.__itruediv__ = lambda self, other: _div_(self, other)
Tensor.__setitem__ = _setitem


def _clone(self: Tensor, *, memory_format: Any = None) -> Tensor:
    """A copy in the graph: the declared ``clone`` (``CloneBackward0``, as torch records)."""
    return dispatcher.call("clone", (self,), {})


Tensor.clone = _clone


def _to(self: Tensor, *args: Any, dtype: DType | None = None, device: Any = None) -> Tensor:
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``: this tensor when
    nothing changes, else a copy of the new dtype in the graph (torch's ``Tensor.to``; the
    engine's one device is the CPU). A copy to an integer or bool dtype is cut from the graph,
    as torch's."""
    for arg in args:
        if isinstance(arg, DType):
            dtype = arg
        elif isinstance(arg, Tensor):
            dtype = arg.dtype
        elif isinstance(arg, (str, Device)):
            device = arg
        else:
            raise TypeError(f"to() received an invalid combination of arguments: got {type(arg).__name__}; "
                            f"pass a dtype (engine.float64...), a device ('cpu') or a tensor")
    if device is not None:
        Device.of(device)
    if dtype is None or dtype is self.dtype:
        return self
    return dispatcher.call("_to_copy", (self,), {"dtype": dtype})


def _conversion(dtype: DType) -> Callable[[Tensor], Tensor]:
    def convert(self: Tensor) -> Tensor:
        return _to(self, dtype)

    convert.__name__ = dtype.name
    convert.__doc__ = f"``self.to({dtype.name})``"
    return convert


#: ``x.type()``'s names, torch's tensor type names (``x.type(name)`` converts to the dtype).
_TYPE_NAMES = {float64: "torch.DoubleTensor", float32: "torch.FloatTensor", int64: "torch.LongTensor",
               bool_: "torch.BoolTensor"}


def _type(self: Tensor, dtype: DType | str | None = None) -> Any:
    """``x.type()``: torch's name of the tensor type (``'torch.FloatTensor'``); ``x.type(dtype)``
    (a dtype or such a name): ``x.to(dtype)``."""
    if dtype is None:
        return _TYPE_NAMES[self.dtype]
    if isinstance(dtype, str):
        by_name = {name: d for d, name in _TYPE_NAMES.items()}
        if dtype not in by_name:
            raise ValueError(f"invalid type: '{dtype}': the reference engine has {', '.join(by_name)}")
        dtype = by_name[dtype]
    return _to(self, dtype)


def _repeat(self: Tensor, *repeats: Any) -> Tensor:
    """``repeat(2, 3)`` or ``repeat([2, 3])``: the declared ``repeat``."""
    sizes = list(repeats[0]) if len(repeats) == 1 and isinstance(repeats[0], (list, tuple)) else list(repeats)
    return dispatcher.call("repeat", (self, sizes), {})


def _matrix_transpose(self: Tensor) -> Tensor:
    """``x.mT``: the last two dimensions swapped (a view)."""
    if self.dim() < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got {self.dim()}-D "
                           f"tensor.")
    return dispatcher.call("transpose", (self, -2, -1), {})


Tensor.to = _to
Tensor.double = _conversion(float64)
Tensor.float = _conversion(float32)
Tensor.long = _conversion(int64)
Tensor.bool = _conversion(bool_)
Tensor.type = _type
Tensor.cpu = lambda self: self
Tensor.device = property(lambda self: CPU, doc="The tensor's device: the CPU (the engine's only device).")
Tensor.mT = property(_matrix_transpose)
Tensor.repeat = _repeat


# ----------------------------------------------------------------------------- floor division
def _floor_divide(self: Any, other: Any) -> Tensor:
    """``a // b`` (``torch.floor_divide``): the quotient rounded towards minus infinity, in the
    promoted dtype. Its derivative is zero almost everywhere and undefined at the jumps; torch
    declares none, so a result that depends on a tensor requiring grad gets a node whose backward
    raises torch's error, never a silent zero."""
    if is_torch_tensor(self) or is_torch_tensor(other):
        raise TypeError(MIXED_MESSAGE.format(what="'floor_divide'"))
    a = self if isinstance(self, Tensor) else Tensor._wrapped_number(self)
    b = other if isinstance(other, Tensor) else Tensor._wrapped_number(other)
    if forward_mode.state.tangents is not None and any(forward_mode.tangent_of(t) is not None for t in (a, b)):
        raise NotImplementedError("Trying to use forward AD with aten::floor_divide that does not support it.")
    dtype = result_dtype(a._value, b._value)
    if dtype == np.bool_:
        raise NotImplementedError("\"div_floor_cpu\" not implemented for 'Bool'")
    if dtype.kind != "f" and np.any(np.asarray(b._value) == 0):
        raise RuntimeError("ZeroDivisionError")
    with np.errstate(divide="ignore", invalid="ignore"):
        out = Tensor._wrap(np.asarray(np.floor_divide(a._value, b._value, dtype=dtype)))
    sources = [t for t in (a, b) if t._requires_grad]
    if grad_mode.enabled and sources and dtype.kind == "f":
        out._grad_fn = NotImplementedBackward("floor_divide", sources)
        out._requires_grad = True
    return out


Tensor.__floordiv__ = Tensor.floor_divide = _floor_divide
Tensor.__rfloordiv__ = lambda self, other: _floor_divide(other, self)
def _backward(self: Tensor, gradient: Any = None, retain_graph: bool | None = None,
              create_graph: bool = False) -> None:
    """Accumulate the gradient of this tensor into the leaves' ``.grad``."""
    run_backward(self, gradient, retain_graph, create_graph)


Tensor.backward = _backward


# ----------------------------------------------------------------------------- declared ops as methods
_EXPLICIT = frozenset(name for name in vars(Tensor))
#: declared operators torch's Tensor exposes as attributes (``x.real``, ``x.mH``), not methods
ATTRIBUTES = frozenset({"real", "imag", "mT", "mH"})


def install_operator_methods() -> None:
    """Bind the Python operators and every declared operator whose first argument is
    ``Tensor self`` (as a method, or an attribute as in torch: :data:`ATTRIBUTES`) to the
    dispatcher's current entry points."""
    for dunder, name in _OPERATOR_METHODS.items():
        packet = dispatcher.packets.get(name)
        if packet is None:
            setattr(Tensor, dunder, _lazy(name))
        else:       # __neg__ takes self only; the others self and other
            setattr(Tensor, dunder, packet.op if dunder == "__neg__" else packet.binary)
    for name, packet in dispatcher.packets.items():
        if name in _EXPLICIT or name.startswith("_"):
            continue
        if any(o.schema.arguments and o.schema.arguments[0].name == "self" for o in packet.overloads):
            setattr(Tensor, name, property(packet.op) if name in ATTRIBUTES else packet.op)


def _lazy(name: str) -> Callable[..., Any]:
    """An operator method for ``name`` before it is declared (a clear error until it is)."""
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return dispatcher.packet(name).call((self, *args), kwargs)

    method.__name__ = name
    return method


dispatcher.refresh_hooks.append(install_operator_methods)
