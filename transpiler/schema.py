"""Parser and typed model for operator schemas in ``native_functions.yaml`` syntax.

``parse_schema("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)")``
gives a frozen :class:`FunctionSchema`; ``str()`` of it prints the canonical form
(the same text torchgen prints). Pure Python, no torch needed.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

BASE_TYPES = frozenset({
    "Tensor", "int", "SymInt", "float", "SymFloat", "bool", "SymBool", "Scalar", "ScalarType",
    "str", "Generator", "Dimname", "Layout", "Device", "DeviceIndex", "MemoryFormat", "QScheme",
    "Storage", "Stream", "ConstQuantizerPtr", "GraphModule",
})


class SchemaError(ValueError):
    """A schema string that does not follow the ``native_functions.yaml`` syntax."""


@dataclass(frozen=True)
class Annotation:
    """Alias annotation such as ``(a!)``, ``(a -> *)`` or ``(a|b)``."""

    alias_set: tuple[str, ...]
    is_write: bool
    alias_set_after: tuple[str, ...]

    def __str__(self) -> str:
        text = "|".join(self.alias_set) + ("!" if self.is_write else "")
        if self.alias_set_after:
            text += " -> " + "|".join(self.alias_set_after)
        return text


@dataclass(frozen=True)
class BaseType:
    """A named type: ``Tensor``, ``int``, ``SymInt``, ``Scalar``, ``ScalarType``..."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class OptionalType:
    """``T?``: a value of ``elem`` or None."""

    elem: "Type"

    def __str__(self) -> str:
        return f"{self.elem}?"


@dataclass(frozen=True)
class ListType:
    """``T[]``, or ``T[N]`` with a fixed ``size`` (``int[2] stride``: one int stands for N copies)."""

    elem: "Type"
    size: int | None

    def __str__(self) -> str:
        return f"{self.elem}[{'' if self.size is None else self.size}]"


Type = BaseType | OptionalType | ListType


def base_of(ty: Type) -> BaseType:
    """The innermost base type (``Tensor`` for ``Tensor?[]``)."""
    while not isinstance(ty, BaseType):
        ty = ty.elem
    return ty


def is_tensor_like(ty: Type) -> bool:
    """``Tensor``, ``Tensor?``, ``Tensor[]`` or ``Tensor?[]``: a value holding tensors."""
    return base_of(ty).name == "Tensor"


def is_index_list(ty: Type) -> bool:
    """``Tensor?[]``: a list of index tensors (``None`` for a whole dimension), as ``index.Tensor``
    and ``index_put`` take it; integral or boolean, so never differentiable."""
    return isinstance(ty, ListType) and isinstance(ty.elem, OptionalType) and is_tensor_like(ty.elem)


def is_differentiable_type(ty: Type) -> bool:
    """``Tensor``, ``Tensor?`` or ``Tensor[]``: an argument that gets a gradient slot."""
    return is_tensor_like(ty) and not is_index_list(ty)


def _type_text(ty: Type, annotation: Annotation | None) -> str:
    if annotation is None:
        return str(ty)
    # The annotation sits right after the base name: Tensor(a!), Tensor(a)[], Tensor(a!)?
    text = str(ty)
    base = base_of(ty).name
    return f"{base}({annotation}){text[len(base):]}"


@dataclass(frozen=True)
class Argument:
    """One argument of a schema: its type, default as written, alias annotation, and whether it is
    keyword-only (after ``*``) or an ``out=`` argument."""

    name: str
    type: Type
    default: str | None
    annotation: Annotation | None
    kwarg_only: bool = False
    is_out: bool = False

    @property
    def is_tensor_like(self) -> bool:
        """Whether the argument holds tensors (:func:`is_tensor_like` of its type)."""
        return is_tensor_like(self.type)

    @property
    def is_differentiable(self) -> bool:
        """Whether the argument gets a gradient slot (Tensor, Tensor?, Tensor[]; not Tensor?[])."""
        return is_differentiable_type(self.type)

    def __str__(self) -> str:
        text = f"{_type_text(self.type, self.annotation)} {self.name}"
        return text if self.default is None else f"{text}={self.default}"


