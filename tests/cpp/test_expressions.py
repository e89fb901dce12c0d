"""Transliteration of the formula dialect to C++: expressions, statements, types (no compiler needed)."""
from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from transpiler.cpp import types as T
from transpiler.cpp.emit import _header
from transpiler.cpp.expressions import (
    Binding, Context, HelperSignature, Untranslatable, cpp_name, translate, translate_condition,
)
from transpiler.cpp.statements import translate_body
from transpiler.schema import parse_schema

SCHEMAS = [
    "sum(Tensor self, *, ScalarType? dtype=None) -> Tensor",
    "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    "mul.Tensor(Tensor self, Tensor other) -> Tensor",
    "mul.Scalar(Tensor self, Scalar other) -> Tensor",
    "native_dropout_backward(Tensor grad_output, Tensor mask, float scale, bool[2] output_mask) -> Tensor",
    "expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)",
    "max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
    "_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
    "bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor",
    "linalg_pinv.atol_rtol_tensor(Tensor self, *, Tensor? atol=None, Tensor? rtol=None, bool hermitian=False) "
    "-> Tensor",
]


def context(**names: T.PyType) -> Context:
    operators: dict = {}
    for text in SCHEMAS:
        schema = parse_schema(text)
        operators[schema.name.base] = operators.get(schema.name.base, ()) + (schema,)
    helpers = {"sum_to": HelperSignature("sum_to", (("grad", T.TENSOR, None), ("sizes", T.INT_LIST, None)), T.TENSOR)}
    return Context(operators, helpers, {n: Binding(t, n) for n, t in names.items()})


def cpp(source: str, **names: T.PyType) -> tuple[str, T.PyType]:
    typed = translate(cst.parse_expression(source), context(**names))
    return typed.text, typed.type


TENSORS = {"grad": T.TENSOR, "self": T.TENSOR, "other": T.TENSOR, "alpha": T.SCALAR}


