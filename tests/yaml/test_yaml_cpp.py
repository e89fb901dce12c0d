"""The C++ formula parser and printer."""
from __future__ import annotations

import pytest

from transpiler import codes
from transpiler.diagnostics import TranspileError
from transpiler.yaml_import import cpp
from transpiler.yaml_import.syntax import (
    Binary, BraceList, Call, Conditional, Index, Lambda, Literal, Member, Name, Paren, Qualified, Template, Unary,
)


def test_precedence_follows_cpp():
    tree = cpp.parse("a + b * c == d && !e || f")
    assert tree == Binary("||", Binary("&&", Binary("==", Binary("+", Name("a"), Binary("*", Name("b"), Name("c"))),
                                                    Name("d")), Unary("!", Name("e"))), Name("f"))


def test_binary_operators_are_left_associative():
    assert cpp.parse("a - b - c") == Binary("-", Binary("-", Name("a"), Name("b")), Name("c"))


def test_conditional_is_right_associative_and_lowest():
    tree = cpp.parse("a || b ? x : c ? y : z")
    assert tree == Conditional(Binary("||", Name("a"), Name("b")), Name("x"),
                               Conditional(Name("c"), Name("y"), Name("z")))


def test_templates_versus_less_than():
    assert cpp.parse("std::get<0>(t)") == Call(Template(Qualified(("std", "get")), (Literal("number", "0"),)), (Name("t"),))
    assert cpp.parse("a < b") == Binary("<", Name("a"), Name("b"))
    # a qualified name followed by `<` that is not a template argument list is a comparison
    assert cpp.parse("at::kFloat < x") == Binary("<", Qualified(("at", "kFloat")), Name("x"))
    assert cpp.parse("std::tuple<Tensor, std::optional<Tensor>>()") == Call(
        Template(Qualified(("std", "tuple")), (Name("Tensor"), Template(Qualified(("std", "optional")), (Name("Tensor"),)))), ())


def test_postfix_forms():
    tree = cpp.parse("f(x)->sizes()[0].y")
    assert tree == Member(Index(Call(Member(Call(Name("f"), (Name("x"),)), "sizes", arrow=True), ()),
                                Literal("number", "0")), "y")
    assert cpp.parse("::std::nullopt") == Qualified(("std", "nullopt"), rooted=True)
    assert cpp.parse("{}") == BraceList(())
    assert cpp.parse("(a)") == Paren(Name("a"))
    assert cpp.parse("*dtype") == Unary("*", Name("dtype"))


def test_lambda():
    tree = cpp.parse("[](c10::SymInt i){return -i;}")
    assert tree == Lambda(((Qualified(("c10", "SymInt")), "i"),), Unary("-", Name("i")))


def test_comments_and_spacing_are_trivia_kept_by_the_layout():
    source = "f(a,  b, /*flag=*/true) "
    printed = cpp.print_tokens(cpp.parse(source))
    assert [p.text for p in printed] == cpp.token_texts(source)
    assert cpp.render(printed) == "f(a, b, true)"
    layout = cpp.layout_of(source, printed)
    assert layout == {"4": "  ", "6": " /*flag=*/", "end": " "}
    assert cpp.render(printed, layout) == source


@pytest.mark.parametrize("source, message", [
    ("grad +", "unexpected 'end of formula'"),
    ("f(a b)", "expected ')'"),
    ("[&](int i){return i;}", "capture-less"),
    ("1.0f * x", "number suffix"),
    ("x // comment", "line comment"),
    ("a $ b", "unexpected character"),
])
def test_syntax_errors_say_what_and_where(source, message):
    with pytest.raises(TranspileError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        cpp.parse(source)
    (diagnostic,) = info.value.diagnostics
    assert diagnostic.code == codes.IMPORT_YAML_ENTRY.code
    assert 1 <= diagnostic.col <= len(source) + 1        # 1 + the character offset in the formula
    assert diagnostic.message.endswith(f"(at character {diagnostic.col - 1})")
