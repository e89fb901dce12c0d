"""``formulas.testing.check_formula``: tiers run on a user's package, and a failure that names
the formula, tier, input, worst element, reproduction and the wrong term of the backward."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from formulas.testing import check_formula

WRONG_SIN = '''\
from formulas import at, derivative


@derivative("sin(Tensor self) -> Tensor")
def sin(self):
    result = at.sin(self)
    def backward(grad):
        return grad * (at.cos(self) + 0.1 * self)
    return result, backward
'''

SINH = '''\
from formulas import at, derivative

@derivative("sinh(Tensor self) -> Tensor")
def sinh(self):
    result = at.sinh(self)
    def backward(grad):
        return grad * (at.exp(self) {sign} at.exp(-self)) / 2
    return result, backward
'''

WRONG_MUL = '''\
from formulas import at, derivative

@derivative("mul.Tensor(Tensor self, Tensor other) -> Tensor")
def mul_tensor(self, other):
    result = at.mul(self, other)
    def backward(grad):
        return grad * other, grad * other
    return result, backward
'''


WRONG_JVP_MUL = '''\
from formulas import at, derivative

@derivative("mul.Tensor(Tensor self, Tensor other) -> Tensor")
def mul_tensor(self, other):
    result = at.mul(self, other)
    def backward(grad):
        return grad * other, grad * self
    def jvp(self_t, other_t):
        result_t = self_t * other + other_t * self + self_t * self
        return result_t
    return result, backward
'''


def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, files: dict[str, str]) -> Path:
    """A formula package ``name`` (a directory of formula files) importable from ``tmp_path``."""
    directory = tmp_path / name
    directory.mkdir()
    for file, source in files.items():
        (directory / file).write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    return directory


def test_a_wrong_term_is_named_with_its_line(tmp_path, monkeypatch):
    where = package(tmp_path, monkeypatch, "wrong_term_ops", {"sin.py": WRONG_SIN})
    x = torch.tensor([[0.3, 0.5], [0.7, 0.4]], dtype=torch.float64)
    with pytest.raises(AssertionError) as failed:
        check_formula("sin", x, package="wrong_term_ops", tiers=["R1", "T1"])
    message = str(failed.value)
    assert message.startswith("formula sin (sin(Tensor self) -> Tensor) of package 'wrong_term_ops':")
    assert "tier T1 (formula on torch tensors: backward == finite differences), case given: input `self`" in message
    assert "tier R1 (reference engine gradcheck)" in message
    # the first-order tiers weigh the output by standard normal weights (seed 1): the gradient is
    # w cos(x), the formula's w (cos(x) + 0.1 x); the worst element is where |0.1 w x| is largest
    w = np.random.default_rng(1).standard_normal((2, 2))
    gap = np.abs(0.1 * w * x.numpy())
    worst = np.unravel_index(int(np.argmax(gap)), gap.shape)
    got, expected = (w * (np.cos(x.numpy()) + 0.1 * x.numpy()))[worst], (w * np.cos(x.numpy()))[worst]
    found = re.search(r"T1 .*?worst at element (\(.*?\)): formula (\S+), finite differences (\S+) ", message)
    assert found is not None, message
    assert found[1] == str(tuple(int(i) for i in worst))
    assert float(found[2]) == pytest.approx(got, rel=1e-9) and float(found[3]) == pytest.approx(expected, rel=1e-6)
    assert f"the term `0.1 * self` at {where / 'sin.py'}:8:39 explains it: without it the gradient matches" in message
    assert "reproduce: check_formula('sin', torch.tensor([[0.3, 0.5], [0.7, 0.4]], dtype=torch.float64), " \
           "package='wrong_term_ops')" in message


def test_a_term_with_the_wrong_sign_is_named(tmp_path, monkeypatch):
    package(tmp_path, monkeypatch, "sign_ops", {"sinh.py": SINH.format(sign="-")})
    with pytest.raises(AssertionError) as failed:
        check_formula("sinh", package="sign_ops", tiers=["T1"])
    assert "the term `at.exp(-self)` at " in str(failed.value)
    assert "its sign is wrong: negated, the gradient matches" in str(failed.value)


def test_the_input_whose_gradient_is_wrong_is_named(tmp_path, monkeypatch):
    package(tmp_path, monkeypatch, "slot_ops", {"mul.py": WRONG_MUL})
    a = torch.tensor([0.3, 0.5, 0.8], dtype=torch.float64)
    b = torch.tensor([0.6, 0.2, 0.9], dtype=torch.float64)
    with pytest.raises(AssertionError) as failed:
        check_formula("mul.Tensor", a, b, package="slot_ops", tiers=["T1", "TT"])
    message = str(failed.value)
    found = re.search(r"T1 .*? input `other`, worst at element \((\d),\): formula (\S+), finite differences (\S+) ", message)
    assert found is not None, message
    k = int(found[1])          # the formula gives w b for the gradient w a: their ratio is b / a
    assert float(found[2]) / float(found[3]) == pytest.approx((b[k] / a[k]).item(), rel=1e-6)
    assert "input `self`" not in message
    assert "its return expression is a single term" in message


def test_a_right_formula_passes_every_applicable_tier(tmp_path, monkeypatch):
    package(tmp_path, monkeypatch, "right_ops", {"sinh.py": SINH.format(sign="+")})
    from right_ops.sinh import sinh

    outcomes = {o.tier: (o.status, o.message) for o in check_formula(sinh)}
    assert outcomes == {"L": ("ok", ""), "R1": ("ok", ""), "R2": ("ok", ""), "RT": ("ok", ""), "T1": ("ok", ""),
                        "TT": ("ok", ""), "F1": ("n/a", "the formula defines no jvp"),
                        "RF": ("n/a", "the formula defines no jvp")}


def test_a_tier_asked_for_that_does_not_apply_fails(tmp_path, monkeypatch):
    package(tmp_path, monkeypatch, "nojvp_ops", {"sinh.py": SINH.format(sign="+")})
    with pytest.raises(AssertionError, match="tier F1 was asked for but does not apply: the formula defines no jvp"):
        check_formula("sinh", package="nojvp_ops", tiers=["F1"])


def test_the_shipped_library_by_name_with_broadcasting_inputs():
    a = torch.rand(2, 3, dtype=torch.float64)
    b = torch.rand(3, dtype=torch.float64)
    statuses = {o.tier: o.status for o in check_formula("mul.Tensor", a, b, tiers=["R1", "RT", "T1", "TT", "F1"])}
    assert statuses == dict.fromkeys(["R1", "RT", "T1", "TT", "F1"], "ok")


def test_a_wrong_jvp_term_is_named_with_its_line(tmp_path, monkeypatch):
    """Forward mode: the tangent differs from finite differences (F1) and from torch.func.jvp of
    the built-in op (RF); the term of the jvp (a returned name stands for its assignment) whose
    removal closes the gap is named with its line."""
    where = package(tmp_path, monkeypatch, "wrong_jvp_ops", {"mul.py": WRONG_JVP_MUL})
    a = torch.tensor([0.3, 0.5, 0.8], dtype=torch.float64)
    b = torch.tensor([0.6, 0.2, 0.9], dtype=torch.float64)
    with pytest.raises(AssertionError) as failed:
        check_formula("mul.Tensor", a, b, package="wrong_jvp_ops", tiers=["R1", "F1", "RF"])
    message = str(failed.value)
    assert "tier R1" not in message
    term = f"the term `self_t * self` at {where / 'mul.py'}:9:54 explains it: without it the tangent matches"
    assert "tier F1 (" in message and "tier RF (reference engine jvp == torch.func.jvp of the built-in op)" in message
    assert "output 0 (jvp), worst at element" in message and message.count(term) == 2, message


def test_importing_it_does_not_import_torch_and_without_torch_it_says_what_to_install():
    program = textwrap.dedent("""
        import sys
        import formulas.testing
        assert "torch" not in sys.modules
        sys.modules["torch"] = None          # torch not installed
        try:
            formulas.testing.check_formula("sin")
        except ImportError as error:
            print(error)
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == ("proving formulas needs torch (torch==2.13.0, not installed); install it with: "
                           "python3 -m pip install 'derivatives-transpiler[torch]'\n")


def test_prove_package_is_one_pytest_item_per_formula(tmp_path):
    (tmp_path / "plugin_ops").mkdir()
    (tmp_path / "plugin_ops" / "sinh.py").write_text(SINH.format(sign="+"))
    (tmp_path / "plugin_ops" / "sin.py").write_text(WRONG_SIN)
    (tmp_path / "test_plugin_ops.py").write_text(
        "from formulas.testing import prove_package\n\ntest_plugin_ops = prove_package('plugin_ops', tiers=['T1'])\n")
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_plugin_ops.py"],
                          capture_output=True, text=True, cwd=tmp_path, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(tmp_path)])})
    assert "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    assert "FAILED test_plugin_ops.py::test_plugin_ops[sin]" in done.stdout
    assert "the term `0.1 * self` at " in done.stdout


def test_an_operator_name_with_several_overloads_asks_for_one():
    with pytest.raises(ValueError, match=r"package 'formulas' has 2 formulas for 'add'; give one of add.Scalar, add.Tensor"):
        check_formula("add")
