"""The front-end: formula files to the typed model, and the capture dataflow."""
from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transpiler.dataflow import bound_names, closure_reads, global_reads
from transpiler.frontend import load_library, parse_module
from transpiler.model import CaptureKind, Span

MUL = '''\
from formulas import at, derivative
from formulas.helpers import sum_to


@derivative("mul.Tensor(Tensor self, Tensor other) -> Tensor")
def mul_tensor(self, other):
    result = at.mul(self, other)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        grad_self = sum_to(grad * other, self_sizes) if needs_input_grad[0] else None
        grad_other = sum_to(grad * self, other_sizes) if needs_input_grad[1] else None
        return grad_self, grad_other
    return result, backward
'''

MAX_DIM = '''\
from formulas import at, derivative, helper, nondifferentiable

nondifferentiable("eq.Tensor(Tensor self, Tensor other) -> Tensor", "zeros_like(Tensor self) -> Tensor")


@helper
def scatter_back(grad: Tensor, dim: int, indices: Tensor, sizes: list[int], keepdim: bool = False) -> Tensor:
    return grad


@derivative("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
            output_differentiability=[True, False])
def max_dim(self, dim, keepdim=False):
    values, indices = at.max(self, dim, keepdim)
    self_sizes = self.sizes()
    def backward(grad):
        return scatter_back(grad, dim, indices, self_sizes, keepdim)
    return (values, indices), backward
'''


def code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node).strip()


def test_formula_model_of_a_binary_op() -> None:
    module = parse_module("mul.py", MUL)
    assert module.diagnostics == ()
    [formula] = module.formulas
    assert formula.op_name == "mul.Tensor"
    assert str(formula.schema) == "mul.Tensor(Tensor self, Tensor other) -> Tensor"
    assert formula.function == "mul_tensor"
    assert formula.span == Span(6, 1)
    assert formula.params == ("self", "other")
    assert [a.name for a in formula.differentiable_inputs] == ["self", "other"]
    assert formula.outputs == ("result",)
    assert [code(e) for e in formula.returned] == ["result"]
    assert formula.rebound_inputs == frozenset()
    assert code(formula.schema_node) == '"mul.Tensor(Tensor self, Tensor other) -> Tensor"'
    assert module.span(formula.schema_node) == Span(5, 13)
    assert formula.output_differentiability is None
    assert [code(s) for s in formula.forward] == [
        "result = at.mul(self, other)", "self_sizes = self.sizes()", "other_sizes = other.sizes()",
    ]
    assert formula.backward.params == ("grad",)
    assert formula.backward.needs_input_grad == "needs_input_grad"
    assert formula.backward.span == Span(10, 5)
    assert module.span(formula.backward.node.name) == Span(10, 9)


def test_captures_are_classified_with_first_use_and_definition() -> None:
    [formula] = parse_module("mul.py", MUL).formulas
    captures = {c.name: c for c in formula.captures}
    assert {n: c.kind for n, c in captures.items()} == {
        "other": CaptureKind.INPUT, "self": CaptureKind.INPUT,
        "self_sizes": CaptureKind.METADATA, "other_sizes": CaptureKind.METADATA,
    }
    # Ordered by first use; the first use is the earliest read inside the backward.
    assert [c.name for c in formula.captures] == ["other", "self_sizes", "self", "other_sizes"]
    assert captures["other"].first_use == Span(11, 35)
    assert captures["self"].first_use == Span(12, 36)
    assert captures["self"].definition is None
    assert code(captures["self_sizes"].definition) == "self.sizes()"
    # Module-level names (at, sum_to), builtins and the backward's own names are not captures.
    assert not {"at", "sum_to", "grad", "needs_input_grad", "grad_self"} & set(captures)


