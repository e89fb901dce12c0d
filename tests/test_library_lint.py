"""Tier L (DESIGN section 7): `transpile lint` reports nothing for each formula of the library."""
from __future__ import annotations

from pathlib import Path

import pytest

from transpiler.frontend import load_library
from transpiler.lint.runner import lint_paths

FORMULAS_DIR = Path(__file__).resolve().parent.parent / "formulas"
LIBRARY = load_library(str(FORMULAS_DIR))
FORMULAS = {f.op_name: f for f in LIBRARY.formulas}


@pytest.fixture(scope="module")
def findings():
    return lint_paths([str(FORMULAS_DIR)])


def test_the_library_declares_formulas():
    assert len(FORMULAS) >= 28


def test_no_finding_anywhere_in_the_library(findings):
    assert [d.format() for d in findings] == []


def _line_ranges() -> dict[str, tuple[str, int, int]]:
    """Each formula's file and lines: from its definition to the next formula of the file."""
    ranges = {}
    for module in LIBRARY.modules:
        starts = sorted((f.span.line, f.op_name) for f in module.formulas)
        ends = [line - 1 for line, _ in starts[1:]] + [10**9]
        for (start, op), end in zip(starts, ends):
            ranges[op] = (str(Path(module.path).resolve()), start, end)
    return ranges


LINE_RANGES = _line_ranges()


@pytest.mark.tier("L")
@pytest.mark.parametrize("op", sorted(FORMULAS))
def test_formula_lints_clean(op, findings):
    path, first, last = LINE_RANGES[op]
    mine = [d.format() for d in findings if str(Path(d.path).resolve()) == path and first <= d.line <= last]
    assert mine == []


NONDIFFERENTIABLE = {str(s.name): m.path for m in LIBRARY.modules for s in m.nondifferentiable
                     if str(s.name) not in FORMULAS}


@pytest.mark.tier("L")
@pytest.mark.parametrize("op", sorted(NONDIFFERENTIABLE))
def test_nondifferentiable_declaration_lints_clean(op, findings):
    """An operator declared ``nondifferentiable``: no finding in its module outside the formulas
    (where the declarations are), and its declaration is read as one."""
    path = str(Path(NONDIFFERENTIABLE[op]).resolve())
    in_formulas = [(first, last) for p, first, last in LINE_RANGES.values() if p == path]
    mine = [d.format() for d in findings if str(Path(d.path).resolve()) == path
            and not any(first <= d.line <= last for first, last in in_formulas)]
    assert mine == []
