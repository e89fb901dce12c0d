"""Forward mode below the user's :func:`~reference_engine.forward_ad.jvp`: the open level's
state and one operator call on duals (:func:`run`).

While a level is open the tensors given as primals are *dual*: each carries a
tangent in the level's table. Every operator call of a formula the level makes
itself (the user's function's calls) goes through :func:`run`; the calls inside a
formula or jvp (the level suspended) take the dispatcher's cached fast paths, as
with no level open (see :class:`~reference_engine.dispatch.OperatorPacket`):

* an operator without a formula (comparisons, ``zeros_like``...) runs as
  usual and its outputs carry no tangent (they are not differentiable);
* a formula runs its forward (below autograd, as always), then its jvp with the
  inputs' tangents (zeros for an input without one) and the primals; the
  outputs become duals of the tangents it returns. What the jvp is comes from the
  formula's facts (:mod:`transpiler.formula_facts`): a nested ``def jvp`` is reached
  through the formula compiled once from the front-end's model with the jvp added
  to its return (:func:`formula_returning_jvp`); ``auto_element_wise`` calls the
  backward on the tangent, ``auto_linear`` calls the operator on the tangents,
  ``derived`` runs the jvp :mod:`transpiler.derive_jvp` writes from the backward
  (inside :func:`derived_jvps` every formula runs its derived jvp instead of its own);
* a formula with neither raises torch's "Trying to use forward AD with <op>
  that does not support it" error.

The formula and its jvp run with the level suspended (their own operator calls
see plain tensors) and grad mode off: forward mode here does not record a
backward graph (no forward-over-reverse), and in-place methods on a dual raise.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from reference_engine.rebind import rebind
from reference_engine.tensor import Tensor
from transpiler.formula_facts import facts_of, formula_model, model_of_file


class Dual(NamedTuple):
    """A primal of the open level and its tangent (the primal is kept: ids are reused)."""

    primal: Tensor
    tangent: Tensor


class _ForwardState:
    """The open dual level: tangents by tensor identity, whether formulas are running, and
    whether every formula runs its derived jvp (:func:`derived_jvps`)."""

    __slots__ = ("tangents", "suspended", "derived")

    def __init__(self) -> None:
        self.tangents: dict[int, Dual] | None = None   # None: no level open
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
    dual = state.tangents.get(id(tensor))
    return dual.tangent if dual is not None and dual.primal is tensor else None


def make_dual(primal: Tensor, tangent: Tensor) -> Tensor:
    """Give ``primal`` the tangent ``tangent`` in the open level."""
    if tuple(tangent.sizes()) != tuple(primal.sizes()):
        raise RuntimeError(f"jvp: a tangent of shape {tuple(tangent.sizes())} for a primal of shape "
                           f"{tuple(primal.sizes())}; give each primal a tangent of its own shape")
    state.tangents[id(primal)] = Dual(primal, tangent)
    return primal


def output_tangent(output: Tensor) -> Tensor:
    """The tangent of an output of the user's function: zeros when it has none."""
    found = tangent_of(output)
    return found if found is not None else Tensor._wrap(np.zeros_like(output._value))


def run(overload: Any, bound: list) -> Any:
    """One operator call while a level is open (see the module docstring)."""
    inputs = _tensor_inputs(overload, bound)
    if overload.formula is None or not any(tangent_of(t) is not None for _, t in inputs):
        return overload.run_kernel(bound)
    if overload.signature.converted_positions:
        overload.signature.convert(bound)
    overload.give_scalar_methods(bound)
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
                make_dual(output, tangent)
    elif isinstance(outputs, list):     # a Tensor[] output: its jvp returns a list of tangents
        if output_tangents is not None:
            if len(output_tangents) != len(outputs):
                raise RuntimeError(f"the jvp of {overload.name} returned {len(output_tangents)} tangent(s) for "
                                   f"a list of {len(outputs)} outputs; return one per output (None for none)")
            for output, tangent in zip(outputs, output_tangents):
                if tangent is not None:
                    make_dual(output, tangent)
    elif output_tangents is not None:
        make_dual(outputs, output_tangents)
    return outputs


