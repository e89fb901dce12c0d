"""The ``transpile`` command line (DESIGN section 4).

``transpile [--formulas DIR] [--out DIR] [--check]`` generates the C++;
``transpile lint|import-yaml|emit-yaml|coverage ...`` are subcommands. Each
subcommand lives in its own module and exposes ``main(argv) -> int``.
"""
from __future__ import annotations

import importlib
import sys

SUBCOMMANDS = {
    "lint": "transpiler.lint.cli",
    "import-yaml": "transpiler.yaml_import.cli",
    "emit-yaml": "transpiler.yaml_import.emit_cli",
    "coverage": "transpiler.coverage",
}
GENERATE = "transpiler.cpp.generate"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] in SUBCOMMANDS:
        module = importlib.import_module(SUBCOMMANDS[args[0]])
        return module.main(args[1:])
    return importlib.import_module(GENERATE).main(args)


if __name__ == "__main__":
    sys.exit(main())
