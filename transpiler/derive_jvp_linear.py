"""Linearity of an operator in some of its arguments, read from its written jvp term by term
(for :mod:`transpiler.derive_jvp`).

``convolution_backward(grad_output, input, weight, ...)`` is linear in ``grad_output`` with
``input`` and ``weight`` held, yet its jvp reads ``grad_output``'s value: in the terms of the
other inputs' tangents (``convolution_backward(grad_output, input, weight_t, ...)``). Held
constant, those tangents are zero, and so are their terms: the jvp in the held arguments'
directions alone is what is left. When what is left reads neither the values of the linear
arguments nor the outputs (their metadata and ``is None`` aside), the Jacobian in those
directions does not depend on them: the operator is affine in them, and its backward reads them
for metadata only (``derive_jvp`` gives its backward stand-ins of the same metadata).

A term is an operand of a top-level sum or difference (or a negation) of an expression assigned
or returned by the jvp, or of either branch of a choice whose test reads neither tangents nor
those values (``dB - dA X if left else dB - X dA``); a jvp is linear in its tangents, and each
term of one written as a sum of per-input contributions is linear in the tangents it reads. A
helper called in a kept term with a value-read name must read that parameter only through
metadata or ``is None`` itself, or be a kept term whose own body shows it affine the same way
(``linalg_solve_triangular_forward_AD(A_t, B_t, A, X, ...)`` in ``B_t``). A statement ``if``
whose test reads neither (``if weight is not None:``) is read branch by branch, a name carried
or tainted after it when either branch leaves it so. Anything else (branches, loops on such
values) is not shown affine.
"""
from __future__ import annotations

from collections.abc import Mapping

import libcst as cst

from transpiler.jvp_fragments import nodes as _nodes
from transpiler.model import Formula, Helper, JvpRule

#: Methods whose result is metadata (the value is not read).
METADATA_METHODS = frozenset({"sizes", "dim", "scalar_type", "options", "size", "numel", "device", "dtype",
                              "is_floating_point", "is_complex"})


def affine_by_terms(formula: Formula, params: set[str], helpers: Mapping[str, Helper]) -> bool:
    """Whether ``formula``'s written jvp shows the op affine in ``params`` (module docstring)."""
    jvp = formula.jvp
    if jvp is None or jvp.rule is not JvpRule.WRITTEN or any(
            p.endswith("_p") or p.startswith("original_") for p in jvp.params):
        return False
    carries = {t for t, name in jvp.tangents.items() if name in params}     # hold the linear tangents
    tainted = set(params) | {o for o in formula.outputs if o is not None}   # values that must not be read
    return _affine_body(jvp.node.body.body, carries, tainted, helpers)


def _affine_body(statements, carries: set[str], tainted: set[str], helpers: Mapping[str, Helper]) -> bool:
    """Whether ``statements`` (a jvp's or a helper's body) give values whose terms that read the
    ``carries`` read none of the ``tainted`` values (module docstring)."""
    body = [s for s in statements
            if not (isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Expr)
                    and isinstance(s.body[0].value, cst.SimpleString))]
    for statement in body:
        if _metadata_branch(statement, carries | tainted, helpers):
            if not _affine_branches(statement, carries, tainted, helpers):
                return False
            continue
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            if _reads(statement, carries | tainted, helpers):
                return False
            continue
        small = statement.body[0]
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            target, values = small.targets[0].target.value, [small.value]
        elif isinstance(small, cst.Return) and small.value is not None:
            target = None
            values = [e.value for e in small.value.elements] if isinstance(small.value, cst.Tuple) else [small.value]
        else:
            if _reads(small, carries | tainted, helpers):
                return False
            continue
        kept = [term for value in values for term in _terms(value, carries | tainted)
                if _reads(term, carries, helpers)]
        if any(_reads(term, tainted, helpers) and not _affine_helper_call(term, carries, tainted, helpers)
               for term in kept):
            return False
        if target is not None:
            carries.discard(target)
            tainted.discard(target)
            if kept:
                carries.add(target)
            elif any(_reads(value, tainted, helpers) for value in values):
                tainted.add(target)
    return True


