"""``transpile lint`` over the whole installed torch tree, against ``pyflakes`` on the same tree.

Both run as fresh processes in the same run, alternating (``--repeat`` rounds,
best of each), so that machine load hits both alike. Printed: wall-clock and
CPU seconds (CPU includes lint's worker processes), the ratios lint / pyflakes,
then what lint found: files, Function subclasses analysed, findings per code,
and every DB100/DB101 finding in full (these are judged by hand).

Run: ``python benchmarks/lint.py [--repeat N] [--jobs N]``.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float
    stdout: str
    stderr: str


def torch_tree() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def timed(command: list[str]) -> Timing:
    """Run ``command``; wall time and the CPU time (user + sys) of it and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    completed = subprocess.run(command, cwd=REPO, capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if completed.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} failed ({completed.returncode}):\n{completed.stderr}")
    return Timing(wall, cpu, completed.stdout, completed.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="rounds (best of each is kept)")
    parser.add_argument("--jobs", type=int, default=None, help="lint worker processes (default: all cores)")
    args = parser.parse_args(argv)

    tree = torch_tree()
    lint_command = [sys.executable, "-m", "transpiler", "lint", "--statistics", str(tree)]
    if args.jobs is not None:
        lint_command[4:4] = ["--jobs", str(args.jobs)]
    pyflakes_command = [sys.executable, "-m", "pyflakes", str(tree)]

    lint_runs: list[Timing] = []
    pyflakes_runs: list[Timing] = []
    for _ in range(args.repeat):
        lint_runs.append(timed(lint_command))
        pyflakes_runs.append(timed(pyflakes_command))
    lint_best = min(lint_runs, key=lambda t: t.wall)
    pyflakes_best = min(pyflakes_runs, key=lambda t: t.wall)

    cores = len(os.sched_getaffinity(0))
    print(f"tree: {tree} ({sum(1 for _ in tree.rglob('*.py'))} .py files), {cores} cores, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"pyflakes       wall {pyflakes_best.wall:7.2f} s   cpu {pyflakes_best.cpu:7.2f} s")
    print(f"transpile lint wall {lint_best.wall:7.2f} s   cpu {lint_best.cpu:7.2f} s")
    print(f"ratio lint / pyflakes: wall {lint_best.wall / pyflakes_best.wall:.3f}x, "
          f"cpu {lint_best.cpu / pyflakes_best.cpu:.3f}x (aim: wall <= 0.25x)")
    print()
    print(lint_best.stderr.strip())
    print()
    for line in lint_best.stdout.splitlines():
        if ": DB100 " in line or ": DB101 " in line:
            print(line.replace(str(tree), "torch"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
