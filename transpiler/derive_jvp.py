"""Forward mode derived from the backward by transposition (``@derivative(..., jvp="derived")``).

A backward is linear in its gradients: ``backward(g) = Jᵀ g``. Its transpose is the
forward-mode derivative, ``jvp(t) = J t``. :func:`derive_jvp` writes that jvp as formula
source, statically (nothing is imported or run), by reverse-mode differentiation of the
backward with respect to its gradient parameters:

1. **Linearity.** A value is *linear* when it depends on a gradient parameter; every other
   value (inputs, outputs, metadata, what is computed from them) is a constant of the jvp.
   Helpers called on linear values are inlined (their locals renamed); ``needs_input_grad[i]``
   is ``True`` (forward mode wants every input's contribution) and folds away.
2. **Forward sweep.** The jvp first runs every constant statement of the backward in order
   (metadata, conditions of branches that hold linear steps, the sizes of linear values that
   a transpose needs), with the branch structure kept.
3. **Reverse sweep.** The adjoint of each returned gradient is the tangent of its input
   (``<input>_t``); the linear steps are walked backwards and each step ``y = op(..., x, ...)``
   adds to the adjoint of ``x`` the **op's own backward** with respect to that argument, taken
   from the library and inlined, with ``grad = adjoint(y)``. (``grad * cos(self)`` -> mul's
   backward for ``self`` -> ``t * cos(self)``; ``sum_to(grad, sizes)`` -> sum's backward ->
   ``t`` expanded back.) A branch reverses into the same branch. The adjoint of each
   gradient parameter is the tangent of its output.

An operator affine in its linear arguments (its jvp ``auto_linear``, or reading them and its
outputs only for metadata) has a backward that reads them only for metadata: a tensor of the
same metadata stands in. A ``for``/``while`` loop with linear values inside runs backwards (a
``while`` loop's trip count counted by the forward sweep). A choice between a linear value and a
constant (``input if transposed else grad``) splits the rest of the block on its test.

An operator whose jvp reads its linear argument only in the other inputs' tangents' terms is
affine in it too (:mod:`transpiler.derive_jvp_linear`). ``a, b = op(grad, ...)`` with several
differentiable outputs binds each; the step transposes to ``op``'s backward given every adjoint.

Refused, with the step named: a step not shown linear (an operator's backward that reads the
value of its linear argument or result while its jvp does not show it affine; a gradient that does not
depend on ``grad``), an operator's backward calling an undeclared ``at.`` operator, an operator
without a formula applied to a linear value (the zero makers
``zeros_like``/``new_zeros`` excepted), a loop or branch on the gradient's values, and a
transpose that needs the sizes of a linear value the sizes rules below cannot tell. Lists of linear values (``Tensor[]`` inputs and gradients) are
made by appends (``ListStart``/``Append``) and read by index (``Element``): an append transposes
to a read of the list's adjoint at the index the forward sweep counted, a read to a write.

Sizes of linear values (the one table here: formulas carry no shape functions): a gradient
parameter has its output's sizes; an elementwise operator broadcasts its tensor arguments'
sizes; ``expand``/``view``/``reshape`` take the sizes they are given; ``sum``/``mean`` over
dims follow ``reduced_sizes``, ``unsqueeze`` ``unsqueezed_sizes``; ``gather`` has its index's
sizes; the ``SAME_SIZES`` operators keep their input's; the ``SIZES_HELPERS`` operators have the
sizes their helper computes; a zero made by ``zeros_like(x)`` has ``x``'s sizes, one made by
``new_zeros(x, sizes)`` the sizes given; a linear list has the list of its entries' sizes, and
``cat``/``stack`` of it ``concatenated_sizes``/``stacked_sizes``; a value whose every use is a
copy into an input's gradient has that input's sizes; a ``SIZED_BY_CONSTANT_VALUES`` operator's
result (its length a constant mask's True count) has the sizes of the operator run on zeros.

A ``SCALES_SELF`` operator (``xlogy``: ``self`` times a factor, with a strong zero) transposes in
``self`` to itself, whatever its backward reads. A ``SELF_TRANSPOSED_HELPERS`` helper (the
differential of ``exp``, linear in its direction although its steps are only affine in it) is one
linear step whose transpose is the helper itself with its ``adjoint`` flag negated. A
``TRANSPOSED_BY_HELPERS`` helper (a convolution's input, weight or bias gradient) is one linear
step whose transpose is the helper declared with it (one convolution, or a broadcast). An
``OPERATOR_BACKWARD_HELPERS`` helper (``sum_backward``: a sum's backward) is one linear step whose
transpose is the operator it is the backward of (``at.sum``).
"""
from __future__ import annotations

import itertools
import keyword
from collections.abc import Mapping
from dataclasses import dataclass, field

import libcst as cst

from transpiler.derive_jvp_diagonal import DiagonalGradient, diagonal_gradient, diagonal_share
from transpiler.derive_jvp_linear import affine_by_terms
from transpiler.derive_jvp_simplify import forward_values, read_forward_values, simplify
from transpiler.jvp_fragments import code, rename
from transpiler.jvp_fragments import expression as _expr
from transpiler.jvp_fragments import live_only as _live_only
from transpiler.jvp_fragments import names as _names
from transpiler.jvp_fragments import nodes as _nodes
from transpiler.jvp_fragments import statement as _stmt
from transpiler.model import CaptureKind, Formula, Helper, JvpRule
from transpiler.schema import FunctionSchema, ListType, OptionalType, is_tensor_like

#: Operators whose result has the broadcast sizes of their tensor arguments (besides the
#: formulas declared ``jvp="auto_element_wise"``).
ELEMENTWISE = frozenset({
    "add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "add.Scalar", "sub.Scalar", "mul.Scalar",
    "div.Scalar", "neg", "where.self", "rsub.Tensor", "rsub.Scalar", "conj", "_conj", "real",
})
#: Operators whose backward sums each input's gradient to its sizes (the batch dims broadcast)
#: but whose result is not the broadcast of their arguments (the last dims are contracted).
CONTRACTIONS = frozenset({"matmul", "linalg_solve_triangular"})
#: Operators whose backward sums each input's gradient to its sizes but whose result is a 1-d
#: selection of the broadcast elements (its length is known only when it runs).
SELECTIONS = frozenset({"masked_select"})
#: Operators whose result's sizes depend on the values of a constant argument (a mask's or a
#: boolean index's True count): an operator linear in an argument has a result whose sizes do not
#: depend on that argument's values, so they are those of the operator run on zeros of its sizes.
SIZED_BY_CONSTANT_VALUES = frozenset({"masked_select", "index.Tensor"})
#: Operators that scale ``self`` elementwise by a factor of their other arguments with a strong zero
#: (``xlogy(g, y) = g * log(y)``, and 0 where ``g = 0`` even where ``log(y)`` is -inf or NaN, NaN
#: only for a NaN ``y``): a diagonal map of ``self``, its own transpose (summed back over the
#: broadcast). Their backward cannot show it: at ``self = 0`` it masks the factor (torch's
#: subgradient for ``y <= 0``), which reads the linear argument's value.
SCALES_SELF = frozenset({"xlogy.Tensor", "xlogy.Scalar_Other"})
#: Helpers linear in one tensor parameter (the others held) whose steps do not show it, each its own
#: transpose with a ``bool`` parameter negated, its result of that parameter's sizes: helper ->
#: (the linear parameter, the flag). ``linalg_matrix_exp_differential(A, E, adjoint)`` is the
#: differential of ``exp`` at ``A`` in the direction ``E`` (at ``A^H`` when ``adjoint``), the upper right
#: block of ``exp([[A, E], [0, A]])``: linear in ``E``, but the block matrix is only affine in it; the
#: differential at ``A^H`` is its adjoint (``tests/engine/test_derived_jvp.py`` checks both numerically).
SELF_TRANSPOSED_HELPERS = {"linalg_matrix_exp_differential": ("grad", "adjoint")}
#: Helpers linear in one tensor parameter (the others held) whose transpose another helper computes
#: in one step, where transposing their steps would take many (a convolution's input and weight
#: gradients are each the adjoint of one convolution): helper -> (the linear parameter, the
#: parameter holding the result's sizes, the linear parameter itself when the result has its sizes,
#: or None, the transposing helper). The transposing helper takes the
#: adjoint, the helper's other parameters in order, and the linear parameter's sizes
#: (``tests/engine/test_derived_jvp.py`` checks each pair is adjoint numerically).
TRANSPOSED_BY_HELPERS = {
    "convolution_input_backward": ("grad", "input_sizes", "convolution_input_backward_transposed"),
    "convolution_weight_backward": ("grad", "weight_sizes", "convolution_weight_backward_transposed"),
    "convolution_bias_backward": ("grad", None, "convolution_bias_backward_transposed"),
    # the recurrence read from the other end (cumprod's gradient): its rounds transpose to many steps
    "reversed_linear_recurrence": ("offset", "offset", "reversed_linear_recurrence_transposed"),
}


#: Helpers that are the backward of a linear operator in their tensor parameter ``grad`` (the others
#: held), their result of their ``sizes`` parameter's sizes: each transposes to that operator at the
#: adjoint, one call where the inlined helper's transpose takes one per step (a sum's gradient
#: broadcast back transposes to unsqueezes undone one by one after a ``sum_to``). Helper -> the
#: transpose, ``{p}`` for each parameter's code, ``{adjoint}``, ``{grad_sizes}`` (``grad``'s sizes),
#: ``{result}`` and ``{_name}`` for fresh names. Where ``grad`` has sizes other than the operator's
#: result's (a use that is not that operator's backward), the transpose is the inlined helper's,
#: written out. ``tests/engine/test_derived_jvp.py`` checks each against the helper numerically.
OPERATOR_BACKWARD_HELPERS = {
    # expand(unsqueezed grad, sizes): at.sum; otherwise sum_to the unsqueezed sizes, reshaped back
    "sum_backward": (
        "if {grad_sizes} == reduced_sizes({sizes}, {dim}, {keepdim}):\n"
        "    {result} = at.sum({adjoint}, {dim}, {keepdim})\n"
        "else:\n"
        "    {_kept} = {grad_sizes}\n"
        "    if not {keepdim}:\n"
        "        for {_d} in range(len({sizes})):\n"
        "            if is_reduced_dim({dim}, {_d}, len({sizes})):\n"
        "                {_kept} = unsqueezed_sizes({_kept}, {_d})\n"
        "    {result} = at.reshape(sum_to({adjoint}, {_kept}), {grad_sizes})\n"),
    # unsqueezes only: one reshape back
    "unsqueeze_to": (
        "{result} = {adjoint} if {adjoint}.sizes() == {grad_sizes} else at.reshape({adjoint}, {grad_sizes})\n"),
    # a sum over the repeat dims of grad viewed as [r0, s0, r1, s1, ...]: at.repeat (which takes at least
    # self's dims), else each repeat dim expanded back
    "repeat_backward": (
        "if len({repeats}) == 0:\n"
        "    {result} = {adjoint}\n"
        "elif len({repeats}) >= len({sizes}):\n"
        "    {result} = at.repeat({adjoint}, {repeats})\n"
        "    if {result}.sizes() != {grad_sizes}:\n"
        "        {result} = at.reshape({result}, {grad_sizes})\n"
        "else:\n"
        "    {_lead} = len({repeats}) - len({sizes})\n"
        "    {_split} = []\n"
        "    {_dims} = []\n"
        "    for {_d} in range(len({repeats})):\n"
        "        {_dims}.append(len({_split}))\n"
        "        {_split}.append({repeats}[{_d}])\n"
        "        {_split}.append({sizes}[{_d} - {_lead}] if {_d} >= {_lead} else 1)\n"
        "    {result} = at.reshape(at.expand(at.reshape({adjoint}, reduced_sizes({_split}, {_dims}, True)), "
        "{_split}), {grad_sizes})\n"),
}
#: Operators whose result has the sizes of their ``self`` argument.
SAME_SIZES = frozenset({
    "cumsum", "cumprod", "flip", "roll", "tril", "triu", "clone", "contiguous", "_softmax", "_log_softmax",
    "softmax", "log_softmax", "resolve_conj", "resolve_neg", "masked_fill", "index_put", "nll_loss_backward",
    "_to_copy",
})
#: Reductions over ``dim`` whose result has the sizes ``reduced_sizes`` gives.
REDUCTIONS = frozenset({"sum.dim_IntList", "mean.dim"})
#: Reductions over every dim (a 0-d result).
FULL_REDUCTIONS = frozenset({"sum", "mean"})
#: Operators whose result's sizes a helper of ``formulas/helpers.py`` computes: the helper, and the
#: arguments it is given in order (a tensor argument by its sizes; an omitted one by its default).
SIZES_HELPERS = {
    "transpose.int": ("transposed_sizes", ("self", "dim0", "dim1")),
    "t": ("reverse_list", ("self",)),
    "permute": ("permuted_sizes", ("self", "dims")),
    "flatten.using_ints": ("flattened_sizes", ("self", "start_dim", "end_dim")),
    "narrow": ("narrowed_sizes", ("self", "dim", "length")),
    "squeeze.dim": ("squeezed_sizes", ("self", "dim")),
    "diagonal": ("diagonal_sizes", ("self", "offset", "dim1", "dim2")),
    "masked_scatter": ("broadcast_sizes", ("self", "mask")),
    "matmul": ("matmul_sizes", ("self", "other")),
    "linalg_solve_triangular": ("triangular_solved_sizes", ("self", "B")),
    "embedding": ("embedded_sizes", ("weight", "indices")),
    "convolution": ("convolution_sizes", ("input", "weight", "stride", "padding", "dilation", "transposed",
                                          "output_padding", "groups")),
}
#: Non-differentiable operators whose result is zero whatever their tensor argument holds
#: (``new_full`` too when its fill value is a literal zero).
ZERO_MAKERS = frozenset({"zeros_like", "new_zeros"})
#: Metadata methods a transpose may ask of a linear value.
METADATA_READS = frozenset({"sizes", "dim", "scalar_type", "options", "size", "numel"})
META = "_metadata_of"      # marks a metadata read of a linear value until its sizes are known


class DerivationRefused(Exception):
    """The backward cannot be transposed: ``node`` is the step, ``reason`` says why."""

    def __init__(self, node: cst.CSTNode | None, reason: str) -> None:
        super().__init__(reason)
        self.node = node
        self.reason = reason


@dataclass(frozen=True)
class OperatorTable:
    """What transposition reads from the library: formulas by ``name.overload``, helpers by
    name, and the non-differentiable operators' schemas."""

    formulas: Mapping[str, Formula]
    helpers: Mapping[str, Helper]
    nondifferentiable: Mapping[str, FunctionSchema]

    def overloads(self, base: str) -> list[tuple[FunctionSchema, Formula | None]]:
        """Every declared overload of operator ``base``, with its formula (None when not differentiable)."""
        found = [(f.schema, f) for f in self.formulas.values() if f.schema.name.base == base]
        found += [(s, None) for s in self.nondifferentiable.values() if s.name.base == base]
        return found


# ---- the linear program ------------------------------------------------------------------
@dataclass
class Plain:
    """A constant statement (it reads no linear value): it runs in the forward sweep."""

    statement: cst.BaseStatement


