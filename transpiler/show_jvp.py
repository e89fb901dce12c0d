"""``transpile --show-jvp OP [--formulas DIR]``: print the jvp derived from OP's backward.

The derivation (``transpiler.derive_jvp``) is static: the formula files are read, never
imported. The source printed is a nested ``def jvp(...)`` a person can read and paste into the
formula in place of ``jvp="derived"``. Exit 0: printed; 1: the backward cannot be transposed
(the step and the reason on one line); 2: usage error or no formula for OP.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transpiler.derive_jvp import DerivationRefused, code, derive_jvp
from transpiler.frontend import SHIPPED_LIBRARY, load_library, operator_table, read_module
from transpiler.model import Library
from transpiler.sources import python_sources


def main(argv: list[str]) -> int:
    """``transpile --show-jvp OP``: print the jvp derived from OP's backward; the exit status."""
    parser = argparse.ArgumentParser(prog="transpile --show-jvp",
                                     description="Print the jvp derived from an operator's backward.")
    parser.add_argument("op", help="the operator, name.overload as in its schema (sin, mul.Tensor)")
    parser.add_argument("--formulas", help="the formula directory (default: the project's)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:       # usage error (2) or --help (0), already printed
        return int(exit_request.code or 0)
    from transpiler.project import ProjectError, find_project

    try:
        directory = Path(args.formulas) if args.formulas else find_project().formulas
    except ProjectError as error:
        print(f"transpile --show-jvp: error: {error}", file=sys.stderr)
        return 2
    if not directory.is_dir():
        print(f"transpile --show-jvp: error: {directory}: no such formula directory", file=sys.stderr)
        return 2
    library = Library(tuple(read_module(str(path)) for path in python_sources(directory).files))    # derived here
    shipped = [] if directory.resolve() == SHIPPED_LIBRARY else [load_library(str(SHIPPED_LIBRARY))]
    formula = next((f for f in library.formulas if f.op_name == args.op), None)
    if formula is None:
        print(f"transpile --show-jvp: error: no formula for `{args.op}` in {directory}; give name.overload "
              "as its schema spells it", file=sys.stderr)
        return 2
    try:
        jvp = derive_jvp(formula, operator_table(*shipped, library))
    except DerivationRefused as refusal:
        span = formula.span
        print(f"{formula.path}:{span.line}:{span.col}: {args.op}: the backward cannot be transposed: "
              f"{refusal.reason}", file=sys.stderr)
        return 1
    print(code(jvp), end="")
    return 0
