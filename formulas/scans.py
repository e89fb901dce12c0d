"""Cumulative reductions along a dim: ``cumsum`` and ``cumprod``, the latter exact for every input
(zeros, infinities, NaN), to any order (helper ``cumprod_backward``: products and sums, no division).
"""
from __future__ import annotations

import math

from formulas import Tensor, at, derivative, helper
from formulas.helpers import sum_to, wrap_dim


@derivative("cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", jvp="auto_linear")
def cumsum(self, dim, *, dtype=None):
    result = at.cumsum(self, dim, dtype=dtype)
    self_dtype = self.scalar_type()
    def backward(grad):
        # x_i reaches every out_k with k >= i: the reversed cumulative sum of grad,
        # sum_{k >= i} g_k, a cumulative sum of grad read from the end (one scan, as torch's
        # FunctionsManual does; its transpose folds to a cumsum: flip undoes flip)
        reversed_cumsum = at.flip(at.cumsum(at.flip(grad, [dim]), dim), [dim])
        if dtype is None:
            return reversed_cumsum
        return at._to_copy(reversed_cumsum, dtype=self_dtype)
    return result, backward


# ----------------------------------------------------------------------------- cumprod
@helper
def reversed_linear_recurrence(offset: Tensor, factor: Tensor, dim: int) -> Tensor:
    """The solution of ``h_i = offset_i + factor_i h_{i+1}`` along ``dim`` (``h`` is ``offset`` at
    the last position; the last ``factor`` is not read), so ``h_i = sum_{k >= i} offset_k
    prod_{i <= j < k} factor_j``. Each position holds the affine map ``h -> b + a h`` of the steps
    from it to ``span`` places on, and composes it with the one there, doubling ``span``: ``ceil(log2
    n)`` rounds of products and sums, no division, so a zero, an infinity or a NaN enters only the
    terms that multiply it, as in the sum above, and every derivative of the result is exact too."""
    n = offset.size(dim)
    tail = offset
    steps = factor
    span = 1
    while span < n:
        kept = n - span
        composed = at.narrow(tail, dim, 0, kept) + at.narrow(steps, dim, 0, kept) * at.narrow(tail, dim, span, kept)
        tail = at.cat([composed, at.narrow(tail, dim, kept, span)], dim)
        if 2 * span < n:
            # only the maps that the next round composes: an unused product would put 0 * inf
            # into the gradient of a used one
            reused = n - 2 * span
            doubled = at.narrow(steps, dim, 0, reused) * at.narrow(steps, dim, span, reused)
            steps = at.cat([doubled, at.narrow(steps, dim, reused, n - reused)], dim)
        span = span * 2
    return tail


@helper
def reversed_linear_recurrence_transposed(adjoint: Tensor, factor: Tensor, dim: int, offset_sizes: list[int]) -> Tensor:
    """The transpose of :func:`reversed_linear_recurrence` in ``offset`` (``factor`` held), at
    ``adjoint``: ``y_k = sum_{i <= k} adjoint_i prod_{i <= j < k} factor_j``, so ``y_k = adjoint_k +
    factor_{k-1} y_{k-1}``, the same recurrence read from the other end: on the flipped tensors, with
    each position's factor the one before it (``factor`` rolled one place; its last entry, rolled to
    the first and flipped to the end, is not read, as there). Summed to ``offset``'s sizes. Declared
    in ``TRANSPOSED_BY_HELPERS`` (the derived jvp's one step where the rounds transpose to many)."""
    if adjoint.size(dim) <= 1:
        return sum_to(adjoint, offset_sizes)
    preceding = at.flip(at.roll(factor, [1], [dim]), [dim])
    recurrence = reversed_linear_recurrence(at.flip(adjoint, [dim]), preceding, dim)
    return sum_to(at.flip(recurrence, [dim]), offset_sizes)


