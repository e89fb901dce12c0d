"""The jvp derived from each backward by transposition (``transpiler.derive_jvp``), proven on
the library: for every formula and every OpCase, the derived jvp's tangents equal those of the
formula's own jvp (written or ``auto_*``), or torch's forward AD where the formula has none;
the formulas whose backward is refused are exactly the listed ones, each for its reason."""
from __future__ import annotations

import contextlib
import functools

import numpy as np
import pytest
import torch
from op_cases import ALL_CASES, OpCase, differentiable_view, torch_jvp_op

import reference_engine as engine
from formulas import FORMULAS
from formulas.helpers import (
    convolution_sizes,
    diagonal_sizes,
    embedded_sizes,
    flattened_sizes,
    matmul_sizes,
    narrowed_sizes,
    permuted_sizes,
    reverse_list,
    transposed_sizes,
    unsqueezed_sizes,
)
from reference_engine.forward_ad import derived_jvps
from tests.engine.test_tiers import _as_list, _weights, engine_call
from transpiler.derive_jvp import DerivationRefused, derive_jvp
from transpiler.frontend import SHIPPED_LIBRARY, load_library, operator_table


@functools.cache
def derivations() -> dict[str, str | None]:
    """Each formula's op -> None when its jvp derives, else the refusal's reason."""
    library = load_library(str(SHIPPED_LIBRARY))
    operators = operator_table(library)
    found: dict[str, str | None] = {}
    for formula in library.formulas:
        try:
            derive_jvp(formula, operators)
            found[formula.op_name] = None
        except DerivationRefused as refusal:
            found[formula.op_name] = refusal.reason
    return found


#: The formulas whose backward is refused, each with (a key phrase of) its reason: the work
#: the transformation has left (docs/formulas.md, "Derived jvps").
REFUSED = {
    # the block matrix [[A, G], [0, A]] is affine in G, not linear: only the top-right block of its
    # exponential is linear in G, so no step-by-step transpose exists
    'linalg_matrix_exp': 'a constant appended to',
}


DERIVED_CASES = [case for case in ALL_CASES if case.op in FORMULAS and derivations().get(case.op, "") is None]


def _tangents(case: OpCase, derived: bool) -> list:
    fn, inputs = engine_call(case)
    tangents = _weights([t.shape for t in inputs], seed=3)
    primals = [t.detach() for t in inputs]
    if derived:
        with derived_jvps():
            outs, out_tangents = engine.jvp(fn, primals, [engine.Tensor(v) for v in tangents])
    else:
        outs, out_tangents = engine.jvp(fn, primals, [engine.Tensor(v) for v in tangents])
    return [t.numpy() for o, t in zip(_as_list(outs), _as_list(out_tangents)) if o.is_floating_point()], tangents


def _torch_tangents(case: OpCase, tangents: list) -> list:
    builtin, leaves = differentiable_view(case, torch_jvp_op(case.op))
    _, expected = torch.func.jvp(builtin, tuple(x.detach() for x in leaves),
                                 tuple(torch.from_numpy(v) for v in tangents))
    return [t.numpy(force=True) for t in _as_list(expected)]


@pytest.mark.parametrize("case", DERIVED_CASES, ids=lambda c: c.name)
def test_derived_jvp_equals_the_formulas_own(case: OpCase):
    got, tangents = _tangents(case, derived=True)
    try:
        expected, _ = _tangents(case, derived=False)
    except NotImplementedError:             # the formula declares no jvp: torch is the oracle
        expected = _torch_tangents(case, tangents)
    assert len(got) == len(expected)
    for i, (a, b) in enumerate(zip(got, expected)):
        assert a.shape == b.shape, f"tangent {i}"
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-10, err_msg=f"tangent {i}")


def test_every_other_formula_is_refused_for_its_listed_reason():
    found = derivations()
    refused = {op: reason for op, reason in found.items() if reason is not None}
    assert sorted(refused) == sorted(REFUSED)
    for op, reason in refused.items():
        assert REFUSED[op] in reason, (op, reason)
    assert len(found) - len(refused) >= 200


