"""Dataflow over formula code: what kind of value every name holds.

A small abstract interpreter over libcst statements. Each value is one of four
:class:`ValueKind` (ordered, the join is ``max``): a Python scalar, tensor
metadata, a value read from a tensor's contents, or a tensor. It follows
aliases, tuple unpacking, rebinding, both arms of ``if``/``else`` (a name that
is a tensor on any path is a tensor), loops (to a fixpoint), containers (a list
holding a tensor is a tensor), comprehensions, augmented assignment and
container mutation (``xs.append(t)``, ``xs[i] = t``). Control flow that depends
on tensor values taints what it binds as value-derived.

The front-end runs it over a formula's forward to classify the backward's
captures; the lint rules run it over a backward (and helpers) to know which
Python operators act on tensors.
"""
from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Callable, Collection, Iterable, Iterator, Mapping, NamedTuple, Sequence, get_type_hints

import libcst as cst

from transpiler.metadata import METADATA_ATTRIBUTES, METADATA_METHODS


class ValueKind(enum.IntEnum):
    """Abstract value of a name; a larger kind absorbs a smaller one on join."""

    SCALAR = 0     # Python data not read from any tensor (literals, non-tensor inputs)
    METADATA = 1   # sizes, dims, numel, dtype, device, options and arithmetic over them
    VALUE = 2      # read from a tensor's contents: .item(), .tolist(), float(t)...
    TENSOR = 3     # a tensor, or a container/closure holding one


_LAYOUT_FIELDS = frozenset({
    "lpar", "rpar", "comma", "colon", "dot", "equal", "lbrace", "lbracket", "rbrace", "rbracket",
    "semicolon", "header", "footer", "leading_lines", "lines_after_decorators", "trailing_whitespace",
    "first_colon", "second_colon", "asynchronous", "newline", "empty_lines", "separator", "posonly_ind",
    "trailing_comma", "comment", "leading_whitespace",
})
_child_fields: dict[type, tuple[str, ...]] = {}


def _meaningful_fields(kind: type) -> tuple[str, ...]:
    """The fields of node class ``kind`` that may hold a meaningful child: no layout, no text
    (``Name.value``, a literal's digits: a ``str``), so that a leaf has none."""
    try:
        hints = get_type_hints(kind)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: the field is kept
        hints = {}
    return tuple(f.name for f in dataclasses.fields(kind) if f.name not in _LAYOUT_FIELDS
                 and not f.name.startswith("whitespace") and hints.get(f.name) is not str)


