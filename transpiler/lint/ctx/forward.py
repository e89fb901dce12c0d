"""What ``forward`` (or ``setup_context``) keeps on ctx: DB100 and DB101.

The interpreter follows every value from the inputs to ``ctx.save_for_backward``
and ``ctx.<attr> = ...``. A kept tensor that was computed in the forward from
input values (``Role.TENSOR``) and is not what the forward returns is an
intermediate: backward's use of it has no path to the inputs, so double
backward through it is silently wrong (DB100; DB101 when the intermediate hides
behind an input's name, ``x = x.contiguous()``). Anything undecidable is
``UNKNOWN`` and stays silent.

What it follows: functions of the module and of the linted tree, lambdas and
defs of the forward, callables passed in and other libraries' functions (given
tensors with a gradient path, they return values computed from them), kernel
launches filling allocated buffers (``kernel[grid](...)``, or a compiled kernel
held in a variable), bare names called in a followed function of another file
(that file's own functions), and every way of keeping a value (ctx
attributes and ``setattr``, ``ctx.__dict__``, lists on ctx, closures and
``functools.partial``, globals and class attributes). What is not an
intermediate: inputs backward never gives a gradient (and what only they
compute), outputs identified with their view site, values recorded under
``torch.enable_grad()``, a value bound to a random generator's state
(``rng_state``, ``seed``, ``philox_offset``: integer by the dropout kernels'
convention); outputs passed to ``ctx.mark_non_differentiable``
are not outputs.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from transpiler import codes
from transpiler.lint.ctx.interpreter import Env, Interpreter
from transpiler.lint.ctx.names import ImportTable
from transpiler.lint.ctx.tree import current_tree
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
    Role,
    Site,
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
    where: str | None = None          # how the message names the place (default: from ``attribute``)

    @property
    def arguments(self) -> list[tuple[ast.expr, Values]]:
        """(expression, what it may hold) per kept expression, in source order."""
        return [self.values[key] for key in sorted(self.values)]

    def add(self, expression: ast.expr, values: Values) -> None:
        """Add ``values`` to what may reach the kept place through ``expression``."""
        key = (expression.lineno, expression.col_offset)
        previous = self.values.get(key, (expression, frozenset()))[1]
        self.values[key] = (expression, previous | values)


@dataclass(frozen=True)
class Hazard:
    """A kept intermediate: the finding at ``node`` (the save call or the ctx attribute)."""

    code: str                         # DB100 or DB101
    node: ast.AST
    message: str
    attribute: str | None             # the ctx attribute (or global) backward must read; None: always
    sites: frozenset[Site]            # where the kept intermediates were computed (the root causes)
    element: ast.expr | None = None   # the offending element when the save holds several


@dataclass
class _Frame:
    """A call into a function of the linted tree that the analysis follows."""

    source: "FunctionSource"
    call: ast.Call                    # the call (in the caller's file)
    returns: list[Values] = field(default_factory=list)
    globals: set[str] = field(default_factory=set)


MAX_CALL_DEPTH = 4
MAX_CORRELATED = 2               # names whose tests the analysis splits paths on (two runs each)
# a random generator's state (dropout kernels return seed and offset as integers, by convention)
RNG_STATE_NAME = re.compile(r"(?:\w+_)?(?:rng_state|rng_seed|rng_offset|seeds?|philox_seed|philox_offset)\Z")
# Modules of Python itself, numpy, triton helpers and torch: their functions are not extension kernels.
PYTHON_MODULES = ("math.", "operator.", "functools.", "itertools.", "typing.", "warnings.", "logging.", "os.",
                  "sys.", "contextlib.", "collections.", "dataclasses.", "copy.", "numbers.", "builtins.",
                  "inspect.", "enum.", "abc.", "re.", "types.", "numpy.", "triton.", "torch.")
BUFFER_FACTORIES = frozenset({"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided",
                              "zeros", "zeros_like", "new_zeros"})
CLASS: Values = frozenset({Value(Role.PLAIN, name="<class>")})         # ``cls`` of a classmethod
SAVE_FOR_BACKWARD: Values = frozenset({Value(Role.CTX, name="save_for_backward")})
PARTIAL = frozenset({"functools.partial", "functools.partialmethod"})
# Transforms whose result, called, gives gradients of the function at the arguments.
FUNCTIONAL_GRADIENTS = frozenset({f"{module}.{name}" for module in ("torch.func", "functorch")
                                  for name in ("grad", "grad_and_value", "vjp", "jacrev", "jacfwd", "hessian")})
# Gradients computed in forward (``torch.autograd.grad(loss, inputs)``): tensors computed from the
# inputs, without a graph of their own unless ``create_graph=True``.
GRADIENT_FUNCTIONS = frozenset({"torch.autograd.grad", "torch.autograd.functional.vjp",
                                "torch.autograd.functional.jacobian", "torch.autograd.functional.hessian"})


@dataclass(frozen=True)
class FunctionSource:
    """A function of the linted tree that a forward may call: its definition and where it lives."""

    definition: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    imports: ImportTable
    path: str | None                  # None: the analysed file itself


class ForwardAnalysis(Interpreter):
    """Abstract interpretation of one forward/setup_context body."""

    def __init__(self, imports: ImportTable, tensor_names: frozenset[str],
                 functions: Callable[[str], FunctionSource | None] = lambda name: None,
                 globals_: frozenset[str] = frozenset()) -> None:
        self.imports = imports
        self.tensor_names = tensor_names
        self.functions = functions                  # qualified name -> a function of the linted tree
        self.globals = globals_                     # module-level names (and classes) of this file
        self.kept: dict[tuple[int, int, str | None], Kept] = {}
        self.returned_values: set[Value] = set()
        self.assumptions: dict[str, bool] = {}       # names whose tests this run takes as given (one path)
        self.returns: list[Values] | None = None     # what each ``return`` gives, when asked for (setup_context)
        self.input_names: set[str] = set()          # parameters, and names unpacked from *args/inputs
        self.input_containers: set[str] = set()     # the *args / **kwargs / setup_context ``inputs``
        self.tainted: set[Site] = set()             # constant tensors later written with gradient data
        self.recorded: set[Site] = set()            # computed under ``torch.enable_grad()``: own graph
        self.marked_nondifferentiable: set[Site] = set()   # tensors passed to ``ctx.mark_non_differentiable``
        self.allocated: set[Site] = set()           # tensors forward allocates (buffers kernels fill)
        self.recording = 0                          # > 0 inside ``with torch.enable_grad():``
        self.frames: list[_Frame] = []              # functions of the tree being followed, innermost last
        self.own_globals: set[str] = set()          # names the forward declares ``global``
        self.local_functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda] = {}  # defined inside
        self.callees: dict[tuple[int, int], str] = {}   # (line, col) of each followed call in the body -> callee

    def site(self, node: ast.AST) -> Site:
        """Where ``node`` is: (line, col) in the analysed body; in a followed function, plus its
        file (None: this one) and the forward's call that reached it (one helper called twice
        computes two values)."""
        if self.frames:
            call = self.frames[0].call
            site = (node.lineno, node.col_offset, self.frames[-1].source.path, call.lineno, call.col_offset)
        else:
            site = (node.lineno, node.col_offset)
        if self.recording:
            self.recorded.add(site)
        return site

    def anchor(self, node: ast.AST) -> ast.AST:
        """Where a finding about ``node`` lands: in the Function, at the call of the followed function."""
        return self.frames[0].call if self.frames else node

    # --- what forward keeps and returns ------------------------------------------------------

    def keep(self, node: ast.AST, attribute: str | None, arguments: list[tuple[ast.expr, Values]],
             where: str | None = None) -> None:
        """``arguments`` kept at ``node`` (``where``: how the message names the place)."""
        node = self.anchor(node)
        key = (node.lineno, node.col_offset, attribute)
        kept = self.kept.setdefault(key, Kept(node, attribute, where=where))
        for expression, values in arguments:
            kept.add(expression, values)

    def store_attribute(self, target: ast.Attribute, values: Values, env: Env,
                        source: ast.expr | None) -> None:
        owner = self.evaluate(target.value, env)
        if owner == CTX:
            self.keep(target, target.attr, [(source if source is not None else target, values)])
            env[_ctx_key(target.attr)] = values     # forward may read it back (``ctx.buf.add_(...)``)
        elif owner == CLASS or (isinstance(target.value, ast.Name) and target.value.id not in env
                                and target.value.id in self.globals):
            # ``F.cache = y`` / ``cls.cache = y``: state shared with backward outside ctx
            self.keep(target, target.attr, [(source if source is not None else target, values)],
                      where=f"`{ast.unparse(target)} =` (state outside ctx)")

    def store_global(self, target: ast.Name, values: Values, source: ast.expr | None) -> None:
        """``global G; G = y``: a module global that backward may read."""
        self.keep(target, global_key(target.id), [(source if source is not None else target, values)],
                  where=f"global `{target.id} =`")

    def store_subscript(self, target: ast.Subscript, values: Values, env: Env,
                        source: ast.expr | None = None) -> None:
        """``buf[i] = t``: ``buf`` (a tensor or a list) now holds what ``t`` holds."""
        self.evaluate(target.slice, env)
        container = target.value
        kept = [(source if source is not None else target, values)]
        where = f"`{_text(target)} =`"
        if isinstance(container, ast.Attribute) and self.evaluate(container.value, env) == CTX:
            if container.attr == "__dict__" and isinstance(target.slice, ast.Constant) \
                    and isinstance(target.slice.value, str):
                self.keep(target, target.slice.value, kept, where)             # ``ctx.__dict__["y"] = y``
            else:
                self.keep(target, container.attr, kept, where)                 # ``ctx.ys[0] = y``
            return
        if isinstance(container, ast.Name) and container.id not in env and container.id in self.globals:
            self.keep(target, global_key(container.id), kept, f"{where} (a module global)")
            return
        if isinstance(target.value, ast.Name) and target.value.id in env:
            container = env[target.value.id]
            grown = {self.absorb(v, values) for v in container}
            env[target.value.id] = frozenset(grown)

    def absorb(self, holder: Value, values: Values) -> Value:
        """``holder`` after ``values`` were written into it (in place)."""
        if holder.kind is Role.SEQUENCE:
            return Value(Role.SEQUENCE, elements=(*holder.elements, values), exact=False)
        if holder.kind is Role.CONSTANT and holder.site is not None and self.carries_gradient(values):
            if holder.site is not None:
                self.tainted.add(holder.site)           # every alias of this storage now carries it
            return Value(Role.TENSOR, site=holder.site, view=holder.view)
        return holder

    def carries_gradient(self, values: Values) -> bool:
        """Whether any of ``values`` is a tensor with a path to the inputs."""
        return any((is_tensor(v) and v.kind is not Role.CONSTANT) or v.site in self.tainted
                   for v in flatten(values))

    def augment(self, node: ast.AugAssign, env: Env) -> None:
        """``t += u`` on a tensor is in place: ``t`` keeps its identity (and may gain a gradient)."""
        target = node.target
        if isinstance(target, ast.Name) and target.id in env and \
                any(v.kind in (Role.TENSOR, Role.CONSTANT) for v in env[target.id]):
            added = self.evaluate(node.value, env)
            env[target.id] = frozenset(self.absorb(v, added) for v in env[target.id])
        else:
            super().augment(node, env)

    def returned(self, node: ast.Return, env: Env) -> None:
        if self.frames:                             # a followed function returns to its caller
            frame = self.frames[-1]
            frame.returns.append(self.evaluate(node.value, env) if node.value is not None else PLAIN)
        elif node.value is not None:
            if self.returns is not None:
                self.returns.append(self.evaluate(node.value, env))
            self.returned_values |= flatten(self.output_values(node.value, env))

    def statement(self, node: ast.stmt, env: Env) -> Env | None:
        if isinstance(node, ast.Global):
            self.declared_globals().update(node.names)
            return env
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            env[node.name] = self.closure(node, env)    # what it reads from here travels with it
            self.local_functions[node.name] = node
            return env
        if isinstance(node, ast.If) and (truth := self.assumed(node.test)) is not None:
            self.evaluate(node.test, env)
            return self.block(node.body if truth else node.orelse, env)
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(self.enables_grad(i.context_expr) for i in node.items):
            self.recording += 1
            try:
                return super().statement(node, env)
            finally:
                self.recording -= 1
        return super().statement(node, env)

    def assumed(self, test: ast.expr) -> bool | None:
        """The truth of a test on a name this run assumes (:func:`correlated_conditions`), in the
        analysed body itself; None for any other test."""
        negated = False
        while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, not negated
        if self.frames or not isinstance(test, ast.Name) or test.id not in self.assumptions:
            return None
        return self.assumptions[test.id] != negated

    def enables_grad(self, expression: ast.expr) -> bool:
        """``torch.enable_grad()`` / ``torch.set_grad_enabled(True)``: forward records a graph of its own."""
        if not isinstance(expression, ast.Call):
            return False
        name = self.imports.qualify(expression.func) or ""
        if name.endswith(".enable_grad"):
            return True
        return name.endswith(".set_grad_enabled") and not (
            expression.args and isinstance(expression.args[0], ast.Constant) and not expression.args[0].value)

    def declared_globals(self) -> set[str]:
        """The names a ``global`` statement declares in the function being read."""
        return self.frames[-1].globals if self.frames else self.own_globals

    def bind(self, target: ast.expr, values: Values, env: Env, source: ast.expr | None = None) -> None:
        if isinstance(target, ast.Name) and RNG_STATE_NAME.match(target.id):
            values = frozenset(replace(v, kind=Role.CONSTANT) if v.kind is Role.TENSOR else v for v in values)
        if isinstance(target, ast.Name) and target.id in self.declared_globals() and not self.frames:
            self.store_global(target, values, source)
        if isinstance(target, ast.Name):
            compiled = self.compiled_function(source)
            if isinstance(source, ast.Lambda):
                self.local_functions[target.id] = source
            elif compiled is not None:                  # ``f = torch.compile(f)``: still f's body
                self.local_functions[target.id] = compiled
            else:
                self.local_functions.pop(target.id, None)
        super().bind(target, values, env, source)

    def compiled_function(self, source: ast.expr | None):
        """The function of the forward that ``torch.compile(f)`` (or ``torch.jit.script(f)``) wraps."""
        if isinstance(source, ast.Call) and source.args and isinstance(source.args[0], ast.Name) and \
                (self.imports.qualify(source.func) or "") in ("torch.compile", "torch.jit.script"):
            return self.local_functions.get(source.args[0].id)
        return None

    def closure(self, function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, env: Env) -> Values:
        """A function defined here holds what its defaults and body read from ``env``."""
        arguments = function.args
        read = [self.evaluate(d, env) for d in [*arguments.defaults, *(d for d in arguments.kw_defaults if d)]]
        own = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
        body = function.body if isinstance(function.body, list) else [function.body]
        for node in (n for statement in body for n in ast.walk(statement)):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in env \
                    and node.id not in own:
                read.append(env[node.id])
        held = [values for values in read if any(v.kind is not Role.PLAIN for v in flatten(values))]
        return sequence(held, exact=False) if held else PLAIN

    def output_values(self, node: ast.expr, env: Env) -> Values:
        """What ``return node`` hands out, including through wrappers the analysis cannot see."""
        if isinstance(node, (ast.Tuple, ast.List)):
            return union(self.output_values(e, env) for e in node.elts)
        if isinstance(node, ast.Starred):
            return self.output_values(node.value, env)
        if isinstance(node, ast.IfExp):
            truth = self.assumed(node.test)
            if truth is not None:
                return self.output_values(node.body if truth else node.orelse, env)
            return self.output_values(node.body, env) | self.output_values(node.orelse, env)
        values = self.evaluate(node, env)
        if isinstance(node, ast.Call) and values == UNKNOWN:
            arguments = [*node.args, *(k.value for k in node.keywords)]
            return values | union(self.output_values(a, env) for a in arguments)
        return values

    def bound(self, name: str, values: Values, env: Env) -> Values:
        if values and all(v.kind is Role.INPUT and not v.star for v in values):
            if not self.frames and all(v.name == name or v.name in self.input_containers for v in values):
                self.input_names.add(name)
            if name in self.tensor_names:
                return frozenset(Value(Role.INPUT, name=v.name, tensor=True) for v in values)
        return values

    # --- findings ----------------------------------------------------------------------------

    def hazards(self) -> list[Hazard]:
        """Kept tensors that are intermediates: neither an input nor a returned output."""
        outputs = {(v.site, v.view_site) for v in self.returned_values
                   if v.site is not None and v.site not in self.marked_nondifferentiable}
        found: list[Hazard] = []
        for kept in self.kept.values():
            by_code: dict[str, list[str]] = {}
            sites: dict[str, set[Site]] = {}
            elements: dict[str, ast.expr] = {}
            for expression, values in kept.arguments:
                for element, held in _elements(expression, values):
                    intermediates = self.intermediates(held, outputs, tensors_only=kept.attribute is None)
                    if not intermediates:
                        continue
                    rebound = isinstance(element, ast.Name) and element.id in self.input_names
                    code = codes.REBOUND_INPUT.code if rebound else codes.KEPT_INTERMEDIATE.code
                    by_code.setdefault(code, []).append(f"`{_text(element)}` ({self.origin(intermediates)})")
                    sites.setdefault(code, set()).update(v.site for v in intermediates)
                    elements.setdefault(code, element)
            for code, names in by_code.items():
                several = len(kept.arguments) > 1 or elements[code] is not kept.arguments[0][0]
                found.append(Hazard(code, kept.node, _message(code, kept, names), kept.attribute,
                                    frozenset(sites[code]), elements[code] if several else None))
        return found

    def intermediates(self, values: Values, outputs: set, tensors_only: bool) -> list[Value]:
        """The kept values that are intermediates: tensors with a gradient path, not outputs."""
        # save_for_backward takes tensors only: there a value that may be a number is a tensor
        held = _inputs_as_tensors(flatten(values)) if tensors_only else flatten(values)
        return [v for v in held if (v.site, v.view_site) not in outputs and v.site not in self.recorded and (
            (v.kind is Role.TENSOR and not v.maybe) or (v.kind is Role.CONSTANT and v.site in self.tainted))]

    def origin(self, intermediates: list[Value]) -> str:
        """Where the first of ``intermediates`` came from, for the message. A buffer created at a
        site and also a tensor computed there (paths that meet) is told as the buffer, whatever
        the order of the set it came from; a value of a followed function names the call."""
        first = min(intermediates, key=lambda v: (*(v.site or (0, 0))[:2], repr((v.site or ())[2:]),
                                                  v.kind is not Role.CONSTANT))
        place = "?" if first.site is None else (
            f"line {first.site[0]}" if len(first.site) == 2 or first.site[2] is None
            else f"{first.site[2]}:{first.site[0]}")
        if first.site is not None and len(first.site) == 5 and first.site[3:] in self.callees:
            place += f" in `{self.callees[first.site[3:]]}`, called at line {first.site[3]}"
        if first.kind is Role.CONSTANT:
            return f"created at {place}, then written in place with values computed from the inputs"
        if first.site in self.marked_nondifferentiable:
            return f"computed at {place}, returned as an output marked non-differentiable"
        return f"computed at {place}"

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
            if isinstance(node.op, ast.MatMult):             # only tensors (and arrays) multiply with @
                return self.arithmetic(node, [_inputs_as_tensors(left), _inputs_as_tensors(right)])
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
            truth = self.assumed(node.test)
            if truth is not None:
                return self.evaluate(node.body if truth else node.orelse, env)
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
        if isinstance(node, ast.Lambda):
            return self.closure(node, env)
        if isinstance(node, (ast.JoinedStr, ast.Slice)):
            return PLAIN
        return UNKNOWN

    def literal(self, elements: list[ast.expr], env: Env) -> Values:
        """What a tuple/list/set literal of ``elements`` holds (inexact with a starred element)."""
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
        """What a comprehension yields, its targets bound in a scope of its own."""
        scope = dict(env)
        for generator in node.generators:
            self.bind(generator.target, element_of(self.evaluate(generator.iter, scope)), scope)
            for condition in generator.ifs:
                self.evaluate(condition, scope)
        element = self.evaluate(node.value if isinstance(node, ast.DictComp) else node.elt, scope)
        return sequence([element], exact=False)

    def attribute(self, node: ast.Attribute, env: Env) -> Values:
        """What ``node.attr`` holds (ctx's methods, metadata attributes, a tensor's attributes)."""
        base = self.evaluate(node.value, env)
        if node.attr in PLAIN_ATTRIBUTES:
            return PLAIN
        if base == CTX:
            if node.attr == "save_for_backward":
                return SAVE_FOR_BACKWARD                     # ``s = ctx.save_for_backward; s(x, y)``
            return env.get(_ctx_key(node.attr), UNKNOWN)
        if node.attr in ("values", "indices") and any(v.kind is Role.SEQUENCE for v in base):
            return element_of(base, 0 if node.attr == "values" else 1)
        if node.attr in ("T", "mT", "H", "mH", "real", "imag", "data", "grad"):
            return self.derived(node, base)
        return UNKNOWN

    def subscript(self, node: ast.Subscript, env: Env) -> Values:
        """What ``base[index]`` holds: the element at a constant index, else any element."""
        base = self.evaluate(node.value, env)
        self.evaluate(node.slice, env)
        index = node.slice.value if isinstance(node.slice, ast.Constant) else None
        result: set[Value] = set()
        for value in base:
            if value.kind is Role.SEQUENCE or value.star or value.kind is Role.PLAIN:
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
        site = self.site(node)
        if self.recording and any(v.kind is Role.TENSOR and v.site not in self.recorded for v in values):
            self.recorded.discard(site)             # from a tensor outside the recorded graph (detached)
        if any(is_tensor(v) and v.kind is not Role.CONSTANT for v in values):
            return frozenset({Value(Role.TENSOR, site=site)})
        if any(v.kind in (Role.UNKNOWN, Role.CTX) for v in values):
            return UNKNOWN
        if any(v.kind is Role.INPUT or v.maybe for v in values):
            if any(v.kind is Role.CONSTANT for v in values):
                return UNKNOWN                      # ``mask / p``: a tensor even when p is a number
            # ``x * 2`` on inputs of unknown type: a tensor computed from them, or a number
            return frozenset({Value(Role.TENSOR, site=site, maybe=True)})
        if any(v.kind is Role.CONSTANT for v in values):
            return frozenset({Value(Role.CONSTANT, site=site)})
        return PLAIN

    def nondifferentiable(self, node: ast.AST, operands: list[Values]) -> Values:
        """Comparisons, masks, bitwise ops: a tensor without gradient, or Python data."""
        values = flatten(union(operands))
        if any(is_tensor(v) or v.kind is Role.INPUT for v in values):
            return frozenset({Value(Role.CONSTANT, site=self.site(node))})
        return PLAIN if all(v.kind is Role.PLAIN for v in values) else UNKNOWN

    def allocate(self, node: ast.Call, factory: str) -> Values:
        """A new tensor (``torch.empty_like(x)``): a constant; an uninitialised or zeroed floating
        buffer is one a kernel may fill (``torch.ones`` masks and integer buffers are read, not filled)."""
        values = self.constant(node)
        if factory in BUFFER_FACTORIES and not self.casts_to_integer(node):
            self.allocated.update(v.site for v in values)
        return values

    def constant(self, node: ast.AST) -> Values:
        """A value made by the forward at ``node`` that does not depend on the inputs."""
        return frozenset({Value(Role.CONSTANT, site=self.site(node))})

    # --- calls -------------------------------------------------------------------------------

    def call(self, node: ast.Call, env: Env) -> Values:
        """What a call returns, by what it calls (ctx, a builtin, torch, a method, a local function)."""
        func = node.func
        if isinstance(func, ast.Call) and (self.imports.qualify(func.func) or "") in FUNCTIONAL_GRADIENTS:
            # ``torch.func.grad_and_value(loss_fn)(x, w)``: gradients (and values) computed from the arguments
            self.evaluate(func, env)
            operands = [self.evaluate(a, env) for a in node.args] + [self.evaluate(k.value, env) for k in node.keywords]
            gradients = self.gradients(node, operands)
            if (self.imports.qualify(func.func) or "").endswith("_and_value"):
                # (gradients, value): the value (or (value, aux)) is the function's, told apart from the
                # gradients by its own site (where the function is named)
                named = func.args[0] if func.args else func.func
                value = self.arithmetic(named, [_inputs_as_tensors(o) for o in operands])
                return sequence([gradients, value])
            return gradients
        receiver = self.evaluate(func.value, env) if isinstance(func, ast.Attribute) else None
        arguments = [self.evaluate(a, env) for a in node.args]
        keywords = {k.arg: self.evaluate(k.value, env) for k in node.keywords}
        if receiver == CTX:
            return self.ctx_call(node, func.attr, arguments)
        if receiver == CLASS:                                 # ``cls.project(X, alpha)``
            return self.opaque_call(node, [*arguments, *keywords.values()])
        if isinstance(func, ast.Name) and env.get(func.id) == SAVE_FOR_BACKWARD:
            return self.ctx_call(node, "save_for_backward", arguments)
        local = self.local_functions.get(func.id) if isinstance(func, ast.Name) else None
        if local is not None and len(self.frames) < MAX_CALL_DEPTH:
            path = self.frames[-1].source.path if self.frames else None
            return self.follow(node, FunctionSource(local, self.imports, path), arguments, keywords, closure=env)
        qualified = self.qualified(func, env)
        if qualified is not None:
            namespace = qualified.rpartition(".")[0]
            if namespace in TENSOR_NAMESPACES or qualified.startswith("torch.ops."):
                result = self.torch_call(node, _op_name(qualified), arguments, keywords)
                return self.write_out(node, result, env)
            if qualified == "setattr" and len(node.args) >= 3 and arguments[0] == CTX:
                name = node.args[1].value if isinstance(node.args[1], ast.Constant) else None
                self.keep(node, name if isinstance(name, str) else None, [(node.args[2], arguments[2])],
                          where=f"`{_text(node)}`")
                return PLAIN
            if qualified in GRADIENT_FUNCTIONS:
                return self.gradients(node, [*arguments, *keywords.values()])
            if qualified in PARTIAL:                    # the partial holds its bound arguments
                held = [a for a in [*arguments, *keywords.values()] if a != PLAIN]
                return sequence(held, exact=False) if held else PLAIN
            # a function given no tensor computes none from the inputs; torch's own are not followed
            given = not qualified.startswith("torch.") and any(
                v.kind not in (Role.PLAIN, Role.UNKNOWN) for a in [*arguments, *keywords.values()] for v in flatten(a))
            source = self.functions(self.in_module(qualified)) if given and len(self.frames) < MAX_CALL_DEPTH else None
            if source is not None and all(frame.source is not source for frame in self.frames):
                return self.follow(node, source, arguments, keywords)
            if namespace and self.imported(func) and not (qualified + ".").startswith(PYTHON_MODULES):
                # a function of another library (a CUDA extension, a kernel wrapper): what it returns
                # from tensors with a gradient path is computed from them
                return self.opaque_call(node, [*arguments, *keywords.values()])
            return UNKNOWN if namespace else self.builtin_call(node, qualified, arguments, keywords)
        if isinstance(func, ast.Attribute) and receiver is not None:
            return self.method_call(node, func, receiver, arguments, keywords, env)
        if isinstance(func, ast.Name) and self.is_parameter(env.get(func.id, UNKNOWN)):
            return self.opaque_call(node, [*arguments, *keywords.values()])   # a callable passed in
        if isinstance(func, ast.Subscript) or (isinstance(func, ast.Name) and func.id in env):
            # ``kernel[grid](...)``, or a kernel held in a variable (``compiled = cute.compile(...)``)
            self.launch(node, [*arguments, *keywords.values()], env)
        return self.forwarding(node, [*arguments, *keywords.values()])

    def gradients(self, node: ast.Call, operands: list[Values]) -> Values:
        """``torch.autograd.grad(loss, inputs)`` in forward: gradients computed from the inputs; with
        no graph (so not recorded under ``enable_grad``) unless ``create_graph=True``."""
        computed = self.arithmetic(node, [_inputs_as_tensors(o) for o in operands])
        create_graph = any(k.arg == "create_graph" and not (isinstance(k.value, ast.Constant) and not k.value.value)
                           for k in node.keywords)
        if not create_graph:
            self.recorded.discard(self.site(node))
        return sequence([computed], exact=False)

    def opaque_call(self, node: ast.Call, operands: list[Values]) -> Values:
        """A callable the analysis cannot see into (passed in, or ``cls.project`` of a subclass):
        given tensors with a gradient path, what it returns is computed from them."""
        if any(self.carries_gradient(a) for a in operands):
            return self.arithmetic(node, operands)
        return UNKNOWN

    def forwarding(self, node: ast.Call, operands: list[Values]) -> Values:
        """A call the analysis cannot resolve that passes on the followed function's own
        ``*args`` (a dispatcher: ``impl = registry[name]; return impl.call(*args)``): what the
        implementation returns is computed from them, as for a callable passed in."""
        if not self.frames:
            return UNKNOWN
        rest = self.frames[-1].source.definition.args.vararg
        if rest is not None and any(isinstance(a, ast.Starred) and isinstance(a.value, ast.Name)
                                    and a.value.id == rest.arg for a in node.args):
            return self.opaque_call(node, operands)
        return UNKNOWN

    def imported(self, func: ast.expr) -> bool:
        """Whether the called name comes from an import statement of the module."""
        head = func
        while isinstance(head, ast.Attribute):
            head = head.value
        return isinstance(head, ast.Name) and head.id in self.imports.names

    @staticmethod
    def is_parameter(values: Values) -> bool:
        """A forward parameter (given a gradient or not), not something computed."""
        return bool(values) and all((v.kind is Role.INPUT and not v.star) or (v.kind is Role.CONSTANT and v.site is None)
                                    for v in values)

    def launch(self, node: ast.Call, arguments: list[Values], env: Env) -> None:
        """``kernel[grid](x, out, ...)``: a kernel writes what it computes from its inputs into
        the buffers it is given (``out = torch.empty_like(x)``), which then carry a gradient path."""
        if not any(self.carries_gradient(a) for a in arguments):
            return
        computed = union(a for a in arguments if self.carries_gradient(a))
        for argument in [*node.args, *(k.value for k in node.keywords)]:
            if isinstance(argument, ast.Name) and argument.id in env and \
                    any(v.kind is Role.CONSTANT and v.site in self.allocated for v in env[argument.id]):
                env[argument.id] = frozenset(self.absorb(v, computed) if v.site in self.allocated else v
                                             for v in env[argument.id])

    def follow(self, node: ast.Call, source: FunctionSource, arguments: list[Values],
               keywords: dict[str | None, Values], closure: Env | None = None) -> Values:
        """Interpret a function of the linted tree with the call's arguments: what it returns.

        ``closure``: the environment a function (or lambda) defined inside the forward sees.
        """
        definition = source.definition
        parameters = [*definition.args.posonlyargs, *definition.args.args]
        env: Env = dict(closure) if closure is not None else {}
        for index, parameter in enumerate(parameters):
            if index < len(arguments) and not isinstance(node.args[index], ast.Starred):
                env[parameter.arg] = arguments[index]
            else:
                env[parameter.arg] = keywords.get(parameter.arg, UNKNOWN)
        for parameter in definition.args.kwonlyargs:
            env[parameter.arg] = keywords.get(parameter.arg, UNKNOWN)
        if definition.args.vararg is not None:
            rest = list(zip(node.args, arguments))[len(parameters):]
            env[definition.args.vararg.arg] = sequence(
                [element_of(v) if isinstance(a, ast.Starred) else v for a, v in rest],
                exact=not any(isinstance(a, ast.Starred) for a, _ in rest))
        if definition.args.kwarg is not None:
            env[definition.args.kwarg.arg] = UNKNOWN
        frame = _Frame(source, node)
        if not self.frames:
            self.callees[(node.lineno, node.col_offset)] = _text(node.func)
        imports, self.imports = self.imports, source.imports
        self.frames.append(frame)
        try:
            if isinstance(definition, ast.Lambda):
                frame.returns.append(self.evaluate(definition.body, env))
            else:
                self.run(definition.body, env)
        finally:
            self.frames.pop()
            self.imports = imports
        if closure is not None:               # what a nested function did to the enclosing objects
            for name in closure.keys() - _local_names(definition):
                if name in env:
                    closure[name] = env[name]
        return union(frame.returns) if frame.returns else PLAIN

    def qualified(self, func: ast.expr, env: Env) -> str | None:
        """The import-resolved name of a called function, unless its head is a local variable."""
        head = func
        while isinstance(head, ast.Attribute):
            head = head.value
        if not isinstance(head, ast.Name) or head.id in env:
            return None
        return self.imports.qualify(func)

    def in_module(self, qualified: str) -> str:
        """A bare name called inside a followed function of another file: that module's own name."""
        path = self.frames[-1].source.path if self.frames else None
        tree = current_tree() if path is not None and "." not in qualified else None
        module = tree.module_name(path) if tree is not None else None
        return f"{module}.{qualified}" if module else qualified

    def ctx_call(self, node: ast.Call, method: str, arguments: list[Values]) -> Values:
        """What a ``ctx.<method>(...)`` call returns; ``save_for_backward`` records what it keeps."""
        if method == "save_for_backward":
            kept = []
            for expression, values in zip(node.args, arguments):
                if isinstance(expression, ast.Starred):
                    values = element_of(values)
                kept.append((expression, values))
            self.keep(node, None, kept)
            return PLAIN
        if method == "mark_non_differentiable":        # such an output is a constant to autograd
            self.marked_nondifferentiable.update(v.site for a in arguments for v in flatten(a)
                                          if v.kind is Role.TENSOR and v.site is not None)
            return PLAIN
        return UNKNOWN

    def builtin_call(self, node: ast.Call, name: str, arguments: list[Values],
                     keywords: dict[str | None, Values]) -> Values:
        """What a call of the builtin ``name`` returns."""
        if name == "dict" and (arguments or keywords):        # ``dict(zip(keys, grads))``: holds their elements
            held = [element_of(element_of(a)) for a in arguments] + list(keywords.values())
            return sequence([union(held)], exact=False)
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
        """``torch.op(..., out=buf)`` writes the result into ``buf``, which is what it returns; with
        ``out=None`` (or what may be None) it returns the result itself."""
        out = next((k.value for k in node.keywords if k.arg == "out"), None)
        if isinstance(out, ast.Name) and out.id in env:
            buffers = frozenset(v for v in env[out.id] if v.kind in (Role.TENSOR, Role.CONSTANT))
            others = env[out.id] - buffers              # None, or what the analysis cannot tell
            written = frozenset(self.absorb(v, result) for v in buffers)
            if buffers:
                env[out.id] = written | others
            return written | (result if others else frozenset())
        return result

    def torch_call(self, node: ast.Call, name: str, arguments: list[Values],
                   keywords: dict[str | None, Values]) -> Values:
        """What a call of torch's function ``name`` returns."""
        if name in PLAIN_TORCH_FUNCTIONS or name.startswith(PLAIN_TORCH_PREFIXES):
            return PLAIN if not name.startswith("_") else UNKNOWN
        if name[:1].isupper():
            return self.constant(node) if name.endswith("Tensor") else UNKNOWN
        if name in FACTORIES:
            return self.allocate(node, name)
        if name in NON_DIFFERENTIABLE or (name == "where" and len(node.args) == 1):
            return self.constant(node)
        operands = [*arguments, *keywords.values()]
        if name in MIXED_OUTPUTS or (name in INDEX_RETURNING and self.returns_indices(name, node, arguments)):
            return self.mixed(node, name, operands)
        result = self.arithmetic(node, [_inputs_as_tensors(o) for o in operands])
        return result if any(v.kind is not Role.PLAIN for v in result) else self.constant(node)

    def returns_indices(self, name: str, node: ast.Call, arguments: list[Values]) -> bool:
        """``torch.max(x, 1)`` returns (values, indices); ``torch.max(x, y)`` does not."""
        if name in ALWAYS_TUPLE or any(k.arg == "dim" for k in node.keywords):
            return True
        return len(arguments) >= 2 and all(                 # a dim: Python data or a parameter without gradient
            v.kind is Role.PLAIN or (v.kind is Role.CONSTANT and v.site is None) for v in arguments[1])

    def mixed(self, node: ast.Call, name: str, operands: list[Values]) -> Values:
        """What a call returning (values, indices)-like outputs holds: differentiable results where
        ``MIXED_OUTPUTS`` says so (the first by default), constants elsewhere."""
        differentiable = self.arithmetic(node, [_inputs_as_tensors(o) for o in operands])
        pattern = MIXED_OUTPUTS.get(name, (True, False))
        return sequence([differentiable if d else self.constant(node) for d in pattern])

    def method_call(self, node: ast.Call, func: ast.Attribute, receiver: Values, arguments: list[Values],
                    keywords: dict[str | None, Values], env: Env) -> Values:
        """What a method call on ``receiver`` returns (an in-place method also updates it)."""
        method = func.attr
        if method in PLAIN_METHODS and not (method == "type" and node.args):
            return PLAIN
        if method.startswith(("is_", "has_")):
            return PLAIN
        if method in ("append", "extend", "insert") and isinstance(func.value, ast.Attribute) \
                and self.evaluate(func.value.value, env) == CTX and arguments:     # ``ctx.ys.append(y)``
            self.keep(node, func.value.attr, [(node.args[-1], arguments[-1])])
            return PLAIN
        if method in ("append", "extend", "insert") and isinstance(func.value, ast.Name):
            if not arguments:
                added = PLAIN
            else:
                added = element_of(arguments[0]) if method == "extend" else arguments[-1]
            self.store_into(func.value.id, added, env)
            return PLAIN
        if method in ("get", "pop", "setdefault") and _all_sequences(receiver):   # a dict's or list's element
            return element_of(receiver) | (arguments[1] if len(arguments) > 1 else frozenset())
        values = flatten(receiver)
        tensor_receiver = any(is_tensor(v) for v in values) or (
            method in TENSOR_METHODS and any((v.kind is Role.INPUT and not v.star) or v.maybe for v in values))
        if not tensor_receiver:
            return self.forwarding(node, [*arguments, *keywords.values()])
        receiver = _inputs_as_tensors(receiver)
        if method.endswith("_") and not method.endswith("__"):
            return self.in_place(node, func, method, receiver, arguments, env)
        if method in VIEW_METHODS:
            return self.view(node, flatten(receiver))
        if method == "detach":                          # same values, no path to the inputs
            detached = self.derived(node, receiver)
            self.recorded.discard(self.site(node))
            return detached
        if method in FACTORIES:
            return self.allocate(node, method)
        if method in NON_DIFFERENTIABLE:
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
            if value.kind in (Role.TENSOR, Role.CONSTANT):
                result.add(replace(value, view=True, view_site=self.site(node)))
            elif value.kind is not Role.PLAIN:           # None and friends have no views
                result |= self.derived(node, frozenset({value}))
        return frozenset(result) or UNKNOWN

    def in_place(self, node: ast.Call, func: ast.Attribute, method: str, receiver: Values,
                 arguments: list[Values], env: Env) -> Values:
        """``t.add_(u)``: ``t`` keeps its identity; what it holds may change."""
        if method in OVERWRITING_METHODS or (method == "copy_" and arguments and not self.carries_gradient(arguments[0])):
            updated = frozenset(replace(v, kind=Role.CONSTANT) if v.kind is Role.TENSOR else v for v in receiver)
        else:
            updated = frozenset(self.absorb(v, union(arguments)) for v in receiver)
        if isinstance(func.value, ast.Name) and func.value.id in env:
            env[func.value.id] = updated
        return updated

    def casts_to_integer(self, node: ast.Call) -> bool:
        """Whether the call names an integer dtype among its arguments (a cast to integer)."""
        for argument in [*node.args, *(k.value for k in node.keywords)]:
            name = self.imports.qualify(argument)
            if name is not None and name.rpartition(".")[2] in INTEGER_DTYPES:
                return True
        return False

    def store_into(self, name: str, values: Values, env: Env) -> None:
        """Merge ``values`` into what the name ``name`` holds (an in-place write into it)."""
        if name in env:
            env[name] = frozenset(self.absorb(v, values) for v in env[name])


