"""One emission per formula (and per helper) per run: its C++ computed again only when what it read changed.

``transpile --keep-going`` emits a library more than once in a run: lint's check
of what the emitter refuses emits the whole package (:func:`transpiler.pipeline.package_refusals`),
then per-formula mode emits it less what was refused, until nothing more is
(:func:`transpiler.pipeline.run`). The contexts differ (a refused formula's operator
is declared after every other), so a formula's C++ may differ between them, but only
when a lookup it made (an ``at.<name>`` overload list, a helper) gives another answer.

:func:`emit_formula` (:func:`transpiler.cpp.nodes.emit_formula`, the emitter of one
formula: a pure function of the formula, the context's tables and its node name)
records the lookups an emission makes in the context's operator and helper tables,
with their answers; inside :func:`shared` (one run), a second emission of the same
formula object under the same node name is given the first one's result (its C++ or
its refusal) when every recorded lookup gives the same answer in the new context.
So a result is reused only where recomputing it would read the same inputs: the
output is the same as without it. :func:`translate_helper` does the same for the body
of a ``@helper`` (``helpers.cpp`` is written by both emissions), given the same
names in scope and return type; the ATen functions it called are called again.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from transpiler.cpp import nodes
from transpiler.cpp.expressions import Context, HelperSignature, Untranslatable, helper_overloads

from transpiler.cpp.statements import Body, translate_body

if TYPE_CHECKING:
    from transpiler.cpp.types import PyType
    from transpiler.model import Formula, Helper

_ABSENT = object()     # a lookup of a name the table does not hold
_EVERY = object()      # the lookup that read the whole table (an iteration)
_OVERLOADS = object()  # (_OVERLOADS, name): the lookup of a helper's overloads
TABLES = ("operators", "helpers")

_runs: list[dict[tuple[int, str], list]] = []     # (id of a formula or helper, its node name or HELPER) -> earlier
HELPER = "@helper"


@dataclass(frozen=True)
class _Emission:
    """One formula emitted: what it read of the context, and what came out."""

    formula: Formula                              # held, so that its id is not reused in the run
    lookups: tuple[tuple[str, object, object], ...]   # (table, key or _EVERY, answer), in order
    outcome: nodes.EmittedFormula | Untranslatable


class _Recorded(Mapping):
    """A context table that records each lookup and its answer."""

    def __init__(self, table: Mapping, name: str, lookups: list[tuple[str, object, object]]) -> None:
        self._table, self._name, self._lookups = table, name, lookups
        self._whole: set[tuple[str, object]] = set()

    def __getitem__(self, key: object) -> object:
        answer = self._table.get(key, _ABSENT)
        self._lookups.append((self._name, key, answer))
        if answer is _ABSENT:
            raise KeyError(key)
        return answer

    def _read_whole(self) -> None:
        if (self._name, _EVERY) not in self._whole:
            self._whole.add((self._name, _EVERY))
            self._lookups.append((self._name, _EVERY, tuple(self._table.items())))

    def __iter__(self) -> Iterator[object]:
        self._read_whole()
        return iter(self._table)

    def __len__(self) -> int:
        self._read_whole()
        return len(self._table)

    def items(self):   # the table's own view: its entries are recorded as a whole, not one by one
        self._read_whole()
        return self._table.items()

    def overloads(self, name: str) -> list[HelperSignature]:
        """:func:`~transpiler.cpp.expressions.helper_overloads` of the helper table, recorded as one
        lookup (the other helpers, used by no formula it calls, may come and go)."""
        answer = helper_overloads(name, self._table)
        self._lookups.append((self._name, (_OVERLOADS, name), tuple(answer)))
        return answer


@dataclass(frozen=True)
class _HelperTranslation:
    """One helper body translated: the scope it was given, what it read of it, and what came out."""

    helper: Helper                                # held, so that its id is not reused in the run
    names: Mapping                                # the names in scope (its parameters)
    returns: PyType
    lookups: tuple[tuple[str, object, object], ...]
    outcome: tuple[Body, frozenset[str]] | Untranslatable    # the body and the ATen functions it called


def _answers_again(emission: _Emission | _HelperTranslation, context: Context) -> bool:
    """Whether every lookup ``emission`` made gives the same answer in ``context``."""
    for name, key, answer in emission.lookups:
        table = getattr(context, name)
        if key is _EVERY:
            now = tuple(table.items())
        elif isinstance(key, tuple) and key[0] is _OVERLOADS:
            now = tuple(helper_overloads(key[1], table))
        else:
            now = table.get(key, _ABSENT)
        if now is not answer and now != answer:
            return False
    return True


@contextlib.contextmanager
def shared() -> Iterator[None]:
    """Emit each formula once while the block runs (one ``transpile`` run), as the module says."""
    _runs.append({})
    try:
        yield
    finally:
        _runs.pop()


def emit_formula(formula: Formula, context: Context, struct: str) -> nodes.EmittedFormula:
    """:func:`transpiler.cpp.nodes.emit_formula`, taken from an earlier emission in this run that
    made the same lookups with the same answers; raises its ``Untranslatable`` as it does."""
    if not _runs:
        return nodes.emit_formula(formula, context, struct)
    earlier = _runs[-1].setdefault((id(formula), struct), [])
    for emission in earlier:
        if emission.formula is formula and _answers_again(emission, context):
            if isinstance(emission.outcome, Untranslatable):
                raise emission.outcome
            return emission.outcome
    lookups: list[tuple[str, object, object]] = []
    recorded = replace(context, **{name: _Recorded(getattr(context, name), name, lookups) for name in TABLES})
    try:
        outcome = nodes.emit_formula(formula, recorded, struct)
    except Untranslatable as error:
        earlier.append(_Emission(formula, tuple(lookups), error))
        raise
    earlier.append(_Emission(formula, tuple(lookups), outcome))
    return outcome


def translate_helper(helper: Helper, scope: Context, returns: PyType) -> Body:
    """:func:`transpiler.cpp.statements.translate_body` of ``helper``'s body in ``scope``, taken from an
    earlier translation in this run with the same names in scope and return type that made the same
    lookups with the same answers (the ATen functions it called added to ``scope.called`` again);
    raises its ``Untranslatable`` as it does."""
    if not _runs:
        return translate_body(helper.node.body.body, scope, returns)
    earlier = _runs[-1].setdefault((id(helper), HELPER), [])
    for translation in earlier:
        if (translation.helper is helper and translation.returns == returns and translation.names == scope.names
                and _answers_again(translation, scope)):
            if isinstance(translation.outcome, Untranslatable):
                raise translation.outcome
            body, called = translation.outcome
            scope.called.update(called)
            return body
    lookups: list[tuple[str, object, object]] = []
    recorded = replace(scope, **{name: _Recorded(getattr(scope, name), name, lookups) for name in TABLES})
    before = set(scope.called)
    try:
        body = translate_body(helper.node.body.body, recorded, returns)
    except Untranslatable as error:
        earlier.append(_HelperTranslation(helper, dict(scope.names), returns, tuple(lookups), error))
        raise
    earlier.append(_HelperTranslation(helper, dict(scope.names), returns, tuple(lookups),
                                      (body, frozenset(scope.called - before))))
    return body
