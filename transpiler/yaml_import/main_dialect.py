"""derivatives.yaml's C++ idioms rewritten into the main formula dialect (formulas/README.md).

A rewrite of the shared expression tree (:mod:`.syntax`), applied by the importer
before the tree is printed as Python:

=================================  ==================================
C++ (as derivatives.yaml says it)  main dialect
=================================  ==================================
``self.cos()``, ``x.sum(dim)``     ``at.cos(self)``, ``at.sum(x, dim)``
``self.sym_sizes()``               ``self.sizes()`` (``sym_numel``...)
``at::zeros_symint(...)``          ``at.zeros(...)``
``zeros_like(self)`` (an ATen op)  ``at.zeros_like(self)``
``foo_symint(...)`` (a helper)     ``foo(...)``
``x.defined()``, ``!x.defined()``  ``x is not None``, ``x is None``
``std::tuple<Tensor, Tensor>()``   ``(None, None)``
``std::get<1>(t)``                 ``t[1]``
``at::gelu(self, approximate)``    ``at.gelu(self, approximate=approximate)``
``bias->sym_sizes()``              ``bias.sizes() if bias is not None else None``
``{{0, 0}}``                       ``[0, 0]``
``at::sum_to(grad, sizes)``        ``sum_to(grad, sizes)`` (an ATen utility, the helper)
``x.size(1) / 2`` (integers)       ``x.size(1) // 2``
``x.size(1) / groups`` (int arg)   ``cpp.int_div(x.size(1), groups)``
``at::zeros(sizes, x.options())``  ``at.new_zeros(x, sizes)`` (``ones``, ``full``)
``at::scalar_tensor(v, x.options())``  ``at.new_full(x, [], v)``
``g.new_zeros(sizes, x.options())``  ``at.new_zeros(x, sizes)`` (a tensor like ``x``)
``grad.to(self.scalar_type())``    ``at._to_copy(grad, dtype=self.scalar_type())`` (or ``.dtype()``)
``at::where(...).masked_fill_(m, 0)``  ``at.masked_fill(at.where(...), m, 0)`` (a temporary)
``(a >= b).logical_or_(c)``        ``at.logical_or(a >= b, c)`` (a boolean temporary)
``(a == 0.) & (b <= 0.)`` (tensors)  ``at.logical_and(a == 0., b <= 0.)`` (``|``: ``logical_or``)
``M_PI``, ``M_LN2``                ``math.pi``, ``math.log(2.0)``
``sqrt(M_PI)``, ``std::sqrt(2 * M_PI)``  ``math.sqrt(math.pi)``, ``math.sqrt(2 * math.pi)``
``at::Reduction::None``            ``0`` (``Mean`` 1, ``Sum`` 2: the library's losses take the numbers)
``dim.value_or(IntArrayRef({}))``  ``dim if dim is not None else []``
``x.view_as(y)``                   ``at.view(x, y.sizes())`` (what ``view_as`` is)
``cat_jvp(tensors, dim)``          ``at.cat(tensors_t, dim)`` (``stack_jvp``, ``block_diag_jvp``)
``fmap(xs, [](T i){return -i;})``  ``negated(xs)`` (the helper; ``fmap`` of another lambda stays)
``self_t.copy_(v)``, ``self_t.mul_(v)`` (an in-place op's jvp)  ``v``, ``self_t * v`` (the new tangent)
=================================  ==================================

An in-place method on a tensor the expression itself made (arithmetic, a comparison, an
operator that never returns a view) writes where no one else looks: it is the functional
operator, when that gives the same values in the same dtype (``masked_fill_``; the logical
operators on a boolean receiver). A write into a named tensor or a view stays in place.
<cmath>'s constants are Python's ``math`` (the formula file imports it), and so is a math
function of a number (``sqrt(M_PI)`` is not ATen's ``sqrt`` of a tensor).

A factory given another tensor's options (``x.options()``: its dtype, layout and device)
makes a tensor like ``x``, which is what ``x.new_<factory>(...)`` is; the main dialect
has no TensorOptions value to pass. ``x.to(t.scalar_type())`` converts to a dtype, which
is ``_to_copy`` with that dtype (``to`` returns ``x`` itself when the dtype is already
``t``'s, ``_to_copy`` a copy: the same values, and autograd treats both alike).

An argument passed in the position of a keyword-only parameter (C++ has no
keywords) is passed by its keyword, when every overload that takes that many
arguments agrees on the keyword (a factory's TensorOptions are one position, or
its ``dtype, layout, device, pin_memory`` spelled out, as ``_to_copy(self_t, dtype,
layout, device, pin_memory, non_blocking, memory_format)`` does).

C++ and Python differ on integers: ``a / b`` of two integers truncates toward zero
in C++ and is true division in Python; ``%`` takes the sign of ``a`` in C++ and of
``b`` in Python. Python's ``//`` and ``%`` agree with C++ when both operands are
non-negative (sizes, ``numel()``, ``dim()``, literals and their sums and
products), so such a division is written ``//``; one whose operands may be
negative (an ``int`` argument) is written ``cpp.int_div(a, b)`` (``cpp.int_mod(a, b)``),
C++'s truncating operator, never Python's ``/`` (true division). Division by zero
gives ``inf`` for doubles in C++ and raises in Python (an error, never a wrong
value); the other operators mean the same on the types derivatives.yaml uses them on.

A method becomes an operator call only when it is an ATen operator (a function,
or a method-only operator such as ``contiguous`` or ``view_as``, which the
main dialect also calls as ``at.<op>``; in-place methods such as ``mul_`` stay)
and its receiver is not an argument known not to be a tensor (``alpha.conj()``
on a Scalar stays). The rewrite cannot be undone from the Python alone (both
spellings exist in the YAML), so the importer keeps the original formula of a
rewritten line in a ``# yaml:`` comment, which ``emit-yaml`` prints back as long
as the Python still is its rewrite.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from transpiler.metadata import PLAIN_METADATA
from transpiler.needs import TorchMissing
from transpiler.schema import SchemaError, parse_schema
from transpiler.yaml_import.syntax import (
    INTEGER_OPERATORS,
    Binary,
    BraceList,
    Call,
    Conditional,
    Index,
    Keyword,
    Lambda,
    Literal,
    Member,
    Name,
    Node,
    NoneTest,
    Paren,
    Qualified,
    Template,
    TupleDisplay,
    Unary,
    rewrite,
)

# Tensor methods the main dialect keeps as methods (metadata and what has no operator).
KEPT_METHODS = frozenset({
    "sizes", "size", "dim", "numel", "scalar_type", "options", "strides", "stride", "defined",
    "is_complex", "is_floating_point", "device", "dtype", "layout", "is_sparse", "item", "requires_grad",
    "is_contiguous", "sparse_dim", "dense_dim",
})
SYMINT = "_symint"
_FUNC = re.compile(r"^- func: ([A-Za-z0-9_]+)[.(]", re.MULTILINE)
_VARIANTS = re.compile(r"^  variants: (.*)$", re.MULTILINE)
_SCHEMA = re.compile(r"^- func: (.*)$", re.MULTILINE)
# One overload's parameters as C++ takes them in position: (positional names, keyword-only names).
Signature = tuple[tuple[str, ...], tuple[str, ...]]
# C++ takes a factory's keyword-only dtype, layout, device and pin_memory as one TensorOptions
# argument (``at::zeros(sizes, grad.options())``): that position has no keyword.
TENSOR_OPTIONS = ("dtype", "layout", "device", "pin_memory")
PACKED_OPTIONS = ""
# ATen C++ functions that are not operators, and the library helper of the same name and meaning.
ATEN_UTILITIES = frozenset({"sum_to"})
# Metadata methods whose value is a non-negative integer (after the ``sym_`` rewrite).
NON_NEGATIVE_METADATA = frozenset({"size", "numel", "dim"})


@dataclass(frozen=True)
class AtenNames:
    """What the rewrite needs to know of ATen."""

    functions: frozenset[str]                       # operators that are functions ``at::<name>``
    methods: frozenset[str]                         # operators that are only tensor methods (``contiguous``)
    signatures: dict[str, tuple[Signature, ...]]    # per function, its overloads without ``out=``
    views: frozenset[str] = frozenset()             # operators with an overload returning a view (``Tensor(a)``)


@functools.cache
def aten_names() -> AtenNames:
    """ATen's operators, from the installed torch's native_functions.yaml."""
    try:
        import torchgen
    except ImportError:
        raise TorchMissing("reading ATen's operators (torchgen's native_functions.yaml)") from None
    path = Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"
    text = path.read_text(encoding="utf-8")
    functions: set[str] = set()
    methods: set[str] = set()
    table: dict[str, list[Signature]] = {}
    views: set[str] = set()
    for block in re.split(r"(?m)^(?=- func: )", text):
        name, schema_text = _FUNC.match(block), _SCHEMA.match(block)
        if not name or not schema_text:
            continue
        variants = _VARIANTS.search(block)
        if variants is not None and "function" not in variants.group(1):
            methods.add(name.group(1))     # its keywords count too (``x.contiguous(memory_format)``)
        else:
            functions.add(name.group(1))
        try:
            schema = parse_schema(schema_text.group(1).strip())
        except SchemaError:
            continue
        if not schema.out:
            table.setdefault(schema.name.base, []).append(
                (tuple(a.name for a in schema.positional), tuple(a.name for a in schema.kwarg_only)))
        if any(r.annotation is not None and not r.annotation.is_write for r in schema.returns):
            views.add(schema.name.base)
    return AtenNames(frozenset(functions), frozenset(methods - functions),
                     {name: tuple(signatures) for name, signatures in table.items()}, frozenset(views))


def _cpp_keywords(kwonly: tuple[str, ...]) -> tuple[str, ...]:
    """Keyword-only parameters in C++ positions: the TensorOptions group is one position."""
    for start in range(len(kwonly) - len(TENSOR_OPTIONS) + 1):
        if kwonly[start:start + len(TENSOR_OPTIONS)] == TENSOR_OPTIONS:
            return (*kwonly[:start], PACKED_OPTIONS, *kwonly[start + len(TENSOR_OPTIONS):])
    return kwonly


def keyword_arguments(name: str, args: tuple[Node, ...], signatures: dict[str, tuple[Signature, ...]]
                      ) -> tuple[Node, ...]:
    """``args`` of ``at.<name>(...)`` with those in keyword-only positions passed by keyword, when
    every overload taking that many arguments agrees on the keywords (else ``args`` unchanged).
    C++ takes a factory's options packed (one TensorOptions) or, all of them given, spelled out."""
    fits = []
    for positional, kwonly in signatures.get(name, ()):
        packed = _cpp_keywords(kwonly)
        if len(args) <= len(positional) + len(packed):
            fits.append((positional, packed))
        if packed != kwonly and len(args) == len(positional) + len(kwonly):
            fits.append((positional, kwonly))
    if not fits or any(len(args) <= len(positional) for positional, _ in fits):
        return args
    spellings = {(len(positional), kwonly[:len(args) - len(positional)]) for positional, kwonly in fits}
    if len(spellings) != 1 or any(PACKED_OPTIONS in keywords for _, keywords in spellings):
        return args
    count, keywords = spellings.pop()
    return (*args[:count], *(Keyword(k, a) for k, a in zip(keywords, args[count:])))


