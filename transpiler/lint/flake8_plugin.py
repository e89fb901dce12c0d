"""``transpile lint`` as a flake8 plugin: ``pip install 'derivatives-transpiler[flake8]'``, then ``flake8``
reports the DB codes (entry point ``flake8.extension`` ``DB`` in pyproject.toml).

flake8 hands each file over; the plugin runs the same checks as ``transpile
lint`` on it (every code but the opt-in DB11x, which ``transpile lint --select DB11``
reports; ``# noqa`` honoured by both), never importing it.
"""
from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from pathlib import Path

from transpiler.lint.runner import lint


class Plugin:
    """flake8's tree-plugin protocol: ``Plugin(tree, filename, lines).run()``."""

    name = "transpile-lint"

    def __init__(self, tree: ast.AST, filename: str, lines: Sequence[str]) -> None:
        self.filename = filename
        self.lines = lines

    def _source(self) -> bytes:
        path = Path(self.filename)
        if self.filename not in ("-", "stdin") and path.is_file():
            return path.read_bytes()          # the bytes as written: their declared encoding applies
        return "".join(self.lines).encode("utf-8")

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        """flake8's entry point: lint the file and yield each finding as (line, col, message, type)."""
        result = lint([], stdin=(self.filename, self._source()))
        for finding in result.findings:
            yield finding.line, finding.col - 1, f"{finding.code} {finding.message}", type(self)
