"""Abstract values of the ctx-style dataflow and what the analysis knows about torch.

A name holds a *set* of :class:`Value` (one per path that reaches it). What
matters for double backward is whether a tensor is a differentiable function of
the forward's inputs (``TENSOR``): saving one that is not an output drops its
path to the inputs from the graph. Tensors that carry no gradient
(``CONSTANT``: comparisons, indices, integer casts, factories such as
``torch.zeros_like``, dropout masks) are safe to keep, and so is plain Python
data. ``UNKNOWN`` is what the analysis cannot decide; it never produces a
finding.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Iterable


class Role(enum.Enum):
    """What a value is, as far as double backward is concerned."""

    INPUT = "input"          # an argument of forward (``name``), or an element of ``*args``/``inputs``
    OUTPUT = "output"        # setup_context's ``output`` (or an element of it)
    TENSOR = "tensor"        # a tensor computed in the forward from input values
    CONSTANT = "constant"    # a tensor that carries no gradient (mask, indices, factory)
    PLAIN = "plain"          # Python data: numbers, strings, None, metadata, functions
    SEQUENCE = "sequence"    # a tuple/list/dict literal: ``elements`` hold what is inside
    CTX = "ctx"              # the ctx object itself
    SAVED = "saved"          # in backward: a tensor ctx kept, or a view of one
    UNKNOWN = "unknown"      # not decidable statically: never a finding


Values = frozenset["Value"]
Site = tuple  # (line, col offset); in a followed function (line, col offset, path or None, call line, call col)


@dataclass(frozen=True)
class Value:
    """One abstract value; names hold sets of them (one per path)."""

    kind: Role
    site: Site | None = None               # TENSOR/CONSTANT: where it was computed (line, col offset[, path])
    view: bool = False                     # TENSOR/CONSTANT: a view of the tensor computed at ``site``
    view_site: Site | None = None          # TENSOR/CONSTANT view: where the view itself was taken
    maybe: bool = False                    # TENSOR: computed from inputs that may be Python numbers
    name: str | None = None                # INPUT: the parameter
    star: bool = False                     # INPUT/OUTPUT/SAVED: a container of such elements
    tensor: bool = False                   # INPUT: statically known to be a tensor
    elements: tuple[Values, ...] = ()      # SEQUENCE: one set per element
    exact: bool = True                     # SEQUENCE: elements are positional (a literal), not a summary


PLAIN: Values = frozenset({Value(Role.PLAIN)})
UNKNOWN: Values = frozenset({Value(Role.UNKNOWN)})
CTX: Values = frozenset({Value(Role.CTX)})


def union(sets: Iterable[Values]) -> Values:
    """Every value of every set."""
    result: set[Value] = set()
    for values in sets:
        result |= values
    return frozenset(result)


def sequence(elements: Iterable[Values], exact: bool = True) -> Values:
    """A tuple/list holding ``elements`` (``exact``: positions known, as in a literal)."""
    return frozenset({Value(Role.SEQUENCE, elements=tuple(elements), exact=exact)})


def element_of(values: Values, index: int | None = None) -> Values:
    """What ``values[index]`` (or an unpacked / iterated element, ``index=None``) can hold."""
    result: set[Value] = set()
    for value in values:
        if value.kind is Role.SEQUENCE:
            if index is not None and value.exact and -len(value.elements) <= index < len(value.elements):
                result |= value.elements[index]
            else:
                result |= union(value.elements) if value.elements else UNKNOWN
        elif value.kind in (Role.INPUT, Role.OUTPUT, Role.SAVED) and value.star:
            result.add(Value(value.kind, name=value.name))
        elif value.kind in (Role.TENSOR, Role.CONSTANT) and index is not None and value.site is not None:
            # ``a, b = t``: each element is its own view of ``t`` (``a`` returned does not make ``b`` an output)
            result.add(replace(value, view=True, view_site=(*value.site, "element", index)))
        elif value.kind in (Role.TENSOR, Role.CONSTANT, Role.PLAIN):
            result.add(value)                       # an element of a tensor is a view of it
        else:
            result.add(Value(Role.UNKNOWN))
    return frozenset(result)


def flatten(values: Values) -> Values:
    """Every non-container value inside ``values`` (through nested sequences)."""
    result: set[Value] = set()
    for value in values:
        if value.kind is Role.SEQUENCE:
            result |= flatten(union(value.elements))
        else:
            result.add(value)
    return frozenset(result)


def is_tensor(value: Value) -> bool:
    """Statically known to be a tensor (an input only when its use shows it)."""
    return (value.kind in (Role.TENSOR, Role.CONSTANT, Role.OUTPUT) and not value.maybe) or (
        value.kind is Role.INPUT and value.tensor and not value.star)


# --- torch knowledge -------------------------------------------------------------------------

# Namespaces whose functions compute tensors (``torch.exp``, ``F.softmax``, ``torch.ops.aten.mm``).
TENSOR_NAMESPACES = frozenset({
    "torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft", "torch.sparse",
    "torch._C._nn", "torch._C._linalg", "torch._C._special", "torch._C._fft",
    "torch._C._VariableFunctions", "torch.ops.aten", "torch.ops.prims",
})

# torch functions that return Python data, or something that is not a tensor.
PLAIN_TORCH_FUNCTIONS = frozenset({
    "numel", "broadcast_shapes", "result_type", "promote_types", "can_cast", "finfo", "iinfo",
    "device", "dtype", "typename", "compile", "vmap", "no_grad", "enable_grad", "inference_mode",
    "manual_seed", "seed", "initial_seed", "autocast", "equal", "sym_int", "sym_float", "sym_max",
    "sym_min", "sym_not", "sym_ite", "sym_sum", "save", "load", "empty_cache", "cond", "func",
    "jit", "allclose", "layout", "memory_format", "Size", "Generator", "Stream", "Event",
})
PLAIN_TORCH_PREFIXES = ("is_", "are_", "get_", "set_", "use_", "has_", "_")

# Tensors whose values do not depend on the inputs': no gradient flows through them.
FACTORIES = frozenset({
    "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange", "range",
    "linspace", "logspace", "eye", "tensor", "scalar_tensor", "zeros_like", "ones_like",
    "empty_like", "full_like", "rand_like", "randn_like", "randint_like", "empty_strided",
    "bernoulli", "multinomial", "poisson", "tril_indices", "triu_indices", "from_numpy",
    "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "new_empty_strided", "new",
})
# Operators with integer/boolean results or a zero gradient almost everywhere.
NON_DIFFERENTIABLE = frozenset({
    "gt", "ge", "lt", "le", "eq", "ne", "greater", "greater_equal", "less", "less_equal",
    "not_equal", "isnan", "isinf", "isfinite", "isposinf", "isneginf", "isclose", "isreal", "isin",
    "logical_and", "logical_or", "logical_not", "logical_xor", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift", "argmax", "argmin",
    "argsort", "argwhere", "nonzero", "sign", "signbit", "floor", "ceil", "round", "trunc",
    "bucketize", "searchsorted", "histc", "bincount", "count_nonzero", "unique",
    "unique_consecutive", "long", "int", "bool", "byte", "short", "char", "dropout_mask",
    "result_type", "one_hot",
    # index metadata of sparse and nested tensors
    "offsets", "lengths", "indices", "crow_indices", "col_indices", "ccol_indices", "row_indices",
    "_indices", "int_repr", "q_per_channel_zero_points",
})
# In-place methods that overwrite every value with something independent of the inputs.
OVERWRITING_METHODS = frozenset({
    "zero_", "fill_", "bernoulli_", "random_", "uniform_", "normal_", "exponential_",
    "geometric_", "cauchy_", "log_normal_", "resize_", "resize_as_",
})
# Tensor methods that return Python data or metadata.
PLAIN_METHODS = frozenset({
    "size", "dim", "numel", "stride", "ndimension", "nelement", "element_size", "storage_offset",
    "get_device", "data_ptr", "item", "tolist", "numpy", "sizes", "strides", "untyped_storage",
    "storage", "register_hook", "__len__", "type", "retain_grad",
})
PLAIN_ATTRIBUTES = frozenset({
    "shape", "dtype", "device", "ndim", "layout", "requires_grad", "is_cuda", "is_sparse",
    "is_quantized", "is_meta", "is_leaf", "names", "grad_fn", "_version", "itemsize", "nbytes",
    "needs_input_grad",
})
# Methods that only a tensor has (a receiver calling one of them is a tensor).
TENSOR_METHODS = frozenset({
    "exp", "log", "sigmoid", "tanh", "sin", "cos", "clone", "contiguous", "view", "view_as",
    "reshape", "reshape_as", "expand", "expand_as", "t", "transpose", "permute", "unsqueeze",
    "squeeze", "flatten", "unflatten", "mul", "add", "sub", "div", "matmul", "mm", "bmm", "pow",
    "sqrt", "rsqrt", "abs", "neg", "clamp", "clamp_min", "clamp_max", "masked_fill",
    "index_select", "gather", "scatter", "scatter_add", "narrow", "select", "detach", "float",
    "double", "half", "bfloat16", "to", "cpu", "cuda", "new_zeros", "new_ones", "new_empty",
    "new_full", "new_tensor", "size", "dim", "numel", "stride", "is_contiguous", "softmax",
    "log_softmax", "sum", "mean", "norm", "masked_select", "addmm", "baddbmm", "type_as",
    "expand_as", "movedim", "diagonal", "tril", "triu", "relu", "square", "reciprocal", "sign",
    "zero_", "fill_", "copy_", "mul_", "add_", "sub_", "div_", "masked_fill_", "index_add_",
    "scatter_", "scatter_add_", "clamp_", "requires_grad_", "data_ptr", "element_size",
})
# Calls that return a tuple whose later elements are indices: (values, indices).
INDEX_RETURNING = frozenset({"max", "min", "median", "nanmedian", "mode", "sort", "topk",
                             "kthvalue", "cummax", "cummin"})
ALWAYS_TUPLE = frozenset({"mode", "sort", "topk", "kthvalue", "cummax", "cummin"})
# Multi-output linear algebra with a non-differentiable part: per-element kinds.
MIXED_OUTPUTS: dict[str, tuple[bool, ...]] = {      # True: differentiable element
    "slogdet": (False, True), "lu_factor": (True, False), "lu": (False, True, True),
    "lu_factor_ex": (True, False, False), "inv_ex": (True, False), "cholesky_ex": (True, False),
    "solve_ex": (True, False), "frexp": (True, False), "native_dropout": (True, False),
    "_fused_dropout": (True, False),
}
# Integer and boolean dtypes: a cast to one of them carries no gradient.
INTEGER_DTYPES = frozenset({
    "bool", "uint8", "int8", "int16", "int32", "int64", "int", "long", "short", "uint16",
    "uint32", "uint64", "LongTensor", "IntTensor", "BoolTensor", "ByteTensor",
})
# Tensor methods returning a view: the result shares its receiver's storage (same identity here).
VIEW_METHODS = frozenset({
    "view", "view_as", "t", "transpose", "permute", "squeeze", "unsqueeze", "expand", "expand_as",
    "narrow", "select", "diagonal", "as_strided", "unflatten", "movedim", "moveaxis", "unfold",
    "swapaxes", "swapdims",
})
# Methods/functions returning a view (or the same storage) of their receiver/first argument.
ALIASING = frozenset({
    "view", "view_as", "reshape", "reshape_as", "t", "transpose", "permute", "squeeze",
    "unsqueeze", "expand", "expand_as", "narrow", "select", "diagonal", "as_strided", "detach",
    "unflatten", "movedim", "moveaxis", "swapaxes", "swapdims", "split", "chunk", "unbind",
    "real", "imag", "T", "mT", "H", "mH", "data", "flatten", "view_as_real", "view_as_complex",
    "unfold", "contiguous", "to", "type_as", "float", "double", "half", "squeeze_", "unsqueeze_",
    "transpose_", "t_", "tensor_split", "indices", "values",
})
