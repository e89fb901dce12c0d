"""One pipeline: formula source -> model -> closure rules -> C++ emission, each step run once.

``transpile`` and ``transpile lint`` are two views of the same steps
(``docs/architecture.md``), and this module is the only one that knows both
the linter (:mod:`transpiler.lint`) and the C++ back end
(:mod:`transpiler.cpp`); neither imports the other.

- :func:`run` is ``transpile``'s whole run on a formula package: it reads the
  package and the shipped library once (the front-end,
  :mod:`transpiler.frontend`), lints every file of the package (the per-file
  pass, then the closure rules of the formula files), emits the C++ once and
  returns a frozen :class:`PipelineResult`. What the emitter refuses is
  reported by lint too: its refusals come from that one emission. The command
  (:mod:`transpiler.cpp.generate`) writes the files.
- :func:`formula_findings` and :func:`package_refusals` are the same steps for
  ``transpile lint``, whose formula-file runner
  (:mod:`transpiler.lint.formula_files`) reads, fixes and caches the files.

In per-formula mode the closure rules of the files this run read whole run in
a second process, forked once every model is read, while this one runs the
emitter's check (:func:`_beside`: the second core, which otherwise waits for
the main process's emission); their findings come back pickled and are merged
as if computed here (a file whose rules fail there is checked again here, so
its internal error is reported as before). In a cold run, lint's per-file pass
(which needs no model) runs while the main process waits for the models the
model cache's second process reads (:func:`per_file_pass_ahead`).

Heavy imports (libcst, the emitter) are made inside the functions: a run with
nothing to do never loads them.
"""
from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from transpiler import codes, library_discovery
from transpiler.diagnostics import Diagnostic
from transpiler.project import SHIPPED_NAMESPACE

if TYPE_CHECKING:
    from transpiler.cpp.per_formula import Refusal
    from transpiler.lint.discovery import Listing
    from transpiler.lint.file_check import FileReport
    from transpiler.model import FormulaModule, Helper, Library

T = TypeVar("T")
S = TypeVar("S")
UNDECLARED_OPERATOR = codes.UNDECLARED_OPERATOR.code   # the closure rule's name for an operator without a formula
UNKNOWN_OPERATOR = codes.UNKNOWN_OPERATOR.code         # the emitter's name for the same call


@dataclass(frozen=True)
class PipelineResult:
    """What one run of :func:`run` found and would write."""

    files: Mapping[str, str]                  # the C++ files (nothing when ``diagnostics`` stop the run)
    diagnostics: tuple[Diagnostic, ...]       # what stops a strict run: lint's findings, else the emitter's
    refusals: tuple[Diagnostic, ...] = ()     # what the one emission refused (DB2xx), none silenced
    ops: int = 0
    nodes: int = 0
    helpers: int = 0
    formulas: int = 0                         # formulas read (the M of "N of M formulas emitted")
    refused: tuple[Refusal, ...] = ()         # per-formula mode: what was left out, and why
    jvp_left_out: tuple[Refusal, ...] = ()    # per-formula mode: formulas emitted without their jvp, and why
    every_refusal: tuple[Refusal, ...] = ()   # per-formula mode: the above and the helpers left out, sorted
    lint_findings: tuple[Diagnostic, ...] = ()  # per-formula mode: what lint found (the refusals' first cause)


@dataclass(frozen=True)
class LibraryView:
    """What the closure rules of formula files see: the operators and helpers they may call."""

    known_operators: frozenset[str]           # ``name.overload`` and base ``name`` of every declared operator
    helpers: Mapping[str, Helper]


def library_view(modules: Iterable[FormulaModule]) -> LibraryView:
    """The view of ``modules`` (the shipped library and the formula files read)."""
    modules = list(modules)
    names: set[str] = set()
    for module in modules:
        for schema in [*(f.schema for f in module.formulas), *module.nondifferentiable]:
            names.update({str(schema.name), schema.name.base})
    return LibraryView(frozenset(names), {helper.name: helper for module in modules for helper in module.helpers})