GRAD_INPUT_MASK = "grad_input_mask"


def mask_positions(line_inputs: tuple[str, ...], tensor_inputs: tuple[str, ...]) -> tuple[int, ...] | None:
    """Where a line's ``grad_input_mask`` flags are in the formula's ``needs_input_grad``: torchgen
    gives a line one flag per input it names (``input, weight, grad_out: f(grad_input_mask)``), the
    formula one per tensor input in schema order; None when the two are the same list."""
    positions = tuple(tensor_inputs.index(name) for name in line_inputs)
    return None if positions == tuple(range(len(tensor_inputs))) else positions


def to_main(tree: Node, non_tensors: frozenset[str] = frozenset(), aten: AtenNames | None = None,
            integers: frozenset[str] = frozenset(), mask: tuple[int, ...] | None = None,
            written_tangent: str | None = None) -> Node:
    """``tree`` in the main dialect. ``non_tensors``: names that are not tensors (Scalar or int
    arguments), whose methods stay methods; ``aten``: ATen's operators (default: torch's);
    ``integers``: the names that are integers (int arguments), for integer division; ``mask``:
    the line's :func:`mask_positions` (its ``grad_input_mask`` is those flags of the formula's);
    ``written_tangent``: in an in-place operator's jvp, the tangent of the input it writes
    (``self_t``), whose in-place update is the tangent the jvp returns."""
    aten = aten_names() if aten is None else aten
    known, overloads = aten.functions, aten.signatures

    def main(node: Node) -> Node:
        return to_main(node, non_tensors, aten, integers, mask, written_tangent)

    def flag(position: int) -> Node:
        return Index(Name(GRAD_INPUT_MASK), Literal("number", str(position)))

    def replacement(node: Node) -> Node | None:
        match node:
            case Index(Name(name), Literal("number", index)) if name == GRAD_INPUT_MASK and mask is not None:
                return flag(mask[int(index)])
            case Name(name) if name == GRAD_INPUT_MASK and mask is not None:
                return BraceList(tuple(flag(position) for position in mask))
            case Binary("/" | "%" as op, left, right):
                left, right = main(left), main(right)
                if not (_integral(left, integers) and _integral(right, integers)):
                    return Binary(op, left, right)
                if _non_negative(left) and _non_negative(right):
                    return Binary("//" if op == "/" else op, left, right)
                return Binary(INTEGER_OPERATORS[op], left, right)    # C++'s own: cpp.int_div / int_mod
            case Unary("!", Call(Member(operand, "defined", False), ())):
                return NoneTest(main(operand), negated=False)
            case Call(Member(operand, "defined", False), ()):
                return NoneTest(main(operand), negated=True)
            case Call(Member(Name(optional) as operand, method, True), ()) \
                    if method in PLAIN_METADATA and optional not in non_tensors:
                # `bias->sym_sizes()` of an optional tensor: its sizes, or None without one
                sizes = Call(Member(operand, PLAIN_METADATA[method]), ())
                return Conditional(NoneTest(operand, negated=True), sizes, _NULLOPT)
            case BraceList((BraceList(items) as inner,)) if items:
                # `{{0, 0}}`: a list initialized from one non-empty initializer list is that list
                # (`{{}}` is not: it holds one value-initialized element)
                return main(inner)
            case Call(Template(Qualified(("std", "tuple")) | Name("tuple"), types), ()) \
                    if all(t == Name("Tensor") for t in types):
                return TupleDisplay(tuple(_NULLOPT for _ in types))
            case Call(Template(Qualified(("std", "get")) | Name("get"), (Literal("number", index),)), (tuple_,)) \
                    if index.isdigit():
                return Index(main(tuple_), Literal("number", index))
            case Binary("&" | "|" as op, left, right) \
                    if _tensor_comparison(left, non_tensors) and _tensor_comparison(right, non_tensors):
                # `&` of two boolean tensors is their logical and (`|`: or), which the library declares
                logical = "logical_and" if op == "&" else "logical_or"
                return Call(Qualified(("at", logical)), (_unwrapped(main(left)), _unwrapped(main(right))))
            case Name(constant) if constant in _MATH_CONSTANTS:
                return _MATH_CONSTANTS[constant]
            case Qualified(("at", "Reduction", member)) if member in REDUCTIONS:
                return Literal("number", REDUCTIONS[member])
            case Call(Member(Name() as operand, "value_or", False), (default,)):
                # an optional argument or its default (`IntArrayRef({})` is the empty list)
                return Conditional(NoneTest(operand, negated=True), operand, _list_literal(main(default)))
            case Call(Member(Name(tangent) as receiver, "copy_" | "mul_" as method, False), (value,)) \
                    if tangent == written_tangent:
                # an in-place jvp returns the written input's new tangent, which the input takes
                # (the C++ writes it into the tangent the input has): `self_t.copy_(v)` is `v`
                return main(value) if method == "copy_" else Binary("*", receiver, main(value))
            case Call(Name(function), (Name(tensors), *rest)) if function in LIST_JVPS:
                # FunctionsManual's jvp of a linear list operator reads the list's tangents, which a
                # formula's jvp takes as `<list>_t`: the operator applied to them
                return Call(Qualified(("at", LIST_JVPS[function])), (Name(f"{tensors}_t"), *(main(a) for a in rest)))
            case Call(Name("fmap") | Qualified(("c10", "fmap")), (values, Lambda(((_, parameter),), Unary("-", Name(element))))) \
                    if element == parameter:
                # each element negated (`roll`'s shifts back): the library's helper
                return Call(Name(NEGATED), (main(values),))
            case Call(Member(tensor, "view_as", False), (other,)):
                # `view_as(other)` is `view(other.sizes())`; the library declares `view`
                return Call(Qualified(("at", "view")), (_unwrapped(main(tensor)), Call(Member(main(other), "sizes"), ())))
            case Call(Name(function) | Qualified(("std", function)), (argument,)) \
                    if function in MATH_FUNCTIONS and _constant(argument):
                return Call(Member(Name(MATH), function), (main(argument),))
        if not isinstance(node, Call):
            return None
        args = tuple(main(a) for a in node.args)
        func = node.func
        if isinstance(func, Member) and not func.arrow:
            receiver = main(func.obj)
            method = _plain(func.name)
            if func.name in PLAIN_METADATA:
                return Call(Member(receiver, PLAIN_METADATA[func.name]), args)
            if _writes_a_temporary(func.name, receiver, aten):
                functional = func.name[:-1]
                return Call(Qualified(("at", functional)),
                            keyword_arguments(functional, (_unwrapped(receiver), *args), overloads))
            if method in _NEW_LIKE and len(args) == _NEW_LIKE[method] + 1 and _options_of(args[-1]) is not None:
                # `x.new_zeros(sizes, y.options())` is a tensor like `y`, whatever `x` is
                return Call(Qualified(("at", method)), (_options_of(args[-1]), *args[:-1]))
            if method == "to" and len(args) == 1 and _dtype_of(args[0]) is not None:
                return Call(Qualified(("at", "_to_copy")), (_unwrapped(receiver), Keyword("dtype", _dtype_of(args[0]))))
            if (method not in KEPT_METHODS and (method in known or _method_operator(method, aten))
                    and not (isinstance(receiver, Name) and receiver.ident in non_tensors)):
                receiver_and_args = (_unwrapped(receiver), *args)
                return Call(Qualified(("at", method)), keyword_arguments(method, receiver_and_args, overloads))
            return Call(Member(receiver, func.name), args)
        if isinstance(func, Qualified) and func.parts[:1] == ("at",) and len(func.parts) == 2:
            name = _plain(func.parts[1])
            if name in ATEN_UTILITIES:
                return Call(Name(name), args)
            like = _factory_like(name, args)
            if like is not None:
                return like
            return Call(Qualified(("at", name)), keyword_arguments(name, args, overloads))
        if isinstance(func, Name):
            name = _plain(func.ident)
            if name in known:
                like = _factory_like(name, args)
                if like is not None:
                    return like
                return Call(Qualified(("at", name)), keyword_arguments(name, args, overloads))
            return Call(Name(name), args)
        return Call(func, args)
    return rewrite(tree, replacement)


