"""Saved tensors: no reference cycles, freed after backward, version checks, the intermediate guard."""
from __future__ import annotations

import gc
import re
import weakref

import numpy as np
import pytest

import reference_engine as engine
from formulas import at
from reference_engine.graph import Node


def f64(values, requires_grad=False):
    return engine.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


@pytest.fixture
def gc_disabled():
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _long_graph(x, nodes):
    """``nodes`` formula nodes whose backwards capture inputs (sin, mul) and outputs (exp, tanh)."""
    y = x
    for i in range(nodes // 4):
        y = (y.sin() * 0.9).exp().tanh()
    return y.sum()


def _closure_arrays(node):
    """Weak references to every array a tensor in ``node``'s backward closure holds."""
    arrays = []
    for cell in node.backward_fn.__closure__ or ():
        value = cell.cell_contents
        if isinstance(value, engine.Tensor):
            arrays.append(weakref.ref(value._data))
    return arrays


def test_saved_arrays_are_freed_after_backward_and_nothing_leaks(gc_disabled):
    x = f64(np.linspace(-1, 1, 8), requires_grad=True)
    loss = _long_graph(x, 4000)
    saved_arrays = []
    node = loss.grad_fn
    stack, seen = [node], set()
    while stack:                           # every array a backward closure holds
        node = stack.pop()
        saved_arrays += _closure_arrays(node)
        for edge in node.next_edges:
            if edge is not None and isinstance(edge[0], Node) and id(edge[0]) not in seen:
                seen.add(id(edge[0]))
                stack.append(edge[0])
    del node, stack
    assert len(saved_arrays) >= 3000
    loss.backward()
    alive = [r for r in saved_arrays if r() is not None]
    # only the leaf's own array (captured by the first sin as an input) may survive
    assert all(r() is x._data for r in alive)
    del loss
    assert gc.collect() == 0


def test_dropping_the_graph_frees_everything_without_the_cycle_collector(gc_disabled):
    x = f64(np.linspace(-1, 1, 8), requires_grad=True)
    loss = _long_graph(x, 2000)
    probe = weakref.ref(loss.grad_fn)
    del loss                                # never ran backward: nodes still hold their closures
    assert probe() is None                  # freed by reference counting alone: no cycles
    assert gc.collect() == 0


def test_outputs_are_saved_as_data_not_as_the_tensor(gc_disabled):
    x = f64([0.1, 0.2], requires_grad=True)
    y = x.exp()                              # exp's backward captures its output
    node = y.grad_fn
    [(cell, role, output_nr)] = node.saved    # the input needs no entry
    assert (role, output_nr) == ("output", 0)
    cell = node.backward_fn.__closure__[cell]    # the plan's record names the cell by its index
    shadow = cell.cell_contents              # the closure holds a shadow of y, not y
    assert shadow is not y and shadow.grad_fn is None and shadow._data is y._data
    assert shadow._version is y._version     # one version counter: y's writes are seen
    probe = weakref.ref(y)
    del y
    assert probe() is None                   # y was not kept alive by its own node
    assert gc.collect() == 0


def test_saved_output_is_materialised_with_its_node_for_double_backward():
    x = f64([0.3, -0.4], requires_grad=True)
    y = x.exp()
    (g,) = engine.grad(y.sum(), x, create_graph=True)
    (gg,) = engine.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), np.exp([0.3, -0.4]))


def test_in_place_change_of_a_saved_input_is_caught():
    x = f64([0.5, 1.5], requires_grad=True)
    h = x * 2.0
    y = h.sin()                              # sin saves its input h
    with engine.no_grad():
        h.add_(1.0)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation: the tensor of shape \[2\] saved "
                                           r"as 'self' by SinBackward0 was written in place after it was "
                                           r"saved \(it is now at version 1\)"):
        y.sum().backward()


def test_in_place_change_of_a_saved_output_is_caught():
    x = f64([0.5, 1.5], requires_grad=True)
    y = x.exp()
    z = y * 1.0
    with engine.no_grad():
        y.mul_(2.0)
    with pytest.raises(RuntimeError, match="saved as 'result' by ExpBackward0 was written in place after it was saved"):
        z.sum().backward()


