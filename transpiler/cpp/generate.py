"""``transpile [--formulas DIR] [--out DIR] [--namespace NAME] [--check] [--no-lint]``: formulas -> C++.

Defaults come from the user's project (:mod:`transpiler.project`): the
working directory's ``formulas/`` and ``out_cpp/``, or the paths of a
``[tool.transpile]`` table in its ``pyproject.toml``. The operators register as
``torch.ops.<namespace>``, by default the formula directory's name (the
shipped ``formulas/`` keeps ``formulas``), so packages load side by side.

The run itself is :func:`transpiler.pipeline.run` (the package and the shipped
library read once, linted, emitted once; any finding: exit 1, nothing
written); this command writes what it returns through :mod:`transpiler.output`:
only into a missing or empty directory or one that holds nothing but what
``transpile`` wrote (its ``MANIFEST``), swapped in whole (files whose bytes
did not change keep their timestamps, so ninja recompiles only what changed). Output is deterministic, whatever the
spelling of ``--formulas``. ``MANIFEST`` in the output records the namespace
and content hashes of the inputs, the generator and the outputs, so a run with
nothing changed stops before parsing anything; a run after an edit parses only
the edited files, the others' models are loaded (:mod:`transpiler.model_cache`:
``--cache-dir DIR``, ``--no-cache``) and only the edited modules and what depends
on them are linted and emitted again, the others' results kept in the same
directory (:mod:`transpiler.module_results`). An output that cannot or must not be
written is a one-line diagnostic and exit 2.

``--keep-going`` is per-formula mode (for a corpus such as an imported
derivatives.yaml): every formula that lints and transliterates is written,
each one that does not is reported as ``path:line:col: CODE message [entry]``
(also kept in ``REFUSED`` in the output), then ``N of M formulas emitted``.
A helper that cannot be transliterated is left out with its callers; a refused
formula's operator stays declared, so formulas calling it are emitted; a finding
inside a ``jvp`` leaves out the jvp alone (reported as ``[op jvp]``): the backward
is emitted and forward AD raises torch's "does not support it" error. Exit 0
when nothing was left out, 1 when something was (what could be emitted is
written all the same), 2 as always. Without it (the default, and what the
shipped library uses) any finding writes nothing.

``--no-lint`` is DANGEROUS: it compiles formulas the linter rejects, e.g. one
that captures an intermediate, whose double backward is then silently wrong.
It exists to demonstrate exactly that.
"""
from __future__ import annotations

import argparse
import gc
import hashlib
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from transpiler import model_cache
from transpiler.cpp.per_formula import REFUSED, summary_line
from transpiler.diagnostics import printable
from transpiler.library_discovery import SHIPPED_FORMULAS, shipped_context_files
from transpiler.output import OutputError, check_directory, replace_directory
from transpiler.project import ProjectError, check_namespace, default_namespace, find_project
from transpiler.sources import python_sources, read_regular

if TYPE_CHECKING:
    from transpiler.pipeline import PipelineResult

REPO = Path(__file__).resolve().parents[2]   # the installed packages' root (site-packages or a checkout)
MANIFEST = "MANIFEST"

def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def input_files(formulas: Path) -> list[Path]:
    """The formula files under ``formulas`` (every ``*.py`` :func:`python_sources` keeps), sorted."""
    return python_sources(formulas).files


def input_lines(formulas: Path) -> list[str]:
    """MANIFEST's lines for the inputs: each formula file's name and the hash of its bytes."""
    return [f"input {p.relative_to(formulas).as_posix()} {_digest(read_regular(p)[1])}" for p in input_files(formulas)]


def manifest_text(formulas: Path, files: dict[str, str], namespace: str, keep_going: bool = False,
                  inputs: list[str] | None = None) -> str:
    """The namespace, the mode and the hashes of the generator, every input (``inputs``, as
    :func:`input_lines` gives them, when the run hashed them already) and every output (one per
    line, sorted)."""
    lines = [f"generator {model_cache.generator_digest()}", f"namespace {namespace}"]
    lines += ["mode per-formula"] if keep_going else []
    lines += input_lines(formulas) if inputs is None else inputs
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


def up_to_date(formulas: Path, out: Path, namespace: str, keep_going: bool = False,
               inputs: list[str] | None = None) -> bool:
    """Whether ``out`` holds what the current inputs (``inputs``: :func:`input_lines`) and generator
    would write, by hashes alone."""
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
    expected = manifest_text(formulas, {}, namespace, keep_going, inputs)
    if [line for line in recorded_lines if not line.startswith("output ")] != expected.splitlines():
        return False        # an input changed: the outputs need not be read (a run after an edit)
    return all(_digest((out / name).read_bytes()) == digest for name, digest in outputs.items())


def generate(formulas: Path, lint: bool = True, namespace: str | None = None,
             keep_going: bool = False, inputs: list[str] | None = None) -> PipelineResult:
    """Lint and transliterate ``formulas`` in memory (:func:`transpiler.pipeline.run`), registered as
    ``torch.ops.<namespace>`` (default: the directory's name); the files it would write include
    ``MANIFEST`` (``inputs``: its input lines, when the run hashed them already) and, in per-formula
    mode (``keep_going``, :func:`generate_each`), ``REFUSED``."""
    from transpiler.pipeline import run      # here: a run with nothing to do never loads the pipeline

    namespace = namespace or default_namespace(formulas, SHIPPED_FORMULAS)
    if keep_going:
        return generate_each(formulas, lint, namespace, inputs)
    result = run(formulas, namespace, lint)
    if result.diagnostics:
        return result
    manifest = manifest_text(formulas, result.files, namespace, inputs=inputs)
    return replace(result, files={**result.files, MANIFEST: manifest})


