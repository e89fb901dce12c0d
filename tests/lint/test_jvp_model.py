"""The forward-mode derivative in the model: a written ``def jvp`` and the auto rules."""
from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from formulas import derivative
from transpiler.frontend import parse_module
from transpiler.lint.closure_rules import check_formula_module
from transpiler.model import CaptureKind, JvpRule

HEADER = "from formulas import at, derivative\n\n\n"


def model(body: str):
    module = parse_module("f.py", HEADER + textwrap.dedent(body))
    return module


def only_formula(body: str):
    module = model(body)
    assert module.diagnostics == ()
    [formula] = module.formulas
    return formula


def test_written_jvp_is_modelled_and_kept_out_of_the_forward() -> None:
    formula = only_formula('''
        @derivative("div.Tensor(Tensor self, Tensor other) -> Tensor")
        def div_tensor(self, other):
            result = at.div(self, other)
            other_sizes = other.sizes()
            def backward(grad):
                return grad / other, -grad * self / (other * other)
            def jvp(self_t, other_t):
                result_t = (self_t - other_t * result) / other
                return result_t
            return result, backward
        ''')
    jvp = formula.jvp
    assert jvp.rule is JvpRule.WRITTEN and jvp.params == ("self_t", "other_t")
    assert jvp.tangents == {"self_t": "self", "other_t": "other"}
    assert [(c.name, c.kind) for c in jvp.captures] == [("result", CaptureKind.OUTPUT), ("other", CaptureKind.INPUT)]
    assert all(not isinstance(s, cst.FunctionDef) for s in formula.forward)
    assert (jvp.span.line, jvp.span.col) == (11, 5)


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


RULES = [
    ('@derivative("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", jvp="auto_linear")\n'
     "def add_tensor(self, other, *, alpha=1):\n"
     "    result = at.add(self, other, alpha=alpha)\n"
     "    def backward(grad):\n"
     "        return grad, at.mul(grad, alpha)\n"
     "    return result, backward\n",
     "def jvp(self_t, other_t):\n    return at.add(self_t, other_t, alpha=alpha)\n"),
    ('@derivative("cat(Tensor[] tensors, int dim=0) -> Tensor", jvp="auto_linear")\n'
     "def cat(tensors, dim=0):\n"
     "    result = at.cat(tensors, dim)\n"
     "    def backward(grad):\n"
     "        return [grad]\n"
     "    return result, backward\n",
     "def jvp(tensors_t):\n    return at.cat(tensors_t, dim)\n"),
    ('@derivative("sin(Tensor self) -> Tensor", jvp="auto_element_wise")\n'
     "def sin(self):\n"
     "    result = at.sin(self)\n"
     "    def backward(grad):\n"
     "        return grad * at.cos(self)\n"
     "    return result, backward\n",
     "def jvp(self_t):\n    grad = self_t\n    return grad * at.cos(self)\n"),
]


@pytest.mark.parametrize(("source", "expected"), RULES, ids=["auto_linear", "auto_linear_list", "auto_element_wise"])
def test_auto_rules_stand_for_a_jvp(source: str, expected: str) -> None:
    formula = only_formula(source)
    assert formula.jvp.rule is not JvpRule.WRITTEN
    assert _code(formula.jvp.node) == expected


def test_formula_without_jvp_has_none() -> None:
    formula = only_formula('''
        @derivative("sin(Tensor self) -> Tensor")
        def sin(self):
            result = at.sin(self)
            def backward(grad):
                return grad * at.cos(self)
            return result, backward
        ''')
    assert formula.jvp is None


def test_imported_dialect_primals_and_original_self_are_parameters() -> None:
    formula = only_formula('''
        @derivative("mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)")
        def mul__tensor(self, other):
            result = at.mul_(self, other)
            def backward(grad):
                return grad * other, grad * self
            def jvp(self_t, other_t, other_p, original_self_p):
                result_t = self_t * other_p + other_t * original_self_p
                return result_t
            return result, backward
        ''')
    assert formula.jvp.params == ("self_t", "other_t", "other_p", "original_self_p")


BAD = [
    ('''
     @derivative("sin(Tensor self) -> Tensor")
     def sin(self):
         result = at.sin(self)
         def backward(grad):
             return grad
         def jvp(x_t):
             return x_t
         return result, backward
     ''', "jvp parameter `x_t` is neither the tangent `<input>_t` of a differentiable input (self)"),
    ('''
     @derivative("sin(Tensor self) -> Tensor", jvp="auto_linear")
     def sin(self):
         result = at.sin(self)
         def backward(grad):
             return grad
         def jvp(self_t):
             return self_t
         return result, backward
     ''', "defines `jvp` and declares jvp=\"auto_linear\"; keep one of them"),
    ('''
     @derivative("sin(Tensor self) -> Tensor", jvp="auto_sideways")
     def sin(self):
         result = at.sin(self)
         def backward(grad):
             return grad
         return result, backward
     ''', "jvp= takes \"auto_linear\", \"auto_element_wise\" or \"derived\""),
    ('''
     @derivative("mul.Tensor(Tensor self, Tensor other) -> Tensor", jvp="auto_element_wise")
     def mul(self, other):
         result = at.mul(self, other)
         def backward(grad):
             return grad * other, grad * self
         return result, backward
     ''', "jvp=\"auto_element_wise\" needs one tensor input"),
    ('''
     @derivative("sin(Tensor self) -> Tensor")
     def sin(self):
         result = at.sin(self)
         def backward(grad):
             return grad
         def jvp(self_t):
             return self_t
         def jvp(self_t):
             return self_t
         return result, backward
     ''', "defines `jvp` twice"),
    ('''
     @derivative("sin(Tensor self) -> Tensor")
     def sin(self):
         result = at.sin(self)
         def backward(grad):
             return grad
         def jvp(self_t=None):
             return self_t
         return result, backward
     ''', "jvp takes tangents `<input>_t`"),
]


