"""Everyday torch idioms in the engine, each checked against torch 2.13 (issue 22 item 5):
values, gradients, node names and the errors torch raises."""
from __future__ import annotations

import re
import sys
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import reference_engine as engine
import reference_engine.nn.functional as EF


def both(values, dtype=np.float64):
    """The same leaf that requires grad in the engine and in torch."""
    array = np.asarray(values, dtype=dtype)
    return engine.tensor(array, requires_grad=True), torch.tensor(array, requires_grad=True)


def assert_same(ours, theirs):
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-6, atol=1e-7)


def assert_same_gradient(ours, theirs, x, xt, seed=0):
    """Values, then the gradient of a random weighting of the output w.r.t. ``x``."""
    assert_same(ours, theirs)
    weights = np.random.default_rng(seed).standard_normal(tuple(theirs.shape))
    (g,) = engine.grad((ours * engine.tensor(weights.astype(ours._data.dtype))).sum(), x)
    (gt,) = torch.autograd.grad((theirs * torch.tensor(weights, dtype=theirs.dtype)).sum(), xt)
    assert_same(g, gt)


def same_error(run_ours, run_theirs):
    """Both raise the same exception type with the same message."""
    with pytest.raises(Exception) as theirs:
        run_theirs()
    with pytest.raises(type(theirs.value), match=re.escape(str(theirs.value).splitlines()[0])):
        run_ours()


DATA = [[1.5, 2.25, -1.0], [0.5, 3.0, 2.0]]


# ----------------------------------------------------------------------------- tensor methods
def test_mT_is_the_transpose_of_the_last_two_dims_with_its_gradient():
    x, xt = both(np.arange(24.0).reshape(2, 3, 4) / 7)
    assert_same_gradient(x.mT * 2, xt.mT * 2, x, xt)
    assert x.mT._base is x and x.mT.grad_fn.name() == "TransposeIntBackward0"
    v, vt = both([1.0, 2.0])
    same_error(lambda: v.mT, lambda: vt.mT)


@pytest.mark.parametrize("method, dtype", [("double", "float64"), ("float", "float32"), ("long", "int64"),
                                           ("bool", "bool")])
def test_dtype_conversions_are_torch_s(method, dtype):
    for source in (np.float32, np.float64):
        x, xt = both(DATA, source)
        ours, theirs = getattr(x, method)(), getattr(xt, method)()
        assert_same(ours, theirs)
        assert (ours is x) == (theirs is xt)        # no copy when the dtype is already right
        assert ours.requires_grad == theirs.requires_grad
        if theirs.requires_grad and theirs is not xt:
            assert_same_gradient(ours.sin(), theirs.sin(), x, xt)


def test_type_names_and_converts_like_torch():
    for dtype in (np.float32, np.float64, np.int64, np.bool_):
        x, xt = engine.tensor(np.zeros(2, dtype)), torch.tensor(np.zeros(2, dtype))
        assert x.type() == xt.type()
    x, xt = both(DATA, np.float32)
    assert_same(x.type(engine.float64), xt.type(torch.float64))
    assert_same(x.type("torch.DoubleTensor"), xt.type("torch.DoubleTensor"))
    with pytest.raises(ValueError, match="invalid type: 'torch.HalfTensor'"):
        x.type("torch.HalfTensor")


def test_cpu_device_and_to():
    x, xt = both(DATA)
    assert x.cpu() is x and xt.cpu() is xt
    assert repr(x.device) == repr(xt.device) == "device(type='cpu')" and str(x.device) == "cpu"
    assert x.device == engine.device("cpu") and x.device.type == xt.device.type
    assert x.to("cpu") is x and x.to(engine.device("cpu"), engine.float64) is x
    assert_same_gradient(x.to("cpu", engine.float32), xt.to("cpu", torch.float32), x, xt)
    assert_same(x.to(engine.tensor([1], dtype=engine.int64)), xt.to(torch.tensor([1])))
    with pytest.raises(RuntimeError, match="CPU only, not on 'cuda'"):
        x.to("cuda")


def test_repeat_takes_integers_or_a_list():
    x, xt = both(DATA)
    assert_same_gradient(x.repeat(2, 1, 3), xt.repeat(2, 1, 3), x, xt)
    assert_same_gradient(x.repeat([1, 2]), xt.repeat([1, 2]), x, xt)
    v, vt = both([1.0, 2.0])
    assert_same_gradient(v.repeat(2), vt.repeat(2), v, vt)


