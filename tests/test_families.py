"""Formula families (``@family_member``): the front-end's expansion of the source and the DSL's
renamed code at run time give each member the formula written out by hand."""
from __future__ import annotations

import importlib
import inspect
import sys
import textwrap

import libcst as cst
import pytest

from formulas.dsl import registry, use_backend
from transpiler.frontend import parse_module

FAMILY = '''\
from formulas import at, derivative, family_member


@derivative("minimum(Tensor self, Tensor other) -> Tensor")
@family_member("maximum(Tensor self, Tensor other) -> Tensor", rename={"minimum": "maximum", "lt": "gt", "gt": "lt"})
def minimum(self, other):
    result = at.minimum(self, other)
    def backward(grad):
        return at.where(at.lt(self, other), grad, at.zeros_like(grad)), at.where(at.gt(self, other), grad, at.zeros_like(grad))
    return result, backward


@derivative("split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]", jvp="auto_linear")
@family_member("chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]",
               rename={"split": "chunk", "split_size": "chunks"})
def split_tensor(self, split_size, dim=0):
    result = at.split(self, split_size, dim=dim)
    self_sizes = self.sizes()
    def backward(grads):
        return at.cat(grads, dim)
    return result, backward


@derivative("conv1d(Tensor input, Tensor weight, SymInt[1] stride=1) -> Tensor", jvp="derived")
@family_member("conv2d(Tensor input, Tensor weight, SymInt[2] stride=1) -> Tensor", rename={"conv1d": "conv2d"},
               defaults={"stride": [1, 1]})
def conv1d(input, weight, stride=[1]):
    result = at.conv1d(input, weight, stride)
    def backward(grad):
        return at.conv1d(grad, weight, stride), None
    return result, backward
'''

#: What each member is, written out (the decorators aside).
WRITTEN_OUT = {
    "maximum": '''\
def maximum(self, other):
    result = at.maximum(self, other)
    def backward(grad):
        return at.where(at.gt(self, other), grad, at.zeros_like(grad)), at.where(at.lt(self, other), grad, at.zeros_like(grad))
    return result, backward
''',
    "chunk": '''\
def chunk(self, chunks, dim=0):
    result = at.chunk(self, chunks, dim=dim)
    self_sizes = self.sizes()
    def backward(grads):
        return at.cat(grads, dim)
    return result, backward
''',
    "conv2d": '''\
def conv2d(input, weight, stride=[1, 1]):
    result = at.conv2d(input, weight, stride)
    def backward(grad):
        return at.conv2d(grad, weight, stride), None
    return result, backward
''',
}


def _code(node: cst.FunctionDef) -> str:
    return cst.Module([]).code_for_node(node.with_changes(decorators=(), leading_lines=()))


def test_the_front_end_reads_one_formula_per_member_as_written_out():
    module = parse_module("family.py", FAMILY)
    assert module.diagnostics == ()
    formulas = {f.op_name: f for f in module.formulas}
    assert list(formulas) == ["minimum", "maximum", "split.Tensor", "chunk", "conv1d", "conv2d"]
    for op, source in (("maximum", WRITTEN_OUT["maximum"]), ("chunk", WRITTEN_OUT["chunk"]),
                       ("conv2d", WRITTEN_OUT["conv2d"])):
        member = formulas[op]
        assert member.function == op and str(member.schema.name) == op
        assert _code(member.node) == source
        # positions point into the family's shared source
        assert member.span == formulas[{"maximum": "minimum", "chunk": "split.Tensor", "conv2d": "conv1d"}[op]].span
    assert [c.name for c in formulas["chunk"].captures] == [c.name for c in formulas["split.Tensor"].captures]
    assert formulas["chunk"].params == ("self", "chunks", "dim")
    assert formulas["chunk"].jvp is not None            # the family's jvp="auto_linear"


def test_the_member_derivative_decorator_carries_the_member_schema_and_the_family_arguments():
    member = next(f for f in parse_module("family.py", FAMILY).formulas if f.op_name == "chunk")
    derivative = next(d for d in member.node.decorators
                      if isinstance(d.decorator, cst.Call) and d.decorator.func.value == "derivative")
    args = derivative.decorator.args
    assert args[0].value.evaluated_value.startswith("chunk(")
    assert [a.keyword.value for a in args[1:]] == ["jvp"]


