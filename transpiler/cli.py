"""The ``transpile`` command line (DESIGN section 4).

``transpile [--formulas DIR] [--out DIR] [--check]`` generates the C++;
``transpile lint|import-yaml|emit-yaml|coverage|rule ...`` are subcommands. Each
subcommand lives in its own module and exposes ``main(argv) -> int``.
"""
from __future__ import annotations

import importlib
import os
import sys

SUBCOMMANDS = {
    "lint": "transpiler.lint.cli",
    "import-yaml": "transpiler.yaml_import.cli",
    "emit-yaml": "transpiler.yaml_import.emit_cli",
    "coverage": "transpiler.coverage",
    "rule": "transpiler.rule",
}
GENERATE = "transpiler.cpp.generate"
SHOW_JVP = "transpiler.show_jvp"        # ``transpile --show-jvp OP``


BROKEN_PIPE = 141      # 128 + SIGPIPE, what a C tool killed by the closed pipe would report


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        if args and args[0] in SUBCOMMANDS:
            module = importlib.import_module(SUBCOMMANDS[args[0]])
            return module.main(args[1:])
        if args and args[0] == "--show-jvp":
            return importlib.import_module(SHOW_JVP).main(args[1:])
        if args in (["--version"], ["-V"]):
            from transpiler.lint.cli import version

            print(f"transpile {version()}")
            return 0
        return importlib.import_module(GENERATE).main(args)
    except BrokenPipeError:            # ``transpile lint | head``: the reader has gone, stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())   # the interpreter's last flush must not fail again
        return BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