@pytest.mark.parametrize("source, expected", [
    ("grad * other", ("grad * other", T.TENSOR)),
    ("-grad * (self + 1)", ("-grad * (self + 1)", T.TENSOR)),
    ("at.mul(grad, other)", ("at::mul(grad, other)", T.TENSOR)),
    ("at.mul(grad, 2.5)", ("at::mul(grad, 2.5)", T.TENSOR)),                       # mul.Scalar by type
    ("at.sum(grad, [0, 1], True)", ("at::sum(grad, std::vector<int64_t>{0, 1}, true)", T.TENSOR)),
    ("at.sum(grad, dtype=None)", ("at::sum(grad, std::nullopt)", T.TENSOR)),
    ("at.sum(grad, [1], dtype=None)", ("at::sum(grad, std::vector<int64_t>{1}, false, std::nullopt)", T.TENSOR)),
    ("at.expand(grad, self.sizes())", ("grad.expand(self.sizes().vec())", T.TENSOR)),  # method-only op
    ("at.max(self, 1)", ("at::max(self, 1)", T.tuple_of(T.TENSOR, T.TENSOR))),
    # an ATen ``Tensor?`` gets an empty optional for None and for an undefined tensor (ATen reads an
    # optional holding an undefined tensor as present), typed, as at::linalg_pinv's float? overload
    # would make a bare std::nullopt ambiguous
    ("at.linalg_pinv(self, atol=other, rtol=None)",
     ("at::linalg_pinv(self, formulas::runtime::optional_tensor(other), std::optional<at::Tensor>())", T.TENSOR)),
    ("at.linalg_pinv(self, rtol=other, hermitian=True)",
     ("at::linalg_pinv(self, std::optional<at::Tensor>(), formulas::runtime::optional_tensor(other), true)",
      T.TENSOR)),
    ("sum_to(grad, self.sizes())", ("helpers::sum_to(grad, self.sizes().vec())", T.TENSOR)),
    ("self.dim() - 1", ("self.dim() - 1", T.INT)),
    ("self.size(-1)", ("self.size(-1)", T.INT)),
    ("self.numel() / 2", ("static_cast<double>(self.numel()) / 2", T.FLOAT)),
    ("7 // -2", ("formulas::runtime::floordiv(7, -2)", T.INT)),
    ("grad is None", ("!grad.defined()", T.BOOL)),
    ("grad is not None and self.dim() > 0", ("(grad.defined()) && (self.dim() > 0)", T.BOOL)),
    # a tuple of Nones takes the other branch's tuple type (undefined gradients of a multi-input line)
    ("at.max(self, 1) if grad is not None else (None, None)",
     ("(grad.defined()) ? at::max(self, 1) : std::make_tuple(at::Tensor(), at::Tensor())",
      T.tuple_of(T.TENSOR, T.TENSOR))),
    ("grad if self.dim() > 0 else None", ("(self.dim() > 0) ? grad : at::Tensor()", T.TENSOR)),
    ("0 < self.dim() <= 2", ("(0 < self.dim()) && (self.dim() <= 2)", T.BOOL)),
    ("len(self.sizes())", ("static_cast<int64_t>(self.sizes().vec().size())", T.INT)),
    # list() of a temporary evaluates it once (begin() and end() of two copies is undefined)
    ("list(self.sizes())", ("formulas::runtime::to_list<std::vector<int64_t>>(self.sizes().vec())", T.INT_LIST)),
    ("self > 0", ("self > 0", T.TENSOR)),
    ("alpha == 1", ("alpha.toDouble() == 1", T.BOOL)),
    # string literals by value, C++-escaped (octal escapes cannot run into the next character)
    (r"'\x74anh'", ('"tanh"', T.STR)),
    (r"'a\\b\"c\n'", ('"a\\134b\\042c\\012"', T.STR)),
    ("r'\\x74'", ('"\\134x74"', T.STR)),
    ("'\u00e9?1'", ('"\\303\\251\\0771"', T.STR)),
    # a Scalar's own methods (c10::Scalar's), as derivatives.yaml calls them
    ("alpha.conj()", ("alpha.conj()", T.SCALAR)),
    ("1.0 / alpha.toFloat()", ("static_cast<double>(1.0) / alpha.toFloat()", T.FLOAT)),
    ("alpha.toDouble() > 0.", ("alpha.toDouble() > 0.", T.BOOL)),
    ("alpha.isComplex()", ("alpha.isComplex()", T.BOOL)),
    ("self.is_complex()", ("self.is_complex()", T.BOOL)),                        # metadata
    ("self.is_contiguous() and not self.is_complex()",         # the det jvps' use_A_T
     ("self.is_contiguous() && !self.is_complex()", T.BOOL)),
    # Python's math: constants as the same double, functions of numbers as <cmath>'s
    ("2.0 / math.sqrt(math.pi)", ("static_cast<double>(2.0) / std::sqrt(static_cast<double>(3.141592653589793))",
                                  T.FLOAT)),
    ("grad * math.log(2.0)", ("grad * std::log(static_cast<double>(2.0))", T.TENSOR)),
])
def test_expressions(source, expected):
    assert cpp(source, **TENSORS) == expected


@pytest.mark.parametrize("source, expected", [
    # the imported dialect's C++ spellings: truncating integer division, grad mode, std::optional
    ("cpp.int_div(grad.size(1), groups)", ("grad.size(1) / groups", T.INT)),
    ("cpp.int_mod(-groups, 3)", ("-groups % 3", T.INT)),
    ("grad if GradMode.is_enabled() else self", ("at::GradMode::is_enabled() ? grad : self", T.TENSOR)),
    ("1.0 if not train.has_value() or not train.value() else 0.5",
     ("(!train.has_value() || !train.value()) ? 1.0 : 0.5", T.FLOAT)),
    ("eps.value_or(1e-6)", ("eps.value_or(1e-6)", T.FLOAT)),
    # a list display for a fixed-size list parameter is that std::array (a line's grad_input_mask flags)
    ("at.native_dropout_backward(grad, self, 0.5, [needs[1], needs[0]])",
     ("at::native_dropout_backward(grad, self, 0.5, std::array<bool, 2>{needs[1], needs[0]})", T.TENSOR)),
])
def test_imported_dialect_expressions(source, expected):
    names = {"groups": T.INT, "train": T.optional(T.BOOL), "eps": T.optional(T.FLOAT), "needs": T.list_of(T.BOOL, 3)}
    assert cpp(source, **TENSORS, **names) == expected


