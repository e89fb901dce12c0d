"""Library discovery: which formula modules a formula file sees besides itself.

A formula may call the operators and helpers of the shipped ``formulas/``
library and of the other modules of its own package (what ``transpile
--formulas <package>`` emits with it). Owns where the shipped library lies,
which directory is a file's package, and which of a package's files can add
to the library (read statically through :mod:`transpiler.frontend`).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import transpiler
from transpiler.sources import python_sources, read_regular

if TYPE_CHECKING:                    # the model imports libcst: only formula files need it
    from transpiler.model import FormulaModule

SHIPPED_FORMULAS = Path(transpiler.__file__).resolve().parent.parent / "formulas"


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
        module = _library_module(path) if may_add_to_library(path) else None
        if module is not None:
            modules.append(module)
    return modules


def may_add_to_library(path: Path) -> bool:
    """Whether the text of ``path`` can declare an operator or a helper (one of :data:`LIBRARY_MARKERS`,
    where a top-level declaration can stand: :func:`_may_declare`; a necessary condition, never a
    sufficient one); False when it cannot be read."""
    try:
        text = read_regular(path)[1]
    except OSError:
        return False
    return any(marker in text for marker in LIBRARY_MARKERS) and _may_declare(text)


def _may_declare(text: bytes) -> bool:
    """Whether ``text`` has a line where the front-end could find a declaration: a decorator at the
    first column that names ``derivative`` or ``helper`` (or goes on to the next line), or
    ``nondifferentiable`` on a line that starts at the first column. A top-level statement starts
    there; the words in docstrings and in indented code (``formulas/torch/``'s, about a third of
    the shipped library's text) do not."""
    if b"\f" in text:                  # a form feed may stand before a top-level statement
        return True
    at = text.find(b"@")
    while at >= 0:
        if at == 0 or text[at - 1] == ord("\n"):      # a decorator at the first column
            end = text.find(b"\n", at)
            line = text[at + 1:end if end >= 0 else len(text)].rstrip()
            if b"derivative" in line or b"helper" in line or not line or line.endswith((b"\\", b"(", b"[", b",")):
                return True
        at = text.find(b"@", at + 1)
    at = text.find(b"nondifferentiable")
    while at >= 0:
        start = text.rfind(b"\n", 0, at) + 1
        if text[start:start + 1] not in (b" ", b"\t", b"#"):
            return True
        at = text.find(b"nondifferentiable", at + 1)
    return False


def shipped_context_files() -> list[Path]:
    """The files of the shipped library a run on another package reads (sorted): those that can
    add to the library. The others (``formulas/torch/``'s override machinery, the package's
    ``__init__.py``, by their text) would be parsed for nothing: about a third of the shipped
    library's text."""
    return [path for path in python_sources(SHIPPED_FORMULAS).files if may_add_to_library(path)]


def _library_module(path: Path) -> FormulaModule | None:
    """A module of the library the linted files see (None: it could not be read, it vanished)."""
    from transpiler.frontend import read_module

    try:
        return read_module(str(path))
    except OSError:
        return None

