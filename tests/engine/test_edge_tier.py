"""Proof tier E (DESIGN section 7) for every operator of the library: at its domain edges
(``tests/domain_edges.py:edge_tier_cases``: zeros, ties, +-inf, NaN, size-0 inputs; an element-wise
operator (``jvp="auto_element_wise"``) gets the mixed pattern alone, which holds its zeros and ties), the reference
engine gives the built-in torch op's values and its first- and second-order gradients, or the error
torch raises; an operator declared ``nondifferentiable`` gives torch's values. Where torch's own
gradient there is wrong (``cumprod``'s, which depends on grad mode), ``tests/domain_edges.py``
lists it and ``tests/engine/test_domain_edges.py`` proves it against the definition."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch

import reference_engine as engine
from domain_edges import assert_gradients_match, edge_tier_cases
from formulas import FORMULAS, NONDIFFERENTIABLE
from op_cases import OpCase, torch_args, torch_op
from tests.engine.engine_calls import engine_call
from tests.engine.test_nondifferentiable import _engine_args


ALL_OPS = sorted(set(FORMULAS) | set(NONDIFFERENTIABLE))
EDGE_CASES = edge_tier_cases(ALL_OPS, frozenset(op for op, formula in FORMULAS.items()
                                                if formula.jvp == "auto_element_wise"))

LEFT: dict[str, str] = {}
"""Edge cases where the engine's gradient is not yet torch's: each fails (strict xfail) until fixed."""


def _marked(cases: list[OpCase]) -> list:
    return [pytest.param(case, marks=pytest.mark.xfail(reason=LEFT[case.name], strict=True))
            if case.name in LEFT else case for case in cases]


def test_the_edge_tier_covers_every_operator_with_every_pattern():
    assert {case.op for case in EDGE_CASES} == set(ALL_OPS)
    assert set(LEFT) <= {case.name for case in EDGE_CASES}


def _outputs(out: Any) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _weights(shape: tuple[int, ...], low: float, high: float) -> np.ndarray:
    return np.linspace(low, high, int(np.prod(shape))).reshape(shape)


def _torch_edge(case: OpCase) -> tuple[list, list, list]:
    """torch's floating outputs, first-order gradients of ``sum(out * w)`` and second-order
    gradients of ``sum(first * v)``, with the fixed weights of :func:`_weights`."""
    args, kwargs = torch_args(case)
    inputs = [t for i in case.differentiable for t in (args[i] if isinstance(args[i], list) else [args[i]])]
    outs = [o for o in _outputs(torch_op(case.op)(*args, **kwargs)) if o.is_floating_point()]
    if not inputs:
        return [o.detach().numpy() for o in outs], [], []
    loss = sum((o * torch.from_numpy(_weights(tuple(o.shape), 0.5, 1.5))).sum() for o in outs)
    first = torch.autograd.grad(loss, inputs, create_graph=True, allow_unused=True) if loss.requires_grad \
        else [None] * len(inputs)
    first = [torch.zeros_like(t) if g is None else g for g, t in zip(first, inputs)]
    loss2 = sum((g * torch.from_numpy(_weights(tuple(g.shape), 0.7, 1.3))).sum() for g in first)
    second = (torch.autograd.grad(loss2, inputs, allow_unused=True) if loss2.requires_grad else [None] * len(inputs))
    return ([o.detach().numpy(force=True) for o in outs], [g.detach().numpy(force=True) for g in first],
            [np.zeros(tuple(t.shape)) if h is None else h.numpy(force=True) for h, t in zip(second, inputs)])


def _engine_edge(case: OpCase) -> tuple[list, list, list]:
    fn, inputs = engine_call(case)
    outs = [o for o in _outputs(fn(*inputs)) if o.is_floating_point()]
    if not inputs:
        return [o.detach().numpy() for o in outs], [], []
    loss = sum((o * engine.Tensor(_weights(o.shape, 0.5, 1.5))).sum() for o in outs)
    first = engine.grad(loss, inputs, create_graph=True, allow_unused=True) if loss.requires_grad \
        else [None] * len(inputs)
    first = [engine.zeros_like(t) if g is None else g for g, t in zip(first, inputs)]
    loss2 = sum((g * engine.Tensor(_weights(g.shape, 0.7, 1.3))).sum() for g in first)
    second = (engine.grad(loss2, inputs, allow_unused=True) if loss2.requires_grad else [None] * len(inputs))
    return ([o.detach().numpy() for o in outs], [g.detach().numpy() for g in first],
            [None if h is None else h.numpy() for h in second])


def _torch_raises(case: OpCase) -> BaseException | None:
    args, kwargs = torch_args(case, requires_grad=False)
    try:
        torch_op(case.op)(*args, **kwargs)
    except Exception as error:          # noqa: BLE001  (the error is the expected answer)
        return error
    return None


@pytest.mark.tier("E")
@pytest.mark.parametrize("case", _marked([c for c in EDGE_CASES if c.op in FORMULAS]), ids=lambda c: c.name)
def test_engine_at_the_domain_edges_equals_torch(case: OpCase):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # NumPy's and torch's warnings on 0 / 0, inf - inf...
        error = _torch_raises(case)
        if error is not None:
            fn, inputs = engine_call(case)
            with pytest.raises(type(error)):
                fn(*inputs)
            return
        values, first, second = _torch_edge(case)
        got_values, got_first, got_second = _engine_edge(case)
    assert len(got_values) == len(values)
    for i, (got, want) in enumerate(zip(got_values, values)):
        np.testing.assert_allclose(got, want.reshape(got.shape), rtol=1e-7, atol=1e-10, equal_nan=True,
                                   err_msg=f"output {i}")
    assert_gradients_match(got_first, got_second, first, second)


@pytest.mark.tier("E")
@pytest.mark.parametrize("case", [c for c in EDGE_CASES if c.op not in FORMULAS], ids=lambda c: c.name)
def test_nondifferentiable_values_at_the_domain_edges_equal_torch(case: OpCase):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args, kwargs = torch_args(case, requires_grad=False)
        error = _torch_raises(case)
        ours_args, ours_kwargs = _engine_args(case, requires_grad=True)
        if error is not None:
            with pytest.raises(type(error)):
                engine.op(case.op)(*ours_args, **ours_kwargs)
            return
        want = torch_op(case.op)(*args, **kwargs)
        got = engine.op(case.op)(*ours_args, **ours_kwargs)
    assert got.numpy().dtype == want.numpy().dtype and got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
