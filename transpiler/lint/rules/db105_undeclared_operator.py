"""DB105: a closure (backward or jvp) runs an operator the library has no formula for.

Three ways in: ``at.X(...)``, a Python operator on tensors (``a * b`` is
``mul``), and a helper that does either (checked transitively), called or
passed as a value (``f = helper``, ``apply(helper, x)``: the model's
``references``, since a helper handed on runs where it is called).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import libcst as cst

from transpiler import codes
from transpiler.dataflow import FlowResult, ValueKind, analyze_body, annotation_kind, global_reads, scope_names
from transpiler.diagnostics import Diagnostic
from transpiler.lint.rules.context import FormulaContext, walk_own_body
from transpiler.model import CallSite, ClosureRole, FormulaModule, Helper

CODE = codes.UNDECLARED_OPERATOR.code


def advice(role: ClosureRole = ClosureRole.BACKWARD) -> str:
    """What an undeclared operator breaks, and what to do."""
    return (f"{role.differentiated} is impossible; declare it with @derivative (or "
            "nondifferentiable(...) when its output carries no gradient) or use declared operators")


@dataclass(frozen=True)
class OperatorCall:
    """One operator a function body runs."""

    node: cst.CSTNode
    operator: str
    spelled: str        # how the source says it: ``at.exp`` or ``*``


def operator_calls(function: cst.FunctionDef, calls: tuple[CallSite, ...], env: Mapping[str, ValueKind],
                   helper_returns: Mapping[str, str | None], flow: FlowResult | None = None,
                   nodes: Sequence[cst.CSTNode] | None = None) -> Iterator[OperatorCall]:
    """Operators run by ``function``'s body and by the functions nested in it: its ``at.X``
    calls (``calls``, the model's) and its Python operators on tensors; ``flow``: the dataflow
    over that body from ``env``, and ``nodes``: every node of that body, when the caller has them already."""
    for call in calls:
        if call.operator:
            yield OperatorCall(call.node, call.name, f"at.{call.name}")
    yield from _python_operators(function, env, helper_returns, flow, nodes)


def _python_operators(function: cst.FunctionDef, env: Mapping[str, ValueKind],
                      helper_returns: Mapping[str, str | None], flow: FlowResult | None = None,
                      nodes: Sequence[cst.CSTNode] | None = None) -> Iterator[OperatorCall]:
    """The Python operators on tensors (``a * b`` is ``mul``) of ``function``'s body and of the
    functions nested in it (their parameters typed from their annotations)."""
    if flow is None:
        flow = analyze_body(function.body.body, env, helper_returns=helper_returns)
    for use in flow.operator_uses.values():
        yield OperatorCall(use.node, use.operator, f"`{_operator_token(use.node)}` (aten `{use.operator}`)")
    if nodes is not None and not any(type(node) is cst.FunctionDef for node in nodes):
        return      # nothing nested (most closures): the body is not walked again to find it
    nested_env = {**env, **flow.env}
    for node in walk_own_body(function):
        if type(node) is cst.FunctionDef:      # a leaf class: ``type`` (ABC ``isinstance`` is slow)
            params = node.params
            inner = dict(nested_env)
            for param in (*params.params, *params.kwonly_params):
                annotation = param.annotation
                text = cst.Module([]).code_for_node(annotation.annotation) if annotation is not None else None
                inner[param.name.value] = annotation_kind(text)
            yield from _python_operators(node, inner, helper_returns)


def _operator_token(node: cst.CSTNode) -> str:
    """The operator as written: ``*`` for ``a * b``, ``-`` for ``-a``, ``+=`` for ``a += b``."""
    return cst.Module([]).code_for_node(node.operator).strip()


class HelperChecker:
    """Undeclared operators each helper runs, directly or through other helpers (memoised)."""

    def __init__(self, helpers: Mapping[str, Helper], helper_returns: Mapping[str, str | None],
                 known_operators: frozenset[str]) -> None:
        self.helpers = helpers
        self.helper_returns = helper_returns
        self.known_operators = known_operators
        self.memo: dict[str, tuple[str, ...]] = {}

    def own_calls(self, helper: Helper) -> Iterator[OperatorCall]:
        """The undeclared operators ``helper``'s own body runs."""
        env = {p.name: annotation_kind(p.annotation) for p in helper.params}
        for call in operator_calls(helper.node, helper.calls, env, self.helper_returns):
            if call.operator not in self.known_operators:
                yield call

    def missing(self, name: str, visiting: frozenset[str] = frozenset()) -> tuple[str, ...]:
        """Undeclared operators the helper ``name`` runs, itself or through the helpers it calls."""
        if name in self.memo:
            return self.memo[name]
        if name in visiting:
            return ()
        helper = self.helpers[name]
        found = list(dict.fromkeys(call.operator for call in self.own_calls(helper)))
        for reached in self.helpers_reached(helper):
            found += [op for op in self.missing(reached, visiting | {name}) if op not in found]
        self.memo[name] = tuple(found)
        return self.memo[name]

    def helpers_called(self, calls: tuple[CallSite, ...]) -> Iterator[CallSite]:
        """The calls among ``calls`` of a helper of the library."""
        return (call for call in calls if not call.operator and call.name in self.helpers)

    def helpers_reached(self, helper: Helper) -> list[str]:
        """The helpers ``helper`` may run: those it calls (``m.f(...)`` too), then those it names
        otherwise (its ``references``: passed on as values), by name."""
        called = list(dict.fromkeys(call.name for call in self.helpers_called(helper.calls)))
        return called + sorted(name for name in helper.references if name in self.helpers and name not in called)


def check(context: FormulaContext) -> Iterator[Diagnostic]:
    """DB105 for each operator the closure (or a helper it calls) runs that has no formula in the library."""
    closure = context.closure
    reported: set[cst.CSTNode] = set()
    for call in operator_calls(context.closure_node, closure.calls, context.closure_env, context.helper_returns,
                               context.closure_flow, context.body_nodes):
        if context.is_declared(call.operator) or call.node in reported:
            continue
        reported.add(call.node)
        yield context.diagnostic(
            call.node, CODE,
            f"{context.name} calls {call.spelled}, which has no formula in the library: {advice(closure.role)}",
        )
    helpers = helper_checker(context.per_file, context.helpers, context.helper_returns, context.known_operators)
    for call in helpers.helpers_called(closure.calls):
        missing = helpers.missing(call.name)
        if missing:
            helper = context.helpers[call.name]
            listed = ", ".join(f"`{op}`" for op in missing)
            yield context.diagnostic(
                call.node, CODE,
                f"{context.name} calls helper `{call.name}` ({helper.path}:{helper.span.line}), which runs "
                f"{listed} with no formula in the library: {advice(closure.role)}",
            )
    yield from _helpers_passed(context, helpers)


def _helpers_passed(context: FormulaContext, helpers: HelperChecker) -> Iterator[Diagnostic]:
    """DB105 for each helper the closure names without calling it (``f = helper``, ``apply(helper,
    x)``) that runs an undeclared operator: it runs wherever the value is called. Only when the
    formula's ``references`` hold such a helper is the closure's own use looked for."""
    called = {call.name for call in helpers.helpers_called(context.closure.calls)}
    suspects = {name for name in context.formula.references
                if name in context.helpers and name not in called and helpers.missing(name)}
    if not suspects:
        return
    shadowed = scope_names(context.formula.node).local
    for use in global_reads(context.closure_node, shadowed):
        if use.value not in suspects:
            continue
        suspects.discard(use.value)
        helper = context.helpers[use.value]
        listed = ", ".join(f"`{op}`" for op in helpers.missing(use.value))
        yield context.diagnostic(
            use, CODE,
            f"{context.name} passes helper `{use.value}` ({helper.path}:{helper.span.line}) as a value, and "
            f"it runs {listed} with no formula in the library: {advice(context.closure.role)}",
        )


def helper_checker(per_file: dict[str, object], helpers: Mapping[str, Helper],
                   helper_returns: Mapping[str, str | None], known_operators: frozenset[str]) -> HelperChecker:
    """The file's :class:`HelperChecker`, made once per file (``per_file``: :attr:`FormulaContext.per_file`):
    every closure of a file sees the same helpers, return annotations and operators, so a helper
    called from many formulas is analysed once."""
    checker = per_file.get(CODE)
    if not isinstance(checker, HelperChecker):
        checker = per_file[CODE] = HelperChecker(helpers, helper_returns, known_operators)
    return checker


def check_helpers(module: FormulaModule, helpers: Mapping[str, Helper],
                  known_operators: frozenset[str], per_file: dict[str, object] | None = None) -> Iterator[Diagnostic]:
    """DB105 inside the helpers a file defines: backward code too, so closed under differentiation."""
    returns = {**module.function_returns, **{name: h.returns for name, h in helpers.items()}}
    checker = helper_checker({} if per_file is None else per_file, helpers, returns, known_operators)
    for helper in module.helpers:
        for call in checker.own_calls(helper):
            span = module.span(call.node)
            yield Diagnostic(
                module.path, span.line, span.col, CODE,
                f"helper `{helper.name}` calls {call.spelled}, which has no formula in the library: {advice()}",
            )
