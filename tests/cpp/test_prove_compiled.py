"""``transpile prove --compiled``'s F1 on the shipped library's built ops where torch's own forward
AD of the built-in op raises (``docs/proofs.md``): the compiled op's forward mode is proven against
finite differences there, and a wrong compiled jvp still fails."""
from __future__ import annotations

import math

import numpy as np
import pytest

from transpiler.prove import compiled
from transpiler.prove.check import Outcome, given_case, run_tiers, subject_of

torch = pytest.importorskip("torch")

_rng = np.random.default_rng(0)
NO_TORCH_FORWARD_AD = {
    "hardsigmoid_backward": (_rng.normal(size=(2, 3)), np.array([[-4.0, -1.0, 0.5], [2.0, 2.9, 5.0]])),
    "native_dropout_backward": (_rng.normal(size=(2, 3)), np.array([[True, False, True], [False, True, True]]), 2.0),
    "norm.Scalar": (_rng.normal(size=(3, 4)), 2),     # torch gives the 0-d norm a [1, 1] tangent and raises
}


@pytest.fixture
def proving(formulas_ops, monkeypatch):
    """The shipped library as ``transpile prove --compiled`` sees it once built."""
    monkeypatch.setitem(compiled.NAMESPACES, "formulas", "formulas")
    return formulas_ops


def _compiled_f1(op: str, inputs: tuple) -> Outcome:
    subject = subject_of(op, None)
    (outcome,) = run_tiers(subject, [given_case(subject, inputs)], ["F1"], compiled.COMPILED_RUNNERS)
    return outcome



@pytest.mark.parametrize("op", NO_TORCH_FORWARD_AD)
def test_compiled_f1_is_proven_against_finite_differences_where_torchs_forward_ad_raises(proving, op):
    inputs = NO_TORCH_FORWARD_AD[op]
    builtin = getattr(torch.ops.aten, op.split(".")[0])
    tensors = [torch.from_numpy(v) if isinstance(v, np.ndarray) else v for v in inputs]
    with pytest.raises(RuntimeError):       # no oracle to compare the tangents with
        torch.func.jvp(lambda x: builtin(x, *tensors[1:]), (tensors[0],), (torch.ones_like(tensors[0]),))
    outcome = _compiled_f1(op, inputs)
    assert outcome.status == "ok", outcome.message


def test_compiled_norm_scalar_tangent_is_torch_norms(proving):
    generator = torch.Generator().manual_seed(0)
    for shape in ((3, 4), ()):
        x, t = (torch.randn(shape, dtype=torch.float64, generator=generator) for _ in range(2))
        for p in (2, 1, 3.5, math.inf, 0):
            value, tangent = torch.func.jvp(lambda a, p=p: proving.norm.Scalar(a, p), (x,), (t,))
            expected_value, expected_tangent = torch.func.jvp(lambda a, p=p: torch.norm(a, p), (x,), (t,))
            assert tangent.shape == value.shape == ()
            torch.testing.assert_close((value, tangent), (expected_value, expected_tangent))


class _WrongTangent(torch.autograd.Function):
    """The 2-norm with a jvp twice the true one, ``(x . x_t) / |x|``."""

    @staticmethod
    def forward(ctx, x, p):
        assert p == 2
        ctx.save_for_forward(x)
        return torch.ops.formulas.norm.Scalar(x, p)

    @staticmethod
    def jvp(ctx, x_t, _):
        (x,) = ctx.saved_tensors
        return 2 * (x * x_t).sum() / x.norm()


def test_a_wrong_compiled_tangent_still_fails_where_torchs_forward_ad_raises(proving, monkeypatch):
    monkeypatch.setattr(compiled, "compiled_op", lambda subject: _WrongTangent.apply)
    outcome = _compiled_f1("norm.Scalar", NO_TORCH_FORWARD_AD["norm.Scalar"])
    assert outcome.status == "FAIL" and outcome.message.startswith("forward mode"), outcome.message