def test_a_conditional_narrows_an_optional_tested_against_none():
    """``x if c is None else f(c)``: the branch where ``c`` is not None sees its value (a Scalar
    passed to a float parameter), both for ``is None`` and ``is not None``."""
    def translated(source: str) -> str:
        ctx = context(count=T.INT, correction=T.optional(T.SCALAR))
        half = HelperSignature("half", (("value", T.FLOAT, None),), T.FLOAT)
        ctx = Context(ctx.operators, {**ctx.helpers, "half": half}, ctx.names)
        return translate(cst.parse_expression(source), ctx).text

    assert translated("half(1.0) if correction is None else half(correction)") == (
        "(!correction.has_value()) ? helpers::half(1.0) : helpers::half(correction.value().toDouble())")
    assert translated("half(correction) if correction is not None else half(count)") == (
        "(correction.has_value()) ? helpers::half(correction.value().toDouble()) : helpers::half(count)")
    with pytest.raises(Untranslatable):        # not narrowed outside the tested branch
        translated("half(correction) if correction is None else half(1.0)")


def test_indexing_wraps_only_when_needed():
    names = {"xs": T.INT_LIST, "i": T.INT}
    assert cpp("xs[0]", **names)[0] == "xs[0]"
    assert cpp("xs[-1]", **names)[0] == "xs[formulas::runtime::wrap_index(-1, xs.size())]"
    assert cpp("xs[i]", **names)[0] == "xs[formulas::runtime::wrap_index(i, xs.size())]"


def test_truth_values_follow_python():
    def condition(source: str, **names: T.PyType) -> str:
        return translate_condition(cst.parse_expression(source), context(**names)).text

    assert condition("xs", xs=T.INT_LIST) == "!xs.empty()"
    assert condition("n", n=T.optional(T.INT)) == "n.has_value() && *n"              # 0 and None are false
    assert condition("dim", dim=T.optional(T.INT_LIST)) == "dim.has_value() && !dim->empty()"
    with pytest.raises(Untranslatable):
        condition("grad", grad=T.TENSOR)                                              # value-dependent


def test_optional_list_is_dereferenced_where_used_as_a_list():
    assert cpp("len(dim)", dim=T.optional(T.INT_LIST)) == ("static_cast<int64_t>((*dim).size())", T.INT)



def test_optional_passed_to_a_helper_taking_its_value_is_unwrapped_checked():
    """``0 if start is None else slice_bound(start, n)`` (slice.Tensor's bounds): the optional goes to
    the ``int`` parameter as ``.value()``, which throws on an empty optional instead of reading garbage."""
    ctx = context(start=T.optional(T.INT), n=T.INT)
    ctx.helpers["slice_bound"] = HelperSignature("slice_bound", (("bound", T.INT, None), ("size", T.INT, None)), T.INT)
    typed = translate(cst.parse_expression("0 if start is None else slice_bound(start, n)"), ctx)
    assert (typed.text, typed.type) == ("(!start.has_value()) ? 0 : helpers::slice_bound(start.value(), n)", T.INT)

@pytest.mark.parametrize("source, code, fragment", [
    ("[x for x in xs]", "DB200", "list comprehension"),
    ("grad ** 2", "DB200", "'**'"),
    ("grad.exp()", "DB200", "tensor method 'exp' (tensor methods are metadata only; call at.exp)"),
    # metadata the C++ path does not write: never advised as an operator (there is no at.strides)
    ("grad.strides()", "DB200", "tensor metadata method 'strides' (the C++ path writes only sizes, size, dim"),
    ("xs[1:2]", "DB200", "slicing"),
    ("alpha.toComplexDouble()", "DB200", "the method 'toComplexDouble' of a Scalar"),
    ("math.sqrt(grad)", "DB200", "math.sqrt of a Tensor (call at.sqrt on tensors)"),
    ("math.tau", "DB200", "an attribute access"),
    ("at.sinh(grad)", "DB201", "unknown operator 'at.sinh'"),
    ("print(grad)", "DB201", "'print'"),
    ("at.mul(grad)", "DB202", "no declared overload of 'at.mul'"),
    ("undefined_name", "DB203", "'undefined_name'"),
])
def test_untranslatable_expressions(source, code, fragment):
    with pytest.raises(Untranslatable) as raised:
        cpp(source, xs=T.INT_LIST, **TENSORS)
    assert raised.value.code == code
    assert fragment in raised.value.message


