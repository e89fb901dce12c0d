"""Static name resolution: what a dotted name in a module refers to, via its imports.

``import torch.autograd as ag`` makes ``ag.Function`` resolve to
``torch.autograd.Function``; ``from .function import once_differentiable`` in
``torch/autograd/variable.py`` resolves against the file's package. Nothing is
imported: the module's own import statements are the only source of truth.
"""
from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from transpiler.lint.cache import record_module_name


@dataclass(frozen=True)
class ImportTable:
    """Local name -> fully qualified name, for every import anywhere in a module."""

    module: str                      # this file's dotted module name ("" when no relative import needed it)
    names: dict[str, str]
    star_modules: tuple[str, ...] = ()   # ``from M import *``: M, for each

    def qualify(self, node: ast.expr) -> str | None:
        """``ag.Function`` -> ``torch.autograd.Function``; None for anything but a dotted name."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        head = self.names.get(node.id, node.id)
        return ".".join([head, *reversed(parts)])


def statements(tree: ast.AST) -> Iterator[ast.stmt]:
    """Every statement under ``tree`` (nested blocks, functions, classes), without expressions.

    Far cheaper than ``ast.walk``: imports, classes and functions are statements.
    """
    pending = list(reversed(_blocks(tree)))
    while pending:
        node = pending.pop()
        yield node
        pending.extend(reversed(_blocks(node)))


def _blocks(node: ast.AST) -> list[ast.stmt]:
    children: list[ast.stmt] = []
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list):
            children.extend(block)
    for handler in getattr(node, "handlers", ()):
        children.extend(handler.body)
    for case in getattr(node, "cases", ()):
        children.extend(case.body)
    return children


def module_name(path: str) -> str:
    """The dotted module name of ``path``, from the ``__init__.py`` files of its parents ("" for
    none); recorded as a dependency of the result being computed (:mod:`transpiler.lint.cache`)."""
    stem = os.path.splitext(os.path.basename(path))[0]     # os.path: thousands of files, no Path objects
    package = package_of(os.path.dirname(path) or ".")
    name = ".".join(part for part in (package, "" if stem == "__init__" else stem) if part)
    record_module_name(path, name or None)
    return name


@cache
def package_of(directory: str) -> str:
    """The dotted package a directory is (its chain of ``__init__.py`` parents), "" for none."""
    folder = Path(directory)
    if not (folder / "__init__.py").is_file():
        return ""
    parent = package_of(str(folder.parent)) if folder.parent != folder else ""
    return f"{parent}.{folder.name}" if parent else folder.name


def import_table(tree: ast.Module, path: str) -> ImportTable:
    """Collect the aliases every ``import`` / ``from ... import`` in ``tree`` binds."""
    names: dict[str, str] = {}
    stars: list[str] = []
    module = ""
    for node in statements(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    head = alias.name.split(".", 1)[0]
                    names[head] = head
        elif isinstance(node, ast.ImportFrom):
            if node.level and not module:
                module = module_name(path) or "<unknown>"
            base = _absolute(node.module or "", node.level, module, path)
            for alias in node.names:
                if alias.name != "*":
                    names[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
                elif base:
                    stars.append(base)
    names.update(_module_aliases(tree, names))
    return ImportTable(module, names, tuple(stars))


def _module_aliases(tree: ast.Module, names: dict[str, str]) -> dict[str, str]:
    """Module globals bound once, at module level, to an imported dotted name (``torch_matmul =
    torch.matmul``): they name what the import names. A global bound twice, or rebound in a
    function under ``global``, is not an alias."""
    bindings: dict[str, list[ast.expr | None]] = {}
    for node in statements(tree):
        if isinstance(node, ast.Global):
            for name in node.names:
                bindings.setdefault(name, []).extend([None, None])
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in (n for n in ast.walk(target) if isinstance(n, ast.Name)):
                    bindings.setdefault(name.id, []).append(node.value if target is name else None)
    aliases: dict[str, str] = {}
    for name, values in bindings.items():
        value = values[0] if len(values) == 1 else None
        head = value
        while isinstance(head, ast.Attribute):
            head = head.value
        if name not in names and isinstance(head, ast.Name) and head.id in names and head.id != name \
                and any(value is node.value for node in tree.body if isinstance(node, ast.Assign)):
            aliases[name] = ImportTable("", names).qualify(value)
    return aliases


def _absolute(module: str, level: int, current: str, path: str) -> str:
    """``from ..x import y`` seen from ``current`` -> the absolute package ``x`` lives in."""
    if not level:
        return module
    package = current if Path(path).stem == "__init__" else current.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{module}" if module and package else (module or package)
