"""The cached runners and the fused recorder behave exactly like the general paths."""
from __future__ import annotations

import linecache

import numpy as np
import pytest
import torch

import reference_engine as engine
from formulas import at
from reference_engine.dispatch import call_key, dispatcher


def f64(values, requires_grad=False):
    return engine.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


def test_keyword_call_takes_a_cached_runner_with_the_keyword_value():
    a, b = f64([1.0, 2.0]), f64([10.0, 20.0])
    with engine.no_grad():
        first = at.add(a, b, alpha=3)
        entry = dispatcher.packet("add").cache[(engine.Tensor, engine.Tensor, "alpha", int)]
        second = at.add(a, b, alpha=-1)
    assert entry.unrecorded is not None                 # the keyword call has a specialised runner
    np.testing.assert_array_equal(first.numpy(), [31.0, 62.0])
    np.testing.assert_array_equal(second.numpy(), [-9.0, -18.0])


def test_a_keyword_at_its_default_is_a_positional_call_even_where_an_overload_takes_it_positionally():
    """``add.Tensor``'s alpha is keyword-only, ``add.Scalar``'s positional: ``alpha=1`` (what
    the add formula passes) is still the call without it, on the cached positional runners."""
    a, b = f64([1.0, 2.0]), f64([10.0, 20.0])
    packet = dispatcher.packet("add")
    before = set(packet.cache)
    add = dispatcher.operators.add          # ``at.add`` as the engine's formulas see it
    with engine.no_grad():
        out = add(a, b, alpha=1)
        scalar = add(a, 2.5, alpha=1)
    assert not any("alpha" in key for key in set(packet.cache) - before)
    assert (engine.Tensor, engine.Tensor) in packet.cache and (engine.Tensor, float) in packet.cache
    np.testing.assert_array_equal(out.numpy(), [11.0, 22.0])
    np.testing.assert_array_equal(scalar.numpy(), [3.5, 4.5])


def test_keyword_call_recording_a_graph_differentiates_through_alpha():
    a, b = f64([1.0, 2.0], requires_grad=True), f64([10.0, 20.0], requires_grad=True)
    out = dispatcher.call("add", (a, b), {"alpha": 3})
    out.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(b.grad.numpy(), [3.0, 3.0])


def test_needs_input_grad_mask_follows_which_inputs_require_grad():
    x, c = f64([0.5, 1.5], requires_grad=True), f64([2.0, 3.0])
    assert (x * c).grad_fn.needs_input_grad == (True, False)
    assert (c * x).grad_fn.needs_input_grad == (False, True)
    assert (x * x).grad_fn.needs_input_grad == (True, True)


def test_nodes_record_the_shape_and_dtype_of_their_inputs():
    x = f64([0.5, 1.5], requires_grad=True)
    assert x.sin().grad_fn.input_meta == (((2,), np.dtype(np.float64)),)
    c = engine.tensor(np.ones((1, 2), dtype=np.float32))
    node = (x * c).grad_fn                  # c needs no gradient: no metadata for it
    assert node.input_meta == (((2,), np.dtype(np.float64)), None)
    assert node.needs_input_grad == (True, False)


def test_a_chain_gives_the_gradient_of_its_closed_form():
    x0 = np.linspace(-1.0, 1.0, 5)
    x = f64(x0, requires_grad=True)
    y = x
    for _ in range(50):
        y = (y.sin() * 0.9).tanh() + 0.1
    y.sum().backward()
    value, slope = x0.copy(), np.ones_like(x0)
    for _ in range(50):
        inner = np.sin(value) * 0.9
        slope = slope * np.cos(value) * 0.9 * (1.0 - np.tanh(inner) ** 2)
        value = np.tanh(inner) + 0.1
    np.testing.assert_allclose(x.grad.numpy(), slope, rtol=1e-12)


@pytest.mark.parametrize("dim, expected", [(0, 2), (1, 3), (-1, 3), (-2, 2)])
def test_size_of_a_dimension(dim, expected):
    assert f64(np.zeros((2, 3))).size(dim) == expected


