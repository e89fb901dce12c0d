"""Codegen of the imported derivatives.yaml corpus against torchgen (DESIGN section 8).

The installed torch's derivatives.yaml is imported once into a temporary
formula directory (not timed). Then, in this one run, ``--repeat`` times:

* ``torchgen``: ``load_derivatives`` + ``gen_autograd_functions_lib`` on the
  same derivatives.yaml, its module-level parse caches cleared before each
  repetition (the cold run torchgen does in a build);
* ``cold``: ``transpile --formulas <corpus> --out <new dir> --keep-going``
  (per-formula mode: lint, transliterate, write what can be emitted) in a
  fresh interpreter, the way a build runs it, with an empty parse cache
  (``--cache-dir <new dir>``: :mod:`transpiler.model_cache`), which it reads and
  fills on both cores; ``cold, no cache``: the same with ``--no-cache`` (the work alone);
* ``nothing changed``: the same command on its own output;
* ``one file changed``: one formula file edited (new locals assigned in its first
  one-line backward, so the file is parsed, linted and emitted again) before
  each repetition, the other files' models loaded from the parse cache.

The measurements run in rounds (each once per round; the median of the rounds is
printed, the best in brackets),
so that on a loaded machine they share its load. Prints wall-clock and CPU
seconds (the interpreter's own and its child processes'; for a transpile run, also its
own process's alone: the critical path on two cores, where the processes it starts
run beside it) and the ratios ours /
torchgen cold (aims, issue 21: cold <= 1.0, one file changed <= 0.25, nothing
changed <= 0.05), and the floors under them, timed the same way: a fresh
interpreter that does nothing (``python -c pass``, under nothing changed); one
that imports what a run imports (the transpiler's emitter and linter, libcst);
one that also reads the edited file into its model (under one file changed);
one that only parses the corpus files with libcst (what any transpile of them
must do first), and the corpus and the shipped files a run reads (what a cold run
parses: the corpus calls the shipped library's operators and helpers), and the same split
by size between two processes (the best a parse on both cores could do), and the same
files read into their models by the front-end (parse, start positions, model: what a
cold run does before it lints and emits), and that reading split by size between two
processes (the best the run's reading on both cores,
:meth:`transpiler.model_cache.ModelCache.prepare`, could do); and, in this interpreter,
torchgen's reading of its two YAML files alone (``yaml`` with the C loader), under
torchgen's own time.
``--incremental``: only torchgen, the two runs on a filled cache (one file changed,
nothing changed) and their floors (interpreter start, imports, the edited file read),
skipping the cold runs and the parse floors (the one cold run that fills the cache
is not timed).
Every interpreter the benchmark starts keeps its compiled bytecode, as an installed
transpiler has it (``pip`` compiles it; a first run writes it): in a directory of
the work area (``PYTHONPYCACHEPREFIX``), whatever ``PYTHONDONTWRITEBYTECODE`` says,
filled by the untimed first run; ``--no-bytecode``: as the environment says (with
``PYTHONDONTWRITEBYTECODE=1`` every run and floor compiles the transpiler's
source, about 550 KB, again: 0.085 s of CPU, 0.04x of torchgen, measured).
``--compile``: also the C++ build of what was emitted (``python -m
transpiler.build``, one translation unit per formula file): cold (empty build
directory) and warm (nothing changed); ``benchmarks/corpus_build.py`` times it
without the compiler cache and at several sizes.

Run: ``python benchmarks/codegen_corpus.py [--repeat N] [--incremental] [--compile] [--no-bytecode]``.
"""
from __future__ import annotations

import argparse
import itertools
import os
import resource
import shutil
import statistics
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from transpiler.library_discovery import shipped_context_files  # noqa: E402
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


