"""Inputs at the domain edges of reductions, losses and activations where a formula's algebra
divides by zero or multiplies zero by infinity but torch's built-in gradient is a number: a
zero-variance row (``std``: 0), ``atan2(0, 0)`` (0 and -0), a product with an infinity and a
zero (``prod``, ``cumprod``), a NaN under an infinity norm (0), ``binary_cross_entropy`` at
inputs 0 and 1 (torch clamps the logs at -100), a variance whose correction exceeds the count,
and ``smooth_l1_loss(beta=0)`` / ``elu_backward`` at their kinks (torch's one-sided derivative).

The engine (``tests/engine/test_domain_edges.py``) and the compiled ops
(``tests/cpp/test_compiled_domain_edges.py``) must give torch's first-order gradient on each
(NaN where torch's is NaN) and, where torch's second-order gradient is finite, that too.

``cumprod`` with an infinity or a NaN is not among them: torch's own first-order gradient there
depends on grad mode, and only its ``create_graph=True`` one is the exact gradient
(``TORCH_SELF_DISAGREES``; ``tests/engine/test_domain_edges.py`` proves it against the definition).
"""
from __future__ import annotations

import numpy as np

from op_cases import ALL_CASES, NONDIFFERENTIABLE_CASES, OpCase, torch_args, torch_op

NAN = float("nan")
INF = float("inf")