def test_clone_records_clone_backward():
    x, xt = both(DATA)
    ours, theirs = x.clone(), xt.clone()
    assert ours.grad_fn.name() == type(theirs.grad_fn).__name__ == "CloneBackward0"
    assert_same_gradient(ours, theirs, x, xt)
    assert engine.clone(x).grad_fn.name() == "CloneBackward0"


def test_next_functions_walk_the_graph_as_torch():
    x, xt = both(DATA)
    w, wt = both([[2.0, 1.0, 0.5]])
    ours, theirs = (x * w).sin(), (xt * wt).sin()
    (mul, nr), = ours.grad_fn.next_functions
    (mul_t, nr_t), = theirs.grad_fn.next_functions
    assert (mul.name(), nr) == (type(mul_t).__name__.replace("Mul", "MulTensor"), nr_t)
    leaves = [(f.variable, n) for f, n in mul.next_functions]
    leaves_t = [(f.variable, n) for f, n in mul_t.next_functions]
    assert [(v is x, n) for v, n in leaves] == [(True, 0), (False, 0)] == [(v is xt, n) for v, n in leaves_t]
    assert leaves[1][0] is w and mul.next_functions[0][0].name() == mul_t.next_functions[0][0].name()
    assert mul.next_functions[0][0].next_functions == () == mul_t.next_functions[0][0].next_functions
    y, yt = (x * engine.tensor(np.ones(3))), (xt * torch.ones(3, dtype=torch.float64))
    assert [f is None for f, _ in y.grad_fn.next_functions] == [f is None for f, _ in yt.grad_fn.next_functions]


def edge_names(node):
    """``next_functions`` as the next nodes' names (None for an input that gets no gradient)."""
    return [None if f is None else f.name() for f, _ in node.next_functions]


@pytest.mark.parametrize("make", [lambda t: t * 2, lambda t: t + 2, lambda t: t - 2, lambda t: t / 2,
                                  lambda t: t.mul(2), lambda t: 2 * t, lambda t: 2 + t],
                         ids=["mul", "add", "sub", "div", "mul-method", "rmul", "radd"])
def test_a_number_operand_shows_as_torch_s_wrapped_tensor_in_next_functions(make):
    x, xt = both(DATA)
    ours, theirs = make(x), make(xt)
    assert [None if f is None else f.variable is x for f, _ in ours.grad_fn.next_functions] == [True, None]
    assert [None if f is None else f.variable is xt for f, _ in theirs.grad_fn.next_functions] == [True, None]
    assert_same_gradient(ours, theirs, x, xt)


# (label, engine call, torch call); ``source`` is the tensor written, in the engine or torch
NAMED_INPLACE = [
    ("fill_ number", lambda t, source: t.fill_(2.5)),
    ("fill_ tensor", lambda t, source: t.fill_(source.sum())),
    ("copy_", lambda t, source: t.copy_(source.exp())),
    ("copy_ constant", lambda t, source: t.copy_(source.detach())),
    ("zero_", lambda t, source: t.zero_()),
    ("clamp_ numbers", lambda t, source: t.clamp_(0.0, 1.9)),
    ("clamp_ min", lambda t, source: t.clamp_(min=0.7)),
    ("clamp", lambda t, source: t.clamp(-1.0, 1.0)),
    ("clamp_ tensors", lambda t, source: t.clamp_(min=source.sin(), max=source.cos())),
    ("clamp tensor", lambda t, source: t.clamp(min=source.cos())),
]


@pytest.mark.parametrize("write", [w for _, w in NAMED_INPLACE], ids=[label for label, _ in NAMED_INPLACE])
def test_inplace_nodes_have_torch_s_names_edges_and_gradients(write):
    x, xt = both(DATA)
    s, st = both([0.5, -2.0, 4.0])
    ours, theirs = write(x.sin(), s), write(xt.sin(), st)
    assert ours.grad_fn.name() == theirs.grad_fn.name()
    assert edge_names(ours.grad_fn) == edge_names(theirs.grad_fn)
    assert_same_gradient(ours * x, theirs * xt, x, xt)
    (g,) = engine.grad((write(x.sin(), s) * x).sum(), s, allow_unused=True)
    (gt,) = torch.autograd.grad((write(xt.sin(), st) * xt).sum(), st, allow_unused=True)
    assert (g is None) == (gt is None)
    if gt is not None:
        assert_same(g, gt)


