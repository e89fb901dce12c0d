"""Tiers OP, OC and OI: every overridable formula proven through torch's own aten operator.

With ``formulas.torch.override()`` on (every formula of the library swapped in,
so double backward runs the formulas again), for a sample of each op's cases
(:data:`CASES_PER_OP` of ``tests/op_cases.py`` and as many made from torch's
OpInfo samples, ``tests/opinfo_cases.py``), calling ``torch.ops.aten.<op>``:

* the op records the formula's node (``<Op>FormulaBackward``);
* ``gradcheck`` and ``gradgradcheck`` pass, and with ``check_forward_ad`` where
  the formula has a jvp (or its ``jvp=`` rule); in torch's fast mode for cases whose inputs and
  outputs hold more than :data:`FULL_JACOBIAN_UP_TO` elements;
* outputs, first- and second-order gradients equal torch's own autograd of the
  same op on the same inputs and upstream gradients (``op_cases.torch_op``: for an op
  torch cannot differentiate twice, ``hardsigmoid``, the torch composition standing in).

OC is the same, on one case per op (torch's OpInfo sample where there is one), with
``override(compiled=True)``: the shipped library built from
out_cpp/ and loaded, so ``torch.ops.aten.<op>`` records the transpiled C++ node
(a ``CppFunction``), whose backward and jvp run in C++ (forward AD is checked for
every op: the C++ has a jvp for each, tier F1).

OI runs each op's in-place twin (``sin_`` for ``sin``, :func:`formulas.torch.in_place_twins`)
through the override, on a copy of ``self``, on one case per twin: the first op case, else
the first OpInfo sample, that torch's own in-place op accepts (``self`` holds the result
without broadcasting or casting); against torch's own in-place op. It is recorded in the
functional op's row.

Every formula of the shipped library is overridable, its views included (their outputs are
torch's own views of the input: ``tests/torch_override/aliasing.py`` writes through them);
``formulas.torch.overridable()`` would list the others with the reason.
"""
from __future__ import annotations

from typing import Callable

import pytest
import torch

import formulas
from formulas.torch import TorchFormula, in_place_twins, overridable, override
from formulas.torch.override import aten_overload
from tests.op_cases import ALL_CASES, OpCase, differentiable_view, first_and_second_order, torch_args, torch_op
from tests.opinfo_cases import catalogue

CASES_PER_OP = 1
"""Cases taken per op from each source (the catalogue's first ones): bounds the run time."""

ACCEPTED, REFUSED = overridable()
LIBRARY = formulas.load_library()


def sample(cases: list[OpCase], fits: Callable[[OpCase], bool] = lambda case: case.op in ACCEPTED) -> list[OpCase]:
    """The first :data:`CASES_PER_OP` cases of each op that ``fits`` them."""
    taken: dict[str, int] = {}
    chosen = []
    for case in cases:
        if taken.get(case.op, 0) < CASES_PER_OP and fits(case):
            taken[case.op] = taken.get(case.op, 0) + 1
            chosen.append(case)
    return chosen


# A view's backward only reshapes or places the gradient (C1, CT and the R tiers prove it on all its cases;
# tests/torch_override/aliasing.py writes through views): OP takes one case of it, as OC does, torch's
# OpInfo sample where there is one.
VIEWS = {op for op in ACCEPTED if TorchFormula(LIBRARY[op], None).view_of is not None}
OP_CASES = sample(ALL_CASES, lambda case: case.op in ACCEPTED and case.op not in VIEWS) + sample(list(catalogue().cases))
OP_CASES += sample(ALL_CASES, lambda case: case.op in VIEWS and case.op not in {c.op for c in OP_CASES})
# OC proves the compiled nodes stand in for the aten operators (C1 and CT prove each node on all its
# cases): one case per op, torch's OpInfo sample where there is one, proves nothing less.
OC_CASES = sample(list(catalogue().cases))
OC_CASES += sample(ALL_CASES, lambda case: case.op in ACCEPTED and case.op not in {c.op for c in OC_CASES})
IN_PLACE = {twin: in_place for in_place, twin in in_place_twins()[0].items()}   # "sin" -> "sin_"


def has_jvp(op: str) -> bool:
    return TorchFormula(LIBRARY[op], None).has_jvp


def test_every_formula_is_overridable_or_refused_with_a_reason():
    assert sorted(ACCEPTED + list(REFUSED)) == sorted(LIBRARY)
    assert {op for op in ACCEPTED if not any(case.op == op for case in OP_CASES)} == set()
    assert sorted(case.op for case in OC_CASES) == sorted(ACCEPTED)


#: a case whose inputs and outputs hold more elements than this together is gradchecked in torch's
#: fast mode (random projections of the Jacobian rather than all of it). A full Jacobian costs a
#: backward per output element and a forward per input element, and gradgradcheck's inputs include
#: the upstream gradients, one per output element: torch's OpInfo samples of slice_scatter hold
#: 16,000 input elements, and conv_transpose2d's sample 2 has 148 input but 3,872 output elements,
#: minutes for the full Jacobians. The comparisons with torch's own first and second order below
#: stay element by element.
FULL_JACOBIAN_UP_TO = 2000


