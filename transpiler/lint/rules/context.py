"""What every closure rule looks at: one formula with its dataflow facts."""
from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from transpiler.dataflow import BindingSite, FlowResult, ValueKind, analyze_body, walk
from transpiler.diagnostics import Diagnostic
from transpiler.frontend import parameter_arguments
from transpiler.model import CaptureKind, Closure, Formula, FormulaModule, Helper, Span

HELPER_RETURNS = "helper returns"     # the key of :attr:`FormulaContext.helper_returns` in ``per_file``


@dataclass(frozen=True)
class FormulaContext:
    """One closure of a formula (its backward, or its written jvp), with the facts the rules share.
    The rules word their messages from ``closure.role``."""

    module: FormulaModule
    formula: Formula
    known_operators: frozenset[str]      # ``name.overload`` and base names declared in the library
    helpers: Mapping[str, Helper]        # helpers the closure may call, by name
    closure: Closure                     # ``formula.backward`` or ``formula.jvp``
    # What a rule computes once per file and reuses for each closure of it (by the rule's code),
    # e.g. DB105's findings in the helpers: shared by the contexts of one file's closures.
    per_file: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    @property
    def path(self) -> str:
        """The path of the formula's file."""
        return self.module.path

    @property
    def name(self) -> str:
        """``backward`` or ``jvp``: how messages name the closure."""
        return self.closure.name

    @property
    def closure_node(self) -> cst.FunctionDef:
        """The closure's function definition (libcst)."""
        return self.closure.node

    @cached_property
    def helper_returns(self) -> dict[str, str | None]:
        """Return annotations of what the formula may call: this file's functions and the helpers
        (the same for every closure of the file: made once per file, in :attr:`per_file`)."""
        found = self.per_file.get(HELPER_RETURNS)
        if found is None:
            found = self.per_file[HELPER_RETURNS] = {
                **self.module.function_returns, **{name: h.returns for name, h in self.helpers.items()}}
        return found

    @cached_property
    def body_nodes(self) -> tuple[cst.CSTNode, ...]:
        """Every node of the closure's body, functions nested in it included (:func:`walk`): walked
        once for the rules that look at each of them."""
        return tuple(walk(self.closure_node.body))

    @property
    def forward(self) -> FlowResult:
        """Dataflow over the forward (the front-end's): final kinds and every binding of each name."""
        return self.formula.forward_flow

    @property
    def closure_index(self) -> int | None:
        """Position of the closure's ``def`` among the formula's body statements."""
        return self.closure.index

    @cached_property
    def closure_env(self) -> dict[str, ValueKind]:
        """Kinds of the names a closure starts with: its parameters (gradients or tangents and
        primals), the mask and its captures."""
        env: dict[str, ValueKind] = {}
        arguments = parameter_arguments(self.formula.schema, self.formula.params)
        for capture in self.closure.captures:
            if capture.kind is CaptureKind.INPUT:
                argument = arguments[capture.name]
                env[capture.name] = ValueKind.TENSOR if argument.is_tensor_like else ValueKind.SCALAR
            elif capture.kind is CaptureKind.OUTPUT:
                env[capture.name] = ValueKind.TENSOR
            else:
                env[capture.name] = self.forward.env.get(capture.name, ValueKind.SCALAR)
        for param in self.closure.params:
            env[param] = ValueKind.TENSOR
        if self.closure.needs_input_grad is not None:
            env[self.closure.needs_input_grad] = ValueKind.METADATA
        return env

    @cached_property
    def closure_flow(self) -> FlowResult:
        """Dataflow over the closure's own body (nested functions are analysed separately).
        Here, not in the model: its helper calls are typed with the library's helpers (other
        files' too), which the front-end, reading one file, does not see."""
        return analyze_body(self.closure_node.body.body, self.closure_env, helper_returns=self.helper_returns)

    @cached_property
    def closure_locals(self) -> frozenset[str]:
        """Names the closure binds itself: its parameters and assignments."""
        params = self.closure_node.params
        names = {p.name.value for p in (*params.params, *params.kwonly_params)}
        return frozenset(names | set(self.closure_flow.bindings))

    def forward_bindings(self, name: str) -> list[BindingSite]:
        """Where the forward binds ``name`` (none when it does not)."""
        return self.forward.bindings.get(name, [])

    def is_declared(self, operator: str) -> bool:
        """Whether ``operator`` is a declared operator."""
        return operator in self.known_operators

    def span(self, node: cst.CSTNode) -> Span:
        """Where ``node`` is in the formula's file."""
        return self.module.span(node)

    def diagnostic(self, where: cst.CSTNode | Span, code: str, message: str, fix: str | None = None) -> Diagnostic:
        """A diagnostic with this rule's ``code`` at ``where`` in the formula's file."""
        span = where if isinstance(where, Span) else self.span(where)
        return Diagnostic(self.path, span.line, span.col, code, message, fix)


def operator_table(known_operators: Collection[str]) -> frozenset[str]:
    """Every declared ``name.overload`` plus its base name."""
    names = set(known_operators)
    names.update(op.split(".", 1)[0] for op in known_operators)
    return frozenset(names)


def walk_own_body(function: cst.FunctionDef) -> Iterator[cst.CSTNode]:
    """The nodes of ``function``'s body, not entering nested functions, classes or lambdas."""
    body = function.body
    return (node for node in walk(body, _not_a_scope) if node is not body)


def _not_a_scope(node: cst.CSTNode) -> bool:
    return type(node) not in _SCOPES


_SCOPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})   # leaf classes: by ``type`` (the ABCs' ``isinstance`` is slow)


def root_name(node: cst.BaseExpression) -> cst.Name | None:
    """``x`` for ``x``, ``x[0]``, ``x.data``, ``x[0].real``..."""
    while isinstance(node, (cst.Subscript, cst.Attribute)):
        node = node.value
    return node if isinstance(node, cst.Name) else None