def test_inplace_overwrites_keep_torch_s_double_backward():
    x, xt = both(DATA)
    s, st = both([[0.5, -2.0, 4.0]])
    ours, theirs = (x * x).copy_(s * s * s) * x, (xt * xt).copy_(st * st * st) * xt
    (g,) = engine.grad(ours.sum(), s, create_graph=True)
    (gt,) = torch.autograd.grad(theirs.sum(), st, create_graph=True)
    assert_same_gradient(g, gt, s, st)


def test_slices_record_torch_s_slice_node():
    x, xt = both(np.arange(24.0).reshape(6, 4))
    for key in (np.s_[::2], np.s_[:, 1::3], np.s_[1:5:2, ::2]):
        ours, theirs = x[key], xt[key]
        assert ours.grad_fn.name() == theirs.grad_fn.name() == "SliceBackward0"
        assert_same_gradient(ours, theirs, x, xt)


def test_torch_tensor_of_an_engine_tensor_copies_its_values_as_from_numpy():
    for values, dtype in (([1.5, 2.0], engine.float32), ([[1, 2], [3, 4]], engine.int64), (3.0, engine.float64),
                          ([True, False], engine.bool)):
        x = engine.tensor(values, dtype=dtype)
        copied, shared = torch.tensor(x), torch.as_tensor(x)
        expected = torch.tensor(np.asarray(values, dtype=dtype.numpy))
        assert copied.dtype == shared.dtype == expected.dtype and torch.equal(copied, expected)
        with engine.no_grad():
            x.fill_(0)
        assert torch.equal(shared, torch.zeros_like(expected)) and torch.equal(copied, expected)
    expanded = engine.tensor([1.0, 2.0, 3.0]).expand(2, 3).t()
    assert torch.equal(torch.tensor(expanded), torch.tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]))
    x, xt = both(DATA)
    with pytest.raises(BufferError, match=re.escape("use tensor.detach()")):
        torch.tensor(x)
    with pytest.raises(BufferError, match=re.escape("use tensor.detach()")):
        xt.__dlpack__()         # torch's own refusal, same words
    assert torch.equal(torch.tensor(x.detach()), xt.detach())


def test_data_is_torch_s_unchecked_view_of_the_values():
    x, xt = both([1.0, 2.0])
    y, yt = x.sin(), xt.sin()
    version, version_t = x._version_value, xt._version
    x.data.mul_(2)          # not seen by autograd: the backward reads the new values, as torch's
    xt.data.mul_(2)
    assert x._version_value == version and xt._version == version_t
    assert not x.data.requires_grad and x.data.grad_fn is None and x.data.is_leaf
    y.sum().backward()
    yt.sum().backward()
    assert_same(x.grad, xt.grad)
    x.data, xt.data = engine.tensor([5.0, 6.0, 7.0], dtype=engine.float64), torch.tensor([5.0, 6.0, 7.0],
                                                                                       dtype=torch.float64)
    assert_same(x, xt)
    assert x.requires_grad and xt.requires_grad
    same_error(lambda: setattr(x, "data", engine.tensor([1, 2])), lambda: setattr(xt, "data", torch.tensor([1, 2])))
    p, pt = both([1.0, 2.0])        # the training-loop idiom
    p.grad, pt.grad = engine.tensor([0.5, 0.5], dtype=engine.float64), torch.tensor([0.5, 0.5], dtype=torch.float64)
    p.data -= 0.1 * p.grad
    pt.data -= 0.1 * pt.grad
    assert_same(p, pt)


# ----------------------------------------------------------------------------- in place
def _inplace_cases():
    return [("relu_", (), {}), ("clamp_", (0.0, 1.9), {}), ("clamp_", (), {"min": 0.7}), ("fill_", (2.5,), {}),
            ("zero_", (), {})]


@pytest.mark.parametrize("method, args, kwargs", _inplace_cases())
def test_inplace_methods_give_torch_s_values_gradients_and_versions(method, args, kwargs):
    x, xt = both(DATA)
    ours, theirs = x * 1, xt * 1
    version, version_t = ours._version_value, theirs._version
    assert getattr(ours, method)(*args, **kwargs) is ours
    getattr(theirs, method)(*args, **kwargs)
    assert ours._version_value - version == theirs._version - version_t == 1
    assert_same_gradient(ours * x, theirs * xt, x, xt)


