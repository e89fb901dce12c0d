"""Per-entry errors, the summary, and the two commands."""
from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

import pytest
import yaml

from transpiler.cli import main as transpile
from transpiler.yaml_import.importer import import_yaml
from transpiler.yaml_import.reader import read_directory

SMALL_YAML = """\
# a comment
- name: sin(Tensor self) -> Tensor
  self: grad * self.cos().conj()
  result: auto_element_wise

- name: mul.Tensor(Tensor self, Tensor other) -> Tensor
  self: mul_tensor_backward(grad, other, self.scalar_type())
  other: mul_tensor_backward(grad, self, other.scalar_type())
  result: other_t * self_p + self_t * other_p

- name: cos(Tensor self) -> Tensor
  self: grad * -self.sin( +

- name: max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)
  self: value_selecting_reduction_backward_symint(grad, dim, indices, self.sym_sizes(), keepdim)
  values: gather_with_keepdimed_indices(self_t, dim, indices, keepdim)
  output_differentiability: [True, False]

- name: not_an_op(Tensor self -> Tensor
  self: grad
"""


def test_untranslatable_entries_are_named_and_the_rest_imported():
    result = import_yaml(SMALL_YAML, "small.yaml")
    assert result.imported == 3
    assert [(p.line, p.code, p.message.split(": ")[0]) for p in result.problems] == [
        (11, "DB301", "entry `cos(Tensor self) -> Tensor`"), (19, "DB301", "entry `not_an_op(Tensor self -> Tensor`")]
    assert "cannot translate `grad * -self.sin( +`" in result.problems[0].format()
    assert result.problems[0].format().startswith("small.yaml:11:1: DB301 entry `cos(Tensor self) -> Tensor`")
    assert result.summary() == "imported 3 of 5 entries into 1 formula files; 2 could not be translated"



def test_a_malformed_item_does_not_shift_the_lines_of_the_entries_after_it():
    """Each problem names its own item's line, also after an item that is not a ``- name:`` mapping."""
    text = "- 42\n-   name: cos(Tensor self) -> Tensor\n    self: grad * -self.sin( +\n\n" + SMALL_YAML
    problems = import_yaml(text, "small.yaml").problems
    assert [(p.line, p.message.split(": ")[0]) for p in problems] == [
        (1, "entry `#0`"), (2, "entry `cos(Tensor self) -> Tensor`"),
        (15, "entry `cos(Tensor self) -> Tensor`"), (23, "entry `not_an_op(Tensor self -> Tensor`")]

def test_generated_formula_shape():
    text = import_yaml(SMALL_YAML, "small.yaml").files["derivatives_000.py"]
    assert '''@derivative("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", \
output_differentiability=[True, False])
def max_dim(self, dim, keepdim):
    values, indices = at.max(self, dim, keepdim)
    def backward(grad):
        grad_self = at.value_selecting_reduction_backward(grad, dim, indices, self.sizes(), keepdim)  \
# yaml: "value_selecting_reduction_backward_symint(grad, dim, indices, self.sym_sizes(), keepdim)"
        return grad_self
    def jvp(self_t):
        values_t = gather_with_keepdimed_indices(self_t, dim, indices, keepdim)
        return values_t
    return (values, indices), backward
''' in text
    assert '''    def jvp(self_t, other_t):
        result_t = other_t * self + self_t * other
        return result_t''' in text
    assert '@yaml_entry(jvp="auto_element_wise")' in text


def test_commands_round_trip(tmp_path: Path, capsys):
    source = tmp_path / "derivatives.yaml"
    source.write_text(SMALL_YAML)
    out = tmp_path / "imported"
    assert transpile(["import-yaml", str(source), "-o", str(out)]) == 1
    printed = capsys.readouterr().out
    assert f"{source}:11:1: DB301 entry `cos(Tensor self) -> Tensor`" in printed
    assert printed.rstrip().endswith("2 could not be translated")
    assert sorted(p.name for p in out.iterdir()) == ["__init__.py", "derivatives_000.py", "externals.py"]

    emitted = tmp_path / "emitted.yaml"
    assert transpile(["emit-yaml", str(out), "-o", str(emitted)]) == 0
    loaded = yaml.safe_load(emitted.read_text())
    original = [e for e in yaml.safe_load(SMALL_YAML) if e["name"].startswith(("sin", "mul", "max"))]
    assert loaded == original
    assert [e.name for e in read_directory(out)] == [e["name"] for e in original]


