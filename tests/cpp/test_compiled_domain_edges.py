"""The compiled ops' value, first- and second-order gradients at the domain edges of
``tests/domain_edges.py`` equal torch's built-in ones."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from tests.domain_edges import (
    EDGE_CASES,
    INFINITE_ENTRY_CASES,
    assert_gradients_match,
    product_chain_gradients,
    torch_gradients,
)
from tests.op_cases import OpCase, torch_args, torch_op

torch = pytest.importorskip("torch")


def _weights(t, low: float, high: float):
    return torch.linspace(low, high, t.numel(), dtype=t.dtype).reshape(t.shape)


@pytest.mark.tier("E")
@pytest.mark.parametrize("case", EDGE_CASES, ids=lambda c: c.name)
def test_compiled_gradients_at_domain_edges_equal_torch(formulas_ops, case: OpCase):
    name, _, overload = case.op.partition(".")
    compiled = getattr(getattr(formulas_ops, name), overload or "default")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # torch's warning on a zero degree of freedom
        expected_first, expected_second = torch_gradients(case)
        args, kwargs = torch_args(case)
        inputs = [args[i] for i in case.differentiable]
        out = compiled(*args, **kwargs)
        first = torch.autograd.grad((out * _weights(out, 0.5, 1.5)).sum(), inputs, create_graph=True,
                                    allow_unused=True)
        weighted = [(g * _weights(g, 0.7, 1.3)).sum() for g in first if g is not None and g.requires_grad]
        second = torch.autograd.grad(sum(weighted), inputs, allow_unused=True) if weighted else [None] * len(inputs)
        expected_value = torch_op(case.op)(*torch_args(case, requires_grad=False)[0], **kwargs)
    torch.testing.assert_close(out.detach(), expected_value, rtol=1e-12, atol=0, equal_nan=True)
    assert_gradients_match([None if g is None else g.detach().numpy() for g in first],
                           [None if h is None else h.numpy() for h in second], expected_first, expected_second)


@pytest.mark.tier("E")
@pytest.mark.parametrize("case", INFINITE_ENTRY_CASES, ids=lambda c: c.name)
def test_compiled_cumprod_second_order_at_an_infinite_entry_is_exact(formulas_ops, case: OpCase):
    """The compiled ``cumprod``'s first and second order equal torch's autograd of the definition,
    the second derivative at the infinite entry included (its backward's exclusive products are
    products only: ``at::cumprod`` there would carry torch's own backward, NaN at that entry)."""
    (x,) = [a for a in torch_args(case)[0] if isinstance(a, torch.Tensor)]
    out = formulas_ops.cumprod(x, 0)
    (first,) = torch.autograd.grad((out * _weights(out, 0.5, 1.5)).sum(), x, create_graph=True)
    (second,) = torch.autograd.grad((first * _weights(first, 0.7, 1.3)).sum(), x)
    expected_first, expected_second = product_chain_gradients(case)
    position = int(torch.isinf(x).nonzero())
    assert np.isfinite(expected_second[position])
    np.testing.assert_allclose(first.detach().numpy(), expected_first, rtol=1e-12)
    np.testing.assert_allclose(second.numpy(), expected_second, rtol=1e-12)
