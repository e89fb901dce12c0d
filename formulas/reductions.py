"""Reductions: ``sum`` (all, ``.dim_IntList``), ``mean`` (all, ``.dim``), ``var``/``std`` (all, ``.dim``,
``.correction``), ``var_mean.dim`` (two differentiable outputs), ``max``/``min`` (all and ``.dim``),
``amax``/``amin``, ``prod`` (all, ``.dim_int``; exact with zeros) and ``logsumexp``.

Ties follow torch: ``max()``/``min()``/``amax``/``amin`` share the gradient evenly among the tied
extremes (a NaN extreme: among the NaNs for ``max()``/``min()``); ``max.dim``/``min.dim`` give it to
the index they return. Each min is its max's formula family member (``@family_member``). Norms are
in ``linalg.py``, cumulative reductions in ``scans.py``.
"""
from __future__ import annotations

from formulas import Tensor, at, derivative, family_member, helper
from formulas.helpers import (
    gather_with_keepdimed_indices,
    reduced_numel,
    restore_reduced_dims,
    scale_grad_by_count,
    sum_backward,
    sum_to,
    wrap_dim,
)


@derivative("sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", jvp="auto_linear")
def sum_all(self, *, dtype=None):
    result = at.sum(self, dtype=dtype)
    self_sizes = self.sizes()
    def backward(grad):
        return at.expand(grad, self_sizes)
    return result, backward


@derivative("sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
            jvp="auto_linear")
def sum_dim_intlist(self, dim, keepdim=False, *, dtype=None):
    result = at.sum(self, dim, keepdim, dtype=dtype)
    self_sizes = self.sizes()
    def backward(grad):
        return sum_backward(grad, self_sizes, dim, keepdim)
    return result, backward


@derivative("mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
            jvp="auto_linear")
def mean_dim(self, dim, keepdim=False, *, dtype=None):
    result = at.mean(self, dim, keepdim, dtype=dtype)
    self_sizes = self.sizes()
    count = reduced_numel(self_sizes, dim)
    def backward(grad):
        return at.div(sum_backward(grad, self_sizes, dim, keepdim), count)
    return result, backward


@derivative("var_mean.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> (Tensor, Tensor)")
def var_mean_dim(self, dim, unbiased=True, keepdim=False):
    var, mean = at.var_mean(self, dim, unbiased, keepdim)
    self_sizes = self.sizes()
    count = reduced_numel(self_sizes, dim)
    divisor = count - 1 if unbiased else count
    def backward(grad_var, grad_mean):
        # either gradient may be None (only the other output was used)
        grad_self = None
        if grad_var is not None:
            # d var / d x = 2 (x - mean) / divisor: the mean's own dependence on x sums to zero;
            # the factors scale the reduced gradient, before it is expanded
            centered = self - sum_backward(mean, self_sizes, dim, keepdim)
            grad_self = sum_backward(at.div(at.mul(grad_var, 2), divisor), self_sizes, dim, keepdim) * centered
        if grad_mean is not None:
            from_mean = sum_backward(at.div(grad_mean, count), self_sizes, dim, keepdim)
            grad_self = from_mean if grad_self is None else grad_self + from_mean
        return grad_self
    def jvp(self_t):
        # d var = 2 sum((x - mean) x_t) / divisor; d mean = mean(x_t)
        centered = self - sum_backward(mean, self_sizes, dim, keepdim)
        var_t = at.div(at.mul(at.sum(centered * self_t, dim, keepdim), 2), divisor)
        mean_t = at.mean(self_t, dim, keepdim)
        return var_t, mean_t
    return (var, mean), backward


@derivative("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
            output_differentiability=[True, False])
@family_member("min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
               rename={"max": "min"})
def max_dim(self, dim, keepdim=False):
    values, indices = at.max(self, dim, keepdim)
    self_sizes = self.sizes()
    reduced_dim = wrap_dim(dim, self.dim())
    def backward(grad):
        return at.value_selecting_reduction_backward(grad, reduced_dim, indices, self_sizes, keepdim)
    def jvp(self_t):
        return gather_with_keepdimed_indices(self_t, reduced_dim, indices, keepdim)
    return (values, indices), backward


