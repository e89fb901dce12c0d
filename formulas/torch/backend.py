"""Torch as an operator backend: runs formulas on torch tensors.

``with use_backend(TorchBackend.for_library()):`` makes ``at.<op>(...)`` run
the built-in ``torch.ops.aten.<op>.<overload>``. The overload is the one of
the library's *declared* operators whose schema accepts the arguments, so a
formula that calls an undeclared operator (or an ambiguous one) fails here
exactly where the library would not be closed under differentiation.

Formulas see :class:`OracleTensor`, a thin wrapper around a ``torch.Tensor``
that offers the metadata methods of the authoring conventions (``sizes()``,
``scalar_type()``, ``options()``... exist in C++ but not all in Python torch)
and routes the Python operators to ``at``. Autograd is torch's own: whatever
the wrapped tensors record is an ordinary torch graph.
"""
from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from formulas.dsl import Registry, at, import_package_modules, registry, use_backend
from transpiler.schema import BaseType, FunctionSchema, ListType, OptionalType, Type, parse_schema


@dataclass(frozen=True)
class TorchOptions:
    """What ``x.options()`` gives: the dtype and device of a tensor."""

    dtype: torch.dtype
    device: torch.device


class OracleTensor:
    """A torch tensor as a formula sees it: metadata methods, operators through ``at``."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor

    def __repr__(self) -> str:
        return f"OracleTensor({self.tensor!r})"

    # metadata (the only methods formulas may call)
    def sizes(self) -> list[int]:
        """The shape as a ``list[int]`` (``at::IntArrayRef``)."""
        return list(self.tensor.shape)

    def size(self, dim: int) -> int:
        """The size of dimension ``dim``."""
        return self.tensor.size(dim)

    def dim(self) -> int:
        """The number of dimensions."""
        return self.tensor.dim()

    def numel(self) -> int:
        """The number of elements."""
        return self.tensor.numel()

    def scalar_type(self) -> torch.dtype:
        """The element type (a ``torch.dtype``)."""
        return self.tensor.dtype

    def options(self) -> TorchOptions:
        """The ``TensorOptions`` (dtype, device) of the wrapped tensor."""
        return TorchOptions(self.tensor.dtype, self.tensor.device)

    def is_floating_point(self) -> bool:
        """Whether the dtype is a real floating point type."""
        return self.tensor.is_floating_point()

    def is_complex(self) -> bool:
        """Whether the dtype is complex."""
        return self.tensor.is_complex()

    def is_contiguous(self) -> bool:
        """Whether the wrapped tensor is contiguous."""
        return self.tensor.is_contiguous()

    # Python operators: the aten operators the conventions name
    def __add__(self, other: Any) -> Any:
        return at.add(self, other)

    def __radd__(self, other: Any) -> Any:
        return at.add(self, other)

    def __sub__(self, other: Any) -> Any:
        return at.sub(self, other)

    def __mul__(self, other: Any) -> Any:
        return at.mul(self, other)

    def __rmul__(self, other: Any) -> Any:
        return at.mul(self, other)

    def __truediv__(self, other: Any) -> Any:
        return at.div(self, other)

    def __rsub__(self, other: Any) -> Any:
        return at.rsub(self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return at.mul(at.reciprocal(self), other)

    def __neg__(self) -> Any:
        return at.neg(self)

    def __pow__(self, other: Any) -> Any:
        return at.pow(self, other)

    def __matmul__(self, other: Any) -> Any:
        return at.matmul(self, other)

    def __gt__(self, other: Any) -> Any:
        return at.gt(self, other)

    def __ge__(self, other: Any) -> Any:
        return at.ge(self, other)

    def __lt__(self, other: Any) -> Any:
        return at.lt(self, other)

    def __le__(self, other: Any) -> Any:
        return at.le(self, other)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return at.eq(self, other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return at.ne(self, other)

    __hash__ = object.__hash__


def load_package(package: str) -> Registry:
    """Import every module of the formula package ``package`` and return its registry
    (``formulas``: the shipped library, without this torch back end)."""
    if package == "formulas":
        import formulas

        formulas.load_library()
    else:
        import_package_modules(package)
    return registry(package.split(".", 1)[0])


#: Types of the values a list of sizes or dims holds: such a list is copied as it is by
#: :func:`wrap`, :func:`unwrap` and :func:`_type_key` (just an optimization: no call per element).
SCALAR_TYPES = frozenset({int, float, bool, type(None), torch.SymInt})

#: the Python values each helper annotation name takes on torch (:mod:`formulas.helper_overloads`)
HELPER_VALUES: dict[str, tuple[type, ...]] = {
    "Tensor": (OracleTensor,), "int": (int, torch.SymInt), "SymInt": (int, torch.SymInt),
    "float": (int, float, torch.SymInt, torch.SymFloat), "bool": (bool, torch.SymBool),
    "Scalar": (int, float, bool, complex, torch.SymInt, torch.SymFloat, torch.SymBool),
    "ScalarType": (torch.dtype,), "str": (str,), "None": (type(None),),
}


def wrap(value: Any) -> Any:
    """torch tensors (also inside tuples and lists) as :class:`OracleTensor`."""
    if isinstance(value, torch.Tensor):
        return OracleTensor(value)
    if isinstance(value, (tuple, list)):
        if SCALAR_TYPES.issuperset(map(type, value)):
            return type(value)(value)
        return type(value)(wrap(v) for v in value)
    return value


def unwrap(value: Any) -> Any:
    """The inverse of :func:`wrap`."""
    if isinstance(value, OracleTensor):
        return value.tensor
    if isinstance(value, (tuple, list)):
        if SCALAR_TYPES.issuperset(map(type, value)):
            return type(value)(value)
        return type(value)(unwrap(v) for v in value)
    return value


class OverloadError(LookupError):
    """``at.<op>(...)`` names no declared operator, or matches none or several overloads."""


class TorchBackend:
    """An operator backend (``formulas.Backend``) running declared operators with torch."""

    def __init__(self, schemas: Mapping[str, str]) -> None:
        overloads: dict[str, list[FunctionSchema]] = defaultdict(list)
        for text in schemas.values():
            schema = parse_schema(text)
            overloads[schema.name.base].append(schema)
        self._overloads = dict(overloads)
        # just an optimization: which overload a call binds to depends only on its arguments'
        # types (and symbolic string values), so it is resolved once per such signature (with
        # whether they are all tensors: then unwrapping them is all there is to do)
        self._resolved: dict[tuple[Any, ...], tuple[FunctionSchema, Any, bool]] = {}

    @classmethod
    def for_library(cls) -> TorchBackend:
        """A backend for every operator the shipped library declares."""
        return cls.for_package("formulas")

    @classmethod
    def for_package(cls, package: str, others: Mapping[str, str] | None = None) -> TorchBackend:
        """A backend for every operator the shipped library or ``package`` (imported here,
        every module of it) declares, and ``others`` (name -> schema: ATen operators neither
        declares); the package's schema wins on a shared name."""
        schemas: dict[str, str] = dict(others or {})
        for name in dict.fromkeys(("formulas", package)):
            declared = load_package(name)
            schemas.update({op: formula.schema for op, formula in declared.formulas.items()})
            schemas.update(declared.nondifferentiable)
        return cls(schemas)

    def declares(self, name: str) -> bool:
        """Whether the library declares an operator ``name`` (``at.<name>`` can run)."""
        return name in self._overloads

    def resolve(self, name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> FunctionSchema:
        """The one declared overload of ``name`` whose schema accepts ``args`` and ``kwargs``."""
        candidates = self._overloads.get(name)
        if not candidates:
            raise OverloadError(f"at.{name}: the library declares no operator `{name}`; "
                                "add a @derivative or nondifferentiable(...) for it")
        matches = [schema for schema in candidates if accepts(schema, args, kwargs)]
        if len(matches) > 1:        # ``at.all(t)``: the overload given every argument wins, as torch's
            exact = [s for s in matches if len(s.arguments) == len(args) + len(kwargs)]
            matches = exact if len(exact) == 1 else matches
        if len(matches) != 1:
            given = ", ".join([type(a).__name__ for a in args] + [f"{k}={type(v).__name__}" for k, v in kwargs.items()])
            declared = "; ".join(str(s) for s in candidates)
            problem = "matches no declared overload" if not matches else "is ambiguous between declared overloads"
            raise OverloadError(f"at.{name}({given}) {problem}: {declared}")
        return matches[0]

    def run(self, fn: Any, *args: Any) -> Any:
        """``fn`` (a formula, helper or closure) called on torch values with this back end: torch
        tensors in and out (also inside tuples and lists)."""
        with use_backend(self):
            return unwrap(fn(*wrap(args)))

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # just an optimization (the per-call cost of every formula): plain types key the common
        # call, a list or a string among them falls back to _type_key (keys of the two kinds
        # differ: only plain keys hold _KEYWORDS, only the others tuples and strings as values)
        """Run ``at.<name>`` on torch: resolve the overload for these argument types (cached), unwrap, call,
        wrap."""
        if kwargs:
            key = (name, *map(type, args), _KEYWORDS, *kwargs, *map(type, kwargs.values()))
        else:
            key = (name, *map(type, args))
        found = self._resolved.get(key)     # never a plain key with a list, tuple or str: those miss
        if found is None and (list in key or tuple in key or str in key):
            # (name, *map(_type_key, args), *((k, _type_key(v)) for k, v in kwargs.items())), with
            # a call only per list, tuple or string (just an optimization)
            parts: list[Any] = [name]
            for value in args:
                parts.append(_type_key(value) if isinstance(value, (list, tuple, str)) else type(value))
            for k, value in kwargs.items():
                parts.append((k, _type_key(value) if isinstance(value, (list, tuple, str)) else type(value)))
            key = tuple(parts)
            found = self._resolved.get(key)
        if found is None:
            schema = self.resolve(name, args, kwargs)
            overload = getattr(getattr(torch.ops.aten, schema.name.base), schema.name.overload or "default")
            tensors_only = not kwargs and all(t is OracleTensor for t in key[1:])
            found = self._resolved[key] = (schema, overload._op, tensors_only)  # _op: what OpOverload.__call__ calls
        overload = found[1]
        if found[2]:
            result = overload(*map(_tensor_of, args))
            return OracleTensor(result) if type(result) is torch.Tensor else wrap(result)
        # unwrapped: a list of sizes or dims goes as it is (no copy, no call)
        arguments = list(args)
        for i, a in enumerate(arguments):
            if type(a) is OracleTensor:
                arguments[i] = a.tensor
            elif isinstance(a, (list, tuple)) and not SCALAR_TYPES.issuperset(map(type, a)):
                arguments[i] = unwrap(a)
        if kwargs:
            unwrapped = {}
            for keyword, value in kwargs.items():
                unwrapped[keyword] = _SYMBOLIC_DEFAULTS.get(value, value) if isinstance(value, str) else \
                    value.tensor if type(value) is OracleTensor else unwrap(value)
            result = overload(*arguments, **unwrapped)
        else:
            result = overload(*arguments)
        return OracleTensor(result) if type(result) is torch.Tensor else wrap(result)


_tensor_of = operator.attrgetter("tensor")      # an OracleTensor's tensor
_KEYWORDS = object()        # in a resolved call's key: the keyword arguments' names and types follow


def _type_key(value: Any) -> Any:
    """What :func:`accepts` reads of ``value``: its type, a list's element types, a string itself."""
    if isinstance(value, (list, tuple)):
        return (type(value), *map(type if SCALAR_TYPES.issuperset(map(type, value)) else _type_key, value))
    return value if isinstance(value, str) else type(value)


def accepts(schema: FunctionSchema, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> bool:
    """Whether a call with ``args`` and ``kwargs`` binds to ``schema`` (types checked)."""
    positional = schema.positional
    if len(args) > len(positional):
        return False
    bound: dict[str, Any] = {arg.name: value for arg, value in zip(positional, args)}
    for key, value in kwargs.items():
        if key in bound:
            return False
        bound[key] = value
    known = {arg.name: arg for arg in schema.arguments if not arg.is_out}
    if any(key not in known for key in bound):
        return False
    for arg in known.values():
        if arg.name not in bound:
            if arg.default is None:
                return False
        elif not _fits(arg.type, bound[arg.name]):
            return False
    return True


_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int, torch.SymInt), "SymInt": (int, torch.SymInt), "float": (int, float, torch.SymInt, torch.SymFloat),
    "bool": (bool, torch.SymBool), "Scalar": (int, float, bool, complex, torch.SymInt, torch.SymFloat, torch.SymBool),
    "ScalarType": (torch.dtype,), "Layout": (torch.layout,),
    "Device": (torch.device, str), "MemoryFormat": (torch.memory_format,), "str": (str,),
}


#: schema defaults a formula spells as the schema does (``memory_format="contiguous_format"``,
#: what the reference engine passes too), as torch values
_SYMBOLIC_DEFAULTS: dict[str, Any] = {"contiguous_format": torch.contiguous_format}


def _fits(ty: Type, value: Any) -> bool:
    if isinstance(ty, OptionalType):
        return value is None or _fits(ty.elem, value)
    if isinstance(ty, ListType):
        if ty.size is not None and _fits(ty.elem, value):
            return True        # a fixed-size list (int[1]) accepts a single element
        return isinstance(value, (list, tuple)) and all(_fits(ty.elem, v) for v in value)
    assert isinstance(ty, BaseType)
    if ty.name == "Tensor":
        return isinstance(value, OracleTensor)
    if isinstance(value, bool) and ty.name in ("int", "SymInt", "float"):
        return False
    if ty.name == "MemoryFormat" and isinstance(value, str):
        return value in _SYMBOLIC_DEFAULTS
    python_types = _PYTHON_TYPES.get(ty.name)
    return python_types is None or isinstance(value, python_types)