@dataclass
class Linear:
    """``target = op(args)`` on linear values: ``source`` alone (a copy), nothing (zero), or an
    operator formula with its arguments (a linear name or a constant expression each)."""

    target: str
    node: cst.CSTNode
    source: str | None = None
    formula: Formula | None = None
    arguments: dict[str, cst.BaseExpression] = field(default_factory=dict)
    linear: dict[str, str] = field(default_factory=dict)     # formula parameter -> linear name
    zero_sizes: cst.BaseExpression | None = None             # a zero's sizes (metadata marks allowed)
    sizes_binding: cst.BaseStatement | None = None           # the target's sizes, computed once
    # an operator with several differentiable outputs: the linear name of each (one per gradient of
    # its backward, in order); ``target`` stands for the tuple and is read by no step
    outputs: tuple[str, ...] = ()
    helper: Helper | None = None        # a ``SELF_TRANSPOSED_HELPERS`` call (``formula`` is None)


@dataclass
class ListStart:
    """``target = []`` followed by appends of linear values: a list of linear values (its adjoint is
    a list too: the tangents of a ``Tensor[]`` input, or the adjoint a list operator's transpose gives)."""

    target: str
    sizes_holder: str | None = None     # the name listing its elements' sizes (set by the sweep)


@dataclass
class Append:
    """``target.append(value)`` on a linear list: ``value`` (a linear name; None: a zero) lands at the
    index held by the forward-sweep name ``position``."""

    target: str
    position: str
    value: str | None
    node: cst.CSTNode
    record: cst.BaseStatement | None = None     # appends the value's sizes to the list's (set by the sweep)


@dataclass
class Element:
    """``target = source[index]`` of a linear list (``index``: a forward-sweep name)."""

    target: str
    source: str
    index: str
    node: cst.CSTNode


@dataclass
class Branch:
    """``if <condition>:`` with linear statements inside; ``condition`` is a forward-sweep name."""

    condition: str
    body: list
    orelse: list


@dataclass
class Loop:
    """``for <variable> in range(<start>, <stop>):`` with linear statements inside (the bounds are
    forward-sweep expressions). The sweep adds ``sizes`` (per loop-carried linear value: the name
    holding its sizes at the top of an iteration and the list of them per iteration) and
    ``setup``/``updates`` statements that keep those names."""

    variable: str
    start: cst.BaseExpression
    stop: cst.BaseExpression
    body: list
    carried: tuple[str, ...]        # linear values bound before the loop that the body reads or binds
    setup: list = field(default_factory=list)
    updates: list = field(default_factory=list)
    seen: dict[str, str] = field(default_factory=dict)      # sizes name -> its list of per-iteration values
    restored: dict[str, str] = field(default_factory=dict)  # carried constant -> its list of per-iteration values
    condition: cst.BaseExpression | None = None    # a `while` loop's test (``stop`` names its trip count)


@dataclass(frozen=True)
class Operand:
    """A value of the linear program: a linear name, the zero, or a constant expression."""

    linear: str | None = None
    constant: cst.BaseExpression | None = None
    zero_value: cst.BaseExpression | None = None   # a zero's own expression, when it can be built
    zero_sizes: cst.BaseExpression | None = None   # a zero's sizes, when they can be told

    @property
    def is_zero(self) -> bool:
        """Whether the operand is known zero (neither a linear nor a constant part)."""
        return self.linear is None and self.constant is None


ZERO = Operand()
UNKNOWN_ZERO = "_zero_of_unknown_metadata"   # stands for a zero whose metadata the jvp cannot know


class _MaskFolder(cst.CSTTransformer):
    """``needs_input_grad[i]`` -> the constant it is here, then constant tests folded."""

    def __init__(self, mask: str | None, wanted, count: int | None = None) -> None:
        self.mask = mask
        self.wanted = wanted
        self.count = count          # the number of inputs: the mask itself becomes a list literal

    def wanted_expression(self, i: int) -> cst.BaseExpression:
        wanted = self.wanted(i)
        return wanted if isinstance(wanted, cst.BaseExpression) else cst.Name("True" if wanted else "False")

    def leave_Subscript(self, original, updated):
        literal_index = len(updated.slice) == 1 and isinstance(updated.slice[0].slice, cst.Index) \
            and isinstance(updated.slice[0].slice.value, cst.Integer)
        if (self.mask is not None and isinstance(original.value, cst.Name) and original.value.value == self.mask
                and literal_index):
            return self.wanted_expression(int(updated.slice[0].slice.value.value))
        if isinstance(updated.value, cst.List) and literal_index \
                and int(updated.slice[0].slice.value.value) < len(updated.value.elements):     # ``[a, b][0]``
            return updated.value.elements[int(updated.slice[0].slice.value.value)].value
        return updated

    def leave_Name(self, original, updated):
        if self.mask is not None and self.count is not None and original.value == self.mask:
            return cst.List([cst.Element(self.wanted_expression(i)) for i in range(self.count)])
        return updated

    def leave_IfExp(self, original, updated):
        truth = _truth(updated.test)
        if truth is None:
            return updated
        return updated.body if truth else updated.orelse

    def leave_UnaryOperation(self, original, updated):
        if isinstance(updated.operator, cst.Not) and _truth(updated.expression) is not None:
            return cst.Name("False" if _truth(updated.expression) else "True")
        return updated

    def leave_BooleanOperation(self, original, updated):
        left = _truth(updated.left)
        if left is None:
            return updated
        if isinstance(updated.operator, cst.And):
            return updated.right if left else cst.Name("False")
        return cst.Name("True") if left else updated.right


class _RaiseTests(cst.CSTTransformer):
    """``if needs_input_grad[i]: raise ...`` (derivatives.yaml's ``not_implemented``): forward mode
    gives input ``i`` a tangent only when its dtype is floating or complex (a bool ``mask`` has
    none), so the test becomes that, not ``True`` (which it stays for an input in ``unreadable``)."""

    def __init__(self, mask: str | None, inputs: list[str], optional: list[bool], unreadable: set[str]) -> None:
        self.mask, self.inputs, self.optional, self.unreadable = mask, inputs, optional, unreadable

    def tangent_possible(self, i: int) -> cst.BaseExpression:
        name = self.inputs[i]
        if name in self.unreadable:
            return _expr(f"{name} is not None") if self.optional[i] else cst.Name("True")
        dtype = f"{name}.is_floating_point() or {name}.is_complex()"
        return _expr(f"({name} is not None and ({dtype}))" if self.optional[i] else f"({dtype})")

    def leave_If(self, original, updated):
        body = updated.body.body
        if self.mask is None or len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) \
                or not all(isinstance(small, cst.Raise) for small in body[0].body):
            return updated
        return updated.with_changes(test=updated.test.visit(_MaskFolder(self.mask, self.tangent_possible)))


