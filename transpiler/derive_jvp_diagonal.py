"""Diagonal gradients: an input's gradient that is an elementwise map of the incoming gradient,
transposed by evaluating that map on the input's tangent.

A broadcasting op's backward often gives an input ``sum_to(E(grad), sizes)`` where ``E`` is built
of steps that are each their own transpose in the library (their backward is the step itself at the
adjoint): ``at.where`` on a constant condition between linear values and zeros, a product with a
constant (``mul``'s backward is ``grad * other``), a quotient by a number (``div.Scalar``'s is
``at.div(grad, other)``), a negation, sums and differences of linear values. Such an ``E`` is a
diagonal map (each element scaled by a constant factor, broadcasting only expanding), so its
transpose is itself: the input's share of the jvp is ``sum_to(E(t), result sizes)``, ``t`` the
tangent broadcast to the result's sizes (the final ``sum_to`` folds the dims a constant factor
added, as the transposed broadcasts would). Transposition step by step gets the same value but
splits the adjoint at every ``where`` and adds the pieces back where ``grad`` is read twice
(``where(tie, grad * 0.5, where(gt, zeros, grad))``: seven operators for four), so
:func:`diagonal_gradient` is used only when ``grad`` is read more than once in ``E``.
"""
from __future__ import annotations

import libcst as cst

from transpiler.jvp_fragments import code, rename
from transpiler.jvp_fragments import names as _names


class DiagonalGradient:
    """An input's gradient ``sum_to(E(grad), sizes)``, ``E`` diagonal (``expression``, its linear
    locals substituted)."""

    def __init__(self, expression: cst.BaseExpression, grad: str) -> None:
        self.expression = expression
        self.grad = grad
        self.reads = _reads_outside_zeros(expression, grad)     # how often ``E`` reads the gradient

    def at(self, tangent: str, hoist) -> cst.BaseExpression:
        """``E`` at ``tangent`` (a name), each constant operator call in it (a condition, a factor)
        replaced by the name ``hoist(call)`` gives it."""
        grad = self.grad

        class Hoist(cst.CSTTransformer):
            def on_visit(self, node):
                return not (isinstance(node, cst.Call) and grad not in _names(node))

            def on_leave(self, original, updated):
                if isinstance(original, cst.Call) and grad not in _names(original) \
                        and not _at_call(original, "zeros_like", 1):
                    return cst.Name(hoist(original))
                return updated

        return rename(self.expression.visit(Hoist()), {grad: cst.Name(tangent)})


def diagonal_share(gradients: list[tuple[DiagonalGradient, str]], output: str, target: str, fresh) -> list[str]:
    """Statements binding ``target`` to the sum over ``gradients`` (each with the name of its
    input's tangent broadcast to ``output``'s sizes) of ``sum_to(E(tangent), output sizes)``.
    Each constant call is computed once (``fresh(stem)`` names it). Several terms are added
    before the one ``sum_to`` (:func:`_fused_sum`, so ``where``s on one condition are one) when
    the sum has ``output``'s sizes (checked when it runs): each term reads its tangent of those
    sizes, so each then has them and ``sum_to`` is the identity; else term by term."""
    lines: list[str] = []
    hoisted: dict[str, str] = {}

    def hoist(call: cst.Call) -> str:
        key = code(call)
        if key not in hoisted:
            hoisted[key] = fresh("factor")
            lines.append(f"{hoisted[key]} = {key}")
        return hoisted[key]

    terms = [gradient.at(tangent, hoist) for gradient, tangent in gradients]
    sizes = f"{output}.sizes()"
    if len(terms) == 1:
        return [*lines, f"{target} = sum_to({code(terms[0])}, {sizes})"]
    fused = terms[0]
    for term in terms[1:]:
        fused = _fused_sum(fused, term)
    separate = " + ".join(f"sum_to({code(term)}, {sizes})" for term in terms)
    return [*lines, f"{target} = {code(fused)}",
            f"if {target}.sizes() != {sizes}:\n    {target} = {separate}\n"]


def _fused_sum(a: cst.BaseExpression, b: cst.BaseExpression) -> cst.BaseExpression:
    """``a + b``, where-terms on one condition merged: ``where(c, p, q) + where(c, r, s)`` is
    ``where(c, p + r, q + s)`` (element by element the same sums, the same broadcast sizes and
    dtype), ``x + 0`` is ``x`` (a literal zero only stands beside a linear value of at least its
    sizes and dtype)."""
    if _is_literal_zero(a):
        return b
    if _is_literal_zero(b):
        return a
    if _at_call(a, "where", 3) and _at_call(b, "where", 3) and code(a.args[0].value) == code(b.args[0].value):
        first = _fused_sum(a.args[1].value, b.args[1].value)
        second = _fused_sum(a.args[2].value, b.args[2].value)
        return a.with_changes(args=[a.args[0], a.args[1].with_changes(value=first), a.args[2].with_changes(value=second)])
    return cst.BinaryOperation(_parenthesized(a), cst.Add(), _parenthesized(b))


def _bindings(body: list[cst.BaseStatement]) -> dict[str, list[cst.BaseExpression]] | None:
    """Every ``name = value`` of a straight-line body, in order per name (None: not straight-line)."""
    found: dict[str, list[cst.BaseExpression]] = {}
    for statement in body:
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return None
        small = statement.body[0]
        if isinstance(small, cst.Return):
            continue
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)):
            return None
        found.setdefault(small.targets[0].target.value, []).append(small.value)
    return found


