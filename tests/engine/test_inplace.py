"""In-place methods: values, version counters, leaf errors, and gradients through them."""
from __future__ import annotations

import contextlib
import warnings

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


# Operands that share memory with the written tensor (views.check_operand_overlap): torch refuses a
# partial overlap (and index_put_ any overlap) with one message, allows the same memory with the same
# strides and views that are apart; it leaves strided (not dense) views unchecked, where the engine
# allows them when no element is read at another position than its own. Each case runs recorded
# (x in the graph, the gradient compared too) and unrecorded (no_grad), on torch and the engine.
PARTIAL = "some elements of the input tensor and the written-to tensor refer to a single memory location"
INTERNAL = "more than one element of the written-to tensor refers to a single memory location"


OVERLAP_CASES = {
    # name: (write into x, a 9-element float64 tensor; what torch does: PARTIAL, INTERNAL or None: a value)
    "add_ partial": (lambda lib, x: x[1:].add_(x[:-1]), PARTIAL),
    "add_ full": (lambda lib, x: x.add_(x), None),
    "add_ apart": (lambda lib, x: x[:8:2].add_(x[1::2]), None),
    "add_ broadcast element": (lambda lib, x: x.add_(x[0]), PARTIAL),
    "add_ transpose": (lambda lib, x: x.view(3, 3).add_(x.view(3, 3).t()), PARTIAL),
    "add_ strided, shared in place": (lambda lib, x: x.view(3, 3).diagonal().add_(x.view(3, 3)[:, 2]), None),
    "add_ rows apart": (lambda lib, x: x.view(3, 3)[0].add_(x.view(3, 3)[1]), None),
    "sub_ partial": (lambda lib, x: x[1:].sub_(x[:-1]), PARTIAL),
    "sub_ full": (lambda lib, x: x.sub_(x), None),
    "mul_ partial": (lambda lib, x: x[1:].mul_(x[:-1]), PARTIAL),
    "mul_ apart": (lambda lib, x: x[:4].mul_(x[5:]), None),
    "div_ partial": (lambda lib, x: x[:-1].div_(x[1:]), PARTIAL),
    "div_ full": (lambda lib, x: x[2:].div_(x[2:]), None),
    "copy_ partial": (lambda lib, x: x[1:].copy_(x[:-1]), PARTIAL),
    "copy_ full": (lambda lib, x: x.copy_(x), None),
    "copy_ apart": (lambda lib, x: x[::2].copy_(x[1::2][:1]), None),
    "clamp_ partial": (lambda lib, x: x[1:].clamp_(min=x[:-1]), PARTIAL),
    "fill_ an element": (lambda lib, x: x.fill_(x[2]), None),
    "setitem partial": (lambda lib, x: x.__setitem__(slice(1, None), x[:-1]), PARTIAL),
    "setitem full": (lambda lib, x: x.__setitem__(slice(None), x), None),
    "setitem apart": (lambda lib, x: x.__setitem__(slice(None, None, 2), x[1::2][:1]), None),
    "setitem element": (lambda lib, x: x.__setitem__(0, x[1]), None),
    "index_put_ partial": (lambda lib, x: x.__setitem__(lib.tensor([0, 1]), x[:2]), PARTIAL),
    "index_put_ full": (lambda lib, x: x.__setitem__(lib.tensor(list(range(9))), x), PARTIAL),
    "index_put_ mask": (lambda lib, x: x.__setitem__(x > 5.0, x[6:]), PARTIAL),
    "index_put_ apart": (lambda lib, x: x.view(3, 3).__setitem__((0, lib.tensor([0, 1])), x.view(3, 3)[1, :2]),
                         None),
    "add_ into expanded": (lambda lib, x: x[:1].expand(3).add_(x[3:6]), INTERNAL),
}


def _overlap_run(lib, action, recorded):
    """``action`` on a fresh tensor (in the graph when ``recorded``): the tensor written and the
    leaf's gradient of a weighted sum of it (None unrecorded), or the error's message (the
    gradient of an operand saved, then written over, raises in both)."""
    values = np.linspace(-2.0, 2.5, 9)
    leaf = lib.tensor(values, dtype=lib.float64, requires_grad=recorded)
    x = leaf * 1.0 if recorded else leaf
    try:
        with (contextlib.nullcontext() if recorded else lib.no_grad()):
            action(lib, x)
        if not recorded:
            return x.numpy(), None
        (x * lib.tensor(np.arange(1.0, 10.0), dtype=lib.float64)).sum().backward()
    except RuntimeError as error:
        return str(error)
    return x.detach().numpy(), leaf.grad.numpy()


