"""The value types formula code works with, and their C++ spellings.

Formula code is typed from three sources: operator schemas (``int[1]? dim``),
helper annotations (``list[int]``) and the metadata methods of tensors
(``x.sizes()``). :class:`PyType` is the one model all three map to; the
``cpp_*`` functions spell it for the place it appears in (a local or member, a
kernel parameter of a registered operator, a helper parameter).

Conventions shared with the formulas: ``Tensor?`` is a plain ``at::Tensor``
that is undefined for ``None`` (as in ``FunctionsManual.cpp``); lists are owned
``std::vector``; the ``needs_input_grad`` mask is a ``std::array<bool, N>``.
"""
from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass

from transpiler.schema import BaseType, ListType, OptionalType, Type, is_index_list


class Kind(enum.Enum):
    """The kinds of formula-level types; a ``PyType`` is a kind and its element types."""

    TENSOR = "Tensor"
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    SCALAR = "Scalar"
    SCALAR_TYPE = "ScalarType"
    OPTIONS = "TensorOptions"
    LAYOUT = "Layout"
    DEVICE = "Device"
    MEMORY_FORMAT = "MemoryFormat"
    STR = "str"
    GENERATOR = "Generator"   # random ops' Generator? argument: passed through, never computed on
    NONE = "None"
    LIST = "list"
    OPTIONAL = "optional"
    TUPLE = "tuple"
    UNKNOWN = "unknown"     # the element type of an empty list literal, until unified


@dataclass(frozen=True)
class PyType:
    """A formula-level type; ``elems`` holds the element (list, optional) or members (tuple)."""

    kind: Kind
    elems: tuple["PyType", ...] = ()
    size: int | None = None   # fixed length of a list (the needs_input_grad mask)

    @property
    def elem(self) -> "PyType":
        """The element type of a list (or an optional's wrapped type)."""
        return self.elems[0]

    def __str__(self) -> str:
        if self.kind is Kind.LIST:
            return f"list[{self.elem}]"
        if self.kind is Kind.OPTIONAL:
            return f"{self.elem} | None"
        if self.kind is Kind.TUPLE:
            return f"tuple[{', '.join(map(str, self.elems))}]"
        return self.kind.value


def _simple(kind: Kind) -> PyType:
    return PyType(kind)


TENSOR = _simple(Kind.TENSOR)
INT = _simple(Kind.INT)
FLOAT = _simple(Kind.FLOAT)
BOOL = _simple(Kind.BOOL)
SCALAR = _simple(Kind.SCALAR)
SCALAR_TYPE = _simple(Kind.SCALAR_TYPE)
OPTIONS = _simple(Kind.OPTIONS)
STR = _simple(Kind.STR)
NONE = _simple(Kind.NONE)
UNKNOWN = _simple(Kind.UNKNOWN)


def list_of(elem: PyType, size: int | None = None) -> PyType:
    """``list[elem]``, of a fixed ``size`` when one is known."""
    return PyType(Kind.LIST, (elem,), size)


def optional(elem: PyType) -> PyType:
    """``elem | None``; a tensor is its own optional (undefined means ``None``)."""
    if elem.kind in (Kind.TENSOR, Kind.OPTIONAL, Kind.NONE):
        return elem
    return PyType(Kind.OPTIONAL, (elem,))


def tuple_of(*elems: PyType) -> PyType:
    """``tuple[elems...]``."""
    return PyType(Kind.TUPLE, tuple(elems))


INT_LIST = list_of(INT)
TENSOR_LIST = list_of(TENSOR)
#: ``Tensor?[]``, index tensors with ``None`` for a whole dimension (``index.Tensor``, ``index_put``):
#: ATen's ``c10::List<std::optional<at::Tensor>>``, the one list whose elements are optional tensors.
INDEX_LIST = PyType(Kind.LIST, (PyType(Kind.OPTIONAL, (TENSOR,)),))
NUMBERS = (Kind.INT, Kind.FLOAT, Kind.BOOL)


class TypeConflict(Exception):
    """Two bindings of one name whose types C++ cannot hold in one variable."""


