"""Python statement blocks of formula code -> C++ statements.

Two passes over a function body, both pure: :func:`infer_locals` gives every
local one C++ type (the unification of everything assigned to it, so ``x =
None`` on one branch and a tensor on the other make an ``at::Tensor``), then
:func:`translate_block` writes the statements. A local first bound at the top
level of the body is declared where it is bound (``auto`` when the value
already has the local's type); one first bound inside an ``if`` or a loop is
declared, value-initialised, at the start of the body so it outlives the block
as in Python.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

import libcst as cst

from transpiler.cpp import types as T
from transpiler.cpp.expressions import (
    TYPE_CONFLICT, Binding, Context, Untranslatable, coerce, cpp_name, cpp_string_literal, element_access, is_none,
    translate, translate_condition, unsupported,
)
from transpiler.cpp.types import Kind, PyType
from transpiler.dataflow import assigned_names, walk
from transpiler.raises import raised_error

INDENT = "  "


@dataclass(frozen=True)
class Locals:
    """Every name a body binds, with its unified type, and which of them start inside a block."""

    types: Mapping[str, PyType]
    hoisted: tuple[str, ...]


def walk_outside_functions(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and every node under it, parents first, not entering a nested ``def``."""
    return walk(node, lambda child: not isinstance(child, cst.FunctionDef))


