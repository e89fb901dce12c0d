"""The closure rules against hand-written fixtures, one file per code.

A fixture line where a finding must land ends with ``# expect: CODE:col=N``
(several separated by spaces); every other line must stay silent. The test
asserts the exact set of (code, line, col) the rules report for the file.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from lint.fixture_expectations import expectations
from transpiler.codes import CODES as TABLE
from transpiler.frontend import load_library, parse_module
from transpiler.lint.closure_rules import check_formula_module

FIXTURES = Path(__file__).parent / "fixtures" / "closure"
REPO = Path(__file__).resolve().parents[2]
# one fixture per closure code (DB10x); the Function hygiene codes DB11x have theirs in fixtures/hygiene
CODES = tuple(entry.code for entry in TABLE if entry.code.startswith("DB10"))

# The operators a library declares (fixed here so the fixtures do not follow formulas/).
LIBRARY_OPERATORS = frozenset({
    "abs", "add.Tensor", "addcmul", "argmax", "atan2", "cat", "contiguous", "cos", "cosh", "div.Tensor",
    "exp", "exp2", "expand", "gt.Scalar", "log", "max.dim", "mean", "min.dim", "mul.Tensor", "mul.Scalar",
    "mul_.Tensor", "neg", "relu", "select.int", "sigmoid", "sign", "sin", "sinh", "sqrt", "stack",
    "sub.Tensor", "sum", "sum.dim_IntList", "tanh", "where.self", "zeros",
})


def lint_fixture(path: Path):
    source = path.read_text()
    module = parse_module(str(path), source)
    declared = {f.op_name for f in module.formulas} | {str(s.name) for s in module.nondifferentiable}
    return check_formula_module(module, source, LIBRARY_OPERATORS | declared)


@pytest.mark.parametrize("code", CODES)
def test_fixture_findings_are_exactly_the_expected_ones(code: str) -> None:
    path = FIXTURES / f"{code}.py"
    expected = expectations(path.read_text())
    assert expected, f"{path} marks no expected finding"
    assert {c for c, _, _ in expected} == {code}
    found = {(d.code, d.line, d.col) for d in lint_fixture(path)}
    assert found == expected


@pytest.mark.parametrize("code", CODES)
def test_messages_point_at_the_file_and_say_what_to_do(code: str) -> None:
    path = FIXTURES / f"{code}.py"
    for diagnostic in lint_fixture(path):
        assert diagnostic.path == str(path)
        assert diagnostic.format().startswith(f"{path}:{diagnostic.line}:{diagnostic.col}: {code} ")
        assert any(word in diagnostic.message for word in ("; ", ": ")), diagnostic.message


def test_expectation_parser_reads_several_findings_per_line() -> None:
    source = ("x = 1\n"
              "y = f(a, b)  # expect: DB100:col=9 DB102:col=12\n"
              "z = g(a, b)  # expect: DB101:col=5  # expect: DB101:col=8\n")
    assert expectations(source) == {("DB100", 2, 9), ("DB102", 2, 12), ("DB101", 3, 5), ("DB101", 3, 8)}


def test_db100_names_the_capture_and_offers_the_fix() -> None:
    findings = [d for d in lint_fixture(FIXTURES / "DB100.py") if d.line == 22]
    assert len(findings) == 1
    assert "`c`" in findings[0].message and "recompute" in findings[0].message
    assert findings[0].fix == "recompute at the top of backward: c = at.cos(self)"


def test_db100_without_fix_says_how_to_make_it_an_output() -> None:
    conditional = [d for d in lint_fixture(FIXTURES / "DB100.py") if "`weight`" in d.message]
    assert len(conditional) == 1
    assert conditional[0].fix is None
    assert "return it as an output" in conditional[0].message


def fixture_line(path: Path, text: str) -> int:
    """The 1-based number of the fixture line holding ``text``."""
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


def test_db100_on_metadata_only_use_says_to_capture_the_metadata() -> None:
    line = fixture_line(FIXTURES / "DB100.py", "return at.expand(grad * result, t.sizes())")
    [finding] = [d for d in lint_fixture(FIXTURES / "DB100.py") if "`t`" in d.message and d.line == line]
    assert "only for its metadata (.sizes)" in finding.message
    assert "`t_sizes = t.sizes()`" in finding.message
    assert "silently wrong" not in finding.message


def test_db100_on_a_backward_default_says_so_and_offers_no_fix() -> None:
    line = fixture_line(FIXTURES / "DB100.py", "def backward(grad, t=c):")
    [finding] = [d for d in lint_fixture(FIXTURES / "DB100.py") if d.line == line]
    assert finding.message.startswith("a default of backward's parameters binds `c`")
    assert finding.fix is None


def test_db105_follows_helpers_from_other_files() -> None:
    helpers_source = (
        "from formulas import Tensor, at, helper\n\n"
        "@helper\n"
        "def odd(x: Tensor) -> Tensor:\n"
        "    return at.erfinv(x)\n"
    )
    formula_source = (
        "from formulas import at, derivative\n"
        "from formulas.helpers import odd\n\n"
        "@derivative(\"sin(Tensor self) -> Tensor\")\n"
        "def sin(self):\n"
        "    result = at.sin(self)\n"
        "    def backward(grad):\n"
        "        return odd(grad)\n"
        "    return result, backward\n"
    )
    helpers = {h.name: h for h in parse_module("helpers.py", helpers_source).helpers}
    module = parse_module("sin.py", formula_source)
    assert check_formula_module(module, formula_source, {"sin"}) == []
    [finding] = check_formula_module(module, formula_source, {"sin"}, helpers)
    assert (finding.code, finding.line, finding.col) == ("DB105", 8, 16)
    assert "`odd` (helpers.py:4)" in finding.message and "`erfinv`" in finding.message


def test_db000_comes_through_check_formula_module() -> None:
    source = "@derivative(\"sin(Tensor self) -> Tensor\")\ndef sin(self:\n    pass\n"
    [finding] = check_formula_module(parse_module("bad.py", source), source, set())
    assert finding.code == "DB000" and finding.line == 2


def test_shipped_library_lints_clean() -> None:
    library = load_library(str(REPO / "formulas"))
    assert library.formulas, "formulas/ declares no formula"
    operators = set(library.operators)
    helpers = {h.name: h for h in library.helpers}
    findings = []
    for module in library.modules:
        source = Path(module.path).read_text()
        findings += check_formula_module(module, source, operators, helpers)
    assert [d.format() for d in findings] == []
