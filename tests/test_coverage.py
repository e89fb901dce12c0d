"""The op x tier table: a tier passes only when every one of its tests passed."""
from __future__ import annotations

import json

import pytest

from transpiler.coverage import TIERS, TierTable


def test_any_failure_marks_the_tier_failed():
    table = TierTable()
    table.record("sin", "R1", "passed")
    table.record("sin", "R1", "failed")
    table.record("sin", "R1", "passed")
    table.record("cos", "R1", "passed")
    assert table.results == {"sin": {"R1": "failed"}, "cos": {"R1": "passed"}}


def test_render_lists_missing_ops_and_counts_complete_rows():
    table = TierTable()
    for tier in TIERS:
        table.record("sin", tier, "passed")
    table.record("cos", "R1", "passed")
    text = table.render(["sin", "cos", "exp"])
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()[1:-1]}
    assert rows["sin"] == ["ok"] * len(TIERS)
    assert rows["cos"] == ["-", "ok"] + ["-"] * (len(TIERS) - 2)
    assert rows["exp"] == ["-"] * len(TIERS)
    assert text.splitlines()[-1] == "1/3 ops proven on every tier"


def test_unknown_tier_is_rejected():
    with pytest.raises(ValueError, match="unknown tier"):
        TierTable().record("sin", "R9", "passed")


def test_opinfo_cases_are_counted_per_op_and_case():
    table = TierTable()
    table.record("sin", "RT", "passed", "sin[opinfo-sin-0]")
    table.record("sin", "CT", "passed", "sin[opinfo-sin-0]")
    table.record("sin", "RT", "passed", "sin[opinfo-sin-1]")
    table.record("cos", "RT", "passed", "cos[opinfo-cos-0]")
    table.record("cos", "CT", "failed", "cos[opinfo-cos-0]")
    table.record("exp", "RT", "passed")
    assert table.opinfo_summary(["sin", "cos", "exp", "log"]) == (
        "OpInfo samples: 1 ops, 3 cases; failing: cos; no OpInfo sample for: exp, log")
    assert table.render(["sin", "cos", "exp", "log"]).splitlines()[-1] == table.opinfo_summary(["sin", "cos", "exp", "log"])


def test_report_round_trips_through_json():
    table = TierTable()
    table.record("sin", "RT", "passed", "sin[opinfo-sin-0]")
    table.record("sin", "R1", "failed")
    again = TierTable.from_json(json.loads(json.dumps(table.as_json())))
    assert (again.results, again.opinfo) == (table.results, table.opinfo)


def test_gradient_tiers_do_not_apply_to_a_nondifferentiable_op():
    table = TierTable()
    for tier in ("L", "RT", "CT", "F1", "RF", "E"):
        table.record("lt.Tensor", tier, "passed")
        table.record("isnan", tier, "passed")
    table.record("isnan", "CT", "failed")
    text = table.render(["lt.Tensor", "isnan", "sin"], nondifferentiable=frozenset({"lt.Tensor", "isnan"}))
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()[1:-1]}
    assert rows["lt.Tensor"] == ["ok", "n/a", "n/a", "ok", "n/a", "ok", "ok", "ok", "n/a", "n/a", "n/a", "n/a", "n/a", "ok"]
    assert rows["isnan"][5] == "FAIL"
    assert text.splitlines()[-1] == "1/3 ops proven on every tier"
    # without the declaration, the same results are incomplete
    assert not table.proven("lt.Tensor") and table.proven("lt.Tensor", nondifferentiable=True)


def test_tier_op_does_not_apply_to_an_op_the_override_refuses():
    """A view (torch lets no Python kernel replace its autograd) shows ``n/a`` on OP and is proven
    by the other tiers; one that ran OP anyway is held to it."""
    table = TierTable()
    for op in ("view", "sin"):
        for tier in ("L", "R1", "R2", "RT", "C1", "CT", "F1", "RF", "FB", "CA", "E"):
            table.record(op, tier, "passed")
    text = table.render(["view", "sin"], not_overridable=frozenset({"view"}), with_in_place_twin=frozenset())
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()[1:-1]}
    for tier in ("OP", "OC"):
        assert rows["view"][TIERS.index(tier)] == "n/a" and rows["sin"][TIERS.index(tier)] == "-"
    assert text.splitlines()[-1] == "1/2 ops proven on every tier"
    assert not table.proven("view") and table.proven("view", not_overridable=True, no_in_place_twin=True)
    table.record("view", "OP", "failed")
    assert not table.proven("view", not_overridable=True, no_in_place_twin=True)


def test_tier_oi_applies_only_to_an_op_with_an_in_place_twin():
    """``sin`` has ``sin_``, which the override runs through the ``sin`` formula; ``mm`` has no
    in-place twin in torch: OI is ``n/a`` for it, and it is proven without."""
    table = TierTable()
    for op in ("sin", "mm"):
        for tier in (t for t in TIERS if t != "OI"):
            table.record(op, tier, "passed")
    text = table.render(["sin", "mm"], with_in_place_twin=frozenset({"sin"}))
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()[1:-1]}
    assert rows["mm"][TIERS.index("OI")] == "n/a" and rows["sin"][TIERS.index("OI")] == "-"
    assert text.splitlines()[-1] == "1/2 ops proven on every tier"
    assert table.proven("mm", no_in_place_twin=True) and not table.proven("sin")


@pytest.mark.parametrize("quiet", [False, True])
def test_running_the_tier_tests_shows_their_progress_unless_quiet(monkeypatch, capsys, quiet):
    """``transpile coverage`` says on stderr that it runs the tier tests and lets pytest's own
    progress through there (stdout keeps the table); ``-q``: nothing on stderr."""
    import subprocess
    import sys

    from transpiler import coverage

    seen = {}

    def tier_tests(cmd, cwd, stdout, check):      # the suite's run, reporting one op
        seen["stdout"] = stdout
        report = TierTable()
        report.record("sin", "L", "passed")
        path = cmd[cmd.index("--tier-report") + 1]
        with open(path, "w") as file:
            json.dump(report.as_json(), file)

    monkeypatch.setattr(coverage.subprocess, "run", tier_tests)
    assert coverage.main(["-q"] if quiet else []) == 1     # one op's L only: the table is incomplete
    out, err = capsys.readouterr()
    assert out.startswith("op ") and "\nsin " in out
    if quiet:
        assert (seen["stdout"], err) == (subprocess.DEVNULL, "")
    else:
        assert seen["stdout"] is sys.stderr
        assert err == "transpile coverage: running the tier tests (-m pytest -q -m tier); their progress follows\n"