_NULLOPT = Qualified(("std", "nullopt"))
#: The library's helper negating each element of a list of integers (``fmap`` of ``-i``).
NEGATED = "negated"
# FunctionsManual's jvps of operators linear in a list of tensors (``cat_jvp(tensors, dim)`` reads
# each tensor's forward grad, zeros where there is none): the operator itself.
LIST_JVPS = {"cat_jvp": "cat", "stack_jvp": "stack", "block_diag_jvp": "block_diag"}
# ``at::Reduction``'s members, as the numbers of its C++ enum (``int reduction=Mean`` in the schemas).
REDUCTIONS = {"None": "0", "Mean": "1", "Sum": "2"}


def _list_literal(node: Node) -> Node:
    """``IntArrayRef({...})`` (an ArrayRef made of an initializer list) as that list."""
    match node:
        case Call(Name("IntArrayRef"), (BraceList() as items,)):
            return items
    return node
# <cmath>'s constants, as Python's ``math`` spells the same double, and the functions of ``math``
# a constant's arithmetic calls (``sqrt(M_PI)``, ``std::sqrt(2 * M_PI)``: numbers, not tensors).
MATH = "math"
_MATH_CONSTANTS = {"M_PI": Member(Name(MATH), "pi"),
                   "M_LN2": Call(Member(Name(MATH), "log"), (Literal("number", "2.0"),))}
