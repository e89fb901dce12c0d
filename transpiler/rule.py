"""``transpile rule CODE`` explains a diagnostic code; ``transpile rule --all`` lists them all;
``transpile rule --pages DIR`` writes their documentation pages (``docs/codes/``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transpiler.codes import CODES, lookup, pages
from transpiler.output import OutputError, write_file


def main(argv: list[str]) -> int:
    """``transpile rule``: explain one code, all of them, or write their documentation pages."""
    parser = argparse.ArgumentParser(prog="transpile rule", description="Explain a diagnostic code.")
    parser.add_argument("code", nargs="?", help="a code such as DB100")
    parser.add_argument("--all", action="store_true", help="explain every code")
    parser.add_argument("--pages", type=Path, metavar="DIR",
                        help="write one Markdown page per code and an index into DIR (this clone: docs/codes)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:       # usage error (2) or --help (0), already printed
        return int(exit_request.code or 0)
    if args.pages is not None:
        try:
            for name, text in pages().items():
                write_file(args.pages / name, text)
        except OutputError as error:
            print(f"transpile rule: {error}", file=sys.stderr)
            return 2
        return 0
    if args.all:
        print("\n".join(entry.explain() for entry in CODES), end="")
        return 0
    if args.code is None:
        print("\n".join(f"{entry.code}  {entry.summary}" for entry in CODES))
        return 0
    entry = lookup(args.code)
    if entry is None:
        print(f"transpile rule: error: unknown code {args.code!r}; `transpile rule` lists them", file=sys.stderr)
        return 2
    print(entry.explain(), end="")
    return 0
