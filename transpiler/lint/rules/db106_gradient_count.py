"""DB106: a ``return`` of the backward gives the wrong number of gradients (of a jvp: tangents).

A backward returns one gradient per differentiable input (Tensor, Tensor?,
Tensor[] arguments): the gradient itself for one input (a list for a
Tensor[] input), a tuple for several. A jvp returns one tangent per
differentiable output, the same way. Returns whose count cannot be known
statically (an ``at.X`` call, an unknown function) are not judged.
"""
from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from transpiler import codes
from transpiler.dataflow import BindingSite, dotted_name
from transpiler.diagnostics import Diagnostic
from transpiler.lint.rules.context import FormulaContext
from transpiler.model import ClosureRole, returned_values

CODE = codes.GRADIENT_COUNT.code
SINGLE = 1


def gradient_counts(context: FormulaContext, value: cst.BaseExpression | None,
                    seen: frozenset[str] = frozenset()) -> set[int] | None:
    """The possible numbers of gradients ``return value`` gives; None when unknown."""
    if value is None or isinstance(value, (cst.BinaryOperation, cst.UnaryOperation, cst.List, cst.ListComp)):
        return {SINGLE}
    if _is_none(value):
        return {SINGLE}
    if isinstance(value, cst.Tuple):
        if any(isinstance(e, cst.StarredElement) for e in value.elements):
            return None
        return {len(value.elements)}
    if isinstance(value, cst.IfExp):
        body, orelse = gradient_counts(context, value.body, seen), gradient_counts(context, value.orelse, seen)
        return None if body is None or orelse is None else body | orelse
    if isinstance(value, cst.Name):
        if value.value in context.closure.params:
            return {SINGLE}
        bindings = context.closure_flow.bindings.get(value.value)
        if not bindings or value.value in seen or any(b.value is None or b.augmented for b in bindings):
            return None
        counts: set[int] = set()
        for binding in bindings:
            if not isinstance(binding.target, cst.Name) or binding.value is None:
                return None
            if _binds_whole_value(binding):
                found = gradient_counts(context, binding.value, seen | {value.value})
                if found is None:
                    return None
                counts |= found
            else:
                return None
        return counts
    if isinstance(value, cst.Call):
        name = dotted_name(value.func)
        helper = context.helpers.get(name.rsplit(".", 1)[-1]) if name and not name.startswith("at.") else None
        if helper is not None and helper.returns is not None:
            return {_annotation_count(helper.returns)}
    return None


def _is_none(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Name) and value.value == "None"


def _binds_whole_value(binding: BindingSite) -> bool:
    """``x = value`` (not ``x, y = value`` or a loop target)."""
    statement = binding.statement
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    return any(
        isinstance(small, cst.Assign) and any(t.target is binding.target for t in small.targets)
        for small in statement.body
    )


def _annotation_count(annotation: str) -> int:
    """Number of values a helper's return annotation declares (``tuple[Tensor, Tensor]`` -> 2)."""
    try:
        expression = cst.parse_expression(annotation)
    except cst.ParserSyntaxError:
        return SINGLE
    if isinstance(expression, cst.Subscript) and dotted_name(expression.value) in ("tuple", "Tuple"):
        return len(expression.slice)
    return SINGLE


def check(context: FormulaContext) -> Iterator[Diagnostic]:
    """DB106 for each ``return`` of a backward whose gradients (of a jvp: tangents) are not one per
    differentiable input (output)."""
    if context.closure.role is ClosureRole.JVP:
        yield from _tangent_count(context)
        return
    expected = len(context.formula.differentiable_inputs)
    inputs = ", ".join(a.name for a in context.formula.differentiable_inputs) or "none"
    if expected == 1:
        shape = "the gradient itself (None for zero; a list for a Tensor[] input), not a tuple"
    else:
        shape = f"a tuple of {expected} gradients (None for zero), one per input in schema order"
    returns = context.closure.returns
    if not returns:
        yield context.diagnostic(
            context.closure_node.name, CODE,
            f"backward never returns its gradients; return {shape} (differentiable inputs: {inputs})",
        )
    for node in returns:
        if expected == 0 and (node.value is None or _is_none(node.value)):
            continue  # nothing is differentiable: `return None` is the only sensible body
        if expected == 1 and isinstance(node.value, cst.Tuple):
            yield context.diagnostic(
                node, CODE,
                f"backward returns a tuple but the formula has one differentiable input ({inputs}); return {shape}",
            )
            continue
        counts = gradient_counts(context, node.value)
        if counts is None or counts == {expected}:
            continue
        got = " or ".join(str(c) for c in sorted(counts))
        yield context.diagnostic(
            node, CODE,
            f"backward returns {got} gradient(s) but the formula has {expected} differentiable "
            f"input(s) ({inputs}); return {shape}",
        )


def _tangent_count(context: FormulaContext) -> Iterator[Diagnostic]:
    """DB106 for a jvp: it returns one tangent per differentiable output (as a backward returns
    one gradient per differentiable input); a jvp that never returns leaves them undefined.
    Returning ``<output>_t`` names (the derivatives.yaml dialect: tangents of the outputs its
    ``result:`` names, the others have none) says which outputs they are, so any count is right."""
    formula = context.formula
    expected = len(formula.backward.params)
    outputs = ", ".join(formula.outputs[i] or "?" for i in formula.differentiable_outputs)
    shape = ("the tangent itself (None for none), not a tuple" if expected == 1
             else f"a tuple of {expected} tangents (None for none), one per differentiable output")
    returns = context.closure.returns
    if not returns:
        yield context.diagnostic(context.closure_node.name, CODE,
                                 f"jvp never returns its tangents; return {shape} (outputs: {outputs})")
    named = {f"{name}_t" for name in formula.outputs if name is not None}
    for node in returns:
        values = returned_values(node)
        if all(isinstance(v, cst.Name) and v.value in named for v in values):
            continue
        if expected == 1 and isinstance(node.value, cst.Tuple):
            counts = {len(node.value.elements)}
        else:
            counts = gradient_counts(context, node.value)
        if counts is None or counts == {expected}:
            continue
        got = " or ".join(str(c) for c in sorted(counts))
        yield context.diagnostic(node, CODE,
                                 f"jvp returns {got} tangent(s) but the formula has {expected} differentiable "
                                 f"output(s) ({outputs}); return {shape}")
