"""DB110/DB111, the opt-in memory and hygiene rules of ``torch.autograd.Function``, on their fixtures.

One fixture per code (``tests/lint/fixtures/hygiene/DB11x.py``): a line ending in
``# expect: CODE:col=N`` must produce exactly that finding under ``--select DB11``,
every other line nothing; under the default selection the codes are not reported.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from lint.fixture_expectations import expectations
from transpiler import codes
from transpiler.lint.runner import lint
from transpiler.lint.settings import Settings

FIXTURES = Path(__file__).parent / "fixtures" / "hygiene"
HYGIENE = ("DB110", "DB111")


@pytest.mark.parametrize("code", HYGIENE)
def test_fixture_findings_are_exactly_the_expected_ones(code: str):
    fixture = FIXTURES / f"{code}.py"
    found = {(d.code, d.line, d.col) for d in lint([str(fixture)], settings=Settings(select=("DB",) + HYGIENE)).diagnostics}
    expected = expectations(fixture.read_text())
    assert {e for e in expected if e[0] == code}, "the fixture has must-fire cases"
    assert found == expected


@pytest.mark.parametrize("code", HYGIENE)
def test_opt_in_codes_are_not_in_the_default_selection(code: str):
    found = {d.code for d in lint([str(FIXTURES / f"{code}.py")]).diagnostics}
    assert not found & set(HYGIENE)
    assert codes.BY_CODE[code].opt_in and "Opt-in" in codes.BY_CODE[code].explain()


@pytest.mark.parametrize("select, reported", [
    (("DB",), False), (("DB1",), False), (("DB11",), True), (("DB110",), True),
    (("DB111",), False)])
def test_an_opt_in_code_is_selected_by_its_own_prefix(select, reported):
    assert Settings(select=select).enabled("DB110", "f.py") is reported


def test_messages_say_what_is_kept_and_what_to_do():
    found = {d.line: d for d in lint([str(FIXTURES / "DB110.py")], settings=Settings(select=HYGIENE)).diagnostics}
    assert found[11].message.startswith("`ctx.w = ...` keeps the input `w` as a ctx attribute")
    assert "reference cycle that leaks memory" in found[25].message
    assert "reference cycle" not in found[11].message
    assert found[37].message.startswith("`ctx.mask = ...` keeps a tensor created at line 36")
    metadata = [d for d in lint([str(FIXTURES / "DB111.py")], settings=Settings(select=HYGIENE)).diagnostics
                if d.line == 23][0]
    assert "reads only its metadata (`x.size(0)`, `x.size(-1)`, `x.dtype`, `x.device`)" in metadata.message
