"""Python expressions of formula code -> typed C++ expressions.

``translate(node, context)`` is a pure function from a libcst expression and
the names in scope to a :class:`Typed` C++ expression. It knows the dialect of
``formulas/README.md``: ``at.X(...)`` operator calls (keyword arguments put in
position from the declared schema), helper calls, Python operators, metadata
methods of tensors, ``len``/``list``, indexing, conditional expressions,
literals, tuples and lists. Anything else raises :class:`Untranslatable`, which
the caller turns into a ``DB2xx`` diagnostic at the node's position.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, NamedTuple

import libcst as cst

from transpiler import codes
from transpiler.cpp import types as T
from transpiler.cpp.operators import Resolved, accepts, cpp_default
from transpiler.cpp.types import Kind, PyType
from transpiler.metadata import METADATA_METHODS
from transpiler.schema import Argument, BaseType, FunctionSchema, ListType, OptionalType, Type

# Diagnostic codes of the C++ emitter (documented in transpiler/codes.py).
UNSUPPORTED = codes.UNSUPPORTED.code
UNKNOWN_OPERATOR = codes.UNKNOWN_OPERATOR.code
NO_OVERLOAD = codes.NO_OVERLOAD.code
UNKNOWN_NAME = codes.UNKNOWN_NAME.code
TYPE_CONFLICT = codes.TYPE_CONFLICT.code
UNSUPPORTED_TYPE = codes.UNSUPPORTED_TYPE.code
DUPLICATE_OPERATOR = codes.DUPLICATE_OPERATOR.code


class Untranslatable(Exception):
    """``node`` has no C++ translation; ``code`` and ``message`` become the diagnostic."""

    def __init__(self, node: cst.CSTNode, code: str, message: str) -> None:
        super().__init__(message)
        self.node = node
        self.code = code
        self.message = message


def unsupported(node: cst.CSTNode, construct: str) -> Untranslatable:
    """The Untranslatable error for a ``construct`` the C++ translation does not cover."""
    return Untranslatable(node, UNSUPPORTED, f"cannot transliterate {construct} to C++")


@dataclass(frozen=True)
class Typed:
    """A C++ expression and the formula-level type of its value."""

    text: str
    type: PyType
    atomic: bool = True        # usable as an operand without parentheses
    borrowed: bool = False     # a non-owning view (IntArrayRef, TensorList): copy it to keep or return it

    def operand(self) -> str:
        """The C++ text as an operand: parenthesized unless atomic."""
        return self.text if self.atomic else f"({self.text})"


@dataclass(frozen=True)
class Binding:
    """A name in scope: its type, its C++ spelling and, for a tensor saved as metadata only,
    the C++ expression that replaces each metadata method (``sizes`` -> ``self_sizes``)."""

    type: PyType
    cpp: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    nonnegative: bool = False     # an int known to be >= 0 (a range() loop counter): indexes without a wrap
    borrowed: bool = False        # a list parameter passed as a view (``at::IntArrayRef``...)


@dataclass(frozen=True)
class HelperSignature:
    """A ``@helper`` as callers see it: typed parameters (with Python defaults) and return type."""

    name: str
    params: tuple[tuple[str, PyType, cst.BaseExpression | None], ...]
    returns: PyType


@dataclass(frozen=True)
class Context:
    """Everything an expression may refer to."""

    operators: Mapping[str, tuple[FunctionSchema, ...]]     # ``at`` base name -> declared overloads
    helpers: Mapping[str, HelperSignature]
    names: Mapping[str, Binding]
    # The ATen functions (``at::<name>``) the code translated in this context calls, added as calls
    # are resolved (shared by the contexts derived from it): the emitter includes their headers.
    called: set[str] = field(default_factory=set, compare=False)

    def bind(self, bindings: Mapping[str, Binding]) -> "Context":
        """This context with ``bindings`` added to (or replacing) its names."""
        return replace(self, names={**self.names, **bindings})


CPP_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool case catch char class compl const
    constexpr const_cast continue decltype default delete do double dynamic_cast else enum explicit
    export extern false float for friend goto if inline int long mutable namespace new noexcept not
    not_eq nullptr operator or or_eq private protected public register reinterpret_cast return short
    signed sizeof static static_assert static_cast struct switch template this throw true try typedef
    typeid typename union unsigned using virtual void volatile while xor xor_eq grad_fn
""".split())


def cpp_name(name: str) -> str:
    """A Python identifier as a C++ identifier. C++ keywords (and the wrapper's own ``grad_fn``)
    and the identifiers C++ reserves (an underscore and a capital letter first, or a double
    underscore anywhere) get the prefix ``py``, with each ``__`` then spelled ``_u_``:
    ``delete`` -> ``py_delete``, ``_Scale`` -> ``py_Scale``, ``__w`` -> ``py_u_w``. Members add a
    trailing underscore to the result, so no mangled name meets a member's."""
    reserved = name.startswith("_") and name[1:2].isupper() or "__" in name
    if name not in CPP_KEYWORDS and not reserved:
        return name
    mangled = ("py" if name.startswith("_") else "py_") + name
    while "__" in mangled:
        mangled = mangled.replace("__", "_u_")
    return mangled


