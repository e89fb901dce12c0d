"""Cheaper derived jvps: semantics-preserving rewrites of what :func:`derive_jvp` writes.

Transposition is local: each linear step of the backward becomes its operator's own backward,
so a derived jvp carries what made sense in reverse mode and is waste in forward mode: zero
tensors made only to read their sizes, copies of names, multiplications by a literal one,
branches on literal conditions, and (the costly one) a tangent rebuilt from zero-padded pieces
added up one by one. :func:`simplify` rewrites the jvp's body, each rule keeping every value the
jvp returns the same:

- **Literal folding.** ``maybe_multiply(x, 1)`` is ``x`` (the helper's own contract),
  ``negated(negated(p))`` is ``p``;
  ``if None is None:`` / ``if True:`` keep their taken branch.
- **Sizes of a zero.** ``z.sizes()`` where ``z = at.zeros_like(y)`` is ``y.sizes()``, where
  ``z = at.new_zeros(y, sizes)`` is ``sizes``; the zero, then unread, is dropped.
- **Copies.** ``a = b`` (``a`` bound once, ``b`` once and outside loops) renames ``a`` to ``b``.
- **Zero plus x.** ``d = <a zero>`` followed in the same block by ``d = d + x`` (nothing reading
  ``d`` between) is ``d = x`` (the adjoint ``x`` has ``d``'s sizes: transposition makes it so).
- **Zero across a branch.** ``if c: A else: B`` then ``d = a + b`` where a branch binds ``a`` or
  ``b`` last to a zero: the sum moves into both branches and that zero drops out (outside loops).
- **Padded pieces.** ``d = at.new_zeros(w, sizes)`` before a loop whose only use of ``d`` is
  ``d = d + narrow_backward(x, sizes, dim, start, length)`` (or ``at.select_backward(x, sizes,
  dim, index)``, a piece of length 1) collects the pieces instead; after the loop, when they
  tile ``sizes[dim]`` in order (checked on the integers, at run time), ``d`` is their ``at.cat``
  (``at.stack``): one copy; otherwise the zero and the padded sum as before.
- **Reshapes that unsqueeze.** ``t = at.reshape(x, reduced_sizes(s, d, False))`` read only by
  ``sum_backward(t, s, d, False)`` (unsqueezes per reduced dim, then an expand) reshapes to
  ``reduced_sizes(s, d, True)`` at once: ``at.expand(t, s)``.
- **Crops.** ``at.constant_pad_nd(x, negated(pads), value)`` with no pad negative (checked on
  the integers, at run time) only cuts ``x``: ``at.narrow`` per cut dim, no zero-filled copy.
- **Shared values.** ``b = E`` after ``a = E`` (in ``a``'s block or one inside it, both bound
  once, ``E`` reading no list and no name bound again) reads ``a``: ``E`` is computed once.
- **Where-terms.** ``d = sum_to(at.where(c, p, zp), s) + sum_to(at.where(c, zq, q), s)`` where
  ``zp``, ``zq`` are ``at.zeros_like`` of ``p``, ``q`` (or a term is ``at.masked_fill(q, c, 0)``;
  each term read only there) is one
  ``sum_to(at.where(c, p, q), s)`` when ``p`` and ``q`` have the same sizes (checked at run
  time: both terms then have one shape, so ``sum_to`` adds them), the two terms otherwise;
  the ``sum_to`` may be absent from both.
- **Replayed branches.** ``if c: A else: B`` then ``if c: C else: D`` (``c`` a name ``A`` and
  ``B`` do not bind: one value tested twice) is ``if c: A; C else: B; D``, and ``c = E`` again
  (``c`` holding ``E`` already) is dropped; what ``A`` bound and ``C`` binds again is then dead.
  An ``a.append(x)`` to a list no other name can hold and nothing reads later is dead too.
  ``if c: A else: B`` moves down to a later ``if c:`` of its block when nothing between reads
  what ``A`` or ``B`` bind or rebinds what they read, so the two merge (a zero made in ``B`` and
  added to in ``D`` is then ``d = x``).
- **Conjugates.** A ``CONJUGATING_HELPERS`` call (``div_tensor_self_backward(g, o, T)``, which
  reads ``o`` only as ``at.conj(o)``) at ``at.conj(z)`` is its body at ``z`` (``conj(conj(z)) =
  z``), at a real value its body without the ``conj`` (``is_complex()`` checked at run time);
  ``v = at.conj(E)`` reads ``E`` as it is when ``E`` is real: ``conj`` is the identity there.
- **Involutions.** ``at.t(at.t(x))``, ``matrix_transpose(matrix_transpose(x))`` and
  ``at.flip(at.flip(x, dims), dims)`` (also through a name whose value is the same where it is
  read) are ``x``: a transpose or a flip undone puts every element back.
- **Transposed products.** ``at.t(at.mm(a, b))`` with ``a`` or ``b`` an ``at.t(x)`` (also through
  a name read only there) is ``at.mm(at.t(b), at.t(a))``, the transpose of a transpose folded:
  ``(a b)^T = b^T a^T``, one transpose fewer (a matrix product's transpose taken twice by a
  transposition of ``mm``'s backward).
- **Broadcasts.** ``sum_to``'s transpose as the derivation inlines it (``sum_backward`` over the
  dims a broadcast to ``B`` expanded, then over the leading dims it added, each behind a
  condition computed by loops over the sizes) is ``at.expand(t, B)``, ``t`` itself when it has
  ``B``'s sizes: both are ``t`` broadcast to ``B``; the size loops, then unread, go.
- **Sums to one size.** ``a = sum_to(x, s)``, ``b = sum_to(y, s)``, ``d = a + b`` is
  ``sum_to(x + y, s)`` when ``x`` and ``y`` have the same sizes (checked at run time): ``sum_to``
  is linear and reduces the same dims of two tensors of one shape.
- **Values read in branches.** ``x = E`` (``E`` calling an operator) read only in the branches
  of one later ``if`` is computed first in each branch that reads it (a new name in the
  ``else``; into both only a write into zeros and the values it reads, or a value one branch
  reads only in a nested ``if``'s branches, where it sinks again).
- **Complementary writes.** ``a + b`` (each maybe ``sum_to`` one size) where ``a`` writes a
  source into zeros at a place (``gather_backward``, ``index_put`` accumulating, ``masked_scatter``,
  a ``select``/``slice``/``diagonal`` backward) and ``b`` holds zeros at the same place
  (``at.scatter(y, d, i, 0)``, ``index_put`` of a 0-d zero, ``masked_fill(y, m, 0)``, the view's
  scatter of zeros; a view's normalized dim and index name the place the raw ones do) is the
  source written into ``b`` (into ``y`` for a view's scatter) when the sizes agree (checked at run
  time), ``a + b`` otherwise.
- **Writes over cleared places.** ``at.scatter_add(c, d, i, s)`` with ``c = at.scatter(x, d, i,
  0)``, ``at.index_put(c, i, v, True)`` with ``c = at.index_put(x, i, <a 0-d zero>, False)`` (the
  same place) is ``at.scatter(x, d, i, s)``, ``at.index_put(x, i, v, False)``, and ``c.sizes()`` is
  ``x.sizes()``: the same values where the place's indices are distinct; where they repeat, the
  operator whose backward transposes to the sum writes one of the values (torch's backward gives
  each of them the place's gradient), and the write is its derivative, as its own jvp computes.
- **Values index_put broadcasts.** ``at.index_put(x, i, w, a)`` with ``w`` the values broadcast
  to ``list(at.index(z, i).sizes())`` of a zero ``z`` (or any tensor ``z``) reads the values as
  they are when ``x`` has ``z``'s sizes (checked at run time): the zero indexed only for its sizes
  is not made.
- **Negated terms.** ``n = -x`` read once, as ``n + y`` or ``y + n``, is ``y - x`` (IEEE
  subtraction adds the negation).
- **Fills overwritten.** ``at.masked_scatter(f, m, s)`` with ``f = at.masked_fill(x, m, c)`` is
  ``at.masked_scatter(x, m, s)`` (the scatter overwrites what the fill wrote), and ``f.sizes()``
  (``x`` and ``m`` names) is ``broadcast_sizes(x.sizes(), m.sizes())``.
- **Padding by nothing.** ``at.reshape(at.cat([a, u], 0), s)`` with ``u = at.new_zeros(a, [n])``
  is ``a`` (reshaped where its sizes are not ``s``) when ``n == 0`` and ``a`` is 1-d (checked at
  run time), as before otherwise.
- **Zeros of a broadcast.** ``at.new_zeros(w, s)`` with ``w`` a broadcast of ``v`` is
  ``at.new_zeros(v, s)``: the same dtype, read before the broadcast.
- **Broadcasts a view's backward makes.** ``at.diagonal_backward(w, s, o, d1, d2)`` with ``w`` a
  broadcast of ``v`` to ``diagonal_sizes(s, o, d1, d2)`` is ``at.diagonal_backward(v, s, o, d1,
  d2)``: the backward broadcasts its gradient into the diagonal itself.
- **Scatters into zeros.** ``at.masked_scatter(at.new_zeros(g, broadcast_sizes(y.sizes(),
  m.sizes())), m, g)`` is ``at.masked_select_backward(g, y, m)`` when ``y`` has ``g``'s dtype
  (checked at run time), as before otherwise: ATen's op is that scatter, one operator.
- **First entries.** ``e = a[0]`` after the one loop ``for i in range(n):`` appending to ``a`` (bound
  once to ``[]``) once a pass, first thing, is what that pass appends with ``i`` as 0 and a name the
  loop carries as the integer it held before it (cat's backward's first piece), when the other
  names it reads are bound once and unchanged from the loop on: the loop, then unread, goes.
- **Sources read from their first elements.** ``at.masked_scatter(x, m, s)`` /
  ``at.masked_select_backward(s, y, m)`` with ``s`` made from a name ``v`` by ``at.narrow(v, 0, 0,
  n)``, ``at.reshape(v, sizes)``, ``at.new_zeros(v, [0])`` or a choice between two of these (through
  names bound once) read ``v``: they read ``s`` only through its first elements in row-major order
  (as many as ``m`` holds True) and its dtype, which are ``v``'s first elements and dtype wherever
  the call returns (``s.scalar_type()`` and ``at.new_zeros(s, sizes)`` read ``v`` too).
- **Broadcasts an operator makes.** ``t = at.expand(x, s)`` (or ``sum_backward(x, s, dims,
  True)``: with ``keepdim`` the helper is that expand) read once, by ``t OP y`` / ``y OP t`` (``+
  - * /``, ``y`` a tensor's name) is ``x OP y`` when ``broadcast_sizes(x.sizes(), y.sizes()) ==
  s`` and ``x`` has ``len(s)`` dims or ``y``'s dtype (checked at run time), as before otherwise:
  the operator broadcasts ``x`` to ``s`` itself (a 0-d ``x`` of another dtype would promote as a
  number, hence the dtype).
- **Narrows that tile.** ``cat``'s backward inlined (``g = []``, ``o = 0``, a loop appending
  ``at.narrow(t, d, o, s[i])`` and adding ``s[i]`` to ``o``, or a zero where ``s[i] < 0``) is ``g
  = at.split_with_sizes(t, s, d)`` when ``s`` is not empty, has no entry below 0 and adds up to
  ``t.size(d)`` (checked at run time), the loop otherwise: the same views of ``t``, one operator.
- **Reshapes to own sizes.** ``at.reshape(x, s)`` (``x`` a name, ``s`` plain sizes) is ``x`` when
  ``x`` has the sizes ``s`` (checked at run time): the reshape changes nothing.
- **Absorbed broadcast sizes.** ``y = broadcast_sizes(A, B)`` is ``y = A`` when every size ``B``
  broadcasts is one ``A`` broadcasts (through ``broadcast_sizes``, names bound once and sizes of
  elementwise results); ``sum_to(x, s)`` is ``x`` when ``x``'s sizes and ``s`` broadcast the same
  sizes (:func:`absorb_broadcast_sizes`).
- **The forward's values** (:func:`read_forward_values`, after :func:`simplify`). A part of the
  jvp computing a tensor the forward binds once (``self / other`` where ``result = at.div(self,
  other)``, its names bound once, nothing written in place) reads the forward's name.

Names bound more than once, or inside a loop, are left alone by the rules that substitute:
their value at a use is not the one at the binding. Dead assignments are dropped last.
"""
from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

import libcst as cst

from transpiler.jvp_fragments import code, rename
from transpiler.jvp_fragments import expression as _expr
from transpiler.jvp_fragments import live_only as _live_only
from transpiler.jvp_fragments import names as _names
from transpiler.jvp_fragments import nodes as _nodes
from transpiler.jvp_fragments import statement as _stmt

#: Operators whose result is zero whatever their arguments hold.
ZERO_MAKERS = frozenset({"zeros_like", "new_zeros"})


@dataclass(frozen=True)
class Bindings:
    """How often each name is bound in the jvp, and which are bound inside a loop."""

    counts: Counter
    in_loops: frozenset[str]

    def stable(self, name: str) -> bool:
        """Bound at most once and not in a loop: its value is the same wherever it is read."""
        return self.counts[name] <= 1 and name not in self.in_loops


def _bound_names(node: cst.CSTNode) -> list[str]:
    names: list[str] = []
    for n in _nodes(node):
        if isinstance(n, (cst.AssignTarget, cst.For)) and isinstance(n.target, cst.Name):
            names.append(n.target.value)
    return names


def bindings(statements: list[cst.BaseStatement]) -> Bindings:
    """The :class:`Bindings` of ``statements``."""
    module = cst.Module(body=statements)
    in_loops = {name for n in _nodes(module) if isinstance(n, cst.For) for name in _bound_names(n)}
    return Bindings(Counter(_bound_names(module)), frozenset(in_loops))


def _call_name(node: cst.BaseExpression) -> str | None:
    """``f`` of ``f(...)`` or ``at.f(...)``."""
    if not isinstance(node, cst.Call):
        return None
    if isinstance(node.func, cst.Name):
        return node.func.value
    if isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name) and node.func.value.value == "at":
        return node.func.attr.value
    return None


class Assignment(NamedTuple):
    """A one-line ``name = value``."""

    name: str
    value: cst.BaseExpression


def _assignment(statement: cst.CSTNode) -> Assignment | None:
    """The :class:`Assignment` of a one-line ``name = value``."""
    if (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Assign) and len(statement.body[0].targets) == 1
            and isinstance(statement.body[0].targets[0].target, cst.Name)):
        return Assignment(statement.body[0].targets[0].target.value, statement.body[0].value)
    return None


def _assignment_positions(block: list[cst.BaseStatement]) -> dict[str, int]:
    """Each name a ``name = value`` statement of ``block`` binds -> the index of its last such statement."""
    return {assigned.name: index for index, statement in enumerate(block)
            if (assigned := _assignment(statement)) is not None}


def _sum_assignment(statement: cst.CSTNode) -> Assignment | None:
    """The :class:`Assignment` of a one-line ``name = a + b`` (its value a ``cst.BinaryOperation``)."""
    assigned = _assignment(statement)
    if assigned is not None and isinstance(assigned.value, cst.BinaryOperation) \
            and isinstance(assigned.value.operator, cst.Add):
        return assigned
    return None


def _same_sizes_choice(a: str, b: str, target: str, fused: str, separate: str) -> cst.BaseStatement:
    """``target = fused`` where ``a`` and ``b`` have the same sizes when it runs, else ``target =
    separate``: a fusion that holds only for equal sizes, checked at run time."""
    return cst.parse_statement(f"if {a}.sizes() == {b}.sizes():\n    {target} = {fused}\n"
                               f"else:\n    {target} = {separate}\n")


def _top_assignments(statements) -> dict[str, cst.BaseExpression]:
    """Every ``name = value`` anywhere in ``statements`` (the last one per name)."""
    found = {}
    for n in _nodes(cst.Module(body=statements)):
        if isinstance(n, cst.Assign) and len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name):
            found[n.targets[0].target.value] = n.value
    return found


# ---- literal folding ---------------------------------------------------------------------
def _literal_truth(test: cst.BaseExpression) -> bool | None:
    if isinstance(test, cst.Name) and test.value in ("True", "False"):
        return test.value == "True"
    if (isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and test.left.value == "None"
            and len(test.comparisons) == 1 and isinstance(test.comparisons[0].comparator, cst.Name)
            and test.comparisons[0].comparator.value == "None"):
        operator = test.comparisons[0].operator
        if isinstance(operator, cst.Is):
            return True
        if isinstance(operator, cst.IsNot):
            return False
    return None


def _is_one(node: cst.BaseExpression) -> bool:
    return (isinstance(node, cst.Integer) and node.value == "1") or (isinstance(node, cst.Float)
                                                                     and float(node.value) == 1.0)


class _LiteralFolder(cst.CSTTransformer):
    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if (_call_name(updated) == "maybe_multiply" and isinstance(updated.func, cst.Name) and len(updated.args) == 2
                and not any(a.keyword or a.star for a in updated.args) and _is_one(updated.args[1].value)):
            return updated.args[0].value
        if (_call_name(updated) == "negated" and isinstance(updated.func, cst.Name) and len(updated.args) == 1
                and _call_name(updated.args[0].value) == "negated" and isinstance(updated.args[0].value.func, cst.Name)
                and len(updated.args[0].value.args) == 1):
            return updated.args[0].value.args[0].value
        return updated

    def leave_IfExp(self, original: cst.IfExp, updated: cst.IfExp) -> cst.BaseExpression:
        truth = _literal_truth(updated.test)
        if truth is None:
            return updated
        return updated.body if truth else updated.orelse

    def leave_If(self, original: cst.If, updated: cst.If):
        truth = _literal_truth(updated.test)
        if truth is None:
            return updated
        if truth:
            return cst.FlattenSentinel(list(updated.body.body))
        if isinstance(updated.orelse, cst.Else):
            return cst.FlattenSentinel(list(updated.orelse.body.body))
        if isinstance(updated.orelse, cst.If):
            return updated.orelse
        return cst.RemoveFromParent()


