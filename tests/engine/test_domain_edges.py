"""The engine's value, first- and second-order gradients at the domain edges of
``tests/domain_edges.py`` equal torch's built-in ones."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import reference_engine as engine
from domain_edges import EDGE_CASES, TORCH_SELF_DISAGREES, assert_gradients_match, torch_gradients
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


@pytest.mark.parametrize("case", TORCH_SELF_DISAGREES, ids=lambda c: c.name)
def test_torch_first_order_depends_on_grad_mode_there(case: OpCase):
    """Why these cases are not in EDGE_CASES: torch gives two first-order gradients."""
    plain, _ = torch_gradients(case, create_graph=False)
    graphed, _ = torch_gradients(case, create_graph=True)
    assert not all(np.allclose(a, b, equal_nan=True) for a, b in zip(plain, graphed))
