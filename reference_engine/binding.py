"""Binding Python call arguments to a declared schema, like torch's Python arg parser.

Everything here is computed once per overload (:class:`Signature`); a call
does a length check, fills defaults, and converts only the arguments whose
Python form differs from what formulas and kernels expect (a number passed as
a Tensor becomes a wrapped-number tensor, an ``int`` passed as ``int[1]``
becomes ``[int]``, a NumPy dtype passed as ``ScalarType`` becomes the engine's).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

import numpy as np

from reference_engine.dtypes import DType, from_numpy
from reference_engine.scalars import SCALAR_TYPES, ScalarFloat, ScalarInt
from reference_engine.tensor import Tensor
from transpiler.schema import Argument, BaseType, FunctionSchema, ListType, OptionalType, Type

REQUIRED = object()
_NUMBER = (bool, int, float, *SCALAR_TYPES)     # a Scalar argument with its methods is that number
_REAL = (int, float, ScalarInt, ScalarFloat)

# Python spellings of the non-literal defaults that appear in native_functions.yaml.
# (``Mean`` is at::Reduction::Mean; memory formats mean nothing on NumPy and stay names).
_SYMBOLIC_DEFAULTS = {"contiguous_format": "contiguous_format", "Mean": 1}


def parse_default(text: str | None) -> Any:
    """The Python value of a schema default (``False``, ``-1``, ``[]``, ``None``, ``1.0``...)."""
    if text is None:
        return REQUIRED
    if text in _SYMBOLIC_DEFAULTS:
        return _SYMBOLIC_DEFAULTS[text]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


@dataclass(frozen=True)
class _Kind:
    """How one argument is checked and converted."""

    base: str           # base type name
    optional: bool
    is_list: bool
    list_size: int | None


def _kind(ty: Type) -> _Kind:
    optional = isinstance(ty, OptionalType)
    inner = ty.elem if optional else ty
    if isinstance(inner, ListType):
        elem = inner.elem.elem if isinstance(inner.elem, OptionalType) else inner.elem
        assert isinstance(elem, BaseType)
        return _Kind(elem.name, optional, True, inner.size)
    assert isinstance(inner, BaseType), f"unsupported type {ty}"
    return _Kind(inner.name, optional, False, None)


def _accepts_scalar(base: str, value: Any) -> bool:
    """Whether a non-list value fits ``base`` (a Tensor slot also takes a number)."""
    if base == "Tensor":
        return isinstance(value, Tensor) or type(value) in _NUMBER
    if base in ("int", "SymInt"):
        return type(value) is int or (isinstance(value, (int, np.integer)) and not isinstance(value, bool))
    if base in ("float", "SymFloat"):
        return type(value) in _REAL or isinstance(value, (np.floating, np.integer))
    if base in ("bool", "SymBool"):
        return isinstance(value, (bool, np.bool_))
    if base == "Scalar":
        return type(value) in _NUMBER or isinstance(value, (np.number, np.bool_))
    if base == "ScalarType":
        return isinstance(value, DType) or _is_numpy_dtype(value)
    if base == "str":
        return isinstance(value, str)
    return True     # Layout, Device, MemoryFormat, Generator...: passed through untouched


def _is_numpy_dtype(value: Any) -> bool:
    return isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic))


def accepts(kind: _Kind, value: Any) -> bool:
    """Whether ``value`` can be passed for an argument of this kind."""
    if value is None:
        return kind.optional
    if kind.is_list:
        if isinstance(value, (list, tuple)):
            return all(_accepts_scalar(kind.base, v) or (v is None and kind.base == "Tensor") for v in value)
        return kind.list_size is not None and kind.base != "Tensor" and _accepts_scalar(kind.base, value)
    return _accepts_scalar(kind.base, value)


def needs_wrapping(value: Any) -> bool:
    """A Python number standing where a Tensor is expected."""
    return type(value) in _NUMBER


class Signature:
    """The precomputed binding of one schema."""

    __slots__ = ("schema", "names", "n_args", "n_positional", "defaults", "index", "kinds",
                 "tensor_positions", "tensor_list_positions", "converted_positions", "positional_arity",
                 "keyword_defaults")

    def __init__(self, schema: FunctionSchema) -> None:
        args: tuple[Argument, ...] = tuple(a for a in schema.arguments if not a.is_out)
        self.schema = schema
        self.names = tuple(a.name for a in args)
        self.n_args = len(args)
        self.n_positional = sum(1 for a in args if not a.kwarg_only)
        self.defaults = tuple(parse_default(a.default) for a in args)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.kinds = tuple(_kind(a.type) for a in args)
        self.tensor_positions = tuple(i for i, k in enumerate(self.kinds) if k.base == "Tensor" and not k.is_list)
        self.tensor_list_positions = tuple(i for i, k in enumerate(self.kinds) if k.base == "Tensor" and k.is_list)
        # int[N] taking a bare int, ScalarType taking a NumPy dtype, tuples for lists (a Scalar[] as given):
        self.converted_positions = tuple(
            i for i, k in enumerate(self.kinds)
            if (k.is_list and k.base not in ("Tensor", "Scalar")) or k.base == "ScalarType")
        # A call with exactly this many positional arguments and no keywords binds as is
        # (-1 when the schema has keyword-only arguments, which must be passed by name).
        self.positional_arity = self.n_args if self.n_args == self.n_positional else -1
        # Defaults of the keyword-only arguments, when they all have one: a call passing
        # every positional argument and no keywords binds as ``[*args, *keyword_defaults]``.
        tail = self.defaults[self.n_positional:]
        self.keyword_defaults = None if REQUIRED in tail else tail

    def bind(self, args: tuple, kwargs: dict) -> list:
        """Positional values in schema order, defaults filled; TypeError on a mismatch."""
        n = len(args)
        if not kwargs:
            if n == self.positional_arity:
                return list(args)
            if n == self.n_positional and self.keyword_defaults is not None:
                return [*args, *self.keyword_defaults]
        if n > self.n_positional:
            raise TypeError(f"{self.schema.name}() takes {self.n_positional} positional arguments "
                            f"but {n} were given (schema: {self.schema})")
        bound = list(args)
        bound.extend(self.defaults[n:])
        for key, value in kwargs.items():
            i = self.index.get(key)
            if i is None:
                raise TypeError(f"{self.schema.name}() got an unexpected keyword argument '{key}' "
                                f"(schema: {self.schema})")
            if i < n:
                raise TypeError(f"{self.schema.name}() got multiple values for argument '{key}'")
            bound[i] = value
        for i, value in enumerate(bound):
            if value is REQUIRED:
                raise TypeError(f"{self.schema.name}() missing required argument '{self.names[i]}' "
                                f"(schema: {self.schema})")
        return bound

    def mismatch(self, bound: list) -> str | None:
        """Why ``bound`` does not fit the argument types (None when it does)."""
        for name, kind, value in zip(self.names, self.kinds, bound):
            if not accepts(kind, value):
                return f"argument '{name}' got {type(value).__name__}"
        return None

    def wraps_numbers(self, bound: list) -> bool:
        """Whether binding puts a Python number where a Tensor is expected."""
        return any(needs_wrapping(bound[i]) for i in self.tensor_positions)

    def convert(self, bound: list) -> None:
        """Bring non-tensor arguments to the form formulas expect (in place)."""
        for i in self.converted_positions:
            value = bound[i]
            kind = self.kinds[i]
            if kind.base == "ScalarType":
                if value is not None and not isinstance(value, DType):
                    bound[i] = from_numpy(np.dtype(value))
            elif type(value) is tuple:
                bound[i] = list(value)
            elif value is not None and type(value) is not list:
                bound[i] = [value]