MATH_FUNCTIONS = frozenset({"sqrt", "log", "exp"})


def _constant(node: Node) -> bool:
    """Whether ``node`` is arithmetic on number literals and <cmath> constants."""
    match node:
        case Literal("number", _):
            return True
        case Name(constant):
            return constant in _MATH_CONSTANTS
        case Paren(inner) | Unary("-" | "+", inner):
            return _constant(inner)
        case Binary("+" | "-" | "*" | "/", left, right):
            return _constant(left) and _constant(right)
    return False
# Factories whose last argument may be another tensor's options, and the ``new_*`` method making
# the same tensor like that one: (factory, the arguments before the options, the new_ operator).
_FACTORIES_LIKE = {"zeros": (1, "new_zeros"), "ones": (1, "new_ones"), "full": (2, "new_full"),
                   "scalar_tensor": (1, "new_full")}


# ``new_*`` methods and the number of their arguments before a TensorOptions one.
_NEW_LIKE = {"new_zeros": 1, "new_ones": 1, "new_full": 2}


def _options_of(node: Node) -> Node | None:
    """``t`` when ``node`` is ``t.options()``, else None."""
    match node:
        case Call(Member(tensor, "options", False), ()):
            return _unwrapped(tensor)
    return None


def _factory_like(name: str, args: tuple[Node, ...]) -> Node | None:
    """``at.new_zeros(x, sizes)`` for ``at::zeros(sizes, x.options())`` (``ones``, ``full``;
    ``scalar_tensor(v, x.options())`` is ``new_full(x, [], v)``), else None."""
    if name not in _FACTORIES_LIKE or len(args) != _FACTORIES_LIKE[name][0] + 1:
        return None
    match args[-1]:
        case Call(Member(like, "options", False), ()):
            values = args[:-1] if name != "scalar_tensor" else (BraceList(()), args[0])
            return Call(Qualified(("at", _FACTORIES_LIKE[name][1])), (_unwrapped(like), *values))
    return None


