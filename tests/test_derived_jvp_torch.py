"""Derived jvps on torch tensors (formulas/torch/backend.py): reverse-over-derived-jvp, the torch
side of the fwgrad_bwgrad check (the table's column FB is tests/engine/test_fwgrad_bwgrad.py).

The derived jvp of a formula is itself made of the library's operators, so torch's autograd
differentiates it. For every case whose formula's jvp derives, the reverse-mode derivative of
the derived jvp, d/dx <v, J(x) t>, equals reverse-over-reverse through the built-in op,
d/dx <J(x)ᵀ v, t>: forward-over-reverse and reverse-over-reverse agree on the same second
derivative (torch's fwgrad_bwgrad), and the derived tangent itself equals torch's forward AD.
"""
from __future__ import annotations

import functools

import pytest
import torch
from op_cases import OpCase, torch_op
from test_formulas_torch import (
    BACKEND,
    as_tuple,
    differentiable,
    formula_call,
    random_like,
)
from formulas.torch.backend import unwrap, wrap

from formulas import use_backend
from reference_engine.forward_ad import derived_formula
from tests.engine.test_derived_jvp import DERIVED_CASES
from transpiler.frontend import python_name
from transpiler.schema import parse_schema


@functools.cache
def _derived(fn):
    """``fn`` with its derived jvp, derived once per formula (the cases of an op share it)."""
    return derived_formula(fn, return_jvp=True)


def _derived_tangents(case: OpCase, call, tangents: list[torch.Tensor]) -> list[torch.Tensor]:
    """The derived jvp's output tangents on torch values, still connected to the inputs of ``call``."""
    function = _derived(call.formula.fn)
    schema = parse_schema(call.formula.schema)
    positions = call.tensor_positions
    flat = [None if t is None else torch.zeros_like(t) for t in call.flat_tensors()]
    for index, tangent in zip(call.differentiated_indices(), tangents):
        flat[index] = tangent
    per_argument = call.with_flat_tensors(flat)         # a list of tangents for a Tensor[] argument
    with use_backend(BACKEND):
        *_, jvp = function(*wrap(list(call.args)), **call.kwargs)
        names = jvp.__code__.co_varnames[:jvp.__code__.co_argcount]
        arguments = {}
        for name in names:
            index = [python_name(a.name) for a in schema.tensor_inputs].index(name[:-2])
            arguments[name] = wrap(per_argument[positions[index]])
        result = jvp(**arguments)
    return [unwrap(t) for t in as_tuple(result)]


@pytest.mark.parametrize("case", DERIVED_CASES, ids=lambda c: c.name)
def test_reverse_over_derived_jvp_equals_reverse_over_reverse(case: OpCase):
    call = formula_call(case)
    inputs = call.differentiated_tensors()
    tangents = random_like(inputs, seed=5)
    expected = differentiable(call, as_tuple(torch_op(case.op)(*call.args, **call.kwargs)))
    weights = random_like(expected, seed=6)
    first = torch.autograd.grad(expected, inputs, weights, create_graph=True, allow_unused=True)
    terms = [(g * t).sum() for g, t in zip(first, tangents) if g is not None and g.requires_grad]
    want = torch.autograd.grad(sum(terms), inputs, allow_unused=True) if terms else [None] * len(inputs)

    got_tangents = _derived_tangents(case, call, tangents)
    assert len(got_tangents) == len(expected)
    for tangent, output in zip(got_tangents, expected):
        assert tangent is None or tangent.shape == output.shape
    terms = [(t * w).sum() for t, w in zip(got_tangents, weights) if t is not None and t.requires_grad]
    got = torch.autograd.grad(sum(terms), inputs, allow_unused=True) if terms else [None] * len(inputs)
    for a, b, x in zip(got, want, inputs):
        torch.testing.assert_close(torch.zeros_like(x) if a is None else a, torch.zeros_like(x) if b is None else b)
