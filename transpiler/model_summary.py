"""A formula module's summary: the part of its model the rest of a run reads, loaded without its syntax.

A run after an edit of one file recomputes that file's results and takes every
other module's from :mod:`transpiler.module_results`; what it still reads of an
unchanged module is small: its operators (schemas), the facts that key its
kept results (each formula's name, line, whether it has a jvp), its helpers'
signatures (the emitter declares them; their bodies are read only when lint follows
a call into one, or a helper is emitted again), the module-level names each formula
and helper reads (which of the shipped helpers another package's C++ copies) and the
lines per-formula mode attributes diagnostics by. A :class:`ModuleSummary` holds exactly that, pickled
beside the full model by :mod:`transpiler.model_cache`; loading it is a small
fraction of loading the module's syntax trees.

:meth:`ModuleSummary.deferred` turns it back into a
:class:`~transpiler.model.FormulaModule` whose formulas are deferred: the
summary's fields are set, and the first read of any other field (a syntax
node, the dataflow, a closure's captures) loads the full model through
``load`` and takes that field from it. So every consumer reads the model it
always read and a computation that needs the syntax gets the very nodes the
full model holds (its positions included): a summary can make a run slower,
never different. The positions of the nodes a summary holds (the schema
strings, the helpers' parameter defaults) travel with it. A helper is deferred
the same way, but its body (its ``def`` and the calls in it) is pickled on its
own inside the summary, with the positions of its nodes
(:func:`transpiler.syntax_pickle.dumps_located`: the nodes the pickler met, no walk of
the tree), and loaded alone on first read: following a call into ``sum_to`` loads
``sum_to``, not the 2,000-line module that defines it.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import libcst as cst

from transpiler.dataflow import is_node_type
from transpiler.diagnostics import Diagnostic
from transpiler.model import Closure, Formula, FormulaModule, Helper, HelperParam, Positions, Span
from transpiler.schema import FunctionSchema

# The fields a summary keeps: plain data and the schema string (where the duplicate-operator and
# schema findings point), no other syntax. Every other field is deferred.
FORMULA_FIELDS = ("path", "function", "span", "schema", "schema_node", "output_differentiability",
                  "differentiable_outputs",
                  "params", "differentiable_inputs", "outputs", "rebound_inputs", "derives_jvp", "jvp_left_out",
                  "dispatch", "references")
CLOSURE_FIELDS = ("role", "span", "params", "index", "rebound", "needs_input_grad", "rule")
CLOSURES = ("backward", "jvp")   # a formula's closures: deferred themselves, so ``formula.jvp is None`` is cheap
# A helper's signature and the names it reads, kept; its body (``node``, ``calls``) is the part pickled on its own.
HELPER_FIELDS = ("path", "name", "span", "params", "returns", "rebound", "references")


@dataclass(frozen=True)
class EntryLines:
    """Where per-formula mode places a formula (:class:`transpiler.cpp.per_formula.Entries`)."""

    first: int                   # the def's first line, decorators included
    jvp: range | None            # the lines of a written jvp (up to the final return); None: none written


@dataclass(frozen=True)
class ClosureSummary:
    """A closure without its syntax."""

    values: tuple[object, ...]   # the :data:`CLOSURE_FIELDS`, in order


@dataclass(frozen=True)
class FormulaSummary:
    """A formula without its syntax (but its schema string), and where per-formula mode places it."""

    values: tuple[object, ...]   # the :data:`FORMULA_FIELDS`, in order
    backward: ClosureSummary
    jvp: ClosureSummary | None
    lines: EntryLines

    @property
    def schema_node(self) -> cst.BaseExpression:
        """The schema string's expression in the decorator (libcst), for spans."""
        return self.values[FORMULA_FIELDS.index("schema_node")]


@dataclass(frozen=True)
class HelperSummary:
    """A helper's signature, and its body pickled on its own (loaded on first read)."""

    values: tuple[object, ...]   # the :data:`HELPER_FIELDS`, in order
    first_line: int              # the def's first line, decorators included (per-formula mode's key)
    body: bytes                  # (node, calls) and the starts of their nodes (:func:`~transpiler.syntax_pickle.dumps_located`)

    @property
    def params(self) -> tuple[HelperParam, ...]:
        """The helper's parameters."""
        return self.values[HELPER_FIELDS.index("params")]


