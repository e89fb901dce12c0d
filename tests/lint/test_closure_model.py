"""One closure model for backward and jvp: formula source -> the facts of each closure.

Each row gives a formula and, for its backward and its jvp, what the front-end
must find: the parameters, the captures with their kind (in order of first use),
the names the body rebinds, how many ``return`` statements it has, the calls it
makes (``at.X`` operators and functions by name) and, for a backward, its mask.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass

import pytest

from transpiler.frontend import parse_module
from transpiler.lint.closure_rules import check_formula_module
from transpiler.model import CaptureKind, Closure, ClosureRole, JvpRule

HEADER = "from formulas import at, derivative, helper\nfrom formulas.dsl import yaml_entry\n\n\n"
INPUT, OUTPUT, METADATA, SCALAR, ILLEGAL = (CaptureKind.INPUT, CaptureKind.OUTPUT, CaptureKind.METADATA,
                                            CaptureKind.SCALAR, CaptureKind.ILLEGAL)


@dataclass(frozen=True)
class Facts:
    """What one closure of a row must be."""

    params: tuple[str, ...]
    captures: tuple[tuple[str, CaptureKind], ...]
    rebound: frozenset[str] = frozenset()
    returns: int = 1
    operators: tuple[str, ...] = ()          # ``at.X`` calls, source order
    functions: tuple[str, ...] = ()          # other calls by name, source order
    needs_input_grad: str | None = None
    rule: JvpRule = JvpRule.WRITTEN


def facts(closure: Closure) -> Facts:
    return Facts(
        params=closure.params,
        captures=tuple((c.name, c.kind) for c in closure.captures),
        rebound=closure.rebound,
        returns=len(closure.returns),
        operators=tuple(c.name for c in closure.calls if c.operator),
        functions=tuple(c.name for c in closure.calls if not c.operator),
        needs_input_grad=closure.needs_input_grad,
        rule=closure.rule,
    )


TABLE = [
    pytest.param(
        '''
        @derivative("mul.Tensor(Tensor self, Tensor other) -> Tensor")
        def mul_tensor(self, other):
            result = at.mul(self, other)
            def backward(grad, *, needs_input_grad):
                return at.mul(grad, other), at.mul(grad, self)
            def jvp(self_t, other_t):
                return at.add(at.mul(self_t, other), at.mul(other_t, self))
            return result, backward
        ''',
        Facts(("grad",), (("other", INPUT), ("self", INPUT)), operators=("mul", "mul"),
              needs_input_grad="needs_input_grad"),
        Facts(("self_t", "other_t"), (("other", INPUT), ("self", INPUT)), operators=("add", "mul", "mul")),
        id="written-jvp-reads-inputs"),
    pytest.param(
        '''
        @derivative("exp(Tensor self) -> Tensor")
        def exp(self):
            result = at.exp(self)
            n = self.dim()
            def backward(grad):
                g = grad * result
                return g
            def jvp(self_t):
                for i in range(n):
                    self_t = self_t
                return self_t * result
            return result, backward
        ''',
        Facts(("grad",), (("result", OUTPUT),), rebound=frozenset({"g"})),
        Facts(("self_t",), (("n", METADATA), ("result", OUTPUT)), rebound=frozenset({"i", "self_t"}),
              functions=("range",)),
        id="output-metadata-and-rebound-names"),
    pytest.param(
        '''
        @derivative("sin(Tensor self) -> Tensor")
        def sin(self):
            c = at.cos(self)
            def backward(grad):
                if grad is None:
                    return None
                return grad * c
            def jvp(self_t):
                return self_t * c
            return at.sin(self), backward
        ''',
        Facts(("grad",), (("c", ILLEGAL),), returns=2),
        Facts(("self_t",), (("c", ILLEGAL),)),
        id="a-tensor-intermediate-is-illegal-in-both"),
    pytest.param(
        '''
        @helper
        def twice(x: Tensor) -> Tensor:
            return x + x

        @derivative("neg(Tensor self) -> Tensor", jvp="auto_element_wise")
        def neg(self):
            def backward(grad):
                return at.neg(twice(grad) * 0.5)
            return at.neg(self), backward
        ''',
        Facts(("grad",), (), operators=("neg",), functions=("twice",)),
        Facts(("self_t",), (), rebound=frozenset({"grad"}), operators=("neg",), functions=("twice",),
              rule=JvpRule.AUTO_ELEMENT_WISE),
        id="auto-element-wise-jvp-is-the-backward-on-the-tangent"),
    pytest.param(
        '''
        @derivative("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", jvp="auto_linear")
        def add_tensor(self, other, *, alpha=1):
            def backward(grad):
                return grad, grad * alpha
            return at.add(self, other, alpha=alpha), backward
        ''',
        Facts(("grad",), (("alpha", INPUT),)),
        Facts(("self_t", "other_t"), (("alpha", INPUT),), operators=("add",), rule=JvpRule.AUTO_LINEAR),
        id="auto-linear-jvp-captures-its-scalar-at-the-decorator"),
    pytest.param(
        '''
        @derivative("relu(Tensor self) -> Tensor")
        def relu(self):
            result = at.relu(self)
            def backward(grad, mask=result):
                return grad * (mask > 0)
            return result, backward
        ''',
        Facts(("grad",), (("result", OUTPUT),)),
        None,
        id="a-backward-default-is-a-capture-not-a-parameter"),
]


def only_formula(body: str):
    module = parse_module("f.py", HEADER + textwrap.dedent(body))
    assert module.diagnostics == ()
    return module.formulas[-1]


@pytest.mark.parametrize("source, backward, jvp", TABLE)
def test_closure_facts(source: str, backward: Facts, jvp: Facts | None) -> None:
    formula = only_formula(source)
    assert formula.backward.role is ClosureRole.BACKWARD and formula.backward.name == "backward"
    assert facts(formula.backward) == backward
    assert formula.captures == formula.backward.captures
    if jvp is None:
        assert formula.jvp is None and formula.closures == (formula.backward,)
        return
    assert formula.jvp.role is ClosureRole.JVP and formula.jvp.name == "jvp"
    assert facts(formula.jvp) == jvp
    assert formula.closures == (formula.backward, formula.jvp)
    assert formula.calls == formula.backward.calls + formula.jvp.calls


def test_a_synthesised_jvp_reads_at_its_jvp_argument() -> None:
    formula = only_formula(TABLE[4].values[0])
    [alpha] = formula.jvp.captures
    assert formula.jvp.index is None and alpha.first_use == formula.jvp.span
    decorator = (HEADER + textwrap.dedent(TABLE[4].values[0])).splitlines()[formula.jvp.span.line - 1]
    assert decorator[formula.jvp.span.col - 1:].startswith('jvp="auto_linear"')


@pytest.mark.parametrize("declared, expected", [
    ("", (0, 1)),
    (", output_differentiability=[True, False]", (0,)),
    (", output_differentiability=[False, True]", (1,)),
])
def test_differentiable_outputs_default_to_every_return(declared: str, expected: tuple[int, ...]) -> None:
    count = len(expected)
    grads = ", ".join(f"g{i}" for i in range(count))
    formula = only_formula(f'''
        @derivative("frexp.Tensor(Tensor self) -> (Tensor mantissa, Tensor exponent)"{declared})
        def frexp(self):
            mantissa, exponent = at.frexp(self)
            def backward({grads}):
                return g0
            return (mantissa, exponent), backward
        ''')
    assert formula.differentiable_outputs == expected


@pytest.mark.parametrize("decorator, key", [
    ("", None),
    ('@yaml_entry(non_differentiable=("other",))\n', None),
    ('@yaml_entry(dispatch="Default")\n', "Default"),
    ('@yaml_entry(dispatch="AutogradNestedTensor")\n', "AutogradNestedTensor"),
])
def test_dispatch_key(decorator: str, key: str | None) -> None:
    formula = only_formula(f'''
@derivative("neg(Tensor self) -> Tensor")
{decorator}def neg(self):
    def backward(grad):
        return -grad
    return at.neg(self), backward
''')
    assert formula.dispatch == key
    assert (formula.dispatch_node is None) == (key is None)


# The same mistakes in a backward and in a jvp: the message names the closure they are in.
WORDING = """
@derivative("sin(Tensor self) -> Tensor")
def sin(self):
    c = at.cos(self)
    k = 2.0
    def {closure}({param}):
        return {param} * c * k
    def {other}:
        return None
    k = 3.0
    return at.sin(self), backward
