"""The engine: ordering, accumulation, retain_graph, create_graph, grad(), grad mode, errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import reference_engine as engine
from formulas import at


def f64(values, requires_grad=False):
    return engine.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


def test_formula_forward_runs_below_autograd():
    x = f64([0.5, 1.0], requires_grad=True)
    y = at.sin(x)
    assert y.grad_fn.name() == "SinBackward0"
    # the only edge of the sin node goes to the leaf: at.sin inside the formula recorded nothing
    assert list(y.grad_fn.next_edges) == [(x, 0)]
    np.testing.assert_allclose(y.detach().numpy(), np.sin([0.5, 1.0]))


def test_gradient_accumulates_over_uses_and_calls():
    x = f64([1.0, 2.0, 3.0], requires_grad=True)
    (x * x + x.sin()).sum().backward()
    expected = 2 * x.detach().numpy() + np.cos(x.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), expected)
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), expected + 3.0)


def test_chain_of_100k_nodes_needs_no_recursion():
    x = f64([0.1, 0.2], requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_diamond_graph_runs_each_node_once_after_all_its_consumers():
    x = f64([0.3, -0.7], requires_grad=True)
    a = x.exp()
    b = a * a.sin() + a.cos() * a       # a feeds four consumers
    b.sum().backward()
    xt = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)
    at_ = xt.exp()
    (at_ * at_.sin() + at_.cos() * at_).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)


def test_second_backward_without_retain_graph_raises_clearly():
    x = f64([1.0, 2.0], requires_grad=True)
    y = x.exp().sum()
    y.backward()
    with pytest.raises(RuntimeError, match=r"backward through the graph a second time.*SumBackward0.*retain_graph=True"):
        y.backward()


def test_retain_graph_allows_a_second_backward():
    x = f64([1.0, 2.0], requires_grad=True)
    y = x.exp().sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([1.0, 2.0]))


def test_double_and_triple_backward_with_create_graph():
    x = f64([0.4, 1.3], requires_grad=True)
    y = (x.sin() * x).sum()
    (g1,) = engine.grad(y, x, create_graph=True)
    (g2,) = engine.grad(g1.sum(), x, create_graph=True)
    (g3,) = engine.grad(g2.sum(), x)
    xv = x.detach().numpy()
    np.testing.assert_allclose(g1.detach().numpy(), np.sin(xv) + xv * np.cos(xv))
    np.testing.assert_allclose(g2.detach().numpy(), 2 * np.cos(xv) - xv * np.sin(xv))
    np.testing.assert_allclose(g3.numpy(), -3 * np.sin(xv) - xv * np.cos(xv))


def test_grad_with_grad_outputs_and_several_inputs():
    a = f64([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = f64([[0.5], [-1.0]], requires_grad=True)
    out = a @ b
    weights = f64([[2.0], [3.0]])
    ga, gb = engine.grad(out, (a, b), grad_outputs=weights)
    np.testing.assert_allclose(ga.numpy(), weights.numpy() @ b.detach().numpy().T)
    np.testing.assert_allclose(gb.numpy(), a.detach().numpy().T @ weights.numpy())
    assert a.grad is None and b.grad is None       # grad() does not accumulate


def test_grad_of_a_non_leaf_input():
    x = f64([1.0, 2.0], requires_grad=True)
    h = x * x
    y = (h.sin()).sum()
    (gh,) = engine.grad(y, h)
    np.testing.assert_allclose(gh.numpy(), np.cos([1.0, 4.0]))


def test_unused_input_raises_unless_allow_unused():
    x = f64([1.0], requires_grad=True)
    z = f64([2.0], requires_grad=True)
    y = (x * 2.0).sum()
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph.*allow_unused=True"):
        engine.grad(y, (x, z), retain_graph=True)
    gx, gz = engine.grad(y, (x, z), allow_unused=True)
    assert gz is None
    np.testing.assert_allclose(gx.numpy(), [2.0])


def test_non_scalar_output_needs_grad_outputs():
    x = f64([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * 2.0).backward()


def test_output_not_requiring_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        f64([1.0]).sum().backward()


def test_backward_not_called_when_all_incoming_gradients_are_none():
    calls = []

    def two_outputs(self):
        first, second = at.mul(self, 2.0), at.mul(self, 3.0)

        def backward(grad_first, grad_second):
            calls.append((grad_first is None, grad_second is None))
            total = None
            if grad_first is not None:
                total = grad_first * 2.0
            if grad_second is not None:
                total = grad_second * 3.0 if total is None else total + grad_second * 3.0
            return total
        return (first, second), backward

    op = engine.define("engine_test_two_outputs(Tensor self) -> (Tensor first, Tensor second)",
                       kernel=lambda x: (x * 2.0, x * 3.0), formula=two_outputs)
    x = f64([1.0, 2.0], requires_grad=True)
    first, second = op(x)
    second.sum().backward()
    assert calls == [(True, False)]                  # a None gradient for the unused output
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])

    # a reachable node whose incoming gradients are all None is not called
    def blocks(self):
        result = at.mul(self, 1.0)

        def backward(grad):
            return None                              # None means zero
        return result, backward

    stop = engine.define("engine_test_stop_gradient(Tensor self) -> Tensor", kernel=lambda x: x * 1.0,
                         formula=blocks)
    calls.clear()
    y = f64([1.0], requires_grad=True)
    first, _ = op(y)
    stop(first).sum().backward()
    assert calls == []
    assert y.grad is None


def test_wrong_gradient_shape_names_node_and_input_index():
    def formula(self, other):
        result = at.mul(self, other)

        def backward(grad):
            return grad, at.sum(grad)           # other's gradient: a 0-d tensor, not shape [3]
        return result, backward

    op = engine.define("engine_test_bad_shape(Tensor self, Tensor other) -> Tensor",
                       kernel=np.multiply, formula=formula)
    x, w = f64([1.0, 2.0, 3.0], requires_grad=True), f64([1.0, 1.0, 1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Function EngineTestBadShapeBackward0 returned an invalid "
                                           r"gradient at index 1 - got \[\] but expected shape compatible with \[3\]"):
        op(x, w).sum().backward()


def test_wrong_gradient_dtype_names_node_and_input_index():
    def formula(self):
        result = at.mul(self, 1.0)

        def backward(grad):
            return at._to_copy(grad, dtype=engine.int64)      # not floating: not cast, refused
        return result, backward

    op = engine.define("engine_test_bad_dtype(Tensor self) -> Tensor", kernel=lambda x: x * 1.0, formula=formula)
    x = f64([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="EngineTestBadDtypeBackward0 returned an invalid gradient at index 0 "
                                           "- expected dtype float64 but got int64"):
        op(x).sum().backward()


def test_wrong_number_of_gradients_is_reported():
    def formula(self, other):
        result = at.mul(self, other)

        def backward(grad):
            return grad
        return result, backward

    op = engine.define("engine_test_bad_count(Tensor self, Tensor other) -> Tensor",
                       kernel=np.multiply, formula=formula)
    x = f64([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="EngineTestBadCountBackward0 returned 1 gradients, but the operator "
                                           "has 2 differentiable inputs"):
        op(x, x).sum().backward()


def test_no_grad_and_enable_grad():
    x = f64([1.0], requires_grad=True)
    with engine.no_grad():
        y = x * 2.0
        assert not engine.is_grad_enabled()
        with engine.enable_grad():
            z = x * 2.0
    assert y.grad_fn is None and not y.requires_grad
    assert z.grad_fn is not None
    assert engine.is_grad_enabled()


def test_requires_grad_detach_and_leaf_rules():
    x = f64([1.0, 2.0])
    assert not x.requires_grad and x.is_leaf
    assert x.requires_grad_() is x and x.requires_grad
    y = x * 2.0
    assert not y.is_leaf and y.requires_grad
    d = y.detach()
    assert d.grad_fn is None and not d.requires_grad and np.shares_memory(d.numpy(), y._data)
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="only tensors of floating point dtype can require gradients"):
        engine.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match="numpy\\(\\) on a Tensor that requires grad"):
        x.numpy()


def test_grad_mode_is_restored_after_a_failing_backward():
    def formula(self):
        result = at.mul(self, 1.0)

        def backward(grad):
            raise ValueError("boom")
        return result, backward

    op = engine.define("engine_test_raises(Tensor self) -> Tensor", kernel=lambda x: x * 1.0, formula=formula)
    with pytest.raises(ValueError, match="boom"):
        op(f64([1.0], requires_grad=True)).sum().backward()
    assert engine.is_grad_enabled()