def _tensor_inputs(overload: Any, bound: list) -> list[tuple[int, Any]]:
    found = [(i, bound[i]) for i in overload.signature.tensor_positions]
    for i in overload.signature.tensor_list_positions:
        found += [(i, t) for t in bound[i] or ()]
    return found


def _call_formula(overload: Any, bound: list) -> tuple[Any, Callable[..., Any], Callable[..., Any] | None]:
    """Run the formula's forward; also return its nested ``jvp`` when its facts say it has one
    (the derived one when the formula asks for it or :func:`derived_jvps` is on)."""
    first, names = overload.keyword_only
    arguments, keywords = bound[:first], dict(zip(names, bound[first:]))
    rule = overload.facts.jvp
    if state.derived or rule == "derived":
        return formula_returning_jvp(overload, derived=True)(*arguments, **keywords)
    if rule == "written":
        return formula_returning_jvp(overload, derived=False)(*arguments, **keywords)
    outputs, backward = overload.formula(*arguments, **keywords)
    return outputs, backward, None


def _tangent(value: Any) -> Any:
    """An input's tangent, zeros when it has none (an undefined tangent means zero)."""
    if isinstance(value, list):
        return [_tangent(v) for v in value]
    if value is None:
        return None
    found = tangent_of(value)
    return found if found is not None else Tensor._wrap(np.zeros_like(value._value))


#: (formula as the engine runs it, derived?) -> that formula compiled to return its jvp too.
_RETURNING_JVP: dict[tuple[Callable[..., Any], bool], Callable[..., Any]] = {}


@contextlib.contextmanager
def derived_jvps() -> Iterator[None]:
    """Inside the block every formula runs the jvp derived from its backward, whatever jvp it
    declares (how the tests prove the derivation against the written and auto jvps)."""
    previous, state.derived = state.derived, True
    try:
        yield
    finally:
        state.derived = previous


def _model(fn: Callable[..., Any]) -> Any:
    """Formula ``fn``'s declaration, whose facts say the front-end modelled it, or
    NotImplementedError saying why it did not."""
    from formulas.dsl import DeclaredFormula, declared, source_stamp

    original = getattr(fn, "__wrapped__", fn)
    record = declared(original) or DeclaredFormula("?", original, None, None,
                                                   source_stamp(original.__code__.co_filename))
    facts = facts_of(record)
    if not facts.modelled:
        raise NotImplementedError(f"{original.__name__}: the front-end has no model of it: {facts.unread_because}")
    return record


def formula_source(fn: Callable[..., Any], *, derived: bool, return_jvp: bool) -> str:
    """The source of formula ``fn`` from the front-end's model, decorators dropped; ``derived``:
    the jvp derived from its backward in place of its own (``def jvp`` before the final
    return); ``return_jvp``: the formula returns ``outputs, backward, jvp``. Raises
    ``NotImplementedError`` with the derivation's reason when the backward cannot be transposed."""
    return _source(_model(fn), derived, return_jvp)


def _source(declared: Any, derived: bool, return_jvp: bool) -> str:
    import libcst as cst

    from transpiler.derive_jvp import DerivationRefused, derive_jvp, with_jvp
    from transpiler.frontend import SHIPPED_LIBRARY, load_library, operator_table
    from transpiler.model import Library

    formula = formula_model(declared)
    jvp = None
    if derived:
        operators = operator_table(load_library(str(SHIPPED_LIBRARY)), Library((model_of_file(declared.source),)))
        try:
            jvp = derive_jvp(formula, operators)
        except DerivationRefused as refusal:
            raise NotImplementedError(f"Trying to use forward AD with {formula.op_name}: its derived jvp is "
                                      f"refused: {refusal.reason}") from None
    return cst.Module([]).code_for_node(with_jvp(formula, jvp, return_jvp=return_jvp))


def derived_source(fn: Callable[..., Any], return_jvp: bool = False) -> str:
    """The source of formula ``fn`` with the jvp derived from its backward in place of its own
    (:func:`formula_source`)."""
    return formula_source(fn, derived=True, return_jvp=return_jvp)