def narrowing(test: cst.BaseExpression, context: Context, rebound: Mapping[str, PyType]
              ) -> tuple[Context, bool] | None:
    """For ``x is not None`` / ``x is None`` on an optional number, Scalar or list that the body
    never rebinds: the scope in which ``x`` is its value (``*x``), and whether that scope is the
    ``if`` body (else the ``else`` block), as Python's type narrowing reads it."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.left, cst.Name) and is_none(test.comparisons[0].comparator)
            and isinstance(test.comparisons[0].operator, (cst.Is, cst.IsNot))):
        return None
    name = test.left.value
    binding = context.names.get(name)
    if binding is None or binding.type.kind is not Kind.OPTIONAL or name in rebound:
        return None
    value = Binding(binding.type.elem, f"(*{binding.cpp})")
    return context.bind({name: value}), isinstance(test.comparisons[0].operator, cst.IsNot)


# --- pass 1: types of locals -------------------------------------------------------------------------

class _Inference:
    def __init__(self, context: Context) -> None:
        self.context = context
        self.types: dict[str, PyType] = {}
        self.first_nested: set[str] = set()

    def scope(self) -> Context:
        return self.context.bind({n: Binding(t, cpp_name(n)) for n, t in self.types.items()})

    def bind(self, name: str, ty: PyType, node: cst.CSTNode, nested: bool) -> None:
        if name in self.context.names and name not in self.types:
            binding = self.context.names[name]
            ty = self._unify(binding.type, ty, name, node)
        if name not in self.types:
            if nested:
                self.first_nested.add(name)
            self.types[name] = ty
        else:
            self.types[name] = self._unify(self.types[name], ty, name, node)

    @staticmethod
    def _unify(old: PyType, new: PyType, name: str, node: cst.CSTNode) -> PyType:
        try:
            return T.unify(old, new)
        except T.TypeConflict as conflict:
            raise Untranslatable(node, TYPE_CONFLICT, f"'{name}' is bound to values of types {conflict}; "
                                 "C++ needs one type per variable") from None

    def block(self, statements: Sequence[cst.BaseStatement], nested: bool) -> None:
        for statement in statements:
            self.statement(statement, nested)

    def statement(self, statement: cst.BaseStatement, nested: bool) -> None:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                self.small(small, nested)
        elif isinstance(statement, cst.If):
            outer = self.context
            narrowed = narrowing(statement.test, self.context, self.types)
            if narrowed is not None and narrowed[1]:
                self.context = narrowed[0]
            self.block(statement.body.body, True)
            self.context = outer
            if statement.orelse is not None:
                orelse = statement.orelse
                if narrowed is not None and not narrowed[1]:
                    self.context = narrowed[0]
                self.block([orelse] if isinstance(orelse, cst.If) else orelse.body.body, True)
                self.context = outer
        elif isinstance(statement, (cst.For, cst.While)):
            for _ in range(2):   # a second round sees what the first iteration bound
                if isinstance(statement, cst.For):
                    self.bind_loop_target(statement)
                self.block(statement.body.body, True)

    def bind_loop_target(self, statement: cst.For) -> None:
        if not isinstance(statement.target, cst.Name):
            raise unsupported(statement.target, "a loop target other than one name")
        name = statement.target.value
        ty = _loop_element_type(statement.iter, self.scope())
        # A loop variable lives in its loop (C++ scoping); it is hoisted only if bound elsewhere too.
        self.types[name] = self._unify(self.types[name], ty, name, statement) if name in self.types else ty

    def small(self, small: cst.BaseSmallStatement, nested: bool) -> None:
        if isinstance(small, (cst.Assign, cst.AnnAssign)):
            value = small.value
            if value is None:
                return
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            hint = self._hint(targets[0])
            ty = translate(value, self.scope(), hint).type
            for target in targets:
                self.target(target, ty, small, nested)
        elif isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
            ty = translate(small.value, self.scope()).type
            self.bind(small.target.value, self._unify(self.types.get(small.target.value, ty), ty,
                                                       small.target.value, small), small, nested)
        elif isinstance(small, cst.Expr) and _is_append(small.value):
            call = small.value
            owner = call.func.value.value
            ty = translate(call.args[0].value, self.scope()).type
            self.bind(owner, T.list_of(ty), small, nested)

    def _hint(self, target: cst.BaseExpression) -> PyType | None:
        if isinstance(target, cst.Name):
            return self.types.get(target.value) or (self.context.names[target.value].type
                                                    if target.value in self.context.names else None)
        return None

    def target(self, target: cst.BaseExpression, ty: PyType, node: cst.CSTNode, nested: bool) -> None:
        if isinstance(target, cst.Name):
            self.bind(target.value, ty, node, nested)
        elif isinstance(target, (cst.Tuple, cst.List)):
            if ty.kind is not Kind.TUPLE or len(ty.elems) != len(target.elements):
                raise unsupported(target, f"unpacking a {ty} into {len(target.elements)} names")
            for element, elem_type in zip(target.elements, ty.elems):
                self.target(element.value, elem_type, node, nested)
        elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
            self.bind(target.value.value, T.list_of(ty), node, nested)
        else:
            raise unsupported(target, "this assignment target")


def _is_append(expr: cst.BaseExpression) -> bool:
    return (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "append" and isinstance(expr.func.value, cst.Name)
            and len(expr.args) == 1 and expr.args[0].keyword is None)


def _loop_element_type(iterable: cst.BaseExpression, context: Context) -> PyType:
    if _range_args(iterable) is not None:
        return T.INT
    value = translate(iterable, context)
    if value.type.kind is not Kind.LIST:
        raise unsupported(iterable, f"a loop over a {value.type} (loop over range(...) or a list)")
    return value.type.elem


def _range_args(iterable: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    if (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range"
            and 1 <= len(iterable.args) <= 3 and all(a.keyword is None for a in iterable.args)):
        return [a.value for a in iterable.args]
    return None


def _counts_up_from_zero(bounds: list[cst.BaseExpression] | None) -> bool:
    """Whether ``range(*bounds)`` only yields non-negative ints (non-negative literal start, positive step)."""
    if bounds is None:
        return False
    if len(bounds) == 1:
        return True
    start_ok = isinstance(bounds[0], cst.Integer)
    step_ok = len(bounds) == 2 or (isinstance(bounds[2], cst.Integer) and int(bounds[2].value, 0) > 0)
    return start_ok and step_ok


def infer_locals(statements: Sequence[cst.BaseStatement], context: Context) -> Locals:
    """Unified types of the names a body binds (parameters keep their declared type)."""
    inference = _Inference(context)
    inference.block(statements, nested=False)
    unresolved = [n for n, t in inference.types.items() if _has_unknown(t)]
    if unresolved:
        raise unsupported(statements[0], f"an empty list whose element type is never known ('{unresolved[0]}')")
    hoisted = tuple(n for n in inference.types if n in inference.first_nested and n not in context.names)
    return Locals(dict(inference.types), hoisted)


def _has_unknown(ty: PyType) -> bool:
    return ty.kind is Kind.UNKNOWN or any(_has_unknown(e) for e in ty.elems)


# --- pass 2: statements -------------------------------------------------------------------------------

class _Writer:
    def __init__(self, context: Context, locals_: Locals, return_type: PyType | None) -> None:
        self.locals = locals_
        self.return_type = return_type
        self.declared = set(context.names) | set(locals_.hoisted)
        self.context = context.bind({n: Binding(t, cpp_name(n)) for n, t in locals_.types.items()
                                       if n not in context.names})

    def block(self, statements: Sequence[cst.BaseStatement], depth: int) -> Iterator[str]:
        for statement in statements:
            yield from self.statement(statement, depth)

    def statement(self, statement: cst.BaseStatement, depth: int) -> Iterator[str]:
        pad = INDENT * depth
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                yield from (pad + line for line in self.small(small, depth))
        elif isinstance(statement, cst.If):
            yield from self.if_(statement, depth, pad + "if")
        elif isinstance(statement, cst.For):
            yield from self.for_(statement, depth)
        elif isinstance(statement, cst.While):
            if statement.orelse is not None:
                raise unsupported(statement, "while ... else")
            test = translate_condition(statement.test, self.context)
            yield f"{pad}while ({test.text}) {{"
            yield from self.block(statement.body.body, depth + 1)
            yield f"{pad}}}"
        elif isinstance(statement, cst.FunctionDef):
            raise unsupported(statement, f"a nested function '{statement.name.value}'")
        else:
            raise unsupported(statement, f"a '{type(statement).__name__}' statement")

    def if_(self, statement: cst.If, depth: int, opener: str) -> Iterator[str]:
        pad = INDENT * depth
        test = translate_condition(statement.test, self.context)
        yield f"{opener} ({test.text}) {{"
        outer = self.context
        narrowed = narrowing(statement.test, self.context, self.locals.types)
        if narrowed is not None and narrowed[1]:
            self.context = narrowed[0]
        yield from self.block(statement.body.body, depth + 1)
        self.context = outer
        orelse = statement.orelse
        if isinstance(orelse, cst.If):
            yield from self.if_(orelse, depth, f"{pad}}} else if")
            return
        if orelse is not None:
            yield f"{pad}}} else {{"
            if narrowed is not None and not narrowed[1]:
                self.context = narrowed[0]
            yield from self.block(orelse.body.body, depth + 1)
            self.context = outer
        yield f"{pad}}}"

    def for_(self, statement: cst.For, depth: int) -> Iterator[str]:
        pad = INDENT * depth
        if statement.orelse is not None or statement.asynchronous is not None:
            raise unsupported(statement, "for ... else")
        name = statement.target.value
        var = cpp_name(name)
        bounds = _range_args(statement.iter)
        loop_var = f"{var}_" if name in self.declared else var
        if bounds is not None:
            texts = [translate(b, self.context).text for b in bounds]
            start, stop = ("0", texts[0]) if len(texts) == 1 else (texts[0], texts[1])
            step = texts[2] if len(texts) == 3 else "1"
            compare = ">" if step.startswith("-") else "<"
            update = f"++{loop_var}" if step == "1" else f"{loop_var} += {step}"
            yield f"{pad}for (int64_t {loop_var} = {start}; {loop_var} {compare} {stop}; {update}) {{"
        else:
            iterable = translate(statement.iter, self.context)
            yield f"{pad}for (const auto& {loop_var} : {iterable.text}) {{"
        if loop_var != var:
            yield f"{pad}{INDENT}{var} = {loop_var};"
        outer = self.context
        if loop_var == var and _counts_up_from_zero(bounds) and name not in assigned_names(statement.body.body):
            self.context = outer.bind({name: Binding(T.INT, var, nonnegative=True)})
        yield from self.block(statement.body.body, depth + 1)
        self.context = outer
        yield f"{pad}}}"

    def small(self, small: cst.BaseSmallStatement, depth: int) -> list[str]:
        if isinstance(small, cst.Pass):
            return []
        if isinstance(small, (cst.Break, cst.Continue)):
            return ["break;" if isinstance(small, cst.Break) else "continue;"]
        if isinstance(small, cst.Return):
            return [self.return_(small)]
        if isinstance(small, cst.Raise):
            return [self.raise_(small)]
        if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            if len(targets) != 1:
                raise unsupported(small, "chained assignment")
            return self.assign(targets[0], small.value, depth)
        if isinstance(small, cst.AugAssign):
            return [self.aug_assign(small)]
        if isinstance(small, cst.Expr) and _is_append(small.value):
            owner = small.value.func.value.value
            ty = self.context.names[owner].type
            value = translate(small.value.args[0].value, self.context, ty.elem)
            return [f"{cpp_name(owner)}.push_back({coerce(value, ty.elem)});"]
        if isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
            return []   # a docstring
        if isinstance(small, cst.Expr):
            raise unsupported(small, "an expression statement other than xs.append(v)")
        raise unsupported(small, f"a '{type(small).__name__}' statement")

    def raise_(self, node: cst.Raise) -> str:
        error = raised_error(node)
        if error is None:
            raise unsupported(node, "a raise other than raise NotImplementedError(\"...\") (or RuntimeError, "
                                    "ValueError, TypeError, IndexError) with one string literal")
        return f"{error.torch_check}(false, {cpp_string_literal(error.message)});"

    def return_(self, node: cst.Return) -> str:
        if self.return_type is None:
            raise unsupported(node, "a return here")
        if node.value is None:
            if self.return_type.kind is Kind.NONE:
                return "return;"
            raise unsupported(node, "a bare return in a function that returns a value")
        value = translate(node.value, self.context, self.return_type)
        if self.return_type.kind is Kind.TUPLE and value.type.kind is Kind.TUPLE:
            elements = node.value.elements if isinstance(node.value, cst.Tuple) else None
            if elements is not None:
                items = [translate(e.value, self.context, t) for e, t in zip(elements, self.return_type.elems)]
                return f"return {{{', '.join(coerce(i, t) for i, t in zip(items, self.return_type.elems))}}};"
        return f"return {coerce(value, self.return_type)};"

    def assign(self, target: cst.BaseExpression, value_node: cst.BaseExpression, depth: int) -> list[str]:
        if isinstance(target, cst.Name):
            name = target.value
            ty = self.context.names[name].type
            value = translate(value_node, self.context, ty)
            if name in self.declared:
                return [f"{cpp_name(name)} = {coerce(value, ty)};"]
            self.declared.add(name)
            if value.type.kind is Kind.LIST and value.type.elem.kind is Kind.UNKNOWN:
                return [f"{T.cpp_value(ty)} {cpp_name(name)};"]   # xs = []
            if value.type == ty and value.text != "{}" and ty.kind not in _SPELLED_OUT:
                return [f"auto {cpp_name(name)} = {value.text};"]
            return [f"{T.cpp_value(ty)} {cpp_name(name)} = {coerce(value, ty)};"]
        if isinstance(target, (cst.Tuple, cst.List)):
            names = [e.value.value for e in target.elements if isinstance(e.value, cst.Name)]
            if len(names) != len(target.elements):
                raise unsupported(target, "nested unpacking")
            value = translate(value_node, self.context)
            fresh = [n for n in names if n not in self.declared]
            same_types = value.type.kind is Kind.TUPLE and all(
                self.context.names[n].type == t for n, t in zip(names, value.type.elems))
            self.declared.update(names)
            if len(fresh) == len(names) and same_types:
                return [f"auto [{', '.join(cpp_name(n) for n in names)}] = {value.text};"]
            lines = [f"{T.cpp_value(self.context.names[n].type)} {cpp_name(n)};" for n in fresh]
            return lines + [f"std::tie({', '.join(cpp_name(n) for n in names)}) = {value.text};"]
        if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
            container = translate(target.value, self.context)
            if container.type.kind is not Kind.LIST or len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
                raise unsupported(target, "this item assignment")
            value = translate(value_node, self.context, container.type.elem)
            slot = element_access(container, target.slice[0].slice.value, self.context)
            return [f"{slot} = {coerce(value, container.type.elem)};"]
        raise unsupported(target, "this assignment target")

    def aug_assign(self, node: cst.AugAssign) -> str:
        if not isinstance(node.target, cst.Name):
            raise unsupported(node, "augmented assignment to anything but a name")
        binary = cst.BinaryOperation(left=node.target, operator=_AUGMENTED[type(node.operator)](),
                                     right=node.value) if type(node.operator) in _AUGMENTED else None
        if binary is None:
            raise unsupported(node, "this augmented assignment")
        target = self.context.names[node.target.value]
        if target.type.kind is Kind.TENSOR:
            raise unsupported(node, "an in-place update of a tensor (write x = x + y)")
        value = translate(binary, self.context)
        return f"{target.cpp} = {coerce(value, target.type)};"


# Locals declared with their type rather than ``auto`` (an int literal is only 32 bits in C++).
_SPELLED_OUT = (Kind.INT, Kind.FLOAT, Kind.BOOL, Kind.LIST)

_AUGMENTED = {cst.AddAssign: cst.Add, cst.SubtractAssign: cst.Subtract, cst.MultiplyAssign: cst.Multiply,
              cst.DivideAssign: cst.Divide, cst.FloorDivideAssign: cst.FloorDivide, cst.ModuloAssign: cst.Modulo}


@dataclass(frozen=True)
class Body:
    """A translated function body: its lines and the types of its locals."""

    lines: tuple[str, ...]
    locals: Locals


def translate_body(statements: Sequence[cst.BaseStatement], context: Context,
                   return_type: PyType | None, depth: int = 1) -> Body:
    """Translate a function body; ``return_type`` None means ``return`` is not allowed in it."""
    locals_ = infer_locals(statements, context)
    writer = _Writer(context, locals_, return_type)
    pad = INDENT * depth
    lines = [f"{pad}{T.cpp_value(locals_.types[n])} {cpp_name(n)}{{}};" for n in locals_.hoisted]
    lines.extend(writer.block(statements, depth))
    return Body(tuple(lines), locals_)


__all__ = ["Body", "Locals", "assigned_names", "infer_locals", "translate_body", "walk_outside_functions"]
