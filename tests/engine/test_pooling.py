"""Pooling in the engine against torch: the errors torch raises for bad arguments, the index max
pooling picks among ties and NaNs (its gradient goes there), ``max_pool2d`` as ``F.max_pool2d``,
and integer average pooling. (Gradients on tie-free inputs: the tiers of ``tests/op_cases.py``.)"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import reference_engine as engine
from reference_engine.dispatch import dispatcher

NAN, INF = float("nan"), float("inf")
X = np.random.default_rng(0).standard_normal((1, 2, 5, 5))

BAD_ARGUMENTS = [
    ("max_pool2d_with_indices", (X, [2, 2, 2])),
    ("max_pool2d_with_indices", (X, [2], [1, 1, 1])),
    ("max_pool2d_with_indices", (X, [2], [1], [1, 1, 1])),
    ("max_pool2d_with_indices", (X, [2], [1], [1], [1, 1, 1])),
    ("max_pool2d_with_indices", (X, [0], [1])),
    ("max_pool2d_with_indices", (X, [2], [0])),
    ("max_pool2d_with_indices", (X, [2], [-1])),
    ("max_pool2d_with_indices", (X, [2], [1], [0], [0])),
    ("max_pool2d_with_indices", (X, [0], [1], [0], [2])),
    ("max_pool2d_with_indices", (X, [2], [1], [-1])),
    ("max_pool2d_with_indices", (X, [2], [1], [2])),
    ("max_pool2d_with_indices", (X, [2], [1], [2], [3])),
    ("max_pool2d_with_indices", (X, [6], [1])),
    ("max_pool2d_with_indices", (X, [3], [1], [0], [3])),
    ("max_pool2d_with_indices", (X[0, 0], [2])),
    ("max_pool2d_with_indices", (np.zeros((2, 0, 5, 5)), [2])),
    ("max_pool2d_with_indices", (np.zeros((2, 2, 0, 5)), [2])),
    ("avg_pool2d", (X, [2, 2, 2])),
    ("avg_pool2d", (X, [2], [1, 1, 1])),
    ("avg_pool2d", (X, [2], [1], [1, 1, 1])),
    ("avg_pool2d", (X, [2, 0], [1])),
    ("avg_pool2d", (X, [2], [0])),
    ("avg_pool2d", (X, [3], [1], [2])),
    ("avg_pool2d", (X, [6], [1])),
    ("avg_pool2d", (X, [2], [1], [0], False, True, 0)),
    ("avg_pool2d", (X[0, 0], [2])),
    ("avg_pool2d", (X[0, 0, 0], [2])),
    ("avg_pool2d", (np.zeros((1, 1, 2, 3, 3)), [2])),
    ("max_pool2d_with_indices_backward", (np.ones((1, 2, 2, 3)), X, [2], [2], [0], [1], False,
                                          np.zeros((1, 2, 2, 2), np.int64))),
    ("max_pool2d_with_indices_backward", (np.ones((1, 2, 2, 2)), X, [2], [2], [0], [1], False,
                                          np.zeros((1, 2, 2, 2)))),
    ("avg_pool2d_backward", (np.ones((1, 2, 3, 2)), X, [2], [2], [0], False, True, None)),
]


def _engine_value(value):
    return engine.tensor(value) if isinstance(value, np.ndarray) else value


def _torch_value(value):
    return torch.from_numpy(value) if isinstance(value, np.ndarray) else value


@pytest.mark.parametrize("op, args", BAD_ARGUMENTS, ids=lambda a: a if isinstance(a, str) else "")
def test_pooling_errors_say_what_torch_says(op, args):
    with pytest.raises(Exception) as theirs:
        getattr(torch.ops.aten, op)(*map(_torch_value, args))
    with pytest.raises(type(theirs.value)) as ours:
        dispatcher.call(op, tuple(map(_engine_value, args)), {})
    assert str(ours.value) == str(theirs.value).splitlines()[0]


TIES = [
    # equal maxima, NaNs (the last one wins), -inf windows, a dilated window lying wholly in the padding
    (np.asarray([[[1.0, 3.0, 3.0], [3.0, NAN, 2.0], [NAN, 1.0, 0.0]]]), [2], [1], [0], [1]),
    (np.asarray([[[2.0, 2.0, 1.0, 2.0], [2.0, 2.0, 2.0, 2.0], [0.0, 2.0, 2.0, 1.0]]]), [2, 3], [1], [1], [1]),
    (np.full((1, 3, 3), -INF), [2], [1], [1], [1]),
    (np.asarray([[[[5.0]]]]), [2], [1], [1], [2]),
    (np.asarray([[[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]]), [3], [2], [1], [1]),
]


@pytest.mark.parametrize("x, kernel, stride, padding, dilation", TIES)
def test_max_pool2d_picks_torchs_index_among_ties(x, kernel, stride, padding, dilation):
    ours = engine.tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    values, indices = dispatcher.call("max_pool2d_with_indices", (ours, kernel, stride, padding, dilation, False), {})
    values_t, indices_t = torch.ops.aten.max_pool2d_with_indices(theirs, kernel, stride, padding, dilation, False)
    np.testing.assert_array_equal(values.detach().numpy(), values_t.detach().numpy())
    np.testing.assert_array_equal(indices.numpy(), indices_t.numpy())
    weights = np.arange(1.0, 1.0 + values.numel()).reshape(values.shape)
    (grad,) = engine.grad((values * engine.tensor(weights)).sum(), ours)
    (grad_t,) = torch.autograd.grad((values_t * torch.tensor(weights)).sum(), theirs)
    np.testing.assert_array_equal(grad.numpy(), grad_t.numpy())


@pytest.mark.parametrize("kwargs", [{}, {"stride": 1, "padding": 1}, {"stride": [2, 1], "dilation": 2},
                                    {"ceil_mode": True, "return_indices": True}])
def test_max_pool2d_module_function_is_f_max_pool2d(kwargs):
    x = np.random.default_rng(1).permutation(2 * 7 * 6).reshape(2, 7, 6) * 0.5
    ours, theirs = engine.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, out_t = engine.max_pool2d(ours, 3, **kwargs), F.max_pool2d(theirs, 3, **kwargs)
    if kwargs.get("return_indices"):
        np.testing.assert_array_equal(out[1].numpy(), out_t[1].numpy())
        out, out_t = out[0], out_t[0]
    np.testing.assert_array_equal(out.detach().numpy(), out_t.detach().numpy())
    out.sum().backward()
    out_t.sum().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


def test_avg_pool2d_of_integers_truncates_as_torch():
    x = np.random.default_rng(2).integers(-9, 10, (2, 5, 5))
    for kwargs in ({}, {"padding": 1, "count_include_pad": False}, {"divisor_override": -3, "ceil_mode": True}):
        ours = engine.avg_pool2d(engine.tensor(x), [2], **kwargs)
        theirs = F.avg_pool2d(torch.tensor(x), 2, **kwargs)
        assert ours.dtype == engine.int64
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
