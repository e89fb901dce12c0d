"""The dispatcher: ``at.X(...)`` and Tensor operators resolve and run here.

Layers, top to bottom:

1. **Resolution** (:class:`OperatorPacket`): a name (``sum``) has overloads
   (``sum``, ``sum.dim_IntList``); the first call with a given signature of
   argument types binds against each declared schema in declaration order,
   exact matches before ones that need a number wrapped as a tensor, and
   caches the winner for that signature.
2. **Autograd** (:meth:`Overload.run`): when grad mode is on, a formula
   exists and an input requires grad, the formula runs *below autograd*
   (grad mode off, so its ``at.*`` calls reach the kernels) and a
   :class:`~reference_engine.formula_node.FormulaNode` holding its backward
   closure becomes the outputs' ``grad_fn``.
3. **Kernels** (:mod:`reference_engine.kernels`): NumPy, one per declared op.
"""
from __future__ import annotations

import weakref
from collections import namedtuple
from typing import Any, Callable

import numpy as np

from formulas.dsl import LIBRARY, DeclaredFormula, Registry, declared as declared_formula
from reference_engine.binding import Signature
from reference_engine import forward_ad
from reference_engine.dtypes import DType
from reference_engine.formula_node import formula_recorder, record_formula
from reference_engine.grad_mode import grad_mode
from reference_engine.kernels import DEFAULT_KEYWORD_KERNELS, KERNELS, VIEW_OPS
from reference_engine.rebind import EngineOperators, rebind
from reference_engine.tensor import Tensor
from reference_engine.views import make_view, mark_recorded
from transpiler.schema import FunctionSchema, is_tensor_like, parse_schema


