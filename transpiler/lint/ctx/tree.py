"""The linted tree as a static module graph: which file defines a dotted name (never imported).

``SourceTree`` maps the dotted module names of the linted files (from their
``__init__.py`` parents) to paths, and parses a module only when a forward
calls one of its functions or a class derives from one of its classes.
Re-exports (``from .impl import f`` in a package's ``__init__``) are followed.
What one file's analysis looks up and reads of the others is recorded
(:class:`transpiler.lint.cache.Recorder`): the result cache keeps it as that
result's dependencies.
"""
from __future__ import annotations

import ast
import re
from functools import lru_cache

from transpiler.lint.cache import FileStamp, record_file, record_module
from transpiler.lint.ctx.names import ImportTable, import_table, module_name, package_of
from transpiler.sources import read_regular

MAX_REEXPORTS = 4


class SourceTree:
    """Dotted module name -> file, for the files of one lint run."""

    def __init__(self, paths: list[str]) -> None:
        self.paths: dict[str, str] = {}
        self.subclass_files: frozenset[str] = frozenset()   # files with classes deriving from tree Functions
        for path in paths:
            name = module_name(path)
            if name:
                self.paths.setdefault(name, path)

    def module_name(self, path: str) -> str | None:
        """The dotted module name of a file (None: it is in no package and has no name)."""
        return module_name(path) or None

    def definition(self, qualified: str) -> tuple[ast.stmt, ImportTable, str] | None:
        """The top-level ``def``/``class`` that ``qualified`` names, its module's imports and path."""
        for _ in range(MAX_REEXPORTS):
            module, _, name = qualified.rpartition(".")
            path = self.paths.get(module)
            record_module(module, path)
            parsed = _parsed(path) if path is not None and _mentions(path, name) else None
            if parsed is None:
                return None
            tree, imports = parsed
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                    return node, imports, self.paths[module]
            target = imports.names.get(name)                 # re-exported: follow the import
            if target is None or target == qualified:
                return None
            qualified = target
        return None


def _mentions(path: str, name: str) -> bool:
    """A cheap text test before parsing: the module names ``name`` at all (defines or re-exports it)."""
    source = _read(path)
    return source is not None and _mentioned(path, name, source)


@lru_cache(maxsize=4096)
def _mentioned(path: str, name: str, source: bytes) -> bool:
    return re.search(rb"\b%s\b" % re.escape(name.encode()), source) is not None


def _parsed(path: str) -> tuple[ast.Module, ImportTable] | None:
    source = _read(path)
    return _parsed_source(path, source) if source is not None else None


@lru_cache(maxsize=512)
def _parsed_source(path: str, source: bytes) -> tuple[ast.Module, ImportTable] | None:
    try:
        tree = compile(source, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    return tree, import_table(tree, path)


def _read(path: str) -> bytes | None:
    """The bytes of another file of the tree (None: unreadable), recorded as read."""
    source, stamp = _stamped(path)
    record_file(path, stamp)
    return source


@lru_cache(maxsize=512)
def _stamped(path: str) -> tuple[bytes | None, FileStamp | None]:
    try:
        status, source = read_regular(path)
    except OSError:
        return None, None
    return source, FileStamp.of(status, source)


_current: SourceTree | None = None


def use_tree(paths: list[str]) -> None:
    """Make the files of this run the tree the ctx rules resolve names in (per process)."""
    global _current
    _current = SourceTree(paths)
    for memoized in (package_of, _stamped, _mentioned, _parsed_source):
        memoized.cache_clear()


def derive_from_tree(paths: set[str]) -> None:
    """Files whose classes derive from Function classes of other files of this run."""
    if _current is not None:
        _current.subclass_files = frozenset(paths)


def current_tree() -> SourceTree | None:
    """The tree :func:`use_tree` set for this run (None before any)."""
    return _current
