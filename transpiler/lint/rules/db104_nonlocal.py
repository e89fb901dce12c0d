"""DB104: ``nonlocal`` or ``global`` inside a backward (or a function nested in it)."""
from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from transpiler import codes
from transpiler.dataflow import walk
from transpiler.diagnostics import Diagnostic
from transpiler.lint.rules.context import FormulaContext

CODE = codes.NONLOCAL.code


def check(context: FormulaContext) -> Iterator[Diagnostic]:
    for node in walk(context.backward_node.body):
        if isinstance(node, (cst.Nonlocal, cst.Global)):
            keyword = "nonlocal" if isinstance(node, cst.Nonlocal) else "global"
            names = ", ".join(n.name.value for n in node.names)
            yield context.diagnostic(
                node, CODE,
                f"`{keyword} {names}` inside backward rebinds state outside the closure; a backward "
                f"must be a pure function of its gradients, inputs and outputs: use a local name",
            )
