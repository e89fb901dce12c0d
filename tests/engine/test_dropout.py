"""The engine's dropout (formulas/layers.py) beyond the tier tests: torch's errors on bad arguments,
the random case (the tier cases are the deterministic ones) and ``engine.dropout`` replaying a
torch run's mask."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import reference_engine as engine
from reference_engine.factories import default_generator


def f64(values, requires_grad=False):
    return engine.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


@pytest.fixture
def engine_seed(monkeypatch):
    """Seeds the engine's default generator for the test and puts the previous stream back after it."""
    monkeypatch.setattr(default_generator, "_rng", default_generator.numpy)

    def seed(value: int) -> None:
        engine.manual_seed(value)
    return seed


@pytest.mark.parametrize("p, message", [(1.5, r"but got p=-0\.5"), (-0.25, r"but got p=1\.25")])
def test_native_dropout_refuses_p_outside_0_1_in_training_as_torch(p, message):
    for train in (True, None):
        with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\], " + message):
            engine.native_dropout(f64([1.0, 2.0]), p, train)
        with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\], " + message):
            torch.native_dropout(torch.tensor([1.0, 2.0]), p, train)
    # evaluation is the identity and checks nothing, in torch too
    assert np.array_equal(engine.native_dropout(f64([1.0, 2.0]), p, False)[0].numpy(), [1.0, 2.0])
    assert torch.equal(torch.native_dropout(torch.tensor([1.0, 2.0]), p, False)[0], torch.tensor([1.0, 2.0]))


@pytest.mark.parametrize("train", [True, None])
@pytest.mark.parametrize("p", [0.25, 0.5])
def test_native_dropout_in_training_scales_the_kept_elements_and_differentiates_through_its_mask(
        engine_seed, p, train):
    """The random case: torch's stream cannot be reproduced, so the engine's own draw is checked
    against what it must be (output, gradient, keep rate) and by finite differences with the draw
    fixed. ``train=None`` trains (as torch's forward does; torch's own backward scales it by 1, the
    engine by ``1 / (1 - p)``, which finite differences confirm)."""
    x = f64(np.random.default_rng(0).uniform(0.5, 2.0, (100, 100)), requires_grad=True)
    engine_seed(3)
    out, mask = engine.native_dropout(x, p, train)
    assert mask.dtype == engine.bool and not mask.requires_grad
    kept = mask.numpy()
    assert abs(kept.mean() - (1 - p)) < 0.02             # 10,000 draws: about 5 standard deviations
    np.testing.assert_allclose(out.detach().numpy(), x.detach().numpy() * kept / (1 - p), rtol=1e-15)
    (grad,) = engine.grad(out.sum(), x)
    np.testing.assert_allclose(grad.numpy(), kept / (1 - p), rtol=1e-15)

    def fixed_draw(t):
        engine_seed(11)
        return engine.native_dropout(t, p, train)
    small = f64(np.random.default_rng(1).standard_normal((3, 4)), requires_grad=True)
    assert engine.gradcheck(fixed_draw, (small,))
    assert engine.gradgradcheck(fixed_draw, (small,))


@pytest.mark.parametrize("p", [0.3, 0.5, 1.0])
def test_dropout_with_a_torch_mask_gives_torchs_output_and_gradients(p):
    values = np.random.default_rng(2).standard_normal((4, 5))
    source = torch.tensor(values, requires_grad=True)
    with torch.random.fork_rng():
        torch.manual_seed(5)
        expected, torch_mask = torch.native_dropout(source, p, True)
    (expected_grad,) = torch.autograd.grad(expected, source, torch.ones(4, 5))
    x = f64(values, requires_grad=True)
    mask = engine.tensor(torch_mask.numpy())
    out = engine.dropout(x, p, mask=mask)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-15)
    (grad,) = engine.grad(out.sum(), x)
    np.testing.assert_allclose(grad.numpy(), expected_grad.numpy(), rtol=1e-15)
    assert engine.gradgradcheck(lambda t: engine.dropout(t, p, mask=mask), (f64(values, requires_grad=True),))


def test_dropout_draws_without_a_mask_and_is_the_identity_in_evaluation(engine_seed):
    x = f64(np.ones(1000), requires_grad=True)
    engine_seed(0)
    out = engine.dropout(x, 0.5)
    assert set(np.unique(out.detach().numpy())) == {0.0, 2.0}
    assert engine.dropout(x, 0.5, training=False) is x
    assert engine.dropout(x, 0.5, False, mask=engine.tensor(np.zeros(1000, np.bool_))) is x


def test_dropout_refuses_a_bad_p_or_mask():
    x = f64([1.0, 2.0])
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        engine.dropout(x, 1.5)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        torch.nn.functional.dropout(torch.tensor([1.0, 2.0]), 1.5)
    with pytest.raises(ValueError, match="bool tensor of the input's shape"):
        engine.dropout(x, 0.5, mask=f64([1.0, 0.0]))
    with pytest.raises(ValueError, match="bool tensor of the input's shape"):
        engine.dropout(x, 0.5, mask=engine.tensor(np.ones(3, np.bool_)))
