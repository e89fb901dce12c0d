"""Closure rules (DB100-DB107) for formula files: the entry point the lint driver calls."""
from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator, Mapping

import libcst as cst

from transpiler.diagnostics import Diagnostic
from transpiler.lint.rules import RULES, db105_undeclared_operator, db106_gradient_count
from transpiler.lint.rules.context import FormulaContext, operator_table
from transpiler.model import Backward, Formula, FormulaModule, Helper, JvpRule, returned_values

# The capture rules a jvp is held to (a jvp returns output tangents, so DB106 does not apply).
JVP_RULES = tuple(rule for rule in RULES if rule is not db106_gradient_count)


def check_formula_module(
    module: FormulaModule,
    source: str,
    known_operators: Collection[str],
    helpers: Mapping[str, Helper] | None = None,
) -> list[Diagnostic]:
    """Every closure finding of one parsed formula file, sorted by position.

    Includes the front-end's own DB000/DB107 diagnostics, and DB105 inside the
    file's helpers (they are backward code too). ``known_operators``
    holds ``name.overload`` and base names of every declared operator (the
    library plus the linted files). ``helpers`` adds helpers defined in other
    files (``formulas/helpers.py``) so DB105 follows calls into them; the
    module's own helpers are always included. ``source`` is the text the
    module was parsed from: part of the driver's uniform rule signature, the
    closure rules themselves work from the model.
    """
    operators = operator_table(known_operators)
    all_helpers = {**(helpers or {}), **{h.name: h for h in module.helpers}}
    findings = [*module.diagnostics, *db105_undeclared_operator.check_helpers(module, all_helpers, operators)]
    for formula in module.formulas:
        context = FormulaContext(module, formula, operators, all_helpers)
        for rule in RULES:
            findings.extend(rule.check(context))
        findings.extend(_jvp_findings(module, formula, operators, all_helpers))
    return sorted(findings)


def _jvp_findings(module: FormulaModule, formula: Formula, operators: frozenset[str],
                  helpers: Mapping[str, Helper]) -> Iterator[Diagnostic]:
    """A written ``def jvp`` under the backward's capture rules: it may read inputs, outputs,
    metadata and scalars, and its own tangents. (A jvp computed from a captured intermediate
    is first-order right but has no path to the inputs, so derivatives of the tangent are
    silently wrong, as for a backward.) The auto rules' jvps are built from the backward or
    the op itself and need no check of their own."""
    jvp = formula.jvp
    if jvp is None or jvp.rule is not JvpRule.WRITTEN:
        return
    as_closure = dataclasses.replace(
        formula, backward=Backward(jvp.node, jvp.span, jvp.params, None, jvp.index, jvp.rebound, jvp.returns),
        captures=jvp.captures)
    context = FormulaContext(module, as_closure, operators, helpers)
    for rule in JVP_RULES:
        for finding in rule.check(context):
            yield dataclasses.replace(finding, message=_about_jvp(finding.message), fix=None)
    yield from _tangent_count(context, len(formula.backward.grad_params))


def _tangent_count(context: FormulaContext, expected: int) -> Iterator[Diagnostic]:
    """DB106 for a jvp: it returns one tangent per differentiable output (as a backward returns
    one gradient per differentiable input); a jvp that never returns leaves them undefined.
    Returning ``<output>_t`` names (the derivatives.yaml dialect: tangents of the outputs its
    ``result:`` names, the others have none) says which outputs they are, so any count is right."""
    outputs = ", ".join(name or "?" for name, flag in zip(context.formula.outputs, _output_flags(context.formula))
                        if flag)
    shape = ("the tangent itself (None for none), not a tuple" if expected == 1
             else f"a tuple of {expected} tangents (None for none), one per differentiable output")
    returns = context.formula.backward.returns
    if not returns:
        yield context.diagnostic(context.backward_node.name, db106_gradient_count.CODE,
                                 f"jvp never returns its tangents; return {shape} (outputs: {outputs})")
    named = {f"{name}_t" for name in context.formula.outputs if name is not None}
    for node in returns:
        values = returned_values(node)
        if all(isinstance(v, cst.Name) and v.value in named for v in values):
            continue
        if expected == 1 and isinstance(node.value, cst.Tuple):
            counts = {len(node.value.elements)}
        else:
            counts = db106_gradient_count.gradient_counts(context, node.value)
        if counts is None or counts == {expected}:
            continue
        got = " or ".join(str(c) for c in sorted(counts))
        yield context.diagnostic(node, db106_gradient_count.CODE,
                                 f"jvp returns {got} tangent(s) but the formula has {expected} differentiable "
                                 f"output(s) ({outputs}); return {shape}")


def _output_flags(formula: Formula) -> tuple[bool, ...]:
    return formula.output_differentiability or (True,) * len(formula.outputs)


# The rules word their messages for a backward; the closure checked here is the jvp (and
# --fix rewrites backwards only, so its hint goes).
_JVP_WORDING = (
    (" (`--fix` does it)", ""),
    ("recompute it in the backward", "recompute it in the jvp"),
    ("double backward through it", "differentiating the tangent"),
)


def _about_jvp(message: str) -> str:
    message = message.replace("backward", "jvp", 1)
    for old, new in _JVP_WORDING:
        message = message.replace(old, new)
    return message
