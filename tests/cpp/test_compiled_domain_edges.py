"""The compiled ops' value, first- and second-order gradients at the domain edges of
``tests/domain_edges.py`` equal torch's built-in ones."""
from __future__ import annotations

import warnings

import pytest

from tests.domain_edges import EDGE_CASES, assert_gradients_match, torch_gradients
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