class Overload:
    """One declared operator: its schema binding, kernel and (optional) formula."""

    __slots__ = ("name", "schema", "signature", "kernel", "formula", "node_name", "returns_kind",
                 "output_differentiability", "differentiable_positions", "is_view", "backward_info",
                 "keyword_only", "num_differentiable_outputs", "return_type", "jvp_rule")

    def __init__(self, schema: FunctionSchema, kernel: Callable[..., Any] | None,
                 formula: DeclaredFormula | None) -> None:
        self.name = str(schema.name)
        self.schema = schema
        self.signature = Signature(schema)
        self.kernel = kernel
        self.formula = formula.fn if formula is not None else None
        self.jvp_rule = formula.jvp if formula is not None else None   # @derivative(jvp=...)
        self.node_name = schema.name.node_prefix + "Backward0"   # torch-style: SumDimIntListBackward0
        self.returns_kind = _returns_kind(schema)
        #: the named tuple of a several-output op whose returns are named (``max.dim`` gives
        #: ``(values, indices)``, as ``torch.return_types.max``); None: a plain tuple.
        self.return_type = _return_type(schema) if self.returns_kind == "tuple" else None
        diff = formula.output_differentiability if formula is not None else None
        self.output_differentiability = diff or tuple(
            is_tensor_like(r.type) for r in schema.returns)
        self.num_differentiable_outputs = sum(self.output_differentiability)
        self.differentiable_positions = tuple(
            i for i, a in enumerate(a for a in schema.arguments if not a.is_out) if a.is_differentiable)
        self.is_view = self.name in VIEW_OPS or any(
            r.annotation is not None and not r.annotation.is_write for r in schema.returns)
        self.backward_info: dict = {}     # backward code object -> formula_node.backward_plan
        # Formulas take the schema's keyword-only arguments as keywords: (first index, names).
        self.keyword_only = (self.signature.n_positional, self.signature.names[self.signature.n_positional:])

    def run(self, bound: list) -> Any:
        """Run on bound arguments: through the formula when recording, else the kernel."""
        if self.formula is not None and grad_mode.enabled and self._wrap_inputs(bound):
            if self.signature.converted_positions:
                self.signature.convert(bound)
            grad_mode.enabled = False
            try:
                first, names = self.keyword_only
                if names:
                    outputs, backward = self.formula(*bound[:first], **dict(zip(names, bound[first:])))
                else:
                    outputs, backward = self.formula(*bound)
            finally:
                grad_mode.enabled = True
            recorded = record_formula(self, bound, outputs, backward)
            if not self.is_view:
                result = recorded
            elif self.returns_kind == "list":
                result = [mark_recorded(out) for out in recorded]
            else:
                result = mark_recorded(recorded)
            return result if self.return_type is None else self.return_type(*result)
        return self.run_kernel(bound)

    def _wrap_inputs(self, bound: list) -> bool:
        """Make every tensor argument a Tensor (numbers become wrapped numbers); whether
        one of them requires grad."""
        requires_grad = False
        for i in self.signature.tensor_positions:
            value = bound[i]
            if type(value) is Tensor:
                if value._requires_grad:
                    requires_grad = True
            elif value is not None:
                value = bound[i] = _as_tensor(value)
                requires_grad = requires_grad or value._requires_grad
        for i in self.signature.tensor_list_positions:
            values = bound[i]
            if values is not None:
                values = bound[i] = [v if v is None or isinstance(v, Tensor) else _as_tensor(v) for v in values]
                requires_grad = requires_grad or any(v is not None and v._requires_grad for v in values)
        return requires_grad

    def run_kernel(self, bound: list) -> Any:
        """Unwrap tensors (numbers stay Python scalars), call the NumPy kernel, wrap its result."""
        kernel = self.kernel
        if kernel is None:
            raise NotImplementedError(f"operator {self.name} is declared but the reference engine has "
                                      f"no NumPy kernel for it; add one to reference_engine/kernels.py")
        if self.signature.converted_positions:
            self.signature.convert(bound)
        first = bound[0] if bound else None
        view_arguments = bound[1:] if self.is_view else None
        for i in self.signature.tensor_positions:
            value = bound[i]
            if type(value) is Tensor or isinstance(value, Tensor):
                bound[i] = value._value
        for i in self.signature.tensor_list_positions:
            if bound[i] is not None:
                bound[i] = [v._value if isinstance(v, Tensor) else v for v in bound[i]]
        out = kernel(*bound)
        kind = self.returns_kind
        if kind == "tensor":
            result = Tensor._wrap(out if type(out) is np.ndarray else np.asarray(out))
            if self.is_view and type(first) is Tensor and np.may_share_memory(result._data, first._data):
                make_view(result, first, self, view_arguments)
            return result
        if kind == "tuple":
            results = tuple(Tensor._wrap(np.asarray(o)) for o in out)
            return results if self.return_type is None else self.return_type(*results)
        if kind == "list":
            results = [Tensor._wrap(np.asarray(o)) for o in out]
            if self.is_view and type(first) is Tensor:
                for result in results:
                    if np.may_share_memory(result._data, first._data):
                        make_view(result, first, self, view_arguments, multi_output=True)
            return results
        return out

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call exactly this overload (``dispatcher.overload("sum.dim_IntList")(x, [0])``)."""
        bound = self.signature.bind(args, kwargs)
        if forward_ad.state.active:
            return forward_ad.run(self, bound)
        return self.run(bound)

    def __repr__(self) -> str:
        return f"<operator {self.schema}>"


def _as_tensor(value: Any) -> Tensor:
    if isinstance(value, Tensor):
        return value
    return Tensor._wrapped_number(value)


def _returns_kind(schema: FunctionSchema) -> str:
    returns = schema.returns
    if len(returns) == 1 and is_tensor_like(returns[0].type):
        return "list" if "[" in str(returns[0].type) else "tensor"
    if len(returns) > 1 and all(is_tensor_like(r.type) for r in returns):
        return "tuple"
    return "value"


def _return_type(schema: FunctionSchema) -> type | None:
    names = [r.name for r in schema.returns]
    if None in names:
        return None
    named = namedtuple(schema.name.base, names)
    named.__module__ = "reference_engine.return_types"
    return named


_NO_CONVERSION = (list, type(None), DType)


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
    # The runners below are the hottest code of the engine: each inlines ``Tensor._wrap``.
    new = object.__new__
    if unwrap == (True,) and simple and not tail:
        def run_unary(a):
            out = kernel(a._value)
            t = new(Tensor)
            t._data = t._value = out if type(out) is ndarray else asarray(out)
            t._requires_grad = False
            t._grad_fn = t.grad = None
            t._output_nr = 0
            t._version = None
            return t
        run_unary.direct_kernel = kernel     # OperatorPacket's entry point inlines this runner
        return run_unary
    # Operands of one dtype: NumPy's result type is torch's, and a promoting kernel's bare ufunc
    # (``same_dtype``) runs; mixed dtypes go through the kernel, which applies torch's rules.
    same_dtype = getattr(kernel, "same_dtype", kernel)
    if unwrap == (True, True) and simple and not tail:
        def run_binary(a, b):
            if a._data.dtype is b._data.dtype:
                out = same_dtype(a._value, b._value)
            else:
                out = kernel(a._value, b._value)
            t = new(Tensor)
            t._data = t._value = out if type(out) is ndarray else asarray(out)
            t._requires_grad = False
            t._grad_fn = t.grad = None
            t._output_nr = 0
            t._version = None
            return t
        run_binary.direct_kernel = same_dtype
        run_binary.mixed_kernel = kernel
        return run_binary
    if unwrap[:2] == (True, True) and not any(unwrap[2:]) and simple:
        def run_binary_and_values(a, b, *values):       # values: non-tensor arguments (``alpha``)
            out = kernel(a._value, b._value, *values, *tail)
            t = new(Tensor)
            t._data = t._value = out if type(out) is ndarray else asarray(out)
            t._requires_grad = False
            t._grad_fn = t.grad = None
            t._output_nr = 0
            t._version = None
            return t
        return run_binary_and_values
    if unwrap == (True, False) and simple:
        def run_tensor_other(a, b):
            out = kernel(a._value, b, *tail)
            t = new(Tensor)
            t._data = t._value = out if type(out) is ndarray else asarray(out)
            t._requires_grad = False
            t._grad_fn = t.grad = None
            t._output_nr = 0
            t._version = None
            return t
        return run_tensor_other

    def run_any(*args):
        out = kernel(*[a._value if u else a for a, u in zip(args, unwrap)], *tail)
        result = wrap(out if type(out) is ndarray else asarray(out))
        if overload.is_view and unwrap[0] and np.may_share_memory(result._data, args[0]._data):
            make_view(result, args[0], overload, (*args[1:], *tail))
        return result
    return run_any


def _formula_runner(overload: Overload, arg_types: tuple[type, ...],
                    kernel_runner: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """The recording path for positional calls whose tensor arguments are all Tensors,
    keyword-only arguments left at their defaults (None when binding, conversion or
    number wrapping is needed: ``Overload.run`` handles those). It falls back to
    ``kernel_runner`` when no input requires grad."""
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
    recorder = formula_recorder(overload, kernel_runner, len(arg_types), dict(zip(overload.keyword_only[1], tail)))
    if not overload.is_view:
        return recorder

    def record_view(*args: Any) -> Any:
        return mark_recorded(recorder(*args))
    return record_view


class OperatorPacket:
    """Every overload of one operator name, with a per-signature resolution cache.

    The cache maps the argument types of a call to the resolved overload and,
    for plain positional calls, runners specialised to those types (no
    binding): one for the kernel, used whenever nothing is recorded, and one
    that records the formula when an input requires grad.
    """

    __slots__ = ("name", "overloads", "cache", "op", "binary")

    def __init__(self, name: str, overloads: list[Overload]) -> None:
        self.name = name
        self.overloads = overloads
        self.cache: dict[tuple, tuple[Overload, Callable[..., Any] | None, Callable[..., Any] | None]] = {}
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
        """``op(*args, **kwargs)``: :meth:`call` with a cached positional call inlined. It is
        ``at.<name>`` for the engine's formulas and the Tensor methods/operators of this name."""
        cache, call, mode = self.cache, self.call, grad_mode
        new, ndarray, asarray = object.__new__, np.ndarray, np.asarray
        defaults = self._keyword_defaults()

        def op(*args: Any, **kwargs: Any) -> Any:
            if kwargs:      # keywords given their defaults (``alpha=1``) make a positional call
                for name, value in kwargs.items():
                    if defaults.get(name, defaults) is not value:
                        return call(args, kwargs)
            n = len(args)
            if n == 2:
                entry = cache.get((type(args[0]), type(args[1])))
            elif n == 1:
                entry = cache.get((type(args[0]),))
            else:
                entry = cache.get(tuple(map(type, args)))
            if entry is not None:
                if mode.enabled:
                    run = entry[2]
                elif entry[3] is not None:      # run_unary / run_binary, inlined
                    if n == 1:
                        out = entry[3](args[0]._value)
                    else:
                        a, b = args
                        out = (entry[3] if a._data.dtype is b._data.dtype else entry[4])(a._value, b._value)
                    t = new(Tensor)
                    t._data = t._value = out if type(out) is ndarray else asarray(out)
                    t._requires_grad = False
                    t._grad_fn = t.grad = t._version = None
                    t._output_nr = 0
                    return t
                else:
                    run = entry[1]
                if run is not None:
                    return run(*args)
            return call(args, {})

        op.__name__ = op.__qualname__ = self.name
        return op

    def _unary_entry_point(self) -> Callable[..., Any]:
        """``op(a)``: :meth:`_entry_point` for operators that take one tensor (no ``*args``,
        no keywords to look at); more arguments go to :meth:`call`, which reports them."""
        cache, call, mode = self.cache, self.call, grad_mode
        new, ndarray, asarray = object.__new__, np.ndarray, np.asarray

        def op(a: Any, *more: Any, **kwargs: Any) -> Any:
            if more or kwargs:
                return call((a, *more), kwargs)
            entry = cache.get((type(a),))
            if entry is not None:
                if mode.enabled:
                    if entry[2] is not None:
                        return entry[2](a)
                elif entry[3] is not None:      # run_unary, inlined
                    out = entry[3](a._value)
                    t = new(Tensor)
                    t._data = t._value = out if type(out) is ndarray else asarray(out)
                    t._requires_grad = False
                    t._grad_fn = t.grad = t._version = None
                    t._output_nr = 0
                    return t
                elif entry[1] is not None:
                    return entry[1](a)
            return call((a,), {})

        op.__name__ = op.__qualname__ = self.name
        return op

    def _binary_entry_point(self) -> Callable[..., Any]:
        """``binary(a, b)``: :meth:`_entry_point` for a call with exactly two arguments."""
        cache, call, mode = self.cache, self.call, grad_mode
        new, ndarray, asarray = object.__new__, np.ndarray, np.asarray

        def binary(a: Any, b: Any) -> Any:
            entry = cache.get((type(a), type(b)))
            if entry is not None:
                if mode.enabled:
                    if entry[2] is not None:
                        return entry[2](a, b)
                elif entry[3] is not None:      # run_binary, inlined
                    out = (entry[3] if a._data.dtype is b._data.dtype else entry[4])(a._value, b._value)
                    t = new(Tensor)
                    t._data = t._value = out if type(out) is ndarray else asarray(out)
                    t._requires_grad = False
                    t._grad_fn = t.grad = t._version = None
                    t._output_nr = 0
                    return t
                elif entry[1] is not None:
                    return entry[1](a, b)
            if type(b) is np.ndarray:       # ``t + array``: the array is a tensor, as in torch
                b = Tensor(b)
            elif isinstance(b, np.generic):     # ``t * np.float64(2)``: a Python number (weak dtype)
                b = b.item()
            return call((a, b), {})

        binary.__name__ = binary.__qualname__ = self.name
        return binary

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
        key = tuple(map(type, args))
        if kwargs:
            key += tuple(kwargs) + tuple(map(type, kwargs.values()))
        entry = self.cache.get(key) or self.entry(key, args, kwargs)
        run = entry[2] if grad_mode.enabled else entry[1]
        if run is not None:
            return run(*args, *kwargs.values()) if kwargs else run(*args)
        overload = entry[0]
        if not kwargs and len(args) == overload.signature.positional_arity:
            bound = list(args)
        else:
            bound = overload.signature.bind(args, kwargs)
        if forward_ad.state.active:
            return forward_ad.run(overload, bound)
        if overload.formula is not None and grad_mode.enabled:
            return overload.run(bound)
        return overload.run_kernel(bound)

    def entry(self, key: tuple, args: tuple, kwargs: dict) -> tuple:
        """Resolve and cache a call signature: ``(overload, runner with grad mode off,
        runner with grad mode on, kernel, mixed-dtype kernel)``; a runner is None where the
        call needs general binding. Runners take the positional arguments, then the keyword
        values (in schema order). ``kernel`` is set when the grad-mode-off runner only unwraps
        one or two Tensors, calls it and wraps the result: the entry point then does that
        inline (with two Tensors of different dtypes it calls the mixed-dtype kernel, which
        applies torch's type promotion)."""
        overload = self.resolve(args, kwargs)
        if forward_ad.state.tangents is not None:      # a dual level is open: no fast paths (see forward_ad)
            entry = self.cache[key] = (overload, None, None, None)
            return entry
        if not kwargs:
            runner = _kernel_runner(overload, key)
            recording = runner if overload.formula is None else _formula_runner(overload, key, runner)
        elif tuple(kwargs) == overload.keyword_only[1] and len(args) == overload.keyword_only[0]:
            # Every keyword-only argument given, in schema order (``at.add(a, b, alpha=2)``):
            # the runner takes the keyword values after the positional ones.
            runner = _kernel_runner(overload, key[:len(args)] + tuple(map(type, kwargs.values())), True)
            recording = runner if overload.formula is None else None
        else:
            runner = recording = None
        entry = self.cache[key] = (overload, runner, recording, getattr(runner, "direct_kernel", None),
                                   getattr(runner, "mixed_kernel", None))
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
        jvp_rule = recorded.jvp if recorded is not None else None
        if output_differentiability is None and recorded is not None:
            output_differentiability = recorded.output_differentiability
        declared = None if formula is None else DeclaredFormula(schema, formula, output_differentiability, jvp_rule)
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
        self.packets.update((base, OperatorPacket(base, overloads)) for base, overloads in by_base.items())
        self._declared = self._sizes()
        self.operators.clear()
        rebound: dict[int, Callable[..., Any]] = {}     # helpers shared by formulas are rebound once
        for overloads in by_base.values():
            for overload in overloads:
                if overload.formula is not None:
                    overload.formula = rebind(overload.formula, self.operators, rebound, self.helpers)
        for hook in self.refresh_hooks:
            hook()

    def clear_caches(self) -> None:
        """Forget every resolved call signature (forward mode turns the fast paths off and on)."""
        for packet in self.packets.values():
            packet.cache.clear()

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
            entry = packet.cache.get(tuple(map(type, args)))
            if entry is not None:
                run = entry[2] if grad_mode.enabled else entry[1]
                if run is not None:
                    return run(*args)
        return packet.call(args, kwargs)


dispatcher = Dispatcher()