def fold_literals(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``maybe_multiply(x, 1)`` -> ``x``, ``negated(negated(p))`` -> ``p``, and the branch a literal
    condition takes in place of the ``if``."""
    return list(cst.Module(body=statements).visit(_LiteralFolder()).body)


# ---- sizes of a zero ---------------------------------------------------------------------
class _ZeroSizes(cst.CSTTransformer):
    def __init__(self, sizes: dict[str, cst.BaseExpression]) -> None:
        self.sizes = sizes

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = updated.func
        if (isinstance(func, cst.Attribute) and func.attr.value == "sizes" and not updated.args
                and isinstance(func.value, cst.Name) and func.value.value in self.sizes):
            return self.sizes[func.value.value]
        return updated


def zero_sizes(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``z.sizes()`` of a zero maker's result -> the sizes it was made with."""
    bound = bindings(statements)
    sizes: dict[str, cst.BaseExpression] = {}
    for name, value in _top_assignments(statements).items():
        if not bound.stable(name) or _call_name(value) not in ZERO_MAKERS:
            continue
        args = value.args
        if any(a.keyword or a.star for a in args):
            continue
        if _call_name(value) == "zeros_like" and len(args) == 1 and isinstance(args[0].value, cst.Name):
            made = cst.parse_expression(f"{args[0].value.value}.sizes()")
        elif _call_name(value) == "new_zeros" and len(args) == 2:
            made = args[1].value
        else:
            continue
        if all(bound.stable(n) for n in _names(made)):
            sizes[name] = made
    if not sizes:
        return statements
    return list(cst.Module(body=statements).visit(_ZeroSizes(sizes)).body)


# ---- copies ------------------------------------------------------------------------------
def propagate_copies(statements: list[cst.BaseStatement], parameters: set[str]) -> list[cst.BaseStatement]:
    """``a = b`` of two stable names: every ``a`` read as ``b``, the copy dropped."""
    bound = bindings(statements)
    copies: dict[str, cst.BaseExpression] = {}
    for name, value in _top_assignments(statements).items():
        # ``a`` may be bound in a loop: each pass binds the same value of ``b``
        if (isinstance(value, cst.Name) and name not in parameters and bound.counts[name] == 1
                and bound.stable(value.value) and value.value not in ("None", "True", "False")):
            copies[name] = value
    for name, value in list(copies.items()):       # a copy of a copy reads the first name
        while value.value in copies:
            value = copies[value.value]
        copies[name] = value
    if not copies:
        return statements

    class Dropper(cst.CSTTransformer):
        def leave_SimpleStatementLine(self, original, updated):
            assigned = _assignment(original)
            if assigned is not None and assigned.name in copies:
                return cst.RemoveFromParent()
            return updated

    module = cst.Module(body=statements).visit(Dropper())
    return list(rename(module, copies).body)


# ---- zero plus x -------------------------------------------------------------------------
def _sum_of(value: cst.BaseExpression, name: str) -> cst.BaseExpression | None:
    """``x`` of ``name + x`` or ``x + name`` (``x`` not reading ``name``)."""
    if not (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add)):
        return None
    for mine, other in ((value.left, value.right), (value.right, value.left)):
        if isinstance(mine, cst.Name) and mine.value == name and name not in _names(other):
            return other
    return None


def _is_zero(value: cst.BaseExpression) -> bool:
    return _call_name(value) in ZERO_MAKERS


def drop_added_zeros(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """In every block: ``d = <zero>`` ... ``d = d + x`` (``d`` unread between) -> ``d = x``."""
    result = [_in_blocks(s, drop_added_zeros) for s in statements]
    index = 0
    while index < len(result):
        zero = _assignment(result[index])
        if zero is None or not _is_zero(zero.value):
            index += 1
            continue
        name = zero.name
        for later in range(index + 1, len(result)):
            assigned = _assignment(result[later])
            added = _sum_of(assigned.value, name) if assigned is not None and assigned.name == name else None
            if added is not None:
                result[later] = result[later].with_changes(body=[result[later].body[0].with_changes(value=added)])
                del result[index]
                break
            if name in _names(result[later]):
                break
        index += 1
    return result


class ZeroBinding(NamedTuple):
    """``block[index]`` is ``name = <a zero>``."""

    index: int
    name: str


def _zero_bound_last(block: list[cst.BaseStatement], names: tuple[str, ...]) -> ZeroBinding | None:
    """The last ``name = <zero>`` statement of ``block`` (``name`` one of ``names``), after which
    ``block`` neither reads nor binds ``name``."""
    for index in range(len(block) - 1, -1, -1):
        assigned = _assignment(block[index])
        if assigned is not None and assigned.name in names and _is_zero(assigned.value) \
                and not any(assigned.name in _names(later) for later in block[index + 1:]):
            return ZeroBinding(index, assigned.name)
    return None


def drop_branch_zeros(statements: list[cst.BaseStatement], read_later: frozenset[str] = frozenset()
                      ) -> list[cst.BaseStatement]:
    """In every block outside loops: ``if c: A else: B`` then ``d = a + b`` (``a``, ``b`` two names;
    one that is not ``d`` read nowhere after) where ``A`` or ``B`` binds ``a`` or ``b`` last to a
    zero -> the sum moved into both branches, where it adds that zero no more (``d = b``, or nothing
    when ``b`` is ``d``): the adjoint merged after a branch that is zero on one side (``a`` and ``b``
    have ``d``'s sizes: transposition makes it so, as for ``drop_added_zeros``). ``read_later``: the
    names read after ``statements``."""
    result = []
    for index, statement in enumerate(statements):
        after = read_later.union(*(_names(later) for later in statements[index + 1:]))
        result.append(_in_blocks(statement, lambda block: drop_branch_zeros(block, after))
                      if isinstance(statement, cst.If) else statement)
    index = 0
    while index + 1 < len(result):
        branch, summed = result[index], _sum_assignment(result[index + 1])
        operands = (summed.value.left, summed.value.right) if summed is not None else ()
        if not (isinstance(branch, cst.If) and isinstance(branch.orelse, cst.Else)
                and all(isinstance(o, cst.Name) for o in operands) and len({code(o) for o in operands}) == 2):
            index += 1
            continue
        target, names = summed.name, tuple(o.value for o in operands)
        read_after = read_later.union(*(_names(later) for later in result[index + 2:]))
        if any(name != target and name in read_after for name in names):
            index += 1
            continue
        blocks, dropped = [], False
        for block in (list(branch.body.body), list(branch.orelse.body.body)):
            zero = _zero_bound_last(block, names)
            if zero is None:
                block.append(result[index + 1].with_changes(leading_lines=[]))
            else:
                del block[zero.index]
                other = names[1] if zero.name == names[0] else names[0]
                block += [] if other == target else [_stmt(f"{target} = {other}")]
                dropped = True
            blocks.append(block or [cst.SimpleStatementLine([cst.Pass()])])
        if not dropped:
            index += 1
            continue
        result[index] = branch.with_changes(body=branch.body.with_changes(body=blocks[0]), orelse=branch.orelse.with_changes(
            body=branch.orelse.body.with_changes(body=blocks[1])))
        del result[index + 1]
    return result


def _in_blocks(statement: cst.BaseStatement, rewrite) -> cst.BaseStatement:
    """``statement`` with ``rewrite`` applied to each block directly inside it."""
    if isinstance(statement, (cst.If, cst.For)):
        body = statement.body.with_changes(body=rewrite(list(statement.body.body)))
        orelse = statement.orelse
        if isinstance(orelse, cst.Else):
            orelse = orelse.with_changes(body=orelse.body.with_changes(body=rewrite(list(orelse.body.body))))
        elif isinstance(orelse, cst.If):
            orelse = _in_blocks(orelse, rewrite)
        return statement.with_changes(body=body, orelse=orelse)
    return statement


# ---- reshapes that unsqueeze ------------------------------------------------------------
def _changes(statement: cst.CSTNode, names: set[str]) -> bool:
    """Whether ``statement`` binds or appends to one of ``names``."""
    if set(_bound_names(statement)) & names:
        return True
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "append"
               and isinstance(n.func.value, cst.Name) and n.func.value.value in names for n in _nodes(statement))


class Reduction(NamedTuple):
    """The code of ``sizes`` and ``dims`` of ``reduced_sizes(sizes, dims, False)``."""

    sizes: str
    dims: str


def _reduced(value: cst.BaseExpression) -> Reduction | None:
    """The :class:`Reduction` of ``reduced_sizes(sizes, dims, False)``."""
    if (_call_name(value) == "reduced_sizes" and isinstance(value.func, cst.Name) and len(value.args) == 3
            and not any(a.keyword or a.star for a in value.args) and code(value.args[2].value) == "False"):
        return Reduction(code(value.args[0].value), code(value.args[1].value))
    return None


