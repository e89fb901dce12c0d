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
import hashlib
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from transpiler.diagnostics import Diagnostic, printable
from transpiler.output import OutputError, check_directory, replace_directory
from transpiler.project import SHIPPED_NAMESPACE, ProjectError, check_namespace, default_namespace, find_project
from transpiler.sources import python_sources, read_regular

REPO = Path(__file__).resolve().parents[2]   # the installed packages' root (site-packages or a checkout)
SHIPPED_FORMULAS = REPO / "formulas"
MANIFEST = "MANIFEST"
GENERATOR_SOURCES = REPO / "transpiler"

if TYPE_CHECKING:   # imported lazily: an up-to-date run never loads libcst
    import libcst as cst

    from transpiler.model import Formula, FormulaModule, Library


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def input_files(formulas: Path) -> list[Path]:
    return python_sources(formulas).files


def manifest_text(formulas: Path, files: dict[str, str], namespace: str, keep_going: bool = False) -> str:
    """The namespace, the mode and the hashes of the generator, every input and every output (one
    per line, sorted)."""
    generator = hashlib.sha256()
    for path in sorted(p for p in GENERATOR_SOURCES.rglob("*") if p.suffix in (".py", ".h")):   # .h: runtime.h
        generator.update(path.read_bytes())
    lines = [f"generator {generator.hexdigest()}", f"namespace {namespace}"]
    lines += ["mode per-formula"] if keep_going else []
    lines += [f"input {p.relative_to(formulas).as_posix()} {_digest(read_regular(p)[1])}" for p in input_files(formulas)]
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


def up_to_date(formulas: Path, out: Path, namespace: str, keep_going: bool = False) -> bool:
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
    expected = manifest_text(formulas, {}, namespace, keep_going)
    return [line for line in recorded_lines if not line.startswith("output ")] == expected.splitlines()


@dataclass(frozen=True)
class Generated:
    """What a run would write (``files``, MANIFEST included) or why it writes nothing (``diagnostics``)."""

    files: dict[str, str]
    diagnostics: list[Diagnostic]
    ops: int = 0
    nodes: int = 0
    helpers: int = 0
    formulas: int = 0                    # formulas read (the M of "N of M formulas emitted")
    refused: tuple[Refusal, ...] = ()    # per-formula mode: what was left out, and why
    jvp_left_out: tuple[Refusal, ...] = ()  # per-formula mode: formulas emitted without their jvp, and why


@dataclass(frozen=True, order=True)
class Refusal:
    """A formula (``entry``: its operator; a helper's name or ``<module>`` outside formulas) left out
    by per-formula mode, with the diagnostic that refused it."""

    diagnostic: Diagnostic
    entry: str
    part: str = ""      # "jvp": only the formula's jvp was left out

    def format(self) -> str:
        return f"{self.diagnostic.format()} [{' '.join(filter(None, (self.entry, self.part)))}]"


def generate(formulas: Path, lint: bool = True, namespace: str | None = None,
             keep_going: bool = False) -> Generated:
    """Lint and transliterate ``formulas`` in memory, registered as ``torch.ops.<namespace>``
    (default: the directory's name). ``keep_going``: per-formula mode (:func:`generate_each`)."""
    from transpiler.frontend import load_library

    namespace = namespace or default_namespace(formulas, SHIPPED_FORMULAS)
    if keep_going:
        return generate_each(formulas, lint, namespace)
    if lint:
        from transpiler.lint.runner import lint_paths

        findings = lint_paths([str(formulas)])
        if findings:
            return Generated({}, sorted(findings))
    library = load_library(str(formulas))
    if library.diagnostics:
        return Generated({}, sorted(library.diagnostics))
    from transpiler.cpp.emit import emit_library, with_helpers_of

    shipped = _shipped_library(formulas)
    known = shipped.operators if shipped is not None else {}
    callable_helpers = with_helpers_of(library, shipped) if shipped is not None else library
    output, diagnostics = emit_library(callable_helpers, known, namespace, str(formulas))
    if shipped is not None and namespace == SHIPPED_NAMESPACE:
        diagnostics = sorted(diagnostics + _registered_twice(library, shipped))
    if diagnostics:
        return Generated({}, diagnostics)
    files = {**output.files, MANIFEST: manifest_text(formulas, output.files, namespace)}
    return Generated(files, [], output.ops, output.nodes, output.helpers)


