"""Typed model of formula files, produced by the front-end (``transpiler.frontend``).

Frozen dataclasses only; libcst nodes are immutable, so the model may hold
them for the passes (lint rules, C++ emitter) that need the syntax tree.
"""
from __future__ import annotations

import enum
import functools
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain

import libcst as cst

from transpiler.dataflow import FlowResult
from transpiler.diagnostics import Diagnostic
from transpiler.schema import Argument, FunctionSchema


@dataclass(frozen=True, order=True)
class Span:
    """A source position, 1-based line and column."""

    line: int
    col: int


class Positions(Mapping[cst.CSTNode, Span]):
    """Where each node of one parsed file starts: its ``starts`` (1-based line, 0-based column, as
    libcst counts them), given as :class:`Span` (the column + 1).

    Pickled as its nodes and one array of their starts (``H`` when every number fits 16 bits):
    a tuple per node was a fifth of a stored model's bytes and as many memo entries (a model of the
    imported corpus, 14,000 nodes)."""

    def __init__(self, starts: dict[cst.CSTNode, tuple[int, int]]) -> None:
        self.starts = starts

    def __getitem__(self, node: cst.CSTNode) -> Span:
        line, column = self.starts[node]
        return Span(line, column + 1)

    def __iter__(self) -> Iterator[cst.CSTNode]:
        return iter(self.starts)

    def __len__(self) -> int:
        return len(self.starts)

    def add_copies(self, origins: Mapping[cst.CSTNode, cst.CSTNode]) -> None:
        """Give each new node of ``origins`` (a family member's, :mod:`transpiler.family`) the
        position of the node of the source it stands for."""
        starts = self.starts        # this reader's own: updated in place (a copy per formula was quadratic)
        starts.update({new: starts[old] for new, old in origins.items() if old in starts})

    def __reduce__(self) -> tuple[object, ...]:
        numbers = array("I", chain.from_iterable(self.starts.values()))
        if numbers and max(numbers) < 1 << 16:
            numbers = array("H", numbers)
        return _unpacked_positions, (list(self.starts), numbers.typecode, numbers.tobytes())


def _unpacked_positions(nodes: list[cst.CSTNode], typecode: str, packed: bytes) -> Positions:
    """The :class:`Positions` that :meth:`Positions.__reduce__` packed."""
    numbers = array(typecode)
    numbers.frombytes(packed)
    pairs = iter(numbers)
    return Positions(dict(zip(nodes, zip(pairs, pairs), strict=True)))


class CaptureKind(enum.Enum):
    """What a free name of a backward closure refers to in the forward."""

    INPUT = "input"          # a formula parameter the forward never rebinds (tensor or not)
    OUTPUT = "output"        # a name bound to one of the returned outputs
    METADATA = "metadata"    # non-tensor data: sizes, dims, numel, dtype, options, derived ints
    SCALAR = "scalar"        # a Python scalar not read from tensor values
    ILLEGAL = "illegal"      # a tensor intermediate, a rebound input, a value read from a tensor


@dataclass(frozen=True)
class Capture:
    """A name a closure (backward or jvp) reads from the forward's scope."""

    name: str
    kind: CaptureKind
    # First use inside the closure (where findings point); the jvp's ``jvp=`` for a synthesised jvp.
    first_use: Span
    definition: cst.BaseExpression | None  # the forward expression that binds it (None for inputs)
    reason: str = ""                     # for ILLEGAL: why (shown in the diagnostic)
    # The metadata methods (``METADATA_METHODS`` names, as called) through which the closure
    # reads the name, sorted; empty when it reads the name otherwise or not at all in its body
    # (the C++ emitter saves a tensor read only through these as plain members).
    metadata_methods: tuple[str, ...] = ()


@dataclass(frozen=True)
class CallSite:
    """A call, by name, in a closure's or helper's body (nested functions included)."""

    node: cst.Call
    # ``exp`` for ``at.exp(...)`` (an ATen operator); ``sum_to`` for ``sum_to(...)`` or
    # ``helpers.sum_to(...)`` (a function: a helper when the library has one of that name).
    name: str
    operator: bool                       # ``at.<name>``: an ATen operator


def returned_values(statement: cst.Return) -> tuple[cst.BaseExpression | None, ...]:
    """What one ``return`` of a closure gives back: the items of a tuple display, else the one
    value (None for a bare ``return``)."""
    value = statement.value
    if isinstance(value, cst.Tuple):
        return tuple(element.value for element in value.elements)
    return (value,)


