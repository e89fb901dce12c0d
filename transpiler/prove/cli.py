"""``transpile prove [PATH]``: every applicable proof tier on every formula of a package.

PATH is a formula package directory (default: the project's formulas, ``[tool.transpile]``
``formulas``); it is imported as the package named after the directory, from its parent
directory. L is the linter on the files (static); the other tiers run each formula on its
inputs: the package's own (a module-level ``PROVE_CASES`` in any of its modules) or inputs
made from the schema (:mod:`transpiler.prove.cases`). Prints the op x tier table (``ok``,
``FAIL``, ``n/a`` with the reason, ``-`` not run), the reasons and every failure; exit 0
only when every applicable tier passed, 1 otherwise, 2 on a usage error. ``--compiled``
builds the package (cached) and adds its compiled tiers (:mod:`transpiler.prove.compiled`).
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from transpiler.build_progress import Progress
from transpiler.tier_table import grid
from transpiler.prove.cases import NoCases
from transpiler.prove.tiers import MEANING, RUNNERS, in_column_order


@dataclass
class OpRow:
    """One operator's outcomes: tier -> (status, message), and the case of each failure."""

    op: str
    cells: dict[str, tuple[str, str]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    opinfo_cases: int = 0          # cases made from torch's OpInfo samples

    @property
    def proven(self) -> bool:
        """Whether every tier proved the op (or does not apply to it)."""
        return all(status in ("ok", "n/a") for status, _ in self.cells.values())


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``transpile prove``."""
    parser = argparse.ArgumentParser(prog="transpile prove", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", type=Path,
                        help="formula package directory (default: the project's formulas)")
    parser.add_argument("-k", dest="select", action="append", default=[], metavar="TEXT",
                        help="only the ops whose name contains TEXT (repeat for several)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--compiled", action="store_true",
                        help="also transpile and build the package (cached) and prove its compiled ops (C1, CT)")
    parser.add_argument("--cases", action="append", default=[], metavar="FILE",
                        help="a Python file whose PROVE_CASES replace the package's cases of the ops it names")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    return parser


def main(argv: list[str]) -> int:
    """``transpile prove``: run the proof tiers on a formula package's ops, print the table; the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:       # usage error (2) or --help (0), already printed
        return int(exit_request.code or 0)
    try:
        directory, package = _package_of(args.path)
    except ValueError as problem:
        print(f"transpile prove: {problem}", file=sys.stderr)
        return 2
    from transpiler.prove.check import import_package, load_case_file, require_torch

    require_torch()              # without torch: one line from transpiler.cli, exit 2
    from transpiler.frontend import load_library

    library = load_library(str(directory))
    names = sorted(f.op_name for f in library.formulas if _selected(f.op_name, args.select))
    if not names:
        print(f"transpile prove: {directory}: no formula" + (" matches -k" if args.select else ""), file=sys.stderr)
        return 2
    if str(directory.parent) not in sys.path and package != "formulas":
        sys.path.insert(0, str(directory.parent))
    try:
        for note in import_package(package):
            print(f"transpile prove: note: {note}", file=sys.stderr)
        case_files = [load_case_file(path) for path in args.cases]
    except Exception as error:           # the user's package does not import: say where, no traceback
        print(f"transpile prove: cannot import {package} from {directory.parent} (or a --cases file): "
              f"{type(error).__name__}: {error}", file=sys.stderr)
        return 2
    runners = dict(RUNNERS)
    if args.compiled:
        from transpiler.prove.compiled import (
            COMPILED_RUNNERS,
            BuildFailed,
            build_package,
        )

        try:
            build_package(directory, package)
        except BuildFailed as failure:
            print(f"transpile prove: {failure}", file=sys.stderr)
            return 1
        runners.update(COMPILED_RUNNERS)
    runners = {tier: runners[tier] for tier in in_column_order(runners)}
    progress = Progress(package, quiet=args.quiet, command="prove")
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):   # the failures say what matters
            warnings.simplefilter("ignore")
            progress.say(f"lint {len(library.modules)} formula files")
            lint = _lint_by_op(directory, library)
            rows = prove(package, names, lint, case_files, runners, progress)
    except ValueError as problem:        # PROVE_CASES that name no formula
        print(f"transpile prove: {problem}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps({r.op: {t: {"status": s, "message": m} for t, (s, m) in r.cells.items()} for r in rows},
                         indent=1, sort_keys=True))
    else:
        print(render(rows))
    progress.done()
    return 0 if all(r.proven for r in rows) else 1


def _selected(name: str, select: list[str]) -> bool:
    return not select or any(text in name for text in select)