def generate_each(formulas: Path, lint: bool, namespace: str, inputs: list[str] | None = None) -> PipelineResult:
    """Per-formula mode: emit every formula that lints and transliterates and leave out each one
    that does not (its first diagnostic says why); a helper that cannot be transliterated is left
    out with the formulas that call it. The files hold what was emitted, and ``REFUSED`` the
    refusals, so that a run with nothing changed reports them again without parsing anything."""
    from transpiler.pipeline import run

    result = run(formulas, namespace, lint, keep_going=True)
    report = [r.format() for r in result.every_refusal]
    report.append(summary_line(result.ops, result.formulas))
    files = {**result.files, REFUSED: "\n".join(report) + "\n"}
    files[MANIFEST] = manifest_text(formulas, files, namespace, keep_going=True, inputs=inputs)
    return replace(result, files=files)


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
    """``transpile``: lint the formulas and write them as C++ (``--check``: compare instead of writing)."""
    from transpiler.cli import commands_help

    parser = argparse.ArgumentParser(prog="transpile", description="Lint the formulas and write them as C++.",
                                     epilog=commands_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--formulas", type=Path, help="formula directory (default: the project's formulas/)")
    parser.add_argument("--out", type=Path, help="output directory (default: the project's out_cpp/)")
    parser.add_argument("--namespace", help="register as torch.ops.NAMESPACE (default: the formula directory's name)")
    parser.add_argument("--check", action="store_true", help="exit 1 if --out differs from what would be written")
    parser.add_argument("--keep-going", action="store_true",
                        help="per-formula mode: emit every formula that lints and transliterates, report each "
                             "one that does not (exit 1 when any is left out, the others still written)")
    parser.add_argument("--cache-dir", type=Path,
                        help=f"keep parsed formula files here (default: {model_cache.DIRECTORY}/ of the project's build cache)")
    parser.add_argument("--no-cache", action="store_true", help="parse every formula file, keep nothing")
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
    listing = python_sources(formulas)
    for note in listing.skipped:
        print(f"transpile: note: {note}", file=sys.stderr)
    for path in listing.misnamed:
        print(f"transpile: {printable(str(path))}: not a Python module name; rename it (a formula file and the "
              "directories below --formulas are modules of their package: letters, digits and _)", file=sys.stderr)
    if listing.misnamed:
        return 2
    if not args.check:
        check_directory(out, lambda d: recorded(d) is not None, written_by_transpile, "transpile", [formulas])
    started = time.perf_counter()
    inputs = input_lines(formulas)      # hashed once: the up-to-date check, then the MANIFEST written
    if not args.no_lint and up_to_date(formulas, out, namespace, args.keep_going, inputs):
        if args.keep_going:     # the refusals of the run that wrote ``out``, and its summary
            report = (out / REFUSED).read_text(encoding="utf-8")
            print(report, end="")
            print(f"{out}: up to date ({time.perf_counter() - started:.3f} s)")
            return 1 if report.count("\n") > 1 else 0
        print(f"{out}: up to date: {formulas} and the transpiler are unchanged since they were linted "
              f"clean and written there (MANIFEST) ({time.perf_counter() - started:.3f} s)")
        return 0
    from transpiler import module_results     # here, as the pipeline: not loaded when nothing changed
    from transpiler.pipeline import per_file_pass_ahead

    # The collector is paused for the run: what it makes lives until the run ends and holds no cycles
    # to find (its models, their results); its passes over what linting and emitting make were about
    # 3 % of a run after an edit, and a cold run's peak memory is the same without them (measured).
    collecting = gc.isenabled()
    gc.disable()
    try:
        cache_dir = None if args.no_cache else args.cache_dir or project.build_dir / model_cache.DIRECTORY
        with model_cache.kept_in(cache_dir) as cache, module_results.kept_in(cache_dir, formulas, namespace,
                                                                             args.keep_going), \
                per_file_pass_ahead(formulas) as per_file_pass:
            if cache is not None:       # every model read first: the new ones are stored on the second core
                from transpiler.frontend import parse_module

                shipped = [] if formulas.resolve() == SHIPPED_FORMULAS.resolve() else shipped_context_files()
                paths = [str(p) for p in [*listing.files, *shipped]]
                if fresh := cache.uncached(paths):       # the slow part, said (later runs read them back)
                    print(f"transpile: reading {fresh} formula files (once: kept parsed in {cache_dir})", file=sys.stderr)
                # lint's per-file pass needs no model: run while the second process reads its share
                cache.prepare(paths, parse_module, None if args.no_lint else per_file_pass)
            result = generate(formulas, lint=not args.no_lint, namespace=namespace, keep_going=args.keep_going,
                              inputs=inputs)
    finally:
        if collecting:
            gc.enable()
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
    if args.keep_going:
        print(files[REFUSED], end="")
    print(f"transpile: {formulas} -> {out} (torch.ops.{namespace})")
    print(f"  ops {result.ops}   nodes {result.nodes}   helpers {result.helpers}   files {len(files)}   "
          f"changed {len(changed)}   {elapsed:.2f} s")
    return 1 if args.keep_going and files[REFUSED].count("\n") > 1 else 0