def _truth(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def _fold_statements(statements, folder: _MaskFolder) -> list[cst.BaseStatement]:
    """Fold the mask, then drop branches whose test is a constant."""
    out: list[cst.BaseStatement] = []
    for statement in statements:
        statement = statement.visit(folder)
        out.extend(_drop_constant_ifs(statement))
    return out


def _drop_constant_ifs(statement: cst.BaseStatement) -> list[cst.BaseStatement]:
    if isinstance(statement, cst.If):
        truth = _truth(statement.test)
        if truth is True:
            return [s for inner in statement.body.body for s in _drop_constant_ifs(inner)]
        if truth is False:
            orelse = statement.orelse
            if orelse is None:
                return []
            if isinstance(orelse, cst.If):
                return _drop_constant_ifs(orelse)
            return [s for inner in orelse.body.body for s in _drop_constant_ifs(inner)]
        body = [s for inner in statement.body.body for s in _drop_constant_ifs(inner)] or [_stmt("pass")]
        orelse = statement.orelse
        if isinstance(orelse, cst.Else):
            inner = [s for x in orelse.body.body for s in _drop_constant_ifs(x)] or [_stmt("pass")]
            orelse = orelse.with_changes(body=orelse.body.with_changes(body=inner))
        elif isinstance(orelse, cst.If):
            folded = _drop_constant_ifs(orelse)
            if len(folded) == 1 and isinstance(folded[0], cst.If):
                orelse = folded[0]
            else:
                orelse = cst.Else(body=cst.IndentedBlock(body=folded or [_stmt("pass")]))
        return [statement.with_changes(body=statement.body.with_changes(body=body), orelse=orelse)]
    return [statement]


# ---- single exit -------------------------------------------------------------------------
def _always_returns(statements) -> bool:
    if not statements:
        return False
    last = statements[-1]
    if isinstance(last, cst.SimpleStatementLine):
        return any(isinstance(s, cst.Return) for s in last.body)
    if isinstance(last, cst.If):
        return _always_returns(last.body.body) and last.orelse is not None and _always_returns(_else_body(last))
    return False


def _else_body(statement: cst.If) -> list[cst.BaseStatement]:
    orelse = statement.orelse
    if orelse is None:
        return []
    if isinstance(orelse, cst.If):
        return [orelse]
    return list(orelse.body.body)


def _has_return(statements) -> bool:
    return any(isinstance(n, cst.Return) for s in statements for n in _nodes(s))


def single_exit(statements) -> list[cst.BaseStatement]:
    """The statements with every ``return`` at the end of a path: what follows an ``if`` whose
    body always returns moves into its ``else``."""
    statements = list(statements)
    for i, statement in enumerate(statements):
        if isinstance(statement, cst.If) and _has_return([statement]):
            rest = statements[i + 1:]
            body = list(statement.body.body)
            orelse = _else_body(statement)
            if _always_returns(body):
                orelse = single_exit(orelse if _always_returns(orelse) else orelse + rest)
                body = single_exit(body)
            elif _always_returns(orelse) and orelse:
                body = single_exit(body + rest)
                orelse = single_exit(orelse)
            else:
                raise DerivationRefused(statement, "a `return` inside a branch that does not always return")
            new = statement.with_changes(body=statement.body.with_changes(body=body),
                                         orelse=cst.Else(body=cst.IndentedBlock(body=orelse)))
            return statements[:i] + [new]
        if isinstance(statement, (cst.For, cst.While)) and _has_return([statement]):
            raise DerivationRefused(statement, "a `return` inside a loop")
    return statements


# ---- building the linear program ---------------------------------------------------------
class _Builder:
    """Turns backward source into the linear program (``Plain``/``Linear``/``Branch``)."""

    def __init__(self, table: OperatorTable, taken: set[str], witnesses: Mapping[str, str | None]) -> None:
        self.table = table
        self.witnesses = witnesses          # gradient parameter -> its output (same metadata)
        self.taken = taken
        self.counter = itertools.count(1)
        self.adjoint_names: set[str] = set()
        self.parameter_types: dict[str, object] = {}   # the formula's parameters' schema types
        self.lists: set[str] = set()                   # linear lists (``ListStart``)
        self.empty_lists: dict[str, tuple[list, Plain]] = {}   # ``name = []`` not appended to yet: where it is
        self.list_counts: dict[str, str] = {}          # linear list -> the forward-sweep name counting its appends
        self.gradient_lists: dict[str, str] = {}       # a ``Tensor[]`` gradient (or a copy) -> its output list
        self.rebound: set[str] = set()                 # names bound more than once (or in a loop)
        self.unbound: dict[str, str] = {}              # outputs of an unpacked step left unbound -> the step

    def fresh(self, stem: str) -> str:
        while True:
            name = f"{stem}_{next(self.counter)}"
            if name not in self.taken:
                self.taken.add(name)
                return name

    # -- statements
    def statements(self, statements, linear: set[str], tensors: set[str], returns: list[str] | None,
                   program: list) -> None:
        statements = list(statements)
        for i, statement in enumerate(statements):
            test = self.mixed_choice(statement, statements[i + 1:], linear)
            if test is not None:
                self.statement(_split_on(test, statements[i:]), linear, tensors, returns, program)
                return
            self.statement(statement, linear, tensors, returns, program)

    def mixed_choice(self, statement, rest, linear) -> cst.Name | None:
        """The test of a conditional expression in ``statement`` that picks a linear value on one side
        and a constant on the other (``input if transposed else grad``), when it is a name that stays
        bound as it is: the statement and those after it are then split on it, each side with the
        test in place (``_split_on``), so that a value is linear on every path or on none."""
        if not isinstance(statement, cst.SimpleStatementLine):
            return None
        for node in _nodes(statement):
            if isinstance(node, cst.IfExp) and isinstance(node.test, cst.Name) and _truth(node.test) is None \
                    and node.test.value not in linear and node.test.value not in _assigned_in([statement, *rest]) \
                    and self.reads_linear(node.body, linear) != self.reads_linear(node.orelse, linear) \
                    and not _is_none(node.body) and not _is_none(node.orelse):
                return node.test
        return None

    def statement(self, statement, linear, tensors, returns, program) -> None:
        unbound = sorted(_names(statement) & self.unbound.keys())
        if unbound:
            raise DerivationRefused(statement, f"`{unbound[0]}` is read: a non-differentiable output of "
                                    f"`{self.unbound[unbound[0]]}`, an operator applied to a linear value")
        marked = self.metadata(statement, linear)
        if not self.reads_linear(marked, linear):
            statement = marked
            if isinstance(statement, cst.SimpleStatementLine) and any(isinstance(s, cst.Return) for s in statement.body):
                pass            # a constant return: handled below
            else:
                plain = Plain(statement)
                program.append(plain)
                for name in _names(statement):
                    self.empty_lists.pop(name, None)
                for name in _assigned(statement):
                    linear.discard(name)
                    self.lists.discard(name)
                    if self.assigns_tensor(statement, tensors):
                        tensors.add(name)
                if _empty_list_target(statement) is not None:
                    self.empty_lists[_empty_list_target(statement)] = (program, plain)
                return
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                self.small(small, linear, tensors, returns, program)
            return
        if isinstance(statement, cst.If) and _truth(self.metadata(statement.test, linear)) is not None:
            taken = statement.body.body if _truth(self.metadata(statement.test, linear)) else _else_body(statement)
            self.statements(taken, linear, tensors, returns, program)     # `grads[i] is None`: False here
            return
        if isinstance(statement, cst.If):
            if self.reads_linear(self.metadata(statement.test, linear), linear):
                raise DerivationRefused(statement.test, "a branch on the gradient's values")
            condition = self.fresh("taken")
            program.append(Plain(_stmt(f"{condition} = {code(self.metadata(statement.test, linear))}")))
            body, orelse = [], []
            body_linear, else_linear = set(linear), set(linear)
            self.statements(statement.body.body, body_linear, tensors, returns, body)
            self.statements(_else_body(statement), else_linear, tensors, returns, orelse)
            linear |= body_linear | else_linear
            program.append(Branch(condition, body, orelse))
            return
        if isinstance(statement, (cst.For, cst.While)):
            self.loop(statement, linear, tensors, returns, program)
            return
        raise DerivationRefused(statement, f"`{type(statement).__name__}` on linear values")

    def loop(self, statement: cst.For | cst.While, linear, tensors, returns, program) -> None:
        """``for v in range(...)`` (or ``while <constant test>:``, its trip count counted by the forward
        sweep) whose body carries linear values: transposed by running the body's transposes in
        reverse iteration order (``Loop``)."""
        condition = None
        if isinstance(statement, cst.While):
            condition = self.metadata(statement.test, linear)
            if self.reads_linear(condition, linear):
                raise DerivationRefused(statement.test, "a `while` loop on the gradient's values")
            if statement.orelse is not None:
                raise DerivationRefused(statement, "a `while` loop with an `else` on linear values")
            variable = self.fresh("iteration")
            start, stop = cst.Integer("0"), cst.Name(self.fresh("iterations"))
        else:
            iterable = self.metadata(statement.iter, linear)
            if self.reads_linear(iterable, linear):
                raise DerivationRefused(statement.iter, "a loop over the gradient's values")
            bounds = _range_bounds(iterable)
            if bounds is None or statement.orelse is not None or not isinstance(statement.target, cst.Name):
                raise DerivationRefused(statement, "a loop on linear values other than `for name in range(...)`")
            variable = statement.target.value
            start, stop = (self.constant_name(bound, program) for bound in bounds)   # evaluated once, before
        body: list = []
        body_linear = set(linear)
        self.statements(statement.body.body, body_linear, tensors, returns, body)
        read, bound_names = _linear_reads(body), _linear_binds(body)
        started_inside = {item.target for item in _items(body) if isinstance(item, ListStart)}
        linear |= (self.lists & (read | bound_names)) - started_inside     # lists bound to [] before the loop
        became = (body_linear - linear) & _read_before_bound(body) & (_assigned_in(statement.body.body))
        if became:
            raise DerivationRefused(statement, f"`{sorted(became)[0]}` is a constant before the loop and linear "
                                    "inside it")
        # a constant carried from one iteration to the next (``offset = offset + n``) is listed per
        # iteration by the forward loop and restored by the reverse one
        restored = {name: self.fresh(f"{name}_seen") for name in _carried_constants(body, variable)}
        carried = tuple(sorted((read | bound_names) & linear))
        program.append(Loop(variable, start, stop, body, carried, restored=restored, condition=condition))
        linear |= body_linear

    def constant_name(self, value: cst.BaseExpression, program: list) -> cst.BaseExpression:
        """``value`` itself when a name or a number, else a fresh name bound to it in the program."""
        if isinstance(value, (cst.Name, cst.Integer)):
            return value
        name = self.fresh("bound")
        program.append(Plain(_stmt(f"{name} = {code(value)}")))
        return cst.Name(name)

    def small(self, small, linear, tensors, returns, program) -> None:
        if isinstance(small, cst.Return):
            values = _returned(small)
            if returns is None or len(values) != len(returns):
                raise DerivationRefused(small, "a return of another arity than the differentiable inputs")
            for target, value in zip(returns, values):
                self.bind(target, value, linear, tensors, program, none_is_zero=True)
            return
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            self.bind(small.targets[0].target.value, small.value, linear, tensors, program)
            return
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Tuple) \
                and all(isinstance(e.value, cst.Name) for e in small.targets[0].target.elements):
            names = [e.value.value for e in small.targets[0].target.elements]
            self.bind_several(small, names, small.value, linear, tensors, program)
            return
        if isinstance(small, cst.Pass):
            return
        if isinstance(small, cst.Expr) and _append_call(small.value) is not None:
            self.append(small, *_append_call(small.value), linear, tensors, program)
            return
        raise DerivationRefused(small, f"`{code(small)}` on a linear value (only `name = expression` "
                                "and `return` can be transposed)")

    def bind_several(self, node, names: list[str], value: cst.BaseExpression, linear, tensors, program) -> None:
        """``a, b = call(...)`` on linear values: a helper returning a tuple (inlined, one result per
        name), an operator with several outputs whose one differentiable output is linear (the
        others, read nowhere after, are left unbound), or an operator whose differentiable outputs
        are all linear (``convolution_backward(grad, ...)``): each name a copy of its output, the
        step transposed by the operator's backward given the adjoints of all of them."""
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in self.table.helpers:
            results = self.inline_helper(value, self.helper_overload(value), linear, tensors, program, len(names))
            for name, result in zip(names, results):
                self.bind(name, cst.Name(result.linear) if result.linear else result.constant, linear, tensors, program)
            return
        operand = self.operand(value, linear, tensors, program)
        step = program[-1] if program and isinstance(program[-1], Linear) else None
        if operand.linear is not None and step is not None and step.target == operand.linear \
                and step.formula is not None and len(step.formula.schema.returns) == len(names) \
                and len(step.formula.differentiable_outputs) > 1 \
                and len(step.formula.backward.params) == len(step.formula.differentiable_outputs):
            step.outputs = tuple(self.fresh(f"{step.target}_out") for _ in step.formula.differentiable_outputs)
            linear.update(step.outputs)
            for i, name in enumerate(names):
                if i in step.formula.differentiable_outputs:
                    output = step.outputs[step.formula.differentiable_outputs.index(i)]
                    self.bind(name, cst.Name(output), linear, tensors, program)
                else:
                    linear.discard(name)
                    self.unbound[name] = code(node)
            return
        if operand.linear is None or step is None or step.target != operand.linear or step.formula is None \
                or len(step.formula.schema.returns) != len(names) or len(step.formula.differentiable_outputs) != 1:
            raise DerivationRefused(node, f"`{code(node)}` on a linear value: only a helper's tuple or an "
                                    "operator with one differentiable output can be unpacked")
        differentiable = step.formula.differentiable_outputs[0]
        for i, name in enumerate(names):
            if i == differentiable:
                self.bind(name, cst.Name(operand.linear), linear, tensors, program)
            else:
                linear.discard(name)
                self.unbound[name] = code(node)

    def append(self, node, target: str, value: cst.BaseExpression, linear, tensors, program) -> None:
        """``target.append(value)`` with a linear value (or onto a linear list): the list is linear
        from where it was bound to ``[]`` (it must not have been appended to before); each append's
        index is counted in the forward sweep."""
        operand = self.operand(value, linear, tensors, program)
        if target in self.lists:
            linear.add(target)          # made linear in a branch or loop this one is beside
        elif target in self.empty_lists:
            block, plain = self.empty_lists.pop(target)
            self.lists.add(target)
            self.list_counts[target] = self.fresh(f"{target}_count")
            at_index = next(i for i, item in enumerate(block) if item is plain) + 1
            block[at_index:at_index] = [ListStart(target), Plain(_stmt(f"{self.list_counts[target]} = 0"))]
            linear.add(target)
        else:
            raise DerivationRefused(node, f"`{target}` holds constants (or is not a list made here) and a "
                                    "linear value is appended to it")
        if operand.constant is not None:
            raise DerivationRefused(node, f"a constant appended to `{target}`, a list of linear values: the "
                                    "step is not linear in the gradient")
        count = self.list_counts[target]
        position = self.fresh(f"{target}_index")
        program.append(Plain(_stmt(f"{position} = {count}")))
        program.append(Append(target, position, operand.linear, node))
        program.append(Plain(_stmt(f"{count} = {count} + 1")))

    def bind(self, target: str, value: cst.BaseExpression | None, linear, tensors, program,
             none_is_zero: bool = False) -> None:
        operand = ZERO if value is None else self.operand(value, linear, tensors, program)
        if operand.linear is not None:
            program.append(Linear(target, value, source=operand.linear))
            linear.add(target)
            if operand.linear in self.gradient_lists:
                self.gradient_lists[target] = self.gradient_lists[operand.linear]
            if operand.linear in self.lists:
                self.lists.add(target)
                self.list_counts[target] = self.list_counts[operand.linear]
        elif operand.is_zero:
            program.append(Linear(target, value, zero_sizes=operand.zero_sizes))
            linear.add(target)
        else:
            if none_is_zero and _is_none(operand.constant):
                program.append(Linear(target, value))
                linear.add(target)
                return
            program.append(Plain(_stmt(f"{target} = {code(operand.constant)}")))
            linear.discard(target)
            if self.is_tensor(operand.constant, tensors):
                tensors.add(target)

    # -- expressions
    def operand(self, node: cst.BaseExpression, linear, tensors, program) -> Operand:
        if not self.reads_linear(node, linear):
            return Operand(constant=node)
        if isinstance(node, cst.Name):
            return Operand(linear=node.value)
        marked = self.metadata(node, linear)
        if not self.reads_linear(marked, linear):     # metadata of linear values only (`grad.dim() - 2`)
            return Operand(constant=marked)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            return self.apply(node, "neg", [node.expression], {}, linear, tensors, program)
        if isinstance(node, cst.BinaryOperation):
            names = {cst.Add: "add", cst.Subtract: "sub", cst.Multiply: "mul", cst.Divide: "div"}
            op = names.get(type(node.operator))
            if op is None:
                raise DerivationRefused(node, f"the operator `{code(node.operator).strip()}` on a linear value")
            if op in REFLECTED and not self.reads_linear(node.left, linear) and not self.is_tensor(node.left, tensors):
                # `2 * grad`, `1 - grad`: a number has no such method with a tensor, so Python calls the
                # tensor's reflected one, which is torch's `mul(grad, 2)`, `rsub(grad, 1)`
                return self.apply(node, REFLECTED[op], [node.right, node.left], {}, linear, tensors, program)
            return self.apply(node, op, [node.left, node.right], {}, linear, tensors, program)
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and len(node.slice) == 1 \
                and isinstance(node.slice[0].slice, cst.Index) and self.is_list(node.value.value) \
                and not self.reads_linear(node.slice[0].slice.value, linear):
            index, target = self.fresh(f"{node.value.value}_at"), self.fresh("element")
            program.append(Plain(_stmt(f"{index} = {code(self.metadata(node.slice[0].slice.value, linear))}")))
            program.append(Element(target, node.value.value, index, node))
            linear.add(target)
            return Operand(linear=target)
        if isinstance(node, cst.List) and all(isinstance(e, cst.Element) for e in node.elements):
            listed = self.fresh("listed")              # ``[a, b]``: a list made by appends
            plain = Plain(_stmt(f"{listed} = []"))
            program.append(plain)
            self.empty_lists[listed] = (program, plain)
            for element in node.elements:
                self.append(node, listed, element.value, linear, tensors, program)
            return Operand(linear=listed)
        if isinstance(node, cst.IfExp):
            test = self.metadata(node.test, linear)
            if _truth(test) is not None:              # `grad if grad is not None else ...`
                chosen = node.body if _truth(test) else node.orelse
                return ZERO if _is_none(chosen) else self.operand(chosen, linear, tensors, program)
            if self.reads_linear(test, linear):
                raise DerivationRefused(node.test, "a conditional on the gradient's values")
            condition, target = self.fresh("taken"), self.fresh("chosen")
            program.append(Plain(_stmt(f"{condition} = {code(test)}")))
            body, orelse = [], []
            self.bind(target, node.body, set(linear), set(tensors), body, none_is_zero=True)
            self.bind(target, node.orelse, set(linear), set(tensors), orelse, none_is_zero=True)
            program.append(Branch(condition, body, orelse))
            linear.add(target)
            return Operand(linear=target)
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name) \
                    and node.func.value.value == "at":
                positional = [a.value for a in node.args if a.keyword is None]
                keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
                return self.apply(node, node.func.attr.value, positional, keywords, linear, tensors, program)
            if isinstance(node.func, cst.Name) and _transposed_helper_param(node.func.value) is not None \
                    and node.func.value in self.table.helpers:
                return self.self_transposed(node, self.table.helpers[node.func.value], linear, tensors, program)
            if isinstance(node.func, cst.Name) and node.func.value in OPERATOR_BACKWARD_HELPERS \
                    and node.func.value in self.table.helpers \
                    and self.helper_overload(node) is self.table.helpers[node.func.value]:
                return self.self_transposed(node, self.table.helpers[node.func.value], linear, tensors, program)
            if isinstance(node.func, cst.Name) and node.func.value in self.table.helpers:
                return self.inline_helper(node, self.helper_overload(node), linear, tensors, program)
            marked = self.metadata(node, linear)
            if not self.reads_linear(marked, linear):
                return Operand(constant=marked)
        raise DerivationRefused(node, f"`{code(node)}` on a linear value has no transpose (an operator "
                                "without a formula, or a construct outside the formula language)")

    def metadata(self, node: cst.BaseExpression, linear) -> cst.BaseExpression:
        """Metadata of linear values read in a constant position: kept as ``_meta(x).method()`` marks
        resolved when the sweep knows each linear value's sizes (``SizesOf``)."""
        builder = self

        class Marker(cst.CSTTransformer):
            def leave_Comparison(self, original, updated):
                # a linear value is never None here: forward mode gives every output a tangent
                if len(updated.comparisons) == 1 and isinstance(updated.comparisons[0].operator, (cst.Is, cst.IsNot)) \
                        and _is_none(updated.comparisons[0].comparator) and _linear_or_entry(updated.left, linear):
                    return cst.Name("False" if isinstance(updated.comparisons[0].operator, cst.Is) else "True")
                return updated

            def leave_Call(self, original, updated):
                func = updated.func
                if isinstance(func, cst.Name) and func.value == "len" and len(updated.args) == 1 \
                        and isinstance(updated.args[0].value, cst.Name) and updated.args[0].value.value in linear:
                    listed = updated.args[0].value.value
                    if listed in builder.gradient_lists:
                        return _expr(f"len({builder.gradient_lists[listed]})")
                    if listed in builder.list_counts:
                        return cst.Name(builder.list_counts[listed])
                if isinstance(func, cst.Name) and func.value in builder.table.helpers:
                    return builder.device_only_arguments(updated, builder.table.helpers[func.value], linear)
                if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                        and func.value.value in linear and func.attr.value in METADATA_READS:
                    return updated.with_changes(func=func.with_changes(
                        value=cst.Call(cst.Name(META), [cst.Arg(cst.SimpleString(f'"{func.value.value}"'))])))
                return updated
        return node.visit(Marker())

    def device_only_arguments(self, call: cst.Call, helper: Helper, linear) -> cst.Call:
        """A helper that reads of a linear argument only its device (``like`` in
        ``at.new_zeros(like, sizes, dtype=...)``) is given the gradient's output instead."""
        outputs = [o for o in self.witnesses.values() if o is not None]
        if not outputs:
            return call
        args = list(call.args)
        for i, (arg, param) in enumerate(zip(args, helper.params)):
            if arg.keyword is None and isinstance(arg.value, cst.Name) and arg.value.value in linear \
                    and _reads_only_device(helper, param.name):
                args[i] = arg.with_changes(value=cst.Name(outputs[0]))
        return call.with_changes(args=args)

    def apply(self, node, base: str, positional, keywords, linear, tensors, program) -> Operand:
        operands = [self.operand(a, linear, tensors, program) for a in positional]
        named = {k: self.operand(v, linear, tensors, program) for k, v in keywords.items()}
        schema, formula = self.resolve(node, base, operands, named, tensors)
        params = [a for a in schema.arguments if not a.is_out]
        by_param: dict[str, Operand] = {}
        for argument, operand in zip(params, operands):
            by_param[argument.name] = operand
        for name, operand in named.items():
            by_param[name] = operand
        live = {p: o.linear for p, o in by_param.items() if o.linear is not None}
        if formula is None and (str(schema.name) in ZERO_MAKERS or _fills_zero(schema, by_param)):
            return self.zero(node, schema, operands, by_param)
        if not live and all(o.zero_value is not None for o in (*operands, *named.values()) if o.is_zero) \
                and (formula is None or not affine_in(formula, set(by_param))):
            # made of zeros of known metadata (``exp(new_zeros(grad, sizes))``): a constant of the jvp
            values = [code(o.constant if o.constant is not None else o.zero_value) for o in operands]
            values += [f"{k}={code(o.constant if o.constant is not None else o.zero_value)}" for k, o in named.items()]
            return Operand(constant=_expr(f"at.{base}({', '.join(values)})"))
        if formula is None:
            raise DerivationRefused(node, f"`{schema.name}` has no formula and is applied to a linear value")
        if not live:
            return ZERO                         # every linear argument is zero
        target = self.fresh("lin")
        constants = {}
        for argument in params:
            operand = by_param.get(argument.name)
            if operand is None or operand.linear is not None:
                continue
            value = operand.constant if operand.constant is not None else (
                operand.zero_value if operand.zero_value is not None else cst.Name(UNKNOWN_ZERO))
            if isinstance(value, cst.Name) and value.value in self.rebound:
                bound = self.fresh("factor")            # its value here, not the one a later rebinding gives
                program.append(Plain(_stmt(f"{bound} = {value.value}")))
                value = cst.Name(bound)
            elif not isinstance(value, cst.Name) and self.is_tensor(value, tensors):
                bound = self.fresh("factor")            # computed once, read by the transposes
                program.append(Plain(_stmt(f"{bound} = {code(value)}")))
                tensors.add(bound)
                value = cst.Name(bound)
            if self.one_for_list(argument.type, value):
                value = cst.List([cst.Element(value)])  # ``int[1]`` given one ``int``: its list, as torch reads it
            constants[argument.name] = value
        program.append(Linear(target, node, formula=formula, arguments=constants, linear=live))
        linear.add(target)
        return Operand(linear=target)

    def zero(self, node: cst.Call, schema: FunctionSchema, operands, by_param) -> Operand:
        """A zero maker applied to a linear value: a zero of known metadata, rebuilt on the
        gradient's output (the same dtype and device) with the sizes it copies or is given, so a
        transpose may read its metadata."""
        self_operand = by_param.get("self")
        like = self_operand.linear if self_operand is not None else None
        outputs = [o for o in self.witnesses.values() if o is not None]
        if like is None or not outputs or any(o.linear is not None for o in operands[1:]):
            return ZERO
        if str(schema.name) in ("new_zeros", "new_full"):
            size = by_param.get("size")
            if size is None or size.constant is None or len(node.args) != (2 if str(schema.name) == "new_zeros" else 3):
                return ZERO
            sizes = size.constant
        elif self.witnesses.get(like) is not None:       # zeros_like(a gradient): on its output
            witness = self.witnesses[like]
            first = node.args[0].with_changes(value=cst.Name(witness))
            return Operand(zero_value=node.with_changes(args=[first, *node.args[1:]]),
                           zero_sizes=_expr(f"{witness}.sizes()"))
        elif len(node.args) != 1:
            return ZERO
        else:
            sizes = _expr(f'{META}("{like}").sizes()')
        return Operand(zero_value=_expr(f"at.new_zeros({outputs[0]}, {code(sizes)})"), zero_sizes=sizes)

    def resolve(self, node, base, operands, named, tensors) -> tuple[FunctionSchema, Formula | None]:
        def tensorish(o: Operand) -> bool:
            return o.linear is not None or (o.is_zero) or self.is_tensor(o.constant, tensors)

        matches = []
        for schema, formula in self.table.overloads(base):
            params = [a for a in schema.arguments if not a.is_out]
            if len(operands) > len(params):
                continue
            given = {a.name: o for a, o in zip(params, operands)}
            if any(k in given or k not in {a.name for a in params} for k in named):
                continue
            given.update(named)
            if any(a.default is None and a.name not in given for a in params):
                continue
            if all(is_tensor_like(a.type) == tensorish(given[a.name]) for a in params if a.name in given
                   if not (given[a.name].constant is not None and _is_none(given[a.name].constant))) \
                    and all(self.fits(a.type, given[a.name]) for a in params if a.name in given):
                matches.append((schema, formula))
        if len(matches) > 1:     # a literal number or list, or sizes, pick (`squeeze(x, 0)`, `view(x, y.sizes())`)
            matches = [m for m in matches if not self.list_kind_differs(m[0], operands, named)] or matches
        if len(matches) != 1:
            raise DerivationRefused(node, f"`at.{base}` matches {len(matches)} declared overloads for these "
                                    "arguments")
        return matches[0]

    @staticmethod
    def list_kind_differs(schema: FunctionSchema, operands, named) -> bool:
        """Whether ``schema`` takes a list where a number literal is given, or the reverse for a
        list literal or ``x.sizes()``."""
        params = [a for a in schema.arguments if not a.is_out]
        given = {**{a.name: o for a, o in zip(params, operands)}, **named}
        for argument in params:
            constant = given[argument.name].constant if argument.name in given else None
            takes_list = isinstance(_unwrapped(argument.type), ListType)
            if _is_number(constant) and takes_list:
                return True
            if (isinstance(constant, cst.List) or (constant is not None and _plain_sizes(constant)
                                                   and not isinstance(constant, cst.Name))) and not takes_list:
                return True
        return False

    def one_for_list(self, wanted, value: cst.BaseExpression) -> bool:
        """Whether ``value`` is one number (a literal or an ``int`` parameter) given for ``wanted``, a
        list of one (``int[1]``)."""
        wanted = _unwrapped(wanted)
        if not (isinstance(wanted, ListType) and wanted.size == 1):
            return False
        if _is_number(value):
            return True
        return isinstance(value, cst.Name) and value.value in self.parameter_types \
            and _unwrapped(self.parameter_types[value.value]) == wanted.elem

    def fits(self, wanted, operand: Operand) -> bool:
        """Whether a constant that is one of the formula's parameters has ``wanted``'s list-ness
        (``movedim(grad, destination, source)`` picks ``.int`` or ``.intlist`` by the parameters'
        types)."""
        if not isinstance(operand.constant, cst.Name) or operand.constant.value not in self.parameter_types:
            return True
        given = self.parameter_types[operand.constant.value]
        if _unwrapped(wanted) == ListType(_unwrapped(given), 1):
            return True             # ``int[1]`` takes one ``int`` (``sum(x, dim, True)`` with ``int dim``)
        return isinstance(_unwrapped(wanted), ListType) == isinstance(_unwrapped(given), ListType)

    def helper_overload(self, node: cst.Call) -> Helper:
        """The helper a call names: ``name`` or one of its overloads ``name__variant``
        (``unsqueeze_to(grad, sizes)`` / ``unsqueeze_to(grad, dim, sizes)``), picked by the number
        of arguments and, where one is a list, a number or a tensor for sure, by its annotation; the
        first that fits in declaration order (as the C++ emitter picks)."""
        name = node.func.value
        prefix = name + "__"
        overloads = [h for n, h in self.table.helpers.items()
                     if n == name or (n.startswith(prefix) and "__" not in n[len(prefix):])]
        positional = [a.value for a in node.args if a.keyword is None]
        keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        fitting = []
        for helper in overloads:
            names = [p.name for p in helper.params]
            if len(positional) > len(names) or any(k not in names[len(positional):] for k in keywords):
                continue
            given = {**dict(zip(names, positional)), **keywords}
            if any(p.default is None and p.name not in given for p in helper.params):
                continue
            if all(self.kind_fits(p.annotation, given[p.name]) for p in helper.params if p.name in given):
                fitting.append(helper)
        if not fitting and len(overloads) > 1:
            raise DerivationRefused(node, f"none of the {len(overloads)} overloads of `{name}` takes these arguments")
        return fitting[0] if fitting else self.table.helpers[name]      # the first that fits, as in C++

    def kind_fits(self, annotation: str | None, value: cst.BaseExpression) -> bool:
        """Whether ``value`` can be a ``list[...]`` (or not one) as ``annotation`` says, where that
        is sure: a literal number or list, ``x.sizes()``, or one of the formula's parameters."""
        if annotation is None:
            return True
        wants_list = annotation.replace(" ", "").startswith(("list[", "list|", "Optional[list"))
        if isinstance(value, (cst.Integer, cst.Float)):
            return not wants_list
        if isinstance(value, cst.List) or _plain_sizes(value) and not isinstance(value, cst.Name):
            return wants_list
        if isinstance(value, cst.Name) and value.value in self.parameter_types:
            given = self.parameter_types[value.value]
            if not wants_list and annotation.startswith("Tensor") != is_tensor_like(given):
                return False
            return isinstance(_unwrapped(given), ListType) == wants_list
        return True

    def self_transposed(self, node: cst.Call, helper: Helper, linear, tensors, program) -> Operand:
        """A ``SELF_TRANSPOSED_HELPERS`` call: one linear step in its linear parameter (the others
        must be constants), not inlined."""
        param = _transposed_helper_param(helper.name) or "grad"     # an OPERATOR_BACKWARD_HELPERS helper: grad
        given = [a.value for a in node.args if a.keyword is None]
        keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        arguments: dict[str, cst.BaseExpression] = {}
        live: dict[str, str] = {}
        for i, p in enumerate(helper.params):
            value = given[i] if i < len(given) else keywords.get(p.name, p.default)
            if value is None:
                raise DerivationRefused(node, f"helper `{helper.name}` is called without `{p.name}`")
            operand = self.operand(value, linear, tensors, program)
            if p.name == param:
                if operand.is_zero:
                    return ZERO
                if operand.linear is None:
                    raise DerivationRefused(node, f"`{helper.name}`'s `{param}` does not depend on the gradient")
                live[p.name] = operand.linear
            elif operand.linear is not None or operand.is_zero:
                raise DerivationRefused(node, f"`{helper.name}` is linear in `{param}` alone, and `{p.name}` "
                                        "depends on the gradient")
            else:
                value = operand.constant
                if (isinstance(value, cst.Name) and value.value in self.rebound) or (
                        not isinstance(value, cst.Name) and self.is_tensor(value, tensors)) or (
                        helper.name in OPERATOR_BACKWARD_HELPERS and p.name == "sizes"):
                    # its value here, computed once for the transpose (the result's sizes: a fresh
                    # name, which no inlined backward's local can shadow)
                    bound = self.fresh("factor")
                    program.append(Plain(_stmt(f"{bound} = {code(value)}")))
                    value = cst.Name(bound)
                arguments[p.name] = value
        target = self.fresh("lin")
        program.append(Linear(target, node, arguments=arguments, linear=live, helper=helper))
        linear.add(target)
        return Operand(linear=target)

    def inline_helper(self, node: cst.Call, helper: Helper, linear, tensors, program, several: int = 0
                      ) -> Operand | list[Operand]:
        body = helper.node.body.body
        local_names = {p.name for p in helper.params} | _assigned_in(body)
        renames = {name: cst.Name(self.fresh(name)) for name in sorted(local_names)}
        given = [a.value for a in node.args if a.keyword is None]
        keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        inner_linear, inner_tensors = set(linear), set(tensors)
        for i, param in enumerate(helper.params):
            value = given[i] if i < len(given) else keywords.get(param.name, param.default)
            if value is None:
                raise DerivationRefused(node, f"helper `{helper.name}` is called without `{param.name}`")
            if _is_literal(value) and param.name not in _assigned_in(body):
                renames[param.name] = value         # put in place, so the branches it decides fold
                continue
            self.bind(renames[param.name].value, value, inner_linear, inner_tensors, program)
        results = [self.fresh(f"{helper.name}_result") for _ in range(several or 1)]
        statements = [rename(s, renames) for s in single_exit(_without_docstring(body))]
        statements = single_exit(_fold_statements(statements, _MaskFolder(None, lambda i: False)))
        self.rebound |= _rebound(statements)
        self.statements(statements, inner_linear, inner_tensors, results, program)
        linear.update(inner_linear)
        tensors.update(inner_tensors)
        operands = [Operand(linear=r) if r in inner_linear else Operand(constant=cst.Name(r)) for r in results]
        return operands if several else operands[0]

    # -- facts
    def is_list(self, name: str) -> bool:
        return name in self.lists or name in self.gradient_lists

    def reads_linear(self, node: cst.CSTNode, linear: set[str]) -> bool:
        return any(isinstance(n, cst.Name) and n.value in linear for n in _nodes(node))

    def is_tensor(self, node: cst.BaseExpression | None, tensors: set[str]) -> bool:
        if node is None:
            return False
        if isinstance(node, cst.Name):
            return node.value in tensors
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name) \
                    and node.func.value.value == "at":
                return True
            if isinstance(node.func, cst.Name) and node.func.value in self.table.helpers:
                return (self.table.helpers[node.func.value].returns or "") in ("Tensor", "Tensor | None")
            return False
        if isinstance(node, cst.BinaryOperation):
            return self.is_tensor(node.left, tensors) or self.is_tensor(node.right, tensors)
        if isinstance(node, cst.UnaryOperation):
            return self.is_tensor(node.expression, tensors)
        if isinstance(node, cst.Comparison):
            return self.is_tensor(node.left, tensors) or any(self.is_tensor(c.comparator, tensors)
                                                             for c in node.comparisons)
        if isinstance(node, cst.IfExp):
            return self.is_tensor(node.body, tensors) or self.is_tensor(node.orelse, tensors)
        return False

    def assigns_tensor(self, statement, tensors: set[str]) -> bool:
        if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 \
                and isinstance(statement.body[0], cst.Assign):
            return self.is_tensor(statement.body[0].value, tensors)
        return False


