"""Unsafe fix for ``torch.autograd.Function``: mark ``backward`` ``@once_differentiable``.

A DB100 on a ctx-style Function (an intermediate kept on ctx, or a backward that
runs a kernel) makes double backward silently wrong. Where backward can recompute
the intermediate from forward's inputs, :mod:`transpiler.lint.recompute_fix` does
that; otherwise the fix is to declare that backward does not support double
backward: ``torch.autograd.function.once_differentiable`` runs it under
``no_grad`` and makes differentiating its result raise torch's error. The fix is
*unsafe* in ruff's sense: it changes behaviour (a silently wrong second
derivative becomes an error), so ``--fix`` applies it only with
``--unsafe-fixes``.

Plan, then transform (as :mod:`transpiler.lint.fix`): the plan finds, for each
finding line, the innermost class around it that defines ``backward`` itself;
the transform adds the decorator just below ``@staticmethod`` (torch's own
order) and the import, unless the module already imports the name (under any
alias, which is then used).
"""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import NamedTuple

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import MetadataWrapper, PositionProvider

from transpiler import codes
from transpiler.diagnostics import Diagnostic, LineEdit, line_edits
from transpiler.lint.hygiene_fix import Edits, FunctionClass, _is_save, attribute_edits, metadata_edits, walk
from transpiler.lint.recompute_fix import DESCRIPTION as RECOMPUTE_FIX
from transpiler.lint.recompute_fix import recompute_edits

MODULE = "torch.autograd.function"
NAME = "once_differentiable"
DESCRIPTION = "mark backward @once_differentiable (double backward raises instead of being silently wrong)"
ONCE_FIX = ("unsafe (--unsafe-fixes): mark backward @once_differentiable, so that double backward raises "
            "instead of being silently wrong")              # a DB100's, where it is not recomputed


@dataclass(frozen=True)
class FunctionFix:
    """The source after one Function fix and the finding lines that fix addresses."""

    source: str                    # the fixed source (the input when nothing changed)
    lines: frozenset[int]          # the finding lines the fix addresses


def once_differentiable_fix(source: str, lines: Collection[int]) -> FunctionFix:
    """``source`` with the ``backward`` of each Function holding one of the finding ``lines``
    decorated ``@once_differentiable``; unchanged when there is nothing to decorate or it
    does not parse."""
    try:
        module = cst.parse_module(source)
    except (cst.ParserSyntaxError, cst.CSTValidationError):
        return FunctionFix(source, frozenset())
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    plan = _plan(wrapper, lines)
    if not plan.backwards:
        return FunctionFix(source, frozenset())
    fixed = module.visit(_Decorate(plan))
    if plan.import_needed:
        context = CodemodContext()
        AddImportsVisitor.add_needed_import(context, MODULE, NAME)
        fixed = AddImportsVisitor(context).transform_module(fixed)
    return FunctionFix(fixed.code, plan.lines)


@dataclass(frozen=True)
class _Plan:
    backwards: frozenset[cst.FunctionDef]   # the ``backward`` definitions to decorate
    lines: frozenset[int]                   # the finding lines inside their classes
    name: str                               # what the decorator is called in this module
    import_needed: bool


def _plan(wrapper: MetadataWrapper, lines: Collection[int]) -> _Plan:
    finder = _Finder(set(lines))
    wrapper.visit(finder)
    name = finder.imported_as or NAME
    backwards = {b: lines for b, lines in finder.backwards.items() if not _decorated(b, name)}
    claimed = frozenset(line for lines in backwards.values() for line in lines)
    return _Plan(frozenset(backwards), claimed, name, finder.imported_as is None)


