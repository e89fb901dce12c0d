"""The dispatcher: ``at.X(...)`` and Tensor operators resolve and run here.

Layers, top to bottom:

1. **Resolution** (:class:`OperatorPacket`): a name (``sum``) has overloads
   (``sum``, ``sum.dim_IntList``); the first call with a given signature of
   argument types binds against each declared schema in declaration order,
   exact matches before ones that need a number wrapped as a tensor, and
   caches the winner for that signature.
2. **Autograd** (:meth:`~reference_engine.overload.Overload.run`): when grad mode is on, a formula
   exists and an input requires grad, the formula runs *below autograd*
   (grad mode off, so its ``at.*`` calls reach the kernels) and a
   :class:`~reference_engine.formula_node.FormulaNode` holding its backward
   closure becomes the outputs' ``grad_fn``.
3. **Kernels** (:mod:`reference_engine.kernels`): NumPy, one per declared op.
"""
from __future__ import annotations

import textwrap
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from formulas.dsl import LIBRARY, DeclaredFormula, Registry, declared as declared_formula, source_stamp
from reference_engine import forward_mode
from reference_engine.dtypes import DType
from reference_engine.codegen import generated_function, own_code
from reference_engine.formula_node import formula_recorder
from reference_engine.grad_mode import grad_mode
from reference_engine.kernels import DEFAULT_KEYWORD_KERNELS, KERNELS
from reference_engine.overload import Overload
from reference_engine.rebind import EngineOperators
from reference_engine.tensor import NEW_TENSOR_GLOBALS, Tensor, new_tensor
from reference_engine.views import make_view
from transpiler.schema import FunctionSchema, parse_schema


_NO_CONVERSION = (list, type(None), DType)
#: The names the generated runners and entry points read (a new Tensor's among them).
_ENTRY_GLOBALS = {"ndarray": np.ndarray, "asarray": np.asarray, **NEW_TENSOR_GLOBALS}


def call_key(args: tuple) -> Any:
    """The cache key of a positional call (:class:`OperatorPacket`): the type of its one argument,
    else the tuple of its arguments' types (keyword calls append the names and types). Just an
    optimization: a type is hashed and found by identity, where a one-element tuple made per call
    is hashed and compared element by element (about 0.4k instructions per call; the entry
    points build the key inline)."""
    return type(args[0]) if len(args) == 1 else tuple(map(type, args))


# ----------------------------------------------------------------------------- generated code
# The kernel runners of one or two Tensors and the entry points that inline them are the hottest
# code of the engine. Each is made from one template per call shape (:mod:`reference_engine.codegen`);
# a runner's kernel call and the Tensor made of its result (:attr:`Tensor.FIELDS`) are one text,
# which the entry points inline (just an optimization: a Python frame less per kernel call).

#: The kernel call of a direct runner of ``arity`` Tensors (``{kernel}``: for operands of one
#: dtype, ``{mixed_kernel}``: for two of different dtypes, where it applies torch's promotion).
_KERNEL_CALL = {
    1: "out = {kernel}(a._value)\n",
    2: ("if a._data.dtype is b._data.dtype:\n"
        "    out = {kernel}(a._value, b._value)\n"
        "else:\n"
        "    out = {mixed_kernel}(a._value, b._value)\n"),
}
_ARGUMENTS = {1: "a", 2: "a, b"}


def _direct_call(arity: int, kernel: str, mixed_kernel: str, indent: str) -> str:
    """The lines of a direct runner's body: its kernel call and ``return`` of the new Tensor."""
    lines = (_KERNEL_CALL[arity].format(kernel=kernel, mixed_kernel=mixed_kernel)
             + "array = out if type(out) is ndarray else asarray(out)\n"
             + new_tensor("t", "array", "") + "return t\n")
    return textwrap.indent(lines, indent)