@pytest.mark.parametrize("recorded", [False, True], ids=["no_grad", "recorded"])
@pytest.mark.parametrize("name", OVERLAP_CASES)
def test_writes_over_an_operands_memory_do_what_torch_does(name, recorded):
    action, error = OVERLAP_CASES[name]
    expected, outcome = _overlap_run(torch, action, recorded), _overlap_run(engine, action, recorded)
    if error is not None:
        assert error in expected and error in outcome, (expected, outcome)
    elif isinstance(expected, str):
        assert "modified by an inplace operation" in expected and "modified by an inplace operation" in outcome
    else:
        np.testing.assert_array_equal(outcome[0], expected[0])
        if recorded:
            np.testing.assert_allclose(outcome[1], expected[1], rtol=1e-15)


@pytest.mark.parametrize("recorded", [False, True], ids=["no_grad", "recorded"])
@pytest.mark.parametrize("action", [
    lambda lib, x: x[2::2].add_(x[:-2:2]),                      # x[4] reads x[2], written before it
    lambda lib, x: x[2::2].copy_(x[:-2:2]),
    lambda lib, x: x[:3].add_(x[:1].expand(3)),                 # x[1], x[2] read x[0]
    lambda lib, x: x.view(3, 3)[:, 1:].mul_(x.view(3, 3)[:, :-1]),
], ids=["add_ strided", "copy_ strided", "add_ expanded operand", "mul_ columns"])
def test_strided_views_read_where_they_write_are_refused_where_torchs_order_decides(action, recorded):
    """Torch computes these (its overlap check leaves strided views out) in its kernel's order,
    reading elements it has already written; the engine computes operands first, so it refuses
    rather than give another value."""
    assert "unsupported operation" not in str(_overlap_run(torch, action, recorded))
    assert "depends on the order its kernel visits the elements" in str(_overlap_run(engine, action, recorded))


# Writes into expanded views (elements sharing memory; NumPy's arrays are read-only, torch's are
# not: views.writable). Torch writes a part whose elements have their own memory, and a fill
# (fill_ of a number, zero_) or an index_put_ (deprecated, with a warning) of any part, through to
# the base; it refuses other writes (INTERNAL), and a recorded write into elements sharing memory
# raises INTERNAL in the backward when the base's gradient is wanted. x: a (2, 4) float64 tensor;
# v: a value of the shape the case gives. Each case runs unrecorded (no_grad), recorded (x in the
# graph, v requiring grad), with only v requiring grad ("value"), the gradients compared, and on
# a leaf requiring grad (torch's autograd refusal comes before its kernel's).
VIEW_OF_LEAF = "a view of a leaf Variable that requires grad is being used in an in-place operation"

EXPANDED_CASES = {
    # name: (value shape, write into x and v; outcome no_grad, recorded, value: None is a value)
    "fill_ of a size-1 dim expanded": ((), lambda lib, x, v: x[:1].expand(3, 4).fill_(2.0), None, INTERNAL, None),
    "zero_ of a new dim": ((), lambda lib, x, v: x[1].expand(3, 4).zero_(), None, INTERNAL, None),
    "fill_ of an expanded column": ((), lambda lib, x, v: x[:1].expand(3, 4)[:, 1].fill_(2.0), None, INTERNAL, None),
    "fill_ of one row": ((), lambda lib, x, v: x[:1].expand(3, 4)[2].fill_(2.0), None, None, None),
    "setitem one element": ((), lambda lib, x, v: x[1].expand(3, 4).__setitem__((0, 1), 5.0), None, None, None),
    "setitem one element, tensor": ((), lambda lib, x, v: x[1].expand(3, 4).__setitem__((2, 3), v), None, None, None),
    "setitem one row, tensor": ((4,), lambda lib, x, v: x[:1].expand(3, 4).__setitem__(1, v), None, None, None),
    "add_ one element": ((), lambda lib, x, v: x[1].expand(3, 4)[0, 1].add_(v), None, None, None),
    "mul_ one row": ((4,), lambda lib, x, v: x[:1].expand(3, 4)[0].mul_(v), None, None, None),
    "index_put_ rows": ((4,), lambda lib, x, v: x[1].expand(3, 4).__setitem__(lib.tensor([0, 2]), v),
                        None, INTERNAL, None),
    "index_put_ columns": ((), lambda lib, x, v: x[:1].expand(3, 4).__setitem__((slice(None), lib.tensor([1, 2])), v),
                           None, INTERNAL, None),
    "index_put_ a mask": ((), lambda lib, x, v: x[1].expand(3, 4).__setitem__(lib.tensor([True, False, True]), 3.0),
                          None, INTERNAL, None),
    "index_put_ into one row": ((2,), lambda lib, x, v: x[:1].expand(3, 4)[0].__setitem__(lib.tensor([1, 3]), v),
                                None, None, None),
    "fill_ with a tensor": ((), lambda lib, x, v: x[:1].expand(3, 4).fill_(v), INTERNAL, INTERNAL, INTERNAL),
    "copy_": ((4,), lambda lib, x, v: x[1].expand(3, 4).copy_(v), INTERNAL, INTERNAL, INTERNAL),
    "add_": ((), lambda lib, x, v: x[1].expand(3, 4).add_(1.0), INTERNAL, INTERNAL, INTERNAL),
    "relu_": ((), lambda lib, x, v: x[1].expand(3, 4).relu_(), INTERNAL, INTERNAL, INTERNAL),
    "setitem all": ((), lambda lib, x, v: x[1].expand(3, 4).__setitem__(Ellipsis, 5.0), INTERNAL, INTERNAL, INTERNAL),
    "setitem a column": ((), lambda lib, x, v: x[:1].expand(3, 4).__setitem__((slice(None), 1), v),
                         INTERNAL, INTERNAL, INTERNAL),
}


