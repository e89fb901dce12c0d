"""DB101: a closure (backward or jvp) captures an input that the forward rebinds before it."""
from __future__ import annotations

from collections.abc import Iterator

from transpiler import codes
from transpiler.diagnostics import Diagnostic
from transpiler.lint.rules.context import FormulaContext
from transpiler.model import CaptureKind

CODE = codes.REBOUND_INPUT.code


def check(context: FormulaContext) -> Iterator[Diagnostic]:
    """DB101 for each input the closure captures that the forward rebinds before the closure's ``def``."""
    for capture in context.closure.captures:
        if capture.kind is not CaptureKind.ILLEGAL or capture.name not in context.formula.rebound_inputs:
            continue
        early = [b for b in context.forward_bindings(capture.name) if b.index < context.closure_index]
        if not early:
            continue  # rebound only after the closure: that is DB103
        where = context.span(early[0].target)
        yield context.diagnostic(
            capture.first_use, CODE,
            f"{context.name} captures input `{capture.name}`, which the forward rebinds at line {where.line}, "
            f"so it captures an intermediate; give the rebound value a new name in the forward and "
            f"use the input `{capture.name}` (or recompute the value) in the {context.name}",
        )