def _package_of(path: Path | None) -> tuple[Path, str]:
    """The formula directory and the package name it is imported as."""
    from transpiler.library_discovery import SHIPPED_FORMULAS
    from transpiler.project import ProjectError, find_project

    if path is None:
        try:
            path = find_project().formulas
        except ProjectError as error:
            raise ValueError(str(error)) from None
    if not path.is_dir():
        raise ValueError(f"{path}: not a directory (give a formula package directory, or run in the project)")
    directory = path.resolve()
    if directory == SHIPPED_FORMULAS.resolve():
        return directory, "formulas"
    if directory.name == "formulas":
        raise ValueError(f"{path}: a package called `formulas` would shadow the shipped library; rename it")
    if not directory.name.isidentifier():
        raise ValueError(f"{path}: `{directory.name}` cannot be imported as a package name; rename it")
    return directory, directory.name


def _lint_by_op(directory: Path, library: Any) -> dict[str, list[str]]:
    """Tier L, static: the linter's findings on the package, given to the formula whose lines
    hold them (a finding outside every formula goes to every op of its file)."""
    import libcst as cst

    from transpiler.lint.runner import lint_paths

    findings = lint_paths([str(directory)])
    found: dict[str, list[str]] = {}
    for module in library.modules:
        path = Path(module.path).resolve()
        mine = [d for d in findings if Path(d.path).resolve() == path]
        spans = {f.op_name: (f.span.line, f.span.line + len(cst.Module([f.node]).code.splitlines()))
                 for f in module.formulas}
        for op, (first, end) in spans.items():
            inside = [d for d in mine if first <= d.line < end]
            outside = [d for d in mine if not any(a <= d.line < b for a, b in spans.values())]
            found[op] = [d.format() for d in inside + outside]
    return found


def prove(package: str, names: list[str], lint: dict[str, list[str]], case_files: list[Any],
          runners: dict[str, Any], progress: Progress | None = None) -> list[OpRow]:
    """Every tier of ``runners`` (and L, from ``lint``) on every named op of ``package``
    (imported), on the cases of the package or of ``case_files``; each op said on ``progress``."""
    from formulas.dsl import registry
    from transpiler.prove.check import OPINFO_TIERS, package_cases, reproduction, run_tiers
    from transpiler.prove.tiers import Subject

    rows = []
    for number, name in enumerate(names, 1):
        if progress is not None:
            progress.say(f"{number}/{len(names)} {name}", replaceable=True)
        subject = Subject(package, registry(package).formulas[name])
        row = OpRow(name)
        findings = lint.get(name, [])
        row.cells["L"] = ("FAIL", "; ".join(findings)) if findings else ("ok", "")
        if findings:
            row.failures.append(f"{name}: tier L: " + "\n  ".join(findings))
        try:
            cases = package_cases(subject, case_files)
        except NoCases as why:
            row.cells.update((t, ("-", f"not run: {why}")) for t in runners if t != "L")
            rows.append(row)
            continue
        row.opinfo_cases = sum(case.tiers == OPINFO_TIERS for case in cases)
        for outcome in run_tiers(subject, cases, [t for t in runners if t != "L"], runners):
            row.cells[outcome.tier] = (outcome.status, outcome.message)
            if outcome.status == "FAIL":
                assert outcome.case is not None
                row.failures.append(f"{name}: tier {outcome.tier} ({MEANING[outcome.tier]}), case "
                                    f"{outcome.case.name}: {outcome.message}\n  reproduce: "
                                    f"{reproduction(subject, outcome.case)}")
        rows.append(row)
    return rows


def render(rows: list[OpRow]) -> str:
    """The table, the tiers' meanings, why a tier does not apply or did not run, the failures."""
    from transpiler.prove.check import OPINFO_TIERS

    tiers = list(rows[0].cells)
    lines = grid(tiers, [(r.op, [r.cells[t][0] for t in tiers]) for r in rows])
    lines.append(f"{sum(r.proven for r in rows)}/{len(rows)} ops proven on every applicable tier")
    with_opinfo = [r for r in rows if r.opinfo_cases]
    if with_opinfo:
        lines.append(f"OpInfo samples: {len(with_opinfo)} ops, {sum(r.opinfo_cases for r in with_opinfo)} cases "
                     f"(tiers {', '.join(t for t in tiers if t in OPINFO_TIERS)})")
    lines += [f"  {t:>2}: {MEANING[t]}" for t in tiers]
    reasons: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        for tier, (status, message) in row.cells.items():
            if status in ("n/a", "-"):
                reasons.setdefault((status, message), []).append(f"{row.op} {tier}")
    lines += [f"{status}: {', '.join(where)}: {message}" for (status, message), where in sorted(reasons.items())]
    lines += [failure for row in rows for failure in row.failures]
    return "\n".join(lines)
