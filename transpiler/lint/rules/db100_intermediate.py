"""DB100: the backward captures a tensor (or tensor-read value) computed in the forward."""
from __future__ import annotations

from collections.abc import Iterator

from transpiler.diagnostics import Diagnostic
from transpiler.lint.rules.recompute import describe_recomputation, plan_recomputation
from transpiler.lint.rules.context import FormulaContext
from transpiler.model import CaptureKind

CODE = "DB100"


def check(context: FormulaContext) -> Iterator[Diagnostic]:
    for capture in context.formula.captures:
        if capture.kind is not CaptureKind.ILLEGAL or capture.name in context.formula.params:
            continue
        plan = plan_recomputation(context, capture.name)
        if plan is not None:
            advice = "recompute it in the backward from inputs and outputs (`--fix` does it)"
            fix = describe_recomputation(context, plan)
        else:
            advice = ("it cannot be recomputed from inputs and outputs alone: return it as an output "
                      "(add it to the schema's returns with output_differentiability False and to "
                      "`return (...), backward`), or recompute it in the backward")
            fix = None
        yield context.diagnostic(
            capture.first_use, CODE,
            f"backward captures `{capture.name}`: {capture.reason}, so double backward through it "
            f"is silently wrong; {advice}",
            fix,
        )
