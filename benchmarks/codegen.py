"""Benchmark: ``transpile`` (lint + C++ generation) against torchgen on the same machine, same run.

Peer: torchgen's ``load_derivatives`` + ``gen_autograd_functions_lib`` on the
full installed ``derivatives.yaml`` (the Functions.h/.cpp step of PyTorch's
build). Every measurement is a fresh process (torchgen caches globally), timed
from outside, best of ``--repeat``.

Rows per corpus (a formula directory; ``--corpus NAME=DIR``, repeatable; the
default is the shipped ``formulas/``):

* cold: empty output directory and empty parse cache (``--cache-dir``, which
  the run fills: :mod:`transpiler.model_cache`);
* nothing changed: the same command again (the MANIFEST short-cut);
* one file changed: one formula file edited, then ``transpile`` (the other
  files' models loaded from the parse cache the runs before filled);
* 1x / 4x / 16x: the corpus plus renamed copies of its formula modules, cold,
  to show how time grows with the formula count.

Usage: ``python benchmarks/codegen.py [--repeat N] [--corpus NAME=DIR ...]``
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

TORCHGEN = """
import os, sys, torchgen
from torchgen.packaged.autograd.load_derivatives import load_derivatives
from torchgen.packaged.autograd.gen_autograd_functions import gen_autograd_functions_lib
root = os.path.join(os.path.dirname(torchgen.__file__), "packaged")
infos, _ = load_derivatives(os.path.join(root, "autograd", "derivatives.yaml"),
                            os.path.join(root, "ATen", "native", "native_functions.yaml"),
                            os.path.join(root, "ATen", "native", "tags.yaml"))
