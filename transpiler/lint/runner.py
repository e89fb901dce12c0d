"""The lint driver: which files, which rules, ``# noqa``, and the whole run's result.

Which files and codes come from :mod:`transpiler.lint.settings`. Every file
gets the same syntax check (DB000): CPython's own compiler (``compile``, the
bytecode thrown away), which also rejects what only code generation finds
(``return`` outside a function, a late ``from __future__``); bytes that do not
decode (:mod:`transpiler.sources`) and files nested too deeply are DB000 too. A
file that CPython itself already compiled (its up-to-date bytecode is in
``__pycache__``, as pip writes it for every installed file) is known to pass
it. ``# transpile: noqa`` on a line of its own skips a file (``: CODES``, those
codes in it); ``# noqa[: CODES]`` a line, codes matched as prefixes. The
closure rules of formula files include what ``transpile`` would refuse (the
C++ emitter's own check). A cheap text prefilter (:mod:`transpiler.lint.prefilter`,
never turning away a file the analysis would flag) decides what else a file needs: files whose text can name ``torch.autograd.Function``
are parsed to an ``ast`` for the ctx rules (:mod:`transpiler.lint.ctx`); files
that use ``@derivative`` are formula files and also get the closure rules of
:mod:`transpiler.lint.closure_rules` (libcst, through
:func:`transpiler.frontend.parse_module`). With a cache directory, results
whose dependencies did not change come from :mod:`transpiler.lint.cache`.
Large amounts of work left spread over the available cores. Nothing read is
imported or executed.
"""
from __future__ import annotations

import ast
import concurrent.futures
import difflib
import functools
import importlib.util
import multiprocessing
import os
import re
import stat
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import transpiler
from transpiler import codes
from transpiler.diagnostics import Diagnostic
from transpiler.lint import ctx, prefilter
from transpiler.lint.cache import (
    Depends,
    FileStamp,
    Recorder,
    ResultCache,
    python_files_below,
    stamp_file,
)
from transpiler.lint.ctx.names import statements
from transpiler.lint.ctx.tree import current_tree
from transpiler.lint.settings import Settings, python_files
from transpiler.sources import (
    UndecodableSource,
    caused_by_recursion,
    decode_source,
    encode_source,
    read_regular,
    source_encoding,
    too_deep,
)

if TYPE_CHECKING:                    # the model imports libcst: only formula files need it
    from transpiler.model import FormulaModule

SYNTAX = codes.UNPARSABLE.code
UNREADABLE = codes.UNREADABLE.code
INTERNAL = codes.INTERNAL_ERROR.code
UNDECLARED_OPERATOR = codes.UNDECLARED_OPERATOR.code   # the closure rule's name for an operator without a formula
UNKNOWN_OPERATOR = codes.UNKNOWN_OPERATOR.code         # the emitter's name for the same call
SHIPPED_FORMULAS = Path(transpiler.__file__).resolve().parent.parent / "formulas"
PARALLEL_MIN_FILES = 200   # fewer files left to check run serially: starting 2 workers costs ~35 ms CPU (measured), about
                           # what 200 typical torch files cost serially (50 ms; 400: 230 ms)
NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]*(?:[\s,]+[A-Z]+[0-9]*)*))?", re.IGNORECASE)
FILE_NOQA = re.compile(r"^[ \t]*#[ \t]*transpile:[ \t]*noqa(?:[ \t]*:[ \t]*(?P<codes>[A-Z]+[0-9]*(?:[\s,]+[A-Z]+[0-9]*)*))?[ \t]*$",
                       re.IGNORECASE | re.MULTILINE)

class WorkerDied(Exception):
    """A ``--jobs`` worker process died: the run cannot be completed (exit 2)."""


@dataclass(frozen=True)
class FileReport:
    """What the per-file pass found in one file."""

    path: str
    diagnostics: tuple[Diagnostic, ...]
    functions: int = 0              # torch.autograd.Function subclasses analysed
    formula_file: bool = False      # uses @derivative: the closure rules still have to run
    function_names: tuple[str, ...] = ()   # their class names (other files may derive from them)
    base_names: frozenset[bytes] = frozenset()  # words in class bases, but the file's own Function classes
    depends: Depends = field(default=Depends(), compare=False)   # the file and what its analysis read

    def as_json(self) -> list[object]:
        """The report as the result cache stores it (``path`` is the entry's key)."""
        return [_diagnostics_as_json(self.diagnostics), self.functions, self.formula_file, self.function_names,
                sorted(word.decode("latin-1") for word in self.base_names)]

    @staticmethod
    def from_json(path: str, value: object) -> FileReport | None:
        """The report :meth:`as_json` gave, or None when ``value`` is not one (a damaged cache)."""
        try:
            diagnostics, functions, formula_file, function_names, base_names = value
            return FileReport(path, _diagnostics_from_json(path, diagnostics), int(functions), bool(formula_file),
                              tuple(map(str, function_names)), frozenset(word.encode("latin-1") for word in base_names))
        except (AttributeError, TypeError, ValueError, UnicodeError):
            return None

    @property
    def cacheable(self) -> bool:
        """Whether the result is the file's own (not an internal error or an unreadable file)."""
        return bool(self.depends.files) and all(d.code not in (INTERNAL, UNREADABLE) for d in self.diagnostics)


