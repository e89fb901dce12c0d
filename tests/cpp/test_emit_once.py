"""One emission per formula per run (:mod:`transpiler.cpp.emit_once`): a formula is emitted again only
when a lookup it made in the context gives another answer, and a reused result is the one a new
emission would give."""
from __future__ import annotations

import pytest

from tests.cpp.test_transpile_cli import GOOD
from transpiler import frontend
from transpiler.cpp import emit_once, nodes
from transpiler.cpp.emit import operator_table
from transpiler.cpp.expressions import UNKNOWN_OPERATOR, Context, Untranslatable
from transpiler.model import Library
from transpiler.schema import parse_schema

NEG = '''

@derivative("neg(Tensor self) -> Tensor")
def neg(self):
    result = at.neg(self)
    def backward(grad):
        return -grad
    return result, backward
'''


@pytest.fixture
def emissions(monkeypatch):
    """The formulas ``sin`` (it calls ``at.sin`` and ``at.cos``), ``cos`` (``at.cos`` and ``at.sin``) and
    ``neg`` (``at.neg``), and the names of the formulas the emitter itself was run on."""
    module = frontend._parse_module("pkg/trig.py", GOOD + NEG)
    ran: list[str] = []
    emit = nodes.emit_formula

    def counted(formula, context, struct):
        ran.append(formula.op_name)
        return emit(formula, context, struct)

    monkeypatch.setattr(nodes, "emit_formula", counted)
    return module, ran


def test_a_formula_is_emitted_again_only_when_what_it_read_changed(emissions):
    module, ran = emissions
    sin, cos, neg = module.formulas
    table = operator_table(Library((module,)))
    first = Context(table, {}, {})
    # another overload of at.cos: what sin's emission read changed, not what neg's read
    second = Context({**table, "cos": (*table["cos"], parse_schema("cos.twice(Tensor self, int k) -> Tensor"))}, {}, {})
    with emit_once.shared():
        emitted = [emit_once.emit_formula(f, context, f"{f.op_name}Backward0")
                   for context in (first, second) for f in (sin, neg)]
    assert ran == ["sin", "neg", "sin"]
    assert emitted[3] is emitted[1]
    assert emitted[2] == nodes.emit_formula(sin, second, "sinBackward0")
    with emit_once.shared():        # another run: nothing of the last one is kept
        emit_once.emit_formula(cos, first, "cosBackward0")
    emit_once.emit_formula(cos, first, "cosBackward0")      # outside a run: emitted every time
    assert ran == ["sin", "neg", "sin", "sin", "cos", "cos"]


def test_a_refusal_is_kept_and_raised_again(emissions):
    module, ran = emissions
    cos = module.formulas[1]
    without_sin = Context({"cos": operator_table(Library((module,)))["cos"]}, {}, {})
    with emit_once.shared():
        refusals = []
        for _ in range(2):
            with pytest.raises(Untranslatable) as refused:
                emit_once.emit_formula(cos, without_sin, "cosBackward0")
            refusals.append(refused.value)
    assert ran == ["cos"] and refusals[0] is refusals[1] and refusals[0].code == UNKNOWN_OPERATOR