def _compiled(fn: Callable[..., Any], source: str, namespace: dict[str, Any]) -> Callable[..., Any]:
    local: dict[str, Any] = {}
    exec(compile(source, fn.__code__.co_filename, "exec"), namespace, local)
    return local[getattr(fn, "__wrapped__", fn).__name__]


def _with_helpers(fn: Callable[..., Any]) -> dict[str, Any]:
    """``fn``'s globals plus every declared helper (a derived jvp calls the helpers its
    transposes use)."""
    from formulas.dsl import REGISTRIES

    namespace = dict(fn.__globals__)
    for table in REGISTRIES.values():
        for name, helper in table.helpers.items():
            namespace.setdefault(name, helper)
    return namespace


def derived_formula(fn: Callable[..., Any], return_jvp: bool = False) -> Callable[..., Any]:
    """Formula ``fn`` compiled from :func:`derived_source`, in ``fn``'s globals plus every
    declared helper."""
    return _compiled(fn, derived_source(fn, return_jvp), _with_helpers(fn))


def formula_returning_jvp(overload: Any, derived: bool) -> Callable[..., Any]:
    """The overload's formula, as the engine runs it (``at`` is the engine's), compiled once from
    the front-end's model to return ``outputs, backward, jvp``: its own nested jvp, or
    (``derived``) the one derived from its backward."""
    fn = overload.formula
    key = (fn, derived)
    found = _RETURNING_JVP.get(key)
    if found is None:
        facts = overload.facts
        if not facts.modelled:
            raise NotImplementedError(f"Trying to use forward AD with {overload.name}: the front-end has no "
                                      f"model of its formula ({facts.unread_because}), so its jvp is not read")
        source = _source(overload.declared, derived, return_jvp=True)
        if derived:
            found = rebind(_compiled(fn, source, _with_helpers(fn)), overload.operators, {}, overload.helpers)
        else:
            found = _compiled(fn, source, fn.__globals__)
        _RETURNING_JVP[key] = found
    return found


#: a nested jvp's code -> the argument names it was read against and, per parameter in order,
#: the position of its argument and whether it takes that argument's tangent (``<name>_t``):
#: worked out once per jvp, not on every call
_JVP_PARAMETERS: dict[Any, tuple[tuple[str, ...], tuple[tuple[int, bool], ...]]] = {}


def _jvp_parameters(code: Any, names: tuple[str, ...]) -> tuple[tuple[int, bool], ...]:
    found = _JVP_PARAMETERS.get(code)
    if found is None or found[0] is not names:
        found = _JVP_PARAMETERS[code] = (names, tuple(
            (names.index(param[:-2]), param.endswith("_t")) for param in code.co_varnames[:code.co_argcount]))
    return found[1]


def _jvp(overload: Any, bound: list, backward: Callable[..., Any], written: Callable[..., Any] | None) -> Any:
    if written is not None:
        return written(*[_tangent(bound[position]) if tangent else bound[position]
                         for position, tangent in _jvp_parameters(written.__code__, overload.signature.names)])
    rule = overload.facts.jvp
    if rule == "auto_element_wise":
        (position,) = overload.signature.tensor_positions
        return backward(_tangent(bound[position]))
    if rule == "auto_linear":
        substituted = list(bound)
        for i in (*overload.signature.tensor_positions, *overload.signature.tensor_list_positions):
            substituted[i] = _tangent(bound[i])
        return overload.run_kernel(substituted)
    facts = overload.facts
    why = "its formula defines no jvp"
    if not facts.modelled:
        why = f"the front-end has no model of its formula ({facts.unread_because}), so no nested jvp is read"
    elif facts.jvp_left_out is not None:
        why = f"its written jvp was left out: {facts.jvp_left_out}"
    raise NotImplementedError(f"Trying to use forward AD with {overload.name} that does not support it "
                              f"because {why}; add a nested `def jvp(...)` (or "
                              "@derivative(..., jvp=\"auto_linear\" / \"auto_element_wise\")) to the formula")


__all__ = ["derived_formula", "derived_jvps", "derived_source", "formula_source", "make_dual", "output_tangent",
           "run", "state", "tangent_of"]
