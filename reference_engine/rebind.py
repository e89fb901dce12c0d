"""Formulas run by the engine call its operators directly.

A formula file says ``from formulas import at``; ``formulas.at.sin(x)`` asks
the current backend (a context variable) and the backend then dispatches:
two extra Python frames on every operator call. The engine instead runs a
*rebound copy* of each formula: the same code object (so tracebacks, ``print``
and ``pdb`` breakpoints behave as in the file), with globals in which ``at``
is :data:`ENGINE_AT`, whose attributes are the dispatcher's operator entry
points. Helpers the formula reaches through its globals are rebound the same
way (they call ``at`` too).

The copy's globals are a snapshot of the module's, taken when the dispatcher
table is (re)built; :func:`reference_engine.refresh` takes a new one.
"""
from __future__ import annotations

import types
from typing import Any, Callable, Mapping

import numpy as np

from formulas.dsl import at as dsl_at
from formulas.helper_overloads import HelperOverloads, overloads_of
from reference_engine.dtypes import DType
from reference_engine.tensor import Tensor

_NONE: Mapping[str, Callable[..., Any]] = {}

#: the Python values each helper annotation name takes on the engine (:mod:`formulas.helper_overloads`)
HELPER_VALUES: dict[str, tuple[type, ...]] = {
    "Tensor": (Tensor,), "int": (int, np.integer), "SymInt": (int, np.integer),
    "float": (int, float, np.integer, np.floating), "bool": (bool, np.bool_),
    "Scalar": (int, float, bool, complex, np.number, np.bool_),
    "ScalarType": (DType,), "str": (str,), "None": (type(None),),
}


class EngineOperators:
    """``at`` as the engine's formulas see it: ``at.sin`` is the dispatcher's ``sin`` entry.

    Attributes are looked up in the dispatcher on first use and then stored
    on the instance (later lookups are plain attribute reads); :meth:`clear`
    forgets them when the operator table is rebuilt.
    """

    def __init__(self, lookup: Callable[[str], Callable[..., Any]]) -> None:
        self.__dict__["_lookup"] = lookup

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("__"):
            raise AttributeError(name)
        entry = self._lookup(name)
        self.__dict__[name] = entry
        return entry

    def clear(self) -> None:
        """Forget the operators looked up so far (each is looked up again on next use)."""
        lookup = self._lookup
        self.__dict__.clear()
        self.__dict__["_lookup"] = lookup

    def __repr__(self) -> str:
        return "<the reference engine's operators>"


def rebind(fn: Callable[..., Any], operators: EngineOperators,
           memo: dict[int | str, Callable[..., Any]] | None = None,
           helpers: Mapping[str, Callable[..., Any]] = _NONE) -> Callable[..., Any]:
    """A copy of ``fn`` whose global ``at`` is ``operators`` (``fn`` itself when it does
    not use the DSL's ``at``); the functions among its globals that do are rebound too (every
    one of them: which it reads is not looked up in its code; ``memo`` makes each copy once).
    A global that is not a Python function there (a C++ name an imported formula declares)
    and is a key of ``helpers`` becomes that helper, rebound; where the helper has overloads
    ``name__variant``, the one of them a call's arguments fit, as the C++ emitter chooses
    (:class:`~formulas.helper_overloads.HelperOverloads`)."""
    if type(fn) is not types.FunctionType or fn.__globals__.get("at") is not dsl_at:
        return fn
    memo = {} if memo is None else memo
    done = memo.get(id(fn))
    if done is not None:
        return done
    namespace = dict(fn.__globals__)
    copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    copy.__doc__ = fn.__doc__
    copy.__module__ = fn.__module__
    copy.__wrapped__ = fn
    memo[id(fn)] = copy
    namespace["at"] = operators
    for name, value in list(namespace.items()):
        if value is fn:
            namespace[name] = copy
        elif type(value) is types.FunctionType:
            namespace[name] = rebind(value, operators, memo, helpers)
        elif value is not None and name in helpers:
            namespace[name] = _helper(name, operators, memo, helpers)
    return copy


def _helper(name: str, operators: EngineOperators, memo: dict, helpers: Mapping[str, Callable[..., Any]]) -> Any:
    """The helper ``name`` rebound, or its overloads as one (made once per ``memo``)."""
    found = memo.get(name)
    if found is None:
        overloads = [rebind(helper, operators, memo, helpers) for helper in overloads_of(name, helpers)]
        found = memo[name] = overloads[0] if len(overloads) == 1 else HelperOverloads(name, overloads, HELPER_VALUES)
    return found