gen_autograd_functions_lib(sys.argv[1], infos, os.path.join(root, "autograd", "templates"))
print(sum(len(v) for v in infos.values()))
"""


STAGES = """
import sys, time
from transpiler.lint.runner import lint_paths
from transpiler.frontend import load_library
from transpiler.cpp.emit import emit_library
t0 = time.perf_counter(); lint_paths([sys.argv[1]])
t1 = time.perf_counter(); library = load_library(sys.argv[1])
t2 = time.perf_counter(); emit_library(library)
t3 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f} {t3 - t2:.3f}")
"""


class CommandFailed(Exception):
    """A timed command exited non-zero (e.g. a corpus with lint or transliteration findings)."""


def timed(command: list[str], repeat: int, prepare=None) -> float:
    """Best wall time of ``command`` over ``repeat`` fresh processes (``prepare()`` before each)."""
    best = float("inf")
    for _ in range(repeat):
        if prepare is not None:
            prepare()
        started = time.perf_counter()
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise CommandFailed(f"{' '.join(command)} failed:\n{(done.stdout + done.stderr)[-2000:]}")
        best = min(best, elapsed)
    return best


def transpile_command(formulas: Path, out: Path) -> list[str]:
    # its own namespace: a copy of the shipped library registering torch.ops.formulas is refused (DB206);
    # its parse cache next to the output (removed with it for a cold run)
    return [sys.executable, "-m", "transpiler", "--formulas", str(formulas), "--out", str(out),
            "--namespace", "codegen_bench", "--cache-dir", f"{out}.cache"]


def removed(out: Path) -> None:
    """No output directory and no parse cache: what a cold run starts from."""
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(f"{out}.cache", ignore_errors=True)


_DERIVATIVE = re.compile(r'(@derivative\(\s*")([A-Za-z_]\w*)')
_DECLARED = re.compile(r'(@(?:derivative|family_member)\(\s*")([A-Za-z_]\w*)')    # a family's members too
_TOP_DEF = re.compile(r"^def ([A-Za-z_]\w*)\(", re.M)


def replicate(corpus: Path, factor: int, into: Path) -> Path:
    """``corpus`` plus ``factor - 1`` renamed copies of every module that declares formulas."""
    shutil.copytree(corpus, into)
    for copy in range(1, factor):
        for module in sorted(corpus.glob("*.py")):
            text = module.read_text()
            if not _DERIVATIVE.search(text):
                continue
            text = _DECLARED.sub(lambda m: f"{m[1]}{m[2]}_c{copy}", text)
            text = _TOP_DEF.sub(lambda m: f"def {m[1]}_c{copy}(", text)
            (into / f"{module.stem}_c{copy}.py").write_text(text)
    return into


def formula_count(directory: Path) -> int:
    return sum(len(_DERIVATIVE.findall(p.read_text())) for p in directory.glob("*.py"))


def bench_corpus(name: str, corpus: Path, repeat: int, scratch: Path, torchgen_s: float) -> list[tuple[str, float]]:
    rows = []
    work = scratch / name
    formulas = replicate(corpus, 1, work / "formulas")
    out = work / "out_cpp"
    cold = timed(transpile_command(formulas, out), repeat, lambda: removed(out))
    rows.append((f"{name}: cold ({formula_count(formulas)} formulas)", cold))
    rows.append((f"{name}: nothing changed", timed(transpile_command(formulas, out), repeat)))
    edited = next(p for p in sorted(formulas.glob("*.py")) if _DERIVATIVE.search(p.read_text()))
    original = edited.read_text()
    counter = iter(range(10**6))

    def touch() -> None:
        edited.write_text(original + f"\n# edit {next(counter)}\n")

    rows.append((f"{name}: one file changed ({edited.name})", timed(transpile_command(formulas, out), repeat, touch)))
    for factor in (1, 4, 16):
        grown = replicate(corpus, factor, work / f"x{factor}")
        grown_out = work / f"x{factor}_out"
        seconds = timed(transpile_command(grown, grown_out), repeat,
                        lambda: removed(grown_out))
        rows.append((f"{name}: {factor}x cold ({formula_count(grown)} formulas)", seconds))
    stages = subprocess.run([sys.executable, "-c", STAGES, str(grown)], cwd=REPO, capture_output=True, text=True)
    lint_s, frontend_s, emit_s = map(float, stages.stdout.split())
    count = formula_count(grown)
    print(f"  {name} 16x, in-process stages: lint {lint_s:.2f} s, front-end {frontend_s:.2f} s, "
          f"C++ emission {emit_s:.2f} s ({emit_s / count * 1e3:.2f} ms per formula)")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--corpus", action="append", default=[], metavar="NAME=DIR",
                        help="a formula directory to benchmark (default: formulas=formulas/)")
    args = parser.parse_args(argv)
    corpora = [c.split("=", 1) for c in args.corpus] or [["formulas", str(REPO / "formulas")]]
    with tempfile.TemporaryDirectory(prefix="codegen-bench-") as scratch_dir:
        scratch = Path(scratch_dir)
        torchgen_out = scratch / "torchgen"
        torchgen_out.mkdir()
        torchgen_s = timed([sys.executable, "-c", TORCHGEN, str(torchgen_out)], args.repeat)
        entries = subprocess.run([sys.executable, "-c", TORCHGEN, str(torchgen_out)], capture_output=True,
                                 text=True, cwd=REPO).stdout.strip()
        print(f"peer: torchgen load_derivatives + gen_autograd_functions_lib, full derivatives.yaml "
              f"({entries} differentiability infos): {torchgen_s:.3f} s (best of {args.repeat})")
        per_entry = torchgen_s / int(entries)
        for name, directory in corpora:
            try:
                rows = bench_corpus(name, Path(directory).resolve(), args.repeat, scratch, torchgen_s)
            except CommandFailed as failure:
                print(f"corpus {name}: no timings, transpile did not succeed on it\n{failure}")
                continue
            print(f"{'transpile row':58} {'seconds':>8} {'vs torchgen':>12}")
            for label, seconds in rows:
                print(f"{label:58} {seconds:8.3f} {seconds / torchgen_s:11.2f}x")
            largest = rows[-1][1] / formula_count(scratch / name / "x16")
            print(f"per formula at 16x: {largest * 1e3:.2f} ms; torchgen per entry: {per_entry * 1e3:.2f} ms "
                  f"(ratio {largest / per_entry:.2f})")
    print(f"(each row is a fresh process; {os.cpu_count()} CPUs shared with other work)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