def _dtype_of(node: Node) -> Node | None:
    """``t.scalar_type()`` when ``node`` is a dtype read off a tensor ``t`` (``t.scalar_type()``, or
    ``t.dtype()``, C++'s TypeMeta of the same dtype), else None."""
    match node:
        case Call(Member(tensor, "scalar_type" | "dtype", False), ()):
            return Call(Member(tensor, "scalar_type"), ())
    return None


def _non_negative(node: Node) -> bool:
    """Whether ``node`` is an integer that cannot be negative: a decimal literal, a size, ``numel()``
    or ``dim()``, and sums, products and quotients of those."""
    match node:
        case Literal("number", text):
            return text.isdigit()
        case Call(Member(_, method, False), _):
            return method in NON_NEGATIVE_METADATA
        case Paren(inner):
            return _non_negative(inner)
        case Binary("+" | "*" | "//" | "%", left, right):
            return _non_negative(left) and _non_negative(right)
    return False


def _integral(node: Node, integers: frozenset[str]) -> bool:
    """Whether ``node`` is an integer: a non-negative one, an ``int`` argument, or arithmetic on those."""
    match node:
        case Name(ident):
            return ident in integers
        case Paren(inner) | Unary("-" | "+", inner):
            return _integral(inner, integers)
        case Binary("+" | "-" | "*" | "//" | "%" | "int/" | "int%", left, right):
            return _integral(left, integers) and _integral(right, integers)
    return _non_negative(node)