@pytest.mark.parametrize(("source", "message"), BAD)
def test_malformed_jvp_is_db107(source: str, message: str) -> None:
    module = model(source)
    assert module.formulas == ()
    [diagnostic] = module.diagnostics
    assert diagnostic.code == "DB107" and message in diagnostic.message


def test_dsl_rejects_an_unknown_rule() -> None:
    with pytest.raises(ValueError, match="jvp='auto_sideways'"):
        derivative("sin(Tensor self) -> Tensor", jvp="auto_sideways")


TANGENT_COUNTS = [
    ("def jvp(self_t):\n        result_t = self_t\n",
     "f.py:10:9: DB106 jvp never returns its tangents; return the tangent itself (None for none), not a tuple "
     "(outputs: result)"),
    ("def jvp(self_t):\n        return self_t, self_t\n",
     "f.py:11:9: DB106 jvp returns 2 tangent(s) but the formula has 1 differentiable output(s) (result); "
     "return the tangent itself (None for none), not a tuple"),
    ("def jvp(self_t):\n        return self_t * at.cos(self)\n", None),
    ("def jvp(self_t):\n        result_t = self_t * at.cos(self)\n        return result_t\n", None),
]


@pytest.mark.parametrize(("jvp", "finding"), TANGENT_COUNTS)
def test_jvp_returns_one_tangent_per_differentiable_output(jvp: str, finding: str | None) -> None:
    source = HEADER + textwrap.dedent('''
        @derivative("sin(Tensor self) -> Tensor")
        def sin(self):
            result = at.sin(self)
            def backward(grad):
                return grad * at.cos(self)
            JVP
            return result, backward
        ''').replace("JVP", jvp)
    findings = check_formula_module(parse_module("f.py", source), source, {"sin", "cos"})
    assert [d.format() for d in findings if d.code == "DB106"] == ([finding] if finding else [])


def test_named_output_tangents_may_be_a_subset() -> None:
    """derivatives.yaml's dialect: ``result0_t`` only; the other output (a mask) has no tangent."""
    source = HEADER + textwrap.dedent('''
        @derivative("native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)")
        def native_dropout(input, p, train):
            result0, result1 = at.native_dropout(input, p, train)
            def backward(grad_result0, grad_result1):
                return grad_result0 * result1
            def jvp(input_t):
                result0_t = input_t * result1
                return result0_t
            return (result0, result1), backward
        ''')
    findings = check_formula_module(parse_module("f.py", source), source, {"native_dropout"})
    assert [d for d in findings if d.code == "DB106"] == []


@pytest.mark.parametrize(("returned", "count"), [("grad_self", 0), ("grad_self, None", 1)])
def test_an_index_list_argument_gets_no_gradient(returned: str, count: int) -> None:
    """``Tensor?[] indices`` is integral or boolean: ``index.Tensor``'s backward returns one gradient."""
    source = HEADER + textwrap.dedent('''
        @derivative("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor")
        def index_tensor(self, indices):
            result = at.index(self, indices)
            self_sizes = self.sizes()
            def backward(grad):
                grad_self = at.index_put(at.new_zeros(grad, self_sizes), indices, grad, True)
                return RETURNED
            def jvp(self_t):
                return at.index(self_t, indices)
            return result, backward
        ''').replace("RETURNED", returned)
    findings = check_formula_module(parse_module("f.py", source), source, {"index", "index_put", "new_zeros"})
    assert [d.code for d in findings] == ["DB106"] * count


def test_the_model_carries_the_closures_own_facts() -> None:
    """Position, rebound names and own returns of the backward and the jvp, and the forward's
    dataflow: computed once by the front-end, read by lint and the emitter."""
    formula = only_formula('''
        @derivative("mul.Tensor(Tensor self, Tensor other) -> Tensor")
        def mul_tensor(self, other):
            result = at.mul(self, other)
            n = self.dim()
            def backward(grad):
                if n == 0:
                    grad = grad * 1
                def unused():
                    return grad
                return grad * other, grad * self
            def jvp(self_t, other_t):
                for i in range(n):
                    self_t = self_t * 1
                return self_t * other + other_t * self
            return result, backward
    ''')
    assert formula.backward.index == 2 and formula.jvp.index == 3
    assert formula.backward.rebound == {"grad"} and formula.jvp.rebound == {"i", "self_t"}
    [own] = formula.backward.returns
    assert cst.Module([]).code_for_node(own) == "return grad * other, grad * self"
    assert len(formula.jvp.returns) == 1
    flow = formula.forward_flow
    assert set(flow.bindings) == {"result", "n"} and [b.index for b in flow.bindings["n"]] == [1]
    assert flow.env["result"].name == "TENSOR" and flow.env["n"].name == "METADATA"
