"""A backward that raised leaves no leaf gradient behind: a retry gives torch's gradients once."""
from __future__ import annotations

import numpy as np
import pytest
import torch


import reference_engine as engine


def _fails_once(lib, failures):
    Function = engine.Function if lib is engine else torch.autograd.Function

    class FailsOnce(Function):
        calls = 0

        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, grad):
            FailsOnce.calls += 1
            if FailsOnce.calls <= failures:
                raise ValueError("transient failure in backward")
            return grad * 2.0

    return FailsOnce


def _loss(lib, x, failures=1):
    failing = _fails_once(lib, failures).apply(x)      # older: its node runs after the sin branch
    return failing.sum() + (x.sin() * x).sum()


def test_retry_after_a_failed_backward_does_not_double_count():
    values = [0.5, -1.0, 2.0]
    x = engine.tensor(np.asarray(values), requires_grad=True)
    loss = _loss(engine, x)
    with pytest.raises(ValueError, match="transient failure"):
        loss.backward()
    assert x.grad is None                    # no leaf was written by the failed pass
    loss.backward()

    xt = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    _loss(torch, xt, failures=0).backward()             # torch: the same graph, one successful pass
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)


def test_retry_of_grad_after_a_failed_backward():
    x = engine.tensor([0.5, -1.0, 2.0], dtype=engine.float64, requires_grad=True)
    loss = _loss(engine, x)
    with pytest.raises(ValueError):
        engine.grad(loss, [x])
    (g,) = engine.grad(loss, [x])
    xt = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    (gt,) = torch.autograd.grad(_loss(torch, xt, failures=0), [xt])
    np.testing.assert_allclose(g.numpy(), gt.numpy(), rtol=1e-12)
