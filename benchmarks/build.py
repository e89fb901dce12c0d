"""Build times a person waits for: one-op packages, and what the shared precompiled header saves.

Two one-op formula packages (``sinhops``: sinh, ``coshops``: cosh) are transpiled
into a temporary directory (not timed); then, in one empty build directory (the
per-user cache a user's builds share), ``python -m transpiler.build`` is timed,
each in a fresh interpreter, compiler cache off:

* ``first package, cold``: precompiles the libtorch header, compiles, links;
* ``first package, again``: nothing changed (the path only);
* ``second package``: another one-op package with the same torch and flags,
  reusing the precompiled header: the ratio to the first cold build is the
  saving (aim: at most 0.5x);
* the cache's size, and how much of it the shared header is.

Prints one line per build, wall-clock and CPU seconds (the CPU time of every
process the build ran: on a loaded machine it is the steadier figure).

Run: ``python benchmarks/build.py``.
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

FORMULA = '''\
from formulas import at, derivative


@derivative("{op}(Tensor self) -> Tensor")
def {op}(self):
    result = at.{op}(self)
    def backward(grad):
        return grad * {derivative}
    return result, backward
'''
PACKAGES = {"sinhops": ("sinh", "at.cosh(self)"), "coshops": ("cosh", "at.sinh(self)")}


def run(*command: str, cwd: Path) -> tuple[float, float]:
    """Wall-clock and CPU seconds (every process it ran) of ``command``; fails loudly."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "CCACHE_DISABLE": "1", "PYTHONPATH": str(REPO)})
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work, cache = Path(tmp), Path(tmp) / "cache"
        for package, (op, derivative) in PACKAGES.items():
            (work / package).mkdir()
            (work / package / f"{op}.py").write_text(FORMULA.format(op=op, derivative=derivative))
            run(sys.executable, "-m", "transpiler", "--formulas", package, "--out", f"{package}_cpp", cwd=work)

        def build(package: str) -> tuple[float, float]:
            return run(sys.executable, "-m", "transpiler.build", "--quiet", "--sources", f"{package}_cpp",
                       "--build-dir", str(cache), cwd=work)

        first, _ = PACKAGES
        cold = build(first)
        again = build(first)
        second = build("coshops")
        shared = size(cache / "precompiled")
        print(f"{'build':<28}{'wall s':>8}{'cpu s':>8}{'x cold (wall)':>15}")
        for label, (wall, cpu) in [("first package, cold", cold), ("first package, again", again),
                                   ("second package", second)]:
            print(f"{label:<28}{wall:>8.1f}{cpu:>8.1f}{wall / cold[0]:>15.2f}")
        print(f"cache {size(cache) / 2**20:.0f} MB, of which the shared precompiled header "
              f"{shared / 2**20:.0f} MB; per package {(size(cache) - shared) / 2 / 2**20:.1f} MB")


if __name__ == "__main__":
    main()
