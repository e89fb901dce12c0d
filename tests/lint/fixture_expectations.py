"""The one reader of what a lint fixture expects: a line ending in ``# expect: CODE:col=N``
must produce exactly that finding, and every other line nothing.

Several findings on one line are written ``# expect: DB100:col=30 DB100:col=38`` or as a
second marker, ``# expect: DB111:col=31  # expect: DB111:col=37``.
"""
from __future__ import annotations

import re

EXPECT = re.compile(r"#\s*expect:\s*(?P<items>(?:DB\d{3}:col=\d+\s*)+)")
ITEM = re.compile(r"(DB\d{3}):col=(\d+)")


def expectations(source: str) -> set[tuple[str, int, int]]:
    """The (code, line, col) of every finding ``source`` marks as expected."""
    return {(code, number, int(col))
            for number, line in enumerate(source.splitlines(), start=1)
            for marker in EXPECT.finditer(line)
            for code, col in ITEM.findall(marker["items"])}
