"""The torch-shaped public API, checked against torch: module functions, named tuples,
``max()``/``min()``, NumPy interop, advanced indexing, batched matmul, graph pictures."""
from __future__ import annotations

import importlib
import inspect
import runpy
import shutil
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import reference_engine as engine
from reference_engine.dispatch import dispatcher
from reference_engine.functions import COMPOSITES

dot_module = importlib.import_module("reference_engine.dot")   # engine.dot is the operator

REPO = Path(__file__).resolve().parents[2]


def f64(values, requires_grad=False):
    return engine.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


def both(values):
    """The same float64 leaf in the engine and in torch."""
    array = np.asarray(values, dtype=np.float64)
    return f64(array, True), torch.tensor(array, requires_grad=True)


def assert_same_gradients(ours, theirs, x, xt, seed=0):
    """Values, first-order gradients (random weights) and the gradient of the gradient."""
    assert ours.shape == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-12)
    weights = np.random.default_rng(seed).standard_normal(ours.shape)
    (g,) = engine.grad((ours * f64(weights)).sum(), x, create_graph=True)
    (gt,) = torch.autograd.grad((theirs * torch.tensor(weights)).sum(), xt, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-12, atol=1e-12)
    if gt.requires_grad:
        (gg,) = engine.grad((g * g).sum(), x, allow_unused=True)
        (ggt,) = torch.autograd.grad((gt * gt).sum(), xt, allow_unused=True)
        if ggt is None:
            assert gg is None or not gg.numpy().any()
        else:
            np.testing.assert_allclose(gg.numpy(), ggt.numpy(), rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- module functions
@pytest.mark.parametrize("name", sorted(dispatcher.packets))
def test_every_declared_operator_is_a_module_function(name):
    explicit = name in COMPOSITES or name in engine.__all__         # a composite, or a factory (zeros_like)
    assert getattr(engine, name) is dispatcher.packets[name].op or explicit
    assert name in dir(engine)


def test_every_declared_operator_taking_self_is_a_method():
    """... or an attribute where torch's is one (``x.real``, ``x.mT``, ``x.mH``)."""
    for name, packet in dispatcher.packets.items():
        if not name.startswith("_") and any(o.schema.arguments[0].name == "self" for o in packet.overloads):
            if isinstance(inspect.getattr_static(torch.Tensor, name, None), types.GetSetDescriptorType):
                assert isinstance(inspect.getattr_static(engine.Tensor, name), property), name
            else:
                assert callable(getattr(engine.Tensor, name)), name


def test_matrix_attributes_are_torchs():
    x, xt = both([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    for attribute in ("real", "mT", "mH"):
        np.testing.assert_array_equal(getattr(x, attribute).detach().numpy(), getattr(xt, attribute).detach().numpy())


def test_module_functions_compute_what_torch_computes():
    x, xt = both([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    y, yt = both([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]])
    cases = [
        (engine.sin(x), torch.sin(xt)),
        (engine.mm(x, y), torch.mm(xt, yt)),
        (engine.cat([x, x * 2], 0), torch.cat([xt, xt * 2], 0)),
        (engine.where(x > 0, x, -x), torch.where(xt > 0, xt, -xt)),
        (engine.matmul(x, y), torch.matmul(xt, yt)),
        (engine.softmax(x, 1), torch.softmax(xt, 1)),
        (engine.log_softmax(x, 0), torch.log_softmax(xt, 0)),
        (engine.mean(x), torch.mean(xt)),
        (engine.transpose(x, 0, 1), torch.transpose(xt, 0, 1)),
        (engine.flatten(x), torch.flatten(xt)),
        (engine.reshape(x, (3, 2)), torch.reshape(xt, (3, 2))),
        (engine.max(x), torch.max(xt)),
        (engine.stack([x, x * 2, x.sin()], 1), torch.stack([xt, xt * 2, xt.sin()], 1)),
        (engine.stack([x], -1), torch.stack([xt], -1)),
        (engine.min(x, 1).values, torch.min(xt, 1).values),
    ]
    for i, (ours, theirs) in enumerate(cases):
        assert_same_gradients(ours, theirs, x, xt, seed=i)


def test_stack_refuses_what_torch_refuses():
    for tensors, message in (([], "non-empty TensorList"), ([f64([1.0]), f64([1.0, 2.0])], "equal size")):
        with pytest.raises(RuntimeError, match=message):
            engine.stack(tensors)
        with pytest.raises(RuntimeError, match=message):
            torch.stack([torch.tensor(t.numpy()) for t in tensors])


def test_an_undeclared_name_is_a_plain_attribute_error_and_a_defined_one_appears():
    with pytest.raises(AttributeError, match="^module 'reference_engine' has no attribute 'sinc_api_test'$"):
        engine.sinc_api_test
    assert not hasattr(engine, "__wrapped__")
    try:
        engine.define("sinc_api_test(Tensor self) -> Tensor", np.sinc)
        np.testing.assert_allclose(engine.sinc_api_test(f64([0.5])).numpy(), np.sinc([0.5]))
    finally:
        dispatcher.local.pop("sinc_api_test")
        engine.refresh()


# ----------------------------------------------------------------------------- named tuples, max, min
def test_max_dim_returns_values_and_indices_like_torch():
    x, xt = both([[1.0, 3.0, 3.0], [4.0, 2.0, 0.0]])
    ours, theirs = x.max(1), xt.max(1)
    assert type(ours).__name__ == "max" and ours._fields == ("values", "indices")
    np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
    assert_same_gradients(ours.values, theirs.values, x, xt)
    with engine.no_grad():
        assert x.max(0, keepdim=True).indices.shape == (1, 3)
    low, lowt = x.min(1), xt.min(1)
    assert type(low).__name__ == "min"
    np.testing.assert_array_equal(low.indices.numpy(), lowt.indices.numpy())
    assert type(x.var_mean(1)) is tuple       # unnamed returns stay a plain tuple, as torch's


@pytest.mark.parametrize("values", [[1.0, 5.0, 2.0], [3.0, 3.0, 1.0, 3.0], [[2.0, -1.0], [2.0, 0.5]], [7.0]])
def test_max_and_min_of_all_elements_spread_the_gradient_over_ties_like_torch(values):
    x, xt = both(values)
    assert_same_gradients(x.max(), xt.max(), x, xt)
    assert_same_gradients(x.min(), xt.min(), x, xt)
    assert_same_gradients(engine.max(-x * 2), torch.max(-xt * 2), x, xt)
    if len(set(np.ravel(values))) == np.size(values):      # finite differences need no ties
        assert engine.gradcheck(lambda t: t.max() * t.sum(), (x,))
        assert engine.gradgradcheck(lambda t: t.min() * t.sum(), (x,))


def test_max_of_all_elements_refuses_what_it_cannot_differentiate():
    with pytest.raises(RuntimeError, match="Specify the reduction dim"):
        f64(np.zeros((0,)), True).max()
    x, xt = both([np.inf, np.inf, 1.0])          # tied infinities share the gradient, as in torch
    assert_same_gradients(x.max(), xt.max(), x, xt)
    assert f64([np.inf, np.inf]).max().item() == np.inf     # values alone are fine
    with pytest.raises(TypeError, match="min\\(other\\)"):
        f64([1.0]).min(f64([2.0]))


def test_argmax_and_argmin_match_torch():
    values = np.array([[1.0, 4.0, 4.0], [-2.0, -2.0, 0.0]])
    x, xt = f64(values), torch.tensor(values)
    for ours, theirs in ((x.argmax(), xt.argmax()), (x.argmax(1), xt.argmax(1)),
                         (x.argmin(0, keepdim=True), xt.argmin(0, keepdim=True)), (x.argmin(), xt.argmin())):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


# ----------------------------------------------------------------------------- NumPy interop
def test_asarray_gives_the_values_and_refuses_a_tensor_that_requires_grad_like_torch():
    x = f64([[1.0, 2.0], [3.0, 4.0]])
    array = np.asarray(x)
    assert array.dtype == np.float64 and array.shape == (2, 2)
    assert np.asarray(x, dtype=np.float32).dtype == np.float32
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
        np.asarray(f64([1.0], True))
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
        np.asarray(torch.ones(1, requires_grad=True))


def test_numpy_arrays_and_ufuncs_on_tensors_give_recorded_engine_tensors():
    x, xt = both([0.5, -1.0, 2.0, 1.5])
    ones = np.ones(4)
    cases = [
        (np.ones(4) + x, torch.tensor(ones) + xt),
        (x + np.ones(4), xt + torch.tensor(ones)),
        (np.arange(4.0) * x - x / (np.ones(4) * 3), torch.arange(4.0, dtype=torch.float64) * xt - xt / 3),
        (np.sin(x), torch.sin(xt)),
        (np.exp(x) ** 2, torch.exp(xt) ** 2),
        (np.matmul(np.ones((2, 4)), x), torch.ones(2, 4, dtype=torch.float64) @ xt),
        (np.float64(2.0) * x, 2.0 * xt),
    ]
    for i, (ours, theirs) in enumerate(cases):
        assert type(ours) is engine.Tensor and ours.grad_fn is not None, i
        assert_same_gradients(ours, theirs, x, xt, seed=i)
    compared = np.ones(4) > x
    assert type(compared) is engine.Tensor and compared.dtype == engine.bool


@pytest.mark.parametrize("scalar", [np.float64(2.5), np.float32(2.5), np.int64(2)], ids=["f64", "f32", "i64"])
def test_numpy_scalars_are_python_numbers_for_the_result_dtype_like_torch(scalar):
    x, xt = engine.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])       # float32
    for ours, theirs in ((x * scalar, xt * scalar), (scalar * x, scalar * xt), (x + scalar, xt + scalar),
                         (x / scalar, xt / scalar), (x ** scalar, xt ** scalar), (x - scalar, xt - scalar)):
        assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


def test_a_ufunc_without_an_operator_runs_in_numpy_or_refuses_a_tensor_that_requires_grad():
    x = f64([0.5, 1.0])
    out = np.cbrt(x)
    assert type(out) is engine.Tensor
    np.testing.assert_allclose(out.numpy(), np.cbrt([0.5, 1.0]))
    with pytest.raises(TypeError, match="numpy.cbrt .* declares no 'cbrt' operator"):
        np.cbrt(f64([0.5], True))
    with pytest.raises(TypeError, match="out=...\\) cannot write into an engine tensor"):
        np.sin(x, out=x)


# ----------------------------------------------------------------------------- indexing
INDEX_KEYS = [
    ("list", lambda t: [2, 0, 2]),
    ("negative", lambda t: [-1]),
    ("after a slice", lambda t: (slice(None), [3, 0])),
    ("two arrays", lambda t: ([0, 1], [3, 0])),
    ("arrays apart", lambda t: ([0, 2], slice(None), [1, 1])),
    ("int then array apart (torch selects the int first)", lambda t: (0, slice(None), [1, 3])),
    ("int next to array", lambda t: (1, [1, 3])),
    ("2-d index", lambda t: (slice(1, 3), [[0, 1], [2, 3]])),
    ("ellipsis", lambda t: (Ellipsis, [4, -1])),
    ("mask", lambda t: t > 0.3),
    ("leading mask", lambda t: t[:, :, 0] > 0),
    ("mask after a slice", lambda t: (slice(None), t[0] > 0)),
    ("mask after an ellipsis", lambda t: (Ellipsis, t[0, 0] > 0)),
    ("empty mask", lambda t: t > 100),
]


@pytest.mark.parametrize("key", [k for _, k in INDEX_KEYS], ids=[n for n, _ in INDEX_KEYS])
def test_integer_array_and_boolean_mask_indexing_is_recorded_like_torch(key):
    values = np.random.default_rng(1).standard_normal((3, 4, 5))
    x, xt = both(values)
    ours, theirs = x[key(x)], xt[key(xt)]
    assert ours.grad_fn is not None
    assert_same_gradients(ours, theirs, x, xt)
    with engine.no_grad():
        np.testing.assert_array_equal(x[key(x)].numpy(), ours.detach().numpy())


def test_repeated_indices_accumulate_and_double_backward_holds():
    x = f64([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], True)
    assert engine.gradcheck(lambda t: t[[0, 0, 2]] * t[[2, 1, 0]], (x,))
    assert engine.gradgradcheck(lambda t: (t[t > 2.5] ** 2).sum() * t[[1, 1]], (x,))


def test_indexing_errors_match_torch():
    x = f64(np.zeros((3, 4)), True)
    cases = [(lambda t: t[[5]], "index 5 is out of bounds for dimension 0 with size 3"),
             (lambda t: t[np.zeros(4, bool)], "The shape of the mask \\[4\\] at index 0 does not match"),
             (lambda t: t[[0, 1], [0, 1, 2]], "shape mismatch: indexing tensors could not be broadcast")]
    for index, message in cases:
        with pytest.raises(IndexError, match=message):
            index(x)
        with pytest.raises(IndexError, match=message):
            index(torch.zeros(3, 4))
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool tensors"):
        x[[0.5]]        # (torch reads a float list as an index; the engine refuses it)
    with pytest.raises(IndexError, match="not supported by the reference engine"):
        x[::2, [0]]


@pytest.mark.parametrize("key", [k for _, k in INDEX_KEYS], ids=[n for n, _ in INDEX_KEYS])
def test_indexing_with_arrays_records_index_tensor(key):
    x = f64(np.random.default_rng(1).standard_normal((3, 4, 5)), True)
    assert x[key(x)].grad_fn.name() == "IndexTensorBackward0"


def _writes(t, v, key):
    """``t * t`` with ``key`` assigned ``v * v``, then a non-linear loss (second order through both)."""
    y = t * t
    y[key] = v * v
    return (y * y * y).sum()


WRITE_KEYS = [
    ("mask", lambda t: t > 0.3, lambda n: (n,)),
    ("mask, one value", lambda t: t > 0.3, lambda n: ()),
    ("rows", lambda t: [2, 0], lambda n: (5,)),
    ("after a slice", lambda t: (slice(None), [3, 0]), lambda n: (3, 1, 5)),
    ("two arrays", lambda t: ([0, 1], [3, 0]), lambda n: (2, 5)),
    ("ellipsis", lambda t: (Ellipsis, [4, 1]), lambda n: (2,)),
    ("int beside an array (selected first)", lambda t: (0, slice(None), [1, 3]), lambda n: (4, 2)),
    ("slice beside an array", lambda t: (slice(1, 3), [0, 2]), lambda n: (2, 5)),
    ("array then int", lambda t: ([2, 0], 1), lambda n: (2, 1)),
]


@pytest.mark.parametrize("key, shape", [(k, s) for _, k, s in WRITE_KEYS], ids=[n for n, _, _ in WRITE_KEYS])
def test_item_assignment_with_arrays_is_index_put_recorded_like_torch(key, shape):
    rng = np.random.default_rng(3)
    x, xt = both(rng.standard_normal((3, 4, 5)))
    n = int((xt > 0.3).sum())
    v, vt = both(rng.standard_normal(shape(n)))
    loss, loss_t = _writes(x, v, key(x)), _writes(xt, vt, key(xt))
    np.testing.assert_allclose(loss.item(), loss_t.item(), rtol=1e-12)
    grads = engine.grad(loss, (x, v), create_graph=True)
    grads_t = torch.autograd.grad(loss_t, (xt, vt), create_graph=True)
    for g, gt in zip(grads, grads_t):
        np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-10, atol=1e-12)
    second = engine.grad(sum((g * g).sum() for g in grads), (x, v))
    second_t = torch.autograd.grad(sum((g * g).sum() for g in grads_t), (xt, vt))
    for g, gt in zip(second, second_t):
        np.testing.assert_allclose(g.numpy(), gt.numpy(), rtol=1e-10, atol=1e-10)


def test_item_assignment_with_arrays_records_index_put_and_refuses_a_leaf():
    x = f64(np.zeros((3, 4)), True)
    y = x * 1.0
    y[y < 1.0] = 2.0
    assert y.grad_fn.name() == "IndexPutBackward0"
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        x[[0, 1]] = 1.0
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        torch.zeros(3, 4, requires_grad=True)[[0, 1]] = 1.0


def test_index_put_errors_match_torch():
    put = engine.op("index_put")
    for indices, values, message, error in (
            ([[0, 1]], np.ones((3, 4)), "shape mismatch: value tensor of shape \\[3, 4\\] cannot be broadcast "
                                        "to indexing result of shape \\[2, 4\\]", RuntimeError),
            ([[0, 1]], np.ones((1, 2, 4)), "cannot be broadcast to indexing result", RuntimeError),
            ([[0, 7]], np.ones(4), "index 7 is out of bounds for dimension 0 with size 3", IndexError)):
        with pytest.raises(error, match=message):
            put(f64(np.zeros((3, 4))), [engine.tensor(np.asarray(i)) for i in indices], f64(values))
        with pytest.raises(error, match=message):
            torch.ops.aten.index_put(torch.zeros(3, 4, dtype=torch.float64), [torch.tensor(i) for i in indices],
                                     torch.tensor(values))


@pytest.mark.parametrize("indices, message", [
    ([], "at least one index must be provided"),
    ([[0], [1], [0]], "too many indices for tensor of dimension 2 \\(got 3\\)"),
    ([[-4]], "index -4 is out of bounds for dimension 0 with size 3"),
    ([np.zeros((2, 3), bool)], "The shape of the mask \\[2, 3\\] at index 0 does not match the shape of the "
                               "indexed tensor \\[3, 4\\] at index 0"),
    ([[0, 1], [0, 1, 2]], "shape mismatch: indexing tensors could not be broadcast together with shapes "
                          "\\[2\\], \\[3\\]"),
    ([np.asarray([0.5])], "tensors used as indices must be long, int, byte or bool tensors"),
], ids=["none", "too many", "out of bounds", "mask shape", "broadcast", "float"])
def test_index_tensor_errors_match_torch(indices, message):
    with pytest.raises(IndexError, match=message):
        engine.op("index.Tensor")(f64(np.zeros((3, 4))), [engine.tensor(np.asarray(i)) for i in indices])
    with pytest.raises(IndexError, match=message):
        torch.ops.aten.index.Tensor(torch.zeros(3, 4), [torch.tensor(np.asarray(i)) for i in indices])


# ----------------------------------------------------------------------------- matmul
@pytest.mark.parametrize("left, right", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                                         ((5, 2, 3), (3, 4)), ((5, 2, 3), (3,)), ((3,), (5, 3, 4)),
                                         ((5, 2, 3), (5, 3, 4)), ((4, 1, 2, 3), (5, 3, 2)), ((2, 0, 3), (3, 4))])
