"""``transpile [--formulas DIR] [--out DIR] [--namespace NAME] [--check] [--no-lint]``: formulas -> C++.

Defaults come from the user's project (:mod:`transpiler.project`): the
working directory's ``formulas/`` and ``out_cpp/``, or the paths of a
``[tool.transpile]`` table in its ``pyproject.toml``. The operators register as
``torch.ops.<namespace>``, by default the formula directory's name (the
shipped ``formulas/`` keeps ``formulas``), so packages load side by side.

Lints first (any finding: exit 1, nothing written), transliterates, and writes
through :mod:`transpiler.output`: only into a missing or empty directory or
one that holds nothing but what ``transpile`` wrote (its ``MANIFEST``),
swapped in whole (files whose bytes did not change keep their timestamps, so
ninja recompiles only what changed). Output is deterministic, whatever the
spelling of ``--formulas``. ``MANIFEST`` in the output records the namespace
and content hashes of the inputs, the generator and the outputs, so a run with
nothing changed stops before parsing anything. An output that cannot or must
not be written is a one-line diagnostic and exit 2.

``--no-lint`` is DANGEROUS: it compiles formulas the linter rejects, e.g. one
that captures an intermediate, whose double backward is then silently wrong.
It exists to demonstrate exactly that.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from transpiler.diagnostics import Diagnostic
from transpiler.output import OutputError, check_directory, replace_directory
from transpiler.project import SHIPPED_NAMESPACE, ProjectError, check_namespace, default_namespace, find_project

REPO = Path(__file__).resolve().parents[2]   # the installed packages' root (site-packages or a checkout)
SHIPPED_FORMULAS = REPO / "formulas"
MANIFEST = "MANIFEST"
GENERATOR_SOURCES = REPO / "transpiler"

if TYPE_CHECKING:   # imported lazily: an up-to-date run never loads libcst
    from transpiler.model import Library


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def input_files(formulas: Path) -> list[Path]:
    return sorted(formulas.rglob("*.py"))


def manifest_text(formulas: Path, files: dict[str, str], namespace: str) -> str:
    """The namespace and hashes of the generator, every input and every output (one per line, sorted)."""
    generator = hashlib.sha256()
    for path in sorted(GENERATOR_SOURCES.rglob("*.py")):
        generator.update(path.read_bytes())
    lines = [f"generator {generator.hexdigest()}", f"namespace {namespace}"]
    lines += [f"input {p.relative_to(formulas).as_posix()} {_digest(p.read_bytes())}" for p in input_files(formulas)]
    lines += [f"output {name} {_digest(text.encode())}" for name, text in sorted(files.items())]
    return "\n".join(lines) + "\n"


def recorded(out: Path) -> dict[str, list[str]] | None:
    """``out``'s MANIFEST as kind -> entries (``output`` -> file names), or None when it has none of ours."""
    manifest = out / MANIFEST
    if not manifest.is_file():
        return None
    lines = manifest.read_text(encoding="utf-8", errors="replace").splitlines()
    if not lines or not lines[0].startswith("generator "):
        return None
    table: dict[str, list[str]] = {}
    for line in lines:
        kind, _, rest = line.partition(" ")
        table.setdefault(kind, []).append(rest.split(" ")[0])
    return table


def written_by_transpile(out: Path) -> set[str]:
    """The names in ``out`` that transpile wrote (its MANIFEST and the outputs it lists)."""
    return {MANIFEST, *(recorded(out) or {}).get("output", [])}


def up_to_date(formulas: Path, out: Path, namespace: str) -> bool:
    """Whether ``out`` holds what the current inputs and generator would write, by hashes alone."""
    manifest = out / MANIFEST
    if not manifest.is_file():
        return False
    recorded_lines = manifest.read_text().splitlines()
    outputs = {}
    for line in recorded_lines:
        kind, *rest = line.split(" ")
        if kind == "output":
            outputs[rest[0]] = rest[1]
    present = {p.name for p in out.iterdir()} - {MANIFEST}
    if present != set(outputs):
        return False
    if any(_digest((out / name).read_bytes()) != digest for name, digest in outputs.items()):
        return False
    expected = manifest_text(formulas, {}, namespace)
    return [line for line in recorded_lines if not line.startswith("output ")] == expected.splitlines()


@dataclass(frozen=True)
class Generated:
    """What a run would write (``files``, MANIFEST included) or why it writes nothing (``diagnostics``)."""

    files: dict[str, str]
    diagnostics: list[Diagnostic]
    ops: int = 0
    nodes: int = 0
    helpers: int = 0