def generate_each(formulas: Path, lint: bool, namespace: str) -> Generated:
    """Per-formula mode: emit every formula that lints and transliterates and leave out each one
    that does not (its first diagnostic says why); a helper that cannot be transliterated is left
    out with the formulas that call it. The files hold what was emitted, and ``REFUSED`` the
    refusals, so that a run with nothing changed reports them again without parsing anything."""
    from transpiler.cpp.emit import emit_library, with_helpers_of
    from transpiler.frontend import load_library

    library = load_library(str(formulas))
    found = list(library.diagnostics)
    if lint:
        from transpiler.lint.runner import lint_paths

        found += lint_paths([str(formulas)])
    shipped = _shipped_library(formulas)
    if shipped is not None and namespace == SHIPPED_NAMESPACE:
        found += _registered_twice(library, shipped)
    known = shipped.operators if shipped is not None else {}
    # A refused formula's operator stays declared (after every other, so no call that resolved
    # without it changes): it is still an operator its callers may call, only its node is left out;
    # lint, which sees the whole library, resolves it the same way.
    known = {**known, **{name: schema for name, schema in library.operators.items() if name not in known}}
    entries = _Entries(library)
    refused: dict[tuple[str, int], Refusal] = {}
    # A finding inside a written jvp leaves out the jvp alone: the backward is emitted and forward
    # AD raises torch's "does not support it" error saying why.
    jvp_left_out: dict[tuple[str, int], Refusal] = {}
    while True:
        before = len(refused) + len(jvp_left_out)
        for diagnostic in sorted(set(found)):
            key, name = entries.owner(diagnostic)
            if entries.in_jvp(key, diagnostic):
                jvp_left_out.setdefault(key, Refusal(diagnostic, name, "jvp"))
            else:
                refused.setdefault(key, Refusal(diagnostic, name))
        refused.update(entries.callers_of_refused(refused))
        kept = entries.without(set(refused), jvp_left_out)
        with_shipped = with_helpers_of(kept, shipped) if shipped is not None else kept
        output, found = emit_library(with_shipped, known, namespace, str(formulas))
        if not found or len(refused) + len(jvp_left_out) == before:
            break
    formula_keys = entries.formula_keys
    left_out = tuple(sorted(r for k, r in refused.items() if k in formula_keys))
    without_jvp = tuple(sorted(r for k, r in jvp_left_out.items() if k not in refused))
    report = [r.format() for r in sorted([*refused.values(), *without_jvp])]
    report.append(summary_line(output.ops, len(formula_keys)))
    files = {**output.files, REFUSED: "\n".join(report) + "\n"}
    files[MANIFEST] = manifest_text(formulas, files, namespace, keep_going=True)
    return Generated(files, [], output.ops, output.nodes, output.helpers, len(formula_keys), left_out,
                     without_jvp)


def summary_line(emitted: int, total: int) -> str:
    return f"{emitted} of {total} formulas emitted"


REFUSED = "REFUSED"            # per-formula mode: one refused entry a line, ``path:line:col: CODE message [entry]``
MODULE_LEVEL = "<module>"      # a finding outside every formula and helper