def test_matmul_with_batches_matches_torch(left, right):
    rng = np.random.default_rng(2)
    a, at = both(rng.standard_normal(left))
    b, bt = both(rng.standard_normal(right))
    ours, theirs = a @ b, at @ bt
    assert ours.shape == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), atol=1e-12)
    weights = rng.standard_normal(ours.shape)
    grads = engine.grad((ours * f64(weights)).sum(), [a, b])
    expected = torch.autograd.grad((theirs * torch.tensor(weights)).sum(), [at, bt])
    for g, e in zip(grads, expected):
        np.testing.assert_allclose(g.numpy(), e.numpy(), atol=1e-12)


def test_matmul_shape_errors_say_what_torch_says():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        f64(np.zeros((2, 3))) @ f64(np.zeros((4, 5)))
    with pytest.raises(RuntimeError, match=r"shapes cannot be multiplied \(2x3 and 7x4x5\)"):
        f64(np.zeros((2, 3))) @ f64(np.zeros((7, 4, 5)))
    with pytest.raises(RuntimeError, match="both arguments to matmul need to be at least 1D"):
        f64(1.0) @ f64([1.0])


@pytest.mark.parametrize("pad, message", [([1], "Length of pad must be even but instead it equals 1"),
                                          ([1, 1, 1, 1, 1, 1], "Pad length is 6while the input has 2dimensions"),
                                          ([-4, 1], "narrow\\(\\): length must be non-negative"),
                                          ([2, -5], "narrow\\(\\): length must be non-negative")])
