"""``jvp="derived"`` in the front-end and ``transpile --show-jvp``: the derived source, and the
refusals as one-line diagnostics (the numerical proof is tests/engine/test_derived_jvp.py)."""
from __future__ import annotations

import textwrap

from transpiler.derive_jvp import code
from transpiler.frontend import load_library
from transpiler.model import JvpRule
from transpiler.show_jvp import main as show_jvp


def _package(tmp_path, source: str):
    package = tmp_path / "mine"
    package.mkdir()
    (package / "ops.py").write_text(textwrap.dedent(source))
    return load_library(str(package))


def test_a_derived_jvp_is_the_formulas_jvp(tmp_path):
    library = _package(tmp_path, '''
        from formulas import at, derivative

        @derivative("my_sin(Tensor self) -> Tensor", jvp="derived")
        def my_sin(self):
            result = at.sin(self)
            def backward(grad):
                return grad * at.cos(self)
            return result, backward
        ''')
    [formula] = library.formulas
    assert not library.diagnostics
    assert formula.jvp.rule is JvpRule.DERIVED and formula.jvp.params == ("self_t",)
    text = code(formula.jvp.node)
    assert "self_t * factor_3" in text and "at.cos(self)" in text


def test_a_backward_not_linear_in_grad_is_db107_naming_the_step(tmp_path):
    library = _package(tmp_path, '''
        from formulas import at, derivative

        @derivative("squared(Tensor self) -> Tensor", jvp="derived")
        def squared(self):
            result = at.mul(self, self)
            def backward(grad):
                return grad * grad
            return result, backward
        ''')
    [diagnostic] = library.diagnostics
    assert diagnostic.code == "DB107" and (diagnostic.line, diagnostic.col) == (4, 47)
    assert "`grad * grad` is not shown to be linear in the gradient" in diagnostic.message


def test_show_jvp_prints_the_derived_source(capsys):
    assert show_jvp(["sin"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("def jvp(self_t):") and "at.cos(self)" in printed


def test_show_jvp_says_why_a_backward_is_refused_and_what_is_unknown(capsys):
    assert show_jvp(["index_put"]) == 1
    assert "the sizes rules cannot tell them" in capsys.readouterr().err
    assert show_jvp(["no_such_op"]) == 2
    assert "no formula for `no_such_op`" in capsys.readouterr().err