def cpp_string_literal(value: str) -> str:
    """``value`` (a Python string's value, escapes already resolved) as a C++ string literal of the
    same characters: its UTF-8 bytes, printable ASCII as themselves and every other byte, ``"``,
    ``\\`` and ``?`` (trigraphs) as three-digit octal escapes, which never run into the next character."""
    printable = {c for c in range(0x20, 0x7F)} - {ord('"'), ord("\\"), ord("?")}
    return '"' + "".join(chr(b) if b in printable else f"\\{b:03o}" for b in value.encode("utf-8", "surrogatepass")) + '"'


# --- conversions ---------------------------------------------------------------------------------

def coerce(value: Typed, target: PyType) -> str:
    """``value`` spelled as a C++ value of ``target`` (``None`` -> ``at::Tensor()``, ``x`` -> ``std::optional``,
    a borrowed list view -> an owned ``std::vector``)."""
    if value.borrowed:
        return f"formulas::runtime::to_owned({value.text})"
    if value.type == target:
        return value.text
    if value.type.kind is Kind.SCALAR and target.kind in (Kind.FLOAT, Kind.INT):
        return f"{value.operand()}.{'toDouble' if target.kind is Kind.FLOAT else 'toLong'}()"
    if value.type.kind is Kind.NONE or (value.type.kind is Kind.LIST and value.type.elem.kind is Kind.UNKNOWN):
        return f"{T.cpp_value(target)}()"
    if target.kind is Kind.OPTIONAL and value.type.kind is not Kind.OPTIONAL:
        return f"{T.cpp_value(target)}({value.text})"
    if target.kind is Kind.LIST and target.size is None and value.type.kind is Kind.LIST and value.type.size is not None:
        return f"{T.cpp_value(target)}({value.operand()}.begin(), {value.operand()}.end())"
    return value.text


def is_none(node: cst.BaseExpression) -> bool:
    """Whether ``node`` is the name ``None``."""
    return isinstance(node, cst.Name) and node.value == "None"


# --- the translator --------------------------------------------------------------------------------

def translate(node: cst.BaseExpression, context: Context, expected: PyType | None = None) -> Typed:
    """Translate one expression; ``expected`` types literals that cannot type themselves (``[]``, ``None``)."""
    if isinstance(node, cst.Name):
        return _name(node, context, expected)
    if isinstance(node, cst.Integer):
        return Typed(node.value.replace("_", ""), T.INT)
    if isinstance(node, cst.Float):
        text = node.value.replace("_", "")
        return Typed(text if any(c in text for c in ".eE") else f"{text}.0", T.FLOAT)
    if isinstance(node, cst.SimpleString) and node.prefix.lower() in ("", "r", "u"):
        return Typed(cpp_string_literal(node.evaluated_value), T.STR)
    if isinstance(node, (cst.BinaryOperation, cst.UnaryOperation)):
        return _arithmetic(node, context)
    if isinstance(node, cst.Comparison):
        return _comparison(node, context)
    if isinstance(node, cst.BooleanOperation):
        op = "&&" if isinstance(node.operator, cst.And) else "||"
        left, right = _condition(node.left, context), _condition(node.right, context)
        return Typed(f"{left.operand()} {op} {right.operand()}", T.BOOL, atomic=False)
    if isinstance(node, cst.IfExp):
        return _conditional(node, context, expected)
    if isinstance(node, cst.Call):
        return _call(node, context, expected)
    if isinstance(node, cst.Subscript):
        return _subscript(node, context)
    if isinstance(node, (cst.List, cst.Tuple)):
        return _sequence(node, context, expected)
    if _in_math(node, context) and node.attr.value in MATH_CONSTANTS:
        return Typed(MATH_CONSTANTS[node.attr.value], T.FLOAT)
    raise unsupported(node, _describe(node))


#: Python's ``math`` in formula code: its constants (as C++ literals of the same double) and the
#: functions of one number the formulas call (``math.sqrt(2 * math.pi)``), as <cmath>'s.
MATH_CONSTANTS = {"pi": "3.141592653589793", "e": "2.718281828459045",
                  "inf": "std::numeric_limits<double>::infinity()", "nan": "std::numeric_limits<double>::quiet_NaN()"}
MATH_FUNCTIONS = frozenset({"sqrt", "log", "exp"})


def _dialect_call(func: cst.BaseExpression, context: Context, owner: str, name: str) -> bool:
    """Whether ``func`` is ``<owner>.<name>`` of the imported dialect (``cpp.int_div``,
    ``GradMode.is_enabled``), ``owner`` not a local of that name."""
    return (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == owner
            and func.attr.value == name and owner not in context.names)


def _in_math(node: cst.BaseExpression, context: Context) -> bool:
    """Whether ``node`` is ``math.<name>`` (``math`` the module, not a local of that name)."""
    return (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "math"
            and "math" not in context.names)


def translate_condition(node: cst.BaseExpression, context: Context) -> Typed:
    """An expression in a boolean position (``if``, ``not``, ``and``/``or``)."""
    return _condition(node, context)


