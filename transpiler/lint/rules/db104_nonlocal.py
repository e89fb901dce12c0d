"""DB104: ``nonlocal`` or ``global`` inside a closure, backward or jvp (or a function nested in it)."""
from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from transpiler import codes
from transpiler.diagnostics import Diagnostic
from transpiler.lint.rules.context import FormulaContext

CODE = codes.NONLOCAL.code


def check(context: FormulaContext) -> Iterator[Diagnostic]:
    """DB104 for each ``nonlocal`` or ``global`` statement in the closure's body."""
    for node in context.body_nodes:
        if type(node) is cst.Nonlocal or type(node) is cst.Global:     # leaf classes: ``type`` (ABC ``isinstance`` is slow)
            keyword = "nonlocal" if type(node) is cst.Nonlocal else "global"
            names = ", ".join(n.name.value for n in node.names)
            yield context.diagnostic(
                node, CODE,
                f"`{keyword} {names}` inside {context.name} rebinds state outside the closure; a {context.name} "
                f"must be a pure function of its {context.closure.role.arguments}, inputs and outputs: "
                f"use a local name",
            )
