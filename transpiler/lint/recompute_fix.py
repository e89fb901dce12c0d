"""Fix of DB100 on a ``torch.autograd.Function``: save the inputs, recompute the intermediate in backward.

``expx = torch.exp(x); ctx.save_for_backward(expx)`` keeps a tensor whose
dependence on ``x`` double backward cannot see. When the intermediate is one
expression of torch operations on forward's own inputs, the fix saves those
inputs instead (the ones not saved already) and recomputes the expression right
after backward unpacks ``ctx.saved_tensors``, where autograd records it:

    ctx.save_for_backward(expx)          ->   ctx.save_for_backward(x)
    (expx,) = ctx.saved_tensors          ->   (x,) = ctx.saved_tensors
                                              expx = torch.exp(x)

Unsafe in ruff's sense (``--unsafe-fixes``): backward computes the value again,
which costs time, and equals forward's only when the operations are
deterministic and forward ran under the same autocast state.

Preconditions (else no fix; the ``@once_differentiable`` fix is offered
instead): forward (not setup_context) binds the name once, in a top-level
``name = expression`` before the one save; the expression calls or computes
something and reads only forward's parameters and module-level names; neither
those parameters nor the name are rebound or changed in place in forward
(``x.add_(...)``, ``x[i] = ...``, ``mark_dirty``); backward unpacks
``ctx.saved_tensors`` once into names and launches no kernel (``kernel[grid](...)``,
``Other.apply(...)``: double backward cannot work there whatever is saved); the
new names are free in backward.
"""
from __future__ import annotations

import libcst as cst

from transpiler.lint.hygiene_fix import (
    Edits,
    FunctionClass,
    _comma_separated,
    _ctx_name,
    _is_save,
    _names,
    _single_save,
    _stored_names,
    _unpack_statement,
    _unpacking,
    walk,
)

DESCRIPTION = ("unsafe (--unsafe-fixes): save the inputs it is computed from and recompute it at the top "
               "of backward, where double backward sees its dependence on them")


def recompute_edits(cls: FunctionClass, element: cst.Name) -> Edits | None:
    """The edits that replace the saved ``element`` (and the save's other intermediates forward
    computes the same way, not returned) by forward's inputs they are computed from, recomputed
    in backward; None when a precondition fails for ``element``."""
    forward, backward = cls.methods.get("forward"), cls.methods.get("backward")
    if forward is None or backward is None or "setup_context" in cls.methods or _launches(backward):
        return None
    save, unpack = _single_save(forward), _unpacking(backward)
    if save is None or unpack is None:
        return None
    save_statement, call = save
    arguments = [a.value for a in call.args]
    targets = [e.value.value for e in unpack.body[0].targets[0].target.elements]
    parameters = [p.name.value for p in forward.params.params][1:]     # after ctx
    if element not in arguments or len(targets) != len(arguments) or not parameters:
        return None
    returned = {n.value for r in walk(forward) if isinstance(r, cst.Return)      # outputs, returned as is
                for n in ([e.value for e in r.value.elements] if isinstance(r.value, (cst.Tuple, cst.List))
                          else [r.value]) if isinstance(n, cst.Name)}
    recomputed: dict[int, cst.BaseExpression] = {}
    for index, argument in enumerate(arguments):
        if argument is element or (isinstance(argument, cst.Name) and argument.value not in returned):
            expression = _recomputable(forward, argument, save_statement, parameters)
            if expression is not None:
                recomputed[index] = expression
            elif argument is element:
                return None
    inputs = [p for p in parameters if any(p in _names(e) for e in recomputed.values())]
    saved_as = {a.value: targets[i] for i, a in enumerate(arguments)
                if isinstance(a, cst.Name) and i not in recomputed}
    taken = _names(backward) | {p.name.value for p in backward.params.params}
    renamed: dict[str, str] = {}
    added: list[str] = []
    for name in inputs:
        if name in saved_as:
            renamed[name] = saved_as[name]
        elif name in taken:
            return None
        else:
            renamed[name] = name
            added.append(name)
    kept = [a for i, a in enumerate(call.args) if i not in recomputed] + [cst.Arg(cst.Name(n)) for n in added]
    edits = Edits()
    edits.statements[save_statement] = [save_statement.with_changes(
        body=[cst.Expr(call.with_changes(args=_comma_separated(kept)))])]
    names = [t for i, t in enumerate(targets) if i not in recomputed] + added
    statements = [cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(targets[i]))],
                                                      expression.visit(_Rename(renamed, expression)))])
                  for i, expression in sorted(recomputed.items())]
    edits.statements[unpack] = [_unpack_statement(names, unpack), *statements]
    return edits