# ``python -m transpiler``, reporting the CPU seconds of its own process (not of the processes it starts)
TRANSPILE = """\
import os
import resource
import sys
from transpiler.cli import main
status = main(sys.argv[1:]) or 0
sys.stdout.flush()
own = resource.getrusage(resource.RUSAGE_SELF)
print(f"main process cpu {own.ru_utime + own.ru_stime}", file=sys.stderr, flush=True)
os._exit(status)
"""
MAIN_PROCESS: dict[str, float] = {}     # the CPU seconds of the last transpile's own process


def transpile(formulas: Path, out: Path, *options: str) -> str:
    """``transpile --keep-going`` in a fresh interpreter; its summary line (``N of M formulas emitted``).
    The CPU time of its own process is left in :data:`MAIN_PROCESS` (on two cores, the critical path:
    the processes it starts run beside it)."""
    done = subprocess.run([sys.executable, "-c", TRANSPILE, "--formulas", str(formulas), "--out", str(out),
                           "--namespace", "derivatives", "--keep-going", *options], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"transpile failed: {done.stderr[-2000:]}")
    MAIN_PROCESS["cpu"] = float(done.stderr.rpartition("main process cpu ")[2])
    return next(line for line in done.stdout.splitlines() if line.endswith("formulas emitted"))


PARSE_ONLY = """\
import sys
from pathlib import Path
import libcst
for path in sys.argv[1:]:
    libcst.parse_module(Path(path).read_text(encoding="utf-8"))
"""
READ_ONLY = """\
import gc
import sys
from transpiler.frontend import read_module
gc.disable()
for path in sys.argv[1:]:
    read_module(path)
"""
PARSE_ON_TWO_CORES = """\
import os
import sys
from pathlib import Path
import libcst
paths = [Path(path) for path in sys.argv[1:]]
sizes = [path.stat().st_size for path in paths]
half = next(i for i in range(len(paths) + 1) if sum(sizes[:i]) >= sum(sizes) / 2)
helper = os.fork()
for path in paths[:half] if helper else paths[half:]:
    libcst.parse_module(path.read_text(encoding="utf-8"))
if not helper:
    os._exit(0)
os.waitpid(helper, 0)
"""
READ_ON_TWO_CORES = """\
import gc
import os
import sys
from pathlib import Path
from transpiler.frontend import read_module
gc.disable()
paths = sys.argv[1:]
sizes = [Path(path).stat().st_size for path in paths]
half = next(i for i in range(len(paths) + 1) if sum(sizes[:i]) >= sum(sizes) / 2)
helper = os.fork()
for path in paths[:half] if helper else paths[half:]:
    read_module(path)
if not helper:
    os._exit(0)
os.waitpid(helper, 0)
"""
IMPORTS_ONLY = "import libcst, transpiler.cpp.generate, transpiler.cpp.emit, transpiler.frontend, transpiler.lint.runner"
ONE_FILE_ONLY = IMPORTS_ONLY + "; import sys; transpiler.frontend.read_module(sys.argv[1])"
# what ``--incremental`` times: the runs on a filled cache, their floors and torchgen's
INCREMENTAL = ("torchgen", "one file changed", "nothing changed", "floor imports", "floor one file",
               "floor nothing changed", "floor torchgen yaml")
SHIPPED = shipped_context_files()     # the shipped files a run on another package reads


def floor_parse(*paths: Path) -> None:
    """A fresh interpreter that imports libcst and parses the files ``paths``, nothing else."""
    subprocess.run([sys.executable, "-c", PARSE_ONLY, *map(str, paths)], check=True)


def floor_read(*paths: Path) -> None:
    """A fresh interpreter that reads the files ``paths`` into their models (the front-end: parse,
    start positions, model; the collector paused, as a run does), nothing else."""
    subprocess.run([sys.executable, "-c", READ_ONLY, *map(str, paths)], check=True, cwd=ROOT)


def floor_parse_on_two_cores(*paths: Path) -> None:
    """:func:`floor_parse`, the files split by size between two processes (what a cold run's parse
    on both cores could reach at best)."""
    subprocess.run([sys.executable, "-c", PARSE_ON_TWO_CORES, *map(str, paths)], check=True)


