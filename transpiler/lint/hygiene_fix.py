"""Fixes of the hygiene rules of ``torch.autograd.Function`` (DB110, DB111), planned as edits.

Plan, then transform (as :mod:`transpiler.lint.fix`): each planner reads the
Function around a finding with libcst and either returns the edits that fix
it, keyed by the original nodes, or None where a precondition fails (the fix
is then not offered; the finding stands). :mod:`transpiler.lint.function_fix`
applies the edits of every planner in one transform.

- DB111 (safe): ``ctx.save_for_backward(x, w)`` whose backward reads only
  ``x.shape`` becomes ``ctx.x_shape = x.shape; ctx.save_for_backward(w)``;
  backward's ``x, w = ctx.saved_tensors`` loses ``x`` and ``x.shape`` reads
  ``ctx.x_shape`` (``x.size(0)``: ``ctx.x_shape[0]``).
- DB110 (unsafe: an in-place change of the tensor after forward then raises
  torch's error): ``ctx.w = w`` leaves forward, ``w`` joins the one
  ``ctx.save_for_backward`` (placed where the last of them was), backward
  unpacks it from ``ctx.saved_tensors`` and reads ``w`` for ``ctx.w``.

Preconditions (else no fix): the kept values are plain names not rebound
between where they were kept and where the save now is; there is at most one
``save_for_backward``, a top-level statement with plain arguments; backward
unpacks ``ctx.saved_tensors`` once, at its top level, into names; no other
method reads the saved tensors or the attribute; the new names are free.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import PositionProvider

SAVED_TENSORS = ("saved_tensors", "saved_variables")
# metadata method -> (the ctx attribute suffix, what forward stores, whether an argument indexes it)
METADATA_METHODS = {
    "size": ("shape", "{x}.shape", True), "stride": ("stride", "{x}.stride()", True),
    "dim": ("ndim", "{x}.dim()", False), "ndimension": ("ndim", "{x}.dim()", False),
    "numel": ("numel", "{x}.numel()", False), "nelement": ("numel", "{x}.numel()", False),
    "element_size": ("element_size", "{x}.element_size()", False),
    "get_device": ("get_device", "{x}.get_device()", False),
    "is_contiguous": ("is_contiguous", "{x}.is_contiguous()", False),
    "is_floating_point": ("is_floating_point", "{x}.is_floating_point()", False),
    "is_complex": ("is_complex", "{x}.is_complex()", False),
}
METADATA_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "layout", "is_cuda", "is_sparse",
                                 "is_quantized", "is_meta", "itemsize"})


@dataclass
class Edits:
    """Edits keyed by original libcst nodes; applied together by one transform."""

    replace: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)          # node -> new node
    statements: dict[cst.BaseStatement, list[cst.BaseStatement]] = field(default_factory=dict)  # -> [] removes
    top_of: dict[cst.FunctionDef, list[cst.BaseStatement]] = field(default_factory=dict)   # prepended to a body
    decorate: set[cst.FunctionDef] = field(default_factory=set)                   # gets @once_differentiable

    def touches(self, other: "Edits") -> bool:
        """Whether these edits and ``other`` change a node in common."""
        mine = {*self.replace, *self.statements, *self.top_of}
        return bool(mine & {*other.replace, *other.statements, *other.top_of})

    def update(self, other: "Edits") -> None:
        """Add ``other``'s edits to these."""
        self.replace.update(other.replace)
        self.statements.update(other.statements)
        self.top_of.update(other.top_of)
        self.decorate |= other.decorate


@dataclass(frozen=True)
class FunctionClass:
    """A class of the module with its methods (the last definition of each name)."""

    node: cst.ClassDef
    methods: dict[str, cst.FunctionDef]

    @staticmethod
    def of(node: cst.ClassDef) -> "FunctionClass":
        """The ``torch.autograd.Function`` class ``node`` with its methods by name."""
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        return FunctionClass(node, {s.name.value: s for s in body if isinstance(s, cst.FunctionDef)})

    @property
    def keeper(self) -> cst.FunctionDef | None:
        """The method where saving belongs: ``setup_context`` if the class has one, else ``forward``."""
        return self.methods.get("setup_context") or self.methods.get("forward")


# --- DB111: keep the metadata, not the tensor ------------------------------------------------

