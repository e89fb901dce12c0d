"""The engine's answers at the edges issue 26 found, each against torch 2.13: ignored targets,
out-of-range indices, views of non-contiguous tensors, floor division, stepped slices, integer
and bool inputs."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import reference_engine as engine
import reference_engine.nn.functional as EF


def both(values, dtype=np.float64, requires_grad=True):
    array = np.asarray(values, dtype=dtype)
    return (engine.tensor(array, requires_grad=requires_grad), torch.tensor(array, requires_grad=requires_grad))


def same_error(run_ours, run_theirs):
    """Both raise the same exception type with the same message."""
    with pytest.raises(Exception) as theirs:
        run_theirs()
    with pytest.raises(type(theirs.value), match=f"^{re.escape(str(theirs.value))}$"):
        run_ours()


def assert_same(ours, theirs):
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-12)


DATA = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


# ----------------------------------------------------------------------------- every target ignored
@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape, targets", [((2, 3), [-100, -100]), ((3,), -100), ((0, 3), []),
                                            ((2, 3), [-100, 1])])
def test_ignored_targets_give_torch_s_value_and_gradient(loss, reduction, shape, targets):
    """torch: every target ignored with mean reduction is 0 / 0 = NaN, and the gradient is zero."""
    x, xt = both(np.arange(np.prod(shape), dtype=np.float64).reshape(shape) / 5)
    target = np.asarray(targets, dtype=np.int64)
    ours = getattr(EF, loss)(x, engine.tensor(target), reduction=reduction)
    theirs = getattr(F, loss)(xt, torch.tensor(target), reduction=reduction)
    np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())
    weights = np.ones(tuple(theirs.shape))
    (g,) = engine.grad((ours * engine.tensor(weights)).sum(), x)
    (gt,) = torch.autograd.grad((theirs * torch.tensor(weights)).sum(), xt)
    np.testing.assert_array_equal(g.numpy(), gt.numpy())


# ----------------------------------------------------------------------------- indices out of range
def _index_calls(lib, x, index, indices):
    """(name, call) per indexing operator; ``index`` / ``indices`` build index tensors."""
    ones = lib.ones((2, 1), dtype=lib.float64)
    return [
        ("gather", lambda: lib.gather(x, 1, index([[indices[0]], [0]]))),
        ("scatter", lambda: lib.scatter(x.detach(), 1, index([[indices[0]], [0]]), ones)),
        ("scatter.value", lambda: lib.scatter(x.detach(), 1, index([[indices[0]], [0]]), 2.0)),
        ("scatter_add", lambda: lib.scatter_add(x.detach(), 1, index([[indices[0]], [0]]), ones)),
        ("index_add", lambda: lib.index_add(x.detach(), 1, index([indices[0]]), ones)),
        ("index_copy", lambda: lib.index_copy(x.detach(), 1, index([indices[0]]), ones)),
        ("index_select dim 1", lambda: lib.index_select(x, 1, index([indices[0]]))),
        ("index_select dim 0", lambda: lib.index_select(x, 0, index([indices[1]]))),
        ("index_select dim -1", lambda: lib.index_select(x, -1, index([indices[0]]))),
    ]


@pytest.mark.parametrize("indices", [(-1, -1), (3, 2), (-4, -3)])
def test_out_of_range_and_negative_indices_raise_as_torch(indices):
    x, xt = both(DATA)
    ours = _index_calls(engine, x, lambda v: engine.tensor(np.asarray(v, dtype=np.int64)), indices)
    theirs = _index_calls(torch, xt, lambda v: torch.tensor(v, dtype=torch.int64), indices)
    for (name, run_ours), (_, run_theirs) in zip(ours, theirs):
        same_error(run_ours, run_theirs)


def test_index_fill_wraps_negative_indices_as_torch():
    x, xt = both(DATA)
    assert_same(engine.index_fill(x, 1, engine.tensor([-1]), 2.0), torch.index_fill(xt, 1, torch.tensor([-1]), 2.0))


def test_indices_of_a_zero_dim_tensor_are_checked_as_torch():
    x, xt = both(5.0)
    same_error(lambda: engine.gather(x, 0, engine.tensor([-1])), lambda: torch.gather(xt, 0, torch.tensor([-1])))
    same_error(lambda: engine.index_select(x, 0, engine.tensor([1])),
               lambda: torch.index_select(xt, 0, torch.tensor([1])))
    assert_same(engine.index_select(x, 0, engine.tensor([0])), torch.index_select(xt, 0, torch.tensor([0])))


@pytest.mark.parametrize("name", ["scatter", "scatter_add"])
def test_scatter_reads_a_larger_src_at_index_s_positions_as_torch(name):
    """src larger than index in every dimension, the scatter dim included; indices repeat."""
    x, xt = both(np.zeros((3, 4)), requires_grad=False)
    src, src_t = both(np.arange(12.0).reshape(3, 4), requires_grad=False)
    index = [[0, 1], [2, 2], [1, 3]]
    assert_same(getattr(engine, name)(x, 1, engine.tensor(index), src),
                getattr(torch, name)(xt, 1, torch.tensor(index), src_t))


def test_masked_select_backward_reads_a_larger_grad_of_any_shape_as_torch():
    """grad's first elements, in row-major order, go to the mask's places (the mask broadcast with
    the input); a grad with fewer elements than the mask's ones is torch's error."""
    mask = [[True, False, True, False]]
    grad, grad_t = both(np.arange(12.0).reshape(3, 4), requires_grad=False)
    x, xt = both(np.zeros((3, 4)), requires_grad=False)
    assert_same(engine.masked_select_backward(grad, x, engine.tensor(mask)),
                torch.ops.aten.masked_select_backward(grad_t, xt, torch.tensor(mask)))
    short, short_t = both([1.0, 2.0, 3.0], requires_grad=False)
    same_error(lambda: engine.masked_select_backward(short, x, engine.tensor(mask)),
               lambda: torch.ops.aten.masked_select_backward(short_t, xt, torch.tensor(mask)))


# ----------------------------------------------------------------------------- view rules
@pytest.mark.parametrize("make, size", [(lambda x: x.t(), [6]), (lambda x: x[:, ::2], [4]),
                                        (lambda x: x.t(), [3, 2]), (lambda x: x.t().contiguous(), [6]),
                                        (lambda x: x.unsqueeze(1).expand(2, 2, 3), [4, 3]),
                                        (lambda x: x[:, 1:], [4])])
def test_view_refuses_what_the_strides_cannot_express_as_torch(make, size):
    x, xt = both(DATA)
    try:
        theirs = make(xt).view(size)
    except RuntimeError:
        same_error(lambda: make(x).view(size), lambda: make(xt).view(size))
        return
    ours = make(x).view(size)
    assert_same(ours, theirs)
    assert ours._base is (x if theirs._base is xt else None) or theirs._base is not xt
    (g,) = engine.grad((ours * engine.tensor(np.arange(6.0).reshape(size))).sum(), x)
    (gt,) = torch.autograd.grad((theirs * torch.arange(6.0, dtype=torch.float64).reshape(size)).sum(), xt)
    assert_same(g, gt)


def test_reshape_still_copies_where_a_view_cannot():
    x, xt = both(DATA)
    assert_same(x.t().reshape(6), xt.t().reshape(6))


# ----------------------------------------------------------------------------- floor division
FLOOR_CASES = [([5.0, -7.0, 5.5, -5.5, 0.0], 2), ([5.0, -7.0], [2.0, -2.0]), ([1.0, -1.0, 0.0], 0),
               ([5, -7, 6], 2), ([5, -5], [-2, 2]), ([1, 2], 2.5)]


@pytest.mark.parametrize("left, right", FLOOR_CASES)
def test_floor_division_is_torch_s(left, right):
    a, at_ = engine.tensor(left), torch.tensor(left)
    b, bt = (engine.tensor(right), torch.tensor(right)) if isinstance(right, list) else (right, right)
    for ours, theirs in ((a // b, at_ // bt), (engine.tensor(left).floor_divide(b), at_.floor_divide(bt))):
        assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    np.testing.assert_array_equal((7 // a).numpy(), (7 // at_).numpy())


def test_floor_division_errors_are_torch_s():
    same_error(lambda: engine.tensor([1]) // 0, lambda: torch.tensor([1]) // 0)
    same_error(lambda: engine.tensor([True]) // engine.tensor([True]),
               lambda: torch.tensor([True]) // torch.tensor([True]))


def test_floor_division_of_a_grad_tensor_records_a_node_whose_backward_raises_torch_s_error():
    x, xt = both([5.0, -7.0])
    ours, theirs = x // 2, xt // 2
    assert ours.requires_grad and theirs.requires_grad
    assert ours.grad_fn.name() == type(theirs.grad_fn).__name__ == "NotImplemented"
    same_error(lambda: (ours * x).sum().backward(), lambda: (theirs * xt).sum().backward())
    y = engine.tensor([1.0, 2.0], requires_grad=True)      # a backward that does not reach it runs
    (g,) = engine.grad((ours.detach() + y * y).sum(), y)
    np.testing.assert_array_equal(g.numpy(), [2.0, 4.0])
    with engine.no_grad():
        assert not (x // 2).requires_grad


# ----------------------------------------------------------------------------- stepped slices
@pytest.mark.parametrize("key", [(slice(None, None, 2),), (slice(None), slice(None, None, 2)),
                                 (slice(None), slice(1, None, 2)), (0, slice(None, None, 3)),
                                 (Ellipsis, slice(2, 0, 1)), (slice(1, 2, 5), None)],
                         ids=["rows", "columns", "odd columns", "int and step", "empty", "none"])
def test_stepped_slices_are_views_with_torch_s_gradients(key):
    x, xt = both(np.arange(12.0).reshape(2, 6))
    ours, theirs = x[key], xt[key]
    assert_same(ours, theirs)
    assert ours.shape == tuple(theirs.shape) and (ours._base is x or ours.numel() == 0)
    weights = np.random.default_rng(0).standard_normal(tuple(theirs.shape))
    (g,) = engine.grad((ours * engine.tensor(weights)).sum(), x, create_graph=True)
    (gt,) = torch.autograd.grad((theirs * torch.tensor(weights)).sum(), xt, create_graph=True)
    assert_same(g, gt)


def test_writing_through_a_stepped_slice_is_recorded_as_torch():
    x, xt = both(np.arange(12.0).reshape(2, 6))
    ours, theirs = x * 1, xt * 1
    ours[:, ::2] = 0.0
    theirs[:, ::2] = 0.0
    ours[1, 1::2] *= 3
    theirs[1, 1::2] *= 3
    assert_same(ours, theirs)
    (g,) = engine.grad((ours * x).sum(), x)
    (gt,) = torch.autograd.grad((theirs * xt).sum(), xt)
    assert_same(g, gt)


def test_backward_steps_are_refused_as_torch():
    x, xt = both(DATA)
    for key in (slice(None, None, -1), (slice(None), slice(None, None, 0))):
        same_error(lambda key=key: x[key], lambda key=key: xt[key])
    plain, plain_t = both(DATA, requires_grad=False)
    same_error(lambda: plain[::-2], lambda: plain_t[::-2])


# ----------------------------------------------------------------------------- integer and bool inputs
@pytest.mark.parametrize("op", ["sin", "cos", "tanh", "exp", "log", "sqrt", "sigmoid", "tan", "erf"])
@pytest.mark.parametrize("values", [[True, False], [1, 2, 3]], ids=["bool", "int64"])
def test_floating_unary_ops_compute_integers_and_bools_in_float32_as_torch(op, values):
    ours, theirs = getattr(engine, op)(engine.tensor(values)), getattr(torch, op)(torch.tensor(values))
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.") == "float32"
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.int64, np.bool_])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_integer_softmax_is_refused_as_torch(name, dtype):
    values = np.ones((2, 3), dtype)
    for dim in (0, 1, -1):
        same_error(lambda dim=dim: getattr(engine, name)(engine.tensor(values), dim),
                   lambda dim=dim: getattr(torch, name)(torch.tensor(values), dim))
    ours = getattr(engine, name)(engine.tensor(values), 1, dtype=engine.float64)
    assert_same(ours, getattr(torch, name)(torch.tensor(values), 1, dtype=torch.float64))


def test_mm_refuses_mixed_and_bool_dtypes_as_torch_and_multiplies_integers():
    for left, right in ((np.float64, np.float32), (np.float32, np.int64), (np.bool_, np.float32),
                        (np.bool_, np.bool_)):
        ours = engine.tensor(np.ones((1, 2), left)), engine.tensor(np.ones((2, 1), right))
        theirs = torch.tensor(np.ones((1, 2), left)), torch.tensor(np.ones((2, 1), right))
        same_error(lambda ours=ours: engine.mm(*ours), lambda theirs=theirs: torch.mm(*theirs))
    a, b = np.array([[1, 2]]), np.array([[3], [4]])
    assert_same(engine.mm(engine.tensor(a), engine.tensor(b)), torch.mm(torch.tensor(a), torch.tensor(b)))


def test_where_refuses_a_condition_that_is_not_bool_as_torch():
    for dtype in (np.int64, np.float32):
        condition = np.array([1, 0], dtype)
        same_error(lambda c=condition: engine.where(engine.tensor(c), engine.ones(2), engine.zeros(2)),
                   lambda c=condition: torch.where(torch.tensor(c), torch.ones(2), torch.zeros(2)))
    assert_same(engine.where(engine.tensor([True, False]), engine.tensor([1, 2]), engine.tensor([3.0, 4.0])),
                torch.where(torch.tensor([True, False]), torch.tensor([1, 2]), torch.tensor([3.0, 4.0])))


def test_floor_division_of_a_dual_tensor_is_refused_as_torch():
    from torch.func import jvp

    same_error(lambda: engine.jvp(lambda t: t // 2, (engine.ones(2),), (engine.ones(2),)),
               lambda: jvp(lambda t: t // 2, (torch.ones(2),), (torch.ones(2),)))


def test_a_refused_derivative_raises_the_same_error_in_the_engine_and_through_torch():
    """``embedding(sparse=True)``: torch's weight gradient is a sparse tensor, which the library does
    not make; its formula refuses with ``raise NotImplementedError("...")`` (the formula language's
    raise, :mod:`transpiler.raises`), and the engine and the formula swapped into torch raise it,
    rather than return a dense gradient where torch's is sparse."""
    from formulas.torch import override

    weight = np.linspace(0.0, 1.0, 12).reshape(4, 3)
    ours = engine.tensor(weight, requires_grad=True)
    with pytest.raises(NotImplementedError, match=r"^embedding\(sparse=True\): the formula library gives no sparse"):
        EF.embedding(engine.tensor(np.array([0, 2])), ours, sparse=True).sum().backward()
    theirs = torch.tensor(weight, requires_grad=True)
    F.embedding(torch.tensor([0, 2]), theirs, sparse=True).sum().backward()
    assert theirs.grad.layout == torch.sparse_coo
    swapped = torch.tensor(weight, requires_grad=True)
    with override(["embedding"]), pytest.raises(NotImplementedError, match=r"^embedding\(sparse=True\)"):
        F.embedding(torch.tensor([0, 2]), swapped, sparse=True).sum().backward()


