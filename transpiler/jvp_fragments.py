"""Code fragments of the jvp derivation (``derive_jvp``) and of its simplification
(``derive_jvp_simplify``): printing and parsing them, renaming their names, the names a fragment
reads, and dropping the assignments nothing reads."""
from __future__ import annotations

from collections.abc import Mapping

import libcst as cst


def code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def expression(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)


def statement(text: str) -> cst.BaseStatement:
    return cst.parse_statement(text)


class _Renamer(cst.CSTTransformer):
    """Renames (or replaces by expressions) the names of a code fragment; attribute names and
    keyword names stay."""

    def __init__(self, names: Mapping[str, cst.BaseExpression]) -> None:
        self.names = names

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        value = self.names.get(original.value, updated)
        if isinstance(value, (cst.Name, cst.Integer, cst.Float, cst.SimpleString)) or value.lpar:
            return value
        return value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])   # keeps precedence

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


def rename(node: cst.CSTNode, names: Mapping[str, cst.BaseExpression]) -> cst.CSTNode:
    return node.visit(_Renamer(names)) if names else node


def nodes(node: cst.CSTNode):
    """Every node under ``node`` but attribute and keyword names (``at.sum``'s ``sum``, ``dim=``)."""
    yield node
    if isinstance(node, cst.Attribute):
        yield from nodes(node.value)
        return
    for child in node.children:
        if isinstance(node, cst.Arg) and child is node.keyword:
            continue
        yield from nodes(child)


def live_only(statements: list[cst.BaseStatement], live: set[str],
              private_lists: frozenset[str] = frozenset()) -> tuple[list[cst.BaseStatement], set[str]]:
    """``statements`` without the assignments to names nothing after them reads (the forward
    sweep and each branch's replay bind more than the transposes use), and the names live before
    them; ``live``: those read after. The formula language's expressions have no side effects; any
    other statement (a list's ``append``, a return) is kept and reads what it names, but an
    ``a.append(x)`` to a list of ``private_lists`` (no other name can hold it) that nothing after
    reads is dropped too."""
    kept: list[cst.BaseStatement] = []
    for statement in reversed(statements):
        if isinstance(statement, cst.SimpleStatementLine):
            smalls = []
            for small in reversed(statement.body):
                if isinstance(small, cst.Assign) and all(isinstance(t.target, cst.Name) for t in small.targets):
                    targets = {t.target.value for t in small.targets}
                    if not targets & live:
                        continue
                    live = (live - targets) | names(small.value)
                elif _appended(small) in private_lists and _appended(small) not in live:
                    continue
                elif not isinstance(small, cst.Pass):
                    live = live | names(small)
                smalls.append(small)
            if smalls:
                kept.append(statement.with_changes(body=list(reversed(smalls))))
        elif isinstance(statement, cst.If):
            body, body_live = live_only(list(statement.body.body), set(live), private_lists)
            orelse, else_live = statement.orelse, set(live)
            if isinstance(orelse, cst.Else):
                inner, else_live = live_only(list(orelse.body.body), set(live), private_lists)
                orelse = orelse.with_changes(body=orelse.body.with_changes(body=inner)) if inner else None
            elif isinstance(orelse, cst.If):
                inner, else_live = live_only([orelse], set(live), private_lists)
                orelse = inner[0] if inner else None
            if not body and orelse is None:
                continue
            live = body_live | else_live | names(statement.test)
            kept.append(statement.with_changes(body=statement.body.with_changes(body=body or [cst.SimpleStatementLine([cst.Pass()])]),
                                               orelse=orelse))
        elif isinstance(statement, cst.For):
            loop_live = set(live)            # an iteration may read what the one before it bound
            while True:
                body, body_live = live_only(list(statement.body.body), set(loop_live), private_lists)
                if body_live <= loop_live:
                    break
                loop_live |= body_live
            if not body:
                continue
            live = live | body_live | names(statement.iter)
            kept.append(statement.with_changes(body=statement.body.with_changes(body=body)))
        else:
            live = live | names(statement)
            kept.append(statement)
    return list(reversed(kept)), live


def _appended(small: cst.BaseSmallStatement) -> str | None:
    """``a`` of ``a.append(x)``."""
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        func = small.value.func
        if isinstance(func, cst.Attribute) and func.attr.value == "append" and isinstance(func.value, cst.Name):
            return func.value.value
    return None


def names(node: cst.CSTNode) -> set[str]:
    return {n.value for n in nodes(node) if isinstance(n, cst.Name)}
