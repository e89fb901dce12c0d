"""The custom Function API: ctx, saved tensors, once_differentiable, and two tutorial examples."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import torch

import reference_engine as engine
from reference_engine import Function, once_differentiable


def f64(values, requires_grad=False):
    return engine.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


class ZeroFirstColumns(Function):
    """Tutorial example 1: zero the first ``n`` columns; the gradient is masked the same way."""

    @staticmethod
    def forward(ctx, x, n):
        ctx.n = n
        out = x.clone()
        out[:, :n] = 0.0
        return out

    @staticmethod
    def backward(ctx, grad):
        mask = engine.ones(grad.shape, dtype=engine.float64)
        mask[:, :ctx.n] = 0.0
        return grad * mask, None


class AbsProduct(Function):
    """Tutorial example 2: (u, v) -> |u * v|, with d/du = sign(uv) v and d/dv = sign(uv) u."""

    @staticmethod
    def forward(ctx, u, v):
        ctx.save_for_backward(u, v)
        product = u * v
        return engine.op("where.self")(product > 0.0, product, -product)

    @staticmethod
    def backward(ctx, grad):
        u, v = ctx.saved_tensors
        product = u * v
        sign = engine.op("where.self")(product > 0.0, 1.0, -1.0)
        return grad * sign * v, grad * sign * u


def test_zero_first_columns_values_and_gradcheck():
    x = f64(np.arange(12.0).reshape(3, 4) / 7, requires_grad=True)
    out = ZeroFirstColumns.apply(x, 2)
    assert out.grad_fn.name() == "ZeroFirstColumnsBackward"
    np.testing.assert_array_equal(out.detach().numpy()[:, :2], 0.0)
    np.testing.assert_array_equal(out.detach().numpy()[:, 2:], x.detach().numpy()[:, 2:])
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0, 1, 1]] * 3)
    assert engine.gradcheck(lambda t: ZeroFirstColumns.apply(t, 1), (x,))
    assert engine.gradgradcheck(lambda t: ZeroFirstColumns.apply(t, 3), (x,))


def test_abs_product_gradcheck_gradgradcheck_and_torch():
    rng = np.random.default_rng(3)
    u_values, v_values = rng.uniform(0.3, 1.5, (2, 3)) * [[1, -1, 1], [-1, 1, 1]], rng.uniform(0.3, 1.5, (2, 3))
    u, v = f64(u_values, requires_grad=True), f64(v_values, requires_grad=True)
    assert engine.gradcheck(AbsProduct.apply, (u, v))
    assert engine.gradgradcheck(AbsProduct.apply, (u, v))
    AbsProduct.apply(u, v).sum().backward()
    ut, vt = (torch.tensor(a, requires_grad=True) for a in (u_values, v_values))
    (ut * vt).abs().sum().backward()
    np.testing.assert_allclose(u.grad.numpy(), ut.grad.numpy())
    np.testing.assert_allclose(v.grad.numpy(), vt.grad.numpy())


def test_needs_input_grad_and_non_tensor_arguments():
    seen = {}

    class Scale(Function):
        @staticmethod
        def forward(ctx, x, factor, y):
            seen["mask"] = ctx.needs_input_grad
            ctx.factor = factor
            return x * factor + y

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.factor, None, grad

    x, y = f64([1.0, 2.0], requires_grad=True), f64([0.0, 0.0])
    Scale.apply(x, 3.0, y).sum().backward()
    assert seen["mask"] == (True, False, False)
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


def test_wrong_number_of_gradients_is_reported():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x, n):
            return x * 1.0

        @staticmethod
        def backward(ctx, grad):
            return grad

    with pytest.raises(RuntimeError, match=r"function BadBackward returned an incorrect number of gradients "
                                           r"\(expected 2, got 1\)"):
        Bad.apply(f64([1.0], requires_grad=True), 2).sum().backward()


def test_materialize_grads_and_mark_non_differentiable():
    received = []

    class SplitMax(Function):
        @staticmethod
        def forward(ctx, x, materialize):
            ctx.set_materialize_grads(materialize)
            doubled, tripled = x * 2.0, x * 3.0
            index = f64([0.0])
            ctx.mark_non_differentiable(index)
            return doubled, tripled, index

        @staticmethod
        def backward(ctx, grad_doubled, grad_tripled, grad_index):
            received.append((grad_doubled, grad_tripled, grad_index))
            return (grad_doubled * 2.0 if grad_doubled is not None else None), None

    x = f64([1.0, 2.0], requires_grad=True)
    doubled, tripled, index = SplitMax.apply(x, True)
    assert index.grad_fn is None and not index.requires_grad
    doubled.sum().backward()
    _, g_tripled, _ = received[-1]
    np.testing.assert_array_equal(g_tripled.numpy(), [0.0, 0.0])     # materialized as zeros
    doubled, tripled, index = SplitMax.apply(x, False)
    doubled.sum().backward()
    assert received[-1][1] is None


def test_once_differentiable_first_order_works_second_order_raises():
    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3.0 * x * x

    x = f64([0.5, -1.2], requires_grad=True)
    assert engine.gradcheck(Cube.apply, (x,))
    (g,) = engine.grad(Cube.apply(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 3 * np.array([0.5, -1.2]) ** 2)
    with pytest.raises(RuntimeError, match="differentiate twice a function that was marked with @once_differentiable"):
        engine.grad(g.sum(), x)


def test_ctx_attribute_holding_an_intermediate_is_guarded():
    class LeakySin(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.cosine = x.cos()          # an intermediate kept on ctx
            return x.sin()

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.cosine

    x = f64([0.2, 0.7], requires_grad=True)
    assert engine.gradcheck(LeakySin.apply, (x,))
    (g,) = engine.grad(LeakySin.apply(x).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="needs the gradient of 'ctx.cosine'"):
        engine.grad(g.sum(), x)


def test_saved_output_makes_no_cycle_and_is_freed():
    class Exp(Function):
        @staticmethod
        def forward(ctx, x):
            out = x.exp()
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, grad):
            (out,) = ctx.saved_tensors
            return grad * out

    gc.collect()
    gc.disable()
    try:
        x = f64([0.1, 0.5], requires_grad=True)
        y = Exp.apply(x)
        assert engine.gradgradcheck(Exp.apply, (x,))
        probe = weakref.ref(y.grad_fn)
        del y
        assert probe() is None
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_saved_tensors_after_backward_raise_clearly():
    class Keep(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2.0

        @staticmethod
        def backward(ctx, grad):
            return grad * 2.0

    x = f64([1.0], requires_grad=True)
    y = Keep.apply(x)
    ctx = y.grad_fn.ctx
    y.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        ctx.saved_tensors
    with pytest.raises(RuntimeError, match="KeepBackward has released"):
        y.sum().backward()


def test_in_place_change_of_a_saved_tensor_is_caught():
    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2.0 * x

    h = f64([1.0, 2.0], requires_grad=True) * 1.0
    y = Square.apply(h)
    with engine.no_grad():
        h.add_(1.0)
    with pytest.raises(RuntimeError, match="saved as 'saved_tensors\\[0\\]' by SquareBackward is at version 1"):
        y.sum().backward()