def test_not_implemented_message_is_torch_s_text():
    """derivatives.yaml's ``not_implemented("igamma: input")`` entries become ``raise
    NotImplementedError(...)`` with :func:`transpiler.raises.not_implemented_message`'s text: torch's own."""
    from transpiler.raises import not_implemented_message

    x = torch.tensor([1.5, 2.0], dtype=torch.float64, requires_grad=True)
    with pytest.raises(NotImplementedError) as raised:
        torch.igamma(x, torch.ones(2, dtype=torch.float64)).sum().backward()
    assert str(raised.value) == not_implemented_message("igamma: input")


@pytest.mark.parametrize("shape, size", [((12,), [3, -1]), ((12,), [-1]), ((2, 3, 4), [4, -1, 2]), ((0, 3), [3, 0]),
                                         ((12,), [5, -1]), ((12,), [-1, -1]), ((12,), [5])])
def test_reshape_infers_and_refuses_sizes_as_torch(shape, size):
    array = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    ours, theirs = engine.tensor(array), torch.tensor(array)
    if tuple(size) in ((5, -1), (-1, -1), (5,)):
        same_error(lambda: ours.reshape(size), lambda: theirs.reshape(size))
    else:
        assert tuple(ours.reshape(size).shape) == tuple(theirs.reshape(size).shape)
