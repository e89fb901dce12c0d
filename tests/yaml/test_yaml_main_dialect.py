"""derivatives.yaml's C++ idioms rewritten into the main formula dialect (main_dialect.to_main)."""
from __future__ import annotations

import ast

import pytest

from transpiler.diagnostics import TranspileError
from transpiler.yaml_import import cpp, pydialect
from transpiler.yaml_import.main_dialect import AtenNames, aten_names, to_main

# A small operator table, so that the cases do not depend on the installed torch's.
FUNCTIONS = frozenset({"cos", "sum", "gelu", "gelu_backward", "max", "linalg_solve_triangular", "div", "zeros", "conj",
                       "_to_copy", "ones", "full", "scalar_tensor", "where", "masked_fill", "logical_or",
                       "logical_not", "isnan", "diagonal", "sqrt", "exp", "mul", "pow", "logical_and", "elu_backward",
                       "polygamma", "mse_loss_backward"})
METHODS = frozenset({"contiguous", "view_as", "mul_", "to", "masked_fill_", "logical_or_", "logical_not_", "new_zeros"})
VIEWS = frozenset({"diagonal", "view_as", "contiguous", "to"})
SIGNATURES = {
    "gelu": ((("self",), ("approximate",)),),
    "gelu_backward": ((("grad_output", "self"), ("approximate",)),),
    "linalg_solve_triangular": ((("self", "B"), ("upper", "left", "unitriangular")),),
    # div.Tensor and div.Tensor_mode: two arguments fit the first positionally, three only by keyword
    "div": ((("self", "other"), ()), (("self", "other"), ("rounding_mode",))),
    # two overloads that disagree on the keyword: left positional
    "sum": ((("self",), ("dtype",)), (("self", "dim", "keepdim"), ("dtype",)), (("self",), ("other",))),
    # a factory's options: one TensorOptions position, or all four spelled out
    "_to_copy": ((("self",), ("dtype", "layout", "device", "pin_memory", "non_blocking", "memory_format")),),
    "contiguous": ((("self",), ("memory_format",)),),       # a method-only operator has keywords too
}
ATEN = AtenNames(FUNCTIONS, METHODS, SIGNATURES, VIEWS)


