"""Tier OP: every overridable formula proven through torch's own aten operator.

With ``formulas.torch.override()`` on (every formula of the library swapped in,
so double backward runs the formulas again), for a sample of each op's cases
(:data:`CASES_PER_OP` of ``tests/op_cases.py`` and as many made from torch's
OpInfo samples, ``tests/opinfo_cases.py``), calling ``torch.ops.aten.<op>``:

* the op records the formula's node (``<Op>FormulaBackward``);
* ``gradcheck`` and ``gradgradcheck`` pass, and with ``check_forward_ad`` where
  the formula has a jvp (or its ``jvp=`` rule);
* outputs, first- and second-order gradients equal torch's own autograd of the
  same op on the same inputs and upstream gradients (``op_cases.torch_op``: for an op
  torch cannot differentiate twice, ``hardsigmoid``, the torch composition standing in).

The operators the override refuses (views, whose outputs an
``autograd.Function`` cannot make torch's own views) are listed by
``formulas.torch.overridable()`` and in docs/torch.md.
"""
from __future__ import annotations

import pytest
import torch

import formulas
from formulas.torch import TorchFormula, overridable, override
from formulas.torch.override import aten_overload
from tests.op_cases import ALL_CASES, OpCase, differentiable_view, first_and_second_order, torch_op
from tests.opinfo_cases import catalogue

CASES_PER_OP = 1
"""Cases taken per op from each source (the catalogue's first ones): bounds the run time."""

ACCEPTED, REFUSED = overridable()
LIBRARY = formulas.load_library()


def sample(cases: list[OpCase]) -> list[OpCase]:
    taken: dict[str, int] = {}
    chosen = []
    for case in cases:
        if case.op in ACCEPTED and taken.get(case.op, 0) < CASES_PER_OP:
            taken[case.op] = taken.get(case.op, 0) + 1
            chosen.append(case)
    return chosen


OP_CASES = sample(ALL_CASES) + sample(list(catalogue().cases))


def has_jvp(op: str) -> bool:
    return TorchFormula(LIBRARY[op], None).has_jvp


def test_every_formula_is_overridable_or_refused_with_a_reason():
    assert sorted(ACCEPTED + list(REFUSED)) == sorted(LIBRARY)
    assert {op for op in ACCEPTED if not any(case.op == op for case in OP_CASES)} == set()


@pytest.mark.tier("OP")
@pytest.mark.parametrize("case", OP_CASES, ids=lambda c: c.name)
def test_through_the_aten_operator(case: OpCase):
    aten = aten_overload(case.op)
    theirs = first_and_second_order(torch_op(case.op), case)     # torch's own (a composition where its op has no double backward)
    with override():
        call, leaves = differentiable_view(case, aten)
        outputs = call(*leaves)
        recorded = [o for o in (outputs if isinstance(outputs, tuple) else (outputs,)) if o.grad_fn is not None]
        assert recorded and all(o.grad_fn.name().endswith("FormulaBackward") for o in recorded)
        assert torch.autograd.gradcheck(call, leaves, check_forward_ad=has_jvp(case.op))
        assert torch.autograd.gradgradcheck(call, leaves)
        ours = first_and_second_order(aten, case)
    for order in range(3):   # outputs, first-order gradients, second-order gradients
        assert len(ours[order]) == len(theirs[order])
        for mine, builtin in zip(ours[order], theirs[order]):
            torch.testing.assert_close(mine, builtin)
