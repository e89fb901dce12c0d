"""The lint driver: which files, which rules, ``# noqa``, and the whole run's result.

Every file gets the same syntax check (DB000): CPython's parser and symbol
table (``symtable``), which reject what ``compile`` rejects up to code
generation without building ``ast`` objects; a file that CPython itself
already compiled (its up-to-date bytecode is in ``__pycache__``, as pip writes
it for every installed file) is known to pass it. A cheap text prefilter decides
what else a file needs: files whose text can name ``torch.autograd.Function``
are parsed to an ``ast`` for the ctx rules (:mod:`transpiler.lint.ctx`); files
that use ``@derivative`` are formula files and also get the closure rules of
:mod:`transpiler.lint.closure_rules` (libcst, through
:func:`transpiler.frontend.parse_module`). Large runs spread the per-file work
over the available cores. Nothing read is imported or executed.
"""
from __future__ import annotations

import ast
import functools
import importlib.util
import multiprocessing
import os
import re
import symtable
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import transpiler
from transpiler.diagnostics import Diagnostic
from transpiler.lint import ctx
from transpiler.lint.ctx.names import statements

if TYPE_CHECKING:                    # the model imports libcst: only formula files need it
    from transpiler.model import FormulaModule

SYNTAX = "DB000"
UNREADABLE = "DB001"
INTERNAL = "DB002"
SHIPPED_FORMULAS = Path(transpiler.__file__).resolve().parent.parent / "formulas"
PARALLEL_MIN_FILES = 200
CLASS_BASES = re.compile(rb"^[ \t]*class[ \t]+\w+[ \t]*\(([^)]*)\)", re.MULTILINE)
FUNCTION_WORD = re.compile(rb"Function\b")        # Function, InplaceFunction; not FunctionalTensor
FUNCTION_ALIAS = re.compile(rb"Function[ \t]+as[ \t]+(\w+)")
DERIVATIVE_DECORATOR = re.compile(rb"@[ \t]*(?:\w+[ \t]*\.[ \t]*)*derivative\b")
WORD = re.compile(rb"[A-Za-z_]\w*")
NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*))?", re.IGNORECASE)


@dataclass(frozen=True)
class FileReport:
    """What the per-file pass found in one file."""

    path: str
    diagnostics: tuple[Diagnostic, ...]
    functions: int = 0              # torch.autograd.Function subclasses analysed
    formula_file: bool = False      # uses @derivative: the closure rules still have to run
    function_names: tuple[str, ...] = ()   # their class names (other files may derive from them)
    base_names: frozenset[bytes] = frozenset()  # words in the bases of classes the ctx rules skipped


@dataclass(frozen=True)
class LintResult:
    """A whole run: findings after ``# noqa``, sorted by path, line, col."""

    diagnostics: tuple[Diagnostic, ...]
    files: int
    functions: int
    formula_files: int
    fixed: tuple[str, ...] = ()

    @property
    def unreadable(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.code == UNREADABLE)

    @property
    def findings(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.code != UNREADABLE)


def lint_paths(paths: list[str]) -> list[Diagnostic]:
    """Lint files and directories; every finding (unreadable paths included), sorted."""
    return list(lint(paths).diagnostics)


def lint(paths: Iterable[str], fix: bool = False, jobs: int | None = None,
         trust_bytecode: bool = True) -> LintResult:
    """Run every rule on ``paths`` (files, or directories searched for ``*.py``).

    ``trust_bytecode``: skip the syntax check of files whose up-to-date bytecode
    CPython already wrote (see :func:`compiled_before`).
    """
    files, missing = collect_files(paths)
    ctx.use_tree(files)                   # names resolve across the files of this run
    reports = check_files(files, jobs, trust_bytecode)
    reports = _subclasses_of_tree_functions(reports, trust_bytecode)
    formula_paths = [r.path for r in reports if r.formula_file]
    closure_findings, fixed = _formula_rules(formula_paths, fix) if formula_paths else ({}, [])
    diagnostics = {d for r in reports for d in r.diagnostics} | set(missing)
    diagnostics.update(d for found in closure_findings.values() for d in found)
    return LintResult(tuple(sorted(diagnostics)), len(files), sum(r.functions for r in reports),
                      len(formula_paths), tuple(fixed))


