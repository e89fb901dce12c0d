"""Typed model of formula files, produced by the front-end (``transpiler.frontend``).

Frozen dataclasses only; libcst nodes are immutable, so the model may hold
them for the passes (lint rules, C++ emitter) that need the syntax tree.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping

import libcst as cst

from transpiler.dataflow import FlowResult
from transpiler.diagnostics import Diagnostic
from transpiler.schema import Argument, FunctionSchema


@dataclass(frozen=True, order=True)
class Span:
    """A source position, 1-based line and column."""

    line: int
    col: int


class CaptureKind(enum.Enum):
    """What a free name of a backward closure refers to in the forward."""

    INPUT = "input"          # a formula parameter the forward never rebinds (tensor or not)
    OUTPUT = "output"        # a name bound to one of the returned outputs
    METADATA = "metadata"    # non-tensor data: sizes, dims, numel, dtype, options, derived ints
    SCALAR = "scalar"        # a Python scalar not read from tensor values
    ILLEGAL = "illegal"      # a tensor intermediate, a rebound input, a value read from a tensor


@dataclass(frozen=True)
class Capture:
    """A name the backward reads from the forward's scope."""

    name: str
    kind: CaptureKind
    first_use: Span                      # first use inside the backward (where findings point)
    definition: cst.BaseExpression | None  # the forward expression that binds it (None for inputs)
    reason: str = ""                     # for ILLEGAL: why (shown in the diagnostic)
    # The metadata methods (``METADATA_METHODS`` names, as called) through which the closure
    # reads the name, sorted; empty when it reads the name otherwise or not at all in its body
    # (the C++ emitter saves a tensor read only through these as plain members).
    metadata_methods: tuple[str, ...] = ()


def returned_values(statement: cst.Return) -> tuple[cst.BaseExpression | None, ...]:
    """What one ``return`` of a closure gives back: the items of a tuple display, else the one
    value (None for a bare ``return``)."""
    value = statement.value
    if isinstance(value, cst.Tuple):
        return tuple(element.value for element in value.elements)
    return (value,)


@dataclass(frozen=True)
class Backward:
    """The nested ``def backward(...)``."""

    node: cst.FunctionDef
    span: Span
    grad_params: tuple[str, ...]         # one per differentiable output
    needs_input_grad: str | None         # the keyword-only mask parameter, when declared
    index: int                           # its position among the formula's body statements
    # Names its own body rebinds (assignment and loop targets, see ``assigned_names``): a
    # parameter among them is taken by value in C++.
    rebound: frozenset[str]
    returns: tuple[cst.Return, ...]      # its own ``return`` statements (nested functions' left out)


class JvpRule(enum.Enum):
    """How a formula's forward-mode derivative is given (``@derivative(..., jvp=...)``)."""

    WRITTEN = "written"                      # a nested ``def jvp(...)``
    AUTO_ELEMENT_WISE = "auto_element_wise"  # one input, element-wise: the backward applied to the tangent
    AUTO_LINEAR = "auto_linear"              # linear in every tensor input: the op applied to the tangents
    DERIVED = "derived"                      # the backward transposed (``transpiler.derive_jvp``)


@dataclass(frozen=True)
class Jvp:
    """The forward-mode derivative: a nested ``def jvp(...)``, written or synthesised from the rule.

    Its parameters are tangents ``<input>_t`` of differentiable inputs (undefined
    tangents arrive as zeros) and, in the derivatives.yaml dialect, primals
    ``<input>_p`` and ``original_self_t`` / ``original_self_p``; it returns one tangent per differentiable output (a tuple when
    several, ``None`` for none) and may read what a backward may capture.
    """

    node: cst.FunctionDef                # synthesised for the auto rules (no source positions)
    span: Span                           # the def, or the decorator's ``jvp=`` for the auto rules
    params: tuple[str, ...]
    captures: tuple[Capture, ...]        # forward names the jvp reads, classified like a backward's
    rule: JvpRule
    index: int | None                    # its position among the formula's body statements (None: synthesised)
    rebound: frozenset[str]              # names its own body rebinds, as ``Backward.rebound``
    returns: tuple[cst.Return, ...]      # its own ``return`` statements (nested functions' left out)

    @property
    def tangents(self) -> dict[str, str]:
        """Parameter -> the input whose tangent it is (``self_t`` -> ``self``)."""
        return {p: p[:-2] for p in self.params if p.endswith("_t")}


