"""The closure-rule runner: every rule on the formula files of a run, together.

Formula files (those that use ``@derivative``, found by the per-file pass)
are read by the front-end (:func:`transpiler.frontend.parse_module`, libcst)
and checked by the pipeline's steps (:mod:`transpiler.pipeline`: the closure
rules against the library they see, plus what ``transpile`` would refuse in
them, by the C++ emitter's own check). Owns reading them, their fix-its
(planned by :mod:`transpiler.lint.fix`) and the closure entry of the result
cache. A file that cannot be read or analysed is that file's diagnostic; the
others go on.
"""
from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from transpiler import library_discovery
from transpiler.diagnostics import Diagnostic, LineEdit, line_edits
from transpiler.library_discovery import package_root, shipped_library
from transpiler.lint.cache import Depends, ResultCache, python_files_below, stamp_file
from transpiler.lint.ctx.tree import current_tree
from transpiler.lint.file_check import (
    INTERNAL,
    diagnostics_as_json,
    diagnostics_from_json,
    internal_error,
    unreadable,
)
from transpiler.lint.fix_writer import write_through
from transpiler.lint.noqa import file_noqa
from transpiler.pipeline import formula_findings, library_view, package_refusals
from transpiler.sources import UndecodableSource, decode_source, encode_source, read_regular, source_encoding

if TYPE_CHECKING:                    # the model imports libcst: only formula files need it
    from transpiler.model import FormulaModule

CLOSURE_KEY = "closure"


def formula_rules(paths: list[str], sources: Mapping[str, bytes], fix: bool, diff: bool,
                  wanted: Callable[[str, str, str], bool], cache: ResultCache | None = None,
                  edits: bool = False,
                  ) -> tuple[dict[str, tuple[Diagnostic, ...]], list[str], list[str], dict[str, bytes]]:
    """Closure findings per formula file (after the fix-its when ``fix``), the files fixed
    and, when ``diff``, the fixes as unified diffs instead (nothing written); last, the fixed
    bytes of the ``sources`` given in memory (stdin), which are never written. ``cache``:
    the findings of an unchanged library (never with ``fix``). ``edits``: each finding with a
    fix-it carries it as line edits (:meth:`FormulaFiles.edits`)."""
    if cache is not None and not fix:
        found = cached_formula_rules(paths, cache)
        if not edits or all(d.fix is None for findings in found.values() for d in findings):
            return found, [], [], {}
    try:
        closure = FormulaFiles(paths, sources)
    except Exception as error:  # noqa: BLE001 - the library itself could not be read
        return {path: (internal_error(path, error),) for path in paths}, [], [], {}
    fixed, diffs, fixed_sources = [], [], {}
    if fix:
        for path in paths:
            change = closure.fix(path, wanted, write=not diff)
            if change is None:
                continue
            if diff:
                diffs.append(change)
            elif path in sources:
                fixed_sources[path] = encode_source(closure.sources[path], source_encoding(path, sources[path]))
            else:
                fixed.append(path)
    findings = {path: closure.check(path) for path in paths}
    if edits:
        findings = {path: tuple(replace(d, edits=closure.edits(d)) if d.fix is not None else d for d in found)
                    for path, found in findings.items()}
    return findings, fixed, diffs, fixed_sources


def cached_formula_rules(paths: list[str], cache: ResultCache) -> dict[str, tuple[Diagnostic, ...]]:
    """The closure findings of ``paths`` from ``cache``, or computed and stored there. They
    depend on every formula file linted, the shipped library and every file of the packages
    the linted files belong to (what ``transpile --formulas`` would emit with them)."""
    roots = [str(package_root(path)) for path in paths]
    stored = cache.get(CLOSURE_KEY, current_tree())
    if isinstance(stored, dict) and stored.get("paths") == paths and stored.get("roots") == roots:
        try:
            return {path: diagnostics_from_json(path, stored["findings"][path]) for path in paths}
        except (KeyError, TypeError, ValueError):             # a damaged cache: computed again
            pass
    listings = tuple((directory, python_files_below(directory))
                     for directory in sorted({str(library_discovery.SHIPPED_FORMULAS), *roots}))
    read = dict.fromkeys([*paths, *(path for _, below in listings for path in below)])
    depends = Depends(tuple((path, stamp_file(path)) for path in read), listings=listings)   # before reading
    findings, _, _, _ = formula_rules(paths, {}, False, False, lambda *_: True)
    if all(d.code != INTERNAL for found in findings.values() for d in found):
        rows = {path: diagnostics_as_json(found) for path, found in findings.items()}
        cache.put(CLOSURE_KEY, {"paths": paths, "roots": roots, "findings": rows}, depends)
    return findings


