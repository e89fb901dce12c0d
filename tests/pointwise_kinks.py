"""Inputs exactly at the kinks, ties, bounds and NaNs of the pointwise operators, where finite
differences say nothing but torch picks a gradient (``abs'(0) = 0``, a clamp passes it at its
bounds to ``self``, ``minimum``/``maximum`` halve it at a tie, ``fmin``/``fmax`` give it to ``self``...),
and at the vector norms' zeros (a zero slice: gradient 0; a zero element: 0 for every order;
+-inf norms share it among tied extremes).
The engine (``tests/engine/test_kinks.py``) and the compiled ops (``tests/cpp/test_compiled_kinks.py``)
must give torch's first-order gradient on each, NaN where torch's is NaN.
"""
from __future__ import annotations

import numpy as np

from op_cases import OpCase

NAN = float("nan")


def _array(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


_NORM_KINKS = np.asarray([[0.0, 0.0, 0.0], [1.0, -2.0, 0.0], [2.0, -2.0, 1.0]])
"""A zero row (norm 0), a row with a zero element, a row with a tie of ``|x|`` at its maximum."""

KINK_CASES: list[OpCase] = [
    OpCase("abs", "zero", (_array(0.0, -1.0, 2.0),)),
    OpCase("sign", "zero", (_array(0.0, -1.0, 2.0),)),
    OpCase("clamp", "at_bounds", (_array(-0.5, 0.8, -1.0, 1.0, 0.0, NAN), -0.5, 0.8)),
    OpCase("clamp", "min_above_max", (_array(-1.0, 0.2, 0.5, 2.0), 1.0, 0.2)),
    # self at min, at max, below, above, inside, NaN; all three equal; min > max with self at max; a bound left out
    OpCase("clamp.Tensor", "at_bounds", (_array(-0.5, 0.8, -1.0, 1.0, 0.0, NAN, 0.3, 0.3),
                                         _array(-0.5, -0.5, -0.5, -0.5, -0.5, -0.5, 0.3, 1.0),
                                         _array(0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.3, 0.3))),
    OpCase("clamp.Tensor", "equal_bounds", (_array(-1.0, 0.5, 2.0), _array(0.5, 0.5, 0.5), _array(0.5, 0.5, 0.5))),
    OpCase("clamp.Tensor", "at_min", (_array(-0.5, -1.0, 0.0, NAN), _array(-0.5, -0.5, -0.5, -0.5), None)),
    OpCase("clamp.Tensor", "at_max", (_array(0.8, 1.0, 0.0, NAN), None, _array(0.8, 0.8, 0.8, 0.8))),
    OpCase("clamp_min", "at_bound", (_array(0.25, 0.0, 1.0), 0.25)),
    OpCase("clamp_max", "at_bound", (_array(-0.25, 0.0, -1.0), -0.25)),
    OpCase("minimum", "ties_and_nan", (_array(1.0, 2.0, 3.0, NAN, 1.0), _array(1.0, 0.0, 4.0, 1.0, NAN))),
    OpCase("maximum", "ties_and_nan", (_array(1.0, 2.0, 3.0, NAN, 1.0), _array(1.0, 0.0, 4.0, 1.0, NAN))),
    OpCase("fmin", "ties_and_nan", (_array(1.0, 2.0, 3.0, NAN, 1.0), _array(1.0, 0.0, 4.0, 1.0, NAN))),
    OpCase("fmax", "ties_and_nan", (_array(1.0, 2.0, 3.0, NAN, 1.0), _array(1.0, 0.0, 4.0, 1.0, NAN))),
    OpCase("minimum", "broadcast_tie", (_array(1.0, 2.0), np.asarray(1.0))),
    OpCase("hardtanh", "at_bounds", (_array(-1.0, 1.0, 0.0, -2.0, 2.0),)),
    OpCase("relu6", "at_bounds", (_array(0.0, 6.0, 3.0, -1.0, 7.0),)),
    OpCase("hardswish", "at_bounds", (_array(-3.0, 3.0, 0.0, -4.0, 4.0),)),
    OpCase("leaky_relu", "zero", (_array(0.0, -1.0, 1.0), 0.2)),
    OpCase("elu", "zero", (_array(0.0, -1.0, 1.0), 0.5, 2.0, 1.5)),
    OpCase("selu", "zero", (_array(0.0, -1.0, 1.0),)),
    OpCase("celu", "zero", (_array(0.0, -1.0, 1.0), 0.7)),
    OpCase("threshold", "at_threshold", (_array(0.5, 0.0, 1.0), 0.5, -2.0)),
    OpCase("softplus", "at_threshold", (_array(10.0, 9.0, 11.0), 2.0, 20.0)),
    OpCase("sinc", "zero", (_array(0.0, 0.5, -1.5),)),
    OpCase("pow.Tensor_Tensor", "zero_base", (_array(0.0, 0.0, 0.0, 2.0), _array(0.0, 2.0, -1.0, 0.0))),
    OpCase("pow.Scalar", "zero_base", (0.0, _array(0.0, 2.0, -1.0))),
    OpCase("xlogy.Tensor", "zero_self", (_array(0.0, 0.0, 1.0), _array(2.0, NAN, 0.5))),
    OpCase("logit", "at_eps", (_array(0.1, 0.9, 0.05, 0.95, 0.5), 0.1)),
    OpCase("logit", "outside_unit", (_array(-0.5, 0.5, 1.5),)),
    OpCase("floor", "integers", (_array(1.0, -2.0, 0.0),)),
    OpCase("round", "halves", (_array(0.5, 1.5, -2.5),)),
    OpCase("softshrink", "at_bounds", (_array(-0.5, 0.5, 0.0, NAN, 1.0),)),
    OpCase("hardshrink", "at_bounds", (_array(-0.5, 0.5, 0.0, NAN, 1.0),)),
    OpCase("copysign.Tensor", "zero_self", (_array(0.0, -1.0, 2.0), _array(-1.0, 1.0, -0.0))),
    OpCase("xlogy.Scalar_Other", "zero_self", (_array(0.0, 1.0), 2.0)),
    OpCase("xlogy.Scalar_Other", "zero_self_negative_other", (_array(0.0, 1.0), -2.0)),
    OpCase("hardsigmoid", "at_bounds", (_array(-3.0, 3.0, 0.0, -4.0, 4.0),)),
    OpCase("hardsigmoid_backward", "at_bounds", (_array(1.0, -2.0, 0.5, 1.5, 3.0), _array(-3.0, 3.0, 0.0, -4.0, 4.0))),
    *[OpCase(op, f"zeros_and_ties_p{p}", (_NORM_KINKS.copy(), p, [1], False))
      for op in ("linalg_vector_norm", "norm.ScalarOpt_dim")
      for p in (0.0, 1.0, 2.0, 3.0, 0.5, 1.5, float("inf"), -float("inf"), -1.0, -2.5)],
    OpCase("linalg_vector_norm", "all_zeros", (np.zeros((2, 3)),)),
    OpCase("norm.Scalar", "all_zeros_p2", (np.zeros((2, 3)), 2.0)),
    OpCase("norm.Scalar", "all_zeros_p1", (np.zeros((2, 3)), 1.0)),
]
