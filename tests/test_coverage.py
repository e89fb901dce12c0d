"""The op x tier table: a tier passes only when every one of its tests passed."""
from __future__ import annotations

import json

import pytest

from transpiler.tier_table import TIERS, TierTable


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
    """An op the override refuses (one writing an argument besides what it returns) shows ``n/a`` on
    OP and is proven by the other tiers; one that ran OP anyway is held to it."""
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


def test_coverage_is_prove_on_the_shipped_library_with_the_suites_inputs(monkeypatch):
    """``transpile coverage`` is ``transpile prove`` on the shipped formulas and the suite's input
    catalogue (``tests/prove_library_cases.py``): one code path, so one table
    (``tests/prove/test_library_table.py`` compares that table with the suite's tier tests)."""
    from pathlib import Path

    import transpiler.prove.cli
    from transpiler import coverage

    repo = Path(__file__).resolve().parents[1]
    seen = []
    monkeypatch.setattr(transpiler.prove.cli, "main", lambda argv: seen.append(argv) or 1)
    assert coverage.main(["-k", "cumsum", "-k", "addmv", "--compiled", "--format", "json", "-q"]) == 1
    assert coverage.main([]) == 1
    catalogue = ["--cases", str(repo / "tests" / "prove_library_cases.py")]
    assert seen == [[str(repo / "formulas"), *catalogue, "--format", "json", "-k", "cumsum", "-k", "addmv", "--compiled",
                     "-q"],
                    [str(repo / "formulas"), *catalogue, "--format", "text"]]


def test_coverage_from_a_suite_report_prints_its_table(tmp_path, capsys):
    """``--from FILE`` prints the report of the suite's own tier tests (with the tiers only the
    suite runs); ``-k`` and ``--compiled`` prove the library, so they do not go with it."""
    from transpiler import coverage

    report = TierTable()
    for tier in TIERS:
        report.record("sin", tier, "passed")
    (tmp_path / "tiers.json").write_text(json.dumps(report.as_json()))
    assert coverage.main(["--from", str(tmp_path / "tiers.json")]) == 1      # the other ops did not run
    out = capsys.readouterr().out
    assert out.startswith("op ") and "  OI: " in out
    sin = next(line for line in out.splitlines() if line.startswith("sin "))
    assert sin.split()[1:] == ["ok"] * len(TIERS)
    assert coverage.main(["--from", str(tmp_path / "tiers.json"), "-k", "sin"]) == 2
    assert "--from prints a report as it is" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{}")
    assert coverage.main(["--from", str(tmp_path / "bad.json")]) == 2
    assert capsys.readouterr().err.startswith(f"transpile coverage: {tmp_path / 'bad.json'} is not a tier report")