def unify(a: PyType, b: PyType) -> PyType:
    """The type of a variable assigned values of types ``a`` and ``b``."""
    if a == b:
        return a
    if a.kind is Kind.UNKNOWN:
        return b
    if b.kind is Kind.UNKNOWN:
        return a
    if a.kind is Kind.NONE:
        return optional(b)
    if b.kind is Kind.NONE:
        return optional(a)
    if a.kind is Kind.OPTIONAL or b.kind is Kind.OPTIONAL:
        inner_a = a.elem if a.kind is Kind.OPTIONAL else a
        inner_b = b.elem if b.kind is Kind.OPTIONAL else b
        return optional(unify(inner_a, inner_b))
    if a.kind in NUMBERS and b.kind in NUMBERS:
        return FLOAT if Kind.FLOAT in (a.kind, b.kind) else INT
    if a.kind is Kind.LIST and b.kind is Kind.LIST:
        return list_of(unify(a.elem, b.elem))
    if a.kind is Kind.TUPLE and b.kind is Kind.TUPLE and len(a.elems) == len(b.elems):
        return tuple_of(*(unify(x, y) for x, y in zip(a.elems, b.elems)))
    raise TypeConflict(f"{a} and {b}")


# --- from the schema --------------------------------------------------------------------------

_SCHEMA_BASES = {
    "Tensor": TENSOR, "int": INT, "SymInt": INT, "float": FLOAT, "SymFloat": FLOAT,
    "bool": BOOL, "SymBool": BOOL, "Scalar": SCALAR, "ScalarType": SCALAR_TYPE,
    "Layout": _simple(Kind.LAYOUT), "Device": _simple(Kind.DEVICE),
    "MemoryFormat": _simple(Kind.MEMORY_FORMAT), "str": STR, "Generator": _simple(Kind.GENERATOR),
}


class UnsupportedType(Exception):
    """A schema or annotation type the C++ emitter has no spelling for."""


def from_schema(ty: Type) -> PyType:
    """The formula-level type of a schema argument or return type."""
    if isinstance(ty, BaseType):
        if ty.name not in _SCHEMA_BASES:
            raise UnsupportedType(ty.name)
        return _SCHEMA_BASES[ty.name]
    if isinstance(ty, OptionalType):
        return optional(from_schema(ty.elem))
    if isinstance(ty, ListType):
        if is_index_list(ty):
            return INDEX_LIST
        elem = from_schema(ty.elem)
        if elem.kind not in (Kind.TENSOR, Kind.INT, Kind.FLOAT, Kind.BOOL) or isinstance(ty.elem, OptionalType):
            raise UnsupportedType(str(ty))
        return list_of(elem)
    raise UnsupportedType(str(ty))


# --- from helper annotations ------------------------------------------------------------------

_ANNOTATION_BASES = {
    "Tensor": TENSOR, "int": INT, "float": FLOAT, "bool": BOOL, "Scalar": SCALAR,
    "ScalarType": SCALAR_TYPE, "TensorOptions": OPTIONS, "str": STR, "None": NONE,
}
_GENERIC = re.compile(r"(?P<head>list|tuple)\[(?P<args>.*)\]\Z")


@functools.lru_cache(maxsize=1024)     # every emission types every helper: the same few annotations
def from_annotation(text: str) -> PyType:
    """The type of a helper annotation such as ``list[int]`` or ``Tensor | None``."""
    text = text.strip().strip("'\"")
    union = _split_top(text, "|")
    if len(union) > 1:
        members = [from_annotation(part) for part in union]
        result = members[0]
        for member in members[1:]:
            result = unify(result, member)
        return result
    if text.startswith("Optional[") and text.endswith("]"):
        return optional(from_annotation(text[len("Optional["):-1]))
    match = _GENERIC.match(text)
    if match:
        args = [from_annotation(a) for a in _split_top(match["args"], ",")]
        if match["head"] == "list" and len(args) == 1:
            if args[0] == TENSOR and _optional_text(match["args"]):
                return INDEX_LIST     # ``list[Tensor | None]``: the elements themselves may be None
            return list_of(args[0])
        if match["head"] == "tuple":
            return tuple_of(*args)
        raise UnsupportedType(text)
    if text not in _ANNOTATION_BASES:
        raise UnsupportedType(text)
    return _ANNOTATION_BASES[text]


