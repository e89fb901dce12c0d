"""Module functions, as torch's: ``engine.sin(x)``, ``engine.mm(a, b)``, ``engine.cat([a, b], 0)``.

Generated from the declared schemas: every declared operator is a module
function (its dispatcher entry point, looked up when the attribute is read, so
an operator declared later, by a user's formula file or ``define``, is one
too), and the composite methods of :mod:`reference_engine.methods`
(``matmul``, ``softmax``, ``max()``...) are the same methods called as
functions. ``reference_engine.__getattr__`` serves them.
"""
from __future__ import annotations

from typing import Any, Callable

from reference_engine.dispatch import dispatcher
from reference_engine.tensor import Tensor

#: Tensor methods built from declared operators that torch also offers as ``torch.<name>``.
COMPOSITES = ("argmax", "argmin", "clone", "flatten", "log_softmax", "matmul", "max", "mean", "min",
              "permute", "reshape", "softmax", "transpose")


def module_function(name: str) -> Callable[..., Any]:
    """``engine.<name>``: a composite, else the declared operator ``name`` (any overload);
    AttributeError naming what to declare when there is neither."""
    if name in COMPOSITES:
        return getattr(Tensor, name)
    if name.startswith("__"):
        raise AttributeError(f"module 'reference_engine' has no attribute '{name}'")
    return dispatcher.packet(name).op


def names() -> list[str]:
    """Every module function name (for ``dir(engine)``)."""
    return sorted(set(COMPOSITES) | set(dispatcher.packets))
