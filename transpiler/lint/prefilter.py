"""The text prefilter: which files can need the ctx rules or the closure rules, without parsing.

Each test here is a necessary condition, never a sufficient one: a file it
turns away is one the full analysis (:mod:`transpiler.lint.ctx`,
:func:`transpiler.lint.file_check.uses_derivative`) would not flag, whatever its
spelling (a class name or alias outside ASCII, a comment or a backslash
continuation inside a class header, ``\\r`` or form-feed line breaks, a base
assigned to a name first). What may look like a Function or a formula is parsed
and decided by the analysis. ``tests/lint/test_prefilter.py`` runs the analysis
with and without it over the fixtures and generated files and requires the same
findings.
"""
from __future__ import annotations

import re
from collections.abc import Iterator

BLANK = rb"(?:[ \t\f]|\\(?:\r\n|\r|\n))"       # blanks inside one logical line, continuations included
NAME = rb"[A-Za-z_\x80-\xff][\w\x80-\xff]*"     # an identifier, any UTF-8 letters
CLASS_HEADER = re.compile(rb"class%s+[^\s(:\\]+%s*\(" % (BLANK, BLANK))   # matched where ``class`` starts a line
BASES_TOKEN = re.compile(rb"#[^\r\n]*|'(?:[^'\\\r\n]|\\.)*'|\"(?:[^\"\\\r\n]|\\.)*\"|[()]")   # comments and strings hide parentheses
QUALIFIED_FUNCTION = re.compile(rb"((?:\w+[ \t]*\.[ \t]*)*)\w*Function\b")   # InplaceFunction; not FunctionalTensor
FOREIGN_IMPORT = re.compile(rb"^[ \t]*import[ \t]+(?!torch\b)(\w+)[\w.]*(?:[ \t]+as[ \t]+(\w+))?[ \t]*(?:#.*)?$",
                            re.MULTILINE)          # ``import sympy``, ``import numpy.linalg as la``
TORCH_IMPORT_LINE = re.compile(rb"^.*\bimport\b.*$", re.MULTILINE)   # filtered for ``torch`` after
FUNCTION_ALIAS = re.compile(rb"Function%s+as%s+(%s)" % (BLANK, BLANK, NAME))
ASSIGNED = re.compile(rb"%s*(?::[^=\r\n]*)?=(?!=)" % BLANK)   # after a name: ``= ...``, ``: type = ...``, ``:= ...``
LINE_TOKEN = re.compile(rb"#[^\r\n]*|'(?:[^'\\\r\n]|\\.)*'|\"(?:[^\"\\\r\n]|\\.)*\"|[()\[\]{}]|\\(?:\r\n|\r|\n)|\r\n|[\r\n]")
IDENTIFIER_BYTE = re.compile(rb"[\w\x80-\xff]")
DERIVATIVE_DECORATOR = re.compile(rb"@[\s(\\]*(?:%s[\s\\]*\.[\s\\]*)*derivative\b" % NAME)
WORD = re.compile(NAME)


def class_bases(source: bytes) -> Iterator[bytes]:
    """The text between the parentheses of every ``class X(...)`` header (comments included).
    (A ``find`` loop: a regex anchored at line starts is ten times slower on a large tree.)"""
    start = source.find(b"class")
    while start >= 0:
        line_start = max(source.rfind(b"\n", 0, start), source.rfind(b"\r", 0, start)) + 1
        header = CLASS_HEADER.match(source, start) if not source[line_start:start].strip(b" \t\f") else None
        if header is not None:
            yield _parenthesized(source, header.end())
        start = source.find(b"class", start + 5)


def _parenthesized(source: bytes, start: int) -> bytes:
    """The text from ``start`` to the parenthesis that closes the one just before it."""
    depth = 1
    for token in BASES_TOKEN.finditer(source, start):
        depth += {b"(": 1, b")": -1}.get(token.group(), 0)
        if depth == 0:
            return source[start:token.start()]
    return source[start:]                              # unbalanced: a syntax error, the rest of the file