def test_xlogy_derived_jvp_keeps_the_subgradient_where_self_is_zero():
    """``xlogy`` transposes as a scaling of ``self`` (``SCALES_SELF``): the derived jvp equals the
    written one where the OpCases do not reach, at ``self = 0`` with ``other <= 0`` (torch's 0, not
    -inf or NaN) and ``other = 0`` elsewhere (-inf times the tangent)."""
    self = np.array([[0.0, 0.0, 1.5, -2.0, 0.0], [0.0, 3.0, 0.0, 1.0, -1.0]])
    other = np.array([0.0, -1.0, 0.0, 2.0, 0.5])
    tangents = [np.array([[1.0, -2.0, 0.5, 0.0, 3.0], [0.0, 1.0, 2.0, -1.0, 0.5]]), np.zeros(5)]    # other's part aside
    cases = [(engine.op("xlogy.Tensor"), [self, other], tangents),
             (lambda x: engine.op("xlogy.Scalar_Other")(x, -1.5), [self], tangents[:1])]
    for fn, primals, directions in cases:
        found = []
        for derived in (True, False):
            with derived_jvps() if derived else contextlib.nullcontext():
                _, tangent = engine.jvp(fn, [engine.Tensor(p) for p in primals], [engine.Tensor(d) for d in directions])
            found.append(tangent.numpy())
        np.testing.assert_array_equal(found[0], found[1])


@pytest.mark.parametrize("sizes", [[], [4], [2, 3], [2, 1, 3]])
def test_unsqueezed_sizes_are_those_of_unsqueeze(sizes: list[int]):
    """The sizes rule of ``unsqueeze`` (the derivation's ``unsqueezed_sizes``) at every dim."""
    for dim in range(-len(sizes) - 1, len(sizes) + 1):
        assert unsqueezed_sizes(sizes, dim) == list(np.expand_dims(np.zeros(sizes), dim).shape), dim


def test_sizes_helpers_are_those_of_their_operators():
    """The sizes rules of ``SIZES_HELPERS`` (``formulas/helpers.py``) against torch's results."""
    x = torch.zeros(2, 3, 4)
    assert transposed_sizes([2, 3, 4], 0, -1) == list(x.transpose(0, -1).shape)
    assert reverse_list([2, 3]) == list(torch.zeros(2, 3).t().shape)
    assert permuted_sizes([2, 3, 4], [2, 0, 1]) == list(x.permute(2, 0, 1).shape)
    assert flattened_sizes([2, 3, 4], -2, -1) == list(x.flatten(-2, -1).shape)
    assert flattened_sizes([], 0, -1) == list(torch.zeros(()).flatten().shape)
    assert narrowed_sizes([2, 3, 4], -1, 2) == list(x.narrow(-1, 1, 2).shape)
    for offset in (-2, 0, 1, 5):
        assert diagonal_sizes([2, 3, 4], offset, 2, 0) == list(x.diagonal(offset, 2, 0).shape), offset
    for a, b in [([3], [3]), ([3], [2, 3, 4]), ([2, 3, 4], [4]), ([5, 1, 3, 4], [2, 4, 6]), ([3, 4], [4, 2])]:
        assert matmul_sizes(a, b) == list(torch.matmul(torch.zeros(a), torch.zeros(b)).shape), (a, b)
    assert embedded_sizes([7, 5], [2, 3]) == list(torch.nn.functional.embedding(
        torch.zeros(2, 3, dtype=torch.long), torch.zeros(7, 5)).shape)
    for transposed, weight in ((False, [6, 2, 3, 2]), (True, [4, 3, 3, 2])):
        output_padding = [1, 0] if transposed else [0]
        expected = torch.ops.aten.convolution(torch.zeros(2, 4, 9, 7), torch.zeros(weight), None, [2, 1], [1],
                                              [1, 2], transposed, output_padding, 2).shape
        assert convolution_sizes([2, 4, 9, 7], weight, [2, 1], [1], [1, 2], transposed, output_padding, 2) \
            == list(expected), transposed
