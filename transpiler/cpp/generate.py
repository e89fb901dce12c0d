"""``transpile [--formulas DIR] [--out DIR] [--check] [--no-lint]``: formulas -> ``out_cpp/``.

Lints first (any finding: exit 1, nothing written), transliterates, and writes
atomically: the files go to a temporary directory next to the target which
then replaces it (files whose bytes did not change keep their timestamps, so
ninja recompiles only what changed). Output is deterministic. ``MANIFEST``
in the output records content hashes of the inputs, the generator and the
outputs, so a run with nothing changed stops before parsing anything.

``--no-lint`` is DANGEROUS: it compiles formulas the linter rejects, e.g. one
that captures an intermediate, whose double backward is then silently wrong.
It exists to demonstrate exactly that.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from transpiler.diagnostics import Diagnostic
from transpiler.schema import FunctionSchema

REPO = Path(__file__).resolve().parents[2]
MANIFEST = "MANIFEST"
GENERATOR_SOURCES = REPO / "transpiler"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def input_files(formulas: Path) -> list[Path]:
    return sorted(formulas.rglob("*.py"))


def manifest_text(formulas: Path, files: dict[str, str]) -> str:
    """Hashes of the generator, every input and every output (one per line, sorted)."""
    generator = hashlib.sha256()
    for path in sorted(GENERATOR_SOURCES.rglob("*.py")):
        generator.update(path.read_bytes())
    lines = [f"generator {generator.hexdigest()}"]
    lines += [f"input {p.relative_to(formulas).as_posix()} {_digest(p.read_bytes())}" for p in input_files(formulas)]
    lines += [f"output {name} {_digest(text.encode())}" for name, text in sorted(files.items())]
    return "\n".join(lines) + "\n"


def up_to_date(formulas: Path, out: Path) -> bool:
    """Whether ``out`` holds what the current inputs and generator would write, by hashes alone."""
    manifest = out / MANIFEST
    if not manifest.is_file():
        return False
    recorded = manifest.read_text().splitlines()
    outputs = {}
    for line in recorded:
        kind, *rest = line.split(" ")
        if kind == "output":
            outputs[rest[0]] = rest[1]
    present = {p.name for p in out.iterdir()} - {MANIFEST}
    if present != set(outputs):
        return False
    if any(_digest((out / name).read_bytes()) != digest for name, digest in outputs.items()):
        return False
    expected = manifest_text(formulas, {})
    return [line for line in recorded if not line.startswith("output ")] == expected.splitlines()


@dataclass(frozen=True)
class Generated:
    """What a run would write (``files``, MANIFEST included) or why it writes nothing (``diagnostics``)."""

    files: dict[str, str]
    diagnostics: list[Diagnostic]
    ops: int = 0
    nodes: int = 0
    helpers: int = 0


def generate(formulas: Path, lint: bool = True) -> Generated:
    """Lint and transliterate ``formulas`` in memory."""
    from transpiler.frontend import load_library

    if lint:
        from transpiler.lint.runner import lint_paths

        findings = lint_paths([str(formulas)])
        if findings:
            return Generated({}, sorted(findings))
    library = load_library(str(formulas))
    if library.diagnostics:
        return Generated({}, sorted(library.diagnostics))
    from transpiler.cpp.emit import emit_library

    output, diagnostics = emit_library(library, _shipped_operators(formulas))
    if diagnostics:
        return Generated({}, diagnostics)
    files = {**output.files, MANIFEST: manifest_text(formulas, output.files)}
    return Generated(files, [], output.ops, output.nodes, output.helpers)


def _shipped_operators(formulas: Path) -> dict[str, FunctionSchema]:
    """The shipped library's operators, which another formula directory may call (as lint allows)."""
    shipped = REPO / "formulas"
    if formulas.resolve() == shipped.resolve():
        return {}
    from transpiler.frontend import load_library

    return load_library(str(shipped)).operators


def differs(out: Path, files: dict[str, str], manifest: bool = True) -> list[str]:
    """Names of files that ``out`` lacks, has in excess, or holds with other bytes
    (``manifest=False``: the generated C++ only, not its hash record)."""
    present = {p.name for p in out.iterdir()} if out.is_dir() else set()
    if not manifest:
        present.discard(MANIFEST)
        files = {n: t for n, t in files.items() if n != MANIFEST}
    changed = sorted(present ^ set(files))
    changed += sorted(n for n in present & set(files) if (out / n).read_bytes() != files[n].encode())
    return changed


def write_atomically(out: Path, files: dict[str, str]) -> None:
    """Replace ``out`` by exactly ``files``; an interrupted run leaves ``out`` as it was."""
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-new-", dir=out.parent))
    retired = Path(tempfile.mkdtemp(prefix=f".{out.name}-old-", dir=out.parent))
    try:
        for name, text in sorted(files.items()):
            old = out / name
            if old.is_file() and old.read_bytes() == text.encode():
                shutil.copy2(old, staging / name)     # same bytes: keep the timestamp for ninja
            else:
                (staging / name).write_bytes(text.encode())
        if out.exists():
            os.replace(out, retired / out.name)
        os.replace(staging, out)
    except BaseException:
        if (retired / out.name).exists() and not out.exists():
            os.rename(retired / out.name, out)      # put the old tree back
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(retired, ignore_errors=True)


def _shown(path: Path) -> Path:
    """``path`` relative to the working directory when it lies below it (diagnostics read better)."""
    relative = os.path.relpath(path.resolve())
    return Path(relative) if not relative.startswith("..") else path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="transpile", description="Lint the formulas and write them as C++.")
    parser.add_argument("--formulas", type=Path, default=REPO / "formulas", help="formula directory (default: formulas/)")
    parser.add_argument("--out", type=Path, default=REPO / "out_cpp", help="output directory (default: out_cpp/)")
    parser.add_argument("--check", action="store_true", help="exit 1 if --out differs from what would be written")
    parser.add_argument("--no-lint", action="store_true",
                        help="DANGEROUS: skip the linter; formulas it rejects compile and give wrong double backward")
    args = parser.parse_args(argv)
    args.formulas, args.out = _shown(args.formulas), _shown(args.out)
    if not args.formulas.is_dir():
        print(f"{args.formulas}: not a directory", file=sys.stderr)
        return 2
    started = time.perf_counter()
    if not args.no_lint and up_to_date(args.formulas, args.out):
        print(f"{args.out}: up to date ({time.perf_counter() - started:.3f} s)")
        return 0
    result = generate(args.formulas, lint=not args.no_lint)
    for diagnostic in result.diagnostics:
        print(diagnostic.format())
    if result.diagnostics:
        print(f"{len(result.diagnostics)} finding(s): nothing written to {args.out}", file=sys.stderr)
        return 1
    files = result.files
    if args.check:
        changed = differs(args.out, files, manifest=False)
        if changed:
            print(f"{args.out} is out of date ({', '.join(changed)}); run `transpile`")
            return 1
        print(f"{args.out}: up to date")
        return 0
    changed = differs(args.out, files)
    if changed:
        write_atomically(args.out, files)
    elapsed = time.perf_counter() - started
    print(f"transpile: {args.formulas} -> {args.out}")
    print(f"  ops {result.ops}   nodes {result.nodes}   helpers {result.helpers}   files {len(files)}   "
          f"changed {len(changed)}   {elapsed:.2f} s")
    return 0
