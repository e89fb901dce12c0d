"""Forward-mode AD for users: ``jvp(f, primals, tangents)`` runs the formulas' jvps.

The level's state and the per-operator rule live in :mod:`reference_engine.forward_mode`
(below the dispatcher); this module opens and closes a level around ``f``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from reference_engine.dispatch import Dispatcher
from reference_engine.forward_mode import (
    derived_formula, derived_jvps, derived_source, make_dual, output_tangent, state, tangent_of)
from reference_engine.grad_mode import grad_mode
from reference_engine.tensor import Tensor


def jvp(f: Callable[..., Any], primals: Sequence[Tensor], tangents: Sequence[Tensor]) -> tuple[Any, Any]:
    """``(f(*primals), J_f(primals) @ tangents)`` by forward mode, like ``torch.func.jvp``:
    outputs and their tangents, with the structure of ``f``'s result (a tensor or a tuple)."""
    if state.tangents is not None:
        raise RuntimeError("jvp: nested forward-mode levels are not supported by the reference engine")
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    previous_grad = grad_mode.enabled
    state.tangents = {}
    grad_mode.enabled = False
    for table in list(Dispatcher.instances):
        table.open_level()          # the cached fast paths that know nothing of duals go
    try:
        duals = [make_dual(Tensor._wrap(p._value), t) for p, t in zip(primals, tangents)]
        outputs = f(*duals)
        if isinstance(outputs, (tuple, list)):
            return outputs, type(outputs)(output_tangent(o) for o in outputs)
        return outputs, output_tangent(outputs)
    finally:
        state.tangents = None
        grad_mode.enabled = previous_grad


__all__ = ["derived_formula", "derived_jvps", "derived_source", "jvp", "state", "tangent_of"]
