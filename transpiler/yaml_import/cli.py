"""``transpile import-yaml DERIVATIVES_YAML -o DIR``: translate a derivatives.yaml into formula files.

Prints one line per entry that could not be translated (``path:line:col: DB301
entry `name`: why``) and a summary. Exit 0: every entry imported; 1: some
entries were left out (the others are written); 2: usage error, unreadable
input, or an output directory it must not or cannot write (:mod:`transpiler.output`:
only a missing or empty directory, or one holding nothing but an earlier import).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from transpiler import codes
from transpiler.diagnostics import Diagnostic
from transpiler.needs import torch_missing
from transpiler.output import OutputError, check_directory, replace_directory
from transpiler.yaml_import.importer import FORMULA_FILE_PREFIX, GENERATED_MARKER, import_yaml


def _written_by_import(directory: Path) -> bool:
    marker = directory / "__init__.py"
    return marker.is_file() and GENERATED_MARKER in marker.read_text(encoding="utf-8", errors="replace")


def _import_files(directory: Path) -> set[str]:
    """The names in ``directory`` an import writes (a larger earlier import may have written more)."""
    return {p.name for p in directory.iterdir()
            if p.name in ("__init__.py", "externals.py")
            or (p.name.startswith(FORMULA_FILE_PREFIX) and p.suffix == ".py" and p.is_file())}


def main(argv: list[str]) -> int:
    """``transpile import-yaml``: translate a derivatives.yaml into formula files; the exit status."""
    parser = argparse.ArgumentParser(prog="transpile import-yaml", description=__doc__.splitlines()[0])
    parser.add_argument("derivatives_yaml", help="a derivatives.yaml (torch ships torchgen/packaged/autograd/derivatives.yaml)")
    parser.add_argument("-o", "--out", required=True, help="directory to write the formula files into (replaced)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return 0 if exit_.code == 0 else 2
    missing = torch_missing("transpile import-yaml")   # ATen's operators come from the installed torchgen
    if missing:
        print(missing, file=sys.stderr)
        return 2
    path = Path(args.derivatives_yaml)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        print(Diagnostic(str(path), 1, 1, codes.UNREADABLE.code, f"cannot read the file: {error.strerror}").format(), file=sys.stderr)
        return 2
    try:
        result = import_yaml(text, str(path))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        message = f"not valid YAML: {getattr(error, 'problem', error)}"
        print(Diagnostic(str(path), line, col, codes.UNPARSABLE.code, message).format(), file=sys.stderr)
        return 2
    out = Path(args.out)
    try:
        check_directory(out, _written_by_import, _import_files, "`transpile import-yaml`", [path.parent])
        for problem in result.problems:
            print(problem.format())
        replace_directory(out, result.files)
    except OutputError as error:
        print(f"transpile import-yaml: {error}", file=sys.stderr)
        return 2
    print(result.summary())
    return 1 if result.problems else 0