def _metadata_branch(statement: cst.CSTNode, names: set[str], helpers: Mapping[str, Helper]) -> bool:
    """Whether ``statement`` is an ``if`` (an ``else`` at most) whose test reads none of ``names``."""
    return isinstance(statement, cst.If) and isinstance(statement.orelse, (cst.Else, type(None))) \
        and not _reads(statement.test, names, helpers)


def _affine_branches(statement: cst.If, carries: set[str], tainted: set[str], helpers: Mapping[str, Helper]) -> bool:
    """Whether each branch of ``statement`` (a ``_metadata_branch``) is affine as a body is; then
    ``carries`` and ``tainted`` hold the names either branch (or none taken) leaves so."""
    outcomes = [(set(carries), set(tainted))] if statement.orelse is None else []
    for block in (statement.body, statement.orelse.body if statement.orelse is not None else None):
        if block is None:
            continue
        inner_carries, inner_tainted = set(carries), set(tainted)
        if not _affine_body(block.body, inner_carries, inner_tainted, helpers):
            return False
        outcomes.append((inner_carries, inner_tainted))
    carries.clear()
    tainted.clear()
    carries.update(*(c for c, _ in outcomes))
    tainted.update(*(t for _, t in outcomes))
    return True


def _affine_helper_call(term: cst.BaseExpression, carries: set[str], tainted: set[str],
                        helpers: Mapping[str, Helper]) -> bool:
    """Whether ``term`` is a helper's call (``linalg_solve_triangular_forward_AD(A_t, B_t, A, X, ...)``)
    whose body shows it affine in the parameters given carried names, those given tainted ones
    tainted (each argument a plain name, or reading neither)."""
    if not (isinstance(term, cst.Call) and isinstance(term.func, cst.Name) and term.func.value in helpers):
        return False
    helper = helpers[term.func.value]
    if any(arg.keyword is not None or arg.star for arg in term.args) or len(term.args) > len(helper.params):
        return False
    inner_carries, inner_tainted = set(), set()
    for arg, param in zip(term.args, helper.params):
        carried, read = _reads(arg.value, carries, helpers), _reads(arg.value, tainted, helpers)
        if (carried or read) and not isinstance(arg.value, cst.Name) or (carried and read):
            return False
        if carried:
            inner_carries.add(param.name)
        elif read:
            inner_tainted.add(param.name)
    return _affine_body(helper.node.body.body, inner_carries, inner_tainted, helpers)


def _terms(node: cst.BaseExpression, names: set[str]) -> list[cst.BaseExpression]:
    """The operands of a top-level sum or difference (through negations and parentheses), and of
    each branch of a choice whose test reads none of ``names`` (``a - b if left else a - c``)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract)):
        return _terms(node.left, names) + _terms(node.right, names)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return _terms(node.expression, names)
    if isinstance(node, cst.IfExp) and not _reads(node.test, names, {}):
        return _terms(node.body, names) + _terms(node.orelse, names)
    return [node]


def _reads(node: cst.CSTNode, names: set[str], helpers: Mapping[str, Helper]) -> bool:
    """Whether ``node`` reads the value of one of ``names``: not only through a metadata method,
    an ``is None`` test, or a helper's parameter the helper itself reads only so."""
    skipped: set[int] = set()           # id() of Name nodes read for metadata only
    for n in _nodes(node):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and isinstance(n.func.value, cst.Name) \
                and n.func.attr.value in METADATA_METHODS:
            skipped.add(id(n.func.value))
        elif isinstance(n, cst.Comparison) and isinstance(n.left, cst.Name) and len(n.comparisons) == 1 \
                and isinstance(n.comparisons[0].operator, (cst.Is, cst.IsNot)) \
                and isinstance(n.comparisons[0].comparator, cst.Name) and n.comparisons[0].comparator.value == "None":
            skipped.add(id(n.left))
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value in helpers:
            helper = helpers[n.func.value]
            for arg, param in zip(n.args, helper.params):
                if arg.keyword is None and isinstance(arg.value, cst.Name) \
                        and not _reads(helper.node.body, {param.name}, {}):
                    skipped.add(id(arg.value))
    return any(isinstance(n, cst.Name) and n.value in names and id(n) not in skipped for n in _nodes(node))
