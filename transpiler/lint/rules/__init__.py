"""The closure rules for formula files, one module per code (ruff style).

Each rule module exposes ``CODE`` and ``check(context) -> Iterator[Diagnostic]``
over a :class:`~transpiler.lint.rules.context.FormulaContext`:

- ``db100_intermediate``: a tensor (or tensor-read value) computed in the forward is captured;
- ``db101_rebound_input``: a captured input was rebound by the forward;
- ``db102_in_place``: a captured input or output is modified in place;
- ``db103_late_binding``: a captured name is bound again after ``def backward``;
- ``db104_nonlocal``: ``nonlocal``/``global`` inside a backward;
- ``db105_undeclared_operator``: an operator with no formula runs in a backward or helper;
- ``db106_gradient_count``: a ``return`` gives the wrong number of gradients;
- ``db108_raise``: a ``raise`` that the C++ node could not throw as the same error.

DB000 and DB107 come from the front-end (:mod:`transpiler.frontend`) while it
builds the model; :mod:`.recompute` plans the DB100 fix-its.
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
    db108_raise,
)

RULES = (
    db100_intermediate,
    db101_rebound_input,
    db102_in_place,
    db103_late_binding,
    db104_nonlocal,
    db105_undeclared_operator,
    db106_gradient_count,
    db108_raise,
)

__all__ = ["RULES"]
