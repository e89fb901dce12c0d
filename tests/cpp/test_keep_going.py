"""``transpile --keep-going``: per-formula mode emits what it can and reports each formula it leaves out."""
from __future__ import annotations

from pathlib import Path

from tests.cpp.test_transpile_cli import GOOD as TRANSPILE_CLI_GOOD
from transpiler.cpp import generate

GOOD = TRANSPILE_CLI_GOOD.replace("from formulas import at, derivative",
                                  "from formulas import Tensor, at, derivative, helper")

# each refused for its own reason; the last calls a helper that cannot be transliterated
REFUSED = '''\


@derivative("exp(Tensor self) -> Tensor")
def exp(self):
    result = at.exp(self)
    def backward(grad):
        scale = {1: 2.0}
        return grad * result
    return result, backward


@derivative("tan(Tensor self) -> Tensor")
def tan(self):
    result = at.tan(self)
    middle = at.cos(self)
    def backward(grad):
        return grad / (middle * middle)
    return result, backward


@helper
def odd(x: Tensor) -> Tensor:
    table = {1: x}
    return x


@derivative("neg(Tensor self) -> Tensor")
def neg(self):
    result = at.neg(self)
    def backward(grad):
        return odd(-grad)
    return result, backward
'''


def run(formulas: Path, out: Path, capsys) -> tuple[int, list[str]]:
    code = generate.main(["--formulas", str(formulas), "--out", str(out), "--keep-going"])
    return code, capsys.readouterr().out.splitlines()


def test_emits_the_good_formulas_and_reports_each_refused_one(tmp_path, capsys):
    formulas = tmp_path / "pkg"
    formulas.mkdir()
    (formulas / "trig.py").write_text(GOOD + REFUSED)
    code, lines = run(formulas, tmp_path / "out", capsys)
    assert code == 1
    source = (tmp_path / "out" / "trig.cpp").read_text()
    assert "struct SinBackward0" in source
    assert "struct CosBackward0" in source
    for refused in ("ExpBackward0", "TanBackward0", "NegBackward0", "odd("):
        assert refused not in source + (tmp_path / "out" / "helpers.cpp").read_text()
    path = formulas / "trig.py"
    reported = [line for line in lines if line.startswith(str(path))]
    assert [(line.split(" ")[1], line.rsplit(" ", 1)[1]) for line in reported] == [
        ("DB200", "[exp]"), ("DB100", "[tan]"), ("DB200", "[odd]"), ("DB200", "[neg]")]
    assert reported[3].startswith(f"{path}:48:16: DB200 calls helper 'odd', which was left out")
    assert "2 of 5 formulas emitted" in lines


def test_nothing_changed_reports_the_same_without_regenerating(tmp_path, capsys):
    formulas = tmp_path / "pkg"
    formulas.mkdir()
    (formulas / "trig.py").write_text(GOOD + REFUSED)
    first = run(formulas, tmp_path / "out", capsys)
    code, lines = run(formulas, tmp_path / "out", capsys)
    assert code == 1
    assert lines[:-1] == first[1][:-2]
    assert lines[-1].endswith("up to date") or "up to date" in lines[-1]


def test_clean_package_exits_0_and_default_mode_stays_all_or_nothing(tmp_path, capsys):
    formulas = tmp_path / "pkg"
    formulas.mkdir()
    (formulas / "trig.py").write_text(GOOD)
    code, lines = run(formulas, tmp_path / "out", capsys)
    assert (code, "2 of 2 formulas emitted" in lines) == (0, True)
    (formulas / "trig.py").write_text(GOOD + REFUSED)
    assert generate.main(["--formulas", str(formulas), "--out", str(tmp_path / "strict")]) == 1
    assert not (tmp_path / "strict").exists()


# A derivatives.yaml entry whose only section is for nested tensors (torch has one such test op): its
# formula holds for nested tensors only and must not become every tensor's derivative.
NESTED_ONLY_YAML = '''\
- name: sin(Tensor self) -> Tensor
  self: grad * self.cos()
  result: auto_element_wise

- name: cos(Tensor self) -> Tensor
  dispatch:
    AutogradNestedTensor:
      self: grad * -self.sin()
'''


def test_a_dispatch_section_other_than_default_is_refused(tmp_path, capsys):
    from transpiler.yaml_import.importer import import_yaml

    formulas = tmp_path / "imported"
    formulas.mkdir()
    for name, text in import_yaml(NESTED_ONLY_YAML, "derivatives.yaml").files.items():
        (formulas / name).write_text(text)
    code, lines = run(formulas, tmp_path / "out", capsys)
    assert code == 1
    source = "".join(p.read_text() for p in (tmp_path / "out").glob("*.cpp"))
    assert "SinBackward0" in source and "CosBackward0" not in source
    refused = [line for line in lines if " DB200 " in line]
    assert len(refused) == 1 and refused[0].endswith("[cos]")
    assert "a formula for the dispatch key AutogradNestedTensor only" in refused[0]
    assert "1 of 2 formulas emitted" in lines