def _describe(node: cst.CSTNode) -> str:
    names = {
        cst.Lambda: "a lambda", cst.ListComp: "a list comprehension", cst.GeneratorExp: "a generator expression",
        cst.DictComp: "a dict comprehension", cst.SetComp: "a set comprehension", cst.Dict: "a dict literal",
        cst.Set: "a set literal", cst.FormattedString: "an f-string", cst.Await: "await",
        cst.Yield: "yield", cst.Attribute: "an attribute access", cst.NamedExpr: "an assignment expression",
        cst.Ellipsis: "an ellipsis", cst.Imaginary: "a complex literal", cst.ConcatenatedString: "a string concatenation",
    }
    return names.get(type(node), f"a {type(node).__name__} expression")


def _name(node: cst.Name, context: Context, expected: PyType | None) -> Typed:
    value = node.value
    if value in ("True", "False"):
        return Typed(value.lower(), T.BOOL)
    if value == "None":
        if expected is not None and expected.kind is not Kind.NONE:
            return Typed(coerce(Typed("", T.NONE), expected), expected)
        return Typed("std::nullopt", T.NONE)
    binding = context.names.get(value)
    if binding is None:
        raise Untranslatable(node, UNKNOWN_NAME, f"'{value}' is not an input, a local or a captured value here")
    if binding.metadata:
        raise unsupported(node, f"'{value}' other than through its metadata ({', '.join(sorted(binding.metadata))})")
    return Typed(binding.cpp, binding.type, borrowed=binding.borrowed)


def _condition(node: cst.BaseExpression, context: Context) -> Typed:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        inner = _condition(node.expression, context)
        return Typed(f"!{inner.operand()}", T.BOOL)
    value = translate(node, context)
    kind = value.type.kind
    if kind in (Kind.BOOL, Kind.INT):
        return value
    if kind is Kind.LIST:
        return Typed(f"!{value.operand()}.empty()", T.BOOL)
    if kind is Kind.OPTIONAL and value.type.elem.kind in (Kind.BOOL, Kind.INT, Kind.FLOAT):
        return Typed(f"{value.operand()}.has_value() && *{value.operand()}", T.BOOL, atomic=False)
    if kind is Kind.OPTIONAL and value.type.elem.kind is Kind.LIST:
        return Typed(f"{value.operand()}.has_value() && !{value.operand()}->empty()", T.BOOL, atomic=False)
    raise unsupported(node, f"the truth value of a {value.type}")


# Python operators; the tensor forms are the aten ops add, sub, mul, div, neg (TensorOperators.h).
_BINARY = {cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.Divide: "/"}
_OTHER_OPERATORS = {cst.Power: "**", cst.FloorDivide: "//", cst.Modulo: "%", cst.MatrixMultiply: "@",
                    cst.BitAnd: "&", cst.BitOr: "|", cst.BitXor: "^", cst.LeftShift: "<<", cst.RightShift: ">>"}


def _arithmetic(node: cst.BinaryOperation | cst.UnaryOperation, context: Context) -> Typed:
    if isinstance(node, cst.UnaryOperation):
        if isinstance(node.operator, cst.Not):
            return _condition(node, context)
        operand = translate(node.expression, context)
        if isinstance(node.operator, cst.Plus):
            return operand
        if isinstance(node.operator, cst.Minus) and operand.type.kind in (Kind.TENSOR, Kind.INT, Kind.FLOAT, Kind.SCALAR):
            return Typed(f"-{operand.operand()}", operand.type)
        raise unsupported(node, f"unary {type(node.operator).__name__} on {operand.type}")
    left, right = translate(node.left, context), translate(node.right, context)
    kinds = {left.type.kind, right.type.kind}
    if isinstance(node.operator, (cst.FloorDivide, cst.Modulo)) and kinds <= {Kind.INT, Kind.BOOL}:
        helper = "floordiv" if isinstance(node.operator, cst.FloorDivide) else "pymod"
        return Typed(f"formulas::runtime::{helper}({left.text}, {right.text})", T.INT)
    symbol = _BINARY.get(type(node.operator))
    if symbol is None:
        spelled = _OTHER_OPERATORS.get(type(node.operator), type(node.operator).__name__)
        raise unsupported(node, f"the operator '{spelled}' on {left.type} and {right.type}")
    if Kind.TENSOR in kinds:
        if not kinds <= {Kind.TENSOR, Kind.INT, Kind.FLOAT, Kind.BOOL, Kind.SCALAR}:
            raise unsupported(node, f"'{symbol}' between {left.type} and {right.type}")
        return Typed(f"{left.operand()} {symbol} {right.operand()}", T.TENSOR, atomic=False)
    if Kind.SCALAR in kinds and kinds <= {Kind.SCALAR, Kind.INT, Kind.FLOAT, Kind.BOOL}:
        left_text = f"{left.operand()}.toDouble()" if left.type.kind is Kind.SCALAR else left.operand()
        right_text = f"{right.operand()}.toDouble()" if right.type.kind is Kind.SCALAR else right.operand()
        return Typed(f"{left_text} {symbol} {right_text}", T.FLOAT, atomic=False)
    if kinds <= {Kind.INT, Kind.FLOAT, Kind.BOOL}:
        if symbol == "/":   # Python's true division
            return Typed(f"static_cast<double>({left.text}) / {right.operand()}", T.FLOAT, atomic=False)
        result = T.FLOAT if Kind.FLOAT in kinds else T.INT
        return Typed(f"{left.operand()} {symbol} {right.operand()}", result, atomic=False)
    if symbol == "+" and left.type.kind is Kind.LIST and right.type.kind is Kind.LIST:
        joined = T.unify(left.type, right.type)
        return Typed(f"formulas::runtime::concat({coerce(left, joined)}, {coerce(right, joined)})", joined)
    raise unsupported(node, f"'{symbol}' between {left.type} and {right.type}")


