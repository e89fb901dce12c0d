"""``transpile lint`` over the whole installed torch tree, against ``ruff`` and ``pyflakes`` on the same tree.

All run as fresh processes in the same run, alternating (``--repeat`` rounds,
best of each), so that machine load hits them alike: ``ruff check --select F
--no-cache`` (the fastest peer), pyflakes, ``transpile lint`` as is (its result
cache in a fresh directory, filled by one untimed run first: every file's
stamp checked, nothing changed), ``transpile lint --no-cache`` (every file
checked; files whose up-to-date bytecode is in ``__pycache__`` are known to
compile and skip the syntax check), ``transpile lint --no-cache
--no-bytecode-cache`` (every file parsed), and the floors of
``benchmarks/lint_floor.py`` (start-up and imports alone; reading every file
with the text prefilter and the bytecode-cache check, the floor of
``--no-cache``; CPython's parser alone; CPython's full ``compile()`` of every
file, the floor of ``--no-bytecode-cache``). Printed:
wall-clock and CPU seconds (CPU includes worker processes and threads), the
ratios to ruff and to pyflakes, then what lint found: files,
Function subclasses analysed, findings per code, and every DB100/DB101 finding
in full (these are judged by hand).

Run: ``python benchmarks/lint.py [--repeat N] [--jobs N] [--no-pyflakes]``.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FLOORS = {                                  # benchmarks/lint_floor.py's stages, each a lower bound
    "startup": "start-up, imports",
    "read": "read+prefilter, floor of --no-cache",
    "parse": "parser alone",
    "compile": "compile(), floor of --no-bytecode-cache",
}


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


def best_timings(tree: Path, cache_dir: str, args: argparse.Namespace) -> dict[str, Timing]:
    """Every command timed ``args.repeat`` times, alternating; the fastest run of each."""
    jobs = [] if args.jobs is None else ["--jobs", str(args.jobs)]
    floor_jobs = ["--jobs", str(args.jobs if args.jobs is not None else len(os.sched_getaffinity(0)))]
    floor = [sys.executable, str(REPO / "benchmarks" / "lint_floor.py")]
    lint = [sys.executable, "-m", "transpiler", "lint", "--statistics", *jobs]
    commands = {
        "ruff": [sys.executable, "-m", "ruff", "check", "--select", "F", "--no-cache", "--quiet", str(tree)],
        **({} if args.no_pyflakes else {"pyflakes": [sys.executable, "-m", "pyflakes", str(tree)]}),
        "transpile lint": [*lint, "--cache-dir", cache_dir, str(tree)],
        "transpile lint --no-cache": [*lint, "--no-cache", str(tree)],
        "transpile lint --no-cache --no-bytecode-cache": [*lint, "--no-cache", "--no-bytecode-cache", str(tree)],
        **{f"floor: {stage} ({what})": [*floor, stage, str(tree), *floor_jobs] for stage, what in FLOORS.items()},
    }
    timed(commands["transpile lint"])                 # fills the result cache
    runs: dict[str, list[Timing]] = {name: [] for name in commands}
    for _ in range(args.repeat):
        for name, command in commands.items():
            runs[name].append(timed(command))
    return {name: min(timings, key=lambda t: t.wall) for name, timings in runs.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="rounds (best of each is kept)")
    parser.add_argument("--jobs", type=int, default=None, help="lint worker processes (default: all cores)")
    parser.add_argument("--no-pyflakes", action="store_true", help="leave out pyflakes (the slowest)")
    args = parser.parse_args(argv)

    tree = torch_tree()
    with tempfile.TemporaryDirectory(prefix="lint-cache-") as cache_dir:
        best = best_timings(tree, cache_dir, args)
    ruff, pyflakes = best["ruff"], best.get("pyflakes")

    cores = len(os.sched_getaffinity(0))
    print(f"tree: {tree} ({sum(1 for _ in tree.rglob('*.py'))} .py files), {cores} cores, "
          f"load average {os.getloadavg()[0]:.1f}")
    for name, timing in best.items():
        ratio = "" if name in ("ruff", "pyflakes") else (
            f"   to ruff: wall {timing.wall / ruff.wall:.2f}x, cpu {timing.cpu / ruff.cpu:.2f}x"
            + (f"; to pyflakes: wall {timing.wall / pyflakes.wall:.3f}x" if pyflakes else ""))
        print(f"{name:58s} wall {timing.wall:7.2f} s   cpu {timing.cpu:7.2f} s{ratio}")
    print("(aim: wall <= 1.0x ruff with the cache, <= 2.0x without; --no-bytecode-cache "
          "syntax-checks every file even when CPython's up-to-date bytecode already proves it compiles)")
    lint_default = best["transpile lint"]
    modes = [name for name in best if name.startswith("transpile lint")]
    if any(best[name].stdout != lint_default.stdout for name in modes):
        print("WARNING: the lint modes disagree")
    print()
    print(lint_default.stderr.strip())
    print()
    for line in lint_default.stdout.splitlines():
        if ": DB100 " in line or ": DB101 " in line:
            print(line.replace(str(tree), "torch"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
