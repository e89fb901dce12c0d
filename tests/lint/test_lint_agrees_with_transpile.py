"""What ``transpile`` refuses in a formula, ``transpile lint`` reports too: same code, same place
(lint runs the C++ emitter's own check, :func:`transpiler.cpp.emit.refusals`)."""
from __future__ import annotations

from pathlib import Path

import pytest

from lint.test_driver import write
from transpiler.cpp.generate import generate
from transpiler.lint.runner import lint

TEMPLATE = '''\
from formulas import at, derivative


@derivative("sin(Tensor self) -> Tensor")
def sin(self):
    result = at.sin(self)
    self_sizes = self.sizes()

    def backward(grad):
        return {returned}

    return result, backward
'''

# backward's return expression -> the code transpile refuses it with (line 10 in TEMPLATE)
REFUSED = [
    ("grad * self ** 2", "DB200"),
    ("grad.exp()", "DB200"),
    ("grad * self.item()", "DB200"),
    ("grad * [x for x in self_sizes][0]", "DB200"),
    ("at.mul(grad)", "DB202"),
    ("grad * undefined_name", "DB203"),
    ("print(grad)", "DB201"),
]


def refused_by_transpile(directory: Path) -> set[tuple[str, int, int, str]]:
    return {(Path(d.path).name, d.line, d.col, d.code) for d in generate(directory, lint=False).diagnostics}


def reported_by_lint(directory: Path) -> set[tuple[str, int, int, str]]:
    return {(Path(d.path).name, d.line, d.col, d.code) for d in lint([str(directory)]).diagnostics}


@pytest.mark.parametrize("returned, code", REFUSED)
def test_lint_reports_what_transpile_refuses_in_a_backward(tmp_path, returned, code):
    write(tmp_path / "op.py", TEMPLATE.format(returned=returned))
    refused = refused_by_transpile(tmp_path)
    assert {c for *_, c in refused} == {code}
    assert refused <= reported_by_lint(tmp_path)


@pytest.mark.parametrize("returned", ["grad * grad", "at.mul(grad, at.mul(grad, self))"])
def test_lint_reports_a_derived_jvp_transpile_cannot_derive(tmp_path, returned):
    derived = TEMPLATE.format(returned=returned).replace('-> Tensor")', '-> Tensor", jvp="derived")')
    write(tmp_path / "op.py", derived)
    refused = refused_by_transpile(tmp_path)
    assert {c for *_, c in refused} == {"DB107"}
    assert refused <= reported_by_lint(tmp_path)


def test_unknown_operator_in_the_forward_and_duplicate_formulas(tmp_path):
    write(tmp_path / "a.py", TEMPLATE.format(returned="grad").replace("at.sin(self)", "at.frobnicate(self)"))
    write(tmp_path / "b.py", TEMPLATE.format(returned="grad"))
    refused = refused_by_transpile(tmp_path)
    assert {c for *_, c in refused} == {"DB201", "DB206"}
    assert refused <= reported_by_lint(tmp_path)


def test_an_operator_without_formula_in_a_backward_is_reported_once(tmp_path):
    write(tmp_path / "op.py", TEMPLATE.format(returned="grad * at.special_bessel_j0(self)"))
    assert [(line, code) for _, line, _, code in sorted(reported_by_lint(tmp_path))] == [(10, "DB105")]


def test_a_formula_package_may_call_the_shipped_operators_and_helpers(tmp_path):
    write(tmp_path / "op.py", TEMPLATE.format(returned="grad * at.cos(self)"))
    assert reported_by_lint(tmp_path) == refused_by_transpile(tmp_path) == set()
    write(tmp_path / "op.py", TEMPLATE.format(returned="sum_to(grad, self_sizes)").replace(
        "from formulas import at, derivative", "from formulas import at, derivative\nfrom formulas.helpers import sum_to"))
    assert refused_by_transpile(tmp_path) == reported_by_lint(tmp_path) == set()    # the helper comes along


def test_one_file_of_the_shipped_library_is_checked_with_the_rest_of_it():
    shipped = Path(__file__).resolve().parents[2] / "formulas"
    assert lint([str(shipped / "pointwise_unary.py")]).diagnostics == ()


HELPER = '''\
from formulas import Tensor, helper


@helper
def twice(grad: Tensor) -> Tensor:
    return grad + grad
'''


def test_a_helper_in_another_file_of_the_package_is_known_when_one_file_is_linted(tmp_path):
    write(tmp_path / "pkg" / "__init__.py", "")
    write(tmp_path / "pkg" / "helpers.py", HELPER)
    op = write(tmp_path / "pkg" / "op.py", TEMPLATE.format(returned="twice(grad)").replace(
        "from formulas import at, derivative", "from formulas import at, derivative\nfrom pkg.helpers import twice"))
    assert refused_by_transpile(tmp_path / "pkg") == set()
    assert lint([str(op)]).diagnostics == ()


def test_a_copy_of_the_shipped_library_lints_and_transpiles_clean(tmp_path):
    import shutil

    shutil.copytree(Path(__file__).resolve().parents[2] / "formulas", tmp_path / "copy")
    assert reported_by_lint(tmp_path / "copy") == refused_by_transpile(tmp_path / "copy") == set()