class JvpRule(enum.Enum):
    """How a formula's forward-mode derivative is given (``@derivative(..., jvp=...)``)."""

    WRITTEN = "written"                      # a nested ``def jvp(...)`` (a backward is always written)
    AUTO_ELEMENT_WISE = "auto_element_wise"  # one input, element-wise: the backward applied to the tangent
    AUTO_LINEAR = "auto_linear"              # linear in every tensor input: the op applied to the tangents
    DERIVED = "derived"                      # the backward transposed (``transpiler.derive_jvp``)


class ClosureRole(enum.Enum):
    """Which of a formula's two closures a :class:`Closure` is; the rules word their messages from it."""

    # ``def backward(grad, ..., *, needs_input_grad)``: one gradient per differentiable output in,
    # one gradient per differentiable input out.
    BACKWARD = "backward"
    # ``def jvp(self_t, ..., self_p, ...)``: tangents ``<input>_t`` of differentiable inputs (undefined
    # tangents arrive as zeros) and, in the derivatives.yaml dialect, primals ``<input>_p`` and
    # ``original_self_t`` / ``original_self_p``; one tangent per differentiable output out (a tuple
    # when several, ``None`` for none).
    JVP = "jvp"

    @property
    def differentiated(self) -> str:
        """What a captured intermediate makes silently wrong (message wording)."""
        return "double backward through it" if self is ClosureRole.BACKWARD else "differentiating the tangent"

    @property
    def arguments(self) -> str:
        """What the closure is a function of, besides inputs and outputs (message wording)."""
        return "gradients" if self is ClosureRole.BACKWARD else "tangents"


@dataclass(frozen=True)
class Closure:
    """A formula's nested ``def backward(...)`` or ``def jvp(...)`` (written, or synthesised from the
    jvp rule), with what it reads from the forward. Both roles share the capture rules: a closure
    may read inputs, outputs, metadata and scalars of the forward, never a tensor intermediate."""

    role: ClosureRole
    node: cst.FunctionDef                # synthesised jvps (the auto rules, derived) have no source positions
    span: Span                           # the def, or the decorator's ``jvp=`` for a synthesised jvp
    # Its positional parameters without defaults, as written: ``("grad",)`` for a backward (one per
    # differentiable output), ``("self_t", "other_p")`` for a jvp. A backward parameter with a
    # default binds a forward value: a capture, not a parameter.
    params: tuple[str, ...]
    captures: tuple[Capture, ...]        # forward names it reads (parameter defaults included), by first use
    index: int | None                    # its position among the formula's body statements (None: synthesised)
    # Names its own body rebinds (assignment and loop targets, see ``dataflow.assigned_names``): a
    # parameter among them is taken by value in C++.
    rebound: frozenset[str]
    returns: tuple[cst.Return, ...]      # its own ``return`` statements (nested functions' left out)
    calls: tuple[CallSite, ...]          # the calls by name in its body, source order
    needs_input_grad: str | None = None  # a backward's keyword-only mask parameter, when declared
    rule: JvpRule = JvpRule.WRITTEN      # how a jvp is given (a backward: always WRITTEN)

    @property
    def name(self) -> str:
        """``backward`` or ``jvp``: how messages name the closure."""
        return self.role.value

    @property
    def tangents(self) -> dict[str, str]:
        """A jvp's tangent parameters -> the input whose tangent each is (``self_t`` -> ``self``)."""
        return {p: p[:-2] for p in self.params if p.endswith("_t")}


