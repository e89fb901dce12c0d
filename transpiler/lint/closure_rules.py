"""Closure rules (DB100-DB107) for formula files: the entry point the lint driver calls."""
from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping

from transpiler.diagnostics import Diagnostic
from transpiler.lint.rules import RULES, db105_undeclared_operator
from transpiler.lint.rules.context import FormulaContext, operator_table
from transpiler.model import Closure, Formula, FormulaModule, Helper, JvpRule


def check_formula_module(
    module: FormulaModule,
    source: str,
    known_operators: Collection[str],
    helpers: Mapping[str, Helper] | None = None,
) -> list[Diagnostic]:
    """Every closure finding of one parsed formula file, sorted by position.

    Includes the front-end's own DB000/DB107 diagnostics, and DB105 inside the
    file's helpers (they are backward code too). ``known_operators``
    holds ``name.overload`` and base names of every declared operator (the
    library plus the linted files). ``helpers`` adds helpers defined in other
    files (``formulas/helpers.py``) so DB105 follows calls into them; the
    module's own helpers are always included. ``source`` is the text the
    module was parsed from: part of the driver's uniform rule signature, the
    closure rules themselves work from the model.
    """
    operators = operator_table(known_operators)
    all_helpers = {**(helpers or {}), **{h.name: h for h in module.helpers}}
    per_file: dict[str, object] = {}
    findings = [*module.diagnostics,
                *db105_undeclared_operator.check_helpers(module, all_helpers, operators, per_file)]
    for formula in module.formulas:
        for closure in checked_closures(formula):
            context = FormulaContext(module, formula, operators, all_helpers, closure, per_file)
            for rule in RULES:
                findings.extend(rule.check(context))
    return sorted(findings)


def checked_closures(formula: Formula) -> Iterator[Closure]:
    """The closures the rules check: the backward and a written ``def jvp``. A jvp may read what a
    backward may (inputs, outputs, metadata, scalars) and its own tangents: one computed from a
    captured intermediate is first-order right but has no path to the inputs, so derivatives of
    the tangent are silently wrong, as for a backward. The auto rules' jvps are built from the
    backward or the op itself and need no check of their own."""
    yield formula.backward
    if formula.jvp is not None and formula.jvp.rule is JvpRule.WRITTEN:
        yield formula.jvp
