"""``# noqa``: which findings a comment silences.

Owns the two suppression comments: ``# noqa[: CODES]`` at the end of a line
silences the findings on that line (codes matched as prefixes: ``DB1``
silences DB100...DB107), and ``# transpile: noqa[: CODES]`` on a line of its
own silences the whole file (every code, or the ones listed).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from transpiler.diagnostics import Diagnostic
from transpiler.sources import UndecodableSource, decode_source

NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]*(?:[\s,]+[A-Z]+[0-9]*)*))?", re.IGNORECASE)
FILE_NOQA = re.compile(r"^[ \t]*#[ \t]*transpile:[ \t]*noqa(?:[ \t]*:[ \t]*(?P<codes>[A-Z]+[0-9]*(?:[\s,]+[A-Z]+[0-9]*)*))?[ \t]*$",
                       re.IGNORECASE | re.MULTILINE)


def without_suppressed(diagnostics: Iterable[Diagnostic], lines: list[str]) -> Iterator[Diagnostic]:
    """Drop findings whose line says ``# noqa`` (all codes) or ``# noqa: CODE[,CODE...]``
    (a code or a prefix of codes: ``DB1`` silences DB100...DB107)."""
    for diagnostic in diagnostics:
        line = lines[diagnostic.line - 1] if 0 < diagnostic.line <= len(lines) else ""
        if not suppressed_by_line(diagnostic.code, line):
            yield diagnostic


def suppressed_by_line(code: str, line: str) -> bool:
    """Whether ``line`` carries a ``# noqa`` comment that silences ``code``."""
    match = NOQA.search(line) if "noqa" in line.lower() else None
    if match is None:
        return False
    return match.group("codes") is None or code.startswith(tuple(_codes(match.group("codes"))))


def file_noqa(source: bytes) -> frozenset[str] | None:
    """The codes a ``# transpile: noqa[: CODES]`` comment line silences in the whole file
    (empty: every code); None without one."""
    match = FILE_NOQA.search(decode_lossy("", source)) if b"noqa" in source else None
    if match is None:
        return None
    return _codes(match.group("codes")) if match.group("codes") else frozenset()


def without_file_noqa(diagnostics: Iterable[Diagnostic], silenced: frozenset[str] | None,
                      ) -> tuple[Diagnostic, ...]:
    """``diagnostics`` less the codes the file's ``# transpile: noqa`` (:func:`file_noqa`) silences."""
    if silenced is None:
        return tuple(diagnostics)
    return tuple(d for d in diagnostics if silenced and not d.code.startswith(tuple(silenced)))


def _codes(text: str) -> frozenset[str]:
    return frozenset(code.upper() for code in re.split(r"[\s,]+", text.strip()) if code)


def decode_lossy(path: str, source: bytes) -> str:
    """The text of ``source`` (PEP 263), undecodable bytes replaced: for positions and ``# noqa``."""
    try:
        return decode_source(path, source)
    except UndecodableSource:
        return source.decode("utf-8", "replace")
