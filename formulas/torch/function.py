"""One formula run inside torch's autograd: :class:`TorchFormula` and its ``autograd.Function``.

:class:`TorchFormula` binds a call's arguments to the formula, runs its
forward below autograd with :class:`~formulas.torch.backend.TorchBackend` as
``at``, and plans what the backward closure captures. :meth:`TorchFormula.function`
is the formula as a ``torch.autograd.Function`` (named ``<Op>Formula``, so the
node's name is ``<Op>FormulaBackward``) with ``setup_context``: its forward
runs the formula once (or, for a custom op, redispatches to the kernel that
does) and plans the closure against the positions of the inputs and outputs;
``setup_context`` saves exactly those with ``ctx.save_for_backward`` and keeps
metadata as plain values; its backward rebuilds the closure with the saved
tensors (which carry the graph) in place of the forward's, so a
``create_graph=True`` backward differentiates the formula itself; its jvp runs
the formula's. The override (:mod:`formulas.torch.override`) and the custom ops
(:mod:`formulas.torch.custom_ops`) both run formulas through this module, as
operators' autograd kernels (see :attr:`TorchFormula.apply`).
"""
from __future__ import annotations

import ast
import functools
import inspect
import re
import sys
import types
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Sequence

import torch
from torch._C._functorch import unwrap_if_dead
from torch._functorch.utils import enable_single_level_autograd_function

from formulas.dsl import DeclaredFormula, use_backend
from formulas.dsl import _backend as _installed_backend    # just an optimization of use_backend, below
from formulas.helper_overloads import HelperOverloads, overloads_of
from formulas.torch.backend import HELPER_VALUES, SCALAR_TYPES, OracleTensor, TorchBackend, unwrap, wrap
from reference_engine.scalars import scalar_value
from transpiler.schema import BaseType, FunctionSchema, ListType, OptionalType, Type, parse_schema

if TYPE_CHECKING:
    from formulas.torch.generate import Generated
    from transpiler.formula_facts import FormulaFacts


class CapturedIntermediate(RuntimeError):
    """A backward closure holds a tensor that is neither an input nor an output of its forward."""


class NoForwardAD(NotImplementedError):
    """The formula has no jvp; raised, as torch raises it, when a tangent reaches the operator."""


@dataclass(frozen=True)
class SavedSlot:
    """Stands in a closure plan for the ``index``-th tensor saved with ``save_for_backward``."""

    index: int


class _SlotTable(dict):
    """``_SLOTS[i]`` is ``SavedSlot(i)``, made once: just an optimization (a frozen dataclass is
    slow to make, and every call of a formula marks its tensors)."""

    def __missing__(self, index: int) -> SavedSlot:
        slot = self[index] = SavedSlot(index)
        return slot


_SLOTS = _SlotTable()


@dataclass(frozen=True)
class HoldingSaved:
    """Stands in a closure plan for a captured list or tuple that holds tensors: ``value`` with
    :class:`SavedSlot` in their places."""

    value: list[Any] | tuple[Any, ...]


class ClosurePlan(NamedTuple):
    """A backward (or jvp) closure with its captured tensors taken out: ``cells`` hold the
    captured values with every tensor replaced by a :class:`SavedSlot` (in a list or tuple: by
    a :class:`HoldingSaved`)."""

    code: types.CodeType
    globals: dict[str, Any]
    defaults: tuple[Any, ...] | None
    kwdefaults: dict[str, Any] | None
    cells: tuple[Any, ...]

    def rebuild(self, saved: Sequence[torch.Tensor]) -> Callable[..., Any]:
        """The closure again, each :class:`SavedSlot` now the saved tensor it stands for."""
        cells = []
        for value in self.cells:
            if type(value) is SavedSlot:
                value = OracleTensor(saved[value.index])
            elif type(value) is HoldingSaved:
                value = _filled(value.value, saved)
            cells.append(types.CellType(value))
        rebuilt = types.FunctionType(self.code, self.globals, self.code.co_name, self.defaults, tuple(cells))
        if self.kwdefaults is not None:
            rebuilt.__kwdefaults__ = self.kwdefaults
        return rebuilt


def _holds_tensor(values: list[Any] | tuple[Any, ...]) -> bool:
    """Whether a list or tuple holds a formula's tensor (also in a list inside it)."""
    for value in values:
        if isinstance(value, OracleTensor) or isinstance(value, (list, tuple)) and _holds_tensor(value):
            return True
    return False


def _filled(value: Any, saved: Sequence[torch.Tensor]) -> Any:
    """``value`` (a captured list or tuple) with each :class:`SavedSlot` the saved tensor it stands for."""
    if isinstance(value, SavedSlot):
        return OracleTensor(saved[value.index])
    if isinstance(value, (list, tuple)):
        return type(value)(_filled(v, saved) for v in value)
    return value


def plan_closure(closure: Callable[..., Any], candidates: Sequence[torch.Tensor],
                 op_name: str) -> tuple[ClosurePlan, tuple[int, ...]]:
    """The plan of ``closure`` and what to save: the positions in ``candidates`` (the forward's
    inputs and outputs) of the tensors it captures, each once. Any other captured tensor is a
    :class:`CapturedIntermediate`. Positions, not the tensors themselves, so that the tensors
    saved may be other objects standing for the same values (``setup_context``'s, which
    torch.func transforms wrap, where the forward saw them unwrapped)."""
    to_save: dict[int, int] = {}
    code = closure.__code__
    cells = []
    for index, cell in enumerate(closure.__closure__ or ()):
        value = cell.cell_contents
        if type(value) is OracleTensor:     # just an optimization of _slot's first case, the common one
            tensor = value.tensor
            for position, candidate in enumerate(candidates):
                if candidate is tensor:
                    break
            else:
                raise _captured_intermediate(closure, code.co_freevars[index], op_name)
            value = _SLOTS[to_save.setdefault(position, len(to_save))]
        elif isinstance(value, (list, tuple)) and not SCALAR_TYPES.issuperset(map(type, value)) \
                and _holds_tensor(value):
            position_of = dict(zip(map(id, candidates), range(len(candidates))))
            value = HoldingSaved(_slot(value, position_of, to_save, closure, code.co_freevars[index], op_name))
        cells.append(value)     # anything else as it is, as a Python closure shares it
    # tuple.__new__: a NamedTuple made without its Python __new__ (just an optimization)
    plan = tuple.__new__(ClosurePlan, (code, closure.__globals__, closure.__defaults__, closure.__kwdefaults__,
                                       tuple(cells)))
    return plan, tuple(to_save)