def metadata_edits(cls: FunctionClass, elements: list[cst.Name], positions) -> Edits | None:
    """The edits that replace the saved ``elements`` (arguments of one save call) by their metadata."""
    keeper, backward = cls.keeper, cls.methods.get("backward")
    if keeper is None or backward is None or any(_reads_saved(m) for n, m in cls.methods.items()
                                                 if m is not keeper and n != "backward"):
        return None
    save = _single_save(keeper)
    unpack = _unpacking(backward)
    if save is None or unpack is None:
        return None
    save_statement, call = save
    arguments = [a.value for a in call.args]
    targets = [e.value for e in unpack.body[0].targets[0].target.elements]
    if len(targets) != len(arguments) or any(not isinstance(t, cst.Name) for t in targets):
        return None
    forward_ctx, backward_ctx = _ctx_name(keeper), _ctx_name(backward)
    taken = _attributes(cls.node)
    edits = Edits()
    stores: dict[str, str] = {}                      # ctx attribute -> what forward stores
    removed: set[int] = set()
    for element in elements:
        index = next((i for i, a in enumerate(arguments) if a is element), None)
        if index is None or not isinstance(element, cst.Name):
            return None
        local = targets[index].value
        reads = _metadata_reads(backward, local, unpack)
        if not reads:
            return None
        for use, (suffix, stored, argument) in reads.items():
            attribute = f"{local}_{suffix}"
            if attribute in taken:
                return None
            stores[attribute] = stored.format(x=element.value)
            new: cst.BaseExpression = cst.Attribute(cst.Name(backward_ctx), cst.Name(attribute))
            if argument is not None:
                new = cst.Subscript(new, [cst.SubscriptElement(cst.Index(argument))])
            edits.replace[use] = new
        removed.add(index)
    kept_arguments = [a for i, a in enumerate(call.args) if i not in removed]
    new_statements = [cst.parse_statement(f"{forward_ctx}.{attribute} = {stored}")
                      for attribute, stored in sorted(stores.items())]
    if kept_arguments:
        new_call = call.with_changes(args=_comma_separated(kept_arguments))
        new_statements.append(save_statement.with_changes(body=[cst.Expr(new_call)]))
    edits.statements[save_statement] = new_statements
    names = [t.value for i, t in enumerate(targets) if i not in removed]
    edits.statements[unpack] = [_unpack_statement(names, unpack)] if names else []
    return edits


def _metadata_reads(backward: cst.FunctionDef, name: str, unpack: cst.SimpleStatementLine):
    """use node -> (attribute suffix, what forward stores, index argument or None), when every use of
    ``name`` in backward is a metadata read with a fix; None otherwise."""
    collector = _Uses(name)
    backward.visit(collector)
    unpack_targets = {id(e.value) for e in unpack.body[0].targets[0].target.elements}
    if collector.rebound - unpack_targets or collector.other:
        return None
    reads = {}
    for use in collector.attributes:
        reads[use] = (use.attr.value, f"{{x}}.{use.attr.value}", None)
    for use in collector.calls:
        method = use.func.attr.value
        suffix, stored, indexable = METADATA_METHODS[method]
        if use.args and not (indexable and len(use.args) == 1 and use.args[0].keyword is None
                             and use.args[0].star == ""):
            return None
        reads[use] = (suffix, stored, use.args[0].value if use.args else None)
    return reads


