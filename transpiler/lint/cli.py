"""``transpile lint [--format text|json] [--fix] [--statistics] [PATH ...]``.

Prints one finding per line (``path:line:col: CODE message``) or a JSON list.
Exit status: 0 no findings, 1 findings, 2 usage error or unreadable input.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from transpiler.lint.runner import LintResult, lint

DEFAULT_PATHS = ["formulas/"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="transpile lint", description=(
        "Check backward formulas (closure rules) and torch.autograd.Function subclasses "
        "(ctx rules) statically: the files read are never imported or executed."))
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files or directories (searched for *.py); default: formulas/")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    parser.add_argument("--fix", action="store_true",
                        help="rewrite formula files in place where a fix exists, then report what is left")
    parser.add_argument("--statistics", action="store_true",
                        help="print counts (files, Function subclasses analysed, findings per code) to stderr")
    parser.add_argument("--no-bytecode-cache", dest="trust_bytecode", action="store_false",
                        help="syntax-check every file, even those whose up-to-date bytecode is cached")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="worker processes for large runs (default: the available cores)")
    return parser


def main(argv: list[str]) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_request:       # usage error (2) or --help (0), already printed
        return int(exit_request.code or 0)
    result = lint(args.paths or DEFAULT_PATHS, fix=args.fix, jobs=args.jobs,
                  trust_bytecode=args.trust_bytecode)
    for diagnostic in result.unreadable:
        print(f"transpile lint: error: {diagnostic.path}: {diagnostic.message}", file=sys.stderr)
    findings = result.findings
    if args.format == "json":
        print(json.dumps([d.as_json() for d in findings], indent=2))
    else:
        for diagnostic in findings:
            print(diagnostic.format())
    for path in result.fixed:
        print(f"transpile lint: fixed {path}", file=sys.stderr)
    if args.statistics:
        print(statistics(result), file=sys.stderr)
    if result.unreadable:
        return 2
    return 1 if findings else 0


def statistics(result: LintResult) -> str:
    """A few lines: what was checked and how many findings of each code."""
    lines = [
        f"files checked: {result.files}",
        f"torch.autograd.Function subclasses analysed: {result.functions}",
        f"formula files: {result.formula_files}",
    ]
    counts = Counter(d.code for d in result.findings)
    lines.extend(f"{code}: {count}" for code, count in sorted(counts.items()))
    return "\n".join(lines)
