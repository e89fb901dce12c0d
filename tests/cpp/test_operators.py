"""ATen's method-only operators: the shipped library's table agrees with the installed torch, and
without torch the shipped library's C++ spelling does not change."""
from __future__ import annotations

import pytest

from transpiler.cpp import operators
from transpiler.frontend import load_library

pytest.importorskip("torchgen")


def test_shipped_method_only_table_is_what_torchgen_says():
    torchgen_methods = operators.torchgen_method_only_operators()
    assert torchgen_methods is not None
    declared = load_library("formulas").operators.values()
    by_torchgen = {str(s.name) for s in declared
                   if str(s.name) in torchgen_methods or (s.name.overload == "" and s.name.base in torchgen_methods)}
    assert by_torchgen == operators.SHIPPED_METHOD_ONLY


def test_without_torchgen_the_shipped_operators_keep_their_spelling(monkeypatch):
    declared = load_library("formulas").operators.values()
    with_torch = {str(s.name): operators.is_method_only(s.name) for s in declared}
    monkeypatch.setattr(operators, "torchgen_method_only_operators", lambda: None)
    without_torch = {str(s.name): operators.is_method_only(s.name) for s in declared}
    assert without_torch == with_torch
    assert sum(with_torch.values()) == len(operators.SHIPPED_METHOD_ONLY)