def fuse_unsqueezing_reshapes(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """In every block: ``l = reduced_sizes(s, d, False)``, ``t = at.reshape(x, l)``, then
    ``u = sum_backward(t, s, d, False)`` (the only read of ``t``; ``s`` and ``d`` unchanged
    between) -> ``t = at.reshape(x, reduced_sizes(s, d, True))``, ``u = at.expand(t, s)``: the
    unsqueezes of the reduced dims are one reshape."""
    result = [_in_blocks(s, fuse_unsqueezing_reshapes) for s in statements]
    reads = Counter(n.value for n in _nodes(cst.Module(body=result)) if isinstance(n, cst.Name))
    for u_index, statement in enumerate(result):
        assigned = _assignment(statement)
        if assigned is None or _call_name(assigned.value) != "sum_backward" \
                or not isinstance(assigned.value.func, cst.Name):
            continue
        args = assigned.value.args
        if len(args) != 4 or any(a.keyword or a.star for a in args) or code(args[3].value) != "False":
            continue
        t, sizes, dims = args[0].value, code(args[1].value), code(args[2].value)
        if not isinstance(t, cst.Name) or reads[t.value] != 2:      # its binding and this read
            continue
        t_index = next((i for i in reversed(range(u_index))
                        if (a := _assignment(result[i])) is not None and a.name == t.value), None)
        if t_index is None or _call_name(_assignment(result[t_index]).value) != "reshape":
            continue
        reshape = _assignment(result[t_index]).value
        if len(reshape.args) != 2 or any(a.keyword or a.star for a in reshape.args):
            continue
        shape, l_index = reshape.args[1].value, t_index
        if isinstance(shape, cst.Name):
            l_index = next((i for i in reversed(range(t_index)) if (a := _assignment(result[i])) is not None
                            and a.name == shape.value), None)
            if l_index is None:
                continue
            shape = _assignment(result[l_index]).value
        if _reduced(shape) != Reduction(sizes, dims):
            continue
        watched = _names(args[1].value) | _names(args[2].value)
        if any(_changes(result[i], watched) for i in range(l_index + 1, u_index)):
            continue
        kept = cst.parse_expression(f"reduced_sizes({sizes}, {dims}, True)")
        result[t_index] = result[t_index].with_changes(body=[result[t_index].body[0].with_changes(
            value=reshape.with_changes(args=[reshape.args[0], reshape.args[1].with_changes(value=kept)]))])
        result[u_index] = statement.with_changes(body=[statement.body[0].with_changes(
            value=cst.parse_expression(f"at.expand({t.value}, {sizes})"))])
    return result


# ---- crops ------------------------------------------------------------------------------
class _Crops(cst.CSTTransformer):
    """``y = at.constant_pad_nd(x, negated(pads), value)`` -> narrows of ``x`` when no pad is
    negative (a pad by amounts <= 0 is a crop), the pad otherwise."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken

    def fresh(self, stem: str) -> str:
        suffix = 0
        while f"{stem}{suffix or ''}" in self.taken:
            suffix += 1
        self.taken.add(f"{stem}{suffix or ''}")
        return f"{stem}{suffix or ''}"

    def leave_SimpleStatementLine(self, original, updated):
        assigned = _assignment(updated)
        if assigned is None or _call_name(assigned.value) != "constant_pad_nd":
            return updated
        args = assigned.value.args
        if len(args) != 3 or any(a.keyword or a.star for a in args) or _call_name(args[1].value) != "negated":
            return updated
        negated = args[1].value
        if not isinstance(negated.func, cst.Name) or len(negated.args) != 1 or negated.args[0].keyword:
            return updated
        target, x, pads = assigned.name, code(args[0].value), code(negated.args[0].value)
        v = {kind: self.fresh(f"{target}_{kind}") for kind in ("pads", "crops", "entry", "pair", "dim", "front", "back")}
        lines = cst.parse_module(
            f"{v['pads']} = {pads}\n"
            f"{v['crops']} = True\n"
            f"for {v['entry']} in range(len({v['pads']})):\n"
            f"    if {v['pads']}[{v['entry']}] < 0:\n"
            f"        {v['crops']} = False\n"
            f"if {v['crops']}:\n"
            f"    {target} = {x}\n"
            f"    for {v['pair']} in range(len({v['pads']}) // 2):\n"
            f"        {v['dim']} = {target}.dim() - 1 - {v['pair']}\n"
            f"        {v['front']} = {v['pads']}[2 * {v['pair']}]\n"
            f"        {v['back']} = {v['pads']}[2 * {v['pair']} + 1]\n"
            f"        if {v['front']} != 0 or {v['back']} != 0:\n"
            f"            {target} = at.narrow({target}, {v['dim']}, {v['front']}, "
            f"{target}.size({v['dim']}) - {v['front']} - {v['back']})\n"
            f"else:\n"
            f"    {code(updated.body[0])}\n").body
        return cst.FlattenSentinel([lines[0].with_changes(leading_lines=updated.leading_lines), *lines[1:]])


def crop_pads(statements: list[cst.BaseStatement], taken: set[str]) -> list[cst.BaseStatement]:
    """A pad by amounts that are none of them positive written as narrows (:class:`_Crops`)."""
    return list(cst.Module(body=statements).visit(_Crops(taken)).body)


# ---- padded pieces ----------------------------------------------------------------------
class PieceMaker(NamedTuple):
    """A transpose that pads a piece with zeros along ``dim`` (``call``), and the operator that
    joins pieces tiling that dim (``join``)."""

    call: str
    arity: int          # (piece, sizes, dim, start[, length])
    join: str


#: ``narrow``'s and ``select``'s backwards: the pieces tile a dim by ``cat`` and by ``stack``.
PIECE_MAKERS = {"narrow_backward": PieceMaker("narrow_backward", 5, "at.cat"),
                "select_backward": PieceMaker("at.select_backward", 4, "at.stack")}


@dataclass(frozen=True)
class Piece:
    """``padded = <piece maker>(piece, sizes, dim, start[, length])`` then ``total = total + padded``."""

    total: str
    padded: str
    maker: PieceMaker
    arguments: tuple[cst.BaseExpression, ...]       # piece, sizes, dim, start, length (1 for select)


def _piece(first: cst.BaseStatement, second: cst.BaseStatement) -> Piece | None:
    padded, total = _assignment(first), _assignment(second)
    maker = PIECE_MAKERS.get(_call_name(padded.value)) if padded is not None else None
    if maker is None or total is None or code(padded.value.func) != maker.call:
        return None
    args = padded.value.args
    if len(args) != maker.arity or any(a.keyword or a.star for a in args):
        return None
    added = _sum_of(total.value, total.name)
    if not (isinstance(added, cst.Name) and added.value == padded.name):
        return None
    length = () if maker.arity == 5 else (cst.Integer("1"),)
    return Piece(total.name, padded.name, maker, tuple(a.value for a in args) + length)


def _pieces_in(statements) -> list[Piece]:
    """Every padded piece added up in ``statements`` (any depth)."""
    found = []
    blocks = [list(n.body) for n in _nodes(cst.Module(body=statements)) if isinstance(n, (cst.IndentedBlock,))]
    for block in blocks:
        found += [p for a, b in itertools.pairwise(block) if (p := _piece(a, b)) is not None]
    return found


class _PieceCollector(cst.CSTTransformer):
    """The two statements of ``piece`` -> appends of its piece, dim, start and length."""

    def __init__(self, piece: Piece, lists: dict[str, str]) -> None:
        self.piece = piece
        self.lists = lists

    def leave_IndentedBlock(self, original, updated):
        body = list(updated.body)
        for i in range(len(body) - 1):
            piece = _piece(body[i], body[i + 1])
            if piece is not None and piece.padded == self.piece.padded:
                x, _, dim, start, length = piece.arguments
                appends = [_stmt(f"{self.lists[kind]}.append({code(value)})")
                           for kind, value in (("pieces", x), ("dims", dim), ("starts", start), ("lengths", length))]
                return updated.with_changes(body=body[:i] + appends + body[i + 2:])
        return updated


def concatenate_pieces(statements: list[cst.BaseStatement], taken: set[str]) -> list[cst.BaseStatement]:
    """``d = at.new_zeros(w, sizes)``, then a loop adding padded pieces (``PIECE_MAKERS``) of
    ``sizes`` to ``d`` -> the pieces collected, and ``d`` their join when they tile ``sizes[dim]``
    in the order the (reversed) loop met them, the zero and the padded sum otherwise."""
    bound = bindings(statements)
    result = list(statements)
    index = 0
    while index < len(result):
        zero = _assignment(result[index])
        if zero is None or _call_name(zero.value) != "new_zeros" or len(zero.value.args) != 2:
            index += 1
            continue
        name, sizes = zero.name, zero.value.args[1].value
        loop = next((j for j in range(index + 1, len(result)) if name in _names(result[j])), None)
        if loop is None or not isinstance(result[loop], cst.For) \
                or not all(bound.stable(n) for n in _names(zero.value)):
            index += 1
            continue
        pieces = _pieces_in([result[loop]])
        reads = sum(1 for n in _nodes(result[loop]) if isinstance(n, cst.Name) and n.value == name)
        if (len(pieces) != 1 or pieces[0].total != name or code(pieces[0].arguments[1]) != code(sizes)
                or reads != 2 or bound.counts[pieces[0].padded] != 1
                or any(isinstance(n, (cst.Break, cst.Continue)) for n in _nodes(result[loop]))):
            index += 1
            continue
        stem = f"{name}_"
        lists = {}
        for kind in ("pieces", "dims", "starts", "lengths", "ordered", "count", "position", "tiled", "k", "entry"):
            suffix = 0
            while f"{stem}{kind}{suffix or ''}" in taken:
                suffix += 1
            lists[kind] = f"{stem}{kind}{suffix or ''}"
            taken.add(lists[kind])
        v = lists
        maker = pieces[0].maker
        fallback_length = f", {v['lengths']}[{v['k']}]" if maker.arity == 5 else ""
        start = [_stmt(f"{v[kind]} = []") for kind in ("pieces", "dims", "starts", "lengths")]
        loop_statement = result[loop].visit(_PieceCollector(pieces[0], lists))
        check = cst.parse_module(
            f"{v['count']} = len({v['pieces']})\n"
            f"{v['tiled']} = {v['count']} > 0\n"
            f"{v['position']} = 0\n"
            f"{v['ordered']} = []\n"
            f"for {v['k']} in range({v['count']}):\n"
            f"    {v['entry']} = {v['count']} - 1 - {v['k']}\n"
            f"    {v['ordered']}.append({v['pieces']}[{v['entry']}])\n"
            f"    if {v['dims']}[{v['entry']}] != {v['dims']}[0] or {v['starts']}[{v['entry']}] != {v['position']}:\n"
            f"        {v['tiled']} = False\n"
            f"    {v['position']} = {v['position']} + {v['lengths']}[{v['entry']}]\n"
            f"if {v['tiled']}:\n"
            f"    {v['tiled']} = {v['position']} == ({code(sizes)})[{v['dims']}[0]]\n"
            f"if {v['tiled']}:\n"
            f"    {name} = {maker.join}({v['ordered']}, {v['dims']}[0])\n"
            f"else:\n"
            f"    {name} = {code(zero.value)}\n"
            f"    for {v['k']} in range({v['count']}):\n"
            f"        {name} = {name} + {maker.call}({v['pieces']}[{v['k']}], {code(sizes)}, {v['dims']}[{v['k']}], "
            f"{v['starts']}[{v['k']}]{fallback_length})\n").body
        result[loop:loop + 1] = start + [loop_statement] + list(check)
        del result[index]           # the zero is made only where the pieces do not tile
        index = loop - 1 + len(start) + 1 + len(check)
    return result


# ---- shared values -----------------------------------------------------------------------
def _shareable(value: cst.BaseExpression, appended: set[str]) -> bool:
    """Whether two evaluations of ``value`` give one value: no list made or read while it grows
    (the language's expressions have no side effects otherwise); a name or literal is no saving."""
    if isinstance(value, (cst.Name, cst.Integer, cst.Float, cst.SimpleString)):
        return False
    return not any(isinstance(n, (cst.List, cst.ListComp, cst.Dict, cst.Set, cst.GeneratorExp)) for n in _nodes(value)) \
        and not (_names(value) & appended)


def share_repeated_values(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``b = E`` after ``a = E`` in the same block or one inside ``a``'s (``a``, ``b`` and every
    name of ``E`` bound at most once) -> ``b`` read as ``a``, its binding dropped."""
    bound = bindings(statements)
    appended = {n.func.value.value for n in _nodes(cst.Module(body=statements))
                if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "append"
                and isinstance(n.func.value, cst.Name)}
    shared: dict[str, cst.BaseExpression] = {}

    def walk(block: list[cst.BaseStatement], first: dict[str, str]) -> list[cst.BaseStatement]:
        kept = []                       # ``first``: code of E -> a, for the values bound before
        for statement in block:
            assigned = _assignment(statement)
            if (assigned is not None and bound.stable(assigned.name) and _shareable(assigned.value, appended)
                    and all(bound.stable(n) for n in _names(assigned.value))):
                key = code(rename(assigned.value, shared))
                if key in first:
                    shared[assigned.name] = cst.Name(first[key])
                    continue
                first[key] = assigned.name
            kept.append(_in_blocks(statement, lambda inner: walk(inner, dict(first))))
        return kept

    kept = walk(statements, {})
    if not shared:
        return statements
    return list(rename(cst.Module(body=kept), shared).body)


class _KnownValues(cst.CSTTransformer):
    """Each call or arithmetic whose code is a key of ``first`` -> the name holding that value."""

    def __init__(self, first: dict[str, str]) -> None:
        self.first = first

    def _known(self, updated: cst.BaseExpression) -> cst.BaseExpression:
        name = self.first.get(code(updated.with_changes(lpar=[], rpar=[])))
        return updated if name is None else cst.Name(name, lpar=updated.lpar, rpar=updated.rpar)

    def leave_Call(self, original, updated):
        return self._known(updated)

    def leave_BinaryOperation(self, original, updated):
        return self._known(updated)

    def leave_UnaryOperation(self, original, updated):
        return self._known(updated)


def share_repeated_subexpressions(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """A part ``E`` of any later expression, after ``a = E`` in the same block or one enclosing it
    (``a`` and every name of ``E`` bound at most once, outside loops) -> ``a``; a statement ``b =
    E`` then ``b = a``, a copy. (:func:`share_repeated_values` shares whole values only: a helper
    that recomputes ``f(x, g(x))`` where ``r = g(x)`` and ``n = f(x, r)`` are bound reads ``n``.)"""
    bound = bindings(statements)
    appended = {n.func.value.value for n in _nodes(cst.Module(body=statements))
                if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "append"
                and isinstance(n.func.value, cst.Name)}

    def walk(block: list[cst.BaseStatement], first: dict[str, str]) -> list[cst.BaseStatement]:
        kept = []                       # ``first``: code of E -> a, for the values bound before
        for statement in block:
            if first and not isinstance(statement, (cst.If, cst.For, cst.While)):
                statement = statement.visit(_KnownValues(first))
            assigned = _assignment(statement)
            if (assigned is not None and bound.stable(assigned.name) and _shareable(assigned.value, appended)
                    and all(bound.stable(n) for n in _names(assigned.value))):
                first.setdefault(code(assigned.value), assigned.name)
            if isinstance(statement, cst.If) and first:
                statement = statement.with_changes(test=statement.test.visit(_KnownValues(first)))
            kept.append(_in_blocks(statement, lambda inner: walk(inner, dict(first))))
        return kept

    return walk(statements, {})


# ---- where-terms ---------------------------------------------------------------------------
class WhereTerm(NamedTuple):
    """``[sum_to(]at.where(condition, p, zeros)[, sizes)]`` (``kept_first``) or
    ``...where(condition, zeros, p)...``, ``zeros`` naming ``at.zeros_like(p)``, or
    ``...at.masked_fill(p, condition, 0)...`` (no ``zeros``: ``where(condition, 0, p)``)."""

    condition: cst.BaseExpression
    kept: cst.Name
    zeros: str | None
    kept_first: bool
    sizes: cst.BaseExpression | None


def _where_term(value: cst.BaseExpression, zeros_of: dict[str, str]) -> WhereTerm | None:
    sizes = None
    if _call_name(value) == "sum_to" and isinstance(value.func, cst.Name):
        if len(value.args) != 2 or any(a.keyword or a.star for a in value.args):
            return None
        value, sizes = value.args[0].value, value.args[1].value
    if (_call_name(value) == "masked_fill" and len(value.args) == 3 and not any(a.keyword or a.star for a in value.args)
            and isinstance(value.args[0].value, cst.Name) and isinstance(value.args[2].value, (cst.Integer, cst.Float))
            and float(value.args[2].value.value) == 0.0):
        return WhereTerm(value.args[1].value, value.args[0].value, None, False, sizes)
    if _call_name(value) != "where" or len(value.args) != 3 or any(a.keyword or a.star for a in value.args):
        return None
    condition, first, second = (a.value for a in value.args)
    for kept, zeros, kept_first in ((first, second, True), (second, first, False)):
        if (isinstance(kept, cst.Name) and isinstance(zeros, cst.Name)
                and zeros_of.get(zeros.value) == kept.value):
            return WhereTerm(condition, kept, zeros.value, kept_first, sizes)
    return None


def fuse_where_terms(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """Top level: ``d = a + b`` of two where-terms (``WhereTerm``) on one condition keeping
    opposite sides, ``a`` and ``b`` read only there, nothing they read bound again before ``d``
    -> ``d = [sum_to(]at.where(c, p, q)[, s)]`` where ``p`` and ``q`` have one size, ``a + b``
    otherwise."""
    result = list(statements)
    reads = Counter(n.value for n in _nodes(cst.Module(body=result)) if isinstance(n, cst.Name))
    position = {}
    for index, statement in enumerate(result):
        for name in _bound_names(statement):
            position.setdefault(name, []).append(index)
    zeros_of = {name: value.args[0].value.value for statement in result if (assigned := _assignment(statement))
                for name, value in [assigned] if _call_name(value) == "zeros_like" and len(value.args) == 1
                and isinstance(value.args[0].value, cst.Name) and not value.args[0].keyword}
    for index, statement in enumerate(result):
        assigned = _sum_assignment(statement)
        if assigned is None:
            continue
        operands = (assigned.value.left, assigned.value.right)
        if not all(isinstance(o, cst.Name) and len(position.get(o.value, [])) == 1 and reads[o.value] == 2
                   and position[o.value][0] < index for o in operands):
            continue
        values = [_assignment(result[position[o.value][0]]) for o in operands]
        if any(v is None for v in values):
            continue
        terms = [_where_term(v.value, zeros_of) for v in values]
        if any(t is None for t in terms):
            continue
        one, other = terms
        if (one.kept_first == other.kept_first or code(one.condition) != code(other.condition)
                or (one.sizes is None) != (other.sizes is None)
                or (one.sizes is not None and code(one.sizes) != code(other.sizes))):
            continue
        zeros = {t.zeros: position.get(t.zeros, []) for t in terms if t.zeros is not None}
        if any(len(bound_at) != 1 for bound_at in zeros.values()):
            continue
        # what each term reads keeps its value from its zeros' binding (or its own) to ``d``
        if any(start < i < index and [i] != zeros.get(term.zeros)
               for operand, term in zip(operands, terms)
               for start in [min([position[operand.value][0], *zeros.get(term.zeros, [])])]
               for name in _names(values[operands.index(operand)].value) | {term.kept.value}
               for i in position.get(name, [])):
            continue
        kept, dropped = (one, other) if one.kept_first else (other, one)
        fused = f"at.where({code(kept.condition)}, {kept.kept.value}, {dropped.kept.value})"
        if kept.sizes is not None:
            fused = f"sum_to({fused}, {code(kept.sizes)})"
        zeroed = {t.zeros: cst.parse_expression(f"at.zeros_like({t.kept.value})") for t in terms if t.zeros}
        separate = code(assigned.value.with_changes(
            left=rename(values[0].value, zeroed),
            right=rename(values[1].value, zeroed)))
        target = assigned.name
        replacement = _same_sizes_choice(kept.kept.value, dropped.kept.value, target, fused, separate)
        result[index] = replacement.with_changes(leading_lines=statement.leading_lines)
        for o in operands:
            result[position[o.value][0]] = cst.SimpleStatementLine(body=[cst.Pass()])
    return [s for s in result if not (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
                                      and isinstance(s.body[0], cst.Pass))]


# ---- replayed branches -------------------------------------------------------------------
#: Calls that may read a list argument and never return it (a tensor, or a new list).
_LIST_READERS = frozenset({"sum_backward", "reduced_sizes"})


def private_lists(statements: list[cst.BaseStatement]) -> frozenset[str]:
    """Lists no other name can hold: made by ``a = []`` and read only by ``a.append(x)``,
    ``len(a)``, ``a[i]`` and as an argument of ``at.*``, ``sum_backward`` or ``reduced_sizes``
    (which return a tensor or a new list): an append to one nothing reads later is dead."""
    module = cst.Module(body=statements)
    lists = {a.name for n in _nodes(module) if (a := _assignment(n)) is not None
             and isinstance(a.value, cst.List) and not a.value.elements}
    allowed: set[int] = set()       # id() of Name nodes in an allowed place
    for n in _nodes(module):
        if isinstance(n, cst.AssignTarget) and isinstance(n.target, cst.Name) and isinstance(n, cst.AssignTarget):
            allowed.add(id(n.target))
        elif isinstance(n, cst.Attribute) and n.attr.value == "append" and isinstance(n.value, cst.Name):
            allowed.add(id(n.value))
        elif isinstance(n, cst.Subscript) and isinstance(n.value, cst.Name):
            allowed.add(id(n.value))
        elif isinstance(n, cst.Call) and (code(n.func) == "len" or code(n.func).startswith("at.")
                                          or code(n.func) in _LIST_READERS):
            allowed.update(id(a.value) for a in n.args if isinstance(a.value, cst.Name) and not a.keyword)
    bound_otherwise = {a.name for n in _nodes(module) if (a := _assignment(n)) is not None
                       and not (isinstance(a.value, cst.List) and not a.value.elements)}
    return frozenset(name for name in lists - bound_otherwise
                     if all(id(n) in allowed for n in _nodes(module) if isinstance(n, cst.Name) and n.value == name))


def _same_test_merged(first: cst.If, second: cst.If) -> cst.If | None:
    """``if c: A else: B`` then ``if c: C else: D`` -> ``if c: A; C else: B; D`` (``c`` a name
    neither ``A`` nor ``B`` binds: both tests read one value), or None."""
    if not (isinstance(first.test, cst.Name) and code(first.test) == code(second.test)
            and not isinstance(first.orelse, cst.If) and not isinstance(second.orelse, cst.If)
            and first.test.value not in _bound_names(first)):
        return None

    def joined(*blocks):
        body = [s for block in blocks if block is not None for s in block.body.body
                if not (isinstance(s, cst.SimpleStatementLine) and all(isinstance(b, cst.Pass) for b in s.body))]
        return body

    body = joined(first, second) or [cst.SimpleStatementLine([cst.Pass()])]
    orelse = joined(first.orelse, second.orelse)
    return first.with_changes(body=first.body.with_changes(body=body),
                              orelse=cst.Else(body=cst.IndentedBlock(body=orelse)) if orelse else None)


def merge_replayed_branches(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """In every block: the derivation replays the forward's branches before the transposes and
    tests them again after, so a block holds ``c = E ... c = E`` and ``if c: ...`` twice:

    - ``c = E`` again (the last binding of ``c`` before it in the block is ``c = E``, ``E`` reads
      no list and not ``c``, nothing between binds ``c`` or a name of ``E``) is dropped: ``c``
      holds ``E`` already;
    - adjacent ``if``s on one name that the first does not bind are one ``if``
      (``_same_test_merged``).

    What the replay bound and the second pass binds again is then dead in one straight line."""
    result = list(statements)
    changed = True
    while changed:
        changed = False
        for index, statement in enumerate(result):
            assigned = _assignment(statement)
            if assigned is None or not _shareable(assigned.value, set()) or assigned.name in _names(assigned.value):
                continue
            watched = {assigned.name} | _names(assigned.value)
            for earlier in reversed(range(index)):
                previous = _assignment(result[earlier])
                if previous is not None and previous.name == assigned.name:
                    if code(previous.value) == code(assigned.value):
                        del result[index]
                        changed = True
                    break
                if _changes(result[earlier], watched):
                    break
            if changed:
                break
        for index in range(len(result) - 1):
            if isinstance(result[index], cst.If) and isinstance(result[index + 1], cst.If):
                merged = _same_test_merged(result[index], result[index + 1])
                if merged is not None:
                    result[index:index + 2] = [merged]
                    changed = True
                    break
    return [_in_blocks(s, merge_replayed_branches) for s in result]


def _appended_names(node: cst.CSTNode) -> set[str]:
    """Names ``node`` appends to (``a.append(x)``)."""
    return {n.func.value.value for n in _nodes(node) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
            and n.func.attr.value == "append" and isinstance(n.func.value, cst.Name)}


def gather_replayed_branches(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """In every block: ``if c: A else: B`` (``c`` a name they do not bind, no ``return`` in them)
    moves down to a later ``if c:`` of the same block when no statement between reads a name
    ``A`` or ``B`` binds or appends to, nor binds (or appends to) a name they read or ``c``: the
    formula language's expressions have no side effects, so the branch computes the same there,
    and the two are adjacent, one ``if`` for ``merge_replayed_branches`` (a zero made in one
    branch and added to in the replay is then one block for ``drop_added_zeros``)."""
    result = list(statements)
    for index in reversed(range(len(result))):
        first = result[index]
        if not (isinstance(first, cst.If) and isinstance(first.test, cst.Name) and not isinstance(first.orelse, cst.If)
                and not any(isinstance(n, cst.Return) for n in _nodes(first))):
            continue
        written = set(_bound_names(first)) | _appended_names(first)
        if first.test.value in written:
            continue
        read = _names(first) - written
        for later in range(index + 1, len(result)):
            statement = result[later]
            if isinstance(statement, cst.If) and isinstance(statement.test, cst.Name) \
                    and statement.test.value == first.test.value:
                if later > index + 1:
                    result[index:later] = [*result[index + 1:later], first]
                break
            if _names(statement) & written or _changes(statement, read | {first.test.value}):
                break
    return [_in_blocks(s, gather_replayed_branches) for s in result]


# ---- involutions ----------------------------------------------------------------------------
#: Operators that are their own inverse, by the number of arguments they take: ``at.t`` swaps
#: the two dims of a matrix (and is the identity below two dims), ``matrix_transpose`` the last
#: two; either twice is the tensor it was given (the same sizes, every element back in its
#: place). ``at.flip(at.flip(x, dims), dims)`` reverses each of ``dims`` twice: ``x`` too, when
#: both ``dims`` are the same code.
INVOLUTIONS = {"at.t": 1, "matrix_transpose": 1, "at.flip": 2}


class _Involution(NamedTuple):
    function: str           # the involution and the code of its other arguments: equal, it undoes
    argument: cst.BaseExpression
    reads: set[str]         # every name the call reads


class _Involutions(cst.CSTTransformer):
    def __init__(self, applied: dict[str, _Involution]) -> None:
        self.applied = applied      # a name -> the involution it was bound to (its reads settled)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        inner = _involution(updated)
        if inner is None:
            return updated
        if isinstance(inner.argument, cst.Name) and inner.argument.value in self.applied:
            bound = self.applied[inner.argument.value]
            # folded as well: the binding's value is the one before this visit reached it
            return bound.argument.visit(self) if bound.function == inner.function else updated
        twice = _involution(inner.argument)
        return twice.argument if twice is not None and twice.function == inner.function else updated


def _involution(node: cst.BaseExpression) -> _Involution | None:
    """``f(x, ...)``, ``f`` in ``INVOLUTIONS`` with its positional arguments."""
    if (isinstance(node, cst.Call) and INVOLUTIONS.get(code(node.func)) == len(node.args)
            and not any(a.keyword or a.star for a in node.args)):
        others = [code(a.value.with_changes(lpar=[], rpar=[])) for a in node.args[1:]]
        return _Involution(", ".join([code(node.func), *others]), node.args[0].value, _names(node))
    return None


def fold_involutions(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``f(f(x))`` -> ``x`` for ``f`` in ``INVOLUTIONS``, also through ``y = f(x)`` then ``f(y)``
    (``y`` stable, and every name ``f(x)`` reads stable or, ``y`` bound at the top, bound by no
    later statement: ``x`` reads where ``f(y)`` does what it read at ``y``'s binding). The
    bindings, then unread, go with the dead assignments."""
    bound = bindings(statements)
    top = {}        # a name bound at the top -> the names later statements bind
    for index, statement in enumerate(statements):
        if (assigned := _assignment(statement)) is not None:
            top[assigned.name] = {n for later in statements[index + 1:] for n in _bound_names(later)}
    applied = {name: inner for name, value in _top_assignments(statements).items()
               if bound.stable(name) and (inner := _involution(value)) is not None and name not in inner.reads
               and all(bound.stable(n) or (name in top and n not in top[name]) for n in inner.reads)}
    return list(cst.Module(body=statements).visit(_Involutions(applied)).body)


# ---- conjugates -----------------------------------------------------------------------------
class ConjugatingHelper(NamedTuple):
    """A helper that reads one tensor parameter only conjugated."""

    position: int     # that parameter's position
    body: str         # the helper's body with its ``at.conj`` taken off, ``{i}`` the code of the ``i``-th argument


#: Helpers that read one tensor parameter only conjugated: helper -> its :class:`ConjugatingHelper`.
#: A call whose argument there is ``at.conj(z)`` is the body at ``z`` (``conj(conj(z)) = z``); one
#: whose argument is real (``is_complex()`` false when it runs) is the body at it (``conj`` is the
#: identity on real dtypes). ``tests/test_derive_jvp_simplify.py`` checks each body against its
#: helper's source.
CONJUGATING_HELPERS = {"div_tensor_self_backward": ConjugatingHelper(1, "handle_r_to_c({2}, {0} / {1})")}


class _ConjugatingHelpers(cst.CSTTransformer):
    def __init__(self, conjugated: dict[str, cst.BaseExpression]) -> None:
        self.conjugated = conjugated        # a stable name -> z of the ``at.conj(z)`` it holds

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if (isinstance(updated.func, cst.Attribute) and updated.func.attr.value == "sizes" and not updated.args
                and isinstance(updated.func.value, cst.Name) and updated.func.value.value in self.conjugated):
            # a conjugate has the sizes of what it conjugates
            return updated.with_changes(func=updated.func.with_changes(value=self.conjugated[updated.func.value.value]))
        entry = CONJUGATING_HELPERS.get(code(updated.func))
        if entry is None or any(a.keyword or a.star for a in updated.args) \
                or len(updated.args) != entry.body.count("{"):
            return updated
        position, body = entry
        arguments = [code(a.value) for a in updated.args]
        conjugated = updated.args[position].value
        if isinstance(conjugated, cst.Name) and conjugated.value in self.conjugated:
            conjugated = self.conjugated[conjugated.value]
        elif _call_name(conjugated) != "conj" or not code(conjugated.func).startswith("at."):
            if not isinstance(conjugated, cst.Name):
                return updated
            real = body.format(*arguments)
            return cst.parse_expression(f"({code(updated)} if {arguments[position]}.is_complex() else {real})")
        else:
            conjugated = conjugated.args[0].value
        arguments[position] = f"({code(conjugated)})" if not isinstance(conjugated, cst.Name) else code(conjugated)
        return cst.parse_expression(body.format(*arguments))


def conjugate_through_helpers(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """A ``CONJUGATING_HELPERS`` call: at ``at.conj(z)`` (also through a name bound once, at the
    top, to ``at.conj(z)``, ``z`` a stable name) its body at ``z``; at a name, its body at that
    name when the value is real, the call otherwise (one ``conj`` fewer on real dtypes)."""
    bound = bindings(statements)
    top = [a for s in statements if (a := _assignment(s)) is not None]
    conjugated = {name: value.args[0].value for name, value in top
                  if bound.stable(name) and _call_name(value) == "conj" and code(value.func) == "at.conj"
                  and len(value.args) == 1 and isinstance(value.args[0].value, cst.Name)
                  and bound.stable(value.args[0].value.value)}
    return list(cst.Module(body=statements).visit(_ConjugatingHelpers(conjugated)).body)


def conjugate_real_only(statements: list[cst.BaseStatement], taken: set[str]) -> list[cst.BaseStatement]:
    """``v = at.conj(E)`` -> ``w = E`` (``E`` itself when a name) then ``v = at.conj(w) if
    w.is_complex() else w``: ``conj`` is the identity on real dtypes, so a real value is read as
    it is (one operator call fewer)."""
    def rewrite(block: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        result = []
        for statement in block:
            statement = _in_blocks(statement, rewrite)
            assigned = _assignment(statement)
            value = assigned.value if assigned is not None else None
            if value is None or code(value.func if isinstance(value, cst.Call) else value) != "at.conj" \
                    or len(value.args) != 1 or value.args[0].keyword or value.args[0].star:
                result.append(statement)
                continue
            fresh = code(value.args[0].value)
            if not isinstance(value.args[0].value, cst.Name):
                fresh = next(f"{assigned.name}_{k}" for k in itertools.count(2) if f"{assigned.name}_{k}" not in taken)
                taken.add(fresh)
                result.append(cst.parse_statement(f"{fresh} = {code(value.args[0].value)}\n"))
            result.append(cst.parse_statement(
                f"{assigned.name} = at.conj({fresh}) if {fresh}.is_complex() else {fresh}\n"))
        return result

    return rewrite(list(statements))


# ---- transposed products ------------------------------------------------------------------
def _transpose_of(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``x`` of ``at.t(x)``; None for anything else."""
    if isinstance(node, cst.Call) and code(node.func) == "at.t" and len(node.args) == 1 \
            and not (node.args[0].keyword or node.args[0].star):
        return node.args[0].value
    return None


def _transposed(node: cst.BaseExpression) -> cst.BaseExpression:
    """``x`` of ``at.t(x)``, else ``at.t(node)``."""
    inner = _transpose_of(node)
    return inner if inner is not None else cst.parse_expression(f"at.t({code(node)})")


class Factors(NamedTuple):
    """``left`` and ``right`` of ``at.mm(left, right)``."""

    left: cst.BaseExpression
    right: cst.BaseExpression


def _mm_with_transposed(node: cst.BaseExpression | None) -> Factors | None:
    """The :class:`Factors` of ``at.mm(a, b)`` where ``a`` or ``b`` is an ``at.t(x)``."""
    if not (isinstance(node, cst.Call) and code(node.func) == "at.mm" and len(node.args) == 2
            and not any(a.keyword or a.star for a in node.args)):
        return None
    a, b = node.args[0].value, node.args[1].value
    return Factors(a, b) if _transpose_of(a) is not None or _transpose_of(b) is not None else None


def transpose_products(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``at.t(at.mm(a, b))`` -> ``at.mm(at.t(b), at.t(a))`` where ``a`` or ``b`` is a transpose
    (``at.t(at.t(x))`` then ``x``: one transpose fewer), also through ``y = at.mm(a, b)`` then
    ``at.t(y)`` in the same block (``y`` bound once and read only there, the names ``a`` and ``b``
    read bound by no statement between): ``(a b)^T = b^T a^T`` for matrices."""
    bound = bindings(statements)
    reads = Counter(n.value for statement in statements for n in _nodes(statement) if isinstance(n, cst.Name))

    def rewrite(block: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        block = [_in_blocks(s, rewrite) for s in block]
        products: dict[str, tuple[int, Factors]] = {}
        for index, statement in enumerate(block):
            assigned = _assignment(statement)
            if assigned is None:
                continue
            name, value = assigned
            inner = _transpose_of(value)
            factors = _mm_with_transposed(inner)
            if factors is None and isinstance(inner, cst.Name) and inner.value in products \
                    and bound.stable(inner.value) and reads[inner.value] == 2:
                at_index, factors = products[inner.value]
                read = {n for x in factors for n in _names(x)}
                if any(_changes(between, read) for between in block[at_index + 1:index]):
                    factors = None
            if factors is not None:
                left, right = code(_transposed(factors.right)), code(_transposed(factors.left))
                fused = cst.parse_expression(f"at.mm({left}, {right})")
                block[index] = statement.with_changes(body=[statement.body[0].with_changes(value=fused)])
            elif (factors := _mm_with_transposed(value)) is not None:
                products[name] = (index, factors)
        return block

    return rewrite(list(statements))


# ---- broadcasts ----------------------------------------------------------------------------
#: ``sum_to``'s transpose as the derivation inlines it: its two reductions (``sum_backward`` of
#: the dims a broadcast expanded, then of the leading dims it added), each behind its condition.
_BROADCAST_APPLIED = re.compile(
    r"if (?P<te>\w+):\n"
    r"    (?P<s2>\w+) = (?P<R>\w+)\n"
    r"    (?P<t>\w+) = sum_backward\((?P<X>\w+), (?P=s2), (?P<E>\w+), True\)\n"
    r"    (?P<d>\w+) = (?P=t)\n"
    r"else:\n"
    r"    (?P=d) = (?P=X)\n"
    r"if (?P<tl>\w+):\n"
    r"    (?P<ld>\w+) = \[\]\n"
    r"    for (?P<i>\w+) in range\((?P<lead>\w+)\):\n"
    r"        (?P=ld)\.append\((?P=i)\)\n"
    r"(?:    (?P<s3>\w+) = (?P<B3>[\w.()]+)\n)?"
    r"    (?P<u>\w+) = sum_backward\((?P=d), (?P<B>[\w.()]+), (?P=ld), False\)\n"
    r"    (?P=d) = (?P=u)\n$")


class SizesPart(NamedTuple):
    """The statements computing what ``_BROADCAST_APPLIED`` reads: ``exact`` as code, the others
    as ``patterns`` (regular expressions, which name the primal's sizes ``S``)."""

    exact: list[str]
    patterns: list[str]


class StatementMatch(NamedTuple):
    """A statement of a block (``index``) that a pattern matched (``match``)."""

    index: int
    match: re.Match


def _broadcast_sizes_part(m: re.Match, sizes: str) -> SizesPart:
    """The statements that compute the conditions and dims ``_BROADCAST_APPLIED`` reads: the
    leading dims of ``B`` (``sizes``) that ``S`` lacks, ``R`` (``B`` without them), and the dims
    ``E`` where ``S`` is 1 and ``R`` is not."""
    g = m.groupdict()
    exact = [f"{g['tl']} = {g['lead']} > 0\n", f"{g['E']} = []\n", f"{g['te']} = len({g['E']}) > 0\n"]
    return SizesPart(exact, [
        rf"{g['lead']} = len\({re.escape(sizes)}\) - len\((?P<S>\w+)\)\n",
        rf"if {g['tl']}:\n    {g['ld']} = \[\]\n    for {g['i']} in range\({g['lead']}\):\n"
        rf"        {g['ld']}\.append\({g['i']}\)\n    (?P<r1>\w+) = reduced_sizes\({re.escape(sizes)}, {g['ld']}, "
        rf"False\)\n    {g['R']} = (?P=r1)\nelse:\n    {g['R']} = {re.escape(sizes)}\n$",
        rf"for (?P<j>\w+) in range\(len\((?P<S>\w+)\)\):\n    if (?P=S)\[(?P=j)\] == 1 and {g['R']}\[wrap_dim\("
        rf"(?P=j), len\({g['R']}\)\)\] != 1:\n        {g['E']}\.append\((?P=j)\)\n$"])


def _statement_code(statement: cst.BaseStatement) -> str:
    return cst.Module(body=[statement]).code


def collapse_broadcasts(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """In every block: ``sum_to``'s transpose inlined (``_BROADCAST_APPLIED``: ``sum_backward`` of
    the tangent ``X`` over the dims ``E`` a broadcast to ``B`` expanded, keeping them, then over
    the leading dims it added), its conditions and dims computed before it in the block as
    ``_broadcast_sizes_part`` says, each name they bind bound there only, ``B`` and ``S`` not bound
    after they are read -> ``d = at.expand(X, B)`` (``X`` itself when its sizes are ``B``: no
    operator for a no-op). ``X`` has its primal's sizes ``S`` (transposition makes it so), ``S``
    broadcasts to ``B``, and each of the four branch combinations gives ``X`` broadcast to ``B``:
    with neither reduction ``S`` is ``B``; the first is ``expand(X, B without its leading dims)``,
    the second unsqueezes the leading dims and expands to ``B``. The conditions and dims, then
    unread, go with the dead code."""
    result = [_in_blocks(s, collapse_broadcasts) for s in statements]
    bound = bindings(result)
    texts = [_statement_code(s) for s in result]
    binds = [set(_bound_names(s)) for s in result]
    for index in range(len(result) - 1):
        m = _BROADCAST_APPLIED.match(texts[index] + texts[index + 1])
        if m is None:
            continue
        g = m.groupdict()
        sizes = g["B"] if g["s3"] is None or g["B"] != g["s3"] else g["B3"]
        exact, patterns = _broadcast_sizes_part(m, sizes)
        first = [texts.index(e) if e in texts[:index] else None for e in exact]
        found = [next((StatementMatch(i, f) for i, t in enumerate(texts[:index]) if (f := re.match(p, t))), None)
                 for p in patterns]
        if any(i is None for i in first) or any(f is None for f in found) or found[0].match["S"] != found[2].match["S"]:
            continue
        start = min(i for i in first + [f.index for f in found])
        read = {found[0].match["S"], *_names(cst.parse_expression(sizes))}
        if (not all(bound.counts[n] == 1 and n not in bound.in_loops for n in (g["te"], g["tl"], g["lead"], g["E"]))
                or bound.counts[g["R"]] != 2 or any(binds[i] & read for i in range(start, index + 2))
                or sum(1 for t in texts if f"{g['E']}.append(" in t) != 1):
            continue
        result[index] = _stmt(f"{g['d']} = {g['X']} if {g['X']}.sizes() == {sizes} else at.expand({g['X']}, {sizes})"
                              ).with_changes(leading_lines=result[index].leading_lines)
        result[index + 1] = cst.SimpleStatementLine(body=[cst.Pass()])
    return [s for s in result if not (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
                                      and isinstance(s.body[0], cst.Pass))]


# ---- unread lists -------------------------------------------------------------------------
def _appended_to(statement: cst.CSTNode) -> str | None:
    """``a`` of a statement ``a.append(x)``."""
    if (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr) and isinstance(statement.body[0].value, cst.Call)):
        func = statement.body[0].value.func
        if isinstance(func, cst.Attribute) and func.attr.value == "append" and isinstance(func.value, cst.Name):
            return func.value.value
    return None


class _ListDropper(cst.CSTTransformer):
    def __init__(self, unread: set[str]) -> None:
        self.unread = unread

    def leave_SimpleStatementLine(self, original, updated):
        assigned = _assignment(original)
        if _appended_to(original) in self.unread or (assigned is not None and assigned.name in self.unread):
            return cst.RemoveFromParent()
        return updated


def drop_unread_lists(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """A list no expression reads (its name appears only as ``a = []`` and ``a.append(x)``, and
    ``x`` has no effect: the language's expressions have none) is dropped with its appends; the
    dead code around them goes with :func:`live_only` (empty loops and branches too)."""
    module = cst.Module(body=statements)
    made = {a.name for n in _nodes(module) if (a := _assignment(n)) is not None
            and isinstance(a.value, cst.List) and not a.value.elements}
    if not made:
        return statements
    uses = Counter(n.value for n in _nodes(module) if isinstance(n, cst.Name))
    plain = Counter()
    for n in _nodes(module):
        if (a := _appended_to(n)) is not None:
            plain[a] += 1
        elif (a := _assignment(n)) is not None and isinstance(a.value, cst.List) and not a.value.elements:
            plain[a.name] += 1
    unread = {name for name in made if uses[name] == plain[name]}
    if not unread:
        return statements
    return list(module.visit(_ListDropper(unread)).body)


# ---- sum_to fusion ---------------------------------------------------------------------------
class SumTo(NamedTuple):
    """``sum_to(value, sizes)``."""

    value: cst.BaseExpression
    sizes: cst.BaseExpression


def _sum_to_of(value: cst.BaseExpression) -> SumTo | None:
    """The :class:`SumTo` of ``sum_to(x, sizes)``."""
    if (_call_name(value) == "sum_to" and isinstance(value.func, cst.Name) and len(value.args) == 2
            and not any(a.keyword or a.star for a in value.args)):
        return SumTo(value.args[0].value, value.args[1].value)
    return None


def fuse_sums_to(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """In every block: ``a = sum_to(x, s)``, ``b = sum_to(y, s)``, then ``d = a + b`` (``a`` and
    ``b`` read only there, bound once; every name of ``s`` stable) -> ``a = x``, ``b = y`` and
    ``d = sum_to(a + b, s)`` when ``a`` and ``b`` have the same sizes (checked at run time), ``d
    = sum_to(a, s) + sum_to(b, s)`` otherwise. ``sum_to`` is linear and reduces the same dims of
    two tensors of one shape, so ``sum_to(x, s) + sum_to(y, s) = sum_to(x + y, s)``: one
    reduction for two."""
    bound = bindings(statements)
    reads = Counter(n.value for n in _nodes(cst.Module(body=statements)) if isinstance(n, cst.Name))

    def fuse(block: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        position = _assignment_positions(block)
        result = [_in_blocks(s, fuse) for s in block]
        for index, statement in enumerate(block):
            assigned = _sum_assignment(statement)
            if assigned is None:
                continue
            operands = (assigned.value.left, assigned.value.right)
            if not all(isinstance(o, cst.Name) and bound.counts[o.value] == 1 and reads[o.value] == 2
                       and position.get(o.value, index) < index for o in operands):
                continue
            terms = [_sum_to_of(_assignment(block[position[o.value]]).value) for o in operands]
            if (any(t is None for t in terms) or code(terms[0].sizes) != code(terms[1].sizes)
                    or not all(bound.stable(n) for n in _names(terms[0].sizes))):
                continue
            a, b, sizes = operands[0].value, operands[1].value, code(terms[0].sizes)
            for operand, (x, _) in zip(operands, terms):
                line = result[position[operand.value]]
                result[position[operand.value]] = line.with_changes(body=[line.body[0].with_changes(value=x)])
            replacement = _same_sizes_choice(a, b, assigned.name, f"sum_to({a} + {b}, {sizes})",
                                             f"sum_to({a}, {sizes}) + sum_to({b}, {sizes})")
            result[index] = replacement.with_changes(leading_lines=statement.leading_lines)
        return result

    return fuse(statements)


# ---- negated terms ----------------------------------------------------------------------------
def subtract_negated_terms(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """In every block: ``n = -x`` then ``d = n + y`` or ``d = y + n`` (``n`` bound once and read only
    there, ``x`` a name not bound again between) -> ``d = y - x``: IEEE subtraction is the addition
    of the negation, so every element (and the sizes and dtype) is the same, with one operator
    fewer."""
    bound = bindings(statements)
    reads = Counter(n.value for n in _nodes(cst.Module(body=statements)) if isinstance(n, cst.Name))

    def rewrite(block: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        result = [_in_blocks(s, rewrite) for s in block]
        negated = {}
        for index, statement in enumerate(result):
            assigned = _assignment(statement)
            if (assigned is not None and isinstance(assigned.value, cst.UnaryOperation) and not assigned.value.lpar
                    and isinstance(assigned.value.operator, cst.Minus)
                    and isinstance(assigned.value.expression, cst.Name)
                    and bound.stable(assigned.name) and reads[assigned.name] == 2):
                negated[assigned.name] = (index, assigned.value.expression)
                continue
            summed = _sum_assignment(statement)
            if summed is None:
                continue
            left, right = summed.value.left, summed.value.right
            for mine, other in ((right, left), (left, right)):
                if not (isinstance(mine, cst.Name) and mine.value in negated):
                    continue
                at_index, x = negated.pop(mine.value)
                if any(x.value in _bound_names(result[i]) for i in range(at_index + 1, index)):
                    break
                value = cst.BinaryOperation(other, cst.Subtract(), x)
                result[index] = statement.with_changes(body=[statement.body[0].with_changes(value=value)])
                result[at_index] = cst.SimpleStatementLine(body=[cst.Pass()])
                break
        return [s for s in result if not (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
                                          and isinstance(s.body[0], cst.Pass))]

    return rewrite(statements)

# ---- broadcasts a binary operator makes itself -------------------------------------------
_BROADCASTING_OPERATORS = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)


class Expansion(NamedTuple):
    """``value`` broadcast to the sizes ``sizes`` (``at.expand(value, sizes)``)."""

    value: cst.BaseExpression
    sizes: cst.BaseExpression


def _expansion(value: cst.BaseExpression | None) -> Expansion | None:
    """The :class:`Expansion` of ``at.expand(x, s)`` or ``sum_backward(x, s, dims, True)`` (``x`` a
    name): ``x`` broadcast to the sizes ``s`` (with ``keepdim`` the helper is that expand, nothing else)."""
    name = _call_name(value)
    if name == "expand" and isinstance(value.func, cst.Attribute):
        args = _plain_args(value, 2)
    elif name == "sum_backward" and isinstance(value.func, cst.Name):
        args = _plain_args(value, 4)
        args = args if args is not None and code(args[3]) == "True" else None
    else:
        return None
    return Expansion(args[0], args[1]) if args is not None and isinstance(args[0], cst.Name) else None


def _tensor_names(statements: list[cst.BaseStatement], known: set[str], bound: Bindings) -> set[str]:
    """``known`` (tensors by the formula's data flow, and the tangents) and the names bound once
    to a tensor: a ``sum_to``, an expand, or ``+ - * /`` and negation of a tensor's name."""
    found = set(known)
    values = {name: value for name, value in _top_assignments(statements).items() if bound.stable(name)}
    while True:
        more = set()
        for name, value in values.items():
            operands = (value.left, value.right) if isinstance(value, cst.BinaryOperation) and isinstance(
                value.operator, _BROADCASTING_OPERATORS) else (value.expression,) if isinstance(
                value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus) else ()
            if name not in found and (_call_name(value) == "sum_to" or _expansion(value) is not None or any(
                    isinstance(o, cst.Name) and o.value in found for o in operands)):
                more.add(name)
        if not more:
            return found
        found |= more


def broadcast_in_operators(statements: list[cst.BaseStatement], tensors: set[str]) -> list[cst.BaseStatement]:
    """``t = at.expand(x, s)`` (or ``sum_backward(x, s, dims, True)``) read once, as ``t OP y`` or
    ``y OP t`` (``OP`` one of ``+ - * /``, ``y`` a tensor's name; ``t``, ``x``, ``y`` and the names of
    ``s`` bound once, outside loops) -> ``x OP y`` when ``broadcast_sizes(x.sizes(), y.sizes()) ==
    s`` and ``x`` has ``len(s)`` dims or ``y``'s dtype (checked at run time), ``at.expand(x, s) OP
    y`` as before otherwise: the operator broadcasts ``x`` to ``s`` itself, each element the same,
    and the dtype is the same (a 0-d ``x`` of another dtype would promote as a number). The
    expand, then unread, is not made."""
    bound = bindings(statements)
    reads = Counter(n.value for n in _nodes(cst.Module(body=statements)) if isinstance(n, cst.Name))
    expansions = {name: (found, value) for name, value in _top_assignments(statements).items()
                  if bound.stable(name) and reads[name] == 2 and (found := _expansion(value)) is not None
                  and all(bound.stable(n) for n in _names(value))}
    if not expansions:
        return statements
    known = _tensor_names(statements, tensors, bound)

    class Unexpand(cst.CSTTransformer):
        def leave_BinaryOperation(self, original: cst.BinaryOperation,
                                  updated: cst.BinaryOperation) -> cst.BaseExpression:
            if not isinstance(updated.operator, _BROADCASTING_OPERATORS) or updated.lpar:
                return updated
            for mine, other in ((updated.left, updated.right), (updated.right, updated.left)):
                if not (isinstance(mine, cst.Name) and mine.value in expansions and isinstance(other, cst.Name)
                        and other.value in known and bound.stable(other.value) and other.value != mine.value):
                    continue
                (x, sizes), value = expansions[mine.value]
                x, sizes, y = code(x), code(sizes), other.value
                fused = updated.with_changes(**{"left" if mine is updated.left else "right": _expr(x)})
                expanded = updated.with_changes(**{"left" if mine is updated.left else "right": value})
                test = (f"({x}.dim() == len({sizes}) or {x}.scalar_type() == {y}.scalar_type()) "
                        f"and broadcast_sizes({x}.sizes(), {y}.sizes()) == {sizes}")
                return _expr(f"({code(fused)} if {test} else {code(expanded)})")
            return updated

    return list(cst.Module(body=statements).visit(Unexpand()).body)


# ---- narrows that tile a tensor are its split ---------------------------------------------
_NARROWING_LOOP = re.compile(
    r"for (?P<i>\w+) in range\(len\((?P<s>\w+)\)\):\n"
    r"    if (?P=s)\[(?P=i)\] < 0:\n"
    r"        (?P<g>\w+)\.append\(at\.new_zeros\((?P<t>\w+), \[0\]\)\)\n"
    r"    else:\n"
    r"        (?P=g)\.append\(at\.narrow\((?P=t), (?P<d>\w+), (?P<o>\w+), (?P=s)\[(?P=i)\]\)\)\n"
    r"        (?P=o) = (?P=o) \+ (?P=s)\[(?P=i)\]\n")


def split_narrowing_loops(statements: list[cst.BaseStatement], taken: set[str]) -> list[cst.BaseStatement]:
    """In every block: ``g = []``, ``o = 0``, then ``for i in range(len(s)):`` appending to ``g``
    ``at.new_zeros(t, [0])`` where ``s[i] < 0``, else ``at.narrow(t, d, o, s[i])`` and adding
    ``s[i]`` to ``o`` (``cat``'s backward as the derivation inlines it; ``g``, ``s``, ``t``, ``d``
    bound once, ``o`` read nowhere else) -> ``g = at.split_with_sizes(t, s, d)`` when ``s`` is not
    empty, has no entry below 0 and adds up to ``t.size(d)`` (checked at run time), the loop as
    before otherwise: the parts are then the same views of ``t``, one operator for one per part."""
    bound = bindings(statements)
    reads = Counter(n.value for n in _nodes(cst.Module(body=statements)) if isinstance(n, cst.Name))

    def rewrite(block: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        result = [_in_blocks(s, rewrite) for s in block]
        index = 2
        while index < len(result):
            found = _NARROWING_LOOP.fullmatch(code(result[index])) if isinstance(result[index], cst.For) else None
            starts = (_assignment(result[index - 2]), _assignment(result[index - 1]))
            if (found is None or starts[0] is None or starts[1] is None
                    or (starts[0].name, code(starts[0].value)) != (found["g"], "[]")
                    or (starts[1].name, code(starts[1].value)) != (found["o"], "0")
                    or not all(bound.stable(found[k]) for k in "gstd")
                    or bound.counts[found["o"]] != 2 or reads[found["o"]] != 4):
                index += 1
                continue
            tiled, total = (_fresh(f"{found['g']}_{kind}", taken) for kind in ("tiled", "total"))
            i, sizes, t, d = found["i"], found["s"], found["t"], found["d"]
            check = cst.parse_module(
                f"{tiled} = len({sizes}) > 0\n{total} = 0\nfor {i} in range(len({sizes})):\n"
                f"    {tiled} = {tiled} and {sizes}[{i}] >= 0\n    {total} = {total} + {sizes}[{i}]\n").body
            choice = cst.parse_statement(f"if {tiled} and {total} == {t}.size({d}):\n"
                                         f"    {found['g']} = at.split_with_sizes({t}, {sizes}, {d})\nelse:\n    pass\n")
            choice = choice.with_changes(orelse=choice.orelse.with_changes(
                body=choice.orelse.body.with_changes(body=result[index - 2:index + 1])))
            result[index - 2:index + 1] = [*check, choice.with_changes(leading_lines=result[index - 2].leading_lines)]
            index += len(check) + 1
        return result

    return rewrite(statements)


# ---- calls a loop makes again --------------------------------------------------------------
def _unconditional_calls(node: cst.CSTNode):
    """The calls ``node`` always evaluates (none under an ``if``-expression or ``and``/``or``)."""
    if isinstance(node, (cst.IfExp, cst.BooleanOperation)):
        return
    if isinstance(node, cst.Call):
        yield node
    for child in node.children:
        yield from _unconditional_calls(child)


def _lists_written(node: cst.CSTNode) -> set[str]:
    """The lists ``node`` appends to or writes an entry of."""
    found = {n.value for n in _nodes(node) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
             and n.func.attr.value == "append" and isinstance(n.func.value, cst.Name) for n in [n.func.value]}
    return found | {t.target.value.value for t in _nodes(node) if isinstance(t, cst.AssignTarget)
                    and isinstance(t.target, cst.Subscript) and isinstance(t.target.value, cst.Name)}


class _Replace(cst.CSTTransformer):
    def __init__(self, text: str, name: str) -> None:
        self.text, self.name = text, name

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        return cst.Name(self.name) if code(original) == self.text else updated


def share_calls_repeated_in_loops(statements: list[cst.BaseStatement], taken: set[str]) -> list[cst.BaseStatement]:
    """In every block: ``a = F(E)`` (``E`` a call ``F`` always evaluates) then a ``for`` loop reading
    ``E`` again (every name of ``E`` bound once, outside loops, and no list of them appended to
    from ``a``'s statement to the loop's end) -> ``e = E``, ``a = F(e)`` and the loop reading ``e``:
    ``E`` has the same value at each, so it is computed once, not on every pass of the loop."""
    bound = bindings(statements)

    def rewrite(block: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        result = [_in_blocks(s, rewrite) for s in block]
        index = 0
        while index < len(result):
            loop = result[index]
            if not isinstance(loop, cst.For):
                index += 1
                continue
            in_loop = {code(n) for n in _nodes(loop.body) if isinstance(n, cst.Call)}
            for k in range(index):
                assigned = _assignment(result[k])
                if assigned is None:
                    continue
                changed = set().union(*(_lists_written(s) for s in result[k:index + 1]))
                calls = {code(n): n for n in _unconditional_calls(assigned.value)}
                shared = sorted((text for text, call in calls.items()
                                 if text in in_loop and not (_names(call) & changed)
                                 and assigned.name not in _names(call) and all(bound.stable(n) for n in _names(call))),
                                key=lambda text: -len(text))
                if not shared:
                    continue
                text = shared[0]
                name = _fresh(f"{assigned.name}_part", taken)
                replace = _Replace(text, name)
                result[k:index + 1] = [_stmt(f"{name} = {text}"), *(s.visit(replace) for s in result[k:index + 1])]
                index += 1
                break
            else:
                index += 1
        return result

    return rewrite(statements)


def _fresh(stem: str, taken: set[str]) -> str:
    suffix = 0
    while f"{stem}{suffix or ''}" in taken:
        suffix += 1
    taken.add(f"{stem}{suffix or ''}")
    return f"{stem}{suffix or ''}"


# ---- values read only in branches --------------------------------------------------------
def _sinks_further(branch: cst.If, name: str) -> bool:
    """Whether a branch of ``branch`` reads ``name`` only in the branches of one ``if`` (not its
    test): copied into both, ``name`` sinks again there, and that ``if``'s other path no longer
    computes it."""
    for block in (branch.body, branch.orelse.body if branch.orelse is not None else None):
        readers = [s for s in (block.body if block is not None else ()) if name in _names(s)]
        if len(readers) == 1 and isinstance(readers[0], cst.If) and name not in _names(readers[0].test):
            return True
    return False


def sink_into_branches(statements: list[cst.BaseStatement], taken: set[str]) -> list[cst.BaseStatement]:
    """In every block: ``x = E`` (``E`` calling an operator; ``x`` and every name ``E`` reads bound
    once, outside loops) read only in the branches of one later ``if``/``else`` (not in its test)
    -> ``x = E`` first in each branch that reads ``x`` (in the ``else`` under a new name, so each
    name stays bound once; into both only a write ``fuse_complementary_writes`` may fuse there and
    what it reads): a branch that does not read it no longer computes it, and a rule working
    inside a block sees the value there."""
    bound = bindings(statements)
    feeding: set[str] = set()       # names read by a value copied into both branches

    def sink(block: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        result = [_in_blocks(s, sink) for s in block]
        for index in range(len(result) - 1, -1, -1):
            assigned = _assignment(result[index])
            if (assigned is None or not bound.stable(assigned.name)
                    or not all(bound.stable(n) for n in _names(assigned.value))):
                continue
            name = assigned.name
            readers = [i for i in range(index + 1, len(result)) if name in _names(result[i])]
            if len(readers) != 1 or not isinstance(result[readers[0]], cst.If):
                continue
            branch = result[readers[0]]
            if not isinstance(branch.orelse, (cst.Else, type(None))) or name in _names(branch.test):
                continue
            if not any(isinstance(n, cst.Call) and _call_name(n) is not None and isinstance(n.func, cst.Attribute)
                       for n in _nodes(assigned.value)):
                continue        # moved only when it saves an operator call
            in_both = branch.orelse is not None and name in _names(branch.body) and name in _names(branch.orelse.body)
            values = {n: v for n, v in _top_assignments(statements).items() if bound.stable(n)}
            if in_both and _write_term(assigned.value, values) is None and name not in feeding \
                    and not _sinks_further(branch, name):
                continue        # copied into both branches only for a write a rule may fuse there
            if in_both:
                feeding.update(_names(assigned.value))
            line = result[index].with_changes(leading_lines=[])
            body = branch.body
            if name in _names(body):
                body = body.with_changes(body=[line, *body.body])
            orelse = branch.orelse
            if orelse is not None and name in _names(orelse.body):
                statements_there = [line, *orelse.body.body]
                if body is not branch.body:
                    fresh = next(f"{name}_{k}" for k in itertools.count(2) if f"{name}_{k}" not in taken)
                    taken.add(fresh)
                    statements_there = list(rename(cst.Module(body=statements_there),
                                                   {name: cst.Name(fresh)}).body)
                orelse = orelse.with_changes(body=orelse.body.with_changes(body=statements_there))
            result[readers[0]] = branch.with_changes(body=body, orelse=orelse)
            del result[index]
        return result

    while (sunk := sink(statements)) and code(cst.Module(body=sunk)) != code(cst.Module(body=statements)):
        statements = sunk
    return statements


# ---- complementary writes ----------------------------------------------------------------
class WriteTerm(NamedTuple):
    """A term that writes ``source`` into a zero tensor (of ``sizes``) at a place: ``kind`` and
    ``place`` (the arguments naming it) say where; ``replaces``: the write overwrites the place
    (else it adds into it)."""

    kind: str
    place: list[cst.BaseExpression]
    source: cst.BaseExpression
    sizes: cst.BaseExpression
    replaces: bool


class ClearTerm(NamedTuple):
    """A term that is ``kept`` with zeros at a place (``kind``, ``place``); ``zeros_sizes``: the
    sizes of the zero tensor it writes there, when it writes one."""

    kind: str
    place: list[cst.BaseExpression]
    kept: cst.BaseExpression
    zeros_sizes: cst.BaseExpression | None


#: A view's backward (its grad written into zeros of ``sizes``) -> its scatter, and how each
#: argument after ``sizes`` names the place: "dim" / "index" / "start" / "end" may be a
#: normalized form of the scatter's own argument, "same" must be the same code.
_VIEW_BACKWARDS = {"select_backward": ("select_scatter", ("dim", "index")),
                   "slice_backward": ("slice_scatter", ("dim", "start", "end", "same")),
                   "diagonal_backward": ("diagonal_scatter", ("same", "same", "same"))}


def _plain_args(value: cst.BaseExpression, count: int) -> list[cst.BaseExpression] | None:
    if len(value.args) != count or any(a.keyword or a.star for a in value.args):
        return None
    return [a.value for a in value.args]


def _zero_sizes_of(value: cst.BaseExpression, values: dict[str, cst.BaseExpression]) -> cst.BaseExpression | None:
    """The sizes of a zero: ``at.new_zeros(w, s)`` or ``at.expand(at.new_zeros(w, []), s)``, by
    name or inline."""
    if isinstance(value, cst.Name) and value.value in values:
        value = values[value.value]
    name = _call_name(value)
    if name == "new_zeros" and (args := _plain_args(value, 2)) is not None:
        return args[1]
    if name == "expand" and (args := _plain_args(value, 2)) is not None and _zero_sizes_of(args[0], values) is not None \
            and code(_zero_sizes_of(args[0], values)) == "[]":
        return args[1]
    return None


def _is_literal_zero(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.Integer, cst.Float)) and float(node.value) == 0.0


def _write_term(value: cst.BaseExpression, values: dict[str, cst.BaseExpression]) -> WriteTerm | None:
    name = _call_name(value)
    if name == "gather_backward" and (args := _plain_args(value, 5)) is not None and code(args[4]) == "False":
        # ``gather_backward(s, x, d, i, False)`` is ``scatter_add`` of ``s`` into zeros of ``x``'s sizes
        tensor = code(args[1]) if isinstance(args[1], cst.Name) else f"({code(args[1])})"
        return WriteTerm("scatter", args[2:4], args[0], cst.parse_expression(f"{tensor}.sizes()"), False)
    if name == "index_put" and (args := _plain_args(value, 4)) is not None and code(args[3]) == "True":
        sizes = _zero_sizes_of(args[0], values)
        return None if sizes is None else WriteTerm("index_put", args[1:2], args[2], sizes, False)
    if name == "masked_scatter" and (args := _plain_args(value, 3)) is not None:
        sizes = _zero_sizes_of(args[0], values)
        return None if sizes is None else WriteTerm("masked", args[1:2], args[2], sizes, True)
    if name in _VIEW_BACKWARDS and isinstance(value.func, cst.Attribute):
        kinds = _VIEW_BACKWARDS[name][1]
        args = _plain_args(value, 2 + len(kinds))
        return None if args is None else WriteTerm(name, args[2:], args[0], args[1], True)
    return None


def _clear_term(value: cst.BaseExpression, values: dict[str, cst.BaseExpression]) -> ClearTerm | None:
    name = _call_name(value)
    if name == "scatter" and (args := _plain_args(value, 4)) is not None and _is_literal_zero(args[3]):
        return ClearTerm("scatter", args[1:3], args[0], None)
    if name == "index_put" and (args := _plain_args(value, 4)) is not None and code(args[3]) == "False" \
            and _zero_sizes_of(args[2], values) is not None and code(_zero_sizes_of(args[2], values)) == "[]":
        return ClearTerm("index_put", args[1:2], args[0], None)
    if name == "masked_fill" and (args := _plain_args(value, 3)) is not None and _is_literal_zero(args[2]):
        return ClearTerm("masked", args[1:2], args[0], None)
    for backward, (scatter, kinds) in _VIEW_BACKWARDS.items():
        if name == scatter and (args := _plain_args(value, 2 + len(kinds))) is not None:
            sizes = _zero_sizes_of(args[1], values)
            return None if sizes is None else ClearTerm(backward, args[2:], args[0], sizes)
    return None


def _resolved(node: cst.BaseExpression, values: dict[str, cst.BaseExpression], depth: int = 4) -> str:
    """``node``'s code with the names bound once (``values``) replaced by their values."""
    for _ in range(depth):
        names = {n: values[n] for n in _names(node) if n in values}
        if not names:
            break
        node = rename(node, names)
    return re.sub(r"[()\s]", "", code(node))


def _same_place_argument(normalized: cst.BaseExpression, raw: cst.BaseExpression, kind: str, sizes: str,
                         dim: str | None, values: dict[str, cst.BaseExpression]) -> bool:
    """Whether ``normalized`` (a view backward's argument, ``kind``) names the place the
    scatter's argument ``raw`` names in a tensor of sizes ``sizes``: the same code, or the
    library's normalization of ``raw`` there (``wrap_dim`` of a dim, a negative index plus
    the dim's size, a ``None`` bound of a slice made the dim's start or end, others clamped by
    ``slice_bound``)."""
    raw_code = _resolved(raw, values)
    found = _resolved(normalized, values)
    if found == raw_code:
        return True
    size = f"{sizes}[{dim}]"
    forms = {"dim": [f"wrap_dim({raw_code},len({sizes}))"],
             "index": [f"{raw_code}+{size}if{raw_code}<0else{raw_code}"],
             "start": [f"0if{raw_code}isNoneelseslice_bound({raw_code},{size})"],
             "end": [f"{size}if{raw_code}isNoneelseslice_bound({raw_code},{size})"]}
    return found in [re.sub(r"[()\s]", "", form) for form in forms.get(kind, [])]


def _same_place(write: WriteTerm, clear: ClearTerm, values: dict[str, cst.BaseExpression]) -> bool:
    if write.kind != clear.kind or len(write.place) != len(clear.place):
        return False
    if write.kind not in _VIEW_BACKWARDS:
        return all(code(w) == code(c) for w, c in zip(write.place, clear.place))
    sizes = _resolved(write.sizes, values)
    dim = _resolved(write.place[0], values)
    kinds = _VIEW_BACKWARDS[write.kind][1]
    return all(_same_place_argument(w, c, kind, sizes, dim, values)
               for w, c, kind in zip(write.place, clear.place, kinds))


def fuse_complementary_writes(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """In every block: ``d = a + b`` (each maybe ``sum_to(., s)`` of one ``s``; ``a`` and ``b``
    read only there, bound once) where ``a`` writes a source into zeros at a place (``WriteTerm``:
    ``gather_backward``, ``index_put`` accumulating, ``masked_scatter``, a view's backward) and
    ``b`` is a tensor with zeros at that same place (``ClearTerm``: ``at.scatter(y, d, i, 0)``,
    ``at.index_put(y, i, <0-d zero>, False)``, ``at.masked_fill(y, m, 0)``, a view's scatter of
    zeros) -> ``d`` is the source written into ``b`` (added: ``b`` holds zeros there, as ``a``'s
    zeros did; a view's scatter overwrites ``y`` at once, the zeros of ``b`` not made), when ``b``
    has the zeros' sizes (checked at run time, with the source's sizes against the zeros ``b``
    writes); ``a + b`` as before otherwise. Both are ``b`` off the place and the source on it."""
    bound = bindings(statements)
    module = cst.Module(body=statements)
    reads = Counter(n.value for n in _nodes(module) if isinstance(n, cst.Name))
    values = {name: value for name, value in _top_assignments(statements).items() if bound.stable(name)}

    def fuse(block: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        position = _assignment_positions(block)
        result = [_in_blocks(s, fuse) for s in block]
        dropped: set[int] = set()
        for index, statement in enumerate(block):
            assigned = _sum_assignment(statement)
            if assigned is None:
                continue
            operands = (assigned.value.left, assigned.value.right)
            if not all(isinstance(o, cst.Name) and bound.stable(o.value) and reads[o.value] == 2
                       and position.get(o.value, index) < index for o in operands):
                continue
            terms = [_assignment(block[position[o.value]]).value for o in operands]
            summed = [_sum_to_of(t) for t in terms]
            if (summed[0] is None) != (summed[1] is None):
                continue
            if summed[0] is not None:
                if code(summed[0].sizes) != code(summed[1].sizes):
                    continue
                inner = [s.value for s in summed]
            else:
                inner = terms
            for write_at, clear_at in ((0, 1), (1, 0)):
                write, clear = _write_term(inner[write_at], values), _clear_term(inner[clear_at], values)
                if write is not None and clear is not None and _same_place(write, clear, values):
                    break
            else:
                continue
            b = operands[clear_at].value
            place = ", ".join(code(p) for p in clear.place)
            if write.kind in _VIEW_BACKWARDS:
                scatter = _VIEW_BACKWARDS[write.kind][0]
                fused = f"at.{scatter}({code(clear.kept)}, {code(write.source)}, {place})"
                test = (f"{code(clear.kept)}.sizes() == {code(write.sizes)} and "
                        f"{code(write.source)}.sizes() == {code(clear.zeros_sizes)}")
            else:
                scatter = {"scatter": "scatter_add", "index_put": "index_put", "masked": "masked_scatter"}[write.kind]
                extra = ", True" if write.kind == "index_put" else ""
                fused = f"at.{scatter}({b}, {place}, {code(write.source)}{extra})"
                test = f"{b}.sizes() == {code(write.sizes)}"
            if summed[0] is not None:
                fused = f"sum_to({fused}, {code(summed[0].sizes)})"
            b_term = cst.parse_expression(b if summed[0] is None else f"sum_to({b}, {code(summed[0].sizes)})")
            operands_now = [terms[write_at], b_term] if write_at == 0 else [b_term, terms[write_at]]
            separate = code(assigned.value.with_changes(left=operands_now[0], right=operands_now[1]))
            choice = cst.parse_statement(f"if {test}:\n    {assigned.name} = {fused}\n"
                                         f"else:\n    {assigned.name} = {separate}\n")
            result[index] = choice.with_changes(leading_lines=statement.leading_lines)
            dropped.add(position[operands[write_at].value])
            clear_line = result[position[b]]
            result[position[b]] = clear_line.with_changes(body=[clear_line.body[0].with_changes(value=inner[clear_at])])
        return [s for i, s in enumerate(result) if i not in dropped]

    return fuse(statements)


# ---- writes over cleared places ------------------------------------------------------------
#: An operator adding its source into a tensor at a place -> the one writing it there instead,
#: the number of arguments both take, and the ``ClearTerm`` kind that zeroes that place.
_ADDING_WRITES = {"scatter_add": ("scatter", 4, "scatter"), "index_put": ("index_put", 4, "index_put")}


def write_over_cleared_places(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``at.scatter_add(c, d, i, s)`` where ``c = at.scatter(x, d, i, 0)``, and ``at.index_put(c, i,
    v, True)`` where ``c = at.index_put(x, i, <a 0-d zero>, False)`` (``c`` and ``x`` names bound
    once, ``c``'s place the same code) -> ``at.scatter(x, d, i, s)``, ``at.index_put(x, i, v,
    False)``; ``c.sizes()`` is ``x.sizes()`` (the clearing keeps ``x``'s sizes). Transposition
    writes the first form for an operator that overwrites ``x`` at a place with a source (its
    backward clears the gradient there and reads it back for the source): where the place's
    indices are distinct, adding into zeros puts the source there, the same values; where they
    repeat, the operator writes one of the values aimed at a position (torch: which one is
    unspecified) while its backward (torch's) gives each of them that position's gradient, whose
    transpose is their sum: the write is then the operator's derivative, as its own jvp and
    torch's forward AD compute it. The clearing, then maybe unread, goes with the dead
    assignments."""
    bound = bindings(statements)
    values = {name: value for name, value in _top_assignments(statements).items() if bound.stable(name)}
    cleared: dict[str, ClearTerm] = {}
    for name, value in values.items():
        clear = _clear_term(value, values)
        if clear is not None and clear.kind in ("scatter", "index_put") and isinstance(clear.kept, cst.Name) \
                and bound.stable(clear.kept.value) and all(bound.stable(n) for n in _names(value)):
            cleared[name] = clear

    class Write(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            name = _call_name(updated)
            owner = _sizes_owner(updated)
            if owner in cleared:
                return _expr(f"{cleared[owner].kept.value}.sizes()")
            if name not in _ADDING_WRITES or not isinstance(updated.func, cst.Attribute):
                return updated
            writer, count, kind = _ADDING_WRITES[name]
            args = _plain_args(updated, count)
            if args is None or not isinstance(args[0], cst.Name) or args[0].value not in cleared \
                    or (name == "index_put" and code(args[3]) != "True"):
                return updated
            clear = cleared[args[0].value]
            place = args[1:3] if kind == "scatter" else args[1:2]
            if clear.kind != kind or [code(p) for p in place] != [code(p) for p in clear.place]:
                return updated
            tail = ", False" if kind == "index_put" else ""
            return _expr(f"at.{writer}({clear.kept.value}, {', '.join(code(a) for a in args[1:len(place) + 2])}{tail})")

    return list(cst.Module(body=statements).visit(Write()).body)


# ---- values index_put broadcasts ----------------------------------------------------------
class Broadcast(NamedTuple):
    """``value if value.sizes() == sizes else at.expand(value, sizes)``: ``value`` (a name)
    broadcast to the sizes the name ``sizes`` holds."""

    value: cst.Name
    sizes: str


def _broadcast_of(value: cst.BaseExpression) -> Broadcast | None:
    """The :class:`Broadcast` of ``x if x.sizes() == b else at.expand(x, b)`` (``x`` a name)."""
    if not isinstance(value, cst.IfExp) or not isinstance(value.body, cst.Name):
        return None
    x = value.body.value
    found = re.fullmatch(rf"{x}\.sizes\(\) == (\w+)", code(value.test))
    if found is None or code(value.orelse) != f"at.expand({x}, {found[1]})":
        return None
    return Broadcast(value.body, found[1])


def keep_index_put_broadcasts(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """In every block: ``d = at.index_put(x, i, w, a)`` (``x`` a name) where ``w`` is ``v``
    broadcast to ``b`` (``v if v.sizes() == b else at.expand(v, b)``), ``b`` is ``list(at.index(z,
    i).sizes())`` of one ``i`` and ``z`` a zero of sizes ``s`` or a name of sizes ``s = z.sizes()``
    (all bound once) -> ``d =
    at.index_put(x, i, v, a)`` when ``x`` has the sizes ``s`` (checked at run time), as before
    otherwise: ``index_put`` broadcasts its values to the indexed shape, which is then ``b``, and
    the zero indexed only to read ``b`` is not made."""
    bound = bindings(statements)
    values = {name: value for name, value in _top_assignments(statements).items() if bound.stable(name)}

    def keep(block: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        result = [_in_blocks(s, keep) for s in block]
        for index, statement in enumerate(result):
            assigned = _assignment(statement)
            if assigned is None or _call_name(assigned.value) != "index_put":
                continue
            args = _plain_args(assigned.value, 4)
            if args is None or not isinstance(args[0], cst.Name) or not isinstance(args[2], cst.Name):
                continue
            broadcast = _broadcast_of(values.get(args[2].value))
            indexed = values.get(broadcast.sizes) if broadcast is not None else None
            if indexed is None or _call_name(indexed) != "list" or len(indexed.args) != 1:
                continue
            found = re.fullmatch(r"at\.index\((.*), (.*)\)\.sizes\(\)", code(indexed.args[0].value))
            zero = cst.parse_expression(found[1]) if found is not None and found[2] == code(args[1]) else None
            sizes = _zero_sizes_of(zero, values) if zero is not None else None
            if sizes is None and isinstance(zero, cst.Name):
                sizes = _expr(f"{zero.value}.sizes()")      # indexed for its sizes as it is
            if sizes is None:
                continue
            fused = assigned.value.with_changes(args=[*assigned.value.args[:2], assigned.value.args[2].with_changes(
                value=broadcast.value), assigned.value.args[3]])
            choice = cst.parse_statement(f"if {args[0].value}.sizes() == {code(sizes)}:\n"
                                         f"    {assigned.name} = {code(fused)}\nelse:\n"
                                         f"    {assigned.name} = {code(assigned.value)}\n")
            result[index] = choice.with_changes(leading_lines=statement.leading_lines)
        return result

    return keep(statements)


# ---- fills a masked_scatter overwrites ----------------------------------------------------
class MaskedFill(NamedTuple):
    """``at.masked_fill(value, mask, <a number literal>)``."""

    value: cst.BaseExpression
    mask: cst.BaseExpression


def _masked_fill_of(value: cst.BaseExpression | None) -> MaskedFill | None:
    """The :class:`MaskedFill` of ``at.masked_fill(x, m, <a number literal>)``."""
    if _call_name(value) != "masked_fill" or not isinstance(value.func, cst.Attribute):
        return None
    args = _plain_args(value, 3)
    if args is None or not isinstance(args[2], (cst.Integer, cst.Float)):
        return None
    return MaskedFill(args[0], args[1])


def skip_overwritten_fills(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``at.masked_scatter(f, m, s)`` where ``f`` is ``at.masked_fill(x, m, c)`` (``c`` a number, ``m``
    the same code; inline, or a name bound once whose value reads only names bound once) ->
    ``at.masked_scatter(x, m, s)``: both broadcast ``x`` with ``m``, and the scatter overwrites
    every element the fill wrote (both raise for a mask that is not boolean). ``f.sizes()`` (``x``
    and ``m`` names) is ``broadcast_sizes(x.sizes(), m.sizes())``, the sizes of both. The fill,
    then unread, goes with the dead assignments."""
    bound = bindings(statements)
    fills = {name: found for name, value in _top_assignments(statements).items()
             if bound.stable(name) and (found := _masked_fill_of(value)) is not None
             and all(bound.stable(n) for n in _names(value))}

    class Skip(cst.CSTTransformer):
        @staticmethod
        def scatter_unfilled(updated: cst.BaseExpression) -> cst.BaseExpression:
            if _call_name(updated) != "masked_scatter" or not isinstance(updated.func, cst.Attribute):
                return updated
            args = _plain_args(updated, 3)
            if args is None:
                return updated
            filled = fills.get(args[0].value) if isinstance(args[0], cst.Name) else _masked_fill_of(args[0])
            if filled is None or code(filled.mask) != code(args[1]):
                return updated
            return updated.with_changes(args=[updated.args[0].with_changes(value=filled.value), *updated.args[1:]])

        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            return self.sizes_of_fill(self.scatter_unfilled(updated))

        @staticmethod
        def sizes_of_fill(node: cst.BaseExpression) -> cst.BaseExpression:
            if not (isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute)
                    and node.func.attr.value == "sizes" and isinstance(node.func.value, cst.Name)):
                return node
            filled = fills.get(node.func.value.value)
            if filled is None or not all(isinstance(part, cst.Name) for part in filled):
                return node
            return _expr(f"broadcast_sizes({filled.value.value}.sizes(), {code(filled.mask)}.sizes())")

    return list(cst.Module(body=statements).visit(Skip()).body)


# ---- padding by nothing ------------------------------------------------------------------
class Padding(NamedTuple):
    """``at.cat([kept, padding], 0)`` of two names."""

    kept: str
    padding: str


def _padded(value: cst.BaseExpression) -> Padding | None:
    """The :class:`Padding` of ``at.cat([a, u], 0)`` (two names)."""
    if _call_name(value) != "cat" or not isinstance(value.func, cst.Attribute):
        return None
    args = _plain_args(value, 2)
    if args is None or code(args[1]) != "0" or not isinstance(args[0], cst.List) or len(args[0].elements) != 2:
        return None
    pieces = [e.value for e in args[0].elements]
    if not all(isinstance(p, cst.Name) for p in pieces):
        return None
    return Padding(pieces[0].value, pieces[1].value)


def skip_empty_padding(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """In every block: ``d = at.reshape(at.cat([a, u], 0), s)`` (or ``d = at.cat([a, u], 0)``) where
    ``u = at.new_zeros(a, [n])`` (``u`` read only there; ``u`` and every name ``n`` reads bound
    once) -> ``d = a`` (``a`` if it has the sizes ``s``, else ``at.reshape(a, s)``) when ``n == 0``
    and ``a`` is 1-d (checked at run time: the padding is then empty, of ``a``'s dtype, and the
    cat a copy of ``a``), as before otherwise (the zeros of the padding are then made only
    there)."""
    bound = bindings(statements)
    module = cst.Module(body=statements)
    reads = Counter(n.value for n in _nodes(module) if isinstance(n, cst.Name))
    values = {name: value for name, value in _top_assignments(statements).items() if bound.stable(name)}

    def padding_length(a: str, u: str) -> cst.BaseExpression | None:
        value = values.get(u)
        if reads[u] != 2 or _call_name(value) != "new_zeros" or not isinstance(value.func, cst.Attribute):
            return None
        args = _plain_args(value, 2)
        if args is None or code(args[0]) != a or not isinstance(args[1], cst.List) or len(args[1].elements) != 1:
            return None
        length = args[1].elements[0].value
        return length if all(bound.stable(n) for n in _names(length)) else None

    def skip(block: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        result = [_in_blocks(s, skip) for s in block]
        for index, statement in enumerate(result):
            assigned = _assignment(statement)
            if assigned is None:
                continue
            value, sizes = assigned.value, None
            if _call_name(value) == "reshape" and isinstance(value.func, cst.Attribute) \
                    and (args := _plain_args(value, 2)) is not None:
                value, sizes = args
            padded = _padded(value)
            length = padding_length(*padded) if padded is not None else None
            if length is None or not bound.stable(padded.kept):
                continue
            a = padded.kept
            kept = a if sizes is None else f"{a} if {a}.sizes() == {code(sizes)} else at.reshape({a}, {code(sizes)})"
            choice = cst.parse_statement(f"if {code(length)} == 0 and {a}.dim() == 1:\n    {assigned.name} = {kept}\n"
                                         f"else:\n    {assigned.name} = {code(assigned.value)}\n")
            result[index] = choice.with_changes(leading_lines=statement.leading_lines)
        return result

    return skip(statements)


# ---- dtypes read through a broadcast --------------------------------------------------------
def zeros_of_unbroadcast(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``at.new_zeros(w, s)`` where ``w`` (bound once) is ``v`` broadcast to ``b`` (``v if v.sizes()
    == b else at.expand(v, b)``) -> ``at.new_zeros(v, s)``: ``new_zeros`` reads only the dtype of
    ``w``, which is ``v``'s; the broadcast, then maybe unread there, need not come first."""
    bound = bindings(statements)
    broadcasts = {name: found.value for name, value in _top_assignments(statements).items()
                  if bound.stable(name) and (found := _broadcast_of(value)) is not None
                  and bound.stable(found.value.value)}

    class Unbroadcast(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            if _call_name(updated) != "new_zeros" or not isinstance(updated.func, cst.Attribute):
                return updated
            args = _plain_args(updated, 2)
            if args is None or not isinstance(args[0], cst.Name) or args[0].value not in broadcasts:
                return updated
            return updated.with_changes(args=[updated.args[0].with_changes(value=broadcasts[args[0].value]),
                                              updated.args[1]])

    return list(cst.Module(body=statements).visit(Unbroadcast()).body)


# ---- broadcasts a view's backward makes itself -------------------------------------------
#: A view's backward -> the helper of its view's sizes, called with the backward's arguments
#: after the gradient: the backward copies its gradient into that view of zeros, broadcasting it
#: there (torch's ``copy_``, NumPy's assignment).
_VIEW_SIZES = {"diagonal_backward": "diagonal_sizes"}


def skip_view_broadcasts(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``at.diagonal_backward(w, s, o, d1, d2)`` where ``w`` (bound once) is ``v`` broadcast to
    ``b`` (``at.expand(v, b)``, or ``v if v.sizes() == b else at.expand(v, b)``) and ``b`` is
    ``diagonal_sizes(s, o, d1, d2)`` (the same arguments, through names bound once) ->
    ``at.diagonal_backward(v, s, o, d1, d2)``: the backward broadcasts its gradient to the
    diagonal's sizes, ``b``, itself, as the expand did (a ``v`` that does not broadcast to
    ``b`` is refused by both). The broadcast, then maybe unread, goes with the dead assignments."""
    bound = bindings(statements)
    values = {name: value for name, value in _top_assignments(statements).items() if bound.stable(name)}

    def unbroadcast(value: cst.BaseExpression | None) -> Expansion | None:
        if _call_name(value) == "expand" and isinstance(value.func, cst.Attribute) \
                and (args := _plain_args(value, 2)) is not None:
            return Expansion(args[0], args[1])
        found = _broadcast_of(value) if value is not None else None
        return None if found is None else Expansion(found.value, cst.Name(found.sizes))

    class Skip(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            name = _call_name(updated)
            if name not in _VIEW_SIZES or not isinstance(updated.func, cst.Attribute):
                return updated
            args = _plain_args(updated, len(updated.args))
            gradient = args[0] if args else None
            found = unbroadcast(values.get(gradient.value)) if isinstance(gradient, cst.Name) else None
            if found is None or not all(bound.stable(n) for n in _names(found.value)):
                return updated
            view_sizes = _expr(f"{_VIEW_SIZES[name]}({', '.join(code(a) for a in args[1:])})")
            if _resolved(found.sizes, values) != _resolved(view_sizes, values):
                return updated
            return updated.with_changes(args=[updated.args[0].with_changes(value=found.value), *updated.args[1:]])

    return list(cst.Module(body=statements).visit(Skip()).body)


# ---- broadcast sizes that absorb what they already hold ------------------------------------
_SIZE_KEEPING = frozenset({"eq", "ne", "lt", "gt", "le", "ge", "zeros_like"})


def _is_number(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float))


def _size_atoms(node: cst.BaseExpression, values: dict[str, cst.BaseExpression], bound: Bindings,
                tensors: set[str], depth: int = 32) -> frozenset[str] | None:
    """The sizes ``A`` a list of sizes (``node``) is the broadcast of: its ``d``-th size (from
    the right) is 1 exactly where every one of ``A`` has 1 there or no such dim, its length the
    longest of ``A``'s. Through ``broadcast_sizes`` (whose result has that property whatever it
    is given), names bound once, and the sizes of elementwise results (which have it: the
    operation broadcast its operands); None where a name read is not bound once."""
    if depth == 0 or any(not bound.stable(n) for n in _names(node)):
        return None
    if isinstance(node, cst.Name) and node.value in values:
        return _size_atoms(values[node.value], values, bound, tensors, depth - 1)
    if _call_name(node) == "broadcast_sizes" and isinstance(node.func, cst.Name) \
            and (args := _plain_args(node, 2)) is not None:
        parts = [_size_atoms(a, values, bound, tensors, depth - 1) for a in args]
        return None if None in parts else parts[0] | parts[1]
    owner = _sizes_owner(node)
    if owner is not None and owner in values:
        held = _tensor_atoms(values[owner], values, bound, tensors, depth - 1)
        if held is not None:
            return held
    return frozenset({code(node)})


def _tensor_atoms(value: cst.BaseExpression, values: dict[str, cst.BaseExpression], bound: Bindings,
                  tensors: set[str], depth: int) -> frozenset[str] | None:
    """``_size_atoms`` of the sizes of the tensor ``value`` computes: an elementwise ``+ - * /``,
    negation, comparison with a number, ``zeros_like`` or ``where`` broadcasts its tensor
    operands (numbers have no sizes), a broadcast to ``S`` has ``S``; None where not known."""
    if depth == 0:
        return None
    if isinstance(value, cst.Name):
        if not bound.stable(value.value):
            return None
        if value.value in values and (held := _tensor_atoms(values[value.value], values, bound, tensors, depth - 1)):
            return held
        return frozenset({f"{value.value}.sizes()"}) if value.value in tensors else None
    if isinstance(value, cst.BinaryOperation) and isinstance(
            value.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)):
        operands = [value.left, value.right]
    elif isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        operands = [value.expression]
    elif _call_name(value) in _SIZE_KEEPING and isinstance(value.func, cst.Attribute) \
            and (args := _plain_args(value, len(value.args))) and all(_is_number(a) for a in args[1:]):
        operands = args[:1]
    elif _call_name(value) == "where" and isinstance(value.func, cst.Attribute) \
            and (args := _plain_args(value, 3)) is not None:
        operands = args
    elif (found := _broadcast_of(value)) is not None:     # ``S`` from sizes has no -1 (expand's "keep")
        held = _size_atoms(cst.Name(found.sizes), values, bound, tensors, depth - 1)
        return held if held is not None and all(_sizes_owner(_expr(a)) for a in held) else None
    else:
        return None
    parts = [_tensor_atoms(o, values, bound, tensors, depth - 1) for o in operands if not _is_number(o)]
    return None if not parts or None in parts else frozenset().union(*parts)


def absorb_broadcast_sizes(statements: list[cst.BaseStatement], tensors: set[str]) -> list[cst.BaseStatement]:
    """At the top: ``y = broadcast_sizes(A, B)`` (``y`` bound once) where every size ``B``
    broadcasts is one ``A`` does (``_size_atoms``) -> ``y = A``: where ``A`` has 1, so has
    ``B``, so ``broadcast_sizes`` takes ``A`` there and everywhere else (``A`` is not longer
    than ``B``), whatever the sizes (not only compatible ones); ``A`` a name changed nowhere.
    Then ``sum_to(x, S)`` where the sizes of ``x`` and ``S`` broadcast the same sizes
    (``_tensor_atoms``, ``_size_atoms``) -> ``x``: both have as many dims and 1 at the same
    places, so ``sum_to`` reduces nothing and returns ``x`` itself. A list changed in place is
    not bound once."""
    bound = bindings(statements)
    changed = {code(n.func.value) for s in statements for n in _nodes(s) if _list_method(n, _names(s))} | {
        code(n.target.value) for s in statements for n in _nodes(s)
        if isinstance(n, (cst.AssignTarget, cst.AugAssign)) and isinstance(n.target, cst.Subscript)}
    bound = Bindings(bound.counts + Counter({name: 2 for name in changed}), bound.in_loops)
    values = {name: value for name, value in _top_assignments(statements).items() if bound.stable(name)}
    tensors = _tensor_names(statements, tensors, bound)
    result = list(statements)
    copies: dict[str, cst.Name] = {}
    for index, statement in enumerate(result):
        assigned = _assignment(statement)
        if assigned is None or not bound.stable(assigned.name) or _call_name(assigned.value) != "broadcast_sizes" \
                or not isinstance(assigned.value.func, cst.Name) or (args := _plain_args(assigned.value, 2)) is None:
            continue
        first = _size_atoms(args[0], values, bound, tensors)
        second = _size_atoms(args[1], values, bound, tensors)
        if first is None or second is None or not second <= first:
            continue
        if isinstance(args[0], cst.Name):       # a copy: its reads read ``A``
            copies[assigned.name] = copies.get(args[0].value, args[0])
            result[index] = cst.SimpleStatementLine(body=[cst.Pass()])
        else:
            result[index] = _stmt(f"{assigned.name} = {code(args[0])}").with_changes(
                leading_lines=statement.leading_lines)
            values[assigned.name] = args[0]
    result = list(rename(cst.Module(body=[s for s in result if not (isinstance(s, cst.SimpleStatementLine) and isinstance(
        s.body[0], cst.Pass))]), copies).body)
    bound = bindings(result)
    values = {name: value for name, value in _top_assignments(result).items() if bound.stable(name)}

    class DropSums(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            if _call_name(updated) != "sum_to" or not isinstance(updated.func, cst.Name) \
                    or (args := _plain_args(updated, 2)) is None:
                return updated
            held = _tensor_atoms(args[0], values, bound, tensors, 32)
            if held is None or held != _size_atoms(args[1], values, bound, tensors):
                return updated
            return args[0]

    dropped = []
    for statement in result:        # in order: a value read later is the one without its sums
        dropped.append(statement.visit(DropSums()))
        if (assigned := _assignment(dropped[-1])) is not None and assigned.name in values:
            values[assigned.name] = assigned.value
    return dropped


# ---- a masked_scatter into zeros is masked_select_backward ---------------------------------
def _resolved_node(node: cst.BaseExpression, values: dict[str, cst.BaseExpression],
                   depth: int = 4) -> cst.BaseExpression:
    """``node`` with the names bound once (``values``) replaced by their values."""
    for _ in range(depth):
        names = {n: values[n] for n in _names(node) if n in values}
        if not names:
            break
        node = rename(node, names)
    return node


def _sizes_owner(node: cst.BaseExpression) -> str | None:
    """``y`` of ``y.sizes()`` (``y`` a name)."""
    if (isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "sizes" and isinstance(node.func.value, cst.Name)):
        return node.func.value.value
    return None


class SelectBackward(NamedTuple):
    """``call``, an ``at.masked_select_backward(g, owner, m)``, and the name ``owner`` whose sizes
    and dtype it reads."""

    owner: str
    call: cst.BaseExpression


def scatter_into_zeros_as_select_backward(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """In every block: a statement calling ``at.masked_scatter(z, m, g)`` (``g`` a name) where
    ``z`` is ``at.new_zeros(g, b)`` (inline, or a name bound once) and ``b`` is
    ``broadcast_sizes(y.sizes(), m.sizes())`` (through names bound once; ``y`` a name) -> the
    same statement calling ``at.masked_select_backward(g, y, m)`` when ``y`` has ``g``'s dtype
    (checked at run time), as before otherwise: ATen's masked_select_backward is zeros of
    ``y`` broadcast with ``m``, of ``y``'s dtype, with ``g`` scattered in order into the places
    ``m`` holds (torch's refusals the same: a mask that is not boolean, ``g`` too short); one
    operator where two were, and the zeros, then maybe unread, go."""
    bound = bindings(statements)
    values = {name: value for name, value in _top_assignments(statements).items() if bound.stable(name)}

    def fused(call: cst.BaseExpression) -> SelectBackward | None:
        """The masked_select_backward call for a scatter into zeros, else None."""
        if _call_name(call) != "masked_scatter" or not isinstance(call.func, cst.Attribute):
            return None
        args = _plain_args(call, 3)
        if args is None or not isinstance(args[2], cst.Name) or not bound.stable(args[2].value):
            return None
        zeros = values.get(args[0].value) if isinstance(args[0], cst.Name) else args[0]
        if _call_name(zeros) != "new_zeros" or not isinstance(zeros.func, cst.Attribute) \
                or (zeros_args := _plain_args(zeros, 2)) is None or code(zeros_args[0]) != args[2].value:
            return None
        sizes = _resolved_node(zeros_args[1], values)
        if _call_name(sizes) != "broadcast_sizes" or (sizes_args := _plain_args(sizes, 2)) is None:
            return None
        y = _sizes_owner(sizes_args[0])
        if y is None or not bound.stable(y) or _resolved(sizes_args[1], values) != _resolved(
                _expr(f"({code(args[1])}).sizes()"), values):
            return None
        return SelectBackward(y, _expr(f"at.masked_select_backward({args[2].value}, {y}, {code(args[1])})"))

    def rewrite(block: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        result = [_in_blocks(s, rewrite) for s in block]
        for index, statement in enumerate(result):
            if not isinstance(statement, cst.SimpleStatementLine) or _assignment(statement) is None:
                continue
            found = [(call, f) for call in _nodes(statement) if (f := fused(call)) is not None]
            if len(found) != 1:
                continue
            call, (y, select_backward) = found[0]
            gradient = code(call.args[2].value)

            class Replace(cst.CSTTransformer):
                def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
                    return select_backward if original is call else updated

            line = statement.with_changes(leading_lines=[])
            choice = cst.parse_statement(f"if {y}.scalar_type() == {gradient}.scalar_type():\n    pass\n"
                                         f"else:\n    pass\n")
            choice = choice.with_changes(
                body=choice.body.with_changes(body=[line.visit(Replace())]),
                orelse=choice.orelse.with_changes(body=choice.orelse.body.with_changes(body=[line])),
                leading_lines=statement.leading_lines)
            result[index] = choice
        return result

    return rewrite(statements)


# ---- reshapes to the sizes a value has -----------------------------------------------------
def _plain_sizes(node: cst.BaseExpression) -> bool:
    """Sizes read twice at no cost and to one value: a name, ``n.sizes()``, or a list of names
    and integers."""
    if isinstance(node, cst.Name):
        return True
    if isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute) \
            and node.func.attr.value == "sizes" and isinstance(node.func.value, cst.Name):
        return True
    return isinstance(node, cst.List) and all(
        isinstance(e, cst.Element) and isinstance(e.value, (cst.Name, cst.Integer)) for e in node.elements)


class _ReshapesToOwnSizes(cst.CSTTransformer):
    def visit_IfExp(self, node):
        """An ``x if x.sizes() == s else at.reshape(x, s)`` is left as it is."""
        return not (isinstance(node.orelse, cst.Call) and code(node.orelse.func) == "at.reshape"
                    and len(node.orelse.args) == 2 and code(node.body) == code(node.orelse.args[0].value)
                    and code(node.test) == f"{code(node.body)}.sizes() == {code(node.orelse.args[1].value)}")

    def leave_Call(self, original, updated):
        if (code(updated.func) != "at.reshape" or len(updated.args) != 2
                or any(a.keyword or a.star for a in updated.args)
                or not isinstance(updated.args[0].value, cst.Name) or not _plain_sizes(updated.args[1].value)):
            return updated
        value, sizes = code(updated.args[0].value), code(updated.args[1].value)
        return _expr(f"({value} if {value}.sizes() == {sizes} else {code(updated.with_changes(lpar=[], rpar=[]))})")

    def leave_Assign(self, original, updated):
        if isinstance(updated.value, cst.IfExp):
            return updated.with_changes(value=updated.value.with_changes(lpar=[], rpar=[]))
        return updated


def skip_reshapes_to_own_sizes(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``at.reshape(x, s)`` (``x`` a name, ``s`` plain sizes) -> ``x`` when ``x`` has the sizes ``s``
    already (checked at run time; the reshape otherwise): a reshape to its own sizes changes
    nothing (``at.reshape(input, [rows, in_features])`` of a matrix input, a product reshaped to
    the result's sizes it has)."""
    return list(cst.Module(body=statements).visit(_ReshapesToOwnSizes()).body)


# ---- the first entry of a list made in a loop -----------------------------------------------
def _appended_value(block: list[cst.BaseStatement], target: str) -> cst.BaseExpression | None:
    """``x`` of ``block``'s first statement when it is ``target.append(x)``."""
    if block and _appended_to(block[0]) == target and (args := _plain_args(block[0].body[0].value, 1)) is not None:
        return args[0]
    return None


def _first_appended(loop: cst.For, target: str) -> cst.BaseExpression | None:
    """What the first pass of ``loop`` (``for i in range(n):``) appends to ``target``, ``i`` read as 0,
    when each pass appends once, first thing (its body's first statement, or the first of both
    branches of its body's first ``if``): every name it reads then holds what it held before the loop."""
    if not (isinstance(loop.target, cst.Name) and loop.orelse is None and _call_name(loop.iter) == "range"
            and isinstance(loop.iter.func, cst.Name) and _plain_args(loop.iter, 1) is not None):
        return None
    body = list(loop.body.body)
    appends = sum(1 for n in _nodes(loop) if _list_method(n, {target}) == "append")
    if _mutated([loop], {target}, "append"):
        return None
    value = _appended_value(body, target)
    if value is None and body and isinstance(body[0], cst.If) and isinstance(body[0].orelse, cst.Else):
        first, other = _appended_value(list(body[0].body.body), target), \
            _appended_value(list(body[0].orelse.body.body), target)
        if first is None or other is None or appends != 2:
            return None
        value = cst.IfExp(test=body[0].test, body=first, orelse=other)
    elif value is None or appends != 1:
        return None
    return rename(value, {loop.target.value: cst.Integer("0")})


#: The methods of a list that change it.
_LIST_CHANGES = frozenset({"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"})


def _list_method(node: cst.CSTNode, names: set[str]) -> str | None:
    """``m`` of a call ``a.m(...)`` with ``a`` one of ``names`` and ``m`` a method changing a list."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name) \
            and node.func.value.value in names and node.func.attr.value in _LIST_CHANGES:
        return node.func.attr.value
    return None


def _mutated(statements: list[cst.BaseStatement], names: set[str], allowed: str | None = None) -> bool:
    """Whether ``statements`` bind one of ``names``, change it as a list (but by the method
    ``allowed``) or write an element or a slice of it."""
    return any(set(_bound_names(s)) & names for s in statements) or any(
        (isinstance(n, (cst.AssignTarget, cst.AugAssign)) and isinstance(n.target, cst.Subscript)
         and isinstance(n.target.value, cst.Name) and n.target.value.value in names)
        or (isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name) and n.target.value in names)
        or _list_method(n, names) not in (None, allowed)
        for s in statements for n in _nodes(s))


def read_first_entries(statements: list[cst.BaseStatement], parameters: set[str]) -> list[cst.BaseStatement]:
    """``e = a[c]`` (``c`` 0, or a name bound once to 0) after ``a = []`` and the one loop appending
    to ``a`` (:func:`_first_appended`), all in the jvp's body -> ``e`` = what that loop's first pass
    appends (``at.new_zeros(t, [0]) if s[0] < 0 else at.narrow(t, d, 0, s[0])`` for cat's
    backward), a loop-carried name read as its integer before the loop, when every other name it
    reads is bound once, outside loops, and not changed from the loop on: the entry without the
    loop, whose pieces later rules read (a loop then unread goes)."""
    bound = bindings(statements)
    top = {a.name: a.value for s in statements if (a := _assignment(s)) is not None}

    def fixed(name: str) -> bool:
        return bound.stable(name) and not (name in parameters and bound.counts[name])

    def is_zero(node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Name) and fixed(node.value) and node.value in top:
            node = top[node.value]
        return isinstance(node, cst.Integer) and node.value == "0"

    result = list(statements)
    for index, statement in enumerate(result):
        assigned = _assignment(statement)
        if assigned is None or not isinstance(entry := assigned.value, cst.Subscript) \
                or not isinstance(entry.value, cst.Name) or len(entry.slice) != 1 \
                or not isinstance(entry.slice[0].slice, cst.Index) or not is_zero(entry.slice[0].slice.value):
            continue
        target = entry.value.value
        made = [k for k, s in enumerate(result[:index]) if (a := _assignment(s)) is not None and a.name == target
                and isinstance(a.value, cst.List) and not a.value.elements]
        loops = [k for k, s in enumerate(result[:index]) if isinstance(s, cst.For) and _mutated([s], {target})]
        if len(made) != 1 or bound.counts[target] != 1 or target in parameters or len(loops) != 1 \
                or loops[0] < made[0] or _mutated([s for k, s in enumerate(result) if k not in (made[0], loops[0])],
                                                  {target}):
            continue
        loop = result[loops[0]]
        value = _first_appended(loop, target)
        if value is None:
            continue
        carried = _names(value) & set(_bound_names(loop.body))
        before = {a.name: a.value for s in result[:loops[0]] if (a := _assignment(s)) is not None}
        if not all(bound.counts[n] == 2 and n not in parameters and isinstance(before.get(n), cst.Integer)
                   for n in carried):
            continue
        value = rename(value, {n: before[n] for n in carried})
        read = _names(value) - {"at"}
        if not all(fixed(n) for n in read) or _mutated(result[loops[0]:index], read - {target}):
            continue
        result[index] = statement.with_changes(body=[statement.body[0].with_changes(value=value)])
    return result


# ---- sources read from their first elements -------------------------------------------------
#: Operators reading a tensor argument only through its first elements in row-major order (as many
#: as their mask holds True; too few is an error) and its dtype: operator -> that argument's position.
PREFIX_READERS = {"masked_scatter": 2, "masked_select_backward": 0}


def _prefix_root(node: cst.BaseExpression, values: dict[str, cst.BaseExpression], fixed) -> str | None:
    """The name of the tensor (the deepest through names bound once) whose row-major elements
    begin with ``node``'s, of ``node``'s dtype: ``node`` itself (a name), ``at.narrow(v, 0, 0, n)``,
    ``at.reshape(v, s)``, ``at.new_zeros(v, [0])``, or a choice between two of one tensor."""
    if isinstance(node, cst.Name):
        if not fixed(node.value):
            return None
        deeper = _prefix_root(values[node.value], values, fixed) if node.value in values else None
        return deeper or node.value
    if isinstance(node, cst.IfExp):
        body = _prefix_root(node.body, values, fixed)
        return body if body is not None and body == _prefix_root(node.orelse, values, fixed) else None
    name = _call_name(node)
    if name is None or not isinstance(node.func, cst.Attribute):
        return None
    if name == "reshape" and (args := _plain_args(node, 2)) is not None:
        return _prefix_root(args[0], values, fixed)
    if name == "new_zeros" and (args := _plain_args(node, 2)) is not None and code(args[1]) == "[0]":
        return _prefix_root(args[0], values, fixed)
    if name == "narrow" and (args := _plain_args(node, 4)) is not None and code(args[2]) == "0":
        dim = values.get(args[1].value, args[1]) if isinstance(args[1], cst.Name) and fixed(args[1].value) else args[1]
        if code(dim) == "0" or (_call_name(dim) == "wrap_dim" and isinstance(dim.func, cst.Name)
                                and (dim_args := _plain_args(dim, 2)) is not None and code(dim_args[0]) == "0"):
            return _prefix_root(args[0], values, fixed)
    return None


def read_sources_whole(statements: list[cst.BaseStatement], parameters: set[str]) -> list[cst.BaseStatement]:
    """A ``PREFIX_READERS`` operator's argument (``at.masked_scatter(x, m, s)``'s ``s``) made from a
    tensor ``v`` by steps that keep its first elements in order and its dtype (:func:`_prefix_root`:
    the cat backward's first piece of a flattened tangent) -> ``v``: where the call returns, ``s``
    held at least the elements it reads, which are ``v``'s first; so ``v`` gives the same result
    (a source too short, an error, is never made: the adjoint of a selection has its length)."""
    bound = bindings(statements)

    def fixed(name: str) -> bool:
        return bound.stable(name) and not (name in parameters and bound.counts[name])

    values = {name: value for name, value in _top_assignments(statements).items() if fixed(name)}

    class Whole(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            name = _call_name(updated)
            if isinstance(updated.func, cst.Attribute) and updated.func.attr.value == "scalar_type" \
                    and not updated.args and name is None:
                root = _prefix_root(updated.func.value, values, fixed)
                return updated if root is None else updated.with_changes(
                    func=updated.func.with_changes(value=cst.Name(root)))
            if name == "new_zeros" and isinstance(updated.func, cst.Attribute) and _plain_args(updated, 2) is not None:
                position = 0
            elif name not in PREFIX_READERS or not isinstance(updated.func, cst.Attribute) \
                    or _plain_args(updated, 3) is None:
                return updated
            else:
                position = PREFIX_READERS[name]
            root = _prefix_root(updated.args[position].value, values, fixed)
            if root is None or root == code(updated.args[position].value):
                return updated
            args = list(updated.args)
            args[position] = args[position].with_changes(value=cst.Name(root))
            return updated.with_changes(args=args)

    return list(cst.Module(body=statements).visit(Whole()).body)


# ---- the forward's values -------------------------------------------------------------------
#: ``at.<name>(a, b)`` of two tensors calls the operator the Python operator does on them.
TENSOR_OPERATORS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def _writes_in_place(node: cst.CSTNode) -> bool:
    """A call of an in-place operator or method (``at.add_``, ``x.copy_(...)``)."""
    if not isinstance(node, cst.Call):
        return False
    func = node.func.attr if isinstance(node.func, cst.Attribute) else node.func
    return isinstance(func, cst.Name) and func.value.endswith("_") and not func.value.startswith("__")


def forward_values(formula: cst.FunctionDef, tensors: set[str]) -> dict[str, str]:
    """The code of each tensor value ``t = E`` a formula's forward binds in its body -> ``t``: ``t``
    and the names ``E`` reads bound once at most in the whole formula (a parameter by the call;
    none by ``+=``), which calls no in-place operator, so ``E`` computed anywhere in the formula is
    ``t``'s value. ``at.div(a, b)`` of two tensors is also keyed as ``a / b`` (``+``, ``-``, ``*``
    alike)."""
    body = list(formula.body.body)
    everything = list(_nodes(formula))
    if any(_writes_in_place(n) for n in everything):
        return {}
    bound = bindings(body)
    bound.counts.update(p.name.value for p in (*formula.params.posonly_params, *formula.params.params,
                                                *formula.params.kwonly_params))     # bound by the call
    augmented = {n.target.value for n in everything if isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name)}
    found: dict[str, str] = {}
    for statement in body:
        assigned = _assignment(statement)
        if assigned is None:
            continue
        name, value = assigned
        read = _names(value)
        if (name not in tensors or not bound.stable(name) or not _shareable(value, set())
                or not all(bound.stable(n) for n in read) or (read | {name}) & augmented):
            continue
        found.setdefault(code(value), name)
        spelled = (TENSOR_OPERATORS.get(_call_name(value))
                   if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) else None)
        arguments = value.args if isinstance(value, cst.Call) else ()
        if (spelled is not None and len(arguments) == 2
                and all(not a.keyword and not a.star and isinstance(a.value, cst.Name) and a.value.value in tensors
                        for a in arguments)):
            found.setdefault(f"{arguments[0].value.value} {spelled} {arguments[1].value.value}", name)
    return found


def read_forward_values(jvp: cst.FunctionDef, values: dict[str, str]) -> cst.FunctionDef:
    """A part of the jvp whose code is a key of ``values`` (:func:`forward_values`) -> the forward's
    name holding that value: the jvp runs after the forward, on the same values (``self / other /
    other`` is ``result / other`` where ``result = at.div(self, other)``: one division fewer). A
    value reading a name the jvp binds is left as it is."""
    local = set(_bound_names(jvp)) | {p.name.value for p in jvp.params.params}
    usable = {key: name for key, name in values.items()
              if name not in local and not (_names(_expr(key)) & local)}
    if not usable:
        return jvp
    statements = [s.visit(_KnownValues(usable)) for s in jvp.body.body]
    statements, _ = _live_only(statements, set(), private_lists(statements))
    return jvp.with_changes(body=jvp.body.with_changes(body=statements))


# ---- the entry point ---------------------------------------------------------------------
def simplify(jvp: cst.FunctionDef, tensors: frozenset[str] = frozenset()) -> cst.FunctionDef:
    """``jvp`` (a derived ``def jvp(...)``) rewritten by the rules of the module docstring;
    ``tensors``: names the formula binds to tensors (the tangents are too)."""
    parameters = {p.name.value for p in jvp.params.params}
    tensors = set(tensors) | parameters
    taken = _names(jvp) | parameters
    statements = list(jvp.body.body)
    statements = fold_literals(statements)
    statements = zero_sizes(statements)
    statements = crop_pads(statements, taken)
    statements = merge_replayed_branches(statements)
    statements, _ = _live_only(statements, set(), private_lists(statements))
    statements = propagate_copies(statements, parameters)
    statements = fold_involutions(statements)
    statements = transpose_products(statements)
    statements = collapse_broadcasts(statements)
    statements = drop_added_zeros(statements)
    statements = drop_branch_zeros(statements)
    statements = fuse_unsqueezing_reshapes(statements)
    statements = concatenate_pieces(statements, taken)
    statements = share_repeated_values(statements)
    statements = share_repeated_subexpressions(statements)
    statements = share_repeated_values(statements)
    statements = merge_replayed_branches(gather_replayed_branches(statements))
    statements = drop_added_zeros(statements)
    statements, _ = _live_only(statements, set(), private_lists(statements))
    statements = sink_into_branches(statements, taken)
    statements = fuse_complementary_writes(statements)
    statements = keep_index_put_broadcasts(statements)
    statements = write_over_cleared_places(statements)
    statements = skip_overwritten_fills(statements)
    statements = skip_empty_padding(statements)
    statements = zeros_of_unbroadcast(statements)
    statements = skip_view_broadcasts(statements)
    statements = scatter_into_zeros_as_select_backward(statements)
    statements = sink_into_branches(statements, taken)
    statements = fuse_where_terms(statements)
    statements = fuse_sums_to(statements)
    statements = subtract_negated_terms(statements)
    statements = read_sources_whole(read_first_entries(statements, parameters), parameters)
    statements = broadcast_in_operators(statements, tensors)
    statements = split_narrowing_loops(statements, taken)
    statements = share_calls_repeated_in_loops(statements, taken)
    statements = conjugate_through_helpers(statements)
    statements, _ = _live_only(statements, set(), private_lists(statements))
    statements = conjugate_real_only(statements, taken)
    statements = absorb_broadcast_sizes(statements, tensors)
    statements = skip_reshapes_to_own_sizes(statements)
    statements, _ = _live_only(statements, set(), private_lists(statements))
    while (dropped := drop_unread_lists(statements)) is not statements:
        statements, _ = _live_only(dropped, set(), private_lists(dropped))
    return jvp.with_changes(body=jvp.body.with_changes(body=statements))


__all__ = ["forward_values", "read_forward_values", "simplify"]