def test_includes_name_only_the_operators_of_emitted_code(tmp_path, capsys):
    """ATen headers come from the calls the emitter resolved in the code it wrote: the calls of a
    refused formula (``exp``: at.exp in its forward) or a refused helper add none."""
    formulas = tmp_path / "pkg"
    formulas.mkdir()
    helper_calls_exp = REFUSED.replace("    table = {1: x}\n", "    y = at.exp(x)\n    table = {1: y}\n")
    (formulas / "trig.py").write_text(GOOD + helper_calls_exp)
    run(formulas, tmp_path / "out", capsys)

    def includes(name: str) -> set[str]:
        text = (tmp_path / "out" / name).read_text()
        return {line for line in text.splitlines() if line.startswith("#include <ATen/ops/")}

    assert includes("trig.cpp") == {"#include <ATen/ops/sin.h>", "#include <ATen/ops/cos.h>"}
    assert includes("helpers.cpp") == set()


# digamma is refused for its own reason; lgamma only calls the operator, which stays declared
CALLS_A_REFUSED_OPERATOR = '''\
from formulas import at, derivative


@derivative("lgamma(Tensor self) -> Tensor")
def lgamma(self):
    result = at.lgamma(self)
    def backward(grad):
        return grad * at.digamma(self)
    return result, backward


@derivative("digamma(Tensor self) -> Tensor")
def digamma(self):
    result = at.digamma(self)
    def backward(grad):
        orders = {1: 1}
        return grad * at.polygamma(1, self)
    return result, backward


@derivative("polygamma(int n, Tensor self) -> Tensor")
def polygamma(n, self):
    result = at.polygamma(n, self)
    def backward(grad):
        return grad * at.polygamma(n + 1, self)
    return result, backward
'''


def test_a_refused_formula_keeps_its_operator_declared_for_its_callers(tmp_path, capsys):
    """Leaving digamma's node out must not refuse lgamma as calling an "unknown operator": at.digamma
    is still declared (lint, which sees the whole package, resolves it too)."""
    formulas = tmp_path / "pkg"
    formulas.mkdir()
    (formulas / "gamma.py").write_text(CALLS_A_REFUSED_OPERATOR)
    code, lines = run(formulas, tmp_path / "out", capsys)
    assert code == 1
    refused = [line for line in lines if line.startswith(str(formulas))]
    assert len(refused) == 1 and " DB200 " in refused[0] and refused[0].endswith("[digamma]")
    source = (tmp_path / "out" / "gamma.cpp").read_text()
    assert "struct LgammaBackward0" in source and "at::digamma(" in source
    assert "DigammaBackward0" not in source
    assert "2 of 3 formulas emitted" in lines


# tan's jvp calls an operator the package does not declare; its backward is fine
JVP_NOT_TRANSLITERABLE = '''\
from formulas import at, derivative


@derivative("tan(Tensor self) -> Tensor")
def tan(self):
    result = at.tan(self)
    def backward(grad):
        return grad * (1 + result * result)
    def jvp(self_t):
        result_t = self_t * at.undeclared_sec2(self)
        return result_t
    return result, backward
'''


def test_a_jvp_that_does_not_transliterate_leaves_out_the_jvp_alone(tmp_path, capsys):
    """The backward is emitted; forward AD raises torch's "does not support it" error with the reason,
    and the report names the jvp (never a silently missing tangent)."""
    formulas = tmp_path / "pkg"
    formulas.mkdir()
    (formulas / "trig.py").write_text(JVP_NOT_TRANSLITERABLE)
    code, lines = run(formulas, tmp_path / "out", capsys)
    assert code == 1
    source = (tmp_path / "out" / "trig.cpp").read_text()
    assert "struct TanBackward0" in source and "tan_jvp" not in source
    assert ('TORCH_CHECK_NOT_IMPLEMENTED(!(torch::autograd::isFwGradDefined(self)), "Trying to use forward AD '
            "with tan that does not support it because its jvp could not be transliterated to C++ (DB105 jvp "
            "calls at.undeclared_sec2, which has no formula in the library") in source
    reported = [line for line in lines if line.startswith(str(formulas))]
    assert len(reported) == 1 and reported[0].startswith(f"{formulas / 'trig.py'}:10:29: DB105 ")
    assert reported[0].endswith("[tan jvp]")
    assert "1 of 1 formulas emitted" in lines