def _diagnostics_as_json(diagnostics: Iterable[Diagnostic]) -> list[list[object]]:
    return [[d.line, d.col, d.code, d.message, d.fix, d.related] for d in diagnostics]


def _diagnostics_from_json(path: str, rows: list) -> tuple[Diagnostic, ...]:
    """Raises TypeError or ValueError on rows :func:`_diagnostics_as_json` did not write."""
    return tuple(Diagnostic(path, int(line), int(col), str(code), str(message), None if fix is None else str(fix),
                            tuple((int(at_line), int(at_col)) for at_line, at_col in related))
                 for line, col, code, message, fix, related in rows)


@dataclass(frozen=True)
class LintResult:
    """A whole run: findings after ``# noqa`` and the configuration, sorted by path, line, col."""

    diagnostics: tuple[Diagnostic, ...]
    files: int
    functions: int
    formula_files: int
    fixed: tuple[str, ...] = ()
    diffs: tuple[str, ...] = ()     # ``--diff``: one unified diff per file the fixes would change
    fixed_stdin: bytes | None = None  # ``--fix`` on stdin: the fixed source (the input when nothing changed)
    cache_warning: str | None = None  # the result cache could not be written (one line)
    unsafe_hidden: int = 0          # findings an unsafe fix would address, not applied (no ``unsafe_fixes``)
    skipped: tuple[str, ...] = ()     # one-line notes: special files (FIFOs, devices, symlink loops) not read

    @property
    def unreadable(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.code == UNREADABLE)

    @property
    def findings(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.code != UNREADABLE)


EVERY_FILE = Settings(exclude=(), respect_gitignore=False)


def lint_paths(paths: list[str]) -> list[Diagnostic]:
    """Lint files and directories, every ``*.py`` file below them (as ``transpile`` reads a
    formula directory: no excludes, no ``.gitignore``); every finding (unreadable paths
    included), sorted."""
    return list(lint(paths, settings=EVERY_FILE).diagnostics)


def lint(paths: Iterable[str], fix: bool = False, jobs: int | None = None,
         trust_bytecode: bool = True, settings: Settings | None = None, diff: bool = False,
         stdin: tuple[str, bytes] | None = None, cache_dir: Path | None = None,
         unsafe_fixes: bool = False) -> LintResult:
    """Run every rule on ``paths`` (files, or directories searched for ``*.py``).

    ``trust_bytecode``: skip the syntax check of files whose up-to-date bytecode
    CPython already wrote (see :func:`compiled_before`). ``settings``: which
    files and codes (default: every code, the default excludes). ``diff``:
    compute the fixes as diffs instead of writing them. ``stdin``: lint this
    (name, bytes) instead of files; with ``fix`` the fixed bytes are returned,
    nothing is written. ``cache_dir``: reuse and keep results there
    (:mod:`transpiler.lint.cache`; never for stdin). ``unsafe_fixes``: ``fix`` and
    ``diff`` include the unsafe fixes (otherwise they are only counted). Raises
    :class:`WorkerDied`.
    """
    settings = settings or Settings()
    paths = list(paths)
    cache = None
    if stdin is not None:
        files, missing, sources, skipped = [stdin[0]], [], {stdin[0]: stdin[1]}, []
        ctx.use_tree([])                      # standard input alone: no other files to resolve names in
        reports = [check_source(stdin[0], stdin[1], trust_bytecode=False)]
    else:
        files, unreadable, skipped = python_files(paths, settings)
        missing = [Diagnostic(path, 1, 1, UNREADABLE, reason) for path, reason in unreadable]
        sources = {}
        ctx.use_tree(files)                   # names resolve across the files of this run
        options = f"trust_bytecode={trust_bytecode}"       # the settings are applied after the cache
        cache = ResultCache.open(cache_dir, paths, options) if cache_dir is not None else None
        reports = check_files(files, jobs, trust_bytecode, cache)
        reports = _subclasses_of_tree_functions(reports, trust_bytecode, cache)
    formula_paths = [r.path for r in reports if r.formula_file]
    wanted = functools.partial(_wanted, settings)
    closure_findings, fixed, diffs, fixed_sources = (
        _formula_rules(formula_paths, sources, fix or diff, diff, wanted, cache) if formula_paths
        else ({}, [], [], {}))
    reports = _describe_function_fixes(reports, sources, settings)
    unsafe_hidden = 0
    if fix or diff:
        reports, unsafe_hidden = _function_fixes(reports, sources, settings, unsafe_fixes, write=not diff,
                                                 fixed=fixed, diffs=diffs, fixed_sources=fixed_sources)
    fixed_stdin = fixed_sources.get(stdin[0], stdin[1]) if stdin is not None and fix and not diff else None
    diagnostics = {d for r in reports for d in r.diagnostics} | set(missing)
    diagnostics.update(d for found in closure_findings.values() for d in found)
    kept = (d for d in diagnostics if d.code == UNREADABLE or settings.enabled(d.code, d.path))
    return LintResult(tuple(sorted(kept)), len(files), sum(r.functions for r in reports),
                      len(formula_paths), tuple(fixed), tuple(diffs), fixed_stdin,
                      cache.save() if cache is not None else None, unsafe_hidden, tuple(skipped))


