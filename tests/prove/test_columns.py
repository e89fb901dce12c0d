"""``transpile prove``'s columns are the suite's tier list (``transpiler.tier_table.TIERS``), in its
order, with prove's own T1 and TT after RT: a tier added there is a column here."""
from __future__ import annotations

from transpiler.tier_table import TIER_MEANING, TIERS
from transpiler.prove.compiled import COMPILED_RUNNERS
from transpiler.prove.tiers import COLUMNS, MEANING, RUNNERS, in_column_order


def test_the_columns_are_the_suites_with_proves_own_after_rt():
    assert [t for t in COLUMNS if t in TIERS] == list(TIERS)
    after_rt = COLUMNS.index("RT") + 1
    assert COLUMNS[after_rt:after_rt + 2] == ("T1", "TT")
    assert set(RUNNERS) | set(COMPILED_RUNNERS) <= set(COLUMNS) <= set(MEANING)
    assert all(MEANING[t] == TIER_MEANING[t] for t in TIERS)


def test_runners_are_shown_in_column_order():
    runners = {**RUNNERS, **COMPILED_RUNNERS}
    assert in_column_order(runners) == [t for t in COLUMNS if t in runners]