def _direct_runner(arity: int, kernel: Callable[..., Any],
                   mixed_kernel: Callable[..., Any] | None) -> Callable[..., Any]:
    """The runner of ``arity`` Tensors that calls ``kernel`` (``mixed_kernel`` for two dtypes) and
    wraps the result; the entry points inline it (:attr:`CacheEntry.kernel`)."""
    runner = generated_function(
        f"def run_{'_'.join(['tensor'] * arity)}({_ARGUMENTS[arity]}):\n"
        + _direct_call(arity, "kernel", "mixed_kernel", "    "),
        {"kernel": kernel, "mixed_kernel": mixed_kernel, **_ENTRY_GLOBALS})
    runner.direct_kernel, runner.mixed_kernel = kernel, mixed_kernel
    return runner


#: A cached call of ``{arguments}`` (key ``{key}``, :func:`call_key`): the runner of the grad
#: mode, or with grad mode off a direct runner inlined; falls through when there is none.
_CACHED_CALL = """\
entry = cache.get({key})
if entry is not None:
    if mode.enabled:
        run = entry.recording
    elif entry.kernel is not None:      # the direct runner, inlined
{direct_call}\
    else:
        run = entry.unrecorded
    if run is not None:
        return run({arguments})
"""


def _cached_call(arity: int, key: str, indent: str) -> str:
    return textwrap.indent(_CACHED_CALL.format(
        key=key, arguments=_ARGUMENTS[arity],
        direct_call=_direct_call(arity, "entry.kernel", "entry.mixed_kernel", "        ")), indent)


#: ``op(a)``: for operators whose every overload takes one tensor and nothing else. Python itself
#: refuses other arguments (``sin() takes 1 positional argument but 2 were given``): for speed,
#: as ``*more, **kwargs`` would cost a dict on every call (1.25 calls per chain operator).
_UNARY_ENTRY_POINT = "def op(a):\n" + _cached_call(1, "type(a)", "    ") + "    return call((a,), {})\n"

#: ``binary(a, b)``: the Python operators (``__mul__``).
_BINARY_ENTRY_POINT = ("def binary(a, b):\n" + _cached_call(2, "(type(a), type(b))", "    ") + """\
    if type(b) is ndarray:      # ``t + array``: the array is a tensor, as in torch
        b = Tensor(b)
    elif isinstance(b, generic):        # ``t * np.float64(2)``: a Python number (weak dtype)
        b = b.item()
    return call((a, b), {})
""")

#: ``op(*args, **kwargs)``: :meth:`OperatorPacket.call` with a cached positional call inlined.
_ENTRY_POINT = """\
def op(*args, **kwargs):
    if kwargs:      # keywords given their defaults (``alpha=1``) make a positional call
        for name, value in kwargs.items():
            if defaults.get(name, defaults) is not value:
                return call(args, kwargs)
    n = len(args)
    if n == 2:      # the common case (``at.mul(self, other)``)
        a, b = args
""" + _cached_call(2, "(type(a), type(b))", "        ") + """\
    elif n == 1:
        (a,) = args
""" + _cached_call(1, "type(a)", "        ") + """\
    else:
        entry = cache.get(tuple(map(type, args)))
        if entry is not None:
            run = entry.recording if mode.enabled else entry.unrecorded
            if run is not None:
                return run(*args)
    return call(args, {})
"""


