"""The Python spelling of formula expressions, both ways.

:func:`to_python` prints a :mod:`.syntax` tree as a Python expression and
:func:`from_cst` turns such an expression, parsed by libcst (which keeps
parentheses), back into the same tree (:func:`from_python` parses the text
first). The mapping is one-to-one, so the C++ tokens printed from the parsed
Python are the tokens the tree was made from:

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

import libcst as cst

from transpiler import codes
from transpiler.diagnostics import TranspileError, unplaced
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


def unspellable(message: str) -> TranspileError:
    """A tree :func:`to_python` cannot spell in the dialect: a DB301 (the importer names the entry)."""
    return unplaced(codes.IMPORT_YAML_ENTRY.code, message)


def outside_dialect(message: str) -> TranspileError:
    """A Python expression :func:`from_cst` does not read back: a DB300 (emit-yaml names the line)."""
    return unplaced(codes.EMIT_YAML_SHAPE.code, message)


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
                    raise unspellable(f"namespace {parts[0]!r} is not one of {', '.join(NAMESPACES)}")
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
            case Binary("int/" | "int%" as op, left, right):
                return f"{DIALECT_NAMESPACE}.{_INTEGER_CALLS[op]}({self.expr(left)}, {self.expr(right)})"
            case Binary(op, left, right):
                if op in _COMPARISONS and any(_is_comparison(side) for side in (left, right)):
                    raise unspellable("a comparison of a comparison would chain in Python; parenthesize it")
                if op not in _LOGICAL and any(isinstance(side, NoneTest) for side in (left, right)):
                    raise unspellable(f"`is None` as an operand of `{op}` reads differently in Python; parenthesize it")
                return f"{self.expr(left)} {_LOGICAL.get(op, op)} {self.expr(right)}"
            case Conditional(cond, then, orelse):
                return f"{self.expr(then)} if {self.expr(cond)} else {self.expr(orelse)}"
            case Paren(inner):
                return f"({self.expr(inner)})"
            case NoneTest(operand, negated):
                if _is_comparison(operand):
                    raise unspellable("a comparison of a comparison would chain in Python; parenthesize it")
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
        raise unspellable(f"not an expression node: {node!r}")


# --------------------------------------------------------------------------- parsing

_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
# C++'s truncating integer ``/`` and ``%`` (of integers that may be negative) as dialect calls
_INTEGER_CALLS = {"int/": "int_div", "int%": "int_mod"}
_INTEGER_OPERATORS = {call: op for op, call in _INTEGER_CALLS.items()}
_CST_BINARY = {cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.Divide: "/", cst.FloorDivide: "//", cst.Modulo: "%",
               cst.BitOr: "|", cst.BitXor: "^", cst.BitAnd: "&"}
_CST_COMPARISON = {cst.Equal: "==", cst.NotEqual: "!=", cst.LessThan: "<", cst.LessThanEqual: "<=",
                   cst.GreaterThan: ">", cst.GreaterThanEqual: ">="}
_CST_BOOLEAN = {cst.And: "&&", cst.Or: "||"}
_CST_UNARY = {cst.Not: "!", cst.Minus: "-", cst.Plus: "+", cst.BitInvert: "~"}


def from_python(text: str, names: dict[str, str] | None = None) -> Node:
    """Parse a dialect expression; ``names`` maps Python identifiers back to C++ ones."""
    try:
        expression = cst.parse_expression(text)
    except cst.ParserSyntaxError as error:
        raise outside_dialect(f"not a Python expression: {error.message}") from None
    return from_cst(expression, names)


def from_cst(expression: cst.BaseExpression, names: dict[str, str] | None = None) -> Node:
    """The tree of a dialect expression already parsed by libcst (which keeps its parentheses);
    ``names`` maps Python identifiers back to C++ ones."""
    return _CstReader(names or {}).expr(expression)


@dataclass
class _CstReader:
    names: dict[str, str]

    def expr(self, node: cst.BaseExpression) -> Node:
        tree = self.bare(node)
        # a tuple display's own parentheses are part of it: ``(a, b)`` is not ``((a, b))``
        for _ in node.lpar[1:] if isinstance(node, cst.Tuple) else node.lpar:
            tree = Paren(tree)
        return tree

    def bare(self, node: cst.BaseExpression) -> Node:
        """``node`` without its own parentheses."""
        match node:
            case cst.Name(value="True" | "False" as value):
                return Literal("bool", "true" if value == "True" else "false")
            case cst.Name(value="None"):
                return NULLOPT
            case cst.Name(value=value):
                if value in self.names:
                    return Name(self.names[value])
                if value in NAMESPACES:
                    return Qualified((value,))
                return Name(unescape(value, plain=True))
            case cst.Integer(value=text) | cst.Float(value=text):
                return Literal("number", text)
            case cst.SimpleString(value=text) if text[0] in "\"'" and not text.startswith(('"""', "'''")):
                return Literal("string", text)
            case cst.UnaryOperation(operator=operator, expression=operand) if type(operator) in _CST_UNARY:
                return Unary(_CST_UNARY[type(operator)], self.expr(operand))
            case cst.BinaryOperation(left=left, operator=operator, right=right) if type(operator) in _CST_BINARY:
                return Binary(_CST_BINARY[type(operator)], self.expr(left), self.expr(right))
            case cst.BooleanOperation(left=left, operator=operator, right=right):
                return Binary(_CST_BOOLEAN[type(operator)], self.expr(left), self.expr(right))
            case cst.Comparison(left=left, comparisons=[cst.ComparisonTarget(operator=cst.Is() | cst.IsNot() as operator,
                                                                             comparator=cst.Name(value="None"))]):
                return NoneTest(self.expr(left), isinstance(operator, cst.IsNot))
            case cst.Comparison(comparisons=[cst.ComparisonTarget(operator=cst.Is() | cst.IsNot())]):
                raise outside_dialect("`is` is only a test for None (`x is None`, `x is not None`)")
            case cst.Comparison(left=left, comparisons=[cst.ComparisonTarget(operator=operator, comparator=right)]):
                if type(operator) not in _CST_COMPARISON:
                    raise outside_dialect(f"`{_code(operator).strip()}` has no C++ spelling")
                return Binary(_CST_COMPARISON[type(operator)], self.expr(left), self.expr(right))
            case cst.Comparison():
                raise outside_dialect("a chained comparison (`a < b < c`) has no C++ spelling; parenthesize it")
            case cst.IfExp(test=cond, body=then, orelse=orelse):
                return Conditional(self.expr(cond), self.expr(then), self.expr(orelse))
            case cst.List(elements=elements):
                return BraceList(tuple(self.element(e) for e in elements))
            case cst.Tuple(elements=elements) if node.lpar:
                return TupleDisplay(tuple(self.element(e) for e in elements))
            case cst.Attribute(value=value, attr=cst.Name(value=attr)):
                return self.attribute(self.expr(value), unescape(attr))
            case cst.Subscript(value=value, slice=items):
                return self.subscript(self.expr(value), [self.element(i) for i in items])
            case cst.Call(func=func, args=args):
                return self.call(self.expr(func), [self.element(a) for a in args])
            case cst.Lambda():
                return self.lambda_(node)
        raise outside_dialect(f"`{_code(node)}` is outside the formula dialect")

    def element(self, node: cst.Element | cst.SubscriptElement | cst.Arg) -> Node:
        """A list element, subscript item or call argument: a plain expression."""
        match node:
            case cst.Element(value=value) | cst.SubscriptElement(slice=cst.Index(value=value, star=None)):
                return self.expr(value)
            case cst.Arg(value=value, keyword=None, star=""):
                return self.expr(value)
            case cst.Arg(value=value, keyword=cst.Name(value=name), star=""):
                return Keyword(unescape(name), self.expr(value))
        raise outside_dialect(f"`{_code(node)}` is outside the formula dialect "
                           "(stars and slices have no C++ spelling)")

    def subscript(self, node: Node, items: list[Node]) -> Node:
        if _is_template_base(node):
            return Template(node, tuple(items))
        if len(items) == 1:
            return Index(node, items[0])
        raise outside_dialect("a subscript with several items needs a namespace-qualified template")

    def attribute(self, node: Node, name: str) -> Node:
        if isinstance(node, Qualified) and node != NULLOPT:
            return Qualified(node.parts + (name,), node.rooted)
        if node == Name(DIALECT_NAMESPACE) and name == "root":
            return _ROOT
        if isinstance(node, _Arrow):
            return Member(node.obj, name, arrow=True)
        return Member(node, name)

    def call(self, func: Node, args: list[Node]) -> Node:
        if isinstance(func, Member) and func.obj == Name(DIALECT_NAMESPACE) and not func.arrow:
            return self.dialect_call(func.name, args)
        if isinstance(func, _LambdaTypes):
            if len(args) != 1 or not isinstance(args[0], _PyLambda):
                raise outside_dialect("cpp.lambda_(types) must be applied to one lambda")
            lam = args[0]
            if len(lam.params) != len(func.types):
                raise outside_dialect("cpp.lambda_ needs one type per lambda parameter")
            return Lambda(tuple(zip(func.types, lam.params)), lam.body)
        return Call(func, tuple(args))

    def dialect_call(self, name: str, args: list[Node]) -> Node:
        if name in _INTEGER_OPERATORS and len(args) == 2:
            return Binary(_INTEGER_OPERATORS[name], args[0], args[1])
        if name == "deref" and len(args) == 1:
            return Unary("*", args[0])
        if name == "arrow" and len(args) == 1:
            return _Arrow(args[0])
        if name == "lambda":      # spelled lambda_ (a keyword, escaped)
            return _LambdaTypes(tuple(args))
        raise outside_dialect(f"unknown dialect call cpp.{name}")

    def lambda_(self, node: cst.Lambda) -> Node:
        parameters = node.params
        if (parameters.posonly_params or parameters.kwonly_params or parameters.star_kwarg is not None
                or not isinstance(parameters.star_arg, cst.MaybeSentinel)
                or any(p.default is not None for p in parameters.params)):
            raise outside_dialect("a lambda takes plain parameters only")
        params = [p.name.value for p in parameters.params]
        inner = _CstReader({**self.names, **{p: unescape(p, plain=True) for p in params}})
        return _PyLambda(tuple(unescape(p, plain=True) for p in params), inner.expr(node.body))


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


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
