"""DB103: a name the backward captures is (re)bound after ``def backward``."""
from __future__ import annotations

from collections.abc import Iterator

from transpiler import codes
from transpiler.diagnostics import Diagnostic
from transpiler.lint.rules.context import FormulaContext

CODE = codes.LATE_BINDING.code


def check(context: FormulaContext) -> Iterator[Diagnostic]:
    for capture in context.formula.captures:
        late = [b for b in context.forward_bindings(capture.name) if b.index > context.backward_index]
        if not late:
            continue
        where = context.span(late[0].target)
        yield context.diagnostic(
            capture.first_use, CODE,
            f"backward captures `{capture.name}`, which is bound again (or deleted) at line {where.line} "
            f"after `def backward`: the closure sees that late state; bind `{capture.name}` before the "
            f"backward and give later values another name",
        )