def _array(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


_CONSTANT_ROW = np.asarray([[1.0, 1.0, 1.0], [1.0, 2.0, 4.0]])
"""A zero-variance row beside an ordinary one."""

EDGE_CASES: list[OpCase] = [
    OpCase("std", "constant", (np.ones(3),)),
    OpCase("std", "constant_biased", (np.ones(3), False)),
    OpCase("std.dim", "constant_row", (_CONSTANT_ROW.copy(), [1])),
    OpCase("std.correction", "constant_row", (_CONSTANT_ROW.copy(), [1]), {"correction": 0}),
    OpCase("std.correction", "constant_row_default", (_CONSTANT_ROW.copy(), [1])),
    OpCase("std.correction", "correction_above_count", (_CONSTANT_ROW.copy(), [1]), {"correction": 5}),
    OpCase("std.correction", "correction_equals_count", (_CONSTANT_ROW.copy(), [1]), {"correction": 3}),
    OpCase("var.correction", "correction_above_count", (_CONSTANT_ROW.copy(), [1]), {"correction": 5}),
    OpCase("var.correction", "correction_equals_count", (_CONSTANT_ROW.copy(), [1]), {"correction": 3}),
    OpCase("atan2", "origin", (_array(0.0, 0.0, 1.0, -0.0), _array(0.0, -0.0, 0.0, 0.0))),
    OpCase("prod", "inf_and_zero", (_array(INF, 0.0, 2.0),)),
    OpCase("prod", "nan_and_zero", (_array(NAN, 0.0, 2.0),)),
    OpCase("prod.dim_int", "inf_and_zero", (np.asarray([[INF, 0.0, 2.0], [3.0, -INF, 0.0], [1.0, 2.0, 3.0]]), 1)),
    *[OpCase("linalg_vector_norm", f"nan_ord_{name}", (_array(1.0, NAN, -3.0), ord))
      for name, ord in (("inf", INF), ("minus_inf", -INF))],
    OpCase("binary_cross_entropy", "at_zero_and_one",
           (_array(0.0, 1.0, 0.0, 1.0, 0.5), _array(0.0, 1.0, 1.0, 0.0, 0.5), None, 0)),
    OpCase("binary_cross_entropy", "at_zero_and_one_mean_weight",
           (_array(0.0, 1.0, 0.0, 1.0, 0.5), _array(0.0, 1.0, 1.0, 0.0, 0.5), _array(1.0, 2.0, 0.5, 3.0, 1.5), 1),
           differentiable=(0, 1)),
    OpCase("smooth_l1_loss", "beta0_at_kink", (_array(1.0, 2.0, 0.0), _array(1.0, 1.0, 1.0), 0, 0.0)),
    OpCase("elu_backward", "at_zero_of_input", (_array(1.0, 1.0, 1.0), 0.5, 2.0, 1.5, False, _array(0.0, -1.0, 1.0))),
    OpCase("elu_backward", "at_zero_of_result", (_array(1.0, 1.0, 1.0), 0.5, 2.0, 1.5, True, _array(0.0, -0.5, 1.0))),
]

TORCH_SELF_DISAGREES: list[OpCase] = [
    OpCase("cumprod", "inf_then_zero", (_array(2.0, INF, 0.0, 3.0), 0)),
    OpCase("cumprod", "nan_then_zero", (_array(2.0, NAN, 0.0, 3.0), 0)),
    OpCase("cumprod", "zero_then_inf", (_array(2.0, 0.0, INF, 3.0), 0)),
]
"""Where torch's first-order gradient differs between ``create_graph=False`` and ``True``: the
definition (the sum of products of the other entries) is the oracle (``tests/engine/test_domain_edges.py``)."""

INFINITE_ENTRY_CASES: list[OpCase] = [
    OpCase("cumprod", f"inf_at_{position}", (_array(*(INF if i == position else v for i, v in enumerate((2.0, 0.5, 3.0, 1.5)))), 0))
    for position in (0, 1, 3)
]
"""``cumprod`` with one infinite entry among positive ones: the second derivative at that entry is
a number (the products of the others), which torch's built-in gives as NaN (its backward divides by
the entry). The oracle is torch's autograd of the definition, :func:`product_chain_gradients`."""


def product_chain_gradients(case: OpCase) -> tuple[np.ndarray, np.ndarray]:
    """First and second order (weighted as :func:`torch_gradients`) of ``cumprod`` along dim 0 of a
    vector, by torch's autograd of the definition: ``out_k = out_{k-1} * x_k``, products only. On
    positive entries with one infinity (:data:`INFINITE_ENTRY_CASES`) no term holds ``0 * inf`` or
    ``inf - inf``, so its grouping of the products is the definition's value exactly."""
    import torch

    (x,) = [args for args in torch_args(case)[0] if isinstance(args, torch.Tensor)]
    outputs = [x[0]]
    for k in range(1, x.numel()):
        outputs.append(outputs[-1] * x[k])
    out = torch.stack(outputs)
    (first,) = torch.autograd.grad((out * _weights(out, 0.5, 1.5)).sum(), x, create_graph=True)
    (second,) = torch.autograd.grad((first * _weights(first, 0.7, 1.3)).sum(), x)
    return first.numpy(force=True), second.numpy(force=True)


EDGE_PATTERNS = {
    "zeros": (0.0,),
    "ties": (1.0,),
    "special": (0.0, INF, -1.0, NAN, -INF, 1.0, 1.0, -0.0),
}
"""The values the edge tier writes into every floating input, cycled over its elements: all zeros
(a zero divisor, base, norm, variance; log and sqrt at 0), all equal (ties of every extreme,
sort and clamp, a zero-variance slice), and zeros of both signs, +-inf, NaN and a tie side by side
(0 * inf, inf - inf and NaN through every branch)."""


def _floating_size(case: OpCase) -> int:
    tensors = [a for arg in case.args for a in (arg if isinstance(arg, list) else [arg])]
    return sum(a.size for a in tensors if isinstance(a, np.ndarray) and a.dtype == np.float64)


def _at_edge(values: tuple[float, ...], arg):
    if isinstance(arg, np.ndarray) and arg.dtype == np.float64:
        return np.resize(np.asarray(values), arg.size).reshape(arg.shape)
    if isinstance(arg, list):
        return [_at_edge(values, a) for a in arg]
    return arg


def edge_tier_cases(ops: list[str], element_wise: frozenset[str] = frozenset()) -> list[OpCase]:
    """For each operator of ``ops``, its catalogued case with the most floating elements (the
    catalogue gives each operator's shapes, dims and non-tensor arguments from its schema) with
    every floating tensor filled from each of :data:`EDGE_PATTERNS`, plus its catalogued cases
    with a size-0 input (empty and degenerate reductions). Index and mask inputs are kept.

    An operator of ``element_wise`` (one tensor input, each output element a function of the
    input element alone) gets the "special" pattern only when its widest case holds every value
    of it up to the first tie: its zeros and its ties would prove nothing new there."""
    catalogue: dict[str, list[OpCase]] = {}
    for case in ALL_CASES + NONDIFFERENTIABLE_CASES:
        catalogue.setdefault(case.op, []).append(case)
    edge_cases = []
    special = EDGE_PATTERNS["special"]
    for op in ops:
        widest = max(catalogue[op], key=_floating_size)
        patterns = EDGE_PATTERNS
        if op in element_wise and _floating_size(widest) > special.index(1.0):
            patterns = {"special": special}
        for pattern, values in patterns.items():
            edge_cases.append(OpCase(op, f"{widest.id}_{pattern}", tuple(_at_edge(values, a) for a in widest.args),
                                     {k: _at_edge(values, v) for k, v in widest.kwargs.items()},
                                     widest.differentiable))
        edge_cases.extend(case for case in catalogue[op]
                          if any(isinstance(a, np.ndarray) and a.size == 0 for a in case.args))
    return edge_cases


def _weights(t, low: float, high: float):
    import torch

    return torch.linspace(low, high, t.numel(), dtype=t.dtype).reshape(t.shape)


def torch_gradients(case: OpCase, create_graph: bool = True) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
    """torch's gradient of ``sum(op(...) * w)`` for each differentiated input, and the gradient of
    ``sum(first * v)`` (second order; ``None`` without ``create_graph``), as arrays."""
    import torch

    args, kwargs = torch_args(case)
    inputs = [args[i] for i in case.differentiable]
    out = torch_op(case.op)(*args, **kwargs)
    first = torch.autograd.grad((out * _weights(out, 0.5, 1.5)).sum(), inputs, create_graph=create_graph,
                                allow_unused=True)
    first = [torch.zeros_like(t) if g is None else g for g, t in zip(first, inputs)]
    if not create_graph:
        return [g.numpy(force=True) for g in first], [None] * len(inputs)
    weighted = [(g * _weights(g, 0.7, 1.3)).sum() for g in first if g.requires_grad]
    second = (torch.autograd.grad(sum(weighted), inputs, allow_unused=True) if weighted
              else [None] * len(inputs))
    return ([g.numpy(force=True) for g in first],
            [np.zeros(t.shape) if h is None else h.numpy(force=True) for h, t in zip(second, inputs)])


def assert_gradients_match(first: list, second: list, expected_first: list, expected_second: list) -> None:
    """First order equal (NaN where torch's is NaN); second order equal where torch's is finite and
    so is every first-order gradient of the same shape at that element (the derivative of an
    undefined first derivative is undefined: torch's number there, often a 0 from a rule that
    ignores the value, such as a rounding division's, is not an answer to check)."""
    for mine, expected in zip(first, expected_first, strict=True):
        np.testing.assert_allclose(np.zeros(expected.shape) if mine is None else mine, expected,
                                   rtol=1e-7, atol=1e-12, equal_nan=True)
    for mine, expected in zip(second, expected_second, strict=True):
        finite = np.isfinite(expected)
        for gradient in expected_first:
            finite &= (np.isfinite(gradient) if gradient.shape == expected.shape
                       else np.full(expected.shape, bool(np.isfinite(gradient).all())))
        got = np.zeros(expected.shape) if mine is None else np.broadcast_to(mine, expected.shape)
        np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-7, atol=1e-9)
