"""What ``forward`` (or ``setup_context``) keeps on ctx: DB100 and DB101.

The interpreter follows every value from the inputs to ``ctx.save_for_backward``
and ``ctx.<attr> = ...``. A kept tensor that was computed in the forward from
input values (``Kind.TENSOR``) and is not what the forward returns is an
intermediate: backward's use of it has no path to the inputs, so double
backward through it is silently wrong (DB100; DB101 when the intermediate hides
behind an input's name, ``x = x.contiguous()``). Anything undecidable is
``UNKNOWN`` and stays silent.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

from transpiler.lint.ctx.interpreter import Env, Interpreter
from transpiler.lint.ctx.names import ImportTable
from transpiler.lint.ctx.values import (
    ALWAYS_TUPLE,
    CTX,
    FACTORIES,
    INDEX_RETURNING,
    INTEGER_DTYPES,
    MIXED_OUTPUTS,
    NON_DIFFERENTIABLE,
    OVERWRITING_METHODS,
    PLAIN,
    PLAIN_ATTRIBUTES,
    PLAIN_METHODS,
    PLAIN_TORCH_FUNCTIONS,
    PLAIN_TORCH_PREFIXES,
    TENSOR_METHODS,
    TENSOR_NAMESPACES,
    UNKNOWN,
    VIEW_METHODS,
    Kind,
    Value,
    Values,
    element_of,
    flatten,
    is_tensor,
    sequence,
    union,
)

PLAIN_BUILTINS = frozenset({
    "len", "int", "float", "bool", "str", "isinstance", "issubclass", "hasattr", "range", "type",
    "id", "hash", "repr", "callable", "all", "any", "print", "format", "divmod", "complex", "iter",
    "setattr", "delattr", "vars", "dir", "object", "slice", "frozenset", "set", "dict",
})
ARITHMETIC_BUILTINS = frozenset({"abs", "sum", "max", "min", "round", "pow"})
SEQUENCE_BUILTINS = frozenset({"list", "tuple", "sorted", "reversed"})


@dataclass
class Kept:
    """A place where the forward keeps values on ctx, with what may reach it (over every path)."""

    node: ast.AST                     # the save_for_backward call or the ctx.<attr> target
    attribute: str | None             # None for save_for_backward
    values: dict[tuple[int, int], tuple[ast.expr, Values]] = field(default_factory=dict)

    @property
    def arguments(self) -> list[tuple[ast.expr, Values]]:
        """(expression, what it may hold) per kept expression, in source order."""
        return [self.values[key] for key in sorted(self.values)]

    def add(self, expression: ast.expr, values: Values) -> None:
        key = (expression.lineno, expression.col_offset)
        previous = self.values.get(key, (expression, frozenset()))[1]
        self.values[key] = (expression, previous | values)


@dataclass(frozen=True)
class Hazard:
    """A kept intermediate: the finding at ``node`` (the save call or the ctx attribute)."""

    code: str                         # DB100 or DB101
    node: ast.AST
    message: str


class ForwardAnalysis(Interpreter):
    """Abstract interpretation of one forward/setup_context body."""

    def __init__(self, imports: ImportTable, tensor_names: frozenset[str]) -> None:
        self.imports = imports
        self.tensor_names = tensor_names
        self.kept: dict[tuple[int, int, str | None], Kept] = {}
        self.returned_values: set[Value] = set()
        self.input_names: set[str] = set()          # parameters, and names unpacked from *args/inputs
        self.input_containers: set[str] = set()     # the *args / **kwargs / setup_context ``inputs``
        self.tainted: set[tuple[int, int]] = set()  # constant tensors later written with gradient data

    # --- what forward keeps and returns ------------------------------------------------------

    def keep(self, node: ast.AST, attribute: str | None, arguments: list[tuple[ast.expr, Values]]) -> None:
        key = (node.lineno, node.col_offset, attribute)
        kept = self.kept.setdefault(key, Kept(node, attribute))
        for expression, values in arguments:
            kept.add(expression, values)

    def store_attribute(self, target: ast.Attribute, values: Values, env: Env,
                        source: ast.expr | None) -> None:
        if self.evaluate(target.value, env) == CTX:
            self.keep(target, target.attr, [(source if source is not None else target, values)])
            env[_ctx_key(target.attr)] = values     # forward may read it back (``ctx.buf.add_(...)``)

    def store_subscript(self, target: ast.Subscript, values: Values, env: Env) -> None:
        """``buf[i] = t``: ``buf`` (a tensor or a list) now holds what ``t`` holds."""
        self.evaluate(target.slice, env)
        if isinstance(target.value, ast.Name) and target.value.id in env:
            container = env[target.value.id]
            grown = {self.absorb(v, values) for v in container}
            env[target.value.id] = frozenset(grown)

    def absorb(self, holder: Value, values: Values) -> Value:
        """``holder`` after ``values`` were written into it (in place)."""
        if holder.kind is Kind.SEQUENCE:
            return Value(Kind.SEQUENCE, elements=(*holder.elements, values), exact=False)
        if holder.kind is Kind.CONSTANT and self.carries_gradient(values):
            if holder.site is not None:
                self.tainted.add(holder.site)           # every alias of this storage now carries it
            return Value(Kind.TENSOR, site=holder.site, view=holder.view)
        return holder

    def carries_gradient(self, values: Values) -> bool:
        """Whether any of ``values`` is a tensor with a path to the inputs."""
        return any((is_tensor(v) and v.kind is not Kind.CONSTANT) or v.site in self.tainted
                   for v in flatten(values))

    def augment(self, node: ast.AugAssign, env: Env) -> None:
        """``t += u`` on a tensor is in place: ``t`` keeps its identity (and may gain a gradient)."""
        target = node.target
        if isinstance(target, ast.Name) and target.id in env and \
                any(v.kind in (Kind.TENSOR, Kind.CONSTANT) for v in env[target.id]):
            added = self.evaluate(node.value, env)
            env[target.id] = frozenset(self.absorb(v, added) for v in env[target.id])
        else:
            super().augment(node, env)

    def returned(self, node: ast.Return, env: Env) -> None:
        if node.value is not None:
            self.returned_values |= flatten(self.output_values(node.value, env))

    def output_values(self, node: ast.expr, env: Env) -> Values:
        """What ``return node`` hands out, including through wrappers the analysis cannot see."""
        if isinstance(node, (ast.Tuple, ast.List)):
            return union(self.output_values(e, env) for e in node.elts)
        if isinstance(node, ast.Starred):
            return self.output_values(node.value, env)
        if isinstance(node, ast.IfExp):
            return self.output_values(node.body, env) | self.output_values(node.orelse, env)
        values = self.evaluate(node, env)
        if isinstance(node, ast.Call) and values == UNKNOWN:
            arguments = [*node.args, *(k.value for k in node.keywords)]
            return values | union(self.output_values(a, env) for a in arguments)
        return values

    def bound(self, name: str, values: Values, env: Env) -> Values:
        if values and all(v.kind is Kind.INPUT and not v.star for v in values):
            if all(v.name == name or v.name in self.input_containers for v in values):
                self.input_names.add(name)
            if name in self.tensor_names:
                return frozenset(Value(Kind.INPUT, name=v.name, tensor=True) for v in values)
        return values

    # --- findings ----------------------------------------------------------------------------

    def hazards(self) -> list[Hazard]:
        """Kept tensors that are intermediates: neither an input nor a returned output."""
        outputs = {v.site for v in self.returned_values if v.site is not None and not v.view}
        found: list[Hazard] = []
        for kept in self.kept.values():
            by_code: dict[str, list[str]] = {}
            for expression, values in kept.arguments:
                # save_for_backward takes tensors only: there a value that may be a number is a tensor
                saved = _inputs_as_tensors(flatten(values)) if kept.attribute is None else flatten(values)
                intermediates = [v for v in saved if (v.site not in outputs or v.view) and (
                    (v.kind is Kind.TENSOR and not v.maybe) or (v.kind is Kind.CONSTANT and v.site in self.tainted))]
                if not intermediates:
                    continue
                text = ast.unparse(expression)
                rebound = isinstance(expression, ast.Name) and expression.id in self.input_names
                by_code.setdefault("DB101" if rebound else "DB100", []).append(
                    f"`{text}` ({_origin(intermediates)})")
            for code, names in by_code.items():
                found.append(Hazard(code, kept.node, _message(code, kept, names)))
        return found

    # --- expressions -------------------------------------------------------------------------

    def evaluate(self, node: ast.expr, env: Env) -> Values:
        if isinstance(node, ast.Constant):
            return PLAIN
        if isinstance(node, ast.Name):
            return env.get(node.id, UNKNOWN)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return self.literal(node.elts, env)
        if isinstance(node, ast.Dict):
            for key in node.keys:
                if key is not None:
                    self.evaluate(key, env)
            return sequence([union(self.evaluate(v, env) for v in node.values)], exact=False)
        if isinstance(node, ast.BinOp):
            left, right = self.evaluate(node.left, env), self.evaluate(node.right, env)
            if isinstance(node.op, ast.Add) and _all_sequences(left) and _all_sequences(right):
                return sequence([element_of(left), element_of(right)], exact=False)
            if isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift)):
                return self.nondifferentiable(node, [left, right])
            return self.arithmetic(node, [left, right])
        if isinstance(node, ast.UnaryOp):
            operand = self.evaluate(node.operand, env)
            if isinstance(node.op, ast.Not):
                return PLAIN
            if isinstance(node.op, ast.Invert):
                return self.nondifferentiable(node, [operand])
            return self.arithmetic(node, [operand])
        if isinstance(node, ast.BoolOp):
            return union(self.evaluate(v, env) for v in node.values)
        if isinstance(node, ast.Compare):
            operands = [self.evaluate(node.left, env), *(self.evaluate(c, env) for c in node.comparators)]
            if all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
                return PLAIN                                  # identity and membership: a Python bool
            return self.nondifferentiable(node, operands)
        if isinstance(node, ast.IfExp):
            self.evaluate(node.test, env)
            return self.evaluate(node.body, env) | self.evaluate(node.orelse, env)
        if isinstance(node, ast.Call):
            return self.call(node, env)
        if isinstance(node, ast.Attribute):
            return self.attribute(node, env)
        if isinstance(node, ast.Subscript):
            return self.subscript(node, env)
        if isinstance(node, ast.Starred):
            return self.evaluate(node.value, env)
        if isinstance(node, ast.NamedExpr):
            values = self.evaluate(node.value, env)
            self.bind(node.target, values, env)
            return values
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return self.comprehension(node, env)
        if isinstance(node, (ast.Lambda, ast.JoinedStr, ast.Slice)):
            return PLAIN
        return UNKNOWN

    def literal(self, elements: list[ast.expr], env: Env) -> Values:
        items: list[Values] = []
        exact = True
        for element in elements:
            if isinstance(element, ast.Starred):
                exact = False
                items.append(element_of(self.evaluate(element.value, env)))
            else:
                items.append(self.evaluate(element, env))
        return sequence(items, exact=exact)

    def comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
                      env: Env) -> Values:
        scope = dict(env)
        for generator in node.generators:
            self.bind(generator.target, element_of(self.evaluate(generator.iter, scope)), scope)
            for condition in generator.ifs:
                self.evaluate(condition, scope)
        element = self.evaluate(node.value if isinstance(node, ast.DictComp) else node.elt, scope)
        return sequence([element], exact=False)

    def attribute(self, node: ast.Attribute, env: Env) -> Values:
        base = self.evaluate(node.value, env)
        if node.attr in PLAIN_ATTRIBUTES:
            return PLAIN
        if base == CTX:
            return env.get(_ctx_key(node.attr), UNKNOWN)
        if node.attr in ("values", "indices") and any(v.kind is Kind.SEQUENCE for v in base):
            return element_of(base, 0 if node.attr == "values" else 1)
        if node.attr in ("T", "mT", "H", "mH", "real", "imag", "data", "grad"):
            return self.derived(node, base)
        return UNKNOWN

    def subscript(self, node: ast.Subscript, env: Env) -> Values:
        base = self.evaluate(node.value, env)
        self.evaluate(node.slice, env)
        index = node.slice.value if isinstance(node.slice, ast.Constant) else None
        result: set[Value] = set()
        for value in base:
            if value.kind is Kind.SEQUENCE or value.star or value.kind is Kind.PLAIN:
                result |= element_of(frozenset({value}), index if isinstance(index, int) else None)
            else:
                result |= self.derived(node, frozenset({value}))
        return frozenset(result)

    # --- value arithmetic --------------------------------------------------------------------

    def derived(self, node: ast.AST, operands: Values) -> Values:
        """A tensor computed from ``operands`` (a view, an elementwise op...)."""
        return self.arithmetic(node, [operands])

    def arithmetic(self, node: ast.AST, operands: list[Values]) -> Values:
        """Arithmetic on tensors is a tensor; a gradient flows if any operand carries one."""
        values = flatten(union(operands))
        site = (node.lineno, node.col_offset)
        if any(is_tensor(v) and v.kind is not Kind.CONSTANT for v in values):
            return frozenset({Value(Kind.TENSOR, site=site)})
        if any(v.kind in (Kind.UNKNOWN, Kind.CTX) for v in values):
            return UNKNOWN
        if any(v.kind is Kind.INPUT or v.maybe for v in values):
            if any(v.kind is Kind.CONSTANT for v in values):
                return UNKNOWN                      # ``mask / p``: a tensor even when p is a number
            # ``x * 2`` on inputs of unknown type: a tensor computed from them, or a number
            return frozenset({Value(Kind.TENSOR, site=site, maybe=True)})
        if any(v.kind is Kind.CONSTANT for v in values):
            return frozenset({Value(Kind.CONSTANT, site=site)})
        return PLAIN

    def nondifferentiable(self, node: ast.AST, operands: list[Values]) -> Values:
        """Comparisons, masks, bitwise ops: a tensor without gradient, or Python data."""
        values = flatten(union(operands))
        if any(is_tensor(v) or v.kind is Kind.INPUT for v in values):
            return frozenset({Value(Kind.CONSTANT, site=(node.lineno, node.col_offset))})
        return PLAIN if all(v.kind is Kind.PLAIN for v in values) else UNKNOWN

    def constant(self, node: ast.AST) -> Values:
        return frozenset({Value(Kind.CONSTANT, site=(node.lineno, node.col_offset))})

    # --- calls -------------------------------------------------------------------------------

    def call(self, node: ast.Call, env: Env) -> Values:
        func = node.func
        receiver = self.evaluate(func.value, env) if isinstance(func, ast.Attribute) else None
        arguments = [self.evaluate(a, env) for a in node.args]
        keywords = {k.arg: self.evaluate(k.value, env) for k in node.keywords}
        if receiver == CTX:
            return self.ctx_call(node, func.attr, arguments)
        qualified = self.qualified(func, env)
        if qualified is not None:
            namespace = qualified.rpartition(".")[0]
            if namespace in TENSOR_NAMESPACES or qualified.startswith("torch.ops."):
                result = self.torch_call(node, _op_name(qualified), arguments, keywords)
                return self.write_out(node, result, env)
            return UNKNOWN if namespace else self.builtin_call(node, qualified, arguments, keywords)
        if isinstance(func, ast.Attribute) and receiver is not None:
            return self.method_call(node, func, receiver, arguments, keywords, env)
        return UNKNOWN

    def qualified(self, func: ast.expr, env: Env) -> str | None:
        """The import-resolved name of a called function, unless its head is a local variable."""
        head = func
        while isinstance(head, ast.Attribute):
            head = head.value
        if not isinstance(head, ast.Name) or head.id in env:
            return None
        return self.imports.qualify(func)

    def ctx_call(self, node: ast.Call, method: str, arguments: list[Values]) -> Values:
        if method == "save_for_backward":
            kept = []
            for expression, values in zip(node.args, arguments):
                if isinstance(expression, ast.Starred):
                    values = element_of(values)
                kept.append((expression, values))
            self.keep(node, None, kept)
            return PLAIN
        return UNKNOWN

    def builtin_call(self, node: ast.Call, name: str, arguments: list[Values],
                     keywords: dict[str | None, Values]) -> Values:
        if name in PLAIN_BUILTINS:
            return PLAIN
        if name in ARITHMETIC_BUILTINS:
            return self.arithmetic(node, [element_of(a) if len(arguments) == 1 and name != "abs" else a
                                          for a in arguments])
        if name in SEQUENCE_BUILTINS and arguments:
            return sequence([element_of(arguments[0])], exact=False)
        if name == "enumerate" and arguments:
            return sequence([sequence([PLAIN, element_of(arguments[0])])], exact=False)
        if name == "zip":
            return sequence([sequence([element_of(a) for a in arguments])], exact=False)
        return UNKNOWN

    def write_out(self, node: ast.Call, result: Values, env: Env) -> Values:
        """``torch.op(..., out=buf)`` writes the result into ``buf``, which is what it returns."""
        out = next((k.value for k in node.keywords if k.arg == "out"), None)
        if isinstance(out, ast.Name) and out.id in env:
            env[out.id] = frozenset(self.absorb(v, result) for v in env[out.id])
            return env[out.id]
        return result

    def torch_call(self, node: ast.Call, name: str, arguments: list[Values],
                   keywords: dict[str | None, Values]) -> Values:
        if name in PLAIN_TORCH_FUNCTIONS or name.startswith(PLAIN_TORCH_PREFIXES):
            return PLAIN if not name.startswith("_") else UNKNOWN
        if name[:1].isupper():
            return self.constant(node) if name.endswith("Tensor") else UNKNOWN
        if name in FACTORIES or name in NON_DIFFERENTIABLE or (name == "where" and len(node.args) == 1):
            return self.constant(node)
        operands = [*arguments, *keywords.values()]
        if name in MIXED_OUTPUTS or (name in INDEX_RETURNING and self.returns_indices(name, node, arguments)):
            return self.mixed(node, name, operands)
        result = self.arithmetic(node, [_inputs_as_tensors(o) for o in operands])
        return result if any(v.kind is not Kind.PLAIN for v in result) else self.constant(node)

    def returns_indices(self, name: str, node: ast.Call, arguments: list[Values]) -> bool:
        """``torch.max(x, 1)`` returns (values, indices); ``torch.max(x, y)`` does not."""
        if name in ALWAYS_TUPLE or any(k.arg == "dim" for k in node.keywords):
            return True
        return len(arguments) >= 2 and arguments[1] == PLAIN

    def mixed(self, node: ast.Call, name: str, operands: list[Values]) -> Values:
        differentiable = self.arithmetic(node, [_inputs_as_tensors(o) for o in operands])
        pattern = MIXED_OUTPUTS.get(name, (True, False))
        return sequence([differentiable if d else self.constant(node) for d in pattern])

    def method_call(self, node: ast.Call, func: ast.Attribute, receiver: Values, arguments: list[Values],
                    keywords: dict[str | None, Values], env: Env) -> Values:
        method = func.attr
        if method in PLAIN_METHODS and not (method == "type" and node.args):
            return PLAIN
        if method.startswith(("is_", "has_")):
            return PLAIN
        if method in ("append", "extend", "insert") and isinstance(func.value, ast.Name):
            if not arguments:
                added = PLAIN
            else:
                added = element_of(arguments[0]) if method == "extend" else arguments[-1]
            self.store_into(func.value.id, added, env)
            return PLAIN
        values = flatten(receiver)
        tensor_receiver = any(is_tensor(v) for v in values) or (
            method in TENSOR_METHODS and any((v.kind is Kind.INPUT and not v.star) or v.maybe for v in values))
        if not tensor_receiver:
            return UNKNOWN
        receiver = _inputs_as_tensors(receiver)
        if method.endswith("_") and not method.endswith("__"):
            return self.in_place(node, func, method, receiver, arguments, env)
        if method in VIEW_METHODS:
            return self.view(node, flatten(receiver))
        if method in FACTORIES or method in NON_DIFFERENTIABLE:
            return self.constant(node)
        if method in ("to", "type") and self.casts_to_integer(node):
            return self.constant(node)
        if method in MIXED_OUTPUTS or (method in INDEX_RETURNING and self.returns_indices(method, node, [receiver, *arguments])):
            return self.mixed(node, method, [receiver, *arguments])
        return self.arithmetic(node, [receiver, *(_inputs_as_tensors(a) for a in arguments),
                                      *keywords.values()])

    def view(self, node: ast.Call, receiver: Values) -> Values:
        """``t.select(...)``: a forward tensor's view shares its storage (in-place writes reach it)."""
        result: set[Value] = set()
        for value in receiver:
            if value.kind in (Kind.TENSOR, Kind.CONSTANT):
                result.add(replace(value, view=True))
            elif value.kind is not Kind.PLAIN:           # None and friends have no views
                result |= self.derived(node, frozenset({value}))
        return frozenset(result) or UNKNOWN

    def in_place(self, node: ast.Call, func: ast.Attribute, method: str, receiver: Values,
                 arguments: list[Values], env: Env) -> Values:
        """``t.add_(u)``: ``t`` keeps its identity; what it holds may change."""
        if method in OVERWRITING_METHODS or (method == "copy_" and arguments and not self.carries_gradient(arguments[0])):
            updated = frozenset(replace(v, kind=Kind.CONSTANT) if v.kind is Kind.TENSOR else v for v in receiver)
        else:
            updated = frozenset(self.absorb(v, union(arguments)) for v in receiver)
        if isinstance(func.value, ast.Name) and func.value.id in env:
            env[func.value.id] = updated
        return updated

    def casts_to_integer(self, node: ast.Call) -> bool:
        for argument in [*node.args, *(k.value for k in node.keywords)]:
            name = self.imports.qualify(argument)
            if name is not None and name.rpartition(".")[2] in INTEGER_DTYPES:
                return True
        return False

    def store_into(self, name: str, values: Values, env: Env) -> None:
        if name in env:
            env[name] = frozenset(self.absorb(v, values) for v in env[name])


