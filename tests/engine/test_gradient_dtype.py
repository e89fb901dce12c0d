"""Gradients reach each input in the input's dtype, as torch casts them (first and second order)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import reference_engine as engine


def _pair(values, dtype):
    return (engine.tensor(np.asarray(values, dtype=dtype), requires_grad=True),
            torch.tensor(values, dtype=getattr(torch, np.dtype(dtype).name), requires_grad=True))


def _mixed_product(x, y):
    return (x * y * x).sum()


def _mixed_sum_then_sin(x, y):
    return (x + y).sin().sum()


@pytest.mark.parametrize("function", [_mixed_product, _mixed_sum_then_sin], ids=lambda f: f.__name__)
def test_float32_with_float64_gradients_equal_torch(function):
    (x, xt), (y, yt) = _pair([1.0, 2.0, -0.5], np.float32), _pair([3.0, 4.0, 0.25], np.float64)
    gx, gy = engine.grad(function(x, y), [x, y], create_graph=True)
    gxt, gyt = torch.autograd.grad(function(xt, yt), [xt, yt], create_graph=True)
    assert (gx.dtype.name, gy.dtype.name) == (str(gxt.dtype)[6:], str(gyt.dtype)[6:]) == ("float32", "float64")
    np.testing.assert_allclose(gx.detach().numpy(), gxt.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(gy.detach().numpy(), gyt.detach().numpy(), rtol=1e-12)
    second = engine.grad((gx * gx).sum() + gy.sum(), [x, y])
    second_torch = torch.autograd.grad((gxt * gxt).sum() + gyt.sum(), [xt, yt])
    for got, expected in zip(second, second_torch):
        assert got.dtype.name == str(expected.dtype)[6:]
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6)


def test_backward_accumulates_in_the_leaf_dtype():
    (x, xt), (y, yt) = _pair([1.0, 2.0], np.float32), _pair([3.0, 4.0], np.float64)
    (x * y).sum().backward()
    (xt * yt).sum().backward()
    assert x.grad.dtype == engine.float32 and y.grad.dtype == engine.float64
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy())


def test_a_gradient_of_the_wrong_kind_still_raises():
    class IntegerGradient(engine.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, grad):
            return engine.tensor([1, 1])

    x = engine.tensor([1.0, 2.0], dtype=engine.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="IntegerGradientBackward returned an invalid gradient at index 0 - "
                                           "expected dtype float64 but got int64"):
        IntegerGradient.apply(x).sum().backward()
