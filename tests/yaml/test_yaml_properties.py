"""Property tests: printing and parsing agree, and the Python dialect agrees with Python's grammar."""
from __future__ import annotations

import ast

from hypothesis import given, settings, strategies as st

from transpiler.diagnostics import TranspileError
from transpiler.yaml_import import cpp, pydialect
from transpiler.yaml_import.syntax import (
    BINARY_PRECEDENCE, Binary, BraceList, Call, Conditional, Index, Keyword, Literal, Member, Name, Node,
    NoneTest, Paren, Qualified, Template, TupleDisplay, Unary,
)

NAMES = st.sampled_from(["grad", "self", "other", "result", "dim", "x1"]).map(Name)
LEAVES = st.one_of(
    NAMES,
    st.sampled_from(["0", "1", "2.", "0.5", "1e-3"]).map(lambda t: Literal("number", t)),
    st.sampled_from(["true", "false"]).map(lambda t: Literal("bool", t)),
    st.just(Literal("string", '"trunc"')),
    st.sampled_from([("at", "where"), ("std", "nullopt"), ("c10", "kJagged")]).map(Qualified),
)


def _power(node: Node) -> int:
    if isinstance(node, Conditional):
        return 2
    if isinstance(node, Binary):
        return BINARY_PRECEDENCE[node.op]
    if isinstance(node, Unary):
        return 14
    return 20


def _wrap_if(node: Node, condition: bool) -> Node:
    return Paren(node) if condition else node


def _binary(op: str, left: Node, right: Node) -> Node:
    power = BINARY_PRECEDENCE[op]
    return Binary(op, _wrap_if(left, _power(left) < power), _wrap_if(right, _power(right) <= power))


def _extend(children):
    # `0.conj()` would lex as `0.` `conj`: a number needs parentheses before a member, as an operand
    postfix_target = children.map(lambda n: _wrap_if(n, _power(n) < 20 or isinstance(n, Literal)))
    return st.one_of(
        st.builds(_binary, st.sampled_from(sorted(BINARY_PRECEDENCE)), children, children),
        st.builds(lambda op, n: Unary(op, _wrap_if(n, _power(n) < 14)), st.sampled_from(["!", "-", "*"]), children),
        st.builds(lambda c, t, e: Conditional(_wrap_if(c, _power(c) <= 2), t, e), children, children, children),
        st.builds(lambda f, args: Call(f, tuple(args)), postfix_target, st.lists(children, max_size=3)),
        st.builds(lambda o, name, arrow: Member(o, name, arrow), postfix_target,
                  st.sampled_from(["sym_sizes", "conj", "defined"]), st.booleans()),
        st.builds(Index, postfix_target, children),
        st.builds(lambda items: BraceList(tuple(items)), st.lists(children, max_size=3)),
        st.builds(lambda n: Call(Template(Qualified(("std", "get")), (Literal("number", "0"),)), (n,)), children),
        children.map(Paren),
    )


TREES = st.recursive(LEAVES, _extend, max_leaves=12)


def _extend_main(children):
    """The nodes only the main dialect has (main_dialect.to_main writes them)."""
    postfix_target = children.map(lambda n: _wrap_if(n, _power(n) < 20 or isinstance(n, Literal)))
    keywords = st.lists(st.builds(Keyword, st.sampled_from(["approximate", "upper", "dim"]), children), max_size=2)
    return st.one_of(
        _extend(children),
        st.builds(NoneTest, postfix_target, st.booleans()),
        st.builds(lambda f, args, kws: Call(f, (*args, *kws)), postfix_target, st.lists(children, max_size=2), keywords),
        st.builds(lambda items: TupleDisplay(tuple(items)), st.lists(children, min_size=1, max_size=3)),
    )


