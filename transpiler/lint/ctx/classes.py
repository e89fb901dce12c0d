"""``torch.autograd.Function`` subclasses of a module, and the ctx rules run on each.

A class is a Function when one of its bases resolves (through the module's
imports) to ``torch.autograd.Function`` or one of its relatives, or to a class
of the same module that is one. Both styles are read: ``forward(ctx, ...)``
keeping things on ctx, and ``forward(...)`` plus ``setup_context(ctx, inputs,
output)``.
"""
from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from transpiler import codes
from transpiler.lint.ctx import hygiene
from transpiler.lint.ctx.finding import Finding
from transpiler.lint.ctx.backward import BackwardAnalysis, nonlocal_statements
from transpiler.lint.ctx.forward import (
    CLASS,
    ForwardAnalysis,
    FunctionSource,
    Hazard,
    correlated_conditions,
    global_key,
)
from transpiler.lint.ctx.interpreter import Env
from transpiler.lint.ctx.names import ImportTable, import_table, statements
from transpiler.lint.ctx.tree import current_tree
from transpiler.lint.ctx.values import (
    CTX,
    FACTORIES,
    PLAIN,
    TENSOR_METHODS,
    TENSOR_NAMESPACES,
    Role,
    Value,
    Values,
    flatten,
    is_tensor,
    sequence,
    union,
)

FUNCTION_BASES = frozenset({
    "torch.autograd.Function", "torch.autograd.function.Function",
    "torch.autograd.function.InplaceFunction", "torch.autograd.function.NestedIOFunction",
    "torch.autograd.NestedIOFunction", "torch.autograd.function._SingleLevelFunction",
})
KEEPING_METHODS = ("forward", "setup_context")


@dataclass(frozen=True)
class CtxReport:
    """The ctx rules' result for one module: how many Function classes, the findings, their names."""

    functions: int                   # Function subclasses analysed
    findings: tuple[Finding, ...]
    classes: tuple[str, ...] = ()    # their names (bases other files of the tree may derive from)


def check_module(tree: ast.Module, path: str) -> CtxReport:
    """Run the ctx rules on every ``torch.autograd.Function`` subclass in ``tree``.

    In the files the driver knows to derive from Function classes of other linted files
    (:func:`~transpiler.lint.ctx.tree.derive_from_tree`), bases resolve through the tree.
    """
    imports = import_table(tree, path)
    source_tree = current_tree()
    classes = function_classes(tree, imports, source_tree is not None and path in source_tree.subclass_files)
    module = ModuleScope.of(tree, imports, path)
    findings = [finding for cls in classes for finding in check_class(cls, imports, module)]
    return CtxReport(len(classes), tuple(findings), tuple(cls.name for cls in classes))