#: The operator Python's reflected method runs for ``number <op> tensor`` (``Tensor.__rmul__``...), with
#: the tensor first; ``number / tensor`` is not linear in the tensor.
REFLECTED = {"add": "add", "mul": "mul", "sub": "rsub"}

def _transposed_helper_param(name: str) -> str | None:
    """The linear parameter of a helper transposed as one step (``SELF_TRANSPOSED_HELPERS``,
    ``TRANSPOSED_BY_HELPERS``); None for any other."""
    if name in SELF_TRANSPOSED_HELPERS:
        return SELF_TRANSPOSED_HELPERS[name][0]
    return TRANSPOSED_BY_HELPERS[name][0] if name in TRANSPOSED_BY_HELPERS else None


def _reads_only_device(helper: Helper, param: str) -> bool:
    """Whether every use of ``param`` in ``helper`` is the first argument of a zero maker given
    its sizes and dtype (so only the tensor's device is read)."""
    uses = sum(1 for n in _nodes(helper.node.body) if isinstance(n, cst.Name) and n.value == param)
    device_reads = 0
    for n in _nodes(helper.node.body):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and isinstance(n.func.value, cst.Name) \
                and n.func.value.value == "at" and n.func.attr.value in ("new_zeros", "new_ones", "new_empty") \
                and len(n.args) >= 2 and n.args[0].keyword is None and isinstance(n.args[0].value, cst.Name) \
                and n.args[0].value.value == param and any(a.keyword is not None and a.keyword.value == "dtype"
                                                           for a in n.args):
            device_reads += 1
    return uses > 0 and uses == device_reads


def _appended_to(statement: cst.CSTNode) -> set[str]:
    """The names ``statement`` appends to (``name.append(...)``, in loops and branches too)."""
    return {found[0] for n in _nodes(statement) if isinstance(n, cst.Call) and (found := _append_call(n)) is not None}