def _kernel_runner(overload: Overload, arg_types: tuple[type, ...],
                   keywords_included: bool = False) -> Callable[..., Any] | None:
    """A kernel call specialised to positional arguments of ``arg_types`` (None when the
    call needs binding, conversion or a non-tensor result, handled by ``run_kernel``).
    ``keywords_included``: the types cover every argument, keyword-only ones included."""
    signature = overload.signature
    kernel = overload.kernel
    if keywords_included:
        if len(arg_types) != signature.n_args:
            return None
        tail: tuple = ()
    elif len(arg_types) == signature.n_positional and signature.keyword_defaults is not None:
        tail = signature.keyword_defaults      # keyword-only arguments left at their defaults (or ())
        if tail and overload.name in DEFAULT_KEYWORD_KERNELS:
            kernel, tail = DEFAULT_KEYWORD_KERNELS[overload.name], ()
    else:
        return None
    if (kernel is None or signature.tensor_list_positions
            or overload.returns_kind != "tensor"
            or any((arg_types[i] if i < len(arg_types) else type(tail[i - len(arg_types)]))
                   not in _NO_CONVERSION for i in signature.converted_positions)
            or any(t is not Tensor and issubclass(t, Tensor) for t in arg_types)):
        return None
    wrap, asarray, ndarray = Tensor._wrap, np.asarray, np.ndarray
    unwrap = tuple(t is Tensor for t in arg_types)
    simple = not overload.is_view        # views also share the version counter: run_any
    if unwrap == (True,) and simple and not tail:
        return _direct_runner(1, kernel, None)
    if unwrap == (True, True) and simple and not tail:
        # Operands of one dtype: NumPy's result type is torch's, and a promoting kernel's bare
        # ufunc (``same_dtype``) runs; mixed dtypes go through the kernel, which applies torch's rules.
        return _direct_runner(2, getattr(kernel, "same_dtype", kernel), kernel)
    if unwrap[:2] == (True, True) and not any(unwrap[2:]) and simple:
        def run_binary_and_values(a, b, *values):       # values: non-tensor arguments (``alpha``)
            out = kernel(a._value, b._value, *values, *tail)
            return wrap(out if type(out) is ndarray else asarray(out))
        return own_code(run_binary_and_values)
    if unwrap == (True, False) and simple:
        def run_tensor_other(a, b):
            out = kernel(a._value, b, *tail)
            return wrap(out if type(out) is ndarray else asarray(out))
        return own_code(run_tensor_other)

    def run_any(*args):
        out = kernel(*[a._value if u else a for a, u in zip(args, unwrap)], *tail)
        result = wrap(out if type(out) is ndarray else asarray(out))
        if overload.is_view and unwrap[0] and np.may_share_memory(result._data, args[0]._data):
            make_view(result, args[0], overload, (*args[1:], *tail))
        return result
    return own_code(run_any)


def _formula_runner(overload: Overload, arg_types: tuple[type, ...], key: Any,
                    kernel_runner: Callable[..., Any] | None, packet: OperatorPacket) -> Callable[..., Any] | None:
    """The recording path for positional calls whose tensor arguments are all Tensors,
    keyword-only arguments left at their defaults (None when binding, conversion or
    number wrapping is needed: ``Overload.run`` handles those, and Scalar arguments given
    ``c10::Scalar``'s methods). It falls back to ``kernel_runner`` when no input requires grad.
    Where those methods are not known yet (the formula's facts are read on its first record,
    never when a call only runs the kernel), the runner reads them then, and ``packet`` makes
    the call's entry (its cache ``key``) again knowing them."""
    signature = overload.signature
    positions = signature.tensor_positions
    if len(arg_types) == signature.positional_arity:
        tail: tuple = ()
    elif len(arg_types) == signature.n_positional and signature.keyword_defaults is not None:
        tail = signature.keyword_defaults
    else:
        return None
    # A kernel runner exists only when no argument needs conversion (lists, dtypes as given).
    if (overload.formula is None or kernel_runner is None
            or any(i >= len(arg_types) or arg_types[i] is not Tensor for i in positions)):
        return None
    if not overload.scalar_methods_read:
        def read_scalar_methods(*args):
            if any(args[i]._requires_grad for i in positions):
                packet.cache.pop(key, None)
                if overload.scalar_methods:     # read from the facts: Overload.run gives them
                    return _run_general(overload, args, {})
                return packet.call(args, {})    # the entry made again, with a fast recording runner
            return kernel_runner(*args)
        return read_scalar_methods
    if overload.scalar_methods:
        return None
    return formula_recorder(overload, kernel_runner, len(arg_types), dict(zip(overload.keyword_only[1], tail)))


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """A resolved call signature of an :class:`OperatorPacket`. A runner is None where the
    call needs general binding; runners take the positional arguments, then the keyword
    values (in schema order). A dataclass with slots, not a NamedTuple: every operator call
    reads two or three fields, and CPython reads a slot fast where it unpacks or reads a
    NamedTuple (a tuple subclass) through its generic paths."""

    overload: Overload
    unrecorded: Callable[..., Any] | None       # the runner with grad mode off
    recording: Callable[..., Any] | None        # the runner with grad mode on
    #: set when ``unrecorded`` only unwraps one or two Tensors, calls it and wraps the result:
    #: the entry points then do that inline (an optimization, as the kernel runners are)
    kernel: Callable[..., Any] | None
    #: the kernel of two Tensors of different dtypes (it applies torch's type promotion)
    mixed_kernel: Callable[..., Any] | None


