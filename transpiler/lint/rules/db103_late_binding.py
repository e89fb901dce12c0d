"""DB103: a name a closure (backward or jvp) captures is (re)bound after its ``def``."""
from __future__ import annotations

from collections.abc import Iterator

from transpiler import codes
from transpiler.diagnostics import Diagnostic
from transpiler.lint.rules.context import FormulaContext

CODE = codes.LATE_BINDING.code


def check(context: FormulaContext) -> Iterator[Diagnostic]:
    """DB103 for each captured name the forward binds again (or deletes) after the closure's ``def``."""
    for capture in context.closure.captures:
        late = [b for b in context.forward_bindings(capture.name) if b.index > context.closure_index]
        if not late:
            continue
        where = context.span(late[0].target)
        yield context.diagnostic(
            capture.first_use, CODE,
            f"{context.name} captures `{capture.name}`, which is bound again (or deleted) at line {where.line} "
            f"after `def {context.name}`: the closure sees that late state; bind `{capture.name}` before the "
            f"{context.name} and give later values another name",
        )
