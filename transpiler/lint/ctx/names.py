"""Static name resolution: what a dotted name in a module refers to, via its imports.

``import torch.autograd as ag`` makes ``ag.Function`` resolve to
``torch.autograd.Function``; ``from .function import once_differentiable`` in
``torch/autograd/variable.py`` resolves against the file's package. Nothing is
imported: the module's own import statements are the only source of truth.
"""
from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ImportTable:
    """Local name -> fully qualified name, for every import anywhere in a module."""

    module: str                      # this file's dotted module name ("" when no relative import needed it)
    names: dict[str, str]

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
    """The dotted module name of ``path``, from the ``__init__.py`` files of its parents."""
    file = Path(path)
    parts = [] if file.stem == "__init__" else [file.stem]
    directory = file.parent
    while (directory / "__init__.py").is_file():
        parts.append(directory.name)
        if directory.parent == directory:
            break
        directory = directory.parent
    return ".".join(reversed(parts))


def import_table(tree: ast.Module, path: str) -> ImportTable:
    """Collect the aliases every ``import`` / ``from ... import`` in ``tree`` binds."""
    names: dict[str, str] = {}
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
    return ImportTable(module, names)


def _absolute(module: str, level: int, current: str, path: str) -> str:
    """``from ..x import y`` seen from ``current`` -> the absolute package ``x`` lives in."""
    if not level:
        return module
    package = current if Path(path).stem == "__init__" else current.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{module}" if module and package else (module or package)
