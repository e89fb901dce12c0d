"""DB100: a closure (backward or jvp) captures a tensor (or tensor-read value) computed in the forward."""
from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from transpiler import codes
from transpiler.dataflow import closure_reads, walk
from transpiler.metadata import METADATA_ATTRIBUTES, METADATA_METHODS
from transpiler.diagnostics import Diagnostic
from transpiler.lint.rules.context import FormulaContext
from transpiler.lint.rules.recompute import describe_recomputation, plan_recomputation
from transpiler.model import Capture, CaptureKind, ClosureRole

CODE = codes.KEPT_INTERMEDIATE.code


def aliased_input_or_output(context: FormulaContext, name: str) -> str | None:
    """``x`` when the forward binds ``name = x`` once (or through a chain of such copies,
    ``a = x; name = a``), ``x`` being an input or output."""
    seen = set()
    while name not in seen:
        seen.add(name)
        bindings = context.forward_bindings(name)
        if len(bindings) != 1 or bindings[0].conditional or not isinstance(bindings[0].value, cst.Name):
            return None
        name = bindings[0].value.value
        unrebound_input = name in context.formula.params and name not in context.formula.rebound_inputs
        if unrebound_input or name in context.formula.outputs:
            return name
    return None


def metadata_only_uses(context: FormulaContext, name: str) -> list[str]:
    """The metadata (``sizes``, ``dtype``...) read from ``name`` when that is all the closure reads; else []."""
    closure = context.closure_node
    reads = {id(read) for read in closure_reads(closure, {name})}
    accessed = {
        id(node.value): node.attr.value for node in walk(closure.body)
        if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == name
        and (node.attr.value in METADATA_METHODS or node.attr.value in METADATA_ATTRIBUTES)
    }
    if not reads or not reads <= accessed.keys():
        return []
    return sorted(set(accessed.values()))


def _metadata_binding(name: str, attribute: str) -> str:
    """``t_sizes = t.sizes()`` for ``.sizes``, ``t_dtype = t.dtype`` for ``.dtype``."""
    call = "()" if attribute in METADATA_METHODS else ""
    return f"{name}_{attribute} = {name}.{attribute}{call}"


def check(context: FormulaContext) -> Iterator[Diagnostic]:
    """DB100 for each illegal capture of the closure that is not a rebound input (DB101 reports those)."""
    for capture in context.closure.captures:
        if capture.kind is not CaptureKind.ILLEGAL or capture.name in context.formula.rebound_inputs:
            continue
        yield _finding(context, capture)


def bound_by_default(context: FormulaContext, name: str) -> bool:
    """Whether a default of the closure's parameters (``def backward(grad, t=name)``) reads ``name``."""
    params = context.closure_node.params
    defaults = [p.default for p in (*params.params, *params.kwonly_params) if p.default is not None]
    return any(type(node) is cst.Name and node.value == name for d in defaults for node in walk(d))


def _finding(context: FormulaContext, capture: Capture) -> Diagnostic:
    closure, differentiated = context.name, context.closure.role.differentiated
    if bound_by_default(context, capture.name):
        return context.diagnostic(
            capture.first_use, CODE,
            f"a default of {closure}'s parameters binds `{capture.name}`: {capture.reason}, and a default is "
            f"evaluated once in the forward, so {differentiated} is silently wrong; drop the "
            f"parameter and recompute the value in the {closure} from inputs and outputs",
        )
    plan = plan_recomputation(context, capture.name)
    # ``--fix`` rewrites backwards only
    fixed = plan is not None and context.closure.role is ClosureRole.BACKWARD
    fix = describe_recomputation(plan) if fixed else None
    alias = aliased_input_or_output(context, capture.name)
    if alias is not None:
        return context.diagnostic(
            capture.first_use, CODE,
            f"{closure} captures `{capture.name}`, a forward alias of `{alias}`; a {closure} may capture "
            f"inputs and outputs only by their own names: use `{alias}` in the {closure}",
            fix,
        )
    metadata = metadata_only_uses(context, capture.name)
    if metadata:
        return context.diagnostic(
            capture.first_use, CODE,
            f"{closure} captures `{capture.name}`, a tensor computed in the forward, only for its metadata "
            f"({', '.join('.' + m for m in metadata)}); compute that in the forward "
            f"(`{_metadata_binding(capture.name, metadata[0])}`) and capture it instead, so no "
            f"intermediate tensor is saved",
            fix,
        )
    if plan is not None:
        advice = f"recompute it in the {closure} from inputs and outputs" + (" (`--fix` does it)" if fixed else "")
    else:
        advice = ("it cannot be recomputed from inputs and outputs alone: return it as an output "
                  "(add it to the schema's returns with output_differentiability False and to "
                  f"`return (...), backward`), or recompute it in the {closure}")
    return context.diagnostic(
        capture.first_use, CODE,
        f"{closure} captures `{capture.name}`: {capture.reason}, so {differentiated} "
        f"is silently wrong; {advice}",
        fix,
    )