class _Finder(cst.CSTVisitor):
    """The innermost class around each line that defines ``backward``; how the module
    already imports ``once_differentiable``, if it does."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, lines: set[int]) -> None:
        super().__init__()
        self.lines = lines
        self.backwards: dict[cst.FunctionDef, set[int]] = {}
        self.imported_as: str | None = None
        self._claimed: set[int] = set()

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or _dotted(node.module) not in (MODULE,):
            return
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            if _dotted(alias.name) == NAME and self.imported_as is None:
                self.imported_as = _dotted(alias.asname.name) if alias.asname is not None else NAME

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        # leave: inner classes are seen first, so a line goes to its innermost class
        span = self.get_metadata(PositionProvider, original_node)
        inside = {line for line in self.lines - self._claimed if span.start.line <= line <= span.end.line}
        if not inside:
            return
        backward = _own_backward(original_node)
        if backward is None:
            return
        self._claimed |= inside
        self.backwards.setdefault(backward, set()).update(inside)


def _own_backward(cls: cst.ClassDef) -> cst.FunctionDef | None:
    if not isinstance(cls.body, cst.IndentedBlock):
        return None
    found = [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "backward"]
    return found[-1] if found else None      # the last definition is the one the class keeps


def _decorated(function: cst.FunctionDef, name: str) -> bool:
    return any(_dotted(d.decorator).split(".")[-1] in (name, NAME) for d in function.decorators)


def _dotted(node: cst.BaseExpression) -> str:
    match node:
        case cst.Name(value=value):
            return value
        case cst.Attribute(value=value, attr=cst.Name(value=attr)):
            return f"{_dotted(value)}.{attr}"
        case cst.Call(func=func):
            return _dotted(func)
    return ""


class _Decorate(cst.CSTTransformer):
    def __init__(self, plan: _Plan) -> None:
        super().__init__()
        self.plan = plan

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        if original_node not in self.plan.backwards:
            return updated_node
        decorators = list(updated_node.decorators)
        at = next((i + 1 for i, d in enumerate(decorators) if _dotted(d.decorator).endswith("staticmethod")),
                  len(decorators))
        decorators.insert(at, cst.Decorator(decorator=cst.Name(self.plan.name)))
        return updated_node.with_changes(decorators=decorators)


# --- every fix of a Function, in one transform --------------------------------------------------

class Located(NamedTuple):
    """A finding to fix: its 1-based line and column (as reported) and its code."""

    line: int
    col: int
    code: str


@dataclass(frozen=True)
class FunctionFixes:
    """The source after the Function fixes, and which findings were fixed, withheld or recomputed."""

    source: str                                   # the fixed source (the input when nothing changed)
    applied: frozenset[Located]                   # the findings the applied fixes address
    withheld: frozenset[Located]                  # findings with an unsafe fix, not applied (no ``unsafe``)
    recomputed: frozenset[Located] = frozenset()  # DB100 findings whose fix recomputes (not @once_differentiable)


SAFE_CODES = frozenset({codes.METADATA_ONLY_SAVE.code})
UNSAFE_CODES = frozenset({codes.KEPT_INTERMEDIATE.code, codes.CTX_ATTRIBUTE_TENSOR.code})
FIXABLE = SAFE_CODES | UNSAFE_CODES


def fix_functions(source: str, findings: Collection[Located], unsafe: bool) -> FunctionFixes:
    """``source`` with the fixes of ``findings`` in its Functions: the safe ones (DB111) always, the
    unsafe ones (DB100's ``@once_differentiable``, DB110's move to ``save_for_backward``) with
    ``unsafe``. One fix per Function and per pass where two would edit the same statement (the
    finding left over stays reported; ``--fix`` again fixes it)."""
    findings = [f for f in findings if f.code in FIXABLE]
    unchanged = FunctionFixes(source, frozenset(), frozenset())
    try:
        module = cst.parse_module(source)
    except (cst.ParserSyntaxError, cst.CSTValidationError):
        return unchanged
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    edits, applied, withheld = Edits(), set(), set()
    for cls, inside in _by_class(wrapper.module, positions, findings):
        for code, planner in ((codes.METADATA_ONLY_SAVE.code, _plan_metadata),
                              (codes.CTX_ATTRIBUTE_TENSOR.code, _plan_attribute)):
            chosen = [f for f in inside if f.code == code]
            planned = planner(cls, chosen, positions) if chosen else None
            if planned is None or planned.touches(edits):
                continue
            if code in UNSAFE_CODES and not unsafe:
                withheld.update(chosen)
                continue
            edits.update(planned)
            applied.update(chosen)
    recomputed, deferred = _plan_recompute(wrapper.module, positions, findings, edits)
    if unsafe:
        applied |= recomputed
    else:
        withheld |= recomputed
    once = [f for f in findings if f.code == codes.KEPT_INTERMEDIATE.code and f not in recomputed | deferred]
    plan = _plan(wrapper, {f.line for f in once}) if once else None
    if plan is not None and plan.backwards:
        addressed = {f for f in once if f.line in plan.lines}
        if unsafe:
            edits.decorate |= plan.backwards
            applied |= addressed
        else:
            withheld |= addressed
    if not applied:
        return FunctionFixes(source, frozenset(), frozenset(withheld))
    fixed = wrapper.module.visit(_Apply(edits, plan.name if plan is not None else NAME))
    if edits.decorate and plan.import_needed:
        context = CodemodContext()
        AddImportsVisitor.add_needed_import(context, MODULE, NAME)
        fixed = AddImportsVisitor(context).transform_module(fixed)
    return FunctionFixes(fixed.code, frozenset(applied), frozenset(withheld), frozenset(recomputed))


def _plan_recompute(module: cst.Module, positions, findings: list[Located],
                    edits: Edits) -> tuple[set[Located], set[Located]]:
    """(addressed, deferred): the DB100 finding per Function whose intermediate forward computes
    from its inputs alone (:mod:`transpiler.lint.recompute_fix`), its edits joined to ``edits``;
    the class's other DB100 findings wait for the next pass (not decorated meanwhile)."""
    addressed: set[Located] = set()
    deferred: set[Located] = set()
    for cls, inside in _by_class(module, positions, [f for f in findings if f.code == codes.KEPT_INTERMEDIATE.code]):
        keeper = cls.methods.get("forward")
        saves = [n for n in walk(keeper) if isinstance(n, cst.Call) and _is_save(n)] if keeper is not None else []
        for finding in inside:
            # at the saved element, or at the save call when it keeps one value
            elements = [a.value for call in saves for a in call.args if _at(a.value, positions, finding)]
            elements = elements or [a.value for call in saves if _at(call, positions, finding) for a in call.args]
            change = next((c for c in map(lambda e: recompute_edits(cls, e), elements) if c is not None), None)
            if change is not None and not change.touches(edits):
                edits.update(change)
                addressed.add(finding)
                deferred.update(f for f in inside if f != finding)
                break
    return addressed, deferred