"""
BACKWARD_FIRST = dict(closure="backward", param="grad", other="jvp(self_t)")
JVP_FIRST = dict(closure="jvp", param="self_t", other="backward(grad)")


@pytest.mark.parametrize("names, expected", [
    (BACKWARD_FIRST, [
        ("DB100", "backward captures `c`: `c` is a tensor computed in the forward, so double backward through "
                  "it is silently wrong; recompute it in the backward from inputs and outputs (`--fix` does it)"),
        ("DB103", "backward captures `k`, which is bound again (or deleted) at line 14 after `def backward`: the "
                  "closure sees that late state; bind `k` before the backward and give later values another name"),
    ]),
    (JVP_FIRST, [
        ("DB100", "jvp captures `c`: `c` is a tensor computed in the forward, so differentiating the tangent "
                  "is silently wrong; recompute it in the jvp from inputs and outputs"),
        ("DB103", "jvp captures `k`, which is bound again (or deleted) at line 14 after `def jvp`: the "
                  "closure sees that late state; bind `k` before the jvp and give later values another name"),
    ]),
])
def test_rules_word_their_messages_from_the_role(names: dict[str, str], expected: list[tuple[str, str]]) -> None:
    source = HEADER + WORDING.format(**names)
    module = parse_module("f.py", source)
    findings = [(d.code, d.message, d.fix is not None)
                for d in check_formula_module(module, source, {"sin", "cos", "mul"})]
    fixed = names is BACKWARD_FIRST            # --fix rewrites backwards only
    assert findings == [(code, message, fixed and code == "DB100") for code, message in expected]
