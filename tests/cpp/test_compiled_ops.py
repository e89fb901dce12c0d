"""Tiers C1 and CT: every formula, compiled, against torch's gradcheck and the built-in op.

For each OpCase (tests/op_cases.py): ``torch.autograd.gradcheck`` and
``gradgradcheck`` pass on ``torch.ops.formulas.<op>`` with float64 inputs (C1),
and its first- and second-order gradients equal the built-in op's on the same
inputs and the same random upstream gradients (CT), also on torch's own OpInfo
sample inputs (``tests/opinfo_cases.py``).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.op_cases import ALL_CASES, OpCase, cases, differentiable_view, first_and_second_order, torch_op
from transpiler.frontend import load_library
from tests.opinfo_cases import catalogue

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
LIBRARY_OPS = sorted(f.op_name for f in load_library(str(REPO / "formulas")).formulas)


def compiled_op(namespace: object, op: str):
    name, _, overload = op.partition(".")
    return getattr(getattr(namespace, name), overload or "default")


def test_every_formula_has_cases():
    assert LIBRARY_OPS, "the formula library is empty"
    assert [op for op in LIBRARY_OPS if not cases(op)] == []


@pytest.mark.tier("C1")
@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.name)
def test_gradcheck_and_gradgradcheck(formulas_ops, case: OpCase):
    call, leaves = differentiable_view(case, compiled_op(formulas_ops, case.op))
    assert torch.autograd.gradcheck(call, leaves, raise_exception=True)
    assert torch.autograd.gradgradcheck(call, leaves, raise_exception=True)


@pytest.mark.tier("CT")
@pytest.mark.parametrize("case", ALL_CASES + list(catalogue().cases), ids=lambda c: c.name)
def test_gradients_equal_builtin(formulas_ops, case: OpCase):
    ours = first_and_second_order(compiled_op(formulas_ops, case.op), case)
    theirs = first_and_second_order(torch_op(case.op), case)
    for order in range(3):   # outputs, first-order gradients, second-order gradients
        assert len(ours[order]) == len(theirs[order])
        for mine, builtin in zip(ours[order], theirs[order]):
            torch.testing.assert_close(mine, builtin)
