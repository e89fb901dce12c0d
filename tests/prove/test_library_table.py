"""``transpile prove`` on the shipped library gives the suite's table: on a sample of ops, the
tiers both run without a build (L, R1, R2, RT, RF) have the same outcome in ``transpile prove
--cases tests/prove_library_cases.py`` (the suite's input catalogue, and for RT torch's OpInfo
samples, which both make with ``transpiler.prove.opinfo``) as in the report of the suite's
tier tests on the same cases (``pytest --tier-report``). The compiled tiers (C1, CT, F1, CA)
are compared the same way by ``transpile prove --compiled`` against ``tests/cpp/``; they need
the shipped library built, which this test does not do."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from transpiler.cli import main

REPO = Path(__file__).resolve().parents[2]
SUBSET = ["tanh", "index_select", "where.self", "cumsum", "unbind.int", "addmv", "mse_loss", "conv1d", "max.dim",
          "scatter_add"]
"""A sample across the library's topics (pointwise, indexing with an index or a mask, a scan, a list
output, linear algebra, a loss, a convolution, a reduction with an output without gradient):
the whole library is `transpile prove`'s own run (docs/proofs.md), not this test's."""
SHARED_TIERS = ("L", "R1", "R2", "RT", "RF")
SUITE_STATUS = {"passed": "ok", "failed": "FAIL", "skipped": "-"}


def suite_tests() -> list[str]:
    """The node ids of the suite's L, R1, R2, RT and RF tests of the subset: on the catalogue's
    cases, and RT also on the OpInfo samples."""
    from op_cases import ALL_CASES

    from tests.opinfo_cases import catalogue

    tiers = "tests/engine/test_tiers.py::"
    ids = [f"tests/test_library_lint.py::test_formula_lints_clean[{op}]" for op in SUBSET]
    for case in ALL_CASES:
        if case.op in SUBSET:
            ids += [f"{tiers}{test}[{case.name}]" for test in ("test_gradcheck", "test_gradgradcheck",
                                                                 "test_gradients_equal_torch", "test_jvp_equals_torch")]
    ids += [f"{tiers}test_gradients_equal_torch[{case.name}]" for case in catalogue().cases if case.op in SUBSET]
    return ids


def test_prove_on_the_library_agrees_with_the_suite(tmp_path, capsys, monkeypatch):
    report = tmp_path / "tiers.json"
    suite = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *suite_tests(),
                            "--tier-report", str(report)], cwd=REPO, capture_output=True, text=True, check=False)
    assert report.exists(), suite.stdout[-3000:] + suite.stderr[-3000:]
    expected = json.loads(report.read_text())["tiers"]

    monkeypatch.chdir(tmp_path)                 # from an unrelated directory, the library by its path
    status = main(["prove", str(REPO / "formulas"), "--cases", str(REPO / "tests" / "prove_library_cases.py"),
                   "--format", "json", *[arg for op in SUBSET for arg in ("-k", op)]])
    proved = json.loads(capsys.readouterr().out)
    assert status == 0 and set(SUBSET) <= set(proved)
    for op in SUBSET:
        assert {t: SUITE_STATUS[expected[op][t]] for t in SHARED_TIERS} == \
            {t: proved[op][t]["status"] for t in SHARED_TIERS}, op