def formula_findings(module: FormulaModule, source: str, raw: bytes, view: LibraryView,
                     refusals: Sequence[Diagnostic], closure: Sequence[Diagnostic] | None = None,
                     ) -> tuple[Diagnostic, ...]:
    """Every finding of one formula file, sorted, less what ``# noqa`` silences: the front-end's
    own (DB000, DB107), the closure rules' (:mod:`transpiler.lint.closure_rules`; ``closure``:
    their findings, where computed already) and what the emitter ``refusals`` say of it (an
    unknown operator DB105 reports already is not reported twice as DB201). Raises on an internal
    error of the rules."""
    from transpiler.lint.closure_rules import check_formula_module
    from transpiler.lint.noqa import file_noqa, without_file_noqa, without_suppressed

    if closure is None:
        closure = check_formula_module(module, source, view.known_operators, view.helpers)
    found = {*module.diagnostics, *closure}
    reported = {(d.line, d.col) for d in found if d.code == UNDECLARED_OPERATOR}
    found.update(d for d in refusals if not (d.code == UNKNOWN_OPERATOR and (d.line, d.col) in reported))
    silenced = file_noqa(raw) if b"transpile" in raw else None
    return without_file_noqa(without_suppressed(sorted(found), source.splitlines()), silenced)


def package_refusals(modules: Iterable[FormulaModule], shipped: Sequence[FormulaModule],
                     sources: Mapping[str, str] | None = None) -> dict[str, list[Diagnostic]]:
    """What ``transpile`` would refuse in ``modules``, by path, each file seen as ``transpile
    --formulas <its package>`` sees it (with the rest of its package, the ``shipped`` library's
    operators callable from another package): the C++ emitter's own check (DB2xx) and each
    ``jvp="derived"`` its backward cannot give (DB107, :func:`transpiler.frontend.derivation_refusals`;
    ``sources``: the files' texts by path, where already read). An emitter that fails is an
    internal error of the files it was checking."""
    from transpiler.cpp.emit import refusals, with_helpers_of
    from transpiler.frontend import derivation_refusals
    from transpiler.lint.file_check import internal_error
    from transpiler.model import Library

    packages: dict[Path, list[FormulaModule]] = {}
    for module in modules:
        packages.setdefault(library_discovery.package_root(module.path), []).append(module)
    shipped_library = Library(tuple(shipped))
    shipped_operators = shipped_library.operators
    found: list[Diagnostic] = []
    for root, members in packages.items():
        try:
            rest = tuple(library_discovery.package_library(root, exclude={Path(m.path).resolve() for m in members}))
            known = None if root == library_discovery.SHIPPED_FORMULAS else shipped_operators
            found += derivation_refusals(members, (*(shipped if known is not None else ()), *rest), sources)
            if known is not None:     # the shipped helpers it calls are emitted with it
                rest = with_helpers_of(Library((*members, *rest)), shipped_library).modules[len(members):]
            found += refusals(tuple(members), rest, known)
        except Exception as error:  # noqa: BLE001 - the emitter failed: an internal error of these files
            found += [internal_error(module.path, error) for module in members]
    by_path: dict[str, list[Diagnostic]] = {}
    for diagnostic in found:
        by_path.setdefault(diagnostic.path, []).append(diagnostic)
    return by_path