class _Diagonal:
    """Checks ``E`` step by step, substituting linear locals (each bound once) for their values."""

    def __init__(self, grad: str, bindings: dict[str, list[cst.BaseExpression]]) -> None:
        self.grad = grad
        self.bindings = bindings

    def linear(self, node: cst.BaseExpression) -> bool:
        return any(n == self.grad or self.linear_local(n) for n in _names(node))

    def linear_local(self, name: str) -> bool:
        values = self.bindings.get(name, [])
        return len(values) == 1 and self.linear(values[0])

    def constant(self, node: cst.BaseExpression) -> bool:
        """Reads no linear value and no local bound more than once (its value is the one at ``E``)."""
        return not self.linear(node) and all(len(self.bindings.get(n, [])) <= 1 for n in _names(node))

    def map(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """``node`` with linear locals substituted, when it is a diagonal map of ``grad``; else None."""
        node = node.with_changes(lpar=[], rpar=[]) if hasattr(node, "lpar") else node
        if isinstance(node, cst.Name):
            if node.value == self.grad:
                return node
            values = self.bindings.get(node.value, [])
            return self.map(values[0]) if len(values) == 1 and self.linear(values[0]) else None
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            inner = self.map(node.expression)
            return None if inner is None else node.with_changes(expression=_parenthesized(inner))
        if isinstance(node, cst.BinaryOperation):
            return self.binary(node)
        if _at_call(node, "zeros_like", 1):
            inner = self.map(node.args[0].value)
            return None if inner is None else node.with_changes(args=[node.args[0].with_changes(value=inner)])
        if _at_call(node, "where", 3):
            condition, first, second = (a.value for a in node.args)
            if not self.constant(condition):
                return None
            sides = [self.map(first), self.map(second)]
            if any(s is None for s in sides):
                return None
            zeros = [_at_call(side, "zeros_like", 1) for side in sides]
            if zeros[0] != zeros[1]:        # a zero beside a linear value: a literal 0 (_literal_zero)
                sides = [_literal_zero if zero else side for side, zero in zip(sides, zeros)]
            return node.with_changes(args=[a.with_changes(value=v) for a, v in zip(node.args, (condition, *sides))])
        if _at_call(node, "mul", 2):
            left, right = (a.value for a in node.args)
            product = self.binary(cst.BinaryOperation(left, cst.Multiply(), right))
            return None if product is None else node.with_changes(
                args=[a.with_changes(value=v) for a, v in zip(node.args, (product.left, product.right))])
        return None

    def binary(self, node: cst.BinaryOperation) -> cst.BaseExpression | None:
        left, right = node.left, node.right
        if isinstance(node.operator, (cst.Add, cst.Subtract)):
            sides = [self.map(left), self.map(right)]          # both linear: a sum of two maps
        elif isinstance(node.operator, cst.Multiply):
            if self.constant(left) == self.constant(right):
                return None
            sides = [left, self.map(right)] if self.constant(left) else [self.map(left), right]
        elif isinstance(node.operator, cst.Divide) and isinstance(right, (cst.Integer, cst.Float)):
            sides = [self.map(left), right]                    # ``div.Scalar``, by a number
        else:
            return None
        if any(s is None for s in sides):
            return None
        return node.with_changes(left=_parenthesized(sides[0]), right=_parenthesized(sides[1]))


#: A zero beside a linear value in a ``where`` is written ``0``: the value, the sizes (``E`` at the
#: tangent has at least the result's sizes, the zero's) and the dtype (the linear side's, which
#: already promotes the tangent's with the constants': a Python ``0`` promotes nothing) are
#: those of ``at.zeros_like(tangent)``, and no zeros are made.
_literal_zero = cst.Integer("0")


def _is_literal_zero(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Integer) and node.value == "0"


def _parenthesized(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, (cst.BinaryOperation, cst.UnaryOperation)):
        return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return node


def _at_call(node: cst.BaseExpression, name: str, arity: int) -> bool:
    return (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and isinstance(node.func.value, cst.Name) and node.func.value.value == "at"
            and node.func.attr.value == name and len(node.args) == arity
            and not any(a.keyword or a.star for a in node.args))


def _reads_outside_zeros(node: cst.CSTNode, name: str) -> int:
    """How often ``name`` is read in ``node`` other than as a zero maker's argument."""
    if isinstance(node, cst.Name):
        return int(node.value == name)
    if isinstance(node, cst.Call) and _at_call(node, "zeros_like", 1):
        return 0
    return sum(_reads_outside_zeros(child, name) for child in node.children)


def diagonal_gradient(body: list[cst.BaseStatement], grad: str, returned: cst.BaseExpression | None,
                      sizes_names: set[str]) -> DiagonalGradient | None:
    """The input's gradient ``returned`` (in the straight-line, mask-folded ``body`` of a backward
    with one gradient parameter ``grad``) as a :class:`DiagonalGradient`, when it is
    ``sum_to(E, s)`` (``s`` one of ``sizes_names``: the input's sizes), ``E`` diagonal in ``grad``;
    else None."""
    bindings = _bindings(body)
    if bindings is None or grad in bindings or returned is None:
        return None
    checker = _Diagonal(grad, bindings)
    if isinstance(returned, cst.Name):
        values = bindings.get(returned.value, [])
        if not values:
            return None
        returned = values[-1]           # the binding the return reads (earlier ones: ``= None``)
    if not (isinstance(returned, cst.Call) and isinstance(returned.func, cst.Name) and returned.func.value == "sum_to"
            and len(returned.args) == 2 and not any(a.keyword or a.star for a in returned.args)
            and isinstance(returned.args[1].value, cst.Name) and returned.args[1].value.value in sizes_names
            and returned.args[1].value.value not in bindings):
        return None
    expression = checker.map(returned.args[0].value)
    return None if expression is None else DiagonalGradient(expression, grad)


__all__ = ["DiagonalGradient", "diagonal_gradient", "diagonal_share"]