@helper
def extreme_mask(self: Tensor, value: Tensor) -> Tensor:
    """Where ``self`` holds ``value`` (its max or min over all elements); every NaN when it is NaN."""
    return at.where(at.isnan(value), at.isnan(self), at.eq(self, value))


@helper
def evenly_distribute_backward(grad: Tensor, self: Tensor, value: Tensor) -> Tensor:
    """``grad`` of ``max()``/``min()`` shared evenly by the elements holding the extreme ``value``."""
    mask = extreme_mask(self, value)
    return at.where(mask, at.div(grad, at.sum(mask)), at.new_zeros(self, []))


@helper
def evenly_read_jvp(self_t: Tensor, self: Tensor, value: Tensor) -> Tensor:
    """The tangent of ``max()``/``min()``: the mean of the tangents at the extreme elements."""
    mask = extreme_mask(self, value)
    return at.div(at.sum(at.where(mask, self_t, at.zeros_like(self_t))), at.sum(mask))


@derivative("max(Tensor self) -> Tensor")
@family_member("min(Tensor self) -> Tensor", rename={"max": "min"})
def max_all(self):
    result = at.max(self)
    def backward(grad):
        return evenly_distribute_backward(grad, self, result)
    def jvp(self_t):
        return evenly_read_jvp(self_t, self, result)
    return result, backward


@helper
def amaxamin_jvp(self: Tensor, self_t: Tensor, result: Tensor, dim: list[int], keepdim: bool) -> Tensor:
    """The mean of the tangents at the elements holding each slice's extreme."""
    mask = at.eq(self, sum_backward(result, self.sizes(), dim, keepdim))
    picked = at.sum(at.where(mask, self_t, at.zeros_like(self_t)), dim, keepdim)
    return at.div(picked, at.sum(mask, dim, keepdim))


@derivative("amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor")
@family_member("amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", rename={"amax": "amin"})
def amax(self, dim=[], keepdim=False):
    result = at.amax(self, dim, keepdim)
    self_sizes = self.sizes()
    def backward(grad):
        # sum_to: a 0-d self reduced over dim 0 gets a 0-d gradient (restored, the dim is back)
        shared = scale_grad_by_count(restore_reduced_dims(grad, dim, keepdim),
                                     at.eq(restore_reduced_dims(result, dim, keepdim), self), dim)
        return sum_to(shared, self_sizes)
    def jvp(self_t):
        return amaxamin_jvp(self, self_t, result, dim, keepdim)
    return result, backward


@derivative("mean(Tensor self, *, ScalarType? dtype=None) -> Tensor", jvp="auto_linear")
def mean_all(self, *, dtype=None):
    result = at.mean(self, dtype=dtype)
    self_sizes = self.sizes()
    count = self.numel()
    def backward(grad):
        return at.div(at.expand(grad, self_sizes), count)
    return result, backward


@derivative("logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor")
def logsumexp(self, dim, keepdim=False):
    result = at.logsumexp(self, dim, keepdim)
    self_sizes = self.sizes()
    def backward(grad):
        # d/dx_i log sum_j exp(x_j) = exp(x_i - result): the softmax of the slice
        return sum_backward(grad, self_sizes, dim, keepdim) * at.exp(self - sum_backward(result, self_sizes, dim, keepdim))
    def jvp(self_t):
        softmax = at.exp(self - sum_backward(result, self_sizes, dim, keepdim))
        result_t = at.sum(softmax * self_t, dim, keepdim)
        return result_t
    return result, backward