class _Uses(cst.CSTVisitor):
    """The uses of one name in a function: metadata reads, rebinding, anything else."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.attributes: list[cst.Attribute] = []
        self.calls: list[cst.Call] = []
        self.rebound: set[int] = set()
        self.other = 0
        self._seen: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and self._is_name(func.value) and func.attr.value in METADATA_METHODS:
            self.calls.append(node)
            self._seen.add(id(func.value))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._seen.add(id(node.keyword))          # ``f(x=...)``: a keyword, not the name

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._seen.add(id(node.attr))                 # ``ctx.x``: an attribute, not the name
        if self._is_name(node.value) and id(node.value) not in self._seen:
            if node.attr.value in METADATA_ATTRIBUTES:
                self.attributes.append(node)
                self._seen.add(id(node.value))

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._bound(node.target)

    def visit_Param(self, node: cst.Param) -> None:
        if node.name.value == self.name:
            self.other += 1

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name and id(node) not in self._seen and id(node) not in self.rebound:
            self.other += 1

    def _bound(self, target: cst.BaseExpression) -> None:
        elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else [target]
        for element in elements:
            value = element.value if isinstance(element, cst.Element) else element
            if self._is_name(value):
                self.rebound.add(id(value))

    def _is_name(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Name) and node.value == self.name


# --- DB110: save_for_backward instead of a ctx attribute ---------------------------------------

def attribute_edits(cls: FunctionClass, assignments: list[cst.SimpleStatementLine]) -> Edits | None:
    """The edits that move the ``ctx.<attr> = name`` ``assignments`` (top-level statements of the
    keeping method) into its one ``ctx.save_for_backward``."""
    keeper, backward = cls.keeper, cls.methods.get("backward")
    if keeper is None or backward is None:
        return None
    forward_ctx, backward_ctx = _ctx_name(keeper), _ctx_name(backward)
    body = list(keeper.body.body) if isinstance(keeper.body, cst.IndentedBlock) else []
    moved: list[tuple[str, str, int]] = []            # (attribute, value name, statement index)
    for statement in assignments:
        if statement not in body:
            return None
        target, value = _attribute_assignment(statement, forward_ctx)
        if target is None:
            return None
        moved.append((target, value, body.index(statement)))
    attributes = {a for a, _, _ in moved}
    if any(_reads_attribute(m, forward_ctx if m is keeper else _ctx_name(m), attributes)
           for n, m in cls.methods.items() if n != "backward") or \
            any(_reads_saved(m) for n, m in cls.methods.items() if m is not keeper and n != "backward"):
        return None
    save = _single_save(keeper)
    if save is None and any(isinstance(n, cst.Call) and _is_save(n) for n in walk(keeper)):
        return None                                   # a save that is not one plain top-level call
    unpack = _unpacking(backward)
    existing = [a.value for a in save[1].args] if save else []
    if save is not None and (unpack is None or len(unpack.body[0].targets[0].target.elements) != len(existing)
                             or any(not isinstance(a, cst.Name) for a in existing)):
        return None
    if save is None and _reads_saved(backward):
        return None
    backward_names = _names(backward)
    if attributes & backward_names or len(attributes) != len(moved):
        return None
    moving = [(value, index) for _, value, index in moved]
    if save is not None:
        moving += [(a.value, body.index(save[0])) for a in existing]
    last = max(index for _, index in moving)
    for value, index in moving:                        # not rebound between where it was and the save
        if any(value in _stored_names(s) for s in body[index + 1:last + 1]):
            return None
    edits = Edits()
    names = [a.value for a in existing] + [value for _, value, _ in moved]
    new_save = cst.parse_statement(f"{forward_ctx}.save_for_backward({', '.join(names)})")
    for statement in assignments:
        edits.statements[statement] = []
    if save is not None:
        edits.statements[save[0]] = []
    edits.statements[body[last]] = [new_save]          # where the last of them was
    locals_ = [t.value.value for t in unpack.body[0].targets[0].target.elements] if unpack else []
    new_unpack = cst.parse_statement(f"{_targets(locals_ + [a for a, _, _ in moved])} = {backward_ctx}.saved_tensors")
    if unpack is not None:
        edits.statements[unpack] = [new_unpack]
    else:
        edits.top_of[backward] = [new_unpack]
    collector = _CtxReads(backward_ctx, attributes)
    backward.visit(collector)
    for read in collector.reads:
        edits.replace[read] = cst.Name(read.attr.value)
    return edits


def _attribute_assignment(statement: cst.SimpleStatementLine, ctx: str) -> tuple[str | None, str | None]:
    """(attribute, value name) of ``ctx.<attribute> = <name>``."""
    if len(statement.body) != 1 or not isinstance(statement.body[0], cst.Assign):
        return None, None
    assign = statement.body[0]
    if len(assign.targets) != 1 or not isinstance(assign.value, cst.Name):
        return None, None
    target = assign.targets[0].target
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == ctx:
        return target.attr.value, assign.value.value
    return None, None


class _CtxReads(cst.CSTVisitor):
    def __init__(self, ctx: str, attributes: set[str]) -> None:
        super().__init__()
        self.ctx, self.attributes = ctx, attributes
        self.reads: list[cst.Attribute] = []

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name) and node.value.value == self.ctx and node.attr.value in self.attributes:
            self.reads.append(node)


def _reads_attribute(method: cst.FunctionDef, ctx: str | None, attributes: set[str]) -> bool:
    """Whether ``method`` uses ``ctx.<attribute>`` other than by assigning it."""
    collector = _CtxReads(ctx or "", attributes)
    method.visit(collector)
    assigned = {id(t.target) for n in walk(method) if isinstance(n, cst.Assign) for t in n.targets}
    return any(id(read) not in assigned for read in collector.reads)


# --- shared ----------------------------------------------------------------------------------

def _single_save(method: cst.FunctionDef) -> tuple[cst.SimpleStatementLine, cst.Call] | None:
    """The one ``ctx.save_for_backward(a, b)``: a top-level statement, positional plain arguments."""
    calls = [n for n in walk(method) if isinstance(n, cst.Call) and _is_save(n)]
    if len(calls) != 1 or any(a.keyword is not None or a.star for a in calls[0].args):
        return None
    body = method.body.body if isinstance(method.body, cst.IndentedBlock) else ()
    for statement in body:
        if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 \
                and isinstance(statement.body[0], cst.Expr) and statement.body[0].value is calls[0]:
            return statement, calls[0]
    return None


def _is_save(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "save_for_backward"


def _unpacking(backward: cst.FunctionDef) -> cst.SimpleStatementLine | None:
    """Backward's one top-level ``a, b = ctx.saved_tensors`` into names, when nothing else reads them."""
    ctx = _ctx_name(backward)
    reads = [n for n in walk(backward) if isinstance(n, cst.Attribute) and n.attr.value in SAVED_TENSORS]
    body = backward.body.body if isinstance(backward.body, cst.IndentedBlock) else ()
    for statement in body:
        if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 \
                and isinstance(statement.body[0], cst.Assign) and len(statement.body[0].targets) == 1:
            assign = statement.body[0]
            value, target = assign.value, assign.targets[0].target
            if isinstance(value, cst.Attribute) and value.attr.value in SAVED_TENSORS and \
                    isinstance(value.value, cst.Name) and value.value.value == ctx and \
                    isinstance(target, (cst.Tuple, cst.List)) and len(reads) == 1 and \
                    all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in target.elements):
                return statement
    return None


