"""Pickling of models that hold libcst trees, at a fraction of the cost of libcst's own reduction.

libcst's nodes are slotted frozen dataclasses whose ``__getstate__`` builds a dict
through :func:`dataclasses.fields` for every node: pickling the models of the imported
derivatives.yaml corpus and the shipped library (460,000 nodes) spent two thirds of its
time there. :func:`dumps` reduces a node to its class and the tuple of its field values,
read by one :func:`operator.attrgetter` per class, and :func:`_node` builds it back
(without running its validation, as libcst's ``__setstate__`` does not). What is
pickled is the same tree: ``pickle.loads`` gives back equal nodes.
"""
from __future__ import annotations

import copyreg
import dataclasses
import functools
import io
import operator
from itertools import repeat
import pickle
from collections.abc import Callable

import libcst as cst



def _node(cls: type, names: tuple[str, ...], values: tuple[object, ...],
          new: Callable[[type], object] = object.__new__, assign: Callable[..., None] = object.__setattr__,
          ) -> cst.CSTNode:
    """The node of class ``cls`` whose fields ``names`` hold ``values`` (what :func:`_reducer` saved)."""
    node = new(cls)
    any(map(assign, repeat(node), names, values))      # each returns None: the loop runs in C to the end
    return node


def _reducer(cls: type) -> Callable[[cst.CSTNode], tuple[object, ...]]:
    names = tuple(field.name for field in dataclasses.fields(cls))
    values = operator.attrgetter(*names) if len(names) > 1 else (lambda node: (getattr(node, names[0]),))

    def reduce(node: cst.CSTNode) -> tuple[object, ...]:
        return _node, (cls, names, values(node))
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


def dumps(value: object) -> bytes:
    """``pickle.dumps(value)`` (highest protocol), libcst nodes reduced to their field values."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _dispatch_table()
    pickler.dump(value)
    return buffer.getvalue()
