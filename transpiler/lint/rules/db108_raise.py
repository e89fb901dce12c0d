"""DB108: a ``raise`` inside a backward or jvp (or a function nested in it) that is not the
formula language's form, ``raise NotImplementedError("...")`` or another of torch's error types
with one string literal (:mod:`transpiler.raises`), which the C++ node reproduces exactly."""
from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from transpiler import codes
from transpiler.diagnostics import Diagnostic
from transpiler.lint.rules.context import FormulaContext
from transpiler.raises import TORCH_CHECKS, raised_error

CODE = codes.UNSUPPORTED_RAISE.code


def check(context: FormulaContext) -> Iterator[Diagnostic]:
    """DB108 for each ``raise`` in the closure that is not the formula language's form."""
    for node in context.body_nodes:
        if type(node) is cst.Raise and raised_error(node) is None:     # a leaf class: ``type`` (ABC ``isinstance`` is slow)
            yield context.diagnostic(
                node, CODE,
                f"this raise inside {context.name} cannot be compiled to the same error: write "
                f"`raise NotImplementedError(\"...\")` (or {', '.join(sorted(set(TORCH_CHECKS) - {'NotImplementedError'}))}) "
                f"with one string literal, which the C++ node throws as torch's error of that type",
            )