@helper
def prod_others(x: Tensor, dim: int) -> Tensor:
    """For each element, the product of the other elements of its slice along ``dim`` (kept dims):
    d prod / d x_i, exact where ``x`` has zeros, and with the exact derivatives (the Hessian of
    the product) too.

    With ``c`` zeros in a slice, ``P`` the product of its non-zero elements and ``Z`` the sum of
    its zero elements (0, but its derivative selects them):

    * ``c == 0``: ``P / x_i``;
    * ``c == 1``: ``P`` at the zero; ``Z * P / x_i`` elsewhere (0, derivative ``P / x_i`` by the zero);
    * ``c == 2``: ``(Z - x_i) * P`` at each zero (the other zero times ``P``); 0 elsewhere;
    * ``c >= 3``: 0 (every product of the others has two zero factors: so have its derivatives).

    Zeros are replaced by ones before dividing, so no branch divides by zero.

    ``P / x_i`` is the product of the other non-zero elements only while ``x_i`` is finite: at
    ``x_i = +-inf`` or NaN it is NaN. With one zero, that product is what ``Z`` multiplies, and
    torch's value there is ``0 * (product of the others)``: 0 when the others are finite. So at a
    non-finite ``x_i`` that is the slice's only non-finite element the product of the others is
    ``F``, the product of its finite non-zero elements (``prod([inf, 0, 2])``: 0 at the inf);
    with several non-finite elements it is non-finite and ``P / x_i`` (NaN) stands for it. With no
    zero, ``P / x_i`` is torch's own ``result / x_i`` (NaN at an infinity too).
    """
    is_zero = at.eq(x, 0.0)
    count = at.sum(is_zero, [dim], True)
    nonzero = at.where(is_zero, at.ones_like(x), x)
    product = at.prod(nonzero, dim, True)
    zeros = at.zeros_like(x)
    zeros_sum = at.sum(at.where(is_zero, x, zeros), [dim], True)     # selected: inf * 0 would be NaN
    no_zero = product / nonzero
    finite = at.isfinite(x)
    lone_non_finite = at.logical_and(at.logical_not(finite),
                                     at.eq(at.sum(at.logical_not(finite), [dim], True), 1))
    finite_product = at.prod(at.where(finite, nonzero, at.ones_like(x)), dim, True)
    others = at.where(lone_non_finite, finite_product, no_zero)
    one_zero = at.where(is_zero, product, zeros_sum * others)
    two_zeros = at.where(is_zero, (zeros_sum - x) * product, zeros)
    return at.where(at.eq(count, 0), no_zero,
                    at.where(at.eq(count, 1), one_zero, at.where(at.eq(count, 2), two_zeros, zeros)))


@derivative("prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")
def prod_dim_int(self, dim, keepdim=False, *, dtype=None):
    result = at.prod(self, dim, keepdim, dtype=dtype)
    reduced_dim = wrap_dim(dim, self.dim())
    def backward(grad):
        grad_kept = grad
        if not keepdim and self.dim() > 0:
            grad_kept = at.unsqueeze(grad, reduced_dim)
        return grad_kept * prod_others(self, reduced_dim)
    def jvp(self_t):
        result_t = at.sum(prod_others(self, reduced_dim) * self_t, [reduced_dim], keepdim)
        return result_t
    return result, backward


@derivative("prod(Tensor self, *, ScalarType? dtype=None) -> Tensor")
def prod_all(self, *, dtype=None):
    result = at.prod(self, dtype=dtype)
    self_sizes = self.sizes()
    def backward(grad):
        # the product over the flattened tensor
        return at.reshape(grad * prod_others(at.reshape(self, [-1]), 0), self_sizes)
    def jvp(self_t):
        result_t = at.sum(prod_others(at.reshape(self, [-1]), 0) * at.reshape(self_t, [-1]))
        return result_t
    return result, backward


@helper
def variance_divisor(count: int, correction: float) -> float:
    """``N - correction``: what the sum of squared deviations is divided by."""
    return count - correction


@helper
def grad_over_std(grad: Tensor, std: Tensor) -> Tensor:
    """``grad / std``, 0 where ``std`` is 0: at a constant slice ``std = sqrt(var)`` has an
    infinite slope in ``var`` while every deviation ``x_i - mean`` is 0, and torch picks the
    subgradient 0 (first and second order). The division runs on ``std`` with its zeros replaced
    by ones, so neither the kept branch nor its derivative carries a NaN into double backward."""
    is_zero = at.eq(std, 0.0)
    return at.where(is_zero, at.zeros_like(grad), grad / at.where(is_zero, at.ones_like(std), std))


@helper
def deviations_backward(scaled_grad: Tensor, self: Tensor, dim: list[int] | None, keepdim: bool,
                        divisor: float) -> Tensor:
    """The gradient shared by ``var`` and ``std`` over ``dim`` (``None``: every dim): the reduced
    ``scaled_grad / divisor`` expanded back, times the deviations ``x_i - mean`` (the mean's own
    dependence on x sums to zero). ``var``'s ``scaled_grad`` is ``2 grad``, ``std``'s ``grad / std``."""
    centered = self - at.mean(self, dim, True)
    return sum_backward(at.div(scaled_grad, divisor), self.sizes(), dim, keepdim) * centered


