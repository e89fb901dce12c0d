"""Diagnostics: ``path:line:col: CODE message`` findings shared by every pass."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with every character that could break a line or a terminal escaped (``\\n``,
    ``\\x1b``; a byte that was not UTF-8 in a file name, kept by ``surrogateescape``, as
    ``\\xNN``): a file name never forges another line of output or of a generated comment."""
    return UNPRINTABLE.sub(_escaped, text) if UNPRINTABLE.search(text) else text


def _escaped(match: re.Match[str]) -> str:
    character = match.group()
    code = ord(character)
    if 0xDC80 <= code <= 0xDCFF:                   # surrogateescape: the undecodable byte itself
        return f"\\x{code - 0xDC00:02x}"
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(character) or (
        f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


class LineEdit(NamedTuple):
    """Lines ``first`` up to ``end`` (1-based, ``end`` excluded) of a file replaced by ``text``;
    ``first == end``: ``text`` inserted before line ``first``."""

    first: int
    end: int
    text: str


def line_edits(before: str, after: str) -> tuple[LineEdit, ...]:
    """The whole-line edits that turn ``before`` into ``after``."""
    import difflib      # here: only fixes compare texts (a run that fixes nothing does not load it)

    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    return tuple(LineEdit(i1 + 1, i2 + 1, "".join(new[j1:j2]))
                 for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes()
                 if tag != "equal")


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One finding. ``line`` and ``col`` are 1-based (flake8 style)."""

    path: str
    line: int
    col: int
    code: str
    message: str
    fix: str | None = field(default=None, compare=False)
    related: tuple[tuple[int, int], ...] = field(default=(), compare=False)  # other (line, col) of the same cause
    edits: tuple[LineEdit, ...] = field(default=(), compare=False)   # ``fix`` as edits (asked for by SARIF)

    def format(self) -> str:
        """One line, whatever the path or message hold (:func:`printable`)."""
        return f"{printable(self.path)}:{self.line}:{self.col}: {self.code} {printable(self.message)}"

    def as_json(self) -> dict[str, object]:
        """The diagnostic as a JSON object (path, line, col, code, message, and fix when there is one)."""
        data: dict[str, object] = {
            "path": self.path, "line": self.line, "col": self.col,
            "code": self.code, "message": self.message,
        }
        if self.fix is not None:
            data["fix"] = self.fix
        if self.related:
            data["related"] = [{"line": line, "col": col} for line, col in self.related]
        return data


class TranspileError(Exception):
    """Raised by a pass that cannot go on; carries every diagnostic it found."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        super().__init__("\n".join(d.format() for d in diagnostics))
        self.diagnostics = diagnostics


UNPLACED = "<unplaced>"   # the path of a diagnostic raised below the code that knows the position


def unplaced(code: str, message: str, col: int = 1) -> TranspileError:
    """A problem found where the file position is not known (in the text of one formula, ``col``
    is 1 + the character offset in it): the caller that knows the entry or the line reports
    the diagnostic's message at its own position."""
    return TranspileError([Diagnostic(UNPLACED, 1, col, code, message)])