def _level_entry(cache: dict[Any, CacheEntry], key: Any, plain: CacheEntry, first: int, keywords: tuple[str, ...],
                 plain_entries: list) -> CacheEntry:
    """The entry of a formula's call signature made while a forward-mode level is open. Its
    runners are ``plain``'s, behind one test: a call the level makes itself (the user's
    function calling the operator, while no formula runs) may carry tangents and takes the
    general path (:func:`forward_mode.run <reference_engine.forward_mode.run>`); a call
    inside a formula or jvp (the level suspended) runs ``plain``'s runner, as it would
    with no level open. After the level closes, the first call puts ``plain`` back in the
    cache (and in ``plain_entries``, which the next level takes it out of). The runners take
    ``first`` positional arguments, then the values of the keywords named ``keywords``."""
    state, overload = forward_mode.state, plain.overload

    def behind_the_test(runner: Callable[..., Any] | None) -> Callable[..., Any] | None:
        if runner is None:
            return None

        def run(*args: Any) -> Any:
            if state.tangents is None:      # the level closed: the plain entry is right again
                if cache.get(key) is entry:
                    cache[key] = plain
                    plain_entries.append((cache, key, plain, entry))
            elif not state.suspended:       # the level's own call: its operands may be duals
                return _run_general(overload, args[:first], dict(zip(keywords, args[first:])))
            return runner(*args)
        return own_code(run)

    entry = CacheEntry(overload, behind_the_test(plain.unrecorded), behind_the_test(plain.recording), None, None)
    return entry


def _run_general(overload: Overload, args: tuple, kwargs: dict) -> Any:
    """One call of ``overload`` without a cached runner: bind, then forward mode's rule while a
    level is open and running, the formula when recording, else the kernel."""
    if not kwargs and len(args) == overload.signature.positional_arity:
        bound = list(args)
    else:
        bound = overload.signature.bind(args, kwargs)
    if forward_mode.state.active:
        return forward_mode.run(overload, bound)
    if overload.formula is not None and grad_mode.enabled:
        return overload.run(bound)
    return overload.run_kernel(bound)


