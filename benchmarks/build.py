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

With ``--library`` and ``--corpus``, the shipped library (``out_cpp/``) and the
emitted derivatives.yaml corpus (:func:`corpus_build.emitted_corpus`, not timed)
are built the same way, each in an empty cache of its own: ``cold`` (the header
precompiled too), ``again`` (nothing changed), and that cache's size.
``--no-packages`` leaves out the one-op packages.

Prints one line per build, wall-clock and CPU seconds (the CPU time of every
process the build ran: on a loaded machine it is the steadier figure).

Run: ``python benchmarks/build.py [--library] [--corpus] [--no-packages]``.
"""
from __future__ import annotations

import argparse
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


HEADER = f"{'build':<28}{'wall s':>8}{'cpu s':>8}{'x cold (wall)':>15}"


def row(label: str, timing: tuple[float, float], cold: tuple[float, float]) -> str:
    wall, cpu = timing
    return f"{label:<28}{wall:>8.1f}{cpu:>8.1f}{wall / cold[0]:>15.2f}"


def build(sources: Path, cache: Path, cwd: Path, *name: str) -> tuple[float, float]:
    """``python -m transpiler.build`` of ``sources`` into ``cache``, timed."""
    return run(sys.executable, "-m", "transpiler.build", "--quiet", "--sources", str(sources),
               "--build-dir", str(cache), *name, cwd=cwd)


def one_op_packages(work: Path) -> None:
    """Two one-op packages in one cache: the first cold and again, the second on the shared header."""
    cache = work / "cache"
    for package, (op, derivative) in PACKAGES.items():
        (work / package).mkdir()
        (work / package / f"{op}.py").write_text(FORMULA.format(op=op, derivative=derivative))
        run(sys.executable, "-m", "transpiler", "--formulas", package, "--out", f"{package}_cpp", cwd=work)
    first, second = PACKAGES
    cold = build(Path(f"{first}_cpp"), cache, work)
    again = build(Path(f"{first}_cpp"), cache, work)
    other = build(Path(f"{second}_cpp"), cache, work)
    shared = size(cache / "precompiled")
    print(HEADER)
    for label, timing in [("first package, cold", cold), ("first package, again", again),
                          ("second package", other)]:
        print(row(label, timing, cold))
    print(f"cache {size(cache) / 2**20:.0f} MB, of which the shared precompiled header "
          f"{shared / 2**20:.0f} MB; per package {(size(cache) - shared) / 2 / 2**20:.1f} MB")


def cold_and_again(label: str, sources: Path, cache: Path, *name: str) -> None:
    """One library built cold into an empty ``cache`` and again with nothing changed; the cache's size."""
    cold = build(sources, cache, REPO, *name)
    again = build(sources, cache, REPO, *name)
    print(HEADER)
    print(row(f"{label}, cold", cold, cold))
    print(row(f"{label}, again", again, cold))
    print(f"{label}: cache {size(cache) / 2**20:.0f} MB, of which the precompiled header "
          f"{size(cache / 'precompiled') / 2**20:.0f} MB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", action="store_true", help="also the shipped library (out_cpp/): cold, again")
    parser.add_argument("--corpus", action="store_true", help="also the emitted derivatives.yaml corpus: cold, again")
    parser.add_argument("--no-packages", action="store_true", help="leave out the one-op packages")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if not args.no_packages:
            one_op_packages(work)
        if args.library:
            cold_and_again("shipped library", REPO / "out_cpp", work / "library-cache")
        if args.corpus:
            from corpus_build import emitted_corpus

            cold_and_again("corpus", emitted_corpus(work / "corpus"), work / "corpus-cache",
                           "--name", "derivatives_ops")
    return 0


if __name__ == "__main__":
    sys.exit(main())