# In-place methods whose functional operator gives the same values in the receiver's dtype, and those
# that do on a boolean receiver (``logical_or_`` keeps the receiver's dtype, ``logical_or`` gives bool).
_SAME_DTYPE_IN_PLACE = frozenset({"masked_fill_"})
_LOGICAL_IN_PLACE = frozenset({"logical_or_", "logical_and_", "logical_not_", "logical_xor_"})
_ARITHMETIC = frozenset({"+", "-", "*", "/"})
_COMPARISONS = frozenset({"<", "<=", ">", ">=", "==", "!="})
_BOOLEAN_OPERATORS = frozenset({"logical_or", "logical_and", "logical_not", "logical_xor", "isnan", "isinf",
                                "isfinite", "eq", "ne", "lt", "le", "gt", "ge"})


def _writes_a_temporary(method: str, receiver: Node, aten: AtenNames) -> bool:
    """Whether ``receiver.<method>(...)`` writes in place into a tensor no one else sees, with the
    values and dtype of the functional operator: ``at.where(...).masked_fill_(m, 0)`` is
    ``at.masked_fill(at.where(...), m, 0)``, ``(a >= b).logical_or_(c)`` is ``at.logical_or(a >= b, c)``.
    A named tensor or a view stays written in place (the write is seen through the other names)."""
    functional = method[:-1]
    if not (method.endswith("_") and (functional in aten.functions or functional in aten.methods)):
        return False
    if method in _SAME_DTYPE_IN_PLACE:
        return _fresh(receiver, aten)
    return method in _LOGICAL_IN_PLACE and _boolean(receiver) and _fresh(receiver, aten)