def _unpack_statement(names: list[str], original: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
    value = original.body[0].value
    statement = cst.parse_statement(f"{_targets(names)} = {cst.Module([]).code_for_node(value)}")
    return statement.with_changes(leading_lines=original.leading_lines)


def _targets(names: list[str]) -> str:
    return f"({names[0]},)" if len(names) == 1 else ", ".join(names)


def _comma_separated(arguments: list[cst.Arg]) -> list[cst.Arg]:
    last = len(arguments) - 1
    return [a.with_changes(comma=cst.MaybeSentinel.DEFAULT if i == last else
                           cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for i, a in enumerate(arguments)]


def _reads_saved(method: cst.FunctionDef) -> bool:
    return any(isinstance(n, cst.Attribute) and n.attr.value in SAVED_TENSORS for n in walk(method))


def _ctx_name(method: cst.FunctionDef) -> str | None:
    """The ctx parameter (after ``cls`` of a classmethod)."""
    params = [p.name.value for p in (*method.params.posonly_params, *method.params.params)]
    classmethod = any(isinstance(d.decorator, cst.Name) and d.decorator.value == "classmethod"
                      for d in method.decorators)
    if classmethod or (len(params) >= 2 and params[0] in ("cls", "klass")):
        params = params[1:]
    return params[0] if params else None


def _attributes(node: cst.CSTNode) -> set[str]:
    return {n.attr.value for n in walk(node) if isinstance(n, cst.Attribute)}


def _names(node: cst.CSTNode) -> set[str]:
    """The variable names used in ``node`` (not attribute names nor keywords)."""
    not_variables = {id(n.attr) for n in walk(node) if isinstance(n, cst.Attribute)}
    not_variables |= {id(n.keyword) for n in walk(node) if isinstance(n, cst.Arg) and n.keyword is not None}
    return {n.value for n in walk(node) if isinstance(n, cst.Name) and id(n) not in not_variables}


def _stored_names(statement: cst.CSTNode) -> set[str]:
    """Names a statement may bind or delete (assignment, for, with, walrus, del, import, def)."""
    found: set[str] = set()
    for node in walk(statement):
        targets: list[cst.CSTNode] = []
        if isinstance(node, cst.AssignTarget):
            targets.append(node.target)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr)):
            targets.append(node.target)
        elif isinstance(node, cst.AsName):
            targets.append(node.name)
        elif isinstance(node, cst.Del):
            targets.append(node.target)
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            found.add(node.name.value)
        for target in targets:
            found |= {n.value for n in walk(target) if isinstance(n, cst.Name)}
    return found


def walk(node: cst.CSTNode):
    """Every node under ``node`` (itself included)."""
    pending = [node]
    while pending:
        current = pending.pop()
        yield current
        pending.extend(current.children)