def body(source: str, return_type: T.PyType | None, **names: T.PyType) -> list[str]:
    module = cst.parse_module(source)
    return [line.strip() for line in translate_body(module.body, context(**names), return_type).lines]


def test_locals_unify_none_and_tensor_and_hoist_from_blocks():
    lines = body(
        "grad_self = None\n"
        "if flag:\n"
        "    scaled = grad * 2\n"
        "    grad_self = scaled\n"
        "return grad_self\n",
        T.TENSOR, grad=T.TENSOR, flag=T.BOOL)
    assert lines == [
        "at::Tensor scaled{};",
        "auto grad_self = at::Tensor();",
        "if (flag) {",
        "scaled = grad * 2;",
        "grad_self = scaled;",
        "}",
        "return grad_self;",
    ]


def test_lists_loops_and_int_locals():
    lines = body(
        "dims = []\n"
        "count = 1\n"
        "for d in range(len(sizes)):\n"
        "    if sizes[d] == 1:\n"
        "        dims.append(d)\n"
        "    count = count * sizes[d]\n"
        "return dims\n",
        T.INT_LIST, sizes=T.INT_LIST)
    assert lines[:3] == ["std::vector<int64_t> dims = std::vector<int64_t>{};",
                         "int64_t count = 1;",
                         "for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {"]
    assert "dims.push_back(d);" in lines
    assert lines[-1] == "return dims;"


def test_tuple_unpacking_and_tuple_return():
    lines = body("values, indices = at.max(self, 0)\nreturn values, None\n",
                 T.tuple_of(T.TENSOR, T.TENSOR), self=T.TENSOR)
    assert lines == ["auto [values, indices] = at::max(self, 0);", "return {values, at::Tensor()};"]


def test_optional_scalar_is_its_value_where_a_none_test_narrows_it():
    """``if minimum is not None:`` (or the ``else`` of ``is None``) passes ``*minimum`` to an op
    taking a plain Scalar; outside the test it stays an optional."""
    lines = body(
        "kept = grad\n"
        "if minimum is not None:\n"
        "    kept = at.mul(kept, minimum)\n"
        "if maximum is None:\n"
        "    kept = kept * 2\n"
        "else:\n"
        "    kept = at.mul(kept, maximum)\n"
        "return kept\n",
        T.TENSOR, grad=T.TENSOR, minimum=T.optional(T.SCALAR), maximum=T.optional(T.SCALAR))
    assert lines == [
        "auto kept = grad;",
        "if (minimum.has_value()) {",
        "kept = at::mul(kept, (*minimum));",
        "}",
        "if (!maximum.has_value()) {",
        "kept = kept * 2;",
        "} else {",
        "kept = at::mul(kept, (*maximum));",
        "}",
        "return kept;",
    ]
    with pytest.raises(Untranslatable) as raised:      # not narrowed outside the test
        body("return at.mul(grad, minimum)\n", T.TENSOR, grad=T.TENSOR, minimum=T.optional(T.SCALAR))
    assert raised.value.code == "DB202"


def test_conflicting_types_are_a_diagnostic():
    with pytest.raises(Untranslatable) as raised:
        body("x = 1\nx = grad\n", None, grad=T.TENSOR)
    assert raised.value.code == "DB204"


def test_nested_function_is_a_diagnostic():
    with pytest.raises(Untranslatable) as raised:
        body("def inner():\n    pass\n", None)
    assert raised.value.code == "DB200" and "nested function 'inner'" in raised.value.message


@pytest.mark.parametrize("annotation, expected", [
    ("Tensor", "at::Tensor"), ("list[int]", "std::vector<int64_t>"), ("int", "int64_t"), ("float", "double"),
    ("Scalar", "at::Scalar"), ("Tensor | None", "at::Tensor"), ("list[int] | None", "std::optional<std::vector<int64_t>>"),
    ("list[Tensor]", "std::vector<at::Tensor>"), ("tuple[Tensor, Tensor]", "std::tuple<at::Tensor, at::Tensor>"),
    ("ScalarType", "at::ScalarType"), ("TensorOptions", "at::TensorOptions"),
    ("list[Tensor | None]", "c10::List<std::optional<at::Tensor>>"),
    ("list[Optional[Tensor]]", "c10::List<std::optional<at::Tensor>>"),
])
def test_annotation_types(annotation, expected):
    assert T.cpp_value(T.from_annotation(annotation)) == expected


