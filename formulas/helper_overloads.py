"""A helper's C++ overloads, chosen at run time as the C++ emitter chooses them.

FunctionsManual overloads some helpers (``unsqueeze_to(grad, sizes)`` and
``unsqueeze_to(grad, dim, sizes)``); the shipped library writes each overload as
``name__variant`` (``unsqueeze_to__dim``) and a formula calling ``name`` means the
first of ``name`` and its ``name__variant`` helpers, in declaration order, whose
parameters accept the call's arguments (:func:`transpiler.cpp.expressions.helper_overloads`).
:class:`HelperOverloads` makes the same choice on the values of a call: the arguments
bind to the helper's signature and each fits its parameter's annotation. What values an
annotation name takes is the back end's (:data:`ValueTypes`): torch's tensors and symbolic
ints on torch (``formulas.torch``), the engine's Tensor on the reference engine.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

#: what ``name__variant`` adds to the helper ``name`` (the C++ emitter's ``OVERLOAD_SEPARATOR``)
SEPARATOR = "__"

#: the Python values each of the helpers' annotation names takes on a back end (an annotation
#: name not in it takes anything)
ValueTypes = Mapping[str, tuple[type, ...]]


def overloads_of(name: str, helpers: Mapping[str, Callable[..., Any]]) -> list[Callable[..., Any]]:
    """The helper ``name`` and its overloads ``name__variant``, in declaration order."""
    prefix = name + SEPARATOR
    return [fn for helper, fn in helpers.items()
            if helper == name or (helper.startswith(prefix) and SEPARATOR not in helper[len(prefix):])]


class HelperOverloads:
    """Calls the first of ``overloads`` (declaration order) that accepts the arguments."""

    def __init__(self, name: str, overloads: list[Callable[..., Any]], values: ValueTypes) -> None:
        self.name = name
        self.overloads = tuple((fn, inspect.signature(fn)) for fn in overloads)
        self.values = values

    def __repr__(self) -> str:
        return f"HelperOverloads({self.name!r}, {[fn.__name__ for fn, _ in self.overloads]})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.chosen(args, kwargs)(*args, **kwargs)

    def chosen(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Callable[..., Any]:
        """The overload a call with ``args`` and ``kwargs`` runs; a TypeError naming each when none fits."""
        for fn, signature in self.overloads:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                continue
            if all(fits(signature.parameters[name].annotation, value, self.values)
                   for name, value in bound.arguments.items()):
                return fn
        given = ", ".join([type(a).__name__ for a in args] + [f"{k}={type(v).__name__}" for k, v in kwargs.items()])
        declared = "; ".join(f"{fn.__name__}{signature}" for fn, signature in self.overloads)
        raise TypeError(f"no overload of helper '{self.name}' accepts ({given}): {declared}")


def fits(annotation: Any, value: Any, values: ValueTypes) -> bool:
    """Whether ``value`` fits a helper parameter's annotation (a string such as ``list[int] | None``)
    on the back end whose :data:`ValueTypes` are ``values``."""
    if not isinstance(annotation, str):
        return True     # unannotated
    return _fits(annotation.replace(" ", ""), value, values)


@functools.cache
def _alternatives(annotation: str) -> tuple[str, ...]:
    """``a|b|c`` split at its top level (not inside ``list[...]``)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(annotation):
        depth += (char == "[") - (char == "]")
        if char == "|" and depth == 0:
            parts.append(annotation[start:i])
            start = i + 1
    return (*parts, annotation[start:])


def _fits(annotation: str, value: Any, values: ValueTypes) -> bool:
    alternatives = _alternatives(annotation)
    if len(alternatives) > 1:
        return any(_fits(alternative, value, values) for alternative in alternatives)
    if annotation.startswith(("list[", "tuple[")) and annotation.endswith("]"):
        element = annotation[annotation.index("[") + 1:-1]
        return isinstance(value, (list, tuple)) and ("," in element or all(_fits(element, v, values) for v in value))
    python_types = values.get(annotation)
    if python_types is None:
        return True
    if isinstance(value, bool) and annotation in ("int", "SymInt", "float"):
        return False
    return isinstance(value, python_types)
