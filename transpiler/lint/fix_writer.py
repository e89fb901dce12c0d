"""Fix writing: how a fixed file reaches the disk, and the fix of ctx-style Functions.

Owns :func:`write_through` (atomic, keeping the file's mode and symlinks) and
the ``--fix``/``--diff`` pass over ``torch.autograd.Function`` files
(:mod:`transpiler.lint.function_fix` plans the change); formula files are
fixed by :mod:`transpiler.lint.formula_files`.
"""
from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from transpiler import codes
from transpiler.lint.file_check import FileReport, check_file, check_source
from transpiler.lint.settings import Settings
from transpiler.sources import decode_source, encode_source, source_encoding


def function_fixes(reports: list[FileReport], sources: Mapping[str, bytes], settings: Settings,
                   unsafe: bool, write: bool, fixed: list[str], diffs: list[str],
                   fixed_sources: dict[str, bytes]) -> tuple[list[FileReport], int]:
    """The fixes of ctx-style Functions (:func:`transpiler.lint.function_fix.fix_functions`): the
    safe ones always, the unsafe ones with ``unsafe`` (otherwise the findings they would address
    are only counted). Each changed file goes to ``diffs`` (not ``write``), to ``fixed_sources``
    (given in memory) or is written and listed in ``fixed``, and its report is made again.
    Formula files are left to the closure fix."""
    from transpiler.lint.function_fix import FIXABLE, Located, fix_functions

    out: list[FileReport] = []
    hidden = 0
    for report in reports:
        path = report.path
        findings = [Located(d.line, d.col, d.code) for d in report.diagnostics
                    if d.code in FIXABLE and settings.enabled(d.code, path)]
        if not findings or report.formula_file:
            out.append(report)
            continue
        try:
            raw = sources[path] if path in sources else Path(path).read_bytes()
            before = decode_source(path, raw)
            change = fix_functions(before, findings, unsafe)
        except Exception:  # noqa: BLE001 - no fix for this file; its findings stand as reported
            out.append(report)
            continue
        hidden += len(change.withheld)
        if not change.applied:
            out.append(report)
        elif not write:
            diffs.append("".join(difflib.unified_diff(
                before.splitlines(keepends=True), change.source.splitlines(keepends=True),
                f"a/{path}", f"b/{path}")))
            out.append(report)
        else:
            data = encode_source(change.source, source_encoding(path, raw))
            if path in sources:
                fixed_sources[path] = data
                out.append(check_source(path, data, trust_bytecode=False))
            else:
                write_through(path, data)
                fixed.append(path)
                out.append(check_file(path, trust_bytecode=False))
    return out, hidden


def describe_function_fixes(reports: list[FileReport], sources: Mapping[str, bytes],
                            settings: Settings) -> list[FileReport]:
    """The reported DB110/DB111 findings (opt-in) with the fix each gets, where it gets one: planned
    here, with libcst, only for the files that have such findings."""
    hygiene = (codes.CTX_ATTRIBUTE_TENSOR.code, codes.METADATA_ONLY_SAVE.code)
    out = []
    for report in reports:
        wanted = [d for d in report.diagnostics if d.code in hygiene and settings.enabled(d.code, report.path)]
        if not wanted:
            out.append(report)
            continue
        # here: a run with no such finding (most) never imports libcst's codemod and matchers
        from transpiler.lint.function_fix import Located, describe_fixes
        try:
            raw = sources[report.path] if report.path in sources else Path(report.path).read_bytes()
            fixes = describe_fixes(decode_source(report.path, raw), [Located(d.line, d.col, d.code) for d in wanted])
        except Exception:  # noqa: BLE001 - no fix described; the findings stand as reported
            fixes = {}
        described = tuple(replace(d, fix=fixes.get(Located(d.line, d.col, d.code), d.fix))
                          for d in report.diagnostics)
        out.append(replace(report, diagnostics=described))
    return out


def with_function_edits(reports: list[FileReport], sources: Mapping[str, bytes]) -> list[FileReport]:
    """The reports with each fixable finding of a Function carrying its own fix as line edits
    (:func:`transpiler.lint.function_fix.fix_edits`: what SARIF's ``fixes`` hold); a DB100's says
    which of its two fixes the edits make."""
    from transpiler.lint.function_fix import FIXABLE, fix_edits

    out = []
    for report in reports:
        if report.formula_file or not any(d.fix is not None and d.code in FIXABLE for d in report.diagnostics):
            out.append(report)
            continue
        try:
            raw = sources[report.path] if report.path in sources else Path(report.path).read_bytes()
            source = decode_source(report.path, raw)
            edited = tuple(replace(d, **fix_edits(source, d)._asdict()) for d in report.diagnostics)
        except Exception:  # noqa: BLE001 - no edits; the findings stand as described
            edited = report.diagnostics
        out.append(replace(report, diagnostics=edited))
    return out


def write_through(path: str, data: bytes) -> None:
    """Replace the file's bytes atomically, keeping its mode; a symlink keeps pointing at
    its target, which gets the new bytes."""
    target = Path(os.path.realpath(path))
    mode = stat.S_IMODE(target.stat().st_mode)
    temporary = target.with_name(f".{target.name}.lint-fix.tmp")
    temporary.write_bytes(data)
    os.chmod(temporary, mode)
    os.replace(temporary, target)