def test_constant_pad_nd_errors_say_what_torch_says(pad, message):
    with pytest.raises(RuntimeError, match=message):
        dispatcher.call("constant_pad_nd", (f64(np.zeros((2, 3))), pad, 0), {})
    with pytest.raises(RuntimeError, match=message):
        torch.constant_pad_nd(torch.zeros(2, 3), pad)


_SPLIT_ERRORS = [
    (lambda lib, x: x.split(0), RuntimeError, "split_size can only be 0 if dimension size is 0, but got dimension size of 5"),
    (lambda lib, x: x.split(-1), RuntimeError, "split expects split_size be non-negative, but got split_size=-1"),
    (lambda lib, x: x.split(2, 2), IndexError, r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
    (lambda lib, x: x.split_with_sizes([2, 2]), RuntimeError,
     r"split_with_sizes expects split_sizes to sum exactly to 5 \(input tensor's size at dimension 0\), but got "
     r"split_sizes=\[2, 2\]"),
    (lambda lib, x: x.split_with_sizes([6, -1]), RuntimeError,
     r"split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=\[6, -1\]"),
    (lambda lib, x: x.chunk(0), RuntimeError, "chunk expects `chunks` to be greater than 0, got: 0"),
    (lambda lib, x: x.unbind(3), IndexError, "Dimension out of range"),
    (lambda lib, x: x.sum().unbind(), IndexError, "Dimension specified as 0 but tensor has no dimensions"),
    (lambda lib, x: x.sum().split(1), RuntimeError, "split expects at least a 1-dimensional tensor"),
    (lambda lib, x: x.sum().chunk(1), RuntimeError, "chunk expects at least a 1-dimensional tensor"),
]


@pytest.mark.parametrize("action, error, message", _SPLIT_ERRORS, ids=range(len(_SPLIT_ERRORS)))
def test_split_chunk_unbind_errors_say_what_torch_says(action, error, message):
    for lib, x in ((engine, f64(np.zeros((5, 3)))), (torch, torch.zeros(5, 3, dtype=torch.float64))):
        with pytest.raises(error, match=message):
            action(lib, x)


def test_split_chunk_unbind_as_module_functions_and_methods_unpack_like_torch():
    values = np.arange(12.0).reshape(4, 3)
    results = []
    for lib, x in ((engine, f64(values, True)), (torch, torch.tensor(values, requires_grad=True))):
        first, rest = lib.split(x, [1, 3])
        a, b = x.chunk(2, 1)
        rows = x.unbind()
        top, bottom = x.split(2)
        loss = (first * 2.0).sum() + (rest * rest).sum() + (a * b[..., :1]).sum() + (rows[3] ** 3).sum() \
            + lib.unbind(bottom, 1)[2].sum() + top.sum()
        (grad,) = (engine.grad if lib is engine else torch.autograd.grad)(loss, [x])
        results.append(([t.shape for t in (first, rest, a, b, *rows)], np.asarray(grad.detach().tolist())))
    assert [tuple(s) for s in results[0][0]] == [tuple(s) for s in results[1][0]]
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-12)