def run(formulas: Path, namespace: str, lint: bool = True, keep_going: bool = False) -> PipelineResult:
    """``transpile``'s run on the formula package ``formulas``, registered as ``torch.ops.<namespace>``:
    read it and the shipped library once, lint it (unless ``lint`` is False), emit it once.

    Strict mode: any finding (lint's, the front-end's, the emitter's) writes nothing; the one
    emission gives lint its refusals. ``keep_going``: per-formula mode, every formula that lints
    and transliterates is emitted and each one that does not is left out
    (:mod:`transpiler.cpp.per_formula`); it emits until nothing more is left out, and lint checks
    the refusals as ``transpile lint`` does, so that each entry is left out for its first finding."""
    from transpiler.cpp.emit import emit_library, with_helpers_of
    from transpiler.frontend import read_module, with_derived_jvps
    from transpiler.model import Library
    from transpiler.sources import python_sources

    shipped = _shipped_library(formulas)
    read = Library(tuple(read_module(str(p)) for p in python_sources(formulas).files))      # the front-end, once
    library = with_derived_jvps(read, shipped) if any(f.derives_jvp for f in read.formulas) else read
    known = shipped.operators if shipped is not None else {}
    twice = _registered_twice(library, shipped) if shipped is not None and namespace == SHIPPED_NAMESPACE else []
    if keep_going:
        from transpiler.cpp.emit_once import shared

        with shared():     # lint's check of the refusals and the emissions after it: each formula emitted once
            linted = tuple(_lint(formulas, read, shipped, None)) if lint else ()
            result = _run_each(formulas, library, shipped, known, namespace, [*library.diagnostics, *linted, *twice])
        return replace(result, lint_findings=linted)
    if not lint and library.diagnostics:
        return PipelineResult({}, tuple(sorted(library.diagnostics)))
    with_shipped = with_helpers_of(library, shipped) if shipped is not None else library
    try:
        output, refused = emit_library(with_shipped, known, namespace, str(formulas))      # the emission, once
    except Exception as error:
        if not lint:
            raise
        findings = _lint(formulas, read, shipped, [], error)    # the formula files' internal error
        if findings:
            return PipelineResult({}, tuple(findings))
        raise
    if lint:
        findings = _lint(formulas, read, shipped, refused)
        if findings:
            return PipelineResult({}, tuple(findings), tuple(refused))
    if library.diagnostics:
        return PipelineResult({}, tuple(sorted(library.diagnostics)), tuple(refused))
    if refused or twice:
        return PipelineResult({}, tuple(sorted(refused + twice)), tuple(refused))
    return PipelineResult(output.files, (), (), output.ops, output.nodes, output.helpers)


def _lint(formulas: Path, read: Library, shipped: Library | None, refused: Sequence[Diagnostic] | None,
          emission_error: Exception | None = None) -> list[Diagnostic]:
    """``transpile lint`` of every file of ``formulas`` (no excludes, no ``.gitignore``), sorted, on
    the modules the front-end ``read`` already; the emitter's refusals are ``refused`` (None: checked
    here, as ``transpile lint`` checks them). ``emission_error``: the emitter failed, an internal
    error of every formula file."""
    from transpiler.frontend import read_module
    from transpiler.lint.file_check import UNREADABLE, internal_error, unreadable
    from transpiler.lint.settings import EVERY_FILE
    from transpiler.sources import decode_source, read_regular

    listing, reports = _per_file_ahead.pop(formulas, None) or _per_file_pass(formulas)
    found = {Diagnostic(path, 1, 1, UNREADABLE, reason) for path, reason in listing.unreadable}
    found.update(d for report in reports for d in report.diagnostics)
    formula_paths = [report.path for report in reports if report.formula_file]
    by_file = {os.path.realpath(m.path): m for m in read.modules}
    modules: dict[str, FormulaModule] = {}
    for path in formula_paths:
        try:       # a file the front-end did not read (not a module name) is read here
            modules[path] = by_file.get(os.path.realpath(path)) or read_module(path)
        except OSError as error:
            found.add(unreadable(path, error))
    read_paths = {os.path.realpath(path) for path in modules}
    seen = [m for m in (read if shipped is None else shipped).modules if os.path.realpath(m.path) not in read_paths]
    view = library_view([*seen, *modules.values()])
    closure: dict[str, list[Diagnostic]] = {}
    if refused is None:     # the emitter's check; the closure rules of the files read now, beside it
        rules = functools.partial(_closure_findings, {p: m for p, m in modules.items() if _read_now(m)}, view)
        by_path, closure = _beside(lambda: package_refusals(modules.values(), seen if shipped is None else
                                                            shipped.modules), rules, len(rules.args[0]))
        refusals = {os.path.realpath(path): found for path, found in by_path.items()}
    else:
        refusals = {}
        for diagnostic in refused:
            refusals.setdefault(os.path.realpath(diagnostic.path), []).append(diagnostic)
    view_key = _view_key(view, [*seen, *modules.values()])
    for path, module in modules.items():
        try:
            if emission_error is not None:
                raise emission_error
            raw = read_regular(path)[1]
            own = refusals.get(os.path.realpath(path), ())
            found.update(_kept_formula_findings(module, decode_source(path, raw), raw, view, view_key, own,
                                                closure.get(path)))
        except Exception as error:  # noqa: BLE001 - reported as this file's internal error
            found.add(internal_error(path, error))
    return sorted(d for d in found if d.code == UNREADABLE or EVERY_FILE.enabled(d.code, d.path))


