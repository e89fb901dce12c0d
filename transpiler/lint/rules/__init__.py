"""The closure rules for formula files, one module per code (ruff style).

Each rule module exposes ``CODE`` and ``check(context) -> Iterator[Diagnostic]``
over a :class:`~transpiler.lint.rules.context.FormulaContext`. DB000 and DB107
come from the front-end (:mod:`transpiler.frontend`) while it builds the model.
"""
from __future__ import annotations

from transpiler.lint.rules import (
    db100_intermediate,
    db101_rebound_input,
    db102_in_place,
    db103_late_binding,
    db104_nonlocal,
    db105_undeclared_operator,
    db106_gradient_count,
)

RULES = (
    db100_intermediate,
    db101_rebound_input,
    db102_in_place,
    db103_late_binding,
    db104_nonlocal,
    db105_undeclared_operator,
    db106_gradient_count,
)

__all__ = ["RULES"]