_COMPARE = {cst.LessThan: "<", cst.LessThanEqual: "<=", cst.GreaterThan: ">", cst.GreaterThanEqual: ">=",
            cst.Equal: "==", cst.NotEqual: "!="}


def _comparison(node: cst.Comparison, context: Context) -> Typed:
    parts: list[str] = []
    left_node = node.left
    result_type = T.BOOL
    for target in node.comparisons:
        op = target.operator
        if isinstance(op, (cst.Is, cst.IsNot)):
            if not is_none(target.comparator):
                raise unsupported(node, "'is' with anything but None")
            subject = translate(left_node, context)
            parts.append(_is_none(subject, node, negate=isinstance(op, cst.IsNot)))
        elif type(op) in _COMPARE:
            left, right = _as_number(translate(left_node, context)), _as_number(translate(target.comparator, context))
            if Kind.TENSOR in (left.type.kind, right.type.kind):
                if len(node.comparisons) > 1:
                    raise unsupported(node, "a chained comparison of tensors")
                result_type = T.TENSOR
            elif not ({left.type.kind, right.type.kind} <= {Kind.INT, Kind.FLOAT, Kind.BOOL}
                      or left.type == right.type):
                raise unsupported(node, f"comparing {left.type} with {right.type}")
            parts.append(f"{left.operand()} {_COMPARE[type(op)]} {right.operand()}")
        else:
            raise unsupported(node, f"the comparison '{type(op).__name__}'")
        left_node = target.comparator
    if len(parts) == 1:
        return Typed(parts[0], result_type, atomic=False)
    return Typed(" && ".join(f"({p})" for p in parts), T.BOOL, atomic=False)


def _as_number(value: Typed) -> Typed:
    """A Scalar compared with a number compares as a double (``alpha == 1``)."""
    if value.type.kind is Kind.SCALAR:
        return Typed(f"{value.operand()}.toDouble()", T.FLOAT)
    return value


def _is_none(subject: Typed, node: cst.CSTNode, negate: bool) -> str:
    kind = subject.type.kind
    if kind is Kind.TENSOR:
        return f"{subject.operand()}.defined()" if negate else f"!{subject.operand()}.defined()"
    if kind is Kind.OPTIONAL:
        return f"{subject.operand()}.has_value()" if negate else f"!{subject.operand()}.has_value()"
    if kind is Kind.NONE:
        return "false" if negate else "true"
    raise unsupported(node, f"'is None' on a {subject.type}, which is never None")


def _narrowed(test: cst.BaseExpression, context: Context) -> tuple[Context, Context]:
    """The contexts of a conditional's two branches: an optional non-tensor name tested with
    ``is None`` / ``is not None`` is its value (``x.value()``) where it is known not to be None."""
    match test:
        case cst.Comparison(left=cst.Name(value=name), comparisons=[cst.ComparisonTarget(operator=op, comparator=other)]) \
                if is_none(other) and isinstance(op, (cst.Is, cst.IsNot)) and name in context.names:
            binding = context.names[name]
            if binding.type.kind is Kind.OPTIONAL:
                value = context.bind({name: Binding(binding.type.elem, f"{binding.cpp}.value()")})
                return (context, value) if isinstance(op, cst.Is) else (value, context)
    return context, context


def _conditional(node: cst.IfExp, context: Context, expected: PyType | None) -> Typed:
    test = _condition(node.test, context)
    if_true, if_false = _narrowed(node.test, context)
    body = translate(node.body, if_true, expected)
    orelse = translate(node.orelse, if_false, expected)
    try:
        joined = T.unify(body.type, orelse.type)
    except T.TypeConflict as conflict:
        raise Untranslatable(node, TYPE_CONFLICT, f"the branches of this conditional have types {conflict}") from None
    if joined.kind is Kind.NONE and expected is not None:
        joined = expected
    if joined.kind is Kind.TUPLE:   # a tuple display types its items from the joined type: (None, None)
        body = translate(node.body, if_true, joined) if body.type != joined else body
        orelse = translate(node.orelse, if_false, joined) if orelse.type != joined else orelse
    return Typed(f"{test.operand()} ? {_branch(body, joined)} : {_branch(orelse, joined)}", joined, atomic=False)


def _branch(value: Typed, target: PyType) -> str:
    text = coerce(value, target)
    return text if value.atomic or text != value.text else f"({text})"


