"""Comparisons, logical operators, tests of values and index reductions: no gradient.

Their outputs are bool or int64 tensors, so torch gives them no gradient and no tangent
(``x < y`` with ``x`` requiring grad is a tensor that does not).
"""
from __future__ import annotations

from formulas import nondifferentiable

nondifferentiable(
    "lt.Tensor(Tensor self, Tensor other) -> Tensor",
    "lt.Scalar(Tensor self, Scalar other) -> Tensor",
    "le.Tensor(Tensor self, Tensor other) -> Tensor",
    "le.Scalar(Tensor self, Scalar other) -> Tensor",
    "eq.Tensor(Tensor self, Tensor other) -> Tensor",
    "eq.Scalar(Tensor self, Scalar other) -> Tensor",
    "ne.Tensor(Tensor self, Tensor other) -> Tensor",
    "ne.Scalar(Tensor self, Scalar other) -> Tensor",
    "ge.Tensor(Tensor self, Tensor other) -> Tensor",
    "ge.Scalar(Tensor self, Scalar other) -> Tensor",
    "gt.Tensor(Tensor self, Tensor other) -> Tensor",
    "gt.Scalar(Tensor self, Scalar other) -> Tensor",
    "logical_not(Tensor self) -> Tensor",
    "logical_and(Tensor self, Tensor other) -> Tensor",
    "logical_or(Tensor self, Tensor other) -> Tensor",
    "logical_xor(Tensor self, Tensor other) -> Tensor",
    "isnan(Tensor self) -> Tensor",
    "isfinite(Tensor self) -> Tensor",
    "argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
    "argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
    "all(Tensor self) -> Tensor",
    "all.dim(Tensor self, int dim, bool keepdim=False) -> Tensor",
    "any(Tensor self) -> Tensor",
    "any.dim(Tensor self, int dim, bool keepdim=False) -> Tensor",
)