def test_tuple_outputs_output_differentiability_helpers_and_nondifferentiable() -> None:
    module = parse_module("max.py", MAX_DIM)
    assert module.diagnostics == ()
    [formula] = module.formulas
    assert formula.outputs == ("values", "indices")
    assert [code(e) for e in formula.returned] == ["values", "indices"]
    assert code(formula.returned_display) == "(values, indices)"
    assert formula.output_differentiability == (True, False)
    assert formula.backward.params == ("grad",)
    assert formula.backward.needs_input_grad is None
    assert {c.name: c.kind for c in formula.captures} == {
        "dim": CaptureKind.INPUT, "indices": CaptureKind.OUTPUT,
        "self_sizes": CaptureKind.METADATA, "keepdim": CaptureKind.INPUT,
    }
    [helper] = module.helpers
    assert helper.name == "scatter_back" and helper.returns == "Tensor"
    assert [(p.name, p.annotation) for p in helper.params] == [
        ("grad", "Tensor"), ("dim", "int"), ("indices", "Tensor"), ("sizes", "list[int]"), ("keepdim", "bool"),
    ]
    assert code(helper.params[-1].default) == "False"
    assert module.function_returns == {"scatter_back": "Tensor", "max_dim": None}
    assert [str(s) for s in module.nondifferentiable] == [
        "eq.Tensor(Tensor self, Tensor other) -> Tensor", "zeros_like(Tensor self) -> Tensor",
    ]


def formula_with(forward: str, use: str = "v", schema: str = "foo(Tensor self, Tensor[] tensors, int dim) -> Tensor",
                 params: str = "self, tensors, dim"):
    source = (
        "from formulas import at, derivative\n\n"
        f"@derivative({schema!r})\n"
        f"def foo({params}):\n"
        "    result = at.foo(self)\n"
        + textwrap.indent(textwrap.dedent(forward), "    ")
        + "    def backward(grad):\n"
        f"        return grad * {use}\n"
        "    return result, backward\n"
    )
    module = parse_module("foo.py", source)
    assert module.diagnostics == (), module.diagnostics
    [formula] = module.formulas
    return {c.name: c for c in formula.captures}


ILLEGAL, METADATA, SCALAR = CaptureKind.ILLEGAL, CaptureKind.METADATA, CaptureKind.SCALAR


@pytest.mark.parametrize(("forward", "kind"), [
    ("v = at.exp(self)\n", ILLEGAL),
    ("t = at.exp(self)\nv = t\n", ILLEGAL),                       # alias
    ("v, w = at.max(self, 0)\n", ILLEGAL),                        # tuple unpacking
    ("v = (at.exp(self), 1)\n", ILLEGAL),                         # tuple holding a tensor
    ("v = []\nv.append(at.exp(self))\n", ILLEGAL),               # list mutation
    ("v = [0]\nv[0] = at.exp(self)\n", ILLEGAL),                  # item assignment
    ("v = [at.exp(t) for t in tensors]\n", ILLEGAL),             # comprehension
    ("if dim > 0:\n    v = at.exp(self)\nelse:\n    v = 1.0\n", ILLEGAL),  # any branch
    ("v = 1.0\nv *= at.exp(self)\n", ILLEGAL),                    # augmented assignment
    ("v = 0.0\nfor _ in range(dim):\n    v = v + at.exp(self)\n", ILLEGAL),  # loop
    ("v = self.sizes()\nv = at.exp(self)\n", ILLEGAL),            # rebinding
    ("v = at.sum(self).item()\n", ILLEGAL),                       # value read from a tensor
    ("v = self.tolist()\n", ILLEGAL),
    ("v = float(at.sum(self))\n", ILLEGAL),
    ("v = int(self) + 1\n", ILLEGAL),
    ("v = bool(self)\n", ILLEGAL),
    ("v = 1 if at.sum(self).item() > 0 else 2\n", ILLEGAL),       # chosen by tensor values
    ("if at.sum(self).item() > 0:\n    v = 1\nelse:\n    v = 2\n", ILLEGAL),
    ("v = self.sizes()\n", METADATA),
    ("v = self.size(0) * 2 + dim\n", METADATA),
    ("v = [self.size(0), 3]\n", METADATA),
    ("v = self.shape[0]\n", METADATA),
    ("v = (self.dtype, self.device, self.options(), self.scalar_type())\n", METADATA),
    ("v = len(tensors)\n", METADATA),
    ("v = self.dim() + self.numel()\n", METADATA),
    ("t = at.exp(self)\nv = t.sizes()\n", METADATA),               # metadata of an intermediate
    ("v = at.exp(self)\nv = v.sizes()\n", METADATA),               # rebound from tensor to metadata
    ("v = [s * 2 for s in self.sizes()]\n", METADATA),
    ("v, w = self.sizes(), 2\n", METADATA),                        # pairwise unpacking
    ("v = self.sizes()\nv += [1]\n", METADATA),
    ("v = 1\nif dim:\n    v = self.sizes()\n", METADATA),
    ("v = 2.0\n", SCALAR),
    ("v = dim + 1\n", SCALAR),
    ("v = -0.5 if dim else 1.5\n", SCALAR),
])
def test_dataflow_classifies_the_captured_name(forward: str, kind: CaptureKind) -> None:
    assert formula_with(forward)["v"].kind is kind


