"""A formula's Python path written out per formula, at install time: the override's fast path.

The general path (:mod:`formulas.torch.function`) runs a formula as it is written: every
``at.<op>`` finds its overload from its arguments' types, tensors go in and out of
:class:`~formulas.torch.backend.OracleTensor`, the backward closure is planned and rebuilt per
call. :func:`generate` takes those decisions once, from the front-end's model of the formula's
``def`` and its helpers' (:mod:`transpiler.formula_facts`: stamped at import, so a file edited since
is never the text generated from), as the C++ emitter
(``transpiler/cpp``) does for its nodes, and writes the result as Python source:

* every ``at.<op>`` call, Python operator on tensors (``grad * other`` is ``at.mul``, as
  ``OracleTensor`` spells it) and metadata method (``x.sizes()``) typed and bound to the aten
  overload the general path would resolve (``torch.ops.aten.<op>.<overload>._op``), on plain
  torch tensors;
* the helpers it calls written the same way, once per tuple of argument types they are called with;
* an ``autograd.Function`` whose forward runs the formula's body below autograd and saves the
  captured inputs and outputs, whose backward is the closure's body with its captures as
  parameters (``create_graph=True`` runs the closure's operators through autograd, so double
  backward runs the formulas again), and the operator's autograd kernel, which takes that
  Function for a call outside torch.func transforms and forward mode whose tensors are tensors
  and hands every other call to the general path.

A construct whose meaning it cannot prove statically (an overload that depends on a value, a
tensor in a boolean context, a captured intermediate, a helper with overloads, a view,
in-place or multi-output operator...) is :class:`NotCovered`, with the reason: the formula keeps
the general path, whose behaviour (values, errors) is the reference. The functions from formula
to text are pure; :func:`compile_kernel` executes the text.
"""
from __future__ import annotations

import ast
import inspect
import math
import textwrap
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import torch
from torch._C._functorch import unwrap_if_dead

from formulas.dsl import at as _AT
from formulas.dsl import helper_source, registry
from transpiler.formula_facts import StaleFormulaError, formula_model, model_of_file
from transpiler.schema import BaseType, FunctionSchema, ListType, OptionalType, Type

if TYPE_CHECKING:
    from formulas.torch.function import TorchFormula


class NotCovered(Exception):
    """The formula (or a construct in it, named in the message) is left to the general path."""


# --- types -------------------------------------------------------------------------------------
# A value's type is a string: "Tensor", "int", "float", "bool", "Scalar" (a number of any kind),
# "dtype", "str", "None", "obj" (a value that is no tensor and holds none), a list "X[]" ("[]":
# empty so far), an optional "X?"; or a Python tuple of types (a tuple value).

TENSOR = "Tensor"
_NUMBERS = ("int", "float", "bool", "Scalar")


def holds_tensor(ty: Any) -> bool:
    """Whether a value of type ``ty`` may be or hold a tensor."""
    if isinstance(ty, tuple):
        return any(holds_tensor(t) for t in ty)
    return "Tensor" in ty


def _optional(ty: Any) -> Any:
    if isinstance(ty, tuple):
        raise NotCovered("a tuple that may be None")
    return ty if ty.endswith("?") or ty == "None" else f"{ty}?"


def unify(a: Any, b: Any) -> Any:
    """The type of a name bound to values of types ``a`` and ``b``."""
    if a == b:
        return a
    if a == "None":
        return _optional(b)
    if b == "None":
        return _optional(a)
    if isinstance(a, str) and isinstance(b, str):
        if a.rstrip("?") == b.rstrip("?"):
            return _optional(a)
        if {a, b} <= {"[]"} | {t for t in (a, b) if t.endswith("[]")} and "Tensor" not in a + b:
            return a if b == "[]" else b if a == "[]" else "obj[]"
        if not holds_tensor(a) and not holds_tensor(b):
            return "obj"
    raise NotCovered(f"a name bound to a {a} and to a {b}")


def schema_type(ty: Type) -> str:
    """The type of a schema argument or return."""
    if isinstance(ty, OptionalType):
        return _optional(schema_type(ty.elem))
    if isinstance(ty, ListType):
        elem = schema_type(ty.elem)
        if elem.endswith("?"):
            raise NotCovered(f"a list of optional values ({ty})")
        return f"{elem}[]"
    assert isinstance(ty, BaseType)
    return {"Tensor": TENSOR, "int": "int", "SymInt": "int", "float": "float", "bool": "bool", "Scalar": "Scalar",
            "ScalarType": "dtype", "str": "str"}.get(ty.name, "obj")


#: the Python types the general path's overload resolution accepts per schema type name
#: (``formulas.torch.backend._PYTHON_TYPES``), as the types above: a value of each type on the left
#: fits always; "Scalar" fits a float or int parameter only sometimes (a bool does not)
_ALWAYS = {"int": {"int"}, "SymInt": {"int"}, "float": {"int", "float"}, "bool": {"bool"},
           "Scalar": {"int", "float", "bool", "Scalar"}, "ScalarType": {"dtype"}, "str": {"str"},
           "Device": {"str"}}
_SOMETIMES = {"int": {"Scalar", "obj"}, "SymInt": {"Scalar", "obj"}, "float": {"Scalar", "obj"},
              "bool": {"Scalar", "obj"}, "Scalar": {"obj"}, "ScalarType": {"obj"}, "str": {"obj"},
              "Device": {"obj"}, "Layout": {"obj"}, "MemoryFormat": {"obj", "str"}}


def fits(param: Type, ty: Any) -> str:
    """Whether a value of type ``ty`` fits a schema argument of type ``param`` as the general
    path's ``formulas.torch.backend._fits`` decides it: "yes", "no" or "maybe" (it depends on the value)."""
    if isinstance(ty, str) and ty.endswith("?"):
        return _either(fits(param, "None"), fits(param, ty[:-1]))
    if isinstance(param, OptionalType):
        return "yes" if ty == "None" else fits(param.elem, ty)
    if isinstance(param, ListType):
        single = fits(param.elem, ty) if param.size is not None else "no"
        if single == "yes":
            return "yes"
        if isinstance(ty, tuple):
            as_list = "no" if not ty else _all(fits(param.elem, t) for t in ty)
        elif ty == "[]":
            as_list = "maybe"
        elif ty.endswith("[]"):
            as_list = _either("yes", fits(param.elem, ty[:-2]))     # an empty list fits any list
        else:
            as_list = "maybe" if ty == "obj" else "no"
        return _either(single, as_list) if single != "no" else as_list
    assert isinstance(param, BaseType)
    if param.name == "Tensor":
        return "yes" if ty == TENSOR else "no"
    if param.name not in _ALWAYS and param.name not in _SOMETIMES:
        return "yes"        # a type the general path does not check (Generator...): anything fits
    if ty in _ALWAYS.get(param.name, ()):
        return "yes"
    return "maybe" if ty in _SOMETIMES[param.name] else "no"


