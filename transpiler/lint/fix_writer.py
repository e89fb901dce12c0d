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
from pathlib import Path

from transpiler import codes
from transpiler.lint.file_check import FileReport, check_file, check_source
from transpiler.lint.settings import Settings
from transpiler.sources import decode_source, encode_source, source_encoding


def function_fixes(reports: list[FileReport], sources: Mapping[str, bytes], settings: Settings,
                   unsafe: bool, write: bool, fixed: list[str], diffs: list[str],
                   fixed_sources: dict[str, bytes]) -> tuple[list[FileReport], int]:
    """The unsafe fix of ctx-style Functions (:mod:`transpiler.lint.function_fix`): a backward
    whose Function has a reported DB100 gets ``@once_differentiable``. With ``unsafe``, each
    changed file goes to ``diffs`` (not ``write``), to ``fixed_sources`` (given in memory) or
    is written and listed in ``fixed``, and its report is made again; without, the findings
    it would address are only counted. Formula files are left to the closure fix."""
    from transpiler.lint.function_fix import once_differentiable_fix

    kept_intermediate = codes.KEPT_INTERMEDIATE.code
    out: list[FileReport] = []
    hidden = 0
    for report in reports:
        path = report.path
        lines = {d.line for d in report.diagnostics
                 if d.code == kept_intermediate and settings.enabled(d.code, path)}
        if not lines or report.formula_file:
            out.append(report)
            continue
        try:
            raw = sources[path] if path in sources else Path(path).read_bytes()
            before = decode_source(path, raw)
            change = once_differentiable_fix(before, lines)
        except Exception:  # noqa: BLE001 - no fix for this file; its findings stand as reported
            out.append(report)
            continue
        if not change.lines:
            out.append(report)
        elif not unsafe:
            hidden += sum(1 for d in report.diagnostics if d.code == kept_intermediate and d.line in change.lines)
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


def write_through(path: str, data: bytes) -> None:
    """Replace the file's bytes atomically, keeping its mode; a symlink keeps pointing at
    its target, which gets the new bytes."""
    target = Path(os.path.realpath(path))
    mode = stat.S_IMODE(target.stat().st_mode)
    temporary = target.with_name(f".{target.name}.lint-fix.tmp")
    temporary.write_bytes(data)
    os.chmod(temporary, mode)
    os.replace(temporary, target)