def generate(formulas: Path, lint: bool = True, namespace: str | None = None) -> Generated:
    """Lint and transliterate ``formulas`` in memory, registered as ``torch.ops.<namespace>``
    (default: the directory's name)."""
    from transpiler.frontend import load_library

    namespace = namespace or default_namespace(formulas, SHIPPED_FORMULAS)
    if lint:
        from transpiler.lint.runner import lint_paths

        findings = lint_paths([str(formulas)])
        if findings:
            return Generated({}, sorted(findings))
    library = load_library(str(formulas))
    if library.diagnostics:
        return Generated({}, sorted(library.diagnostics))
    from transpiler.cpp.emit import emit_library

    shipped = _shipped_library(formulas)
    known = shipped.operators if shipped is not None else {}
    output, diagnostics = emit_library(library, known, namespace, str(formulas))
    if shipped is not None and namespace == SHIPPED_NAMESPACE:
        diagnostics = sorted(diagnostics + _registered_twice(library, shipped))
    if diagnostics:
        return Generated({}, diagnostics)
    files = {**output.files, MANIFEST: manifest_text(formulas, output.files, namespace)}
    return Generated(files, [], output.ops, output.nodes, output.helpers)


def _shipped_library(formulas: Path) -> Library | None:
    """The shipped library, whose operators another formula directory may call (as lint allows);
    None when ``formulas`` is the shipped library itself."""
    if formulas.resolve() == SHIPPED_FORMULAS.resolve():
        return None
    from transpiler.frontend import load_library

    return load_library(str(SHIPPED_FORMULAS))


def _registered_twice(library: Library, shipped: Library) -> list[Diagnostic]:
    """Formulas that would register an operator the shipped library registers in the same namespace:
    loading both libraries would abort the process (``registered multiple times``)."""
    from transpiler.cpp.expressions import DUPLICATE_OPERATOR
    from transpiler.cpp.nodes import schema_node

    taken = {f.op_name for f in shipped.formulas}
    found = []
    for module in library.modules:
        for formula in module.formulas:
            if formula.op_name in taken:
                where = module.span(schema_node(formula))
                found.append(Diagnostic(
                    module.path, where.line, where.col, DUPLICATE_OPERATOR,
                    f"{SHIPPED_NAMESPACE}::{formula.op_name} is registered by the shipped library too; "
                    f"choose another `--namespace` (e.g. the package's name) so both can be loaded"))
    return found


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


def _shown(path: Path) -> Path:
    """``path`` relative to the working directory when it lies below it (diagnostics read better)."""
    relative = os.path.relpath(path.resolve())
    return Path(relative) if not relative.startswith("..") else path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="transpile", description="Lint the formulas and write them as C++.")
    parser.add_argument("--formulas", type=Path, help="formula directory (default: the project's formulas/)")
    parser.add_argument("--out", type=Path, help="output directory (default: the project's out_cpp/)")
    parser.add_argument("--namespace", help="register as torch.ops.NAMESPACE (default: the formula directory's name)")
    parser.add_argument("--check", action="store_true", help="exit 1 if --out differs from what would be written")
    parser.add_argument("--no-lint", action="store_true",
                        help="DANGEROUS: skip the linter; formulas it rejects compile and give wrong double backward")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except (OutputError, ProjectError) as error:
        print(f"transpile: {error}", file=sys.stderr)
    except OSError as error:
        print(f"transpile: {error.filename or ''}: {error.strerror or error}", file=sys.stderr)
    return 2


def _run(args: argparse.Namespace) -> int:
    project = find_project()
    namespace = args.namespace or (project.namespace if args.formulas is None else None)
    formulas, out = _shown(args.formulas or project.formulas), _shown(args.out or project.out)
    namespace = check_namespace(namespace or default_namespace(formulas, SHIPPED_FORMULAS))
    if not formulas.is_dir():
        print(f"transpile: {formulas}: not a directory (give --formulas DIR or run in the project)",
              file=sys.stderr)
        return 2
    if not args.check:
        check_directory(out, lambda d: recorded(d) is not None, written_by_transpile, "transpile", [formulas])
    started = time.perf_counter()
    if not args.no_lint and up_to_date(formulas, out, namespace):
        print(f"{out}: up to date ({time.perf_counter() - started:.3f} s)")
        return 0
    result = generate(formulas, lint=not args.no_lint, namespace=namespace)
    for diagnostic in result.diagnostics:
        print(diagnostic.format())
    if result.diagnostics:
        print(f"{len(result.diagnostics)} finding(s): nothing written to {out}", file=sys.stderr)
        return 1
    files = result.files
    if args.check:
        changed = differs(out, files, manifest=False)
        if changed:
            print(f"{out} is out of date ({', '.join(changed)}); run `transpile`")
            return 1
        print(f"{out}: up to date")
        return 0
    changed = differs(out, files)
    if changed:
        replace_directory(out, files)
    elapsed = time.perf_counter() - started
    print(f"transpile: {formulas} -> {out} (torch.ops.{namespace})")
    print(f"  ops {result.ops}   nodes {result.nodes}   helpers {result.helpers}   files {len(files)}   "
          f"changed {len(changed)}   {elapsed:.2f} s")
    return 0
