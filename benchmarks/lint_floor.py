"""One stage of ``transpile lint``'s work alone over a tree: the floors that ``benchmarks/lint.py`` times.

Stages (every ``.py`` file under the tree, spread over ``--jobs`` worker
processes in one contiguous batch each, so that no per-file messaging is
counted):

- ``startup``: the interpreter and the linter's imports, no file touched (the
  fixed cost of any run of ``transpile lint``).
- ``read``: read every file and run the linter's text prefilter on it (which
  files may define a ``torch.autograd.Function`` or use ``@derivative``) and
  the bytecode-cache check; the floor of ``--no-cache`` (every file checked),
  whose syntax check is proven by CPython's up-to-date ``.pyc`` for nearly
  every file.
- ``parse``: CPython's parser alone (``compile(..., PyCF_ONLY_AST)``) on every
  file: the floor of a linter that builds an ast of every file.
- ``compile``: CPython's full ``compile()`` on every file, bytecode thrown
  away: the floor of any linter that uses CPython's compiler for a complete
  syntax check of every file (``--no-bytecode-cache``).

Run: ``python benchmarks/lint_floor.py STAGE TREE [--jobs N]``; prints the
number of files handled.
"""
from __future__ import annotations

import argparse
import ast
import concurrent.futures
import multiprocessing
import os
import sys
import warnings
from pathlib import Path

STAGES = ("startup", "read", "parse", "compile")


def python_files(tree: Path) -> list[str]:
    """Every ``.py`` file under ``tree``, sorted."""
    return sorted(str(path) for path in tree.rglob("*.py"))


def run_stage(stage: str, files: list[str]) -> int:
    """Do ``stage`` on ``files``; the number of files that were read."""
    from transpiler.lint.bytecode import compiled_before
    from transpiler.lint.prefilter import may_define_function, may_use_derivative

    warnings.simplefilter("ignore")                  # the compiler's warnings about the code read
    done = 0
    for path in files:
        source = Path(path).read_bytes()
        if stage == "read":
            may_define_function(path, source)
            may_use_derivative(source)
            compiled_before(path, source)
        else:
            flags = ast.PyCF_ONLY_AST if stage == "parse" else 0
            try:
                compile(source, path, "exec", flags=flags, dont_inherit=True)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                pass
        done += 1
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=STAGES)
    parser.add_argument("tree", type=Path)
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args(argv)
    if args.stage == "startup":
        import transpiler.cli  # noqa: F401 - the import is what is timed
        print(0)
        return 0
    files = python_files(args.tree)
    batches = [files[worker::args.jobs] for worker in range(args.jobs)]
    if args.jobs < 2:
        print(run_stage(args.stage, files))
        return 0
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
        print(sum(pool.map(run_stage, [args.stage] * args.jobs, batches)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
