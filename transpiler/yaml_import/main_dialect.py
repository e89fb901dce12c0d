"""derivatives.yaml's C++ idioms rewritten into the main formula dialect (formulas/README.md).

A rewrite of the shared expression tree (:mod:`.syntax`), applied by the importer
before the tree is printed as Python:

=================================  ==================================
C++ (as derivatives.yaml says it)  main dialect
=================================  ==================================
``self.cos()``, ``x.sum(dim)``     ``at.cos(self)``, ``at.sum(x, dim)``
``self.sym_sizes()``               ``self.sizes()`` (``sym_numel``...)
``at::zeros_symint(...)``          ``at.zeros(...)``
``zeros_like(self)`` (an ATen op)  ``at.zeros_like(self)``
``foo_symint(...)`` (a helper)     ``foo(...)``
``x.defined()``, ``!x.defined()``  ``x is not None``, ``x is None``
``std::tuple<Tensor, Tensor>()``   ``(None, None)``
``std::get<1>(t)``                 ``t[1]``
``at::gelu(self, approximate)``    ``at.gelu(self, approximate=approximate)``
=================================  ==================================

The last row: an argument passed in the position of a keyword-only parameter
(C++ has no keywords) is passed by its keyword, when every overload that
takes that many arguments agrees on the keyword.

A method becomes an operator call only when it is an ATen operator and its
receiver is not an argument known not to be a tensor (``alpha.conj()`` on a
Scalar stays). The rewrite cannot be undone from the Python alone (both
spellings exist in the YAML), so the importer keeps the original formula of a
rewritten line in a ``# yaml:`` comment, which ``emit-yaml`` prints back as long
as the Python still is its rewrite.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

from transpiler.schema import SchemaError, parse_schema
from transpiler.yaml_import.syntax import (
    Call,
    Index,
    Keyword,
    Literal,
    Member,
    Name,
    Node,
    NoneTest,
    Paren,
    Qualified,
    Template,
    TupleDisplay,
    Unary,
    rewrite,
)

# Tensor methods the main dialect keeps as methods (metadata and what has no operator).
KEPT_METHODS = frozenset({
    "sizes", "size", "dim", "numel", "scalar_type", "options", "strides", "stride", "defined",
    "is_complex", "is_floating_point", "device", "dtype", "layout", "is_sparse", "item", "requires_grad",
})
PLAIN_METADATA = {"sym_sizes": "sizes", "sym_size": "size", "sym_numel": "numel",
                  "sym_strides": "strides", "sym_stride": "stride", "sym_storage_offset": "storage_offset"}
SYMINT = "_symint"
_FUNC = re.compile(r"^- func: ([A-Za-z0-9_]+)[.(]", re.MULTILINE)
_VARIANTS = re.compile(r"^  variants: (.*)$", re.MULTILINE)
_SCHEMA = re.compile(r"^- func: (.*)$", re.MULTILINE)
# One overload's parameters as C++ takes them in position: (positional names, keyword-only names).
Signature = tuple[tuple[str, ...], tuple[str, ...]]


@functools.cache
def _function_schemas() -> tuple[str, ...]:
    """The schemas of the ATen operators of the installed torch (its native_functions.yaml) that are
    functions ``at::<name>`` (``variants: method`` ones are not)."""
    import torchgen

    path = Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"
    text = path.read_text(encoding="utf-8")
    schemas = []
    for block in re.split(r"(?m)^(?=- func: )", text):
        schema = _SCHEMA.match(block)
        variants = _VARIANTS.search(block)
        if schema and (variants is None or "function" in variants.group(1)):
            schemas.append(schema.group(1).strip())
    return tuple(schemas)


@functools.cache
def aten_operators() -> frozenset[str]:
    """Base names of the ATen operators that are functions ``at::<name>``."""
    return frozenset(m.group(1) for m in map(_FUNC.match, (f"- func: {s}" for s in _function_schemas())) if m)


@functools.cache
def aten_signatures() -> dict[str, tuple[Signature, ...]]:
    """Per ATen function name, the parameters of each overload that has no ``out=`` argument."""
    table: dict[str, list[Signature]] = {}
    for text in _function_schemas():
        try:
            schema = parse_schema(text)
        except SchemaError:
            continue
        if schema.out:
            continue
        table.setdefault(schema.name.base, []).append(
            (tuple(a.name for a in schema.positional), tuple(a.name for a in schema.kwarg_only)))
    return {name: tuple(signatures) for name, signatures in table.items()}


def keyword_arguments(name: str, args: tuple[Node, ...], signatures: dict[str, tuple[Signature, ...]]
                      ) -> tuple[Node, ...]:
    """``args`` of ``at.<name>(...)`` with those in keyword-only positions passed by keyword, when
    every overload taking that many arguments agrees on the keywords (else ``args`` unchanged)."""
    fits = [(positional, kwonly) for positional, kwonly in signatures.get(name, ())
            if len(args) <= len(positional) + len(kwonly)]
    if not fits or any(len(args) <= len(positional) for positional, _ in fits):
        return args
    spellings = {(len(positional), kwonly[:len(args) - len(positional)]) for positional, kwonly in fits}
    if len(spellings) != 1:
        return args
    count, keywords = spellings.pop()
    return (*args[:count], *(Keyword(k, a) for k, a in zip(keywords, args[count:])))


def to_main(tree: Node, non_tensors: frozenset[str] = frozenset(), operators: frozenset[str] | None = None,
            signatures: dict[str, tuple[Signature, ...]] | None = None) -> Node:
    """``tree`` in the main dialect. ``non_tensors``: names that are not tensors (Scalar or int
    arguments), whose methods stay methods; ``operators``: ATen function names, ``signatures``:
    their overloads' parameters (default: torch's)."""
    known = aten_operators() if operators is None else operators
    overloads = aten_signatures() if signatures is None else signatures

    def main(node: Node) -> Node:
        return to_main(node, non_tensors, known, overloads)

    def replacement(node: Node) -> Node | None:
        match node:
            case Unary("!", Call(Member(operand, "defined", False), ())):
                return NoneTest(main(operand), negated=False)
            case Call(Member(operand, "defined", False), ()):
                return NoneTest(main(operand), negated=True)
            case Call(Template(Qualified(("std", "tuple")) | Name("tuple"), types), ()) \
                    if all(t == Name("Tensor") for t in types):
                return TupleDisplay(tuple(_NULLOPT for _ in types))
            case Call(Template(Qualified(("std", "get")) | Name("get"), (Literal("number", index),)), (tuple_,)) \
                    if index.isdigit():
                return Index(main(tuple_), Literal("number", index))
        if not isinstance(node, Call):
            return None
        args = tuple(main(a) for a in node.args)
        func = node.func
        if isinstance(func, Member) and not func.arrow:
            receiver = to_main(func.obj, non_tensors, known)
            method = _plain(func.name)
            if func.name in PLAIN_METADATA:
                return Call(Member(receiver, PLAIN_METADATA[func.name]), args)
            if (method not in KEPT_METHODS and method in known
                    and not (isinstance(receiver, Name) and receiver.ident in non_tensors)):
                receiver_and_args = (_unwrapped(receiver), *args)
                return Call(Qualified(("at", method)), keyword_arguments(method, receiver_and_args, overloads))
            return Call(Member(receiver, func.name), args)
        if isinstance(func, Qualified) and func.parts[:1] == ("at",) and len(func.parts) == 2:
            name = _plain(func.parts[1])
            return Call(Qualified(("at", name)), keyword_arguments(name, args, overloads))
        if isinstance(func, Name):
            name = _plain(func.ident)
            if name in known:
                return Call(Qualified(("at", name)), keyword_arguments(name, args, overloads))
            return Call(Name(name), args)
        return Call(func, args)
    return rewrite(tree, replacement)


_NULLOPT = Qualified(("std", "nullopt"))


def _unwrapped(node: Node) -> Node:
    """A receiver moved into argument position needs no parentheses of its own."""
    while isinstance(node, Paren):
        node = node.inner
    return node


def _plain(name: str) -> str:
    """``name`` without a ``_symint`` suffix (SymInt and int are one type in the main dialect)."""
    return name[:-len(SYMINT)] if name.endswith(SYMINT) else name
