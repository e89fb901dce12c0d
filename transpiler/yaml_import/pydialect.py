"""The Python spelling of formula expressions, both ways.

:func:`to_python` prints a :mod:`.syntax` tree as a Python expression and
:func:`from_python` parses such an expression back into the same tree. The
mapping is one-to-one, so the C++ tokens printed from the parsed Python are
the tokens the tree was made from:

==================================  ===================================
C++                                 Python
==================================  ===================================
``at::sum_to(x)``, ``c10::kJagged``  ``at.sum_to(x)``, ``c10.kJagged``
``::std::foo``                      ``cpp.root.std.foo``
``std::nullopt``                    ``None``
``std::get<0>(t)``                  ``std.get[0](t)``
``x->sym_sizes()``                  ``cpp.arrow(x).sym_sizes()``
``*x``                              ``cpp.deref(x)``
``!a && b || c``                    ``not a and b or c``
``c ? a : b``                       ``a if c else b``
``{a, b}``                          ``[a, b]``
``true``, ``false``                 ``True``, ``False``
``[](c10::SymInt i){return -i;}``   ``cpp.lambda_(c10.SymInt)(lambda i: -i)``
a Python keyword ``None`` as a name  ``None_`` (a trailing underscore)
==================================  ===================================

The first part of a dotted name says whether the dots are ``::`` (one of
:data:`NAMESPACES`) or member accesses. ``names`` renames plain identifiers
(``grad_input_mask`` is ``needs_input_grad`` in Python, for instance).
"""
from __future__ import annotations

import keyword
from dataclasses import dataclass
from typing import Iterable

from transpiler.yaml_import.syntax import (
    BraceList,
    Binary,
    Call,
    Conditional,
    Index,
    Keyword,
    Lambda,
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
)
from transpiler.yaml_import.cpp import BARE_TEMPLATES

NAMESPACES = ("at", "std", "c10", "GradMode")
DIALECT_NAMESPACE = "cpp"          # cpp.arrow, cpp.deref, cpp.lambda_, cpp.root
_ROOT_NAMES = frozenset(NAMESPACES + (DIALECT_NAMESPACE,))
NULLOPT = Qualified(("std", "nullopt"))
_LOGICAL = {"&&": "and", "||": "or"}
_LOGICAL_BACK = {v: k for k, v in _LOGICAL.items()}


class DialectError(ValueError):
    """An expression outside the Python dialect (or a tree it cannot spell)."""


def _reserved(ident: str, plain: bool) -> bool:
    return keyword.iskeyword(ident) or (plain and ident in _ROOT_NAMES)


def escape(ident: str, *, plain: bool = False) -> str:
    """A C++ identifier as a Python one: keywords (and, for a ``plain`` name, the
    dialect's root names such as ``std``) get a trailing underscore."""
    return ident + "_" if _reserved(ident, plain) else ident


def unescape(ident: str, *, plain: bool = False) -> str:
    """The inverse of :func:`escape`."""
    return ident[:-1] if ident.endswith("_") and _reserved(ident[:-1], plain) else ident


def local_names(names: Iterable[str]) -> dict[str, str]:
    """Renames for a formula's own names (parameters, outputs) that need one.

    A Python keyword gets a trailing underscore (``from`` is ``from_``); a name
    that is also a dialect root (an argument called ``std``) keeps its spelling
    and shadows the namespace inside that formula.
    """
    return {name: escape(name) for name in names if _reserved(name, plain=True)}


def inverse_names(names: dict[str, str]) -> dict[str, str]:
    """Python-to-C++ renames for :func:`from_python`, given the C++-to-Python ones
    (of two C++ names with one Python spelling, the later one wins)."""
    return {python: name for name, python in names.items()}


# --------------------------------------------------------------------------- printing

def to_python(tree: Node, names: dict[str, str] | None = None) -> str:
    """``tree`` as a Python expression; ``names`` renames plain identifiers."""
    return _Printer(names or {}).expr(tree)


