"""Forward-mode AD: ``jvp(f, primals, tangents)`` runs the formulas' ``jvp``.

Inside :func:`jvp` the tensors given as primals are *dual*: each carries a
tangent in the level's table. Every operator call on a dual goes through
:func:`run` (the dispatcher's fast paths are off while a level is open):

* an operator without a formula (comparisons, ``zeros_like``...) runs as
  usual and its outputs carry no tangent (they are not differentiable);
* a formula runs its forward (below autograd, as always), then its jvp with the
  inputs' tangents (zeros for an input without one) and the primals; the
  outputs become duals of the tangents it returns. The jvp is the formula's
  nested ``def jvp`` (taken from the formula's frame when it returns), or what
  ``@derivative(jvp=...)`` names: ``auto_element_wise`` calls the backward on
  the tangent, ``auto_linear`` calls the operator on the tangents, ``derived``
  runs the jvp :mod:`transpiler.derive_jvp` writes from the backward (the
  formula's source with that ``def jvp`` added, compiled once; inside
  :func:`derived_jvps` every formula runs its derived jvp instead of its own);
* a formula with neither raises torch's "Trying to use forward AD with <op>
  that does not support it" error.

The formula and its jvp run with the level suspended (their own operator calls
see plain tensors) and grad mode off: forward mode here does not record a
backward graph (no forward-over-reverse), and in-place methods on a dual raise.
"""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from reference_engine.grad_mode import grad_mode
from reference_engine.tensor import Tensor


class _ForwardState:
    """The open dual level: tangents by tensor identity, whether formulas are running, and
    whether every formula runs its derived jvp (:func:`derived_jvps`)."""

    __slots__ = ("tangents", "suspended", "derived")

    def __init__(self) -> None:
        self.tangents: dict[int, tuple[Tensor, Tensor]] | None = None   # None: no level open
        self.suspended = False
        self.derived = False

    @property
    def active(self) -> bool:
        return self.tangents is not None and not self.suspended


state = _ForwardState()


def tangent_of(tensor: Any) -> Tensor | None:
    """The tangent of a dual tensor of the open level, None for any other value."""
    if state.tangents is None or not isinstance(tensor, Tensor):
        return None
    entry = state.tangents.get(id(tensor))
    return entry[1] if entry is not None and entry[0] is tensor else None


def _make_dual(primal: Tensor, tangent: Tensor) -> Tensor:
    if tuple(tangent.sizes()) != tuple(primal.sizes()):
        raise RuntimeError(f"jvp: a tangent of shape {tuple(tangent.sizes())} for a primal of shape "
                           f"{tuple(primal.sizes())}; give each primal a tangent of its own shape")
    state.tangents[id(primal)] = (primal, tangent)
    return primal


def jvp(f: Callable[..., Any], primals: Sequence[Tensor], tangents: Sequence[Tensor]) -> tuple[Any, Any]:
    """``(f(*primals), J_f(primals) @ tangents)`` by forward mode, like ``torch.func.jvp``:
    outputs and their tangents, with the structure of ``f``'s result (a tensor or a tuple)."""
    from reference_engine.dispatch import Dispatcher

    if state.tangents is not None:
        raise RuntimeError("jvp: nested forward-mode levels are not supported by the reference engine")
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    previous_grad = grad_mode.enabled
    state.tangents = {}
    grad_mode.enabled = False
    for table in list(Dispatcher.instances):
        table.clear_caches()        # the cached fast paths know nothing of duals
    try:
        duals = [_make_dual(Tensor._wrap(p._value), t) for p, t in zip(primals, tangents)]
        outputs = f(*duals)
        if isinstance(outputs, (tuple, list)):
            return outputs, type(outputs)(_output_tangent(o) for o in outputs)
        return outputs, _output_tangent(outputs)
    finally:
        state.tangents = None
        grad_mode.enabled = previous_grad
        for table in list(Dispatcher.instances):
            table.clear_caches()