def _optional_text(text: str) -> bool:
    """Whether an annotation admits None (``Tensor | None``, ``Optional[Tensor]``)."""
    text = text.strip()
    return "None" in _split_top(text, "|") or (text.startswith("Optional[") and text.endswith("]"))


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "["
        depth -= ch == "]"
        if ch == sep and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


# --- C++ spellings ------------------------------------------------------------------------------

_VALUE = {
    Kind.TENSOR: "at::Tensor", Kind.INT: "int64_t", Kind.FLOAT: "double", Kind.BOOL: "bool",
    Kind.SCALAR: "at::Scalar", Kind.SCALAR_TYPE: "at::ScalarType", Kind.OPTIONS: "at::TensorOptions",
    Kind.LAYOUT: "at::Layout", Kind.DEVICE: "at::Device", Kind.MEMORY_FORMAT: "at::MemoryFormat",
    Kind.STR: "std::string", Kind.GENERATOR: "at::Generator",
}
_TRIVIAL = {Kind.INT, Kind.FLOAT, Kind.BOOL, Kind.SCALAR_TYPE, Kind.LAYOUT, Kind.MEMORY_FORMAT}


def cpp_value(ty: PyType) -> str:
    """The owning C++ type of a local, a node member or a return value."""
    if ty.kind in _VALUE:
        return _VALUE[ty.kind]
    if ty == INDEX_LIST:
        return "c10::List<std::optional<at::Tensor>>"
    if ty.kind is Kind.LIST:
        if ty.size is not None:
            return f"std::array<{cpp_value(ty.elem)}, {ty.size}>"
        return f"std::vector<{cpp_value(ty.elem)}>"
    if ty.kind is Kind.OPTIONAL:
        return f"std::optional<{cpp_value(ty.elem)}>"
    if ty.kind is Kind.TUPLE:
        return f"std::tuple<{', '.join(cpp_value(e) for e in ty.elems)}>"
    raise UnsupportedType(str(ty))


def cpp_param(ty: PyType) -> str:
    """A read-only function parameter: by value when trivial, else by const reference."""
    if ty.kind in _TRIVIAL:
        return cpp_value(ty)
    if ty.kind is Kind.OPTIONAL and ty.elem.kind in _TRIVIAL:
        return cpp_value(ty)
    return f"const {cpp_value(ty)}&"


_KERNEL_BASES = {
    "Tensor": "const at::Tensor&", "int": "int64_t", "SymInt": "int64_t", "float": "double",
    "SymFloat": "double", "bool": "bool", "SymBool": "bool", "Scalar": "const at::Scalar&",
    "ScalarType": "at::ScalarType", "Layout": "at::Layout", "Device": "at::Device",
    "MemoryFormat": "at::MemoryFormat", "str": "c10::string_view", "Generator": "at::Generator",
}
_KERNEL_LISTS = {
    "Tensor": "at::TensorList", "int": "at::IntArrayRef", "SymInt": "at::IntArrayRef",
    "float": "at::ArrayRef<double>", "bool": "std::array<bool, {size}>",
}


def cpp_kernel_param(ty: Type) -> str:
    """The C++ parameter type the dispatcher passes for a schema argument (``int[]`` -> IntArrayRef)."""
    if isinstance(ty, BaseType):
        if ty.name not in _KERNEL_BASES:
            raise UnsupportedType(ty.name)
        return _KERNEL_BASES[ty.name]
    if isinstance(ty, OptionalType):
        inner = ty.elem
        if isinstance(inner, BaseType) and inner.name == "Tensor":
            return "const std::optional<at::Tensor>&"
        if isinstance(inner, BaseType) and inner.name == "Scalar":
            return "const std::optional<at::Scalar>&"
        if isinstance(inner, ListType) and isinstance(inner.elem, BaseType) and inner.elem.name in ("int", "SymInt"):
            return "at::OptionalIntArrayRef"
        if isinstance(inner, BaseType) and inner.name in _KERNEL_BASES:
            return f"std::optional<{_KERNEL_BASES[inner.name]}>"
        raise UnsupportedType(str(ty))
    if is_index_list(ty):
        return f"const {cpp_value(INDEX_LIST)}&"
    if isinstance(ty, ListType) and isinstance(ty.elem, BaseType) and ty.elem.name in _KERNEL_LISTS:
        return _KERNEL_LISTS[ty.elem.name].format(size=ty.size)
    raise UnsupportedType(str(ty))