def test_in_place_change_through_a_view_is_caught():
    x = f64([[0.5, 1.5], [2.0, 3.0]], requires_grad=True)
    h = x * 1.0
    y = h.sin()
    v = h.view([4])                          # shares h's data and version counter
    with engine.no_grad():
        v.zero_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_writes_before_the_save_and_writes_to_other_tensors_are_not_reported():
    x = f64([0.5, 1.5], requires_grad=True)
    h = x * 2.0
    with engine.no_grad():
        h.add_(1.0)                          # before sin saves h: sin sees the new values
    y = h.sin()
    other = f64([1.0, 2.0])
    other.mul_(3.0)                          # after sin was recorded, but not a tensor it saved
    (g,) = engine.grad(y.sum(), x)
    np.testing.assert_allclose(g.numpy(), 2.0 * np.cos(2.0 * np.array([0.5, 1.5]) + 1.0))


def test_a_write_is_caught_by_every_node_that_saved_the_tensor():
    x = f64([0.5, 1.5], requires_grad=True)
    h = x * 2.0
    first, second = h.sin(), h.cos()         # both save h
    with engine.no_grad():
        h.mul_(2.0)
    for y, node in ((first, "SinBackward0"), (second, "CosBackward0")):
        with pytest.raises(RuntimeError, match=f"saved as 'self' by {node} was written in place"):
            y.sum().backward()


def _capture_intermediate(self):
    result = at.sin(self)
    cosine = at.cos(self)                        # an intermediate: neither input nor output

    def backward(grad):
        return grad * cosine
    return result, backward


@pytest.fixture(scope="module")
def leaky_sin():
    return engine.define("engine_test_leaky_sin(Tensor self) -> Tensor", kernel=np.sin,
                         formula=_capture_intermediate)


def test_captured_intermediate_works_for_first_order(leaky_sin):
    x = f64([0.2, 0.9], requires_grad=True)
    (g,) = engine.grad(leaky_sin(x).sum(), x)
    np.testing.assert_allclose(g.numpy(), np.cos([0.2, 0.9]))
    assert engine.gradcheck(leaky_sin, (f64([0.2, 0.9], requires_grad=True),))


def test_double_backward_through_a_captured_intermediate_raises(leaky_sin):
    x = f64([0.2, 0.9], requires_grad=True)
    (g,) = engine.grad(leaky_sin(x).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="double backward through EngineTestLeakySinBackward0 needs the "
                                           "gradient of 'cosine'.*neither an input nor an output"):
        engine.grad(g.sum(), x)
    with pytest.raises(RuntimeError, match="'cosine'"):
        g.sum().backward()


def test_intermediate_guard_only_fires_when_the_gradient_flows_through_it(leaky_sin):
    x = f64([0.2, 0.9], requires_grad=True)
    w = f64([1.0, 2.0], requires_grad=True)
    (gx, gw) = engine.grad((leaky_sin(x) * w).sum(), (x, w), create_graph=True)
    # gw = sin(x) does not involve the intermediate: its double backward is fine
    (ggx,) = engine.grad(gw.sum(), x)
    np.testing.assert_allclose(ggx.numpy(), np.cos([0.2, 0.9]))


def _rebind_the_parameter(self):
    result = at.sin(self)
    self = at.cos(self)                          # the cell named like the input holds an intermediate

    def backward(grad):
        return grad * self
    return result, backward


def _backward_of(self):
    def backward(grad):
        return grad * self
    return backward


def _backward_from_a_helper(self):
    # the closure is not defined in the formula: its cell 'self' is the helper's parameter
    return at.sin(self), _backward_of(at.cos(self))


def _metadata_then_tensor(self):
    result = at.sin(self)
    shape = self.sizes()
    shape = at.cos(self)                         # the cell later holds an intermediate

    def backward(grad):
        return grad * shape
    return result, backward


def _method_result(self):
    result = at.sin(self)
    cosine = self.cos()                          # a method of an input that computes a tensor

    def backward(grad):
        return grad * cosine
    return result, backward


def _defined(formula, recorder):
    """``formula`` declared as an engine operator (a sin kernel), called through ``recorder``."""
    name = f"engine_test{formula.__name__}"
    overload = engine.define(f"{name}(Tensor self) -> Tensor", kernel=np.sin, formula=formula)
    return getattr(at, name) if recorder == "operator entry point" else overload


@pytest.mark.parametrize("formula, capture", [(_rebind_the_parameter, "self"),
                                              (_backward_from_a_helper, "self"),
                                              (_metadata_then_tensor, "shape"),
                                              (_method_result, "cosine")])