def _per_file_pass(formulas: Path) -> tuple[Listing, list[FileReport]]:
    """The files of ``formulas`` (no excludes, no ``.gitignore``) and lint's per-file pass over them
    (:func:`transpiler.lint.workers.per_file_pass`), its findings kept as ``transpile lint`` keeps them."""
    from transpiler import module_results
    from transpiler.lint.cache import ResultCache
    from transpiler.lint.discovery import python_files
    from transpiler.lint.settings import EVERY_FILE
    from transpiler.lint.workers import per_file_pass

    listing = python_files([str(formulas)], EVERY_FILE)
    kept = module_results.active()
    cache = ResultCache.open(kept.entries.parent, listing.files, "trust_bytecode=True") if kept is not None else None
    reports = per_file_pass(listing.files, cache=cache)
    if cache is not None:
        cache.save()        # a cache that cannot be written only costs time
    return listing, reports


# :func:`per_file_pass_ahead`'s results, by formula directory, for the run's :func:`_lint` to take
_per_file_ahead: dict[Path, tuple[Listing, list[FileReport]]] = {}


@contextlib.contextmanager
def per_file_pass_ahead(formulas: Path) -> Iterator[Callable[[], None]]:
    """A function that runs the per-file pass of ``formulas`` when called, for the run of the block
    to take (:func:`_lint`): a cold run calls it while it waits for the models its second process
    reads (:meth:`transpiler.model_cache.ModelCache.prepare`), a time this process would otherwise
    wait. What the block's run did not take goes with the block; a pass that fails is left for
    lint to run again, which reports it as before."""
    def ahead() -> None:
        try:
            _per_file_ahead[formulas] = _per_file_pass(formulas)
        except Exception:  # noqa: BLE001 - run again by the run's lint, which reports it
            _per_file_ahead.pop(formulas, None)
    try:
        yield ahead
    finally:
        _per_file_ahead.pop(formulas, None)


def _view_key(view: LibraryView, modules: Sequence[FormulaModule]) -> str | None:
    """What a formula file's findings depend on beyond the file and its refusals: the operators
    declared anywhere and the text of every module that defines a helper it may follow into;
    None when results are not kept or a helper's module has no source digest."""
    from transpiler import module_results

    digests = {m.path: m.source_digest for m in modules}
    helpers = sorted((name, h.path, digests.get(h.path, "")) for name, h in view.helpers.items())
    if module_results.active() is None or not all(digest for _, _, digest in helpers):
        return None
    return module_results.key("view", sorted(view.known_operators), helpers)


def _kept_formula_findings(module: FormulaModule, source: str, raw: bytes, view: LibraryView,
                           view_key: str | None, refusals: Sequence[Diagnostic],
                           closure: Sequence[Diagnostic] | None = None) -> tuple[Diagnostic, ...]:
    """:func:`formula_findings`, kept between runs under its inputs (:mod:`transpiler.module_results`)."""
    import hashlib

    from transpiler import module_results

    kept = module_results.active()
    if kept is None or view_key is None or not module.source_digest:
        return formula_findings(module, source, raw, view, refusals, closure)
    key = module_results.key("lint", view_key, module.path, module.source_digest, hashlib.sha256(raw).hexdigest(),
                             sorted(refusals))
    found = kept.get(key, lambda kept: module_results.all_of(Diagnostic, kept) and isinstance(kept, tuple))
    if found is None:
        found = formula_findings(module, source, raw, view, refusals, closure)
    kept.put(key, found)
    return found