class OperatorPacket:
    """Every overload of one operator name, with a per-signature resolution cache.

    The cache maps the argument types of a call (:func:`call_key`) to the resolved overload and,
    for plain positional calls, runners specialised to those types (no
    binding): one for the kernel, used whenever nothing is recorded, and one
    that records the formula when an input requires grad. Those of a formula
    know nothing of forward mode's duals: ``plain_entries`` (the table's) lists
    them, and a forward-mode level takes them out of the cache when it opens
    (:meth:`Dispatcher.open_level`); the entries made while it is open work with
    and without a level (:func:`_level_entry`), so the caches stay warm from one
    ``jvp`` to the next.
    """

    __slots__ = ("name", "overloads", "cache", "op", "binary", "plain_entries")

    def __init__(self, name: str, overloads: list[Overload], plain_entries: list) -> None:
        self.name = name
        self.overloads = overloads
        self.cache: dict[Any, CacheEntry] = {}      # call_key(...) -> entry
        self.plain_entries = plain_entries
        one_tensor = all(len(o.schema.arguments) == 1 and o.signature.tensor_positions == (0,)
                         for o in overloads)
        #: ``at.<name>`` in formulas and the Tensor method: ``op(*args, **kwargs)``, or, when
        #: every overload takes one tensor and nothing else (``sin``), ``op(a)``.
        self.op = self._unary_entry_point() if one_tensor else self._entry_point()
        #: ``binary(a, b)``: the Python operator (``__mul__``).
        self.binary = self._binary_entry_point()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.call(args, kwargs)

    def _entry_point(self) -> Callable[..., Any]:
        """``op(*args, **kwargs)`` (``_ENTRY_POINT``): ``at.<name>`` for the engine's formulas and
        the Tensor methods/operators of this name."""
        return self._generated(_ENTRY_POINT, defaults=self._keyword_defaults())

    def _unary_entry_point(self) -> Callable[..., Any]:
        """``op(a)`` (``_UNARY_ENTRY_POINT``): :meth:`_entry_point` for operators whose every
        overload takes one tensor and nothing else."""
        return self._generated(_UNARY_ENTRY_POINT)

    def _binary_entry_point(self) -> Callable[..., Any]:
        """``binary(a, b)`` (``_BINARY_ENTRY_POINT``): :meth:`_entry_point` for a call with exactly
        two arguments, an array or NumPy scalar as ``b`` taken as torch takes it."""
        return self._generated(_BINARY_ENTRY_POINT)

    def _generated(self, source: str, **names: Any) -> Callable[..., Any]:
        fn = generated_function(source, {"cache": self.cache, "call": self.call, "mode": grad_mode,
                                         "generic": np.generic, **_ENTRY_GLOBALS, **names})
        fn.__name__ = fn.__qualname__ = self.name
        return fn

    def _keyword_defaults(self) -> dict[str, Any]:
        """Keyword-only arguments (of some overload) that every overload has, keyword-only or
        positional, with the same default: passing exactly that object (``is``: ``alpha=1``, not
        ``alpha=1.0``) is the same call as leaving the argument out (``add.Tensor``'s
        keyword-only ``alpha`` and ``add.Scalar``'s positional one)."""
        per_overload = [dict(zip(o.signature.names, o.signature.defaults)) for o in self.overloads]
        keyword_only = {name: value for o in self.overloads
                        for name, value in zip(o.keyword_only[1], o.signature.keyword_defaults or ())}
        return {name: value for name, value in keyword_only.items()
                if all(d.get(name, d) is value for d in per_overload)}

    def call(self, args: tuple, kwargs: dict) -> Any:
        """Run the operator on ``args``/``kwargs``: the cached fast path for this call's types, else the
        general dispatcher."""
        if kwargs:
            key = tuple(map(type, args)) + tuple(kwargs) + tuple(map(type, kwargs.values()))
        else:
            key = call_key(args)
        entry = self.cache.get(key) or self.entry(key, args, kwargs)
        run = entry.recording if grad_mode.enabled else entry.unrecorded
        if run is not None:
            return run(*args, *kwargs.values()) if kwargs else run(*args)
        return _run_general(entry.overload, args, kwargs)

    def entry(self, key: Any, args: tuple, kwargs: dict) -> CacheEntry:
        """Resolve and cache a call signature under ``key`` (see :class:`CacheEntry`)."""
        overload = self.resolve(args, kwargs)
        arg_types = tuple(map(type, args))
        if not kwargs:
            runner = _kernel_runner(overload, arg_types)
            recording = runner if overload.formula is None else _formula_runner(overload, arg_types, key, runner, self)
        elif tuple(kwargs) == overload.keyword_only[1] and len(args) == overload.keyword_only[0]:
            # Every keyword-only argument given, in schema order (``at.add(a, b, alpha=2)``):
            # the runner takes the keyword values after the positional ones.
            runner = _kernel_runner(overload, arg_types + tuple(map(type, kwargs.values())), True)
            recording = runner if overload.formula is None else None
        else:
            runner = recording = None
        entry = CacheEntry(overload, runner, recording, getattr(runner, "direct_kernel", None),
                           getattr(runner, "mixed_kernel", None))
        if overload.formula is not None and (runner is not None or recording is not None):
            # fast paths that would skip the formula's jvp on a dual (see the class docstring)
            if forward_mode.state.tangents is None:
                self.plain_entries.append((self.cache, key, entry, None))
            else:
                entry = _level_entry(self.cache, key, entry, len(args), tuple(kwargs), self.plain_entries)
        self.cache[key] = entry
        return entry

    def resolve(self, args: tuple, kwargs: dict) -> Overload:
        """The overload these arguments bind to, exact ones first; TypeError listing the schemas."""
        wrapped_match = None
        reasons = []
        for overload in self.overloads:
            try:
                bound = overload.signature.bind(args, kwargs)
            except TypeError as exc:
                reasons.append(f"  {overload.schema}: {exc}")
                continue
            mismatch = overload.signature.mismatch(bound)
            if mismatch is not None:
                reasons.append(f"  {overload.schema}: {mismatch}")
            elif not overload.signature.wraps_numbers(bound):
                return overload
            elif wrapped_match is None:
                wrapped_match = overload
        if wrapped_match is not None:
            return wrapped_match
        foreign = _torch_tensor_argument(self.overloads[0].signature.names, args, kwargs)
        if foreign is not None:
            raise TypeError(f"at.{self.name}: argument '{foreign}' is a torch.Tensor; the reference engine "
                            f"computes on its own tensors only: convert with engine.tensor(t.detach().numpy()) "
                            f"or torch.from_numpy(x.detach().numpy())")
        given = ", ".join([type(a).__name__ for a in args] + [f"{k}={type(v).__name__}" for k, v in kwargs.items()])
        raise TypeError(f"at.{self.name}({given}) matches no declared overload:\n" + "\n".join(reasons))

    def __repr__(self) -> str:
        return f"at.{self.name}"