def _sequence(node: cst.List | cst.Tuple, context: Context, expected: PyType | None) -> Typed:
    if any(not isinstance(e, cst.Element) or isinstance(e, cst.StarredElement) for e in node.elements):
        raise unsupported(node, "a starred element")
    if isinstance(node, cst.Tuple):
        hints = expected.elems if expected is not None and expected.kind is Kind.TUPLE else ()
        items = [translate(e.value, context, hints[i] if i < len(hints) else None) for i, e in enumerate(node.elements)]
        ty = T.tuple_of(*(item.type for item in items))
        return Typed(f"std::make_tuple({', '.join(coerce(i, t) for i, t in zip(items, ty.elems))})", ty)
    hint = expected.elem if expected is not None and expected.kind is Kind.LIST else None
    items = [translate(e.value, context, hint) for e in node.elements]
    elem = hint if hint is not None and hint.kind is not Kind.UNKNOWN else T.UNKNOWN
    for item in items:
        try:
            elem = T.unify(elem, item.type)
        except T.TypeConflict as conflict:
            raise Untranslatable(node, TYPE_CONFLICT, f"list elements have types {conflict}") from None
    # a display of as many items as a fixed-size list parameter takes is that std::array (``bool[3] output_mask``)
    size = expected.size if expected is not None and expected.kind is Kind.LIST and expected.size == len(items) else None
    ty = T.list_of(elem, size)
    if elem.kind is Kind.UNKNOWN:
        return Typed("{}", ty)
    return Typed(f"{T.cpp_value(ty)}{{{', '.join(coerce(i, elem) for i in items)}}}", ty)


def deref_optional_list(value: Typed) -> Typed:
    """``xs`` of type ``list | None`` used as a list (Python raises on None; so does ``*xs``)."""
    if value.type.kind is Kind.OPTIONAL and value.type.elem.kind is Kind.LIST:
        return Typed(f"(*{value.operand()})", value.type.elem)
    return value


def _subscript(node: cst.Subscript, context: Context) -> Typed:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        raise unsupported(node, "slicing")
    container = deref_optional_list(translate(node.value, context))
    index_node = node.slice[0].slice.value
    if container.type.kind is Kind.TUPLE:
        position = _literal_int(index_node)
        if position is None or not -len(container.type.elems) <= position < len(container.type.elems):
            raise unsupported(node, "a tuple index that is not an in-range integer literal")
        position %= len(container.type.elems)
        return Typed(f"std::get<{position}>({container.text})", container.type.elems[position])
    if container.type.kind is not Kind.LIST:
        raise unsupported(node, f"indexing a {container.type}")
    return Typed(element_access(container, index_node, context), container.type.elem)


def element_access(container: Typed, index_node: cst.BaseExpression, context: Context) -> str:
    """``xs[i]`` with Python's negative indices (a wrap only where the index may be negative)."""
    literal = _literal_int(index_node)
    if literal is not None and literal >= 0:
        return f"{container.operand()}[{literal}]"
    index = translate(index_node, context)
    if isinstance(index_node, cst.Name) and context.names[index_node.value].nonnegative:
        return f"{container.operand()}[{index.text}]"
    if index.type.kind not in (Kind.INT, Kind.BOOL):
        raise unsupported(index_node, f"an index of type {index.type}")
    return f"{container.operand()}[formulas::runtime::wrap_index({index.text}, {container.operand()}.size())]"


def _literal_int(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.value.replace("_", ""), 0)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and isinstance(node.expression, cst.Integer):
        return -int(node.expression.value.replace("_", ""), 0)
    return None


# --- calls -------------------------------------------------------------------------------------------

#: The metadata methods the emitter writes: name -> (type, C++ expression), from the one table.
EMITTED_METADATA: dict[str, tuple[PyType, str]] = {
    name: (getattr(T, method.cpp_type), method.cpp) for name, method in METADATA_METHODS.items() if method.cpp
}


#: The methods of a ``Scalar`` argument (``c10::Scalar``'s own, which derivatives.yaml calls: ``alpha.conj()``,
#: ``other.toDouble()``) and the type of their value. ``toFloat`` is C++'s ``float``, rounded to single
#: precision as torch's formula rounds it, then widened to double wherever it meets one.
SCALAR_METHODS: dict[str, PyType] = {
    "conj": T.SCALAR, "toDouble": T.FLOAT, "toFloat": T.FLOAT, "toLong": T.INT,
    "isComplex": T.BOOL, "isFloatingPoint": T.BOOL,
}


#: ``std::optional``'s methods derivatives.yaml calls on an optional argument (``train.has_value()``,
#: ``correction.value_or(1)``), with their number of arguments.
OPTIONAL_METHODS = {"has_value": 0, "value": 0, "value_or": 1}


def is_view_type(ty: PyType) -> bool:
    """An optional list, which a kernel takes as a view (``at::OptionalIntArrayRef``), not a ``std::optional``."""
    return ty.kind is Kind.OPTIONAL and ty.elem.kind is Kind.LIST