def _linear_or_entry(node: cst.BaseExpression, linear: set[str]) -> bool:
    """A linear name, or an entry ``name[i]`` of one."""
    if isinstance(node, cst.Subscript):
        node = node.value
    return isinstance(node, cst.Name) and node.value in linear


def _append_call(node: cst.BaseExpression) -> tuple[str, cst.BaseExpression] | None:
    """``(name, value)`` of ``name.append(value)``; None for anything else."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name) \
            and node.func.attr.value == "append" and len(node.args) == 1 and node.args[0].keyword is None:
        return node.func.value.value, node.args[0].value
    return None


def _empty_list_target(statement) -> str | None:
    """``name`` of ``name = []``; None for anything else."""
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 \
            and isinstance(statement.body[0], cst.Assign) and len(statement.body[0].targets) == 1 \
            and isinstance(statement.body[0].targets[0].target, cst.Name) \
            and isinstance(statement.body[0].value, cst.List) and not statement.body[0].value.elements:
        return statement.body[0].targets[0].target.value
    return None


def _rebound(statements) -> set[str]:
    """Names bound more than once on a path through ``statements``, or inside a loop (their value at
    one step may differ from their value when the step's transpose runs)."""
    def counts(nodes) -> dict[str, int]:
        found: dict[str, int] = {}
        for statement in nodes:
            if isinstance(statement, (cst.For, cst.While)):
                inner = {name: 2 for name in _assigned_in(statement.body.body)}
            elif isinstance(statement, cst.If):
                body, orelse = counts(statement.body.body), counts(_else_body(statement))
                inner = {name: max(body.get(name, 0), orelse.get(name, 0)) for name in body.keys() | orelse.keys()}
            else:
                inner = dict.fromkeys(_assigned(statement), 1)
            for name, count in inner.items():
                found[name] = found.get(name, 0) + count
        return found
    return {name for name, count in counts(list(statements)).items() if count > 1}


def _plain_sizes(sizes: cst.BaseExpression) -> bool:
    """A name or ``x.sizes()``: cheap enough to read where it is needed."""
    return isinstance(sizes, cst.Name) or (
        isinstance(sizes, cst.Call) and not sizes.args and isinstance(sizes.func, cst.Attribute)
        and isinstance(sizes.func.value, cst.Name) and sizes.func.attr.value == "sizes")


def _fills_zero(schema: FunctionSchema, by_param: Mapping[str, Operand]) -> bool:
    """``new_full(x, sizes, 0)``: a zero maker too."""
    fill = by_param.get("fill_value")
    return str(schema.name) == "new_full" and fill is not None and isinstance(fill.constant, (cst.Integer, cst.Float)) \
        and float(fill.constant.value) == 0.0


def _zeros_like_witness(witness: str, sizes: cst.BaseExpression) -> str:
    """A tensor of ``sizes`` and ``witness``'s dtype that a ``SIZED_BY_CONSTANT_VALUES`` operator runs on
    for its result's sizes (which do not depend on its values): ``witness`` itself when ``sizes``
    are its own, else zeros of ``sizes``."""
    return witness if code(sizes) == f"{witness}.sizes()" else f"at.new_zeros({witness}, {code(sizes)})"


def _sizes_of_constant(value: cst.BaseExpression | None) -> cst.BaseExpression | None:
    return None if value is None or _is_none(value) else _expr(f"{code(value)}.sizes()")


def _unwrapped(type_):
    return type_.elem if isinstance(type_, OptionalType) else type_


def _split_on(test: cst.Name, statements: list) -> cst.If:
    """``if test: <statements with test True> else: <statements with test False>``, folded."""
    sides = []
    for truth in ("True", "False"):
        folded = _fold_statements([rename(s, {test.value: cst.Name(truth)}) for s in statements],
                                  _MaskFolder(None, lambda i: False))
        sides.append(cst.IndentedBlock(body=folded or [_stmt("pass")]))
    return cst.If(test=test, body=sides[0], orelse=cst.Else(body=sides[1]))


def _is_literal(node) -> bool:
    """``True``/``False``/``None``, a number, or a list of those."""
    if isinstance(node, cst.List):
        return all(isinstance(e, cst.Element) and _is_literal(e.value) for e in node.elements)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return isinstance(node.expression, (cst.Integer, cst.Float))
    return isinstance(node, (cst.Integer, cst.Float)) or (isinstance(node, cst.Name) and node.value in ("True", "False", "None"))


def _is_number(node) -> bool:
    """A number literal, negated or not (``0``, ``-1``, ``2.5``)."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float))


def _is_none(node) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _returned(statement: cst.Return) -> list[cst.BaseExpression | None]:
    value = statement.value
    if isinstance(value, cst.Tuple):
        return [None if _is_none(e.value) else e.value for e in value.elements]
    return [None if value is None or _is_none(value) else value]


def _range_bounds(iterable: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """``(start, stop)`` of ``range(stop)`` / ``range(start, stop)``; None for anything else."""
    if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range"
            and 1 <= len(iterable.args) <= 2 and all(a.keyword is None and a.star == "" for a in iterable.args)):
        return None
    if len(iterable.args) == 1:
        return cst.Integer("0"), iterable.args[0].value
    return iterable.args[0].value, iterable.args[1].value


def _items(program: list):
    """Every item of ``program``, those inside branches and loops included, in source order."""
    for item in program:
        yield item
        if isinstance(item, Branch):
            yield from _items(item.body)
            yield from _items(item.orelse)
        elif isinstance(item, Loop):
            yield from _items(item.body)


def _started_lists(program: list) -> frozenset[str]:
    """The linear lists ``program`` starts (``ListStart``), inside its branches and loops too."""
    return frozenset(item.target for item in _items(program) if isinstance(item, ListStart))


def _linear_reads(program: list) -> set[str]:
    return {name for item in _items(program) if isinstance(item, (Linear, Append, Element)) for name in _read_by(item)}


def _read_by(item: Linear | Append | Element) -> set[str]:
    if isinstance(item, Element):
        return {item.source}
    if isinstance(item, Append):
        return {item.target} | ({item.value} if item.value else set())
    return {item.source} if item.source else set(item.linear.values())


def _read_before_bound(program: list) -> set[str]:
    """The linear names a step of ``program`` reads before ``program`` binds them (in a loop's body:
    the values carried in from before the loop or the previous iteration)."""
    bound: set[str] = set()
    found: set[str] = set()
    for item in _items(program):
        if isinstance(item, (Linear, Append, Element)):
            found |= _read_by(item) - bound
        if isinstance(item, (Linear, Element, ListStart)):
            bound.add(item.target)
    return found


def _linear_binds(program: list) -> set[str]:
    return {name for item in _items(program) if isinstance(item, (Linear, Append, ListStart, Element))
            for name in (item.target, *(item.outputs if isinstance(item, Linear) else ()))}


def _carried_constants(program: list, variable: str) -> list[str]:
    """The constants the loop body reads before it binds them (so their values come from the
    previous iteration)."""
    plains = [item for item in _items(program) if isinstance(item, Plain)]
    bound_in_body = {name for item in plains for name in _assigned(item.statement)} - {variable}
    bound_so_far: set[str] = set()
    carried: set[str] = set()
    for item in _items(program):
        nodes = [item.statement] if isinstance(item, Plain) else (
            list(item.arguments.values()) if isinstance(item, Linear) else [])
        for node in nodes:
            read = _read_before_binding([node]) if isinstance(node, cst.BaseStatement) else _names(node)
            carried |= read & bound_in_body - bound_so_far
        if isinstance(item, Plain):
            bound_so_far |= _assigned(item.statement)
    return sorted(carried)


def _read_before_binding(statements) -> set[str]:
    """The names ``statements`` read before they bind them (a branch's bindings count after it only
    when both sides make them; a loop's body is read as if run once)."""
    bound: set[str] = set()
    found: set[str] = set()
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    found |= _names(small.value) - bound
                    bound |= _assigned_in([cst.SimpleStatementLine([small])])
                else:
                    found |= _names(small) - bound
        elif isinstance(statement, cst.If):
            found |= _names(statement.test) - bound
            body, orelse = list(statement.body.body), _else_body(statement)
            found |= (_read_before_binding(body) | _read_before_binding(orelse)) - bound
            bound |= _assigned_in(body) & _assigned_in(orelse)
        elif isinstance(statement, (cst.For, cst.While)):
            head = statement.iter if isinstance(statement, cst.For) else statement.test
            own = _names(statement.target) if isinstance(statement, cst.For) else set()
            found |= _names(head) - bound
            found |= _read_before_binding(statement.body.body) - own - bound
        else:
            found |= _names(statement) - bound
    return found


def _assigned(statement) -> set[str]:
    return _assigned_in([statement])


def _assigned_in(statements) -> set[str]:
    from transpiler.dataflow import assigned_names
    return set(assigned_names(statements))


def _without_docstring(body) -> list[cst.BaseStatement]:
    body = list(body)
    if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
            and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        return body[1:]
    return body


# ---- sizes of linear values and the forward sweep -------------------------------------------
class _Sweep:
    """Walks the linear program: the forward sweep (constants, with the sizes of linear values
    known at each step) and the reverse sweep (adjoints, transposes inlined)."""

    def __init__(self, builder: _Builder, witness: str | None) -> None:
        self.builder = builder
        self.witness = witness
        self.sizes_before: dict[int, dict[str, cst.BaseExpression | None]] = {}   # id(step) -> sizes env
        self.read_linear: set[str] = set()      # names some linear step reads (their adjoints matter)
        self.exit_sizes: dict[int, dict[str, cst.BaseExpression | None]] = {}    # id(loop) -> sizes after it
        self.owned: set[str] = set()            # adjoint lists made by the jvp (so written in place)
        self.gradient_sizes: dict[str, cst.BaseExpression] = {}   # returned as an input's gradient: its sizes

    def reads(self, program: list) -> None:
        for item in program:
            if isinstance(item, (Linear, Append, Element)):
                self.read_linear |= _read_by(item)
            elif isinstance(item, Branch):
                self.reads(item.body)
                self.reads(item.orelse)
            elif isinstance(item, Loop):
                self.reads(item.body)

    # -- sizes
    def annotate(self, program: list, sizes: dict[str, cst.BaseExpression | None]) -> None:
        """Resolve metadata marks in constant statements and record, for each linear step, the
        sizes of the linear values it reads (None: unknown)."""
        for i, item in enumerate(program):
            if isinstance(item, Plain):
                item.statement = self.resolve_marks(item.statement, sizes)
                for name in _assigned(item.statement):
                    sizes.pop(name, None)
            elif isinstance(item, Linear):
                item.arguments = {p: self.resolve_marks(v, sizes) for p, v in item.arguments.items()}
                self.sizes_before[id(item)] = dict(sizes)
                found = self.sizes_of(item, sizes)
                if found is None:
                    found = self.gradient_sizes.get(item.target)
                if found is None:
                    found = self.sizes_by_running(item, sizes)
                if found is not None and not _plain_sizes(found):      # computed once, read by name
                    holder = self.builder.fresh(f"{item.target}_sizes")
                    item.sizes_binding = _stmt(f"{holder} = {code(found)}")
                    found = cst.Name(holder)
                sizes[item.target] = found
            elif isinstance(item, Append):           # a list's sizes: the list of its elements' sizes
                self.sizes_before[id(item)] = dict(sizes)
                known = sizes.get(item.value) if item.value is not None else None
                if known is not None and sizes.get(item.target) is not None:
                    item.record = _stmt(f"{code(sizes[item.target])}.append({code(known)})")
                else:
                    sizes[item.target] = None        # an element of unknown sizes: the list's are unknown
            elif isinstance(item, ListStart):
                item.sizes_holder = self.builder.fresh(f"{item.target}_sizes")
                sizes[item.target] = cst.Name(item.sizes_holder)
            elif isinstance(item, Element):
                self.sizes_before[id(item)] = dict(sizes)
                listed = self.builder.gradient_lists.get(item.source)
                if listed is not None:
                    sizes[item.target] = _expr(f"{listed}[{item.index}].sizes()")
                elif sizes.get(item.source) is not None:
                    sizes[item.target] = _expr(f"{code(sizes[item.source])}[{item.index}]")
                else:
                    sizes[item.target] = None
            elif isinstance(item, Loop):
                self.annotate_loop(item, sizes)
            else:
                body_sizes, else_sizes = dict(sizes), dict(sizes)
                self.sizes_before[id(item)] = dict(sizes)
                self.annotate(item.body, body_sizes)
                self.annotate(item.orelse, else_sizes)
                sizes.clear()
                for name in sorted(body_sizes.keys() | else_sizes.keys()):
                    a, b = body_sizes.get(name), else_sizes.get(name)
                    if a is None or b is None:
                        sizes[name] = None
                    elif code(a) == code(b):
                        sizes[name] = a
                    else:                   # bound on both sides, so the name outlives the branch
                        merged = self.builder.fresh(f"{name}_sizes")
                        item.body.append(Plain(_stmt(f"{merged} = {code(a)}")))
                        item.orelse.append(Plain(_stmt(f"{merged} = {code(b)}")))
                        sizes[name] = cst.Name(merged)

    def annotate_loop(self, loop: Loop, sizes: dict[str, cst.BaseExpression | None]) -> None:
        """A carried linear value's sizes may change from one iteration to the next: they are held in
        a name the forward loop updates at the end of each iteration, and listed per iteration for
        the reverse loop (``Loop.seen``)."""
        self.sizes_before[id(loop)] = dict(sizes)
        body_sizes = dict(sizes)
        holders: dict[str, str] = {}
        for name in loop.carried:
            if sizes.get(name) is not None and name not in self.builder.lists:    # a list's sizes: appended to
                holders[name] = self.builder.fresh(f"{name}_sizes")
                loop.setup.append(_stmt(f"{holders[name]} = {code(sizes[name])}"))
                body_sizes[name] = cst.Name(holders[name])
        self.annotate(loop.body, body_sizes)
        for name in loop.carried:
            end, holder = body_sizes.get(name), holders.get(name)
            if name in self.builder.lists:
                sizes[name] = end
            elif holder is None:
                sizes[name] = None
            elif end is None:
                raise DerivationRefused(None, f"the sizes of `{name}` after an iteration of a loop are unknown")
            else:
                if code(end) != holder:
                    loop.updates.append(_stmt(f"{holder} = {code(end)}"))
                    loop.seen[holder] = self.builder.fresh(f"{holder}_seen")
                sizes[name] = cst.Name(holder)
        for name in _linear_binds(loop.body) - set(loop.carried):
            sizes.pop(name, None)
        self.exit_sizes[id(loop)] = dict(sizes)

    def result_sizes(self, step: Linear) -> cst.BaseExpression | None:
        """The sizes of the step's result: by the sizes rules, else as a returned gradient's."""
        found = self.sizes_of(step, self.sizes_before[id(step)])
        return found if found is not None else self.gradient_sizes.get(step.target)

    def sizes_of(self, step: Linear, sizes) -> cst.BaseExpression | None:
        if step.source is not None:
            return sizes.get(step.source)
        if step.helper is not None and step.helper.name in TRANSPOSED_BY_HELPERS:
            param, result_sizes = TRANSPOSED_BY_HELPERS[step.helper.name][:2]
            if result_sizes == param:           # a result of the linear argument's sizes
                return sizes.get(step.linear[param])
            return step.arguments[result_sizes] if result_sizes is not None else None
        if step.helper is not None and step.helper.name in OPERATOR_BACKWARD_HELPERS:
            return step.arguments["sizes"]
        if step.helper is not None:
            return sizes.get(next(iter(step.linear.values())))
        if step.formula is None:
            if step.zero_sizes is None:
                return None
            try:
                return self.resolve_marks(step.zero_sizes, sizes)
            except DerivationRefused:
                return None
        formula = step.formula
        name = str(formula.schema.name)
        arguments = {**step.arguments, **{p: cst.Name(n) for p, n in step.linear.items()}}
        if name in ELEMENTWISE or broadcasts(formula):
            parts = []
            for argument in formula.schema.arguments:
                if not is_tensor_like(argument.type) or argument.name not in arguments:
                    continue
                if argument.name in step.linear:
                    part = sizes.get(step.linear[argument.name])
                else:
                    value = arguments[argument.name]
                    part = None if _is_none(value) else cst.parse_expression(f"{code(value)}.sizes()")
                if part is None:
                    return None
                parts.append(part)
            if not parts:
                return None
            combined = parts[0]
            for part in parts[1:]:
                combined = _expr(f"broadcast_sizes({code(combined)}, {code(part)})")
            return combined
        shape_argument = {"expand": "size", "view": "size", "reshape": "shape"}.get(formula.schema.name.base)
        if shape_argument is not None and shape_argument in step.arguments:
            shape = step.arguments[shape_argument]
            inferred = isinstance(shape, cst.List) and any(      # `[-1]`: a size left for the op to infer
                isinstance(e.value, cst.UnaryOperation) and isinstance(e.value.operator, cst.Minus) for e in shape.elements)
            return None if inferred else shape
        if formula.schema.name.base in SAME_SIZES:
            return sizes.get(step.linear["self"]) if "self" in step.linear else _sizes_of_constant(arguments.get("self"))
        if name == "gather":
            return _sizes_of_constant(arguments.get("index"))
        if name in ("cat", "stack") and "tensors" in step.linear:
            listed = sizes.get(step.linear["tensors"])
            if listed is None:
                return None
            dim = code(step.arguments.get("dim", cst.Integer("0")))
            return _expr(f"{'concatenated_sizes' if name == 'cat' else 'stacked_sizes'}({code(listed)}, {dim})")
        if name == "unsqueeze":
            source = sizes.get(step.linear.get("self", ""))
            dim = step.arguments.get("dim")
            if source is None or dim is None:
                return None
            return _expr(f"unsqueezed_sizes({code(source)}, {code(dim)})")
        if name in FULL_REDUCTIONS:
            return _expr("[]")
        if name in SIZES_HELPERS:
            return self.helper_sizes(step, sizes, *SIZES_HELPERS[name])
        if name in REDUCTIONS:
            source = sizes.get(step.linear.get("self", ""))
            if source is None:
                return None
            dim = step.arguments.get("dim", cst.Name("None"))
            keepdim = step.arguments.get("keepdim", cst.Name("False"))
            return _expr(f"reduced_sizes({code(source)}, {code(dim)}, {code(keepdim)})")
        return None

    def sizes_by_running(self, step: Linear, sizes) -> cst.BaseExpression | None:
        """The sizes of a ``SIZED_BY_CONSTANT_VALUES`` operator's result: those of the operator run on
        zeros of its linear arguments' sizes, the constants as they are (``masked_select``'s length
        is its mask's True count, which only running it tells)."""
        formula = step.formula
        if formula is None or str(formula.schema.name) not in SIZED_BY_CONSTANT_VALUES or self.witness is None:
            return None
        positional = []
        for argument in formula.schema.arguments:
            if argument.name in step.linear:
                known = sizes.get(step.linear[argument.name])
                if known is None:
                    return None
                positional.append(_zeros_like_witness(self.witness, known))
            elif argument.name in step.arguments:
                positional.append(code(step.arguments[argument.name]))
            else:
                break                               # the rest take their defaults
        return _expr(f"list(at.{formula.schema.name.base}({', '.join(positional)}).sizes())")

    @staticmethod
    def helper_sizes(step: Linear, sizes, helper: str, names: tuple[str, ...]) -> cst.BaseExpression | None:
        """``helper(...)`` of the step's arguments ``names`` (``SIZES_HELPERS``); None where the sizes
        of a linear argument are unknown."""
        schema_arguments = {a.name: a for a in step.formula.schema.arguments}
        parts = []
        for name in names:
            argument = schema_arguments[name]
            if name in step.linear:
                part = sizes.get(step.linear[name])
            elif name in step.arguments:
                value = step.arguments[name]
                part = _sizes_of_constant(value) if is_tensor_like(argument.type) else value
            else:
                part = None if argument.default is None else _expr(argument.default)
            if part is None:
                return None
            parts.append(code(part))
        return _expr(f"{helper}({', '.join(parts)})")

    def resolve_marks(self, node: cst.CSTNode, sizes) -> cst.CSTNode:
        sweep = self

        class Resolve(cst.CSTTransformer):
            def leave_Call(self, original, updated):
                func = updated.func
                if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call)
                        and isinstance(func.value.func, cst.Name) and func.value.func.value == META):
                    return updated
                name = func.value.args[0].value.value.strip('"')
                return sweep.metadata_read(name, func.attr.value, updated.args, sizes.get(name), original)
        return node.visit(Resolve())

    def metadata_read(self, name: str, method: str, args, sizes, node) -> cst.BaseExpression:
        if method in ("scalar_type", "options"):
            if self.witness is None:
                raise DerivationRefused(node, f"the dtype of the linear value `{name}`: the gradient's output "
                                        "is not a named output")
            return _expr(f"{self.witness}.{method}()")
        if sizes is None:
            raise DerivationRefused(node, f"the sizes of the linear value `{name}` are needed and the sizes "
                                    "rules cannot tell them")
        if method == "sizes":
            return sizes
        if method == "dim":
            return _expr(f"len({code(sizes)})")
        if method == "numel" and not args:         # ``mean``'s count: every dim reduced
            return _expr(f"reduced_numel({code(sizes)}, None)")
        if method == "size" and len(args) == 1:
            dim = code(args[0].value)
            return _expr(f"{code(sizes)}[wrap_dim({dim}, len({code(sizes)}))]")
        raise DerivationRefused(node, f"`.{method}(...)` of the linear value `{name}`")

    # -- the forward sweep
    def forward(self, program: list, also_read: frozenset[str] = frozenset(), replay: bool = False,
                remade: frozenset[str] = frozenset()) -> list[cst.BaseStatement]:
        """The constant statements in order. A branch's own are run again where the reverse sweep
        reverses it (``replay``: the lists of sizes of linear lists started before are made once, not
        again; those started in what is replayed are made again), so
        here only a branch whose names the statements beside it (or ``also_read``) read, or that
        lists sizes, is kept. A loop runs forward whole: it lists the sizes its reverse loop reads."""
        out: list[cst.BaseStatement] = []
        beside = self.names_read_beside(program) | also_read
        if replay:          # a list started in what runs again is made again (a loop's: per iteration)
            remade = remade | _started_lists(program)
        for item in program:
            if isinstance(item, Plain):
                out.append(item.statement)
            elif isinstance(item, Linear) and item.sizes_binding is not None:
                out.append(item.sizes_binding)
            elif isinstance(item, ListStart) and (not replay or item.target in remade):
                out.append(_stmt(f"{item.sizes_holder} = []"))
            elif isinstance(item, Append) and item.record is not None and (not replay or item.target in remade):
                out.append(item.record)
            elif isinstance(item, Loop):
                out += item.setup + [_stmt(f"{seen} = []") for seen in (*item.seen.values(), *item.restored.values())]
                updates_read = {n.value for s in item.updates for n in _nodes(s) if isinstance(n, cst.Name)}
                body = [_stmt(f"{seen}.append({holder})") for holder, seen in (*item.seen.items(), *item.restored.items())]
                body += self.forward(item.body, frozenset(updates_read | item.restored.keys()), replay,
                                     remade) + item.updates
                if item.condition is not None:          # runs forward to count its iterations
                    count = code(item.stop)
                    out.append(_stmt(f"{count} = 0"))
                    counted = cst.parse_statement(f"while {code(item.condition)}:\n    {count} = {count} + 1\n")
                    out.append(counted.with_changes(body=counted.body.with_changes(body=[*body, *counted.body.body])))
                elif body:
                    out.append(_for(item.variable, item.start, item.stop, body))
            elif isinstance(item, Branch) and (self.bound_in(item) & beside or not replay and any(
                    isinstance(inner, Append) and inner.record is not None for inner in _items([item]))):
                body = self.forward(item.body, replay=replay, remade=remade)
                orelse = self.forward(item.orelse, replay=replay, remade=remade)
                if body or orelse:
                    out.append(_if(item.condition, body, orelse))
        return out

    def names_read_beside(self, program: list) -> set[str]:
        """Names read by the constant statements of ``program`` itself (not inside its branches)
        and by the sizes its linear steps' transposes use."""
        read: set[str] = set()
        for item in program:
            nodes = []
            if isinstance(item, Plain):
                nodes = [item.statement]
            elif isinstance(item, Linear):
                nodes = [*item.arguments.values(), *(v for v in self.sizes_before.get(id(item), {}).values() if v)]
            elif isinstance(item, Append):
                nodes = [cst.Name(item.position)]
            elif isinstance(item, Element):
                nodes = [cst.Name(item.index)]
            elif isinstance(item, Loop):
                nodes = [item.start, item.stop, *item.setup, *(v for v in self.exit_sizes[id(item)].values() if v)]
                nodes += [item.condition] if item.condition is not None else []
            for node in nodes:
                read |= {n.value for n in _nodes(node) if isinstance(n, cst.Name)}
        return read

    def bound_in(self, branch: Branch) -> set[str]:
        bound: set[str] = set()
        for item in (*branch.body, *branch.orelse):
            if isinstance(item, Plain):
                bound |= _assigned(item.statement)
            elif isinstance(item, Linear) and item.sizes_binding is not None:
                bound |= _assigned(item.sizes_binding)
            elif isinstance(item, Branch):
                bound |= self.bound_in(item)
        return bound | {name for item in (*branch.body, *branch.orelse) if isinstance(item, Loop)
                        for statement in item.setup for name in _assigned(statement)}

    # -- the reverse sweep
    def reverse(self, program: list, adjoints: dict[str, str]) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        for item in reversed(program):
            if isinstance(item, Linear):
                out += self.transpose_step(item, adjoints)
            elif isinstance(item, Append):
                listed = adjoints.get(item.target)          # the list's adjoint: one entry per append
                if listed is not None and item.value is not None:
                    entry = self.builder.fresh(f"{listed}_entry")
                    out.append(_stmt(f"{entry} = {listed}[{item.position}]"))
                    out += self.accumulate(item.value, entry, adjoints)
            elif isinstance(item, ListStart):
                adjoints.pop(item.target, None)
            elif isinstance(item, Element):
                out += self.transpose_element(item, adjoints)
            elif isinstance(item, Branch):
                out += self.reverse_branch(item, adjoints)
            elif isinstance(item, Loop):
                out += self.reverse_loop(item, adjoints)
        return out

    def reverse_loop(self, loop: Loop, adjoints: dict[str, str]) -> list[cst.BaseStatement]:
        """The loop run backwards: each carried value's adjoint in one name across iterations, the
        body's constants and sizes as they were in that iteration, its transposes reversed."""
        escaping = (_linear_binds(loop.body) - set(loop.carried)) & adjoints.keys()
        if escaping:
            raise DerivationRefused(None, f"the linear value `{sorted(escaping)[0]}` is first bound inside a loop "
                                    "and read after it")
        if not any(name in adjoints for name in loop.carried):
            return []                   # nothing after the loop reads what it computes
        before: list[cst.BaseStatement] = []
        held: dict[str, str] = {}
        for name in loop.carried:
            if name in self.builder.lists and name not in adjoints:
                continue                # a list nothing after the loop reads: no adjoint flows from it
            held[name] = self.adjoint_name(name)
            value = adjoints.get(name) or self.zero(name, self.exit_sizes[id(loop)])
            if name in self.builder.gradient_lists:          # its entries are written in place
                value = f"list({adjoints[name]})" if name in adjoints else value
                self.owned.add(held[name])
            before.append(_stmt(f"{held[name]} = {value}"))
        body_adjoints = dict(held)
        turn = self.builder.fresh(f"{loop.variable}_reversed")
        first = "" if code(loop.start) == "0" else f"{code(loop.start)} + "
        offset = "" if code(loop.start) == "0" else f" - {code(loop.start)}"
        body = [_stmt(f"{loop.variable} = {first}{code(loop.stop)} - 1 - {turn}")]
        body += [_stmt(f"{holder} = {seen}[{loop.variable}{offset}]")
                 for holder, seen in (*loop.seen.items(), *loop.restored.items())]
        # an iteration's own lists (started in the body) are made again, with that iteration's sizes
        started = frozenset(item.target for item in _items(loop.body) if isinstance(item, ListStart))
        body += self.forward(loop.body, replay=True, remade=started)
        body += self.reverse(loop.body, body_adjoints)
        entry_sizes = self.exit_sizes[id(loop)]         # the holders, restored for this iteration
        for name, holder in held.items():
            value = body_adjoints.get(name)
            if value != holder:
                body.append(_stmt(f"{holder} = {value or self.zero(name, entry_sizes)}"))
            adjoints[name] = holder
        return before + [_for(turn, loop.start, loop.stop, body)]

    def transpose_element(self, item: Element, adjoints: dict[str, str]) -> list[cst.BaseStatement]:
        """``y = xs[i]``: the adjoint of ``y`` added at ``i`` to the adjoint list of ``xs`` (made here,
        of Nones, the zeros of a ``Tensor[]``, when it has none; copied before it is first written)."""
        adjoint = adjoints.pop(item.target, None)
        if adjoint is None:
            return []
        out: list[cst.BaseStatement] = []
        listed = adjoints.get(item.source)
        if listed is None or listed not in self.owned:
            owned = self.adjoint_name(item.source)
            value = f"list({listed})" if listed is not None else self.zero(item.source, {})
            out.append(_stmt(f"{owned} = {value}"))
            self.owned.add(owned)
            adjoints[item.source] = listed = owned
        entry = f"{listed}[{item.index}]"
        out.append(_stmt(f"{entry} = {adjoint} if {entry} is None else {entry} + {adjoint}"))
        return out

    def zero(self, name: str, sizes: dict[str, cst.BaseExpression | None]) -> str:
        """A zero adjoint for the linear value ``name`` (its sizes must be known); for a ``Tensor[]``
        gradient, a list of Nones as long as its output."""
        if name in self.builder.gradient_lists:
            return f"[None] * len({self.builder.gradient_lists[name]})"
        if sizes.get(name) is None or self.witness is None:
            raise DerivationRefused(None, f"the adjoint of `{name}` is zero in a loop and its sizes are unknown")
        return f"at.new_zeros({self.witness}, {code(sizes[name])})"

    def reverse_branch(self, branch: Branch, adjoints: dict[str, str]) -> list[cst.BaseStatement]:
        body_adjoints, else_adjoints = dict(adjoints), dict(adjoints)
        reversed_body = self.reverse(branch.body, body_adjoints)
        reversed_else = self.reverse(branch.orelse, else_adjoints)
        if not reversed_body and not reversed_else and body_adjoints == adjoints == else_adjoints:
            return []
        body = self.forward(branch.body, replay=True) + reversed_body
        orelse = self.forward(branch.orelse, replay=True) + reversed_else
        adjoints.clear()
        sizes = self.sizes_before[id(branch)]
        # only the linear values bound before the branch carry an adjoint out of it
        live = (body_adjoints.keys() | else_adjoints.keys()) & self.read_linear & sizes.keys()
        for name in sorted(live):
            if body_adjoints.get(name) == else_adjoints.get(name):
                adjoints[name] = body_adjoints[name]
                continue
            merged = self.adjoint_name(name)
            for side, statements in ((body_adjoints, body), (else_adjoints, orelse)):
                current = side.get(name)
                if current == merged:
                    continue
                if current is not None:
                    statements.append(_stmt(f"{merged} = {current}"))
                    continue
                if name in self.builder.gradient_lists:
                    statements.append(_stmt(f"{merged} = {self.zero(name, sizes)}"))
                    continue
                size = sizes.get(name)
                if size is None or self.witness is None:
                    raise DerivationRefused(None, f"the adjoint of `{name}` is zero on one branch and its sizes "
                                            "are unknown")
                statements.append(_stmt(f"{merged} = at.new_zeros({self.witness}, {code(size)})"))
            adjoints[name] = merged
        return [_if(branch.condition, body, orelse)]

    def adjoint_name(self, name: str) -> str:
        candidate = f"d_{name}"
        while candidate in self.builder.taken and candidate not in self.builder.adjoint_names:
            candidate += "_"
        self.builder.taken.add(candidate)
        self.builder.adjoint_names.add(candidate)
        return candidate

    def accumulate(self, name: str, value: str, adjoints: dict[str, str]) -> list[cst.BaseStatement]:
        current = adjoints.get(name)
        if current is None:
            adjoints[name] = value
            return []
        if name in self.builder.lists:
            raise DerivationRefused(None, f"the list `{name}` is read twice: adding lists of adjoints is not "
                                    "supported")
        merged = self.adjoint_name(name)
        adjoints[name] = merged
        return [_stmt(f"{merged} = {current} + {value}")]

    def transpose_step(self, step: Linear, adjoints: dict[str, str]) -> list[cst.BaseStatement]:
        if step.outputs:            # several outputs: the backward given each one's adjoint (None: zero)
            given = [adjoints.pop(name, None) for name in step.outputs]
            adjoint = given if any(a is not None for a in given) else None
        else:
            adjoint = adjoints.pop(step.target, None)
        if adjoint is None:
            return []
        if step.source is not None:
            return self.accumulate(step.source, adjoint, adjoints)
        if step.helper is not None and step.helper.name in TRANSPOSED_BY_HELPERS:
            return self.transposing_helper(step, adjoint, adjoints)
        if step.helper is not None and step.helper.name in OPERATOR_BACKWARD_HELPERS:
            return self.operator_transpose(step, adjoint, adjoints)
        if step.helper is not None:
            return self.helper_transpose(step, adjoint, adjoints)
        if step.formula is None:
            return []                            # a zero: nothing flows back
        out: list[cst.BaseStatement] = []
        for param, name in step.linear.items():
            if str(step.formula.schema.name) in SCALES_SELF and set(step.linear) == {"self"}:
                statements, value = self.scaled_transpose(step, adjoint)
            else:
                statements, value = self.inline_backward(step, param, adjoint)
            out += statements
            if value is not None:
                out += self.accumulate(name, value, adjoints)
        return out

    def helper_transpose(self, step: Linear, adjoint: str, adjoints: dict[str, str]) -> list[cst.BaseStatement]:
        """The transpose of a ``SELF_TRANSPOSED_HELPERS`` step: the helper at the adjoint, its flag negated."""
        param, flag = SELF_TRANSPOSED_HELPERS[step.helper.name]
        arguments = []
        for p in step.helper.params:
            if p.name == param:
                arguments.append(adjoint)
            elif p.name == flag:
                truth = _truth(step.arguments[flag])
                arguments.append(f"not ({code(step.arguments[flag])})" if truth is None else str(not truth))
            else:
                arguments.append(code(step.arguments[p.name]))
        result = self.builder.fresh("t")
        statements = [_stmt(f"{result} = {step.helper.name}({', '.join(arguments)})")]
        return statements + self.accumulate(step.linear[param], result, adjoints)

    def transposing_helper(self, step: Linear, adjoint: str, adjoints: dict[str, str]) -> list[cst.BaseStatement]:
        """The transpose of a ``TRANSPOSED_BY_HELPERS`` step: its transposing helper at the adjoint,
        given the other arguments and the linear argument's sizes."""
        param, _, transposing = TRANSPOSED_BY_HELPERS[step.helper.name]
        sizes = self.sizes_before[id(step)].get(step.linear[param])
        if sizes is None:
            raise DerivationRefused(step.node, f"the sizes of the linear value `{step.linear[param]}` are needed "
                                    "and the sizes rules cannot tell them")
        arguments = [adjoint if p.name == param else code(step.arguments[p.name]) for p in step.helper.params]
        result = self.builder.fresh("t")
        statements = [_stmt(f"{result} = {transposing}({', '.join(arguments + [code(sizes)])})")]
        return statements + self.accumulate(step.linear[param], result, adjoints)

    def operator_transpose(self, step: Linear, adjoint: str, adjoints: dict[str, str]) -> list[cst.BaseStatement]:
        """The transpose of an ``OPERATOR_BACKWARD_HELPERS`` step: the operator it is the backward of."""
        grad_sizes = self.sizes_before[id(step)].get(step.linear["grad"])
        if grad_sizes is None:
            raise DerivationRefused(step.node, f"the sizes of the linear value `{step.linear['grad']}` are needed "
                                    "and the sizes rules cannot tell them")
        template = OPERATOR_BACKWARD_HELPERS[step.helper.name]
        fields = {p.name: code(step.arguments[p.name]) for p in step.helper.params if p.name != "grad"}
        fields.update(adjoint=adjoint, grad_sizes=code(grad_sizes), result=self.builder.fresh("t"))
        fields.update({f"_{stem}": self.builder.fresh(stem) for stem in ("kept", "d", "lead", "split", "dims")})
        statements = list(cst.parse_module(template.format(**fields)).body)
        return statements + self.accumulate(step.linear["grad"], fields["result"], adjoints)

    def scaled_transpose(self, step: Linear, adjoint: str) -> tuple[list[cst.BaseStatement], str]:
        """The transpose of a ``SCALES_SELF`` step in ``self``: the op itself at ``self = adjoint``,
        summed back to ``self``'s sizes (the factor may broadcast it)."""
        arguments = [adjoint if a.name == "self" else code(step.arguments[a.name])
                     for a in step.formula.schema.arguments if a.name == "self" or a.name in step.arguments]
        scaled = f"at.{step.formula.schema.name.base}({', '.join(arguments)})"
        sizes = self.sizes_before[id(step)].get(step.linear["self"])
        if sizes is None:
            raise DerivationRefused(step.node, f"the sizes of the linear value `{step.linear['self']}` are needed "
                                    "and the sizes rules cannot tell them")
        result = self.builder.fresh("t")
        return [_stmt(f"{result} = sum_to({scaled}, {code(sizes)})")], result

    def inline_backward(self, step: Linear, param: str, adjoint: str | list[str | None]
                        ) -> tuple[list[cst.BaseStatement], str | None]:
        """The op's own backward for ``param`` at ``grad = adjoint`` (a list: one adjoint per
        gradient parameter, None for a zero one): its statements (locals renamed) and the name
        holding the result (None: the op gives ``param`` no gradient)."""
        formula = step.formula
        backward = formula.backward
        if len(backward.params) != 1 and not step.outputs:
            raise DerivationRefused(step.node, f"`{formula.op_name}` has several outputs; its transpose is "
                                    "not supported inside a backward")
        sizes = self.sizes_before[id(step)]
        linear_params = set(step.linear)
        inputs = [a.name for a in formula.differentiable_inputs]
        component = inputs.index(param)
        # what the backward reads of the forward: the captured metadata's definitions
        needed = self.forward_slice(formula, {c.name for c in formula.captures})
        body = needed + single_exit(_without_docstring(backward.node.body.body))
        folder = _MaskFolder(backward.needs_input_grad, lambda i: i == component, len(inputs))
        body = _fold_statements(body, folder)
        # metadata of the linear arguments and of the output (the step's target)
        outputs = {o for o in formula.outputs if o is not None}
        linear_sizes = {p: sizes.get(n) for p, n in step.linear.items()}
        checked = [self.linear_metadata(s, linear_params | outputs, linear_sizes, step, dummy=True) for s in body]
        body = [self.linear_metadata(s, linear_params | outputs, linear_sizes, step) for s in body]
        affine = affine_in(formula, linear_params) or affine_by_terms(formula, linear_params, self.builder.table.helpers)
        stand_ins = self.stand_ins(step, linear_params | outputs, checked) if affine else {}
        for statement in checked:
            for n in _nodes(statement):
                if isinstance(n, cst.Name) and (n.value in linear_params or n.value in outputs) \
                        and n.value not in stand_ins:
                    raise DerivationRefused(step.node, f"the backward of `{formula.op_name}` reads the value of "
                                            f"`{n.value}` (a linear argument or the result) and its jvp (or its "
                                            "having none) does not show it affine in its linear arguments, so "
                                            f"`{code(step.node)}` is not shown to be linear in the gradient")
                if isinstance(n, cst.Name) and n.value == backward.needs_input_grad:
                    raise DerivationRefused(step.node, f"the backward of `{formula.op_name}` uses "
                                            "needs_input_grad other than as needs_input_grad[i]")
        result = self.builder.fresh("t")
        given = adjoint if isinstance(adjoint, list) else [adjoint]
        renames: dict[str, cst.BaseExpression] = {
            **{g: cst.Name(a if a is not None else "None") for g, a in zip(backward.params, given)}, **stand_ins}
        defaults = {p.name.value: p.default for p in formula.node.params.params + formula.node.params.kwonly_params}
        for p in formula.params:
            if p in step.arguments:
                renames[p] = step.arguments[p]
            elif p not in linear_params:
                renames[p] = defaults.get(p) or cst.Name("None")
        local = (_assigned_in(body) | {p.name.value for p in backward.node.params.params}) - set(renames)
        for name in sorted(local):
            renames[name] = cst.Name(self.builder.fresh(name))
        out: list[cst.BaseStatement] = []
        nothing = True
        for statement in body:
            statement = rename(statement, renames)
            converted, some = _returns_to_assignment(statement, component, result)
            nothing = nothing and not some
            out.append(converted)
        if any(isinstance(n, cst.Name) and n.value == UNKNOWN_ZERO for s in out for n in _nodes(s)):
            raise DerivationRefused(step.node, f"the backward of `{formula.op_name}` reads the metadata of a zero "
                                    "made from an intermediate gradient")
        undeclared = sorted({n.func.attr.value for s in out for n in _nodes(s) if isinstance(n, cst.Call)
                             and isinstance(n.func, cst.Attribute) and isinstance(n.func.value, cst.Name)
                             and n.func.value.value == "at" and not self.builder.table.overloads(n.func.attr.value)})
        if undeclared:
            raise DerivationRefused(step.node, f"the backward of `{formula.op_name}` calls `at.{undeclared[0]}`, "
                                    "which the library declares no operator for")
        if nothing:
            return [], None
        return _fold_statements(out, _MaskFolder(None, lambda i: False)), result

    def stand_ins(self, step: Linear, names: set[str], checked) -> dict[str, cst.BaseExpression]:
        """For an op affine in its linear arguments, whose backward therefore reads their (and its
        output's) values only for metadata (``gather_backward(grad, self, ...)``): a tensor of the same
        metadata for each one read, the gradient's output when it has those sizes, else zeros of them."""
        read = {n.value for s in checked for n in _nodes(s) if isinstance(n, cst.Name)} & names
        sizes = self.sizes_before[id(step)]
        found: dict[str, cst.BaseExpression] = {}
        for name in sorted(read):
            known = sizes.get(step.linear[name]) if name in step.linear else self.result_sizes(step)
            if known is None or self.witness is None:
                raise DerivationRefused(step.node, f"the sizes of the linear value `{name}` of `{code(step.node)}` "
                                        "are needed and the sizes rules cannot tell them")
            outputs = [o for o in self.builder.witnesses.values() if o is not None and "[" not in o]
            same = [o for o in outputs if code(known) == f"{o}.sizes()"]
            found[name] = cst.Name(same[0]) if same else _expr(f"at.new_zeros({self.witness}, {code(known)})")
        return found

    def linear_metadata(self, statement, names: set[str], sizes, step: Linear, dummy: bool = False):
        """``x.sizes()`` / ``x.dim()`` / ``x.scalar_type()`` of a linear argument (or of the output,
        whose sizes are the step's target's) as known expressions."""
        sweep = self
        target_sizes = self.result_sizes(step)

        class Replace(cst.CSTTransformer):
            def leave_Call(self, original, updated):
                func = updated.func
                # of a linear list: its length and its entries' metadata, from the list of their sizes
                if isinstance(func, cst.Name) and func.value == "len" and len(updated.args) == 1 \
                        and isinstance(updated.args[0].value, cst.Name) and updated.args[0].value.value in names:
                    if dummy:
                        return cst.Name("None")
                    listed = sizes.get(updated.args[0].value.value)
                    if listed is None:
                        raise DerivationRefused(step.node, f"the length of a list in `{code(step.node)}` is unknown")
                    return _expr(f"len({code(listed)})")
                if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Subscript) \
                        and isinstance(func.value.value, cst.Name) and func.value.value.value in names \
                        and func.attr.value in METADATA_READS and len(func.value.slice) == 1 \
                        and isinstance(func.value.slice[0].slice, cst.Index):
                    if dummy:
                        return cst.Name("None")
                    listed = sizes.get(func.value.value.value)
                    entry = None if listed is None else _expr(
                        f"{code(listed)}[{code(func.value.slice[0].slice.value)}]")
                    return sweep.metadata_read(code(step.node), func.attr.value, updated.args, entry, step.node)
                if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                        and func.value.value in names and func.attr.value in METADATA_READS:
                    if dummy:
                        return cst.Name("None")
                    name = func.value.value
                    known = sizes.get(name) if name in sizes else target_sizes
                    return sweep.metadata_read(code(step.node), func.attr.value, updated.args, known, step.node)
                return updated
        return statement.visit(Replace())

    @staticmethod
    def forward_slice(formula: Formula, names: set[str]) -> list[cst.BaseStatement]:
        """The forward statements that bind ``names`` (and what they read), in order; the op's own
        computation is left out."""
        outputs = {o for o in formula.outputs if o is not None}
        wanted = set(names) - set(formula.params) - outputs
        chosen: list[cst.BaseStatement] = []
        for statement in reversed(formula.forward):
            bound = _assigned(statement) | _appended_to(statement)
            if bound & wanted:
                chosen.append(statement)
                wanted |= {n.value for n in _nodes(statement) if isinstance(n, cst.Name)} - set(formula.params) - outputs
        return list(reversed(chosen))