def test_import_never_replaces_a_directory_it_did_not_write(tmp_path: Path, capsys):
    source = tmp_path / "derivatives.yaml"
    source.write_text(SMALL_YAML)
    mine = tmp_path / "my_formulas"
    mine.mkdir()
    (mine / "sin.py").write_text("x = 1\n")
    assert transpile(["import-yaml", str(source), "-o", str(mine)]) == 2
    assert "not empty and not written by `transpile import-yaml` (sin.py)" in capsys.readouterr().err
    assert [p.name for p in mine.iterdir()] == ["sin.py"]
    out = tmp_path / "imported"
    assert transpile(["import-yaml", str(source), "-o", str(out)]) == 1
    (out / "derivatives_999.py").write_text("x = 1\n")    # what a larger earlier import wrote
    assert transpile(["import-yaml", str(source), "-o", str(out)]) == 1     # a re-import replaces it
    assert not (out / "derivatives_999.py").exists()
    (out / "notes.txt").write_text("mine\n")              # but never a file it did not write
    assert transpile(["import-yaml", str(source), "-o", str(out)]) == 2
    assert "holds files `transpile import-yaml` did not write (notes.txt)" in capsys.readouterr().err
    assert (out / "notes.txt").exists()


@pytest.mark.parametrize("case", ["a file", "the working directory", "the input's directory"])
def test_import_refuses_outputs_it_must_not_replace(tmp_path: Path, capsys, monkeypatch, case):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    source = inputs / "derivatives.yaml"
    source.write_text(SMALL_YAML)
    (tmp_path / "notes.txt").write_text("mine\n")
    monkeypatch.chdir(tmp_path)
    out = {"a file": "notes.txt", "the working directory": ".", "the input's directory": "inputs"}[case]
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    assert transpile(["import-yaml", str(source), "-o", out]) == 2
    err = capsys.readouterr().err
    assert err.startswith("transpile import-yaml: ") and len(err.splitlines()) == 1 and "Traceback" not in err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before and source.read_text() == SMALL_YAML