def _fresh(node: Node, aten: AtenNames) -> bool:
    """Whether ``node`` is a tensor made by the expression itself: arithmetic, a comparison, or an
    ATen operator that never returns a view of its inputs."""
    match node:
        case Paren(inner):
            return _fresh(inner, aten)
        case Binary(op, _, _):
            return op in _ARITHMETIC or op in _COMPARISONS
        case Unary("-", _):
            return True
        case Call(Qualified(("at", name)), _):
            return name not in aten.views
    return False


def _boolean(node: Node) -> bool:
    """Whether ``node`` is a boolean tensor: a comparison or a logical operator's result."""
    match node:
        case Paren(inner):
            return _boolean(inner)
        case Binary(op, _, _):
            return op in _COMPARISONS
        case Call(Qualified(("at", name)), _):
            return name in _BOOLEAN_OPERATORS
    return False


def _tensor_comparison(node: Node, non_tensors: frozenset[str]) -> bool:
    """Whether ``node`` is a comparison of a tensor (a boolean tensor): a name that is not a
    Scalar or int argument compared with anything."""
    match node:
        case Paren(inner):
            return _tensor_comparison(inner, non_tensors)
        case Binary(op, left, right) if op in _COMPARISONS:
            return any(isinstance(side, Name) and side.ident not in non_tensors for side in (left, right))
    return False


def _method_operator(name: str, aten: AtenNames) -> bool:
    """A method-only ATen operator the main dialect calls as ``at.<name>`` (in-place ones stay methods)."""
    return name in aten.methods and not name.endswith("_")


def _unwrapped(node: Node) -> Node:
    """A receiver moved into argument position needs no parentheses of its own."""
    while isinstance(node, Paren):
        node = node.inner
    return node


def _plain(name: str) -> str:
    """``name`` without a ``_symint`` suffix (SymInt and int are one type in the main dialect)."""
    return name[:-len(SYMINT)] if name.endswith(SYMINT) else name
