"""Codegen of the imported derivatives.yaml corpus against torchgen (DESIGN section 8).

The installed torch's derivatives.yaml is imported once into a temporary
formula directory (not timed). Then, in this one run, best of ``--repeat``:

* ``torchgen``: ``load_derivatives`` + ``gen_autograd_functions_lib`` on the
  same derivatives.yaml, its module-level parse caches cleared before each
  repetition (the cold run torchgen does in a build);
* ``cold``: ``transpile --formulas <corpus> --out <new dir> --keep-going``
  (per-formula mode: lint, transliterate, write what can be emitted) in a
  fresh interpreter, the way a build runs it;
* ``nothing changed``: the same command on its own output;
* ``one file changed``: one formula file edited (a comment appended) before
  each repetition.

The measurements run in rounds (each once per round, best of the rounds kept),
so that on a loaded machine they share its load. Prints wall-clock and CPU
seconds (the interpreter's own and its child processes') and the ratios ours /
torchgen cold (aims: cold <= 0.5, nothing changed <= 0.05), and the floors
under them, timed the same way: a fresh interpreter that only parses the
corpus files with libcst (what any transpile of them must do first) for cold,
and one that does nothing (``python -c pass``) for nothing changed.
``--compile``: also the C++ build of what was emitted (``python -m
transpiler.build``, one translation unit per formula file): cold (empty build
directory) and warm (nothing changed); ``benchmarks/corpus_build.py`` times it
without the compiler cache and at several sizes.

Run: ``python benchmarks/codegen_corpus.py [--repeat N] [--compile]``.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import torchgen
import torchgen.gen
from torchgen.packaged.autograd import load_derivatives as torchgen_load
from torchgen.packaged.autograd.gen_autograd_functions import gen_autograd_functions_lib

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from transpiler.output import replace_directory  # noqa: E402
from transpiler.yaml_import.importer import import_yaml  # noqa: E402
from transpiler.yaml_import.reader import formula_files  # noqa: E402

PACKAGED = Path(torchgen.__file__).parent / "packaged"
DERIVATIVES = PACKAGED / "autograd" / "derivatives.yaml"
NATIVE = PACKAGED / "ATen" / "native"
TEMPLATES = PACKAGED / "autograd" / "templates"


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of ``fn()``: its own CPU time plus its child processes'."""
    def cpu() -> float:
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + children.ru_utime + children.ru_stime
    wall, used = time.perf_counter(), cpu()
    fn()
    return time.perf_counter() - wall, cpu() - used


def transpile(formulas: Path, out: Path) -> str:
    """``transpile --keep-going`` in a fresh interpreter; its summary line (``N of M formulas emitted``)."""
    done = subprocess.run([sys.executable, "-m", "transpiler", "--formulas", str(formulas), "--out", str(out),
                           "--namespace", "derivatives", "--keep-going"], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"transpile failed: {done.stderr[-2000:]}")
    return next(line for line in done.stdout.splitlines() if line.endswith("formulas emitted"))


PARSE_ONLY = """\
import sys
from pathlib import Path
import libcst
for path in sorted(Path(sys.argv[1]).rglob("*.py")):
    libcst.parse_module(path.read_text(encoding="utf-8"))
"""


def floor_cold(formulas: Path) -> None:
    """A fresh interpreter that imports libcst and parses every corpus file, nothing else."""
    subprocess.run([sys.executable, "-c", PARSE_ONLY, str(formulas)], check=True)


def floor_unchanged() -> None:
    """A fresh interpreter that does nothing."""
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def build(out: Path, build_dir: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "transpiler.build", "--sources", str(out), "--build-dir",
                           str(build_dir)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"build failed: {done.stdout[-3000:]}{done.stderr[-3000:]}")


def _clear_torchgen_caches() -> None:
    torchgen_load._GLOBAL_LOAD_DERIVATIVE_CACHE.clear()
    torchgen.gen._GLOBAL_PARSE_NATIVE_YAML_CACHE.clear()
    torchgen.gen._GLOBAL_PARSE_TAGS_YAML_CACHE.clear()
    torchgen.gen.parse_tags_yaml.cache_clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compile", action="store_true", help="also time the C++ build of what was emitted")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="codegen_corpus."))
    try:
        formulas = work / "formulas"
        result = import_yaml(DERIVATIVES.read_text(encoding="utf-8"), str(DERIVATIVES))
        replace_directory(formulas, result.files)
        print(f"corpus: {result.summary()}")

        def torchgen_run() -> None:
            infos, _ = torchgen_load.load_derivatives(
                str(DERIVATIVES), str(NATIVE / "native_functions.yaml"), str(NATIVE / "tags.yaml"))
            gen_autograd_functions_lib(str(work / "torchgen"), infos, str(TEMPLATES))

        out = work / "ours"
        print(f"emitted: {transpile(formulas, out)}")
        edited = formula_files(formulas)[len(formula_files(formulas)) // 2]
        original = edited.read_text(encoding="utf-8")
        edits = iter(range(args.repeat))

        def edit() -> None:
            # new content (so a new hash) every repetition; the file stays valid
            edited.write_text(original + f"\n# edit {next(edits)}\n", encoding="utf-8")

        fresh = iter(range(args.repeat))
        # One round runs each measurement once, and the best of the rounds is kept: on a loaded
        # machine every measurement sees the same spread of load. "one file changed" leaves
        # ``out`` up to date for the "nothing changed" run after it.
        measurements = [
            ("torchgen", torchgen_run, _clear_torchgen_caches),
            ("cold", lambda: transpile(formulas, work / f"cold{next(fresh)}"), None),
            ("one file changed", lambda: transpile(formulas, out), edit),
            ("nothing changed", lambda: transpile(formulas, out), None),
            ("floor cold", lambda: floor_cold(formulas), None),
            ("floor nothing changed", floor_unchanged, None),
        ]
        best: dict[str, tuple[float, float]] = {}
        for _ in range(args.repeat):
            for label, run, before in measurements:
                if before is not None:
                    before()
                wall, cpu = _timed(run)
                kept = best.get(label, (wall, cpu))
                best[label] = (min(kept[0], wall), min(kept[1], cpu))
        builds = []
        if args.compile:
            for label in ("cold", "warm"):
                start = time.perf_counter()
                build(out, work / "build")
                builds.append((label, time.perf_counter() - start))
            files = len([p for p in out.iterdir() if p.suffix == ".cpp"])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    torchgen_wall, torchgen_cpu = best["torchgen"]
    print(f"torchgen load_derivatives + gen_autograd_functions_lib (cold): {torchgen_wall:.4f} s "
          f"(cpu {torchgen_cpu:.4f} s)")
    rows = [("ours cold", "cold", " (aim <= 0.5)"), ("ours nothing changed", "nothing changed", " (aim <= 0.05)"),
            ("ours one file changed", "one file changed", ""),
            ("floor cold (libcst parse of the corpus files alone, fresh interpreter)", "floor cold", ""),
            ("floor nothing changed (interpreter start alone)", "floor nothing changed", "")]
    for text, label, aim in rows:
        wall, cpu = best[label]
        print(f"{text}: {wall:.4f} s  ratio {wall / torchgen_wall:.4f}x torchgen cold{aim}; "
              f"cpu {cpu:.4f} s  ratio {cpu / torchgen_cpu:.4f}x")
    for label, seconds in builds:
        print(f"C++ build of the emitted corpus, {label} ({files} translation units, {os.cpu_count()} cores): "
              f"{seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
