"""The compiled funnel's forward-mode proof (``corpus_proof.prove_forward``): F1 (forward-mode
gradcheck) and RF (tangents equal torch's forward AD of its own overload), in place too."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent))      # corpus_proof imports corpus_inputs as a script does
import corpus_proof  # noqa: E402


class _Scaled(torch.autograd.Function):
    """``sin`` whose jvp is ``scale`` times the right one (1: right)."""

    @staticmethod
    def forward(x, scale):
        return x.sin()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_forward(inputs[0])
        ctx.scale = inputs[1]

    @staticmethod
    def jvp(ctx, x_t, _):
        (x,) = ctx.saved_tensors
        return x.cos() * x_t * ctx.scale


def _case():
    return [((torch.randn(3, 2, dtype=torch.float64, requires_grad=True),), {})]


def test_a_right_jvp_is_proven_and_a_wrong_one_fails_f1():
    theirs = torch.ops.aten.sin.default
    assert corpus_proof.prove_forward(lambda x: _Scaled.apply(x, 1.0), theirs, _case()) == ("proven", 1, "")
    assert corpus_proof.prove_forward(lambda x: _Scaled.apply(x, 2.0), theirs, _case()) == \
        ("failed", 1, "F1: forward-mode gradcheck")


def test_in_place_tangents_are_compared_on_copies():
    """An in-place overload is called on a copy of what it writes (``as_called``): its tangent,
    written in place, is the one compared; torch's ``mul_`` against itself is proven."""
    op = torch.ops.aten.mul_.Tensor
    called = corpus_proof.as_called(op, op._schema)
    cases = [((torch.randn(3, dtype=torch.float64, requires_grad=True),
               torch.randn(3, dtype=torch.float64, requires_grad=True)), {})]
    assert corpus_proof.prove_forward(called, called, cases) == ("proven", 1, "")
    assert corpus_proof._tangents(called, *cases[0], list(cases[0][0]), 1)[0].abs().sum() > 0


def _logcumsumexp_case():
    """Elements 17 apart: ``r_0 = x_0``, so the first output's tangent is the first input's exactly."""
    x = torch.tensor([-8.6, 0.5, 8.9], dtype=torch.float64, requires_grad=True)
    return x, torch.tensor([0.3, -1.2, 0.7], dtype=torch.float64)


def _forward_ad(fn, x, t):
    import torch.autograd.forward_ad as fwad

    with fwad.dual_level():
        return fwad.unpack_dual(fn(fwad.make_dual(x.detach(), t))).tangent


def test_torchs_logcumsumexp_forward_ad_is_inexact_and_the_oracle_is_not():
    """torch 2.13's forward AD of ``logcumsumexp`` is off by 1e-6 here (beyond RF's rtol 1e-7); the
    exact composition RF compares with instead (``TANGENT_ORACLES``) agrees with the mathematics
    (``r_0 = x_0``) and with central finite differences in float64."""
    x, t = _logcumsumexp_case()
    h = 1e-6
    finite = (torch.logcumsumexp(x.detach() + h * t, 0) - torch.logcumsumexp(x.detach() - h * t, 0)) / (2 * h)
    oracle = _forward_ad(lambda v: corpus_proof.TANGENT_ORACLES["logcumsumexp"](v, 0), x, t)
    theirs = _forward_ad(lambda v: torch.logcumsumexp(v, 0), x, t)
    assert oracle[0] == t[0]
    torch.testing.assert_close(oracle, finite, rtol=0, atol=1e-8)
    assert abs(theirs[0] - t[0]) > 1e-7 and not corpus_proof._same(theirs, oracle)


def test_rf_compares_an_entry_with_an_inexact_torch_tangent_with_its_exact_composition():
    """A jvp with the exact tangents fails RF against torch's own forward AD of ``logcumsumexp`` and
    is proven against the entry's oracle."""
    x, _ = _logcumsumexp_case()
    exact, theirs = corpus_proof.TANGENT_ORACLES["logcumsumexp"], torch.ops.aten.logcumsumexp.default
    cases = [((x, 0), {})]
    assert corpus_proof.prove_forward(exact, theirs, cases) == \
        ("failed", 1, "RF: an output tangent differs from torch's forward AD")
    assert corpus_proof.prove_forward(exact, theirs, cases, exact) == ("proven", 1, "")
