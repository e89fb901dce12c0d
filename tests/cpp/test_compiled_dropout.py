"""The compiled ``native_dropout`` in training with p in (0, 1): random, so the tier cases leave it out
(tests/op_cases.py keeps evaluation, p = 0 and p = 1). With torch's generator seeded alike, the
compiled op draws torch's own mask; its gradients are checked against the built-in op and by
torch's gradcheck and gradgradcheck with the draw fixed (reseeded on every call)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def _seeded(fn, seed: int):
    """``fn`` with torch's default generator seeded before every call: one fixed draw."""
    def call(*args):
        torch.manual_seed(seed)
        return fn(*args)
    return call


@pytest.mark.parametrize("p", [0.2, 0.5])
def test_training_draws_torchs_mask_and_gives_torchs_gradients(formulas_ops, p):
    x = torch.randn(6, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(0), requires_grad=True)
    upstream = torch.randn(6, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.random.fork_rng():
        ours, our_mask = _seeded(formulas_ops.native_dropout, 7)(x, p, True)
        theirs, their_mask = _seeded(torch.ops.aten.native_dropout.default, 7)(x, p, True)
    assert not our_mask.requires_grad and torch.equal(our_mask, their_mask)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
    (our_grad,) = torch.autograd.grad(ours, x, upstream, create_graph=True)
    (their_grad,) = torch.autograd.grad(theirs, x, upstream, create_graph=True)
    torch.testing.assert_close(our_grad, their_grad, rtol=0, atol=0)
    torch.testing.assert_close(our_grad, upstream * our_mask / (1 - p))


@pytest.mark.parametrize("train", [True, None])
def test_training_passes_gradcheck_and_gradgradcheck_with_the_draw_fixed(formulas_ops, train):
    """``train=None`` trains in torch's forward, and the compiled backward scales by ``1 / (1 - p)``
    as finite differences require (torch's built-in backward scales a ``None`` by 1)."""
    x = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2), requires_grad=True)
    with torch.random.fork_rng():
        call = _seeded(lambda t: formulas_ops.native_dropout(t, 0.5, train)[0], 3)
        assert torch.autograd.gradcheck(call, (x,), raise_exception=True)
        assert torch.autograd.gradgradcheck(call, (x,), raise_exception=True)
        assert torch.autograd.gradcheck(call, (x,), check_forward_ad=True, check_backward_ad=False,
                                        check_undefined_grad=False, check_batched_grad=False, raise_exception=True)
