"""What ``backward`` does to what ctx kept: DB102 (in-place writes) and DB104 (nonlocal/global).

Saved tensors reach the backward as ``ctx.saved_tensors`` (unpacked, indexed)
or as ``ctx.<attr>`` attributes that the forward set to a tensor. The
interpreter follows them through aliases and views (``s = a.view(-1)`` shares
``a``'s storage) and reports every in-place write: ``a.mul_(2)``,
``a[i] = 0``, ``a += g``, ``torch.mul(a, b, out=a)``.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from transpiler.lint.ctx.interpreter import Env, Interpreter
from transpiler.lint.ctx.names import ImportTable
from transpiler.lint.ctx.values import ALIASING, CTX, PLAIN, Role, Value, Values, flatten, sequence, union

SAVED: Values = frozenset({Value(Role.SAVED)})
SAVED_SEQUENCE: Values = frozenset({Value(Role.SAVED, star=True)})
NOT_MUTATING = frozenset({"requires_grad_", "share_memory_", "retain_grad_", "register_hook_"})


@dataclass(frozen=True)
class Mutation:
    """An in-place write to a saved tensor in a ``backward``, and how it writes."""

    node: ast.AST
    description: str


class BackwardAnalysis(Interpreter):
    """Tracks which names alias a saved tensor; records every in-place write to one."""

    def __init__(self, imports: ImportTable, tensor_attributes: frozenset[str]) -> None:
        self.imports = imports
        self.tensor_attributes = tensor_attributes
        self.mutations: dict[tuple[int, int], Mutation] = {}

    def mutated(self, node: ast.AST, description: str) -> None:
        """Record a mutation of a saved value at ``node`` (the first one per position)."""
        self.mutations.setdefault((node.lineno, node.col_offset), Mutation(node, description))

    def is_saved(self, values: Values) -> bool:
        """Whether ``values`` may be a saved value (not a starred part of one)."""
        return any(v.kind is Role.SAVED and not v.star for v in flatten(values))

    # --- stores ------------------------------------------------------------------------------

    def store_subscript(self, target: ast.Subscript, values: Values, env: Env,
                        source: ast.expr | None = None) -> None:
        if self.is_saved(self.evaluate(target.value, env)):
            self.mutated(target, f"`{ast.unparse(target)} = ...`")

    def augment(self, node: ast.AugAssign, env: Env) -> None:
        self.evaluate(node.value, env)
        if self.is_saved(self.evaluate(node.target, env)):
            self.mutated(node, f"`{ast.unparse(node.target)} {_operator(node.op)}= ...`")
        elif isinstance(node.target, ast.Name):
            env[node.target.id] = PLAIN

    # --- expressions -------------------------------------------------------------------------

    def evaluate(self, node: ast.expr, env: Env) -> Values:
        if isinstance(node, ast.Name):
            return env.get(node.id, PLAIN)
        if isinstance(node, ast.Attribute):
            base = self.evaluate(node.value, env)
            if base == CTX:
                if node.attr in ("saved_tensors", "saved_variables"):
                    return SAVED_SEQUENCE
                return SAVED if node.attr in self.tensor_attributes else PLAIN
            return base if node.attr in ALIASING and self.is_saved(base) else PLAIN
        if isinstance(node, ast.Subscript):
            base = self.evaluate(node.value, env)
            self.evaluate(node.slice, env)
            return SAVED if self.is_saved(base) or base == SAVED_SEQUENCE else PLAIN
        if isinstance(node, (ast.Tuple, ast.List)):
            return sequence([self.evaluate(e, env) for e in node.elts],
                            exact=not any(isinstance(e, ast.Starred) for e in node.elts))
        if isinstance(node, ast.Starred):
            return self.evaluate(node.value, env)
        if isinstance(node, ast.IfExp):
            self.evaluate(node.test, env)
            return self.evaluate(node.body, env) | self.evaluate(node.orelse, env)
        if isinstance(node, ast.BoolOp):
            return union(self.evaluate(v, env) for v in node.values)
        if isinstance(node, ast.NamedExpr):
            values = self.evaluate(node.value, env)
            self.bind(node.target, values, env)
            return values
        if isinstance(node, ast.Call):
            return self.call(node, env)
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return PLAIN
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.evaluate(child, env)
        return PLAIN

    def call(self, node: ast.Call, env: Env) -> Values:
        """What a call in the backward returns; records an ``out=`` or in-place method that writes a saved
        value."""
        receiver = self.evaluate(node.func.value, env) if isinstance(node.func, ast.Attribute) else PLAIN
        arguments = [self.evaluate(a, env) for a in node.args]
        for keyword in node.keywords:
            values = self.evaluate(keyword.value, env)
            if keyword.arg == "out" and self.is_saved(values):
                self.mutated(node, f"`out={ast.unparse(keyword.value)}`")
        if not isinstance(node.func, ast.Attribute):
            return PLAIN
        method = node.func.attr
        in_place = method.endswith("_") and not method.endswith("__") and method not in NOT_MUTATING
        if in_place and self.is_saved(receiver):
            self.mutated(node, f"`{ast.unparse(node.func)}(...)`")
        elif in_place and arguments and self.is_saved(arguments[0]) and self.is_torch_function(node.func, env):
            self.mutated(node, f"`{ast.unparse(node.func)}({ast.unparse(node.args[0])}, ...)`")
        if method in ALIASING and self.is_saved(receiver):
            return receiver
        if method in ("unbind", "split", "chunk") and self.is_saved(receiver):
            return sequence([SAVED], exact=False)
        return PLAIN


    def is_torch_function(self, func: ast.Attribute, env: Env) -> bool:
        """``torch.relu_(a)`` / ``F.relu_(a)``: a torch function, not a method of a local."""
        head = func.value
        while isinstance(head, ast.Attribute):
            head = head.value
        qualified = self.imports.qualify(func)
        return isinstance(head, ast.Name) and head.id not in env and bool(qualified) and \
            qualified.startswith("torch.")


def nonlocal_statements(function: ast.FunctionDef) -> list[ast.Global | ast.Nonlocal]:
    """``global`` anywhere in ``function``; ``nonlocal`` naming something outside it."""
    own = _names_stored_anywhere(function)
    found: list[ast.Global | ast.Nonlocal] = []
    for node, nested in _walk_scopes(function):
        if isinstance(node, ast.Global):
            found.append(node)
        elif isinstance(node, ast.Nonlocal) and (not nested or not set(node.names) <= own):
            found.append(node)
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _walk_scopes(function: ast.FunctionDef) -> list[tuple[ast.AST, bool]]:
    """Every node under ``function``, with whether it sits inside a nested function."""
    found: list[tuple[ast.AST, bool]] = []
    pending: list[tuple[ast.AST, bool]] = [(child, False) for child in function.body]
    while pending:
        node, nested = pending.pop()
        found.append((node, nested))
        inner = nested or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        pending.extend((child, inner) for child in ast.iter_child_nodes(node))
    return found


def _names_stored_anywhere(function: ast.FunctionDef) -> set[str]:
    """``function``'s parameters and every name stored anywhere in it, nested functions included:
    the names a nested ``nonlocal`` may refer to without leaving ``function``. (The ctx rules read
    ``ast``, not libcst, so :func:`transpiler.dataflow.scope_names`, one scope's names, and
    :func:`transpiler.dataflow.assigned_names`, what the C++ translator rebinds, do not apply.)"""
    names = {a.arg for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _operator(op: ast.operator) -> str:
    return {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
            ast.Mod: "%", ast.Pow: "**", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|",
            ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}[type(op)]