@pytest.fixture
def family_package(tmp_path, monkeypatch):
    """``FAMILY`` imported as the module ``famlib.ops`` (its own registry)."""
    package = tmp_path / "famlib"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ops.py").write_text(FAMILY)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("famlib.ops")
    for name in ("famlib.ops", "famlib"):
        sys.modules.pop(name, None)
    from formulas.dsl import REGISTRIES
    REGISTRIES.pop("famlib", None)


class Recorder:
    """An ``at`` backend that returns each call as ``(name, args)``; tensors' ``sizes()`` give ``[2]``."""

    def call(self, name, args, kwargs):
        return (name, args, tuple(sorted(kwargs.items())))


class Value:
    def sizes(self):
        return [2]

    def __repr__(self):
        return "v"


def _written_out(name):
    namespace = {}
    exec(WRITTEN_OUT[name], {"at": importlib.import_module("formulas").at}, namespace)
    return namespace[name]


def test_the_registered_member_runs_the_renamed_code(family_package):
    formulas = registry("famlib").formulas
    assert list(formulas) == ["minimum", "maximum", "split.Tensor", "chunk", "conv1d", "conv2d"]
    value = Value()
    with use_backend(Recorder()):
        for op, args, grads in (("maximum", (value, value), ("g",)), ("chunk", (value, 3, 1), (["g"],)),
                                ("conv2d", (value, value), ("g",))):
            declared = formulas[op]
            written_out = _written_out(op)
            assert declared.fn.__name__ == declared.fn.__qualname__ == op
            assert inspect.signature(declared.fn) == inspect.signature(written_out)
            ours, backward = declared.fn(*args)
            theirs, their_backward = written_out(*args)
            assert ours == theirs
            assert backward(*grads) == their_backward(*grads)
            assert backward.__qualname__ == f"{op}.<locals>.backward"
    assert formulas["conv1d"].fn.__defaults__ == ([1],)          # the family's own defaults stay
    assert formulas["chunk"].jvp == "auto_linear" and formulas["conv2d"].jvp == "derived"


@pytest.mark.parametrize(("source", "message", "line"), [
    ('@family_member("maximum(Tensor self) -> Tensor")\n@derivative("minimum(Tensor self) -> Tensor")\n',
     "sits above @derivative", 3),
    ('@family_member("maximum(Tensor self) -> Tensor")\n', "without @derivative", 3),
    ('@derivative("minimum(Tensor self) -> Tensor")\n@family_member("maximum(Tensor self) -> Tensor", '
     'rename={"backward": "b"})\n', "may not rename", 4),
    ('@derivative("minimum(Tensor self) -> Tensor")\n@family_member("maximum(Tensor self) -> Tensor", '
     'defaults={"self": 1})\n', "no parameter with a default", 4),
    ('@derivative("minimum(Tensor self) -> Tensor")\n@family_member("maximum(Tensor self) -> Tensor", '
     'rename={"a": "b c"})\n', "identifier to an identifier", 4),
])
def test_a_malformed_family_is_a_db107_and_a_run_time_error(source, message, line, tmp_path, monkeypatch):
    text = "from formulas import at, derivative, family_member\n\n" + source + textwrap.dedent('''\
        def minimum(self):
            result = at.neg(self)
            def backward(grad):
                return grad
            return result, backward
        ''')
    diagnostics = parse_module("bad.py", text).diagnostics
    assert [d.code for d in diagnostics] == ["DB107"]
    assert message in diagnostics[0].message and diagnostics[0].line == line
    if "without" in message:
        return      # nothing registered at run time: nothing to refuse
    package = tmp_path / "badlib"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ops.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises((TypeError, ValueError)):
            importlib.import_module("badlib.ops")
    finally:
        for name in ("badlib.ops", "badlib"):
            sys.modules.pop(name, None)
        from formulas.dsl import REGISTRIES
        REGISTRIES.pop("badlib", None)
