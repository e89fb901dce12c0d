"""The per-file pass: what one file says by itself, syntax check, ctx rules, formula-file detection.

Every file gets the same syntax check (DB000): CPython's own compiler
(``compile``, the bytecode thrown away), which also rejects what only code
generation finds (``return`` outside a function, a late ``from __future__``);
bytes that do not decode (:mod:`transpiler.sources`) and files nested too
deeply are DB000 too; a file with up-to-date bytecode is known to pass it
(:mod:`transpiler.lint.bytecode`). A cheap text prefilter
(:mod:`transpiler.lint.prefilter`, never turning away a file the analysis
would flag) decides what else a file needs: files whose text can name
``torch.autograd.Function`` are parsed to an ``ast`` for the ctx rules
(:mod:`transpiler.lint.ctx`); files that use ``@derivative`` are marked as
formula files, whose closure rules run later over all of them
(:mod:`transpiler.lint.formula_files`). Owns :class:`FileReport` (also the
form the result cache stores) and the diagnostics of a file that could not
be checked (unreadable, internal error). Nothing read is imported or executed.
"""
from __future__ import annotations

import ast
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field

from transpiler import codes
from transpiler.diagnostics import Diagnostic
from transpiler.lint import ctx, prefilter
from transpiler.lint.bytecode import compiled_before
from transpiler.lint.cache import Depends, FileStamp, Recorder
from transpiler.lint.ctx.names import statements
from transpiler.lint.noqa import decode_lossy, file_noqa, without_file_noqa, without_suppressed
from transpiler.sources import UndecodableSource, caused_by_recursion, decode_source, read_regular, too_deep

SYNTAX = codes.UNPARSABLE.code
UNREADABLE = codes.UNREADABLE.code
INTERNAL = codes.INTERNAL_ERROR.code


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
        return [diagnostics_as_json(self.diagnostics), self.functions, self.formula_file, self.function_names,
                sorted(word.decode("latin-1") for word in self.base_names)]

    @staticmethod
    def from_json(path: str, value: object) -> FileReport | None:
        """The report :meth:`as_json` gave, or None when ``value`` is not one (a damaged cache)."""
        try:
            diagnostics, functions, formula_file, function_names, base_names = value
            return FileReport(path, diagnostics_from_json(path, diagnostics), int(functions), bool(formula_file),
                              tuple(map(str, function_names)), frozenset(word.encode("latin-1") for word in base_names))
        except (AttributeError, TypeError, ValueError, UnicodeError):
            return None

    @property
    def cacheable(self) -> bool:
        """Whether the result is the file's own (not an internal error or an unreadable file)."""
        return bool(self.depends.files) and all(d.code not in (INTERNAL, UNREADABLE) for d in self.diagnostics)


def diagnostics_as_json(diagnostics: Iterable[Diagnostic]) -> list[list[object]]:
    """``diagnostics`` as JSON rows (the path left out: the rows are kept by path)."""
    return [[d.line, d.col, d.code, d.message, d.fix, d.related] for d in diagnostics]


def diagnostics_from_json(path: str, rows: list) -> tuple[Diagnostic, ...]:
    """Raises TypeError or ValueError on rows :func:`diagnostics_as_json` did not write."""
    return tuple(Diagnostic(path, int(line), int(col), str(code), str(message), None if fix is None else str(fix),
                            tuple((int(at_line), int(at_col)) for at_line, at_col in related))
                 for line, col, code, message, fix, related in rows)


def check_file(path: str, trust_bytecode: bool = True, tree_bases: bool = False) -> FileReport:
    """Syntax check, ctx rules, formula-file detection; never raises.

    ``tree_bases``: a class of the file derives from a Function class of another linted file.
    The report's ``depends`` are the file's stamp and what its analysis read of the tree.
    """
    try:
        status, source = read_regular(path)
    except OSError as error:
        return FileReport(path, (unreadable(path, error),))
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
            return FileReport(path, (too_deep(path, decode_lossy(path, source)),))
        if isinstance(error, MemoryError):           # a huge file under a memory limit: the file's, not ours
            return FileReport(path, (Diagnostic(path, 1, 1, SYNTAX, f"cannot analyse the file: its {len(source):,} "
                                                "bytes need more memory than this process may use; split it "
                                                "into smaller files"),))
        return FileReport(path, (internal_error(path, error),))


def _check_source(path: str, source: bytes, trust_bytecode: bool, tree_bases: bool = False) -> FileReport:
    silenced = file_noqa(source) if b"transpile" in source else None
    if silenced is not None and not silenced:
        return FileReport(path, ())                  # ``# transpile: noqa``: the whole file is skipped
    function_candidate = tree_bases or prefilter.may_define_function(path, source)
    derivative_candidate = prefilter.may_use_derivative(source)
    if not (trust_bytecode and compiled_before(path, source)):
        problem = syntax_problem(path, source)
        if problem is not None:
            return FileReport(path, without_file_noqa((problem,), silenced))
    base_names = prefilter.class_base_words(source) if b"class" in source and not tree_bases else frozenset()
    if not (function_candidate or derivative_candidate):
        return FileReport(path, (), base_names=base_names)
    tree = compile(source, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    if not function_candidate:      # a formula file: the ctx rules are not imported (``transpile`` after an edit)
        return FileReport(path, (), formula_file=uses_derivative(tree), base_names=base_names)
    report = ctx.check_module(tree, path)
    diagnostics: tuple[Diagnostic, ...] = ()
    if report.findings:
        lines = decode_lossy(path, source).splitlines()
        found = (Diagnostic(path, f.line, column(lines, f.line, f.col_offset), f.code, f.message, f.fix,
                            related=tuple((line, column(lines, line, col)) for line, col in f.related))
                 for f in report.findings)
        diagnostics = without_file_noqa(without_suppressed(found, lines), silenced)
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



def _syntax_diagnostic(path: str, source: bytes, error: Exception) -> Diagnostic:
    if isinstance(error, (RecursionError, MemoryError)):
        return Diagnostic(path, 1, 1, SYNTAX, "cannot compile the file: it is nested too deeply for "
                          f"Python's compiler ({type(error).__name__}); split the deepest expression")
    if not isinstance(error, SyntaxError) or not error.lineno:
        return Diagnostic(path, 1, 1, SYNTAX, f"cannot parse the file: {_short(error)}; fix the file")
    lines = decode_lossy(path, source).splitlines()
    at = column(lines, error.lineno, (error.offset or 1) - 1)
    return Diagnostic(path, error.lineno, at, SYNTAX,
                      f"cannot parse the file: {error.msg}; fix the syntax error")


def unreadable(path: str, error: OSError) -> Diagnostic:
    """DB001: the file cannot be read."""
    return Diagnostic(path, 1, 1, UNREADABLE, f"cannot read the file: {error.strerror or error}")


def internal_error(path: str, error: BaseException) -> Diagnostic:
    """DB002: the linter failed on this file (the others are still checked)."""
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


def column(lines: list[str], line: int, byte_offset: int) -> int:
    """1-based character column of a 0-based UTF-8 byte offset (what ``ast`` reports)."""
    if not 0 < line <= len(lines):
        return byte_offset + 1
    return len(lines[line - 1].encode("utf-8")[:byte_offset].decode("utf-8", "replace")) + 1