def _formula_rules(paths: list[str], fix: bool) -> tuple[dict[str, tuple[Diagnostic, ...]], list[str]]:
    """Closure findings per formula file (after the fix-its when ``fix``), and the files fixed."""
    try:
        closure = _ClosureRules(paths)
    except Exception as error:  # noqa: BLE001 - the library itself could not be read
        return {path: (_internal_error(path, error),) for path in paths}, []
    fixed = [path for path in paths if fix and closure.fix(path)]
    return {path: closure.check(path) for path in paths}, fixed


def collect_files(paths: Iterable[str]) -> tuple[list[str], list[Diagnostic]]:
    """Files to lint (directories: every ``*.py`` below, sorted) and DB001 for missing paths."""
    files: dict[str, None] = {}
    missing: list[Diagnostic] = []
    for path in paths:
        target = Path(path)
        if target.is_dir():
            files.update((str(p), None) for p in sorted(target.rglob("*.py")) if p.is_file())
        elif target.is_file():
            files[str(target)] = None
        else:
            missing.append(Diagnostic(path, 1, 1, UNREADABLE, "no such file or directory"))
    return list(files), missing


def check_files(files: list[str], jobs: int | None = None, trust_bytecode: bool = True) -> list[FileReport]:
    """The per-file pass over ``files``, in parallel when there are many of them."""
    check = functools.partial(check_file, trust_bytecode=trust_bytecode)
    workers = jobs if jobs is not None else len(os.sched_getaffinity(0))
    if workers < 2 or len(files) < PARALLEL_MIN_FILES:
        return [check(path) for path in files]
    largest_first = sorted(files, key=_size, reverse=True)        # balances the workers' load
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        reports = {r.path: r for r in pool.imap_unordered(check, largest_first, chunksize=4)}
    return [reports[path] for path in files]


def _subclasses_of_tree_functions(reports: list[FileReport], trust_bytecode: bool) -> list[FileReport]:
    """Check again the files whose classes derive from a Function class of another linted file
    (``class Impl(ProjectBase)``: the text prefilter cannot see that ``ProjectBase`` is one)."""
    names = {name.encode() for r in reports for name in r.function_names}
    subclass_files = {r.path for r in reports if r.base_names & names and not r.diagnostics}
    ctx.derive_from_tree(subclass_files)
    return [check_file(r.path, trust_bytecode, tree_bases=True) if r.path in subclass_files else r
            for r in reports]


def class_base_words(source: bytes) -> frozenset[bytes]:
    """The identifiers in the bases of every ``class X(...)`` statement (a text scan, no parse)."""
    words: set[bytes] = set()
    start = source.find(b"class ")
    while start >= 0:
        if not source[source.rfind(b"\n", 0, start) + 1:start].strip():
            opening, colon = source.find(b"(", start, start + 200), source.find(b":", start, start + 200)
            if opening >= 0 and (colon < 0 or opening < colon):
                words.update(WORD.findall(source, opening + 1, max(source.find(b")", opening), opening)))
        start = source.find(b"class ", start + 6)
    return frozenset(words)


def check_file(path: str, trust_bytecode: bool = True, tree_bases: bool = False) -> FileReport:
    """Syntax check, ctx rules, formula-file detection; never raises.

    ``tree_bases``: a class of the file derives from a Function class of another linted file.
    """
    try:
        source = Path(path).read_bytes()
    except OSError as error:
        return FileReport(path, (Diagnostic(path, 1, 1, UNREADABLE, f"cannot read the file: {error.strerror}"),))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # the compiler's warnings about the code read
            return _check_source(path, source, trust_bytecode, tree_bases)
    except Exception as error:  # noqa: BLE001 - one file's internal error must not stop the run
        return FileReport(path, (_internal_error(path, error),))


