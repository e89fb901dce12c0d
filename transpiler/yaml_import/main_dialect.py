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
=================================  ==================================

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

from transpiler.metadata import PLAIN_METADATA
from transpiler.yaml_import.syntax import Call, Member, Name, Node, Paren, Qualified, rewrite

# Tensor methods the main dialect keeps as methods (metadata and what has no operator).
KEPT_METHODS = frozenset({
    "sizes", "size", "dim", "numel", "scalar_type", "options", "strides", "stride", "defined",
    "is_complex", "is_floating_point", "device", "dtype", "layout", "is_sparse", "item", "requires_grad",
})
SYMINT = "_symint"
_FUNC = re.compile(r"^- func: ([A-Za-z0-9_]+)[.(]", re.MULTILINE)
_VARIANTS = re.compile(r"^  variants: (.*)$", re.MULTILINE)


@functools.cache
def aten_operators() -> frozenset[str]:
    """Base names of the ATen operators of the installed torch (its native_functions.yaml) that
    are functions ``at::<name>`` (``variants: method`` ones are not)."""
    import torchgen

    path = Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"
    text = path.read_text(encoding="utf-8")
    names = set()
    for block in re.split(r"(?m)^(?=- func: )", text):
        name = _FUNC.match(block)
        variants = _VARIANTS.search(block)
        if name and (variants is None or "function" in variants.group(1)):
            names.add(name.group(1))
    return frozenset(names)


def to_main(tree: Node, non_tensors: frozenset[str] = frozenset(),
            operators: frozenset[str] | None = None) -> Node:
    """``tree`` in the main dialect. ``non_tensors``: names that are not tensors (Scalar or int
    arguments), whose methods stay methods; ``operators``: ATen operator names (default: torch's)."""
    known = aten_operators() if operators is None else operators

    def replacement(node: Node) -> Node | None:
        if not isinstance(node, Call):
            return None
        args = tuple(to_main(a, non_tensors, known) for a in node.args)
        func = node.func
        if isinstance(func, Member) and not func.arrow:
            receiver = to_main(func.obj, non_tensors, known)
            method = _plain(func.name)
            if func.name in PLAIN_METADATA:
                return Call(Member(receiver, PLAIN_METADATA[func.name]), args)
            if (method not in KEPT_METHODS and method in known
                    and not (isinstance(receiver, Name) and receiver.ident in non_tensors)):
                return Call(Qualified(("at", method)), (_unwrapped(receiver), *args))
            return Call(Member(receiver, func.name), args)
        if isinstance(func, Qualified) and func.parts[:1] == ("at",) and len(func.parts) == 2:
            return Call(Qualified(("at", _plain(func.parts[1]))), args)
        if isinstance(func, Name):
            name = _plain(func.ident)
            return Call(Qualified(("at", name)) if name in known else Name(name), args)
        return Call(func, args)
    return rewrite(tree, replacement)


def _unwrapped(node: Node) -> Node:
    """A receiver moved into argument position needs no parentheses of its own."""
    while isinstance(node, Paren):
        node = node.inner
    return node


def _plain(name: str) -> str:
    """``name`` without a ``_symint`` suffix (SymInt and int are one type in the main dialect)."""
    return name[:-len(SYMINT)] if name.endswith(SYMINT) else name