def _expanded_run(lib, case, mode):
    """The case on fresh tensors: x's values, the leaf's and v's gradients of a weighted sum of x
    (None where nothing records), or the error's message."""
    shape, action = EXPANDED_CASES[case][:2]
    leaf = lib.tensor(np.linspace(-2.0, 1.5, 8).reshape(2, 4), dtype=lib.float64,
                      requires_grad=mode in ("recorded", "leaf"))
    v = lib.tensor(np.full(shape, 5.0), dtype=lib.float64, requires_grad=mode != "no_grad")
    x = leaf * 1.0 if mode == "recorded" else leaf
    try:
        with (lib.no_grad() if mode == "no_grad" else contextlib.nullcontext()), warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Use of (index_put_|masked_fill_) on expanded tensors is deprecated")
            action(lib, x, v)
        if not x.requires_grad:
            return x.numpy(), None, None
        (x * lib.tensor(np.arange(1.0, 9.0).reshape(2, 4), dtype=lib.float64)).sum().backward()
    except RuntimeError as error:
        return str(error)
    return (x.detach().numpy(), leaf.grad.numpy() if mode == "recorded" else None,
            None if v.grad is None else v.grad.numpy())


@pytest.mark.parametrize("mode", ["no_grad", "recorded", "value", "leaf"])
@pytest.mark.parametrize("case", EXPANDED_CASES)
def test_writes_into_expanded_views_do_what_torch_does(case, mode):
    error = VIEW_OF_LEAF if mode == "leaf" else EXPANDED_CASES[case][2 + ["no_grad", "recorded", "value"].index(mode)]
    expected, outcome = _expanded_run(torch, case, mode), _expanded_run(engine, case, mode)
    if error is not None:
        assert error in expected and error in outcome, (expected, outcome)
        return
    assert not isinstance(expected, str) and not isinstance(outcome, str), (expected, outcome)
    for got, want in zip(outcome, expected):
        assert (got is None) == (want is None)
        if want is not None:
            np.testing.assert_array_equal(got, want)


def test_index_put_into_an_expanded_view_warns_and_refuses_where_torchs_order_decides():
    """Torch warns (deprecated) and writes in its kernel's order; the engine warns the same and
    refuses where elements sharing memory get different values (rows 0 and 1 here)."""
    for lib in (torch, engine):
        x = lib.zeros(4, dtype=lib.float64)
        with pytest.warns(UserWarning, match="Use of index_put_ on expanded tensors is deprecated"):
            x.expand(3, 4)[lib.tensor([2])] = lib.tensor([1.0, 2.0, 3.0, 4.0], dtype=lib.float64)
        np.testing.assert_array_equal(x.numpy(), [1.0, 2.0, 3.0, 4.0])
    values = np.arange(8.0).reshape(2, 4)
    with pytest.warns(UserWarning):
        torch.zeros(4, dtype=torch.float64).expand(3, 4)[torch.tensor([0, 1])] = torch.tensor(values)
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="depends on the order its kernel visits"):
        engine.zeros(4, dtype=engine.float64).expand(3, 4)[engine.tensor([0, 1])] = engine.tensor(values)