_INF = float("inf")


@pytest.mark.parametrize("op, args, kwargs, error, message", [
    ("linalg_vector_norm", (np.zeros((0, 3)), _INF), {}, RuntimeError,
     "cannot compute the inf norm on an empty tensor because the operation does not have an identity"),
    ("linalg_vector_norm", (np.zeros((0, 3)), -_INF), {}, RuntimeError, "cannot compute the -inf norm on an empty"),
    ("linalg_vector_norm", (np.zeros((0, 3)), _INF, [0]), {}, RuntimeError,
     "cannot compute the inf norm on the dimension 0because this dimension is empty"),
    ("linalg_vector_norm", (np.ones(3, dtype=np.int64),), {}, RuntimeError,
     "Expected a floating point or complex tensor as input. Got Long"),
    ("linalg_vector_norm", (np.ones(3),), {"dtype": np.float32}, RuntimeError,
     "the dtype of the input \\(Double\\) should be convertible without narrowing to the specified dtype \\(Float\\)"),
    ("linalg_vector_norm", (np.ones(3),), {"dtype": np.int64}, RuntimeError,
     "dtype should be floating point or complex, but got Long"),
    ("linalg_vector_norm", (np.ones((2, 3)), 2, [5]), {}, IndexError, "Dimension out of range"),
    ("norm.Scalar", (np.ones(3, dtype=np.int64),), {}, RuntimeError,
     "norm\\(\\): input dtype should be either floating point or complex. Got Long instead."),
    ("norm.ScalarOpt_dim", (np.ones((2, 3), dtype=np.bool_), 2, [0]), {}, RuntimeError, "Got Bool instead."),
    ("norm.ScalarOpt_dim", (np.zeros((0, 3)), _INF, [0]), {}, RuntimeError, "on the dimension 0because"),
    ("cumprod", (np.ones((2, 3)), 2), {}, IndexError, "Dimension out of range"),
])
def test_norm_and_cumprod_errors_say_what_torch_says(op, args, kwargs, error, message):
    engine_args = tuple(f64(a) if isinstance(a, np.ndarray) and a.dtype == np.float64
                        else engine.tensor(a) if isinstance(a, np.ndarray) else a for a in args)
    engine_kwargs = {k: getattr(engine, np.dtype(v).name) for k, v in kwargs.items()}
    name, _, overload = op.partition(".")
    with pytest.raises(error, match=message):
        dispatcher.call(name, engine_args, engine_kwargs)      # the engine picks the overload
    torch_args = tuple(torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args)
    torch_kwargs = {k: getattr(torch, np.dtype(v).name) for k, v in kwargs.items()}
    with pytest.raises(error, match=message):
        getattr(getattr(torch.ops.aten, name), overload or "default")(*torch_args, **torch_kwargs)