MAIN_TREES = st.recursive(LEAVES, _extend_main, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(TREES)
def test_cpp_print_then_parse_is_the_identity(tree):
    printed = cpp.print_tokens(tree)
    text = cpp.render(printed)
    assert cpp.parse(text) == tree
    assert cpp.token_texts(text) == [p.text for p in printed]


def _shape(node: ast.AST):
    """A precedence-revealing shape of a Python expression (Python's own parse)."""
    match node:
        case ast.BinOp(left, op, right):
            return (type(op).__name__, _shape(left), _shape(right))
        case ast.BoolOp(op, values):
            shape = _shape(values[0])
            for value in values[1:]:
                shape = (type(op).__name__, shape, _shape(value))
            return shape
        case ast.Compare(left, [op], [right]) if not isinstance(op, (ast.Is, ast.IsNot)):
            return (type(op).__name__, _shape(left), _shape(right))
        case ast.UnaryOp(op, operand):
            return (type(op).__name__, _shape(operand))
        case ast.IfExp(test, body, orelse):
            return ("if", _shape(test), _shape(body), _shape(orelse))
        case ast.Compare(left, [ast.Is() | ast.IsNot() as op], [ast.Constant(None)]):
            return (type(op).__name__, _shape(left))
        case ast.Call(func, args, keywords):
            return ("call", _shape(func), *map(_shape, args), *(("kw", k.arg, _shape(k.value)) for k in keywords))
        case ast.Attribute(value, attr):
            return ("attr", _shape(value), attr)
        case ast.Subscript(value, index):
            return ("index", _shape(value), _shape(index))
        case ast.List(elts) | ast.Tuple(elts):
            return ("list", *map(_shape, elts))
        case ast.Name(ident):
            return ident
        case ast.Constant(value):
            return repr(value)
    raise AssertionError(f"unexpected Python node {ast.dump(node)}")


_PY_OPS = {"+": "Add", "-": "Sub", "*": "Mult", "/": "Div", "%": "Mod", "&": "BitAnd", "|": "BitOr",
           "^": "BitXor", "&&": "And", "||": "Or", "==": "Eq", "!=": "NotEq", "<": "Lt", "<=": "LtE",
           ">": "Gt", ">=": "GtE"}


def _expected(node: Node):
    """The shape Python must see for the dialect spelling of ``node`` to mean the C++."""
    python = pydialect.to_python(node)
    match node:
        case Paren(inner):
            return _expected(inner)
        case Binary(op, left, right):
            return (_PY_OPS[op], _expected(left), _expected(right))
        case Unary("!", operand):
            return ("Not", _expected(operand))
        case Unary("-", operand):
            return ("USub", _expected(operand))
        case Unary("*", operand):
            return ("call", ("attr", "cpp", "deref"), _expected(operand))
        case Conditional(cond, then, orelse):
            return ("if", _expected(cond), _expected(then), _expected(orelse))
        case Member(obj, name, True):
            return ("attr", ("call", ("attr", "cpp", "arrow"), _expected(obj)), name)
        case Member(obj, name, False):
            return ("attr", _expected(obj), name)
        case Call(func, args):
            return ("call", _expected(func), *map(_expected, args))
        case Index(obj, index):
            return ("index", _expected(obj), _expected(index))
        case Template(base, args):
            return ("index", _expected(base), *map(_expected, args))
        case BraceList(items) | TupleDisplay(items):
            return ("list", *map(_expected, items))
        case NoneTest(operand, negated):
            return ("IsNot" if negated else "Is", _expected(operand))
        case Keyword(name, value):
            return ("kw", name, _expected(value))
    return _shape(ast.parse(python, mode="eval").body)


@settings(max_examples=300, deadline=None)
@given(TREES)
def test_a_faithful_python_spelling_means_what_the_cpp_means(tree):
    """Whenever the dialect reads its spelling back as the same tree (the importer's check),
    CPython parses that spelling with the same structure: the check is sound."""
    _check_sound(tree)


@settings(max_examples=300, deadline=None)
@given(MAIN_TREES)
def test_the_main_dialect_nodes_mean_in_python_what_they_say(tree):
    """The same soundness for the nodes of the main dialect (`x is None`, keywords, tuples)."""
    _check_sound(tree)


def _check_sound(tree: Node) -> None:
    try:
        python = pydialect.to_python(tree)
        if pydialect.from_python(python) != tree:
            return      # the importer reports such a formula instead of writing it
    except TranspileError:
        return
    assert _shape(ast.parse(python, mode="eval").body) == _expected(tree)