def test_borrowed_list_parameters_are_copied_when_kept():
    scope = context().bind({"sizes": Binding(T.INT_LIST, "sizes", borrowed=True)})
    module = cst.parse_module("shape = sizes\nshape.append(1)\nreturn shape\n")
    lines = [line.strip() for line in translate_body(module.body, scope, T.INT_LIST).lines]
    assert lines == ["std::vector<int64_t> shape = formulas::runtime::to_owned(sizes);",
                     "shape.push_back(1);", "return shape;"]


@pytest.mark.parametrize("name, header", [
    ("mul", "mul"), ("zero_", "zero"),
    ("rrelu_with_noise_functional", "rrelu_with_noise"),          # torchgen files a functional variant there
])
def test_operator_headers(name, header):
    torch = pytest.importorskip("torch")
    assert _header(name) == header
    assert (Path(torch.__file__).parent / "include" / "ATen" / "ops" / f"{header}.h").is_file()


@pytest.mark.parametrize("name, expected", [
    ("grad", "grad"), ("self_sizes", "self_sizes"), ("_private", "_private"), ("x_", "x_"),
    ("delete", "py_delete"), ("register", "py_register"), ("xor", "py_xor"), ("grad_fn", "py_grad_fn"),
    ("_Scale", "py_Scale"), ("__w", "py_u_w"), ("a__b", "py_a_u_b"), ("___", "py_u_u_"),
])
def test_cpp_names_avoid_keywords_and_reserved_identifiers(name, expected):
    """Keywords and reserved identifiers (``_`` + capital, ``__`` anywhere) are mangled; the result
    is neither."""
    assert cpp_name(name) == expected
    assert "__" not in cpp_name(name) and not (cpp_name(name)[0] == "_" and cpp_name(name)[1:2].isupper())


def test_a_helper_call_resolves_among_its_overloads_in_order():
    """``name__variant`` helpers are FunctionsManual's other signatures of ``name``: a call of
    ``name`` is the first whose parameters accept the arguments (``unsqueeze_to(grad, dim, sizes)``
    for ``squeeze.dim``, with a list ``dim`` for ``squeeze.dims``)."""
    def signature(name: str, *params: tuple[str, T.PyType]) -> HelperSignature:
        return HelperSignature(name, tuple((n, t, None) for n, t in params), T.TENSOR)

    helpers = {h.name: h for h in (
        signature("unsqueeze_to", ("grad", T.TENSOR), ("sizes", T.INT_LIST)),
        signature("unsqueeze_to__dim", ("grad", T.TENSOR), ("dim", T.INT), ("sizes", T.INT_LIST)),
        signature("unsqueeze_to__dims", ("grad", T.TENSOR), ("dims", T.INT_LIST), ("sizes", T.INT_LIST)),
        signature("unsqueeze_to__dim__x", ("grad", T.TENSOR), ("x", T.TENSOR), ("y", T.TENSOR)))}
    scope = Context({}, helpers, {n: Binding(t, n) for n, t in {**TENSORS, "d": T.INT, "ds": T.INT_LIST}.items()})

    def call(source: str) -> str:
        return translate(cst.parse_expression(source), scope).text

    assert call("unsqueeze_to(grad, ds)") == "helpers::unsqueeze_to(grad, ds)"
    # the overloads' own names hold ``__``, reserved in C++: emitted mangled, as everywhere (cpp_name)
    assert call("unsqueeze_to(grad, d, ds)") == "helpers::py_unsqueeze_to_u_dim(grad, d, ds)"
    assert call("unsqueeze_to(grad, ds, ds)") == "helpers::py_unsqueeze_to_u_dims(grad, ds, ds)"
    with pytest.raises(Untranslatable) as raised:     # an overload's overload is not one of the name's
        call("unsqueeze_to(grad, self, other)")
    assert raised.value.code == "DB204"
    assert raised.value.message.startswith("no overload of helper 'unsqueeze_to' accepts these arguments "
                                           "(unsqueeze_to: cannot transliterate this call")


