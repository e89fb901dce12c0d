"""The engine's forward mode beyond tier RF: errors torch would raise, and the dispatcher after a level."""
from __future__ import annotations

import numpy as np
import pytest

import reference_engine as engine
from formulas import at, derivative


def _tensor(values) -> engine.Tensor:
    return engine.tensor(np.asarray(values, dtype=np.float64), dtype=engine.float64)


def _no_jvp(self):
    result = at.exp(self)
    def backward(grad):
        return grad * result
    return result, backward


def test_formula_without_jvp_raises_torch_error():
    op = engine.define("exp_no_jvp(Tensor self) -> Tensor", np.exp, _no_jvp)
    x = _tensor([0.5, 1.0])
    with pytest.raises(NotImplementedError, match="Trying to use forward AD with exp_no_jvp that does not support it"):
        engine.jvp(op, (x,), (_tensor([1.0, 1.0]),))
    assert op(x).numpy().tolist() == np.exp([0.5, 1.0]).tolist()     # outside jvp: as before


def test_no_tangent_reaching_the_op_is_not_an_error():
    op = engine.define("exp_no_jvp2(Tensor self) -> Tensor", np.exp, _no_jvp)
    constant = _tensor([0.5, 1.0])
    out, tangent = engine.jvp(lambda a: a * op(constant), (_tensor([2.0, 3.0]),), (_tensor([1.0, 1.0]),))
    np.testing.assert_allclose(tangent.numpy(), np.exp([0.5, 1.0]))


def test_in_place_write_to_a_dual_raises():
    def f(a):
        b = a * 2.0
        b.add_(a)
        return b

    with pytest.raises(RuntimeError, match="add_ on a dual tensor inside jvp"):
        engine.jvp(f, (_tensor([1.0]),), (_tensor([1.0]),))


def test_nested_levels_are_refused():
    with pytest.raises(RuntimeError, match="nested forward-mode levels"):
        engine.jvp(lambda a: engine.jvp(lambda b: b.sin(), (a,), (a,))[1], (_tensor([1.0]),), (_tensor([1.0]),))


def test_tangent_shape_must_match():
    with pytest.raises(RuntimeError, match="a tangent of shape"):
        engine.jvp(lambda a: a.sin(), (_tensor([1.0, 2.0]),), (_tensor([1.0]),))


def test_reverse_mode_and_fast_paths_work_after_a_level():
    x = engine.tensor(np.array([0.3, 0.7]), dtype=engine.float64, requires_grad=True)
    engine.jvp(lambda a: (a.sin() * a).sum(), (x,), (_tensor([1.0, 1.0]),))
    (g,) = engine.grad((x.sin() * x).sum(), [x])
    np.testing.assert_allclose(g.numpy(), np.cos([0.3, 0.7]) * [0.3, 0.7] + np.sin([0.3, 0.7]))
    assert engine.is_grad_enabled()


def test_the_caches_stay_warm_across_levels_and_hand_over_to_plain_calls():
    """A level takes the formulas' plain fast paths out of the caches; the entries it makes are
    kept for the next level (no resolving again) and give way to the plain ones after it."""
    from reference_engine.dispatch import dispatcher

    x, t = _tensor([0.3, 0.7]), _tensor([1.0, 2.0])
    key = engine.Tensor                  # the cache key of a call with one Tensor
    cache = dispatcher.packet("sin").cache
    with engine.no_grad():
        x.sin()                                 # the plain entry: its kernel inlined
    assert cache[key].kernel is not None
    expected = np.cos([0.3, 0.7]) * [1.0, 2.0]
    _, tangent = engine.jvp(lambda a: a.sin(), (x,), (t,))
    np.testing.assert_allclose(tangent.numpy(), expected)
    level = cache[key]
    assert level.kernel is None                 # the level's entry: runs behind a test
    engine.jvp(lambda a: a.sin(), (x,), (t,))
    assert cache[key] is level                  # kept from one jvp to the next
    with engine.no_grad():
        np.testing.assert_allclose(x.sin().numpy(), np.sin([0.3, 0.7]))
    assert cache[key].kernel is not None        # the plain entry back after the level
    _, tangent = engine.jvp(lambda a: a.sin(), (x,), (t,))
    np.testing.assert_allclose(tangent.numpy(), expected)
    assert cache[key] is level