def test_norm_methods_and_functions_reach_the_declared_overloads():
    """``x.norm()``, ``x.norm(p, dim, keepdim)``, ``engine.linalg_vector_norm`` and ``x.cumprod(dim)``
    compute what torch's do."""
    values = np.array([[3.0, -4.0, 0.0], [1.0, 2.0, -2.0]])
    x, t = f64(values), torch.from_numpy(values)
    np.testing.assert_allclose(x.norm().numpy(), t.norm().numpy())
    np.testing.assert_allclose(x.norm(1.0, [1], True).numpy(), t.norm(1.0, [1], True).numpy())
    np.testing.assert_allclose(x.norm(None, [0]).numpy(), torch.ops.aten.norm.ScalarOpt_dim(t, None, [0]).numpy())
    np.testing.assert_allclose(engine.linalg_vector_norm(x, _INF, [1]).numpy(),
                               torch.linalg.vector_norm(t, _INF, [1]).numpy())
    np.testing.assert_allclose(x.cumprod(1).numpy(), t.cumprod(1).numpy())


_CONVOLUTION_ERRORS = [
    # (input shape, weight shape, bias shape, stride, padding, dilation, transposed, output_padding, groups), message
    (((2, 4), (6, 2, 3), None, [1], [0], [1], False, [0], 2),
     r"Expected 3-dimensional input for 3-dimensional weight \[6, 2, 3\], but got 2-dimensional input of size \[2, 4\]"),
    (((2, 4, 7), (6, 2, 3), None, [1], [0], [1], False, [0], 1),
     r"Given groups=1, weight of size \[6, 2, 3\], expected input\[2, 4, 7\] to have 2 channels, but got 4 channels"),
    (((2, 4, 7), (5, 2, 3), None, [1], [0], [1], False, [0], 2),
     r"Given groups=2, expected weight to be divisible by 2 at dimension 0"),
    (((2, 4, 7), (1, 4, 3), None, [1], [0], [1], False, [0], 2),
     r"Given groups=2, expected weight to be at least 2 at dimension 0"),
    (((2, 4, 7), (6, 2, 9), None, [1], [0], [1], False, [0], 2),
     r"Calculated padded input size per channel: \(7\). Kernel size: \(9\). Kernel size can't be greater"),
    (((2, 4, 7), (6, 2, 3), (5,), [1], [0], [1], False, [0], 2),
     r"expected bias to be 1-dimensional with 6 elements, but got bias of size \[5\]"),
    (((2, 4, 7), (4, 3, 3), (5,), [2], [1], [1], True, [1], 2),
     r"Given transposed=1, weight of size \[4, 3, 3\], expected bias to be 1-dimensional with 6 elements"),
    (((2, 4, 7), (6, 2, 3), None, [1], [0], [1], True, [0], 2),
     r"Given transposed=1, weight of size \[6, 2, 3\], expected input\[2, 4, 7\] to have 6 channels"),
    (((2, 4, 7), (6, 2, 3), None, [1, 1], [0], [1], False, [0], 2),
     r"expected stride to be a single integer value or a list of 1 values to match the convolution dimensions"),
    (((2, 4, 7), (6, 2, 3), None, [0], [0], [1], False, [0], 2), "non-positive stride is not supported"),
    (((2, 4, 7), (6, 2, 3), None, [1], [-1], [1], False, [0], 2), "negative padding is not supported"),
    (((2, 4, 7), (6, 2, 3), None, [1], [0], [0], False, [0], 2), "non-positive dilation is not supported"),
    (((2, 4, 7), (6, 2, 3), None, [1], [0], [1], False, [0], 0), "non-positive groups is not supported"),
    (((2, 4, 7), (4, 3, 3), None, [2], [1], [1], True, [-1], 2), "negative output_padding is not supported"),
    (((4, 7), (6, 4), None, [1], [0], [1], False, [0], 1), "weight should have at least three dimensions"),
]


