"""The Python spelling of formula expressions."""
from __future__ import annotations

import ast

import pytest

from transpiler import codes
from transpiler.diagnostics import TranspileError
from transpiler.yaml_import import cpp, pydialect


@pytest.mark.parametrize("source, python", [
    ("grad * self.sgn()", "grad * self.sgn()"),
    ("at::sum_to(grad, self.sym_sizes())", "at.sum_to(grad, self.sym_sizes())"),
    ("std::get<0>(linalg_lu_jvp(A_t, P))", "std.get[0](linalg_lu_jvp(A_t, P))"),
    ("grad.defined() ? f(grad) : std::tuple<Tensor, Tensor>()", "f(grad) if grad.defined() else std.tuple[Tensor, Tensor]()"),
    ("!train.has_value() || !train.value() ? 1 : 0.", "1 if not train.has_value() or not train.value() else 0."),
    ("bias->sym_sizes()", "cpp.arrow(bias).sym_sizes()"),
    ("dtype.has_value() ? *dtype : x", "cpp.deref(dtype) if dtype.has_value() else x"),
    ("f(std::nullopt, ::std::nullopt)", "f(None, cpp.root.std.nullopt)"),
    ("at::Reduction::None", "at.Reduction.None_"),
    ("g({1, 1}, {}, true, false)", "g([1, 1], [], True, False)"),
    ("fmap(s, [](c10::SymInt i){return -i;})", "fmap(s, cpp.lambda_(c10.SymInt)(lambda i: -i))"),
    ("(self == 0.) & (other <= -1.)", "(self == 0.) & (other <= -1.)"),
    ("normal(mean, std)", "normal(mean, std_)"),
    ('self.div(other, "trunc")', 'self.div(other, "trunc")'),
])
def test_spelling_and_back(source, python):
    tree = cpp.parse(source)
    assert pydialect.to_python(tree) == python
    ast.parse(python, mode="eval")                      # it is Python
    assert pydialect.from_python(python) == tree


def test_renames_apply_both_ways():
    tree = cpp.parse("grad_input_mask[0] ? self_p : x")
    names = {"grad_input_mask": "needs_input_grad", "self_p": "self"}
    python = pydialect.to_python(tree, names)
    assert python == "self if needs_input_grad[0] else x"
    assert pydialect.from_python(python, {v: k for k, v in names.items()}) == tree


def test_precedence_that_python_reads_differently_is_detected():
    # C++ reads `a == b & c` as `(a == b) & c`; Python would read `a == (b & c)`.
    tree = cpp.parse("a == b & c")
    assert pydialect.from_python(pydialect.to_python(tree)) != tree
    with pytest.raises(TranspileError, match="chain"):
        pydialect.to_python(cpp.parse("a < b == c"))
    # C++ `a != !b` would be `a != not b`, which is not Python: the dialect refuses it too
    assert pydialect.to_python(cpp.parse("a != !b")) == "a != not b"
    with pytest.raises(TranspileError, match="not a Python expression"):
        pydialect.from_python("a != not b")
    assert pydialect.from_python("a and not not b") == cpp.parse("a && !!b")
    with pytest.raises(TranspileError, match="chained comparison"):
        pydialect.from_python("a < b == c")
    assert pydialect.from_python("(a < b) == c") == cpp.parse("(a < b) == c")


def test_unknown_namespace_is_refused():
    with pytest.raises(TranspileError, match="namespace 'torch'"):
        pydialect.to_python(cpp.parse("torch::foo(x)"))


def test_refusals_carry_the_code_of_their_direction():
    """A tree with no Python spelling stops import-yaml (DB301); Python outside the dialect
    stops emit-yaml (DB300). The callers place the diagnostic at the entry or the line."""
    with pytest.raises(TranspileError) as printing:
        pydialect.to_python(cpp.parse("torch::foo(x)"))
    with pytest.raises(TranspileError) as reading:
        pydialect.from_python("a in b")
    assert [d.code for d in printing.value.diagnostics] == [codes.IMPORT_YAML_ENTRY.code]
    assert [d.code for d in reading.value.diagnostics] == [codes.EMIT_YAML_SHAPE.code]
    assert reading.value.diagnostics[0].message == "`in` has no C++ spelling"


def test_a_formula_name_that_is_a_namespace_shadows_it():
    names = pydialect.local_names(["self", "std", "from"])
    assert names == {"std": "std", "from": "from_"}
    tree = cpp.parse("std.sym_sizes()[from]")
    python = pydialect.to_python(tree, names)
    assert python == "std.sym_sizes()[from_]"
    assert pydialect.from_python(python, pydialect.inverse_names(names)) == tree
    # the namespace itself then has no spelling in that formula: the round trip says so
    shadowed = cpp.parse("std::get<0>(t)")
    assert pydialect.from_python(pydialect.to_python(shadowed, names), pydialect.inverse_names(names)) != shadowed
