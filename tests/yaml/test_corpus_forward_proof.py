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