@pytest.mark.parametrize("source, python", [
    ("grad.defined() ? grad.cos() : grad", "at.cos(grad) if grad is not None else grad"),
    ("!grads[1].defined() && x", "grads[1] is None and x"),
    ("grad.defined() ? f(grad) : std::tuple<Tensor, Tensor>()", "f(grad) if grad is not None else (None, None)"),
    ("std::get<1>(at::max(self, 0))", "at.max(self, 0)[1]"),
    ("at::gelu_backward(grad, self, approximate)", "at.gelu_backward(grad, self, approximate=approximate)"),
    ("self.gelu(approximate)", "at.gelu(self, approximate=approximate)"),
    ("linalg_solve_triangular(A, B, true, false)", "at.linalg_solve_triangular(A, B, upper=True, left=False)"),
    ('at::div(grad, other, "trunc")', 'at.div(grad, other, rounding_mode="trunc")'),
    ("at::div(grad, other)", "at.div(grad, other)"),
    ("at::sum(grad, dim, true)", "at.sum(grad, dim, True)"),
    ("grad.sum(dim)", "at.sum(grad, dim)"),
    ("grad.contiguous().view_as(self)", "at.view(at.contiguous(grad), self.sizes())"),   # what view_as is
    ("grad.contiguous(fmt)", "at.contiguous(grad, memory_format=fmt)"),     # a method-only operator
    ("grad.mul_(2)", "grad.mul_(2)"),                                # in-place: stays a method
    ("alpha.conj() * grad.dim()", "alpha.conj() * grad.dim()"),     # a Scalar's method; metadata
    ("bias->defined()", "cpp.arrow(bias).defined()"),               # not a tensor method call
    ("f(grad, {{0, 0}}, {{}})", "f(grad, [0, 0], [[]])"),
    ("f(grad, bias->sym_sizes())", "f(grad, bias.sizes() if bias is not None else None)"),  # Tensor? bias
    ("std::tuple<Tensor, int64_t>()", "std.tuple[Tensor, int64_t]()"),  # only tuples of tensors are None
    ("at::sum_to(grad, self.sym_sizes())", "sum_to(grad, self.sizes())"),   # an ATen utility: the helper
    # fmap of a negation is the library's `negated` (roll's shifts back); of another lambda it stays
    ("fmap(reverse_list_symint(shifts), [](c10::SymInt i){return -i;})", "negated(reverse_list(shifts))"),
    ("fmap(shifts, [](c10::SymInt i){return i + 1;})", "fmap(shifts, cpp.lambda_(c10.SymInt)(lambda i: i + 1))"),
    ("_to_copy(self_t, dtype, layout, device, pin_memory, non_blocking, memory_format)",
     "at._to_copy(self_t, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory, "
     "non_blocking=non_blocking, memory_format=memory_format)"),
    ("_to_copy(self_t, options)", "at._to_copy(self_t, options)"),          # packed: no keyword
    # at::Reduction's members are the numbers the library's losses take; an optional's value_or
    ("mse_loss_backward(self_t, self_p, target_p, at::Reduction::None)", "at.mse_loss_backward(self_t, self_p, "
     "target_p, 0)"),
    ("f(at::Reduction::Mean, at::Reduction::Sum)", "f(1, 2)"),
    ("grad.sum(dim.value_or(IntArrayRef({})), keepdim)", "at.sum(grad, dim if dim is not None else [], keepdim)"),
    ("alpha.value_or(1)", "alpha if alpha is not None else 1"),    # an optional argument of any type
    # FunctionsManual's jvps of list operators read the list's tangents: the operator of those
    ("cat_jvp(tensors, dim)", "at.cat(tensors_t, dim)"),
    ("block_diag_jvp(tensors)", "at.block_diag(tensors_t)"),
    # integers: C++ `/` truncates toward zero; `//` (floor) is the same on non-negative operands
    ("grad.sym_size(1) / 2", "grad.size(1) // 2"),
    ("(self.sym_numel() + 1) % self.dim()", "(self.numel() + 1) % self.dim()"),
    ("grad.sym_size(1) / groups", "cpp.int_div(grad.size(1), groups)"),   # an int argument may be negative
    ("-n % 3", "cpp.int_mod(-n, 3)"),
    ("grad / self.sym_numel()", "grad / self.numel()"),                    # a tensor: true division
    ("1.0 / (1.0 - p)", "1.0 / (1.0 - p)"),
    # a factory given another tensor's options makes a tensor like that one: its new_* method
    ("at::zeros_symint(self.sym_sizes(), grad.options())", "at.new_zeros(grad, self.sizes())"),
    ("zeros({}, self.options())", "at.new_zeros(self, [])"),
    ("at::ones({}, (result).options())", "at.new_ones(result, [])"),
    ("at::full({2}, 0.5, grad.options())", "at.new_full(grad, [2], 0.5)"),
    ("at::scalar_tensor(0., grad.options())", "at.new_full(grad, [], 0.)"),
    ("at::zeros(sizes, options)", "at.zeros(sizes, options)"),                 # not a tensor's options
    ("grad.new_zeros_symint(self.sym_sizes(), self.options())", "at.new_zeros(self, self.sizes())"),
    ("grad.new_zeros(sizes)", "at.new_zeros(grad, sizes)"),
    ("at::scalar_tensor(0.)", "at.scalar_tensor(0.)"),
    # a conversion to another tensor's dtype is _to_copy with that dtype
    ("grad.to(self.scalar_type())", "at._to_copy(grad, dtype=self.scalar_type())"),
    ("(grad * 2).to(output.dtype())", "at._to_copy(grad * 2, dtype=output.scalar_type())"),
    ("grad.to(dtype)", "at.to(grad, dtype)"),                                  # a dtype argument, or a device
    # an in-place write into a temporary nobody else sees is the functional operator
    ("at::where(self == other, grad / 2, grad).masked_fill_(self < other, 0)",
     "at.masked_fill(at.where(self == other, grad / 2, grad), self < other, 0)"),
    ("grad.masked_fill((self >= other).logical_or_(other.isnan()).logical_not_(), 0)",
     "at.masked_fill(grad, at.logical_not(at.logical_or(self >= other, at.isnan(other))), 0)"),
    ("grad.masked_fill_(self < other, 0)", "grad.masked_fill_(self < other, 0)"),          # a named tensor
    ("self.diagonal().masked_fill_(mask, 0)", "at.diagonal(self).masked_fill_(mask, 0)"),  # a view: writes self
    ("(grad * 2).logical_or_(mask)", "(grad * 2).logical_or_(mask)"),    # not boolean: logical_or_ keeps its dtype
    # <cmath>'s constants and the arithmetic on them are numbers: Python's math, not at.sqrt
    ("2.0 / sqrt(M_PI) * exp(-(self.pow(2))) * grad", "2.0 / math.sqrt(math.pi) * at.exp(-(at.pow(self, 2))) * grad"),
    ("grad * std::sqrt(2 * M_PI)", "grad * math.sqrt(2 * math.pi)"),
    ("grad * result.conj() * M_LN2", "grad * at.conj(result) * math.log(2.0)"),
    ("grad * sqrt(self)", "grad * at.sqrt(self)"),
    # `&` of two tensor comparisons is their logical and; of Scalar or int arguments it stays
    ("grad.masked_fill((self == 0.) & (other <= 0.), 0.)",
     "at.masked_fill(grad, at.logical_and(self == 0., other <= 0.), 0.)"),
    ("(self < 0) | (other > 1)", "at.logical_or(self < 0, other > 1)"),
    ("(n == 0) & (alpha == 1)", "(n == 0) & (alpha == 1)"),
])
def test_rewrite_and_its_python(source, python):
    main = to_main(cpp.parse(source), frozenset({"alpha", "groups", "n", "p"}), aten=ATEN,
                   integers=frozenset({"groups", "n"}))
    assert pydialect.to_python(main) == python
    ast.parse(python, mode="eval")
    assert pydialect.from_python(python) == main           # the importer's round-trip check holds