def correlated_conditions(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """Names that several ``if``/``... if ... else ...`` of ``function`` test (``needs_grad``,
    ``not needs_grad``), bound once before the first test (or parameters never rebound): the
    tests agree on every run, so the paths that mix their arms (what the joined analysis
    sees) never happen. Run once with each truth value, the analysis tells a value saved under
    ``if needs_grad:`` from the one returned on the other arm."""
    tests: dict[str, list[int]] = {}
    bound: dict[str, list[int]] = {}
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, (ast.If, ast.IfExp)):
            test = node.test
            while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test = test.operand
            if isinstance(test, ast.Name):
                tests.setdefault(test.id, []).append(test.lineno)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.setdefault(node.id, []).append(node.lineno)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                bound.setdefault(name, []).extend([0, 0])
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):     # rebound on every iteration
            for name in (n for n in ast.walk(node.target) if isinstance(n, ast.Name)):
                bound.setdefault(name.id, []).append(0)
        pending.extend(ast.iter_child_nodes(node))
    return sorted(name for name, lines in tests.items() if len(lines) >= 2 and len(bound.get(name, ())) <= 1
                  and all(line < min(lines) for line in bound.get(name, ())))[:MAX_CORRELATED]


def _local_names(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """The names local to a nested function (its parameters and what it binds, less ``nonlocal``
    ones): the others are the enclosing function's, whose objects it may change in place
    (``grads.append(g)``, ``total.add_(g)``)."""
    arguments = function.args
    names = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
    names |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    shared: set[str] = set()
    for node in ast.walk(function) if not isinstance(function, ast.Lambda) else ():
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Nonlocal, ast.Global)):
            shared.update(node.names)
    return names - shared