def _wanted(settings: Settings, path: str, code: str, line_text: str) -> bool:
    """Whether a finding of ``code`` on a line reading ``line_text`` is reported (so worth fixing)."""
    return settings.enabled(code, path) and not _suppressed_by_line(code, line_text)


def _formula_rules(paths: list[str], sources: Mapping[str, bytes], fix: bool, diff: bool,
                   wanted: Callable[[str, str, str], bool], cache: ResultCache | None = None,
                   ) -> tuple[dict[str, tuple[Diagnostic, ...]], list[str], list[str], dict[str, bytes]]:
    """Closure findings per formula file (after the fix-its when ``fix``), the files fixed
    and, when ``diff``, the fixes as unified diffs instead (nothing written); last, the fixed
    bytes of the ``sources`` given in memory (stdin), which are never written. ``cache``:
    the findings of an unchanged library (never with ``fix``)."""
    if cache is not None and not fix:
        return _cached_formula_rules(paths, cache), [], [], {}
    try:
        closure = _ClosureRules(paths, sources)
    except Exception as error:  # noqa: BLE001 - the library itself could not be read
        return {path: (_internal_error(path, error),) for path in paths}, [], [], {}
    fixed, diffs, fixed_sources = [], [], {}
    if fix:
        for path in paths:
            change = closure.fix(path, wanted, write=not diff)
            if change is None:
                continue
            if diff:
                diffs.append(change)
            elif path in sources:
                fixed_sources[path] = encode_source(closure.sources[path], source_encoding(path, sources[path]))
            else:
                fixed.append(path)
    return {path: closure.check(path) for path in paths}, fixed, diffs, fixed_sources


def _function_fixes(reports: list[FileReport], sources: Mapping[str, bytes], settings: Settings,
                    unsafe: bool, write: bool, fixed: list[str], diffs: list[str],
                    fixed_sources: dict[str, bytes]) -> tuple[list[FileReport], int]:
    """The fixes of ctx-style Functions (:func:`transpiler.lint.function_fix.fix_functions`): the
    safe ones always, the unsafe ones with ``unsafe`` (otherwise the findings they would address
    are only counted). Each changed file goes to ``diffs`` (not ``write``), to ``fixed_sources``
    (given in memory) or is written and listed in ``fixed``, and its report is made again.
    Formula files are left to the closure fix."""
    from transpiler.lint.function_fix import FIXABLE, Located, fix_functions

    out: list[FileReport] = []
    hidden = 0
    for report in reports:
        path = report.path
        findings = [Located(d.line, d.col, d.code) for d in report.diagnostics
                    if d.code in FIXABLE and settings.enabled(d.code, path)]
        if not findings or report.formula_file:
            out.append(report)
            continue
        try:
            raw = sources[path] if path in sources else Path(path).read_bytes()
            before = decode_source(path, raw)
            change = fix_functions(before, findings, unsafe)
        except Exception:  # noqa: BLE001 - no fix for this file; its findings stand as reported
            out.append(report)
            continue
        hidden += len(change.withheld)
        if not change.applied:
            out.append(report)
        elif not write:
            diffs.append("".join(difflib.unified_diff(
                before.splitlines(keepends=True), change.source.splitlines(keepends=True),
                f"a/{path}", f"b/{path}")))
            out.append(report)
        else:
            data = encode_source(change.source, source_encoding(path, raw))
            if path in sources:
                fixed_sources[path] = data
                out.append(check_source(path, data, trust_bytecode=False))
            else:
                _write_through(path, data)
                fixed.append(path)
                out.append(check_file(path, trust_bytecode=False))
    return out, hidden


