"""The linted tree as a static module graph: which file defines a dotted name (never imported).

``SourceTree`` maps the dotted module names of the linted files (from their
``__init__.py`` parents) to paths, and parses a module only when a forward
calls one of its functions or a class derives from one of its classes.
Re-exports (``from .impl import f`` in a package's ``__init__``) are followed.
"""
from __future__ import annotations

import ast
import os
import re
from functools import lru_cache
from pathlib import Path

from transpiler.lint.ctx.names import ImportTable, import_table

MAX_REEXPORTS = 4


class SourceTree:
    """Dotted module name -> file, for the files of one lint run."""

    def __init__(self, paths: list[str]) -> None:
        self.paths: dict[str, str] = {}
        self.subclass_files: frozenset[str] = frozenset()   # files with classes deriving from tree Functions
        self.names: dict[str, str] = {}                      # path -> dotted module name
        for path in paths:                                   # os.path: thousands of files, no Path objects
            stem = os.path.splitext(os.path.basename(path))[0]
            package = _package(os.path.dirname(path) or ".")
            stem = "" if stem == "__init__" else stem
            name = ".".join(part for part in (package, stem) if part)
            if name:
                self.paths.setdefault(name, path)
                self.names.setdefault(path, name)

    def module(self, name: str) -> tuple[ast.Module, ImportTable] | None:
        path = self.paths.get(name)
        return _parsed(path) if path is not None else None

    def definition(self, qualified: str) -> tuple[ast.stmt, ImportTable, str] | None:
        """The top-level ``def``/``class`` that ``qualified`` names, its module's imports and path."""
        for _ in range(MAX_REEXPORTS):
            module, _, name = qualified.rpartition(".")
            path = self.paths.get(module)
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


@lru_cache(maxsize=None)
def _package(directory: str) -> str:
    """The dotted package a directory is (its chain of ``__init__.py`` parents), "" for none."""
    folder = Path(directory)
    if not (folder / "__init__.py").is_file():
        return ""
    parent = _package(str(folder.parent)) if folder.parent != folder else ""
    return f"{parent}.{folder.name}" if parent else folder.name


@lru_cache(maxsize=4096)
def _mentions(path: str, name: str) -> bool:
    """A cheap text test before parsing: the module names ``name`` at all (defines or re-exports it)."""
    try:
        source = Path(path).read_bytes()
    except OSError:
        return False
    return re.search(rb"\b%s\b" % re.escape(name.encode()), source) is not None


@lru_cache(maxsize=512)
def _parsed(path: str) -> tuple[ast.Module, ImportTable] | None:
    try:
        source = Path(path).read_bytes()
        tree = compile(source, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (OSError, SyntaxError, ValueError):
        return None
    return tree, import_table(tree, path)


_current: SourceTree | None = None


def use_tree(paths: list[str]) -> None:
    """Make the files of this run the tree the ctx rules resolve names in (per process)."""
    global _current
    _current = SourceTree(paths)
    _parsed.cache_clear()
    _mentions.cache_clear()


def derive_from_tree(paths: set[str]) -> None:
    """Files whose classes derive from Function classes of other files of this run."""
    if _current is not None:
        _current.subclass_files = frozenset(paths)


def current_tree() -> SourceTree | None:
    return _current