def _output_tangent(output: Tensor) -> Tensor:
    found = tangent_of(output)
    return found if found is not None else Tensor._wrap(np.zeros_like(output._value))


def run(overload: Any, bound: list) -> Any:
    """One operator call while a level is open (see the module docstring)."""
    inputs = _tensor_inputs(overload, bound)
    if overload.formula is None or not any(tangent_of(t) is not None for _, t in inputs):
        return overload.run_kernel(bound)
    if overload.signature.converted_positions:
        overload.signature.convert(bound)
    overload._wrap_inputs(bound)
    state.suspended = True
    try:
        outputs, backward, written = _call_formula(overload, bound)
        output_tangents = _jvp(overload, bound, backward, written)
    finally:
        state.suspended = False
    flags = overload.output_differentiability
    if isinstance(outputs, tuple):
        tangents = output_tangents if isinstance(output_tangents, tuple) else (output_tangents,)
        differentiable = [o for o, d in zip(outputs, flags) if d]
        if len(tangents) != len(differentiable):
            raise RuntimeError(f"the jvp of {overload.name} returned {len(tangents)} tangent(s) for "
                               f"{len(differentiable)} differentiable outputs; the reference engine takes them "
                               "in order: return one per differentiable output (None for none)")
        for output, tangent in zip(differentiable, tangents):
            if tangent is not None:
                _make_dual(output, tangent)
    elif isinstance(outputs, list):     # a Tensor[] output: its jvp returns a list of tangents
        if output_tangents is not None:
            if len(output_tangents) != len(outputs):
                raise RuntimeError(f"the jvp of {overload.name} returned {len(output_tangents)} tangent(s) for "
                                   f"a list of {len(outputs)} outputs; return one per output (None for none)")
            for output, tangent in zip(outputs, output_tangents):
                if tangent is not None:
                    _make_dual(output, tangent)
    elif output_tangents is not None:
        _make_dual(outputs, output_tangents)
    return outputs


def _tensor_inputs(overload: Any, bound: list) -> list[tuple[int, Any]]:
    found = [(i, bound[i]) for i in overload.signature.tensor_positions]
    for i in overload.signature.tensor_list_positions:
        found += [(i, t) for t in bound[i] or ()]
    return found


def _call_formula(overload: Any, bound: list) -> tuple[Any, Callable[..., Any], Callable[..., Any] | None]:
    """Run the formula's forward; also return its nested ``jvp`` (the local of its frame): the
    derived one when the formula asks for it or :func:`derived_jvps` is on."""
    first, names = overload.keyword_only
    formula = overload.formula
    if state.derived or overload.jvp_rule == "derived":
        formula = _derived_formula(overload.formula)
    code = formula.__code__
    found: dict[str, Any] = {}

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "return" and frame.f_code is code:
            found["jvp"] = frame.f_locals.get("jvp")

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        outputs, backward = formula(*bound[:first], **dict(zip(names, bound[first:])))
    finally:
        sys.setprofile(previous)
    return outputs, backward, found.get("jvp")


def _tangent(value: Any) -> Any:
    """An input's tangent, zeros when it has none (an undefined tangent means zero)."""
    if isinstance(value, list):
        return [_tangent(v) for v in value]
    if value is None:
        return None
    found = tangent_of(value)
    return found if found is not None else Tensor._wrap(np.zeros_like(value._value))


_DERIVED: dict[Any, Callable[..., Any]] = {}       # formula code object -> the formula with its derived jvp


@contextlib.contextmanager
def derived_jvps() -> Iterator[None]:
    """Inside the block every formula runs the jvp derived from its backward, whatever jvp it
    declares (how the tests prove the derivation against the written and auto jvps)."""
    previous, state.derived = state.derived, True
    try:
        yield
    finally:
        state.derived = previous