@dataclass(frozen=True)
class Formula:
    """A function decorated with ``@derivative(schema)``."""

    path: str
    function: str                         # the Python function's name
    span: Span
    schema: FunctionSchema
    schema_node: cst.BaseExpression       # the decorator's schema string (where schema findings point)
    output_differentiability: tuple[bool, ...] | None
    params: tuple[str, ...]
    differentiable_inputs: tuple[Argument, ...]   # Tensor, Tensor?, Tensor[] arguments, schema order
    outputs: tuple[str | None, ...]      # forward names returned as outputs (None: not a plain name)
    returned: tuple[cst.BaseExpression, ...]  # the returned output expressions, one per schema return
    returned_display: cst.BaseExpression  # the outputs as written: the expression, or the tuple/list display
    rebound_inputs: frozenset[str]        # parameters the forward binds again (they hold intermediates)
    forward: tuple[cst.BaseStatement, ...]  # body statements other than the backward def and the return
    # The dataflow over the forward (the body but the backward, the jvp and the final return),
    # from the file's own function annotations: final kinds, every binding of each name (their
    # ``index`` counts the formula's body statements, as ``Backward.index``), mutated containers.
    forward_flow: FlowResult = field(compare=False, repr=False)
    backward: Backward
    captures: tuple[Capture, ...]
    node: cst.FunctionDef
    jvp: Jvp | None = None               # None: forward AD raises torch's "not supported" error
    # ``jvp="derived"`` declared: the jvp is derived once the library's operators are known
    # (``frontend.load_library``); until then ``jvp`` is None.
    derives_jvp: bool = False
    # Why a written jvp was left out (per-formula mode, ``CODE message``): its error says so.
    jvp_left_out: str | None = None

    @property
    def op_name(self) -> str:
        return str(self.schema.name)


@dataclass(frozen=True)
class HelperParam:
    name: str
    annotation: str | None               # annotation source text (``Tensor``, ``list[int]``...)
    default: cst.BaseExpression | None


@dataclass(frozen=True)
class Helper:
    """A function decorated with ``@helper``."""

    path: str
    name: str
    span: Span
    params: tuple[HelperParam, ...]
    returns: str | None                  # return annotation source text
    node: cst.FunctionDef
    rebound: frozenset[str]              # names its body rebinds, as ``Backward.rebound``


@dataclass(frozen=True)
class FormulaModule:
    """Everything the front-end found in one file."""

    path: str
    formulas: tuple[Formula, ...]
    helpers: tuple[Helper, ...]
    nondifferentiable: tuple[FunctionSchema, ...]
    diagnostics: tuple[Diagnostic, ...]   # DB000 / DB107 found while building the model
    # Start position of every syntax node of the file (for passes that report on nodes).
    positions: Mapping[cst.CSTNode, Span] = field(default_factory=dict, compare=False, repr=False)
    # Return annotation text of every top-level function (helpers or not), None when absent.
    function_returns: Mapping[str, str | None] = field(default_factory=dict, compare=False, repr=False)

    def span(self, node: cst.CSTNode) -> Span:
        """Where ``node`` starts (1-based line and column)."""
        return self.positions[node]


@dataclass(frozen=True)
class Library:
    """All modules of a formula directory, with the operator table they declare."""

    modules: tuple[FormulaModule, ...]

    @property
    def formulas(self) -> tuple[Formula, ...]:
        return tuple(f for m in self.modules for f in m.formulas)

    @property
    def helpers(self) -> tuple[Helper, ...]:
        return tuple(h for m in self.modules for h in m.helpers)

    @property
    def operators(self) -> dict[str, FunctionSchema]:
        """Every declared operator (``name.overload`` -> schema): formulas and non-differentiable ops."""
        table = {f.op_name: f.schema for f in self.formulas}
        for module in self.modules:
            table.update({str(s.name): s for s in module.nondifferentiable})
        return table

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        return tuple(d for m in self.modules for d in m.diagnostics)