@dataclass(frozen=True)
class Return:
    """One return of a schema: its type, name (``Tensor values``) if any, and alias annotation."""

    name: str | None
    type: Type
    annotation: Annotation | None

    def __str__(self) -> str:
        text = _type_text(self.type, self.annotation)
        return text if self.name is None else f"{text} {self.name}"


@dataclass(frozen=True)
class OperatorName:
    """``base.overload`` (``sum.dim_IntList``); ``overload`` is "" for the default overload."""

    base: str
    overload: str

    @property
    def inplace(self) -> bool:
        """Whether the operator writes its ``self`` (``add_``, not a dunder such as ``__and__``)."""
        return self.base.endswith("_") and not self.base.endswith("__")

    @property
    def node_prefix(self) -> str:
        """The autograd node's name before ``Backward<N>``, in torchgen's spelling:
        ``sum.dim_IntList`` -> ``SumDimIntList``, ``add_.Tensor`` -> ``AddTensor``."""
        return _node_prefix(str(self))

    def __str__(self) -> str:
        return f"{self.base}.{self.overload}" if self.overload else self.base


@functools.lru_cache(maxsize=None)
def _node_prefix(name: str) -> str:
    """:attr:`OperatorName.node_prefix` of the operator ``name`` (memoised: every emission names
    the nodes of every module, and keys what a kept module's node names read)."""
    return "".join(w[0].upper() + w[1:] for w in re.split(r"[_.]+", name) if w)


