"""Gradients reach each input in the input's dtype, as torch casts them (first and second order),
and in its shape: a gradient of a shape the input broadcasts to (a backward that leaves the
broadcast unreduced) is summed to it, as torch's engine does (``validate_outputs``); a shape the
input does not broadcast to raises torch's error."""
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


class _Broadcast(engine.Function):
    """``x * y`` whose backward leaves the broadcast gradient unreduced."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * y * x * x / x / x, grad * x      # (3, 4) for x (3, 1): a second order of x too


class _TorchBroadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * y * x * x / x / x, grad * x


def test_a_broadcast_gradient_is_summed_to_its_inputs_shape_as_torch():
    x, y = np.linspace(0.5, 1.5, 3).reshape(3, 1), np.linspace(-1, 1, 4).reshape(1, 4)
    ex, ey = (engine.tensor(v, dtype=engine.float64, requires_grad=True) for v in (x, y))
    tx, ty = (torch.tensor(v, requires_grad=True) for v in (x, y))
    first = engine.grad((_Broadcast.apply(ex, ey) ** 2).sum(), [ex, ey], create_graph=True)
    expected = torch.autograd.grad((_TorchBroadcast.apply(tx, ty) ** 2).sum(), [tx, ty], create_graph=True)
    for got, want in zip(first, expected):
        assert got.shape == want.shape
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    second = engine.grad(first[0].sum(), [ex, ey])
    expected_second = torch.autograd.grad(expected[0].sum(), [tx, ty])
    for got, want in zip(second, expected_second):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_a_gradient_its_input_does_not_broadcast_to_raises_torchs_error():
    class Squeezed(engine.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad.unsqueeze(1)        # (2, 1, 3) for an input of (2, 3)

    x = engine.tensor(np.ones((2, 3)), dtype=engine.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"returned an invalid gradient at index 0 - got \[2, 1, 3\] but expected "
                                           r"shape compatible with \[2, 3\]"):
        engine.grad(Squeezed.apply(x).sum(), [x])
