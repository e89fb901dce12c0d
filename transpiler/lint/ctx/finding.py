"""What a ctx rule reports: one :class:`Finding` (its own module, so that the rules of
:mod:`transpiler.lint.ctx.classes` and :mod:`transpiler.lint.ctx.hygiene` both build findings without
importing each other)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """A ctx-rule finding; ``col_offset`` is ast's (UTF-8 bytes, 0-based)."""

    line: int
    col_offset: int
    code: str
    message: str
    related: tuple[tuple[int, int], ...] = ()    # other places with the same root cause (line, col offset)
    fix: str | None = None                       # the fix offered, described (``--format json``)