@pytest.mark.parametrize("source, cpp_text", [
    ("grad.defined() ? f(grad) : std::tuple<Tensor, Tensor>()", "grad.defined() ? f(grad) : std::tuple<Tensor, Tensor>()"),
    ("!grad.defined()", "!grad.defined()"),
    ("at::gelu_backward(grad, self, approximate)", "at::gelu_backward(grad, self, approximate)"),
    ("grad.sym_size(1) / 2 + n / groups", "grad.size(1) / 2 + n / groups"),
])
def test_an_edited_line_prints_back_as_cpp(source, cpp_text):
    """emit-yaml prints a line whose Python was edited from its tree: keywords go in position,
    `is None` is `defined()`, a tuple of Nones is an empty tuple of tensors."""
    main = to_main(cpp.parse(source), aten=ATEN, integers=frozenset({"groups", "n"}))
    assert cpp.render(cpp.print_tokens(main)) == cpp_text
    assert cpp.render(cpp.print_tokens(pydialect.from_python("(a, b)"))) == "std::make_tuple(a, b)"


def test_torch_signatures_know_keyword_only_parameters():
    gelu = aten_names().signatures["gelu"]
    assert "contiguous" in aten_names().methods and "contiguous" not in aten_names().functions
    assert (("self",), ("approximate",)) in gelu
    python = pydialect.to_python(to_main(cpp.parse("at::round(self, decimals)")))
    assert python == "at.round(self, decimals=decimals)"
    # C++ packs a factory's dtype, layout, device and pin_memory into one TensorOptions argument
    python = pydialect.to_python(to_main(cpp.parse("at::zeros_symint(self.sym_sizes(), options)")))
    assert python == "at.zeros(self.sizes(), options)"
    python = pydialect.to_python(to_main(cpp.parse("at::empty_like(self, options, at::MemoryFormat::Contiguous)")))
    assert python == "at.empty_like(self, options, at.MemoryFormat.Contiguous)"


@pytest.mark.parametrize("python, message", [
    ("a is 1", "only a test for None"),
    ("a is None == b", "chained comparison"),
])
def test_none_tests_outside_the_dialect_are_refused(python, message):
    with pytest.raises(TranspileError, match=message):
        pydialect.from_python(python)


def test_a_none_test_as_operand_of_a_bitwise_operator_is_refused():
    # Python reads `a is not None & b` as `a is not (None & b)`
    tree = pydialect.from_python("(a is not None) & b")
    with pytest.raises(TranspileError, match="parenthesize"):
        pydialect.to_python(type(tree)(tree.op, tree.left.inner, tree.right))


@pytest.mark.parametrize("a", [-7, -6, -1, 0, 1, 6, 7])
@pytest.mark.parametrize("b", [-3, -2, 2, 3])
def test_cpp_integer_division_and_remainder_truncate_as_cpp_does(a, b):
    """``cpp.int_div`` / ``cpp.int_mod`` run C++'s integer ``/`` and ``%`` in Python (C's fmod is the oracle)."""
    import math

    from transpiler.yaml_import.dialect import cpp as dialect

    assert dialect.int_div(a, b) == math.trunc(a / b)
    assert dialect.int_mod(a, b) == math.fmod(a, b)
    assert dialect.int_div(a, b) * b + dialect.int_mod(a, b) == a


@pytest.mark.parametrize("source, python", [
    ("self_t.copy_(elu_backward(original_self_t, alpha))", "at.elu_backward(original_self_t, alpha)"),
    ("self_t.mul_(polygamma(n + 1, original_self_p))", "self_t * at.polygamma(n + 1, original_self_p)"),
    ("other_t.mul_(2)", "other_t.mul_(2)"),                   # not the tangent the operator writes
])
def test_an_in_place_jvp_returns_the_written_inputs_new_tangent(source, python):
    """In an in-place operator's jvp, the update of the written input's tangent is the new tangent
    (the C++ writes it into the input's own: ``transpiler/cpp/forward_ad.py``)."""
    main = to_main(cpp.parse(source), frozenset({"alpha", "n"}), aten=ATEN, written_tangent="self_t")
    assert pydialect.to_python(main) == python
