"""Proof tiers R1, R2, RT and RF (DESIGN section 7) for every formula of the library.

Each ``OpCase`` of ``tests/op_cases.py`` whose operator has a formula (for RT
also each case made from torch's OpInfo samples, ``tests/opinfo_cases.py``) is run
on the reference engine through exactly the declared overload:

* R1: ``gradcheck`` (float64 central differences) passes;
* R2: ``gradgradcheck`` passes;
* RT: first- and second-order gradients equal torch's built-in ones on the
  same inputs, with the same random output and gradient weights;
* RF: ``engine.jvp`` (the formulas' jvps) equals ``torch.func.jvp`` of the
  built-in op on the same inputs and random tangents.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
import torch

import reference_engine as engine
from tests.opinfo_cases import catalogue
from formulas import FORMULAS
from op_cases import ALL_CASES, OpCase, cases, differentiable_view, torch_args, torch_jvp_op, torch_op
from tests.engine.engine_calls import engine_call

FORMULA_CASES = [case for case in ALL_CASES if case.op in FORMULAS]
OPINFO_CASES = [case for case in catalogue().cases if case.op in FORMULAS]


def _float_outputs(out: Any) -> list:
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [o for o in outs if o.is_floating_point()]


def test_every_formula_has_cases():
    missing = sorted(op for op in FORMULAS if not cases(op))
    assert FORMULAS, "the formula library is empty"
    assert not missing, f"formulas without OpCases in tests/op_cases.py: {missing}"


def test_every_case_runs_a_declared_formula():
    assert len(FORMULA_CASES) >= len(FORMULAS)
    assert {case.op for case in FORMULA_CASES} == set(FORMULAS)


@pytest.mark.tier("R1")
@pytest.mark.parametrize("case", FORMULA_CASES, ids=lambda c: c.name)
def test_gradcheck(case: OpCase):
    fn, inputs = engine_call(case)
    assert engine.gradcheck(fn, inputs)


@pytest.mark.tier("R2")
@pytest.mark.parametrize("case", FORMULA_CASES, ids=lambda c: c.name)
def test_gradgradcheck(case: OpCase):
    fn, inputs = engine_call(case)
    assert engine.gradgradcheck(fn, inputs)


def _weights(shapes: list[tuple[int, ...]], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for shape in shapes]


def _torch_gradients(case: OpCase, out_weights: list, grad_weights: list) -> tuple[list, list]:
    args, kwargs = torch_args(case)
    inputs = [t for i in case.differentiable
              for t in (args[i] if isinstance(args[i], list) else [args[i]])]
    outs = _float_outputs(torch_op(case.op)(*args, **kwargs))
    loss = sum((o * torch.from_numpy(w)).sum() for o, w in zip(outs, out_weights))
    first = torch.autograd.grad(loss, inputs, create_graph=True, allow_unused=True)
    first = [torch.zeros_like(t) if g is None else g for g, t in zip(first, inputs)]
    loss2 = sum((g * torch.from_numpy(v)).sum() for g, v in zip(first, grad_weights))
    if isinstance(loss2, torch.Tensor) and loss2.requires_grad:
        second = torch.autograd.grad(loss2, inputs, allow_unused=True)
    else:
        second = [None] * len(inputs)
    second = [torch.zeros_like(t) if g is None else g for g, t in zip(second, inputs)]
    # force: torch may return a ZeroTensor (abs's second-order gradient is one)
    return [g.detach().numpy(force=True) for g in first], [g.numpy(force=True) for g in second]


def _engine_gradients(case: OpCase, out_weights: list, grad_weights: list,
                      overload: Callable[..., Any] | None = None) -> tuple[list, list]:
    fn, inputs = engine_call(case, overload)
    outs = _float_outputs(fn(*inputs))
    loss = sum((o * engine.Tensor(w)).sum() for o, w in zip(outs, out_weights))
    first = engine.grad(loss, inputs, create_graph=True, allow_unused=True)
    first = [engine.zeros_like(t) if g is None else g for g, t in zip(first, inputs)]
    loss2 = sum((g * engine.Tensor(v)).sum() for g, v in zip(first, grad_weights))
    if isinstance(loss2, engine.Tensor) and loss2.requires_grad:
        second = engine.grad(loss2, inputs, allow_unused=True)
    else:
        second = [None] * len(inputs)
    second = [engine.zeros_like(t) if g is None else g for g, t in zip(second, inputs)]
    return [g.detach().numpy() for g in first], [g.numpy() for g in second]


@pytest.mark.tier("RT")
@pytest.mark.parametrize("case", FORMULA_CASES + OPINFO_CASES, ids=lambda c: c.name)
def test_gradients_equal_torch(case: OpCase):
    assert_gradients_equal_torch(case)


def assert_gradients_equal_torch(case: OpCase, overload: Callable[..., Any] | None = None) -> None:
    """RT for one case, on the library's overload unless ``overload`` is given."""
    fn, inputs = engine_call(case, overload)
    out_shapes = [o.shape for o in _float_outputs(fn(*inputs))]
    out_weights = _weights(out_shapes, seed=1)
    grad_weights = _weights([t.shape for t in inputs], seed=2)
    expected_first, expected_second = _torch_gradients(case, out_weights, grad_weights)
    got_first, got_second = _engine_gradients(case, out_weights, grad_weights, overload)
    assert len(got_first) == len(expected_first) == len(inputs)
    for i, (got, expected) in enumerate(zip(got_first, expected_first)):
        assert got.shape == expected.shape and got.dtype == expected.dtype, f"first-order gradient {i}"
        np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-10, err_msg=f"first-order gradient {i}")
    for i, (got, expected) in enumerate(zip(got_second, expected_second)):
        assert got.shape == expected.shape, f"second-order gradient {i}"
        np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-10, err_msg=f"second-order gradient {i}")


@pytest.mark.tier("RF")
@pytest.mark.parametrize("case", FORMULA_CASES, ids=lambda c: c.name)
def test_jvp_equals_torch(case: OpCase):
    fn, inputs = engine_call(case)
    tangents = _weights([t.shape for t in inputs], seed=3)
    outs, out_tangents = engine.jvp(fn, [t.detach() for t in inputs], [engine.Tensor(v) for v in tangents])
    builtin, leaves = differentiable_view(case, torch_jvp_op(case.op))     # floating outputs only
    expected_outs, expected_tangents = torch.func.jvp(
        builtin, tuple(x.detach() for x in leaves), tuple(torch.from_numpy(v) for v in tangents))
    got = [(o, t) for o, t in zip(_as_list(outs), _as_list(out_tangents)) if o.is_floating_point()]
    expected = list(zip(_as_list(expected_outs), _as_list(expected_tangents)))
    assert len(got) == len(expected)
    for i, ((out, tangent), (expected_out, expected_tangent)) in enumerate(zip(got, expected)):
        np.testing.assert_allclose(out.numpy(), expected_out.numpy(), rtol=1e-7, atol=1e-10, err_msg=f"output {i}")
        assert tangent.shape == tuple(expected_tangent.shape), f"tangent {i}"
        np.testing.assert_allclose(tangent.numpy(), expected_tangent.numpy(force=True), rtol=1e-7, atol=1e-10,
                                   err_msg=f"tangent {i}")


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]
