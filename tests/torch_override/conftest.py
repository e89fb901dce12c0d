"""Fixtures of the override tests: the shipped library built from out_cpp/ (once per session,
cached in build/), as the compiled-op tests get it (``tests/cpp/conftest.py``)."""
from __future__ import annotations

import contextlib
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.cpp.conftest import formulas_ops

__all__ = ["formulas_ops", "importable_package"]


@contextlib.contextmanager
def importable_package(root: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                       modules: Mapping[str, str]) -> Iterator[str]:
    """The package ``name`` under ``root`` with ``modules`` (file name -> source, dedented),
    importable while in use; its modules are forgotten after, so the next test imports its own."""
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    for file, source in modules.items():
        (package / file).write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(root))
    try:
        yield name
    finally:
        for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
            del sys.modules[module]