def syntax_children(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """The child nodes that carry meaning (no whitespace, brackets or commas), in source order.

    Much cheaper than libcst's ``node.children``, which runs a visitor per call; a list, not a
    generator (this runs for every node of every walk, and a leaf returns at once).
    """
    names = _child_fields.get(type(node))
    if names is None:
        names = _child_fields[type(node)] = _meaningful_fields(type(node))
    if not names:
        return ()
    known = _node_types.get     # :func:`is_node_type` inlined
    children = []
    for name in names:
        value = getattr(node, name)
        kind = type(value)
        if kind is list or kind is tuple:
            for item in value:
                node_type = known(type(item))
                if node_type or (node_type is None and is_node_type(type(item))):
                    children.append(item)
        else:
            node_type = known(kind)
            if node_type or (node_type is None and is_node_type(kind)):
                children.append(value)
    return children


def walk(node: cst.CSTNode, enter: Callable[[cst.CSTNode], bool] | None = None) -> Iterator[cst.CSTNode]:
    """``node`` and every node under it, parents first, in source order (iterative, and without the
    slow libcst visitor). A node below ``node`` for which ``enter`` is false is yielded, not entered."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if enter is None or current is node or enter(current):
            stack.extend(reversed(syntax_children(current)))


_node_types: dict[type, bool] = {}


def is_node_type(kind: type) -> bool:
    """``issubclass(kind, cst.CSTNode)``, cached (libcst's ABC checks are slow in hot loops)."""
    known = _node_types.get(kind)
    if known is None:
        known = _node_types[kind] = issubclass(kind, cst.CSTNode)
    return known


def join(*kinds: ValueKind) -> ValueKind:
    """The least kind that covers every argument (SCALAR for none)."""
    return max(kinds, default=ValueKind.SCALAR)


VALUE_METHODS = frozenset({"item", "tolist", "numpy", "__bool__", "__float__", "__int__"})
VALUE_BUILTINS = frozenset({"float", "int", "bool", "complex"})
METADATA_BUILTINS = frozenset({"len"})
OPAQUE_BUILTINS = frozenset({"isinstance", "issubclass", "str", "repr", "print", "type", "id", "hash", "callable"})
MUTATING_METHODS = frozenset({"append", "extend", "insert"})

# Python operators on tensors and the aten operator each stands for.
BINARY_OPERATORS: dict[type[cst.CSTNode], str] = {
    cst.Add: "add", cst.Subtract: "sub", cst.Multiply: "mul", cst.Divide: "div",
    cst.FloorDivide: "floor_divide", cst.Modulo: "remainder", cst.Power: "pow",
    cst.MatrixMultiply: "matmul", cst.BitAnd: "bitwise_and", cst.BitOr: "bitwise_or",
    cst.BitXor: "bitwise_xor", cst.LeftShift: "bitwise_left_shift",
    cst.RightShift: "bitwise_right_shift",
}
AUGMENTED_OPERATORS: dict[type[cst.CSTNode], str] = {
    cst.AddAssign: "add", cst.SubtractAssign: "sub", cst.MultiplyAssign: "mul",
    cst.DivideAssign: "div", cst.FloorDivideAssign: "floor_divide", cst.ModuloAssign: "remainder",
    cst.PowerAssign: "pow", cst.MatrixMultiplyAssign: "matmul", cst.BitAndAssign: "bitwise_and",
    cst.BitOrAssign: "bitwise_or", cst.BitXorAssign: "bitwise_xor",
}
UNARY_OPERATORS: dict[type[cst.CSTNode], str] = {cst.Minus: "neg", cst.BitInvert: "bitwise_not"}
COMPARISON_OPERATORS: dict[type[cst.CSTNode], str] = {
    cst.GreaterThan: "gt", cst.GreaterThanEqual: "ge", cst.LessThan: "lt",
    cst.LessThanEqual: "le", cst.Equal: "eq", cst.NotEqual: "ne",
}


def annotation_kind(annotation: str | None) -> ValueKind:
    """The kind a helper annotation declares (``Tensor``, ``list[Tensor]`` -> TENSOR)."""
    if annotation is None:
        return ValueKind.TENSOR
    if "Tensor" in annotation.replace("TensorOptions", ""):
        return ValueKind.TENSOR
    if any(word in annotation for word in ("ScalarType", "TensorOptions", "list[int]", "int")):
        return ValueKind.METADATA
    return ValueKind.SCALAR


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def at_operator(call: cst.Call) -> str | None:
    """``X`` for a call ``at.X(...)``, else None."""
    func = call.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "at":
        return func.attr.value
    return None


def _in_place(name: str) -> bool:
    """An in-place tensor operator's name (``mul_``), not a dunder."""
    return name.endswith("_") and not name.endswith("__")


@dataclass(frozen=True)
class BindingSite:
    """One place where the analysed code binds a name."""

    name: str
    target: cst.CSTNode            # the Name (or def/import) node bound
    value: cst.BaseExpression | None  # the right-hand side, when there is one
    statement: cst.BaseStatement   # the top-level statement of the analysed body holding it
    index: int                     # position of that statement in the analysed body
    conditional: bool              # inside if/for/while/try/with
    augmented: bool = False        # ``x += ...``


@dataclass(frozen=True)
class OperatorUse:
    """A Python operator applied to at least one tensor: it runs an aten operator."""

    node: cst.CSTNode              # the operator expression (BinaryOperation, ComparisonTarget, AugAssign...)
    operator: str                  # aten base name: ``mul``, ``gt``...


@dataclass
class FlowResult:
    """What :func:`analyze_body` found."""

    env: dict[str, ValueKind]                           # kinds at the end of the body
    bindings: dict[str, list[BindingSite]] = field(default_factory=dict)
    mutated: set[str] = field(default_factory=set)      # containers changed in place (``xs.append``)
    operator_uses: dict[cst.CSTNode, OperatorUse] = field(default_factory=dict)


class _Interpreter:
    """Walks statements in order, updating ``env``; joins at control-flow merges."""

    def __init__(
        self,
        env: dict[str, ValueKind],
        call_kind: Callable[[str, list[ValueKind]], ValueKind | None],
        skip: Callable[[cst.CSTNode], bool],
    ) -> None:
        self.env = env
        self.call_kind = call_kind
        self.skip = skip
        self.result = FlowResult(env)
        self._statement: cst.BaseStatement | None = None
        self._index = 0
        self._depth = 0            # > 0 inside compound statements
        self._taint = ValueKind.SCALAR  # VALUE inside control flow decided by tensor values
        self._subject = ValueKind.SCALAR  # the kind of the ``match`` subject being matched

    # ---- statements -------------------------------------------------------------
    def run_body(self, statements: Iterable[cst.BaseStatement]) -> None:
        for index, statement in enumerate(statements):
            self._statement, self._index = statement, index
            self.statement(statement)

    def block(self, body: cst.BaseSuite) -> None:
        self._depth += 1
        try:
            for statement in body.body:
                self.statement(statement)
        finally:
            self._depth -= 1

    def statement(self, node: cst.CSTNode) -> None:
        if self.skip(node):
            return
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                self.small_statement(small)
        elif isinstance(node, cst.BaseSmallStatement):  # the body of ``if x: y = 1``
            self.small_statement(node)
        elif isinstance(node, cst.If):
            self.branches(node.test, [node.body, node.orelse])
        elif isinstance(node, cst.Else):
            self.block(node.body)
        elif isinstance(node, (cst.For, cst.While)):
            self.loop(node)
        elif isinstance(node, cst.With):
            for item in node.items:
                kind = self.expr(item.item)
                if item.asname is not None:
                    self.bind(item.asname.name, kind, item.item)
            self.block(node.body)
        elif isinstance(node, (cst.Try, cst.TryStar)):
            self.branches(None, [node.body, *[h.body for h in node.handlers], node.orelse])
            if node.finalbody is not None:
                self.block(node.finalbody.body)
        elif isinstance(node, cst.Match):
            self._subject = self.expr(node.subject)
            self.branches(None, [*node.cases, None])
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self.bind_name(node.name.value, node.name, None, self.closure_kind(node))

    def branches(self, test: cst.BaseExpression | None, bodies: list[cst.CSTNode | None]) -> None:
        outer_taint = self._taint
        if test is not None and self.expr(test) >= ValueKind.VALUE:
            self._taint = ValueKind.VALUE
        before = dict(self.env)
        merged: dict[str, ValueKind] = {}
        for body in bodies:
            self.env.clear()
            self.env.update(before)
            if isinstance(body, cst.If):
                self.branches(body.test, [body.body, body.orelse])
            elif isinstance(body, cst.Else):
                self.block(body.body)
            elif isinstance(body, cst.MatchCase):      # captures hold (parts of) the subject
                for name in _pattern_names(body.pattern):
                    self.bind_name(name.value, name, None, join(self._subject, self._taint))
                if body.guard is not None:
                    self.expr(body.guard)
                self.block(body.body)
            elif body is not None:
                self.block(body)
            for name, kind in self.env.items():  # a missing body (None) is the path that keeps `before`
                merged[name] = join(merged.get(name, kind), kind)
        self.env.clear()
        self.env.update(merged)
        self._taint = outer_taint

    def loop(self, node: cst.For | cst.While) -> None:
        outer_taint = self._taint
        for _ in range(8):  # the lattice has 4 levels: a few rounds reach the fixpoint
            before = dict(self.env)
            if isinstance(node, cst.For):
                self.bind(node.target, self.expr(node.iter), node.iter)
            elif self.expr(node.test) >= ValueKind.VALUE:
                self._taint = ValueKind.VALUE
            self.block(node.body)
            for name, kind in before.items():
                self.env[name] = join(self.env.get(name, kind), kind)
            if self.env == before:
                break
        self._taint = outer_taint
        if node.orelse is not None:
            self.block(node.orelse.body)

    def small_statement(self, node: cst.BaseSmallStatement) -> None:
        if isinstance(node, cst.Assign):
            kind = self.expr(node.value)
            for target in node.targets:
                self.bind(target.target, kind, node.value)
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self.bind(node.target, self.expr(node.value), node.value)
        elif isinstance(node, cst.AugAssign):
            value = self.expr(node.value)
            current = self.expr(node.target)
            operator = AUGMENTED_OPERATORS.get(type(node.operator))
            if operator is not None and ValueKind.TENSOR in (value, current):
                self.result.operator_uses[node] = OperatorUse(node, operator)
            self.bind(node.target, join(value, current), node.value, augmented=True)
        elif isinstance(node, cst.Expr):
            self.expr(node.value)
        elif isinstance(node, (cst.Import, cst.ImportFrom)):
            names = node.names if not isinstance(node.names, cst.ImportStar) else ()
            for alias in names:
                bound = alias.asname.name if alias.asname else alias.name
                if isinstance(bound, cst.Name):
                    self.bind_name(bound.value, bound, None, ValueKind.SCALAR)
                else:
                    root = bound
                    while isinstance(root, cst.Attribute):
                        root = root.value
                    if isinstance(root, cst.Name):
                        self.bind_name(root.value, root, None, ValueKind.SCALAR)
        elif isinstance(node, cst.Del):  # recorded like a binding (the name changes); its kind is kept
            for name in _names_in_target(node.target):
                self.bind_name(name.value, name, None, self.env.get(name.value, ValueKind.SCALAR))
        elif isinstance(node, cst.Return) and node.value is not None:
            self.expr(node.value)

    # ---- binding ----------------------------------------------------------------
    def bind(self, target: cst.BaseExpression, kind: ValueKind, value: cst.BaseExpression | None,
             *, augmented: bool = False) -> None:
        kind = join(kind, self._taint)
        if isinstance(target, cst.Name):
            self.bind_name(target.value, target, value, kind, augmented=augmented)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            literal = value if isinstance(value, (cst.Tuple, cst.List)) else None
            pairwise = (
                literal is not None and len(literal.elements) == len(elements)
                and not any(isinstance(e, cst.StarredElement) for e in (*elements, *literal.elements))
            )
            for i, element in enumerate(elements):
                if pairwise:
                    inner = literal.elements[i].value
                    self.bind(element.value, self.expr(inner), inner)
                else:
                    self.bind(element.value, kind, value)
        elif isinstance(target, cst.StarredElement):
            self.bind(target.value, kind, value)
        elif isinstance(target, (cst.Subscript, cst.Attribute)):
            self.mutate(target.value, kind)

    def bind_name(self, name: str, target: cst.CSTNode, value: cst.BaseExpression | None,
                  kind: ValueKind, *, augmented: bool = False) -> None:
        self.env[name] = kind
        if self._statement is not None:
            binding = BindingSite(name, target, value, self._statement, self._index, self._depth > 0, augmented)
            self.result.bindings.setdefault(name, []).append(binding)

    def mutate(self, container: cst.BaseExpression, kind: ValueKind) -> None:
        """``xs[i] = v``, ``xs.append(v)``: the container now may hold ``v``."""
        while isinstance(container, (cst.Subscript, cst.Attribute)):
            container = container.value
        if isinstance(container, cst.Name) and container.value in self.env:
            self.env[container.value] = join(self.env[container.value], kind)
            self.result.mutated.add(container.value)

    def closure_kind(self, node: cst.FunctionDef | cst.Lambda | cst.ClassDef) -> ValueKind:
        """A function, lambda or class defined here holds whatever it reads from the scope,
        its default arguments (evaluated here, bound for every later call) included."""
        if isinstance(node, cst.ClassDef):
            return join(*(self.env[n.value] for n in walk(node) if isinstance(n, cst.Name) and n.value in self.env))
        defaults = [self.expr(d) for d in _defaults_and_decorators(node)]
        return join(*defaults, *(self.env[n.value] for n in closure_reads(node, set(self.env))))

    # ---- expressions ------------------------------------------------------------
    def expr(self, node: cst.CSTNode) -> ValueKind:
        if isinstance(node, cst.Name):
            return self.env.get(node.value, ValueKind.SCALAR)
        if isinstance(node, (cst.BaseNumber, cst.BaseString, cst.Ellipsis)):
            if isinstance(node, cst.FormattedString):
                return join(*(self.expr(p.expression) for p in node.parts
                              if isinstance(p, cst.FormattedStringExpression)))
            return ValueKind.SCALAR
        if isinstance(node, cst.Attribute):
            base = self.expr(node.value)
            if base == ValueKind.TENSOR:
                return ValueKind.METADATA if node.attr.value in METADATA_ATTRIBUTES else ValueKind.TENSOR
            return base
        if isinstance(node, cst.Call):
            return self.call(node)
        if isinstance(node, cst.Subscript):
            return join(self.expr(node.value), *(self._slice_kind(s.slice) for s in node.slice))
        if isinstance(node, cst.BinaryOperation):
            kind = join(self.expr(node.left), self.expr(node.right))
            operator = BINARY_OPERATORS.get(type(node.operator))
            if kind == ValueKind.TENSOR and operator is not None:
                self.result.operator_uses[node] = OperatorUse(node, operator)
            return kind
        if isinstance(node, cst.UnaryOperation):
            kind = self.expr(node.expression)
            if isinstance(node.operator, cst.Not):
                return ValueKind.VALUE if kind == ValueKind.TENSOR else kind
            operator = UNARY_OPERATORS.get(type(node.operator))
            if kind == ValueKind.TENSOR and operator is not None:
                self.result.operator_uses[node] = OperatorUse(node, operator)
            return kind
        if isinstance(node, cst.Comparison):
            kinds = [self.expr(node.left)]
            for target in node.comparisons:
                right = self.expr(target.comparator)
                operator = COMPARISON_OPERATORS.get(type(target.operator))
                if operator is not None and ValueKind.TENSOR in (kinds[-1], right):
                    self.result.operator_uses[target] = OperatorUse(target, operator)
                kinds.append(right)
            if isinstance(node.comparisons[0].operator, (cst.Is, cst.IsNot)):
                return join(*(min(k, ValueKind.METADATA) for k in kinds))
            return join(*kinds)
        if isinstance(node, cst.BooleanOperation):
            return join(self.expr(node.left), self.expr(node.right))
        if isinstance(node, cst.IfExp):
            test = self.expr(node.test)
            chosen_by_values = ValueKind.VALUE if test >= ValueKind.VALUE else ValueKind.SCALAR
            return join(self.expr(node.body), self.expr(node.orelse), chosen_by_values)
        if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
            return join(*(self.expr(e.value) for e in node.elements))
        if isinstance(node, cst.Dict):
            kinds = []
            for element in node.elements:
                if isinstance(element, cst.DictElement):
                    kinds += [self.expr(element.key), self.expr(element.value)]
                else:
                    kinds.append(self.expr(element.value))
            return join(*kinds)
        if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            return self.comprehension(node)
        if isinstance(node, cst.Lambda):
            return self.closure_kind(node)
        if isinstance(node, cst.NamedExpr):
            kind = self.expr(node.value)
            self.bind(node.target, kind, node.value)
            return kind
        if isinstance(node, (cst.StarredElement, cst.Element)):
            return self.expr(node.value)
        if isinstance(node, (cst.Await, cst.Yield)):
            return ValueKind.SCALAR
        return join(*(self.expr(child) for child in syntax_children(node)
                      if isinstance(child, cst.BaseExpression)))

    def _slice_kind(self, node: cst.BaseSlice) -> ValueKind:
        if isinstance(node, cst.Index):
            return self.expr(node.value)
        return join(*(self.expr(part) for part in (node.lower, node.upper, node.step) if part is not None))

    def comprehension(self, node: cst.ListComp | cst.SetComp | cst.GeneratorExp | cst.DictComp) -> ValueKind:
        saved = dict(self.env)
        statement, self._statement = self._statement, None  # comprehension targets are not bindings
        try:
            clause: cst.CompFor | None = node.for_in
            while clause is not None:
                self.bind(clause.target, self.expr(clause.iter), clause.iter)
                for condition in clause.ifs:
                    self.expr(condition.test)
                clause = clause.inner_for_in
            if isinstance(node, cst.DictComp):
                return join(self.expr(node.key), self.expr(node.value))
            return self.expr(node.elt)
        finally:
            self.env.clear()
            self.env.update(saved)
            self._statement = statement

    def call(self, node: cst.Call) -> ValueKind:
        args = [self.expr(a.value) for a in node.args]
        func = node.func
        operator = at_operator(node)
        if operator is not None:
            if _in_place(operator) and node.args:       # ``at.mul_(t, 2)``: ``t`` changed in place
                self.mutate(node.args[0].value, ValueKind.TENSOR)
            return ValueKind.TENSOR
        if isinstance(func, cst.Attribute):
            receiver = self.expr(func.value)
            method = func.attr.value
            if method in MUTATING_METHODS:  # list methods, before tensor methods: ``xs.append(t)``
                self.mutate(func.value, join(*args))
                return ValueKind.SCALAR
            if receiver == ValueKind.TENSOR:
                if _in_place(method):                   # ``t.mul_(2)``
                    self.mutate(func.value, receiver)
                if method in METADATA_METHODS:
                    return ValueKind.METADATA
                if method in VALUE_METHODS:
                    return ValueKind.VALUE
                return ValueKind.TENSOR
            declared = self.call_kind(dotted_name(func) or "", args)
            return declared if declared is not None else join(receiver, *args)
        if isinstance(func, cst.Name):
            name = func.value
            if name in self.env:  # a function or lambda defined in this body
                return join(self.env[name], *args)
            if name in VALUE_BUILTINS:
                arg = join(*args)
                return ValueKind.VALUE if arg == ValueKind.TENSOR else arg
            if name in METADATA_BUILTINS:
                return ValueKind.METADATA if join(*args) >= ValueKind.METADATA else ValueKind.SCALAR
            if name in OPAQUE_BUILTINS:
                return ValueKind.SCALAR
            declared = self.call_kind(name, args)
            if declared is not None:
                return declared
        return join(self.expr(func), *args)


def _pattern_names(pattern: cst.CSTNode) -> Iterator[cst.Name]:
    """The names a ``case`` pattern captures (``case [x, *rest]``, ``case {**kw}``, ``case P() as p``)."""
    stack = [pattern]
    while stack:
        current = stack.pop()
        yield from _pattern_captures(current)
        stack.extend(syntax_children(current))


def _pattern_captures(node: cst.CSTNode) -> Iterator[cst.Name]:
    kind = type(node)
    if kind is cst.MatchAs or kind is cst.MatchStar:
        if type(node.name) is cst.Name:
            yield node.name
    elif kind is cst.MatchMapping and type(node.rest) is cst.Name:
        yield node.rest


def _names_in_target(node: cst.CSTNode) -> Iterator[cst.Name]:
    kind = type(node)       # libcst's classes are ABCs: ``isinstance`` costs a Python call each, ``type`` none
    if kind is cst.Name:
        yield node
    elif kind is cst.Tuple or kind is cst.List:
        for element in node.elements:
            yield from _names_in_target(element.value)
    elif kind is cst.StarredElement:
        yield from _names_in_target(node.value)


def assigned_names(statements: Iterable[cst.BaseStatement]) -> set[str]:
    """Names the statements rebind with an assignment (``=``, ``+=``, annotated) or as a ``for``
    target, nested functions not entered: what the C++ translator can rebind (a closure's
    parameter among them is taken by value). Not Python's scope (:func:`scope_names`, which also
    counts walrus, ``with``/``except`` targets, imports and ``def`` names, less ``global`` ones)."""
    return {name for statement in statements if _not_a_function(statement)
            for node in walk(statement, _not_a_function) for name in assignment_names(node)}


def assignment_names(node: cst.CSTNode) -> tuple[str, ...]:
    """The names one node rebinds, as :func:`assigned_names` counts them (a tuple: this runs for
    every node of a closure, and most rebind nothing)."""
    if type(node) in _ASSIGNING:      # leaf classes of libcst: by type, as :func:`syntax_children` tests
        return tuple(name.value for name in _names_in_target(node.target))
    return ()


_ASSIGNING = frozenset({cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For})


def _not_a_function(node: cst.CSTNode) -> bool:
    return type(node) is not cst.FunctionDef


def helper_call_kinds(helper_returns: Mapping[str, str | None]) -> Callable[[str, list[ValueKind]], ValueKind | None]:
    """Kind of a call to a named helper, from its return annotation.

    A helper returning a tensor gives a tensor. A helper returning non-tensor
    data gives value-derived data when an argument was, else metadata when it
    was given tensors or metadata (helpers compute shapes), else a scalar.
    Unknown callables give None (the caller joins the argument kinds).
    """

    def kind(name: str, args: list[ValueKind]) -> ValueKind | None:
        short = name.rsplit(".", 1)[-1]
        if short not in helper_returns:
            return None
        declared = annotation_kind(helper_returns[short])
        if declared == ValueKind.TENSOR:
            return ValueKind.TENSOR
        strongest = join(*args)
        if strongest == ValueKind.VALUE:
            return ValueKind.VALUE
        return ValueKind.METADATA if strongest >= ValueKind.METADATA else declared

    return kind


def analyze_body(
    statements: Iterable[cst.BaseStatement],
    env: Mapping[str, ValueKind],
    *,
    helper_returns: Mapping[str, str | None] | None = None,
    skip: Callable[[cst.CSTNode], bool] = lambda node: False,
) -> FlowResult:
    """Run the dataflow over ``statements`` starting from ``env``.

    ``helper_returns`` maps callable names to return annotations; ``skip``
    names statements not to enter (the backward def inside a forward).
    """
    interpreter = _Interpreter(dict(env), helper_call_kinds(helper_returns or {}), skip)
    interpreter.run_body(statements)
    return interpreter.result


# ---- scopes: which names a closure reads from its enclosing function ----------------

_FUNCTION_LIKE = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


@dataclass(frozen=True)
class ScopeNames:
    """The names one function's own scope binds and declares."""

    local: frozenset[str]       # parameters and names its body binds, minus global/nonlocal ones
    globals: frozenset[str]     # declared ``global``
    nonlocals: frozenset[str]   # declared ``nonlocal``

    @property
    def shadowing(self) -> frozenset[str]:
        """Names that, read inside the function, do not mean an enclosing function's."""
        return self.local | self.globals


def scope_names(function: cst.FunctionDef | cst.Lambda) -> ScopeNames:
    """Python's scoping rules for ``function``, from one walk of its own body."""
    names = _param_names(function.params)
    if type(function) is cst.Lambda:
        return ScopeNames(frozenset(names), frozenset(), frozenset())
    declared: dict[type, set[str]] = {cst.Global: set(), cst.Nonlocal: set()}
    for node in _own_scope_nodes(function.body):
        if type(node) in declared:
            declared[type(node)].update(item.name.value for item in node.names)
        elif type(node) in _STORING:
            names.update(name.value for name in _stores(node))
    globals_, nonlocals = frozenset(declared[cst.Global]), frozenset(declared[cst.Nonlocal])
    return ScopeNames(frozenset(names) - globals_ - nonlocals, globals_, nonlocals)


def bound_names(function: cst.FunctionDef | cst.Lambda) -> set[str]:
    """Names local to ``function``: its parameters and every name its own body binds,
    minus those it declares ``global``/``nonlocal``."""
    return set(scope_names(function).local)


def method_receivers(function: cst.FunctionDef, methods: Collection[str]) -> frozenset[str]:
    """The names on which ``function``'s body, nested functions included, looks up a method in
    ``methods``: ``alpha`` and ``other`` for ``alpha.conj()`` and ``other.toDouble()`` (the
    reference engine's ``c10::Scalar`` parameters: :mod:`reference_engine.scalars`)."""
    return frozenset(node.value.value for node in walk(function.body)
                     if type(node) is cst.Attribute and type(node.value) is cst.Name and node.attr.value in methods)


def closure_reads(closure: cst.FunctionDef | cst.Lambda, enclosing: set[str]) -> Iterator[cst.Name]:
    """Every read, inside ``closure`` and the functions nested in it, of a name of the
    enclosing function (``enclosing``: its locals), in source order."""
    scope = scope_names(closure)
    yield from _reads(closure.body, [scope.shadowing], enclosing, scope.nonlocals)


def global_reads(function: cst.FunctionDef | cst.Lambda, shadowed: Collection[str] = ()) -> list[cst.Name]:
    """Every use, inside ``function`` and the functions nested in it, of a module-level name (a
    helper, an operator namespace, a constant, a builtin), called or passed as a value, in source
    order: a name no scope from the use out to ``function`` binds, nor ``shadowed`` (the locals of
    a function ``function`` stands inside). Python's rules, with :func:`scope_names`' bindings: a
    parameter or a name a body binds shadows the module's inside that function (a ``global`` one
    does not: assigning it uses it too); ``function``'s own defaults and decorators are read, no
    annotation is (declarations, never evaluated under ``from __future__ import annotations``);
    ``m.f`` uses ``m``, and a keyword argument's name is no use. One walk: each scope keeps its
    uses until it ends, when its bindings are known, and hands those it does not bind outwards."""
    outside = _Scope(set(shadowed))
    scopes = [outside]
    found: list[tuple[int, cst.Name]] = []
    order = 0
    pending: list[object] = [function]
    while pending:
        node = pending.pop()
        kind = type(node)       # leaf classes: ``type``, not the ABCs' slow ``isinstance``
        if kind is cst.Name:
            scopes[-1].uses.append((order, node))
            order += 1
        elif kind is cst.Attribute or kind is cst.Arg:
            pending.append(node.value)
        elif kind is _Scope:        # a scope ends: its uses of names it does not bind go outwards
            scopes.pop()
            local = node.local - node.globals - node.nonlocals
            for use in node.uses:
                if use[1].value in node.globals:
                    found.append(use)
                elif use[1].value not in local:
                    scopes[-1].uses.append(use)
        elif kind is _Enter:
            scopes.append(node.scope)
        elif kind is cst.FunctionDef or kind is cst.Lambda:
            if kind is cst.FunctionDef and node is not function:     # ``function``'s own name is the module's
                scopes[-1].local.add(node.name.value)
            inner = _Scope(_param_names(node.params))
            pending += (inner, node.body, _Enter(inner))
            pending.extend(reversed(list(_defaults_and_decorators(node))))
        elif kind in _COMPREHENSIONS:
            inner = _Scope(set(), comprehension=True)
            pending += (inner, *_comprehension_parts(node, inner), _Enter(inner), node.for_in.iter)
        elif kind is cst.Global or kind is cst.Nonlocal:
            declared = scopes[-1].globals if kind is cst.Global else scopes[-1].nonlocals
            declared.update(item.name.value for item in node.names)
        elif kind is cst.ClassDef:
            scopes[-1].local.add(node.name.value)
            pending.extend(reversed([*(d.decorator for d in node.decorators),
                                     *(a.value for a in (*node.bases, *node.keywords))]))
        elif kind is cst.Import or kind is cst.ImportFrom:
            scopes[-1].local.update(name.value for name in _stores(node))
        elif kind is not cst.Annotation:
            if kind in _STORING:    # a walrus in a comprehension binds in the function around it
                binding = next(s for s in reversed(scopes) if not s.comprehension) if kind is cst.NamedExpr else scopes[-1]
                binding.local.update(name.value for name in _stores(node))
            pending.extend(reversed(syntax_children(node)))
    found += [use for use in outside.uses if use[1].value not in outside.local]
    return [name for _, name in sorted(found, key=lambda use: use[0])]


class _Scope:
    """A scope :func:`global_reads` is in: the names it binds and declares, the uses it keeps until it
    ends; on the walk's stack, below its body, it marks where the scope ends."""

    __slots__ = ("comprehension", "globals", "local", "nonlocals", "uses")

    def __init__(self, local: set[str], comprehension: bool = False) -> None:
        self.local = local
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()
        self.uses: list[tuple[int, cst.Name]] = []
        self.comprehension = comprehension


class _Enter(NamedTuple):
    """On :func:`global_reads`' stack, above a scope's body: where the scope begins."""

    scope: _Scope


def _comprehension_parts(node, scope: _Scope) -> list[cst.CSTNode]:
    """A comprehension's parts evaluated in its own ``scope`` (its targets bound there), in reverse
    source order, for :func:`global_reads`' stack: every part but the first iterable."""
    clause = node.for_in
    parts: list[cst.CSTNode] = []
    while clause is not None:
        if clause is not node.for_in:
            parts.append(clause.iter)
        scope.local.update(n.value for n in _names_in_target(clause.target))
        parts.extend(condition.test for condition in clause.ifs)
        clause = clause.inner_for_in
    parts.extend([node.key, node.value] if type(node) is cst.DictComp else [node.elt])
    parts.reverse()
    return parts


def _param_names(params: cst.Parameters) -> set[str]:
    """The names a function's parameters bind (``*args`` and ``**kwargs`` included)."""
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    for star in (params.star_arg, params.star_kwarg):
        if type(star) is cst.Param:
            names.add(star.name.value)
    return names


def _reads(node: cst.CSTNode, scopes: list[set[str]], enclosing: set[str], nonlocals: set[str]) -> Iterator[cst.Name]:
    kind = type(node)
    if kind is cst.Name:
        if node.value in enclosing and (node.value in nonlocals or not any(node.value in s for s in scopes)):
            yield node
    elif kind is cst.FunctionDef or kind is cst.Lambda:
        for default in _defaults_and_decorators(node):
            yield from _reads(default, scopes, enclosing, nonlocals)
        scope = scope_names(node)
        yield from _reads(node.body, [*scopes, scope.shadowing], enclosing, nonlocals | scope.nonlocals)
    elif kind in _COMPREHENSIONS:
        yield from _comprehension_reads(node, scopes, enclosing, nonlocals)
    else:
        for child in _loaded_children(node):
            yield from _reads(child, scopes, enclosing, nonlocals)


def _comprehension_reads(node, scopes: list[set[str]], enclosing: set[str], nonlocals: set[str]) -> Iterator[cst.Name]:
    targets: set[str] = set()
    clause = node.for_in
    first = True
    parts: list[cst.CSTNode] = []
    while clause is not None:
        # The first iterable is evaluated outside the comprehension's scope.
        if first:
            yield from _reads(clause.iter, scopes, enclosing, nonlocals)
            first = False
        else:
            parts.append(clause.iter)
        targets.update(n.value for n in _names_in_target(clause.target))
        parts.extend(condition.test for condition in clause.ifs)
        clause = clause.inner_for_in
    parts.extend([node.key, node.value] if type(node) is cst.DictComp else [node.elt])
    inner = [*scopes, targets]
    for part in parts:
        yield from _reads(part, inner, enclosing, nonlocals)


def _defaults_and_decorators(node: cst.FunctionDef | cst.Lambda) -> Iterator[cst.CSTNode]:
    params = node.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.default is not None:
            yield param.default
    if isinstance(node, cst.FunctionDef):
        yield from (d.decorator for d in node.decorators)


_NO_READS = (cst.Global, cst.Nonlocal, cst.Import, cst.ImportFrom, cst.AsName)


def _loaded_children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Children of ``node`` that may read names (not attribute names, keywords or pure stores)."""
    kind = type(node)
    if kind is cst.Attribute or kind is cst.Arg or kind is cst.NamedExpr:
        yield node.value
    elif kind in _NO_READS:
        return
    elif kind is cst.AssignTarget:
        yield from _target_loads(node.target)
    elif kind is cst.AugAssign:
        yield from _target_loads(node.target)
        yield node.value
    elif kind is cst.AnnAssign or kind is cst.For or kind is cst.CompFor:
        for child in syntax_children(node):
            if child is node.target:
                yield from _target_loads(child)
            else:
                yield child
    elif kind is cst.ClassDef:
        yield from (d.decorator for d in node.decorators)
        yield from (a.value for a in (*node.bases, *node.keywords))
    else:
        yield from syntax_children(node)


def _target_loads(target: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """What a store target reads: the container and index of ``x[i] = v``, the object of ``x.a = v``."""
    if isinstance(target, (cst.Subscript, cst.Attribute)):
        yield target
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_loads(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_loads(target.value)


_TARGET_BINDERS = (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.Del)


_STORING = frozenset({*_TARGET_BINDERS, cst.AsName, cst.MatchAs, cst.MatchStar, cst.MatchMapping, cst.FunctionDef,
                      cst.ClassDef, cst.Import, cst.ImportFrom})     # the only kinds :func:`_stores` finds names in


def _stores(node: cst.CSTNode) -> Iterator[cst.Name]:
    """Names a single node binds (``as`` names of with/except/import included)."""
    kind = type(node)
    if kind in _TARGET_BINDERS:
        yield from _names_in_target(node.target)
    elif kind is cst.AsName:
        yield from _names_in_target(node.name)
    elif kind is cst.MatchAs or kind is cst.MatchStar or kind is cst.MatchMapping:
        yield from _pattern_captures(node)
    elif kind is cst.FunctionDef or kind is cst.ClassDef:
        yield node.name
    elif (kind is cst.Import or kind is cst.ImportFrom) and type(node.names) is not cst.ImportStar:
        for alias in node.names:
            if alias.asname is None:  # ``import a.b`` binds ``a``
                root = alias.name
                while type(root) is cst.Attribute:
                    root = root.value
                if type(root) is cst.Name:
                    yield root


def _own_scope_nodes(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Nodes in ``node`` that belong to the same scope: nested functions, classes, lambdas
    and comprehension bodies are not entered (their names are their own), but a
    nested def's own name and a comprehension's first iterable are."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if type(current) in _FUNCTION_LIKE:
            continue
        if type(current) in _COMPREHENSIONS:
            stack.extend(_walrus_targets(current))
            continue
        stack.extend(syntax_children(current))


def _walrus_targets(comprehension: cst.CSTNode) -> Iterator[cst.NamedExpr]:
    """``(y := ...)`` inside a comprehension binds ``y`` in the enclosing function."""
    stack = [comprehension]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.NamedExpr):
            yield current
        elif not isinstance(current, _FUNCTION_LIKE):
            stack.extend(syntax_children(current))
