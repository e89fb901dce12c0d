"""Fixtures of the override tests: the shipped library built from out_cpp/ (once per session,
cached in build/), as the compiled-op tests get it (``tests/cpp/conftest.py``)."""
from __future__ import annotations

from tests.cpp.conftest import formulas_ops

__all__ = ["formulas_ops"]
