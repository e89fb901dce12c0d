"""The losses of ``formulas/losses.py`` (and ``engine.dot``) beyond what torch itself proves: the gradients of the
weights torch refuses to differentiate (computed, never silently zero), and the engine's
``cross_entropy`` / ``nll_loss`` module functions against torch's (values, first and second
order gradients) and their refusals."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

import reference_engine as engine

RNG = np.random.default_rng(11)


def _leaf(values: np.ndarray) -> engine.Tensor:
    return engine.tensor(values, dtype=engine.float64, requires_grad=True)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_binary_cross_entropy_weight_gradient(reduction):
    x, t = RNG.uniform(0.1, 0.9, (3, 4)), RNG.uniform(0.1, 0.9, (3, 4))
    inputs = (_leaf(x), _leaf(t), _leaf(RNG.uniform(0.5, 2.0, (4,))))
    fn = lambda a, b, w: engine.binary_cross_entropy(a, b, w, reduction)
    assert engine.gradcheck(fn, inputs)
    assert engine.gradgradcheck(fn, inputs)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_binary_cross_entropy_with_logits_weight_and_pos_weight_gradients(reduction):
    inputs = (_leaf(RNG.standard_normal((3, 4))), _leaf(RNG.uniform(0.1, 0.9, (3, 4))),
              _leaf(RNG.uniform(0.5, 2.0, (4,))), _leaf(RNG.uniform(0.5, 2.0, (4,))))
    fn = lambda a, b, w, p: engine.binary_cross_entropy_with_logits(a, b, w, p, reduction)
    assert engine.gradcheck(fn, inputs)
    assert engine.gradgradcheck(fn, inputs)


@pytest.mark.parametrize("reduction, ignore_index", [(0, -100), (1, 1), (2, 0), (1, -100)])
def test_nll_loss_weight_gradient(reduction, ignore_index):
    target = engine.tensor(np.array([0, 2, 1, 1, 2]))
    inputs = (_leaf(RNG.standard_normal((5, 3))), _leaf(RNG.uniform(0.5, 2.0, (3,))))
    fn = lambda x, w: engine.nll_loss_forward(x, target, w, reduction, ignore_index)[0]
    assert engine.gradcheck(fn, inputs)
    assert engine.gradgradcheck(fn, inputs)


@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("derived", [False, True])
def test_nll_loss_backward_jvp_in_grad_output_weight_and_total_weight(reduction, derived):
    """Forward mode through ``nll_loss_backward`` in every input its backward differentiates
    (``grad_output``, ``weight``, ``total_weight``: the second order of ``nll_loss`` in the weight
    passes them tangents), its own jvp and the derived one, against central differences."""
    from reference_engine.forward_ad import derived_jvps
    target = engine.tensor(np.array([0, 2, 1, 1, 2]))
    self = engine.tensor(RNG.standard_normal((5, 3)))
    primals = [engine.tensor(RNG.standard_normal((5,) if reduction == 0 else ())), engine.tensor(RNG.uniform(0.5, 2.0, (3,))),
               engine.tensor(np.asarray(RNG.uniform(2.0, 3.0)))]
    tangents = [engine.tensor(RNG.standard_normal(p.shape)) for p in primals]
    fn = lambda g, w, total: engine.nll_loss_backward(g, self, target, w, reduction, 1, total)
    with derived_jvps() if derived else contextlib.nullcontext():
        _, tangent = engine.jvp(fn, primals, tangents)
    step = 1e-6
    moved = [fn(*(engine.tensor(p.numpy() + sign * step * t.numpy()) for p, t in zip(primals, tangents)))
             for sign in (1, -1)]
    np.testing.assert_allclose(tangent.numpy(), (moved[0].numpy() - moved[1].numpy()) / (2 * step), rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("shape, target, kwargs", [
    ((4, 3), [0, 2, 1, 2], {}),
    ((4, 3), [0, 2, 1, 2], {"reduction": "sum", "ignore_index": 2}),
    ((4, 3), [0, 2, 1, 2], {"reduction": "none"}),
    ((3,), 1, {}),
])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_matches_torch(shape, target, kwargs, weighted):
    x = RNG.standard_normal(shape)
    weight = RNG.uniform(0.5, 2.0, (shape[-1],)) if weighted else None
    ours_x = _leaf(x)
    ours = engine.cross_entropy(ours_x, engine.tensor(np.array(target)),
                                None if weight is None else engine.tensor(weight), **kwargs)
    theirs_x = torch.tensor(x, requires_grad=True)
    theirs = torch.nn.functional.cross_entropy(theirs_x, torch.tensor(target),
                                               None if weight is None else torch.tensor(weight), **kwargs)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12)
    out_weight = RNG.standard_normal(theirs.shape)
    (ours_grad,) = engine.grad((ours * engine.tensor(out_weight)).sum(), ours_x, create_graph=True)
    (theirs_grad,) = torch.autograd.grad((theirs * torch.tensor(out_weight)).sum(), theirs_x, create_graph=True)
    np.testing.assert_allclose(ours_grad.detach().numpy(), theirs_grad.detach().numpy(), rtol=1e-10, atol=1e-12)
    grad_weight = RNG.standard_normal(shape)
    (ours_second,) = engine.grad((ours_grad * engine.tensor(grad_weight)).sum(), ours_x)
    (theirs_second,) = torch.autograd.grad((theirs_grad * torch.tensor(grad_weight)).sum(), theirs_x)
    np.testing.assert_allclose(ours_second.numpy(), theirs_second.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("call, message", [
    (lambda x: engine.cross_entropy(x, engine.tensor(np.full((2, 3), 1 / 3))), "class-probability targets"),
    (lambda x: engine.cross_entropy(x, engine.tensor(np.array([0, 1])), label_smoothing=0.1), "label_smoothing"),
    (lambda x: engine.nll_loss(x.reshape(2, 3, 1), engine.tensor(np.zeros((2, 1), np.int64))), "nll_loss2d"),
])
def test_cross_entropy_refuses_what_it_does_not_compute(call, message):
    with pytest.raises(NotImplementedError, match=message):
        call(_leaf(RNG.standard_normal((2, 3))))


def test_nll_loss_rejects_an_out_of_range_target_as_torch():
    with pytest.raises(IndexError, match="Target 3 is out of bounds"):
        engine.nll_loss(_leaf(RNG.standard_normal((2, 3))), engine.tensor(np.array([0, 3])))
    with pytest.raises(IndexError, match="Target 3 is out of bounds"):
        torch.nn.functional.nll_loss(torch.zeros(2, 3), torch.tensor([0, 3]))


@pytest.mark.parametrize("padding_idx", [-1, 2])
def test_embedding_dense_backward_with_frequency_scaling_is_differentiated_exactly(padding_idx):
    """With ``scale_grad_by_freq`` the op is still linear in ``grad_output``: its gradient is the
    exact adjoint (rows read back, scaled by 1 / count, padding row 0). torch's own double
    backward ignores the scaling, so this is proven by finite differences, not against torch."""
    indices = engine.tensor(np.array([1, 2, 2, 4, 2, 1]))
    grad_output = _leaf(RNG.standard_normal((6, 3)))
    fn = lambda g: engine.embedding_dense_backward(g, indices, 5, padding_idx, True)
    assert engine.gradcheck(fn, (grad_output,))
    assert engine.gradgradcheck(fn, (grad_output,))
    expected = torch.ops.aten.embedding_dense_backward(torch.tensor(grad_output.detach().numpy()),
                                                       torch.tensor(indices.numpy()), 5, padding_idx, True)
    np.testing.assert_allclose(fn(grad_output).detach().numpy(), expected.numpy(), rtol=1e-12)


def test_engine_dot_is_the_operator_and_the_graph_export_module_stays_importable():
    a, b = _leaf(np.array([1.0, 2.0, 3.0])), _leaf(np.array([0.5, -1.0, 2.0]))
    out = engine.dot(a, b)
    assert out.item() == 4.5
    (grad_a,) = engine.grad(out, a)
    np.testing.assert_array_equal(grad_a.numpy(), b.detach().numpy())
    import importlib
    assert callable(importlib.import_module("reference_engine.dot").to_dot)
