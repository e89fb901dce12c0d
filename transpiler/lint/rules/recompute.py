"""Which captured intermediates can be recomputed in the backward, and from what.

An intermediate is recomputable when the forward binds it once, unconditionally,
before the backward, with a plain assignment whose right-hand side reads only
inputs the forward never rebinds, outputs, legal captures (metadata, scalars),
module-level names and other recomputable intermediates, none of them rebound
or changed in place after that assignment (so replaying it in the backward
gives the same value). The plan is the list
of forward statements to replay, in forward order. DB100 uses it to say
whether ``--fix`` applies; :mod:`transpiler.lint.fix` applies it.
"""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from transpiler.dataflow import ValueKind, syntax_children, walk
from transpiler.lint.rules.context import FormulaContext

_PURE_EXPRESSION_BLOCKERS = (cst.Lambda, cst.NamedExpr, cst.Yield, cst.Await)


@dataclass(frozen=True)
class Recomputation:
    """Forward statements (by body index, forward order) that rebuild one captured intermediate."""

    statements: tuple[tuple[int, cst.SimpleStatementLine], ...]


def plan_recomputation(context: FormulaContext, name: str) -> Recomputation | None:
    """How to recompute the intermediate ``name`` in the backward, or None when it cannot be."""
    needed: dict[int, cst.SimpleStatementLine] = {}
    if not _collect(context, name, needed, frozenset()):
        return None
    return Recomputation(tuple(sorted(needed.items(), key=lambda item: item[0])))


def describe_recomputation(plan: Recomputation) -> str:
    """One line for ``Diagnostic.fix``: the statements the fix puts at the top of the backward."""
    code = "; ".join(_code(statement.body[0]) for _, statement in plan.statements)
    return f"recompute at the top of backward: {code}"


def _collect(context: FormulaContext, name: str, needed: dict[int, cst.SimpleStatementLine],
             visiting: frozenset[str]) -> bool:
    """Add to ``needed`` the statements that recompute ``name``; False when impossible."""
    if name in visiting:
        return False
    bindings = context.forward_bindings(name)
    if len(bindings) != 1 or name in context.forward.mutated:
        return False
    binding = bindings[0]
    statement = binding.statement
    if binding.conditional or binding.augmented or binding.index > context.closure_index:
        return False
    value = _single_assignment_value(statement)
    if value is None or any(isinstance(n, _PURE_EXPRESSION_BLOCKERS) for n in walk(value)):
        return False
    if any(target in context.closure_locals for target in assignment_targets(statement)):
        return False
    formula = context.formula
    for read in read_names(value):
        if read in context.closure_locals or read in context.forward.mutated:
            return False  # shadowed by the backward's own name, or changed in place
        read_bindings = context.forward_bindings(read)
        if not read_bindings:
            continue      # an input the forward never rebinds, or a module-level name
        if read in formula.params or any(b.index >= binding.index for b in read_bindings):
            return False  # (re)bound at or after this statement: the backward would see another value
        if read in formula.outputs or context.forward.env.get(read) in (ValueKind.METADATA, ValueKind.SCALAR):
            continue      # an output or a legal capture, unchanged since this statement
        if not _collect(context, read, needed, visiting | {name}):
            return False
    needed[binding.index] = statement
    return True


def _single_assignment_value(statement: cst.BaseStatement) -> cst.BaseExpression | None:
    """The value of ``x = v`` / ``a, b = v`` / ``x: T = v``; None for anything else."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        names = target.elements if isinstance(target, (cst.Tuple, cst.List)) else [cst.Element(target)]
        if all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in names):
            return small.value
    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
        return small.value
    return None


def assignment_targets(statement: cst.SimpleStatementLine) -> list[str]:
    """The names a one-assignment line binds, in order (``a, b = ...`` -> ``["a", "b"]``)."""
    small = statement.body[0]
    target = small.targets[0].target if isinstance(small, cst.Assign) else small.target
    if isinstance(target, (cst.Tuple, cst.List)):
        return [e.value.value for e in target.elements]
    return [target.value]


def read_names(node: cst.CSTNode) -> set[str]:
    """Names an expression or statement reads (not attribute names, keywords or its own bindings)."""
    reads: set[str] = set()
    bound: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            reads.add(current.value)
        elif isinstance(current, cst.Attribute):
            stack.append(current.value)
        elif isinstance(current, cst.Arg):
            stack.append(current.value)
        elif isinstance(current, cst.CompFor):
            bound.update(n.value for n in walk(current.target) if isinstance(n, cst.Name))
            stack.extend(c for c in syntax_children(current) if c is not current.target)
        elif isinstance(current, cst.Param):
            bound.add(current.name.value)
            if current.default is not None:
                stack.append(current.default)
        else:
            stack.extend(syntax_children(current))
    return reads - bound


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


