"""Code fragments of the jvp derivation (``derive_jvp``) and of its simplification
(``derive_jvp_simplify``): printing and parsing them, renaming their names, the names a fragment
reads, and dropping the assignments nothing reads."""
from __future__ import annotations

from collections.abc import Mapping

import libcst as cst


def code(node: cst.CSTNode) -> str:
    """The source text of ``node``."""
    return cst.Module([]).code_for_node(node)


def expression(text: str) -> cst.BaseExpression:
    """``text`` parsed as one expression."""
    return cst.parse_expression(text)


def statement(text: str) -> cst.BaseStatement:
    """``text`` parsed as one statement."""
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
    """``node`` with each name of ``names`` replaced by its expression (parenthesised where needed)."""
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
        elif isinstance(statement, cst.While) and statement.orelse is None:
            body, live = _live_while(statement, live, private_lists)
            if body:
                kept.append(statement.with_changes(body=statement.body.with_changes(body=body)))
        else:
            live = live | names(statement)
            kept.append(statement)
    return list(reversed(kept)), live


def _live_while(statement: cst.While, live: set[str], private_lists: frozenset[str]
                ) -> tuple[list[cst.BaseStatement], set[str]]:
    """A ``while`` loop's body without the assignments nothing after the loop, its test or a later
    iteration reads, and the names live before it; an empty body when nothing it binds is read
    after it and it holds nothing but bindings (the loop is dropped: it has no other effect)."""
    loop_live = set(live)
    while True:
        body, body_live = live_only(list(statement.body.body), loop_live | names(statement.test), private_lists)
        if not _assigned_names(body) & live and _binds_only(body):
            return [], live
        if body_live <= loop_live:
            return body, live | body_live | names(statement.test)
        loop_live |= body_live


def _binds_only(statements: list[cst.BaseStatement]) -> bool:
    """Whether ``statements`` only bind names and append to lists (no return, raise or assert)."""
    return not any(isinstance(node, (cst.Return, cst.Raise, cst.Assert))
                   or isinstance(node, cst.Expr) and _appended(node) is None
                   for statement in statements for node in nodes(statement))


def _assigned_names(statements: list[cst.BaseStatement]) -> set[str]:
    """The names ``statements`` bind (assignment targets, nested blocks included) or append to."""
    found = set()
    for node in statements:
        for inner in nodes(node):
            if isinstance(inner, cst.AssignTarget) and isinstance(inner.target, cst.Name):
                found.add(inner.target.value)
            elif isinstance(inner, cst.Expr) and _appended(inner) is not None:
                found.add(_appended(inner))
    return found


def _appended(small: cst.BaseSmallStatement) -> str | None:
    """``a`` of ``a.append(x)``."""
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        func = small.value.func
        if isinstance(func, cst.Attribute) and func.attr.value == "append" and isinstance(func.value, cst.Name):
            return func.value.value
    return None


def names(node: cst.CSTNode) -> set[str]:
    """The names ``node`` uses, attribute and keyword names left out."""
    return {n.value for n in nodes(node) if isinstance(n, cst.Name)}
