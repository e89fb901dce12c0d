"""The engine's first-order gradients at the pointwise operators' kinks, ties, bounds and
NaNs equal torch's (``tests/pointwise_kinks.py``)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.test_tiers import engine_call
from op_cases import OpCase, torch_args, torch_op
from pointwise_kinks import KINK_CASES


def torch_first_order(case: OpCase) -> list[np.ndarray]:
    """torch's gradient of ``sum(op(...) * weights)`` with respect to each differentiated input."""
    args, kwargs = torch_args(case)
    inputs = [args[i] for i in case.differentiable]
    out = torch_op(case.op)(*args, **kwargs)
    weights = torch.linspace(0.5, 1.5, out.numel(), dtype=out.dtype).reshape(out.shape)
    grads = torch.autograd.grad((out * weights).sum(), inputs, allow_unused=True)
    return [np.zeros(t.shape) if g is None else g.numpy(force=True) for g, t in zip(grads, inputs)]


@pytest.mark.tier("E")
@pytest.mark.parametrize("case", KINK_CASES, ids=lambda c: c.name)
def test_engine_gradient_at_kinks_equals_torch(case: OpCase):
    import reference_engine as engine

    fn, inputs = engine_call(case)
    out = fn(*inputs)
    weights = np.linspace(0.5, 1.5, out.numel()).reshape(out.shape)
    got = engine.grad((out * engine.Tensor(weights)).sum(), inputs, allow_unused=True)
    for mine, expected in zip(got, torch_first_order(case), strict=True):
        np.testing.assert_allclose(np.zeros(expected.shape) if mine is None else mine.numpy(), expected,
                                   rtol=1e-7, atol=0, equal_nan=True)


def test_hardsigmoid_gradient_at_its_kinks_is_the_builtins():
    """At -3 and 3 torch's built-in gives slope 0 (the tier tests' oracle is a composition, as torch
    has no double backward of hardsigmoid)."""
    import reference_engine as engine

    values = np.array([-3.0, 3.0, 0.0, -4.0, 4.0, 2.9])
    source = torch.tensor(values, requires_grad=True)
    (expected,) = torch.autograd.grad(torch.nn.functional.hardsigmoid(source).sum(), source)
    x = engine.tensor(values, dtype=engine.float64, requires_grad=True)
    (got,) = engine.grad(engine.hardsigmoid(x).sum(), x)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-7)
    assert got.numpy()[0] == got.numpy()[1] == 0.0