def test_a_fixed_length_list_argument_must_have_that_length():
    """``native_batch_norm_backward``'s ``bool[3] output_mask`` is a C++ ``std::array<bool, 3>``: the
    ``needs_input_grad`` of a formula with five inputs does not fit it (DB202, not a compile error)."""
    schema = parse_schema("native_batch_norm_backward(Tensor grad_out, Tensor input, bool[3] output_mask) "
                          "-> (Tensor, Tensor, Tensor)")
    names = {"grad": T.TENSOR, "self": T.TENSOR, "mask3": T.list_of(T.BOOL, 3), "mask5": T.list_of(T.BOOL, 5)}
    scope = Context({"native_batch_norm_backward": (schema,)}, {}, {n: Binding(t, n) for n, t in names.items()})
    fits = translate(cst.parse_expression("at.native_batch_norm_backward(grad, self, mask3)"), scope)
    assert fits.text == "at::native_batch_norm_backward(grad, self, mask3)"
    with pytest.raises(Untranslatable) as raised:
        translate(cst.parse_expression("at.native_batch_norm_backward(grad, self, mask5)"), scope)
    assert raised.value.code == "DB202"


def test_an_owned_optional_list_is_lent_to_an_optional_list_parameter():
    """``bias.sizes() if bias is not None else None`` is an owned ``std::optional<std::vector>``, which
    does not convert to ``at::OptionalIntArrayRef`` (``convolution_backward``'s ``bias_sizes``): it is
    lent for the call (C++ that did not compile before)."""
    schema = parse_schema("convolution_backward(Tensor grad_output, SymInt[]? bias_sizes) -> Tensor")
    names = {"grad": T.TENSOR, "bias": T.TENSOR, "sizes": T.optional(T.INT_LIST)}
    scope = Context({"convolution_backward": (schema,)}, {}, {n: Binding(t, n) for n, t in names.items()})
    text = translate(cst.parse_expression(
        "at.convolution_backward(grad, bias.sizes() if bias is not None else None)"), scope).text
    assert text.startswith("at::convolution_backward(grad, formulas::runtime::borrow((bias.defined()) ? ")
    assert translate(cst.parse_expression("at.convolution_backward(grad, sizes)"), scope).text == \
        "at::convolution_backward(grad, formulas::runtime::borrow(sizes))"
    assert translate(cst.parse_expression("at.convolution_backward(grad, None)"), scope).text == \
        "at::convolution_backward(grad, std::nullopt)"


@pytest.mark.parametrize("statement, expected", [
    ('raise NotImplementedError("the derivative for \'igamma: input\' is not implemented.")',
     'TORCH_CHECK_NOT_IMPLEMENTED(false, "the derivative for \'igamma: input\' is not implemented.");'),
    ('raise RuntimeError("a" "b")', 'TORCH_CHECK(false, "ab");'),
    ("raise ValueError('say \"no\"')", 'TORCH_CHECK_VALUE(false, "say \\042no\\042");'),
    ('raise TypeError("t")', 'TORCH_CHECK_TYPE(false, "t");'),
    ('raise IndexError("i")', 'TORCH_CHECK_INDEX(false, "i");'),
])
def test_raise_throws_torchs_error_of_that_type(statement, expected):
    """``TORCH_CHECK_NOT_IMPLEMENTED`` reaches Python as ``NotImplementedError``, ``TORCH_CHECK_VALUE``
    as ``ValueError`` (and so on), with the literal's text (:mod:`transpiler.raises`)."""
    assert body(f"if flag:\n    {statement}\nreturn grad\n", T.TENSOR, grad=T.TENSOR, flag=T.BOOL)[1] == expected


@pytest.mark.parametrize("statement", ['raise KeyError("k")', "raise", 'raise RuntimeError(f"{flag}")',
                                       'raise RuntimeError("r") from None'])
def test_another_raise_is_a_diagnostic(statement):
    with pytest.raises(Untranslatable) as raised:
        body(f"if flag:\n    {statement}\nreturn grad\n", T.TENSOR, grad=T.TENSOR, flag=T.BOOL)
    assert raised.value.code == "DB200" and "NotImplementedError" in raised.value.message