def _call(node: cst.Call, context: Context, expected: PyType | None) -> Typed:
    func = node.func
    if any(arg.star for arg in node.args):
        raise unsupported(node, "a call with *args or **kwargs")
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "at":
        return _operator_call(node, func.attr.value, context)
    if _in_math(func, context) and func.attr.value in MATH_FUNCTIONS and len(node.args) == 1 \
            and node.args[0].keyword is None:
        number = translate(node.args[0].value, context)
        if number.type.kind not in (Kind.INT, Kind.FLOAT, Kind.BOOL):
            raise unsupported(node, f"math.{func.attr.value} of a {number.type} (call at.{func.attr.value} on tensors)")
        return Typed(f"std::{func.attr.value}(static_cast<double>({number.text}))", T.FLOAT)
    if _dialect_call(func, context, "GradMode", "is_enabled") and not node.args:
        return Typed("at::GradMode::is_enabled()", T.BOOL)     # on in a backward when create_graph=True
    for method, operator in (("int_div", "/"), ("int_mod", "%")):
        if _dialect_call(func, context, "cpp", method) and len(node.args) == 2:
            left, right = (translate(a.value, context) for a in node.args)
            if {left.type.kind, right.type.kind} <= {Kind.INT, Kind.BOOL}:     # C++'s own: truncating
                return Typed(f"{left.operand()} {operator} {right.operand()}", T.INT, atomic=False)
            raise unsupported(node, f"cpp.{method} of {left.type} and {right.type}")
    if isinstance(func, cst.Attribute):
        return _method_call(node, func, context)
    if isinstance(func, cst.Name):
        name = func.value
        if name in context.helpers:
            return _overloaded_helper_call(node, name, context)
        if name == "len" and len(node.args) == 1 and node.args[0].keyword is None:
            value = deref_optional_list(translate(node.args[0].value, context))
            if value.type.kind not in (Kind.LIST, Kind.TUPLE):
                raise unsupported(node, f"len() of a {value.type}")
            if value.type.kind is Kind.TUPLE:
                return Typed(str(len(value.type.elems)), T.INT)
            return Typed(f"static_cast<int64_t>({value.operand()}.size())", T.INT)
        if name == "list" and len(node.args) == 1 and node.args[0].keyword is None:
            value = translate(node.args[0].value, context)
            if value.type.kind is not Kind.LIST:
                raise unsupported(node, f"list() of a {value.type}")
            ty = T.list_of(value.type.elem)
            # one evaluation of the operand: begin() and end() of two temporaries (list(x.sizes()))
            # would walk between two different vectors
            return Typed(f"formulas::runtime::to_list<{T.cpp_value(ty)}>({value.text})", ty)
        if name in ("min", "max") and len(node.args) == 2 and all(a.keyword is None for a in node.args):
            left, right = (translate(a.value, context) for a in node.args)
            if {left.type.kind, right.type.kind} <= {Kind.INT, Kind.BOOL}:
                return Typed(f"std::{name}<int64_t>({left.text}, {right.text})", T.INT)
            if {left.type.kind, right.type.kind} <= {Kind.INT, Kind.FLOAT, Kind.BOOL}:
                return Typed(f"std::{name}<double>({left.text}, {right.text})", T.FLOAT)
        raise Untranslatable(node, UNKNOWN_OPERATOR if name not in context.names else UNSUPPORTED,
                             f"cannot transliterate a call to '{name}' to C++: "
                             "only at.<op>, @helper functions, len, list, min and max can be called")
    raise unsupported(node, "this call")


def _method_call(node: cst.Call, func: cst.Attribute, context: Context) -> Typed:
    method = func.attr.value
    if isinstance(func.value, cst.Name) and func.value.value in context.names:
        binding = context.names[func.value.value]
        key = "sizes" if method == "size" else method
        if key in binding.metadata:
            saved = binding.metadata[key]
            if method == "size":
                index = translate(node.args[0].value, context)
                return Typed(f"{saved}[formulas::runtime::wrap_index({index.text}, {saved}.size())]", T.INT)
            return Typed(saved, EMITTED_METADATA[key][0], borrowed=key == "sizes")   # an IntArrayRef parameter
    receiver = translate(func.value, context)
    if receiver.type.kind is Kind.TENSOR and method in EMITTED_METADATA:
        ty, template = EMITTED_METADATA[method]
        args = [translate(a.value, context).text for a in node.args]
        if len(args) != template.count("{") - 1:
            raise unsupported(node, f"'{method}' with {len(args)} arguments")
        return Typed(template.format(receiver.operand(), *args), ty)
    if receiver.type.kind is Kind.TENSOR and method in METADATA_METHODS:
        raise unsupported(node, f"the tensor metadata method '{method}' (the C++ path writes only "
                          f"{', '.join(EMITTED_METADATA)}: see transpiler/metadata.py)")
    if receiver.type.kind is Kind.TENSOR:
        raise unsupported(node, f"the tensor method '{method}' (tensor methods are metadata only; call at.{method})")
    if receiver.type.kind is Kind.SCALAR and method in SCALAR_METHODS and not node.args:
        return Typed(f"{receiver.operand()}.{method}()", SCALAR_METHODS[method])
    if receiver.type.kind is Kind.OPTIONAL and method in OPTIONAL_METHODS and len(node.args) == OPTIONAL_METHODS[method]:
        if receiver.borrowed or is_view_type(receiver.type):
            raise unsupported(node, f"the method '{method}' of a borrowed {receiver.type}")
        if method == "has_value":
            return Typed(f"{receiver.operand()}.has_value()", T.BOOL)
        if method == "value":       # std::optional::value() throws on an empty optional, never reads garbage
            return Typed(f"{receiver.operand()}.value()", receiver.type.elem)
        default = translate(node.args[0].value, context, receiver.type.elem)
        if not accepts(receiver.type.elem, default.type):
            raise unsupported(node, f"value_or of a {receiver.type} given a {default.type}")
        return Typed(f"{receiver.operand()}.value_or({coerce(default, receiver.type.elem)})", receiver.type.elem)
    raise unsupported(node, f"the method '{method}' of a {receiver.type}")


