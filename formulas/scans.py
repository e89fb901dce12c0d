"""Cumulative reductions along a dim: ``cumsum`` and ``cumprod``, the latter exact where the input
has zeros, to second order (helper ``cumprod_backward``).
"""
from __future__ import annotations

from formulas import Tensor, at, derivative, helper
from formulas.helpers import wrap_dim


@derivative("cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", jvp="auto_linear")
def cumsum(self, dim, *, dtype=None):
    result = at.cumsum(self, dim, dtype=dtype)
    self_dtype = self.scalar_type()
    def backward(grad):
        # x_i reaches every out_k with k >= i: the reversed cumulative sum of grad,
        # sum_{k >= i} g_k = sum_k g_k - sum_{k <= i} g_k + g_i
        reversed_cumsum = at.sum(grad, [dim], True) - at.cumsum(grad, dim) + grad
        if dtype is None:
            return reversed_cumsum
        return at._to_copy(reversed_cumsum, dtype=self_dtype)
    return result, backward


# ----------------------------------------------------------------------------- cumprod
@helper
def reversed_cumsum(x: Tensor, dim: int) -> Tensor:
    """``sum_{k >= i} x_k`` along ``dim``: the cumulative sum of the flipped tensor, flipped back
    (no subtraction of partial sums, so no cancellation)."""
    return at.flip(at.cumsum(at.flip(x, [dim]), dim), [dim])


@helper
def cumprod_backward(grad: Tensor, self: Tensor, dim: int) -> Tensor:
    """Gradient of ``out_k = prod_{j <= k} x_j`` along ``dim`` (wrapped), exact where ``x`` has
    zeros, and with an exact derivative there (so double backward is exact too).

    ``d out_k / d x_i = prod_{j <= k, j != i} x_j`` for ``k >= i``, so the gradient is
    ``G_i = sum_{k >= i} g_k prod_{j <= k, j != i} x_j``. Write ``x~`` for ``x`` with its zeros
    replaced by ones, ``Q = cumprod(x~)`` and ``W = g Q``; the zeros ``z1 < z2 < ...`` of a slice
    cut it into segments (segment ``s``: positions with ``s`` zeros at or before them), and
    ``A_s(i) = sum_{k >= i in segment s} W_k``. A product that skips ``i`` keeps every zero
    ``<= k`` other than ``i``; to first order in the zero entries (what the value and the first
    derivative need) it is 1 with none of them, ``x_z`` with one (value 0, derivative 1) and 0
    with two or more. So, with ``Z1``, ``Z2`` the entries at the first two zeros (value 0):

    * segment 0: ``G_i = (A_0(i) + Z1 A_1(i)) / x_i``;
    * the first zero: ``G = A_1 + Z2 A_2`` (the product of the others, and its slope in ``x_z2``);
    * segment 1, non-zero: ``G_i = Z1 A_1(i) / x_i``;  the second zero: ``G = Z1 A_2``;
    * everything else: 0 (two zero factors).

    Dividing by ``x~`` (1 at the zeros) is exact. Cost: O(n) per slice, about 25 elementwise or
    scan kernels (three reversed cumulative sums, one ``cumprod``, eleven ``where``); torch
    branches on the data and, without zeros, divides one reversed cumulative sum by ``x``: the
    compiled backward measured 9-11x torch's (float32 44x66x88 along the last dim,
    ``benchmarks/cpp_backward.py --ops cumprod``). Derivatives of third order at a point with two or more
    zeros in a slice would need the products of several zero entries, which are left out
    (as ``prod_others`` leaves them out for ``prod``).
    """
    is_zero = at.eq(self, 0.0)
    segment = at.cumsum(is_zero, dim)          # how many zeros at or before each position
    nonzero = at.where(is_zero, at.ones_like(self), self)
    weighted = grad * at.cumprod(nonzero, dim)
    zeros = at.zeros_like(weighted)
    in_0 = at.eq(segment, 0)
    in_1 = at.eq(segment, 1)
    in_2 = at.eq(segment, 2)
    tail_0 = reversed_cumsum(at.where(in_0, weighted, zeros), dim)
    tail_1 = reversed_cumsum(at.where(in_1, weighted, zeros), dim)
    tail_2 = reversed_cumsum(at.where(in_2, weighted, zeros), dim)
    self_zeros = at.zeros_like(self)
    first_zero = at.sum(at.where(at.logical_and(is_zero, in_1), self, self_zeros), [dim], True)
    second_zero = at.sum(at.where(at.logical_and(is_zero, in_2), self, self_zeros), [dim], True)
    in_segment_1 = at.where(is_zero, tail_1 + second_zero * tail_2, first_zero * tail_1)
    at_second_zero = at.where(is_zero, first_zero * tail_2, zeros)
    scaled = at.where(in_0, tail_0 + first_zero * tail_1,
                      at.where(in_1, in_segment_1, at.where(in_2, at_second_zero, zeros)))
    return scaled / nonzero


@helper
def cumprod_jvp(self_t: Tensor, self: Tensor, dim: int) -> Tensor:
    """Tangent of ``cumprod`` along ``dim`` (wrapped), exact at zeros: ``sum_{i <= k} t_i
    prod_{j <= k, j != i} x_j`` is ``Q_k cumsum(t / x)_k`` before the first zero, ``t_z1 Q_k``
    from the first zero to the second (only the term that skips it survives), 0 after
    (``Q = cumprod`` of ``x`` with its zeros replaced by ones)."""
    is_zero = at.eq(self, 0.0)
    segment = at.cumsum(is_zero, dim)
    nonzero = at.where(is_zero, at.ones_like(self), self)
    prefix = at.cumprod(nonzero, dim)
    zeros = at.zeros_like(prefix)
    in_1 = at.eq(segment, 1)
    first_zero_t = at.sum(at.where(at.logical_and(is_zero, in_1), self_t, at.zeros_like(self_t)), [dim], True)
    return at.where(at.eq(segment, 0), prefix * at.cumsum(self_t / nonzero, dim),
                    at.where(in_1, prefix * first_zero_t, zeros))


@derivative("cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor")
def cumprod(self, dim, *, dtype=None):
    result = at.cumprod(self, dim, dtype=dtype)
    scan_dim = wrap_dim(dim, self.dim())
    self_dtype = self.scalar_type()
    def backward(grad):
        gradient = grad
        if self.dim() > 0:      # a 0-d tensor is its own cumulative product
            gradient = cumprod_backward(grad, self, scan_dim)
        if dtype is None:
            return gradient
        else:
            return at._to_copy(gradient, dtype=self_dtype)
    def jvp(self_t):
        tangent = self_t
        if self.dim() > 0:
            tangent = cumprod_jvp(self_t, self, scan_dim)
        if dtype is None:
            return tangent
        else:
            return at._to_copy(tangent, dtype=dtype)
    return result, backward