def _slot(value: Any, position_of: dict[int, int], to_save: dict[int, int], closure: Callable[..., Any],
          name: str, op_name: str) -> Any:
    """``value`` (captured as ``name``) with each tensor a :class:`SavedSlot`, its position (in
    ``position_of``) added to ``to_save``; an intermediate is a :class:`CapturedIntermediate`."""
    if isinstance(value, OracleTensor):
        position = position_of.get(id(value.tensor))
        if position is None:
            raise _captured_intermediate(closure, name, op_name)
        return _SLOTS[to_save.setdefault(position, len(to_save))]
    if isinstance(value, (list, tuple)):
        return type(value)(_slot(v, position_of, to_save, closure, name, op_name) for v in value)
    return value


def _captured_intermediate(closure: Callable[..., Any], name: str, op_name: str) -> CapturedIntermediate:
    return CapturedIntermediate(
        f"the {closure.__name__} of {op_name} captures `{name}`, a tensor that is neither an input "
        "nor an output of its forward: double backward through it would be silently wrong; "
        "`transpile lint` reports it as DB100")


class FlatArguments(NamedTuple):
    """A call's arguments (one value per schema argument) with every tensor taken out into
    ``tensors``; ``template`` holds :class:`SavedSlot` markers in their places. ``positions``:
    where the markers are, when every one is an argument of its own (no list of tensors)."""

    template: tuple[Any, ...]
    tensors: tuple[torch.Tensor, ...]
    positions: tuple[int, ...] | None = None

    @classmethod
    def of(cls, values: Sequence[Any]) -> FlatArguments:
        """Split ``values`` into a template with a slot for each tensor (nested lists included) and the
        tensors."""
        tensors: list[torch.Tensor] = []

        def take(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                tensors.append(value)
                return _SLOTS[len(tensors) - 1]
            if isinstance(value, (list, tuple)):
                return type(value)(take(v) for v in value)
            return value

        template = tuple(take(v) for v in values)
        return cls(template, tuple(tensors))

    @classmethod
    def of_single(cls, values: Sequence[Any], slots: Sequence[int]) -> FlatArguments:
        """:meth:`of` where the tensors can only be the arguments at ``slots`` (a schema without a
        list of tensors, see :attr:`TorchFormula.single_slots`): just an optimization."""
        template = list(values)
        tensors: list[torch.Tensor] = []
        positions: list[int] = []
        for i in slots:
            if isinstance(values[i], torch.Tensor):
                template[i] = _SLOTS[len(tensors)]
                tensors.append(values[i])
                positions.append(i)
        return tuple.__new__(cls, (tuple(template), tuple(tensors), tuple(positions)))   # see plan_closure

    def values(self, tensors: Sequence[Any]) -> list[Any]:
        """The arguments with ``tensors`` in the places of the taken-out ones."""
        if self.positions is None:
            return place(self.template, tensors)
        values = list(self.template)
        for i, tensor in zip(self.positions, tensors):
            values[i] = tensor
        return values


def place(template: Sequence[Any], items: Sequence[Any]) -> list[Any]:
    """``template`` with ``items[i]`` in the place of each ``SavedSlot(i)`` (in lists too)."""
    def put(value: Any) -> Any:
        if isinstance(value, SavedSlot):
            return items[value.index]
        if isinstance(value, (list, tuple)):
            return type(value)(put(v) for v in value)
        return value

    return [put(v) for v in template]


def _overloaded(name: str, helpers: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
    """The helper ``name``, or where it has overloads ``name__variant``, all of them (:class:`HelperOverloads`)."""
    overloads = overloads_of(name, helpers)
    return helpers[name] if len(overloads) == 1 else HelperOverloads(name, overloads, HELPER_VALUES)


def _base_name(ty: Type) -> str | None:
    """The name of ``ty`` (``Scalar`` for ``Scalar`` and ``Scalar?``), or None for a list."""
    if isinstance(ty, OptionalType):
        ty = ty.elem
    return ty.name if isinstance(ty, BaseType) else None


#: The C++ methods derivatives.yaml calls on non-tensor arguments, as Python spells them on the
#: argument's Python value (``{0}``): ``std::optional``'s on an optional one (None or the value:
#: ``rounding_mode.has_value() ? ... : ...``) and ``at::IntArrayRef``'s on a list (``dim.back()``).
CPP_VALUE_METHODS = {
    "optional": {"has_value": "({0} is not None)", "value": "{0}"},
    "list": {"back": "{0}[-1]", "front": "{0}[0]", "size": "len({0})", "vec": "list({0})", "empty": "(len({0}) == 0)"},
}


def _cpp_methods_read(schema: FunctionSchema) -> dict[str, dict[str, str]]:
    """The non-tensor arguments of ``schema`` with the :data:`CPP_VALUE_METHODS` their value has:
    an optional's, a list's, both for an optional list."""
    methods: dict[str, dict[str, str]] = {}
    for arg in schema.arguments:
        if arg.is_tensor_like:
            continue
        ty = arg.type.elem if isinstance(arg.type, OptionalType) else arg.type
        kinds = (("optional",) if isinstance(arg.type, OptionalType) else ()) + (("list",) if isinstance(ty, ListType) else ())
        if kinds:
            methods[arg.name] = {m: py for kind in kinds for m, py in CPP_VALUE_METHODS[kind].items()}
    return methods


def _cpp_methods_spelled(source: str, methods: dict[str, dict[str, str]]) -> str:
    """``source`` with the C++ methods ``methods`` (:func:`_cpp_methods_read`) called on those
    arguments written in Python (``dim.back()`` is ``dim[-1]``)."""
    for name, spellings in methods.items():
        for method, python in spellings.items():
            source = re.sub(rf"\b{name}\.{method}\(\)", lambda _, python=python: python.format(name), source)
    return source


def _names_read(code: types.CodeType) -> set[str]:
    """The names ``code`` and the functions nested in it use (attributes, globals, locals)."""
    names = {*code.co_names, *code.co_varnames, *code.co_freevars, *code.co_cellvars}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_read(const)
    return names


#: The C++ classes an imported formula reads as namespaces (its dialect's ``GradMode``) that run on
#: torch: ``GradMode.is_enabled()`` is whether the backward records a graph (``create_graph=True``).
_TORCH_NAMESPACES = {"GradMode": types.SimpleNamespace(is_enabled=torch.is_grad_enabled)}


#: Schema defaults that are names, not Python literals (``Mean`` is ``at::Reduction::Mean``).
_SYMBOLIC_DEFAULTS = {"contiguous_format": torch.contiguous_format, "Mean": 1}


class TorchFormula:
    """A declared formula ready to run on torch tensors with ``backend`` as ``at``."""

    def __init__(self, declared: DeclaredFormula, backend: TorchBackend) -> None:
        self.declared = declared
        self.op_name = declared.op_name
        self.backend = backend
        self.signature = inspect.signature(declared.fn)
        self.names = tuple(self.signature.parameters)
        self.keyword_only = sum(p.kind is p.KEYWORD_ONLY for p in self.signature.parameters.values())
        self.positions = {name: i for i, name in enumerate(self.names)}
        self.defaults = tuple(p.default if p.default is not p.empty else self._schema_default(name, p.empty)
                              for name, p in self.signature.parameters.items())
        self.first_keyword = len(self.names) - self.keyword_only
        #: how many leading parameters a call must give (the others have defaults)
        self.required = max((i + 1 for i, d in enumerate(self.defaults) if d is inspect.Parameter.empty), default=0)

    def prepare(self) -> TorchFormula:
        """Work out now what every call needs (schema, slots, the Function), so that no call
        does: an override or a custom op prepares its formulas when it is installed."""
        for name in ("fn", "apply", "plain_apply", "gradient_slots", "single_slots",
                     "single_tensor_slots", "full_layout", "list_output", "output_flags", "all_differentiable"):
            getattr(self, name)
        return self

    def _schema_default(self, name: str, none: Any) -> Any:
        """The schema's default of argument ``name`` (``none`` where it has none): a formula may
        leave the defaults to its schema (the imported corpus does), and torch's Python kernel
        is not handed a keyword argument left at its default."""
        # a schema argument named as a Python keyword (``from``) is the formula's ``from_``
        argument = next((a for a in self.schema.arguments if a.name == name or f"{a.name}_" == name), None)
        text = None if argument is None else argument.default
        if text is None:
            return none
        if text in _SYMBOLIC_DEFAULTS:
            return _SYMBOLIC_DEFAULTS[text]
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text
        if isinstance(argument.type, ListType) and argument.type.size and isinstance(value, int):
            return [value] * argument.type.size     # ``int[2] padding=0`` is [0, 0]: torch's ops take no int there
        return value

    @cached_property
    def schema(self) -> FunctionSchema:
        """The parsed schema the formula declares."""
        return parse_schema(self.declared.schema)

    @cached_property
    def gradient_slots(self) -> tuple[int, ...]:
        """Positions (in :attr:`names`) of the arguments a backward returns a gradient for."""
        return tuple(self.names.index(arg.name) for arg in self.schema.tensor_inputs)

    @cached_property
    def list_output(self) -> bool:
        """Whether the schema returns one ``Tensor[]`` (split, unbind): every part is an output."""
        return len(self.schema.returns) == 1 and isinstance(self.schema.returns[0].type, ListType)

    @cached_property
    def output_flags(self) -> tuple[bool, ...]:
        """Differentiability of each schema output."""
        return self.schema.output_flags(self.declared.output_differentiability)

    @cached_property
    def view_of(self) -> int | None:
        """The position (in :attr:`names`) of the input the output is a view of (``Tensor(a) self ->
        Tensor(a)``), None where no output is a view."""
        aliases = {alias for r in self.schema.returns if r.annotation is not None and not r.annotation.is_write
                   for alias in r.annotation.alias_set}
        return next((self.positions[arg.name] for arg in self.schema.arguments if arg.annotation is not None
                     and aliases.intersection(arg.annotation.alias_set)), None)

    @cached_property
    def all_differentiable(self) -> bool:
        """Whether every output is differentiable (a ``Tensor[]`` output is)."""
        return self.list_output or all(self.output_flags)

    @cached_property
    def facts(self) -> FormulaFacts:
        """The front-end's facts about the formula (how it gives its jvp), read once per file."""
        from transpiler.formula_facts import facts_of     # the engine's reader of them, on first use

        return facts_of(self.declared)

    @cached_property
    def has_jvp(self) -> bool:
        """Whether the formula has a jvp it can run: a nested ``def jvp`` (not :attr:`jvp_left_out`),
        a ``jvp=`` rule or a derived one."""
        return self.facts.jvp is not None and self.jvp_left_out is None

    @cached_property
    def jvp_left_out(self) -> str | None:
        """Why the formula's nested jvp cannot run on torch, or None: it calls a C++ function it only
        declares with no ``@helper`` of that name (an imported corpus's FunctionsManual jvp), or an
        ``at.<op>`` the back end does not declare. Forward mode then raises torch's error, as the
        C++ emitter leaves such a jvp out (DB201)."""
        facts = self.facts
        if facts.jvp != "written":
            return None
        from formulas.dsl import HELPERS
        from transpiler.formula_facts import formula_model
        from transpiler.module_globals import module_globals_read     # the model's syntax: forward mode only

        fn = self.declared.fn
        model = formula_model(self.declared)
        jvp = model.jvp       # a written jvp: the front-end's model of the nested ``def jvp``
        # only a formula in the corpus's dialect declares C++ names: its module imported the dialect
        dialect = sys.modules.get("transpiler.yaml_import.dialect")
        cpp_only = dialect and sorted(name for name in module_globals_read(jvp.node, model.node)
                                      if name not in HELPERS and
                                      isinstance(fn.__globals__.get(name), (dialect.External, dialect.Namespace)))
        if cpp_only:
            return f"its jvp calls {', '.join(cpp_only)}, C++ only (no @helper of that name)"
        undeclared = sorted({call.name for call in jvp.calls if call.operator and self.backend is not None
                             and not self.backend.declares(call.name)})
        if undeclared:
            return f"its jvp calls at.{', at.'.join(undeclared)}, which the library declares no operator for"
        return None

    @cached_property
    def fn(self) -> Callable[..., Any]:
        """The formula's function; where its module declares C++ names without defining them (an
        imported corpus's FunctionsManual helpers, which raise when called from Python), a copy of
        it calling the shipped library's ``@helper`` of each such name instead, as the reference engine runs it (the
        first of its overloads ``name__variant`` that accepts a call's arguments, where it has
        some, as the C++ emitter chooses), and torch's grad mode for ``GradMode.is_enabled()``."""
        from formulas.dsl import HELPERS

        fn = self.declared.fn
        # every such name of the module, read by the formula or not (the others change nothing):
        # no code is read. The copy's globals are the module's, with these in their places
        declared_only = {name: _overloaded(name, HELPERS) for name, value in fn.__globals__.items()
                         if name in HELPERS and value is not None and type(value) is not types.FunctionType}
        dialect = sys.modules.get("transpiler.yaml_import.dialect")     # imported by a corpus's formulas only
        declared_only.update({name: namespace for name, namespace in _TORCH_NAMESPACES.items()
                              if dialect and isinstance(fn.__globals__.get(name), dialect.Namespace)})
        in_dialect = dialect and any(isinstance(v, (dialect.External, dialect.Namespace)) for v in fn.__globals__.values())
        methods = self._cpp_methods if in_dialect else {}
        if not declared_only and not methods:
            return fn
        namespace = {**fn.__globals__, **declared_only}
        if methods:     # C++ methods of its arguments (``dim.back()``): compiled as Python spells them
            from reference_engine.forward_mode import formula_source    # a corpus formula's, on first use

            source = _cpp_methods_spelled(formula_source(fn, derived=False, return_jvp=False), methods)
            compiled: dict[str, Any] = {}
            exec(compile(source, fn.__code__.co_filename, "exec"), namespace, compiled)
            return compiled[getattr(fn, "__wrapped__", fn).__name__]
        copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
        copy.__kwdefaults__ = fn.__kwdefaults__
        return copy

    @cached_property
    def _cpp_methods(self) -> dict[str, dict[str, str]]:
        """The arguments whose C++ methods (:data:`CPP_VALUE_METHODS`) the formula calls, with them."""
        read = _names_read(self.declared.fn.__code__)
        candidates = {name: {m: py for m, py in spellings.items() if m in read}
                      for name, spellings in _cpp_methods_read(self.schema).items() if name in read}
        if not any(candidates.values()):
            return {}
        source = inspect.getsource(self.declared.fn)     # only a formula that calls them is compiled anew
        return {name: called for name, spellings in candidates.items()
                if (called := {m: py for m, py in spellings.items() if re.search(rf"\b{name}\.{m}\(\)", source)})}

    @cached_property
    def returning_jvp(self) -> Callable[..., Any]:
        """The formula compiled from the front-end's model to return ``outputs, backward, jvp``:
        its nested jvp or (``jvp="derived"``) the one derived from its backward."""
        from reference_engine.forward_mode import derived_formula, formula_source    # forward mode only

        fn = self.fn
        if self.facts.jvp == "derived":
            return derived_formula(fn, return_jvp=True)
        source = _cpp_methods_spelled(formula_source(self.declared.fn, derived=False, return_jvp=True),
                                      _cpp_methods_read(self.schema))
        compiled: dict[str, Any] = {}
        exec(compile(source, fn.__code__.co_filename, "exec"), fn.__globals__, compiled)
        return compiled[getattr(fn, "__wrapped__", fn).__name__]

    @cached_property
    def generated(self) -> Generated | None:
        """The formula's fast path written out (:mod:`formulas.torch.generate`; ``print(formula.generated.source)``),
        None where the generator does not cover the formula (:attr:`not_generated` says why)."""
        from formulas.torch.generate import NotCovered, generate     # made when an operator is installed

        try:
            generated = generate(self)
            compile(generated.source, f"<generated {self.op_name}>", "exec")
        except (NotCovered, SyntaxError) as reason:
            self.not_generated = f"{self.op_name}: {reason}"
            return None
        self.not_generated = None
        return generated

    @cached_property
    def function(self) -> type[torch.autograd.Function]:
        """The formula as a ``torch.autograd.Function`` subclass named ``<Op>Formula``."""
        return _function_named(self._function_name, FormulaFunction)

    @cached_property
    def plain_function(self) -> type[torch.autograd.Function]:
        """:attr:`function` as a :class:`PlainFormulaFunction`, for a call outside torch.func transforms."""
        return _function_named(self._function_name, PlainFormulaFunction)

    @property
    def _function_name(self) -> str:
        return "".join(part[:1].upper() + part[1:] for part in self.op_name.replace(".", "_").split("_")) + "Formula"

    @cached_property
    def apply(self) -> Callable[..., Any]:
        """:attr:`function`'s ``apply`` below ``Function.apply``'s Python layer, which binds the
        arguments by signature and routes a call under a torch.func transform to
        ``custom_function_call``. The Function is an operator's autograd kernel: it records its
        node at the level it is called at, as torch's own C++ kernels do (torch.func transforms
        reach a kernel unwrapped to its level); and the binding was a third of the per-call cost."""
        return super(torch.autograd.Function, self.function).apply

    @cached_property
    def plain_apply(self) -> Callable[..., Any]:
        """:attr:`plain_function`'s ``apply`` below ``Function.apply``'s Python layer (see :attr:`apply`)."""
        return super(torch.autograd.Function, self.plain_function).apply

    @cached_property
    def single_tensor_slots(self) -> tuple[int, ...]:
        """Positions (in :attr:`names`) of the ``Tensor`` and ``Tensor?`` arguments."""
        return tuple(self.names.index(arg.name) for arg in self.schema.arguments
                     if not arg.is_out and not isinstance(arg.type, ListType) and arg.is_tensor_like)

    @cached_property
    def scalar_method_slots(self) -> tuple[int, ...]:
        """Positions (in :attr:`names`) of the ``Scalar`` arguments the formula calls a ``c10::Scalar``
        method on (``other.toDouble()``, ``alpha.conj()``): :meth:`bind` gives them as numbers with
        those methods (:func:`~reference_engine.scalars.scalar_value`), as the reference engine does.
        A fact of the front-end's (:attr:`facts`), read only for a formula with a ``Scalar`` argument."""
        scalars = frozenset(arg.name for arg in self.schema.arguments
                            if not arg.is_out and _base_name(arg.type) == "Scalar")
        if not scalars:
            return ()
        called = self.facts.scalar_method_receivers
        return tuple(self.positions[name] for name in self.names
                     if name in scalars and (called is None or name in called))

    @cached_property
    def single_slots(self) -> tuple[int, ...] | None:
        """:attr:`single_tensor_slots` where they are the only places a call's tensors can be (no
        list of tensors among the arguments), else None."""
        if any(arg.is_tensor_like and (isinstance(arg.type, ListType) or isinstance(arg.type, OptionalType)
                                       and isinstance(arg.type.elem, ListType)) for arg in self.schema.arguments):
            return None     # Tensor[], Tensor?[] or Tensor[]?
        return self.single_tensor_slots

    def bind(self, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
        """One value per parameter of the formula, defaults filled in. A Python number given for a
        ``Tensor`` (torch hands a Python kernel its wrapped scalars as numbers) becomes a 0-d tensor
        of the dtype torch computes in with it (``result_type`` with the first tensor argument), so
        the formula sees a tensor and computes what torch does."""
        if len(args) > self.first_keyword:
            raise TypeError(f"{self.op_name}: {len(args)} positional arguments for {self.first_keyword}")
        values = [*args, *self.defaults[len(args):]]
        for name, value in kwargs.items():
            if name not in self.positions:
                raise TypeError(f"{self.op_name}: no argument `{name}`")
            values[self.positions[name]] = value
        if len(args) < self.required and any(value is inspect.Parameter.empty for value in values):
            missing = [name for name, value in zip(self.names, values) if value is inspect.Parameter.empty]
            raise TypeError(f"{self.op_name}: missing argument(s) {', '.join(missing)}")
        for i in self.scalar_method_slots:
            values[i] = scalar_value(values[i])
        for i in self.single_tensor_slots:
            if isinstance(values[i], (bool, int, float, complex)):
                break
        else:
            return values
        numbers = [i for i in self.single_tensor_slots if isinstance(values[i], (bool, int, float, complex))]
        if numbers:
            tensors = [values[i] for i in self.single_tensor_slots if isinstance(values[i], torch.Tensor)]
            for i in numbers:
                dtype = torch.result_type(tensors[0], values[i]) if tensors else None
                device = tensors[0].device if tensors else None
                values[i] = torch.scalar_tensor(values[i], dtype=dtype, device=device)
        return values

    def call(self, values: list[Any], run: Runner | None = None) -> Any:
        """The operator applied to ``values`` (as :meth:`bind` gives them) through the formula's
        Function: torch records one ``<Op>FormulaBackward`` node. The result has the schema's shape
        (a tensor, a tuple, or a list for ``Tensor[]``). ``run`` computes the forward (default:
        :meth:`planned_forward`; a custom op's redispatches to its kernel)."""
        if torch._C._are_functorch_transforms_active() or torch.autograd.forward_ad._current_level >= 0:
            return self.call_planned(values, run)
        # the lean call (:class:`PlainFormulaFunction`): its tensors found without a FlatArguments
        # where they can only be the single tensor slots (just an optimization of FlatArguments.of)
        slots = self.single_slots
        if slots is None:
            flat = FlatArguments.of(values)
            tensors, positions, layout = flat.tensors, None, gradient_layout(flat.template, self.gradient_slots)
            values = flat.template      # the forward puts the tensors apply hands it in its places
        else:
            tensors = list(map(values.__getitem__, slots))
            for tensor in tensors:
                if tensor is None:      # an absent Tensor?
                    positions = tuple(i for i in slots if values[i] is not None)
                    tensors = list(map(values.__getitem__, positions))
                    layout = self.slot_layout(positions)
                    break
            else:
                positions, layout = slots, self.full_layout
        flat_outputs = self.plain_apply((self, values, positions, layout, torch.is_grad_enabled(), run),
                                        *map(unwrap_if_dead, tensors))
        if self.list_output:
            return list(flat_outputs)
        return flat_outputs[0] if len(flat_outputs) == 1 else tuple(flat_outputs)

    @cached_property
    def in_place_apply(self) -> Callable[..., Any]:
        """``apply`` of the formula as an :class:`InPlaceFormulaFunction` (see :attr:`apply`)."""
        return super(torch.autograd.Function, _function_named(self._function_name, InPlaceFormulaFunction)).apply

    def call_in_place(self, values: Sequence[Any], written: int, original: torch.Tensor | None) -> torch.Tensor:
        """The in-place operator applied to ``values`` through :class:`InPlaceFormulaFunction`; it
        writes and returns ``values[written]``. ``original``: a copy of that tensor made before the
        write with autograd on, or None where the backward does not read it. The backward closure
        captures it under the written argument's name (an in-place entry's ``self`` is its value
        before the write: torchgen saves ``self.clone()``), given to the Function as one input more
        (gradient None), so it is saved with its graph and double backward reaches the input."""
        if torch._C._are_functorch_transforms_active():
            raise NotImplementedError(f"{self.op_name}: an in-place operator's formula does not run under "
                                      "torch.func transforms; call it outside them")
        flat = FlatArguments.of(values)
        if original is not None:
            flat = flat._replace(tensors=(*flat.tensors, original))
        name = self.names[written]

        def run(values: Sequence[Any], tensors: Sequence[torch.Tensor], want_jvp: bool) -> PlannedForward:
            # below ADInplaceOrView too: marking the tensor dirty bumps its version, once, as torch's kernel
            with torch._C._AutoDispatchBelowADInplaceOrView():
                before = tensors[-1] if original is not None else values[written].clone() if want_jvp else None
                outputs, backward, jvp = self.forward(values, want_jvp)
            if original is not None:     # the closure's `name` is the value before the write: `original`
                cell = backward.__closure__[backward.__code__.co_freevars.index(name)]
                cell.cell_contents = OracleTensor(tensors[-1])
            plan, saved = plan_closure(backward, (*tensors, outputs), self.op_name)
            jvp_state = None
            if want_jvp:    # the jvp reads the written argument's value before the write
                jvp_state = ([*values[:written], before, *values[written + 1:]], backward, jvp)
            return PlannedForward(outputs, (outputs,), plan, saved, jvp_state)

        application = Application(self, flat, torch.autograd.forward_ad._current_level >= 0, torch.is_grad_enabled(),
                                  run)
        return self.in_place_apply(application, *flat.tensors)[0]

    def call_planned(self, values: Sequence[Any], run: Runner | None = None) -> Any:
        """:meth:`call` through :class:`FormulaFunction` (``setup_context``: the form torch.func
        transforms take), which plans forward mode too."""
        slots = self.single_slots
        flat = FlatArguments.of(values) if slots is None else FlatArguments.of_single(values, slots)
        application = Application(self, flat, torch.autograd.forward_ad._current_level >= 0,
                                  torch.is_grad_enabled(), run or self.planned_forward)
        if torch._C._are_functorch_transforms_active():
            with enable_single_level_autograd_function():
                return self.shaped(self.apply(application, *flat.tensors))
        return self.shaped(self.apply(application, *map(unwrap_if_dead, flat.tensors)))

    def tensors_of(self, values: Sequence[Any]) -> tuple[torch.Tensor, ...]:
        """The tensors of a call's ``values`` (as :meth:`bind` gives them), in order: the
        :class:`FlatArguments` tensors, found without one where they can only be the single
        tensor slots (just an optimization)."""
        if self.single_slots is None:
            return FlatArguments.of(values).tensors
        tensors = []
        for i in self.single_slots:
            if values[i] is not None:
                tensors.append(values[i])
        return tuple(tensors)

    @cached_property
    def full_layout(self) -> tuple[int | None, ...]:
        """:meth:`slot_layout` of every single tensor slot: a call's where no tensor is absent."""
        return self.slot_layout(self.single_tensor_slots)

    def slot_layout(self, positions: Sequence[int]) -> tuple[int | None, ...]:
        """:func:`gradient_layout` of a call whose tensors are the arguments at ``positions``."""
        return tuple(positions.index(slot) if slot in positions else None for slot in self.gradient_slots)

    def shaped(self, flat_outputs: Sequence[Any]) -> Any:
        """The flat outputs as the schema returns them: a tensor, a tuple or a ``Tensor[]`` list."""
        if self.list_output:
            return list(flat_outputs)
        return tuple(flat_outputs) if len(self.schema.returns) > 1 else flat_outputs[0]

    def planned_forward(self, values: Sequence[Any], tensors: Sequence[torch.Tensor],
                        want_jvp: bool) -> PlannedForward:
        """The formula's forward on ``values`` (whose tensors are ``tensors``) below autograd, its
        backward closure planned against those tensors and the outputs."""
        with torch._C._AutoDispatchBelowAutograd():
            outputs, backward, written = self.forward(values, want_jvp)
        flat_outputs = (outputs,) if type(outputs) is torch.Tensor else self.flat_outputs(outputs)
        plan, saved = plan_closure(backward, (*tensors, *flat_outputs), self.op_name)
        return tuple.__new__(PlannedForward, (outputs, flat_outputs, plan, saved,       # see plan_closure
                                              (values, backward, written) if want_jvp else None))

    def forward(self, values: Sequence[Any], want_jvp: bool = False) -> tuple[Any, Callable[..., Any], Any]:
        """The formula's forward on torch values (run it below autograd): its outputs as it
        returns them, its backward closure and, with ``want_jvp``, its nested ``jvp`` (or None)."""
        if not want_jvp or self.facts.jvp not in ("written", "derived") or self.jvp_left_out is not None:
            # just an optimization of `with use_backend(self.backend): ...apply_fn(wrap(list(values)))`
            wrapped = list(values)
            for i, value in enumerate(wrapped):
                if isinstance(value, torch.Tensor):
                    wrapped[i] = OracleTensor(value)
                elif isinstance(value, (list, tuple)):
                    wrapped[i] = wrap(value)
            token = _installed_backend.set(self.backend)
            try:
                outputs, backward = self.apply_fn(wrapped) if self.keyword_only else self.fn(*wrapped)
            finally:
                _installed_backend.reset(token)
            return outputs.tensor if type(outputs) is OracleTensor else unwrap(outputs), backward, None
        with use_backend(self.backend):
            outputs, backward, jvp = self.apply_fn(wrap(list(values)), self.returning_jvp)
        return unwrap(outputs), backward, jvp

    def apply_fn(self, values: list[Any], fn: Callable[..., Any] | None = None) -> Any:
        """The formula's Python function (or ``fn``, a version of it) called with one value per parameter."""
        first = len(values) - self.keyword_only
        return (fn or self.fn)(*values[:first], **dict(zip(self.names[first:], values[first:])))

    def run_backward(self, backward: Callable[..., Any], grads: Sequence[torch.Tensor | None],
                     needs_input_grad: Sequence[bool] | None) -> list[Any]:
        """The closure's gradients, one per gradient slot (``None``: zero); ``grads`` holds one per
        differentiable output (per part of a ``Tensor[]`` output); ``needs_input_grad`` one flag
        per gradient slot, for a closure that takes them (None: it does not)."""
        wrapped = list(grads)
        for i, grad in enumerate(wrapped):
            wrapped[i] = OracleTensor(grad) if type(grad) is torch.Tensor else wrap(grad)
        token = _installed_backend.set(self.backend)   # just an optimization of `with use_backend(...)`
        try:
            if needs_input_grad is None:
                returned = backward(wrapped) if self.list_output else backward(*wrapped)
            else:
                mask = list(needs_input_grad)
                returned = backward(wrapped, needs_input_grad=mask) if self.list_output else \
                    backward(*wrapped, needs_input_grad=mask)
        finally:
            _installed_backend.reset(token)
        if len(self.gradient_slots) == 1:
            returned = (returned,)
        if not isinstance(returned, tuple) or len(returned) != len(self.gradient_slots):
            raise RuntimeError(f"the backward of {self.op_name} must return {len(self.gradient_slots)} "
                               f"gradient(s), returned {returned!r}")
        unwrapped = list(returned)
        for i, grad in enumerate(unwrapped):
            unwrapped[i] = grad.tensor if type(grad) is OracleTensor else unwrap(grad)
        return unwrapped

    def run_jvp(self, values: Sequence[Any], tangents: Sequence[Any], backward: Callable[..., Any],
                written: Callable[..., Any] | None) -> Any:
        """Tangents of the outputs from the inputs' ``tangents`` (one per parameter; zeros for
        the tensors without one), by the formula's nested jvp or its ``jvp=`` rule."""
        with use_backend(self.backend):
            if written is not None:
                code = written.__code__
                by_name = dict(zip(self.names, values))
                tangent_of = dict(zip(self.names, tangents))
                # an in-place formula's jvp reads `original_self_t` / `original_self_p`: self's tangent
                # and value before the write (call_in_place gives the value before it as self's)
                arguments = {param: wrap(tangent_of[param.removeprefix("original_")[:-2]] if param.endswith("_t")
                                         else by_name[param.removeprefix("original_")[:-2]]
                                         if param.startswith("original_") else by_name[param])
                             for param in code.co_varnames[:code.co_argcount]}
                return unwrap(written(**arguments))
            if self.declared.jvp == "auto_element_wise":
                (slot,) = self.gradient_slots
                return unwrap(backward(wrap(tangents[slot])))
            if self.declared.jvp == "auto_linear":
                substituted = list(values)
                for slot in self.gradient_slots:
                    substituted[slot] = tangents[slot]
                return unwrap(self.apply_fn(wrap(substituted))[0])
        if self.jvp_left_out is not None:
            raise NoForwardAD(f"Trying to use forward AD with {self.op_name} that does not support it because "
                              f"{self.jvp_left_out}")
        raise NoForwardAD(f"Trying to use forward AD with {self.op_name} that does not support it because "
                          "its formula defines no jvp; add a nested `def jvp(...)` (or @derivative(..., "
                          "jvp=\"auto_linear\" / \"auto_element_wise\")) to the formula")

    def flat_outputs(self, outputs: Any) -> tuple[torch.Tensor, ...]:
        """The outputs of a forward call as a tuple (one output becomes a 1-tuple)."""
        return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)

    def differentiable(self, flat_outputs: Sequence[Any]) -> list[Any]:
        """The entries of ``flat_outputs`` that belong to differentiable outputs."""
        if self.list_output:
            return list(flat_outputs)
        return [out for out, diff in zip(flat_outputs, self.output_flags) if diff]


@functools.cache
def _declares_mask(code: types.CodeType) -> bool:
    """Whether a backward with this code takes ``needs_input_grad``."""
    return "needs_input_grad" in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]


def records(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether autograd has anything to record for a call with these arguments: a forward-mode
    level is open, or grad mode is on and an input (also inside a list) requires grad."""
    if torch.autograd.forward_ad._current_level >= 0:
        return True
    if not torch.is_grad_enabled():
        return False
    for value in args:      # just an optimization of _requires_grad(args), the common call
        if isinstance(value, torch.Tensor):
            if value.requires_grad:
                return True
        elif isinstance(value, (list, tuple)) and _requires_grad(value):
            return True
    return bool(kwargs) and _requires_grad(kwargs.values())


def _requires_grad(values: Any) -> bool:
    for value in values:
        if isinstance(value, torch.Tensor):
            if value.requires_grad:
                return True
        elif isinstance(value, (list, tuple)) and _requires_grad(value):
            return True
    return False


def below_autograd() -> Any:
    """A guard under which aten operators run their kernels without autograd (as torch's own
    autograd kernels run theirs)."""
    return torch._C._AutoDispatchBelowAutograd()


class PlannedForward(NamedTuple):
    """A forward run of a formula with its backward closure planned (:func:`plan_closure`)."""

    outputs: Any                        # as the formula returns them
    flat_outputs: tuple[Any, ...]
    plan: ClosurePlan
    saved: tuple[int, ...]              # positions in (input tensors, flat outputs) to save
    jvp_state: tuple[list[Any], Callable[..., Any], Callable[..., Any] | None] | None  # forward mode: values, closures


#: How a Function's forward computes a formula's outputs: ``(values, tensors, want_jvp)``.
Runner = Callable[[Sequence[Any], Sequence[torch.Tensor], bool], PlannedForward]


@dataclass(eq=False)
class Application:
    """One application of a formula through its Function: the first argument of ``apply``. A
    Function with ``setup_context`` has a forward without ``ctx``; the forward leaves what
    ``setup_context`` and ``jvp`` need here (``planned``)."""

    formula: TorchFormula
    flat: FlatArguments
    want_jvp: bool
    grad_enabled: bool      # the caller's grad mode, which apply turns off for forward
    run: Runner
    planned: PlannedForward | None = None


class _FormulaNode(torch.autograd.Function):
    """What :class:`FormulaFunction`, :class:`PlainFormulaFunction` and
    :class:`InPlaceFormulaFunction` share: the backward (:func:`_backward`) and the jvp
    (:func:`_jvp`) of the node they record."""

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        return _backward(ctx, *grads)

    @staticmethod
    def jvp(ctx: Any, *input_tangents: torch.Tensor | None) -> Any:
        return _jvp(ctx, *input_tangents)


class FormulaFunction(_FormulaNode):
    """Base of every ``<Op>Formula``: see the module docstring. ``apply(application, *tensors)``
    with ``tensors`` the application's :class:`FlatArguments` tensors. This form, with
    ``setup_context``, is the one torch.func transforms take, and forward mode's (it plans the
    jvp too); a call outside both goes through :class:`PlainFormulaFunction`, the same Function
    in fewer Python calls."""

    @staticmethod
    def forward(application: Application, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        # The forward runs below this level's autograd (the runner makes sure), with the caller's
        # grad modes, as torch's C++ kernels run theirs: under nested torch.func transforms the
        # levels below still record it (with apply's modes, off, a grad of grad, or a jvp of a
        # grad, would come out zero).
        torch._C._set_grad_enabled(application.grad_enabled)
        torch._C._set_fwd_grad_enabled(True)
        try:
            planned = application.run(application.flat.values(tensors), tensors, application.want_jvp)
        finally:
            torch._C._set_grad_enabled(False)
            torch._C._set_fwd_grad_enabled(False)
        application.planned = planned
        return planned.flat_outputs

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, ...]) -> None:
        # setup_context's own objects: torch.func wraps them
        _set_up(ctx, inputs[0], (*inputs[1:], *output), output)


class PlainFormulaFunction(_FormulaNode):
    """:class:`FormulaFunction` for a call outside torch.func transforms and forward mode, in as
    few Python calls as it takes (just an optimization: the per-call cost of the override and the
    custom ops): ``forward(ctx, call, *tensors)`` runs the formula and sets ``ctx`` up at once
    (the tensors ``setup_context`` would see are the forward's own), with ``call`` what
    :meth:`TorchFormula.call` found: ``(formula, values, positions, layout, grad_enabled, run)``,
    ``positions`` where ``tensors`` go in ``values`` (None: ``values`` is a template, the tensors
    go in the places of its :class:`SavedSlot` markers), ``layout`` the :func:`gradient_layout`,
    ``run`` a custom op's runner (None: the formula itself)."""

    @staticmethod
    def forward(ctx: Any, call: tuple[Any, ...], *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        formula, values, positions, layout, grad_enabled, run = call
        if positions is None:
            values = place(values, tensors)
        else:
            for i, tensor in zip(positions, tensors):
                values[i] = tensor
        torch._C._set_grad_enabled(grad_enabled)      # as FormulaFunction.forward
        torch._C._set_fwd_grad_enabled(True)
        try:
            planned = (run or formula.planned_forward)(values, tensors, False)
        finally:
            torch._C._set_grad_enabled(False)
            torch._C._set_fwd_grad_enabled(False)
        # setup_context: what ctx.save_for_backward and ctx.set_materialize_grads(False) do,
        # without their calls; an unused output's gradient reaches the closure as None
        flat_outputs = planned.flat_outputs
        ctx.to_save = tuple(map((*tensors, *flat_outputs).__getitem__, planned.saved))
        ctx.materialize_grads = False
        ctx.formula, ctx.layout, ctx.count, ctx.plan = formula, layout, len(tensors), planned.plan
        if not formula.all_differentiable:
            _mark_non_differentiable(ctx, formula, flat_outputs)
        return flat_outputs


class InPlaceFormulaFunction(_FormulaNode):
    """The formula's Function for an in-place operator (:meth:`TorchFormula.call_in_place`), its
    forward and ``setup_context`` in one call: its output, the input it writes, is marked dirty, so
    torch rebases that tensor's history on the node (through a view: ``CopySlices`` on its base)
    and raises its own errors, as for its own in-place kernels."""

    @staticmethod
    def forward(ctx: Any, application: Application, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outputs = FormulaFunction.forward(application, *tensors)
        _set_up(ctx, application, (*tensors, *outputs), outputs)
        ctx.mark_dirty(*outputs)
        ctx.written = next(i for i, tensor in enumerate(tensors) if tensor is outputs[0])
        return outputs

    @staticmethod
    def jvp(ctx: Any, *input_tangents: torch.Tensor | None) -> Any:
        # torch wants the written tensor's tangent written in place too
        (tangent,) = _jvp(ctx, *input_tangents)
        written = input_tangents[1 + ctx.written]
        if written is None or tangent is written:
            return (tangent,)
        return (written.copy_(tangent),)


def _function_named(name: str, base: type[torch.autograd.Function]) -> type[torch.autograd.Function]:
    """A subclass ``name`` of ``base``, its node's ``apply`` the backward itself: torch's looks the
    backward up on every call (one Python call more; just an optimization)."""
    function = type(name, (base,), {"__module__": __name__})
    function._backward_cls.apply = _backward
    return function


def _set_up(ctx: Any, application: Application, candidates: tuple[torch.Tensor, ...],
            output: Sequence[torch.Tensor]) -> None:
    """The Function's ``setup_context``: save the tensors the planned closure captures (at their
    positions in ``candidates``, the call's input tensors then its outputs) and keep what
    backward and jvp need, no tensor among it (the inputs stay free to go: torch keeps only the
    saved)."""
    planned, formula = application.planned, application.formula
    # what ctx.save_for_backward and ctx.set_materialize_grads(False) do, without their
    # calls (just an optimization); an unused output's gradient reaches the closure as None
    ctx.to_save = tuple(map(candidates.__getitem__, planned.saved))
    ctx.materialize_grads = False
    ctx.formula, ctx.template, ctx.count, ctx.plan = formula, application.flat.template, \
        len(application.flat.tensors), planned.plan
    ctx.layout = gradient_layout(application.flat.template, formula.gradient_slots)
    if planned.jvp_state is not None:
        ctx.jvp_state = planned.jvp_state   # forward mode runs right after forward; jvp drops it
    application.planned = None
    if not formula.all_differentiable:
        _mark_non_differentiable(ctx, formula, output)


def _mark_non_differentiable(ctx: Any, formula: TorchFormula, output: Sequence[torch.Tensor]) -> None:
    """Mark the outputs of the formula's non-differentiable results on ``ctx``."""
    kept = {id(o) for o in formula.differentiable(output)}
    ctx.mark_non_differentiable(*(o for o in output if id(o) not in kept))


def _backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
    """The Function's backward: the formula's closure rebuilt from the saved tensors, run."""
    formula: TorchFormula = ctx.formula
    output_grads = grads if formula.all_differentiable else formula.differentiable(grads)
    for grad in output_grads:
        if grad is not None:
            break
    else:
        return (None,) * (1 + ctx.count)      # a backward is never called without a gradient
    layout = ctx.layout
    backward = ctx.plan.rebuild(ctx.saved_tensors)
    if _declares_mask(backward.__code__):
        flags = ctx.needs_input_grad        # per tensor of the call, after apply's first argument
        needs: list[bool] | None = []       # per gradient slot
        for where in layout:
            if type(where) is int:
                needs.append(flags[1 + where])
            else:       # a list of tensors (its flags in one), or an absent Tensor?
                needs.append(where is not None and any(flags[1 + m.index] for m in where if type(m) is SavedSlot))
    else:
        needs = None
    if torch.is_grad_enabled() or torch.autograd.forward_ad._current_level >= 0 \
            or torch._C._are_functorch_transforms_active():
        per_slot = formula.run_backward(backward, output_grads, needs)
    else:
        # nothing can record (no create_graph, no forward-mode level, no torch.func level): the
        # closure's operators go straight to their kernels below autograd, as the forward's do,
        # and an overridden one does not enter its Python kernel only to find that out
        with torch._C._AutoDispatchBelowAutograd():
            per_slot = formula.run_backward(backward, output_grads, needs)
    flat_grads: list[torch.Tensor | None] = [None] * ctx.count
    for where, grad in zip(layout, per_slot):
        if type(where) is int:
            flat_grads[where] = grad
        elif isinstance(where, list) and grad is not None:
            for part, part_grad in zip(where, grad):
                flat_grads[part.index] = part_grad
    return (None, *flat_grads)


def gradient_layout(template: Sequence[Any], gradient_slots: Sequence[int]) -> tuple[Any, ...]:
    """Where each gradient slot's tensor is among a call's tensors, from its :class:`FlatArguments`
    template: its index, its list of :class:`SavedSlot` markers (a list of tensors), or None."""
    layout = []
    for slot in gradient_slots:
        marker = template[slot]
        layout.append(marker.index if type(marker) is SavedSlot else
                      marker if isinstance(marker, (list, tuple)) else None)
    return tuple(layout)


def _jvp(ctx: Any, *input_tangents: torch.Tensor | None) -> Any:
    """The Function's jvp: the formula's, on the values the forward kept for it."""
    formula: TorchFormula = ctx.formula
    values, backward, written = ctx.jvp_state
    del ctx.jvp_state
    tensors = FlatArguments.of(values).tensors
    zero_filled = [torch.zeros_like(t) if tangent is None else tangent
                   for t, tangent in zip(tensors, input_tangents[1:])]
    tangents = place(ctx.template, zero_filled)
    per_parameter = [tangents[i] if i in formula.gradient_slots else None for i in range(len(values))]
    if torch._C._are_functorch_transforms_active():
        # the levels below this one record the jvp's computation (a jvp of a jvp), as the
        # forward's: with apply's modes, off, they would not
        with torch.enable_grad(), torch.autograd.forward_ad._set_fwd_grad_enabled(True), below_autograd():
            output_tangents = formula.run_jvp(values, per_parameter, backward, written)
    else:
        output_tangents = formula.run_jvp(values, per_parameter, backward, written)
    if formula.list_output:
        return tuple(output_tangents)
    returned = output_tangents if isinstance(output_tangents, tuple) else (output_tangents,)
    count = sum(formula.output_flags)
    if len(returned) != count:
        raise RuntimeError(f"the jvp of {formula.op_name} returned {len(returned)} tangent(s) for "
                           f"{count} differentiable output(s)")
    if formula.view_of is not None:     # torch wants a view's tangent a view: one returned as it came, its alias
        returned = tuple(t.view_as(t) if any(t is given for given in input_tangents) else t for t in returned)
    remaining = iter(returned)
    return tuple(next(remaining) if diff else None for diff in formula.output_flags)
