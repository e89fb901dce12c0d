"""C++ formula expressions: tokenizer, recursive-descent (Pratt) parser, printer.

``parse(text)`` turns a derivatives.yaml formula into a :mod:`.syntax` tree;
``print_tokens(tree)`` prints it back as tokens with canonical spacing.
Whitespace and comments between tokens are *trivia*: :func:`layout_of`
records where the original trivia differs from the canonical spacing, and
:func:`render` re-applies such a layout, so that a formula printed from its
tree is byte-identical to the source it was parsed from.
"""
from __future__ import annotations

from dataclasses import dataclass

from transpiler import codes
from transpiler.diagnostics import TranspileError, unplaced
from transpiler.yaml_import.syntax import (
    BINARY_PRECEDENCE,
    CONDITIONAL_PRECEDENCE,
    CPP_SPELLING,
    UNARY_OPERATORS,
    UNARY_PRECEDENCE,
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

PUNCTUATORS = ("::", "->", "&&", "||", "==", "!=", "<=", ">=") + tuple("+-*/%<>!?:,.()[]{}&|^~;")
# Bare (unqualified) names that take template arguments in the formulas.
BARE_TEMPLATES = frozenset({"get", "tuple", "vector", "optional"})


def syntax_error(message: str, offset: int) -> TranspileError:
    """A formula the parser does not accept: a DB301 at character ``offset`` of the formula's text."""
    return unplaced(codes.IMPORT_YAML_ENTRY.code, f"{message} (at character {offset})", offset + 1)


@dataclass(frozen=True)
class Token:
    """One token of a C++ expression, with the whitespace and comments before it and its offset."""

    kind: str        # "ident", "number", "string", "punct", "end"
    text: str
    gap: str         # whitespace and comments before the token
    offset: int


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens; the last one is an ``end`` token carrying trailing trivia."""
    tokens: list[Token] = []
    pos, gap_start, n = 0, 0, len(text)
    while True:
        while pos < n:
            if text[pos].isspace():
                pos += 1
            elif text.startswith("/*", pos):
                close = text.find("*/", pos + 2)
                if close < 0:
                    raise syntax_error("unterminated comment", pos)
                pos = close + 2
            elif text.startswith("//", pos):
                raise syntax_error("a line comment cannot end a one-line formula", pos)
            else:
                break
        gap = text[gap_start:pos]
        if pos >= n:
            tokens.append(Token("end", "", gap, pos))
            return tokens
        start, ch = pos, text[pos]
        if ch.isalpha() or ch == "_":
            while pos < n and (text[pos].isalnum() or text[pos] == "_"):
                pos += 1
            kind = "ident"
        elif ch.isdigit() or (ch == "." and pos + 1 < n and text[pos + 1].isdigit()):
            pos = _scan_number(text, pos)
            kind = "number"
        elif ch == '"':
            pos += 1
            while pos < n and text[pos] != '"':
                pos += 2 if text[pos] == "\\" else 1
            if pos >= n:
                raise syntax_error("unterminated string literal", start)
            pos += 1
            kind = "string"
        else:
            punct = next((p for p in PUNCTUATORS if text.startswith(p, pos)), None)
            if punct is None:
                raise syntax_error(f"unexpected character {ch!r}", pos)
            pos += len(punct)
            kind = "punct"
        tokens.append(Token(kind, text[start:pos], gap, start))
        gap_start = pos


def _scan_number(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and (text[pos].isdigit() or text[pos] == "."):
        pos += 1
    if pos < n and text[pos] in "eE" and pos + 1 < n and (text[pos + 1].isdigit() or text[pos + 1] in "+-"):
        pos += 2
        while pos < n and text[pos].isdigit():
            pos += 1
    if pos < n and (text[pos].isalpha() or text[pos] == "_"):
        raise syntax_error(f"number suffix {text[pos]!r} is not supported", pos)
    return pos


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0

    @property
    def current(self) -> Token:
        return self.tokens[self.pos]

    def at(self, text: str) -> bool:
        tok = self.current
        return tok.kind in ("punct", "ident") and tok.text == text

    def advance(self) -> Token:
        tok = self.current
        if tok.kind == "end":
            raise syntax_error("unexpected end of formula", tok.offset)
        self.pos += 1
        return tok

    def expect(self, text: str) -> Token:
        if not self.at(text):
            raise syntax_error(f"expected {text!r}, found {self.current.text or 'end of formula'!r}",
                               self.current.offset)
        return self.advance()

    def expression(self, min_power: int = 0) -> Node:
        left = self.unary()
        while True:
            tok = self.current
            if tok.kind != "punct":
                return left
            if tok.text == "?" and CONDITIONAL_PRECEDENCE >= min_power:
                self.advance()
                then = self.expression()
                self.expect(":")
                left = Conditional(left, then, self.expression(CONDITIONAL_PRECEDENCE))
                continue
            power = BINARY_PRECEDENCE.get(tok.text)
            if power is None or power <= min_power:
                return left
            self.advance()
            left = Binary(tok.text, left, self.expression(power))

    def unary(self) -> Node:
        tok = self.current
        if tok.kind == "punct" and tok.text in UNARY_OPERATORS:
            self.advance()
            return Unary(tok.text, self.expression(UNARY_PRECEDENCE))
        return self.postfix(self.primary())

    def postfix(self, node: Node) -> Node:
        while True:
            if self.at("("):
                node = Call(node, self.arguments("(", ")"))
            elif self.at("["):
                self.advance()
                index = self.expression()
                self.expect("]")
                node = Index(node, index)
            elif self.at(".") or self.at("->"):
                arrow = self.advance().text == "->"
                name = self.advance()
                if name.kind != "ident":
                    raise syntax_error("expected a member name", name.offset)
                node = Member(node, name.text, arrow)
            else:
                return node

    def arguments(self, open_: str, close: str) -> tuple[Node, ...]:
        self.expect(open_)
        items: list[Node] = []
        if not self.at(close):
            items.append(self.expression())
            while self.at(","):
                self.advance()
                items.append(self.expression())
        self.expect(close)
        return tuple(items)

    def primary(self) -> Node:
        tok = self.current
        if tok.kind == "number":
            self.advance()
            return Literal("number", tok.text)
        if tok.kind == "string":
            self.advance()
            return Literal("string", tok.text)
        if tok.kind == "ident" and tok.text in ("true", "false"):
            self.advance()
            return Literal("bool", tok.text)
        if tok.kind == "ident" or self.at("::"):
            return self.maybe_template(self.name())
        if self.at("("):
            self.advance()
            inner = self.expression()
            self.expect(")")
            return Paren(inner)
        if self.at("{"):
            return BraceList(self.arguments("{", "}"))
        if self.at("["):
            return self.lambda_()
        raise syntax_error(f"unexpected {tok.text or 'end of formula'!r}", tok.offset)

    def name(self) -> Node:
        rooted = self.at("::")
        if rooted:
            self.advance()
        parts = [self.identifier()]
        while self.at("::"):
            self.advance()
            parts.append(self.identifier())
        if rooted or len(parts) > 1:
            return Qualified(tuple(parts), rooted)
        return Name(parts[0])

    def identifier(self) -> str:
        tok = self.advance()
        if tok.kind != "ident":
            raise syntax_error("expected an identifier", tok.offset)
        return tok.text

    def maybe_template(self, base: Node) -> Node:
        """``name<args>`` when ``<`` opens template arguments (else a less-than)."""
        if not self.at("<"):
            return base
        if isinstance(base, Name) and base.ident not in BARE_TEMPLATES:
            return base
        saved = self.pos
        try:
            args = self.template_arguments()
        except TranspileError:
            self.pos = saved
            return base
        return Template(base, args)

    def template_arguments(self) -> tuple[Node, ...]:
        self.expect("<")
        args = [self.template_argument()]
        while self.at(","):
            self.advance()
            args.append(self.template_argument())
        self.expect(">")
        return tuple(args)

    def template_argument(self) -> Node:
        if self.current.kind == "number":
            return Literal("number", self.advance().text)
        return self.type_name()

    def type_name(self) -> Node:
        if self.current.kind != "ident" and not self.at("::"):
            raise syntax_error("expected a type", self.current.offset)
        return self.maybe_template(self.name())

    def lambda_(self) -> Node:
        start = self.expect("[")
        if not self.at("]"):
            raise syntax_error("only capture-less lambdas '[]' are supported", start.offset)
        self.advance()
        self.expect("(")
        params: list[tuple[Node, str]] = []
        while not self.at(")"):
            if params:
                self.expect(",")
            params.append((self.type_name(), self.identifier()))
        self.expect(")")
        self.expect("{")
        self.expect("return")
        body = self.expression()
        self.expect(";")
        self.expect("}")
        return Lambda(tuple(params), body)


def parse(text: str) -> Node:
    """Parse one formula; raises a :class:`TranspileError` (DB301, see
    :func:`syntax_error`) when it is not understood."""
    parser = _Parser(tokenize(text))
    tree = parser.expression()
    if parser.current.kind != "end":
        raise syntax_error(f"unexpected {parser.current.text!r} after the expression", parser.current.offset)
    return tree


@dataclass(frozen=True)
class Printed:
    """A printed token and the canonical trivia before it."""

    text: str
    gap: str


def print_tokens(tree: Node) -> list[Printed]:
    """The tokens of ``tree`` with canonical spacing (a space around binary operators, after commas)."""
    out: list[Printed] = []
    _emit(tree, out, "")
    return out


def _emit_list(items: tuple[Node, ...], out: list[Printed], open_: str, close: str, gap: str) -> None:
    out.append(Printed(open_, gap))
    for i, item in enumerate(items):
        if i:
            out.append(Printed(",", ""))
        _emit(item, out, " " if i else "")
    out.append(Printed(close, ""))


def _emit(node: Node, out: list[Printed], gap: str) -> None:
    match node:
        case Name(ident):
            out.append(Printed(ident, gap))
        case Literal(_, text):
            out.append(Printed(text, gap))
        case Qualified(parts, rooted):
            if rooted:
                out.append(Printed("::", gap))
                gap = ""
            for i, part in enumerate(parts):
                if i:
                    out.append(Printed("::", ""))
                out.append(Printed(part, gap if i == 0 else ""))
        case Template(base, args):
            _emit(base, out, gap)
            _emit_list(args, out, "<", ">", "")
        case Member(obj, name, arrow):
            _emit(obj, out, gap)
            out.append(Printed("->" if arrow else ".", ""))
            out.append(Printed(name, ""))
        case Call(func, args):
            _emit(func, out, gap)
            _emit_list(args, out, "(", ")", "")
        case Index(obj, index):
            _emit(obj, out, gap)
            out.append(Printed("[", ""))
            _emit(index, out, "")
            out.append(Printed("]", ""))
        case Unary(op, operand):
            out.append(Printed(op, gap))
            _emit(operand, out, "")
        case Binary(op, left, right):
            _emit(left, out, gap)
            out.append(Printed(CPP_SPELLING.get(op, op), " "))
            _emit(right, out, " ")
        case Conditional(cond, then, orelse):
            _emit(cond, out, gap)
            out.append(Printed("?", " "))
            _emit(then, out, " ")
            out.append(Printed(":", " "))
            _emit(orelse, out, " ")
        case Paren(inner):
            out.append(Printed("(", gap))
            _emit(inner, out, "")
            out.append(Printed(")", ""))
        case BraceList(items):
            _emit_list(items, out, "{", "}", gap)
        case Lambda(params, body):
            out.append(Printed("[", gap))
            out.append(Printed("]", ""))
            out.append(Printed("(", ""))
            for i, (type_, name) in enumerate(params):
                if i:
                    out.append(Printed(",", ""))
                _emit(type_, out, " " if i else "")
                out.append(Printed(name, " "))
            out.append(Printed(")", ""))
            out.append(Printed("{", ""))
            out.append(Printed("return", ""))
            _emit(body, out, " ")
            out.append(Printed(";", ""))
            out.append(Printed("}", ""))
        case NoneTest() | Keyword() | TupleDisplay():
            _emit(_as_cpp(node), out, gap)
        case _:
            raise TypeError(f"not an expression node: {node!r}")


_NULLOPT = Qualified(("std", "nullopt"))


def _as_cpp(node: NoneTest | Keyword | TupleDisplay) -> Node:
    """The C++ tree of a main-dialect node (:mod:`.main_dialect` writes them)."""
    match node:
        case NoneTest(operand, negated):
            defined = Call(Member(operand, "defined"), ())
            return defined if negated else Unary("!", defined)
        case Keyword(_, value):
            return value
        case TupleDisplay(items) if all(item == _NULLOPT for item in items):
            return Call(Template(Qualified(("std", "tuple")), tuple(Name("Tensor") for _ in items)), ())
        case TupleDisplay(items):
            return Call(Qualified(("std", "make_tuple")), items)
    raise TypeError(f"not a main-dialect node: {node!r}")


# A layout maps a token index (or "end" for the trailing trivia) to the trivia
# written before that token where it differs from the canonical spacing.
Layout = dict[str, str]


def layout_of(source: str, printed: list[Printed]) -> Layout:
    """Where ``source``'s trivia differs from ``printed``'s canonical spacing (same tokens assumed)."""
    tokens = tokenize(source)
    layout: Layout = {}
    for i, (tok, canon) in enumerate(zip(tokens, printed)):
        if tok.gap != canon.gap:
            layout[str(i)] = tok.gap
    if tokens[-1].gap:
        layout["end"] = tokens[-1].gap
    return layout


def render(printed: list[Printed], layout: Layout | None = None) -> str:
    """Join printed tokens, with ``layout`` overriding the canonical trivia where it says so."""
    layout = layout or {}
    parts = [layout.get(str(i), tok.gap) + tok.text for i, tok in enumerate(printed)]
    parts.append(layout.get("end", ""))
    return "".join(parts)


def token_texts(text: str) -> list[str]:
    """The token texts of a formula, trivia aside (what the round trip compares)."""
    return [tok.text for tok in tokenize(text) if tok.kind != "end"]
