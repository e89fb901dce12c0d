"""Ties and NaNs in the compiled ``max()``/``min()``/``amax``/``amin``/``min.dim``: gradients equal
the built-in ops' (first and second order). See tests/engine/test_reduction_ties.py."""
from __future__ import annotations

import pytest

from tests.engine.test_reduction_ties import TIES, WITH_NAN

torch = pytest.importorskip("torch")

CALLS = [
    ("max", lambda ops, x: ops.max.default(x), TIES),
    ("min", lambda ops, x: ops.min.default(x), -TIES),
    ("max_nan", lambda ops, x: ops.max.default(x), WITH_NAN),
    ("min_nan", lambda ops, x: ops.min.default(x), WITH_NAN),
    ("amax_dim1", lambda ops, x: ops.amax.default(x, [1]), TIES),
    ("amax_all", lambda ops, x: ops.amax.default(x, []), TIES),
    ("amin_dim0_keep", lambda ops, x: ops.amin.default(x, [0], True), TIES),
    ("min_dim1", lambda ops, x: ops.min.dim(x, 1)[0], -TIES),
]


def _orders(ops, call, data):
    x = torch.tensor(data, dtype=torch.float64, requires_grad=True)
    out = call(ops, x)
    weights = torch.linspace(0.5, 1.5, out.numel(), dtype=torch.float64).reshape(out.shape)
    (first,) = torch.autograd.grad((out * weights).sum(), x, create_graph=True)
    total = (first * torch.arange(x.numel(), dtype=torch.float64).reshape(x.shape)).sum()
    second = torch.autograd.grad(total, x, allow_unused=True)[0] if total.requires_grad else None
    return out, first, torch.zeros_like(x) if second is None else second


@pytest.mark.parametrize("name, call, data", CALLS, ids=[c[0] for c in CALLS])
def test_tied_and_nan_extremes_match_builtin(formulas_ops, name, call, data):
    ours = _orders(formulas_ops, call, data)
    theirs = _orders(torch.ops.aten, call, data)
    for got, want in zip(ours, theirs, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=0, equal_nan=True)
