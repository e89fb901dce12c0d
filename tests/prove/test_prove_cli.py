"""``transpile prove PATH`` from an unrelated directory: the table, the exit status, JSON,
``-k``, a package's own ``PROVE_CASES``, and a failure that points at the wrong term."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.prove.test_check_formula import SINH, WRONG_SIN
from transpiler.cli import main

CASES = '''\
import numpy as np

PROVE_CASES = {"cosh": [(np.array([-1.5, 0.0, 2.0]),)]}
'''

COSH = '''\
from formulas import at, derivative

@derivative("cosh(Tensor self) -> Tensor")
def cosh(self):
    result = at.cosh(self)
    def backward(grad):
        return grad * at.sinh(self)
    return result, backward
'''


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An unrelated working directory holding formula packages."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(root: Path, package: str, files: dict[str, str]) -> None:
    (root / package).mkdir()
    for name, source in files.items():
        (root / package / name).write_text(source)


def test_the_tour_package_is_proven_on_every_applicable_tier(elsewhere, capsys):
    write(elsewhere, "tour_ops", {"sinh.py": SINH.format(sign="+"), "cosh.py": COSH})
    assert main(["prove", "tour_ops"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == ["op       L    R1    R2    RT    T1    TT    F1    RF",
                       "cosh    ok    ok    ok    ok    ok    ok   n/a   n/a",
                       "sinh    ok    ok    ok    ok    ok    ok   n/a   n/a",
                       "2/2 ops proven on every applicable tier"]
    assert out[4].startswith("OpInfo samples: 2 ops, ") and out[4].endswith(" cases (tiers RT, RF)")
    assert "n/a: cosh F1, cosh RF, sinh F1, sinh RF: the formula defines no jvp" in out


def test_progress_says_each_op_on_stderr_and_quiet_silences_it(elsewhere, capsys):
    """Off a terminal each op is a line of its own on stderr, then the time it took; ``-q``: none."""
    write(elsewhere, "progress_ops", {"sinh.py": SINH.format(sign="+"), "cosh.py": COSH})
    assert main(["prove", "progress_ops", "-k", "sinh"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[:2] == ["prove progress_ops: lint 2 formula files", "prove progress_ops: 1/1 sinh"]
    assert err[2].startswith("prove progress_ops: done in ") and len(err) == 3
    assert main(["prove", "progress_ops", "-k", "sinh", "-q"]) == 0
    assert capsys.readouterr().err == ""


def test_a_wrong_term_fails_with_exit_1_and_points_at_the_term(elsewhere, capsys):
    write(elsewhere, "wrong_cli_ops", {"sin.py": WRONG_SIN})
    assert main(["prove", "wrong_cli_ops"]) == 1
    out = capsys.readouterr().out
    assert "sin    ok  FAIL    ok  FAIL  FAIL  FAIL   n/a   n/a" in out
    assert "sin: tier T1 (formula on torch tensors: backward == finite differences), case 2x3: input `self`" in out
    assert "the term `0.1 * self` at wrong_cli_ops/sin.py:8:39 explains it: without it the gradient matches" in out


def test_json_and_selection(elsewhere, capsys):
    write(elsewhere, "json_ops", {"sin.py": WRONG_SIN, "sinh.py": SINH.format(sign="+")})
    assert main(["prove", "json_ops", "-k", "sin", "-k", "nothing", "--format", "json"]) == 1
    table = json.loads(capsys.readouterr().out)
    assert sorted(table) == ["sin", "sinh"]
    assert table["sin"]["T1"]["status"] == "FAIL" and "0.1 * self" in table["sin"]["T1"]["message"]
    assert table["sinh"]["F1"] == {"status": "n/a", "message": "the formula defines no jvp"}
    assert main(["prove", "json_ops", "-k", "sinh", "--format", "json"]) == 0
    assert list(json.loads(capsys.readouterr().out)) == ["sinh"]


def test_a_package_gives_its_own_cases(elsewhere, capsys):
    write(elsewhere, "cased_ops", {"cosh.py": COSH, "prove_cases.py": CASES})
    assert main(["prove", "cased_ops", "-k", "cosh", "-k", "x"]) == 0
    # its cases run, not the generated ones: a failure would reproduce with them
    write(elsewhere, "cased_wrong_ops", {"cosh.py": COSH.replace("at.sinh(self)", "at.cosh(self)"),
                                         "prove_cases.py": CASES})
    assert main(["prove", "cased_wrong_ops"]) == 1
    assert "case prove_cases[0]: input `self`" in capsys.readouterr().out


def test_usage_errors_are_one_line(elsewhere, capsys):
    assert main(["prove", "missing"]) == 2
    assert capsys.readouterr().err == "transpile prove: missing: not a directory (give a formula package directory, or run in the project)\n"
    write(elsewhere, "empty_ops", {"sinh.py": SINH.format(sign="+")})
    assert main(["prove", "empty_ops", "-k", "tan"]) == 2
    assert capsys.readouterr().err.endswith("empty_ops: no formula matches -k\n")


def test_without_torch_it_says_what_to_install(elsewhere):
    write(elsewhere, "no_torch_ops", {"sinh.py": SINH.format(sign="+")})
    program = ("import sys; sys.modules['torch'] = None\n"
               "from transpiler.cli import main\nsys.exit(main(['prove', 'no_torch_ops']))\n")
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=elsewhere,
                          env={**os.environ, "PYTHONPATH": str(repo)}, check=False)
    assert (done.returncode, done.stdout, done.stderr) == \
        (2, "", "transpile prove: proving formulas needs torch (torch==2.13.0, not installed); install it with: "
                "python3 -m pip install 'derivatives-transpiler[torch]'\n")