def _gradchecks(call, leaves, outputs, forward_ad: bool) -> None:
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    elements = sum(t.numel() for t in leaves) + sum(o.numel() for o in outputs if isinstance(o, torch.Tensor))
    fast = elements > FULL_JACOBIAN_UP_TO
    assert torch.autograd.gradcheck(call, leaves, check_forward_ad=forward_ad, fast_mode=fast)
    assert torch.autograd.gradgradcheck(call, leaves, fast_mode=fast)


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
        _gradchecks(call, leaves, outputs, forward_ad=has_jvp(case.op))
        ours = first_and_second_order(aten, case)
    for order in range(3):   # outputs, first-order gradients, second-order gradients
        assert len(ours[order]) == len(theirs[order])
        for mine, builtin in zip(ours[order], theirs[order]):
            torch.testing.assert_close(mine, builtin)


@pytest.mark.tier("OC")
@pytest.mark.parametrize("case", OC_CASES, ids=lambda c: c.name)
def test_through_the_aten_operator_compiled(formulas_ops, case: OpCase):
    aten = aten_overload(case.op)
    theirs = first_and_second_order(torch_op(case.op), case)
    with override(compiled=True) as installation:
        assert case.op in installation.ops
        call, leaves = differentiable_view(case, aten)
        outputs = call(*leaves)
        recorded = [o for o in (outputs if isinstance(outputs, tuple) else (outputs,)) if o.grad_fn is not None]
        assert recorded and all(type(o.grad_fn).__name__ == "CppFunction" for o in recorded)   # not torch's node
        _gradchecks(call, leaves, outputs, forward_ad=True)
        ours = first_and_second_order(aten, case)
    for order in range(3):
        assert len(ours[order]) == len(theirs[order])
        for mine, builtin in zip(ours[order], theirs[order]):
            torch.testing.assert_close(mine, builtin)


def in_place_on_a_copy(in_place):
    """``in_place`` (an in-place operator) applied to a copy of ``self``: a function of the case."""
    def call(self, *args, **kwargs):
        return in_place(self.clone(), *args, **kwargs)
    return call


def torch_accepts_in_place(case: OpCase) -> bool:
    """Whether torch's own in-place twin runs on ``case`` and gives its functional op's result
    (``self`` holds it: no broadcasting to a larger shape, no cast)."""
    args, kwargs = torch_args(case, requires_grad=False)
    if not args or not isinstance(args[0], torch.Tensor) or 0 not in case.differentiable:
        return False
    try:
        functional = aten_overload(case.op)(*args, **kwargs)
        in_place = in_place_on_a_copy(aten_overload(IN_PLACE[case.op]))(*args, **kwargs)
    except RuntimeError:
        return False
    return functional.shape == in_place.shape and functional.dtype == in_place.dtype


def has_in_place_case(case: OpCase) -> bool:
    return case.op in IN_PLACE and torch_accepts_in_place(case)


# One case per in-place twin (the twin's formula is proven by OP; this proves the in-place path around
# it): the first op case torch's in-place op accepts, else the first such OpInfo sample.
IN_PLACE_CASES = sample(ALL_CASES, has_in_place_case)
IN_PLACE_CASES += sample(list(catalogue().cases), lambda case: case.op not in {c.op for c in IN_PLACE_CASES}
                         and has_in_place_case(case))


def test_every_in_place_twin_has_a_case():
    assert sorted(IN_PLACE) == sorted({case.op for case in IN_PLACE_CASES})


@pytest.mark.tier("OI")
@pytest.mark.parametrize("case", IN_PLACE_CASES, ids=lambda c: f"{IN_PLACE[c.op]}[{c.id}]")
def test_the_in_place_twin_through_the_aten_operator(case: OpCase):
    in_place = in_place_on_a_copy(aten_overload(IN_PLACE[case.op]))
    try:
        theirs = first_and_second_order(in_place, case)
    except (NotImplementedError, RuntimeError) as error:
        if "not implemented" not in str(error):
            raise
        # torch does not differentiate it (asinh_), or not twice (hardsigmoid_): its functional
        # op (for hardsigmoid, the composition standing in) does
        theirs = first_and_second_order(torch_op(case.op), case)
    with override([IN_PLACE[case.op], *ACCEPTED]):     # the twin, and every formula for double backward
        call, leaves = differentiable_view(case, in_place)
        output = call(*leaves)
        assert output.grad_fn.name() == "torch::autograd::CopyBackwards"
        assert any(node is not None and node.name().endswith("FormulaBackward")
                   for node, _ in output.grad_fn.next_functions)
        _gradchecks(call, leaves, output, forward_ad=has_jvp(case.op))
        ours = first_and_second_order(in_place, case)
    for order in range(3):
        assert len(ours[order]) == len(theirs[order])
        for mine, builtin in zip(ours[order], theirs[order]):
            torch.testing.assert_close(mine, builtin)
