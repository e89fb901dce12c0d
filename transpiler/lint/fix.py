"""``transpile lint --fix``: recompute captured intermediates inside the backward.

For a DB100 capture whose intermediate is computed from inputs and outputs
only (transitively through other recomputable intermediates), the codemod
replays the forward statements that compute it at the top of the backward,
in forward order, so the backward builds it from saved inputs and outputs and
double backward sees the whole graph. A forward statement that nothing else
needs any more is moved (with its comments) instead of copied. Formatting and
comments elsewhere are untouched (libcst round-trips the rest verbatim).
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import libcst as cst

from transpiler import codes
from transpiler.frontend import read_tree
from transpiler.lint.rules.context import FormulaContext, operator_table
from transpiler.lint.rules.recompute import assignment_targets, plan_recomputation, read_names
from transpiler.model import CaptureKind, Formula, Helper
from transpiler.sources import too_large_for_formulas


def fix_source(path: str, source: str, known_operators: Collection[str],
               helpers: Mapping[str, Helper] | None = None,
               wanted: Callable[[int, str], bool] | None = None) -> str:
    """``source`` with every fixable DB100 capture recomputed in its backward.

    ``wanted(line, code)``: whether the finding at ``line`` is reported (not silenced by
    ``# noqa`` or the configuration); findings that are not are left as written.
    Files that do not parse or are too large to (DB000), and formulas with nothing to fix, come back unchanged.
    """
    if too_large_for_formulas(path, source) is not None:
        return source
    try:
        tree = cst.parse_module(source)
    except (cst.ParserSyntaxError, cst.CSTValidationError):
        return source
    module = read_tree(path, tree)
    operators = operator_table(known_operators)
    all_helpers = {**(helpers or {}), **{h.name: h for h in module.helpers}}
    edits: dict[cst.FunctionDef, _FormulaEdit] = {}
    for formula in module.formulas:
        edit = _plan_formula(FormulaContext(module, formula, operators, all_helpers, formula.backward), wanted)
        if edit is not None:
            edits[formula.node] = edit
            edits[formula.backward.node] = edit
    if not edits:
        return source
    return tree.visit(_RecomputeInBackward(edits)).code


@dataclass(frozen=True)
class _FormulaEdit:
    formula: Formula
    replay: tuple[tuple[int, cst.SimpleStatementLine], ...]   # statements copied into the backward
    moved: frozenset[int]                                      # of those, the ones dropped from the forward


def _plan_formula(context: FormulaContext, wanted: Callable[[int, str], bool] | None) -> _FormulaEdit | None:
    if not isinstance(context.closure_node.body, cst.IndentedBlock):
        return None  # ``def backward(grad): return ...`` on one line has no top to insert at
    replay: dict[int, cst.SimpleStatementLine] = {}
    for capture in context.closure.captures:
        if capture.kind is CaptureKind.ILLEGAL and capture.name not in context.formula.params:
            if wanted is not None and not wanted(capture.first_use.line, codes.KEPT_INTERMEDIATE.code):
                continue
            plan = plan_recomputation(context, capture.name)
            if plan is not None:
                replay.update(plan.statements)
    if not replay:
        return None
    return _FormulaEdit(context.formula, tuple(sorted(replay.items(), key=lambda item: item[0])),
                        _dead_after_move(context, replay))


def _dead_after_move(context: FormulaContext, replay: Mapping[int, cst.SimpleStatementLine]) -> frozenset[int]:
    """Replayed statements that the forward no longer needs once the backward recomputes them."""
    body = list(context.formula.node.body.body)
    reads = {
        index: read_names(statement) for index, statement in enumerate(body)
        if index != context.closure_index
    }
    outputs = {name for name in context.formula.outputs if name is not None}
    moved: set[int] = set()
    changed = True
    while changed:
        changed = False
        for index, statement in replay.items():
            if index in moved:
                continue
            targets = set(assignment_targets(statement))
            still_read = any(
                targets & names for other, names in reads.items() if other != index and other not in moved
            )
            if not still_read and not targets & outputs:
                moved.add(index)
                changed = True
    return frozenset(moved)


class _RecomputeInBackward(cst.CSTTransformer):
    """Put the replayed statements at the top of each backward; drop moved ones from the forward."""

    def __init__(self, edits: Mapping[cst.FunctionDef, _FormulaEdit]) -> None:
        super().__init__()
        self.edits = edits

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        edit = self.edits.get(original_node)
        if edit is None:
            return updated_node
        if original_node is edit.formula.backward.node:
            return updated_node.with_changes(body=self._recompute(edit, updated_node.body))
        kept = [
            statement for index, statement in enumerate(updated_node.body.body) if index not in edit.moved
        ]
        return updated_node.with_changes(body=updated_node.body.with_changes(body=kept))

    @staticmethod
    def _recompute(edit: _FormulaEdit, body: cst.IndentedBlock) -> cst.IndentedBlock:
        statements = list(body.body)
        start = 1 if statements and _is_docstring(statements[0]) else 0
        replayed = [
            statement.with_changes(leading_lines=_comment_lines(statement) if index in edit.moved else [])
            for index, statement in edit.replay
        ]
        return body.with_changes(body=[*statements[:start], *replayed, *statements[start:]])


def _comment_lines(statement: cst.SimpleStatementLine) -> list[cst.EmptyLine]:
    """The comment lines above a statement (blank lines dropped: it moves into a block's top)."""
    return [line for line in statement.leading_lines if line.comment is not None]


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr) and isinstance(statement.body[0].value, cst.BaseString)
    )