def test_import_keeps_the_directory_mode_and_reports_a_full_disk(tmp_path: Path, capsys, monkeypatch):
    source = tmp_path / "derivatives.yaml"
    source.write_text(SMALL_YAML)
    out = tmp_path / "imported"
    transpile(["import-yaml", str(source), "-o", str(out)])
    out.chmod(0o750)
    (out / "derivatives_999.py").write_text("x = 1\n")
    transpile(["import-yaml", str(source), "-o", str(out)])
    assert stat.S_IMODE(out.stat().st_mode) == 0o750 and not (out / "derivatives_999.py").exists()
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def full(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_bytes", full)
    monkeypatch.setattr(shutil, "copy2", lambda source, target: full(target, b""))
    monkeypatch.setattr(os, "link", lambda source, target: full(target, b""))     # unchanged files are linked
    capsys.readouterr()
    assert transpile(["import-yaml", str(source), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and len(err.splitlines()) == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["derivatives.yaml", "imported"]


def test_emit_yaml_output_errors_are_one_line(tmp_path: Path, capsys, monkeypatch):
    source = tmp_path / "derivatives.yaml"
    source.write_text(SMALL_YAML)
    out = tmp_path / "imported"
    transpile(["import-yaml", str(source), "-o", str(out)])
    capsys.readouterr()
    assert transpile(["emit-yaml", str(out), "-o", str(tmp_path)]) == 2           # a directory
    assert "is a directory" in capsys.readouterr().err
    target = tmp_path / "emitted.yaml"
    target.write_text("old\n")
    target.chmod(0o640)
    assert transpile(["emit-yaml", str(out), "-o", str(target)]) == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o640                        # the file keeps its mode
    emitted = target.read_text()

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    assert transpile(["emit-yaml", str(out), "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert f"{target}: cannot write: No space left on device" in err and len(err.splitlines()) == 1
    assert target.read_text() == emitted
    assert sorted(p.name for p in tmp_path.iterdir()) == ["derivatives.yaml", "emitted.yaml", "imported"]


def test_import_replaces_the_directory_only_on_success(tmp_path: Path, capsys):
    source = tmp_path / "derivatives.yaml"
    source.write_text(SMALL_YAML)
    out = tmp_path / "imported"
    transpile(["import-yaml", str(source), "-o", str(out)])
    (out / "stale.py").write_text("x = 1\n")
    assert transpile(["import-yaml", str(tmp_path / "missing.yaml"), "-o", str(out)]) == 2
    assert "missing.yaml:1:1: DB001 cannot read the file" in capsys.readouterr().err
    assert (out / "stale.py").exists()
    broken = tmp_path / "broken.yaml"
    broken.write_text("- name: [unclosed\n")
    assert transpile(["import-yaml", str(broken), "-o", str(out)]) == 2
    assert "broken.yaml:2:1: DB000 not valid YAML" in capsys.readouterr().err
    assert (out / "stale.py").exists()


@pytest.mark.parametrize("before, after, message", [
    ("grad * at.conj(at.cos(self))", "grad * at.conj(at.cos(self)",
     ":18:35: DB000 cannot parse the file: '(' was never closed"),
    ("grad * at.conj(at.cos(self))", "grad * cpp.nonsense(self)", "DB300 `grad * cpp.nonsense(self)`: unknown dialect call cpp.nonsense"),
    ("grad * at.conj(at.cos(self))", "grad * at.conj(at.cos(self))  # cpp: {3:", "the layout comment is not JSON"),
    ("grad * at.conj(at.cos(self))", "grad ** 2", "DB300 `grad ** 2`: `grad ** 2` is outside the formula dialect"),
    ("grad * at.conj(at.cos(self))", "(grad *  # a comment is lost in C++\n                      at.conj(at.cos(self)))",
     "DB300 `(grad *  # a comment is lost in C++"),
    ("def backward(grad):", "def backward_(grad):", "DB107"),
    ('# yaml: "grad * self.cos().conj()"', '# yaml: grad', "the yaml comment is not a JSON string"),
    ('@yaml_entry(jvp="auto_element_wise")', "@yaml_entry(jvp=JVP)", "decorator arguments must be literals"),
])
def test_emit_reports_a_damaged_formula_file(tmp_path: Path, capsys, before, after, message):
    source = tmp_path / "derivatives.yaml"
    source.write_text(SMALL_YAML)
    out = tmp_path / "imported"
    transpile(["import-yaml", str(source), "-o", str(out)])
    capsys.readouterr()
    formulas = out / "derivatives_000.py"
    text = formulas.read_text()
    assert before in text
    formulas.write_text(text.replace(before, after, 1))
    target = tmp_path / "emitted.yaml"
    assert transpile(["emit-yaml", str(out), "-o", str(target)]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"{formulas}:") and message in error
    assert not target.exists()


def test_emit_needs_an_imported_directory(tmp_path: Path, capsys):
    assert transpile(["emit-yaml", str(tmp_path / "nowhere"), "-o", str(tmp_path / "x.yaml")]) == 2
    assert "no formula files" in capsys.readouterr().err


def test_a_formula_edited_in_python_is_emitted_as_cpp(tmp_path: Path):
    source = tmp_path / "derivatives.yaml"
    source.write_text(SMALL_YAML)
    out = tmp_path / "imported"
    transpile(["import-yaml", str(source), "-o", str(out)])
    formulas = out / "derivatives_000.py"
    formulas.write_text(formulas.read_text().replace(
        "grad_self = grad * at.conj(at.cos(self))",
        "grad_self = at.where(self > 0, grad, None if needs_input_grad[0] else cpp.deref(scale))"
    ).replace("def backward(grad):", "def backward(grad, *, needs_input_grad):", 1))
    emitted = tmp_path / "emitted.yaml"
    assert transpile(["emit-yaml", str(out), "-o", str(emitted)]) == 0
    sin = yaml.safe_load(emitted.read_text())[0]
    # torchgen defines no grad_input_mask in a one-input line, and runs it only when its input
    # needs a gradient: the line's own flag is `true` there.
    assert sin["self"] == "at::where(self > 0, grad, true ? std::nullopt : *scale)"


# No output_differentiability, and the gradient formula uses `grad`: torchgen differentiates the first
# output only (frexp's exponent is an integer tensor, which autograd refuses to record).
IMPLIED_YAML = """\
- name: frexp.Tensor(Tensor self) -> (Tensor mantissa, Tensor exponent)
  self: grad / exponent.exp2()
  mantissa: self_t / exponent.exp2()

- name: max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)
  self: value_selecting_reduction_backward_symint(grad, dim, indices, self.sym_sizes(), keepdim)
  values: gather_with_keepdimed_indices(self_t, dim, indices, keepdim)
"""


def test_only_the_first_output_is_differentiable_when_the_formulas_use_grad(tmp_path: Path, capsys):
    text = import_yaml(IMPLIED_YAML, "implied.yaml").files["derivatives_000.py"]
    assert '''@derivative("frexp.Tensor(Tensor self) -> (Tensor mantissa, Tensor exponent)", \
output_differentiability=[True, False])
@yaml_entry(output_differentiability=None)
def frexp_Tensor(self):
    mantissa, exponent = at.frexp(self)
    def backward(grad):''' in text
    assert "def backward(grad):\n        grad_self = at.value_selecting_reduction_backward" in text
    source, out, emitted = tmp_path / "derivatives.yaml", tmp_path / "imported", tmp_path / "emitted.yaml"
    source.write_text(IMPLIED_YAML)
    assert transpile(["import-yaml", str(source), "-o", str(out)]) == 0
    assert transpile(["emit-yaml", str(out), "-o", str(emitted)]) == 0
    assert yaml.safe_load(emitted.read_text()) == yaml.safe_load(IMPLIED_YAML)      # no flags written back


def test_parentheses_around_a_whole_formula_are_kept(tmp_path: Path):
    """libcst keeps the parentheses that enclose a whole right-hand side (``ast`` drops them), and
    torchgen pastes the formula text as written: ``(grad * self)`` must come back with them."""
    source = tmp_path / "derivatives.yaml"
    source.write_text(SMALL_YAML.replace("self: grad * self.cos().conj()", "self: (grad * self)"))
    out = tmp_path / "imported"
    transpile(["import-yaml", str(source), "-o", str(out)])
    assert "grad_self = (grad * self)\n" in (out / "derivatives_000.py").read_text()
    emitted = tmp_path / "emitted.yaml"
    assert transpile(["emit-yaml", str(out), "-o", str(emitted)]) == 0
    assert yaml.safe_load(emitted.read_text())[0]["self"] == "(grad * self)"


MATH_YAML = """\
- name: erf(Tensor self) -> Tensor
  self: 2.0 / sqrt(M_PI) * exp(-(self.pow(2))) * grad
  result: auto_element_wise
"""


def test_cmath_constants_import_python_math_and_round_trip(tmp_path: Path):
    """``M_PI`` is ``math.pi``: the formula file imports ``math`` (never declared an external) and
    emit-yaml gives the C++ back from the line's ``# yaml:`` comment."""
    imported = import_yaml(MATH_YAML, "math.yaml")
    text = imported.files["derivatives_000.py"]
    assert "\nimport math\n" in text and "grad_self = 2.0 / math.sqrt(math.pi) * at.exp(" in text
    assert "math" not in imported.files["externals.py"]
    source = tmp_path / "derivatives.yaml"
    source.write_text(MATH_YAML)
    out, emitted = tmp_path / "imported", tmp_path / "emitted.yaml"
    assert transpile(["import-yaml", str(source), "-o", str(out)]) == 0
    assert transpile(["emit-yaml", str(out), "-o", str(emitted)]) == 0
    assert yaml.safe_load(emitted.read_text()) == yaml.safe_load(MATH_YAML)


MASK_YAML = """\
- name: bar(Tensor self, Tensor other, Tensor weight) -> Tensor
  other, self: bar_backward(grad, self, other, grad_input_mask)
  weight: bar_weight_backward(grad, weight, grad_input_mask[0])
"""


def test_a_lines_grad_input_mask_is_its_own_inputs_flags(tmp_path: Path):
    """torchgen gives a line one ``grad_input_mask`` flag per input it names, in the line's order;
    ``needs_input_grad`` has one per tensor input in schema order: the importer picks the line's
    (passing the formula's whole mask would ask for the wrong gradients), and emit-yaml gives the
    YAML back."""
    text = import_yaml(MASK_YAML, "mask.yaml").files["derivatives_000.py"]
    assert "bar_backward(grad, self, other, [needs_input_grad[1], needs_input_grad[0]])" in text
    assert "bar_weight_backward(grad, weight, needs_input_grad[2])" in text
    source = tmp_path / "derivatives.yaml"
    source.write_text(MASK_YAML)
    out, emitted = tmp_path / "imported", tmp_path / "emitted.yaml"
    assert transpile(["import-yaml", str(source), "-o", str(out)]) == 0
    assert transpile(["emit-yaml", str(out), "-o", str(emitted)]) == 0
    assert yaml.safe_load(emitted.read_text()) == yaml.safe_load(MASK_YAML)


NOT_IMPLEMENTED_YAML = """\
- name: igamma(Tensor self, Tensor other) -> Tensor
  self: 'not_implemented("igamma: input")'
  other: grad * other
"""


def test_not_implemented_is_a_raise_of_torch_s_error_and_prints_back(tmp_path: Path):
    """``self: not_implemented("igamma: input")`` raises torch's own NotImplementedError text when
    ``self``'s gradient is asked for (the formula language's raise, compiled to
    ``TORCH_CHECK_NOT_IMPLEMENTED``: ``tests/cpp/test_expressions.py``), the other input keeps its
    formula, and emit-yaml gives the line back."""
    text = import_yaml(NOT_IMPLEMENTED_YAML, "refused.yaml").files["derivatives_000.py"]
    assert ("    def backward(grad, *, needs_input_grad):\n"
            "        if needs_input_grad[0]:\n"
            "            raise NotImplementedError(\"the derivative for 'igamma: input' is not implemented.\")\n"
            "        grad_other = grad * other\n"
            "        return None, grad_other\n") in text
    source = tmp_path / "derivatives.yaml"
    source.write_text(NOT_IMPLEMENTED_YAML)
    out, emitted = tmp_path / "imported", tmp_path / "emitted.yaml"
    assert transpile(["import-yaml", str(source), "-o", str(out)]) == 0
    assert transpile(["emit-yaml", str(out), "-o", str(emitted)]) == 0
    assert yaml.safe_load(emitted.read_text()) == yaml.safe_load(NOT_IMPLEMENTED_YAML)


FOREACH_YAML = """\
- name: _foreach_div.List(Tensor[] self, Tensor[] other) -> Tensor[]
  self: div_tensor_self_backward(grads[i], other[i], self[i].scalar_type())
  other: grads[i] * (-self[i]) / (other[i] * other[i])
"""


def test_a_foreach_line_is_applied_to_each_element_and_prints_back(tmp_path: Path):
    """A ``_foreach_`` formula names one list element ``i``: as torchgen does, the backward applies
    each line to every element whose gradient is defined (None for the others), and emit-yaml
    gives the lines back."""
    text = import_yaml(FOREACH_YAML, "foreach.yaml").files["derivatives_000.py"]
    assert ("        grad_self = []\n"
            "        for i in range(len(grads)):\n"
            "            if grads[i] is not None:\n"
            "                grad_self.append(div_tensor_self_backward(grads[i], other[i], self[i].scalar_type()))\n"
            "            else:\n"
            "                grad_self.append(None)\n") in text
    assert "grad_other.append(grads[i] * (-self[i]) / (other[i] * other[i]))" in text
    source = tmp_path / "derivatives.yaml"
    source.write_text(FOREACH_YAML)
    out, emitted = tmp_path / "imported", tmp_path / "emitted.yaml"
    assert transpile(["import-yaml", str(source), "-o", str(out)]) == 0
    assert transpile(["emit-yaml", str(out), "-o", str(emitted)]) == 0
    assert yaml.safe_load(emitted.read_text()) == yaml.safe_load(FOREACH_YAML)


# Backwards in the shape of the shipped library's convolution and layer_norm formulas: the gradients
# come from one helper returning a tuple (``formulas/convolution.py``'s ``convolution_gradients``,
# ``formulas/normalization.py``'s ``layer_norm_backward``), unpacked or returned as it is.
TUPLE_FORMULAS = '''\
from formulas import at, derivative

from .externals import convolution_gradients, layer_norm_backward, layer_norm_jvp


@derivative("convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, "
            "SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor")
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    result = at.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    def backward(grad, *, needs_input_grad):
        grad_input, grad_weight, grad_bias = convolution_gradients(grad, input, weight, stride, padding, dilation,
                                                                   transposed, groups, needs_input_grad)
        return grad_input, grad_weight, grad_bias
    return result, backward


@derivative("conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0, "
            "SymInt[2] dilation=1, SymInt groups=1) -> Tensor")
def conv2d(input, weight, bias=None, stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=1):
    result = at.conv2d(input, weight, bias, stride, padding, dilation, groups)
    def backward(grad, *, needs_input_grad):
        gi, gw, gb = convolution_gradients(grad, input, weight, stride, padding, dilation, False, groups,
                                           needs_input_grad)
        return gi, gw, gb
    return result, backward


@derivative("native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) "
            "-> (Tensor, Tensor, Tensor)", output_differentiability=[True, False, False])
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    out, mean, rstd = at.native_layer_norm(input, normalized_shape, weight, bias, eps)
    def backward(grad, *, needs_input_grad):
        return layer_norm_backward(grad, input, weight, normalized_shape, mean, rstd, eps, needs_input_grad)
    def jvp(input_t, weight_t, bias_t):
        out_t = layer_norm_jvp(input, input_t, weight, weight_t, bias_t, normalized_shape, eps)
        return out_t
    return (out, mean, rstd), backward


@derivative("layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
            "float eps=1e-05, bool cudnn_enable=True) -> Tensor")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    result = at.layer_norm(input, normalized_shape, weight, bias, eps, cudnn_enable)
    def backward(grad, *, needs_input_grad):
        grad_input, grad_weight, grad_bias = layer_norm_backward(grad, input, weight, normalized_shape, None, None,
                                                                 eps, needs_input_grad)
        return grad_input, grad_weight, grad_bias
    return result, backward
'''


def test_a_backward_unpacking_a_helpers_tuple_is_torchgens_multi_output_line(tmp_path: Path, torchgen_generate):
    """Gradients from one tuple-valued call, unpacked under any names or returned as they are, are
    one line for all the inputs (``input, weight, bias: f(..., grad_input_mask)``), which torchgen
    reads as a multi-output formula: ``grad_input_mask`` is the line's flags, item i goes to input
    i. An output the forward names otherwise (``mean``, and ``out_t`` the tangent of ``out``) is the
    YAML's (``result1``, ``result0``)."""
    out = tmp_path / "formulas"
    out.mkdir()
    (out / "derivatives_000.py").write_text(TUPLE_FORMULAS)
    emitted = tmp_path / "emitted.yaml"
    assert transpile(["emit-yaml", str(out), "-o", str(emitted)]) == 0
    conv = "convolution_gradients(grad, input, weight, stride, padding, dilation, {}, groups, grad_input_mask)"
    assert [{k: v for k, v in e.items() if k != "name"} for e in yaml.safe_load(emitted.read_text())] == [
        {"input, weight, bias": conv.format("transposed")},
        {"input, weight, bias": conv.format("false")},
        {"output_differentiability": [True, False, False], "input, weight, bias":
         "layer_norm_backward(grad, input, weight, normalized_shape, result1, result2, eps, grad_input_mask)",
         "result0": "layer_norm_jvp(input_p, input_t, weight_p, weight_t, bias_t, normalized_shape, eps)"},
        {"input, weight, bias": "layer_norm_backward(grad, input, weight, normalized_shape, std::nullopt, "
                                "std::nullopt, eps, grad_input_mask)"},
    ]
    functions = (torchgen_generate(emitted, tmp_path / "torchgen") / "Functions.cpp").read_text()
    for node, call in [("ConvolutionBackward0", "convolution_gradients("),
                       ("Conv2DBackward0", "convolution_gradients("),
                       ("NativeLayerNormBackward0", "layer_norm_backward("),
                       ("LayerNormBackward0", "layer_norm_backward(")]:
        body = functions[functions.index(f"static variable_list {node}_apply_functional("):]
        body = body[:body.index("return grad_inputs;")]
        assert ("auto grad_input_mask = std::array<bool, 3>{\n"
                "        needs_input_grad[0],\n        needs_input_grad[1],\n        needs_input_grad[2],\n") in body
        assert f"auto grad_result = {call}" in body
        for i, name in enumerate(("input", "weight", "bias")):
            assert f"copy_range(grad_inputs, {name}_ix, std::get<{i}>(grad_result));" in body


@pytest.mark.parametrize("before, after, at, message", [
    # the shape conv had before its helper: the `if` assigns a gradient no line would hold
    ("        grad_input, grad_weight, grad_bias = convolution_gradients(grad, input, weight, stride, padding, "
     "dilation,\n"
     "                                                                   transposed, groups, needs_input_grad)\n",
     "        grad_input = None\n"
     "        if needs_input_grad[0]:\n"
     "            grad_input = convolution_input_backward(grad, weight, input.sizes(), stride, padding, dilation,\n"
     "                                                    transposed, groups)\n"
     "        grad_weight = convolution_weight_backward(grad, input, weight.sizes(), stride, padding, dilation,\n"
     "                                                  transposed, groups) if needs_input_grad[1] else None\n"
     "        grad_bias = convolution_bias_backward(grad, weight.dim()) if needs_input_grad[2] else None\n",
     "if needs_input_grad[0]", "`grad_input` is bound by a statement that is not its one line"),
    ("        return grad_input, grad_weight, grad_bias\n    return result, backward\n\n\n@derivative(\"conv2d",
     "        return grad_input, grad_weight, None\n    return result, backward\n\n\n@derivative(\"conv2d",
     "grad_input, grad_weight, grad_bias = conv", "`grad_bias` is no gradient the backward returns"),
    ("        return gi, gw, gb", "        return gi, gi, gb", "gi, gb", "`gi` is returned for `input` and `weight`"),
    ("        return gi, gw, gb", "        return gi, gw", "return gi, gw",
     "the backward returns 2 gradients for 3 tensor inputs (input, weight, bias)"),
    ("        return gi, gw, gb", "        return gi", "return gi",
     "the backward returns one name for 3 tensor inputs"),
    ("        return layer_norm_backward(", "        if grad is None:\n            return None\n"
     "        return layer_norm_backward(", "return None",
     "a derivatives.yaml backward is one expression per gradient: return the gradients (None for none) once"),
    ("    def backward(grad, *, needs_input_grad):\n        return layer_norm_backward(grad, input, weight, "
     "normalized_shape, mean, rstd, eps, needs_input_grad)",
     "    norm_dims = [input.dim() - 1]\n    def backward(grad, *, needs_input_grad):\n"
     "        return layer_norm_backward(grad, input, weight, normalized_shape, norm_dims, rstd, eps, "
     "needs_input_grad)",
     "norm_dims, rstd", "`norm_dims` is a local of the forward"),
    ("eps, needs_input_grad)\n        return grad_input, grad_weight, grad_bias",
     "eps, needs_input_grad)\n"
     "        grad_input = at.neg(grad_input)\n"
     "        return grad_input, grad_weight, grad_bias", "grad_input = at.neg",
     "`grad_input` is bound by a statement that is not its one line"),
    ("grad_input, grad_weight, grad_bias = layer_norm_backward(grad, input, weight, normalized_shape, None, None,\n"
     "                                                                 eps, needs_input_grad)",
     "grad_input, grad_weight = layer_norm_backward(grad, input, weight, normalized_shape, None, None, eps, "
     "[needs_input_grad[0], needs_input_grad[1]])\n        grad_bias = at.sum(grad) if needs_input_grad[0] else None",
     "grad_bias = at.sum", "`needs_input_grad[0]` is not the flag of an input this line is for (bias)"),
    ("grad_input, grad_weight, grad_bias = layer_norm_backward(grad, input, weight, normalized_shape, None, None,\n"
     "                                                                 eps, needs_input_grad)",
     "grad_input, grad_weight = layer_norm_backward(grad, input, weight, normalized_shape, None, None, eps, "
     "needs_input_grad)\n        grad_bias = at.sum(grad)",
     "grad_input, grad_weight = layer_norm", "`needs_input_grad` has a flag per tensor input (input, weight, bias), "
     "derivatives.yaml's `grad_input_mask` one per input this line is for (input, weight)"),
], ids=["assigned-in-an-if", "target-not-returned", "returned-twice", "too-few-returned", "one-name-returned",
        "early-return",
        "forward-local", "bound-twice", "another-inputs-flag", "the-whole-mask"])
def test_a_gradient_derivatives_yaml_cannot_hold_is_refused(tmp_path: Path, capsys, before, after, at, message):
    """Never a line dropped (torchgen would read the input as having no gradient) nor a mask read
    as another's: what has no derivatives.yaml spelling is a DB300 where it is written (``at``)."""
    assert TUPLE_FORMULAS.count(before) == 1
    text = TUPLE_FORMULAS.replace(before, after)
    out = tmp_path / "formulas"
    out.mkdir()
    formulas = out / "derivatives_000.py"
    formulas.write_text(text)
    target = tmp_path / "emitted.yaml"
    assert transpile(["emit-yaml", str(out), "-o", str(target)]) == 1
    lines = text.splitlines()
    line = next(i for i, line in enumerate(lines, 1) if at in line)
    assert capsys.readouterr().err.startswith(f"{formulas}:{line}:{lines[line - 1].index(at) + 1}: DB300 {message}")
    assert not target.exists()


def test_an_edited_lines_grad_input_mask_is_its_own_inputs_flags(tmp_path: Path):
    """A line printed from its tree (its ``# yaml:`` comment gone) gives ``needs_input_grad[k]`` as
    the flag of input k among the line's own, as the importer read it."""
    source = tmp_path / "derivatives.yaml"
    source.write_text(MASK_YAML)
    out, emitted = tmp_path / "imported", tmp_path / "emitted.yaml"
    assert transpile(["import-yaml", str(source), "-o", str(out)]) == 0
    formulas = out / "derivatives_000.py"
    formulas.write_text("\n".join(line.split("  # yaml: ")[0] for line in formulas.read_text().splitlines()))
    assert transpile(["emit-yaml", str(out), "-o", str(emitted)]) == 0
    assert {k: v for k, v in yaml.safe_load(emitted.read_text())[0].items() if k != "name"} == {
        "other, self": "bar_backward(grad, self, other, {grad_input_mask[0], grad_input_mask[1]})",
        "weight": "bar_weight_backward(grad, weight, true)"}     # a one-input line has no mask
