"""``transpile lint`` over the whole installed torch package: no crash, no internal error.

The tree is found without importing torch. Every file goes through the syntax
check (no trust in cached bytecode). Every DB000 it reports must be a real
syntax error for this Python (torch ships a file in newer syntax), and the ctx
rules must have analysed the tree's autograd Functions.
"""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from transpiler.lint.runner import INTERNAL, SYNTAX, UNREADABLE, lint


def torch_tree() -> Path:
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


def test_whole_torch_tree_lints_without_internal_errors():
    tree = torch_tree()
    result = lint([str(tree)], trust_bytecode=False)       # every file through the parser

    assert result.files == sum(1 for p in tree.rglob("*.py") if p.is_file())
    codes = {d.code for d in result.diagnostics}
    assert INTERNAL not in codes and UNREADABLE not in codes
    # torch 2.13 defines about a hundred autograd.Function subclasses in its own tree
    assert result.functions >= 90
    for diagnostic in result.diagnostics:
        if diagnostic.code == SYNTAX:
            source = Path(diagnostic.path).read_bytes()
            try:
                ast.parse(source)
            except SyntaxError as error:
                assert error.lineno == diagnostic.line
            else:
                raise AssertionError(f"{diagnostic.path} parses but was reported as DB000")
        else:
            assert diagnostic.code in {"DB100", "DB101", "DB102", "DB104"}, diagnostic