@pytest.mark.parametrize("method, args, kwargs", _inplace_cases() + [("copy_", ("source",), {})])
def test_inplace_methods_refuse_a_leaf_and_a_view_of_a_leaf(method, args, kwargs):
    x, xt = both(DATA)
    if args == ("source",):
        args, args_t = (engine.tensor(np.ones(3)),), (torch.ones(3, dtype=torch.float64),)
    else:
        args_t = args
    same_error(lambda: getattr(x, method)(*args, **kwargs), lambda: getattr(xt, method)(*args_t, **kwargs))
    same_error(lambda: getattr(x[0], method)(*args, **kwargs), lambda: getattr(xt[0], method)(*args_t, **kwargs))
    with engine.no_grad():      # a parameter update
        getattr(x, method)(*args, **kwargs)
    with torch.no_grad():
        getattr(xt, method)(*args_t, **kwargs)
    assert_same(x, xt)


def test_inplace_through_a_view_rebases_the_base_as_torch():
    x, xt = both(DATA)
    ours, theirs = x * 1, xt * 1
    ours[0].clamp_(max=1.0)
    theirs[0].clamp_(max=1.0)
    ours[:, 1].mul_(3).relu_()        # last: torch's relu_ saves its output, which any later write changes
    theirs[:, 1].mul_(3).relu_()
    assert_same_gradient(ours * x, theirs * xt, x, xt)


def test_copy_broadcasts_casts_and_sends_the_gradient_to_the_source():
    x, xt = both(DATA)
    s, st = both([0.5, -2.0, 4.0])
    ours, theirs = (x * 1).copy_(s * s), (xt * 1).copy_(st * st)
    assert_same_gradient(ours * x, theirs * xt, x, xt)
    assert_same_gradient((x * 1).copy_(s * s) * x, (xt * 1).copy_(st * st) * xt, s, st)
    f32, f32t = both(DATA, np.float32)
    assert_same_gradient((f32 * 1).copy_(s), (f32t * 1).copy_(st), s, st)     # float64 into float32
    for shape in ((2,), (2, 2, 3), (3, 1, 1)):
        same_error(lambda shape=shape: (x * 1).copy_(engine.tensor(np.ones(shape))),
                   lambda shape=shape: (xt * 1).copy_(torch.ones(shape)))


def test_fill_with_a_tensor_value_sends_it_the_summed_gradient():
    x, xt = both(DATA)
    v, vt = both(1.5)
    assert_same_gradient((x * 1).fill_(v * 2), (xt * 1).fill_(vt * 2), v, vt)
    same_error(lambda: (x * 1).fill_(engine.tensor(np.ones(2))), lambda: (xt * 1).fill_(torch.ones(2)))


def test_zero_and_fill_give_exact_zero_gradients_even_from_nan():
    x, xt = both(DATA)
    nan = np.full((2, 3), np.nan)
    (g,) = engine.grad(((x * 1).zero_() * engine.tensor(nan)).sum() + x.sum(), x)
    (gt,) = torch.autograd.grad(((xt * 1).zero_() * torch.tensor(nan)).sum() + xt.sum(), xt)
    np.testing.assert_array_equal(g.numpy(), gt.numpy())


def test_a_saved_tensor_modified_in_place_is_reported():
    x, xt = both(DATA)
    ours, theirs = (x * 1).sin(), (xt * 1).sin()
    y, yt = ours.sin(), theirs.sin()        # saves its input
    ours.relu_()
    theirs.relu_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(yt.sum(), xt)
    with pytest.raises(RuntimeError, match="modified by an inplace operation|modified in place"):
        engine.grad(y.sum(), x)


# ----------------------------------------------------------------------------- namespaces
def test_dtype_aliases_are_torch_s():
    assert (engine.float, engine.double, engine.long) == (engine.float32, engine.float64, engine.int64)
    assert engine.tensor([1.0], dtype=engine.double).dtype is engine.float64