def derived_source(fn: Callable[..., Any], return_jvp: bool = False) -> str:
    """The source of formula ``fn`` with the jvp derived from its backward in place of its own
    (``def jvp`` before the final return; decorators dropped; ``return_jvp``: the formula returns
    ``outputs, backward, jvp``). Raises ``NotImplementedError`` with the derivation's reason when
    the backward cannot be transposed."""
    import libcst as cst

    from transpiler.derive_jvp import DerivationRefused, derive_jvp
    from transpiler.frontend import SHIPPED_LIBRARY, load_library, operator_table, read_module
    from transpiler.model import Library

    original = getattr(fn, "__wrapped__", fn)
    module = read_module(original.__code__.co_filename)
    formula = next((f for f in module.formulas if f.function == original.__name__), None)
    if formula is None:
        raise NotImplementedError(f"{original.__name__}: no formula of that name in {module.path}")
    operators = operator_table(load_library(str(SHIPPED_LIBRARY)), Library((module,)))
    try:
        jvp = derive_jvp(formula, operators)
    except DerivationRefused as refusal:
        raise NotImplementedError(f"Trying to use forward AD with {formula.op_name}: its derived jvp is refused: "
                                  f"{refusal.reason}") from None
    body = [s for s in formula.node.body.body
            if not (isinstance(s, cst.FunctionDef) and s.name.value == "jvp")]
    body.insert(len(body) - 1, jvp)
    if return_jvp:
        body[-1] = cst.parse_statement(f"return {cst.Module([]).code_for_node(formula.returned_display)}, backward, jvp")
    node = formula.node.with_changes(decorators=(), body=formula.node.body.with_changes(body=body))
    return cst.Module([]).code_for_node(node)


def derived_formula(fn: Callable[..., Any], return_jvp: bool = False) -> Callable[..., Any]:
    """Formula ``fn`` compiled from :func:`derived_source`, in ``fn``'s globals plus every
    declared helper (a derived jvp calls the helpers its transposes use)."""
    from formulas.dsl import REGISTRIES

    namespace = dict(fn.__globals__)
    for table in REGISTRIES.values():
        for name, helper in table.helpers.items():
            namespace.setdefault(name, helper)
    local: dict[str, Any] = {}
    exec(compile(derived_source(fn, return_jvp), fn.__code__.co_filename, "exec"), namespace, local)
    return local[getattr(fn, "__wrapped__", fn).__name__]


def _derived_formula(fn: Callable[..., Any]) -> Callable[..., Any]:
    """:func:`derived_formula` calling the engine's operators directly (as formulas are run), cached."""
    found = _DERIVED.get(fn.__code__)
    if found is None:
        from reference_engine import dispatcher
        from reference_engine.rebind import rebind

        found = _DERIVED[fn.__code__] = rebind(derived_formula(fn), dispatcher.operators, {}, dispatcher.helpers)
    return found


def _jvp(overload: Any, bound: list, backward: Callable[..., Any], written: Callable[..., Any] | None) -> Any:
    names = overload.signature.names
    if written is not None:
        code = written.__code__
        params = code.co_varnames[:code.co_argcount]
        values = {}
        for param in params:
            position = names.index(param[:-2])
            values[param] = _tangent(bound[position]) if param.endswith("_t") else bound[position]
        return written(**values)
    rule = overload.jvp_rule
    if rule == "auto_element_wise":
        (position,) = overload.signature.tensor_positions
        return backward(_tangent(bound[position]))
    if rule == "auto_linear":
        substituted = list(bound)
        for i in (*overload.signature.tensor_positions, *overload.signature.tensor_list_positions):
            substituted[i] = _tangent(bound[i])
        return overload.run_kernel(substituted)
    raise NotImplementedError(f"Trying to use forward AD with {overload.name} that does not support it "
                              "because its formula defines no jvp; add a nested `def jvp(...)` (or "
                              "@derivative(..., jvp=\"auto_linear\" / \"auto_element_wise\")) to the formula")


__all__ = ["derived_formula", "derived_jvps", "derived_source", "jvp", "run", "state", "tangent_of"]
