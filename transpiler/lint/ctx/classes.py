"""``torch.autograd.Function`` subclasses of a module, and the ctx rules run on each.

A class is a Function when one of its bases resolves (through the module's
imports) to ``torch.autograd.Function`` or one of its relatives, or to a class
of the same module that is one. Both styles are read: ``forward(ctx, ...)``
keeping things on ctx, and ``forward(...)`` plus ``setup_context(ctx, inputs,
output)``.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from transpiler.lint.ctx.backward import BackwardAnalysis, nonlocal_statements
from transpiler.lint.ctx.forward import ForwardAnalysis
from transpiler.lint.ctx.interpreter import Env
from transpiler.lint.ctx.names import ImportTable, import_table, statements
from transpiler.lint.ctx.values import (
    CTX,
    FACTORIES,
    PLAIN,
    TENSOR_METHODS,
    TENSOR_NAMESPACES,
    Kind,
    Value,
    flatten,
    is_tensor,
)

FUNCTION_BASES = frozenset({
    "torch.autograd.Function", "torch.autograd.function.Function",
    "torch.autograd.function.InplaceFunction", "torch.autograd.function.NestedIOFunction",
    "torch.autograd.NestedIOFunction", "torch.autograd.function._SingleLevelFunction",
})
KEEPING_METHODS = ("forward", "setup_context")


@dataclass(frozen=True)
class Finding:
    """A ctx-rule finding; ``col_offset`` is ast's (UTF-8 bytes, 0-based)."""

    line: int
    col_offset: int
    code: str
    message: str


@dataclass(frozen=True)
class CtxReport:
    functions: int                   # Function subclasses analysed
    findings: tuple[Finding, ...]


def check_module(tree: ast.Module, path: str) -> CtxReport:
    """Run the ctx rules on every ``torch.autograd.Function`` subclass in ``tree``."""
    imports = import_table(tree, path)
    classes = function_classes(tree, imports)
    findings = [finding for cls in classes for finding in check_class(cls, imports)]
    return CtxReport(len(classes), tuple(findings))


def function_classes(tree: ast.Module, imports: ImportTable) -> list[ast.ClassDef]:
    """Classes deriving (directly, or through classes of this module) from autograd.Function."""
    classes = [node for node in statements(tree) if isinstance(node, ast.ClassDef)]
    by_name = {cls.name: cls for cls in classes}
    verdicts: dict[str, bool] = {}

    def is_function(cls: ast.ClassDef) -> bool:
        if cls.name in verdicts:
            return verdicts[cls.name]
        verdicts[cls.name] = False                     # guards against cycles
        verdict = False
        for base in cls.bases:
            qualified = imports.qualify(base)
            if qualified in FUNCTION_BASES:
                verdict = True
            elif isinstance(base, ast.Name) and base.id in by_name and base.id not in imports.names:
                verdict = verdict or is_function(by_name[base.id])
        verdicts[cls.name] = verdict
        return verdict

    return sorted((cls for cls in classes if is_function(cls)), key=lambda c: (c.lineno, c.col_offset))


