"""Pickling of models that hold libcst trees, at a fraction of the cost of libcst's own reduction.

libcst's nodes are slotted frozen dataclasses whose ``__getstate__`` builds a dict
through :func:`dataclasses.fields` for every node: pickling the models of the imported
derivatives.yaml corpus and the shipped library (460,000 nodes) spent two thirds of its
time there. :func:`dumps` reduces a node to the tuple of its field values, called with
its class's maker (``functools.partial(_node, cls)``, pickled once per pickle: a node costs
its values, one memo entry for them and one for itself), and :func:`_node` (:func:`_leaf` for a
class of one field) builds it back
(without running its validation, as libcst's ``__setstate__`` does not). What is pickled
is the same tree: ``pickle.loads`` gives back equal nodes.

:func:`dumps_located` pickles a value with the positions of the nodes it holds, in one stream
(the nodes once), without walking the tree: the nodes are those the pickler reduced.
"""
from __future__ import annotations

import copyreg
import dataclasses
import functools
import io
import operator
import pickle
from collections.abc import Callable
from itertools import repeat

import libcst as cst

from transpiler.model import Positions


class _FieldNames(dict[type, tuple[str, ...]]):
    """A node class -> its field names, in the order :func:`_reducer` saves their values."""

    def __missing__(self, cls: type) -> tuple[str, ...]:
        names = self[cls] = tuple(found.name for found in dataclasses.fields(cls))
        return names


_FIELD_NAMES = _FieldNames()
_seen: list[cst.CSTNode] | None = None      # while :func:`dumps_located` pickles: every node reduced


def _node(cls: type, *values: object, new: Callable[[type], object] = object.__new__,
          assign: Callable[..., None] = object.__setattr__, names: _FieldNames = _FIELD_NAMES) -> cst.CSTNode:
    """The node of class ``cls`` whose fields hold ``values`` (what :func:`_reducer` saved)."""
    node = new(cls)
    any(map(assign, repeat(node), names[cls], values))     # each returns None: the loop runs in C to the end
    return node


def _leaf(cls: type, name: str, value: object, new: Callable[[type], object] = object.__new__,
          assign: Callable[..., None] = object.__setattr__) -> cst.CSTNode:
    """:func:`_node` of a class with one field (``name``): whitespace, ``Name``, operators, nearly half
    of a file's nodes, made in half the time."""
    node = new(cls)
    assign(node, name, value)
    return node


def _reducer(cls: type) -> Callable[[cst.CSTNode], tuple[object, ...]]:
    names = _FIELD_NAMES[cls]
    if len(names) == 1:
        make, values = functools.partial(_leaf, cls, names[0]), (lambda node: (getattr(node, names[0]),))
    else:
        make, values = functools.partial(_node, cls), operator.attrgetter(*names)

    def reduce(node: cst.CSTNode) -> tuple[object, ...]:
        if _seen is not None:
            _seen.append(node)
        return make, values(node)
    return reduce


@functools.cache
def _dispatch_table() -> dict[type, Callable[[object], tuple[object, ...]]]:
    """A reducer for every concrete libcst node class, over the default ones (``copyreg``)."""
    table: dict[type, Callable[[object], tuple[object, ...]]] = dict(copyreg.dispatch_table)
    pending = [cst.CSTNode]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if dataclasses.is_dataclass(cls) and dataclasses.fields(cls):
            table[cls] = _reducer(cls)
    return table


def _pickler(buffer: io.BytesIO) -> pickle.Pickler:
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _dispatch_table()
    return pickler


def dumps(value: object) -> bytes:
    """``pickle.dumps(value)`` (highest protocol), libcst nodes reduced to their field values."""
    buffer = io.BytesIO()
    _pickler(buffer).dump(value)
    return buffer.getvalue()


def dumps_located(value: object, positions: Positions) -> bytes:
    """:func:`dumps` of ``value``, followed in the same stream by the ``positions`` of the nodes it
    holds (those it has; in their packed form): :func:`loads_located` reads both."""
    global _seen
    buffer = io.BytesIO()
    pickler = _pickler(buffer)
    _seen = seen = []
    try:
        pickler.dump(value)
    finally:
        _seen = None
    starts = positions.starts
    pickler.dump(Positions({node: starts[node] for node in seen if node in starts}))   # the nodes: memo references
    return buffer.getvalue()


def loads_located(data: bytes) -> tuple[object, Positions]:
    """The value and the positions of its nodes that :func:`dumps_located` pickled."""
    unpickler = pickle.Unpickler(io.BytesIO(data))
    value = unpickler.load()
    return value, unpickler.load()      # the same unpickler: its memo holds the value's nodes
