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

Prints the seconds and the ratios ours / torchgen cold (aims: cold <= 0.5,
nothing changed <= 0.05), and the floors under them, timed the same way: a
fresh interpreter that only parses the corpus files with libcst (what any
transpile of them must do first) for cold, and one that does nothing
(``python -c pass``) for nothing changed. ``--compile``: also the C++ build of what was
emitted (``python -m transpiler.build``, one translation unit per formula
file): cold (empty build directory) and warm (nothing changed).

Run: ``python benchmarks/codegen_corpus.py [--repeat N] [--compile]``.
"""
from __future__ import annotations

import argparse
import os
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


def _best(fn: Callable[[], object], repeat: int, before: Callable[[], object] = lambda: None) -> float:
    times = []
    for _ in range(repeat):
        before()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


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
        fresh = iter(range(args.repeat))
        torchgen_cold = _best(torchgen_run, args.repeat, _clear_torchgen_caches)
        cold = _best(lambda: transpile(formulas, work / f"cold{next(fresh)}"), args.repeat)
        print(f"emitted: {transpile(formulas, out)}")
        unchanged = _best(lambda: transpile(formulas, out), args.repeat)

        edited = formula_files(formulas)[len(formula_files(formulas)) // 2]
        original = edited.read_text(encoding="utf-8")
        edits = iter(range(args.repeat))

        def edit() -> None:
            # new content (so a new hash) every repetition; the file stays valid
            edited.write_text(original + f"\n# edit {next(edits)}\n", encoding="utf-8")

        one_changed = _best(lambda: transpile(formulas, out), args.repeat, edit)
        floors = {"cold": _best(lambda: floor_cold(formulas), args.repeat),
                  "nothing changed": _best(floor_unchanged, args.repeat)}
        builds = []
        if args.compile:
            for label in ("cold", "warm"):
                start = time.perf_counter()
                build(out, work / "build")
                builds.append((label, time.perf_counter() - start))
            files = len([p for p in out.iterdir() if p.suffix == ".cpp"])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"torchgen load_derivatives + gen_autograd_functions_lib (cold): {torchgen_cold:.4f} s")
    for label, seconds, aim in (("cold", cold, 0.5), ("nothing changed", unchanged, 0.05),
                                ("one file changed", one_changed, None)):
        ratio = seconds / torchgen_cold
        target = f" (aim <= {aim})" if aim is not None else ""
        print(f"ours {label}: {seconds:.4f} s  ratio {ratio:.4f}x torchgen cold{target}")
    for label, what in (("cold", "libcst parse of the corpus files alone"),
                        ("nothing changed", "interpreter start alone")):
        print(f"floor {label} ({what}, fresh interpreter): {floors[label]:.4f} s  "
              f"ratio {floors[label] / torchgen_cold:.4f}x torchgen cold")
    for label, seconds in builds:
        print(f"C++ build of the emitted corpus, {label} ({files} translation units, {os.cpu_count()} cores): "
              f"{seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
