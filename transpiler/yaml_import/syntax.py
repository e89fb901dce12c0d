"""The expression tree shared by the C++ and the Python side of the importer.

A derivatives.yaml formula is a C++ expression. :mod:`.cpp` parses it into
this tree and prints it back; :mod:`.pydialect` prints the same tree as Python
and parses that Python back. The tree is *concrete*: it keeps parentheses
(:class:`Paren`) and the exact spelling of literals, so printing a parsed
formula gives the same token list.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, fields, replace
from typing import Callable, Iterator


class Node:
    """Base class of expression nodes (frozen dataclasses below)."""


@dataclass(frozen=True)
class Name(Node):
    """An unqualified identifier: ``grad``, ``self``, ``sum_backward``."""

    ident: str


@dataclass(frozen=True)
class Qualified(Node):
    """A ``::``-qualified name: ``at::sum_to``, ``::std::nullopt`` (``rooted``)."""

    parts: tuple[str, ...]
    rooted: bool = False


@dataclass(frozen=True)
class Template(Node):
    """Template arguments applied to a name: ``std::get<0>``, ``std::tuple<Tensor, Tensor>``."""

    base: Node
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Literal(Node):
    """A number, string or boolean literal, spelled as in the C++ source."""

    kind: str   # "number", "string" or "bool"
    text: str


@dataclass(frozen=True)
class Member(Node):
    """``obj.name`` or, with ``arrow``, ``obj->name``."""

    obj: Node
    name: str
    arrow: bool = False


@dataclass(frozen=True)
class Call(Node):
    """``func(args...)``."""

    func: Node
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Index(Node):
    """``obj[index]``."""

    obj: Node
    index: Node


@dataclass(frozen=True)
class Unary(Node):
    """Prefix ``! - + * ~``."""

    op: str
    operand: Node


@dataclass(frozen=True)
class Binary(Node):
    """``left op right``."""

    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Conditional(Node):
    """``cond ? then : orelse``."""

    cond: Node
    then: Node
    orelse: Node


@dataclass(frozen=True)
class Paren(Node):
    """Parentheses written in the source (kept so that the token list round-trips)."""

    inner: Node


@dataclass(frozen=True)
class BraceList(Node):
    """A braced initializer list ``{a, b}``."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class NoneTest(Node):
    """The main dialect's ``x is None`` (``negated``: ``x is not None``); C++ ``!x.defined()`` /
    ``x.defined()`` (derivatives.yaml asks it of tensors only)."""

    operand: Node
    negated: bool


@dataclass(frozen=True)
class Keyword(Node):
    """A keyword argument ``name=value`` of the main dialect; C++ passes ``value`` in position."""

    name: str
    value: Node


@dataclass(frozen=True)
class TupleDisplay(Node):
    """A Python tuple ``(a, b)``; C++ ``std::make_tuple(a, b)``, or ``std::tuple<Tensor, Tensor>()``
    when every item is None (a tuple of undefined gradients)."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Lambda(Node):
    """``[](T a, U b){return body;}``: capture-less lambda with one return statement."""

    params: tuple[tuple[Node, str], ...]   # (type, name)
    body: Node


# C++ binary operators and their binding power (higher binds tighter).
BINARY_PRECEDENCE: dict[str, int] = {
    "||": 4, "&&": 5, "|": 6, "^": 7, "&": 8,
    "==": 9, "!=": 9, "<": 10, "<=": 10, ">": 10, ">=": 10,
    "+": 12, "-": 12, "*": 13, "/": 13, "%": 13,
}
# Binary operators of the main dialect's trees that C++ spells otherwise: ``//`` (the main
# dialect's division of non-negative integers) and C++'s integer ``/`` and ``%`` of integers that
# may be negative (truncating toward zero), which Python spells ``cpp.int_div`` / ``cpp.int_mod``.
INTEGER_OPERATORS = {"/": "int/", "%": "int%"}
CPP_SPELLING = {"//": "/", "int/": "/", "int%": "%"}
CONDITIONAL_PRECEDENCE = 2
UNARY_PRECEDENCE = 14
UNARY_OPERATORS = frozenset({"!", "-", "+", "*", "~"})


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def children(node: Node) -> Iterator[Node]:
    """The direct sub-expressions of ``node`` (lambda parameter types included)."""
    for name in _field_names(type(node)):
        value = getattr(node, name)
        for child in value if isinstance(value, tuple) else (value,):
            if isinstance(child, Node):
                yield child
            elif isinstance(child, tuple):
                yield from (part for part in child if isinstance(part, Node))


def walk(node: Node) -> Iterator[Node]:
    """Every node of a tree, ``node`` first (pre-order, iterative: trees can be deep)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(children(current))))


def rewrite(node: Node, replacement: Callable[[Node], Node | None]) -> Node:
    """``node`` with every sub-tree for which ``replacement`` gives a node replaced by it
    (top down: a replaced sub-tree is not visited further)."""
    new = replacement(node)
    if new is not None:
        return new
    changes = {}
    for name in _field_names(type(node)):
        value = getattr(node, name)
        if isinstance(value, Node):
            changes[name] = rewrite(value, replacement)
        elif isinstance(value, tuple) and value and isinstance(value[0], Node):
            changes[name] = tuple(rewrite(v, replacement) for v in value)
    return replace(node, **changes) if changes else node