def _describe_function_fixes(reports: list[FileReport], sources: Mapping[str, bytes],
                             settings: Settings) -> list[FileReport]:
    """The reported DB110/DB111 findings (opt-in) with the fix each gets, where it gets one: planned
    here, with libcst, only for the files that have such findings."""
    from transpiler.lint.function_fix import Located, describe_fixes

    hygiene = (codes.CTX_ATTRIBUTE_TENSOR.code, codes.METADATA_ONLY_SAVE.code)
    out = []
    for report in reports:
        wanted = [d for d in report.diagnostics if d.code in hygiene and settings.enabled(d.code, report.path)]
        if not wanted:
            out.append(report)
            continue
        try:
            raw = sources[report.path] if report.path in sources else Path(report.path).read_bytes()
            fixes = describe_fixes(decode_source(report.path, raw), [Located(d.line, d.col, d.code) for d in wanted])
        except Exception:  # noqa: BLE001 - no fix described; the findings stand as reported
            fixes = {}
        described = tuple(replace(d, fix=fixes.get(Located(d.line, d.col, d.code), d.fix))
                          for d in report.diagnostics)
        out.append(replace(report, diagnostics=described))
    return out


CLOSURE_KEY = "closure"


def _cached_formula_rules(paths: list[str], cache: ResultCache) -> dict[str, tuple[Diagnostic, ...]]:
    """The closure findings of ``paths`` from ``cache``, or computed and stored there. They
    depend on every formula file linted, the shipped library and every file of the packages
    the linted files belong to (what ``transpile --formulas`` would emit with them)."""
    roots = [str(package_root(path)) for path in paths]
    stored = cache.get(CLOSURE_KEY, current_tree())
    if isinstance(stored, dict) and stored.get("paths") == paths and stored.get("roots") == roots:
        try:
            return {path: _diagnostics_from_json(path, stored["findings"][path]) for path in paths}
        except (KeyError, TypeError, ValueError):             # a damaged cache: computed again
            pass
    listings = tuple((directory, python_files_below(directory))
                     for directory in sorted({str(SHIPPED_FORMULAS), *roots}))
    read = dict.fromkeys([*paths, *(path for _, below in listings for path in below)])
    depends = Depends(tuple((path, stamp_file(path)) for path in read), listings=listings)   # before reading
    findings, _, _, _ = _formula_rules(paths, {}, False, False, lambda *_: True)
    if all(d.code != INTERNAL for found in findings.values() for d in found):
        rows = {path: _diagnostics_as_json(found) for path, found in findings.items()}
        cache.put(CLOSURE_KEY, {"paths": paths, "roots": roots, "findings": rows}, depends)
    return findings


def collect_files(paths: Iterable[str], settings: Settings | None = None) -> tuple[list[str], list[Diagnostic]]:
    """Files to lint (directories: every ``*.py`` below, sorted, less the excluded) and DB001
    for missing paths."""
    files, unreadable, _ = python_files(paths, settings or Settings())
    return files, [Diagnostic(path, 1, 1, UNREADABLE, reason) for path, reason in unreadable]


def check_files(files: list[str], jobs: int | None = None, trust_bytecode: bool = True,
                cache: ResultCache | None = None) -> list[FileReport]:
    """The per-file pass over ``files``, in parallel when there are many of them; with a
    ``cache``, over the files whose cached report is out of date.

    A worker process that dies (killed, out of memory) raises :class:`WorkerDied`
    instead of leaving the run waiting for its results forever.
    """
    if cache is None:
        return _check_files(files, jobs, trust_bytecode)
    tree = current_tree()
    reports: dict[str, FileReport] = {}
    for path in files:
        stored = cache.get(f"file:{path}", tree)
        report = FileReport.from_json(path, stored) if stored is not None else None
        if report is not None:
            reports[path] = report
    for report in _check_files([path for path in files if path not in reports], jobs, trust_bytecode):
        reports[report.path] = report
        if report.cacheable:
            cache.put(f"file:{report.path}", report.as_json(), report.depends)
    return [reports[path] for path in files]