@dataclass
class _Printer:
    names: dict[str, str]

    def expr(self, node: Node) -> str:
        match node:
            case Name(ident):
                return self.names.get(ident, escape(ident, plain=True))
            case Literal("bool", text):
                return "True" if text == "true" else "False"
            case Literal(_, text):
                return text
            case Qualified(parts, rooted):
                if node == NULLOPT:
                    return "None"
                if not rooted and parts[0] not in NAMESPACES:
                    raise DialectError(f"namespace {parts[0]!r} is not one of {', '.join(NAMESPACES)}")
                dotted = ".".join(escape(p) for p in parts)
                return f"{DIALECT_NAMESPACE}.root.{dotted}" if rooted else dotted
            case Template(base, args):
                return f"{self.expr(base)}[{', '.join(self.expr(a) for a in args)}]"
            case Member(obj, name, arrow):
                target = f"{DIALECT_NAMESPACE}.arrow({self.expr(obj)})" if arrow else self.expr(obj)
                return f"{target}.{escape(name)}"
            case Call(func, args):
                return f"{self.expr(func)}({', '.join(self.expr(a) for a in args)})"
            case Index(obj, index):
                return f"{self.expr(obj)}[{self.expr(index)}]"
            case Unary("!", operand):
                return f"not {self.expr(operand)}"
            case Unary("*", operand):
                return f"{DIALECT_NAMESPACE}.deref({self.expr(operand)})"
            case Unary(op, operand):
                return f"{op}{self.expr(operand)}"
            case Binary(op, left, right):
                if op in _COMPARISONS and any(_is_comparison(side) for side in (left, right)):
                    raise DialectError("a comparison of a comparison would chain in Python; parenthesize it")
                if op not in _LOGICAL and any(isinstance(side, NoneTest) for side in (left, right)):
                    raise DialectError(f"`is None` as an operand of `{op}` reads differently in Python; parenthesize it")
                return f"{self.expr(left)} {_LOGICAL.get(op, op)} {self.expr(right)}"
            case Conditional(cond, then, orelse):
                return f"{self.expr(then)} if {self.expr(cond)} else {self.expr(orelse)}"
            case Paren(inner):
                return f"({self.expr(inner)})"
            case NoneTest(operand, negated):
                if _is_comparison(operand):
                    raise DialectError("a comparison of a comparison would chain in Python; parenthesize it")
                return f"{self.expr(operand)} is {'not ' if negated else ''}None"
            case Keyword(name, value):
                return f"{escape(name)}={self.expr(value)}"
            case TupleDisplay(items):
                inner = ", ".join(self.expr(i) for i in items)
                return f"({inner},)" if len(items) == 1 else f"({inner})"
            case BraceList(items):
                return f"[{', '.join(self.expr(i) for i in items)}]"
            case Lambda(params, body):
                types = ", ".join(self.expr(t) for t, _ in params)
                inner = _Printer({**self.names, **{n: escape(n, plain=True) for _, n in params}})
                args = ", ".join(escape(n, plain=True) for _, n in params)
                return f"{DIALECT_NAMESPACE}.lambda_({types})(lambda {args}: {inner.expr(body)})"
        raise DialectError(f"not an expression node: {node!r}")


# --------------------------------------------------------------------------- parsing

_PY_PUNCT = frozenset(("==", "!=", "<=", ">=", *"+-*/%<>()[],.:&|^~="))
_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
# Python binding powers (higher binds tighter).
_PY_BINARY = {"or": 3, "and": 4, **{op: 6 for op in _COMPARISONS}, "|": 7, "^": 8, "&": 9,
              "+": 11, "-": 11, "*": 12, "/": 12, "%": 12}
_NOT_POWER, _IF_POWER, _UNARY_POWER = 5, 2, 13


@dataclass(frozen=True)
class _Tok:
    kind: str    # "name", "number", "string", "op", "end"
    text: str


