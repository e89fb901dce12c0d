"""Tensor operators and methods, routed through the dispatcher.

Python operators map to declared operators (``a * b`` is ``at.mul``), other
methods are *composite*: built from declared operators (``x.mean()`` is a
sum divided by ``numel``, ``x @ y`` is ``mm``), so they are differentiable
exactly when the operators they use have formulas. Any declared operator
taking ``Tensor self`` first is also a method (``x.exp()``, ``x.sum(0)``).
In-place methods compute out of place, write the result into the tensor's
array, bump its version and, when recording, move the tensor onto the new
node (its old value is kept as a copy for the backward that needs it).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from reference_engine.dispatch import dispatcher
from reference_engine.engine import run_backward
from reference_engine.grad_mode import grad_mode
from reference_engine.tensor import Tensor
from reference_engine.views import OVERLAP_MESSAGE, check_view_write, overlapping, rebase, regenerate_views


_packets = dispatcher.packets      # updated in place by Dispatcher.refresh


def _op(name: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return (_packets.get(name) or dispatcher.packet(name)).call(args, kwargs)

    call.__name__ = name
    return call


_add, _sub, _mul, _div = (_op(n) for n in ("add", "sub", "mul", "div"))


def _reflected(name: str) -> Callable[[Tensor, Any], Any]:
    """``other <op> self`` for a Python number ``other`` (it becomes a wrapped number)."""
    def method(self: Tensor, other: Any) -> Any:
        left = other if isinstance(other, Tensor) else Tensor._wrapped_number(other)
        return (_packets.get(name) or dispatcher.packet(name)).call((left, self), {})

    method.__name__ = f"r{name}"
    return method


for _name in ("add", "sub", "mul", "pow"):
    setattr(Tensor, f"__r{_name}__", _reflected(_name))
Tensor.__rtruediv__ = _reflected("div")

# Python operators that are declared operators: ``a * b`` is the entry point of ``mul``
# itself (installed, with the other declared operators, by install_operator_methods).
_OPERATOR_METHODS = {"__add__": "add", "__sub__": "sub", "__mul__": "mul", "__truediv__": "div",
                     "__pow__": "pow", "__neg__": "neg", "__gt__": "gt", "__ge__": "ge", "__lt__": "lt",
                     "__le__": "le", "__eq__": "eq", "__ne__": "ne"}


def _matmul(self: Tensor, other: Tensor) -> Tensor:
    """``@`` for 1-D and 2-D operands, composed from ``mm``, ``unsqueeze`` and ``view``."""
    if self.dim() == 2 and other.dim() == 2:
        return dispatcher.call("mm", (self, other), {})
    left = self.unsqueeze(0) if self.dim() == 1 else self
    right = other.unsqueeze(1) if other.dim() == 1 else other
    if left.dim() != 2 or right.dim() != 2:
        raise RuntimeError(f"matmul supports 1-D and 2-D operands, got {self.dim()}-D and {other.dim()}-D")
    out = dispatcher.call("mm", (left, right), {})
    size = [s for s, keep in ((out.size(0), self.dim() == 2), (out.size(1), other.dim() == 2)) if keep]
    return out.view(size)


Tensor.__matmul__ = _matmul
Tensor.matmul = _matmul


# ----------------------------------------------------------------------------- composites
def _mean(self: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """``mean()`` is ``sum() / numel()``; with ``dim`` it is the declared ``mean.dim``."""
    if dim is None and not keepdim:
        return dispatcher.call("sum", (self,), {"dtype": dtype}) / self.numel()
    return dispatcher.call("mean", (self, dim, keepdim), {"dtype": dtype})


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
    """Basic indexing (ints, slices with step 1, ``None``, ``...``) composed from
    ``narrow``, ``reshape``; other keys index the values without recording."""
    keys = key if isinstance(key, tuple) else (key,)
    if not _is_basic(keys):
        if grad_mode.enabled and self._requires_grad:
            raise IndexError(f"indexing with {key!r} is not differentiable in the reference engine "
                             f"(no formula for advanced indexing); use gather / narrow")
        return Tensor._wrap(np.asarray(self._data[key]))
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
            start, stop, _ = k.indices(size)
            length = max(stop - start, 0)
            out = dispatcher.call("narrow", (out, dim, start, length), {})
            final_size.append(length)
        else:
            index = int(k)
            if not -size <= index < size:
                raise IndexError(f"index {index} is out of bounds for dimension {dim} with size {size}")
            out = dispatcher.call("narrow", (out, dim, index % size, 1), {})
        dim += 1
    final_size.extend(out.sizes()[dim:])
    return out if out.sizes() == final_size else out.reshape(final_size)


def _is_basic(keys: tuple) -> bool:
    return all(k is None or k is Ellipsis or (isinstance(k, slice) and k.step in (None, 1))
               or (isinstance(k, (int, np.integer)) and not isinstance(k, bool)) for k in keys)


Tensor.mean = _mean
Tensor.reshape = _reshape
Tensor.view = _view
Tensor.permute = _permute
Tensor.expand = _expand
Tensor.transpose = _transpose
Tensor.T = property(lambda self: _permute(self, list(range(self.dim() - 1, -1, -1))))
Tensor.__getitem__ = _getitem


# ----------------------------------------------------------------------------- in place
def _inplace(self: Tensor, compute: Callable[[Tensor], Tensor], what: str, others: tuple = ()) -> Tensor:
    if not self._data.flags.writeable:
        if overlapping(self):
            raise RuntimeError(OVERLAP_MESSAGE)
        raise RuntimeError(f"{what}: the tensor's memory is read-only; clone() it before writing to it")
    view = getattr(self, "_view", None)
    recording = grad_mode.enabled and (
        self._requires_grad or (view is not None and view.base._requires_grad)
        or any(isinstance(o, Tensor) and o._requires_grad for o in others))
    if recording:
        if view is not None:
            check_view_write(self, view)
        elif self._requires_grad and self._grad_fn is None:
            raise RuntimeError(f"a leaf Variable that requires grad is being used in an in-place operation "
                               f"({what}); wrap it in no_grad() if this is a parameter update")
        old = Tensor._wrap(self._data.copy())     # the value before the write, for the backward
        old._grad_fn, old._output_nr, old._requires_grad = self._grad_fn, self._output_nr, self._requires_grad
        result = compute(old)
    else:
        result = compute(self)
    if result._data.shape != self._data.shape:
        raise RuntimeError(f"{what}: output with shape {list(self.shape)} doesn't match the broadcast "
                           f"shape {list(result.shape)}")
    np.copyto(self._data, result._data, casting="same_kind")
    self._bump_version()
    if recording:
        if view is not None:
            rebase(self, view, result)
        else:
            self._grad_fn, self._output_nr, self._requires_grad = result._grad_fn, result._output_nr, True
            regenerate_views(self)
    return self


def _add_(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    return _inplace(self, lambda s: _add(s, other, alpha=alpha), "add_", (other,))


def _sub_(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    return _inplace(self, lambda s: _sub(s, other, alpha=alpha), "sub_", (other,))


def _mul_(self: Tensor, other: Any) -> Tensor:
    return _inplace(self, lambda s: _mul(s, other), "mul_", (other,))


def _div_(self: Tensor, other: Any) -> Tensor:
    return _inplace(self, lambda s: _div(s, other), "div_", (other,))


def _zero_(self: Tensor) -> Tensor:
    """Fill with zeros; when recording, the gradient through it is zero (``mul`` by 0)."""
    def zeros(s: Tensor) -> Tensor:
        if not (grad_mode.enabled and s._requires_grad):
            return Tensor._wrap(np.zeros_like(s._data))
        result = _mul(s, 0)
        result._data[...] = 0       # NaN * 0 is NaN; the values are zeros regardless
        return result

    return _inplace(self, zeros, "zero_")


def _setitem(self: Tensor, key: Any, value: Any) -> None:
    """Item assignment: with basic keys, a write through the view ``self[key]`` (recorded like
    torch's ``copy_`` into a view); other keys write the values without recording."""
    keys = key if isinstance(key, tuple) else (key,)
    view = getattr(self, "_view", None)
    recording = grad_mode.enabled and (
        self._requires_grad or (view is not None and view.base._requires_grad)
        or (isinstance(value, Tensor) and value._requires_grad))
    if not recording:
        self._data[key] = value._data if isinstance(value, Tensor) else value
        self._bump_version()
        return
    if self._requires_grad and self._grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation (item assignment); wrap it in no_grad() to change its values")
    if not _is_basic(keys):
        raise RuntimeError(f"item assignment with {key!r} on a tensor in the graph is not differentiable "
                           f"in the reference engine (no index_put formula); use ints, slices with step 1, "
                           f"None and ..., or compute the result out of place (where / cat)")
    target = _getitem(self, key)
    if not np.may_share_memory(target._data, self._data):
        raise RuntimeError(f"item assignment with {key!r}: the indexed region is not a view of the tensor")

    def source(_: Tensor) -> Tensor:
        if not isinstance(value, Tensor):
            return Tensor._wrap(np.full(target._data.shape, value, dtype=target._data.dtype))
        return value if value._data.shape == target._data.shape else value.expand(target.sizes())

    _inplace(target, source, "copy_", (value,))


Tensor.add_ = _add_
Tensor.sub_ = _sub_
Tensor.mul_ = _mul_
Tensor.div_ = _div_
Tensor.zero_ = _zero_
Tensor.__iadd__ = lambda self, other: _add_(self, other)
Tensor.__isub__ = lambda self, other: _sub_(self, other)
Tensor.__imul__ = lambda self, other: _mul_(self, other)
Tensor.__itruediv__ = lambda self, other: _div_(self, other)
Tensor.__setitem__ = _setitem


def _clone(self: Tensor) -> Tensor:
    """A copy in the graph (``_to_copy`` keeps the dtype and has a formula)."""
    return dispatcher.call("_to_copy", (self,), {})


Tensor.clone = _clone
def _backward(self: Tensor, gradient: Any = None, retain_graph: bool | None = None,
              create_graph: bool = False) -> None:
    """Accumulate the gradient of this tensor into the leaves' ``.grad``."""
    run_backward(self, gradient, retain_graph, create_graph)


Tensor.backward = _backward


# ----------------------------------------------------------------------------- declared ops as methods
_EXPLICIT = frozenset(name for name in vars(Tensor))


def install_operator_methods() -> None:
    """Bind the Python operators and every declared operator whose first argument is
    ``Tensor self`` (as a method) to the dispatcher's current entry points."""
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
            setattr(Tensor, name, packet.op)


def _lazy(name: str) -> Callable[..., Any]:
    """An operator method for ``name`` before it is declared (a clear error until it is)."""
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return dispatcher.packet(name).call((self, *args), kwargs)

    method.__name__ = name
    return method


dispatcher.refresh_hooks.append(install_operator_methods)
