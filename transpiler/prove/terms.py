"""Which term of a backward makes its gradient wrong.

The backward's returned expression for one input is read with the project's front-end
(``transpiler.frontend``, never imported from the formula's module) and split into its
additive terms: every operand of a ``+`` or ``-`` anywhere inside it, so
``grad * (at.cos(self) + 0.1 * self)`` has the terms ``at.cos(self)`` and ``0.1 * self``.
The backward is run once per term with that term multiplied by zero, on torch tensors,
which gives the term's contribution ``c`` to the gradient ``g``. With ``e`` the gradient the
tier expected (finite differences), the term explains the gap when ``g - a * c`` matches
``e`` for ``a = 1`` (the term should not be there), ``a = 2`` (its sign is wrong) or, for
inputs of more than one element, the least-squares ``a = <g - e, c> / <c, c>`` (it is off
by the factor ``1 - a``).
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

    def __str__(self) -> str:
        where = f"{shown(self.path)}:{self.line}:{self.col}"
        if abs(self.factor) < 1e-3:
            how = "without it the gradient matches"
        elif abs(self.factor + 1) < 1e-3:
            how = "its sign is wrong: negated, the gradient matches"
        else:
            how = f"multiplied by {self.factor:.6g}, the gradient matches"
        return f"the term `{self.term}` at {where} explains it: {how}"


class _AdditiveTerms(cst.CSTVisitor):
    """Operands of ``+`` and ``-``, outermost first."""

    def __init__(self) -> None:
        self.found: list[cst.BaseExpression] = []

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, (cst.Add, cst.Subtract)):
            self.found += [node.left, node.right]


def additive_terms(expression: cst.BaseExpression) -> list[cst.BaseExpression]:
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


def explain(fn: Any, run_backward: Any, returned_index: int, expected: np.ndarray,
            single_element: bool) -> Explanation | str:
    """The term of the backward's return for differentiable input ``returned_index`` that
    explains ``got - expected``, or a line saying why none does.

    ``run_backward(backward_source)`` runs the backward compiled from ``backward_source``
    (the formula's own closure environment) and gives that input's gradient."""
    model = model_of(fn)
    if model is None:
        return "the formula's source could not be read, so no term is named"
    module, formula = model
    backward = formula.backward
    if len(backward.returns) != 1:
        return "the backward has several `return`s, so no term is named"
    values = returned_values(backward.returns[0])
    if returned_index >= len(values) or values[returned_index] is None:
        return "the backward returns no expression for this input"
    terms = additive_terms(values[returned_index])
    if not terms:
        return "its return expression is a single term"
    got = run_backward(module_code(backward.node))
    gap = got - expected
    fitted: list[tuple[float, Explanation]] = []
    for term in terms:
        zeroed = cst.parse_expression(f"0 * ({cst.Module([]).code_for_node(term)})")
        contribution = got - run_backward(module_code(backward.node.deep_replace(term, zeroed)))
        norm = float(np.sum(contribution * contribution))
        if not np.isfinite(norm) or norm == 0.0:
            continue
        factors = [1.0, 2.0] if single_element else [1.0, 2.0, float(np.sum(gap * contribution)) / norm]
        for a in factors:
            if np.allclose(got - a * contribution, expected, rtol=1e-3, atol=1e-5):
                span = module.span(term)
                residual = float(np.max(np.abs(got - a * contribution - expected), initial=0.0))
                fitted.append((residual, Explanation(cst.Module([]).code_for_node(term), formula.path,
                                                     span.line, span.col, 1.0 - a)))
                break
    if not fitted:
        listed = ", ".join(f"`{cst.Module([]).code_for_node(t)}`" for t in terms)
        return f"no single term of its return ({listed}) explains the gap"
    return min(fitted, key=lambda item: item[0])[1]


def shown(path: str) -> str:
    """``path`` relative to the working directory when it lies below it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def module_code(function: cst.FunctionDef) -> str:
    """``function`` as the source of a module of its own."""
    return cst.Module([function.with_changes(leading_lines=())]).code
