"""The ``transpile`` command line (DESIGN section 4).

``transpile [--formulas DIR] [--out DIR] [--check]`` generates the C++;
``transpile lint|import-yaml|emit-yaml|coverage|rule|build ...`` are subcommands. Each
subcommand lives in its own module and exposes ``main(argv) -> int``; ``transpile
--help`` lists them (:data:`SUMMARIES`, else the first line of the module's
docstring) and ``transpile help [COMMAND]`` shows one's help.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

from transpiler.needs import TorchMissing

SUBCOMMANDS = {
    "lint": "transpiler.lint.cli",
    "import-yaml": "transpiler.yaml_import.cli",
    "emit-yaml": "transpiler.yaml_import.emit_cli",
    "coverage": "transpiler.coverage",
    "rule": "transpiler.rule",
    "build": "transpiler.build",
    "prove": "transpiler.prove.cli",
}
SUMMARIES = {
    "lint": "check formula files and torch.autograd.Functions for captures that break double backward",
    "rule": "explain a diagnostic code (`transpile rule DB100`, `--all`)",
    "import-yaml": "translate a derivatives.yaml into formula files (needs torch)",
    "emit-yaml": "write imported formulas back as a derivatives.yaml torchgen accepts",
    "coverage": "transpile prove on the shipped library, the op x tier table (in a clone; needs torch)",
    "build": "compile generated C++ into a library torch.ops.load_library loads (needs torch)",
    "prove": "prove every formula of a package on its tiers and print the op x tier table (needs torch)",
}
GENERATE = "transpiler.cpp.generate"
SHOW_JVP = "transpiler.show_jvp"        # ``transpile --show-jvp OP``


BROKEN_PIPE = 141      # 128 + SIGPIPE, what a C tool killed by the closed pipe would report


def summary(command: str) -> str:
    """One line saying what ``command`` does (read from its module without importing it)."""
    import ast      # here: only help reads a docstring (``ast`` is a tenth of a run with nothing changed's imports)

    if command in SUMMARIES:
        return SUMMARIES[command]
    origin = importlib.util.find_spec(SUBCOMMANDS[command]).origin
    docstring = ast.get_docstring(ast.parse(Path(origin).read_text(encoding="utf-8"))) or ""
    return docstring.splitlines()[0] if docstring else ""


def commands_help() -> str:
    """The command list ``transpile --help`` ends with."""
    width = max(map(len, SUBCOMMANDS)) + 2
    lines = ["commands (`transpile help COMMAND` or `transpile COMMAND --help` for one's options):",
             f"  {'(none)':<{width}}lint the project's formulas/ and write out_cpp/ (the options above)"]
    lines += [f"  {name:<{width}}{summary(name)}" for name in SUBCOMMANDS]
    lines.append(f"  {'help':<{width}}this help, or `transpile help COMMAND` for a command's")
    return "\n".join(lines)


def _help(topic: list[str]) -> list[str]:
    """``transpile help [COMMAND]`` as the arguments that print it."""
    if not topic or topic[0] == "help":
        return ["--help"]
    return [topic[0], "--help"]


def main(argv: list[str] | None = None) -> int:
    """``transpile [COMMAND] ...``: run the subcommand named first, or transpile when none is named;
    the exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["help"]:
        if args[1:2] and args[1] not in SUBCOMMANDS and args[1] != "help":
            print(f"transpile help: unknown command {args[1]!r}; commands: {', '.join(SUBCOMMANDS)}",
                  file=sys.stderr)
            return 2
        args = _help(args[1:])
    command = args[0] if args and args[0] in SUBCOMMANDS else None
    if args and command is None and not args[0].startswith("-"):
        print(f"transpile: unknown command {args[0]!r}; commands: {', '.join(SUBCOMMANDS)} "
              "(`transpile --help`)", file=sys.stderr)
        return 2
    try:
        if command is not None:
            module = importlib.import_module(SUBCOMMANDS[command])
            return module.main(args[1:])
        if args and args[0] == "--show-jvp":
            return importlib.import_module(SHOW_JVP).main(args[1:])
        if args in (["--version"], ["-V"]):
            from transpiler.lint.cli import version

            print(f"transpile {version()}")
            return 0
        return importlib.import_module(GENERATE).main(args)
    except TorchMissing as missing:
        print(f"transpile{' ' + command if command else ''}: {missing}", file=sys.stderr)
        return 2
    except BrokenPipeError:            # ``transpile lint | head``: the reader has gone, stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())   # the interpreter's last flush must not fail again
        return BROKEN_PIPE


def run() -> None:
    """The ``transpile`` command: :func:`main`, then leave without tearing the interpreter down.

    A run holds the models of every formula file it read, hundreds of thousands of objects; freeing
    them one by one at exit was about a fifth of the CPU time of ``transpile`` after one formula file
    was edited (measured on the imported derivatives.yaml corpus). When the command has returned there
    is nothing left to do but flush what it printed, so the process leaves at once (as mypy does). A
    command that raises, or that loaded torch (whose exit handlers should run), leaves the usual way.
    """
    status = main() or 0
    if "torch" in sys.modules:
        sys.exit(status)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:         # the reader has gone: the interpreter's own exit says so with 120
        status = status or 120
    os._exit(status)


if __name__ == "__main__":
    run()
