"""The formula library and its DSL.

``from formulas import derivative, helper, at`` in a formula file (``family_member`` for a formula family). Importing
``formulas`` registers nothing by itself; :func:`load_library` imports every
formula module of this package (what the reference engine runs). Declarations
go to the registry of the declaring module's top-level package
(:func:`registry`): ``LIBRARY`` (``FORMULAS``, ``HELPERS``, ``NONDIFFERENTIABLE``)
holds this package's only.
"""
from __future__ import annotations

import importlib
import pkgutil

from formulas.dsl import (
    FORMULAS,
    HELPERS,
    LIBRARY,
    NONDIFFERENTIABLE,
    REGISTRIES,
    Backend,
    DeclaredFormula,
    Registry,
    Scalar,
    ScalarType,
    Tensor,
    TensorOptions,
    at,
    derivative,
    family_member,
    helper,
    nondifferentiable,
    registry,
    set_default_backend,
    use_backend,
)

__all__ = [
    "FORMULAS", "HELPERS", "LIBRARY", "NONDIFFERENTIABLE", "REGISTRIES", "Backend", "DeclaredFormula",
    "Registry", "at", "registry",
    "Scalar", "ScalarType", "Tensor", "TensorOptions",
    "derivative", "helper", "nondifferentiable", "set_default_backend", "use_backend", "family_member",
    "load_library",
]


def load_library() -> dict[str, DeclaredFormula]:
    """Import every module of the shipped library and return the registry."""
    for info in pkgutil.iter_modules(__path__):
        if info.name not in {"dsl", "torch"}:     # formulas.torch: the torch back end, not formulas
            importlib.import_module(f"{__name__}.{info.name}")
    return FORMULAS