@dataclass(frozen=True)
class ModuleScope:
    """What a forward can reach in its module: module-level functions and global names."""

    functions: dict[str, FunctionSource]
    globals: frozenset[str]
    path: str | None = None
    extensions: frozenset[str] = frozenset()   # module globals holding a compiled extension module

    @staticmethod
    def of(tree: ast.Module, imports: ImportTable, path: str | None = None) -> "ModuleScope":
        """The module's top-level functions (and the names it binds) read from ``tree``."""
        functions: dict[str, FunctionSource] = {}
        names: set[str] = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions[node.name] = FunctionSource(node, imports, None)
            elif isinstance(node, ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
        return ModuleScope(functions, frozenset(names), path, extension_globals(tree, imports))

    def function(self, qualified: str) -> FunctionSource | None:
        """A function of this module, or of another module of the linted tree."""
        own = self.functions.get(qualified)
        tree = current_tree()
        if own is not None or tree is None or "." not in qualified:
            return own
        found = tree.definition(qualified)
        if found is None or not isinstance(found[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        definition, imports, path = found
        return FunctionSource(definition, imports, None if path == self.path else path)


# Calls that load a compiled extension module (``torch.utils.cpp_extension.load(...)``, monai's
# ``optional_import("monai._C")``, ``importlib.import_module(...)``).
EXTENSION_LOADERS = ("cpp_extension.load", "cpp_extension.load_inline", "optional_import", "import_module")


def extension_globals(tree: ast.Module, imports: ImportTable) -> frozenset[str]:
    """Module globals bound (at module level, or in a function under ``global NAME``) to a compiled
    extension: an imported module outside torch and Python, or what an extension loader returns."""
    found: set[str] = set()
    declared = {name for node in statements(tree) if isinstance(node, ast.Global) for name in node.names}
    for node in statements(tree):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Tuple) and target.elts:            # ``_C, _ = optional_import(...)``
            target = target.elts[0]
        if not isinstance(target, ast.Name) or (target.id not in declared and not _module_level(tree, node)):
            continue
        if isinstance(value, ast.Call):
            loader = imports.qualify(value.func) or ""
            if loader.endswith(EXTENSION_LOADERS):
                found.add(target.id)
        elif isinstance(value, ast.Name) and value.id in imports.names:
            qualified = imports.names[value.id] + "."
            if not qualified.startswith(DIFFERENTIABLE_MODULES) and not qualified.startswith("numpy."):
                found.add(target.id)
    return frozenset(found)


def _module_level(tree: ast.Module, node: ast.stmt) -> bool:
    return any(node is statement for statement in tree.body)


def function_classes(tree: ast.Module, imports: ImportTable, tree_bases: bool = False) -> list[ast.ClassDef]:
    """Classes deriving (directly, or through classes of this module) from autograd.Function."""
    classes = [node for node in statements(tree) if isinstance(node, ast.ClassDef)]
    by_name = {cls.name: cls for cls in classes}
    aliases = function_aliases(tree, imports)
    verdicts: dict[str, bool] = {}

    def is_function(cls: ast.ClassDef) -> bool:
        if cls.name in verdicts:
            return verdicts[cls.name]
        verdicts[cls.name] = False                     # guards against cycles
        verdict = False
        for base in cls.bases:
            qualified = resolve_base(base, imports, aliases)
            if qualified in FUNCTION_BASES or _star_imported_function(base, qualified, imports, by_name):
                verdict = True
            elif isinstance(base, ast.Name) and base.id in by_name and base.id not in imports.names:
                verdict = verdict or is_function(by_name[base.id])
            elif tree_bases and qualified is not None and "." in qualified:
                verdict = verdict or _function_in_tree(qualified, depth=0)
        verdicts[cls.name] = verdict
        return verdict

    return sorted((cls for cls in classes if is_function(cls)), key=lambda c: (c.lineno, c.col_offset))


def resolve_base(node: ast.expr, imports: ImportTable, aliases: dict[str, str]) -> str | None:
    """The dotted name a class base statically is: through imports, names assigned a Function
    class (``aliases``), ``getattr(module, "Name")`` and ``importlib.import_module("a.b")`` with
    constant strings; None when it is not statically known."""
    if isinstance(node, ast.Name) and node.id in aliases:
        return aliases[node.id]
    if isinstance(node, ast.Attribute):
        owner = resolve_base(node.value, imports, aliases)
        return None if owner is None else f"{owner}.{node.attr}"
    if isinstance(node, ast.Call):
        function = imports.qualify(node.func)
        constant = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if function == "getattr" and len(node.args) == 2 and constant and node.args[1].value == constant[0]:
            owner = resolve_base(node.args[0], imports, aliases)
            return None if owner is None else f"{owner}.{constant[0]}"
        if function == "importlib.import_module" and len(node.args) == 1 and constant \
                and not constant[0].startswith("."):
            return constant[0]
        if function == "__import__" and len(node.args) == 1 and constant:
            return constant[0].partition(".")[0]           # __import__("a.b") is package a
        return None
    return imports.qualify(node)


def function_aliases(tree: ast.Module, imports: ImportTable) -> dict[str, str]:
    """Names a module assigns a Function class (``Base = torch.autograd.Function``, a chain of
    such names, ``Base: type = ...``): name -> the class's dotted name."""
    assignments = [(node.targets[0].id, node.value) for node in statements(tree) if isinstance(node, ast.Assign)
                   and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)]
    assignments += [(node.target.id, node.value) for node in statements(tree) if isinstance(node, ast.AnnAssign)
                    and isinstance(node.target, ast.Name) and node.value is not None]
    aliases: dict[str, str] = {}
    for _ in range(4):                                   # a chain of aliases, a few deep
        found = {name: qualified for name, value in assignments
                 if (qualified := resolve_base(value, imports, aliases)) in FUNCTION_BASES}
        if found.keys() <= aliases.keys():
            break
        aliases.update(found)
    return aliases


def _star_imported_function(base: ast.expr, qualified: str | None, imports: ImportTable,
                            local_classes: dict[str, ast.ClassDef]) -> bool:
    """``from torch.autograd import *`` then ``class F(Function)``: a base whose first name is
    bound by no import or class of the module, resolved in each star-imported module."""
    head = base
    while isinstance(head, ast.Attribute):
        head = head.value
    if qualified is None or not isinstance(head, ast.Name) or head.id in imports.names or head.id in local_classes:
        return False
    return any(f"{module}.{qualified}" in FUNCTION_BASES for module in imports.star_modules)


def _function_in_tree(qualified: str, depth: int) -> bool:
    """Whether ``qualified`` is a Function subclass defined in another file of the linted tree."""
    tree = current_tree()
    found = tree.definition(qualified) if tree is not None and depth < 8 else None
    if found is None or not isinstance(found[0], ast.ClassDef):
        return False
    cls, imports, _ = found
    for base in cls.bases:
        name = imports.qualify(base)
        if name in FUNCTION_BASES:
            return True
        if isinstance(base, ast.Name) and base.id not in imports.names:
            name = f"{qualified.rpartition('.')[0]}.{base.id}"          # a class of that module
        if name is not None and "." in name and name != qualified and _function_in_tree(name, depth + 1):
            return True
    return False


def check_class(cls: ast.ClassDef, imports: ImportTable, module: ModuleScope | None = None) -> list[Finding]:
    """DB100/DB101 on what forward (or setup_context) keeps, DB102/DB104 on backward."""
    module = module or ModuleScope({}, frozenset())
    methods = {node.name: node for node in cls.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    backward = methods.get("backward")
    findings: list[Finding] = []
    tensor_attributes: frozenset[str] = frozenset()
    keeper = methods.get("setup_context") or methods.get("forward")
    if keeper is not None:
        slots = gradient_slots(backward) if backward is not None else None
        forward = methods.get("forward") if "setup_context" in methods else None
        analysis = _analyse_keeper(keeper, imports, module, slots, forward)
        tensor_attributes = frozenset(
            kept.attribute for kept in analysis.kept.values() if kept.attribute is not None
            and any(is_tensor(v) for _, values in kept.arguments for v in flatten(values)))
        if backward is None or not (once_differentiable(backward, imports) or recomputes_when_recording(backward, imports)):
            used = _attributes_read(cls, exclude=KEEPING_METHODS)
            opaque = opaque_calls(backward, imports, module) if backward is not None else []
            reported: dict[frozenset, list[Hazard]] = {}
            for hazard in _path_hazards(analysis, keeper, imports, module, slots, forward):
                if hazard.attribute is None or hazard.attribute in used:
                    reported.setdefault(hazard.sites | {hazard.code}, []).append(hazard)
            decoratable = isinstance(backward, ast.FunctionDef) and _class_lines(cls)
            for same_cause in reported.values():
                findings.append(_finding(same_cause, opaque, decoratable or None))
        findings.extend(_hygiene(cls, methods, keeper, analysis))
    if backward is not None:
        findings.extend(_check_backward(backward, imports, tensor_attributes))
    return findings


def _hygiene(cls: ast.ClassDef, methods: dict[str, ast.FunctionDef], keeper: ast.FunctionDef,
             analysis: ForwardAnalysis) -> list[Finding]:
    """DB110/DB111 (:mod:`transpiler.lint.ctx.hygiene`): what is kept, said once per place."""
    reported = {id(h.node) for h in analysis.hazards()}
    used = _attributes_read(cls, exclude=KEEPING_METHODS)
    backward = methods.get("backward")
    others = [m for name, m in methods.items() if name not in ("backward", keeper.name)]
    return [*hygiene.attribute_findings(analysis, used, reported),
            *hygiene.metadata_findings(keeper, backward, others)]


def once_differentiable(function: ast.FunctionDef, imports: ImportTable) -> bool:
    """``@once_differentiable`` under any import spelling."""
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        qualified = imports.qualify(target)
        if qualified is not None and qualified.rpartition(".")[2] == "once_differentiable":
            return True
    return False


def recomputes_when_recording(backward: ast.FunctionDef, imports: ImportTable) -> bool:
    """``if torch.is_grad_enabled(): ... return``: a backward with its own path for double backward
    (create_graph), which recomputes from inputs rather than use what ctx kept; or ``... raise``:
    one that refuses double backward with an error, as ``@once_differentiable`` does."""
    for statement in backward.body:
        if isinstance(statement, ast.If) and isinstance(statement.test, ast.Call) \
                and (imports.qualify(statement.test.func) or "").endswith("is_grad_enabled") \
                and statement.body and isinstance(statement.body[-1], (ast.Return, ast.Raise)):
            return True
    return False


# which of the two a finding gets is planned with libcst, for SARIF only (function_fix.fix_edits)
ONCE_DIFFERENTIABLE_FIX = ("unsafe (--unsafe-fixes): where forward computes the intermediate from its inputs "
                           "alone, save those and recompute it in backward; otherwise mark backward "
                           "@once_differentiable, so that double backward raises instead of being silently wrong")


def _class_lines(cls: ast.ClassDef) -> range:
    return range(cls.lineno, (cls.end_lineno or cls.lineno) + 1)


def _finding(hazards: list[Hazard], opaque: list[ast.Call], decoratable: range | None = None) -> Finding:
    """One finding per root cause: the first place keeping it, the others as related locations.
    ``decoratable``: the lines of a class whose own backward ``--unsafe-fixes`` can decorate
    (the fix of :mod:`transpiler.lint.function_fix`, offered on a DB100 inside them)."""
    first, *others = hazards
    located = first.element if first.element is not None else first.node
    message = first.message
    if opaque:
        call = opaque[0]
        message += (f"; backward calls `{_callee(call)}` (line {call.lineno}), which autograd cannot "
                    "differentiate, so double backward cannot work whatever is saved: mark backward "
                    "@once_differentiable")
    elif first.code == codes.REBOUND_INPUT.code:
        message += (" with no path to the input: double backward through it is silently wrong; save the "
                    "original input and recompute in backward, or mark backward @once_differentiable")
    else:
        message += (": backward uses it with no path to the inputs, so double backward through it is "
                    "silently wrong; save inputs/outputs and recompute it in backward, or mark backward "
                    "@once_differentiable")
    related = tuple((h.node.lineno, h.node.col_offset) for h in others)
    if related:
        message += f" (the same value is also kept at line{'s' if len(related) > 1 else ''} " \
                   f"{', '.join(str(line) for line, _ in related)})"
    fixable = (first.code == codes.KEPT_INTERMEDIATE.code and decoratable is not None
               and located.lineno in decoratable)
    return Finding(located.lineno, located.col_offset, first.code, message, related,
                   ONCE_DIFFERENTIABLE_FIX if fixable else None)


def _callee(call: ast.Call) -> str:
    text = ast.unparse(call.func)
    return text if len(text) <= 40 else text[:37] + "..."


def gradient_slots(backward: ast.FunctionDef) -> tuple[frozenset[int], frozenset[int]] | None:
    """(positions that are a literal ``None`` in every return, positions given a gradient in some).

    None when a return is not a literal the positions can be read from (``return grads``).
    """
    always_none: set[int] | None = None
    given: set[int] = set()
    for node in _own_returns(backward):
        value = node.value
        elements = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
        if value is None or any(isinstance(e, ast.Starred) for e in elements):
            return None
        nones = {i for i, e in enumerate(elements) if isinstance(e, ast.Constant) and e.value is None}
        given.update(set(range(len(elements))) - nones)
        always_none = nones if always_none is None else always_none & nones
    if always_none is None:
        return None
    return frozenset(always_none), frozenset(given)


def _own_returns(function: ast.FunctionDef) -> list[ast.Return]:
    found: list[ast.Return] = []
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return):
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))
    return found