def _tokenize(text: str) -> list[_Tok]:
    tokens: list[_Tok] = []
    pos, n = 0, len(text)
    while pos < n:
        ch = text[pos]
        if ch.isspace():
            pos += 1
            continue
        start = pos
        if ch.isalpha() or ch == "_":
            while pos < n and (text[pos].isalnum() or text[pos] == "_"):
                pos += 1
            tokens.append(_Tok("name", text[start:pos]))
        elif ch.isdigit() or (ch == "." and pos + 1 < n and text[pos + 1].isdigit()):
            while pos < n and (text[pos].isdigit() or text[pos] == "."):
                pos += 1
            if pos < n and text[pos] in "eE":
                pos += 2
                while pos < n and text[pos].isdigit():
                    pos += 1
            tokens.append(_Tok("number", text[start:pos]))
        elif ch in "\"'":
            pos += 1
            while pos < n and text[pos] != ch:
                pos += 2 if text[pos] == "\\" else 1
            pos += 1
            if pos > n:
                raise DialectError("unterminated string literal")
            tokens.append(_Tok("string", text[start:pos]))
        else:
            op = text[pos:pos + 2] if text[pos:pos + 2] in _PY_PUNCT else ch
            if op not in _PY_PUNCT:
                raise DialectError(f"unexpected character {ch!r} in {text!r}")
            pos += len(op)
            tokens.append(_Tok("op", op))
    tokens.append(_Tok("end", ""))
    return tokens


def from_python(text: str, names: dict[str, str] | None = None) -> Node:
    """Parse a dialect expression; ``names`` maps Python identifiers back to C++ ones."""
    parser = _PyParser(_tokenize(text), names or {})
    tree = parser.expression(0)
    if parser.current.kind != "end":
        raise DialectError(f"unexpected {parser.current.text!r} in {text!r}")
    return tree