class _Entries:
    """The formulas and helpers of a library as entries keyed by (path, first line, decorators
    included), to attribute diagnostics to them and leave refused ones out."""

    def __init__(self, library: Library) -> None:
        self.library = library
        self.starts: dict[str, list[tuple[int, str]]] = {}
        self.formula_keys: set[tuple[str, int]] = set()
        self.helper_keys: dict[str, tuple[str, int]] = {}
        self.jvp_lines: dict[tuple[str, int], range] = {}   # a formula's written jvp: its lines
        for module in library.modules:
            found = []
            for formula in module.formulas:
                found.append((_first_line(module, formula.node), formula.op_name))
                self.formula_keys.add((module.path, found[-1][0]))
                if formula.jvp is not None and formula.jvp.index is not None:
                    after = formula.node.body.body[formula.jvp.index + 1]   # the final return follows it
                    self.jvp_lines[module.path, found[-1][0]] = range(module.span(formula.jvp.node).line,
                                                                      module.span(after).line)
            for helper in module.helpers:
                found.append((_first_line(module, helper.node), helper.name))
                self.helper_keys[helper.name] = (module.path, found[-1][0])
            self.starts[module.path] = sorted(found)

    def key(self, module: FormulaModule, node: cst.FunctionDef) -> tuple[str, int]:
        return module.path, _first_line(module, node)

    def owner(self, diagnostic: Diagnostic) -> tuple[tuple[str, int], str]:
        """The entry whose definition holds the diagnostic's line (the last one starting above it)."""
        owner = ((diagnostic.path, 0), MODULE_LEVEL)
        for line, name in self.starts.get(diagnostic.path, ()):
            if line > diagnostic.line:
                break
            owner = ((diagnostic.path, line), name)
        return owner

    def in_jvp(self, key: tuple[str, int], diagnostic: Diagnostic) -> bool:
        """Whether the diagnostic lies inside the written jvp of the formula ``key``."""
        return diagnostic.line in self.jvp_lines.get(key, ())

    def callers_of_refused(self, refused: dict[tuple[str, int], Refusal]) -> dict[tuple[str, int], Refusal]:
        """Formulas and helpers that call a refused helper: their C++ would not link."""
        from transpiler.cpp.emit import names_in, names_used

        names = {name for name, key in self.helper_keys.items() if key in refused}
        added: dict[tuple[str, int], Refusal] = {}
        while names:
            new = set()
            for module in self.library.modules:
                for item, label in [*((f, f.op_name) for f in module.formulas),
                                    *((h, h.name) for h in module.helpers)]:
                    key = self.key(module, item.node)
                    called = names_used(item.node) & names
                    if key in refused or key in added or not called:
                        continue
                    used = names_in(item.node)
                    helper = sorted(called)[0]
                    cause = refused.get(self.helper_keys[helper]) or added[self.helper_keys[helper]]
                    where = module.span(used[helper])
                    added[key] = Refusal(Diagnostic(module.path, where.line, where.col, cause.diagnostic.code,
                                                    f"calls helper '{helper}', which was left out"), label)
                    if label in self.helper_keys:
                        new.add(label)
            names = new
        return added

    def without(self, refused: set[tuple[str, int]], jvp_left_out: dict[tuple[str, int], Refusal]) -> Library:
        """The library less the refused formulas and helpers, and less the jvps left out."""
        import dataclasses

        from transpiler.model import Library

        def kept(module: FormulaModule, formula: Formula) -> Formula:
            why = jvp_left_out.get(self.key(module, formula.node))
            if why is None:
                return formula
            return dataclasses.replace(formula, jvp=None,
                                       jvp_left_out=f"{why.diagnostic.code} {why.diagnostic.message}")

        return Library(tuple(dataclasses.replace(
            module,
            formulas=tuple(kept(module, f) for f in module.formulas if self.key(module, f.node) not in refused),
            helpers=tuple(h for h in module.helpers if self.key(module, h.node) not in refused))
            for module in self.library.modules))


def _first_line(module: FormulaModule, node: cst.FunctionDef) -> int:
    return min([module.span(d).line for d in node.decorators] + [module.span(node).line])


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

    taken = {f.op_name for f in shipped.formulas}
    found = []
    for module in library.modules:
        for formula in module.formulas:
            if formula.op_name in taken:
                where = module.span(formula.schema_node)
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
    if not args.no_lint and up_to_date(formulas, out, namespace, args.keep_going):
        if args.keep_going:     # the refusals of the run that wrote ``out``, and its summary
            report = (out / REFUSED).read_text(encoding="utf-8")
            print(report, end="")
            print(f"{out}: up to date ({time.perf_counter() - started:.3f} s)")
            return 1 if report.count("\n") > 1 else 0
        print(f"{out}: up to date: {formulas} and the transpiler are unchanged since they were linted "
              f"clean and written there (MANIFEST) ({time.perf_counter() - started:.3f} s)")
        return 0
    result = generate(formulas, lint=not args.no_lint, namespace=namespace, keep_going=args.keep_going)
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
