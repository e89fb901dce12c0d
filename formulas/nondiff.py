"""Operators whose outputs carry no gradient, called by backward formulas and helpers."""
from __future__ import annotations

from formulas import nondifferentiable

nondifferentiable(
    "gt.Scalar(Tensor self, Scalar other) -> Tensor",
    "zeros_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
    "bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
    "new_zeros(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, "
    "Device? device=None, bool? pin_memory=None) -> Tensor",
)
