"""A module's summary (:mod:`transpiler.model_summary`): what it gives without the syntax is what the
full model gives, and anything else is read from the full model, loaded on first use."""
from __future__ import annotations

import dataclasses
import pickle

import libcst as cst
import pytest

from tests.cpp.test_model_cache import same_model
from transpiler import frontend
from transpiler.model import Formula
from transpiler.model_summary import entry_lines, helper_first_line, summarize, with_changes

SHIPPED = "formulas/convolution.py"     # helpers, a formula family, written jvps


@pytest.fixture(scope="module")
def full():
    with open(SHIPPED, encoding="utf-8") as source:
        return frontend._parse_module(SHIPPED, source.read())


@pytest.fixture
def deferred(full):
    """The module read back from its pickled summary, and the list of its loads of the full model."""
    loads: list[str] = []

    def load():
        loads.append(SHIPPED)
        return full

    summary = pickle.loads(pickle.dumps(summarize(full), protocol=pickle.HIGHEST_PROTOCOL))
    return summary.deferred(load), loads


def same_fields(deferred, full) -> bool:
    """Whether every field is equal (a syntax node: the same node; the schema string is the summary's
    copy, checked by its position), a closure's fields alike."""
    if full is None or deferred is None:
        return deferred is full
    skipped = {"backward", "jvp", "schema_node"}
    return all(getattr(deferred, f.name) == getattr(full, f.name) for f in dataclasses.fields(full)
               if f.name not in skipped)


def helper_text(helper) -> tuple[object, ...]:
    return (helper.name, helper.span, helper.returns, helper.rebound, [p.name for p in helper.params],
            cst.Module([]).code_for_node(helper.node))


def test_what_a_kept_result_needs_is_read_without_the_syntax(full, deferred):
    module, loads = deferred
    assert full.helpers and any(f.jvp is not None for f in full.formulas)
    assert [(f.op_name, f.span, f.jvp is None, f.schema) for f in module.formulas] == \
        [(f.op_name, f.span, f.jvp is None, f.schema) for f in full.formulas]
    assert [module.span(f.schema_node) for f in module.formulas] == [full.span(f.schema_node) for f in full.formulas]
    assert [entry_lines(module, f) for f in module.formulas] == [entry_lines(full, f) for f in full.formulas]
    assert [helper_first_line(module, h) for h in module.helpers] == [helper_first_line(full, h) for h in full.helpers]
    assert not any("node" in h.__dict__ for h in module.helpers)     # a helper's body: loaded on first read
    assert [module.span(h.node) for h in module.helpers] == [full.span(h.node) for h in full.helpers]
    assert [module.span(c.node) for h in module.helpers for c in h.calls] == \
        [full.span(c.node) for h in full.helpers for c in h.calls]
    assert [helper_text(h) for h in module.helpers] == [helper_text(h) for h in full.helpers]
    bodies: dict[cst.CSTNode, cst.CSTNode] = {}     # every node of the helpers' bodies, and its position
    assert all(same_model((h.node, h.calls), (f.node, f.calls), bodies) for h, f in zip(module.helpers, full.helpers))
    assert [module.span(node) for node in bodies] == [full.span(node) for node in bodies.values()]
    assert [x.references for x in (*module.formulas, *module.helpers)] == \
        [x.references for x in (*full.formulas, *full.helpers)]
    changed = with_changes(module.formulas[0], jvp=None, jvp_left_out="DB200 why")
    assert changed.jvp is None and module.formulas[0].jvp is not None
    assert loads == []


def test_the_rest_is_the_full_models_own(full, deferred):
    module, loads = deferred
    formula = module.formulas[-1]
    assert formula.node is full.formulas[-1].node and loads      # the very nodes: their positions hold
    assert module.span(formula.backward.node) == full.span(full.formulas[-1].backward.node)
    for deferred_formula, formula in zip(module.formulas, full.formulas, strict=True):
        assert same_fields(deferred_formula, formula)
        assert all(same_fields(getattr(deferred_formula, c), getattr(formula, c)) for c in ("backward", "jvp"))
    restored = pickle.loads(pickle.dumps(formula))      # pickled as the plain Formula it stands for
    assert type(restored) is Formula and restored.op_name == formula.op_name
    assert cst.Module([]).code_for_node(restored.node) == cst.Module([]).code_for_node(formula.node)


def test_a_field_with_a_default_read_first_is_the_full_models():
    """``dispatch_node`` (its default: None), read before any other field the summary lacks, is the
    full model's: the class's default is never read for it."""
    from transpiler.yaml_import.importer import import_yaml

    nested_only = "- name: cos(Tensor self) -> Tensor\n  dispatch:\n    AutogradNestedTensor:\n      self: grad * -self.sin()\n"
    [(path, text)] = [item for item in import_yaml(nested_only, "derivatives.yaml").files.items()
                      if item[0].startswith("derivatives_")]
    full = frontend._parse_module(path, text)
    [formula] = summarize(full).deferred(lambda: full).formulas
    assert formula.dispatch == "AutogradNestedTensor"
    assert formula.dispatch_node is full.formulas[0].dispatch_node is not None