@helper
def exclusive_cumprod(self: Tensor, dim: int) -> Tensor:
    """``prod_{j < i} x_j`` along ``dim`` (1 at the first position), from the entries it multiplies
    only (so the gradient of an unused last product never meets an infinity). Products only, as
    the backward's definition: each round multiplies every position by the one ``span`` places
    before it, doubling ``span`` (``ceil(log2 n)`` rounds), so every derivative is the product
    rule's, exact at zeros and infinities to any order. (``at.cumprod`` would be one call, but in
    C++ it carries torch's own backward, which divides by the entries: NaN in the second order at
    an infinite entry.)"""
    n = self.size(dim)
    first = at.ones_like(at.narrow(self, dim, 0, 1))
    if n == 1:
        return first
    product = at.narrow(self, dim, 0, n - 1)
    span = 1
    while span < n - 1:
        kept = n - 1 - span
        shifted = at.narrow(product, dim, span, kept) * at.narrow(product, dim, 0, kept)
        product = at.cat([at.narrow(product, dim, 0, span), shifted], dim)
        span = span * 2
    return at.cat([first, product], dim)


@helper
def cumprod_backward(grad: Tensor, self: Tensor, dim: int) -> Tensor:
    """Gradient of ``out_k = prod_{j <= k} x_j`` along ``dim`` (wrapped), exact for every input:
    zeros, infinities and NaN included, and with an exact derivative (so double backward is exact).

    ``d out_k / d x_i = prod_{j <= k, j != i} x_j`` for ``k >= i``, so the gradient is
    ``G_i = sum_{k >= i} g_k prod_{j <= k, j != i} x_j = P_i h_i`` with ``P_i = prod_{j < i} x_j``
    and ``h_i = sum_{k >= i} g_k prod_{i < j <= k} x_j``, that is ``h_i = g_i + x_{i+1} h_{i+1}``.
    Products and sums only, as the definition: dividing the output by ``x_i`` (torch without
    create_graph, or without a zero) gives NaN at an infinite entry whose gradient is a number.
    Grouping the factors drops one IEEE case of the definition: a term whose factors hold both a
    zero and an infinity is NaN (the last term of ``G_i`` has every other entry of the slice as
    factors), which ``P_i h_i`` can miss when the two sit on either side of ``i``; such ``G_i``
    get a NaN added (not filled in: the derivative of ``G_i`` in another entry is still a number,
    as the definition's, so the second-order gradient stays exact).
    """
    n = self.size(dim)
    if n <= 1:
        return grad
    next_entries = at.cat([at.narrow(self, dim, 1, n - 1), at.ones_like(at.narrow(self, dim, 0, 1))], dim)
    gradient = exclusive_cumprod(self, dim) * reversed_linear_recurrence(grad, next_entries, dim)
    is_zero = at.eq(self, 0.0)
    is_infinite = at.logical_not(at.logical_or(at.isfinite(self), at.isnan(self)))
    zero_elsewhere = at.gt(at.sum(is_zero, [dim], True), is_zero)
    infinity_elsewhere = at.gt(at.sum(is_infinite, [dim], True), is_infinite)
    undefined = at.masked_fill(at.zeros_like(gradient), at.logical_and(zero_elsewhere, infinity_elsewhere), math.nan)
    return gradient + undefined


@helper
def cumprod_jvp(self_t: Tensor, self: Tensor, dim: int) -> Tensor:
    """Tangent of ``cumprod`` along ``dim`` (wrapped), exact for every input: ``J_k = sum_{i <= k}
    t_i prod_{j <= k, j != i} x_j`` satisfies ``J_k = t_k P_k + x_k J_{k-1}`` (``P_k = prod_{j < k}
    x_j``), the recurrence of :func:`reversed_linear_recurrence` read from the other end."""
    if self.size(dim) <= 1:
        return self_t
    offset = at.flip(self_t * exclusive_cumprod(self, dim), [dim])
    return at.flip(reversed_linear_recurrence(offset, at.flip(self, [dim]), dim), [dim])


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

