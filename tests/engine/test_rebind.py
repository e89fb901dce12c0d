"""The engine runs rebound copies of the formulas: same code, ``at`` bound to its operators."""
from __future__ import annotations

import traceback

import numpy as np
import pytest

import formulas
import reference_engine as engine
from formulas import at
from formulas import helpers, pointwise_unary
from reference_engine.dispatch import dispatcher


def test_the_engine_runs_the_formula_code_with_its_own_operator_table():
    formula = dispatcher.overload("sin").formula
    assert formula.__code__ is pointwise_unary.sin.__code__    # the very code of formulas/pointwise_unary.py
    assert formula.__wrapped__ is pointwise_unary.sin
    assert formula.__globals__["at"] is dispatcher.operators
    assert pointwise_unary.sin.__globals__["at"] is formulas.at       # the module itself is untouched
    assert formula.__globals__["at"].sin is dispatcher.packet("sin").op


def test_helpers_reached_by_a_formula_are_rebound_once_and_shared():
    mul_globals = dispatcher.overload("mul.Tensor").formula.__globals__
    div_globals = dispatcher.overload("div.Tensor").formula.__globals__
    assert mul_globals["sum_to"].__wrapped__ is helpers.sum_to
    assert mul_globals["sum_to"].__globals__["at"] is dispatcher.operators
    assert mul_globals["sum_to"] is div_globals["sum_to"]


def test_another_dsl_backend_does_not_change_what_the_engine_runs():
    class Refusing:
        def call(self, name, args, kwargs):
            raise AssertionError(f"the engine asked the DSL backend for at.{name}")

    x = engine.tensor(np.array([0.3, 0.6]), requires_grad=True)
    with formulas.use_backend(Refusing()):
        y = x.sin().tanh()
        y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos([0.3, 0.6]) * (1 - np.tanh(np.sin([0.3, 0.6])) ** 2))


def test_an_error_inside_a_formula_is_reported_at_its_source_line():
    def raising(self):
        result = at.sin(self)

        def backward(grad):
            raise ValueError("from the backward")
        return result, backward

    engine.define("engine_test_rebind_probe(Tensor self) -> Tensor", np.sin, raising)
    y = engine.op("engine_test_rebind_probe")(engine.tensor(np.array([1.0]), requires_grad=True))
    with pytest.raises(ValueError) as info:
        y.sum().backward()
    frames = traceback.extract_tb(info.value.__traceback__)
    assert frames[-1].filename == __file__ and frames[-1].name == "backward"


def test_a_formula_redefined_after_loading_is_picked_up_by_refresh():
    calls = []

    def first(self):
        calls.append("first")
        return at.neg(self), lambda grad: -grad

    engine.define("engine_test_rebind_twice(Tensor self) -> Tensor", np.negative, first)
    engine.op("engine_test_rebind_twice")(engine.tensor(np.array([1.0]), requires_grad=True))

    def second(self):
        calls.append("second")
        return at.neg(self), lambda grad: -grad

    engine.define("engine_test_rebind_twice(Tensor self) -> Tensor", np.negative, second)
    engine.op("engine_test_rebind_twice")(engine.tensor(np.array([1.0]), requires_grad=True))
    assert calls == ["first", "second"]
