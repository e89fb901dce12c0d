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
    """The built-in torch operator ``torch.ops.aten.<name>.<overload or default>``."""
    import torch

    name, _, overload = op.partition(".")
    return getattr(getattr(torch.ops.aten, name), overload or "default")


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
        if isinstance(out, tuple):   # every floating output (max.dim's indices are not)
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
    return out


# ---------------------------------------------------------------------------
# shape and indexing operators of formulas/shape_more.py and formulas/indexing_more.py (w-ops-c)

def _unique_index(rng: np.random.Generator, shape: tuple[int, ...], dim: int, bound: int) -> np.ndarray:
    """An index for ``scatter`` along ``dim``: distinct positions in every slice (a repeated
    position would make which value wins unspecified, and the gradient with it)."""
    index = np.empty(shape, dtype=np.int64)
    moved = np.moveaxis(index, dim, -1)
    for position in np.ndindex(moved.shape[:-1]):
        moved[position] = rng.permutation(bound)[:shape[dim]]
    return index


def _shape_more_cases() -> list[OpCase]:
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


def _indexing_more_cases() -> list[OpCase]:
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
        + _shape_more_cases() + _indexing_more_cases()
    )


ALL_CASES: list[OpCase] = build_cases()