@pytest.mark.parametrize("dim", [2, -3])
def test_size_of_a_dimension_out_of_range_raises(dim):
    with pytest.raises(IndexError, match="Dimension out of range"):
        f64(np.zeros((2, 3))).size(dim)


# The per-call-shape recorders (formula_node.formula_recorder) are optimizations of record():
# each shape must record the node the general path (Overload.run -> record) records.
def _node_facts(out):
    node = out.grad_fn
    edges = tuple(None if e is None else (type(e[0]).__name__, e[1]) for e in node.next_edges)
    saved = tuple((s.role, s.extra if s.role != "sequence" else None) for s in node.saved)
    view = getattr(out, "_view", None)
    return (type(node).__name__, node.name(), edges, node.input_meta, node.needs_input_grad,
            node.takes_mask, node.num_outputs, node.list_lengths, saved, node.swaps, out._output_nr,
            None if view is None else view.grad_mode)


@pytest.mark.parametrize("name, arguments", [
    ("sin", lambda x, y: (x,)),                  # one tensor (record_tensor)
    ("tanh", lambda x, y: (x,)),                 # captures its output: a shadow is saved
    ("mul", lambda x, y: (x, y)),                # two tensors (record_tensor_tensor)
    ("mul", lambda x, y: (y, x)),                # the second one requires grad
    ("mul", lambda x, y: (x, 2.5)),              # a tensor and a number (record_tensor_value)
    ("add", lambda x, y: (x, y)),                # a keyword-only argument at its default (alpha=1)
    ("pow", lambda x, y: (x, 3)),
    ("where", lambda x, y: (x > 0.5, x, y)),     # a condition and two tensors
    ("sum", lambda x, y: (x, [0], True)),
    ("transpose", lambda x, y: (x, 0, 1)),       # a view: its output is marked as made in grad mode
])
def test_each_call_shape_records_the_node_the_general_recorder_records(name, arguments):
    x = f64([[0.2, 0.9], [0.7, 0.4]], requires_grad=True)
    y = f64([[1.5, -0.5], [2.0, 0.25]])
    args = arguments(x.exp(), y)                 # a non-leaf input: its edge is a node
    packet = dispatcher.packet(name)
    fast = packet.op(*args)
    entry = packet.cache[call_key(args)]
    assert entry.recording is not None          # the call took a fast path
    # binding done: Overload.run records with record() (on a graph of its own)
    overload = entry.overload
    general = overload.run(overload.signature.bind(arguments(x.exp(), y), {}))
    assert _node_facts(fast) == _node_facts(general)
    (g_fast,) = engine.grad(fast.sum(), x, create_graph=True)
    (g_general,) = engine.grad(general.sum(), x, create_graph=True)
    np.testing.assert_array_equal(g_fast.detach().numpy(), g_general.detach().numpy())
    (gg_fast,) = engine.grad(g_fast.sum(), x)
    (gg_general,) = engine.grad(g_general.sum(), x)
    np.testing.assert_array_equal(gg_fast.numpy(), gg_general.numpy())


def test_a_generated_recorder_shows_its_source_in_tracebacks():
    f64([0.5], requires_grad=True).sin()
    code = dispatcher.packet("sin").cache[engine.Tensor].recording.__code__
    assert linecache.getline(code.co_filename, code.co_firstlineno) == "def record_tensor(a0):\n"