def _origin(intermediates: list[Value]) -> str:
    """Where the first of ``intermediates`` came from, for the message."""
    first = min(intermediates, key=lambda v: v.site or (0, 0))
    line = first.site[0] if first.site else "?"
    if first.kind is Kind.CONSTANT:
        return f"created at line {line}, then written in place with values computed from the inputs"
    return f"computed at line {line}"


def _ctx_key(attribute: str) -> str:
    """Where the environment keeps ``ctx.<attribute>`` (not a valid Python name: no clash)."""
    return f"ctx.{attribute}"


def _op_name(qualified: str) -> str:
    """``torch.exp`` -> ``exp``; ``torch.ops.aten.mm.default`` -> ``mm``."""
    parts = qualified.split(".")
    if qualified.startswith("torch.ops.") and len(parts) >= 4:
        return parts[3]
    return parts[-1]


def _inputs_as_tensors(values: Values) -> Values:
    """An input (or a value computed from inputs) passed to a tensor operation is a tensor."""
    return frozenset(Value(Kind.INPUT, name=v.name, tensor=True) if v.kind is Kind.INPUT and not v.star
                     else replace(v, maybe=False) if v.maybe else v
                     for v in values)


def _all_sequences(values: Values) -> bool:
    return bool(values) and all(v.kind is Kind.SEQUENCE for v in values)


def _message(code: str, kept: Kept, names: list[str]) -> str:
    where = "ctx.save_for_backward" if kept.attribute is None else f"ctx.{kept.attribute} ="
    what = f"{where} keeps {', '.join(names)}"
    if code == "DB101":
        return (f"{what}: an input name that forward rebinds to a computed tensor, so backward "
                "sees an intermediate with no path to the input and double backward is silently "
                "wrong; save the original input and recompute in backward, or mark backward "
                "@once_differentiable")
    return (f"{what}, neither an input nor an output of forward: double backward through it is "
            "silently wrong; save inputs/outputs and recompute it in backward, return it as an "
            "output, or mark backward @once_differentiable")