def _by_class(module: cst.Module, positions, findings: list[Located]) -> list[tuple[FunctionClass, list[Located]]]:
    """The findings inside each class (the innermost one around each)."""
    classes = [node for node in walk(module) if isinstance(node, cst.ClassDef)]
    grouped: dict[int, tuple[FunctionClass, list[Located]]] = {}
    for finding in findings:
        around = [c for c in classes if positions[c].start.line <= finding.line <= positions[c].end.line]
        if around:
            innermost = max(around, key=lambda c: positions[c].start.line)
            grouped.setdefault(id(innermost), (FunctionClass.of(innermost), []))[1].append(finding)
    return list(grouped.values())


def _at(node: cst.CSTNode, positions, finding: Located) -> bool:
    start = positions[node].start
    return start.line == finding.line and start.column + 1 == finding.col


def _plan_metadata(cls: FunctionClass, findings: list[Located], positions) -> Edits | None:
    keeper = cls.keeper
    names = [n for n in walk(keeper) if isinstance(n, cst.Name)] if keeper is not None else []
    elements = [next((n for n in names if _at(n, positions, f)), None) for f in findings]
    return None if None in elements else metadata_edits(cls, elements, positions)


def _plan_attribute(cls: FunctionClass, findings: list[Located], positions) -> Edits | None:
    keeper = cls.keeper
    body = list(keeper.body.body) if keeper is not None and isinstance(keeper.body, cst.IndentedBlock) else []
    statements = []
    for finding in findings:
        statement = next((s for s in body if isinstance(s, cst.SimpleStatementLine) and any(
            isinstance(n, cst.Attribute) and _at(n, positions, finding) for n in walk(s))), None)
        if statement is None:
            return None
        statements.append(statement)
    return attribute_edits(cls, statements)


