"""Two things torch does with what a formula gives it, which the engine does too.

* ``Scalar`` arguments carry ``c10::Scalar``'s methods (``alpha.conj()``, ``alpha.toFloat()``)
  in a formula that calls them (:mod:`reference_engine.scalars`): each method's value is torch's.
* A gradient of a shape its input broadcasts to (a formula that leaves the broadcast
  unreduced) is summed to the input's shape, as torch's engine does (``validate_outputs``),
  and recorded for a second order; a shape the input does not broadcast to raises torch's error.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import reference_engine as engine
from reference_engine.scalars import SCALAR_METHODS, scalar_method_parameters, scalar_value
from transpiler.cpp.expressions import SCALAR_METHODS as EMITTED_SCALAR_METHODS


def test_the_engine_gives_the_methods_the_emitter_writes():
    assert SCALAR_METHODS == set(EMITTED_SCALAR_METHODS)


@pytest.mark.parametrize("number", [3, -2.7, 0.1, 1e40, 2 - 3j])
def test_scalar_methods_equal_torchs(number):
    """torch's value of each method, read from a 0-dim tensor of the number (c10::Scalar's own
    are not exposed to Python): conjugate, single precision (overflowing to inf), truncation."""
    dtype = {int: torch.int64, float: torch.float64, complex: torch.complex128}[type(number)]
    value, t = scalar_value(number), torch.tensor(number, dtype=dtype)
    assert value == number and isinstance(value, type(number))
    assert value.conj() == t.conj().item() and type(value.conj()) is type(value)
    assert value.isComplex() == t.is_complex() and value.isFloatingPoint() == t.is_floating_point()
    if t.is_complex():
        for method in ("toDouble", "toFloat", "toLong"):
            with pytest.raises(RuntimeError, match="cannot be converted"):
                getattr(value, method)()
        return
    assert value.toDouble() == t.double().item()
    assert value.toFloat() == t.to(torch.float32).item()
    if abs(number) < 2 ** 63:
        assert value.toLong() == t.long().item()
    assert scalar_value(True) is True and scalar_value(None) is None


def test_only_parameters_whose_methods_are_called_are_found():
    def formula(self, other, alpha, beta):
        result = self
        def backward(grad):
            return grad * alpha.conj(), self.conj() * beta
        return result, backward
    assert scalar_method_parameters(formula.__code__, frozenset({"alpha", "beta"})) == {"alpha"}


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