def check_class(cls: ast.ClassDef, imports: ImportTable) -> list[Finding]:
    """DB100/DB101 on what forward (or setup_context) keeps, DB102/DB104 on backward."""
    methods = {node.name: node for node in cls.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    backward = methods.get("backward")
    findings: list[Finding] = []
    tensor_attributes: frozenset[str] = frozenset()
    keeper = methods.get("setup_context") or methods.get("forward")
    if keeper is not None:
        analysis = _analyse_keeper(keeper, imports, new_style="setup_context" in methods)
        tensor_attributes = frozenset(
            kept.attribute for kept in analysis.kept.values() if kept.attribute is not None
            and any(is_tensor(v) for _, values in kept.arguments for v in flatten(values)))
        if backward is None or not once_differentiable(backward, imports):
            used = _attributes_read(cls, exclude=KEEPING_METHODS)
            for hazard in analysis.hazards():
                attribute = hazard.node.attr if isinstance(hazard.node, ast.Attribute) else None
                if attribute is None or attribute in used:
                    findings.append(Finding(hazard.node.lineno, hazard.node.col_offset, hazard.code, hazard.message))
    if backward is not None:
        findings.extend(_check_backward(backward, imports, tensor_attributes))
    return findings


def once_differentiable(function: ast.FunctionDef, imports: ImportTable) -> bool:
    """``@once_differentiable`` under any import spelling."""
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        qualified = imports.qualify(target)
        if qualified is not None and qualified.rpartition(".")[2] == "once_differentiable":
            return True
    return False


def _analyse_keeper(function: ast.FunctionDef, imports: ImportTable, new_style: bool) -> ForwardAnalysis:
    analysis = ForwardAnalysis(imports, _tensor_names(function, imports))
    env: Env = {}
    positional = _positional(function)
    if new_style:                                     # setup_context(ctx, inputs, output)
        names = [arg.arg for arg in positional]
        if len(names) >= 3:
            analysis.input_containers.add(names[1])
            env[names[0]] = CTX
            env[names[1]] = frozenset({Value(Kind.INPUT, name=names[1], star=True)})
            env[names[2]] = frozenset({Value(Kind.OUTPUT, star=True)})
    elif positional:                                  # forward(ctx, *inputs)
        env[positional[0].arg] = CTX
        for arg in [*positional[1:], *function.args.kwonlyargs]:
            env[arg.arg] = analysis.bound(arg.arg, frozenset({Value(Kind.INPUT, name=arg.arg)}), env)
    for star in (function.args.vararg, function.args.kwarg):
        if star is not None:
            analysis.input_containers.add(star.arg)
            env[star.arg] = frozenset({Value(Kind.INPUT, name=star.arg, star=True)})
    analysis.run(function.body, env)
    return analysis


def _check_backward(backward: ast.FunctionDef, imports: ImportTable,
                    tensor_attributes: frozenset[str]) -> list[Finding]:
    findings: list[Finding] = []
    positional = _positional(backward)
    if positional:
        analysis = BackwardAnalysis(imports, tensor_attributes)
        env: Env = {arg.arg: PLAIN for arg in positional[1:]}
        env[positional[0].arg] = CTX
        analysis.run(backward.body, env)
        for mutation in analysis.mutations.values():
            findings.append(Finding(
                mutation.node.lineno, mutation.node.col_offset, "DB102",
                f"backward modifies a saved tensor in place ({mutation.description}): a second "
                "backward or double backward then reads the modified values; use the out-of-place "
                "operation on a copy instead"))
    for statement in nonlocal_statements(backward):
        keyword = "global" if isinstance(statement, ast.Global) else "nonlocal"
        findings.append(Finding(
            statement.lineno, statement.col_offset, "DB104",
            f"`{keyword} {', '.join(statement.names)}` inside backward: backward must depend only "
            "on its gradients and what ctx saved; keep the value on ctx instead"))
    return findings


def _positional(function: ast.FunctionDef) -> list[ast.arg]:
    """Positional parameters, without ``cls`` of a classmethod."""
    positional = [*function.args.posonlyargs, *function.args.args]
    is_classmethod = any(isinstance(d, ast.Name) and d.id == "classmethod" for d in function.decorator_list)
    return positional[1:] if is_classmethod else positional


def _attributes_read(cls: ast.ClassDef, exclude: tuple[str, ...]) -> set[str]:
    """Attribute names loaded anywhere in the class outside the ``exclude`` methods."""
    read: set[str] = set()
    for statement in cls.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name in exclude:
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                read.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                read.add(node.value)                   # getattr(ctx, "name")
    return read


def _tensor_names(function: ast.FunctionDef, imports: ImportTable) -> frozenset[str]:
    """Names the body itself shows to be tensors: annotated, saved, or used as one."""
    names = {arg.arg for arg in [*function.args.args, *function.args.kwonlyargs]
             if arg.annotation is not None and "Tensor" in ast.unparse(arg.annotation)}
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.attr in TENSOR_METHODS:
            names.add(func.value.id)
        if isinstance(func, ast.Attribute) and func.attr in ("save_for_backward", "mark_dirty"):
            names.update(a.id for a in node.args if isinstance(a, ast.Name))
        qualified = imports.qualify(func)
        if qualified and node.args and isinstance(node.args[0], ast.Name):
            namespace, _, name = qualified.rpartition(".")
            if namespace in TENSOR_NAMESPACES and name not in FACTORIES:
                names.add(node.args[0].id)
    return frozenset(names)
