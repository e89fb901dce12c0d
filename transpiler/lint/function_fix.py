"""Unsafe fix for ``torch.autograd.Function``: mark ``backward`` ``@once_differentiable``.

A DB100 on a ctx-style Function (an intermediate kept on ctx, or a backward that
runs a kernel) makes double backward silently wrong. No recompute fix is offered
for Functions yet, so the one fix is to declare that backward does not support
double backward: ``torch.autograd.function.once_differentiable`` runs it under
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

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import MetadataWrapper, PositionProvider

MODULE = "torch.autograd.function"
NAME = "once_differentiable"
DESCRIPTION = "mark backward @once_differentiable (double backward raises instead of being silently wrong)"


@dataclass(frozen=True)
class FunctionFix:
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