@dataclass(frozen=True)
class ModuleSummary:
    """What a run reads of a module whose results are kept (the module docstring says why)."""

    path: str
    source_digest: str
    formulas: tuple[FormulaSummary, ...]
    helpers: tuple[HelperSummary, ...]
    nondifferentiable: tuple[FunctionSchema, ...]
    diagnostics: tuple[Diagnostic, ...]
    function_returns: Mapping[str, str | None]
    # Where each node it holds starts (schema strings, helpers' defaults: :meth:`held`), as
    # :attr:`transpiler.model.Positions.starts` (the nodes pickled with the summary: memo references).
    starts: Mapping[cst.CSTNode, tuple[int, int]]

    def held(self) -> Iterator[cst.CSTNode]:
        """The syntax nodes the summary holds outside the helpers' bodies: each formula's schema
        string, every node of the helpers' parameter defaults."""
        yield from (f.schema_node for f in self.formulas)
        for helper in self.helpers:
            for param in helper.params:
                if param.default is not None:
                    yield from _subtree(param.default)

    def deferred(self, load: Callable[[], FormulaModule]) -> FormulaModule:
        """The module, its formulas deferred: the first read of a field the summary lacks calls
        ``load`` (memoise it: it is called once per such read) for the full model; a helper's body
        is loaded from the summary on its first read."""
        formulas = tuple(_deferred_formula(summary, index, load) for index, summary in enumerate(self.formulas))
        positions = DeferredPositions(self, load)
        helpers = tuple(_deferred_helper(summary, positions) for summary in self.helpers)
        return FormulaModule(self.path, formulas, helpers, self.nondifferentiable, self.diagnostics,
                             positions=positions, function_returns=self.function_returns,
                             source_digest=self.source_digest)


def summarize(module: FormulaModule) -> ModuleSummary:
    """The summary of a full model (not of a deferred one: its nodes would be loaded)."""
    from transpiler.syntax_pickle import dumps_located

    positions = _positions(module.positions)

    def closure(found: Closure | None) -> ClosureSummary | None:
        return None if found is None else ClosureSummary(tuple(getattr(found, f) for f in CLOSURE_FIELDS))

    def helper(found: Helper) -> HelperSummary:
        return HelperSummary(tuple(getattr(found, f) for f in HELPER_FIELDS), first_line(module, found.node),
                             dumps_located((found.node, found.calls), positions))

    formulas = tuple(FormulaSummary(tuple(getattr(f, name) for name in FORMULA_FIELDS), closure(f.backward),
                                    closure(f.jvp), entry_lines(module, f)) for f in module.formulas)
    summary = ModuleSummary(module.path, module.source_digest, formulas, tuple(map(helper, module.helpers)),
                            module.nondifferentiable, module.diagnostics, dict(module.function_returns), {})
    starts = positions.starts
    return dataclasses.replace(summary, starts={node: starts[node] for node in summary.held() if node in starts})


def _positions(positions: Mapping[cst.CSTNode, Span]) -> Positions:
    """``positions`` as :class:`~transpiler.model.Positions` (what a parsed model holds already)."""
    if isinstance(positions, Positions):
        return positions
    return Positions({node: (span.line, span.col - 1) for node, span in positions.items()})


def entry_lines(module: FormulaModule, formula: Formula) -> EntryLines:
    """Where ``formula`` of ``module`` starts and its written jvp lies; a deferred formula carries
    them from its summary."""
    lines = formula.__dict__.get("lines") if isinstance(formula, DeferredFormula) else None
    if lines is not None:
        return lines if formula.jvp is not None else EntryLines(lines.first, None)
    jvp = None
    if formula.jvp is not None and formula.jvp.index is not None:
        after = formula.node.body.body[formula.jvp.index + 1]   # the final return follows it
        jvp = range(module.span(formula.jvp.node).line, module.span(after).line)
    return EntryLines(first_line(module, formula.node), jvp)


def helper_first_line(module: FormulaModule, helper: Helper) -> int:
    """The first line of ``helper``'s ``def``, decorators included; a deferred helper carries it."""
    kept = helper.__dict__.get("first_line") if isinstance(helper, DeferredHelper) else None
    return kept if kept is not None else first_line(module, helper.node)


def first_line(module: FormulaModule, node: cst.FunctionDef) -> int:
    """The first line of a decorated ``def``."""
    return min([module.span(d).line for d in node.decorators] + [module.span(node).line])


def with_changes(formula: Formula, **changes: object) -> Formula:
    """``dataclasses.replace(formula, **changes)``, without loading a deferred formula."""
    if not isinstance(formula, DeferredFormula):
        return dataclasses.replace(formula, **changes)
    changed = object.__new__(DeferredFormula)
    changed.__dict__.update(formula.__dict__)
    changed.__dict__.pop("op_name", None)       # a cached property, made again from the fields
    changed.__dict__.update(changes)
    return changed


