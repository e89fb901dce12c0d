"""Which module globals a formula's code writes, and which its closures read (static, from the syntax).

A formula that keeps a forward tensor in a module global (``global E; E = at.cos(x)``, or
``CACHE[k] = e``, ``CACHE.append(e)``) and reads it back in its backward hides an intermediate
from whoever records the node: a double backward through it is silently wrong. The reference
engine refuses such a formula (:mod:`transpiler.formula_facts` keeps these facts per formula);
this module reads them from the syntax the front-end modelled, with Python's scoping rules
(:func:`transpiler.dataflow.scope_names`), never from bytecode.
"""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from transpiler.dataflow import global_reads, scope_names, walk

#: Methods that change a container in place (``CACHE.append(e)``, ``CACHE.update(...)``).
MUTATING_METHODS = frozenset({"append", "extend", "insert", "update", "setdefault", "add", "__setitem__"})

_SCOPES = (cst.FunctionDef, cst.Lambda)
#: Statements whose target an item or attribute of a container can be (``G[k] = v``, ``del G[k]``).
_TARGETS = (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.Del)


@dataclass(frozen=True)
class ModuleGlobalsWritten:
    """The module globals a function (and the functions defined in it) writes."""

    assigned: frozenset[str]    # declared ``global`` and so rebound (or deleted) there
    changed: frozenset[str]     # changed in place: an item or attribute set or deleted, a mutating method


def module_globals_written(function: cst.FunctionDef | cst.Lambda) -> ModuleGlobalsWritten:
    """What ``function``, and every function nested in it, writes of the module's globals: the
    names it declares ``global``, and the module-level names whose items or attributes it sets
    or deletes, or on which it calls a :data:`MUTATING_METHODS` method (``G[k].append(v)``: ``G``)."""
    assigned: set[str] = set()
    changed: set[str] = set()
    _writes(function, frozenset(), assigned, changed)
    return ModuleGlobalsWritten(frozenset(assigned), frozenset(changed))


def module_globals_read(closure: cst.FunctionDef | cst.Lambda, enclosing: cst.FunctionDef) -> frozenset[str]:
    """The names ``closure`` (defined in ``enclosing``'s body), or a function nested in it,
    uses from the module: bound neither in them nor in ``enclosing``, or declared ``global``
    (:func:`transpiler.dataflow.global_reads`, the rule the model's ``references`` follow)."""
    return frozenset(name.value for name in global_reads(closure, scope_names(enclosing).local))


def _writes(function: cst.FunctionDef | cst.Lambda, enclosing: frozenset[str], assigned: set[str],
            changed: set[str]) -> None:
    scope = scope_names(function)
    assigned |= scope.globals
    bound_here = enclosing | scope.local        # a name declared ``global`` is not in ``scope.local``
    body = function.body
    for node in walk(body, lambda child: type(child) not in _SCOPES):
        kind = type(node)
        if kind in _SCOPES:
            _writes(node, bound_here, assigned, changed)
            continue
        if kind in _TARGETS:
            containers = [node.target]
        elif (kind is cst.Call and type(node.func) is cst.Attribute
              and node.func.attr.value in MUTATING_METHODS):
            containers = [node.func.value]
        else:
            continue
        for target in containers:
            for root in _container_roots(target, changed_only=kind is not cst.Call):
                if root not in bound_here:
                    changed.add(root)


def _container_roots(target: cst.BaseExpression, changed_only: bool) -> list[str]:
    """The names whose containers ``target`` writes into: the root name of a subscript or
    attribute (``G[k]``, ``G.a[k]``: ``G``), in tuple targets too. With ``changed_only``
    false (a method's receiver), a plain name counts as well."""
    found: list[str] = []
    stack = [target]
    while stack:
        current = stack.pop()
        if type(current) in (cst.Tuple, cst.List):
            stack.extend(element.value for element in current.elements)
        elif type(current) is cst.StarredElement:
            stack.append(current.value)
        elif type(current) in (cst.Subscript, cst.Attribute) or not changed_only:
            while type(current) in (cst.Subscript, cst.Attribute):
                current = current.value
            if type(current) is cst.Name:
                found.append(current.value)
    return found