@pytest.mark.parametrize("recorder", ["operator entry point", "overload"])
def test_cells_that_only_look_like_inputs_are_guarded(formula, capture, recorder):
    """The recorder skips a cell only when the front-end's model of the formula's file settles
    it (an input never rebound, metadata); these formulas, defined in a test module without
    ``@derivative``, have no model, so every cell is inspected (tests/engine/test_capture_plan.py
    has formula files)."""
    op = _defined(formula, recorder)
    x = f64([0.2, 0.9], requires_grad=True)
    (g,) = engine.grad(op(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), np.cos([0.2, 0.9]))
    with pytest.raises(RuntimeError, match=f"needs the gradient of '{capture}'"):
        engine.grad(g.sum(), x)


def test_inputs_and_their_sizes_are_not_inspected_at_record_time():
    x, w = f64([0.2, 0.9], requires_grad=True), f64([1.0, 2.0], requires_grad=True)
    node = (x * w).grad_fn                       # mul captures self, other and both sizes
    [plan] = node.overload.backward_plans.values()
    assert plan.takes_mask and plan.inspected == ()
    node = x.tanh().grad_fn                      # tanh captures its output: inspected
    [plan] = node.overload.backward_plans.values()
    assert plan.inspected == (0,)


# Intermediates hidden where a cell check does not look: a dict, a captured function's cells.
def _in_a_dict(self):
    result = at.sin(self)
    saved = {"cosine": at.cos(self)}

    def backward(grad):
        return grad * saved["cosine"]
    return result, backward


def _in_a_nested_function(self):
    result = at.sin(self)
    cosine = at.cos(self)

    def derivative():
        return cosine

    def backward(grad):
        return grad * derivative()
    return result, backward


def _in_a_function_two_levels_down(self):
    result = at.sin(self)
    cosine = at.cos(self)

    def inner():
        return cosine

    def outer():
        return inner()

    def backward(grad):
        return grad * outer()
    return result, backward


@pytest.mark.parametrize("formula, capture", [(_in_a_dict, "saved['cosine']"),
                                              (_in_a_nested_function, "cosine"),
                                              (_in_a_function_two_levels_down, "cosine")])
@pytest.mark.parametrize("recorder", ["operator entry point", "overload"])
def test_intermediates_in_containers_and_captured_functions_are_guarded(formula, capture, recorder):
    op = _defined(formula, recorder)
    x = f64([0.2, 0.9], requires_grad=True)
    (g,) = engine.grad(op(x).sum(), x, create_graph=True)        # first order works
    np.testing.assert_allclose(g.detach().numpy(), np.cos([0.2, 0.9]))
    with pytest.raises(RuntimeError, match=f"needs the gradient of '{re.escape(capture)}'"):
        engine.grad(g.sum(), x)
    (g,) = engine.grad(op(x).sum(), x)                           # and the cells are restored after
    np.testing.assert_allclose(g.numpy(), np.cos([0.2, 0.9]))


_GUARD_GLOBAL = None
_GUARD_CACHE: dict = {}


def _in_a_default_argument(self):
    result = at.sin(self)
    cosine = at.cos(self)

    def backward(grad, cosine=cosine):
        return grad * cosine
    return result, backward


def _in_a_module_global(self):
    global _GUARD_GLOBAL
    result = at.sin(self)
    _GUARD_GLOBAL = at.cos(self)

    def backward(grad):
        return grad * _GUARD_GLOBAL
    return result, backward


def _in_a_module_level_dict(self):
    result = at.sin(self)
    _GUARD_CACHE["cosine"] = at.cos(self)

    def backward(grad):
        return grad * _GUARD_CACHE["cosine"]
    return result, backward


@pytest.mark.parametrize("formula, message", [
    (_in_a_default_argument, "keeps a tensor computed in the forward in its default argument 'cosine'"),
    (_in_a_module_global, "writes the module global '_GUARD_GLOBAL', which its backward reads"),
    (_in_a_module_level_dict, "writes the module global '_GUARD_CACHE', which its backward reads"),
])
@pytest.mark.parametrize("recorder", ["operator entry point", "overload"])
def test_intermediates_the_recorder_cannot_swap_are_refused(formula, message, recorder):
    op = _defined(formula, recorder)
    x = f64([0.2, 0.9], requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape(message)):
        op(x)
    with engine.no_grad():      # nothing is recorded: nothing to refuse
        np.testing.assert_allclose(op(x).numpy(), np.sin([0.2, 0.9]))
