"""Reductions users reach from ``x.cumprod(dim)`` and ``x.norm(...)``: ``cumprod``, exact where
the input has zeros, and the vector norms ``linalg_vector_norm``, ``norm.Scalar`` and
``norm.ScalarOpt_dim`` (``x.norm()``, ``x.norm(p, dim, keepdim)`` and ``torch.norm`` call
``linalg_vector_norm`` in torch 2.13; the ``norm`` overloads are ATen's own entry points, the
engine's ``x.norm(...)`` among them) for every order p: 0, 1, 2, +-inf and any other p.
"""
from __future__ import annotations

from formulas import Tensor, at, derivative, helper
from formulas.helpers import is_reduced_dim, wrap_dim


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


# ----------------------------------------------------------------------------- vector norms
@helper
def is_infinite(value: float) -> bool:
    """Whether ``value`` is +inf or -inf: the only non-zero floats that doubling leaves unchanged."""
    return value != 0.0 and value * 2.0 == value


@helper
def keep_reduced_dims(output: Tensor, dim: list[int] | None, keepdim: bool, ndim: int) -> Tensor:
    """``output`` of a reduction over ``dim`` of an ``ndim``-dim tensor with the reduced dims back
    as size 1 (not expanded), so that it broadcasts against the input."""
    restored = output
    if not keepdim and output.dim() > 0:    # a 0-d output broadcasts as it is
        for d in range(ndim):
            if is_reduced_dim(dim, d, ndim):
                restored = at.unsqueeze(restored, d)
    return restored


@helper
def vector_norm_backward(grad: Tensor, self: Tensor, p: float, norm: Tensor, dim: list[int] | None,
                         keepdim: bool) -> Tensor:
    """Gradient of ``norm = (sum |x_i|^p)^(1/p)`` over ``dim`` (``None`` or empty: every dim).

    ``d norm / d x_i = sign(x_i) |x_i|^(p-1) / norm^(p-1)``, which is ``sign(x_i)`` for p = 1 and
    ``x_i / norm`` for p = 2. p = 0 counts the non-zero elements: a step function, gradient 0.
    p = +-inf is ``max``/``min`` of ``|x|``: the gradient ``sign(x_i)`` is shared evenly by the
    elements where ``|x_i|`` is the extreme (none where a NaN makes the norm NaN: gradient 0). Where the norm is 0 the gradient is 0 (the
    subgradient torch picks), and so is ``|x_i|^(p-1)`` at ``x_i = 0`` for p < 1 (where it is
    infinite); ones stand in for those zeros before any division or negative power, so no NaN
    reaches the double backward either. The factor that depends on the norm is computed at the
    reduced size and broadcast once: p = 2 costs one full-size product.
    """
    if p == 0.0:
        return at.zeros_like(self)
    grad_kept = keep_reduced_dims(grad, dim, keepdim, self.dim())
    if p == 1.0:
        return at.sign(self) * grad_kept
    norm_kept = keep_reduced_dims(norm, dim, keepdim, self.dim())
    if is_infinite(p):
        # a NaN norm ties with no element: the count is floored at 1 so the gradient is 0, as torch's
        extreme = at.eq(at.abs(self), norm_kept)
        ties = at.clamp_min(at.sum(extreme, dim, True), 1)
        shares = at.where(extreme, at.sign(self), at.zeros_like(self))
        return shares * at.div(grad_kept, ties)
    norm_is_zero = at.eq(norm_kept, 0.0)
    scale_zeros = at.zeros_like(grad_kept)
    safe_norm = at.where(norm_is_zero, at.ones_like(norm_kept), norm_kept)
    if p == 2.0:
        return self * at.where(norm_is_zero, scale_zeros, grad_kept / safe_norm)
    safe_abs = at.where(at.eq(self, 0.0), at.ones_like(self), at.abs(self))
    scale = at.where(norm_is_zero, scale_zeros, grad_kept / at.pow(safe_norm, p - 1.0))
    return at.sign(self) * at.pow(safe_abs, p - 1.0) * scale


@helper
def vector_norm_jvp(self: Tensor, self_t: Tensor, p: float, norm: Tensor, dim: list[int] | None,
                    keepdim: bool) -> Tensor:
    """Tangent of the p-norm over ``dim``: ``sum_i (d norm / d x_i) t_i`` with the derivative of
    :func:`vector_norm_backward` (its gradient for an incoming gradient of ones)."""
    slope = vector_norm_backward(at.ones_like(norm), self, p, norm, dim, keepdim)
    return at.sum(slope * self_t, dim, keepdim)


@derivative("linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, "
            "ScalarType? dtype=None) -> Tensor")
def linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    result = at.linalg_vector_norm(self, ord, dim, keepdim, dtype=dtype)
    self_dtype = self.scalar_type()
    def backward(grad):
        gradient = vector_norm_backward(grad, self, ord, result, dim, keepdim)
        if dtype is None:
            return gradient
        else:
            return at._to_copy(gradient, dtype=self_dtype)
    def jvp(self_t):
        tangent = vector_norm_jvp(self, self_t, ord, result, dim, keepdim)
        if dtype is None:
            return tangent
        else:
            return at._to_copy(tangent, dtype=dtype)
    return result, backward


@derivative("norm.Scalar(Tensor self, Scalar p=2) -> Tensor")
def norm_scalar(self, p=2):
    result = at.norm(self, p)
    every_dim = []
    for d in range(self.dim()):
        every_dim.append(d)
    def backward(grad):
        return vector_norm_backward(grad, self, p, result, every_dim, False)
    def jvp(self_t):
        result_t = vector_norm_jvp(self, self_t, p, result, every_dim, False)
        return result_t
    return result, backward


@derivative("norm.ScalarOpt_dim(Tensor self, Scalar? p, int[1] dim, bool keepdim=False) -> Tensor")
def norm_scalaropt_dim(self, p, dim, keepdim=False):
    result = at.norm(self, p, dim, keepdim)
    def backward(grad):
        if p is None:       # the 2-norm
            return vector_norm_backward(grad, self, 2.0, result, dim, keepdim)
        else:
            return vector_norm_backward(grad, self, p, result, dim, keepdim)
    def jvp(self_t):
        if p is None:
            return vector_norm_jvp(self, self_t, 2.0, result, dim, keepdim)
        else:
            return vector_norm_jvp(self, self_t, p, result, dim, keepdim)
    return result, backward