def class_base_words(source: bytes) -> frozenset[bytes]:
    """The identifiers in the bases of every ``class X(...)`` statement."""
    return frozenset(word for bases in class_bases(source) for word in WORD.findall(bases))


def may_define_function(path: str, source: bytes) -> bool:
    """Whether the text can hold a ``torch.autograd.Function`` subclass.

    Any spelling of the base goes through the word ``Function`` (``torch.autograd.Function``,
    ``ag.Function``, ``from torch.autograd import Function [as F]``, ``getattr(torch.autograd,
    "Function")``) and through ``autograd`` (or the file is in torch's own autograd package);
    and some ``class`` statement names ``Function``, an ``as`` alias of it or a name the file
    assigns (``Base = torch.autograd.Function``) among its bases. A subclass of a local
    subclass has that local root in the same file. ``sympy.Function`` does not count where
    ``sympy`` is bound only by ``import sympy`` (a package other than torch: it cannot name
    autograd's class).
    """
    if b"Function" not in source or not (b"autograd" in source or "autograd" in path):
        return False
    aliases = set(FUNCTION_ALIAS.findall(source))
    assigned: dict[bytes, bool] = {}                # base word -> whether the file assigns it a Function
    foreign = None                                  # computed at the first qualified spelling (costly)
    for bases in class_bases(source):
        if any(alias in bases for alias in aliases):
            return True
        for spelling in QUALIFIED_FUNCTION.finditer(bases):
            foreign = _foreign_modules(source) if foreign is None else foreign
            if spelling.group(1).split(b".", 1)[0].strip() not in foreign:
                return True
        if any(_assigned_function(source, word, assigned) for word in WORD.findall(bases)):
            return True
    return False


def _assigned_function(source: bytes, name: bytes, known: dict[bytes, bool], depth: int = 0) -> bool:
    """Whether the file assigns ``name`` something whose text names ``Function`` or, a few
    deep, another such name (``Base = torch.autograd.Function``, ``Root = Base``)."""
    if name not in known:
        known[name] = False                                # a cycle or too deep: no
        if depth < 4:
            start = source.find(name)
            while start >= 0 and not known[name]:
                end = start + len(name)
                assignment = ASSIGNED.match(source, end)
                if assignment is not None and not (start and IDENTIFIER_BYTE.match(source, start - 1)) \
                        and not IDENTIFIER_BYTE.match(source, end):
                    value = _rest_of_logical_line(source, assignment.end())
                    known[name] = b"Function" in value or any(_assigned_function(source, word, known, depth + 1)
                                                              for word in set(WORD.findall(value)) - {name})
                start = source.find(name, end)
    return known[name]


def _rest_of_logical_line(source: bytes, start: int) -> bytes:
    """The text from ``start`` to the end of its logical line (brackets and continuations followed)."""
    depth = 0
    for token in LINE_TOKEN.finditer(source, start):
        text = token.group()
        if text in (b"(", b"[", b"{"):
            depth += 1
        elif text in (b")", b"]", b"}"):
            depth -= 1
        elif text in (b"\n", b"\r", b"\r\n") and depth <= 0:
            return source[start:token.start()]
    return source[start:]


def may_use_derivative(source: bytes) -> bool:
    """Whether the text can hold a function decorated ``@derivative(...)`` (or
    ``@<module>.derivative(...)``, parenthesized or continued)."""
    return b"derivative" in source and DERIVATIVE_DECORATOR.search(source) is not None


def _foreign_modules(source: bytes) -> frozenset[bytes]:
    """Names bound by a plain ``import`` of a package other than torch that no line importing
    from torch names (``from torch import autograd`` next to ``import autograd`` is ambiguous)."""
    if b"import" not in source:
        return frozenset()
    bound = {alias or head for head, alias in FOREIGN_IMPORT.findall(source)}
    if not bound:
        return frozenset()
    torch_imports = b"\n".join(line for line in TORCH_IMPORT_LINE.findall(source) if b"torch" in line)
    return frozenset(name for name in bound if not re.search(rb"\b%s\b" % name, torch_imports))