def _either(a: str, b: str) -> str:
    return a if a == b else "maybe"


def _all(answers: Any) -> str:
    answers = set(answers)
    return "no" if "no" in answers and len(answers) == 1 else "yes" if answers == {"yes"} else \
        "no" if "no" in answers and "maybe" not in answers else "maybe"


def accepts(schema: FunctionSchema, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """``formulas.torch.backend.accepts`` on types: "yes", "no" or "maybe"."""
    positional = schema.positional
    if len(args) > len(positional):
        return "no"
    bound = {arg.name: ty for arg, ty in zip(positional, args)}
    for key, ty in kwargs.items():
        if key in bound:
            return "no"
        bound[key] = ty
    known = {arg.name: arg for arg in schema.arguments if not arg.is_out}
    if any(key not in known for key in bound):
        return "no"
    answer = "yes"
    for arg in known.values():
        if arg.name not in bound:
            if arg.default is None:
                return "no"
            continue
        fit = fits(arg.type, bound[arg.name])
        if fit == "no":
            return "no"
        if fit == "maybe":
            answer = "maybe"
    return answer


def resolve(name: str, candidates: Sequence[FunctionSchema], args: Sequence[Any],
            kwargs: Mapping[str, Any]) -> FunctionSchema:
    """The overload ``TorchBackend.resolve`` picks for every call with arguments of these types."""
    answers = [(schema, accepts(schema, args, kwargs)) for schema in candidates]
    if any(answer == "maybe" for _, answer in answers):
        raise NotCovered(f"at.{name}({', '.join(map(str, args))}): the overload depends on the values")
    matches = [schema for schema, answer in answers if answer == "yes"]
    if len(matches) > 1:
        exact = [s for s in matches if len(s.arguments) == len(args) + len(kwargs)]
        matches = exact if len(exact) == 1 else matches
    if len(matches) != 1:
        raise NotCovered(f"at.{name}({', '.join(map(str, args))}) binds to {len(matches)} declared overloads")
    return matches[0]


def returned_type(schema: FunctionSchema) -> Any:
    """The Python type of the schema's returns: ``"None"``, the one return's type, or a tuple of them."""
    types_ = tuple(schema_type(r.type) for r in schema.returns)
    return "None" if not types_ else types_[0] if len(types_) == 1 else types_


def formula_def(formula: TorchFormula) -> ast.FunctionDef:
    """The formula's ``def`` as the front-end modelled it (read again from its file, which must
    be as it was when the formula was imported, so the generated code is never another text's),
    as Python's ``ast``."""
    try:
        facts = formula.facts
        if not facts.modelled:
            raise NotCovered(facts.unread_because)
        model = formula_model(formula.declared)
    except StaleFormulaError as error:
        raise NotCovered(str(error)) from None
    return _as_ast(model.node, formula.fn.__name__)


def helper_def(fn: Callable[..., Any]) -> ast.FunctionDef:
    """The ``def`` of the helper ``fn`` from the front-end's model of the file it was declared in
    (``@helper`` stamps it, as ``@derivative`` does a formula's), as Python's ``ast``."""
    stamp = helper_source(fn)
    if stamp is None:
        raise NotCovered(f"helper {fn.__name__} has no source file the front-end can read")
    try:
        module = model_of_file(stamp)
    except StaleFormulaError as error:
        raise NotCovered(str(error)) from None
    found = [h for h in module.helpers if h.name == fn.__name__]
    if len(found) != 1:
        raise NotCovered(f"{stamp.path} has no single @helper {fn.__name__}")
    return _as_ast(found[0].node, fn.__name__)


def _as_ast(node: Any, name: str) -> ast.FunctionDef:
    import libcst as cst    # the front-end's trees: printed once per formula and helper, at install

    tree = ast.parse(textwrap.dedent(cst.Module(body=[]).code_for_node(node)))
    parsed = tree.body[0] if tree.body else None
    if not isinstance(parsed, ast.FunctionDef) or parsed.name != name:
        raise NotCovered(f"the front-end's model of {name} is not its def")
    return parsed


# --- the writer ----------------------------------------------------------------------------------

#: Python operators on tensors: OracleTensor's dunders (``formulas/torch/backend.py``): the
#: operator with a tensor on the left, and with a number on the left and a tensor on the right
_BINARY = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow", ast.MatMult: "matmul"}
_REFLECTED = {ast.Add: "add", ast.Sub: "rsub", ast.Mult: "mul"}
_COMPARE = {ast.Gt: "gt", ast.GtE: "ge", ast.Lt: "lt", ast.LtE: "le", ast.Eq: "eq", ast.NotEq: "ne"}
_COMPARE_REFLECTED = {ast.Gt: "lt", ast.GtE: "le", ast.Lt: "gt", ast.LtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
#: OracleTensor's metadata methods: the plain tensor's spelling (a template on the receiver) and type
_METADATA = {"sizes": ("list({}.shape)", "int[]"), "size": ("{}.size", "int"), "dim": ("{}.dim", "int"),
             "numel": ("{}.numel", "int"), "scalar_type": ("{}.dtype", "dtype"),
             "is_floating_point": ("{}.is_floating_point", "bool"), "is_complex": ("{}.is_complex", "bool"),
             "is_contiguous": ("{}.is_contiguous", "bool")}
_LIST_METHODS = {"append": "None", "extend": "None", "insert": "None", "reverse": "None", "pop": "elem",
                 "index": "int", "count": "int", "copy": "same"}
_BUILTINS = {"len", "range", "list", "min", "max", "abs", "int", "float"}
_MATH_CONSTANTS = {"pi", "e", "inf", "nan"}
_MATH_FUNCTIONS = {"sqrt", "log", "exp"}
#: schema defaults a formula spells as strings in a keyword argument (backend._SYMBOLIC_DEFAULTS)
_SYMBOLIC = {"contiguous_format": "_F_contiguous_format"}
PREFIX = "_F_"


class Writer:
    """What one formula's generated source binds: the aten overloads, helpers and constants it
    names (:attr:`names`), and the helper variants written so far."""

    def __init__(self, formula: TorchFormula) -> None:
        self.formula = formula
        self.overloads = formula.backend._overloads
        self.names: dict[str, Any] = {"_F_contiguous_format": torch.contiguous_format}
        self.helper_sources: list[str] = []
        self._helpers: dict[tuple[Any, ...], tuple[str, Any]] = {}
        self._writing: set[Callable[..., Any]] = set()
        self._helper_table = {**registry("formulas").helpers,
                              **registry(formula.declared.fn.__module__.split(".", 1)[0]).helpers}

    def aten(self, schema: FunctionSchema) -> str:
        """The module-level name bound to aten's operator for ``schema`` (recorded on first use)."""
        name = f"{PREFIX}{schema.name.base}_{schema.name.overload or 'default'}"
        if name not in self.names:
            self.names[name] = getattr(getattr(torch.ops.aten, schema.name.base), schema.name.overload or "default")._op
        return name

    def operator_call(self, name: str, args: list[tuple[ast.expr, Any]],
                      kwargs: list[tuple[str, ast.expr, Any]] = ()) -> tuple[ast.expr, Any]:
        """The direct call to the aten overload that ``at.<name>`` resolves to for these types, and its return
        type."""
        candidates = self.overloads.get(name)
        if not candidates:
            raise NotCovered(f"at.{name}: no declared operator")
        schema = resolve(name, candidates, [t for _, t in args], {k: t for k, _, t in kwargs})
        keywords = []
        for key, node, ty in kwargs:
            if ty == "str":
                if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                    raise NotCovered(f"at.{name}: a keyword string that is not a literal")
                if node.value in _SYMBOLIC:
                    node = ast.Name(_SYMBOLIC[node.value], ast.Load())
            keywords.append(ast.keyword(key, node))
        call = ast.Call(ast.Name(self.aten(schema), ast.Load()), [n for n, _ in args], keywords)
        return call, returned_type(schema)

    def helper(self, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> tuple[str, Any]:
        """The variant of helper ``fn`` for arguments of these types: its generated name, return type."""
        key = (fn, tuple(args), tuple(sorted(kwargs.items())))
        if key in self._helpers:
            return self._helpers[key]
        if fn in self._writing:
            raise NotCovered(f"{fn.__name__} calls itself")
        node = helper_def(fn)
        parameters = node.args
        if parameters.vararg or parameters.kwarg or parameters.posonlyargs:
            raise NotCovered(f"helper {fn.__name__}: *args, **kwargs or positional-only parameters")
        params = [*parameters.args, *parameters.kwonlyargs]
        defaults = [None] * (len(parameters.args) - len(parameters.defaults)) + list(parameters.defaults) + \
            list(parameters.kw_defaults)
        env: dict[str, Any] = {}
        given = dict(zip((p.arg for p in parameters.args), args))
        for name, ty in kwargs.items():
            if name in given or name not in {p.arg for p in params}:
                raise NotCovered(f"helper {fn.__name__}: keyword {name}")
            given[name] = ty
        for param, default in zip(params, defaults):
            if param.arg in given:
                env[param.arg] = given[param.arg]
            elif isinstance(default, ast.Constant):
                env[param.arg] = constant_type(default.value)
            else:
                raise NotCovered(f"helper {fn.__name__}: parameter {param.arg} not given")
        if len(args) > len(parameters.args):
            raise NotCovered(f"helper {fn.__name__}: too many arguments")
        name = f"{PREFIX}{fn.__name__}_{len(self._helpers)}"
        self._writing.add(fn)
        try:
            body = Body(self, fn, env, returns=[])
            statements = body.statements(node.body)
            returned = body.returns
            if not always_returns(node.body):
                returned.append("None")
            result = returned[0] if returned else "None"
            for ty in returned[1:]:
                result = unify(result, ty)
        finally:
            self._writing.discard(fn)
        for param in params:
            param.annotation = None
        node.returns, node.decorator_list, node.name = None, [], name
        node.body = statements or [ast.Pass()]
        self.helper_sources.append(ast.unparse(ast.fix_missing_locations(node)))
        self._helpers[key] = (name, result)
        return name, result


def constant_type(value: Any) -> str:
    """The Python type name of a literal constant; any other value is NotCovered."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    raise NotCovered(f"the constant {value!r}")


def always_returns(statements: Sequence[ast.stmt]) -> bool:
    """Whether running ``statements`` always ends in a ``return``."""
    if not statements:
        return False
    last = statements[-1]
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and always_returns(last.body) and always_returns(last.orelse)


class Body:
    """One function body being written: the names in scope and their types (``env``), the
    function the code belongs to (its globals are the formula's module's)."""

    def __init__(self, writer: Writer, fn: Callable[..., Any], env: dict[str, Any], returns: list[Any] | None) -> None:
        self.writer, self.fn, self.env, self.returns = writer, fn, env, returns

    # statements
    def statements(self, nodes: Sequence[ast.stmt]) -> list[ast.stmt]:
        """``nodes`` rewritten for the generated function, in order."""
        return [s for node in nodes for s in self.statement(node)]

    def statement(self, node: ast.stmt) -> list[ast.stmt]:
        """``node`` rewritten for the generated function (a docstring dropped); raises NotCovered otherwise."""
        if isinstance(node, ast.Expr):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return []       # a docstring
            value, _ = self.expr(node.value)
            return [ast.Expr(value)]
        if isinstance(node, ast.Assign):
            value, ty = self.expr(node.value)
            for target in node.targets:
                self.bind(target, ty)
            return [ast.Assign([self.target(t) for t in node.targets], value)]
        if isinstance(node, ast.AugAssign):
            if not isinstance(node.target, ast.Name):
                raise NotCovered("an augmented assignment to anything but a name")
            left = self.env.get(node.target.id)
            value, ty = self.expr(node.value)
            if left is None or holds_tensor(left) or holds_tensor(ty):
                raise NotCovered("an augmented assignment to a tensor")
            self.env[node.target.id] = unify(left, _arithmetic_type(type(node.op), left, ty))
            return [ast.AugAssign(node.target, node.op, value)]
        if isinstance(node, ast.Return):
            if self.returns is None:
                raise NotCovered("a return before the formula's last statement")
            if node.value is None:
                self.returns.append("None")
                return [node]
            value, ty = self.expr(node.value)
            self.returns.append(ty)
            return [ast.Return(value)]
        if isinstance(node, ast.If):
            test = self.condition(node.test)
            body_env, else_env = self.narrowed(node.test)
            body = Body(self.writer, self.fn, body_env, self.returns)
            orelse = Body(self.writer, self.fn, else_env, self.returns)
            new = ast.If(test, body.statements(node.body) or [ast.Pass()], orelse.statements(node.orelse))
            self.merge(body.env, orelse.env)
            return [new]
        if isinstance(node, (ast.For, ast.While)):
            return [self.loop(node)]
        if isinstance(node, (ast.Pass, ast.Break, ast.Continue)):
            return [node]
        raise NotCovered(f"the statement {type(node).__name__} (line {node.lineno})")

    def merge(self, *envs: dict[str, Any]) -> None:
        """Join the name types of the branches ``envs`` into this body's (types of a name unified)."""
        merged = dict(self.env)
        for env in envs:
            for name, ty in env.items():
                merged[name] = unify(merged[name], ty) if name in merged else ty
        self.env.clear()
        self.env.update(merged)

    def loop(self, node: ast.For | ast.While) -> ast.stmt:
        """A ``for``/``while`` loop rewritten, its body retyped until the types of its names are stable."""
        if node.orelse:
            raise NotCovered("a loop with an else")
        for _ in range(4):      # the body again until the types of its names are stable
            before = dict(self.env)
            inner = Body(self.writer, self.fn, dict(self.env), [] if self.returns is not None else None)
            if isinstance(node, ast.For):
                iterable, element = self.iteration(node.iter)
                inner.bind(node.target, element)
                new: ast.stmt = ast.For(inner.target(node.target), iterable, inner.statements(node.body) or [ast.Pass()],
                                        [])
            else:
                new = ast.While(inner.condition(node.test), inner.statements(node.body) or [ast.Pass()], [])
            self.merge(inner.env)
            if self.env == before:
                if self.returns is not None and inner.returns:
                    self.returns.extend(inner.returns)
                return new
        raise NotCovered("a loop whose names change type")

    def iteration(self, node: ast.expr) -> tuple[ast.expr, Any]:
        """The iterable of a ``for`` loop rewritten, and the type of its elements."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" \
                and self.is_builtin("range") and not node.keywords:
            args = [self.expr(a) for a in node.args]
            if any(t not in ("int", "bool") for _, t in args):
                raise NotCovered("range() of anything but ints")
            return ast.Call(node.func, [a for a, _ in args], []), "int"
        value, ty = self.expr(node)
        if isinstance(ty, str) and ty.endswith("[]") and not holds_tensor(ty):
            return value, ty[:-2] if ty != "[]" else "obj"
        raise NotCovered(f"iterating over a {ty}")

    def bind(self, target: ast.expr, ty: Any) -> None:
        """Record the type ``ty`` for the names of an assignment's ``target`` (tuples unpacked)."""
        if isinstance(target, ast.Name):
            if target.id.startswith(PREFIX) or target.id == "ctx":
                raise NotCovered(f"the name {target.id}")
            self.env[target.id] = ty
        elif isinstance(target, ast.Tuple) and isinstance(ty, tuple) and len(ty) == len(target.elts):
            for element, element_type in zip(target.elts, ty):
                self.bind(element, element_type)
        elif isinstance(target, ast.Subscript) and not holds_tensor(ty):
            container = self.env.get(target.value.id) if isinstance(target.value, ast.Name) else None
            if container is None or holds_tensor(container) or not str(container).endswith("[]"):
                raise NotCovered("an item assignment to anything but a list")
            self.env[target.value.id] = unify(container, f"{ty}[]")
        else:
            raise NotCovered("an assignment of this shape")

    def target(self, target: ast.expr) -> ast.expr:
        """An assignment's ``target`` rewritten (a subscript's index converted)."""
        if isinstance(target, ast.Subscript):
            index, _ = self.expr(target.slice)
            return ast.Subscript(target.value, index, ast.Store())
        return target

    def narrowed(self, test: ast.expr) -> tuple[dict[str, Any], dict[str, Any]]:
        """The names' types where ``test`` holds and where it does not: ``x is None`` narrows ``x``."""
        yes, no = dict(self.env), dict(self.env)
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name) \
                and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None \
                and isinstance(test.ops[0], (ast.Is, ast.IsNot)):
            name = test.left.id
            ty = self.env.get(name)
            if isinstance(ty, str) and ty.endswith("?"):
                is_none, other = ("None", ty[:-1])
                yes[name], no[name] = (is_none, other) if isinstance(test.ops[0], ast.Is) else (other, is_none)
        return yes, no

    # expressions
    def condition(self, node: ast.expr) -> ast.expr:
        """The test of an ``if``/``while`` rewritten; a tensor's truth value is NotCovered."""
        value, ty = self.expr(node)
        if holds_tensor(ty):
            raise NotCovered("a tensor's truth value")
        return value

    def is_builtin(self, name: str) -> bool:
        """Whether ``name`` means the Python builtin here (not shadowed by a local or a global)."""
        return name not in self.env and name not in self.fn.__globals__ and name in _BUILTINS

    def expr(self, node: ast.expr) -> tuple[ast.expr, Any]:
        """The expression ``node`` rewritten, and its type (by the ``_<NodeType>`` method)."""
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            raise NotCovered(f"the expression {type(node).__name__} (line {getattr(node, 'lineno', '?')})")
        return method(node)

    def _Constant(self, node: ast.Constant) -> tuple[ast.expr, Any]:
        return node, constant_type(node.value)

    def _Name(self, node: ast.Name) -> tuple[ast.expr, Any]:
        if node.id in self.env:
            return node, self.env[node.id]
        raise NotCovered(f"the name {node.id} as a value (line {node.lineno})")

    def _Tuple(self, node: ast.Tuple) -> tuple[ast.expr, Any]:
        elements = [self.expr(e) for e in node.elts]
        return ast.Tuple([e for e, _ in elements], ast.Load()), tuple(t for _, t in elements)

    def _List(self, node: ast.List) -> tuple[ast.expr, Any]:
        elements = [self.expr(e) for e in node.elts]
        ty = "[]"
        for _, element in elements:
            ty = unify(ty, f"{element}[]") if isinstance(element, str) else "obj[]"
        if holds_tensor(ty) and ty != "Tensor[]":
            raise NotCovered("a list of optional tensors")
        return ast.List([e for e, _ in elements], ast.Load()), ty

    def _Attribute(self, node: ast.Attribute) -> tuple[ast.expr, Any]:
        if self.is_math(node.value) and node.attr in _MATH_CONSTANTS:
            return node, "float"
        raise NotCovered(f"the attribute .{node.attr} (line {node.lineno})")

    def is_math(self, node: ast.expr) -> bool:
        """Whether ``node`` names the module ``math`` (which the generated code then binds too)."""
        if isinstance(node, ast.Name) and node.id not in self.env and self.fn.__globals__.get(node.id) is math:
            if self.writer.names.setdefault(node.id, math) is math:
                return True
        return False

    def _Subscript(self, node: ast.Subscript) -> tuple[ast.expr, Any]:
        value, ty = self.expr(node.value)
        if isinstance(node.slice, ast.Slice):
            parts = [None if p is None else self.expr(p) for p in (node.slice.lower, node.slice.upper, node.slice.step)]
            if not (isinstance(ty, str) and ty.rstrip("?").endswith("[]")):
                raise NotCovered(f"a slice of a {ty}")
            return ast.Subscript(value, ast.Slice(*(None if p is None else p[0] for p in parts)), ast.Load()), \
                ty.rstrip("?")
        index, index_type = self.expr(node.slice)
        if index_type not in ("int", "bool"):
            raise NotCovered(f"an index of type {index_type}")
        new = ast.Subscript(value, index, ast.Load())
        if isinstance(ty, tuple):
            if not (isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int)
                    and -len(ty) <= node.slice.value < len(ty)):
                raise NotCovered("a tuple indexed by anything but a constant")
            return new, ty[node.slice.value]
        base = ty.rstrip("?")
        if base == "[]":
            return new, "obj"
        if base.endswith("[]"):
            return new, base[:-2]
        if base == "obj":
            return new, "obj"
        raise NotCovered(f"indexing a {ty}")

    def _UnaryOp(self, node: ast.UnaryOp) -> tuple[ast.expr, Any]:
        if isinstance(node.op, ast.Not):
            return ast.UnaryOp(node.op, self.condition(node.operand)), "bool"
        operand, ty = self.expr(node.operand)
        if ty == TENSOR and isinstance(node.op, ast.USub):
            return self.writer.operator_call("neg", [(operand, ty)])
        if holds_tensor(ty):
            raise NotCovered(f"unary {type(node.op).__name__} on a {ty}")
        result = "int" if ty == "bool" and isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)) else \
            ty if ty in ("int", "float") else "obj"
        return ast.UnaryOp(node.op, operand), result

    def _BinOp(self, node: ast.BinOp) -> tuple[ast.expr, Any]:
        left, left_type = self.expr(node.left)
        right, right_type = self.expr(node.right)
        op = type(node.op)
        if left_type == TENSOR and op in _BINARY:
            return self.writer.operator_call(_BINARY[op], [(left, left_type), (right, right_type)])
        if right_type == TENSOR and left_type in _NUMBERS and (op in _REFLECTED or op is ast.Div):
            if any(isinstance(n, ast.Call) for n in ast.walk(node.left)):
                raise NotCovered("a number computed by a call on the left of a tensor operator")
            if op is ast.Div:       # OracleTensor.__rtruediv__: at.mul(at.reciprocal(self), other)
                reciprocal = self.writer.operator_call("reciprocal", [(right, right_type)])
                return self.writer.operator_call("mul", [reciprocal, (left, left_type)])
            return self.writer.operator_call(_REFLECTED[op], [(right, right_type), (left, left_type)])
        if holds_tensor(left_type) or holds_tensor(right_type):
            raise NotCovered(f"{type(node.op).__name__} of a {left_type} and a {right_type}")
        return ast.BinOp(left, node.op, right), _arithmetic_type(op, left_type, right_type)

    def _BoolOp(self, node: ast.BoolOp) -> tuple[ast.expr, Any]:
        values = []
        ty = None
        env = self.env
        for value in node.values:
            new = Body(self.writer, self.fn, env, None).condition(value)
            _, value_type = Body(self.writer, self.fn, env, None).expr(value)
            ty = value_type if ty is None else unify(ty, value_type)
            values.append(new)
            # `x is None or len(x)`: x is not None on the right
            yes, no = Body(self.writer, self.fn, env, None).narrowed(value)
            env = no if isinstance(node.op, ast.Or) else yes
        return ast.BoolOp(node.op, values), ty if ty in ("bool", "int", "float", "obj") else "obj"

    def _Compare(self, node: ast.Compare) -> tuple[ast.expr, Any]:
        left, left_type = self.expr(node.left)
        comparators = [self.expr(c) for c in node.comparators]
        types_ = [left_type, *(t for _, t in comparators)]
        if len(node.ops) == 1 and type(node.ops[0]) in _COMPARE and TENSOR in types_[:2]:
            (right, right_type), op = comparators[0], type(node.ops[0])
            if left_type == TENSOR:
                return self.writer.operator_call(_COMPARE[op], [(left, left_type), (right, right_type)])
            if left_type in _NUMBERS:
                return self.writer.operator_call(_COMPARE_REFLECTED[op], [(right, right_type), (left, left_type)])
        for op, ty in zip(node.ops, types_):
            if not isinstance(op, (ast.Is, ast.IsNot)) and holds_tensor(ty):
                raise NotCovered(f"comparing a {ty}")
        for op, (_, ty) in zip(node.ops, comparators):
            if not isinstance(op, (ast.Is, ast.IsNot)) and holds_tensor(ty):
                raise NotCovered(f"comparing a {ty}")
        return ast.Compare(left, node.ops, [c for c, _ in comparators]), "bool"

    def _IfExp(self, node: ast.IfExp) -> tuple[ast.expr, Any]:
        test = self.condition(node.test)
        yes, no = self.narrowed(node.test)
        body, body_type = Body(self.writer, self.fn, yes, None).expr(node.body)
        orelse, else_type = Body(self.writer, self.fn, no, None).expr(node.orelse)
        return ast.IfExp(test, body, orelse), unify(body_type, else_type)

    def _Call(self, node: ast.Call) -> tuple[ast.expr, Any]:
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise NotCovered("a call with *args or **kwargs")
        func = node.func
        if isinstance(func, ast.Attribute):
            receiver = func.value
            if isinstance(receiver, ast.Name) and receiver.id not in self.env \
                    and self.fn.__globals__.get(receiver.id) is _AT:
                args = [self.expr(a) for a in node.args]
                kwargs = [(k.arg, *self.expr(k.value)) for k in node.keywords]
                return self.writer.operator_call(func.attr, args, kwargs)
            if self.is_math(receiver) and func.attr in _MATH_FUNCTIONS and not node.keywords:
                args = [self.expr(a) for a in node.args]
                if any(t not in ("int", "float") for _, t in args):
                    raise NotCovered(f"math.{func.attr} of a non-number")
                return ast.Call(func, [a for a, _ in args], []), "float"
            value, ty = self.expr(receiver)
            args = [self.expr(a) for a in node.args]
            if node.keywords:
                raise NotCovered("a method call with keyword arguments")
            if ty == TENSOR and func.attr in _METADATA:
                template, result = _METADATA[func.attr]
                receiver_text = ast.unparse(value)
                text = template.format(f"({receiver_text})" if not isinstance(value, ast.Name) else receiver_text)
                if func.attr in ("sizes", "scalar_type"):     # an attribute of the plain tensor
                    if args:
                        raise NotCovered(f"{func.attr}() with arguments")
                    return ast.parse(text, mode="eval").body, result
                if any(holds_tensor(t) for _, t in args):
                    raise NotCovered(f"{func.attr}() of a tensor")
                return ast.Call(ast.parse(text, mode="eval").body, [a for a, _ in args], []), result
            if isinstance(ty, str) and ty.endswith("[]") and func.attr in _LIST_METHODS and not holds_tensor(ty):
                if any(holds_tensor(t) for _, t in args):
                    raise NotCovered(f"a tensor in a list's {func.attr}")
                kind = _LIST_METHODS[func.attr]
                if func.attr == "append" and isinstance(receiver, ast.Name) and len(args) == 1:
                    self.env[receiver.id] = unify(ty, f"{args[0][1]}[]") if isinstance(args[0][1], str) else "obj[]"
                elif func.attr in ("append", "extend", "insert") and isinstance(receiver, ast.Name):
                    self.env[receiver.id] = "obj[]"
                result = ty if kind == "same" else ("obj" if ty == "[]" else ty[:-2]) if kind == "elem" else kind
                return ast.Call(ast.Attribute(value, func.attr, ast.Load()), [a for a, _ in args], []), result
            raise NotCovered(f"the method .{func.attr}() of a {ty} (line {node.lineno})")
        if not isinstance(func, ast.Name):
            raise NotCovered("a call of a computed function")
        name = func.id
        args = [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        if name in self.env:
            raise NotCovered(f"a call of the local {name}")
        value = self.fn.__globals__.get(name)
        if value is not None:
            if type(value) is not types.FunctionType or self.writer._helper_table.get(name) is not value \
                    or any(other.startswith(f"{name}__") for other in self.writer._helper_table):
                raise NotCovered(f"a call of {name}, which is no helper (or has overloads)")
            helper_name, result = self.writer.helper(value, [t for _, t in args], {k: t for k, (_, t) in kwargs.items()})
            return ast.Call(ast.Name(helper_name, ast.Load()), [a for a, _ in args],
                            [ast.keyword(k, v) for k, (v, _) in kwargs.items()]), result
        if not self.is_builtin(name) or name == "range" or kwargs:
            raise NotCovered(f"a call of {name}")
        if any(holds_tensor(t) for _, t in args):
            raise NotCovered(f"{name}() of a tensor")
        types_ = [t for _, t in args]
        result: Any = "obj"
        if name == "len":
            result = "int"
        elif name == "list" and len(types_) == 1 and isinstance(types_[0], str) and types_[0].endswith("[]"):
            result = types_[0]
        elif name in ("int", "float"):
            result = name
        elif name in ("min", "max", "abs") and types_ and len(set(types_)) == 1 and types_[0] in ("int", "float"):
            result = types_[0]
        elif name in ("min", "max") and len(types_) == 1 and types_[0] in ("int[]", "float[]"):
            result = types_[0][:-2]
        return ast.Call(func, [a for a, _ in args], []), result


def _arithmetic_type(op: type, left: Any, right: Any) -> Any:
    """The type of ``left <op> right`` on values that are no tensors."""
    numbers = {left, right}
    if numbers <= {"int", "bool"}:
        return "float" if op is ast.Div else "int" if op in (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod) \
            else "obj"
    if numbers <= {"int", "bool", "float"} and op in (ast.Add, ast.Sub, ast.Mult, ast.Div):
        return "float"
    if op is ast.Add and isinstance(left, str) and left.endswith("[]") and left == right:
        return left
    return "obj"


# --- the formula ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Generated:
    """A formula's generated source and what it binds; :func:`compile_kernel` runs it."""

    source: str
    names: dict[str, Any]
    function_name: str
    kept: tuple[str, ...]       # what the backward keeps besides saved tensors, in ``ctx.kept``'s order


def generate(formula: TorchFormula) -> Generated:
    """The formula's fast path as Python source (see the module docstring), or :class:`NotCovered`."""
    schema = formula.schema
    fn = formula.fn
    if fn is not formula.declared.fn or getattr(fn, "__wrapped__", None) is not None or fn.__closure__:
        raise NotCovered("a formula function made from another (an imported dialect's, a wrapper)")
    if any(a.annotation is not None for a in (*schema.arguments, *schema.returns)) or schema.out:
        raise NotCovered("a view, in-place or out= operator")
    if len(schema.returns) != 1 or schema_type(schema.returns[0].type) != TENSOR or not formula.all_differentiable:
        raise NotCovered("not one differentiable Tensor output")
    arguments = [a for a in schema.arguments if not a.is_out]
    if tuple(a.name for a in arguments) != formula.names:
        raise NotCovered("parameters named otherwise than the schema's arguments")
    env = {a.name: schema_type(a.type) for a in arguments}
    if any(holds_tensor(t) and t != TENSOR for t in env.values()):
        raise NotCovered("a Tensor? or Tensor[] argument")
    if any(name.startswith(PREFIX) or name == "ctx" for name in env):
        raise NotCovered("a parameter named like the generated code's own names")
    node = formula_def(formula)     # reads the facts first: a stale file is NotCovered, never raised below
    if formula.scalar_method_slots:
        raise NotCovered("a Scalar argument the formula calls c10::Scalar methods on")
    *body, last = node.body
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Tuple) and len(last.value.elts) == 2
            and isinstance(last.value.elts[1], ast.Name)):
        raise NotCovered("its last statement is not `return <outputs>, <backward>`")
    closure_name = last.value.elts[1].id
    nested = {s.name: s for s in body if isinstance(s, ast.FunctionDef)}
    closure = nested.get(closure_name)
    if closure is None:
        raise NotCovered(f"{closure_name} is not a nested def")
    statements = [s for s in body if not isinstance(s, ast.FunctionDef)]
    used = {n.id for s in (*statements, last.value.elts[0]) for n in ast.walk(s) if isinstance(n, ast.Name)}
    if used & set(nested):
        raise NotCovered("the forward uses a nested def")
    writer = Writer(formula)
    forward = Body(writer, fn, dict(env), None)
    forward_statements = forward.statements(statements)
    output, output_type = forward.expr(last.value.elts[0])
    if output_type != TENSOR:
        raise NotCovered(f"the forward returns a {output_type}")
    assigned = {n.id for s in statements for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    output_name = last.value.elts[0].id if isinstance(last.value.elts[0], ast.Name) else None
    if output_name in env:
        raise NotCovered("the forward returns an input")

    # the closure: its parameters, what it captures
    parameters = closure.args
    if parameters.vararg or parameters.kwarg or parameters.posonlyargs or parameters.defaults \
            or any(d is not None for d in parameters.kw_defaults) or len(parameters.args) != 1 \
            or [a.arg for a in parameters.kwonlyargs] not in ([], ["needs_input_grad"]):
        raise NotCovered("the backward's parameters are not one gradient (and needs_input_grad)")
    grad_name = parameters.args[0].arg
    if any(isinstance(n, (ast.Nonlocal, ast.Global, ast.FunctionDef, ast.Lambda)) for n in ast.walk(closure)
           if n is not closure):
        raise NotCovered("the backward has nonlocal, global or nested functions")
    local = {grad_name, *(a.arg for a in parameters.kwonlyargs)} | {
        n.id for n in ast.walk(closure) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    captured = sorted({n.id for n in ast.walk(closure) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                       and n.id in forward.env and n.id not in local})
    saved, kept = [], []
    for name in captured:
        ty = forward.env[name]
        if ty == TENSOR:
            if name == output_name and name not in env or name in env and name not in assigned:
                saved.append(name)
            else:
                raise NotCovered(f"the backward captures {name}, a tensor that is neither an input nor the output")
        elif holds_tensor(ty):
            raise NotCovered(f"the backward captures {name}, a {ty}")
        else:
            kept.append(name)
    gradient_slots = formula.gradient_slots
    closure_env = {grad_name: TENSOR, **{name: forward.env[name] for name in captured}}
    if parameters.kwonlyargs:
        closure_env["needs_input_grad"] = "bool[]"
    returns: list[Any] = []
    backward = Body(writer, fn, closure_env, returns)
    closure_statements = backward.statements(closure.body)
    allowed = {TENSOR, "Tensor?", "None"}
    if len(gradient_slots) == 1:
        if any(t not in allowed for t in returns) or not returns:
            raise NotCovered("the backward returns something other than a gradient")
    elif not always_returns(closure.body) or any(not (isinstance(t, tuple) and len(t) == len(gradient_slots)
                                                      and set(t) <= allowed) for t in returns):
        raise NotCovered(f"the backward does not always return {len(gradient_slots)} gradients")
    return Generated(_source(formula, writer, forward_statements, output, output_name, saved, kept, grad_name,
                             parameters.kwonlyargs != [], captured, closure_statements),
                     writer.names, formula._function_name, tuple(kept))


def _source(formula: TorchFormula, writer: Writer, forward: list[ast.stmt], output: ast.expr, output_name: str | None,
            saved: list[str], kept: list[str], grad: str, takes_mask: bool, captured: list[str],
            closure: list[ast.stmt]) -> str:
    names = formula.names
    tensors = [names[i] for i in formula.single_tensor_slots]
    signature = []
    for i, name in enumerate(names):
        if i == formula.first_keyword:
            signature.append("*")
        default = formula.defaults[i]
        if default is inspect.Parameter.empty:
            signature.append(name)
        else:
            writer.names[f"{PREFIX}default_{i}"] = default
            signature.append(f"{name}={PREFIX}default_{i}")
    positional = ", ".join(names[:formula.first_keyword])
    keywords = ", ".join(f"{n}={n}" for n in names[formula.first_keyword:])
    every = ", ".join(n for n in names)
    applied = ", ".join(f"{PREFIX}unwrap_if_dead({n})" if n in tensors else n for n in names)
    if not tensors:
        raise NotCovered("no tensor argument")
    is_tensor = " and ".join(f"isinstance({n}, {PREFIX}Tensor)" for n in tensors)
    requires = " or ".join(f"{n}.requires_grad" for n in tensors)
    output_text = ast.unparse(output)
    if output_name is None:
        forward = [*forward, ast.parse(f"{PREFIX}output = {output_text}").body[0]]
        output_text = f"{PREFIX}output"
    forward_text = "\n".join(ast.unparse(ast.fix_missing_locations(s)) for s in forward) or "pass"
    slots = {names[i]: i for i in formula.gradient_slots}
    closure_params = ", ".join([grad, *captured]) + (", *, needs_input_grad" if takes_mask else "")
    closure_text = textwrap.indent("\n".join(ast.unparse(ast.fix_missing_locations(s)) for s in closure), "    ")
    if len(slots) == 1:
        per_name = {next(iter(slots)): f"{PREFIX}gradients"}
    else:
        per_name = {name: f"{PREFIX}gradients[{k}]" for k, name in enumerate(slots)}
    returned = ", ".join(per_name.get(n, "None") for n in names)
    to_save = f"    {PREFIX}ctx.to_save = ({''.join(f'{n}, ' for n in saved)})"

    def backward(name: str, first: int) -> list[str]:
        """The Function's backward; ``first``: where the formula's arguments start among apply's."""
        mask = f"[{', '.join(f'{PREFIX}ctx.needs_input_grad[{first + i}]' for i in formula.gradient_slots)}]"
        closure_args = ", ".join([grad, *captured]) + (f", needs_input_grad={mask}" if takes_mask else "")
        leading = "None, " * first
        return [
            f"def {name}({PREFIX}ctx, {grad}):",
            f"    if {grad} is None:",
            f"        return ({leading}{', '.join('None' for _ in names)},)",
            *([f"    {''.join(f'{n}, ' for n in saved)}= {PREFIX}ctx.saved_tensors"] if saved else []),
            *([f"    {''.join(f'{n}, ' for n in kept)}= {PREFIX}ctx.kept"] if kept else []),
            f"    if {PREFIX}is_grad_enabled() or {PREFIX}forward_ad._current_level >= 0 or {PREFIX}transforms_active():",
            f"        {PREFIX}gradients = {PREFIX}closure({closure_args})",
            "    else:     # nothing can record: the closure's operators run below autograd",
            f"        with {PREFIX}below_autograd():",
            f"            {PREFIX}gradients = {PREFIX}closure({closure_args})",
            f"    return ({leading}{returned},)",
        ]

    def kernel(name: str, keyset: str, apply: str, general: str) -> list[str]:
        """The autograd kernel: the Function for a call it covers, else the general path's kernel."""
        return [
            f"def {name}({keyset}{', '.join(signature)}):",
            f"    if {PREFIX}is_grad_enabled() and {PREFIX}forward_ad._current_level < 0 and not {PREFIX}transforms_active() \\",
            f"            and {is_tensor} and ({requires}):",
            f"        return {apply}({keyset}{applied})",
            f"    return {general}({keyset}{positional}{', ' if positional and keywords else ''}{keywords})",
        ]

    set_modes = [
        f"    {PREFIX}set_grad_enabled(True)    # the caller's grad mode (the kernel took this path with it on)",
        f"    {PREFIX}set_fwd_grad_enabled(True)",
        "    try:",
    ]
    reset_modes = [
        "    finally:",
        f"        {PREFIX}set_grad_enabled(False)",
        f"        {PREFIX}set_fwd_grad_enabled(False)",
    ]
    op = formula.op_name
    lines = [
        f"# {op}: generated by formulas.torch.generate from {formula.fn.__code__.co_filename}:"
        f"{formula.fn.__code__.co_firstlineno}",
        *writer.helper_sources,
        f"def {PREFIX}closure({closure_params}):",
        closure_text,
        "# the override: the aten operator's autograd kernel",
        f"def {PREFIX}forward({PREFIX}ctx, {every}):",
        *set_modes,
        f"        with {PREFIX}below_autograd():",
        textwrap.indent(forward_text, " " * 12),
        *reset_modes,
        to_save,
        f"    {PREFIX}ctx.materialize_grads = False",
        *([f"    {PREFIX}ctx.kept = ({''.join(f'{n}, ' for n in kept)})"] if kept else []),
        f"    return {output_text}",
        *backward(f"{PREFIX}backward", 0),
        *kernel(f"{PREFIX}kernel", "", f"{PREFIX}apply", f"{PREFIX}general"),
        "# the custom op's autograd kernel: its forward redispatches to the op's kernel, which runs the",
        "# formula and hands back what the backward keeps",
        f"def {PREFIX}op_forward({PREFIX}ctx, {PREFIX}keyset, {every}):",
        *set_modes,
        f"        {output_text}, {PREFIX}kept = {PREFIX}redispatch({PREFIX}keyset, {every})",
        *reset_modes,
        to_save,
        f"    {PREFIX}ctx.materialize_grads = False",
        f"    {PREFIX}ctx.kept = {PREFIX}kept",
        f"    return {output_text}",
        *backward(f"{PREFIX}op_backward", 1),
        *kernel(f"{PREFIX}op_kernel", f"{PREFIX}keyset, ", f"{PREFIX}op_apply", f"{PREFIX}op_general"),
    ]
    return "\n".join(lines) + "\n"


def _namespace(formula: TorchFormula, generated: Generated) -> dict[str, Any]:
    """The generated source executed: its functions, in the namespace of the names it binds."""
    namespace: dict[str, Any] = {
        **generated.names, f"{PREFIX}Tensor": torch.Tensor, f"{PREFIX}unwrap_if_dead": unwrap_if_dead,
        f"{PREFIX}is_grad_enabled": torch.is_grad_enabled, f"{PREFIX}set_grad_enabled": torch._C._set_grad_enabled,
        f"{PREFIX}set_fwd_grad_enabled": torch._C._set_fwd_grad_enabled,
        f"{PREFIX}below_autograd": torch._C._AutoDispatchBelowAutograd,
        f"{PREFIX}forward_ad": torch.autograd.forward_ad,
        f"{PREFIX}transforms_active": torch._C._are_functorch_transforms_active,
    }
    exec(compile(generated.source, f"<generated {formula.op_name}>", "exec"), namespace)
    return namespace


def _applied(namespace: dict[str, Any], name: str, forward: str, backward: str) -> Callable[..., Any]:
    """``apply`` of the Function ``name`` made of two generated functions, below ``Function.apply``'s
    Python layer (see :attr:`TorchFormula.apply`); its node's ``apply`` is the backward itself."""
    function = type(name, (torch.autograd.Function,), {
        "__module__": __name__, "forward": staticmethod(namespace[forward]),
        "backward": staticmethod(namespace[backward])})
    function._backward_cls.apply = namespace[backward]
    return super(torch.autograd.Function, function).apply


def compile_kernel(formula: TorchFormula, generated: Generated, general: Callable[..., Any]) -> Callable[..., Any]:
    """The aten operator's autograd kernel from ``generated``; ``general`` takes the calls it does not."""
    namespace = _namespace(formula, generated)
    namespace[f"{PREFIX}general"] = general
    namespace[f"{PREFIX}apply"] = _applied(namespace, generated.function_name, f"{PREFIX}forward", f"{PREFIX}backward")
    kernel = namespace[f"{PREFIX}kernel"]
    kernel.__name__ = f"{formula.op_name}_formula_autograd"
    return kernel


def compile_custom_op(formula: TorchFormula, generated: Generated, general: Callable[..., Any],
                      redispatch: Callable[..., Any]) -> Callable[..., Any]:
    """A custom op's autograd kernel (``(keyset, *args, **kwargs)``) from ``generated``: its Function's
    forward calls ``redispatch(keyset, *values)`` for the outputs and the values ``generated.kept``
    names; ``general`` takes the calls the kernel does not."""
    namespace = _namespace(formula, generated)
    namespace[f"{PREFIX}op_general"] = general
    namespace[f"{PREFIX}redispatch"] = redispatch
    namespace[f"{PREFIX}op_apply"] = _applied(namespace, generated.function_name, f"{PREFIX}op_forward",
                                              f"{PREFIX}op_backward")
    kernel = namespace[f"{PREFIX}op_kernel"]
    kernel.__name__ = f"{formula.op_name}_formula_autograd"
    return kernel