def _bind_arguments(node: cst.Call, names: list[str]) -> dict[str, cst.BaseExpression]:
    """Map the call's arguments onto parameter names (positional first, then keywords)."""
    positional = [a for a in node.args if a.keyword is None]
    if len(positional) > len(names):
        raise ValueError(f"takes at most {len(names)} arguments, {len(positional)} given")
    bound = {name: arg.value for name, arg in zip(names, positional)}
    for arg in node.args:
        if arg.keyword is not None:
            key = arg.keyword.value
            if key not in names:
                raise ValueError(f"has no parameter '{key}'")
            if key in bound:
                raise ValueError(f"got '{key}' twice")
            bound[key] = arg.value
    return bound


def _operator_call(node: cst.Call, name: str, context: Context) -> Typed:
    overloads = context.operators.get(name)
    if not overloads:
        raise Untranslatable(node, UNKNOWN_OPERATOR,
                             f"call to unknown operator 'at.{name}': declare it in the library "
                             "with @derivative or nondifferentiable(...)")
    tried: list[str] = []
    for schema in overloads:
        resolved = _resolve(node, schema, context)
        if resolved is not None:
            if resolved.function is not None:
                context.called.add(resolved.function)
            return Typed(resolved.cpp(), resolved.return_type)
        tried.append(str(schema))
    raise Untranslatable(node, NO_OVERLOAD, f"no declared overload of 'at.{name}' accepts these arguments "
                         f"(declared: {'; '.join(tried)})")


class _Parameters(NamedTuple):
    """What resolving a call against one schema reads of it, made once per schema."""

    schema: FunctionSchema                  # held, so that its id (the key) is not reused
    params: tuple[Argument, ...]            # its arguments but the ``out=`` ones
    positional_names: list[str]             # of those not keyword-only
    keyword_names: list[str]                # of every one
    types: tuple[PyType | None, ...]        # each one's type (None: no C++ spelling)


# Each call resolved against each overload of its operator: the same few hundred schemas, by identity
# (hashing a schema, a dataclass of tuples of dataclasses, costs more than reading it).
_parameters: dict[int, _Parameters] = {}


def _parameters_of(schema: FunctionSchema) -> _Parameters:
    found = _parameters.get(id(schema))
    if found is None or found.schema is not schema:
        params = tuple(a for a in schema.arguments if not a.is_out)
        found = _parameters[id(schema)] = _Parameters(
            schema, params, [a.name for a in params if not a.kwarg_only], [a.name for a in params],
            tuple(map(_schema_type, params)))
    return found


def _schema_type(param: Argument) -> PyType | None:
    try:
        return T.from_schema(param.type)
    except T.UnsupportedType:
        return None


def _resolve(node: cst.Call, schema: FunctionSchema, context: Context) -> Resolved | None:
    params, positional_names, keyword_names, types = _parameters_of(schema)[1:]
    if sum(a.keyword is None for a in node.args) > len(positional_names):
        return None
    try:
        bound = _bind_arguments(node, keyword_names)
    except ValueError:
        return None
    if any(a.keyword is not None and a.keyword.value in positional_names[:sum(b.keyword is None for b in node.args)]
           for a in node.args):
        return None
    texts: list[str] = []
    last = max((i for i, p in enumerate(params) if p.name in bound), default=-1)
    for index, param in enumerate(params):
        if index > last:
            break
        param_type = types[index]
        if param_type is None:
            return None
        if param.name not in bound:
            if param.default is None:
                return None
            texts.append(NO_TENSOR if _optional_tensor(param.type) else cpp_default(param))
            continue
        argument = bound[param.name]
        hint = param_type
        if isinstance(param.type, ListType) and param.type.size is not None and param_type.elem == T.BOOL:
            hint = T.list_of(T.BOOL, param.type.size)     # ``bool[3] output_mask``: a std::array in C++
        value = translate(argument, context, None if is_none(argument) else hint)
        if not accepts(param_type, value.type) or _wrong_length(param.type, value.type):
            return None
        texts.append(_optional_tensor_text(value) if _optional_tensor(param.type) else _argument_text(value, param_type))
    if any(p.default is None and p.name not in bound for p in params):
        return None
    return Resolved(schema, tuple(texts))


def _wrong_length(schema_type: Type, value: PyType) -> bool:
    """A fixed-length list (``bool[3] output_mask``, a C++ ``std::array``) given a list of another
    fixed length (the formula's ``needs_input_grad`` mask of five inputs)."""
    return (isinstance(schema_type, ListType) and schema_type.size is not None
            and value.kind is Kind.LIST and value.size is not None and value.size != schema_type.size)


#: ``None`` for an ATen ``Tensor?`` parameter: an empty ``std::optional<at::Tensor>``, typed, so that it
#: picks the ``Tensor?`` overload of an op that has another with ``float?`` there (``at::linalg_pinv``).
NO_TENSOR = "std::optional<at::Tensor>()"


def _optional_tensor(schema_type: Type) -> bool:
    return isinstance(schema_type, OptionalType) and schema_type.elem == BaseType("Tensor")