def affine_in(formula: Formula, params: set[str]) -> bool:
    """Whether the op is affine in ``params`` (the others held), as its own jvp says: declared
    ``auto_linear``, or a jvp that reads neither those inputs nor any output but for metadata (its
    Jacobian does not depend on them, so neither does its backward)."""
    jvp = formula.jvp
    if jvp is None or jvp.rule is JvpRule.DERIVED:
        return False
    if jvp.rule is JvpRule.AUTO_LINEAR:
        return True
    if any(p.endswith("_p") or p.startswith("original_") for p in jvp.params):
        return False            # the derivatives.yaml dialect: primals given as parameters
    for capture in jvp.captures:
        if capture.kind is CaptureKind.ILLEGAL:
            return False
        if (capture.kind is CaptureKind.OUTPUT or capture.name in params) and not capture.metadata_methods:
            return False
    return True


def broadcasts(formula: Formula) -> bool:
    """Whether the op's result has the broadcast sizes of its tensor arguments, as its formula
    says: declared ``auto_element_wise``, or a backward that sums each input's gradient back to
    that input's sizes (``sum_to(..., <input>_sizes)`` with ``<input>_sizes = <input>.sizes()``)."""
    if formula.jvp is not None and formula.jvp.rule.value == "auto_element_wise":
        return True
    if formula.schema.name.base in CONTRACTIONS | SELECTIONS:
        return False
    sizes_of: dict[str, str] = {}
    for statement in formula.forward:
        if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
            small = statement.body[0]
            if isinstance(small, cst.Assign) and isinstance(small.targets[0].target, cst.Name) \
                    and isinstance(small.value, cst.Call) and isinstance(small.value.func, cst.Attribute) \
                    and small.value.func.attr.value == "sizes" and isinstance(small.value.func.value, cst.Name):
                sizes_of[small.targets[0].target.value] = small.value.func.value.value
    summed = {sizes_of.get(n.args[1].value.value) for n in _nodes(formula.backward.node)
              if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == "sum_to"
              and len(n.args) == 2 and isinstance(n.args[1].value, cst.Name)}
    inputs = [a.name for a in formula.differentiable_inputs]
    never = {name for i, name in enumerate(inputs)          # a slot that is None in every return
             if all(len(values := _returned(r)) == len(inputs) and values[i] is None
                    for r in formula.backward.returns)}
    return bool(summed & set(inputs)) and set(inputs) <= summed | never