@pytest.mark.parametrize("arguments, message", _CONVOLUTION_ERRORS, ids=lambda v: str(v)[:40])
def test_convolution_errors_say_what_torch_says(arguments, message):
    input_shape, weight_shape, bias_shape, *rest = arguments
    with pytest.raises(RuntimeError, match=message):
        dispatcher.call("convolution", (f64(np.zeros(input_shape)), f64(np.zeros(weight_shape)),
                                        None if bias_shape is None else f64(np.zeros(bias_shape)), *rest), {})
    with pytest.raises(RuntimeError, match=message):
        torch.ops.aten.convolution(torch.zeros(input_shape), torch.zeros(weight_shape),
                                   None if bias_shape is None else torch.zeros(bias_shape), *rest)


def test_convolution_refuses_what_torch_refuses_with_its_own_message():
    # torch's message here comes from its backend (oneDNN: "could not construct a memory descriptor"): ours names
    # the cause; both refuse
    with pytest.raises(RuntimeError, match="the calculated output size \\[-11\\] is too small"):
        dispatcher.call("convolution", (f64(np.zeros((2, 4, 7))), f64(np.zeros((4, 3, 3))), None, [1], [10], [1],
                                        True, [0], 2), {})
    with pytest.raises(RuntimeError):
        torch.ops.aten.convolution(torch.zeros(2, 4, 7), torch.zeros(4, 3, 3), None, [1], [10], [1], True, [0], 2)
    # torch spells the output_padding bound per height and width; ours per dim
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride or dilation"):
        dispatcher.call("convolution", (f64(np.zeros((2, 4, 7))), f64(np.zeros((4, 3, 3))), None, [2], [1], [1],
                                        True, [2], 2), {})
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride or dilation"):
        torch.ops.aten.convolution(torch.zeros(2, 4, 7), torch.zeros(4, 3, 3), None, [2], [1], [1], True, [2], 2)


