"""``transpile emit-yaml DIR -o FILE``: write imported formulas back as a derivatives.yaml.

Exit 0: written; 1: a formula file is not in the shape ``import-yaml`` writes
(reported as ``path:line:col: CODE message``, nothing written); 2: usage error or an
output that cannot be written (one line, the file left as it was).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from transpiler.yaml_import.emit import emit_yaml
from transpiler.output import OutputError, write_file
from transpiler.diagnostics import TranspileError
from transpiler.yaml_import.reader import formula_files, read_directory


def main(argv: list[str]) -> int:
    """``transpile emit-yaml``: write imported formula files back as a derivatives.yaml; the exit status."""
    parser = argparse.ArgumentParser(prog="transpile emit-yaml", description=__doc__.splitlines()[0])
    parser.add_argument("directory", help="a directory written by `transpile import-yaml`")
    parser.add_argument("-o", "--out", required=True, help="the derivatives.yaml to write")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return 0 if exit_.code == 0 else 2
    directory = Path(args.directory)
    if not formula_files(directory):
        print(f"{directory}:1:1: no formula files (derivatives_*.py); run `transpile import-yaml` first",
              file=sys.stderr)
        return 2
    try:
        entries = read_directory(directory)
    except TranspileError as error:
        for diagnostic in error.diagnostics:
            print(diagnostic.format(), file=sys.stderr)
        return 1
    try:
        write_file(Path(args.out), emit_yaml(entries, str(directory)))
    except OutputError as error:
        print(f"transpile emit-yaml: {error}", file=sys.stderr)
        return 2
    print(f"wrote {len(entries)} entries to {args.out}")
    return 0