def _optional_tensor_text(value: Typed) -> str:
    """An argument for an ATen ``Tensor?`` parameter. Formula code holds ``Tensor?`` as an
    ``at::Tensor`` that is undefined for ``None``; ATen reads an optional that holds an undefined
    tensor as present (``linalg_pinv``'s ``atol`` then fails), so ``None`` and an undefined tensor
    are passed as an empty optional."""
    if value.type.kind is Kind.NONE:
        return NO_TENSOR
    return f"formulas::runtime::optional_tensor({value.text})"


def _argument_text(value: Typed, param: PyType) -> str:
    if value.type.kind is Kind.NONE:
        return "at::Tensor()" if param.kind is Kind.TENSOR else "std::nullopt"
    if value.type.kind is Kind.LIST and value.type.elem.kind is Kind.UNKNOWN:
        target = param.elem if param.kind is Kind.OPTIONAL else param
        return f"{T.cpp_value(target)}{{}}"
    if param == T.optional(T.INT_LIST) and value.type == param and not value.borrowed:
        # an owned std::optional<std::vector> does not convert to at::OptionalIntArrayRef: borrow it
        # (``bias.sizes() if bias is not None else None``, lent for the call's full expression)
        return f"formulas::runtime::borrow({value.text})"
    return value.text


#: ``name__variant`` is an overload of the helper ``name`` (FunctionsManual's C++ overloads, such as
#: ``unsqueeze_to(grad, sizes)`` and ``unsqueeze_to(grad, dim, sizes)``): a call of ``name`` is the
#: first of them, in declaration order, whose parameters accept its arguments.
OVERLOAD_SEPARATOR = "__"


class HelperTable(dict):
    """Helper signatures by name (not changed once made), whose :meth:`overloads` are indexed on
    first use: a scan of every helper for each call cost a tenth of the corpus's emission."""

    def overloads(self, name: str) -> list[HelperSignature]:
        """:func:`helper_overloads` of this table."""
        index = self.__dict__.get("_index")
        if index is None:
            index = self.__dict__["_index"] = {}
            for helper, signature in self.items():
                index.setdefault(helper, []).append(signature)
                at = helper.find(OVERLOAD_SEPARATOR)
                while at >= 0:  # ``name__variant``: an overload of each ``name`` whose variant has no separator
                    if OVERLOAD_SEPARATOR not in helper[at + len(OVERLOAD_SEPARATOR):]:
                        index.setdefault(helper[:at], []).append(signature)
                    at = helper.find(OVERLOAD_SEPARATOR, at + 1)
        return list(index.get(name, ()))


def helper_overloads(name: str, helpers: Mapping[str, HelperSignature]) -> list[HelperSignature]:
    """The helper ``name`` and its overloads ``name__variant``, in declaration order (a table with
    an ``overloads`` method of its own answers: :mod:`transpiler.cpp.emit_once` records the answer)."""
    own = getattr(helpers, "overloads", None)
    if own is not None:
        return own(name)
    prefix = name + OVERLOAD_SEPARATOR
    return [signature for helper, signature in helpers.items()
            if helper == name or (helper.startswith(prefix) and OVERLOAD_SEPARATOR not in helper[len(prefix):])]


def _overloaded_helper_call(node: cst.Call, name: str, context: Context) -> Typed:
    overloads = helper_overloads(name, context.helpers)
    refusals = []
    for helper in overloads:
        try:
            return _helper_call(node, helper, context)
        except Untranslatable as error:
            if len(overloads) == 1:
                raise
            refusals.append(f"{helper.name}: {error.message}")
    raise Untranslatable(node, TYPE_CONFLICT, f"no overload of helper '{name}' accepts these arguments "
                         f"({'; '.join(refusals)})")


def _helper_call(node: cst.Call, helper: HelperSignature, context: Context) -> Typed:
    names = [p[0] for p in helper.params]
    try:
        bound = _bind_arguments(node, names)
    except ValueError as error:
        raise unsupported(node, f"this call of helper '{helper.name}' (it {error})") from None
    texts = []
    for name, ty, default in helper.params:
        given = bound[name] if name in bound else default
        if given is None:
            raise unsupported(node, f"this call of helper '{helper.name}' (missing argument '{name}')")
        value = translate(given, context, None if is_none(given) else ty)
        if value.type.kind is Kind.OPTIONAL and value.type.elem == ty:
            # an optional passed where the helper takes its value (after an ``is None`` test in
            # the caller): std::optional::value() throws if it is empty, never reads garbage
            texts.append(f"{value.operand()}.value()")
            continue
        if not accepts(ty, value.type) and value.type.kind is not Kind.TUPLE:
            raise Untranslatable(node, TYPE_CONFLICT, f"helper '{helper.name}' takes {ty} for '{name}', "
                                 f"got {value.type}")
        if value.type.kind is Kind.NONE or (value.type.kind is Kind.LIST and value.type.elem.kind is Kind.UNKNOWN):
            texts.append(_argument_text(value, ty))     # a literal None / [] as ATen's arguments spell it
            continue
        if value.borrowed:
            texts.append(value.text)                   # helper lists are views too
        elif ty == T.optional(T.INT_LIST):              # an owned list as the at::OptionalIntArrayRef view
            texts.append(f"formulas::runtime::borrow({coerce(value, ty)})")
        else:
            texts.append(coerce(value, ty))
    return Typed(f"helpers::{cpp_name(helper.name)}({', '.join(texts)})", helper.returns)
