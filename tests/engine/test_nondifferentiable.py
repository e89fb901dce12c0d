"""Operators declared ``nondifferentiable`` in the reference engine: tiers RT and RF.

For each case of ``op_cases.NONDIFFERENTIABLE_CASES``, with the floating inputs requiring grad:

* RT: the engine's output equals the built-in torch op's (values, dtype, shape), and neither
  output requires grad (torch gives these operators no gradient: the declaration is checked
  against it);
* RF: ``engine.jvp`` through the op equals ``torch.func.jvp`` of the built-in op: the same
  output and a zero tangent of its dtype.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import reference_engine as engine
from formulas import FORMULAS, NONDIFFERENTIABLE
from op_cases import NONDIFFERENTIABLE_CASES, OpCase, torch_args, torch_op


def _engine_args(case: OpCase, requires_grad: bool) -> list:
    def value(arg):
        if isinstance(arg, np.ndarray):
            return engine.Tensor(arg.copy(), requires_grad=requires_grad and arg.dtype == np.float64)
        if isinstance(arg, type) and issubclass(arg, np.generic):
            return getattr(engine, np.dtype(arg).name)
        return arg
    return [value(a) for a in case.args], {k: value(v) for k, v in case.kwargs.items()}


def _assert_equal(got: engine.Tensor, want: torch.Tensor) -> None:
    assert got.numpy().dtype == want.numpy().dtype and got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_every_nondifferentiable_op_has_cases():
    declared = set(NONDIFFERENTIABLE) - set(FORMULAS)
    assert declared and declared <= {case.op for case in NONDIFFERENTIABLE_CASES}


@pytest.mark.tier("RT")
@pytest.mark.parametrize("case", NONDIFFERENTIABLE_CASES, ids=lambda c: c.name)
def test_values_equal_torch_without_gradient(case: OpCase):
    args, kwargs = torch_args(case)
    want = torch_op(case.op)(*args, **kwargs)
    assert not want.requires_grad, "torch gives this operator a gradient: it is not nondifferentiable"
    args, kwargs = _engine_args(case, requires_grad=True)
    got = engine.op(case.op)(*args, **kwargs)
    assert not got.requires_grad and got.grad_fn is None
    _assert_equal(got, want)


def _floating_positions(case: OpCase) -> list[int]:
    return [i for i, a in enumerate(case.args) if isinstance(a, np.ndarray) and a.dtype == np.float64]


@pytest.mark.tier("RF")
@pytest.mark.parametrize("case", [c for c in NONDIFFERENTIABLE_CASES if _floating_positions(c)], ids=lambda c: c.name)
def test_jvp_equals_torch(case: OpCase):
    floats = _floating_positions(case)
    rng = np.random.default_rng(3)
    tangents = [rng.standard_normal(case.args[i].shape) for i in floats]
    args, kwargs = torch_args(case, requires_grad=False)

    def builtin(*primals):
        filled = list(args)
        for i, p in zip(floats, primals):
            filled[i] = p
        return torch_op(case.op)(*filled, **kwargs)

    want, want_tangent = torch.func.jvp(builtin, tuple(args[i] for i in floats),
                                        tuple(torch.from_numpy(t) for t in tangents))
    engine_args, engine_kwargs = _engine_args(case, requires_grad=False)

    def ours(*primals):
        filled = list(engine_args)
        for i, p in zip(floats, primals):
            filled[i] = p
        return engine.op(case.op)(*filled, **engine_kwargs)

    got, got_tangent = engine.jvp(ours, [engine_args[i] for i in floats], [engine.Tensor(t) for t in tangents])
    _assert_equal(got, want)
    _assert_equal(got_tangent, want_tangent)
