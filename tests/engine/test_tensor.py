"""Tensor API: constructors, dtypes, metadata, operators, indexing, composites, DOT export."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import reference_engine as engine


def f64(values, requires_grad=False):
    return engine.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


@pytest.mark.parametrize("data, dtype", [
    ([1.0, 2.0], engine.float32), ([1, 2], engine.int64), ([True, False], engine.bool),
    (np.zeros(2), engine.float64), (np.zeros(2, np.float32), engine.float32), (3.5, engine.float32),
    ([[1, 2], [3, 4]], engine.int64),
])
def test_tensor_infers_dtypes_like_torch(data, dtype):
    assert engine.tensor(data).dtype is dtype


def test_unsupported_dtype_is_a_clear_error():
    with pytest.raises(TypeError, match="unsupported dtype complex128"):
        engine.tensor(np.zeros(2, np.complex128))


def test_factories():
    assert engine.zeros(2, 3).shape == (2, 3) and engine.zeros(2, 3).dtype is engine.float32
    assert engine.ones([4], dtype=engine.float64).tolist() == [1.0] * 4
    assert engine.full([2], 7, dtype=engine.int64).tolist() == [7, 7]
    assert engine.arange(4).tolist() == [0, 1, 2, 3] and engine.arange(4).dtype is engine.int64
    assert engine.arange(0.0, 1.0, 0.5).dtype is engine.float32
    assert engine.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    a = engine.randn(3, generator=engine.Generator(7), dtype=engine.float64)
    b = engine.randn(3, generator=engine.Generator(7), dtype=engine.float64)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    engine.manual_seed(5)
    c = engine.rand(3)
    engine.manual_seed(5)
    np.testing.assert_array_equal(c.numpy(), engine.rand(3).numpy())
    assert engine.randn(2, 2, requires_grad=True).requires_grad


def test_metadata_methods():
    x = f64(np.zeros((2, 3, 4)))
    assert x.sizes() == [2, 3, 4] and x.shape == (2, 3, 4)
    assert x.size() == (2, 3, 4) and x.size(1) == 3 and x.size(-1) == 4
    assert x.dim() == 3 and x.numel() == 24
    assert x.scalar_type() is engine.float64 and x.options().dtype is engine.float64
    assert f64(2.5).item() == 2.5 and f64([[1.0]]).tolist() == [[1.0]]
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.size(3)
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        x.item()


def test_python_operators_and_reflected_numbers():
    x = f64([1.0, 2.0, 4.0])
    np.testing.assert_allclose((x + 1).numpy(), [2, 3, 5])
    np.testing.assert_allclose((1 - x).numpy(), [0, -1, -3])
    np.testing.assert_allclose((2 * x).numpy(), [2, 4, 8])
    np.testing.assert_allclose((1 / x).numpy(), [1, 0.5, 0.25])
    np.testing.assert_allclose((x ** 2).numpy(), [1, 4, 16])
    np.testing.assert_allclose((-x).numpy(), [-1, -2, -4])
    assert (x > 1.5).tolist() == [False, True, True] and (x > 1.5).dtype is engine.bool
    y = f64([2.0, 2.0, 2.0])
    assert (x < y).tolist() == [True, False, False] and (x >= 2).tolist() == [False, True, True]
    assert (x == y).tolist() == [False, True, False] and (x != 2.0).tolist() == [True, False, True]
    assert (x <= y).dtype is engine.bool


def test_wrapped_numbers_do_not_promote():
    x = engine.tensor([1.0, 2.0])
    assert (x * 2.5).dtype is engine.float32
    assert (x + 1).dtype is engine.float32
    assert (engine.tensor([1, 2]) * 2).dtype is engine.int64


def test_matmul_composites_from_mm():
    a, b, v = f64(np.arange(6.0).reshape(2, 3)), f64(np.arange(12.0).reshape(3, 4)), f64([1.0, 2.0, 3.0])
    np.testing.assert_allclose((a @ b).numpy(), a.numpy() @ b.numpy())
    np.testing.assert_allclose((a @ v).numpy(), a.numpy() @ v.numpy())
    np.testing.assert_allclose((v @ b).numpy(), v.numpy() @ b.numpy())
    assert (a @ b).grad_fn is None
    a.requires_grad_()
    assert (a @ v).grad_fn.name() == "ViewBackward0"


def test_composite_methods_match_torch_values_and_gradients():
    values = np.random.default_rng(0).standard_normal((2, 3, 4))
    x = f64(values, requires_grad=True)
    xt = torch.tensor(values, requires_grad=True)
    ours = [x.mean(), x.mean([1], True), x.reshape(4, 6), x.view([-1]), x.permute(2, 0, 1), x.transpose(0, 2),
            x.sum(1), x.max(2)[0], x[1], x[:, 1:3], x[None, ..., 0], x[-1, :, 2:], x.T]
    theirs = [xt.mean(), xt.mean([1], True), xt.reshape(4, 6), xt.view(-1), xt.permute(2, 0, 1), xt.transpose(0, 2),
              xt.sum(1), xt.max(2)[0], xt[1], xt[:, 1:3], xt[None, ..., 0], xt[-1, :, 2:], xt.permute(2, 1, 0)]
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a.shape == tuple(b.shape), i
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), err_msg=str(i))
        weights = np.random.default_rng(i).standard_normal(a.shape)
        (ga,) = engine.grad((a * f64(weights)).sum(), x)
        (gb,) = torch.autograd.grad((b * torch.tensor(weights)).sum(), xt)
        np.testing.assert_allclose(ga.numpy(), gb.numpy(), err_msg=str(i))


def test_advanced_indexing_is_recorded_or_refused_clearly():
    x = f64([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(x[[1, 0]].numpy(), [[3.0, 4.0], [1.0, 2.0]])
    x.requires_grad_()
    assert x[[1, 0]].grad_fn.name() == "IndexTensorBackward0"      # index.Tensor (tests/engine/test_api.py)
    assert x[::2].grad_fn.name() == "SliceBackward0"       # a view (tests/engine/test_torch_edges.py)
    with pytest.raises(IndexError, match="not supported by the reference engine"):
        x[[1, 0], ::2]
    with pytest.raises(IndexError, match="out of bounds"):
        x[5]


def test_to_dot_lists_nodes_edges_and_leaves():
    x = f64([1.0, 2.0], requires_grad=True)
    w = f64([3.0, 4.0], requires_grad=True)
    dot = engine.to_dot((x.sin() * w).sum(), name="loss")
    assert dot.startswith("digraph autograd {") and dot.rstrip().endswith("}")
    for label in ("loss\\n() float64", "SumBackward0\\nsum\\n-> () float64",
                  "MulTensorBackward0\\nmul.Tensor\\n-> (2,) float64", "SinBackward0\\nsin\\n-> (2,) float64",
                  "AccumulateGrad\\n(2,) float64"):
        assert f'"{label}"' in dot, label
    assert dot.count("AccumulateGrad") == 2
    assert dot.count(" -> n") == 5      # root->sum, sum->mul, mul->sin, mul->w, sin->x
    assert engine.to_dot(f64([1.0])).count(" -> n") == 0