def floor_read_on_two_cores(*paths: Path) -> None:
    """:func:`floor_read`, the files split by size between two processes (what a cold run's reading
    on both cores could reach at best: the run's second process also stores what it read, and
    the run loads the summaries of those models)."""
    subprocess.run([sys.executable, "-c", READ_ON_TWO_CORES, *map(str, paths)], check=True, cwd=ROOT)


def floor_imports() -> None:
    """A fresh interpreter that imports what a transpile run imports, nothing else."""
    subprocess.run([sys.executable, "-c", IMPORTS_ONLY], check=True)


def floor_one_file(path: Path) -> None:
    """A fresh interpreter that imports what a run imports and reads one formula file into its model
    (what a run after an edit of that file must do at least), nothing else."""
    subprocess.run([sys.executable, "-c", ONE_FILE_ONLY, str(path)], check=True)


def floor_torchgen_yaml() -> None:
    """torchgen's reading of derivatives.yaml and native_functions.yaml alone (the C loader, as torchgen)."""
    import yaml

    for path in (DERIVATIVES, NATIVE / "native_functions.yaml"):
        yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)


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
    parser.add_argument("--incremental", action="store_true",
                        help="time only torchgen, one file changed, nothing changed and their floors")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="leave bytecode caching to the environment (PYTHONDONTWRITEBYTECODE)")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="codegen_corpus."))
    if not args.no_bytecode:        # the interpreters started from here keep their bytecode, in the work area
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = str(work / "bytecode")
    print(f"bytecode: {'as the environment says' if args.no_bytecode else 'kept (PYTHONPYCACHEPREFIX)'}")
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
        cache = ("--cache-dir", str(work / "cache"))
        print(f"emitted: {transpile(formulas, out, *cache)}")
        edited = formula_files(formulas)[len(formula_files(formulas)) // 2]
        corpus = sorted(formulas.rglob("*.py"))
        original = edited.read_text(encoding="utf-8")
        edits = iter(range(args.repeat))

        def edit() -> None:
            # new content (so a new hash) every repetition, as a developer's edit of a formula: new
            # locals assigned in the first one-line backward, which lint and the emitter see
            count = next(edits) + 2
            lines = original.splitlines(keepends=True)
            at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("return ")
                      and lines[i - 1].lstrip().startswith("def backward"))
            indent = lines[at][:len(lines[at]) - len(lines[at].lstrip())]
            kept = [f"{indent}unused_{n} = 0\n" for n in range(count)]
            edited.write_text("".join([*lines[:at], *kept, *lines[at:]]), encoding="utf-8")

        fresh = itertools.count()
        # One round runs each measurement once, and every round is kept: on a loaded
        # machine every measurement sees the same spread of load. "one file changed" leaves
        # ``out`` up to date for the "nothing changed" run after it.
        measurements = [
            ("torchgen", torchgen_run, _clear_torchgen_caches),
            ("cold, no cache", lambda: transpile(formulas, work / f"cold{next(fresh)}", "--no-cache"), None),
            ("cold", lambda: transpile(formulas, work / f"cold{next(fresh)}", "--cache-dir",
                                       str(work / f"cold{next(fresh)}.cache")), None),
            ("one file changed", lambda: transpile(formulas, out, *cache), edit),
            ("nothing changed", lambda: transpile(formulas, out, *cache), None),
            ("floor parse corpus", lambda: floor_parse(*corpus), None),
            ("floor parse corpus and shipped", lambda: floor_parse(*corpus, *SHIPPED), None),
            ("floor parse on 2 cores", lambda: floor_parse_on_two_cores(*corpus, *SHIPPED), None),
            ("floor read corpus and shipped", lambda: floor_read(*corpus, *SHIPPED), None),
            ("floor read on 2 cores", lambda: floor_read_on_two_cores(*corpus, *SHIPPED), None),
            ("floor imports", floor_imports, None),
            ("floor one file", lambda: floor_one_file(edited), None),
            ("floor nothing changed", floor_unchanged, None),
            ("floor torchgen yaml", floor_torchgen_yaml, None),
        ]
        if args.incremental:
            measurements = [m for m in measurements if m[0] in INCREMENTAL]
        rounds: dict[str, list[tuple[float, float]]] = {}
        main_process: dict[str, list[float]] = {}     # a transpile's own process's CPU seconds
        for _ in range(args.repeat):
            for label, run, before in measurements:
                if before is not None:
                    before()
                MAIN_PROCESS.clear()
                wall, cpu = _timed(run)
                rounds.setdefault(label, []).append((wall, cpu))
                if MAIN_PROCESS:
                    main_process.setdefault(label, []).append(MAIN_PROCESS["cpu"])
        builds = []
        if args.compile:
            for label in ("cold", "warm"):
                start = time.perf_counter()
                build(out, work / "build")
                builds.append((label, time.perf_counter() - start))
            files = len([p for p in out.iterdir() if p.suffix == ".cpp"])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    median = {label: (statistics.median(w for w, _ in kept), statistics.median(c for _, c in kept))
              for label, kept in rounds.items()}
    best = {label: (min(w for w, _ in kept), min(c for _, c in kept)) for label, kept in rounds.items()}
    print(f"torchgen load_derivatives + gen_autograd_functions_lib (cold): {median['torchgen'][0]:.4f} s "
          f"(cpu {median['torchgen'][1]:.4f} s); median of {args.repeat} rounds, [best] in brackets")
    rows = [("ours cold (empty parse cache, read and filled on 2 cores)", "cold", " (aim <= 1.0)"),
            ("ours cold, no cache", "cold, no cache", ""),
            ("ours one file changed", "one file changed", " (aim <= 0.25)"),
            ("ours nothing changed", "nothing changed", " (aim <= 0.05)"),
            ("floor: libcst parse of the corpus files alone, fresh interpreter", "floor parse corpus", ""),
            ("floor: libcst parse of the corpus and the shipped files a run reads", "floor parse corpus and shipped", ""),
            ("floor: the same parse split between 2 processes", "floor parse on 2 cores", ""),
            ("floor: the same files read into models (parse, positions, model)", "floor read corpus and shipped", ""),
            ("floor: the same reading split between 2 processes", "floor read on 2 cores", ""),
            ("floor: imports of a run alone (libcst, emitter, linter)", "floor imports", ""),
            ("floor: those imports and the edited file read into its model", "floor one file", ""),
            ("floor: interpreter start alone", "floor nothing changed", ""),
            ("floor: torchgen's YAML reading alone (part of torchgen's time)", "floor torchgen yaml", "")]
    for text, label, aim in rows:
        if label not in median:
            continue
        (wall, cpu), (best_wall, best_cpu) = median[label], best[label]
        own = ""
        if label in main_process:       # the critical path on two cores
            kept = main_process[label]
            own = (f"; main process cpu {statistics.median(kept):.4f} s  ratio "
                   f"{statistics.median(kept) / median['torchgen'][1]:.4f}x [{min(kept) / best['torchgen'][1]:.4f}x]")
        print(f"{text}: {wall:.4f} s  ratio {wall / median['torchgen'][0]:.4f}x "
              f"[{best_wall / best['torchgen'][0]:.4f}x] torchgen cold{aim}; "
              f"cpu {cpu:.4f} s  ratio {cpu / median['torchgen'][1]:.4f}x [{best_cpu / best['torchgen'][1]:.4f}x]{own}")
    for label, seconds in builds:
        print(f"C++ build of the emitted corpus, {label} ({files} translation units, {os.cpu_count()} cores): "
              f"{seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
