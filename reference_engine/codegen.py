"""Code the engine generates: its hot functions, written once as templates and compiled.

The recorders of :mod:`reference_engine.formula_node`, the entry points and kernel runners of
:mod:`reference_engine.dispatch` and the constructors of :mod:`reference_engine.tensor` are made
from templates here rather than written out per call shape (issue 21): each is one template,
and a fast path inlined into another (a kernel call and the new Tensor in an entry point) is the
same template text, not a copy.
"""
from __future__ import annotations

import linecache
from types import CodeType, FunctionType
from typing import Any, Callable

_COMPILED: dict[str, CodeType] = {}     # generated source -> its code, compiled once


def own_code(fn: FunctionType) -> FunctionType:
    """``fn``, given a code object of its own (an equal copy). CPython (3.11+) specializes the
    instructions of a code object for what they meet: a global read for one globals dict, a call
    for one callee. Functions made from one ``def`` share its code object, so where they read
    other globals or call other functions (the recorders of one call shape, one operator's entry
    point and another's) each undoes the other's specialization and those instructions stay
    generic: every hot function made per operator or call shape gets its own code (see the
    README's Performance section for what it saves)."""
    fn.__code__ = fn.__code__.replace()
    return fn


def generated_function(source: str, namespace: dict[str, Any]) -> Callable[..., Any]:
    """The function that ``source`` defines, with ``namespace`` as its globals. Each distinct
    source is compiled once, its lines kept in :mod:`linecache` so that tracebacks and
    debuggers show them; each function made from it has its own code object (:func:`own_code`)."""
    code = _COMPILED.get(source)
    if code is None:
        filename = f"<generated {len(_COMPILED)}: {source.split('(', 1)[0].removeprefix('def ')}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        code = _COMPILED[source] = compile(source, filename, "exec")
    defined: dict[str, Any] = {}
    exec(code, namespace, defined)
    (fn,) = defined.values()
    return own_code(fn)