class FormulaFiles:
    """The formula-file rules (front-end, closure rules, fix-its) with the library they see.

    Operators and helpers come from the shipped ``formulas/`` library (read
    statically) and from the linted formula files themselves. A file that
    cannot be read or analysed is that file's diagnostic; the others go on.
    """

    def __init__(self, paths: list[str], given: Mapping[str, bytes]) -> None:
        from transpiler.frontend import parse_module

        self.parse_module = parse_module
        self.given = given                    # sources read from stdin: fixed in memory only
        self.errors: dict[str, Diagnostic] = {}
        self.raw: dict[str, bytes] = {}
        self.sources: dict[str, str] = {}
        self.modules: dict[str, FormulaModule] = {}
        for path in paths:
            try:
                self.raw[path] = given[path] if path in given else read_regular(path)[1]
                self.sources[path] = decode_source(path, self.raw[path])
                self.modules[path] = parse_module(path, self.sources[path])
            except UndecodableSource as problem:
                self.errors[path] = problem.diagnostic
            except OSError as error:              # it vanished, or became another kind of file, since
                self.errors[path] = unreadable(path, error)
            except Exception as error:  # noqa: BLE001 - reported as this file's internal error
                self.errors[path] = internal_error(path, error)
        self.library = shipped_library(exclude={Path(path).resolve() for path in paths})
        self.view = library_view([*self.library, *self.modules.values()])

    def check(self, path: str) -> tuple[Diagnostic, ...]:
        """The findings of ``path`` (after its fixes, if any), less what ``# noqa`` silences."""
        if path in self.errors:
            return (self.errors[path],)
        try:
            return formula_findings(self.modules[path], self.sources[path], self.raw[path], self.view,
                                    self.refusals.get(path, ()))
        except Exception as error:  # noqa: BLE001 - reported as this file's internal error
            return (internal_error(path, error),)

    @functools.cached_property
    def refusals(self) -> dict[str, list[Diagnostic]]:
        """What ``transpile`` would refuse (DB2xx, and DB107 where a derived jvp cannot be derived)
        in the files read, from the pipeline (:func:`transpiler.pipeline.package_refusals`), once
        all fixes are made."""
        ok = [module for path, module in self.modules.items() if path not in self.errors]
        return package_refusals(ok, self.library, self.sources)

    def edits(self, finding: Diagnostic) -> tuple[LineEdit, ...]:
        """``finding``'s own fix-it (:func:`transpiler.lint.fix.fix_source` on that finding alone),
        as line edits of its file as read; ``()`` when it has none."""
        from transpiler.lint.fix import fix_source

        if finding.path in self.errors or finding.path not in self.sources:
            return ()
        before = self.sources[finding.path]
        try:
            after = fix_source(finding.path, before, self.view.known_operators, self.view.helpers,
                               wanted=lambda line, code: (line, code) == (finding.line, finding.code))
        except Exception:  # noqa: BLE001 - no edits; the finding stands as described
            return ()
        return line_edits(before, after)

    def fix(self, path: str, wanted: Callable[[str, str, str], bool], write: bool = True) -> str | None:
        """Apply the fix-its of ``path``'s findings that are ``wanted`` (not silenced); write the
        file (``write``; a source given in memory is only updated here) or not. Returns its
        unified diff, or None when nothing changed.

        The file keeps its encoding, line endings (libcst round-trips them), mode, and
        symlinks (the target is rewritten, the link stays)."""
        from transpiler.lint.fix import fix_source

        if path in self.errors:
            return None
        before = self.sources[path]
        lines = before.splitlines()
        silenced_in_file = file_noqa(self.raw[path]) if b"transpile" in self.raw[path] else None

        def keep(line: int, code: str) -> bool:
            text = lines[line - 1] if 0 < line <= len(lines) else ""
            silenced = silenced_in_file is not None and (not silenced_in_file or code.startswith(tuple(silenced_in_file)))
            return not silenced and wanted(path, code, text)

        try:
            after = fix_source(path, before, self.view.known_operators, self.view.helpers, wanted=keep)
        except Exception as error:  # noqa: BLE001 - reported as this file's internal error
            self.errors[path] = internal_error(path, error)
            return None
        if after == before:
            return None
        change = "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                              f"a/{path}", f"b/{path}"))
        if write:
            if path not in self.given:
                write_through(path, encode_source(after, source_encoding(path, self.raw[path])))
            self.sources[path] = after
            self.modules[path] = self.parse_module(path, after)
        return change