# Modules whose functions a backward may call without leaving autograd (or without tensors).
DIFFERENTIABLE_MODULES = (
    "torch.", "math.", "operator.", "numbers.", "builtins.", "typing.", "einops.", "functools.",
    "itertools.", "warnings.", "logging.", "os.", "sys.", "contextlib.", "collections.", "dataclasses.",
    "triton.cdiv.", "triton.next_power_of_2.",
)


def opaque_calls(backward: ast.FunctionDef, imports: ImportTable, module: ModuleScope) -> list[ast.Call]:
    """Calls in ``backward`` that autograd cannot differentiate, given tensors: kernel launches
    (``kernel[grid](...)``), ``.apply`` of another Function, ``torch.ops`` of other libraries,
    functions of other (extension) modules; a function of this module counts when its own body
    launches a kernel or calls such a function."""
    tensors = _backward_tensor_names(backward)
    found = [node for node in ast.walk(backward) if isinstance(node, ast.Call)
             and _given_tensors(node, tensors) and _is_opaque(node, imports, module, depth=0)]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _backward_tensor_names(backward: ast.FunctionDef) -> set[str]:
    """Names of backward holding tensors: its gradients, and what it reads from ctx."""
    positional = _positional(backward)
    names = {a.arg for a in positional[1:]} | ({backward.args.vararg.arg} if backward.args.vararg else set())
    ctx = positional[0].arg if positional else "ctx"
    for node in ast.walk(backward):
        if isinstance(node, ast.Assign) and any(
                isinstance(n, ast.Name) and n.id == ctx for n in ast.walk(node.value)):
            names.update(n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _given_tensors(call: ast.Call, tensors: set[str]) -> bool:
    """Whether a call's arguments include a gradient or something read from ctx."""
    for argument in [*call.args, *(k.value for k in call.keywords)]:
        for node in ast.walk(argument):
            if isinstance(node, ast.Name) and node.id in tensors:
                return True
    return False


OPAQUE_DEPTH = 3        # how deep calls into functions of the linted tree are searched for kernels


def _is_opaque(call: ast.Call, imports: ImportTable, module: ModuleScope, depth: int,
               path: str | None = None) -> bool:
    """``path``: the other file of the tree whose function body ``call`` is in (None: this one)."""
    func = call.func
    if isinstance(func, ast.Subscript):                              # triton: kernel[grid](...)
        return True
    if isinstance(func, ast.Attribute) and func.attr == "apply":     # another Function's apply
        receiver = (imports.qualify(func.value) or "").rpartition(".")[2]
        return receiver[:1].isupper()
    qualified = imports.qualify(func)
    if qualified is None:
        return False
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in module.extensions:
        return True                                                  # ``_C.backward(...)``: a loaded extension
    if qualified.startswith("torch.ops."):
        return not qualified.startswith(("torch.ops.aten.", "torch.ops.prims."))
    head = func
    while isinstance(head, ast.Attribute):
        head = head.value
    imported = isinstance(head, ast.Name) and head.id in imports.names
    if imported and ("." not in qualified or (qualified + ".").startswith(DIFFERENTIABLE_MODULES)):
        return False
    if imported and depth > 0 and qualified.startswith("numpy."):
        return False            # a helper's numpy: indices and sizes (backward's own is checked above)
    tree = current_tree()
    if path is not None and "." not in qualified and tree is not None:
        qualified = f"{tree.module_name(path)}.{qualified}"          # a function of that other file
    source = module.function(qualified)
    if source is None:
        return imported         # another library's function (an extension, a kernel wrapper)
    return depth < OPAQUE_DEPTH and any(isinstance(n, ast.Call) and _is_opaque(n, source.imports, module, depth + 1, source.path or path)
               for n in ast.walk(source.definition))


def _analyse_keeper(function: ast.FunctionDef, imports: ImportTable, module: ModuleScope,
                    slots: tuple[frozenset[int], frozenset[int]] | None,
                    forward: ast.FunctionDef | None, assumptions: dict[str, bool] | None = None) -> ForwardAnalysis:
    """Run the forward analysis; ``forward`` is given for setup_context (it names the inputs);
    ``assumptions``: names whose tests the run takes as true or false."""
    analysis = ForwardAnalysis(imports, _tensor_names(function, imports), module.function, module.globals)
    analysis.assumptions = assumptions or {}
    env: Env = {}
    positional = _positional(function)
    if _is_classmethod(function) and [*function.args.posonlyargs, *function.args.args]:
        env[[*function.args.posonlyargs, *function.args.args][0].arg] = CLASS

    def input_value(index: int, name: str) -> Values:
        """An input of forward: a tensor when backward gives it a gradient, a constant when never."""
        if slots is not None and index in slots[0]:
            return frozenset({Value(Role.CONSTANT)})          # no gradient flows through it
        return analysis.bound(name, frozenset({Value(Role.INPUT, name=name,
                                                     tensor=slots is not None and index in slots[1])}), env)

    if forward is not None:                           # setup_context(ctx, inputs, output)
        names = [arg.arg for arg in positional]
        if len(names) >= 3:
            analysis.input_containers.add(names[1])
            env[names[0]] = CTX
            inputs = [*forward.args.posonlyargs, *forward.args.args]
            if forward.args.vararg is None and not _is_classmethod(forward):
                env[names[1]] = sequence([input_value(i, a.arg) for i, a in enumerate(inputs)])
            else:
                env[names[1]] = frozenset({Value(Role.INPUT, name=names[1], star=True)})
            env[names[2]] = frozenset({Value(Role.OUTPUT, star=True)})
            outputs = _forward_outputs(forward, imports, module, input_value)
            if outputs is not None:                   # what forward returns, output by output
                env[names[2]] = union(outputs.returns)
                analysis.returned_values |= outputs.returned_values
                analysis.recorded |= outputs.recorded
                analysis.tainted |= outputs.tainted
                analysis.callees.update(outputs.callees)
    elif positional:                                  # forward(ctx, *inputs)
        env[positional[0].arg] = CTX
        for index, arg in enumerate(positional[1:]):
            env[arg.arg] = input_value(index, arg.arg)
        for arg in function.args.kwonlyargs:
            env[arg.arg] = analysis.bound(arg.arg, frozenset({Value(Role.INPUT, name=arg.arg)}), env)
    for star in (function.args.vararg, function.args.kwarg):
        if star is not None:
            analysis.input_containers.add(star.arg)
            env[star.arg] = frozenset({Value(Role.INPUT, name=star.arg, star=True)})
    analysis.run(function.body, env)
    return analysis


def _path_hazards(analysis: ForwardAnalysis, keeper: ast.FunctionDef, imports: ImportTable,
                  module: ModuleScope, slots: tuple[frozenset[int], frozenset[int]] | None,
                  forward: ast.FunctionDef | None) -> list[Hazard]:
    """The hazards of ``analysis``; when the keeper tests a name several times
    (:func:`~transpiler.lint.ctx.forward.correlated_conditions`), those of a run per truth value
    of each such name instead, the same place said once."""
    names = correlated_conditions(keeper)
    if not names:
        return analysis.hazards()
    found: dict[tuple[int, str], Hazard] = {}
    for name in names:
        for truth in (True, False):
            run = _analyse_keeper(keeper, imports, module, slots, forward, {name: truth})
            for hazard in run.hazards():
                found.setdefault((id(hazard.node), hazard.code), hazard)
    return list(found.values())


def _forward_outputs(forward: ast.FunctionDef, imports: ImportTable, module: ModuleScope,
                     input_value: Callable[[int, str], Values]) -> ForwardAnalysis | None:
    """The analysis of a ``forward(*inputs)`` whose ctx work is in setup_context: what it returns,
    output by output (setup_context's ``output``); None when a return gives nothing it can tell."""
    analysis = ForwardAnalysis(imports, _tensor_names(forward, imports), module.function, module.globals)
    analysis.returns = []
    env: Env = {arg.arg: input_value(index, arg.arg) for index, arg in enumerate(_positional(forward))}
    for star in (forward.args.vararg, forward.args.kwarg):
        if star is not None:
            env[star.arg] = frozenset({Value(Role.INPUT, name=star.arg, star=True)})
    analysis.run(forward.body, env)
    if not analysis.returns or any(v.kind is Role.SEQUENCE and not v.exact for v in union(analysis.returns)):
        return None                                   # outputs not told apart (``return tuple(outs)``)
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
                mutation.node.lineno, mutation.node.col_offset, codes.IN_PLACE.code,
                f"backward modifies a saved tensor in place ({mutation.description}): a second "
                "backward or double backward then reads the modified values; use the out-of-place "
                "operation on a copy instead"))
    for statement in nonlocal_statements(backward):
        keyword = "global" if isinstance(statement, ast.Global) else "nonlocal"
        findings.append(Finding(
            statement.lineno, statement.col_offset, codes.NONLOCAL.code,
            f"`{keyword} {', '.join(statement.names)}` inside backward: backward must depend only "
            "on its gradients and what ctx saved; keep the value on ctx instead"))
    return findings


def _positional(function: ast.FunctionDef) -> list[ast.arg]:
    """Positional parameters, without ``cls`` of a classmethod (or of a ``forward(cls, ctx, ...)``
    staticmethod that a subclass calls with its class)."""
    positional = [*function.args.posonlyargs, *function.args.args]
    leading_class = len(positional) >= 2 and positional[0].arg in ("cls", "klass")
    return positional[1:] if _is_classmethod(function) or leading_class else positional


def _is_classmethod(function: ast.FunctionDef) -> bool:
    return any(isinstance(d, (ast.Name, ast.Attribute)) and ast.unparse(d).rpartition(".")[2] == "classmethod"
               for d in function.decorator_list)


def _attributes_read(cls: ast.ClassDef, exclude: tuple[str, ...]) -> set[str]:
    """Attribute names loaded anywhere in the class outside the ``exclude`` methods."""
    read: set[str] = set()
    for statement in cls.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name in exclude:
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                read.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                read.add(global_key(node.id))
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