def test_nested_closure_in_backward_counts_as_a_read() -> None:
    source = (
        "from formulas import at, derivative\n\n"
        "@derivative('sin(Tensor self) -> Tensor')\n"
        "def sin(self):\n"
        "    result = at.sin(self)\n"
        "    c = at.cos(self)\n"
        "    def backward(grad):\n"
        "        def times_c(g):\n"
        "            return g * c\n"
        "        return times_c(grad)\n"
        "    return result, backward\n"
    )
    [formula] = parse_module("sin.py", source).formulas
    [capture] = formula.captures
    assert (capture.name, capture.kind, capture.first_use) == ("c", ILLEGAL, Span(9, 24))
    assert "tensor computed in the forward" in capture.reason


def test_rebound_input_is_illegal_and_unrebound_non_tensor_input_is_an_input() -> None:
    captures = formula_with("self = at.contiguous(self)\n", use="self * dim")
    assert captures["self"].kind is ILLEGAL
    assert "rebound" in captures["self"].reason
    assert captures["dim"].kind is CaptureKind.INPUT


def test_model_carries_rebound_inputs_returned_expressions_and_metadata_reads() -> None:
    source = (
        "from formulas import at, derivative\n\n"
        "@derivative('f(Tensor self, Tensor other, int dim) -> Tensor')\n"
        "def f(self, other, dim):\n"
        "    t = at.exp(self)\n"
        "    other = at.neg(other)\n"
        "    def backward(grad):\n"
        "        def later(g):\n"
        "            return g * dim\n"
        "        return grad.expand(t.sizes()) * t.size(0) * other.dim() * other * self.shape[0] * later(dim)\n"
        "    return t + other, backward\n"
    )
    [formula] = parse_module("f.py", source).formulas
    assert formula.rebound_inputs == frozenset({"other"})
    assert formula.outputs == (None,)
    assert [code(e) for e in formula.returned] == ["t + other"]
    assert code(formula.returned_display) == "t + other"
    # Read only through metadata methods: t; read otherwise too: other (itself), self (an attribute), dim.
    assert {c.name: c.metadata_methods for c in formula.captures} == {
        "t": ("size", "sizes"), "other": (), "self": (), "dim": (),
    }


def test_syntax_error_is_db000_with_python_location() -> None:
    module = parse_module("bad.py", "x = 1\ndef f(:\n    pass\n")
    [diagnostic] = module.diagnostics
    assert (diagnostic.path, diagnostic.line, diagnostic.col, diagnostic.code) == ("bad.py", 2, 7, "DB000")
    assert "fix the syntax error" in diagnostic.message
    assert module.formulas == () and module.helpers == ()


def test_name_libcst_refuses_to_build_is_db000_not_a_traceback() -> None:
    # U+13440 is read into a name by libcst's tokenizer, which then refuses the Name node
    module = parse_module("bad.py", "s\U00013440elf = 1\n")
    [diagnostic] = module.diagnostics
    assert (diagnostic.code, diagnostic.line, diagnostic.col) == ("DB000", 1, 2)
    assert "invalid non-printable character U+13440" in diagnostic.message
    assert module.formulas == ()


def test_malformed_formula_is_left_out_and_the_others_are_kept() -> None:
    source = MUL + (
        "\n\n@derivative('sin(Tensor self) -> Tensor')\n"
        "def sin(x):\n"
        "    def backward(grad):\n"
        "        return grad\n"
        "    return x, backward\n"
    )
    module = parse_module("two.py", source)
    assert [f.op_name for f in module.formulas] == ["mul.Tensor"]
    [diagnostic] = module.diagnostics
    assert (diagnostic.code, diagnostic.line, diagnostic.col) == ("DB107", 18, 5)
    assert "(x)" in diagnostic.message and "(self)" in diagnostic.message