def test_a_keyword_only_argument_named_with_a_python_keyword_reaches_the_formula():
    """The recorder passes keyword-only defaults by name, or as a dict where Python reserves
    the name (a formula taking ``**options``)."""
    def scaled(self, **options):
        scale = options["lambda"]
        result = at.mul(self, scale)

        def backward(grad):
            return grad * scale
        return result, backward

    try:
        engine.define("engine_test_reserved_keyword(Tensor self, *, float lambda=0.5) -> Tensor",
                      kernel=lambda x, scale: x * scale, formula=scaled)
        packet = dispatcher.packet("engine_test_reserved_keyword")
        x = f64([1.0, 2.0], requires_grad=True)
        out = packet.op(x)
        assert packet.cache[engine.Tensor].recording is not None      # a generated recorder ran
        out.sum().backward()
        np.testing.assert_array_equal(out.detach().numpy(), [0.5, 1.0])
        np.testing.assert_array_equal(x.grad.numpy(), [0.5, 0.5])
    finally:
        dispatcher.local.pop("engine_test_reserved_keyword")
        engine.refresh()


# The unrecorded in-place fast path (methods._inplace's ufunc): operands of one floating dtype
# and shape are computed into the array; it must write what the general path (the operator
# out of place, then copied in) writes, bit for bit, bump the version and reach views.
@pytest.mark.parametrize("method, general", [
    ("add_", lambda a, b: a + b), ("sub_", lambda a, b: a - b), ("mul_", lambda a, b: a * b),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_in_place_fast_path_writes_what_the_general_path_writes(method, general, dtype):
    values = np.array([[1.5, -0.0, np.inf], [np.nan, 3e38, -2.25]], dtype=dtype)
    other = engine.tensor(np.array([[0.1, 0.0, np.inf], [1.0, 3e38, -7.5]], dtype=dtype))
    x, base = engine.tensor(values.copy()), engine.tensor(values.T.copy())
    view = base.t()                              # a non-contiguous view: written through to its base
    with np.errstate(all="ignore"), engine.no_grad():
        expected = general(engine.tensor(values), other).numpy()
        squared = general(engine.tensor(values), engine.tensor(values)).numpy()
        assert getattr(x, method)(other) is x
        getattr(view, method)(other)
        aliased = engine.tensor(values.copy())
        getattr(aliased, method)(aliased)        # the operand is the written array itself
    for written in (x.numpy(), view.numpy(), base.numpy().T):
        np.testing.assert_array_equal(written, expected)
        assert written.dtype == dtype
    np.testing.assert_array_equal(aliased.numpy(), squared)
    assert x._version_value == 1 and base._version_value == 1


def test_in_place_calls_the_fast_path_leaves_keep_the_general_path():
    """Mixed dtypes (torch's promotion, then the cast back), broadcasting, alpha and a
    recording write take the general path with its checks."""
    x = f64([1.0, 2.0])
    x.sub_(engine.tensor(np.array([0.5, 0.5], dtype=np.float32)), alpha=2)
    x.add_(f64([1.0]))
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x.mul_(f64([[1.0], [2.0]]))
    leaf = f64([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        leaf.add_(f64([1.0, 1.0]))
    y = leaf * 1.0
    node = y.grad_fn
    y -= f64([3.0, 3.0])                         # recorded: y moves onto the sub node
    assert y.grad_fn is not node and y.grad_fn.next_functions[0][0] is node


@pytest.mark.parametrize("shapes", [((3, 2), (2, 4)), ((2,), (2, 3))])
def test_matmul_of_matrices_is_torchs_mm_bit_for_bit(shapes):
    rng = np.random.default_rng(0)
    a = engine.tensor(rng.standard_normal(shapes[0]), requires_grad=True)
    b = engine.tensor(rng.standard_normal(shapes[1]), requires_grad=True)
    out = a @ b
    expected = torch.tensor(a.detach().numpy()) @ torch.tensor(b.detach().numpy())
    np.testing.assert_array_equal(out.detach().numpy(), expected.numpy())
    out.sum().backward()
    ta, tb = (torch.tensor(t.detach().numpy(), requires_grad=True) for t in (a, b))
    (ta @ tb).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), ta.grad.numpy())
    np.testing.assert_array_equal(b.grad.numpy(), tb.grad.numpy())
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
        engine.tensor(np.ones((2, 3))) @ engine.tensor(np.ones((2, 3)))
