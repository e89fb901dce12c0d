"""Inputs for proving a formula, made from its schema.

Every Tensor argument is float64 with values drawn from (0.2, 0.9): away from the kinks
of the usual pointwise functions (0 for ``abs``/``relu``, ±1 for ``asin``, the poles and
branch cuts of ``log``/``sqrt``...) and with no ties. The shapes are one family per case:
a matrix, shapes that broadcast against each other, size 1, a 0-dim scalar and size 0
(``transpiler.prove.check.package_cases`` drops those torch's operator refuses).
Non-tensor arguments take their schema default; the ones without a default that a case
can still choose are ``dim``-like ints (0), ``bool`` (False) and numbers (0.5); any
other makes the op need cases of its own (``PROVE_CASES``, ``docs/testing.md``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from transpiler.schema import BaseType, FunctionSchema, ListType, OptionalType, Type

#: (name, the shape of the first tensor argument, the shape of every other)
SHAPE_FAMILIES: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...] = (
    ("2x3", (2, 3), (2, 3)),
    ("broadcast", (2, 3), (3,)),
    ("broadcast-1", (2, 1), (1, 3)),
    ("size-1", (1,), (1,)),
    ("scalar", (), ()),
    ("size-0", (0, 3), (0, 3)),
)
LOW, HIGH = 0.2, 0.9


@dataclass(frozen=True)
class Case:
    """One call of an operator: positional values (NumPy arrays for tensors) and keywords."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    differentiable: tuple[int, ...] | None = None   # positions of ``args`` differentiated (None: every float64 one)
    tiers: tuple[str, ...] | None = None            # the tiers it is run on (None: every tier)


class NoCases(ValueError):
    """The schema has an argument whose value a generated case cannot choose."""


def _is_tensor(ty: Type) -> bool:
    base = ty.elem if isinstance(ty, OptionalType) else ty
    return isinstance(base, BaseType) and base.name == "Tensor"


def _is_tensor_list(ty: Type) -> bool:
    base = ty.elem if isinstance(ty, OptionalType) else ty
    return isinstance(base, ListType) and _is_tensor(base.elem)


def _chosen_value(name: str, ty: Type) -> Any:
    """A value for a non-tensor argument without a default."""
    base = ty.elem if isinstance(ty, OptionalType) else ty
    if isinstance(ty, OptionalType):
        return None
    if isinstance(base, BaseType):
        if base.name in ("int", "SymInt") and "dim" in name:
            return 0
        if base.name == "bool":
            return False
        if base.name in ("float", "Scalar"):
            return 0.5
    raise NoCases(f"no generated value for `{name}: {ty}`; give the op cases of its own")


def schema_cases(schema: FunctionSchema, seed: int = 0) -> list[Case]:
    """One case per shape family that fits the schema (the broadcasting ones only with two or
    more tensors, the ``dim``-taking ones only on tensors with a dimension)."""
    arguments = [a for a in schema.arguments if not a.is_out]
    tensors = [a for a in arguments if _is_tensor(a.type) or _is_tensor_list(a.type)]
    rng = np.random.default_rng(seed)
    found = []
    for family, first, other in SHAPE_FAMILIES:
        if family.startswith("broadcast") and len(tensors) < 2:
            continue
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for argument in arguments:
            if _is_tensor(argument.type) or _is_tensor_list(argument.type):
                shape = first if argument is tensors[0] else other
                value: Any = rng.uniform(LOW, HIGH, shape)
                if _is_tensor_list(argument.type):
                    value = [value, rng.uniform(LOW, HIGH, shape)]
            elif argument.default is not None:
                continue
            else:
                value = _chosen_value(argument.name, argument.type)
                if value == 0 and "dim" in argument.name and not first:
                    break            # a dim of a 0-dim tensor
            if argument.kwarg_only:
                kwargs[argument.name] = value
            else:
                args.append(value)
        else:
            found.append(Case(family, tuple(args), kwargs))
    return found