def _check_files(files: list[str], jobs: int | None, trust_bytecode: bool) -> list[FileReport]:
    check = functools.partial(check_file, trust_bytecode=trust_bytecode)
    workers = jobs if jobs is not None else len(os.sched_getaffinity(0))
    if workers < 2 or len(files) < PARALLEL_MIN_FILES:
        return [check(path) for path in files]
    largest_first = sorted(files, key=_size, reverse=True)        # balances the workers' load
    context = multiprocessing.get_context("fork")
    try:
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            # few large chunks: each is one round trip to a worker (small ones cost more than they balance)
            chunk = max(4, len(files) // (workers * 8))
            reports = {r.path: r for r in pool.map(check, largest_first, chunksize=chunk)}
    except BrokenProcessPool:
        raise WorkerDied("a worker process died before finishing its files (killed, or out of memory); "
                         "nothing was reported; run again, or with --jobs 1 to find the file") from None
    return [reports[path] for path in files]


def _subclasses_of_tree_functions(reports: list[FileReport], trust_bytecode: bool,
                                  cache: ResultCache | None = None) -> list[FileReport]:
    """Check again the files whose classes derive from a Function class of another linted file
    (``class Impl(ProjectBase)``: the text prefilter cannot see that ``ProjectBase`` is one)."""
    names = {name.encode() for r in reports for name in r.function_names}
    subclass_files = {r.path for r in reports if r.base_names & names and all(d.code != SYNTAX for d in r.diagnostics)}
    ctx.derive_from_tree(subclass_files)
    return [_check_tree_bases(r.path, trust_bytecode, cache) if r.path in subclass_files else r
            for r in reports]


def _check_tree_bases(path: str, trust_bytecode: bool, cache: ResultCache | None) -> FileReport:
    """:func:`check_file` with ``tree_bases``, through the ``cache``."""
    stored = cache.get(f"bases:{path}", current_tree()) if cache is not None else None
    report = FileReport.from_json(path, stored) if stored is not None else None
    if report is not None:
        return report
    report = check_file(path, trust_bytecode, tree_bases=True)
    if cache is not None and report.cacheable:
        cache.put(f"bases:{path}", report.as_json(), report.depends)
    return report


def check_file(path: str, trust_bytecode: bool = True, tree_bases: bool = False) -> FileReport:
    """Syntax check, ctx rules, formula-file detection; never raises.

    ``tree_bases``: a class of the file derives from a Function class of another linted file.
    The report's ``depends`` are the file's stamp and what its analysis read of the tree.
    """
    try:
        status, source = read_regular(path)
    except OSError as error:
        return FileReport(path, (_unreadable(path, error),))
    with Recorder() as followed:
        r = check_source(path, source, trust_bytecode, tree_bases)
    depends = Depends(((path, FileStamp.of(status, source)),)) + followed.depends()
    return FileReport(r.path, r.diagnostics, r.functions, r.formula_file, r.function_names, r.base_names, depends)


def check_source(path: str, source: bytes, trust_bytecode: bool = True, tree_bases: bool = False) -> FileReport:
    """:func:`check_file` on ``source`` read already (``path`` names it); never raises."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # the compiler's warnings about the code read
            return _check_source(path, source, trust_bytecode, tree_bases)
    except Exception as error:  # noqa: BLE001 - one file's internal error must not stop the run
        if caused_by_recursion(error):
            return FileReport(path, (too_deep(path, _decode(path, source)),))
        return FileReport(path, (_internal_error(path, error),))


def _check_source(path: str, source: bytes, trust_bytecode: bool, tree_bases: bool = False) -> FileReport:
    file_noqa = _file_noqa(source) if b"transpile" in source else None
    if file_noqa is not None and not file_noqa:
        return FileReport(path, ())                  # ``# transpile: noqa``: the whole file is skipped
    function_candidate = tree_bases or prefilter.may_define_function(path, source)
    derivative_candidate = prefilter.may_use_derivative(source)
    if not (trust_bytecode and compiled_before(path, source)):
        problem = syntax_problem(path, source)
        if problem is not None:
            return FileReport(path, _without_file_noqa((problem,), file_noqa))
    base_names = prefilter.class_base_words(source) if b"class" in source and not tree_bases else frozenset()
    if not (function_candidate or derivative_candidate):
        return FileReport(path, (), base_names=base_names)
    tree = compile(source, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    report = ctx.check_module(tree, path) if function_candidate else ctx.CtxReport(0, ())
    diagnostics: tuple[Diagnostic, ...] = ()
    if report.findings:
        lines = _decode(path, source).splitlines()
        found = (Diagnostic(path, f.line, _column(lines, f.line, f.col_offset), f.code, f.message, f.fix,
                            related=tuple((line, _column(lines, line, col)) for line, col in f.related))
                 for f in report.findings)
        diagnostics = _without_file_noqa(without_suppressed(found, lines), file_noqa)
    formula_file = derivative_candidate and uses_derivative(tree)
    return FileReport(path, diagnostics, report.functions, formula_file, report.classes,
                      base_names - {name.encode() for name in report.classes})


def syntax_problem(path: str, source: bytes) -> Diagnostic | None:
    """DB000 when CPython's compiler rejects ``source`` (parser, symbol table and code
    generation: ``return`` outside a function, a late ``from __future__``, too many nested
    blocks...), when its bytes do not decode, or when it is nested too deeply to compile.
    The bytecode is built and thrown away: nothing is executed."""
    try:
        compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        try:
            decode_source(path, source)
        except UndecodableSource as undecodable:
            return undecodable.diagnostic
        return _syntax_diagnostic(path, source, error)
    return None


def _file_noqa(source: bytes) -> frozenset[str] | None:
    """The codes a ``# transpile: noqa[: CODES]`` comment line silences in the whole file
    (empty: every code); None without one."""
    match = FILE_NOQA.search(_decode("", source)) if b"noqa" in source else None
    if match is None:
        return None
    return _codes(match.group("codes")) if match.group("codes") else frozenset()


def _without_file_noqa(diagnostics: Iterable[Diagnostic], file_noqa: frozenset[str] | None,
                       ) -> tuple[Diagnostic, ...]:
    if file_noqa is None:
        return tuple(diagnostics)
    return tuple(d for d in diagnostics if file_noqa and not d.code.startswith(tuple(file_noqa)))


def _codes(text: str) -> frozenset[str]:
    return frozenset(code.upper() for code in re.split(r"[\s,]+", text.strip()) if code)


def compiled_before(path: str, source: bytes) -> bool:
    """Whether this interpreter's bytecode of exactly ``source`` is in ``__pycache__``.

    CPython (at import, or pip at install time) writes a ``.pyc`` only after
    compiling the source without error, so an up-to-date one proves there is
    no syntax error. Up to date means: the magic number of this interpreter,
    and either the source hash (hash-based pycs) or, for timestamp pycs, the
    source's mtime and size as recorded, the pyc itself written in a later
    second than the source's recorded mtime (an edit in the second the pyc was
    written cannot go unnoticed) and after the source's last change of any
    kind (its ctime: an edit whose mtime was set back, by ``cp -p``, ``tar``
    or ``os.utime``, moves the ctime on). Only the 16-byte header is read.
    """
    try:
        pyc = importlib.util.cache_from_source(path)
        with open(pyc, "rb") as file:
            header = file.read(16)
            pyc_written = os.fstat(file.fileno()).st_mtime_ns
        source_status = os.stat(path)
    except (OSError, ValueError, NotImplementedError):
        return False
    if len(header) < 16 or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags = int.from_bytes(header[4:8], "little")
    if flags & 0b1:
        return header[8:16] == importlib.util.source_hash(source)
    recorded_mtime = int.from_bytes(header[8:12], "little")
    recorded_size = int.from_bytes(header[12:16], "little")
    source_changed = source_status.st_mtime_ns // 1_000_000_000
    return (flags == 0 and recorded_mtime == source_changed & 0xFFFFFFFF
            and recorded_size == len(source) & 0xFFFFFFFF and pyc_written // 1_000_000_000 > source_changed
            and pyc_written > source_status.st_ctime_ns)


def uses_derivative(tree: ast.Module) -> bool:
    """Whether a function is decorated ``@derivative(...)`` (or ``@<module>.derivative(...)``)."""
    for node in statements(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
                if name == "derivative":
                    return True
    return False


def without_suppressed(diagnostics: Iterable[Diagnostic], lines: list[str]) -> Iterator[Diagnostic]:
    """Drop findings whose line says ``# noqa`` (all codes) or ``# noqa: CODE[,CODE...]``
    (a code or a prefix of codes: ``DB1`` silences DB100...DB107)."""
    for diagnostic in diagnostics:
        line = lines[diagnostic.line - 1] if 0 < diagnostic.line <= len(lines) else ""
        if not _suppressed_by_line(diagnostic.code, line):
            yield diagnostic


def _suppressed_by_line(code: str, line: str) -> bool:
    match = NOQA.search(line) if "noqa" in line.lower() else None
    if match is None:
        return False
    return match.group("codes") is None or code.startswith(tuple(_codes(match.group("codes"))))


class _ClosureRules:
    """The formula-file rules (front-end, closure rules, fix-its) with the library they see.

    Operators and helpers come from the shipped ``formulas/`` library (read
    statically) and from the linted formula files themselves. A file that
    cannot be read or analysed is that file's diagnostic; the others go on.
    """

    def __init__(self, paths: list[str], given: Mapping[str, bytes]) -> None:
        from transpiler.frontend import parse_module

        self.parse_module = parse_module
        self.given = given                    # sources read from stdin: fixed in memory only
        self.errors: dict[str, Diagnostic] = {}
        self.raw: dict[str, bytes] = {}
        self.sources: dict[str, str] = {}
        self.modules: dict[str, FormulaModule] = {}
        for path in paths:
            try:
                self.raw[path] = given[path] if path in given else read_regular(path)[1]
                self.sources[path] = decode_source(path, self.raw[path])
                self.modules[path] = parse_module(path, self.sources[path])
            except UndecodableSource as problem:
                self.errors[path] = problem.diagnostic
            except OSError as error:              # it vanished, or became another kind of file, since
                self.errors[path] = _unreadable(path, error)
            except Exception as error:  # noqa: BLE001 - reported as this file's internal error
                self.errors[path] = _internal_error(path, error)
        self.library = shipped_library(exclude={Path(path).resolve() for path in paths})
        every_module = [*self.library, *self.modules.values()]
        self.known_operators = frozenset(_operator_names(every_module))
        self.helpers = {helper.name: helper for module in every_module for helper in module.helpers}

    def check(self, path: str) -> tuple[Diagnostic, ...]:
        from transpiler.lint.closure_rules import check_formula_module

        if path in self.errors:
            return (self.errors[path],)
        try:
            module = self.modules[path]
            found = {*module.diagnostics,
                     *check_formula_module(module, self.sources[path], self.known_operators, self.helpers)}
            reported = {(d.line, d.col) for d in found if d.code == UNDECLARED_OPERATOR}
            found.update(d for d in self.refusals.get(path, ())
                         if not (d.code == UNKNOWN_OPERATOR and (d.line, d.col) in reported))
        except Exception as error:  # noqa: BLE001 - reported as this file's internal error
            return (_internal_error(path, error),)
        lines = self.sources[path].splitlines()
        file_noqa = _file_noqa(self.raw[path]) if b"transpile" in self.raw[path] else None
        return _without_file_noqa(without_suppressed(sorted(found), lines), file_noqa)

    @functools.cached_property
    def refusals(self) -> dict[str, list[Diagnostic]]:
        """What ``transpile`` would refuse (DB2xx) in the linted files, by the C++ emitter's own
        check, each file seen as ``transpile --formulas <its package>`` sees it (the shipped
        library's operators callable from another package); an unknown operator that DB105
        reports already is not reported twice as DB201."""
        from transpiler.cpp.emit import refusals, with_helpers_of
        from transpiler.model import Library

        ok = [module for path, module in self.modules.items() if path not in self.errors]
        packages: dict[Path, list[FormulaModule]] = {}
        for module in ok:
            packages.setdefault(package_root(module.path), []).append(module)
        shipped = Library(tuple(self.library))
        shipped_operators = shipped.operators
        found: list[Diagnostic] = []
        for root, modules in packages.items():
            try:
                rest = tuple(package_library(root, exclude={Path(m.path).resolve() for m in modules}))
                known = None if root == SHIPPED_FORMULAS else shipped_operators
                if known is not None:     # the shipped helpers it calls are emitted with it
                    rest = with_helpers_of(Library((*modules, *rest)), shipped).modules[len(modules):]
                found += refusals(tuple(modules), rest, known)
            except Exception as error:  # noqa: BLE001 - the emitter failed: an internal error of these files
                found += [_internal_error(module.path, error) for module in modules]
        by_path: dict[str, list[Diagnostic]] = {}
        for diagnostic in found:
            by_path.setdefault(diagnostic.path, []).append(diagnostic)
        return by_path

    def fix(self, path: str, wanted: Callable[[str, str, str], bool], write: bool = True) -> str | None:
        """Apply the fix-its of ``path``'s findings that are ``wanted`` (not silenced); write the
        file (``write``; a source given in memory is only updated here) or not. Returns its
        unified diff, or None when nothing changed.

        The file keeps its encoding, line endings (libcst round-trips them), mode, and
        symlinks (the target is rewritten, the link stays)."""
        from transpiler.lint.fix import fix_source

        if path in self.errors:
            return None
        before = self.sources[path]
        lines = before.splitlines()
        file_noqa = _file_noqa(self.raw[path]) if b"transpile" in self.raw[path] else None

        def keep(line: int, code: str) -> bool:
            text = lines[line - 1] if 0 < line <= len(lines) else ""
            silenced = file_noqa is not None and (not file_noqa or code.startswith(tuple(file_noqa)))
            return not silenced and wanted(path, code, text)

        try:
            after = fix_source(path, before, self.known_operators, self.helpers, wanted=keep)
        except Exception as error:  # noqa: BLE001 - reported as this file's internal error
            self.errors[path] = _internal_error(path, error)
            return None
        if after == before:
            return None
        change = "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                              f"a/{path}", f"b/{path}"))
        if write:
            if path not in self.given:
                _write_through(path, encode_source(after, source_encoding(path, self.raw[path])))
            self.sources[path] = after
            self.modules[path] = self.parse_module(path, after)
        return change


def _write_through(path: str, data: bytes) -> None:
    """Replace the file's bytes atomically, keeping its mode; a symlink keeps pointing at
    its target, which gets the new bytes."""
    target = Path(os.path.realpath(path))
    mode = stat.S_IMODE(target.stat().st_mode)
    temporary = target.with_name(f".{target.name}.lint-fix.tmp")
    temporary.write_bytes(data)
    os.chmod(temporary, mode)
    os.replace(temporary, target)


def shipped_library(exclude: set[Path]) -> list[FormulaModule]:
    """The shipped ``formulas/`` library (read statically), but for the files in ``exclude``."""
    if not SHIPPED_FORMULAS.is_dir():
        return []
    files = sorted(p for p in SHIPPED_FORMULAS.rglob("*.py") if p.is_file() and p.resolve() not in exclude)
    return [module for module in map(_library_module, files) if module is not None]


def package_root(path: str) -> Path:
    """The formula package a file belongs to, as ``transpile --formulas`` would be given it: the
    top of its chain of ``__init__.py`` directories, or its own directory outside a package."""
    directory = Path(path).resolve().parent
    root = directory
    while (root / "__init__.py").is_file() and (root.parent / "__init__.py").is_file():
        root = root.parent
    return root if (root / "__init__.py").is_file() else directory


LIBRARY_MARKERS = (b"@helper", b"derivative", b"nondifferentiable")


def package_library(root: Path, exclude: set[Path]) -> list[FormulaModule]:
    """The modules under ``root`` (but ``exclude``) that can declare operators or helpers: what
    ``transpile --formulas root`` would emit along with the linted files (others, by their
    text, add nothing to the library and are not parsed)."""
    if root == SHIPPED_FORMULAS:
        return shipped_library(exclude)
    modules = []
    for path in sorted(root.rglob("*.py")):
        if not path.is_file() or path.resolve() in exclude:     # is_file first: resolve() raises on a loop
            continue
        try:
            text = read_regular(path)[1]
        except OSError:
            continue
        module = _library_module(path) if any(marker in text for marker in LIBRARY_MARKERS) else None
        if module is not None:
            modules.append(module)
    return modules


def _library_module(path: Path) -> FormulaModule | None:
    """A module of the library the linted files see (None: it could not be read, it vanished)."""
    from transpiler.frontend import read_module

    try:
        return read_module(str(path))
    except OSError:
        return None


def _operator_names(modules: Iterable[FormulaModule]) -> set[str]:
    """``name.overload`` and the base ``name`` of every operator the modules declare."""
    names: set[str] = set()
    for module in modules:
        for schema in [*(f.schema for f in module.formulas), *module.nondifferentiable]:
            names.update({str(schema.name), schema.name.base})
    return names


def _syntax_diagnostic(path: str, source: bytes, error: Exception) -> Diagnostic:
    if isinstance(error, (RecursionError, MemoryError)):
        return Diagnostic(path, 1, 1, SYNTAX, "cannot compile the file: it is nested too deeply for "
                          f"Python's compiler ({type(error).__name__}); split the deepest expression")
    if not isinstance(error, SyntaxError) or not error.lineno:
        return Diagnostic(path, 1, 1, SYNTAX, f"cannot parse the file: {_short(error)}; fix the file")
    lines = _decode(path, source).splitlines()
    column = _column(lines, error.lineno, (error.offset or 1) - 1)
    return Diagnostic(path, error.lineno, column, SYNTAX,
                      f"cannot parse the file: {error.msg}; fix the syntax error")


def _unreadable(path: str, error: OSError) -> Diagnostic:
    return Diagnostic(path, 1, 1, UNREADABLE, f"cannot read the file: {error.strerror or error}")


def _internal_error(path: str, error: BaseException) -> Diagnostic:
    return Diagnostic(path, 1, 1, INTERNAL,
                      f"internal error of the linter on this file ({type(error).__name__}: {_short(error)}); "
                      "the other files were checked; please report it")


def _short(error: BaseException, limit: int = 200) -> str:
    """The first line of ``str(error)``, cut at ``limit`` characters; never raises (the text of
    an error about a deeply nested tree can itself recurse too deeply)."""
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - any failure to describe it
        return "(no description)"
    first = text.splitlines()[0] if text else ""
    return first if len(first) <= limit else first[:limit] + "..."


def _decode(path: str, source: bytes) -> str:
    """The text of ``source`` (PEP 263), undecodable bytes replaced: for positions and ``# noqa``."""
    try:
        return decode_source(path, source)
    except UndecodableSource:
        return source.decode("utf-8", "replace")


def _column(lines: list[str], line: int, byte_offset: int) -> int:
    """1-based character column of a 0-based UTF-8 byte offset (what ``ast`` reports)."""
    if not 0 < line <= len(lines):
        return byte_offset + 1
    return len(lines[line - 1].encode("utf-8")[:byte_offset].decode("utf-8", "replace")) + 1


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0

