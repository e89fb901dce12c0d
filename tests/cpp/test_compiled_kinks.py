"""The compiled ops' first-order gradients at the pointwise operators' kinks, ties, bounds and
NaNs equal torch's (``tests/pointwise_kinks.py``)."""
from __future__ import annotations

import pytest

from tests.cpp.test_compiled_ops import compiled_op
from tests.op_cases import OpCase, differentiable_view
from tests.pointwise_kinks import KINK_CASES
from tests.engine.test_kinks import torch_first_order

torch = pytest.importorskip("torch")


@pytest.mark.tier("E")
@pytest.mark.parametrize("case", KINK_CASES, ids=lambda c: c.name)
def test_compiled_gradient_at_kinks_equals_torch(formulas_ops, case: OpCase):
    call, leaves = differentiable_view(case, compiled_op(formulas_ops, case.op))
    out = call(*leaves)
    weights = torch.linspace(0.5, 1.5, out.numel(), dtype=out.dtype).reshape(out.shape)
    grads = torch.autograd.grad((out * weights).sum(), leaves, allow_unused=True)
    for mine, expected in zip(grads, torch_first_order(case), strict=True):
        got = torch.zeros(expected.shape, dtype=torch.float64) if mine is None else mine
        torch.testing.assert_close(got, torch.from_numpy(expected), rtol=1e-7, atol=0, equal_nan=True)