@pytest.mark.parametrize("op, input_shape, weight_shape, message", [
    ("conv1d", (4,), (6, 4, 3),
     r"Expected 2D \(unbatched\) or 3D \(batched\) input to conv1d, but got input of size: \[4\]"),
    ("conv2d", (4, 5), (6, 4, 3, 3), r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d"),
    ("conv_transpose1d", (4,), (4, 3, 3), r"Expected 2D \(unbatched\) or 3D \(batched\) input to conv_transpose1d")])
def test_conv_functions_check_the_input_rank_as_torch_does(op, input_shape, weight_shape, message):
    with pytest.raises(RuntimeError, match=message):
        getattr(engine, op)(f64(np.zeros(input_shape)), f64(np.zeros(weight_shape)))
    with pytest.raises(RuntimeError, match=message):
        getattr(torch.nn.functional, op)(torch.zeros(input_shape), torch.zeros(weight_shape))


def test_conv2d_as_users_call_it_matches_torch():
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((2, 3, 6, 5)), rng.standard_normal((4, 3, 3, 2)), rng.standard_normal(4)
    ours = engine.conv2d(f64(x, True), f64(w, True), f64(b, True), stride=2, padding=1, dilation=(1, 2))
    theirs = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), stride=2,
                                        padding=1, dilation=(1, 2))
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- pictures
def test_to_dot_labels_operators_shapes_dtypes_values_and_grads():
    x = f64([1.0, 2.0], True)
    var, mean = x.var_mean(0)
    loss = (x.sin() * 3.0).sum() + mean
    loss.backward()
    dot = engine.to_dot(loss, "loss", params={"x": x}, show_values=True, show_grads=True)
    assert '"MulScalarBackward0\\nmul.Scalar\\n-> (2,) float64"' in dot
    assert '"VarMeanDimBackward0\\nvar_mean.dim\\n-> 1: () float64"' in dot      # which output is used
    assert '"AccumulateGrad x\\n(2,) float64\\ndata [1., 2.]\\ngrad [ 2.1209, -0.7484]"' in dot
    assert '-> n' in dot and ' [label="1"];' in dot