def test_load_library_reads_every_file_sorted(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text(MAX_DIM)
    (tmp_path / "a.py").write_text(MUL)
    (tmp_path / "notes.txt").write_text("not python")
    library = load_library(str(tmp_path))
    assert [Path(m.path).relative_to(tmp_path).as_posix() for m in library.modules] == ["a.py", "sub/b.py"]
    assert [f.op_name for f in library.formulas] == ["mul.Tensor", "max.dim"]
    assert sorted(library.operators) == ["eq.Tensor", "max.dim", "mul.Tensor", "zeros_like"]
    assert [h.name for h in library.helpers] == ["scatter_back"]


def test_shipped_library_builds_a_model_for_every_formula() -> None:
    library = load_library(str(Path(__file__).resolve().parents[2] / "formulas"))
    assert library.diagnostics == ()
    assert len(library.formulas) >= 10
    for formula in library.formulas:
        assert formula.backward.params, formula.op_name
        assert all(c.kind is not ILLEGAL for c in formula.captures), formula.op_name


@settings(max_examples=100, deadline=None)
@given(st.integers(0, len(MUL)), st.integers(0, 40), st.text(max_size=8))
def test_parse_module_never_raises_on_damaged_input(start: int, length: int, insert: str) -> None:
    source = MUL[:start] + insert + MUL[start + length:]
    module = parse_module("damaged.py", source)
    for diagnostic in module.diagnostics:
        assert diagnostic.code in ("DB000", "DB107")
        assert diagnostic.line >= 1 and diagnostic.col >= 1


def reads_of(body: str) -> list[str]:
    """Forward names (a, b, c, t) the backward in ``body`` reads, in source order."""
    source = (
        "def forward(a, b):\n"
        "    c = 1\n"
        "    t = 2\n"
        "    def backward(g):\n"
        + textwrap.indent(textwrap.dedent(body), "        ")
    )
    function = cst.parse_module(source).body[0]
    backward = function.body.body[2]
    reads = closure_reads(backward, bound_names(function) - {"backward"})
    return [name.value for name in reads]


@pytest.mark.parametrize(("body", "reads"), [
    ("return g * a + b\n", ["a", "b"]),
    ("x = a\nreturn x.y + c\n", ["a", "c"]),                       # attribute names are not reads
    ("return f(g, c=t)\n", ["t"]),                                  # keyword names are not reads
    ("a = g\nreturn a\n", []),                                      # assigned in backward: local
    ("t += g\nreturn t\n", []),                                     # augmented assignment makes it local
    ("return [a for a in g] + [c for _ in a]\n", ["a", "c"]),       # comprehension target shadows
    ("def inner(a):\n    return a * b\nreturn inner(g)\n", ["b"]),  # nested parameter shadows
    ("def inner(x=t):\n    return x\nreturn inner\n", ["t"]),     # defaults are read outside
    ("f = lambda c: c * a\nreturn f(g)\n", ["a"]),
    ("nonlocal c\nc = c + 1\nreturn c\n", ["c", "c"]),              # nonlocal: the forward's name
    ("global t\nreturn t\n", []),
    ("import a\nreturn a\n", []),
    ("for b in g:\n    pass\nreturn b\n", []),
    ("with g as c:\n    pass\nreturn c\n", []),
    ("if (b := g):\n    pass\nreturn b\n", []),
])
def test_closure_reads_follow_python_scoping(body: str, reads: list[str]) -> None:
    assert sorted(reads_of(body)) == sorted(reads)


@pytest.mark.parametrize(("body", "uses"), [
    ("return h(a) + b\n", ["D", "h"]),                                  # the default, a call
    ("return m(h, a)\n", ["D", "m", "h"]),                              # a helper passed as a value
    ("h = a\nreturn h(b)\n", ["D"]),                                   # a local shadows it
    ("x = a.h\nreturn f(x, h=b)\n", ["D", "f"]),                        # attribute and keyword names are no use
    ("return [h for h in a] + [k for _ in a]\n", ["D", "k"]),           # comprehension target shadows
    ("def inner(h):\n    return h * k\nreturn inner\n", ["D", "k"]),   # nested parameter shadows
    ("def inner(x=h):\n    return x\nreturn inner\n", ["D", "h"]),     # defaults are read outside
    ("def inner():\n    global a\n    return a\nreturn inner\n", ["D", "a"]),   # global: the module's
    ("g = lambda h: h + k\nreturn g\n", ["D", "k"]),
    ("import h\nreturn h\n", ["D"]),
    ("x: T = a\nreturn x\n", ["D"]),                                   # annotations are declarations
    ("return [(h := x) for x in a] and h\n", ["D"]),                    # a walrus binds in the function
])
def test_global_reads_follow_python_scoping(body: str, uses: list[str]) -> None:
    """The module-level names a function uses (``Formula.references``, ``Helper.references``), in source order."""
    function = cst.parse_module("def f(a, b=D):\n" + textwrap.indent(body, "    ")).body[0]
    assert [name.value for name in global_reads(function)] == uses
    assert [name.value for name in global_reads(function, {"k"})] == [n for n in uses if n != "k"]


def test_the_model_records_the_module_level_names_of_formulas_and_helpers() -> None:
    """A helper named without a call is a reference; a local named like a helper is none."""
    module = parse_module("refs.py", (
        "from formulas import at, derivative, helper\n\n"
        "@helper\ndef twice(x: Tensor) -> Tensor:\n    return at.mul(x, 2)\n\n"
        "@helper\ndef apply(f, x: Tensor) -> Tensor:\n    return f(x)\n\n"
        "@derivative('foo(Tensor self) -> Tensor', jvp='auto_element_wise')\n"
        "def foo(self):\n    result = at.foo(self)\n    twice = 2\n"
        "    def backward(grad):\n        return apply(halve, grad) * twice\n    return result, backward\n"))
    assert module.diagnostics == ()
    assert {h.name: h.references for h in module.helpers} == {"twice": {"helper", "at"}, "apply": {"helper"}}
    [formula] = module.formulas
    assert formula.references == {"derivative", "at", "apply", "halve"}


def test_python_keyword_argument_is_spelled_with_a_trailing_underscore() -> None:
    source = (
        "from formulas import at, derivative\n\n"
        "@derivative('random.from(Tensor self, int from, int? to) -> Tensor')\n"
        "def random_from(self, from_, to):\n"
        "    result = at.random(self, from_, to)\n"
        "    def backward(grad):\n"
        "        return grad * 0 * from_\n"
        "    return result, backward\n"
    )
    module = parse_module("kw.py", source)
    assert module.diagnostics == ()
    [formula] = module.formulas
    assert formula.params == ("self", "from_", "to")
    assert {c.name: c.kind for c in formula.captures} == {"from_": CaptureKind.INPUT}


POSITION_CASES = [
    MUL,
    MUL.replace("\n", "\r\n"),
    "# header\n\n@a.b(  # comment\n    c)\n@d\nasync def f(x, /, *y, z=(1,\n  2), **w) -> (int):\n"
    "\tif (x):  # c\n\t\treturn [(y) for y in (x) if y]\n\telse:\n\t\treturn {**w, 'k': (lambda: x)()}\n",
    "x = (  \n  (a)  .b [ 1 : 2 , ::3 ]  )\nclass C(B, metaclass=M):\n    '''doc'''\n    y: int = 1; z = 2\n",
]


@pytest.mark.parametrize("source", POSITION_CASES, ids=["mul", "crlf", "decorated", "layout"])
def test_start_positions_are_libcsts_positions(source):
    """The lean position pass gives every node the start libcst's own PositionProvider gives it."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    from transpiler.frontend import start_positions

    tree = cst.parse_module(source)
    expected = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    found = start_positions(tree)
    assert found.keys() == expected.keys()
    assert {node: (r.start.line, r.start.column) for node, r in expected.items()} == found


def test_start_positions_of_the_shipped_library():
    from libcst.metadata import MetadataWrapper, PositionProvider

    from transpiler.frontend import start_positions

    for path in sorted(Path(__file__).resolve().parents[2].joinpath("formulas").glob("*.py")):
        tree = cst.parse_module(path.read_text(encoding="utf-8"))
        expected = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
        assert {node: (r.start.line, r.start.column) for node, r in expected.items()} == start_positions(tree), path
