"""Proof tier FB (fwgrad_bwgrad, DESIGN section 7) and the tiers RF with derived jvps in place.

FB: forward mode over each formula's backward, on the reference engine, with every operator's
jvp the one derived from its backward (``derived_jvps()``): for output weights ``v`` and input
tangents ``t``, the tangent of ``backward(v)`` at ``x`` along ``t`` (forward-over-reverse,
torch's ``check_fwd_over_rev``) equals reverse-over-reverse through torch's built-in op,
``d/dx <J(x)^T v, t>`` (the Hessian of ``<v, f(x)>`` is symmetric). A case is run when every
operator its backward calls (through helpers too) has a derived jvp; the ops left out are those
whose backward calls an operator ``transpiler.derive_jvp`` refuses (tests/engine/test_derived_jvp.py
lists them with their reasons).

RF with derived jvps: ``engine.jvp`` through the derived jvps equals ``torch.func.jvp`` of the
built-in op, as tier RF proves it for the formulas' own jvps (the switch the issue asks for).
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import reference_engine as engine
from formulas import FORMULAS, use_backend
from op_cases import OpCase
from reference_engine.forward_ad import derived_jvps
from tests.engine.test_derived_jvp import DERIVED_CASES, derivations
from tests.engine.test_tiers import _as_list, _float_outputs, _torch_gradients, _weights, engine_call
from tests.engine.test_tiers import test_jvp_equals_torch as _jvp_equals_torch  # renamed: not collected twice
from transpiler.frontend import SHIPPED_LIBRARY, load_library
from transpiler.schema import ListType


@functools.cache
def _library():
    return load_library(str(SHIPPED_LIBRARY))


@functools.cache
def _backward_operators(op: str) -> frozenset[str]:
    """The operators (base names) ``op``'s backward calls, through the helpers it calls."""
    library = _library()
    formula = next(f for f in library.formulas if f.op_name == op)
    helpers = {h.name: h for h in library.helpers}
    operators, seen = set(), set()
    pending = list(formula.backward.calls)
    while pending:
        call = pending.pop()
        if call.operator:
            operators.add(call.name)
        elif call.name in helpers and call.name not in seen:
            seen.add(call.name)
            pending.extend(helpers[call.name].calls)
    return frozenset(operators)


@functools.cache
def _every_overload_derives(base: str) -> bool:
    return all(derivations()[f.op_name] is None for f in _library().formulas if f.schema.name.base == base)


def _fb_applies(op: str) -> bool:
    """One Tensor output (not a Tensor[]: the backward here is given one weight), no Tensor[] input,
    and every operator of the backward derives."""
    formula = next(f for f in _library().formulas if f.op_name == op)
    return (len(formula.schema.returns) == 1 and len(formula.backward.params) == 1
            and not isinstance(formula.schema.returns[0].type, ListType)
            and not any(isinstance(a.type, ListType) for a in formula.differentiable_inputs)
            and all(_every_overload_derives(base) for base in _backward_operators(op)))


FB_CASES = [case for case in DERIVED_CASES if _fb_applies(case.op)]


def _backward_call(case: OpCase, weight: np.ndarray):
    """``(*args) -> the formula's input gradients at output weight ``weight`` (zeros for None)``,
    its ``at.<op>`` calls running on the engine, so forward mode flows through the backward."""
    formula = FORMULAS[case.op].fn
    schema = next(f for f in _library().formulas if f.op_name == case.op).schema
    slots = [i for i, argument in enumerate(a for a in schema.arguments if not a.kwarg_only) if argument.is_differentiable]

    def call(*args, **kwargs):
        with use_backend(engine.backend):
            _, backward = formula(*args, **kwargs)
            keywords = {"needs_input_grad": [arg is not None for arg in args]} \
                if "needs_input_grad" in backward.__code__.co_varnames else {}
            grads = _as_list(backward(engine.Tensor(weight), **keywords))
        # the backward returns a slot per tensor argument (where's boolean condition, layer_norm's absent weight)
        by_position = dict(zip(slots, grads))
        return tuple(engine.zeros_like(args[i]) if by_position.get(i) is None else by_position[i]
                     for i in case.differentiable)
    return call


@pytest.mark.tier("FB")
@pytest.mark.parametrize("case", FB_CASES, ids=lambda c: c.name)
def test_forward_over_reverse_equals_reverse_over_reverse(case: OpCase):
    fn, inputs = engine_call(case)
    outputs = _float_outputs(fn(*inputs))
    weights = _weights([o.shape for o in outputs], seed=1)
    tangents = _weights([t.shape for t in inputs], seed=2)
    _, expected = _torch_gradients(case, weights, tangents)
    backward, _ = engine_call(case, _backward_call(case, weights[0]))
    with derived_jvps():
        _, got = engine.jvp(backward, [t.detach() for t in inputs], [engine.Tensor(v) for v in tangents])
    got = _as_list(got)
    assert len(got) == len(expected)
    for i, (a, b) in enumerate(zip(got, expected)):
        assert a.shape == b.shape, f"input {i}"
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-7, atol=1e-10, err_msg=f"input {i}")


@pytest.mark.parametrize("case", DERIVED_CASES, ids=lambda c: c.name)
def test_derived_jvp_equals_torch(case: OpCase):
    with derived_jvps():
        _jvp_equals_torch(case)
