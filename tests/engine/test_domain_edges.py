"""The engine's value, first- and second-order gradients at the domain edges of
``tests/domain_edges.py`` equal torch's built-in ones."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import reference_engine as engine
from domain_edges import (
    EDGE_CASES,
    INFINITE_ENTRY_CASES,
    TORCH_SELF_DISAGREES,
    assert_gradients_match,
    product_chain_gradients,
    torch_gradients,
)
from op_cases import OpCase, torch_args, torch_op


def engine_call(case: OpCase):
    """``fn(*tensors)`` calling the case's overload with ``tensors`` at its differentiated
    positions, and those tensors (the cases here have no tensor lists)."""
    args = [engine.Tensor(a.copy(), requires_grad=i in case.differentiable) if isinstance(a, np.ndarray) else a
            for i, a in enumerate(case.args)]
    inputs = [args[i] for i in case.differentiable]

    def fn(*tensors: engine.Tensor):
        call_args = list(args)
        for position, tensor in zip(case.differentiable, tensors):
            call_args[position] = tensor
        return engine.op(case.op)(*call_args, **case.kwargs)

    return fn, inputs


def _weights(t: engine.Tensor, low: float, high: float) -> engine.Tensor:
    return engine.Tensor(np.linspace(low, high, t.numel()).reshape(t.shape))


@pytest.mark.tier("E")
@pytest.mark.parametrize("case", EDGE_CASES, ids=lambda c: c.name)
def test_engine_gradients_at_domain_edges_equal_torch(case: OpCase):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # torch's and NumPy's warnings on a zero degree of freedom
        expected_first, expected_second = torch_gradients(case)
        args, kwargs = torch_args(case, requires_grad=False)
        expected_value = torch_op(case.op)(*args, **kwargs).numpy()
        fn, inputs = engine_call(case)
        out = fn(*inputs)
        first = engine.grad((out * _weights(out, 0.5, 1.5)).sum(), inputs, create_graph=True, allow_unused=True)
        weighted = [(g * _weights(g, 0.7, 1.3)).sum() for g in first if g is not None and g.requires_grad]
        second = (engine.grad(sum(weighted[1:], weighted[0]), inputs, allow_unused=True) if weighted
                  else [None] * len(inputs))
    np.testing.assert_allclose(out.detach().numpy(), expected_value, rtol=1e-12, equal_nan=True)
    assert_gradients_match([None if g is None else g.detach().numpy() for g in first],
                           [None if h is None else h.numpy() for h in second], expected_first, expected_second)


def _exact_cumprod_gradient(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The definition, term by term: ``G_i = sum_{k >= i} w_k prod_{j <= k, j != i} x_j`` in IEEE
    arithmetic (a product with a NaN, or with both an infinity and a zero, is NaN)."""
    gradient = np.zeros(len(values))
    for i in range(len(values)):
        for k in range(i, len(values)):
            gradient[i] += weights[k] * np.prod(np.delete(values[:k + 1], i))
    return gradient


@pytest.mark.tier("E")
@pytest.mark.parametrize("case", TORCH_SELF_DISAGREES, ids=lambda c: c.name)
def test_cumprod_with_an_infinity_or_a_nan_is_exact(case: OpCase):
    """torch's gradient with ``create_graph=True`` is the exact one and its plain one is wrong (a
    number where the exact gradient is NaN, or another number), so neither mode is the oracle
    here: the definition is. Ours is the exact gradient at every entry, the infinite and NaN
    ones included (``cumprod_backward`` never divides by an entry)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values = case.args[0]
        exact = _exact_cumprod_gradient(values, np.linspace(0.5, 1.5, values.size))
        (plain,), _ = torch_gradients(case, create_graph=False)
        (graphed,), _ = torch_gradients(case, create_graph=True)
        fn, inputs = engine_call(case)
        out = fn(*inputs)
        (ours,) = engine.grad((out * _weights(out, 0.5, 1.5)).sum(), inputs)
    np.testing.assert_allclose(graphed, exact, rtol=1e-12, equal_nan=True)
    assert not np.allclose(plain, exact, equal_nan=True)
    np.testing.assert_allclose(ours.numpy(), exact, rtol=1e-12, equal_nan=True)


@pytest.mark.tier("E")
@pytest.mark.parametrize("case", INFINITE_ENTRY_CASES, ids=lambda c: c.name)
def test_cumprod_second_order_at_an_infinite_entry_is_exact(case: OpCase):
    """First and second order equal torch's autograd of the definition (a chain of products), the
    second derivative at the infinite entry included (torch's built-in gives NaN there)."""
    fn, inputs = engine_call(case)
    out = fn(*inputs)
    (first,) = engine.grad((out * _weights(out, 0.5, 1.5)).sum(), inputs, create_graph=True)
    (second,) = engine.grad((first * _weights(first, 0.7, 1.3)).sum(), inputs)
    expected_first, expected_second = product_chain_gradients(case)
    np.testing.assert_allclose(first.detach().numpy(), expected_first, rtol=1e-12)
    np.testing.assert_allclose(second.numpy(), expected_second, rtol=1e-12)