def _subtree(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and every node under it, whitespace and punctuation included, in a fixed order
    (read from the fields: libcst's ``children`` runs a visitor per node, several times slower)."""
    pending = [node]
    while pending:
        current = pending.pop()
        yield current
        names = _node_fields.get(type(current))
        if names is None:
            names = _node_fields[type(current)] = tuple(field.name for field in dataclasses.fields(current))
        for name in names:
            value = getattr(current, name)
            if type(value) in (list, tuple):
                pending.extend(item for item in value if is_node_type(type(item)))
            elif is_node_type(type(value)):
                pending.append(value)


_node_fields: dict[type, tuple[str, ...]] = {}      # a node class -> its field names


class _Deferred:
    """Fields missing from ``__dict__`` are taken, on first read, from the full object ``_full()``."""

    _kept: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        """A field with a default is a class attribute of the dataclass, which a read of an object
        lacking it would find (the default, not the full object's value): each such field not kept
        is a :class:`_Loaded` here, so that its read loads it as any other field's does."""
        super().__init_subclass__(**kwargs)
        for found in dataclasses.fields(cls._plain):
            if found.name not in cls._kept and found.default is not dataclasses.MISSING:
                setattr(cls, found.name, _Loaded(found.name))

    def __getattr__(self, name: str) -> object:   # called only for attributes not set
        full = self.__dict__.get("_full")
        if full is None or name.startswith("__") or name in self._kept or name in ("lines", "first_line"):
            raise AttributeError(name)
        found = full()
        for field in dataclasses.fields(found):
            self.__dict__.setdefault(field.name, getattr(found, field.name))
        return self.__dict__[name]

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled (or copied) as the full object it stands for."""
        plain = self._plain
        return _rebuild, (plain, {f.name: getattr(self, f.name) for f in dataclasses.fields(plain)})


class _Loaded:
    """A field with a default of a deferred object, not kept: read, it is taken from the full object
    (the value is then in the object's ``__dict__``, which a later read finds first)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, instance: _Deferred | None, owner: type | None = None) -> object:
        return self if instance is None else instance.__getattr__(self.name)


def _rebuild(kind: type, values: dict[str, object]) -> object:
    return kind(**values)


class DeferredFormula(_Deferred, Formula):
    """A :class:`~transpiler.model.Formula` read from a summary (:meth:`ModuleSummary.deferred`)."""

    _kept = FORMULA_FIELDS + CLOSURES
    _plain = Formula


class DeferredClosure(_Deferred, Closure):
    """A :class:`~transpiler.model.Closure` read from a summary."""

    _kept = CLOSURE_FIELDS
    _plain = Closure


class DeferredHelper(_Deferred, Helper):
    """A :class:`~transpiler.model.Helper` read from a summary: its body is loaded on first read."""

    _kept = HELPER_FIELDS
    _plain = Helper


def _deferred_helper(summary: HelperSummary, positions: DeferredPositions) -> Helper:
    def body() -> Helper:
        from transpiler.syntax_pickle import loads_located

        (node, calls), starts = loads_located(summary.body)
        positions.add(starts.starts)
        return Helper(**dict(zip(HELPER_FIELDS, summary.values)), node=node, calls=calls)

    helper = object.__new__(DeferredHelper)
    helper.__dict__.update(zip(HELPER_FIELDS, summary.values), first_line=summary.first_line,
                           _full=functools.cache(body))
    return helper


def _deferred_formula(summary: FormulaSummary, index: int, load: Callable[[], FormulaModule]) -> Formula:
    formula = object.__new__(DeferredFormula)
    formula.__dict__.update(zip(FORMULA_FIELDS, summary.values), lines=summary.lines,
                            _full=lambda: load().formulas[index])
    for role, found in zip(CLOSURES, (summary.backward, summary.jvp)):
        formula.__dict__[role] = None if found is None else _deferred_closure(found, index, role, load)
    return formula


def _deferred_closure(summary: ClosureSummary, index: int, role: str, load: Callable[[], FormulaModule]) -> Closure:
    closure = object.__new__(DeferredClosure)
    closure.__dict__.update(zip(CLOSURE_FIELDS, summary.values), _full=lambda: getattr(load().formulas[index], role))
    return closure


class DeferredPositions(Mapping[cst.CSTNode, Span]):
    """A deferred module's positions: of the nodes its summary holds from the summary, of a helper's
    body from that body's own part (once loaded), the rest from the full model."""

    def __init__(self, summary: ModuleSummary, load: Callable[[], FormulaModule]) -> None:
        self._load = load
        self._known = Positions(dict(summary.starts))   # the summary's nodes, and those of the bodies loaded

    def add(self, starts: Mapping[cst.CSTNode, tuple[int, int]]) -> None:
        """The positions of a helper's body, loaded from its part of the summary."""
        self._known.starts.update(starts)

    def __getitem__(self, node: cst.CSTNode) -> Span:
        if node in self._known.starts:
            return self._known[node]
        return self._load().positions[node]

    def __iter__(self) -> Iterator[cst.CSTNode]:
        yield from self._known
        yield from self._load().positions

    def __len__(self) -> int:
        return len(self._known) + len(self._load().positions)