def is_torch_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor (told by its type's module: torch is never imported)."""
    return type(value).__module__.split(".", 1)[0] == "torch" and hasattr(value, "requires_grad")


def _torch_tensor_argument(names: tuple[str, ...], args: tuple, kwargs: dict) -> str | None:
    """The name of the first argument that is, or is a list holding, a torch tensor."""
    given = [*zip(names, args), *kwargs.items()]
    for name, value in given:
        values = value if isinstance(value, (list, tuple)) else (value,)
        if any(is_torch_tensor(v) for v in values):
            return name
    return None


# Non-differentiable operators the Tensor API offers beyond the library (Python comparisons);
# a library declaration of the same operator takes precedence.
TENSOR_API_OPERATORS = tuple(
    f"{name}.{overload}(Tensor self, {kind} other) -> Tensor"
    for name in ("gt", "ge", "lt", "le", "eq", "ne")
    for overload, kind in (("Tensor", "Tensor"), ("Scalar", "Scalar")))


class Dispatcher:
    """The operator table built from the declared formulas and non-differentiable ops.

    It follows its ``formulas`` registries (the shipped library's by default;
    later registries replace earlier ones' entries of the same operator, in this
    table only): an operator declared after the table was built (a library
    formula file imported later) is picked up on the first call that names it,
    and :meth:`refresh` rebuilds everything. ``helpers``: functions that replace,
    in the formulas' globals, names that are not Python functions there (an
    imported corpus's C++ FunctionsManual names that the library has a helper for).
    """

    #: Every table made: forward mode turns the fast paths of all of them off and on.
    instances: weakref.WeakSet = weakref.WeakSet()

    def __init__(self, registries: tuple[Registry, ...] = (LIBRARY,),
                 helpers: dict[str, Callable[..., Any]] | None = None) -> None:
        self.registries = registries
        self.helpers = helpers or {}
        self.packets: dict[str, OperatorPacket] = {}
        #: the cache entries of formulas made with no forward-mode level open, which a level
        #: takes out of the caches (:meth:`open_level`): (cache, key, entry, its level entry or None)
        self.plain_entries: list[tuple[dict, tuple, CacheEntry, CacheEntry | None]] = []
        #: operators :meth:`define` declared: name -> (schema, formula or None, kernel)
        self.local: dict[str, tuple[str, DeclaredFormula | None, Callable[..., Any]]] = {}
        self._declared: tuple = ()
        #: ``at`` inside the formulas the engine runs (see :mod:`reference_engine.rebind`).
        self.operators = EngineOperators(lambda name: self.packet(name).op)
        #: Called after every rebuild (the Tensor methods are rebound to the new entry points).
        self.refresh_hooks: list[Callable[[], None]] = []
        Dispatcher.instances.add(self)

    def _sizes(self) -> tuple:
        return tuple((len(r.formulas), len(r.nondifferentiable)) for r in self.registries)

    def define(self, schema: str, kernel: Callable[..., Any], formula: Callable[..., Any] | None = None,
               output_differentiability: tuple[bool, ...] | None = None) -> Overload:
        """Declare an operator for this table only (not in the ``formulas`` registries, nor the
        engine's kernel table): its schema, NumPy kernel and optionally a formula written like
        a library one."""
        name = schema.split("(", 1)[0].strip()
        recorded = None if formula is None else declared_formula(formula)   # its @derivative(jvp=...)
        if output_differentiability is None and recorded is not None:
            output_differentiability = recorded.output_differentiability
        declared = None
        if formula is not None:     # the source stamp of its declaration, or of this call
            source = recorded.source if recorded is not None else source_stamp(formula.__code__.co_filename)
            declared = DeclaredFormula(schema, formula, output_differentiability,
                                       recorded.jvp if recorded is not None else None, source)
        self.local[name] = (schema, declared, kernel)
        self.refresh()
        return self.overload(name)

    def refresh(self) -> None:
        """Rebuild the table from the registries (after formulas were added or replaced)."""
        schemas: dict[str, tuple[FunctionSchema, DeclaredFormula | None]] = {}
        for text in TENSOR_API_OPERATORS:
            schema = parse_schema(text)
            schemas[str(schema.name)] = (schema, None)
        for registry in self.registries:
            for name, text in registry.nondifferentiable.items():
                schemas[name] = (parse_schema(text), None)
            for name, declared in registry.formulas.items():
                schemas[name] = (parse_schema(declared.schema), declared)
        for name, (text, declared, _) in self.local.items():
            schemas[name] = (parse_schema(text), declared)
        by_base: dict[str, list[Overload]] = {}
        for name, (schema, declared) in schemas.items():
            kernel = self.local[name][2] if name in self.local else KERNELS.get(name)
            by_base.setdefault(schema.name.base, []).append(Overload(schema, kernel, declared))
        self.packets.clear()        # in place: Tensor methods hold this dict
        self.plain_entries.clear()
        self.packets.update((base, OperatorPacket(base, overloads, self.plain_entries))
                            for base, overloads in by_base.items())
        self._declared = self._sizes()
        self.operators.clear()
        rebound: dict[int, Callable[..., Any]] = {}     # helpers shared by formulas are rebound once
        for overloads in by_base.values():
            for overload in overloads:
                if overload.formula is not None:
                    overload.bind_operators(self.operators, self.helpers, rebound)
        for hook in self.refresh_hooks:
            hook()

    def open_level(self) -> None:
        """Before a forward-mode level opens: take the formulas' cache entries that know nothing of
        duals out of the caches, putting back the level's entry where one was made before
        (see :class:`OperatorPacket`). Costs one step per such entry made since the last level."""
        for cache, key, plain, level in self.plain_entries:
            if cache.get(key) is plain:
                if level is None:
                    del cache[key]
                else:
                    cache[key] = level
        self.plain_entries.clear()

    def packet(self, name: str) -> OperatorPacket:
        """The operator ``name`` (base name, all its overloads); a clear error when undeclared."""
        packet = self.packets.get(name)
        if packet is None:
            if self._declared != self._sizes():
                self.refresh()
                packet = self.packets.get(name)
            if packet is None:
                raise AttributeError(
                    f"operator '{name}' is not declared: add a formula (@derivative) or a "
                    f"nondifferentiable(...) schema for it to the formula library")
        return packet

    def overload(self, full_name: str) -> Overload:
        """One overload by ``name.overload``."""
        for overload in self.packet(full_name.split(".", 1)[0]).overloads:
            if overload.name == full_name:
                return overload
        raise KeyError(f"operator {full_name} is not declared")

    def call(self, name: str, args: tuple, kwargs: dict) -> Any:
        """The :class:`formulas.Backend` entry point: ``at.name(*args, **kwargs)``."""
        packet = self.packets.get(name) or self.packet(name)
        if not kwargs:      # the common case, inlined: a cached positional call
            entry = packet.cache.get(call_key(args))
            if entry is not None:
                run = entry.recording if grad_mode.enabled else entry.unrecorded
                if run is not None:
                    return run(*args)
        return packet.call(args, kwargs)


dispatcher = Dispatcher()
