"""DB102: a closure (backward or jvp) modifies a captured input or output in place."""
from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from transpiler import codes
from transpiler.dataflow import ValueKind, at_operator
from transpiler.diagnostics import Diagnostic
from transpiler.lint.rules.context import FormulaContext, root_name
from transpiler.model import CaptureKind

CODE = codes.IN_PLACE.code


def _is_in_place(name: str) -> bool:
    return name.endswith("_") and not name.endswith("__")


def saved_tensors(context: FormulaContext) -> dict[str, str]:
    """Closure names that refer to a captured input/output tensor -> the captured name.

    Includes closure locals that only ever alias one (``o = out``).
    """
    saved = {
        c.name: c.name for c in context.closure.captures
        if c.kind in (CaptureKind.INPUT, CaptureKind.OUTPUT) and context.closure_env.get(c.name) == ValueKind.TENSOR
    }
    changed = True
    while changed:
        changed = False
        for name, bindings in context.closure_flow.bindings.items():
            if name in saved or len(bindings) != 1:
                continue
            value = bindings[0].value
            if isinstance(value, cst.Name) and value.value in saved:
                saved[name] = saved[value.value]
                changed = True
    return saved


def check(context: FormulaContext) -> Iterator[Diagnostic]:
    """DB102 for each in-place write the closure makes to a captured input or output."""
    saved = saved_tensors(context)
    forward_names = set(context.formula.params) | set(context.forward.bindings)

    def finding(node: cst.CSTNode, name: str, how: str) -> Diagnostic:
        captured = saved.get(name, name)
        return context.diagnostic(
            node, CODE,
            f"{context.name} modifies captured `{captured}` in place ({how}); saved inputs and outputs must "
            f"stay unchanged for double backward and for the caller: compute a new tensor instead "
            f"(out-of-place `at.X(...)` or `a + b`)",
        )

    def target_of(expression: cst.BaseExpression) -> str | None:
        root = root_name(expression)
        return root.value if root is not None and root.value in saved else None

    for node in context.body_nodes:
        kind = type(node)   # leaf classes: ``type`` (ABC ``isinstance`` is slow)
        if kind is cst.Call:
            operator = at_operator(node)
            if operator is not None:
                if _is_in_place(operator) and node.args and target_of(node.args[0].value):
                    yield finding(node, target_of(node.args[0].value), f"`at.{operator}`")
                for arg in node.args:
                    if arg.keyword is not None and arg.keyword.value == "out" and target_of(arg.value):
                        yield finding(node, target_of(arg.value), "`out=`")
            elif isinstance(node.func, cst.Attribute) and _is_in_place(node.func.attr.value):
                name = target_of(node.func.value)
                if name is not None:
                    yield finding(node, name, f"`.{node.func.attr.value}()`")
        elif kind is cst.Assign:
            for target in node.targets:
                if isinstance(target.target, (cst.Subscript, cst.Attribute)) and target_of(target.target):
                    yield finding(node, target_of(target.target), "item or attribute assignment")
        elif kind is cst.AugAssign:
            target = node.target
            if isinstance(target, (cst.Subscript, cst.Attribute)) and target_of(target):
                yield finding(node, target_of(target), "augmented assignment")
            elif (isinstance(target, cst.Name) and target.value in forward_names
                  and _only_augmented_in_backward(context, target.value)):
                yield context.diagnostic(
                    node, CODE,
                    f"augmented assignment to `{target.value}` inside {context.name} updates the forward's "
                    f"`{target.value}` (and Python makes it an unbound local); write the result to a new "
                    f"name instead: `new_{target.value} = {target.value} + ...`",
                )


def _only_augmented_in_backward(context: FormulaContext, name: str) -> bool:
    """``name`` is bound in the closure by augmented assignments only (so it means the forward's)."""
    bindings = context.closure_flow.bindings.get(name, [])
    return bool(bindings) and all(b.augmented for b in bindings)
