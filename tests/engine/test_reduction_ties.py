"""Ties and NaNs in ``max()``/``min()``/``amax``/``amin``/``min.dim``: the engine's gradients
equal torch's (first and second order).

Tied extremes are not differentiable points, so these inputs are kept out of the gradcheck
catalogue (tests/op_cases.py). torch shares the gradient evenly among tied extremes in
``max()``, ``min()``, ``amax`` and ``amin`` (among the NaNs when the extreme is NaN, for
``max()``/``min()``), and gives it to the returned index in ``min.dim``; so does the engine,
also through the methods a user calls (``x.max()``, whose composite steps aside for the
declared ``max``).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import reference_engine as engine

TIES = np.array([[1.0, 3.0, 3.0, -2.0], [0.5, 0.5, 0.5, 0.5], [3.0, -1.0, 3.0, 3.0]])
WITH_NAN = np.array([[1.0, np.nan, 2.0], [np.nan, 0.0, -1.0]])

CALLS = [
    ("max", lambda m, x: m.max(x), TIES),
    ("min", lambda m, x: m.min(x), TIES),
    ("max_method", lambda m, x: x.max(), TIES),
    ("min_method", lambda m, x: x.min(), -TIES),
    ("max_nan", lambda m, x: m.max(x), WITH_NAN),
    ("min_nan", lambda m, x: m.min(x), WITH_NAN),
    ("amax_dim1", lambda m, x: m.amax(x, [1]), TIES),
    ("amax_all", lambda m, x: m.amax(x, []), TIES),
    ("amin_dim0_keep", lambda m, x: m.amin(x, [0], True), TIES),
    ("min_dim1", lambda m, x: m.min(x, 1)[0], -TIES),
    ("min_dim0_keep", lambda m, x: x.min(0, True).values, TIES),
]


def _gradients(module, tensor, data: np.ndarray, call) -> tuple[np.ndarray, ...]:
    """The output, the first-order gradient and a second-order one (along a fixed probe)."""
    grad = torch.autograd.grad if module is torch else engine.grad
    x = tensor(data, requires_grad=True)
    out = call(module, x)
    weights = tensor(np.linspace(0.5, 1.5, out.numel()).reshape(out.shape))
    (first,) = grad((out * weights).sum(), [x], create_graph=True)
    total = (first * tensor(np.arange(data.size, dtype=np.float64).reshape(data.shape))).sum()
    second = grad(total, [x], allow_unused=True)[0] if total.requires_grad else None
    return (out.detach().numpy(), first.detach().numpy(),
            np.zeros(data.shape) if second is None else second.detach().numpy())


def _torch_tensor(data, requires_grad=False):
    return torch.tensor(data, dtype=torch.float64, requires_grad=requires_grad)


def _engine_tensor(data, requires_grad=False):
    return engine.tensor(data, dtype=engine.float64, requires_grad=requires_grad)


@pytest.mark.parametrize("name, call, data", CALLS, ids=[c[0] for c in CALLS])
def test_tied_and_nan_extremes_match_torch(name, call, data):
    ours = _gradients(engine, _engine_tensor, data, call)
    theirs = _gradients(torch, _torch_tensor, data, call)
    for got, want in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0, equal_nan=True)


def test_max_method_uses_the_declared_formula():
    x = engine.tensor(TIES, dtype=engine.float64, requires_grad=True)
    assert x.max().grad_fn.name() == "MaxBackward0" and engine.min(x).grad_fn.name() == "MinBackward0"
    assert x.mean().grad_fn.name() == "MeanBackward0"
