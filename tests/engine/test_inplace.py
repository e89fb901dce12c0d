"""In-place methods: values, version counters, leaf errors, and gradients through them."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import reference_engine as engine


def f64(values, requires_grad=False):
    return engine.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


@pytest.mark.parametrize("method, argument, expected", [
    ("add_", 2.0, [3.0, 4.0]),
    ("sub_", 0.5, [0.5, 1.5]),
    ("mul_", 3.0, [3.0, 6.0]),
    ("div_", 2.0, [0.5, 1.0]),
])
def test_in_place_methods_write_values_and_bump_the_version(method, argument, expected):
    x = f64([1.0, 2.0])
    data = x._data
    assert getattr(x, method)(argument) is x
    assert x._data is data                       # same array, written in place
    np.testing.assert_allclose(x.numpy(), expected)
    assert x._version_value == 1


def test_zero_and_item_assignment_bump_the_version():
    x = f64([[1.0, 2.0], [3.0, 4.0]])
    x[0, 1] = 7.0
    x[1] = f64([5.0, 6.0])
    np.testing.assert_array_equal(x.numpy(), [[1.0, 7.0], [5.0, 6.0]])
    assert x._version_value == 2
    x.zero_()
    np.testing.assert_array_equal(x.numpy(), 0.0)
    assert x._version_value == 3


def test_augmented_assignment_is_in_place():
    x = f64([1.0, 2.0])
    alias = x
    x += 1.0
    x *= f64([2.0, 3.0])
    assert x is alias and x._version_value == 2
    np.testing.assert_array_equal(x.numpy(), [4.0, 9.0])


@pytest.mark.parametrize("mutate", [
    lambda t: t.add_(1.0), lambda t: t.mul_(2.0), lambda t: t.zero_(), lambda t: t.__setitem__(0, 1.0),
])
def test_in_place_on_a_leaf_that_requires_grad_raises(mutate):
    x = f64([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        mutate(x)
    with engine.no_grad():          # allowed as a parameter update
        mutate(x)


def test_in_place_on_a_non_leaf_moves_it_onto_the_new_node():
    x = f64([0.5, 1.0, 1.5], requires_grad=True)
    w = f64([2.0, -1.0, 0.5], requires_grad=True)
    h = x.sin()
    h.mul_(w)
    h.add_(x)
    assert h.grad_fn.name() == "AddTensorBackward0"
    h.exp().sum().backward()

    xt = torch.tensor([0.5, 1.0, 1.5], dtype=torch.float64, requires_grad=True)
    wt = torch.tensor([2.0, -1.0, 0.5], dtype=torch.float64, requires_grad=True)
    ht = xt.sin()
    ht.mul_(wt)
    ht.add_(xt)
    ht.exp().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-12)


def test_zero_in_the_graph_gives_zero_gradient():
    x = f64([1.0, 2.0], requires_grad=True)
    h = x * 3.0
    h.zero_()
    (h + x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_item_assignment_with_a_stepped_slice_beside_index_arrays_in_the_graph_is_refused_clearly():
    # index arrays with ints, slices, ':' and '...' are an index_put (tests/engine/test_api.py); a
    # stepped slice or None beside them is not recorded
    h = f64([[1.0, 2.0], [3.0, 4.0]], requires_grad=True) * 1.0
    with pytest.raises(RuntimeError, match="item assignment with \\(slice\\(None, None, 2\\), \\[0, 1\\]\\) on a "
                                           "tensor in the graph is not"):
        h[::2, [0, 1]] = 5.0


def test_in_place_shape_mismatch_and_broadcast_views_are_refused():
    x = f64([1.0, 2.0])
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x.add_(f64([[1.0], [2.0]]))
    expanded = f64([1.0]).expand([3])
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers"):
        expanded.add_(1.0)


def test_sgd_step_under_no_grad():
    w = f64([1.0, -2.0], requires_grad=True)
    (w * w).sum().backward()
    with engine.no_grad():
        w -= w.grad * 0.25
    np.testing.assert_allclose(w.detach().numpy(), [0.5, -1.0])
    assert w.is_leaf and w.requires_grad
