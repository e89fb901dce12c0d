"""Forward mode in the generated C++ (no compiler needed): formula source -> the jvp function and
the forward wrapper's tangent block, as torchgen's VariableType writes them."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from transpiler.cpp.emit import emit_library
from transpiler.frontend import load_library

REPO = Path(__file__).resolve().parents[2]

CASES = [
    ("written", '''
     @derivative("mul.Tensor(Tensor self, Tensor other) -> Tensor")
     def mul_tensor(self, other):
         result = at.mul(self, other)
         def backward(grad):
             return grad * other, grad * self
         def jvp(self_t, other_t):
             result_t = self_t * other + other_t * self
             return result_t
         return result, backward
     ''', [
        "at::Tensor mul_tensor_jvp(\n"
        "    const at::Tensor& self_t,\n"
        "    const at::Tensor& other_t,\n"
        "    const at::Tensor& other,\n"
        "    const at::Tensor& self) {\n"
        "  auto result_t = (self_t * other) + (other_t * self);\n"
        "  return result_t;\n"
        "}\n",
        "  below_autograd.reset();\n"
        "  if (grad_fn && !(formulas::runtime::differentiable_dtype(result))) {\n"
        "    grad_fn.reset();\n"
        "  }\n"
        "  if ((torch::autograd::isFwGradDefined(self) || torch::autograd::isFwGradDefined(other)) && "
        "(formulas::runtime::differentiable_dtype(result))) {\n"
        "    formulas::runtime::refuse_complex(\"mul.Tensor\", self);\n"
        "    formulas::runtime::refuse_complex(\"mul.Tensor\", other);\n"
        "    formulas::runtime::refuse_complex(\"mul.Tensor\", result);\n"
        "    const auto self_t = formulas::runtime::tangent(self);\n"
        "    const auto other_t = formulas::runtime::tangent(other);\n"
        "    formulas::runtime::set_tangent(result, formulas::mul_tensor_jvp(self_t, other_t, "
        "formulas::runtime::primal(other), formulas::runtime::primal(self)));\n"
        "  }\n"
        "  if (grad_fn) {\n",
    ]),
    ("two_outputs", '''
     @derivative("var_mean.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> (Tensor, Tensor)")
     def var_mean_dim(self, dim, unbiased=True, keepdim=False):
         var, mean = at.var_mean(self, dim, unbiased, keepdim)
         def backward(grad_var, grad_mean):
             return grad_var
         def jvp(self_t):
             return None, at.mean(self_t, dim, keepdim)
         return (var, mean), backward
     ''', [
        "std::tuple<at::Tensor, at::Tensor> var_mean_dim_jvp(\n"
        "    const at::Tensor& self_t,\n"
        "    at::OptionalIntArrayRef dim,\n"
        "    bool keepdim) {\n"
        "  return {at::Tensor(), at::mean(self_t, dim, keepdim)};\n"
        "}\n",
        "    const auto output_tangents = formulas::var_mean_dim_jvp(self_t, dim, keepdim);\n"
        "    formulas::runtime::set_tangent(var, std::get<0>(output_tangents));\n"
        "    formulas::runtime::set_tangent(mean, std::get<1>(output_tangents));\n",
    ]),
    ("auto_element_wise", '''
     @derivative("exp(Tensor self) -> Tensor", jvp="auto_element_wise")
     def exp(self):
         result = at.exp(self)
         def backward(grad):
             return grad * result
         return result, backward
     ''', [
        "at::Tensor exp_jvp(\n"
        "    const at::Tensor& self_t,\n"
        "    const at::Tensor& result) {\n"
        "  auto grad = self_t;\n"
        "  return grad * result;\n"
        "}\n",
        "    formulas::runtime::set_tangent(result, formulas::exp_jvp(self_t, result));\n",
    ]),
    ("imported_dialect_primals", '''
     @derivative("hypot(Tensor self, Tensor other) -> Tensor")
     def hypot(self, other):
         result = at.hypot(self, other)
         def backward(grad):
             return grad * self / result, grad * other / result
         def jvp(self_t, other_t, self_p, other_p):
             result_t = (self_p * self_t + other_p * other_t) / result
             return result_t
         return result, backward
     ''', [
        "    const at::Tensor& self_p,\n"
        "    const at::Tensor& other_p,\n"
        "    const at::Tensor& result) {\n"
        "  auto result_t = ((self_p * self_t) + (other_p * other_t)) / result;\n",
        "    formulas::runtime::set_tangent(result, formulas::hypot_jvp(self_t, other_t, "
        "formulas::runtime::primal(self), formulas::runtime::primal(other), result));\n",
    ]),
    ("named_output_tangents", '''
     @derivative("var_mean.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> (Tensor, Tensor)")
     def var_mean_dim(self, dim, unbiased=True, keepdim=False):
         var, mean = at.var_mean(self, dim, unbiased, keepdim)
         def backward(grad_var, grad_mean):
             return grad_var
         def jvp(self_t):
             mean_t = at.mean(self_t, dim, keepdim)
             return mean_t
         return (var, mean), backward
     ''', [
        "at::Tensor var_mean_dim_jvp(\n",
        "    formulas::runtime::set_tangent(mean, formulas::var_mean_dim_jvp(self_t, dim, keepdim));\n  }\n",
    ]),
    ("optional_string_captured", '''
     @derivative("div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor")
     def div_Tensor_mode(self, other, *, rounding_mode):
         result = at.div(self, other, rounding_mode=rounding_mode)
         def backward(grad):
             return grad / other, None
         def jvp(self_t, other_t):
             result_t = at.new_zeros(result, result.sizes()) if rounding_mode is not None else self_t / other
             return result_t
         return result, backward
     ''', [
        # the dispatcher lends an optional string_view; the jvp keeps an owned optional string
        "    const std::optional<std::string>& rounding_mode,\n",
        "result, std::optional<std::string>(rounding_mode), formulas::runtime::primal(other)));\n",
    ]),
    ("no_jvp", '''
     @derivative("exp(Tensor self) -> Tensor")
     def exp(self):
         result = at.exp(self)
         def backward(grad):
             return grad * result
         return result, backward
     ''', [
        "at::Tensor exp(const at::Tensor& self) {\n"
        "  TORCH_CHECK_NOT_IMPLEMENTED(!(torch::autograd::isFwGradDefined(self)), \"Trying to use forward AD "
        "with exp that does not support it because its formula defines no jvp; add a nested `def jvp(...)` "
        "(or @derivative(..., jvp=\\\"auto_linear\\\" / \\\"auto_element_wise\\\")) to the formula\");\n"
        "  c10::intrusive_ptr<ExpBackward0> grad_fn;\n",
    ]),
]


@pytest.mark.parametrize(("source", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_jvp_transliteration(tmp_path: Path, source: str, expected: list[str]) -> None:
    (tmp_path / "ops.py").write_text("from formulas import at, derivative\n\n\n" + textwrap.dedent(source))
    output, diagnostics = emit_library(load_library(str(tmp_path)), load_library(str(REPO / "formulas")).operators)
    assert diagnostics == []
    code = output.files["ops.cpp"]
    for snippet in expected:
        assert snippet in code
    assert ("_jvp(" in code) == ("jvp" in source)


IN_PLACE = '''\
    from formulas import at, derivative


    @derivative("mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)")
    def mul__tensor(self, other):
        result = at.mul_(self, other)
        def backward(grad):
            return grad * other, grad * self
        def jvp(self_t, other_t, original_self_p):
            result_t = self_t * other + other_t * original_self_p
            return result_t
        return result, backward
    '''


def _emit_in_place(tmp_path: Path, source: str) -> tuple[str, list]:
    (tmp_path / "ops.py").write_text(textwrap.dedent(source))
    output, diagnostics = emit_library(load_library(str(tmp_path)), load_library(str(REPO / "formulas")).operators)
    return output.files.get("ops.cpp", ""), diagnostics


def test_an_in_place_jvp_writes_the_inputs_tangent_as_torch_does(tmp_path: Path) -> None:
    """torchgen's in-place forward mode: the values before the write (``original_self_p``) are
    copied before it, the outputs the jvp reads are primals (the written input carries a tangent),
    and the input's own tangent takes the jvp's (written in place, or set when it had none)."""
    code, diagnostics = _emit_in_place(tmp_path, IN_PLACE)
    assert diagnostics == []
    assert ("at::Tensor py_mul_u_tensor_jvp(\n    at::Tensor self_t,\n    const at::Tensor& other_t,\n"
            "    const at::Tensor& original_self_p,\n    const at::Tensor& other) {\n") in code
    wrapper = code[code.index("c10::intrusive_ptr<MulTensorBackward0> grad_fn;"):]
    order = ["  at::Tensor original_self_p;\n",
             "    original_self_p = formulas::runtime::primal(self).clone();\n",
             "std::optional<at::AutoDispatchBelowADInplaceOrView> below_autograd(std::in_place);",
             "    const auto self_t = formulas::runtime::tangent(self);\n",
             "    const auto written_tangent = formulas::py_mul_u_tensor_jvp(self_t, other_t, original_self_p, "
             "formulas::runtime::primal(other));\n",
             "    if (existing_tangent.defined() && !existing_tangent.is_same(written_tangent)) {\n"
             "      existing_tangent.copy_(written_tangent);\n"
             "    } else if (!existing_tangent.defined()) {\n"
             "      result._set_fw_grad(written_tangent, /*level*/ 0, /*is_inplace_op*/ true);\n",
             "torch::autograd::rebase_history(result, grad_fn);"]
    assert [wrapper.index(line) for line in order] == sorted(wrapper.index(line) for line in order)


def test_original_self_outside_an_in_place_jvp_is_a_diagnostic(tmp_path: Path) -> None:
    source = IN_PLACE.replace("Tensor(a!) self", "Tensor self").replace("-> Tensor(a!)", "-> Tensor")
    _, diagnostics = _emit_in_place(tmp_path, source.replace("at.mul_(self, other)", "at.mul(self, other)"))
    [diagnostic] = diagnostics
    assert diagnostic.code == "DB200" and "the jvp parameter `original_self_p`" in diagnostic.message


def test_an_in_place_formula_writes_its_input_as_torch_does(tmp_path: Path) -> None:
    """torch's in-place bookkeeping: a leaf or a view it may not write is refused (check_inplace),
    what the backward reads of the written input is kept from before the write (its values as a
    copy made with autograd on), the version is bumped and the input's history rebased onto the node."""
    code, diagnostics = _emit_in_place(tmp_path, IN_PLACE.replace(
        "        def jvp(self_t, other_t, original_self_p):\n"
        "            result_t = self_t * other + other_t * original_self_p\n            return result_t\n", ""))
    assert diagnostics == []
    assert "py_mul_u_tensor(at::Tensor& self, const at::Tensor& other) {" in code     # ATen's mutable kernel argument
    wrapper = code[code.index("c10::intrusive_ptr<MulTensorBackward0> grad_fn;"):]
    order = ["torch::autograd::check_inplace(self, static_cast<bool>(grad_fn));",
             "grad_fn->self_ = torch::autograd::SavedVariable(self.clone(), false);",
             "std::optional<at::AutoDispatchBelowADInplaceOrView> below_autograd(std::in_place);",
             "below_autograd.reset();", "torch::autograd::increment_version(self);",
             "torch::autograd::rebase_history(result, grad_fn);"]
    assert [wrapper.index(line) for line in order] == sorted(wrapper.index(line) for line in order)
    assert "set_history" not in wrapper.split("\n}\n")[0] and '#include "views.h"' in code


def test_an_in_place_formula_must_return_what_the_operator_writes(tmp_path: Path) -> None:
    """A forward that computes a new tensor would leave the input unwritten and rebase the wrong
    tensor's history: refused, never silently wrong."""
    _, diagnostics = _emit_in_place(tmp_path, IN_PLACE.replace("at.mul_(self, other)", "at.mul(self, other)"))
    [diagnostic] = diagnostics
    assert (diagnostic.line, diagnostic.col, diagnostic.code) == (4, 13, "DB205")
    assert "forward returns what the in-place operator returns (`result = at.mul_(...)`)" in diagnostic.message