class _PyParser:
    def __init__(self, tokens: list[_Tok], names: dict[str, str]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.names = names

    @property
    def current(self) -> _Tok:
        return self.tokens[self.pos]

    def at(self, text: str) -> bool:
        return self.current.kind in ("op", "name") and self.current.text == text

    def advance(self) -> _Tok:
        tok = self.tokens[self.pos]
        if tok.kind == "end":
            raise DialectError("unexpected end of the expression")
        self.pos += 1
        return tok

    def expect(self, text: str) -> None:
        if not self.at(text):
            raise DialectError(f"expected {text!r}, found {self.current.text or 'end'!r}")
        self.advance()

    def expression(self, min_power: int) -> Node:
        if self.at("not"):
            if min_power > _NOT_POWER:    # Python's grammar: `a == not b` is a syntax error
                raise DialectError("`not` cannot be the operand of a comparison or arithmetic operator")
            self.advance()
            left: Node = Unary("!", self.expression(_NOT_POWER))
        elif self.current.kind == "op" and self.current.text in "-+~" and self.current.text:
            op = self.advance().text
            left = Unary(op, self.expression(_UNARY_POWER))
        else:
            left = self.postfix(self.primary())
        while True:
            tok = self.current
            if tok.text == "if" and tok.kind == "name" and _IF_POWER > min_power:
                self.advance()
                cond = self.expression(_IF_POWER)
                self.expect("else")
                left = Conditional(cond, left, self.expression(_IF_POWER - 1))
                continue
            if tok.kind == "name" and tok.text == "is" and _PY_BINARY["=="] > min_power:
                left = self.none_test(left)
                continue
            power = _PY_BINARY.get(tok.text) if tok.kind in ("op", "name") else None
            if power is None or power <= min_power:
                return left
            self.advance()
            if tok.text in _COMPARISONS and _is_comparison(left):
                raise DialectError("a chained comparison (`a < b < c`) has no C++ spelling; parenthesize it")
            left = Binary(_LOGICAL_BACK.get(tok.text, tok.text), left, self.expression(power))

    def none_test(self, left: Node) -> Node:
        """``left is None`` / ``left is not None`` (``is`` is the current token)."""
        if _is_comparison(left):
            raise DialectError("a chained comparison (`a < b < c`) has no C++ spelling; parenthesize it")
        self.advance()
        negated = self.at("not")
        if negated:
            self.advance()
        if not self.at("None"):
            raise DialectError("`is` is only a test for None (`x is None`, `x is not None`)")
        self.advance()
        return NoneTest(left, negated)

    def postfix(self, node: Node) -> Node:
        while True:
            if self.at("("):
                node = self.call(node)
            elif self.at("["):
                self.advance()
                items = [self.expression(0)]
                while self.at(","):
                    self.advance()
                    items.append(self.expression(0))
                self.expect("]")
                if _is_template_base(node):
                    node = Template(node, tuple(items))
                elif len(items) == 1:
                    node = Index(node, items[0])
                else:
                    raise DialectError("a subscript with several items needs a namespace-qualified template")
            elif self.at("."):
                self.advance()
                node = self.attribute(node, unescape(self.advance().text))
            else:
                return node

    def attribute(self, node: Node, name: str) -> Node:
        if isinstance(node, Qualified) and node != NULLOPT:
            return Qualified(node.parts + (name,), node.rooted)
        if node == Name(DIALECT_NAMESPACE) and name == "root":
            return _ROOT
        if isinstance(node, _Arrow):
            return Member(node.obj, name, arrow=True)
        return Member(node, name)

    def call(self, func: Node) -> Node:
        self.advance()
        args: list[Node] = []
        while not self.at(")"):
            if args:
                self.expect(",")
            if self.current.kind == "name" and self.tokens[self.pos + 1].text == "=":
                name = unescape(self.advance().text)
                self.advance()
                args.append(Keyword(name, self.expression(0)))
            else:
                args.append(self.expression(0))
        self.expect(")")
        if isinstance(func, Member) and func.obj == Name(DIALECT_NAMESPACE) and not func.arrow:
            return self.dialect_call(func.name, args)
        if isinstance(func, _LambdaTypes):
            if len(args) != 1 or not isinstance(args[0], _PyLambda):
                raise DialectError("cpp.lambda_(types) must be applied to one lambda")
            lam = args[0]
            if len(lam.params) != len(func.types):
                raise DialectError("cpp.lambda_ needs one type per lambda parameter")
            return Lambda(tuple(zip(func.types, lam.params)), lam.body)
        return Call(func, tuple(args))

    def dialect_call(self, name: str, args: list[Node]) -> Node:
        if name == "deref" and len(args) == 1:
            return Unary("*", args[0])
        if name == "arrow" and len(args) == 1:
            return _Arrow(args[0])
        if name == "lambda":      # spelled lambda_ (a keyword, escaped)
            return _LambdaTypes(tuple(args))
        raise DialectError(f"unknown dialect call cpp.{name}")

    def primary(self) -> Node:
        tok = self.advance()
        if tok.kind == "number":
            return Literal("number", tok.text)
        if tok.kind == "string":
            return Literal("string", tok.text)
        if tok.kind == "name":
            if tok.text in ("True", "False"):
                return Literal("bool", "true" if tok.text == "True" else "false")
            if tok.text == "None":
                return NULLOPT
            if tok.text == "lambda":
                return self.lambda_()
            if tok.text in self.names:
                return Name(self.names[tok.text])
            if tok.text in NAMESPACES:
                return Qualified((tok.text,))
            return Name(unescape(tok.text, plain=True))
        if tok.text == "(":
            inner = self.expression(0)
            if not self.at(","):
                self.expect(")")
                return Paren(inner)
            items = [inner]
            while self.at(","):
                self.advance()
                if self.at(")"):
                    break
                items.append(self.expression(0))
            self.expect(")")
            return TupleDisplay(tuple(items))
        if tok.text == "[":
            items: list[Node] = []
            while not self.at("]"):
                if items:
                    self.expect(",")
                items.append(self.expression(0))
            self.expect("]")
            return BraceList(tuple(items))
        raise DialectError(f"unexpected {tok.text or 'end'!r}")

    def lambda_(self) -> Node:
        params: list[str] = []
        while not self.at(":"):
            if params:
                self.expect(",")
            params.append(self.advance().text)
        self.expect(":")
        outer = self.names
        self.names = {**outer, **{p: unescape(p, plain=True) for p in params}}
        body = self.expression(0)
        self.names = outer
        return _PyLambda(tuple(unescape(p, plain=True) for p in params), body)


def _is_comparison(node: Node) -> bool:
    return isinstance(node, NoneTest) or (isinstance(node, Binary) and node.op in _COMPARISONS)


def _is_template_base(node: Node) -> bool:
    return isinstance(node, (Qualified, Template)) or (isinstance(node, Name) and node.ident in BARE_TEMPLATES)


# Intermediate nodes that only exist while parsing the dialect's helper calls.
@dataclass(frozen=True)
class _Arrow(Node):
    obj: Node


@dataclass(frozen=True)
class _LambdaTypes(Node):
    types: tuple[Node, ...]


@dataclass(frozen=True)
class _PyLambda(Node):
    params: tuple[str, ...]
    body: Node


_ROOT = Qualified((), rooted=True)