def test_a_level_call_with_keywords_or_grad_mode_on_carries_tangents():
    """The level's entries of a keyword call (its runner takes the keyword values) and of the
    recording path (grad mode turned on inside the function) still run the formulas' jvps."""
    a, b, ta, tb = _tensor([1.0, 2.0]), _tensor([3.0, 4.0]), _tensor([1.0, 0.5]), _tensor([2.0, 1.0])

    def f(x, y):
        with engine.enable_grad():
            product = x * y
        return at.add(product, y, alpha=3)

    for _ in range(2):          # the second time on the entries the first made
        out, tangent = engine.jvp(f, (a, b), (ta, tb))
        np.testing.assert_allclose(out.numpy(), [1 * 3 + 9, 2 * 4 + 12])
        np.testing.assert_allclose(tangent.numpy(), [1 * 3 + 1 * 2 + 3 * 2, 0.5 * 4 + 2 * 1 + 3 * 1])


@derivative("moments_subset(Tensor self, int[] dim) -> (Tensor total, Tensor squares)")
def _moments(self, dim):
    total, squares = at.sum(self, dim, True), at.sum(self * self, dim, True)
    def backward(grad_total, grad_squares):
        return None
    def jvp(self_t):
        squares_t = at.sum(self * self_t * 2.0, dim, True)
        return squares_t          # by name: the engine cannot tell which output it is for
    return (total, squares), backward


def test_tangents_for_a_subset_of_outputs_are_refused():
    op = engine.define("moments_subset(Tensor self, int[] dim) -> (Tensor total, Tensor squares)",
                       lambda x, dim: (x.sum(tuple(dim), keepdims=True), (x * x).sum(tuple(dim), keepdims=True)),
                       _moments)
    with pytest.raises(RuntimeError, match="returned 1 tangent\\(s\\) for 2 differentiable outputs"):
        engine.jvp(lambda a: op(a, [0]), (_tensor([1.0, 2.0]),), (_tensor([1.0, 1.0]),))


def _undeclared_with_jvp(self):
    result = at.exp(self)
    def backward(grad):
        return grad * result
    def jvp(self_t):
        return self_t * result
    return result, backward


def test_a_nested_jvp_the_front_end_cannot_read_is_reported_not_skipped():
    """The engine reads a formula's jvp from the front-end's model of its file: a function not
    declared with @derivative has none, and forward mode says so (its reverse mode still runs)."""
    op = engine.define("exp_undeclared_jvp(Tensor self) -> Tensor", np.exp, _undeclared_with_jvp)
    x = _tensor([0.5, 1.0])
    with pytest.raises(NotImplementedError, match="the front-end has no model of its formula .*_undeclared_with_jvp "
                                                  "declared with @derivative"):
        engine.jvp(op, (x,), (_tensor([1.0, 1.0]),))
    x.requires_grad_()
    (g,) = engine.grad(op(x).sum(), x)
    np.testing.assert_allclose(g.numpy(), np.exp([0.5, 1.0]))


@derivative("exp_auto_jvp(Tensor self) -> Tensor", jvp="auto_element_wise")
def _exp_auto_jvp(self):
    result = at.exp(self)
    def backward(grad):
        return grad * result
    return result, backward


@derivative("scaled_cube(Tensor self, Tensor other) -> Tensor", jvp="derived")
def _scaled_cube(self, other):
    result = self * self * self * other
    def backward(grad, *, needs_input_grad):
        grad_self = grad * (self * self * other) * 3.0 if needs_input_grad[0] else None
        grad_other = grad * (self * self * self) if needs_input_grad[1] else None
        return grad_self, grad_other
    return result, backward


def test_a_defined_formula_keeps_its_declared_jvp_rule():
    op = engine.define("exp_auto_jvp(Tensor self) -> Tensor", np.exp, _exp_auto_jvp)
    x, t = _tensor([0.5, -1.0]), _tensor([2.0, 3.0])
    _, tangent = engine.jvp(op, (x,), (t,))
    np.testing.assert_allclose(tangent.numpy(), np.exp([0.5, -1.0]) * [2.0, 3.0])


def test_a_derived_jvp_runs_in_the_engine_and_matches_finite_differences():
    op = engine.define("scaled_cube(Tensor self, Tensor other) -> Tensor",
                       lambda a, b: a * a * a * b, _scaled_cube)
    x, y = np.array([[0.5], [-1.0]]), np.array([1.5, 2.0, -0.5])     # broadcast both ways
    tx, ty = np.array([[2.0], [3.0]]), np.array([-1.0, 0.5, 1.0])
    _, tangent = engine.jvp(op, (_tensor(x), _tensor(y)), (_tensor(tx), _tensor(ty)))
    eps = 1e-6
    f = lambda a, b: a ** 3 * b                                      # noqa: E731
    expected = (f(x + eps * tx, y + eps * ty) - f(x - eps * tx, y - eps * ty)) / (2 * eps)
    np.testing.assert_allclose(tangent.numpy(), expected, rtol=1e-6)
