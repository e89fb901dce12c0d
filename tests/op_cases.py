"""Shared catalogue of test inputs for every differentiable operator of the library.

Every proof tier (reference engine R1/R2/RT, compiled C++ C1/CT, the torch
oracle of ``tests/test_formulas_torch.py``) draws its inputs from here, so they
all check the same shapes: broadcasting on both sides, size-1 dims, size-0
tensors where the op allows, 0-d tensors. Values keep away from kinks, ties and
domain edges (positive inputs for ``log``/``sqrt``, distinct values for
``max``, nothing near 0 for ``relu`` or a divisor), so central finite
differences are meaningful. Everything is deterministic: each operator has its
own seeded :class:`numpy.random.Generator`.

Argument conventions of :attr:`OpCase.args`:

* a ``Tensor`` argument is a ``float64`` :class:`numpy.ndarray` (0-d arrays for
  0-d tensors); a non-differentiable tensor is a ``bool`` array (a ``where``
  condition) or an ``int64`` array (a ``gather`` index);
* a ``Tensor[]`` argument is a ``list`` of arrays;
* everything else is a plain Python value (``int``, ``float``, ``bool``,
  ``list[int]``, ``None``); a ``ScalarType`` is a NumPy dtype such as
  ``numpy.float64``.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class OpCase:
    """One call of one operator: ``op(*args, **kwargs)``."""

    op: str                                  # declared ``name.overload``, e.g. ``"sum.dim_IntList"``
    id: str                                  # readable case name, e.g. ``"broadcast_3x1_1x4"``
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    differentiable: tuple[int, ...] | None = None
    """Positions in ``args`` whose tensors are differentiated. Left out: every
    float array and every list of float arrays."""

    def __post_init__(self) -> None:
        if self.differentiable is None:
            positions = tuple(i for i, arg in enumerate(self.args) if _is_float_tensor_arg(arg))
            object.__setattr__(self, "differentiable", positions)

    @property
    def name(self) -> str:
        """``op[id]``: a unique, readable test id."""
        return f"{self.op}[{self.id}]"


def _is_float_tensor_arg(arg: Any) -> bool:
    if isinstance(arg, np.ndarray):
        return arg.dtype == np.float64
    if isinstance(arg, list) and arg:
        return all(isinstance(a, np.ndarray) and a.dtype == np.float64 for a in arg)
    return False


def torch_op(op: str) -> Callable[..., Any]:
    """The built-in torch operator ``torch.ops.aten.<name>.<overload or default>``, or for the ops of
    :data:`TORCH_EQUIVALENTS` the torch composition standing in for it."""
    import torch

    if op in TORCH_EQUIVALENTS:
        return TORCH_EQUIVALENTS[op]
    name, _, overload = op.partition(".")
    return getattr(getattr(torch.ops.aten, name), overload or "default")


def _hardsigmoid(self: Any) -> Any:
    import torch

    return torch.ops.aten.hardtanh(self + 3.0, 0.0, 6.0) / 6.0


_ONE_SIXTH_FLOAT32 = float(np.float32(1.0) / np.float32(6.0))


def _hardsigmoid_backward(grad_output: Any, self: Any) -> Any:
    import torch

    # torch's kernel multiplies by 1/6 rounded to float32 (3e-8 off 1/6 in float64): the same bits;
    # 0 outside (-3, 3) and at NaN, as its comparisons
    inside = (self > -3.0) & (self < 3.0)
    return torch.where(inside, grad_output * _ONE_SIXTH_FLOAT32, torch.zeros((), dtype=grad_output.dtype))


def _native_dropout_backward(grad_output: Any, mask: Any, scale: float) -> Any:
    return grad_output * mask * scale


def _with_unit_weight(op: str) -> Callable[..., Any]:
    """The built-in layer norm ``op``; for a bias without a weight, its values differentiated as the
    same op with a weight of ones (they differ by an ulp or so: the difference is exact, and adding
    it back gives the built-in's bits)."""
    def call(input: Any, normalized_shape: list[int], weight: Any = None, bias: Any = None, *rest: Any,
             **kwargs: Any) -> Any:
        import torch

        builtin = getattr(torch.ops.aten, op).default
        if weight is None and bias is not None:
            unit = torch.ones(normalized_shape, dtype=input.dtype)
            with_unit = builtin(input, normalized_shape, unit, bias, *rest, **kwargs)
            values = builtin(input.detach(), normalized_shape, None, bias.detach(), *rest, **kwargs)
            if isinstance(with_unit, tuple):
                return (with_unit[0] + (values[0] - with_unit[0]).detach(), *values[1:])
            return with_unit + (values - with_unit).detach()
        return builtin(input, normalized_shape, weight, bias, *rest, **kwargs)
    return call


def _with_builtin_values(op: str, composite: Callable[..., Any]) -> Callable[..., Any]:
    """``composite`` (torch ops whose derivatives torch has) carrying the built-in ``op``'s values
    exactly, as computed without grad mode: the difference, detached, is added back."""
    def call(*args: Any, **kwargs: Any) -> Any:
        import torch

        with_derivatives = composite(*args, **kwargs)
        with torch.no_grad():
            values = getattr(torch.ops.aten, op).default(*args, **kwargs)
        return with_derivatives + (values - with_derivatives).detach()
    return call


def _silu_backward(grad_output: Any, self: Any) -> Any:
    import torch

    s = torch.sigmoid(self)
    return grad_output * (s * (1 + self * (1 - s)))


def _mish_backward(grad_output: Any, self: Any) -> Any:
    import torch

    t = torch.tanh(torch.nn.functional.softplus(self))
    return grad_output * (t + self * torch.sigmoid(self) * (1 - t * t))


def _logit_backward(grad_output: Any, self: Any, eps: float | None = None) -> Any:
    import torch

    low, high = (0.0, 1.0) if eps is None else (eps, 1 - eps)
    outside = (self < low) | (self > high)
    # the slope of an outside entry is never formed (where's unselected 0 / 0 would make its
    # derivative NaN where the kernel's is 0); a NaN input is inside, as the kernel tests it
    inside_only = torch.where(outside, torch.full((), 0.5, dtype=self.dtype), self)
    slope = grad_output / (inside_only * (1 - inside_only))
    return torch.where(outside, torch.full((), float("nan") if eps is None else 0.0, dtype=slope.dtype), slope)


TORCH_EQUIVALENTS: dict[str, Callable[..., Any]] = {
    # Oracles for built-in ops that torch 2.13 cannot differentiate as far as the tiers go: a
    # composition of torch ops with the built-in's values, bit for bit (tests/test_formulas_torch.py
    # compares the formulas' forward, which calls the built-in, with it exactly), whose derivatives
    # torch has. tests/engine/test_kinks.py compares hardsigmoid's first order at its kinks with
    # the built-in itself.
    "hardsigmoid": _hardsigmoid,                          # hardsigmoid_backward has no derivative,
    "hardsigmoid_backward": _hardsigmoid_backward,        # so no double backward of hardsigmoid
    "native_dropout_backward": _native_dropout_backward,  # no forward AD
    # no derivative of these fused kernels (silu's and mish's double backward compose other ops)
    "silu_backward": _with_builtin_values("silu_backward", _silu_backward),
    "mish_backward": _with_builtin_values("mish_backward", _mish_backward),
    "logit_backward": _with_builtin_values("logit_backward", _logit_backward),
    # double backward raises "Expected a proper Tensor but got None" for a bias without a weight:
    # a weight of ones, which changes no value
    "native_layer_norm": _with_unit_weight("native_layer_norm"),
    "layer_norm": _with_unit_weight("layer_norm"),
}


def torch_jvp_op(op: str) -> Callable[..., Any]:
    """The built-in operator whose ``torch.func.jvp`` is the tangent oracle for ``op``: the op
    itself, except where torch's own forward AD of it raises; then the same function through an
    overload whose forward AD works (:data:`_JVP_ORACLES`)."""
    substitute = _JVP_ORACLES.get(op)
    return substitute() if substitute is not None else torch_op(op)


def _norm_over_every_dim(self: Any, p: Any = 2) -> Any:
    import torch

    return torch.ops.aten.norm.ScalarOpt_dim(self, p, [], False)


_JVP_ORACLES: dict[str, Callable[[], Callable[..., Any]]] = {
    # torch 2.13's norm.Scalar forward AD gives the 0-d norm a keepdim-shaped tangent and raises
    # (pytorch/pytorch#191787); norm.ScalarOpt_dim over every dim is the same function
    "norm.Scalar": lambda: _norm_over_every_dim,
    # fused kernels without forward AD: the same function composed of ops with it
    "silu_backward": lambda: _silu_backward,
    "mish_backward": lambda: _mish_backward,
    "logit_backward": lambda: _logit_backward,
}


def torch_value(value: Any, requires_grad: bool = False) -> Any:
    """``value`` of an :class:`OpCase` as torch sees it: arrays become fresh contiguous
    tensors (float ones optionally requiring grad), NumPy dtypes become torch dtypes."""
    import torch

    if isinstance(value, np.ndarray):
        source = torch.from_numpy(value.copy(order="C"))
        tensor = torch.empty(source.shape, dtype=source.dtype).copy_(source)   # default strides, even when size-0
        return tensor.requires_grad_() if requires_grad and tensor.is_floating_point() else tensor
    if isinstance(value, list):
        return [torch_value(v, requires_grad) for v in value]
    if isinstance(value, type) and issubclass(value, np.generic):
        return getattr(torch, np.dtype(value).name)
    return value


def torch_args(case: OpCase, requires_grad: bool = True) -> tuple[list[Any], dict[str, Any]]:
    """``case.args`` and ``case.kwargs`` converted by :func:`torch_value`; the
    differentiated positions require grad when ``requires_grad``."""
    args = [torch_value(arg, requires_grad and i in case.differentiable) for i, arg in enumerate(case.args)]
    kwargs = {key: torch_value(value) for key, value in case.kwargs.items()}
    return args, kwargs


def differentiable_view(case: OpCase, fn):
    """``fn`` as a function of the differentiated tensors only, plus those tensors."""
    args, kwargs = torch_args(case)
    leaves: list = []
    slots: list[tuple[int, int | None]] = []
    for position in case.differentiable:
        arg = args[position]
        if isinstance(arg, list):
            for index, tensor in enumerate(arg):
                leaves.append(tensor)
                slots.append((position, index))
        else:
            leaves.append(arg)
            slots.append((position, None))

    def call(*tensors):
        filled = [list(a) if isinstance(a, list) else a for a in args]
        for (position, index), tensor in zip(slots, tensors):
            if index is None:
                filled[position] = tensor
            else:
                filled[position][index] = tensor
        out = fn(*filled, **kwargs)
        if isinstance(out, (tuple, list)):   # every floating output (max.dim's indices are not; a Tensor[]'s parts)
            return tuple(o for o in out if o.is_floating_point())
        return out

    return call, leaves


def cases(op: str) -> list[OpCase]:
    """Every case of ``op`` (``name.overload``); an empty list for an op without cases."""
    return [case for case in ALL_CASES if case.op == op]


def ops() -> list[str]:
    """Every operator that has cases, in catalogue order."""
    return list(dict.fromkeys(case.op for case in ALL_CASES))


# ---------------------------------------------------------------------------
# value generators

def _rng(op: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(op.encode()))


def _normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return np.asarray(rng.standard_normal(shape), dtype=np.float64)


def _positive(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """In [0.5, 2): safe for ``log``, ``sqrt`` and fractional powers."""
    return np.asarray(rng.uniform(0.5, 2.0, shape), dtype=np.float64)


def _away_from_zero(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """|x| in [0.3, 1.5), random sign: safe for ``relu`` and divisors."""
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    return np.asarray(sign * rng.uniform(0.3, 1.5, shape), dtype=np.float64)


def _distinct(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values at least 0.2 apart from each other: no ties for ``max``."""
    count = int(np.prod(shape, dtype=np.int64))
    values = rng.permutation(count) * 0.25 + rng.uniform(0.0, 0.05, count)
    return np.asarray((values - values.mean() if count else values).reshape(shape), dtype=np.float64)


def _mask(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return np.asarray(rng.random(shape) < 0.5, dtype=np.bool_)


def _index(rng: np.random.Generator, shape: tuple[int, ...], bound: int) -> np.ndarray:
    return np.asarray(rng.integers(0, bound, shape), dtype=np.int64)


def _shape_id(*shapes: tuple[int, ...]) -> str:
    return "_".join("x".join(map(str, s)) if s else "scalar" for s in shapes)


# ---------------------------------------------------------------------------
# the catalogue

UNARY_SHAPES: tuple[tuple[int, ...], ...] = ((), (5,), (2, 3), (1, 4, 1), (0, 3))
BINARY_SHAPES: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = (
    ((2, 3), (2, 3)),
    ((3, 1), (1, 4)),          # both sides broadcast
    ((2, 3, 4), (4,)),         # other gets leading dims
    ((3,), (2, 1, 3)),         # self gets leading dims
    ((), (2, 3)),              # 0-d self
    ((2, 3), ()),              # 0-d other
    ((2, 1, 3), (4, 1)),
    ((0, 3), (1, 3)),          # size-0
    ((), ()),
)
UNARY_DOMAINS: dict[str, Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]] = {
    "neg": _normal, "exp": _normal, "log": _positive, "sin": _normal, "cos": _normal,
    "tanh": _normal, "sigmoid": _normal, "sqrt": _positive, "relu": _away_from_zero,
}


def _unary_cases() -> list[OpCase]:
    out = []
    for op, values in UNARY_DOMAINS.items():
        rng = _rng(op)
        out += [OpCase(op, _shape_id(shape), (values(rng, shape),)) for shape in UNARY_SHAPES]
    return out


def _pow_cases() -> list[OpCase]:
    op = "pow.Tensor_Scalar"
    rng = _rng(op)
    out = []
    for exponent in (2, 3, 1, 0, -1):
        for shape in ((2, 3), (), (0, 2)):
            out.append(OpCase(op, f"{_shape_id(shape)}_exp{exponent}", (_away_from_zero(rng, shape), exponent)))
    for exponent in (0.5, -1.5, 2.5, 0.0):      # fractional powers need a positive base
        for shape in ((3, 2), (1,)):
            out.append(OpCase(op, f"{_shape_id(shape)}_exp{exponent}", (_positive(rng, shape), exponent)))
    return out


def _binary_cases() -> list[OpCase]:
    out = []
    for op in ("add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor"):
        rng = _rng(op)
        other_values = _away_from_zero if op == "div.Tensor" else _normal
        for left, right in BINARY_SHAPES:
            out.append(OpCase(op, _shape_id(left, right), (_normal(rng, left), other_values(rng, right))))
        if op in ("add.Tensor", "sub.Tensor"):
            for alpha in (2.5, -1, 0):
                out.append(OpCase(op, f"3x1_1x4_alpha{alpha}", (_normal(rng, (3, 1)), _normal(rng, (1, 4))),
                                  {"alpha": alpha}))
    return out


def _scalar_binary_cases() -> list[OpCase]:
    out = []
    for op, scalars in (("mul.Scalar", (2.5, -3, 0.0)), ("div.Scalar", (2.5, -4))):
        rng = _rng(op)
        for scalar in scalars:
            for shape in ((2, 3), (), (0, 2)):
                out.append(OpCase(op, f"{_shape_id(shape)}_by{scalar}", (_normal(rng, shape), scalar)))
    return out


def _reduction_cases() -> list[OpCase]:
    out = []
    rng = _rng("sum")
    for shape in ((), (4,), (2, 3), (2, 1, 3), (0, 3)):
        out.append(OpCase("sum", _shape_id(shape), (_normal(rng, shape),)))

    dim_reductions: tuple[tuple[tuple[int, ...], list[int] | None, bool], ...] = (
        ((2, 3, 4), [1], False),
        ((2, 3, 4), [0, 2], True),
        ((2, 3, 4), [-1], False),
        ((2, 3, 4), [2, -3], False),     # unsorted, one negative
        ((2, 3, 4), None, False),        # None: every dim
        ((2, 3, 4), None, True),
        ((2, 1, 3), [1], False),         # reduce a size-1 dim
        ((5,), [0], True),
        ((), [0], False),                # 0-d: dim 0 and -1 are allowed
        ((), [-1], True),
        ((0, 3), [1], False),            # size-0, non-empty reduced dim
    )
    for op in ("sum.dim_IntList", "mean.dim"):
        rng = _rng(op)
        for shape, dim, keepdim in dim_reductions:
            dim_id = "all" if dim is None else "_".join(map(str, dim))
            out.append(OpCase(op, f"{_shape_id(shape)}_dim{dim_id}_keep{int(keepdim)}",
                              (_normal(rng, shape), dim, keepdim)))
    rng = _rng("sum.dim_IntList")
    out.append(OpCase("sum.dim_IntList", "0x3_dim0_keep0", (_normal(rng, (0, 3)), [0], False)))
    out.append(OpCase("sum.dim_IntList", "2x3_dimempty_keep0", (_normal(rng, (2, 3)), [], False)))

    op = "var_mean.dim"
    rng = _rng(op)
    for shape, dim, unbiased, keepdim in (((3, 4), [1], True, False), ((3, 4), [0, 1], True, True),
                                          ((3, 4), None, False, False), ((2, 3, 4), [-1, 0], True, True),
                                          ((5,), [0], False, False), ((), None, False, False),
                                          ((2, 1), [1], False, True)):   # size-0: torch warns (0/0 dof)
        dim_id = "all" if dim is None else "_".join(map(str, dim))
        out.append(OpCase(op, f"{_shape_id(shape)}_dim{dim_id}_unbiased{int(unbiased)}_keep{int(keepdim)}",
                          (_normal(rng, shape), dim, unbiased, keepdim)))

    op = "max.dim"
    rng = _rng(op)
    for shape, dim, keepdim in (((3, 4), 1, False), ((3, 4), -1, True), ((3, 4), 0, False),
                                ((2, 3, 4), 1, True), ((1, 5), 0, False), ((4,), 0, False),
                                ((), 0, False), ((), -1, True), ((0, 3), 1, False)):
        out.append(OpCase(op, f"{_shape_id(shape)}_dim{dim}_keep{int(keepdim)}",
                          (_distinct(rng, shape), dim, keepdim)))
    return out


def _linalg_cases() -> list[OpCase]:
    out = []
    rng = _rng("mm")
    for left, right in (((2, 3), (3, 4)), ((1, 1), (1, 1)), ((3, 1), (1, 3)), ((0, 3), (3, 2)), ((2, 0), (0, 3))):
        out.append(OpCase("mm", _shape_id(left, right), (_normal(rng, left), _normal(rng, right))))

    rng = _rng("addmm")
    for bias, (n, k, p), kwargs in (
        ((2, 4), (2, 3, 4), {}),
        ((4,), (2, 3, 4), {}),                        # bias broadcast over rows
        ((2, 1), (2, 3, 4), {"beta": 0.5}),           # bias broadcast over columns
        ((), (2, 3, 4), {"alpha": -2.0}),
        ((1, 4), (2, 3, 4), {"beta": 0.0, "alpha": 1.5}),
        ((0, 2), (0, 3, 2), {}),
        ((2, 3), (2, 0, 3), {"beta": 2}),             # empty inner dimension
    ):
        args = (_normal(rng, bias), _normal(rng, (n, k)), _normal(rng, (k, p)))
        scalars = "".join(f"_{key}{value}" for key, value in kwargs.items())
        out.append(OpCase("addmm", f"{_shape_id(bias, (n, k), (k, p))}{scalars}", args, kwargs))

    rng = _rng("t")
    out += [OpCase("t", _shape_id(shape), (_normal(rng, shape),)) for shape in ((2, 3), (4,), (), (0, 2))]

    # small norms (the series alone) and larger ones (scaled and squared), batched, 1x1 and empty
    op = "linalg_matrix_exp"
    rng = _rng(op)
    for shape, scale in (((3, 3), 0.3), ((3, 3), 1.5), ((2, 3, 3), 0.8), ((1, 1), 2.0), ((0, 0), 1.0)):
        out.append(OpCase(op, f"{_shape_id(shape)}_scale{scale}", (_normal(rng, shape) * scale,)))

    # a full matrix (the solve reads one triangle: the other gets a zero gradient) whose diagonal is
    # kept away from 0, so the triangle is well conditioned
    op = "linalg_solve_triangular"
    rng = _rng(op)
    for a_shape, b_shape, kwargs in (
        ((3, 3), (3, 2), {"upper": True}),
        ((3, 3), (3, 2), {"upper": False}),
        ((3, 3), (2, 3), {"upper": True, "left": False}),
        ((3, 3), (4, 3), {"upper": False, "left": False, "unitriangular": True}),
        ((3, 3), (3, 1), {"upper": True, "unitriangular": True}),
        ((2, 3, 3), (3, 2), {"upper": False}),              # A's batch broadcast over B
        ((3, 3), (2, 3, 2), {"upper": True}),               # B's batch broadcast over A
        ((1, 1), (1, 3), {"upper": False}),
    ):
        a = _normal(rng, a_shape) * 0.5 + 3.0 * np.eye(a_shape[-1])
        flags = "".join(f"_{key}{int(value)}" for key, value in kwargs.items())
        out.append(OpCase(op, f"{_shape_id(a_shape, b_shape)}{flags}", (a, _normal(rng, b_shape)), kwargs))
    return out


def _shape_cases() -> list[OpCase]:
    out = []
    for op in ("view", "reshape"):
        rng = _rng(op)
        for shape, size in (((2, 3, 4), [6, 4]), ((2, 3, 4), [-1]), ((2, 3, 4), [4, -1, 2]),
                            ((), [1]), ((1,), []), ((0, 3), [3, 0]), ((2, 3), [3, 1, 2])):
            out.append(OpCase(op, f"{_shape_id(shape)}_to_{'_'.join(map(str, size)) or 'scalar'}",
                              (_normal(rng, shape), size)))

    rng = _rng("permute")
    for shape, dims in (((2, 3, 4), [2, 0, 1]), ((2, 3, 4), [-1, 0, 1]), ((5,), [0]), ((), []),
                        ((0, 2, 1), [1, 2, 0]), ((2, 3), [1, 0])):
        out.append(OpCase("permute", f"{_shape_id(shape)}_{'_'.join(map(str, dims)) or 'none'}",
                          (_normal(rng, shape), dims)))

    rng = _rng("expand")
    for shape, size in (((3, 1), [3, 4]), ((1,), [2, 3]), ((), [2, 2]), ((2, 1, 3), [-1, 4, -1]),
                        ((1, 3), [0, 3]), ((3,), [2, 1, 3]), ((2, 3), [2, 3])):
        out.append(OpCase("expand", f"{_shape_id(shape)}_to_{'_'.join(map(str, size))}",
                          (_normal(rng, shape), size)))

    rng = _rng("expand_as")
    for shape, target in (((3, 1), (3, 4)), ((1,), (2, 3)), ((), (2, 2)), ((1, 3), (0, 3)), ((3,), (2, 1, 3)),
                          ((2, 3), (2, 3))):
        out.append(OpCase("expand_as", f"{_shape_id(shape)}_as_{_shape_id(target)}",
                          (_normal(rng, shape), _normal(rng, target))))

    rng = _rng("unsqueeze")
    for shape, dim in (((2, 3), 0), ((2, 3), 2), ((2, 3), -1), ((2, 3), -3), ((), 0), ((), -1), ((0, 2), 1)):
        out.append(OpCase("unsqueeze", f"{_shape_id(shape)}_dim{dim}", (_normal(rng, shape), dim)))

    rng = _rng("narrow")
    for shape, dim, start, length in (((5, 3), 0, 1, 3), ((5, 3), -1, 0, 2), ((5, 3), 1, 2, 1),
                                      ((4,), 0, 2, 2), ((4, 2), 0, 1, 0), ((2, 0), 0, 0, 2),
                                      ((5, 3), 0, -3, 2)):    # a negative start counts from the end
        out.append(OpCase("narrow", f"{_shape_id(shape)}_dim{dim}_start{start}_len{length}",
                          (_normal(rng, shape), dim, start, length)))

    rng = _rng("cat")
    for shapes, dim in ((((2, 3), (1, 3), (4, 3)), 0), (((2, 1), (2, 3)), -1), (((3,), (2,)), 0),
                        (((2, 0), (2, 3)), 1), (((2, 2),), 0), (((2, 1, 2), (2, 3, 2), (2, 2, 2)), 1),
                        (((0, 2), (3, 2)), 0),
                        (((0,), (2, 3), (2, 1)), 1)):        # a legacy 1-d empty input, skipped by cat
        out.append(OpCase("cat", f"{_shape_id(*shapes)}_dim{dim}", ([_normal(rng, s) for s in shapes], dim)))
    return out


def _softmax_cases() -> list[OpCase]:
    out = []
    for op in ("_softmax", "_log_softmax"):
        rng = _rng(op)
        for shape, dim in (((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((5,), 0), ((), 0),
                           ((1, 3), 0), ((2, 0), 0)):
            out.append(OpCase(op, f"{_shape_id(shape)}_dim{dim}", (_normal(rng, shape), dim, False)))
    return out


def _selection_cases() -> list[OpCase]:
    out = []
    rng = _rng("where.self")
    for cond, left, right in (((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), (3, 4)), ((2, 3), (), (3,)),
                              ((), (2, 2), (2, 2)), ((4,), (2, 1), ()), ((0, 3), (1, 3), (0, 1))):
        out.append(OpCase("where.self", _shape_id(cond, left, right),
                          (_mask(rng, cond), _normal(rng, left), _normal(rng, right))))
    for cond, tensor, number in (((3, 4), (3, 4), 0), ((3, 1), (1, 4), 2.5), ((), (2, 2), -1.5), ((0, 3), (1, 3), 0)):
        out.append(OpCase("where.ScalarSelf", f"{_shape_id(cond, tensor)}_self{number}",
                          (_mask(rng, cond), number, _normal(rng, tensor))))
        out.append(OpCase("where.ScalarOther", f"{_shape_id(cond, tensor)}_other{number}",
                          (_mask(rng, cond), _normal(rng, tensor), number)))

    rng = _rng("gather")
    for shape, dim, index_shape in (((3, 4), 1, (3, 2)), ((3, 4), 0, (2, 4)), ((3, 4), -1, (2, 5)),
                                    ((5,), 0, (7,)), ((3, 4), 1, (3, 0))):
        bound = shape[dim]
        out.append(OpCase("gather", f"{_shape_id(shape)}_dim{dim}_index{_shape_id(index_shape)}",
                          (_normal(rng, shape), dim, _index(rng, index_shape, bound))))

    rng = _rng("scatter_add")
    for shape, dim, index_shape in (((3, 4), 1, (3, 2)), ((3, 4), 0, (5, 4)), ((3, 4), -1, (2, 6)),
                                    ((5,), 0, (3,)), ((3, 4), 0, (0, 4))):
        bound = shape[dim]
        out.append(OpCase("scatter_add", f"{_shape_id(shape)}_dim{dim}_index{_shape_id(index_shape)}",
                          (_normal(rng, shape), dim, _index(rng, index_shape, bound),
                           _normal(rng, index_shape))))

    rng = _rng("_to_copy")
    for shape, kwargs in (((2, 3), {}), ((), {"dtype": np.float64}), ((0, 2), {})):
        out.append(OpCase("_to_copy", f"{_shape_id(shape)}{'_dtype' if kwargs else ''}",
                          (_normal(rng, shape),), kwargs))
    return out


def _fused_backward_cases() -> list[OpCase]:
    """ATen's fused backward ops (``formulas/backward_ops.py``): a gradient and a saved
    output (or input) of the op they differentiate."""
    out = []
    for op, output_of in (("tanh_backward", np.tanh), ("sigmoid_backward", lambda x: 1 / (1 + np.exp(-x)))):
        rng = _rng(op)
        for left, right in (((2, 3), (2, 3)), ((), ()), ((1, 4, 1), (1, 4, 1)), ((0, 3), (0, 3)),
                            ((2, 3), (3,)), ((3,), (2, 3))):
            out.append(OpCase(op, _shape_id(left, right), (_normal(rng, left), np.asarray(output_of(_normal(rng, right))))))
    rng = _rng("threshold_backward")
    for shape, threshold in (((2, 3), 0), ((), 0), ((0, 2), 0), ((4,), 0.5), ((2, 1, 3), -1.0)):
        values = np.asarray(_away_from_zero(rng, shape) + threshold)
        out.append(OpCase("threshold_backward", f"{_shape_id(shape)}_threshold{threshold}",
                          (_normal(rng, shape), values, threshold)))
    rng = _rng("hardtanh_backward")
    for shape, low, high in (((2, 3), -1, 1), ((), -1, 1), ((0, 2), -1, 1), ((4,), 0, 6), ((2, 1, 3), -0.5, 2.0)):
        out.append(OpCase("hardtanh_backward", f"{_shape_id(shape)}_{low}_{high}",
                          (_normal(rng, shape), _avoiding(low, high, low=low - 2, high=high + 2)(rng, shape), low, high)))
    rng = _rng("leaky_relu_backward")
    for shape, slope, self_is_result in (((2, 3), 0.01, False), ((), 0.2, False), ((0, 2), 0.01, False),
                                         ((4,), -0.5, False), ((2, 1, 3), 0.3, True)):
        out.append(OpCase("leaky_relu_backward", f"{_shape_id(shape)}_slope{slope}_result{int(self_is_result)}",
                          (_normal(rng, shape), _away_from_zero(rng, shape), slope, self_is_result)))
    for op in ("softshrink_backward", "hardshrink_backward"):
        rng = _rng(op)
        for shape, lambd in (((2, 3), 0.5), ((), 0.5), ((0, 2), 0.5), ((4,), 1.5), ((2, 1, 3), 0)):
            out.append(OpCase(op, f"{_shape_id(shape)}_lambd{lambd}",
                              (_normal(rng, shape), _avoiding(-lambd, lambd)(rng, shape), lambd)))
    rng = _rng("hardswish_backward")
    for shape in ((2, 3), (), (0, 2), (4,), (2, 1, 3)):
        out.append(OpCase("hardswish_backward", _shape_id(shape), (_normal(rng, shape), _avoiding(-3.0, 3.0)(rng, shape))))
    rng = _rng("elu_backward")
    for shape, alpha, scale, input_scale, is_result in (((2, 3), 1.0, 1.0, 1.0, False), ((), 0.5, 2.0, 1.5, False),
                                                        ((0, 2), 1.0, 1.0, 1.0, False), ((4,), 0.7, 1, 1 / 0.7, False),
                                                        ((2, 1, 3), 1.5, 1.2, 0.8, True)):
        x = _away_from_zero(rng, shape)
        self_or_result = np.where(x > 0, x * scale, np.expm1(x * input_scale) * alpha * scale) if is_result else x
        out.append(OpCase("elu_backward", f"{_shape_id(shape)}_{alpha}_{scale}_{input_scale:.3g}_result{int(is_result)}",
                          (_normal(rng, shape), alpha, scale, input_scale, is_result, np.asarray(self_or_result)),
                          differentiable=(0, 5)))
    rng = _rng("gelu_backward")
    for shape, kwargs in (((2, 3), {}), ((), {}), ((0, 2), {}), ((4,), {"approximate": "tanh"}),
                          ((2, 1, 3), {"approximate": "tanh"})):
        out.append(OpCase("gelu_backward", f"{_shape_id(shape)}{''.join(f'_{v}' for v in kwargs.values())}",
                          (_normal(rng, shape), _normal(rng, shape)), kwargs))
    rng = _rng("softplus_backward")
    for shape, beta, threshold in (((2, 3), 1, 20), ((), 2.0, 1.5), ((0, 2), 1, 20), ((4,), 0.5, 1.0),
                                   ((2, 1, 3), 2.0, 1.5)):
        out.append(OpCase("softplus_backward", f"{_shape_id(shape)}_beta{beta}_threshold{threshold}",
                          (_normal(rng, shape), _avoiding(threshold / beta)(rng, shape), beta, threshold)))
    for op, forward in (("_softmax_backward_data", "_softmax"), ("_log_softmax_backward_data", "_log_softmax")):
        rng = _rng(op)
        for shape, dim in (((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((5,), 0), ((), 0), ((2, 0), 0)):
            x = _normal(rng, shape)
            shifted = x - (x.max(axis=dim, keepdims=True) if x.size else 0)
            log_sum = np.log(np.exp(shifted).sum(axis=dim, keepdims=True))
            output = np.exp(shifted - log_sum) if forward == "_softmax" else shifted - log_sum
            out.append(OpCase(op, f"{_shape_id(shape)}_dim{dim}", (_normal(rng, shape), np.asarray(output), dim, np.float64)))
    op = "value_selecting_reduction_backward"
    rng = _rng(op)
    for sizes, dim, keepdim in (((3, 4), 1, False), ((3, 4), 1, True), ((3, 4), -2, False), ((2, 3, 2), 2, False),
                                ((), 0, False), ((0, 3), 1, False)):
        reduced = tuple(1 if d == dim % max(len(sizes), 1) else s for d, s in enumerate(sizes)) if keepdim else \
            tuple(s for d, s in enumerate(sizes) if d != dim % max(len(sizes), 1))
        bound = sizes[dim] if sizes else 1
        out.append(OpCase(op, f"{_shape_id(sizes)}_dim{dim}{'_keepdim' if keepdim else ''}",
                          (_normal(rng, reduced), dim, _index(rng, reduced, bound), list(sizes), keepdim)))
    rng = _rng("gather_backward")
    for shape, dim, index_shape in (((3, 4), 1, (3, 2)), ((3, 4), 0, (5, 4)), ((3, 4), -1, (2, 6)),
                                    ((5,), 0, (3,)), ((3, 4), 0, (0, 4))):
        out.append(OpCase("gather_backward", f"{_shape_id(shape)}_dim{dim}_index{_shape_id(index_shape)}",
                          (_normal(rng, index_shape), _normal(rng, shape), dim, _index(rng, index_shape, shape[dim]),
                           False), differentiable=(0,)))
    for op in ("silu_backward", "mish_backward"):
        rng = _rng(op)
        for left, right in (((3,), (3,)), ((), ()), ((2,), (2, 2))):
            out.append(OpCase(op, _shape_id(left, right), (_normal(rng, left), _normal(rng, right))))
    rng = _rng("logit_backward")
    for shape, eps in (((3,), None), ((), None), ((5,), 0.2)):
        # inside (0, 1), away from eps and 1 - eps (the gradient is 0 beyond them)
        values = _uniform(0.1, 0.9)(rng, shape) if eps is None else _avoiding(eps, 1 - eps, low=0.08, high=0.92,
                                                                               gap=0.05)(rng, shape)
        out.append(OpCase("logit_backward", f"{_shape_id(shape)}_eps{eps}", (_normal(rng, shape), values),
                          {} if eps is None else {"eps": eps}))
    rng = _rng("trace_backward")
    for sizes in ((2, 3), (0, 3)):
        out.append(OpCase("trace_backward", _shape_id(sizes), (_normal(rng, ()), list(sizes))))
    rng = _rng("masked_select_backward")
    for shape, mask_shape in (((2, 3), (2, 3)), ((3,), (2, 3))):
        mask = _mask(rng, mask_shape)
        count = int(np.broadcast_to(mask, np.broadcast_shapes(shape, mask_shape)).sum())
        out.append(OpCase("masked_select_backward", _shape_id(shape, mask_shape),
                          (_normal(rng, (count,)), _normal(rng, shape), mask), differentiable=(0,)))
    rng = _rng("cummaxmin_backward")
    # (an empty input is returned as it is by torch, no function of grad: not a case)
    for shape, dim in (((2, 3), 1), ((4,), -1), ((), 0)):
        bound = shape[dim] if shape else 1
        out.append(OpCase("cummaxmin_backward", f"{_shape_id(shape)}_dim{dim}",
                          (_normal(rng, shape), _normal(rng, shape), _index(rng, shape, bound), dim),
                          differentiable=(0,)))
    return out


# ---------------------------------------------------------------------------
# more matrix products (formulas/linalg.py)

def _vector_product_cases() -> list[OpCase]:
    out = []
    rng = _rng("bmm")
    for left, right in (((2, 3, 4), (2, 4, 5)), ((1, 1, 1), (1, 1, 1)), ((3, 2, 1), (3, 1, 2)),
                        ((0, 2, 3), (0, 3, 2)), ((2, 0, 3), (2, 3, 2)), ((2, 2, 0), (2, 0, 3))):
        out.append(OpCase("bmm", _shape_id(left, right), (_normal(rng, left), _normal(rng, right))))

    rng = _rng("dot")
    for n in (5, 1, 0):
        out.append(OpCase("dot", _shape_id((n,), (n,)), (_normal(rng, (n,)), _normal(rng, (n,)))))

    rng = _rng("mv")
    for rows, columns in ((3, 4), (1, 1), (0, 2), (2, 0)):
        out.append(OpCase("mv", _shape_id((rows, columns), (columns,)),
                          (_normal(rng, (rows, columns)), _normal(rng, (columns,)))))

    rng = _rng("outer")
    for left, right in ((3, 4), (1, 1), (0, 2), (2, 1)):
        out.append(OpCase("outer", _shape_id((left,), (right,)), (_normal(rng, (left,)), _normal(rng, (right,)))))

    rng = _rng("ger")
    for left, right in ((3, 4), (1, 1), (0, 2), (2, 1)):
        out.append(OpCase("ger", _shape_id((left,), (right,)), (_normal(rng, (left,)), _normal(rng, (right,)))))

    rng = _rng("matmul")
    for left, right in (((3,), (3,)),                    # dot
                        ((2, 3), (3,)),                  # mv
                        ((3,), (3, 4)),                  # vector times matrix
                        ((2, 3), (3, 4)),                # mm
                        ((2, 2, 3), (3,)),               # batched matrix times vector
                        ((3,), (2, 3, 4)),               # vector times batched matrix
                        ((2, 2, 3), (3, 4)),             # batch on the left only
                        ((3, 4), (2, 4, 2)),             # batch on the right only
                        ((2, 1, 2, 3), (1, 3, 3, 2)),    # broadcast batch dims
                        ((1, 2, 3), (4, 3, 2)),
                        ((0, 2, 3), (3, 2)),             # size-0 batch
                        ((2, 0), (0, 3))):               # empty inner dim
        out.append(OpCase("matmul", _shape_id(left, right), (_normal(rng, left), _normal(rng, right))))

    rng = _rng("addmv")
    for bias, (rows, columns), kwargs in (((3,), (3, 4), {}), ((1,), (3, 4), {"beta": 0.5}), ((), (2, 3), {"alpha": -2.0}),
                                          ((2,), (2, 3), {"beta": 0.0, "alpha": 1.5}), ((0,), (0, 2), {}),
                                          ((2,), (2, 0), {"beta": 2})):
        scalars = "".join(f"_{key}{value}" for key, value in kwargs.items())
        out.append(OpCase("addmv", f"{_shape_id(bias, (rows, columns), (columns,))}{scalars}",
                          (_normal(rng, bias), _normal(rng, (rows, columns)), _normal(rng, (columns,))), kwargs))

    rng = _rng("addr")
    for bias, (rows, columns), kwargs in (((3, 4), (3, 4), {}), ((4,), (3, 4), {"beta": 0.5}),
                                          ((3, 1), (3, 4), {"alpha": -2.0}), ((), (2, 3), {"beta": 0.0}),
                                          ((0, 2), (0, 2), {})):
        scalars = "".join(f"_{key}{value}" for key, value in kwargs.items())
        out.append(OpCase("addr", f"{_shape_id(bias, (rows,), (columns,))}{scalars}",
                          (_normal(rng, bias), _normal(rng, (rows,)), _normal(rng, (columns,))), kwargs))

    for op in ("baddbmm", "addbmm"):
        rng = _rng(op)
        batched = op == "baddbmm"
        for (b, n, k, p), bias, kwargs in (((2, 3, 4, 2), (2, 3, 2) if batched else (3, 2), {}),
                                           ((2, 3, 4, 2), (3, 2) if batched else (2,), {"beta": 0.5}),
                                           ((2, 3, 4, 2), (1, 1, 2) if batched else (3, 1), {"alpha": -2.0}),
                                           ((1, 2, 2, 2), (), {"beta": 0.0, "alpha": 1.5}),
                                           ((0, 2, 3, 2), (0, 2, 2) if batched else (2, 2), {}),
                                           ((2, 2, 0, 3), (2, 2, 3) if batched else (2, 3), {"beta": 2})):
            scalars = "".join(f"_{key}{value}" for key, value in kwargs.items())
            out.append(OpCase(op, f"{_shape_id(bias, (b, n, k), (b, k, p))}{scalars}",
                              (_normal(rng, bias), _normal(rng, (b, n, k)), _normal(rng, (b, k, p))), kwargs))
    return out


# ---------------------------------------------------------------------------
# neural-network functions (formulas/layers.py, softmax.py, losses.py)

def _probabilities(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """In [0.1, 0.9): inside (0, 1), away from the edges of the binary cross-entropy."""
    return np.asarray(rng.uniform(0.1, 0.9, shape), dtype=np.float64)


def _nn_cases() -> list[OpCase]:
    out = []
    rng = _rng("linear")
    for input_shape, (out_features, in_features), with_bias in (((2, 3), (4, 3), True), ((3,), (2, 3), True),
                                                               ((2, 2, 3), (4, 3), False), ((0, 3), (2, 3), True),
                                                               ((1, 1), (1, 1), True), ((2, 3), (0, 3), True)):
        bias = _normal(rng, (out_features,)) if with_bias else None
        out.append(OpCase("linear", f"{_shape_id(input_shape, (out_features, in_features))}{'_bias' if with_bias else ''}",
                          (_normal(rng, input_shape), _normal(rng, (out_features, in_features)), bias)))
    rng = _rng("linear_vector_weight")         # a 1-d weight: input @ weight (torch allows no bias then)
    for input_shape in ((2, 3), (2, 2, 3), (3,)):
        out.append(OpCase("linear", f"{_shape_id(input_shape, (3,))}_vector_weight",
                          (_normal(rng, input_shape), _normal(rng, (3,)), None)))

    for op in ("softmax.int", "log_softmax.int"):
        rng = _rng(op)
        for shape, dim, dtype in (((3, 4), 1, None), ((3, 4), 0, np.float64), ((2, 3, 4), -1, None), ((5,), 0, None),
                                  ((), 0, None), ((2, 0), 0, None)):
            out.append(OpCase(op, f"{_shape_id(shape)}_dim{dim}{'_dtype' if dtype else ''}", (_normal(rng, shape), dim, dtype)))

    for op in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"):
        rng = _rng(op)
        extra: tuple[Any, ...] = ()
        for (left, right), reduction in ((((2, 3), (2, 3)), 1), (((2, 3), (2, 3)), 0), (((2, 3), (2, 3)), 2),
                                         (((4,), (4,)), 1), (((), ()), 1), (((0, 2), (0, 2)), 2), (((0, 2), (0, 2)), 0)):
            target = _normal(rng, right)
            # differences away from 0 (the L1 kink) and from +-beta / +-delta (the quadratic-linear seam)
            self_values = np.asarray(target + _away_from_zero(rng, left) * 1.9)
            if op in ("smooth_l1_loss", "huber_loss"):
                extra = (0.8,)
            out.append(OpCase(op, f"{_shape_id(left, right)}_reduction{reduction}", (self_values, target, reduction) + extra))
        if op == "smooth_l1_loss":     # beta 0 is the L1 loss
            target = _normal(rng, (3,))
            out.append(OpCase(op, "3_3_beta0", (np.asarray(target + _away_from_zero(rng, (3,))), target, 1, 0.0)))

    rng = _rng("binary_cross_entropy")
    for shape, with_weight, reduction in (((2, 3), False, 1), ((2, 3), True, 0), ((4,), True, 2), ((), False, 1),
                                          ((0, 2), False, 2)):
        weight = _positive(rng, shape[-1:]) if with_weight else None
        out.append(OpCase("binary_cross_entropy", f"{_shape_id(shape)}_reduction{reduction}{'_weight' if with_weight else ''}",
                          (_probabilities(rng, shape), _probabilities(rng, shape), weight, reduction), differentiable=(0, 1)))

    rng = _rng("binary_cross_entropy_with_logits")
    for shape, with_weight, with_pos, reduction in (((2, 3), False, False, 1), ((2, 3), True, True, 0),
                                                    ((4,), False, True, 2), ((2, 3), True, False, 1),
                                                    ((), False, False, 1), ((0, 2), False, False, 2)):
        weight = _positive(rng, shape[-1:]) if with_weight else None
        pos_weight = _positive(rng, shape[-1:]) if with_pos else None
        out.append(OpCase("binary_cross_entropy_with_logits",
                          f"{_shape_id(shape)}_reduction{reduction}{'_weight' if with_weight else ''}{'_pos' if with_pos else ''}",
                          (_normal(rng, shape), _probabilities(rng, shape), weight, pos_weight, reduction),
                          differentiable=(0, 1)))

    rng = _rng("nll_loss_forward")
    for (batch, classes), with_weight, reduction, ignore_index in (((4, 3), False, 1, -100), ((4, 3), True, 1, 1),
                                                                   ((4, 3), True, 0, -100), ((4, 3), False, 2, 0),
                                                                   ((None, 3), False, 1, -100), ((0, 3), False, 2, -100)):
        shape = (classes,) if batch is None else (batch, classes)
        target = _index(rng, () if batch is None else (batch,), classes)
        weight = _positive(rng, (classes,)) if with_weight else None
        out.append(OpCase("nll_loss_forward",
                          f"{_shape_id(shape)}_reduction{reduction}_ignore{ignore_index}{'_weight' if with_weight else ''}",
                          (_normal(rng, shape), target, weight, reduction, ignore_index), differentiable=(0,)))

    rng = _rng("nll_loss_backward")
    for (batch, classes), with_weight, reduction, ignore_index in (((4, 3), False, 1, -100), ((4, 3), True, 1, 1),
                                                                   ((4, 3), True, 0, -100), ((4, 3), False, 2, 0),
                                                                   ((None, 3), False, 0, -100)):
        shape = (classes,) if batch is None else (batch, classes)
        target = _index(rng, () if batch is None else (batch,), classes)
        weight = _positive(rng, (classes,)) if with_weight else None
        kept = target != ignore_index
        total = np.asarray(np.sum(np.where(kept, 1.0 if weight is None else weight[np.where(kept, target, 0)], 0.0)))
        grad_output = _normal(rng, target.shape if reduction == 0 else ())
        out.append(OpCase("nll_loss_backward",
                          f"{_shape_id(shape)}_reduction{reduction}_ignore{ignore_index}{'_weight' if with_weight else ''}",
                          (grad_output, _normal(rng, shape), target, weight, reduction, ignore_index, total),
                          differentiable=(0,)))

    rng = _rng("embedding")
    # scale_grad_by_freq is left out: torch's scaled "gradient" is a training heuristic, not a derivative
    # (gradcheck fails on it by design), and its double backward ignores the scaling (tests/engine/test_nn_losses.py)
    for index_shape, padding_idx, scale in (((4,), -1, False), ((2, 3), 1, False), ((5,), 2, False), ((), -1, False)):
        out.append(OpCase("embedding", f"5x3_index{_shape_id(index_shape)}_pad{padding_idx}{'_scale' if scale else ''}",
                          (_normal(rng, (5, 3)), _index(rng, index_shape, 5), padding_idx, scale)))
    rng = _rng("embedding_dense_backward")
    for index_shape, padding_idx, scale in (((4,), -1, False), ((2, 3), 1, False), ((6,), 2, False), ((), -1, False)):
        out.append(OpCase("embedding_dense_backward",
                          f"index{_shape_id(index_shape)}_pad{padding_idx}{'_scale' if scale else ''}",
                          (_normal(rng, index_shape + (3,)), _index(rng, index_shape, 5), 5, padding_idx, scale)))
    rng = _rng("embedding_backward")
    for index_shape, padding_idx in (((4,), -1), ((2, 2), 1)):
        out.append(OpCase("embedding_backward", f"index{_shape_id(index_shape)}_pad{padding_idx}",
                          (_normal(rng, index_shape + (3,)), _index(rng, index_shape, 5), 5, padding_idx, False, False)))
    return out


# ---------------------------------------------------------------------------
# shape and indexing operators of formulas/shape_views.py, shape_copies.py and indexing.py

def _unique_index(rng: np.random.Generator, shape: tuple[int, ...], dim: int, bound: int) -> np.ndarray:
    """An index for ``scatter`` along ``dim``: distinct positions in every slice (a repeated
    position would make which value wins unspecified, and the gradient with it)."""
    index = np.empty(shape, dtype=np.int64)
    moved = np.moveaxis(index, dim, -1)
    for position in np.ndindex(moved.shape[:-1]):
        moved[position] = rng.permutation(bound)[:shape[dim]]
    return index


def _dim_shape_cases() -> list[OpCase]:
    out = []
    rng = _rng("squeeze")
    for shape in ((1, 3, 1), (2, 3), (), (1,), (0, 1, 2)):
        out.append(OpCase("squeeze", _shape_id(shape), (_normal(rng, shape),)))
    rng = _rng("squeeze.dim")
    for shape, dim in (((1, 3, 1), 0), ((1, 3, 1), -1), ((2, 3), 1), ((), 0), ((0, 1), 1)):
        out.append(OpCase("squeeze.dim", f"{_shape_id(shape)}_dim{dim}", (_normal(rng, shape), dim)))
    rng = _rng("squeeze.dims")
    for shape, dims in (((1, 3, 1), [0, 2]), ((1, 3, 1), [-1, 1]), ((2, 1), []), ((), [0]), ((1, 0, 1), [2])):
        out.append(OpCase("squeeze.dims", f"{_shape_id(shape)}_dims{'_'.join(map(str, dims)) or 'none'}",
                          (_normal(rng, shape), dims)))
    rng = _rng("flatten.using_ints")
    for shape, start, end in (((2, 3, 4), 0, -1), ((2, 3, 4), 1, 2), ((2, 3, 4), 0, 1), ((), 0, -1), ((3,), 0, 0),
                              ((2, 0, 3), 1, 2)):
        out.append(OpCase("flatten.using_ints", f"{_shape_id(shape)}_{start}_{end}", (_normal(rng, shape), start, end)))
    rng = _rng("transpose.int")
    for shape, dim0, dim1 in (((2, 3), 0, 1), ((2, 3, 4), -1, 0), ((2, 3), 1, 1), ((), 0, -1), ((0, 3), 0, 1)):
        out.append(OpCase("transpose.int", f"{_shape_id(shape)}_{dim0}_{dim1}", (_normal(rng, shape), dim0, dim1)))
    rng = _rng("movedim.int")
    for shape, source, destination in (((2, 3, 4), 0, 2), ((2, 3, 4), -1, 0), ((2, 3), 1, 1), ((), 0, 0), ((0, 3), 0, 1)):
        out.append(OpCase("movedim.int", f"{_shape_id(shape)}_{source}_{destination}",
                          (_normal(rng, shape), source, destination)))
    rng = _rng("stack")
    for shapes, dim in (((((2, 3),) * 3), 0), ((((2, 3),) * 2), -1), ((((2, 3),) * 2), 1), ((((),) * 3), 0),
                        ((((0, 2),) * 2), 1), (((4,),), 0)):
        out.append(OpCase("stack", f"{len(shapes)}x{_shape_id(shapes[0])}_dim{dim}",
                          ([_normal(rng, s) for s in shapes], dim)))
    rng = _rng("select.int")
    for shape, dim, index in (((3, 4), 0, 1), ((3, 4), 1, -1), ((2, 3, 4), -2, 2), ((5,), 0, 4), ((2, 0), 0, 1)):
        out.append(OpCase("select.int", f"{_shape_id(shape)}_dim{dim}_index{index}", (_normal(rng, shape), dim, index)))
    rng = _rng("select_backward")
    for sizes, dim, index in (((3, 4), 0, 1), ((3, 4), 1, 3), ((2, 3, 4), 1, 0), ((5,), 0, 4), ((2, 0), 0, 1)):
        reduced = tuple(s for d, s in enumerate(sizes) if d != dim)
        out.append(OpCase("select_backward", f"{_shape_id(sizes)}_dim{dim}_index{index}",
                          (_normal(rng, reduced), list(sizes), dim, index)))
    rng = _rng("slice.Tensor")
    for shape, dim, start, end, step in (((5, 3), 0, 1, 4, 1), ((5, 3), 0, None, None, 2), ((2, 6), 1, -4, -1, 1),
                                         ((2, 6), -1, 2, 100, 3), ((4,), 0, 3, 1, 1), ((0, 3), 1, 0, 2, 1),
                                         ((4, 2), 0, -10, None, 1)):
        out.append(OpCase("slice.Tensor", f"{_shape_id(shape)}_dim{dim}_{start}_{end}_{step}",
                          (_normal(rng, shape), dim, start, end, step)))
    rng = _rng("slice_backward")
    for sizes, dim, start, end, step in (((5, 3), 0, 1, 4, 1), ((5, 3), 0, 0, 5, 2), ((2, 6), 1, 2, 6, 3),
                                         ((4,), 0, 3, 3, 1), ((0, 3), 1, 0, 2, 1)):
        sliced = list(sizes)
        sliced[dim] = len(range(start, end, step))
        out.append(OpCase("slice_backward", f"{_shape_id(sizes)}_dim{dim}_{start}_{end}_{step}",
                          (_normal(rng, tuple(sliced)), list(sizes), dim, start, end, step)))
    rng = _rng("diagonal")
    for shape, offset, dim1, dim2 in (((3, 3), 0, 0, 1), ((3, 4), 1, 0, 1), ((4, 3), -2, 0, 1), ((2, 3, 4), 0, -1, 0),
                                      ((2, 3, 4), 1, 1, 2), ((3, 2), 5, 0, 1), ((0, 2), 0, 0, 1)):
        out.append(OpCase("diagonal", f"{_shape_id(shape)}_off{offset}_{dim1}_{dim2}",
                          (_normal(rng, shape), offset, dim1, dim2)))
    rng = _rng("diagonal_backward")
    for sizes, offset, dim1, dim2 in (((3, 3), 0, 0, 1), ((3, 4), 1, 0, 1), ((4, 3), -2, 0, 1), ((2, 3, 4), 0, 2, 0),
                                      ((3, 2), 5, 0, 1)):
        diag = np.diagonal(np.zeros(sizes), offset, dim1, dim2).shape
        out.append(OpCase("diagonal_backward", f"{_shape_id(sizes)}_off{offset}_{dim1}_{dim2}",
                          (_normal(rng, diag), list(sizes), offset, dim1, dim2)))
    rng = _rng("repeat")
    for shape, repeats in (((2, 3), [2, 1]), ((2, 3), [1, 2, 3]), ((3,), [2]), ((), [3, 2]), ((), []),
                           ((0, 2), [2, 2]), ((2, 1), [0, 3])):
        out.append(OpCase("repeat", f"{_shape_id(shape)}_by{'_'.join(map(str, repeats)) or 'none'}",
                          (_normal(rng, shape), repeats)))
    rng = _rng("flip")
    for shape, dims in (((2, 3), [0]), ((2, 3, 4), [-1, 0]), ((5,), [0]), ((), []), ((0, 3), [1]), ((2, 3), [])):
        out.append(OpCase("flip", f"{_shape_id(shape)}_dims{'_'.join(map(str, dims)) or 'none'}",
                          (_normal(rng, shape), dims)))
    rng = _rng("roll")
    for shape, shifts, dims in (((2, 3), [1], [1]), ((2, 3), [2], []), ((2, 3, 4), [1, -2], [0, 2]), ((5,), [-7], [0]),
                                ((), [1], []), ((0, 3), [1], [1])):
        out.append(OpCase("roll", f"{_shape_id(shape)}_shift{'_'.join(map(str, shifts))}_dims"
                          f"{'_'.join(map(str, dims)) or 'none'}", (_normal(rng, shape), shifts, dims)))
    for op in ("tril", "triu"):
        rng = _rng(op)
        for shape, diag in (((3, 3), 0), ((3, 4), 1), ((4, 3), -1), ((2, 3, 3), 0), ((3, 2), 5), ((0, 2), 0)):
            out.append(OpCase(op, f"{_shape_id(shape)}_diag{diag}", (_normal(rng, shape), diag)))
    rng = _rng("clone")
    for shape in ((2, 3), (), (0, 2), (1, 4, 1)):
        out.append(OpCase("clone", _shape_id(shape), (_normal(rng, shape),)))
    rng = _rng("contiguous")
    for shape in ((2, 3), (), (0, 2), (1, 4, 1)):
        out.append(OpCase("contiguous", _shape_id(shape), (_normal(rng, shape),)))
    for op in ("conj", "resolve_conj", "real", "conj_physical"):
        rng = _rng(op)
        for shape in ((2, 3), (), (0, 2), (1, 4, 1)):
            out.append(OpCase(op, _shape_id(shape), (_normal(rng, shape),)))
    for op in ("mT", "mH"):
        rng = _rng(op)
        for shape in ((2, 3), (2, 3, 4), (1, 1), (0, 2)):
            out.append(OpCase(op, _shape_id(shape), (_normal(rng, shape),)))
    rng = _rng("reshape_as")
    for shape, target in (((2, 3, 4), (6, 4)), ((), (1,)), ((0, 3), (3, 0)), ((2, 3), (3, 1, 2))):
        out.append(OpCase("reshape_as", f"{_shape_id(shape)}_as_{_shape_id(target)}",
                          (_normal(rng, shape), _normal(rng, target))))
    rng = _rng("movedim.intlist")
    for shape, source, destination in (((2, 3, 4), [0, 1], [2, 0]), ((2, 3, 4), [-1], [0]), ((2, 3), [], []),
                                       ((0, 3, 1), [0, 2], [1, 0])):
        out.append(OpCase("movedim.intlist", f"{_shape_id(shape)}_{'_'.join(map(str, source)) or 'none'}_to_"
                          f"{'_'.join(map(str, destination)) or 'none'}", (_normal(rng, shape), source, destination)))
    rng = _rng("select_scatter")
    for shape, dim, index in (((3, 4), 0, 1), ((3, 4), 1, -1), ((2, 3, 4), -2, 2), ((5,), 0, 4), ((2, 0), 0, 1)):
        src = tuple(s for d, s in enumerate(shape) if d != dim % len(shape))
        out.append(OpCase("select_scatter", f"{_shape_id(shape)}_dim{dim}_index{index}",
                          (_normal(rng, shape), _normal(rng, src), dim, index)))
    rng = _rng("slice_scatter")
    for shape, dim, start, end, step in (((5, 3), 0, 1, 4, 1), ((5, 3), 0, None, None, 2), ((2, 6), 1, -4, -1, 1),
                                         ((2, 6), -1, 2, 100, 3), ((4,), 0, 3, 1, 1), ((0, 3), 1, 0, 2, 1)):
        src = np.zeros(shape)[(slice(None),) * (dim % len(shape)) + (slice(start, end, step),)].shape
        out.append(OpCase("slice_scatter", f"{_shape_id(shape)}_dim{dim}_{start}_{end}_{step}",
                          (_normal(rng, shape), _normal(rng, src), dim, start, end, step)))
    rng = _rng("diagonal_scatter")
    for shape, offset, dim1, dim2 in (((3, 3), 0, 0, 1), ((3, 4), 1, 0, 1), ((4, 3), -2, 0, 1), ((2, 3, 4), 0, -1, 0),
                                      ((3, 2), 5, 0, 1), ((0, 2), 0, 0, 1)):
        src = np.diagonal(np.zeros(shape), offset, dim1, dim2).shape
        out.append(OpCase("diagonal_scatter", f"{_shape_id(shape)}_off{offset}_{dim1}_{dim2}",
                          (_normal(rng, shape), _normal(rng, src), offset, dim1, dim2)))
    for op in ("swapaxes", "swapdims"):
        rng = _rng(op)
        for shape, dim0, dim1 in (((2, 3), 0, 1), ((2, 3, 4), -1, 0), ((2, 3), 1, 1), ((), 0, -1), ((0, 3), 0, 1)):
            out.append(OpCase(op, f"{_shape_id(shape)}_{dim0}_{dim1}", (_normal(rng, shape), dim0, dim1)))
    rng = _rng("unflatten.int")
    for shape, dim, sizes in (((6,), 0, [2, 3]), ((2, 12), 1, [3, -1, 2]), ((4, 3), -2, [4, 1]), ((0, 3), 0, [0, 5])):
        out.append(OpCase("unflatten.int", f"{_shape_id(shape)}_dim{dim}_{'_'.join(map(str, sizes))}",
                          (_normal(rng, shape), dim, sizes)))
    rng = _rng("narrow_copy")
    for shape, dim, start, length in (((5, 3), 0, 1, 3), ((2, 6), -1, -4, 2), ((4,), 0, 0, 0), ((3, 0), 0, 1, 2)):
        out.append(OpCase("narrow_copy", f"{_shape_id(shape)}_dim{dim}_start{start}_len{length}",
                          (_normal(rng, shape), dim, start, length)))
    rng = _rng("constant_pad_nd")
    for shape, pad, value in (((2, 3), [1, 2], 0), ((2, 3), [0, 1, 2, 0], 1.5), ((2, 3, 4), [-1, 2, 1, -1], -2.0),
                              ((4,), [-2, -2], 0), ((0, 2), [1, 1, 1, 0], 3.0), ((), [], 0)):
        out.append(OpCase("constant_pad_nd", f"{_shape_id(shape)}_pad{'_'.join(map(str, pad))}_value{value}",
                          (_normal(rng, shape), pad, value)))
    for op, shapes in (("fliplr", ((2, 3), (2, 3, 4), (0, 2))), ("flipud", ((5,), (2, 3), (0, 2)))):
        rng = _rng(op)
        for shape in shapes:
            out.append(OpCase(op, _shape_id(shape), (_normal(rng, shape),)))
    rng = _rng("rot90")
    for shape, k, dims in (((2, 3), 1, [0, 1]), ((2, 3), -1, [0, 1]), ((2, 3, 4), 2, [2, 0]), ((2, 3), 3, [1, 0]),
                           ((2, 3), 0, [0, 1]), ((0, 3), 1, [0, 1])):
        out.append(OpCase("rot90", f"{_shape_id(shape)}_k{k}_{dims[0]}_{dims[1]}", (_normal(rng, shape), k, dims)))
    rng = _rng("tile")
    for shape, dims in (((2, 3), [2, 1]), ((2, 3), [2]), ((3,), [2, 2]), ((), [3]), ((), []), ((0, 2), [2, 2])):
        out.append(OpCase("tile", f"{_shape_id(shape)}_by{'_'.join(map(str, dims)) or 'none'}",
                          (_normal(rng, shape), dims)))
    return out


def _scatter_and_mask_cases() -> list[OpCase]:
    out = []
    rng = _rng("index_select")
    for shape, dim, index in (((4, 3), 0, [2, 0, 2]), ((4, 3), 1, [1]), ((2, 3, 4), -1, [3, 3, 0, 1]),
                              ((5,), 0, [4, 1]), ((4, 3), 0, []), ((), 0, [0])):
        out.append(OpCase("index_select", f"{_shape_id(shape)}_dim{dim}_index{'_'.join(map(str, index)) or 'none'}",
                          (_normal(rng, shape), dim, np.asarray(index, dtype=np.int64))))
    rng = _rng("index_select_backward")
    for sizes, dim, index in (((4, 3), 0, [2, 0, 2]), ((4, 3), 1, [1]), ((2, 3, 4), 2, [3, 3, 0, 1]),
                              ((5,), 0, [4, 1]), ((4, 3), 0, [])):
        selected = list(sizes)
        selected[dim] = len(index)
        out.append(OpCase("index_select_backward", f"{_shape_id(sizes)}_dim{dim}_n{len(index)}",
                          (_normal(rng, tuple(selected)), list(sizes), dim, np.asarray(index, dtype=np.int64))))
    rng = _rng("masked_fill.Scalar")
    for shape, mask_shape, value in (((3, 4), (3, 4), 0.5), ((3, 4), (4,), -2), ((2, 3), (2, 1), 0.0), ((), (), 1.5),
                                     ((0, 3), (1, 3), 1.0)):
        out.append(OpCase("masked_fill.Scalar", f"{_shape_id(shape, mask_shape)}_value{value}",
                          (_normal(rng, shape), _mask(rng, mask_shape), value)))
    rng = _rng("masked_fill.Tensor")
    for shape, mask_shape in (((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 3), (2, 1)), ((), ()), ((0, 3), (1, 3))):
        out.append(OpCase("masked_fill.Tensor", _shape_id(shape, mask_shape),
                          (_normal(rng, shape), _mask(rng, mask_shape), _normal(rng, ()))))
    rng = _rng("masked_scatter")
    for shape, mask_shape, source_shape in (((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), (20,)), ((2, 3), (2, 1), (2, 5)),
                                            ((), (), ()), ((0, 3), (1, 3), (2,))):
        out.append(OpCase("masked_scatter", _shape_id(shape, mask_shape, source_shape),
                          (_normal(rng, shape), _mask(rng, mask_shape), _normal(rng, source_shape))))
    rng = _rng("masked_select")
    for shape, mask_shape in (((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), (3, 4)), ((2, 1), (1, 3)), ((), ()),
                              ((0, 3), (1, 3))):
        out.append(OpCase("masked_select", _shape_id(shape, mask_shape), (_normal(rng, shape), _mask(rng, mask_shape))))
    for op in ("scatter.src", "scatter.value"):
        rng = _rng(op)
        for shape, dim, index_shape in (((3, 4), 1, (3, 2)), ((3, 4), 0, (2, 4)), ((3, 4), -1, (2, 3)),
                                        ((5,), 0, (3,)), ((3, 4), 0, (0, 4))):
            index = _unique_index(rng, index_shape, dim % len(shape), shape[dim])
            last = (_normal(rng, index_shape),) if op == "scatter.src" else (1.25,)
            out.append(OpCase(op, f"{_shape_id(shape)}_dim{dim}_index{_shape_id(index_shape)}",
                              (_normal(rng, shape), dim, index, *last)))
    rng = _rng("index_add")
    for shape, dim, index, kwargs in (((4, 3), 0, [2, 0, 2], {}), ((4, 3), 1, [1], {"alpha": 2.5}),
                                      ((2, 3, 4), -1, [3, 3, 0, 1], {}), ((5,), 0, [4, 1], {"alpha": -1}),
                                      ((4, 3), 0, [], {})):
        source = list(shape)
        source[dim] = len(index)
        out.append(OpCase("index_add", f"{_shape_id(shape)}_dim{dim}_n{len(index)}{'_alpha' if kwargs else ''}",
                          (_normal(rng, shape), dim, np.asarray(index, dtype=np.int64), _normal(rng, tuple(source))),
                          kwargs))
    rng = _rng("index_fill.int_Scalar")
    for shape, dim, index, value in (((4, 3), 0, [2, 0, 2], 1.5), ((4, 3), 1, [1], -2), ((2, 3, 4), -1, [3, 0], 0.0),
                                     ((5,), 0, [4, 1], 2), ((4, 3), 0, [], 1.0)):
        out.append(OpCase("index_fill.int_Scalar", f"{_shape_id(shape)}_dim{dim}_n{len(index)}_value{value}",
                          (_normal(rng, shape), dim, np.asarray(index, dtype=np.int64), value)))
    rng = _rng("index_copy")
    for shape, dim, index in (((4, 3), 0, [2, 0]), ((4, 3), 1, [1]), ((2, 3, 4), -1, [3, 0, 1]), ((5,), 0, [4, 1]),
                              ((4, 3), 0, [])):
        source = list(shape)
        source[dim] = len(index)
        out.append(OpCase("index_copy", f"{_shape_id(shape)}_dim{dim}_n{len(index)}",
                          (_normal(rng, shape), dim, np.asarray(index, dtype=np.int64), _normal(rng, tuple(source)))))
    return out


def build_cases() -> list[OpCase]:
    """The whole catalogue, freshly generated (the same values on every call)."""
    return (
        _unary_cases() + _pow_cases() + _binary_cases() + _scalar_binary_cases() + _reduction_cases()
        + _linalg_cases() + _shape_cases() + _softmax_cases() + _selection_cases() + _fused_backward_cases()
        + _vector_product_cases() + _nn_cases()
        + _pointwise_math_cases()
        + _dim_shape_cases() + _scatter_and_mask_cases()
        + _dim_reduction_cases() + _moment_cases() + _pooling_cases()
        + _list_output_cases() + _advanced_indexing_cases() + _layer_norm_dropout_hardsigmoid_cases()
        + _cumprod_and_norm_cases() + _convolution_cases()
    )


# ---------------------------------------------------------------------------
# pointwise math and activations (formulas/pointwise_unary.py, pointwise_binary.py, activations.py)

def _uniform(low: float, high: float) -> Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]:
    def draw(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return np.asarray(rng.uniform(low, high, shape), dtype=np.float64)
    return draw


def _avoiding(*kinks: float, low: float = -4.0, high: float = 4.0, gap: float = 0.15
              ) -> Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]:
    """Uniform in [low, high), every value at least ``gap`` from each kink (redrawn until so)."""
    def draw(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        values = rng.uniform(low, high, shape)
        while kinks and np.any(np.min(np.abs(values[..., None] - np.asarray(kinks)), axis=-1) < gap):
            near = np.min(np.abs(values[..., None] - np.asarray(kinks)), axis=-1) < gap
            values = np.where(near, rng.uniform(low, high, shape), values)
        return np.asarray(values, dtype=np.float64)
    return draw


def _off_integers(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Fractional parts in (0.1, 0.4) or (0.6, 0.9): away from the steps of floor/round/trunc."""
    whole = rng.integers(-3, 3, shape)
    part = rng.uniform(0.1, 0.4, shape) + np.where(rng.random(shape) < 0.5, 0.5, 0.0)
    return np.asarray(whole + part, dtype=np.float64)


POINTWISE_UNARY_DOMAINS: dict[str, Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]] = {
    "abs": _away_from_zero, "sign": _away_from_zero, "floor": _off_integers, "ceil": _off_integers,
    "round": _off_integers, "trunc": _off_integers, "frac": _off_integers,
    "erf": _normal, "erfc": _normal, "erfinv": _uniform(-0.8, 0.8), "expm1": _normal,
    "log1p": _uniform(-0.5, 2.0), "log2": _positive, "log10": _positive, "exp2": _normal,
    "rsqrt": _positive, "reciprocal": _away_from_zero, "asin": _uniform(-0.8, 0.8), "acos": _uniform(-0.8, 0.8),
    "atan": _normal, "tan": _uniform(-1.2, 1.2), "sinh": _normal, "cosh": _normal, "asinh": _normal,
    "acosh": _uniform(1.2, 3.0), "atanh": _uniform(-0.8, 0.8), "sinc": _away_from_zero, "square": _normal,
    "leaky_relu": _away_from_zero, "elu": _away_from_zero, "selu": _away_from_zero, "celu": _away_from_zero,
    "gelu": _normal, "silu": _normal, "mish": _normal, "softplus": _normal, "log_sigmoid": _normal,
    "hardtanh": _avoiding(-1.0, 1.0, low=-2.0, high=2.0), "relu6": _avoiding(0.0, 6.0, low=-2.0, high=8.0),
    "hardswish": _avoiding(-3.0, 3.0), "logit": _uniform(0.15, 0.85),
    "sgn": _away_from_zero, "deg2rad": _normal, "rad2deg": _normal,
    # the scaled Bessel functions' e^-|x| has a kink at 0
    "i0": _normal, "special_i1": _normal, "special_i0e": _away_from_zero, "special_i1e": _away_from_zero,
    "softshrink": _avoiding(-0.5, 0.5), "hardshrink": _avoiding(-0.5, 0.5),
}


def _pointwise_unary_cases() -> list[OpCase]:
    out = []
    for op, values in POINTWISE_UNARY_DOMAINS.items():
        rng = _rng(op)
        out += [OpCase(op, _shape_id(shape), (values(rng, shape),)) for shape in UNARY_SHAPES]
    return out


def _unary_with_arguments_cases() -> list[OpCase]:
    """Unary ops with scalar arguments: each argument set on a few shapes, values away from the
    kinks those arguments put."""
    table: list[tuple[str, tuple[Any, ...], dict[str, Any], Callable[..., np.ndarray]]] = [
        ("clamp", (-0.5, 0.8), {}, _avoiding(-0.5, 0.8, low=-2.0, high=2.0)),
        ("clamp", (None, 0.3), {}, _avoiding(0.3, low=-2.0, high=2.0)),
        ("clamp", (-0.2, None), {}, _avoiding(-0.2, low=-2.0, high=2.0)),
        ("clamp", (1, 2), {}, _avoiding(1.0, 2.0, low=0.0, high=3.0)),
        ("clamp_min", (0.25,), {}, _avoiding(0.25, low=-2.0, high=2.0)),
        ("clamp_max", (-0.25,), {}, _avoiding(-0.25, low=-2.0, high=2.0)),
        ("round.decimals", (), {"decimals": 0}, _off_integers),
        ("round.decimals", (), {"decimals": 2}, _off_integers),
        ("leaky_relu", (0.2,), {}, _away_from_zero),
        ("elu", (0.5, 2.0, 1.5), {}, _away_from_zero),
        ("celu", (0.7,), {}, _away_from_zero),
        ("gelu", (), {"approximate": "tanh"}, _normal),
        ("softplus", (2.0, 1.5), {}, _avoiding(0.75)),          # beta x passes the threshold at 0.75
        ("hardtanh", (-0.5, 2.0), {}, _avoiding(-0.5, 2.0)),
        ("threshold", (0.5, -2.0), {}, _avoiding(0.5, low=-2.0, high=2.0)),
        ("threshold", (-1, 3), {}, _avoiding(-1.0, low=-2.0, high=2.0)),
        ("logit", (0.05,), {}, _uniform(0.1, 0.9)),
        ("softshrink", (1.0,), {}, _avoiding(-1.0, 1.0)),
        ("hardshrink", (1.5,), {}, _avoiding(-1.5, 1.5)),
        ("xlogy.Scalar_Other", (2.5,), {}, _normal),
        ("xlogy.Scalar_Other", (0.7,), {}, _normal),
        ("logit", (0.3,), {}, _avoiding(0.3, 0.7, low=0.05, high=0.95, gap=0.05)),
    ]
    out = []
    for op, scalars, kwargs, values in table:
        rng = _rng(f"{op}{scalars}{kwargs}")
        for shape in ((2, 3), (), (1, 4, 1), (0, 2)):
            suffix = "_".join(str(s) for s in (*scalars, *kwargs.values()))
            out.append(OpCase(op, f"{_shape_id(shape)}_{suffix}", (values(rng, shape), *scalars), dict(kwargs)))
    return out


def _no_ties(rng: np.random.Generator, left: tuple[int, ...], right: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Two operands on interleaved grids (multiples of 0.25 and those plus 0.125): never equal."""
    return (np.asarray(rng.integers(-8, 8, left) * 0.25, dtype=np.float64),
            np.asarray(rng.integers(-8, 8, right) * 0.25 + 0.125, dtype=np.float64))


def _off_quotient_steps(rng: np.random.Generator, left: tuple[int, ...], right: tuple[int, ...]
                        ) -> tuple[np.ndarray, np.ndarray]:
    """``self`` and a divisor whose quotients keep 0.1 away from integers (fmod/remainder steps)."""
    while True:
        x, y = np.asarray(3 * _normal(rng, left)), _away_from_zero(rng, right)
        quotient = x / y if x.size and y.size else np.zeros(0)
        if not quotient.size or np.min(np.abs(quotient - np.round(quotient))) > 0.1:
            return x, y


def _pointwise_binary_cases() -> list[OpCase]:
    draws: dict[str, Callable[[np.random.Generator, tuple[int, ...], tuple[int, ...]],
                              tuple[np.ndarray, np.ndarray]]] = {
        "atan2": lambda rng, a, b: (_normal(rng, a), _away_from_zero(rng, b)),
        "hypot": lambda rng, a, b: (_away_from_zero(rng, a), _away_from_zero(rng, b)),
        "minimum": _no_ties, "maximum": _no_ties, "fmin": _no_ties, "fmax": _no_ties,
        "fmod.Tensor": _off_quotient_steps, "remainder.Tensor": _off_quotient_steps,
        "pow.Tensor_Tensor": lambda rng, a, b: (_positive(rng, a), _normal(rng, b)),
        "xlogy.Tensor": lambda rng, a, b: (_normal(rng, a), _positive(rng, b)),
        "logaddexp": lambda rng, a, b: (_normal(rng, a), _normal(rng, b)),
        "logaddexp2": lambda rng, a, b: (_normal(rng, a), _normal(rng, b)),
        "rsub.Tensor": lambda rng, a, b: (_normal(rng, a), _normal(rng, b)),
        "lerp.Scalar": lambda rng, a, b: (_normal(rng, a), _normal(rng, b)),
        "copysign.Tensor": lambda rng, a, b: (_away_from_zero(rng, a), _away_from_zero(rng, b)),
    }
    out = []
    for op, draw in draws.items():
        rng = _rng(op)
        for left, right in BINARY_SHAPES:
            args = draw(rng, left, right)
            if op == "lerp.Scalar":
                for weight in (0.3, 0.8):
                    out.append(OpCase(op, f"{_shape_id(left, right)}_w{weight}", (*args, weight)))
            else:
                out.append(OpCase(op, _shape_id(left, right), args))
    rng = _rng("rsub.Tensor")
    out.append(OpCase("rsub.Tensor", "3x1_1x4_alpha2.5", (_normal(rng, (3, 1)), _normal(rng, (1, 4))), {"alpha": 2.5}))
    out.append(OpCase("lerp.Scalar", "2x3_2x3_w-1.5", (_normal(rng, (2, 3)), _normal(rng, (2, 3)), -1.5)))

    rng = _rng("lerp.Tensor")
    for shapes in (((2, 3), (2, 3), (2, 3)), ((3, 1), (1, 4), ()), ((2, 3), (3,), (2, 1)),
                   ((), (), ()), ((0, 3), (1, 3), (3,)), ((4,), (2, 4), (2, 1))):
        out.append(OpCase("lerp.Tensor", _shape_id(*shapes), tuple(_normal(rng, s) for s in shapes)))
        for op, kwargs in (("addcmul", {}), ("addcmul", {"value": -0.5}), ("addcdiv", {}), ("addcdiv", {"value": 2})):
            values = (_normal(rng, shapes[0]), _normal(rng, shapes[1]),
                      (_away_from_zero if op == "addcdiv" else _normal)(rng, shapes[2]))
            out.append(OpCase(op, f"{_shape_id(*shapes)}{''.join(f'_value{v}' for v in kwargs.values())}",
                              values, dict(kwargs)))

    # clamp by tensors: self, min and max on three interleaved grids (0.1 apart at least: no ties), the
    # bounds crossing (min > max) in places, broadcast against self and each other, one of them left out
    # (torch's own backward raises where self broadcast with one bound is smaller than the bounds
    # broadcast together, e.g. (3, 1), (1, 4) and (): it writes the comparisons in place)
    rng = _rng("clamp.Tensor")
    for shapes in (((2, 3), (2, 3), (2, 3)), ((3, 1), (3, 4), (4,)), ((2, 3), (3,), None), ((2, 3), None, (2, 1)),
                   ((), (), ()), ((0, 3), (1, 3), (3,))):
        values = tuple(None if shape is None else np.asarray(rng.integers(-6, 6, shape) * 0.3 + 0.1 * i, dtype=np.float64)
                       for i, shape in enumerate(shapes))
        out.append(OpCase("clamp.Tensor", _shape_id(*(shape for shape in shapes if shape is not None))
                          + ("_no_min" if shapes[1] is None else "_no_max" if shapes[2] is None else ""), values))

    for op, scalars in (("add.Scalar", ((2.5, 1), (-1, 3), (0.5, -0.5))), ("sub.Scalar", ((2.5, 1), (-1, 2))),
                        ("rsub.Scalar", ((2.5, 1), (-1, 0.5), (3, -2)))):
        rng = _rng(op)
        for other, alpha in scalars:
            for shape in ((2, 3), (), (0, 2)):
                out.append(OpCase(op, f"{_shape_id(shape)}_{other}_alpha{alpha}", (_normal(rng, shape), other, alpha)))
    for op in ("fmod.Scalar", "remainder.Scalar"):
        rng = _rng(op)
        for other in (1.5, -0.7):
            for shape in ((2, 3), (), (1, 4, 1), (0, 2)):
                out.append(OpCase(op, f"{_shape_id(shape)}_{other}", (_off_step_values(rng, shape, other), other)))
    rng = _rng("pow.Scalar")
    for base in (2.0, 0.5, 3):
        for shape in ((2, 3), (), (1, 4, 1), (0, 2)):
            out.append(OpCase("pow.Scalar", f"{base}_{_shape_id(shape)}", (base, _normal(rng, shape))))
    return out


def _off_step_values(rng: np.random.Generator, shape: tuple[int, ...], divisor: float) -> np.ndarray:
    """Values whose quotient by ``divisor`` keeps 0.1 away from integers."""
    return np.asarray(_off_integers(rng, shape) * divisor, dtype=np.float64)


def _pointwise_math_cases() -> list[OpCase]:
    return _pointwise_unary_cases() + _unary_with_arguments_cases() + _pointwise_binary_cases()


# ---------------------------------------------------------------------------
# operators declared ``nondifferentiable`` (no gradient in torch either). Their cases
# are kept apart from ALL_CASES (the gradient tiers do not apply): the engine and the compiled
# op must return what torch returns, with no gradient and no tangent (tests/test_nondifferentiable.py).

def _ties(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Small integers as float64: equal values are frequent, so eq/le/ge see ties."""
    return np.asarray(rng.integers(-2, 3, shape), dtype=np.float64)


def _special(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Normal values with NaN, +inf and -inf sprinkled in."""
    values = _normal(rng, shape)
    flat = values.reshape(-1)
    for position, special in zip(rng.permutation(flat.size)[:3], (np.nan, np.inf, -np.inf)):
        flat[position] = special
    return values


COMPARISONS = ("lt", "le", "eq", "ne", "ge", "gt")


def _nondifferentiable_cases() -> list[OpCase]:
    out = []
    for name in COMPARISONS:
        op = f"{name}.Tensor"
        rng = _rng(op)
        for left, right in BINARY_SHAPES:
            out.append(OpCase(op, _shape_id(left, right), (_ties(rng, left), _ties(rng, right))))
        out.append(OpCase(op, "nan_2x3_3", (_special(rng, (2, 3)), _special(rng, (3,)))))
        out.append(OpCase(op, "int64_float_3x1_1x4", (rng.integers(-2, 3, (3, 1)), _ties(rng, (1, 4)))))
        out.append(OpCase(op, "bool_2x2", (_mask(rng, (2, 2)), _mask(rng, (2, 2)))))
        op = f"{name}.Scalar"
        rng = _rng(op)
        for shape, other in (((2, 3), 0.0), ((), 1), ((0, 2), 0.5), ((4,), -1.0), ((2, 1, 3), True)):
            out.append(OpCase(op, f"{_shape_id(shape)}_other{other}", (_ties(rng, shape), other)))
        out.append(OpCase(op, "nan_5_other0", (_special(rng, (5,)), 0.0)))
        out.append(OpCase(op, "int64_4_other0.5", (rng.integers(-2, 3, (4,)), 0.5)))
    out.append(OpCase("gt.Scalar", "3x3_othernan", (_ties(_rng("gt.Scalar"), (3, 3)), float("nan"))))

    rng = _rng("logical")
    for name in ("logical_and", "logical_or", "logical_xor"):
        for left, right in BINARY_SHAPES:
            out.append(OpCase(name, _shape_id(left, right), (_ties(rng, left), _ties(rng, right))))
        out.append(OpCase(name, "bool_float_3x1_1x4", (_mask(rng, (3, 1)), _special(rng, (1, 4)))))
        out.append(OpCase(name, "int64_bool_4_4", (rng.integers(-1, 2, (4,)), _mask(rng, (4,)))))
    for name in ("logical_not", "isnan", "isfinite"):
        for shape in UNARY_SHAPES:
            out.append(OpCase(name, _shape_id(shape), (_special(rng, shape) if shape and np.prod(shape) >= 3
                                                       else _ties(rng, shape),)))
        out.append(OpCase(name, "int64_5", (rng.integers(-1, 2, (5,)),)))
        out.append(OpCase(name, "bool_2x2", (_mask(rng, (2, 2)),)))

    for name in ("argmax", "argmin"):
        rng = _rng(name)
        for shape, dim, keepdim in (((3, 4), None, False), ((3, 4), None, True), ((3, 4), 1, False),
                                    ((3, 4), -2, True), ((2, 3, 4), 2, False), ((5,), 0, False),
                                    ((), None, False), ((), 0, True), ((0, 3), 1, False), ((1, 4, 1), 1, True)):
            out.append(OpCase(name, f"{_shape_id(shape)}_dim{dim}_keep{int(keepdim)}",
                              (_ties(rng, shape), dim, keepdim)))
        out.append(OpCase(name, "nan_2x4_dim1", (_special(rng, (2, 4)), 1, False)))
        out.append(OpCase(name, "int64_6", (rng.integers(-3, 3, (6,)), None, False)))

    for name in ("all", "any"):
        rng = _rng(name)
        for shape in UNARY_SHAPES:
            out.append(OpCase(name, _shape_id(shape), (_ties(rng, shape),)))
        out.append(OpCase(name, "ones_2x3", (np.ones((2, 3)),)))
        out.append(OpCase(name, "zeros_3", (np.zeros(3),)))
        out.append(OpCase(name, "nan_4", (_special(rng, (4,)),)))
        out.append(OpCase(name, "bool_2x2", (_mask(rng, (2, 2)),)))
        op = f"{name}.dim"
        for shape, dim, keepdim in (((3, 4), 1, False), ((3, 4), 0, True), ((2, 3, 4), -1, False),
                                    ((), 0, False), ((0, 3), 1, True), ((0, 3), 0, False)):
            out.append(OpCase(op, f"{_shape_id(shape)}_dim{dim}_keep{int(keepdim)}",
                              (_ties(rng, shape), dim, keepdim)))
        out.append(OpCase(op, "int64_2x3_dim1", (rng.integers(0, 3, (2, 3)), 1, False)))

    rng = _rng("zeros_like")
    for shape, kwargs in (((2, 3), {}), ((), {"dtype": np.float32}), ((0, 2), {})):
        out.append(OpCase("zeros_like", f"{_shape_id(shape)}{'_dtype' if kwargs else ''}", (_normal(rng, shape),), kwargs))
    rng = _rng("ones_like")
    for shape, kwargs in (((2, 3), {}), ((), {"dtype": np.int64}), ((0, 2), {})):
        out.append(OpCase("ones_like", f"{_shape_id(shape)}{'_dtype' if kwargs else ''}", (_normal(rng, shape),), kwargs))
    rng = _rng("new_zeros")
    for shape, size, kwargs in (((2, 3), [4], {}), ((), [2, 0], {}), ((3,), [], {"dtype": np.int64})):
        out.append(OpCase("new_zeros", f"{_shape_id(shape)}_to_{'_'.join(map(str, size)) or 'scalar'}"
                          f"{'_dtype' if kwargs else ''}", (_normal(rng, shape), size), kwargs))
    rng = _rng("new_ones")
    for shape, size, kwargs in (((2, 3), [4], {}), ((), [2, 0], {}), ((3,), [], {"dtype": np.int64})):
        out.append(OpCase("new_ones", f"{_shape_id(shape)}_to_{'_'.join(map(str, size)) or 'scalar'}"
                          f"{'_dtype' if kwargs else ''}", (_normal(rng, shape), size), kwargs))
    rng = _rng("new_full")
    for shape, size, fill, kwargs in (((2, 3), [4], 0.5, {}), ((), [2, 0], 1.5, {}), ((3,), [], 0.0, {}),
                                      ((2,), [2, 2], 3, {"dtype": np.int64})):
        out.append(OpCase("new_full", f"{_shape_id(shape)}_to_{'_'.join(map(str, size)) or 'scalar'}_fill{fill}"
                          f"{'_dtype' if kwargs else ''}", (_normal(rng, shape), size, fill), kwargs))
    return out


NONDIFFERENTIABLE_CASES: list[OpCase] = _nondifferentiable_cases()


# ---------------------------------------------------------------------------
# more reductions (formulas/reductions.py, scans.py). Ties (max/min/amax/amin) are not
# differentiable points, so they are proven against torch in tests/engine/test_reduction_ties.py
# and tests/cpp/test_compiled_reduction_ties.py, not here; prod's zeros are (prod is smooth).

def _with_zeros(rng: np.random.Generator, rows: int, zeros_per_row: tuple[int, ...]) -> np.ndarray:
    """A (rows, 4) matrix away from zero except for ``zeros_per_row[r]`` exact zeros in row r."""
    values = _away_from_zero(rng, (rows, 4))
    for row, count in enumerate(zeros_per_row):
        values[row, rng.permutation(4)[:count]] = 0.0
    return values


def _dim_reduction_cases() -> list[OpCase]:
    out = []
    for op in ("max", "min"):
        rng = _rng(op)
        out += [OpCase(op, _shape_id(shape), (_distinct(rng, shape),)) for shape in ((), (5,), (2, 3), (1, 4, 1))]

    op = "min.dim"
    rng = _rng(op)
    for shape, dim, keepdim in (((3, 4), 1, False), ((3, 4), -1, True), ((3, 4), 0, False),
                                ((2, 3, 4), 1, True), ((1, 5), 0, False), ((4,), 0, False),
                                ((), 0, False), ((), -1, True), ((0, 3), 1, False)):
        out.append(OpCase(op, f"{_shape_id(shape)}_dim{dim}_keep{int(keepdim)}", (_distinct(rng, shape), dim, keepdim)))

    for op in ("amax", "amin"):
        rng = _rng(op)
        for shape, dim, keepdim in (((3, 4), [1], False), ((3, 4), [0, 1], True), ((2, 3, 4), [], False),
                                    ((2, 3, 4), [-1, 0], True), ((), [], False), ((), [0], True),
                                    ((5,), [0], False), ((0, 3), [1], False), ((), [0], False)):
            dim_id = "_".join(map(str, dim)) or "all"
            out.append(OpCase(op, f"{_shape_id(shape)}_dim{dim_id}_keep{int(keepdim)}",
                              (_distinct(rng, shape), dim, keepdim)))

    rng = _rng("mean")
    out += [OpCase("mean", _shape_id(shape), (_normal(rng, shape),)) for shape in ((), (4,), (2, 3), (2, 1, 3))]

    rng = _rng("logsumexp")
    for shape, dim, keepdim in (((3, 4), [1], False), ((3, 4), [0, 1], True), ((2, 3, 4), [-1], False),
                                ((5,), [0], True), ((), [0], False), ((0, 3), [1], False)):
        out.append(OpCase("logsumexp", f"{_shape_id(shape)}_dim{'_'.join(map(str, dim))}_keep{int(keepdim)}",
                          (_normal(rng, shape), dim, keepdim)))

    rng = _rng("cumsum")
    for shape, dim in (((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((5,), 0), ((), 0), ((0, 3), 1)):
        out.append(OpCase("cumsum", f"{_shape_id(shape)}_dim{dim}", (_normal(rng, shape), dim)))

    op = "prod.dim_int"
    rng = _rng(op)
    for shape, dim, keepdim in (((3, 4), 1, False), ((3, 4), 0, True), ((2, 3, 4), -1, False), ((5,), 0, False),
                                ((), 0, False), ((0, 3), 1, False), ((2, 0), 1, True)):
        out.append(OpCase(op, f"{_shape_id(shape)}_dim{dim}_keep{int(keepdim)}",
                          (_away_from_zero(rng, shape), dim, keepdim)))
    zeros = _with_zeros(rng, 5, (0, 1, 2, 3, 4))       # a row with no zero, one, two, three, four
    out.append(OpCase(op, "zeros_0_to_4_per_row_dim1", (zeros, 1, False)))
    out.append(OpCase(op, "zeros_0_to_4_per_row_dim0", (zeros.copy(), 0, True)))
    out.append(OpCase(op, "scalar_zero_dim0", (np.zeros(()), 0, False)))

    op = "prod"
    rng = _rng(op)
    out += [OpCase(op, _shape_id(shape), (_away_from_zero(rng, shape),)) for shape in ((), (5,), (2, 3), (0, 3))]
    for count in (1, 2, 3):
        values = _away_from_zero(rng, (2, 3))
        values.reshape(-1)[rng.permutation(6)[:count]] = 0.0
        out.append(OpCase(op, f"2x3_{count}_zeros", (values,)))
    return out


def _moment_cases() -> list[OpCase]:
    """``var`` / ``std``: ``.correction``, all elements and ``.dim`` (formulas/reductions.py)."""
    out = []
    for op in ("var.correction", "std.correction"):
        rng = _rng(op)
        for shape, dim, kwargs in (((3, 4), None, {}), ((3, 4), [1], {}), ((3, 4), [0, 1], {"keepdim": True}),
                                   ((2, 3, 4), [-1, 0], {"correction": 0}), ((5,), [0], {"correction": 2}),
                                   ((2, 3), [1], {"correction": 0.5, "keepdim": True}), ((0, 3), [1], {}),
                                   ((), None, {"correction": 0}) if op == "var.correction" else ((2, 1, 3), [2], {})):
            dim_id = "all" if dim is None else "_".join(map(str, dim))
            extra = "".join(f"_{key}{value}" for key, value in kwargs.items())
            out.append(OpCase(op, f"{_shape_id(shape)}_dim{dim_id}{extra}", (_normal(rng, shape), dim), kwargs))
    for op in ("var", "std"):
        rng = _rng(op)
        for shape, unbiased in (((3, 4), True), ((5,), False), ((2, 1, 3), True),
                                ((), False) if op == "var" else ((1, 2), False)):    # std of one value: a kink
            out.append(OpCase(op, f"{_shape_id(shape)}_unbiased{int(unbiased)}", (_normal(rng, shape), unbiased)))
        op = f"{op}.dim"
        for shape, dim, unbiased, keepdim in (((3, 4), [1], True, False), ((3, 4), None, False, True),
                                              ((2, 3, 4), [0, -1], True, True), ((5,), [0], False, False),
                                              ((0, 3), [1], True, False)):
            dim_id = "all" if dim is None else "_".join(map(str, dim))
            out.append(OpCase(op, f"{_shape_id(shape)}_dim{dim_id}_unbiased{int(unbiased)}_keep{int(keepdim)}",
                              (_normal(rng, shape), dim, unbiased, keepdim)))
    return out


# ---------------------------------------------------------------------------
# pooling (formulas/pooling.py): max_pool2d_with_indices, avg_pool2d and their backward operators

def _pool_id(shape: tuple[int, ...], *arguments: Any) -> str:
    return _shape_id(shape) + "".join(f"_{'x'.join(map(str, a)) if isinstance(a, list) else a}" for a in arguments)


def _pooling_cases() -> list[OpCase]:
    """Windows with and without stride, padding, dilation, ceil_mode's partial last window,
    3-d and 4-d inputs and an empty batch; max pooling's inputs are distinct (no ties)."""
    out = []
    rng = _rng("max_pool2d_with_indices")
    for shape, kernel, stride, padding, dilation, ceil_mode in (
            ((1, 2, 5, 5), [2], [], [0], [1], False), ((2, 6, 7), [3, 2], [2, 1], [1, 0], [1], False),
            ((1, 1, 7, 7), [3], [2], [1], [2], True), ((1, 1, 5, 5), [2], [2], [0], [1], True),
            ((2, 1, 4, 5), [2, 3], [1], [1], [1, 2], False), ((0, 2, 4, 4), [2], [], [0], [1], False)):
        out.append(OpCase("max_pool2d_with_indices", _pool_id(shape, kernel, stride, padding, dilation, ceil_mode),
                          (_distinct(rng, shape), kernel, stride, padding, dilation, ceil_mode)))
    rng = _rng("max_pool2d_with_indices_backward")
    for shape, pooled, kernel, stride, padding, dilation, ceil_mode in (
            ((1, 2, 5, 5), (2, 2), [2], [2], [0], [1], False), ((2, 6, 7), (3, 6), [3, 2], [2, 1], [1, 0], [1], False),
            ((1, 1, 7, 7), (3, 3), [3], [2], [1], [2], True), ((0, 2, 4, 4), (2, 2), [2], [2], [0], [1], False)):
        out_shape = shape[:-2] + pooled
        out.append(OpCase("max_pool2d_with_indices_backward",
                          _pool_id(shape, kernel, stride, padding, dilation, ceil_mode),
                          (_normal(rng, out_shape), _normal(rng, shape), kernel, stride, padding, dilation, ceil_mode,
                           _index(rng, out_shape, shape[-2] * shape[-1]))))
    rng = _rng("avg_pool2d")
    for shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override in (
            ((1, 2, 5, 5), [2], [], [0], False, True, None), ((2, 6, 7), [3, 2], [2, 1], [1, 0], False, True, None),
            ((1, 1, 7, 6), [3], [2], [1], True, False, None), ((1, 1, 5, 5), [2], [2], [0], True, True, 3),
            ((2, 3, 4), [2, 1], [1], [1, 0], False, False, None), ((0, 2, 4, 4), [2], [], [0], False, True, None)):
        out.append(OpCase("avg_pool2d", _pool_id(shape, kernel, stride, padding, ceil_mode, count_include_pad,
                                                 divisor_override),
                          (_normal(rng, shape), kernel, stride, padding, ceil_mode, count_include_pad,
                           divisor_override)))
    rng = _rng("avg_pool2d_backward")
    for shape, pooled, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override in (
            ((1, 2, 5, 5), (2, 2), [2], [2], [0], False, True, None),
            ((2, 6, 7), (3, 6), [3, 2], [2, 1], [1, 0], False, True, None),
            ((1, 1, 7, 6), (4, 4), [3], [2], [1], True, False, None),
            ((1, 1, 5, 5), (3, 3), [2], [2], [0], True, True, 3), ((0, 2, 4, 4), (2, 2), [2], [2], [0], False, True, None)):
        out.append(OpCase("avg_pool2d_backward", _pool_id(shape, kernel, stride, padding, ceil_mode,
                                                          count_include_pad, divisor_override),
                          (_normal(rng, shape[:-2] + pooled), _normal(rng, shape), kernel, stride, padding, ceil_mode,
                           count_include_pad, divisor_override)))
    return out


def _list_output_cases() -> list[OpCase]:
    """Operators with a ``Tensor[]`` output: split, split_with_sizes, chunk, unbind (formulas/lists.py)."""
    out = []
    rng = _rng("split.Tensor")
    for shape, size, dim in (((5, 3), 2, 0), ((5, 3), 3, -1), ((4,), 4, 0), ((4,), 8, 0), ((2, 6, 2), 4, 1),
                             ((0, 3), 2, 0), ((3, 0), 0, 1), ((3, 0), 2, 0)):
        out.append(OpCase("split.Tensor", f"{_shape_id(shape)}_size{size}_dim{dim}", (_normal(rng, shape), size, dim)))
    rng = _rng("split_with_sizes")
    for shape, sizes, dim in (((5, 3), [2, 3], 0), ((5, 3), [1, 0, 2], -1), ((4,), [4], 0),
                              ((2, 6, 2), [1, 2, 3], 1), ((0, 3), [0, 0], 0)):
        out.append(OpCase("split_with_sizes", f"{_shape_id(shape)}_sizes{'_'.join(map(str, sizes))}_dim{dim}",
                          (_normal(rng, shape), sizes, dim)))
    rng = _rng("split.sizes")
    for shape, sizes, dim in (((5, 3), [2, 3], 0), ((5, 3), [3, 0], 1), ((2, 6, 2), [1, 5], 1)):
        out.append(OpCase("split.sizes", f"{_shape_id(shape)}_sizes{'_'.join(map(str, sizes))}_dim{dim}",
                          (_normal(rng, shape), sizes, dim)))
    rng = _rng("chunk")
    for shape, chunks, dim in (((5, 3), 2, 0), ((5, 3), 3, -1), ((4,), 4, 0), ((3,), 5, 0), ((2, 6, 2), 4, 1),
                               ((0, 3), 2, 0)):
        out.append(OpCase("chunk", f"{_shape_id(shape)}_chunks{chunks}_dim{dim}", (_normal(rng, shape), chunks, dim)))
    rng = _rng("unbind.int")
    for shape, dim in (((3, 2), 0), ((3, 2), -1), ((4,), 0), ((2, 3, 4), 1), ((1, 2), 0), ((2, 0), 0)):
        out.append(OpCase("unbind.int", f"{_shape_id(shape)}_dim{dim}", (_normal(rng, shape), dim)))
    return out


# index.Tensor and index_put (formulas/indexing.py): a Tensor?[] argument is a list of
# int64 / bool arrays and None (a whole dimension)

def _indices_id(indices: list) -> str:
    parts = []
    for index in indices:
        if index is None:
            parts.append("all")
        else:
            parts.append(("mask" if index.dtype == np.bool_ else "int") + (_shape_id(index.shape) or "scalar"))
    return "_".join(parts)


def _advanced_indexing_cases() -> list[OpCase]:
    out = []
    ints = lambda *values: np.asarray(values, dtype=np.int64)     # noqa: E731
    rng = _rng("index.Tensor")
    for shape, indices in (((4, 3), [ints(2, 0, 2)]),                        # a repeated row
                           ((4, 3), [None, ints(1, 1)]),                     # x[:, idx]
                           ((3, 4), [_mask(rng, (3, 4))]),                   # x[mask]
                           ((3, 4), [np.array([True, False, True])]),        # a mask of the first dim
                           ((2, 3, 4), [None, ints(2, 0), ints(1, 3)]),      # adjacent: in place
                           ((2, 3, 4), [ints(1, 0), None, ints(3, 3)]),      # apart: to the front
                           ((2, 3, 4), [ints(1), np.asarray([[0], [2]])]),   # broadcast index tensors
                           ((5,), [np.asarray(3)]),                          # a 0-d index
                           ((4, 3), [ints()]),                               # nothing selected
                           ((0, 3), [None, ints(0, 2)])):
        out.append(OpCase("index.Tensor", f"{_shape_id(shape)}_{_indices_id(indices)}",
                          (_normal(rng, shape), indices)))
    rng = _rng("index_put")
    mask = np.asarray([[True, False, True, False], [False, False, True, True], [True, False, False, False]])
    for shape, indices, values_shape, accumulate in (
            ((4, 3), [ints(2, 0)], (2, 3), False),
            ((4, 3), [ints(2, 0, 2)], (3,), True),                 # repeated, accumulated, broadcast
            ((3, 4), [mask], (5,), False),                          # x[mask] = v
            ((3, 4), [mask], (), True),
            ((3, 4), [None, ints(1, 3)], (1,), False),              # x[:, idx] = v
            ((2, 3, 4), [ints(1, 0), None, ints(2, 3)], (2, 1), False),
            ((2, 3, 4), [None, ints(2, 0), ints(1, 3)], (2, 2), True),
            ((4, 3), [ints()], (3,), False),
            ((0, 3), [None, ints(0, 2)], (0, 2), True)):
        out.append(OpCase("index_put", f"{_shape_id(shape)}_{_indices_id(indices)}_values{_shape_id(values_shape)}"
                          f"_acc{int(accumulate)}",
                          (_normal(rng, shape), indices, _normal(rng, values_shape), accumulate)))
    return out



# ---------------------------------------------------------------------------
# layer_norm, dropout with its mask, hardsigmoid (formulas/normalization.py, layers.py, activations.py)

def _layer_norm_dropout_hardsigmoid_cases() -> list[OpCase]:
    out = []
    for op in ("native_layer_norm", "layer_norm"):
        rng = _rng(op)
        # (input shape, normalized_shape, weight?, bias?, eps)
        for shape, normalized, weighted, biased, eps in (
                ((2, 3, 4), [4], True, True, 1e-5), ((2, 3, 4), [3, 4], True, False, 1e-5),
                ((2, 3, 4), [3, 4], False, True, 1e-3), ((5,), [5], False, False, 1e-5),
                ((3, 1, 2), [1, 2], True, True, 0.5), ((4, 1), [1], True, True, 0.1),
                ((0, 3), [3], True, True, 1e-5)):
            weight = _normal(rng, tuple(normalized)) if weighted else None
            bias = _normal(rng, tuple(normalized)) if biased else None
            out.append(OpCase(op, f"{_shape_id(shape)}_norm{'x'.join(map(str, normalized))}"
                                  f"_w{int(weighted)}_b{int(biased)}_eps{eps}",
                              (_normal(rng, shape), normalized, weight, bias, eps)))
    rng = _rng("layer_norm")
    out.append(OpCase("layer_norm", "2x3_defaults", (_normal(rng, (2, 3)), [3], None, None)))
    out.append(OpCase("layer_norm", "2x3_cudnn_off", (_normal(rng, (2, 3)), [3], None, None, 1e-5, False)))
    # deterministic dropout only: evaluation, p = 0 and p = 1 (the random case: tests/cpp/test_compiled_dropout.py,
    # tests/engine/test_dropout.py). No empty input: torch's native_dropout returns the input itself then
    # (and sets its history), which the compiled op, running it, does too.
    rng = _rng("native_dropout")
    for shape, p, train in (((2, 3), 0.5, False), ((2, 3), 0.0, True), ((4,), 0.0, None), ((2, 3), 1.0, True),
                            ((3,), 1.0, None), ((), 0.3, False), ((1, 4), 0.7, False)):
        out.append(OpCase("native_dropout", f"{_shape_id(shape)}_p{p}_train{train}", (_normal(rng, shape), p, train)))
    rng = _rng("native_dropout_backward")
    for grad_shape, mask_shape, scale in (((2, 3), (2, 3), 2.0), ((), (), 1.5), ((3,), (2, 3), 2.0),
                                          ((2, 3), (3,), 1.25), ((0, 2), (0, 2), 2.0), ((4,), (4,), 0.0)):
        out.append(OpCase("native_dropout_backward", f"{_shape_id(grad_shape, mask_shape)}_scale{scale}",
                          (_normal(rng, grad_shape), _mask(rng, mask_shape), scale)))
    rng = _rng("hardsigmoid")
    out += [OpCase("hardsigmoid", _shape_id(shape), (_avoiding(-3.0, 3.0)(rng, shape),)) for shape in UNARY_SHAPES]
    rng = _rng("hardsigmoid_backward")
    for left, right in (((2, 3), (2, 3)), ((), ()), ((0, 2), (0, 2)), ((4,), (4,)), ((3,), (2, 3)), ((2, 1, 3), (2, 1, 3))):
        out.append(OpCase("hardsigmoid_backward", _shape_id(left, right),
                          (_normal(rng, left), _avoiding(-3.0, 3.0)(rng, right))))
    return out


# ---------------------------------------------------------------------------
# cumprod and the vector norms (formulas/scans.py, linalg.py). cumprod is a polynomial, so its
# zeros (one to four in a slice) are ordinary points: first and second order are checked there.
# A norm's zero is a kink: its subgradient is compared with torch's in tests/pointwise_kinks.py.

def _cumprod_and_norm_cases() -> list[OpCase]:
    out = []
    op = "cumprod"
    rng = _rng(op)
    for shape, dim in (((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((5,), 0), ((), 0), ((), -1), ((0, 3), 1)):
        out.append(OpCase(op, f"{_shape_id(shape)}_dim{dim}", (_away_from_zero(rng, shape), dim)))
    out.append(OpCase(op, "3x4_dim1_dtype_float64", (_away_from_zero(rng, (3, 4)), 1), {"dtype": np.float64}))
    zeros = _with_zeros(rng, 5, (0, 1, 2, 3, 4))       # a row with no zero, one, two, three, four
    out.append(OpCase(op, "zeros_0_to_4_per_row_dim1", (zeros, 1)))
    out.append(OpCase(op, "zeros_0_to_4_per_row_dim0", (zeros.copy(), 0)))
    out.append(OpCase(op, "adjacent_zeros_dim0", (np.asarray([0.7, 0.0, 0.0, -1.2, 0.0, 0.9]), 0)))
    out.append(OpCase(op, "scalar_zero", (np.zeros(()), 0)))
    inf = float("inf")
    op = "linalg_vector_norm"
    rng = _rng(op)
    for shape, order, dim, keepdim in (((3, 4), 2, None, False), ((3, 4), 1, [1], False),
                                       ((2, 3, 4), 3, [-1, 0], True), ((5,), inf, None, False),
                                       ((3, 4), -inf, [0], True), ((3, 4), 0, [1], False),
                                       ((3, 4), 0.5, [1], False), ((2, 3), -1.5, None, True),
                                       ((), 2, None, False), ((), inf, [0], True), ((0, 3), 2, [1], False),
                                       ((2, 3), 2, [], True), ((4, 1), 2, [0], False)):
        # +-inf: no ties among |x| (one value alone is _distinct's mean: 0, a kink)
        values = _distinct(rng, shape) if order in (inf, -inf) and shape else _away_from_zero(rng, shape)
        dim_id = "none" if dim is None else "_".join(map(str, dim)) or "empty"
        out.append(OpCase(op, f"{_shape_id(shape)}_ord{order}_dim{dim_id}_keep{int(keepdim)}",
                          (values, order, dim, keepdim)))
    out.append(OpCase(op, "3x4_ord2_dim1_dtype_float64", (_away_from_zero(rng, (3, 4)), 2, [1]),
                      {"dtype": np.float64}))
    with_zero = _away_from_zero(rng, (3, 4))
    with_zero[1, 2] = 0.0           # |x|^3 is twice differentiable at 0: an ordinary point for p = 3
    out.append(OpCase(op, "3x4_ord3_dim1_an_element_zero", (with_zero, 3, [1], False)))

    op = "norm.Scalar"
    rng = _rng(op)
    for shape, p in (((3, 4), 2), ((5,), 1), ((2, 3), 3), ((2, 3), inf), ((2, 3), -0.5), ((), 2), ((0, 3), 2)):
        values = _distinct(rng, shape) if p == inf else _away_from_zero(rng, shape)
        out.append(OpCase(op, f"{_shape_id(shape)}_p{p}", (values, p)))

    op = "norm.ScalarOpt_dim"
    rng = _rng(op)
    for shape, p, dim, keepdim in (((3, 4), None, [1], False), ((3, 4), 2, [0, 1], True),
                                   ((2, 3, 4), 1.5, [-1], False), ((3, 4), -inf, [1], False),
                                   ((3, 4), 0, [0], True), ((2, 3), 4, [], False), ((0, 3), 1, [1], True)):
        values = _distinct(rng, shape) if p == -inf else _away_from_zero(rng, shape)
        out.append(OpCase(op, f"{_shape_id(shape)}_p{p}_dim{'_'.join(map(str, dim)) or 'empty'}_keep{int(keepdim)}",
                          (values, p, dim, keepdim)))
    return out


def _convolution_cases() -> list[OpCase]:
    """``convolution`` and ``conv1d``/``conv2d``/``conv_transpose1d``/``conv_transpose2d.input``
    (formulas/convolution.py): strides that do not divide the input (the input gradient's
    output_padding), padding, dilation, groups, one parameter value for every dim, transposed with
    output_padding at and above the stride, an empty batch, unbatched inputs."""
    out = []
    rng = _rng("convolution")
    for input_shape, weight_shape, with_bias, stride, padding, dilation, transposed, output_padding, groups in (
            ((2, 4, 7), (6, 2, 3), True, [1], [0], [1], False, [0], 2),
            ((2, 3, 8), (4, 3, 3), False, [2], [1], [2], False, [0], 1),
            ((2, 2, 5, 4), (3, 2, 2, 3), True, [2, 1], [1, 0], [2, 1], False, [0, 0], 1),
            ((1, 4, 5, 5), (4, 2, 3, 3), True, [2], [1], [1], False, [0], 2),
            ((1, 1, 1), (1, 1, 1), True, [1], [0], [1], False, [0], 1),
            ((0, 2, 5), (3, 2, 2), True, [1], [0], [1], False, [0], 1),
            ((2, 4, 3), (4, 3, 3), True, [2], [1], [1], True, [1], 2),
            ((1, 2, 3, 2), (2, 2, 2, 2), False, [2, 1], [1, 0], [3, 2], True, [2, 1], 1),
            ((2, 2, 3, 3), (2, 1, 2, 2), True, [1], [0], [1], True, [0], 2)):
        kind = "transposed" if transposed else "conv"
        out.append(OpCase("convolution", f"{kind}_{_shape_id(input_shape, weight_shape)}{'_bias' if with_bias else ''}"
                          f"_s{'_'.join(map(str, stride))}_p{'_'.join(map(str, padding))}"
                          f"_d{'_'.join(map(str, dilation))}_op{'_'.join(map(str, output_padding))}_g{groups}",
                          (_normal(rng, input_shape), _normal(rng, weight_shape),
                           _normal(rng, (weight_shape[1] * groups if transposed else weight_shape[0],))
                           if with_bias else None,
                           stride, padding, dilation, transposed, output_padding, groups)))
    for op, cases in (
            ("conv1d", (((2, 4, 7), (6, 2, 3), True, {"stride": [2], "padding": [1], "dilation": [1], "groups": 2}),
                        ((3, 6), (2, 3, 2), False, {"stride": [1], "padding": [0], "dilation": [2], "groups": 1}),
                        ((1, 2, 5), (3, 2, 3), True, {}))),
            ("conv2d", (((2, 2, 5, 4), (3, 2, 2, 3), True, {"stride": [2, 1], "padding": [1, 0], "dilation": [2, 1],
                                                            "groups": 1}),
                        ((4, 4, 5), (4, 2, 3, 2), True, {"stride": [1, 2], "padding": [0, 1], "dilation": [1, 1],
                                                         "groups": 2}),
                        ((1, 1, 3, 3), (2, 1, 2, 2), False, {}))),
            ("conv_transpose1d", (((2, 4, 3), (4, 3, 3), True, {"stride": [2], "padding": [1], "output_padding": [1],
                                                                "groups": 2, "dilation": [1]}),
                                  ((2, 4), (2, 1, 2), False, {"stride": [3], "padding": [0], "output_padding": [2],
                                                              "groups": 1, "dilation": [3]}),
                                  ((1, 1, 4), (1, 2, 3), True, {}))),
            ("conv_transpose2d.input", (((1, 2, 3, 2), (2, 2, 2, 2), True, {"stride": [2, 1], "padding": [1, 0],
                                                                            "output_padding": [1, 0], "groups": 1,
                                                                            "dilation": [1, 2]}),
                                        ((2, 2, 3), (2, 1, 2, 2), False, {"stride": [1, 1], "padding": [0, 0],
                                                                          "output_padding": [0, 0], "groups": 2,
                                                                          "dilation": [1, 1]}),
                                        ((1, 1, 2, 2), (1, 1, 2, 2), True, {})))):
        rng = _rng(op)
        transposed = op.startswith("conv_transpose")
        for input_shape, weight_shape, with_bias, params in cases:
            groups = params.get("groups", 1)
            bias = _normal(rng, (weight_shape[1] * groups if transposed else weight_shape[0],)) if with_bias else None
            names = ("stride", "padding", "output_padding", "groups", "dilation") if transposed else \
                ("stride", "padding", "dilation", "groups")
            extra = "".join(f"_{name}{'_'.join(map(str, np.atleast_1d(params[name])))}"
                            for name in names if name in params)
            out.append(OpCase(op, f"{_shape_id(input_shape, weight_shape)}{'_bias' if with_bias else ''}{extra}",
                              (_normal(rng, input_shape), _normal(rng, weight_shape), bias,
                               *(params[name] for name in names if name in params))))
    return out


ALL_CASES: list[OpCase] = build_cases()


def first_and_second_order(fn, case: OpCase):
    """``fn``'s outputs, first-order gradients (random upstream) and second-order gradients (of
    the first ones along random probes) on ``case``'s differentiated tensors, seeded: two
    implementations of one op compare equal on them."""
    import torch

    call, leaves = differentiable_view(case, fn)
    out = call(*leaves)
    # a floating output may carry no gradient (nll_loss_forward's total_weight), in torch's op as in
    # ours: the count of those that do is compared
    outs = [o for o in (list(out) if isinstance(out, (tuple, list)) else [out]) if o.requires_grad]
    generator = torch.Generator().manual_seed(0)
    upstream = [torch.randn(o.shape, dtype=o.dtype, generator=generator) for o in outs]
    firsts = torch.autograd.grad(outs, leaves, upstream, create_graph=True, allow_unused=True)
    firsts = [g if g is not None else torch.zeros_like(x) for g, x in zip(firsts, leaves)]
    probes = [torch.randn(g.shape, dtype=g.dtype, generator=generator) for g in firsts]
    total = sum((g * p).sum() for g, p in zip(firsts, probes))
    seconds = (torch.autograd.grad(total, leaves, allow_unused=True) if total.requires_grad
               else [None] * len(leaves))
    seconds = [g if g is not None else torch.zeros_like(x) for g, x in zip(seconds, leaves)]
    return outs, firsts, seconds
