"""The op x tier table: a tier passes only when every one of its tests passed."""
from __future__ import annotations

import pytest

from transpiler.coverage import TierTable


def test_any_failure_marks_the_tier_failed():
    table = TierTable()
    table.record("sin", "R1", "passed")
    table.record("sin", "R1", "failed")
    table.record("sin", "R1", "passed")
    table.record("cos", "R1", "passed")
    assert table.results == {"sin": {"R1": "failed"}, "cos": {"R1": "passed"}}


def test_render_lists_missing_ops_and_counts_complete_rows():
    table = TierTable()
    for tier in ("L", "R1", "R2", "RT", "C1", "CT", "F1", "RF", "CA"):
        table.record("sin", tier, "passed")
    table.record("cos", "R1", "passed")
    text = table.render(["sin", "cos", "exp"])
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()[1:-1]}
    assert rows["sin"] == ["ok"] * 9
    assert rows["cos"] == ["-", "ok", "-", "-", "-", "-", "-", "-", "-"]
    assert rows["exp"] == ["-"] * 9
    assert text.splitlines()[-1] == "1/3 ops proven on every tier"


def test_unknown_tier_is_rejected():
    with pytest.raises(ValueError, match="unknown tier"):
        TierTable().record("sin", "R9", "passed")