def _elements(expression: ast.expr, values: Values) -> list[tuple[ast.expr, Values]]:
    """The kept expression's own elements when it is a tuple/list literal, else itself."""
    inner = expression.value if isinstance(expression, ast.Starred) else expression
    if isinstance(inner, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in inner.elts):
        exact = [v for v in values if v.kind is Role.SEQUENCE and v.exact and len(v.elements) == len(inner.elts)]
        if exact and len(exact) == len(values):
            return [(element, union(v.elements[i] for v in exact)) for i, element in enumerate(inner.elts)]
    return [(expression, values)]


def _text(expression: ast.expr) -> str:
    text = ast.unparse(expression)
    return text if len(text) <= 60 else text[:57] + "..."


def global_key(name: str) -> str:
    """The ``attribute`` of a value kept in a module global: backward must read ``name`` to use it."""
    return f"<global>{name}"


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
    return frozenset(Value(Role.INPUT, name=v.name, tensor=True) if v.kind is Role.INPUT and not v.star
                     else replace(v, maybe=False) if v.maybe else v
                     for v in values)


def _all_sequences(values: Values) -> bool:
    return bool(values) and all(v.kind is Role.SEQUENCE for v in values)


def _message(code: str, kept: Kept, names: list[str]) -> str:
    """What is kept where; the consequence and the remedy depend on the backward (see classes)."""
    where = kept.where or ("ctx.save_for_backward" if kept.attribute is None else f"ctx.{kept.attribute} =")
    what = f"{where} keeps {', '.join(names)}"
    if code == codes.REBOUND_INPUT.code:
        return f"{what}: an input name that forward rebinds to a computed tensor, so backward sees an intermediate"
    return f"{what}, neither an input nor an output of forward"