def _returns_to_assignment(statement: cst.BaseStatement, component: int, target: str
                           ) -> tuple[cst.BaseStatement, bool]:
    """Each ``return`` (at the end of its path) -> ``target = <its component>``; whether some path
    gives a value (not None)."""
    gives = False

    class Convert(cst.CSTTransformer):
        def leave_Return(self, original, updated):
            nonlocal gives
            values = _returned(updated)
            value = values[component] if len(values) > 1 else values[0]
            if value is None:
                raise DerivationRefused(original, "a transposed step whose gradient is None on some path only")
            gives = True
            return cst.Assign([cst.AssignTarget(cst.Name(target))], value)

    converted = statement.visit(Convert())
    return converted, gives


def _for(variable: str, start: cst.BaseExpression, stop: cst.BaseExpression, body) -> cst.For:
    bounds = code(stop) if code(start) == "0" else f"{code(start)}, {code(stop)}"
    head = cst.parse_statement(f"for {variable} in range({bounds}):\n    pass\n")
    return head.with_changes(body=head.body.with_changes(body=body))


def _if(condition: str, body, orelse) -> cst.If:
    block = cst.IndentedBlock(body=body or [_stmt("pass")])
    orelse_block = cst.Else(body=cst.IndentedBlock(body=orelse)) if orelse else None
    return cst.If(test=cst.Name(condition), body=block, orelse=orelse_block)