def test_render_writes_svg_or_says_what_to_install(tmp_path, monkeypatch):
    loss = (f64([1.0, 2.0], True).exp() * 2.0).sum()
    if shutil.which("dot") is None:
        with pytest.raises(RuntimeError, match="install Graphviz"):
            engine.render(loss, tmp_path / "graph.svg")
    else:
        path = engine.render(loss, tmp_path / "graph.svg", "loss")
        assert "<svg" in path.read_text() and "ExpBackward0" in path.read_text()
    monkeypatch.setattr(dot_module.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="needs Graphviz's `dot` program, which is not on PATH: install"):
        engine.render(loss, tmp_path / "graph.png")
    with pytest.raises(ValueError, match="cannot tell the format"):
        engine.render(loss, tmp_path / "graph.txt")


def test_readme_classifier_trains_and_is_the_code_the_readme_shows():
    source = (REPO / "examples" / "classifier.py").read_text()
    body = source.split('"""\n', 1)[1].split('\n\nif __name__')[0].strip()      # after the docstring
    assert body in (REPO / "README.md").read_text()
    example = runpy.run_path(str(REPO / "examples" / "classifier.py"))
    losses = example["train"](steps=30)
    assert losses[-1] < 0.5 * losses[0]
    assert all(b < a for a, b in zip(losses[:10], losses[1:10]))


# ----------------------------------------------------------------------------- to(dtype), is_complex
def test_to_a_dtype_is_torchs_to_and_its_gradient_comes_back_in_the_input_dtype():
    x, xt = both([0.5, -1.25])
    assert x.to(engine.float64) is x and xt.to(torch.float64) is xt
    y, yt = x.to(engine.float32), xt.to(torch.float32)
    assert y.dtype == engine.float32
    (y * y).sum().backward()
    (yt * yt).sum().backward()
    assert x.grad.dtype == engine.float64
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-6)
    assert not x.is_complex() and not xt.is_complex()
    assert x.to("cpu") is x and xt.to("cpu") is xt
    with pytest.raises(TypeError, match="to\\(\\) received an invalid combination of arguments"):
        x.to(3)