def _recomputable(forward: cst.FunctionDef, argument: cst.BaseExpression, save_statement: cst.SimpleStatementLine,
                  parameters: list[str]) -> cst.BaseExpression | None:
    """The expression a saved name was bound to, when backward can compute it again from forward's
    inputs: it reads some of them (and module-level names only), none changed in place."""
    if not isinstance(argument, cst.Name):
        return None
    expression = _single_binding(forward, argument.value, save_statement)
    if expression is None or _ctx_name(forward) in _names(expression):
        return None
    inputs = {p for p in parameters if p in _names(expression)}
    writes_out = any(isinstance(n, cst.Arg) and n.keyword is not None and n.keyword.value == "out"
                     for n in walk(expression))                # autograd refuses ``out=`` in backward
    if not inputs or writes_out or _changed_in_place(forward, {*inputs, argument.value}) \
            or _allocates(expression) or _passed_on(forward, argument.value):
        return None
    return expression


def _allocates(expression: cst.BaseExpression) -> bool:
    """A new buffer (``torch.empty_like(x)``, ``x.new_zeros(...)``): what forward then writes
    into it is not in the expression."""
    if not isinstance(expression, cst.Call):
        return False
    func = expression.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    return name.startswith(("empty", "zeros", "ones", "full", "new_")) or name in ("tensor", "as_tensor")


def _passed_on(forward: cst.FunctionDef, name: str) -> bool:
    """Whether forward hands ``name`` to a call other than the save (``out=name``, a kernel's
    argument, a helper's): the callee may write into it."""
    for call in (n for n in walk(forward) if isinstance(n, cst.Call) and not _is_save(n)):
        if any(isinstance(a.value, cst.Name) and a.value.value == name for a in call.args):
            return True
    return False


def _single_binding(forward: cst.FunctionDef, name: str,
                    save_statement: cst.SimpleStatementLine) -> cst.BaseExpression | None:
    """The expression of forward's one top-level ``name = expression`` before the save, when the
    name is bound nowhere else in forward and the expression computes something."""
    body = list(forward.body.body) if isinstance(forward.body, cst.IndentedBlock) else []
    bindings = [s for s in body if name in _stored_names(s)]
    if len(bindings) != 1 or save_statement not in body:
        return None
    statement = bindings[0]
    if body.index(statement) > body.index(save_statement) or not isinstance(statement, cst.SimpleStatementLine) \
            or len(statement.body) != 1 or not isinstance(statement.body[0], cst.Assign):
        return None
    assign = statement.body[0]
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return None
    value = assign.value
    computes = any(isinstance(n, (cst.Call, cst.BinaryOperation, cst.UnaryOperation)) for n in walk(value))
    stored_elsewhere = any(set(_names(value)) & _stored_names(s) for s in body if s is not statement)
    return value if computes and not stored_elsewhere else None


def _changed_in_place(forward: cst.FunctionDef, names: set[str]) -> bool:
    """Whether forward may change one of ``names`` in place, or marks anything dirty."""
    for node in walk(forward):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            if method == "mark_dirty" or (method.endswith("_") and not method.endswith("__")
                                          and isinstance(node.func.value, cst.Name) and node.func.value.value in names):
                return True
        if isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name) and node.target.value in names:
            return True
        if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Subscript) and \
                isinstance(node.target.value, cst.Name) and node.target.value.value in names:
            return True
    return False


def _launches(backward: cst.FunctionDef) -> bool:
    """A kernel launch (``kernel[grid](...)``) or another Function's ``.apply`` in backward."""
    return any(isinstance(n, cst.Call) and (isinstance(n.func, cst.Subscript) or (
        isinstance(n.func, cst.Attribute) and n.func.attr.value == "apply")) for n in walk(backward))


class _Rename(cst.CSTTransformer):
    """Renames the variables of an expression (not attribute names nor keywords)."""

    def __init__(self, renamed: dict[str, str], expression: cst.BaseExpression) -> None:
        super().__init__()
        self.renamed = renamed
        self.not_variables = {id(n.attr) for n in walk(expression) if isinstance(n, cst.Attribute)}
        self.not_variables |= {id(n.keyword) for n in walk(expression) if isinstance(n, cst.Arg) and n.keyword}

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        if id(original_node) in self.not_variables or original_node.value not in self.renamed:
            return updated_node
        return updated_node.with_changes(value=self.renamed[original_node.value])
