"""The lint driver: one run over the files named, and its result.

Puts the concerns together, each in its own module: which files
(:mod:`transpiler.lint.discovery`) and which codes
(:mod:`transpiler.lint.settings`); the per-file pass
(:mod:`transpiler.lint.file_check`, trusting CPython's bytecode through
:mod:`transpiler.lint.bytecode`) run by :mod:`transpiler.lint.workers` on
every core and through the result cache (:mod:`transpiler.lint.cache`); the
closure rules of the formula files (:mod:`transpiler.lint.formula_files`);
``# noqa`` (:mod:`transpiler.lint.noqa`); and the fixes
(:mod:`transpiler.lint.fix_writer`). Nothing read is imported or executed.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from transpiler.diagnostics import Diagnostic
from transpiler.lint import ctx
from transpiler.lint.cache import ResultCache
from transpiler.lint.discovery import python_files
from transpiler.lint.file_check import INTERNAL, SYNTAX, UNREADABLE, check_source
from transpiler.lint.fix_writer import describe_function_fixes, function_fixes, with_function_edits
from transpiler.lint.formula_files import formula_rules
from transpiler.lint.noqa import suppressed_by_line
from transpiler.lint.settings import EVERY_FILE, Settings
from transpiler.lint.workers import WorkerDied, per_file_pass

__all__ = ["INTERNAL", "SYNTAX", "UNREADABLE", "LintResult", "WorkerDied", "lint", "lint_paths"]


@dataclass(frozen=True)
class LintResult:
    """A whole run: findings after ``# noqa`` and the configuration, sorted by path, line, col."""

    diagnostics: tuple[Diagnostic, ...]
    files: int
    functions: int
    formula_files: int
    fixed: tuple[str, ...] = ()
    diffs: tuple[str, ...] = ()     # ``--diff``: one unified diff per file the fixes would change
    fixed_stdin: bytes | None = None  # ``--fix`` on stdin: the fixed source (the input when nothing changed)
    cache_warning: str | None = None  # the result cache could not be written (one line)
    unsafe_hidden: int = 0          # findings an unsafe fix would address, not applied (no ``unsafe_fixes``)
    skipped: tuple[str, ...] = ()     # one-line notes: special files (FIFOs, devices, symlink loops) not read

    @property
    def unreadable(self) -> tuple[Diagnostic, ...]:
        """The diagnostics of files that could not be read."""
        return tuple(d for d in self.diagnostics if d.code == UNREADABLE)

    @property
    def findings(self) -> tuple[Diagnostic, ...]:
        """The diagnostics other than unreadable files: what the rules found."""
        return tuple(d for d in self.diagnostics if d.code != UNREADABLE)


def lint_paths(paths: list[str]) -> list[Diagnostic]:
    """Lint files and directories, every ``*.py`` file below them (as ``transpile`` reads a
    formula directory: no excludes, no ``.gitignore``); every finding (unreadable paths
    included), sorted."""
    return list(lint(paths, settings=EVERY_FILE).diagnostics)


def lint(paths: Iterable[str], fix: bool = False, jobs: int | None = None,
         trust_bytecode: bool = True, settings: Settings | None = None, diff: bool = False,
         stdin: tuple[str, bytes] | None = None, cache_dir: Path | None = None,
         unsafe_fixes: bool = False, edits: bool = False) -> LintResult:
    """Run every rule on ``paths`` (files, or directories searched for ``*.py``).

    ``trust_bytecode``: skip the syntax check of files whose up-to-date bytecode
    CPython already wrote (:func:`transpiler.lint.bytecode.compiled_before`). ``settings``: which
    files and codes (default: every code, the default excludes). ``diff``:
    compute the fixes as diffs instead of writing them. ``stdin``: lint this
    (name, bytes) instead of files; with ``fix`` the fixed bytes are returned,
    nothing is written. ``cache_dir``: reuse and keep results there
    (:mod:`transpiler.lint.cache`; never for stdin). ``unsafe_fixes``: ``fix`` and
    ``diff`` include the unsafe fixes (otherwise they are only counted). ``edits``: each
    finding with a fix carries it as line edits (``Diagnostic.edits``, for SARIF). Raises
    :class:`WorkerDied`.
    """
    settings = settings or Settings()
    paths = list(paths)
    cache = None
    if stdin is not None:
        files, missing, sources, skipped = [stdin[0]], [], {stdin[0]: stdin[1]}, []
        ctx.use_tree([])                      # standard input alone: no other files to resolve names in
        reports = [check_source(stdin[0], stdin[1], trust_bytecode=False)]
    else:
        files, unreadable, skipped = python_files(paths, settings)
        missing = [Diagnostic(path, 1, 1, UNREADABLE, reason) for path, reason in unreadable]
        sources = {}
        options = f"trust_bytecode={trust_bytecode}"       # the settings are applied after the cache
        cache = ResultCache.open(cache_dir, paths, options) if cache_dir is not None else None
        reports = per_file_pass(files, jobs, trust_bytecode, cache)
    formula_paths = [r.path for r in reports if r.formula_file]
    wanted = functools.partial(_wanted, settings)
    closure_findings, fixed, diffs, fixed_sources = (
        formula_rules(formula_paths, sources, fix or diff, diff, wanted, cache, edits) if formula_paths
        else ({}, [], [], {}))
    reports = describe_function_fixes(reports, sources, settings)
    unsafe_hidden = 0
    if fix or diff:
        reports, unsafe_hidden = function_fixes(reports, sources, settings, unsafe_fixes, write=not diff,
                                                fixed=fixed, diffs=diffs, fixed_sources=fixed_sources)
    if edits:
        reports = with_function_edits(reports, {**sources, **fixed_sources})
    fixed_stdin = fixed_sources.get(stdin[0], stdin[1]) if stdin is not None and fix and not diff else None
    diagnostics = {d for r in reports for d in r.diagnostics} | set(missing)
    diagnostics.update(d for found in closure_findings.values() for d in found)
    kept = (d for d in diagnostics if d.code == UNREADABLE or settings.enabled(d.code, d.path))
    return LintResult(tuple(sorted(kept)), len(files), sum(r.functions for r in reports),
                      len(formula_paths), tuple(fixed), tuple(diffs), fixed_stdin,
                      cache.save() if cache is not None else None, unsafe_hidden, tuple(skipped))


def _wanted(settings: Settings, path: str, code: str, line_text: str) -> bool:
    """Whether a finding of ``code`` on a line reading ``line_text`` is reported (so worth fixing)."""
    return settings.enabled(code, path) and not suppressed_by_line(code, line_text)