# ---- the entry point ---------------------------------------------------------------------
def derive_jvp(formula: Formula, table: OperatorTable) -> cst.FunctionDef:
    """The ``def jvp(...)`` of ``formula``, by transposing its backward (module docstring);
    raises :class:`DerivationRefused` naming the step it cannot transpose."""
    from transpiler.dataflow import ValueKind

    backward = formula.backward
    taken = {n.value for n in _nodes(formula.node) if isinstance(n, cst.Name)}
    builder = _Builder(table, taken, {})
    builder.parameter_types = {f"{a.name}_" if keyword.iskeyword(a.name) else a.name: a.type
                               for a in formula.schema.arguments if not a.is_out}
    inputs = [a.name for a in formula.differentiable_inputs]
    tensor_inputs = {a.name for a in formula.differentiable_inputs}
    tensors = tensor_inputs | {o for o in formula.outputs if o is not None}
    tensors |= {n for n, k in formula.forward_flow.env.items() if k == ValueKind.TENSOR}
    grads = list(backward.params)
    linear = set(grads)
    returns = [builder.fresh(f"{name}_gradient") for name in inputs]
    differentiable_outputs = [formula.outputs[i] for i in formula.differentiable_outputs
                              if is_tensor_like(formula.schema.returns[i].type)]
    listed = [isinstance(formula.schema.returns[i].type, ListType) for i in formula.differentiable_outputs
              if is_tensor_like(formula.schema.returns[i].type)]
    builder.gradient_lists = {g: o for g, o, is_list in zip(grads, differentiable_outputs, listed) if is_list}
    # a Tensor[] output's first entry stands for its dtype and device
    differentiable_outputs = [f"{o}[0]" if is_list else o for o, is_list in zip(differentiable_outputs, listed)]
    witness = differentiable_outputs[0] if differentiable_outputs else None
    builder.witnesses = dict(zip(grads, differentiable_outputs))
    body = single_exit(_without_docstring(backward.node.body.body))
    # forward mode wants every input's contribution; an optional input only when it is given
    optional = [isinstance(a.type, OptionalType) for a in formula.differentiable_inputs]
    # an input shadowed by a gradient parameter or a local, or written in place, is not read there
    unreadable = set(grads) | _assigned_in(body) | {a.name for a in formula.schema.arguments
                                                    if a.annotation is not None and a.annotation.is_write}
    body = [s.visit(_RaiseTests(backward.needs_input_grad, inputs, optional, unreadable)) for s in body]
    body = _fold_statements(body, _MaskFolder(
        backward.needs_input_grad, lambda i: _expr(f"{inputs[i]} is not None") if optional[i] else True, len(inputs)))
    program: list = []
    builder.rebound = _rebound(body)
    builder.statements(body, linear, tensors, returns, program)
    sweep = _Sweep(builder, witness)
    sweep.reads(program)
    initial = {g: (_expr(f"{o}.sizes()") if o is not None else None) for g, o in zip(grads, differentiable_outputs)}
    for g, output in builder.gradient_lists.items():          # a Tensor[] gradient: its entries' sizes
        initial[g] = cst.Name(builder.fresh(f"{g}_sizes"))
        program.insert(0, Plain(_stmt(f"{code(initial[g])} = to_args_sizes({output})")))
    sweep.gradient_sizes = _gradient_sizes(program, {ret: _expr(f"{a.name}.sizes()") for a, ret in zip(
        formula.differentiable_inputs, returns) if not isinstance(_unwrapped(a.type), ListType)})
    sweep.annotate(program, initial)
    adjoints: dict[str, str] = {}
    tangents = []
    diagonal = _diagonal_gradients(formula, body, grads, witness, builder.gradient_lists)
    for argument, ret in zip(formula.differentiable_inputs, returns):
        if isinstance(argument.type, ListType) and ret in linear and ret not in builder.lists:
            raise DerivationRefused(backward.node.name, f"the gradient of the Tensor[] input `{argument.name}` is "
                                    "not a list of gradients made here (one per entry)")
    for name, ret in zip(inputs, returns):
        if ret in linear:
            if name not in diagonal:
                adjoints[ret] = f"{name}_t"
            tangents.append(f"{name}_t")
        elif not _only_none(program, ret):
            raise DerivationRefused(backward.node.name, f"the gradient of `{name}` does not depend on the "
                                    "incoming gradient: the backward is not linear")
    statements = sweep.forward(program) + sweep.reverse(program, adjoints)
    if diagonal:
        statements += _diagonal_shares(builder, sweep, diagonal, grads[0], witness, adjoints)
    results = [adjoints.get(g) for g in grads]
    returned = ", ".join(r if r is not None else "None" for r in results)
    statements.append(_stmt(f"return {returned}"))
    statements, _ = _live_only(statements, set())
    if backward.needs_input_grad is not None and any(
            isinstance(n, cst.Name) and n.value == backward.needs_input_grad for s in statements for n in _nodes(s)):
        raise DerivationRefused(backward.node, "needs_input_grad is used other than as needs_input_grad[i]")
    if any(isinstance(n, cst.Name) and n.value in (META, UNKNOWN_ZERO) for s in statements for n in _nodes(s)):
        raise DerivationRefused(backward.node, "the metadata of a linear value is read where the sizes rules "
                                "do not reach")
    written = {a.name for a in formula.schema.arguments if a.annotation is not None and a.annotation.is_write}
    read_after_write = sorted(written & {n.value for s in statements for n in _nodes(s) if isinstance(n, cst.Name)})
    if read_after_write:        # ``squeeze_``: the jvp runs after the write, when ``self.sizes()`` is the result's
        raise DerivationRefused(backward.node, f"the jvp reads `{read_after_write[0]}`, which the operator writes in "
                                "place: it would see the written value, not the input (derive its functional twin)")
    head = cst.parse_statement(f"def jvp({', '.join(tangents)}):\n    pass\n")
    return read_forward_values(simplify(head.with_changes(body=head.body.with_changes(body=statements)), tensors),
                               forward_values(formula.node, tensors))


def _diagonal_gradients(formula: Formula, body, grads: list[str], witness: str | None,
                        gradient_lists: Mapping[str, str]) -> dict[str, DiagonalGradient]:
    """The inputs whose gradient is a diagonal map of the one gradient parameter, read more than
    once (:mod:`transpiler.derive_jvp_diagonal`), for an op whose result broadcasts its inputs."""
    if len(grads) != 1 or witness is None or grads[0] in gradient_lists or not broadcasts(formula) \
            or not body or not isinstance(body[-1], cst.SimpleStatementLine) \
            or not isinstance(body[-1].body[-1], cst.Return):
        return {}
    returned = _returned(body[-1].body[-1])
    inputs = formula.differentiable_inputs
    if len(returned) != len(inputs):
        return {}
    found = {}
    for argument, value in zip(inputs, returned):
        sizes_names = {_assigned(s).pop() for s in formula.forward if len(_assigned(s)) == 1
                       and isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Assign)
                       and code(s.body[0].value) == f"{argument.name}.sizes()"}
        gradient = diagonal_gradient(body, grads[0], value, sizes_names)
        if gradient is not None:
            found[argument.name] = gradient
    # one input reading the gradient twice is the saving; the others then keep one shape of term
    return found if any(g.reads > 1 for g in found.values()) else {}


def _diagonal_shares(builder: _Builder, sweep: _Sweep, diagonal: Mapping[str, DiagonalGradient], grad: str,
                     witness: str, adjoints: dict[str, str]) -> list[cst.BaseStatement]:
    """The diagonal inputs' share of the jvp: their gradient maps at their tangents broadcast to the
    result (:func:`transpiler.derive_jvp_diagonal.diagonal_share`), added to ``grad``'s adjoint."""
    statements, gradients = [], []
    for name, gradient in diagonal.items():
        tangent, broadcast = f"{name}_t", builder.fresh(f"{name}_broadcast")
        statements.append(_stmt(f"{broadcast} = {tangent} if {tangent}.sizes() == {witness}.sizes() "
                                f"else at.expand({tangent}, {witness}.sizes())"))
        gradients.append((gradient, broadcast))
    share = builder.fresh("diagonal_share")
    statements += [cst.parse_statement(line) for line in diagonal_share(gradients, witness, share, builder.fresh)]
    return statements + sweep.accumulate(grad, share, adjoints)


def with_jvp(formula: Formula, jvp: cst.FunctionDef | None, *, return_jvp: bool) -> cst.FunctionDef:
    """``formula``'s function, decorators dropped, with ``jvp`` (when given) in place of its own
    nested jvp, just before the final return; ``return_jvp``: it returns ``outputs, backward, jvp``
    (how the engine and the corpus proof run a formula's forward mode)."""
    body = list(formula.node.body.body)
    if jvp is not None:
        body = [s for s in body if not (isinstance(s, cst.FunctionDef) and s.name.value == "jvp")]
        body.insert(len(body) - 1, jvp)
    if return_jvp:
        body[-1] = _stmt(f"return {code(formula.returned_display)}, backward, jvp")
    return formula.node.with_changes(decorators=(), body=formula.node.body.with_changes(body=body))


def _gradient_sizes(program: list, returned: Mapping[str, cst.BaseExpression]) -> dict[str, cst.BaseExpression]:
    """The linear values whose every use is a copy into an input's gradient (through copies), each
    with that input's sizes (a gradient has its input's sizes); names bound in a loop are left out."""
    readers: dict[str, list] = {}
    for item in _items(program):
        if isinstance(item, (Linear, Append, Element)):
            for name in _read_by(item):
                readers.setdefault(name, []).append(item)
    in_loops = {name for item in _items(program) if isinstance(item, Loop) for name in _linear_binds(item.body)}
    found = {name: sizes for name, sizes in returned.items() if name not in in_loops}
    changed = True
    while changed:
        changed = False
        for name, items in readers.items():
            if name in found or name in in_loops:
                continue
            targets = [item.target if isinstance(item, Linear) and item.source == name else None for item in items]
            if all(t in found for t in targets) and len({code(found[t]) for t in targets}) == 1:
                found[name] = found[targets[0]]
                changed = True
    return found


def _assigns_zero(statement: cst.BaseStatement, zero_name) -> bool:
    """``x = at.zeros_like(y)`` (a zero maker, ``ZERO_MAKERS``), or ``x = y`` where ``zero_name(y)``:
    a gradient that is zero whatever the incoming one (``adaptive_max_pool2d_backward``'s of
    ``self``), the zero linear map."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Assign) and len(statement.body[0].targets) == 1
            and isinstance(statement.body[0].targets[0].target, cst.Name)):
        return False
    value = statement.body[0].value
    if isinstance(value, cst.Name):
        return zero_name(value.value)
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
        and isinstance(value.func.value, cst.Name) and value.func.value.value == "at" \
        and value.func.attr.value in ZERO_MAKERS


def _only_none(program: list, name: str) -> bool:
    """Whether ``name`` is never bound to anything but None/zero in the program."""
    for item in program:
        if isinstance(item, Plain) and name in _assigned(item.statement) \
                and not _assigns_zero(item.statement, lambda other: other != name and _only_none(program, other)):
            return False
        if isinstance(item, Branch) and not (_only_none(item.body, name) and _only_none(item.orelse, name)):
            return False
        if isinstance(item, Loop) and not _only_none(item.body, name):
            return False
    return True
