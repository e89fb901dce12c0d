"""Which term of a backward (or a jvp) makes its gradient (or tangent) wrong.

The closure's returned expression for one input (for a jvp: one output) is read with the
project's front-end (``transpiler.frontend``, never imported from the formula's module); a
returned name assigned once in the closure (``result_t = ...; return result_t``) stands for
its assigned expression. It is split into its additive terms: every operand of a ``+`` or
``-`` anywhere inside it, so ``grad * (at.cos(self) + 0.1 * self)`` has the terms
``at.cos(self)`` and ``0.1 * self``. The closure is run once per term with that term
multiplied by zero, on torch tensors, which gives the term's contribution ``c`` to the value
``g``. With ``e`` the value the tier expected (finite differences, or torch's), the term
explains the gap when ``g - a * c`` matches ``e`` for ``a = 1`` (the term should not be
there), ``a = 2`` (its sign is wrong) or, for values of more than one element, the
least-squares ``a = <g - e, c> / <c, c>`` (it is off by the factor ``1 - a``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import libcst as cst
import numpy as np

from transpiler.model import Formula, FormulaModule, returned_values


@dataclass(frozen=True)
class Explanation:
    """The term whose correction closes the gap."""

    term: str
    path: str
    line: int
    col: int
    factor: float          # multiplying the term by this makes the gradient right
    value: str = "gradient"     # what the closure gives: "gradient" (backward) or "tangent" (jvp)

    def __str__(self) -> str:
        where = f"{shown(self.path)}:{self.line}:{self.col}"
        if abs(self.factor) < 1e-3:
            how = f"without it the {self.value} matches"
        elif abs(self.factor + 1) < 1e-3:
            how = f"its sign is wrong: negated, the {self.value} matches"
        else:
            how = f"multiplied by {self.factor:.6g}, the {self.value} matches"
        return f"the term `{self.term}` at {where} explains it: {how}"


class _AdditiveTerms(cst.CSTVisitor):
    """Operands of ``+`` and ``-``, outermost first."""

    def __init__(self) -> None:
        self.found: list[cst.BaseExpression] = []

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, (cst.Add, cst.Subtract)):
            self.found += [node.left, node.right]


def additive_terms(expression: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of every ``+`` and ``-`` in ``expression`` (outermost first)."""
    visitor = _AdditiveTerms()
    expression.visit(visitor)
    return visitor.found


def model_of(fn: Any) -> tuple[FormulaModule, Formula] | None:
    """The front-end's model of the formula ``fn`` (by its file and function name)."""
    import inspect

    from transpiler.frontend import read_module

    path = inspect.getsourcefile(fn)
    if path is None:
        return None
    module = read_module(path)
    found = [f for f in module.formulas if f.function == fn.__name__]
    return (module, found[0]) if len(found) == 1 else None


def explain(fn: Any, run_closure: Any, returned_index: int, expected: np.ndarray,
            single_element: bool, role: str = "backward") -> Explanation | str:
    """The term of the closure's return (``role``: ``backward`` or ``jvp``) for differentiable
    input (for a jvp: output) ``returned_index`` that explains ``got - expected``, or a line
    saying why none does.

    ``run_closure(source)`` runs the formula with the closure compiled from ``source`` (in the
    formula's own environment) and gives that input's gradient (output's tangent)."""
    model = model_of(fn)
    if model is None:
        return "the formula's source could not be read, so no term is named"
    module, formula = model
    closure = formula.backward if role == "backward" else formula.jvp
    if closure is None or closure.index is None:
        return f"the formula has no written {role}, so no term is named"
    if len(closure.returns) != 1:
        return f"the {role} has several `return`s, so no term is named"
    values = returned_values(closure.returns[0])
    if returned_index >= len(values) or values[returned_index] is None:
        return f"the {role} returns no expression for this " + ("input" if role == "backward" else "output")
    returned = assigned_expression(closure.node, values[returned_index])
    terms = additive_terms(returned)
    if not terms:
        return "its return expression is a single term"
    got = run_closure(module_code(closure.node))
    gap = got - expected
    fitted: list[tuple[float, Explanation]] = []
    for term in terms:
        zeroed = cst.parse_expression(f"0 * ({cst.Module([]).code_for_node(term)})")
        contribution = got - run_closure(module_code(closure.node.deep_replace(term, zeroed)))
        norm = float(np.sum(contribution * contribution))
        if not np.isfinite(norm) or norm == 0.0:
            continue
        factors = [1.0, 2.0] if single_element else [1.0, 2.0, float(np.sum(gap * contribution)) / norm]
        for a in factors:
            if np.allclose(got - a * contribution, expected, rtol=1e-3, atol=1e-5):
                span = module.span(term)
                residual = float(np.max(np.abs(got - a * contribution - expected), initial=0.0))
                fitted.append((residual, Explanation(cst.Module([]).code_for_node(term), formula.path,
                                                     span.line, span.col, 1.0 - a,
                                                     "gradient" if role == "backward" else "tangent")))
                break
    if not fitted:
        listed = ", ".join(f"`{cst.Module([]).code_for_node(t)}`" for t in terms)
        return f"no single term of its return ({listed}) explains the gap"
    return min(fitted, key=lambda item: item[0])[1]


def assigned_expression(function: cst.FunctionDef, value: cst.BaseExpression) -> cst.BaseExpression:
    """``value``, or for a name the function's body assigns exactly once (``x = ...``), the
    expression assigned."""
    if not isinstance(value, cst.Name):
        return value
    assigned = [statement.body[0].value for statement in function.body.body
                if isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Assign)
                and any(isinstance(t.target, cst.Name) and t.target.value == value.value
                        for t in statement.body[0].targets)]
    rebound = [statement for statement in function.body.body if isinstance(statement, cst.SimpleStatementLine)
               and isinstance(statement.body[0], cst.AugAssign)
               and isinstance(statement.body[0].target, cst.Name) and statement.body[0].target.value == value.value]
    return assigned[0] if len(assigned) == 1 and not rebound else value


def shown(path: str) -> str:
    """``path`` relative to the working directory when it lies below it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def module_code(function: cst.FunctionDef) -> str:
    """``function`` as the source of a module of its own."""
    return cst.Module([function.with_changes(leading_lines=())]).code