@dataclass(frozen=True)
class Formula:
    """A function decorated with ``@derivative(schema)``."""

    path: str
    function: str                         # the Python function's name
    span: Span
    schema: FunctionSchema
    schema_node: cst.BaseExpression       # the decorator's schema string (where schema findings point)
    # As written: ``output_differentiability=[True, False]`` -> (True, False); None when not given.
    output_differentiability: tuple[bool, ...] | None
    # Processed: the schema returns marked differentiable, as indices (``[True, False]`` -> (0,);
    # not given -> every return). Tensor-like or not: the C++ emitter refuses a non-tensor one.
    differentiable_outputs: tuple[int, ...]
    params: tuple[str, ...]
    differentiable_inputs: tuple[Argument, ...]   # Tensor, Tensor?, Tensor[] arguments, schema order
    outputs: tuple[str | None, ...]      # forward names returned as outputs (None: not a plain name)
    returned: tuple[cst.BaseExpression, ...]  # the returned output expressions, one per schema return
    returned_display: cst.BaseExpression  # the outputs as written: the expression, or the tuple/list display
    rebound_inputs: frozenset[str]        # parameters the forward binds again (they hold intermediates)
    forward: tuple[cst.BaseStatement, ...]  # body statements other than the backward def and the return
    # The dataflow over the forward (the body but the backward, the jvp and the final return),
    # from the file's own function annotations: final kinds, every binding of each name (their
    # ``index`` counts the formula's body statements, as ``Closure.index``), mutated containers.
    forward_flow: FlowResult = field(compare=False, repr=False)
    backward: Closure                    # role BACKWARD
    node: cst.FunctionDef
    jvp: Closure | None = None           # role JVP; None: forward AD raises torch's "not supported" error
    # ``jvp="derived"`` declared: the jvp is derived once the library's operators are known
    # (``frontend.load_library``); until then ``jvp`` is None.
    derives_jvp: bool = False
    # Why a written jvp was left out (per-formula mode, ``CODE message``): its error says so.
    jvp_left_out: str | None = None
    # The derivatives.yaml dispatch key an imported formula holds for, as written in
    # ``@yaml_entry(dispatch="AutogradNestedTensor")`` -> "AutogradNestedTensor"; None when not
    # declared (every tensor). ``dispatch_node`` is that decorator (where findings point).
    dispatch: str | None = None
    dispatch_node: cst.Decorator | None = None
    # The tensor inputs torch gives no gradient edge (an imported entry's ``non_differentiable``
    # and ``ignores_grad`` ones), and those whose requiring grad torch refuses in grad mode
    # (``refuses_grad``: "not differentiable with respect to argument"); Python names.
    inputs_without_gradient: tuple[str, ...] = ()
    inputs_refusing_grad: tuple[str, ...] = ()
    # The module-level names it reads (``dataflow.global_reads``: a parameter or a local of the
    # function reading it shadows one), called or passed as a value: its def's (forward, backward,
    # written jvp) and its synthesised jvp's. Which helpers it needs: a package's C++ carries a
    # copy of each helper it names (``cpp.emit.with_helpers_of``).
    references: frozenset[str] = frozenset()

    @functools.cached_property      # read about 10,000 times in a run on the imported corpus
    def op_name(self) -> str:
        """The operator's name, ``name.overload``."""
        return str(self.schema.name)

    @property
    def captures(self) -> tuple[Capture, ...]:
        """The backward's captures."""
        return self.backward.captures

    @property
    def closures(self) -> tuple[Closure, ...]:
        """The backward, then the jvp when there is one."""
        return (self.backward,) if self.jvp is None else (self.backward, self.jvp)

    @property
    def calls(self) -> tuple[CallSite, ...]:
        """The calls by name its closures make (the backward's, then the jvp's)."""
        return tuple(call for closure in self.closures for call in closure.calls)


@dataclass(frozen=True)
class HelperParam:
    """One parameter of a ``@helper``: its name, annotation and default as written."""

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
    rebound: frozenset[str]              # names its body rebinds, as ``Closure.rebound``
    calls: tuple[CallSite, ...]          # the calls by name in its body, as ``Closure.calls``
    references: frozenset[str]           # the module-level names its def reads, as ``Formula.references``


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
    # The hash of the path and text the module was parsed from (:func:`transpiler.frontend.parse_module`);
    # "" when it was read otherwise (a codemod's tree, a derived jvp): the key of its kept results
    # (:mod:`transpiler.module_results`), which are kept only for a module that has one.
    source_digest: str = field(default="", compare=False, repr=False)

    def span(self, node: cst.CSTNode) -> Span:
        """Where ``node`` starts (1-based line and column)."""
        return self.positions[node]


@dataclass(frozen=True)
class Library:
    """All modules of a formula directory, with the operator table they declare."""

    modules: tuple[FormulaModule, ...]

    @property
    def formulas(self) -> tuple[Formula, ...]:
        """Every formula of the library's modules."""
        return tuple(f for m in self.modules for f in m.formulas)

    @property
    def helpers(self) -> tuple[Helper, ...]:
        """Every helper of the library's modules."""
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
        """Every diagnostic of the library's modules."""
        return tuple(d for m in self.modules for d in m.diagnostics)
