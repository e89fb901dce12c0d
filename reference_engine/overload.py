"""One declared operator (:class:`Overload`): its schema binding, NumPy kernel and formula.

An overload runs in one of three ways: its kernel alone (:meth:`Overload.run_kernel`),
its formula below autograd with the node recorded (:meth:`Overload.run`, through
:func:`~reference_engine.formula_node.record`), or, while a forward-mode level is open,
its formula and jvp (:func:`reference_engine.forward_mode.run`). The dispatcher
(:mod:`reference_engine.dispatch`) resolves a call to an overload and caches runners
specialised to the call's argument types.
"""
from __future__ import annotations

from collections import namedtuple
from typing import Any, Callable

import numpy as np

from formulas.dsl import DeclaredFormula
from reference_engine import forward_mode
from reference_engine.binding import Signature
from reference_engine.formula_node import record
from reference_engine.grad_mode import grad_mode
from reference_engine.kernels import VIEW_OPS
from reference_engine.rebind import rebind
from reference_engine.scalars import scalar_value
from reference_engine.tensor import Tensor
from reference_engine.views import make_view, mark_recorded
from transpiler.formula_facts import FormulaFacts, facts_of
from transpiler.schema import FunctionSchema, is_tensor_like


#: torch's node names where the engine's (the overload spelled out, ``Backward0``) differ from them
#: for an everyday idiom: ``x.clamp(0, 1)``, ``x.clamp(min=t)`` and ``clamp_`` (torch numbers the
#: derivatives of one name, Tensor bounds first) and ``x[::2]``.
TORCH_NODE_NAMES = {"clamp.Tensor": "ClampBackward0", "clamp": "ClampBackward1", "slice.Tensor": "SliceBackward0"}


class Overload:
    """One declared operator: its schema binding, kernel and (optional) formula."""

    __slots__ = ("name", "schema", "signature", "kernel", "formula", "declared", "node_name", "returns_kind",
                 "output_differentiability", "differentiable_positions", "is_view", "backward_plans",
                 "keyword_only", "num_differentiable_outputs", "return_type", "operators", "helpers", "_facts",
                 "scalar_parameters", "_scalar_methods")

    def __init__(self, schema: FunctionSchema, kernel: Callable[..., Any] | None,
                 formula: DeclaredFormula | None) -> None:
        self.name = str(schema.name)
        self.schema = schema
        self.signature = Signature(schema)
        self.kernel = kernel
        #: the formula as the engine runs it (``at`` is the engine's: :meth:`bind_operators`)
        self.formula = formula.fn if formula is not None else None
        self.declared = formula         # what ``@derivative`` (or ``define``) recorded
        self.operators: Any = None      # the engine operators and helpers the formula is rebound to
        self.helpers: dict[str, Callable[..., Any]] = {}
        self._facts: FormulaFacts | None = None
        self.node_name = TORCH_NODE_NAMES.get(self.name, schema.name.node_prefix + "Backward0")  # SumDimIntListBackward0
        self.returns_kind = _returns_kind(schema)
        #: the named tuple of a several-output op whose returns are named (``max.dim`` gives
        #: ``(values, indices)``, as ``torch.return_types.max``); None: a plain tuple.
        self.return_type = _return_type(schema) if self.returns_kind == "tuple" else None
        self.output_differentiability = schema.output_flags(
            formula.output_differentiability if formula is not None else None)
        self.num_differentiable_outputs = sum(self.output_differentiability)
        self.differentiable_positions = tuple(
            i for i, a in enumerate(a for a in schema.arguments if not a.is_out) if a.is_differentiable)
        self.is_view = self.name in VIEW_OPS or any(
            r.annotation is not None and not r.annotation.is_write for r in schema.returns)
        #: ``id()`` of a backward code object -> its :class:`~reference_engine.formula_node.BackwardPlan`
        #: (which holds the code object)
        self.backward_plans: dict = {}
        # Formulas take the schema's keyword-only arguments as keywords: (first index, names).
        self.keyword_only = (self.signature.n_positional, self.signature.names[self.signature.n_positional:])
        #: the formula's ``Scalar`` parameters: those it calls ``c10::Scalar`` methods on
        #: (:attr:`scalar_methods`) are given them when it runs
        self.scalar_parameters = frozenset() if formula is None else frozenset(
            name for name, kind in zip(self.signature.names, self.signature.kinds)
            if kind.base == "Scalar" and not kind.is_list)
        self._scalar_methods: tuple[int, ...] | None = None if self.scalar_parameters else ()

    @property
    def facts(self) -> FormulaFacts:
        """The front-end's facts about the formula (:mod:`transpiler.formula_facts`), read on first use."""
        found = self._facts
        if found is None:
            found = self._facts = facts_of(self.declared)
        return found

    @property
    def scalar_methods(self) -> tuple[int, ...]:
        """Positions of the ``Scalar`` arguments whose ``c10::Scalar`` methods the formula calls
        (``alpha.conj()``): the formula gets them as :func:`~reference_engine.scalars.scalar_value`
        gives them. From the facts, read on first use (an operator with no ``Scalar`` parameter
        reads none): the first time the formula runs, not when the table is built."""
        found = self._scalar_methods
        if found is None:
            called = self.facts.scalar_method_receivers
            names = self.scalar_parameters if called is None else self.scalar_parameters & called
            found = self._scalar_methods = tuple(i for i, name in enumerate(self.signature.names) if name in names)
        return found

    @property
    def scalar_methods_read(self) -> bool:
        """Whether :attr:`scalar_methods` is known without reading the facts."""
        return self._scalar_methods is not None

    def give_scalar_methods(self, bound: list) -> None:
        """Give the :attr:`scalar_methods` arguments of ``bound`` their methods (in place)."""
        for i in self.scalar_methods:
            bound[i] = scalar_value(bound[i])

    def bind_operators(self, operators: Any, helpers: dict[str, Callable[..., Any]],
                       rebound: dict[int, Callable[..., Any]]) -> None:
        """Run the formula with ``at`` = ``operators`` (a table's own), ``helpers`` replacing
        the C++ names an imported formula calls (see :func:`~reference_engine.rebind.rebind`)."""
        self.operators, self.helpers = operators, helpers
        self.formula = rebind(self.declared.fn, operators, rebound, helpers)

    def run(self, bound: list) -> Any:
        """Run on bound arguments: through the formula when recording, else the kernel."""
        if self.formula is not None and grad_mode.enabled and self._wrap_inputs(bound):
            if self.signature.converted_positions:
                self.signature.convert(bound)
            self.give_scalar_methods(bound)
            grad_mode.enabled = False
            try:
                first, names = self.keyword_only
                if names:
                    outputs, backward = self.formula(*bound[:first], **dict(zip(names, bound[first:])))
                else:
                    outputs, backward = self.formula(*bound)
            finally:
                grad_mode.enabled = True
            recorded = record(self, bound, outputs, backward)
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
            raise NotImplementedError(f"operator {self.name} is declared but the reference engine has no NumPy "
                                      f"kernel for it; add one to reference_engine/kernels/ (the module of its topic)")
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
        if forward_mode.state.active:
            return forward_mode.run(self, bound)
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