@dataclass(frozen=True)
class FunctionSchema:
    """An operator schema, parsed (:func:`parse_schema`); ``str()`` gives its canonical text."""

    name: OperatorName
    arguments: tuple[Argument, ...]
    returns: tuple[Return, ...]

    @property
    def positional(self) -> tuple[Argument, ...]:
        """The arguments that may be passed by position."""
        return tuple(a for a in self.arguments if not a.kwarg_only)

    @property
    def kwarg_only(self) -> tuple[Argument, ...]:
        """The keyword-only arguments, the ``out`` ones excepted."""
        return tuple(a for a in self.arguments if a.kwarg_only and not a.is_out)

    @property
    def out(self) -> tuple[Argument, ...]:
        """The ``out`` arguments."""
        return tuple(a for a in self.arguments if a.is_out)

    @property
    def tensor_inputs(self) -> tuple[Argument, ...]:
        """Arguments of type Tensor, Tensor?, Tensor[] (schema order): the differentiable candidates
        (a ``Tensor?[]`` index list is not one)."""
        return tuple(a for a in self.arguments if a.is_differentiable and not a.is_out)

    def output_flags(self, output_differentiability: tuple[bool, ...] | None) -> tuple[bool, ...]:
        """Whether each return is differentiable: a tensor return that ``output_differentiability``
        marks so, or every tensor return when a formula declares none (``@derivative``'s default).
        A return of another type (``int``, ``float``...) never is."""
        declared = output_differentiability or (True,) * len(self.returns)
        return tuple(flag and is_tensor_like(ret.type) for ret, flag in zip(self.returns, declared))

    def argument(self, name: str) -> Argument:
        """The argument named ``name`` (KeyError when there is none)."""
        for arg in self.arguments:
            if arg.name == name:
                return arg
        raise KeyError(name)

    def __str__(self) -> str:
        parts: list[str] = [str(a) for a in self.positional]
        kw = [str(a) for a in self.arguments if a.kwarg_only]
        if kw:
            parts.append("*")
            parts.extend(kw)
        if len(self.returns) == 1:
            rets = str(self.returns[0])
        else:
            rets = "(" + ", ".join(str(r) for r in self.returns) + ")"
        return f"{self.name}({', '.join(parts)}) -> {rets}"


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ANNOTATED = re.compile(r"(?P<base>[A-Za-z_][A-Za-z0-9_]*)\((?P<ann>[^)]*)\)(?P<rest>.*)\Z")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets or parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth < 0:
                raise SchemaError(f"unbalanced '{ch}' in {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise SchemaError(f"unbalanced brackets in {text!r}")
    parts.append(text[start:])
    return [p.strip() for p in parts]


def parse_annotation(text: str) -> Annotation:
    """An alias annotation from the text inside its parentheses: ``a!``, ``a -> *``, ``a|b``."""
    before, arrow, after = text.partition("->")
    before = before.strip()
    is_write = before.endswith("!")
    aliases = tuple(a.strip() for a in before.rstrip("!").split("|"))
    after_set = tuple(a.strip() for a in after.split("|")) if arrow else ()
    if not all(aliases) or (arrow and not all(after_set)):
        raise SchemaError(f"malformed alias annotation '({text})'")
    return Annotation(aliases, is_write, after_set)


def parse_type(text: str) -> tuple[Type, Annotation | None]:
    """Parse ``Tensor(a!)?[]``-style type text into (type, annotation)."""
    text = text.strip()
    annotation = None
    match = _ANNOTATED.match(text)
    if match:
        annotation = parse_annotation(match["ann"])
        text = match["base"] + match["rest"]
    return _parse_plain_type(text), annotation


def _parse_plain_type(text: str) -> Type:
    if text.endswith("?"):
        return OptionalType(_parse_plain_type(text[:-1]))
    if text.endswith("]"):
        open_at = text.rfind("[")
        if open_at <= 0:
            raise SchemaError(f"malformed list type '{text}'")
        size_text = text[open_at + 1:-1].strip()
        if size_text and not size_text.isdigit():
            raise SchemaError(f"list size must be an integer in '{text}'")
        return ListType(_parse_plain_type(text[:open_at]), int(size_text) if size_text else None)
    if text not in BASE_TYPES:
        raise SchemaError(f"unknown type '{text}'")
    return BaseType(text)


def _parse_argument(text: str, kwarg_only: bool) -> Argument:
    decl, eq, default = text.partition("=")
    type_text, _, name = decl.strip().rpartition(" ")
    if not type_text or not _IDENT.match(name):
        raise SchemaError(f"argument '{text}' must be 'Type name' or 'Type name=default'")
    ty, annotation = parse_type(type_text)
    is_out = kwarg_only and annotation is not None and annotation.is_write
    return Argument(name, ty, default.strip() if eq else None, annotation, kwarg_only, is_out)


def _parse_return(text: str) -> Return:
    type_text, _, name = text.rpartition(" ")
    if not type_text:
        type_text, name = text, ""
    if name and not _IDENT.match(name):
        raise SchemaError(f"return '{text}' must be 'Type' or 'Type name'")
    ty, annotation = parse_type(type_text)
    return Return(name or None, ty, annotation)


def parse_schema(text: str) -> FunctionSchema:
    """Parse a full schema string; raise :class:`SchemaError` saying what is wrong."""
    head, arrow, returns_text = text.rpartition("->")
    if not arrow:
        raise SchemaError(f"schema '{text}' has no '-> returns' part")
    head, returns_text = head.strip(), returns_text.strip()
    if not head.endswith(")") or "(" not in head:
        raise SchemaError(f"schema '{text}' must look like 'name.overload(args) -> returns'")
    name_text, args_text = head[:-1].split("(", 1)
    base, _, overload = name_text.strip().partition(".")
    if not _IDENT.match(base) or (overload and not _IDENT.match(overload)):
        raise SchemaError(f"bad operator name '{name_text.strip()}'")

    arguments: list[Argument] = []
    kwarg_only = False
    if args_text.strip():
        for part in _split_top_level(args_text):
            if part == "*":
                if kwarg_only:
                    raise SchemaError(f"'*' appears twice in '{text}'")
                kwarg_only = True
                continue
            arguments.append(_parse_argument(part, kwarg_only))
    names = [a.name for a in arguments]
    if len(set(names)) != len(names):
        raise SchemaError(f"duplicate argument name in '{text}'")

    if returns_text.startswith("(") and returns_text.endswith(")"):
        inner = returns_text[1:-1].strip()
        returns = tuple(_parse_return(r) for r in _split_top_level(inner)) if inner else ()
    else:
        returns = (_parse_return(returns_text),)
    return FunctionSchema(OperatorName(base, overload), tuple(arguments), returns)