BESIDE_MIN_FILES = 4    # fewer files' closure rules run in this process: a second process costs more (fork,
                        # copied pages: about 30 ms) than the rules of one file (10 ms; the corpus: 22 files, 0.2 s)


def _read_now(module: FormulaModule) -> bool:
    """Whether ``module`` was read whole by this run (not loaded as its summary, whose file's
    findings a run keeps: :mod:`transpiler.module_results`)."""
    from transpiler.model_summary import DeferredPositions

    return not isinstance(module.positions, DeferredPositions)


def _closure_findings(modules: Mapping[str, FormulaModule], view: LibraryView) -> dict[str, list[Diagnostic]]:
    """The closure rules' findings of each formula file of ``modules`` (by path) that reads and whose
    rules run; one that does not is left out (its caller runs them again and reports why)."""
    from transpiler.lint.closure_rules import check_formula_module
    from transpiler.sources import decode_source, read_regular

    found = {}
    for path, module in modules.items():
        try:
            source = decode_source(path, read_regular(path)[1])
            found[path] = check_formula_module(module, source, view.known_operators, view.helpers)
        except Exception:  # noqa: BLE001 - run again by the caller, which reports it
            continue
    return found


def _beside(work: Callable[[], T], side: Callable[[], S], size: int) -> tuple[T, S | dict]:
    """``work()`` here and ``side()`` (returning a dict) in a second process at the same time, on the
    second core; ``size``: how many files ``side`` works on (below :data:`BESIDE_MIN_FILES`, or on one
    core, it is not run: an empty dict, and the caller does that work itself, as when the second
    process cannot start, fails or dies). ``side``'s result comes back pickled."""
    import pickle

    if size < BESIDE_MIN_FILES or (os.cpu_count() or 1) < 2:
        return work(), {}
    try:
        ready, told = os.pipe()
    except OSError:
        return work(), {}
    try:
        child = os.fork()
    except OSError:
        os.close(ready)
        os.close(told)
        return work(), {}
    if child == 0:
        try:                # the second process: its result down the pipe, and leave without the parent's exit code
            os.close(ready)
            with os.fdopen(told, "wb") as out:
                out.write(pickle.dumps(side(), protocol=pickle.HIGHEST_PROTOCOL))
        finally:
            os._exit(0)
    os.close(told)
    try:
        result = work()
    finally:
        with os.fdopen(ready, "rb") as stream:
            data = stream.read()
        os.waitpid(child, 0)
    try:
        kept = pickle.loads(data) if data else {}
    except Exception:  # noqa: BLE001 - cut short (it died): done here
        kept = {}
    return result, kept if isinstance(kept, dict) else {}


def _run_each(formulas: Path, library: Library, shipped: Library | None, known: Mapping[str, object],
              namespace: str, found: list[Diagnostic]) -> PipelineResult:
    """Per-formula mode: emit every formula that lints and transliterates and leave out each one
    that does not (its first diagnostic says why); a helper that cannot be transliterated is left
    out with the formulas that call it."""
    from transpiler.cpp.emit import emit_library, with_helpers_of
    from transpiler.cpp.per_formula import Entries, Refusal

    # A refused formula's operator stays declared (after every other, so no call that resolved
    # without it changes): it is still an operator its callers may call, only its node is left out;
    # lint, which sees the whole library, resolves it the same way.
    known = {**known, **{name: schema for name, schema in library.operators.items() if name not in known}}
    entries = Entries(library)
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
    return PipelineResult(output.files, (), (), output.ops, output.nodes, output.helpers, len(formula_keys),
                          left_out, without_jvp, tuple(sorted([*refused.values(), *without_jvp])))


def _shipped_library(formulas: Path) -> Library | None:
    """The shipped library, whose operators another formula directory may call (as lint allows);
    None when ``formulas`` is the shipped library itself. Its files that cannot add to it
    (:func:`~transpiler.library_discovery.shipped_context_files`) are not read."""
    if formulas.resolve() == library_discovery.SHIPPED_FORMULAS.resolve():
        return None
    from transpiler.frontend import load_library

    return load_library(str(library_discovery.SHIPPED_FORMULAS), library_discovery.shipped_context_files())


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
