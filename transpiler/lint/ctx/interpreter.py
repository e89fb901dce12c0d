"""A flow-sensitive abstract interpreter over Python ``ast`` statements.

It walks a function body in order with an environment ``name -> Values``:
assignments (aliases, tuple unpacking, starred targets), both arms of
``if``/``else`` and ``try``/``except`` joined, loops iterated to a fixpoint,
``with``, ``match``, early ``return``/``raise``. What an expression evaluates
to, and what a store into an attribute or a subscript means, is the subclass's
business (:mod:`.forward` for what ctx keeps, :mod:`.backward` for in-place
writes to saved tensors).
"""
from __future__ import annotations

import ast
from typing import Iterable

from transpiler.lint.ctx.values import PLAIN, UNKNOWN, Role, Values, element_of, sequence, union

Env = dict[str, Values]
LOOP_ITERATIONS = 3


def join(envs: Iterable[Env | None]) -> Env | None:
    """Merge the environments of paths that meet (None: a path that returned or raised)."""
    live = [env for env in envs if env is not None]
    if not live:
        return None
    merged: Env = {}
    for env in live:
        for name, values in env.items():
            merged[name] = merged[name] | values if name in merged else values
    return merged


class Interpreter:
    """Statement semantics; subclasses define :meth:`evaluate` and the store hooks."""

    def evaluate(self, node: ast.expr, env: Env) -> Values:
        """What ``node`` may hold under ``env``; a subclass defines it."""
        raise NotImplementedError

    def store_attribute(self, target: ast.Attribute, values: Values, env: Env,
                        source: ast.expr | None) -> None:
        """``obj.attr = values`` (``source``: the assigned expression, when it is one whole)."""

    def store_subscript(self, target: ast.Subscript, values: Values, env: Env,
                        source: ast.expr | None = None) -> None:
        """``obj[index] = values`` (``source``: the assigned expression, when it is one whole)."""

    def augment(self, node: ast.AugAssign, env: Env) -> None:
        """``target op= value``: by default rebinds a name to the arithmetic result."""
        values = self.evaluate(ast.BinOp(node.target, node.op, node.value, **_position(node)), env)
        if isinstance(node.target, ast.Name):
            self.bind(node.target, values, env)

    def returned(self, node: ast.Return, env: Env) -> None:
        """A ``return`` statement (its value is evaluated here)."""
        if node.value is not None:
            self.evaluate(node.value, env)

    def bound(self, name: str, values: Values, env: Env) -> Values:
        """What a name holds once bound to ``values`` (a subclass may refine it)."""
        return values

    # --- statements ------------------------------------------------------------------------

    def run(self, body: list[ast.stmt], env: Env) -> Env | None:
        """Interpret ``body`` from ``env``: the environment after it, or None when it never falls through."""
        return self.block(body, env)

    def block(self, body: list[ast.stmt], env: Env | None) -> Env | None:
        """Interpret each statement of ``body`` in turn; None once one never falls through."""
        for statement in body:
            if env is None:
                return None
            env = self.statement(statement, env)
        return env

    def statement(self, node: ast.stmt, env: Env) -> Env | None:
        """Interpret one statement: the environment after it, or None when it does not fall through."""
        if isinstance(node, ast.Assign):
            values = self.evaluate(node.value, env)
            for target in node.targets:
                self.bind(target, values, env, node.value)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.bind(node.target, self.evaluate(node.value, env), env, node.value)
        elif isinstance(node, ast.AugAssign):
            self.augment(node, env)
        elif isinstance(node, ast.Expr):
            self.evaluate(node.value, env)
        elif isinstance(node, ast.Return):
            self.returned(node, env)
            return None
        elif isinstance(node, ast.Raise):
            return None
        elif isinstance(node, ast.If):
            self.evaluate(node.test, env)
            return join([self.block(node.body, dict(env)), self.block(node.orelse, dict(env))])
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            return self.loop(node, env, self.evaluate(node.iter, env))
        elif isinstance(node, ast.While):
            self.evaluate(node.test, env)
            return self.loop(node, env, None)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.evaluate(item.context_expr, env)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, UNKNOWN, env)     # what __enter__ returns
            return self.block(node.body, env)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            return self.try_statement(node, env)
        elif isinstance(node, ast.Match):
            self.evaluate(node.subject, env)
            arms = [self.match_arm(case, dict(env)) for case in node.cases]
            return join([*arms, env])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            env[node.name] = PLAIN
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    env.pop(target.id, None)
        return env

    def loop(self, node: ast.For | ast.AsyncFor | ast.While, env: Env, iterated: Values | None) -> Env | None:
        """Run the body until the environment stops growing; the loop may also run zero times."""
        state = dict(env)
        for _ in range(LOOP_ITERATIONS):
            entry = dict(state)
            if iterated is not None:
                self.bind(node.target, element_of(iterated), entry)
            after = join([state, self.block(node.body, entry)])
            if after == state:
                break
            state = after if after is not None else state
        return self.block(node.orelse, dict(state))

    def try_statement(self, node: ast.Try, env: Env) -> Env | None:
        """A ``try``: the join of the environments after the body, each handler and ``finally``."""
        body = self.block(node.body, dict(env))
        normal = self.block(node.orelse, dict(body)) if body is not None else None
        entry = join([env, body]) or env
        handlers = []
        for handler in node.handlers:
            handler_env = dict(entry)
            if handler.name:
                handler_env[handler.name] = PLAIN
            handlers.append(self.block(handler.body, handler_env))
        after = join([normal, *handlers])
        if node.finalbody:
            final = self.block(node.finalbody, dict(after if after is not None else entry))
            return final if after is not None else None
        return after

    def match_arm(self, case: ast.match_case, env: Env) -> Env | None:
        """One ``case`` of a ``match``: its capture names bound to unknown values, then its guard and body."""
        for pattern in ast.walk(case.pattern):
            for name in (getattr(pattern, "name", None), getattr(pattern, "rest", None)):
                if isinstance(name, str):
                    env[name] = UNKNOWN
        if case.guard is not None:
            self.evaluate(case.guard, env)
        return self.block(case.body, env)

    # --- binding -----------------------------------------------------------------------------

    def bind(self, target: ast.expr, values: Values, env: Env, source: ast.expr | None = None) -> None:
        """Bind an assignment's ``target`` (a name, tuple, starred, attribute or subscript) to ``values``."""
        if isinstance(target, ast.Name):
            env[target.id] = self.bound(target.id, values, env)
        elif isinstance(target, (ast.Tuple, ast.List)):
            self.unpack(target.elts, values, env, source)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, sequence([element_of(values)], exact=False), env)
        elif isinstance(target, ast.Attribute):
            self.evaluate(target.value, env)
            self.store_attribute(target, values, env, source)
        elif isinstance(target, ast.Subscript):
            self.store_subscript(target, values, env, source)

    def unpack(self, targets: list[ast.expr], values: Values, env: Env, source: ast.expr | None = None) -> None:
        """``a, b = values``; ``source`` (the assigned expression) names each element when a literal."""
        sources: list[ast.expr | None] = [None] * len(targets)
        if isinstance(source, (ast.Tuple, ast.List)) and len(source.elts) == len(targets) \
                and not any(isinstance(e, ast.Starred) for e in source.elts):
            sources = list(source.elts)
        starred = [i for i, t in enumerate(targets) if isinstance(t, ast.Starred)]
        exact = [v for v in values if v.kind is Role.SEQUENCE and v.exact and len(v.elements) == len(targets)]
        for index, target in enumerate(targets):
            if starred and index >= starred[0]:
                element = element_of(values)        # positions after a starred target shift
            elif exact and len(exact) == len(values):
                element = union(v.elements[index] for v in exact)
            else:
                element = element_of(values, index)
            if isinstance(target, ast.Starred):
                self.bind(target.value, sequence([element], exact=False), env)
            else:
                self.bind(target, element, env, sources[index])


def _position(node: ast.AST) -> dict[str, int]:
    return {"lineno": node.lineno, "col_offset": node.col_offset,
            "end_lineno": node.end_lineno or node.lineno, "end_col_offset": node.end_col_offset or 0}