class _Apply(cst.CSTTransformer):
    """Applies :class:`Edits` (keyed by the original nodes) and the ``@once_differentiable`` decorations."""

    def __init__(self, edits: Edits, decorator: str) -> None:
        super().__init__()
        self.edits = edits
        self.decorator = decorator

    def on_leave(self, original_node, updated_node):
        updated = super().on_leave(original_node, updated_node)
        return self.edits.replace.get(original_node, updated)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock):
        body: list[cst.BaseStatement] = []
        for original, updated in zip(original_node.body, updated_node.body):
            if original in self.edits.statements:
                body.extend(self.edits.statements[original])
            else:
                body.append(updated)
        return updated_node.with_changes(body=body or [cst.SimpleStatementLine([cst.Pass()])])

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef):
        top = self.edits.top_of.get(original_node)
        if top and isinstance(updated_node.body, cst.IndentedBlock):
            body = list(updated_node.body.body)
            at = 1 if body and _is_docstring(body[0]) else 0
            updated_node = updated_node.with_changes(body=updated_node.body.with_changes(
                body=[*body[:at], *top, *body[at:]]))
        if original_node not in self.edits.decorate:
            return updated_node
        decorators = list(updated_node.decorators)
        at = next((i + 1 for i, d in enumerate(decorators) if _dotted(d.decorator).endswith("staticmethod")),
                  len(decorators))
        decorators.insert(at, cst.Decorator(decorator=cst.Name(self.decorator)))
        return updated_node.with_changes(decorators=decorators)


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and \
        isinstance(statement.body[0], cst.Expr) and isinstance(statement.body[0].value, cst.SimpleString)


def describe_fixes(source: str, findings: Collection[Located]) -> dict[Located, str]:
    """The fix each of ``findings`` (DB110, DB111, DB100) gets, described, where its plan succeeds
    (a DB100's: the recompute or ``@once_differentiable``)."""
    from transpiler.lint.ctx.hygiene import ATTRIBUTE_FIX, METADATA_FIX

    described = {codes.CTX_ATTRIBUTE_TENSOR.code: ATTRIBUTE_FIX, codes.METADATA_ONLY_SAVE.code: METADATA_FIX,
                 codes.KEPT_INTERMEDIATE.code: ONCE_FIX}
    planned = fix_functions(source, [f for f in findings if f.code in described], unsafe=True)
    return {f: RECOMPUTE_FIX if f in planned.recomputed else described[f.code] for f in planned.applied}


class FindingFix(NamedTuple):
    """One finding's fix: its edits of the source's lines (``()``: none) and its description."""

    edits: tuple[LineEdit, ...]
    fix: str | None


def fix_edits(source: str, diagnostic: Diagnostic) -> FindingFix:
    """The fix of one finding of a Function alone, as edits of ``source``'s lines, described."""
    if diagnostic.fix is None or diagnostic.code not in FIXABLE:
        return FindingFix((), diagnostic.fix)
    located = Located(diagnostic.line, diagnostic.col, diagnostic.code)
    change = fix_functions(source, [located], unsafe=True)
    if not change.applied:
        return FindingFix((), diagnostic.fix)
    return FindingFix(line_edits(source, change.source), RECOMPUTE_FIX if located in change.recomputed
                      else ONCE_FIX if diagnostic.code == codes.KEPT_INTERMEDIATE.code else diagnostic.fix)