def may_define_function(path: str, source: bytes) -> bool:
    """Whether the text can hold a ``torch.autograd.Function`` subclass (a necessary condition).

    Any spelling of the base goes through the word ``Function`` (``torch.autograd.Function``,
    ``ag.Function``, ``from torch.autograd import Function [as F]``) and through ``autograd``
    (or the file is in torch's own autograd package); and some ``class`` statement names
    ``Function`` or such an alias among its bases. A subclass of a local subclass has that
    local root in the same file.
    """
    if b"Function" not in source or not (b"autograd" in source or "autograd" in path):
        return False
    aliases = [re.compile(rb"\b%s\b" % re.escape(alias)) for alias in set(FUNCTION_ALIAS.findall(source))]
    for header in CLASS_BASES.finditer(source):
        bases = header.group(1)
        if FUNCTION_WORD.search(bases) or any(alias.search(bases) for alias in aliases):
            return True
    return False


def _check_source(path: str, source: bytes, trust_bytecode: bool, tree_bases: bool = False) -> FileReport:
    function_candidate = tree_bases or may_define_function(path, source)
    may_use_derivative = DERIVATIVE_DECORATOR.search(source) is not None
    if not (trust_bytecode and compiled_before(path, source)):
        try:
            symtable.symtable(source, path, "exec")      # the syntax check, without ast objects
        except (SyntaxError, ValueError) as error:
            return FileReport(path, (_syntax_diagnostic(path, source, error),))
    if not (function_candidate or may_use_derivative):
        return FileReport(path, (), base_names=class_base_words(source) if b"class" in source else frozenset())
    tree = compile(source, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    report = ctx.check_module(tree, path) if function_candidate else ctx.CtxReport(0, ())
    diagnostics: tuple[Diagnostic, ...] = ()
    if report.findings:
        lines = _decode(source).splitlines()
        found = (Diagnostic(path, f.line, _column(lines, f.line, f.col_offset), f.code, f.message,
                            related=tuple((line, _column(lines, line, col)) for line, col in f.related))
                 for f in report.findings)
        diagnostics = tuple(without_suppressed(found, lines))
    formula_file = may_use_derivative and uses_derivative(tree)
    return FileReport(path, diagnostics, report.functions, formula_file, report.classes)


def compiled_before(path: str, source: bytes) -> bool:
    """Whether this interpreter's bytecode of exactly ``source`` is in ``__pycache__``.

    CPython (at import, or pip at install time) writes a ``.pyc`` only after
    compiling the source without error, so an up-to-date one proves there is
    no syntax error. Up to date means: the magic number of this interpreter,
    and either the source hash (hash-based pycs) or the source's mtime and
    size as recorded (timestamp pycs), the pyc itself written in a later
    second than the source's last change, so that an edit in the second the
    pyc was written cannot go unnoticed. Only the 16-byte header is read.
    """
    try:
        pyc = importlib.util.cache_from_source(path)
        with open(pyc, "rb") as file:
            header = file.read(16)
        pyc_written = int(os.stat(pyc).st_mtime)
        source_changed = int(os.stat(path).st_mtime)
    except (OSError, ValueError, NotImplementedError):
        return False
    if len(header) < 16 or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags = int.from_bytes(header[4:8], "little")
    if flags & 0b1:
        return header[8:16] == importlib.util.source_hash(source)
    recorded_mtime = int.from_bytes(header[8:12], "little")
    recorded_size = int.from_bytes(header[12:16], "little")
    return (flags == 0 and recorded_mtime == source_changed & 0xFFFFFFFF
            and recorded_size == len(source) & 0xFFFFFFFF and pyc_written > source_changed)


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
    """Drop findings whose line says ``# noqa`` (all codes) or ``# noqa: CODE[,CODE...]``."""
    for diagnostic in diagnostics:
        line = lines[diagnostic.line - 1] if 0 < diagnostic.line <= len(lines) else ""
        match = NOQA.search(line) if "noqa" in line.lower() else None
        if match is None:
            yield diagnostic
        elif match.group("codes") is not None:
            codes = {code.strip().upper() for code in match.group("codes").split(",")}
            if diagnostic.code not in codes:
                yield diagnostic


class _ClosureRules:
    """The formula-file rules (front-end, closure rules, fix-its) with the library they see.

    Operators and helpers come from the shipped ``formulas/`` library (read
    statically) and from the linted formula files themselves.
    """

    def __init__(self, paths: list[str]) -> None:
        from transpiler.frontend import parse_module

        self.parse_module = parse_module
        self.sources = {path: _decode(Path(path).read_bytes()) for path in paths}
        self.modules = {path: parse_module(path, text) for path, text in self.sources.items()}
        library = shipped_library(exclude={Path(path).resolve() for path in paths})
        every_module = [*library, *self.modules.values()]
        self.known_operators = frozenset(_operator_names(every_module))
        self.helpers = {helper.name: helper for module in every_module for helper in module.helpers}
        self.errors: dict[str, Exception] = {}

    def check(self, path: str) -> tuple[Diagnostic, ...]:
        from transpiler.lint.closure_rules import check_formula_module

        if path in self.errors:
            return (_internal_error(path, self.errors[path]),)
        try:
            module = self.modules[path]
            found = {*module.diagnostics,
                     *check_formula_module(module, self.sources[path], self.known_operators, self.helpers)}
        except Exception as error:  # noqa: BLE001 - reported as this file's internal error
            return (_internal_error(path, error),)
        return tuple(without_suppressed(sorted(found), self.sources[path].splitlines()))

    def fix(self, path: str) -> bool:
        """Rewrite ``path`` in place with the fix-its; True when it changed."""
        from transpiler.lint.fix import fix_source

        before = self.sources[path]
        try:
            after = fix_source(path, before, self.known_operators, self.helpers)
        except Exception as error:  # noqa: BLE001 - reported as this file's internal error
            self.errors[path] = error
            return False
        if after == before:
            return False
        temporary = Path(f"{path}.lint-fix.tmp")
        temporary.write_text(after, encoding="utf-8")
        os.replace(temporary, path)
        self.sources[path] = after
        self.modules[path] = self.parse_module(path, after)
        return True


def shipped_library(exclude: set[Path]) -> list[FormulaModule]:
    """The shipped ``formulas/`` library (read statically), but for the files in ``exclude``."""
    from transpiler.frontend import parse_module

    if not SHIPPED_FORMULAS.is_dir():
        return []
    files = sorted(p for p in SHIPPED_FORMULAS.rglob("*.py") if p.is_file() and p.resolve() not in exclude)
    return [parse_module(str(p), _decode(p.read_bytes())) for p in files]


def _operator_names(modules: Iterable[FormulaModule]) -> set[str]:
    """``name.overload`` and the base ``name`` of every operator the modules declare."""
    names: set[str] = set()
    for module in modules:
        for schema in [*(f.schema for f in module.formulas), *module.nondifferentiable]:
            names.update({str(schema.name), schema.name.base})
    return names


def _syntax_diagnostic(path: str, source: bytes, error: SyntaxError | ValueError) -> Diagnostic:
    if not isinstance(error, SyntaxError) or not error.lineno:
        return Diagnostic(path, 1, 1, SYNTAX, f"cannot parse the file: {error}; fix the file")
    lines = _decode(source).splitlines()
    column = _column(lines, error.lineno, (error.offset or 1) - 1)
    return Diagnostic(path, error.lineno, column, SYNTAX,
                      f"cannot parse the file: {error.msg}; fix the syntax error")


def _internal_error(path: str, error: BaseException) -> Diagnostic:
    return Diagnostic(path, 1, 1, INTERNAL,
                      f"internal error of the linter on this file ({type(error).__name__}: {error}); "
                      "the other files were checked; please report it")


def _decode(source: bytes) -> str:
    try:
        return importlib.util.decode_source(source)
    except (SyntaxError, UnicodeDecodeError, LookupError):
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

