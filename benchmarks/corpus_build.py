"""C++ build time of the emitted derivatives.yaml corpus, and how it scales with its size.

The installed torch's derivatives.yaml is imported and transpiled per formula
(``transpile --keep-going``) into a temporary directory (not timed). Then
``python -m transpiler.build`` (ninja, one translation unit per formula file,
every core) is timed, each in a fresh interpreter:

* ``cold``: an empty build directory, compiler cache off (``CCACHE_DISABLE=1``);
* ``warm``: the same build again, nothing changed;
* ``one file changed``: one formula translation unit edited (a comment), the
  library relinked;
* scaling: cold builds of the helpers plus the first k formula translation
  units, for a few k, with the nodes they hold: seconds per translation unit and
  per node.

Prints one line per build, wall-clock and CPU seconds (the CPU time of every
process the build ran: on a loaded machine it is the steadier figure).

Run: ``python benchmarks/corpus_build.py [--sizes 4,8,16]``.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torchgen

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from transpiler.output import replace_directory  # noqa: E402
from transpiler.yaml_import.importer import import_yaml  # noqa: E402

DERIVATIVES = Path(torchgen.__file__).parent / "packaged" / "autograd" / "derivatives.yaml"
SHARED = ("runtime.h", "helpers.h", "helpers.cpp", "views.h", "vmap.h", "MANIFEST")
NODE = re.compile(r"^struct \w+ : public torch::autograd::", re.MULTILINE)   # an autograd node


def build(sources: Path, build_dir: Path, cold: bool) -> tuple[float, float]:
    """Wall-clock and CPU seconds (every process it ran, compilers included) of
    ``python -m transpiler.build`` on ``sources`` (compiler cache off when ``cold``)."""
    env = {**os.environ, **({"CCACHE_DISABLE": "1"} if cold else {})}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "transpiler.build", "--sources", str(sources), "--build-dir",
                           str(build_dir), "--name", "corpus_ops"], capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"build failed: {done.stdout[-3000:]}{done.stderr[-3000:]}")
    return seconds, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def shown(label: str, timing: tuple[float, float], units: int, count: int) -> str:
    wall, cpu = timing
    return (f"{label}: {wall:.1f} s ({wall / units:.2f} s/unit, {wall / count:.3f} s/node); "
            f"cpu {cpu:.1f} s ({cpu / units:.2f} s/unit, {cpu / count:.3f} s/node)")


def nodes(path: Path) -> int:
    return len(NODE.findall(path.read_text(encoding="utf-8")))


def emitted_corpus(work: Path) -> Path:
    """The installed torch's derivatives.yaml imported into ``work/formulas`` and transpiled per
    formula (``--keep-going``, namespace ``derivatives``) into ``work/cpp``, returned."""
    formulas, out = work / "formulas", work / "cpp"
    replace_directory(formulas, import_yaml(DERIVATIVES.read_text(encoding="utf-8"), str(DERIVATIVES)).files)
    done = subprocess.run([sys.executable, "-m", "transpiler", "--formulas", str(formulas), "--out", str(out),
                           "--namespace", "derivatives", "--keep-going"], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"transpile failed: {done.stderr[-2000:]}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,8,16", help="numbers of formula translation units for the scaling")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="corpus_build."))
    try:
        out = emitted_corpus(work)
        units = sorted(p for p in out.iterdir() if p.suffix == ".cpp" and p.name != "helpers.cpp")
        total_nodes = sum(nodes(p) for p in units)
        cores = len(os.sched_getaffinity(0))
        print(f"emitted corpus: {len(units)} formula translation units + helpers.cpp, {total_nodes} nodes; "
              f"{cores} cores")
        full = work / "build"
        cold = build(out, full, cold=True)
        warm = build(out, full, cold=False)
        edited = units[len(units) // 2]
        edited.write_text(edited.read_text(encoding="utf-8") + "// edited\n", encoding="utf-8")
        one = build(out, full, cold=True)
        print(shown("cold (no ccache)", cold, len(units), total_nodes))
        print(f"warm (nothing changed): {warm[0]:.2f} s; cpu {warm[1]:.2f} s")
        print(shown(f"one formula unit changed ({nodes(edited)} nodes, no ccache)", one, 1, nodes(edited)))
        for size in (int(s) for s in args.sizes.split(",")):
            if size >= len(units):
                continue
            subset = work / f"cpp{size}"
            subset.mkdir()
            for path in [*units[:size], *(out / name for name in SHARED if (out / name).exists())]:
                shutil.copy(path, subset / path.name)
            count = sum(nodes(p) for p in units[:size])
            timing = build(subset, work / f"build{size}", cold=True)
            print(shown(f"cold, {size} formula units ({count} nodes, no ccache)", timing, size, count))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