def test_autograd_namespace_has_torch_s_names():
    for name in ("grad", "backward", "Function", "gradcheck", "gradgradcheck", "no_grad", "enable_grad",
                 "set_grad_enabled"):
        assert hasattr(torch.autograd, name)
        assert getattr(engine.autograd, name) is getattr(engine, name)
    x = engine.tensor([0.5, 1.0], dtype=engine.float64, requires_grad=True)
    (g,) = engine.autograd.grad((x * x).sum(), x)
    np.testing.assert_allclose(g.numpy(), [1.0, 2.0])
    assert engine.autograd.gradcheck(lambda t: t.sin() * t, (x,))
    assert engine.autograd.gradgradcheck(lambda t: t.sin() * t, (x,))

    class Cube(engine.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t * t * t

        @staticmethod
        def backward(ctx, grad):
            (t,) = ctx.saved_tensors
            return grad * 3 * t * t

    engine.autograd.backward(Cube.apply(x).sum())
    np.testing.assert_allclose(x.grad.numpy(), [0.75, 3.0])


#: (name, arguments built from (x, index target, probability target)): torch's own calls.
FUNCTIONAL = [
    ("relu", lambda x, t, p: (x,), {}), ("relu6", lambda x, t, p: (x * 3,), {}), ("gelu", lambda x, t, p: (x,), {}),
    ("gelu", lambda x, t, p: (x,), {"approximate": "tanh"}), ("silu", lambda x, t, p: (x,), {}),
    ("elu", lambda x, t, p: (x, 0.7), {}), ("selu", lambda x, t, p: (x,), {}), ("celu", lambda x, t, p: (x,), {}),
    ("leaky_relu", lambda x, t, p: (x, 0.2), {}), ("hardtanh", lambda x, t, p: (x, -1.0, 2.0), {}),
    ("hardsigmoid", lambda x, t, p: (x,), {}), ("hardswish", lambda x, t, p: (x,), {}),
    ("mish", lambda x, t, p: (x,), {}), ("softplus", lambda x, t, p: (x, 2.0), {}),
    ("softshrink", lambda x, t, p: (x,), {}), ("hardshrink", lambda x, t, p: (x,), {}),
    ("logsigmoid", lambda x, t, p: (x,), {}), ("sigmoid", lambda x, t, p: (x,), {}),
    ("tanh", lambda x, t, p: (x,), {}), ("threshold", lambda x, t, p: (x, 1.0, -3.0), {}),
    ("softmax", lambda x, t, p: (x,), {"dim": 1}), ("log_softmax", lambda x, t, p: (x, 0), {}),
    ("dropout", lambda x, t, p: (x,), {"training": False}), ("dropout", lambda x, t, p: (x, 0.0), {}),
    ("cross_entropy", lambda x, t, p: (x, t), {}), ("nll_loss", lambda x, t, p: (x, t), {"reduction": "sum"}),
    ("mse_loss", lambda x, t, p: (x, p), {}), ("mse_loss", lambda x, t, p: (x, p), {"reduction": "none"}),
    ("l1_loss", lambda x, t, p: (x, p), {"reduction": "sum"}), ("smooth_l1_loss", lambda x, t, p: (x, p), {"beta": 0.5}),
    ("huber_loss", lambda x, t, p: (x, p), {"delta": 0.5}),
    ("binary_cross_entropy", lambda x, t, p: (x.sigmoid(), p), {}),
    ("binary_cross_entropy_with_logits", lambda x, t, p: (x, p), {"reduction": "sum"}),
    ("softmin", lambda x, t, p: (x, 1), {}), ("normalize", lambda x, t, p: (x,), {}),
    ("normalize", lambda x, t, p: (x, 1.0, 0), {}), ("layer_norm", lambda x, t, p: (x, (3,)), {}), ("pad", lambda x, t, p: (x, (1, 2)), {"value": 0.5}),
]


@pytest.mark.parametrize("name, arguments, kwargs", FUNCTIONAL, ids=[f"{c[0]}-{i}" for i, c in enumerate(FUNCTIONAL)])
def test_nn_functional_matches_torch(name, arguments, kwargs):
    x, xt = both(DATA)
    target, probabilities = np.array([2, 0]), np.array([[0.1, 0.9, 0.5], [1.0, 0.0, 0.25]])
    ours = getattr(EF, name)(*arguments(x, engine.tensor(target), engine.tensor(probabilities)), **kwargs)
    theirs = getattr(F, name)(*arguments(xt, torch.tensor(target), torch.tensor(probabilities)), **kwargs)
    assert_same_gradient(ours, theirs, x, xt)


def test_nn_functional_layers_match_torch():
    rng = np.random.default_rng(1)
    image, image_t = both(rng.standard_normal((2, 3, 6, 6)))
    kernel, kernel_t = both(rng.standard_normal((4, 3, 3, 3)))
    weight, weight_t = both(rng.standard_normal((5, 3)))
    bias, bias_t = both(rng.standard_normal(5))
    pairs = [
        (EF.conv2d(image, kernel, None, 2, 1), F.conv2d(image_t, kernel_t, None, 2, 1)),
        (EF.max_pool2d(image, 2), F.max_pool2d(image_t, 2)),
        (EF.avg_pool2d(image, 3, stride=2, padding=1), F.avg_pool2d(image_t, 3, stride=2, padding=1)),
        (EF.linear(image[0, 0, :, :3], weight, bias), F.linear(image_t[0, 0, :, :3], weight_t, bias_t)),
        (EF.embedding(engine.tensor([[4, 0], [2, 2]]), weight, padding_idx=-3),
         F.embedding(torch.tensor([[4, 0], [2, 2]]), weight_t, padding_idx=-3)),
    ]
    for ours, theirs in pairs:
        for leaf, leaf_t in ((image, image_t), (weight, weight_t)):
            (g,) = engine.grad(ours.sum(), leaf, allow_unused=True, retain_graph=True)
            (gt,) = torch.autograd.grad(theirs.sum(), leaf_t, allow_unused=True, retain_graph=True)
            assert (g is None) == (gt is None)
            if gt is not None:
                assert_same(g, gt)
        assert_same(ours, theirs)


def test_one_hot_is_torch_s():
    for values, classes in (([0, 2], -1), ([[1], [3]], 5), ([], 3)):
        index = np.asarray(values, dtype=np.int64)
        ours, theirs = EF.one_hot(engine.tensor(index), classes), F.one_hot(torch.tensor(index), classes)
        assert_same(ours, theirs)
    for values, classes in (([-1, 2], -1), ([0, 3], 3), ([], -1)):
        index = np.asarray(values, dtype=np.int64)
        same_error(lambda i=index, n=classes: EF.one_hot(engine.tensor(i), n),
                   lambda i=index, n=classes: F.one_hot(torch.tensor(i), n))
    same_error(lambda: EF.one_hot(engine.tensor([0.0])), lambda: F.one_hot(torch.tensor([0.0])))


def test_nn_functional_softmax_without_dim_warns_and_picks_torch_s_dim():
    x, xt = both(np.arange(24.0).reshape(2, 3, 4) / 5)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        result = EF.softmax(x)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        theirs = F.softmax(xt)
    assert "Implicit dimension choice for softmax" in str(ours[0].message)
    assert_same(result, theirs)


def test_legacy_reduction_flags_are_torch_s():
    x, xt = both(DATA)
    p = np.ones((2, 3))
    with pytest.warns(UserWarning):
        ours = EF.mse_loss(x, engine.tensor(p), size_average=False)
    with pytest.warns(UserWarning):
        theirs = F.mse_loss(xt, torch.tensor(p), size_average=False)
    assert_same(ours, theirs)


def test_a_missing_attribute_is_a_plain_attribute_error_naming_what_torch_has():
    cases = [(engine, "fft", "torch"), (engine.autograd, "functional", "torch.autograd"),
             (engine.nn.functional, "grid_sample", "torch.nn.functional"), (engine.nn, "Linear", "torch.nn")]
    for module, name, torch_name in cases:
        assert hasattr(sys.modules[torch_name], name)
        with pytest.raises(AttributeError, match=rf"^module '{module.__name__}' has no attribute '{name}': "
                                                 rf"{torch_name}.{name} exists, but the reference engine does not "
                                                 rf"provide it$"):
            getattr(module, name)
    with pytest.raises(AttributeError, match=r"^module 'reference_engine' has no attribute 'frobnicate'$"):
        _ = engine.frobnicate
    assert not hasattr(engine.nn.functional, "__wrapped__")


# ----------------------------------------------------------------------------- torch tensors
def test_a_torch_tensor_in_an_engine_op_is_a_clear_error_both_ways():
    x, t = engine.tensor([1.0, 2.0]), torch.ones(2)
    engine_side = [lambda: x + t, lambda: x * t, lambda: engine.mm(x.view(1, 2), t.view(2, 1)),
                   lambda: engine.cat([x, t]), lambda: EF.mse_loss(x, t), lambda: x // t]
    for call in engine_side:
        with pytest.raises(TypeError, match="is a torch.Tensor; the reference engine computes on its own tensors "
                                            "only|do not mix"):
            call()
    for call in (lambda: t + x, lambda: t * x, lambda: t - x, lambda: t / x, lambda: torch.sin(x)):
        with pytest.raises(TypeError, match="a torch.Tensor and a reference_engine Tensor do not mix"):
            call()


# ----------------------------------------------------------------------------- printing
REPR_CASES = [[1.5, 2.25], [1.0, 2.0], [0.0], [float("nan"), 1.5], [float("inf"), -2.0, 3.0], [1e-5, 1.0],
              [1e9, 1.0], [123456.789, 0.5], [[1.5, -2.25, 3.0], [4.0, 5.0, 6.0]], [True, False], [1, -22, 333],
              3.25, 7, [], np.zeros((0, 3)), np.arange(2000.0).reshape(40, 50), np.arange(24.0).reshape(2, 3, 4) / 7,
              np.arange(100.0) / 3, [-0.0, 1.0], np.linspace(-1, 1, 30)]


@pytest.mark.parametrize("values", REPR_CASES, ids=range(len(REPR_CASES)))
def test_repr_is_torch_s(values):
    array = np.asarray(values)
    dtypes = [np.float32, np.float64] if array.dtype.kind == "f" or not array.size else [array.dtype]
    for dtype in dtypes:
        typed = array.astype(np.int64 if np.dtype(dtype).kind == "i" else dtype)
        theirs = repr(torch.tensor(typed)).replace("torch.", "reference_engine.")
        ours = repr(engine.tensor(typed))
        # the engine's dtype name is longer than torch's: only where the suffix wraps may differ
        assert ours == theirs or " ".join(ours.split()) == " ".join(theirs.split())


def test_repr_suffixes_are_torch_s():
    x, xt = both([1.5, 2.25], np.float32)
    for ours, theirs in ((x, xt), (x.sin(), xt.sin()), (x.clone(), xt.clone()), (x.detach(), xt.detach())):
        assert repr(ours) == repr(theirs)
    assert repr(x) == "tensor([1.5000, 2.2500], requires_grad=True)"
    assert " ".join(repr(x.double().exp()).split()) == " ".join(
        repr(xt.double().exp()).replace("torch.", "reference_engine.").split())


# ----------------------------------------------------------------------------- pictures
def test_graph_pictures_for_notebooks():
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    graph = engine.to_dot(x.sin() * x)
    assert isinstance(graph, str) and "SinBackward0" in graph and callable(graph._repr_svg_)


def test_graph_pictures_run_dot_on_the_text(monkeypatch, tmp_path):
    """With a stand-in ``dot`` on PATH: the text goes to its stdin, ``-Tsvg`` / ``-Tpng`` pick
    the format, its stdout is the picture (str for SVG, bytes for PNG)."""
    script = tmp_path / "dot"
    script.write_text('#!/bin/sh\n/bin/cat > "$0.$1.in"\nif [ "$1" = -Tsvg ]; then echo "<svg>drawn</svg>"; '
                      'else printf "\\211PNG"; fi\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    graph = engine.to_dot(engine.tensor([1.0], requires_grad=True).exp())
    assert graph._repr_svg_() == "<svg>drawn</svg>\n"
    assert graph._repr_png_() == b"\x89PNG"
    assert (tmp_path / "dot.-Tsvg.in").read_text() == graph == (tmp_path / "dot.-Tpng.in").read_text()


def test_graph_pictures_without_graphviz_fall_back_to_text_with_one_line(monkeypatch):
    """A notebook shows the DOT text (the method returns None) after a one-line warning."""
    graph = engine.to_dot(engine.tensor([1.0], requires_grad=True).exp())
    monkeypatch.setenv("PATH", "")
    for show in (graph._repr_svg_, graph._repr_png_):
        with pytest.warns(UserWarning) as caught:
            assert show() is None
        (warning,) = caught
        message = str(warning.message)
        assert "\n" not in message and message.startswith("showing the graph needs Graphviz's `dot` program")


def test_writing_relu_s_output_in_place_keeps_the_right_gradient_where_torch_refuses():
    """torch's relu_ saves its output, so a later write makes torch's backward refuse; the
    engine's relu formula saves the input as it was before the write, and the gradient it
    gives is the right one (never a silently wrong one)."""
    x, xt = both(DATA)
    ours, theirs = x * 1, xt * 1
    ours.relu_().mul_(3)
    theirs.relu_().mul_(3)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(theirs.sum(), xt)
    (g,) = engine.grad(ours.sum(), x)
    np.testing.assert_array_equal(g.numpy(), 3.0 * (np.asarray(DATA) > 0))