@helper
def deviations_dot(self_t: Tensor, self: Tensor, dim: list[int] | None, keepdim: bool) -> Tensor:
    """``sum((x - mean) x_t)`` over ``dim``: ``var``'s and ``std``'s tangent before their scaling."""
    return at.sum((self - at.mean(self, dim, True)) * self_t, dim, keepdim)


# var and std, each of all elements, ``.dim`` and ``.correction``: one derivative, the divisor
# ``N - correction`` read from their arguments (``unbiased``: correction 1; torch's default is 1)

@derivative("var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor")
def var_correction(self, dim=None, *, correction=None, keepdim=False):
    result = at.var(self, dim, correction=correction, keepdim=keepdim)
    count = reduced_numel(self.sizes(), dim)
    divisor = variance_divisor(count, 1.0) if correction is None else variance_divisor(count, correction)
    def backward(grad):
        # d var / d x_i = 2 (x_i - mean) / divisor
        return deviations_backward(at.mul(grad, 2.0), self, dim, keepdim, divisor)
    def jvp(self_t):
        result_t = at.div(at.mul(deviations_dot(self_t, self, dim, keepdim), 2.0), divisor)
        return result_t
    return result, backward


@derivative("std.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor")
def std_correction(self, dim=None, *, correction=None, keepdim=False):
    result = at.std(self, dim, correction=correction, keepdim=keepdim)
    count = reduced_numel(self.sizes(), dim)
    divisor = variance_divisor(count, 1.0) if correction is None else variance_divisor(count, correction)
    def backward(grad):
        # std = sqrt(var): d std / d x_i = (x_i - mean) / (divisor std)
        return deviations_backward(grad_over_std(grad, result), self, dim, keepdim, divisor)
    def jvp(self_t):
        result_t = at.div(grad_over_std(deviations_dot(self_t, self, dim, keepdim), result), divisor)
        return result_t
    return result, backward


@derivative("var(Tensor self, bool unbiased=True) -> Tensor")
def var_all(self, unbiased=True):
    result = at.var(self, unbiased)
    divisor = variance_divisor(self.numel(), 1.0 if unbiased else 0.0)
    def backward(grad):
        return deviations_backward(at.mul(grad, 2.0), self, None, False, divisor)
    def jvp(self_t):
        result_t = at.div(at.mul(deviations_dot(self_t, self, None, False), 2.0), divisor)
        return result_t
    return result, backward


@derivative("var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor")
def var_dim(self, dim, unbiased=True, keepdim=False):
    result = at.var(self, dim, unbiased, keepdim)
    divisor = variance_divisor(reduced_numel(self.sizes(), dim), 1.0 if unbiased else 0.0)
    def backward(grad):
        return deviations_backward(at.mul(grad, 2.0), self, dim, keepdim, divisor)
    def jvp(self_t):
        result_t = at.div(at.mul(deviations_dot(self_t, self, dim, keepdim), 2.0), divisor)
        return result_t
    return result, backward


@derivative("std(Tensor self, bool unbiased=True) -> Tensor")
def std_all(self, unbiased=True):
    result = at.std(self, unbiased)
    divisor = variance_divisor(self.numel(), 1.0 if unbiased else 0.0)
    def backward(grad):
        return deviations_backward(grad_over_std(grad, result), self, None, False, divisor)
    def jvp(self_t):
        result_t = at.div(grad_over_std(deviations_dot(self_t, self, None, False), result), divisor)
        return result_t
    return result, backward


@derivative("std.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor")
def std_dim(self, dim, unbiased=True, keepdim=False):
    result = at.std(self, dim, unbiased, keepdim)
    divisor = variance_divisor(reduced_numel(self.sizes(), dim), 1.0 if unbiased else 0.0)
    def backward(grad):
        return deviations_backward(grad_over_std(grad, result), self, dim, keepdim, divisor)
    def jvp(self_t):
        result_t = at.div(grad_over_std(deviations_dot(self_t, self, dim, keepdim), result), divisor)
        return result_t
    return result, backward
