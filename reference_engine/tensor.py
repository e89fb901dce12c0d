"""The ``Tensor`` type: a NumPy array plus autograd metadata.

This module holds the data layout and the metadata methods (``sizes()``,
``dim()``, ``options()``...). Operators and value-computing methods are
attached by :mod:`reference_engine.methods`, which routes them through the
dispatcher.
"""
from __future__ import annotations

from itertools import count
from typing import Any

import numpy as np

from reference_engine.codegen import generated_function
from reference_engine.dtypes import DType, TensorOptions, from_numpy
from reference_engine.printing import tensor_repr

#: One sequence for the whole engine: every recorded node takes the next number as its
#: ``seq`` and every in-place write takes the next number as its *write tick*. A node's
#: inputs are older than it, so decreasing ``seq`` is a topological order (the engine's
#: schedule), and a saved tensor whose counter's last write tick is above the node's
#: ``seq`` was written in place after it was saved.
ticks = count(1)
#: ``[tick of the latest in-place write anywhere]``: while it is below a node's ``seq``
#: nothing can have changed what that node saved, and its backward checks nothing.
last_write = [0]


class Tensor:
    """An n-dimensional array that can record the operations applied to it.

    ``_data`` is the NumPy array. ``_value`` is what NumPy kernels receive:
    the array itself, or for a *wrapped number* (a Python scalar passed where
    an operator expects a Tensor) the Python scalar, so that NumPy's weak
    scalar promotion keeps ``float32_tensor * 2.0`` in float32, as torch does.

    ``_version`` is the version counter: ``[version, tick of the last write]``,
    shared by tensors over the same memory (views, ``detach``); in-place writes
    go through :meth:`_bump_version`. It is made on first use (:meth:`_counter`;
    ``None`` until then): most tensors never need one.

    ``_view`` (a :class:`~reference_engine.views.ViewInfo`) is set on views only and
    ``_views`` (weak references to its views) on their root; both stay unset on every
    other tensor (read them with ``getattr(t, "_view", None)``), so that making a tensor
    costs nothing for them.
    """

    __slots__ = ("_data", "_value", "_requires_grad", "_grad_fn", "_output_nr", "_version",
                 "grad", "_view", "_views", "__weakref__")

    # Tensor defines __eq__ (an operator), so keep identity hashing explicitly.
    __hash__ = object.__hash__

    #: Every field of a new tensor (the view ones aside) and the value it starts with, ``{array}``
    #: standing for its NumPy array: the one statement of the layout. ``__init__(data, *,
    #: requires_grad=False)``, :meth:`_wrap` and the dispatcher's entry points and kernel runners
    #: (which inline ``_wrap``) are generated from it (:func:`new_tensor`, end of this module).
    FIELDS = {
        "_data": "{array}",
        "_value": "{array}",
        "_requires_grad": "False",
        "_grad_fn": "None",
        "_output_nr": "0",
        "_version": "None",
        "grad": "None",
    }

    @staticmethod
    def _wrapped_number(value: bool | int | float) -> Tensor:
        """A 0-dim tensor standing for a Python number passed as a Tensor argument."""
        t = Tensor._wrap(np.asarray(value))
        t._value = value
        return t

    # ----------------------------------------------------------------- autograd
    @property
    def requires_grad(self) -> bool:
        """Whether operations on this tensor are recorded for backward."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        """Set ``requires_grad`` (as :meth:`requires_grad_`)."""
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Make a leaf tensor record operations (floating point dtypes only)."""
        if self._grad_fn is not None:
            if not requires_grad:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables; use .detach() "
                    "to get a tensor that does not require grad")
            return self
        if requires_grad and not self.is_floating_point():
            raise RuntimeError(f"only tensors of floating point dtype can require gradients, "
                               f"not {self.dtype.name}")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def grad_fn(self):
        """The node that computed this tensor (None for leaves)."""
        return self._grad_fn

    @property
    def is_leaf(self) -> bool:
        """Whether the tensor has no ``grad_fn`` (created by the user, not recorded from an operation)."""
        return self._grad_fn is None

    @property
    def _base(self) -> Tensor | None:
        """The tensor this view shares memory with (the root of a chain of views), else None."""
        info = getattr(self, "_view", None)
        return None if info is None else info.base

    def _is_view(self) -> bool:
        return getattr(self, "_view", None) is not None

    def detach(self) -> Tensor:
        """A tensor sharing this data (and version counter), cut from the graph."""
        t = Tensor._wrap(self._data)
        t._value = self._value
        counter = self._version
        if counter is None:      # _counter, inlined: every recorded output a backward captures comes here
            counter = self._version = [0, 0]
        t._version = counter
        return t

    @property
    def data(self) -> Tensor:
        """The values as a tensor outside the graph, sharing memory but not the version counter:
        an in-place write through it is not seen by autograd (torch's ``.data``; prefer
        ``detach()``, whose writes are checked)."""
        t = Tensor._wrap(self._data)
        t._value = self._value
        return t

    @data.setter
    def data(self, other: Tensor) -> None:
        """Replace the values with ``other``'s without recording, as torch's ``tensor.data = other``."""
        if not isinstance(other, Tensor):
            raise TypeError(f"data must be a Tensor, not {type(other).__name__}")
        if self._requires_grad and not other.is_floating_point():
            raise RuntimeError("data set to a tensor that requires gradients must be floating point or complex "
                               "dtype")
        self._data = self._value = other._data

    def detach_(self) -> Tensor:
        """Cut this tensor from the graph in place."""
        self._grad_fn = None
        self._output_nr = 0
        self._requires_grad = False
        return self

    def _counter(self) -> list[int]:
        """The version counter ``[version, write tick]``, made on first use."""
        counter = self._version
        if counter is None:
            counter = self._version = [0, 0]
        return counter

    def _bump_version(self) -> None:
        """Record an in-place write of this tensor's memory (seen by every view)."""
        counter = self._counter()
        counter[0] += 1
        counter[1] = last_write[0] = next(ticks)

    @property
    def _version_value(self) -> int:
        return self._counter()[0]

    # ----------------------------------------------------------------- metadata
    @property
    def shape(self) -> tuple[int, ...]:
        """The sizes of the dimensions, as a tuple."""
        return self._data.shape

    @property
    def dtype(self) -> DType:
        """The element type (a torch-like ``DType``)."""
        return from_numpy(self._data.dtype)

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return self._data.ndim

    def sizes(self) -> list[int]:
        """The shape as a ``list[int]`` (``at::IntArrayRef`` in C++)."""
        return list(self._data.shape)

    def size(self, dim: int | None = None) -> Any:
        """The shape as a tuple, or the size of one (possibly negative) dimension."""
        shape = self._data.shape
        if dim is None:
            return shape
        if 0 <= dim < len(shape):
            return shape[dim]
        return shape[_wrap_dim(dim, len(shape))]

    def dim(self) -> int:
        """The number of dimensions (``at::Tensor::dim()``)."""
        return self._data.ndim

    def numel(self) -> int:
        """The number of elements."""
        return self._data.size

    def scalar_type(self) -> DType:
        """The element type (``at::Tensor::scalar_type()``)."""
        return self.dtype

    def options(self) -> TensorOptions:
        """The ``TensorOptions`` of this tensor's dtype, for factories that make a tensor like it."""
        return TensorOptions(self.dtype)

    def is_floating_point(self) -> bool:
        """Whether the dtype is a real floating point type."""
        return self._data.dtype.kind == "f"

    def is_complex(self) -> bool:
        """Whether the dtype is complex."""
        return self._data.dtype.kind == "c"

    def is_contiguous(self) -> bool:
        """Whether the elements lie in row-major order without gaps (a transpose or a stepped
        slice does not), as torch's ``is_contiguous()``."""
        return bool(self._data.flags.c_contiguous)

    def element_size(self) -> int:
        """The size of one element in bytes."""
        return self._data.dtype.itemsize

    # ----------------------------------------------------------------- values
    def item(self) -> bool | int | float:
        """The value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._data.item()

    def tolist(self) -> Any:
        """The values as (nested) Python lists of numbers."""
        return self._data.tolist()

    def numpy(self) -> np.ndarray:
        """The underlying array (shares memory), like ``torch.Tensor.numpy``."""
        if self._requires_grad:
            raise RuntimeError("can't call numpy() on a Tensor that requires grad; "
                               "use tensor.detach().numpy() instead")
        return self._data

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._data.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iu" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self._data.item())

    def __repr__(self) -> str:
        """torch's repr (:mod:`reference_engine.printing`): ``tensor([1.5000, 2.2500], requires_grad=True)``."""
        array = self._data
        default_dtype = array.dtype in (np.float32, np.int64, np.bool_)
        suffixes = []
        if not default_dtype or (array.size == 0 and array.dtype != np.float32):
            suffixes.append(f"dtype={self.dtype!r}")
        if self._grad_fn is not None:
            suffixes.append(f"grad_fn=<{self._grad_fn.name()}>")
        elif self._requires_grad:
            suffixes.append("requires_grad=True")
        return tensor_repr(array, suffixes, default_dtype)


def new_tensor(target: str, array: str, indent: str = "    ") -> str:
    """Source lines that make ``target`` a new :class:`Tensor` over the array named ``array``
    (:attr:`Tensor.FIELDS`), for generated code whose globals hold :data:`NEW_TENSOR_GLOBALS`."""
    return f"{indent}{target} = new_object(Tensor)\n" + _field_assignments(target, array, indent)


def _field_assignments(target: str, array: str, indent: str) -> str:
    return "".join(f"{indent}{target}.{field} = {value.format(array=array)}\n"
                   for field, value in Tensor.FIELDS.items())


#: The names :func:`new_tensor`'s lines read (``object.__new__``: no ``__init__`` checks).
NEW_TENSOR_GLOBALS = {"Tensor": Tensor, "new_object": object.__new__}

Tensor.__init__ = generated_function(
    "def __init__(self, data: Any, *, requires_grad: bool = False) -> None:\n"
    "    array = data if type(data) is ndarray else asarray(data)\n"
    "    from_numpy(array.dtype)  # reject unsupported dtypes early, with a clear message\n"
    + _field_assignments("self", "array", "    ")
    + "    if requires_grad:\n"
      "        self.requires_grad_(True)\n",
    {"ndarray": np.ndarray, "asarray": np.asarray, "from_numpy": from_numpy, "Any": Any})
Tensor._wrap = staticmethod(generated_function(
    'def _wrap(array):\n'
    '    """A new tensor over ``array`` (a kernel result), without any checks."""\n'
    + new_tensor("t", "array") + "    return t\n", NEW_TENSOR_GLOBALS))
for _method in (Tensor.__init__, Tensor._wrap):
    _method.__qualname__ = f"Tensor.{_method.__name__}"
    _method.__module__ = __name__


def _wrap_dim(dim: int, ndim: int) -> int:
    """A dimension index in range, negative ones counted from the end (torch's rule)."""
    bound = max(ndim, 1)
    if not -bound <= dim < bound:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-bound}, {bound - 1}], but got {dim})")
    return dim + bound if dim < 0 else dim


def is_tensor(obj: object) -> bool:
    """``torch.is_tensor``: whether ``obj`` is an engine Tensor."""
    return isinstance(obj, Tensor)
