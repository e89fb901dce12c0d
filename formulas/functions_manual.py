"""FunctionsManual's functions that the imported derivatives.yaml calls and the library had not:
other signatures of the library's helpers, and helpers of their own.

derivatives.yaml calls some FunctionsManual functions under one name with several C++
signatures (``unsqueeze_to(grad, sizes)`` for ``squeeze()``, ``unsqueeze_to(grad, dim, sizes)``
for ``squeeze.dim``; ``mul_tensor_backward`` with a Tensor or a Scalar ``other``). The library
helper of that name has one of them; each other one is a helper ``name__variant``, which the C++
path tries, in order, when a call of ``name`` does not fit ``name`` itself. Each is derived
here from the mathematics, like the helpers it extends. The others (max pooling's double
backward, slicing and splitting's backward, ``pow``'s gradients) are derived in their docstrings.
"""
from __future__ import annotations

from formulas import Scalar, ScalarType, Tensor, TensorOptions, at, helper, nondifferentiable
from formulas.helpers import (div_tensor_other_backward, div_tensor_self_backward, gelu_second_derivative,
                              handle_r_to_c, invert_permutation, is_real_type, negated, reduced_numel,
                              restore_reduced_dims, scale_grad_by_count, sum_backward, sum_to, wrap_dim)
from formulas.linalg import vector_norm_backward
from formulas.losses import loss_scale
from formulas.normalization import layer_norm_normalized_backward
from formulas.reductions import prod_others


# --- product and quotient by a Scalar ------------------------------------------------------------

@helper
def mul_tensor_backward__scalar(grad: Tensor, other: Scalar, self_type: ScalarType) -> Tensor:
    """Gradient of ``self * other`` for ``self``, ``other`` a Scalar: ``grad * conj(other)`` (the
    conjugate of the derivative, torch's convention for complex inputs), spelled
    ``conj(conj(grad) * other)`` since a Scalar has no conjugate operator here."""
    return handle_r_to_c(self_type, at.conj(at.mul(at.conj(grad), other)))


@helper
def div_tensor_self_backward__scalar(grad: Tensor, other: Scalar, self_type: ScalarType) -> Tensor:
    """Gradient of ``self / other`` for ``self``, ``other`` a Scalar: ``grad / conj(other)``,
    spelled ``conj(conj(grad) / other)``."""
    return handle_r_to_c(self_type, at.conj(at.div(at.conj(grad), other)))


@helper
def div_tensor_self_backward__mode(grad: Tensor, other: Tensor, self_type: ScalarType,
                                   rounding_mode: str | None) -> Tensor:
    """Gradient of ``div(self, other, rounding_mode=...)`` for ``self``: with a rounding mode the
    quotient is a step function of ``self`` (``trunc`` or ``floor`` of ``self / other``), whose
    derivative is 0 wherever it exists; without one, that of ``self / other``."""
    if rounding_mode is not None:
        return at.zeros_like(grad)
    return div_tensor_self_backward(grad, other, self_type)


@helper
def div_tensor_self_backward__scalar_mode(grad: Tensor, other: Scalar, self_type: ScalarType,
                                          rounding_mode: str | None) -> Tensor:
    """``div_tensor_self_backward__mode`` for a Scalar ``other``."""
    if rounding_mode is not None:
        return at.zeros_like(grad)
    return div_tensor_self_backward__scalar(grad, other, self_type)


@helper
def div_tensor_other_backward__mode(grad: Tensor, self: Tensor, other: Tensor, rounding_mode: str | None) -> Tensor:
    """Gradient of ``div(self, other, rounding_mode=...)`` for ``other``: 0 with a rounding mode (a
    step function of ``other`` too), else that of ``self / other``."""
    if rounding_mode is not None:
        return at.zeros_like(grad)
    return div_tensor_other_backward(grad, self, other)


# --- squeeze of given dims --------------------------------------------------------------------------

@helper
def unsqueeze_to__dim(grad: Tensor, dim: int, sizes: list[int]) -> Tensor:
    """Gradient of ``squeeze(self, dim)`` for ``self`` of ``sizes``: the dim was removed only if its
    size was 1, so ``grad`` gets it back exactly then (a 0-d ``self`` is unchanged)."""
    if len(sizes) == 0:
        return grad
    d = wrap_dim(dim, len(sizes))
    if sizes[d] == 1:
        return at.unsqueeze(grad, d)
    return grad


@helper
def unsqueeze_to__dims(grad: Tensor, dims: list[int], sizes: list[int]) -> Tensor:
    """Gradient of ``squeeze(self, dims)`` for ``self`` of ``sizes``: each listed dim of size 1 was
    removed, so ``grad`` gets those back, in increasing order so that each lands at its own index
    (an empty list removes nothing)."""
    restored = grad
    for d in range(len(sizes)):
        listed = False
        for i in range(len(dims)):
            if wrap_dim(dims[i], len(sizes)) == d:
                listed = True
        if listed and sizes[d] == 1:
            restored = at.unsqueeze(restored, d)
    return restored


# --- pooling, slicing and splitting ---------------------------------------------------------------

@helper
def max_pool_double_backward(grad: Tensor, indices: Tensor, dim: int) -> Tensor:
    """Gradient of max pooling's backward for its ``grad_output``: that backward adds each
    ``grad_output`` element into the input position its ``indices`` entry names (a flat index into
    the last ``dim`` dims), so it is linear in ``grad_output`` and its transpose reads ``grad`` (the
    input's shape) back at those positions: a gather over the flattened pooled dims."""
    positions = at.flatten(indices, indices.dim() - dim, -1)
    gathered = at.gather(at.flatten(grad, grad.dim() - dim, -1), -1, positions)
    return at.view(gathered, indices.sizes())


@helper
def slice_backward_wrapper(grad: Tensor, sizes: list[int], dim: int, start: int | None, end: int | None,
                           step: int) -> Tensor:
    """Gradient of ``slice(self, dim, start, end, step)``: ``grad`` put back where the slice was taken,
    zero elsewhere (``slice_backward``), a missing ``start`` being 0 and a missing ``end`` the end."""
    first = 0
    if start is not None:
        first = start
    last = sizes[wrap_dim(dim, len(sizes))]
    if end is not None:
        last = end
    return at.slice_backward(grad, sizes, dim, first, last, step)


@helper
def split_with_sizes_backward(grads: list[Tensor], split_sizes: list[int], dim: int, sizes: list[int],
                              options: TensorOptions) -> Tensor:
    """Gradient of ``split_with_sizes(self, split_sizes, dim)``: the pieces are consecutive slices of
    ``self``, so the gradient is their gradients concatenated along ``dim``, a piece without one
    (None) contributing zeros of its size (at least one piece has a gradient when this runs)."""
    d = wrap_dim(dim, len(sizes))
    like = grads[0]
    for i in range(len(grads)):
        if grads[i] is not None:
            like = grads[i]
    pieces = []
    for i in range(len(grads)):
        if grads[i] is not None:
            pieces.append(grads[i])
        else:
            piece_sizes = list(sizes)
            piece_sizes[d] = split_sizes[i]
            pieces.append(at.new_zeros(like, piece_sizes))
    return at.cat(pieces, d)


@helper
def split_backward(grads: list[Tensor], split_size: int, dim: int, sizes: list[int],
                   options: TensorOptions) -> Tensor:
    """Gradient of ``split(self, split_size, dim)``: ``split_with_sizes`` with pieces of
    ``split_size``, the last one taking what remains."""
    d = wrap_dim(dim, len(sizes))
    split_sizes = []
    for i in range(len(grads)):
        split_sizes.append(min(split_size, sizes[d] - i * split_size))
    return split_with_sizes_backward(grads, split_sizes, dim, sizes, options)


# --- power ---------------------------------------------------------------------------------------------

@helper
def pow_backward_self(grad: Tensor, self: Tensor, exponent: Tensor) -> Tensor:
    """Gradient of ``self ** exponent`` for ``self``: ``exponent * self ** (exponent - 1)``
    (conjugated); where ``exponent`` is 0 the power is the constant 1, whose derivative is 0 even at
    ``self = 0`` (where the formula would read ``0 * inf``)."""
    slope = exponent * at.pow(self, exponent - 1)
    return at.where(at.eq(exponent, 0.0), at.new_zeros(grad, []), grad * at.conj(slope))


@helper
def pow_backward_exponent(grad: Tensor, self: Tensor, exponent: Tensor, result: Tensor) -> Tensor:
    """Gradient of ``self ** exponent`` for ``exponent``: ``self ** exponent * log(self)`` (conjugated);
    at ``self = 0`` with ``exponent >= 0`` the power is 0 (or 1 at ``exponent = 0``) on the side where
    it is defined, so the derivative is taken as 0 there rather than ``0 * -inf``."""
    at_zero = at.logical_and(at.eq(self, 0.0), at.ge(exponent, 0.0))
    return at.where(at_zero, at.new_zeros(grad, []), grad * at.conj(result * at.log(self)))


# --- element-wise functions ------------------------------------------------------------------------

@helper
def log1p_backward(grad: Tensor, self: Tensor) -> Tensor:
    """Gradient of ``log(1 + self)``: ``1 / (1 + self)``, conjugated."""
    return grad / at.conj(self + 1.0)


@helper
def sinc_backward(grad: Tensor, self: Tensor) -> Tensor:
    """Gradient of ``sinc(x) = sin(pi x) / (pi x)``: the quotient rule gives
    ``(pi x cos(pi x) - sin(pi x)) / (pi x^2) = (cos(pi x) - sinc(x)) / x``, conjugated; at ``x = 0``
    sinc is even, so its slope is 0 (a 1 stands in for the zero before the division)."""
    at_zero = at.eq(self, 0.0)
    safe = at.where(at_zero, at.ones_like(self), self)
    slope = (at.cos(self * 3.141592653589793) - at.sinc(self)) / safe
    return at.where(at_zero, at.new_zeros(grad, []), grad * at.conj(slope))


@helper
def deg2rad_backward(grad: Tensor) -> Tensor:
    """Gradient of ``deg2rad(x) = x * pi / 180``: the constant factor."""
    return at.mul(grad, 0.017453292519943295)


@helper
def rad2deg_backward(grad: Tensor) -> Tensor:
    """Gradient of ``rad2deg(x) = x * 180 / pi``: the constant factor."""
    return at.mul(grad, 57.29577951308232)


@helper
def sgn_backward(self: Tensor, grad: Tensor, result: Tensor) -> Tensor:
    """Gradient of ``sgn(z) = z / |z|`` (``result``). With Wirtinger derivatives ``d sgn / dz =
    1 / (2|z|)`` and ``d sgn / d conj(z) = -sgn^2 / (2|z|)``; torch's gradient
    ``grad * conj(d/dz) + conj(grad) * d/d conj(z)`` is then ``(grad - sgn^2 conj(grad)) / (2|z|)``,
    which is ``(grad - Re(grad conj(sgn)) sgn) / |z|`` (write ``grad = sgn w``): the part of
    ``grad`` along the unit circle's tangent. It is exactly 0 for a real input (``sgn^2 = 1``),
    and 0 at ``z = 0``, where sgn is 0 on no neighbourhood (torch's subgradient)."""
    magnitude = at.abs(self)
    at_zero = at.eq(magnitude, 0.0)
    safe = at.where(at_zero, at.ones_like(magnitude), magnitude)
    tangential = (grad - at.real(grad * at.conj(result)) * result) / safe
    return at.where(at_zero, at.new_zeros(tangential, []), tangential)


@helper
def atan2_backward(grad: Tensor, self: Tensor, other: Tensor, output_mask: list[bool]) -> tuple[Tensor, Tensor]:
    """Gradients of ``atan2(self, other)`` (the angle of the point ``(other, self)``) for the inputs
    ``output_mask`` asks for: ``d atan2(y, x) = (x dy - y dx) / (x^2 + y^2)``; at the origin, where
    it has none, 0 (torch's subgradient). Not yet summed to the inputs' shapes; None where not asked."""
    squared_radius = self * self + other * other
    scaled = at.where(at.eq(squared_radius, 0.0), at.zeros_like(grad), grad / squared_radius)
    grad_self = None
    grad_other = None
    if output_mask[0]:
        grad_self = scaled * other
    if output_mask[1]:
        grad_other = -scaled * self
    return grad_self, grad_other


# --- reductions ------------------------------------------------------------------------------------

@helper
def mean_backward(grad: Tensor, sizes: list[int], dim: list[int] | None, numel: int, keepdim: bool) -> Tensor:
    """Gradient of ``mean(self, dim, keepdim)`` for ``self`` of ``sizes``: the sum's gradient
    (``grad`` broadcast back) divided by how many elements each mean averages."""
    return at.div(sum_backward(grad, sizes, dim, keepdim), reduced_numel(sizes, dim))


@helper
def logsumexp_backward(grad: Tensor, self: Tensor, result: Tensor, dim: list[int], keepdim: bool) -> Tensor:
    """Gradient of ``r = logsumexp(self, dim)``: ``d r / d x_i = exp(x_i) / sum_j exp(x_j) =
    exp(x_i - r)`` (the softmax of the slice), ``grad`` and ``r`` broadcast back over ``dim``."""
    grad_kept = restore_reduced_dims(grad, dim, keepdim)
    result_kept = restore_reduced_dims(result, dim, keepdim)
    return grad_kept * at.exp(self - result_kept)


@helper
def var_backward(grad: Tensor, self: Tensor, dim: list[int] | None, correction: Scalar | None,
                 keepdim: bool) -> Tensor:
    """Gradient of ``var = sum_i |x_i - mean|^2 / (N - correction)`` over ``dim`` (``correction`` 1
    when not given): ``var_backward_corrected``."""
    if correction is not None:
        return var_backward_corrected(grad, self, dim, correction, keepdim)
    return var_backward_corrected(grad, self, dim, 1.0, keepdim)


@helper
def var_backward_corrected(grad: Tensor, self: Tensor, dim: list[int] | None, correction: float,
                           keepdim: bool) -> Tensor:
    """Gradient of ``var = sum_i |x_i - mean|^2 / (N - correction)`` over ``dim``: the mean's own
    variation drops out (the deviations sum to 0), leaving ``2 (x_i - mean) / (N - correction)``.
    ``N - correction <= 0`` divides by 0 or less, as torch's forward does (inf or NaN)."""
    divisor = reduced_numel(self.sizes(), dim) - correction
    centered = self - at.mean(self, dim, True)
    grad_kept = restore_reduced_dims(grad, reduced_dims(dim, self.dim()), keepdim)
    return at.div(grad_kept * centered * 2.0, divisor)


@helper
def reduced_dims(dim: list[int] | None, ndim: int) -> list[int]:
    """The dims a reduction over ``dim`` folds (``None`` or empty: every dim), non-negative."""
    dims = []
    for d in range(ndim):
        if dim is None or len(dim) == 0:
            dims.append(d)
        else:
            for i in range(len(dim)):
                if wrap_dim(dim[i], ndim) == d:
                    dims.append(d)
    return dims


@helper
def std_backward(result: Tensor, grad: Tensor, self: Tensor, dim: list[int] | None, correction: Scalar | None,
                 keepdim: bool) -> Tensor:
    """Gradient of ``std = sqrt(var)``: ``d std = d var / (2 std)``, so the variance's gradient
    of ``grad / (2 std)``; where ``std`` is 0 (a constant slice) the square root has no
    derivative and torch's subgradient is 0 (a 1 stands in before the division)."""
    at_zero = at.eq(result, 0.0)
    safe = at.where(at_zero, at.ones_like(result), result)
    grad_var = at.where(at_zero, at.new_zeros(grad, []), grad / (safe * 2.0))
    return var_backward(grad_var, self, dim, correction, keepdim)


@helper
def var_mean_backward(grad_var: Tensor | None, grad_mean: Tensor | None, self: Tensor, dim: list[int] | None,
                      correction: Scalar | None, keepdim: bool) -> Tensor:
    """Gradient of ``(var, mean) = var_mean(self, dim)``: the sum of each output's gradient (a
    missing one contributes nothing)."""
    gradient = at.zeros_like(self)
    if grad_var is not None:
        gradient = var_backward(grad_var, self, dim, correction, keepdim)
    if grad_mean is not None:
        gradient = gradient + mean_backward(grad_mean, self.sizes(), dim, self.numel(), keepdim)
    return gradient


@helper
def std_mean_backward(grad_std: Tensor | None, grad_mean: Tensor | None, self: Tensor, std: Tensor,
                      dim: list[int] | None, correction: Scalar | None, keepdim: bool) -> Tensor:
    """Gradient of ``(std, mean) = std_mean(self, dim)``: the sum of each output's gradient."""
    gradient = at.zeros_like(self)
    if grad_std is not None:
        gradient = std_backward(std, grad_std, self, dim, correction, keepdim)
    if grad_mean is not None:
        gradient = gradient + mean_backward(grad_mean, self.sizes(), dim, self.numel(), keepdim)
    return gradient


@helper
def norm_backward(grad: Tensor, self: Tensor, p: Scalar | None, norm: Tensor) -> Tensor:
    """Gradient of the p-norm of every element (``p`` 2 when not given): ``vector_norm_backward``
    (``formulas/linalg.py``) over every dim."""
    every_dim = []
    for d in range(self.dim()):
        every_dim.append(d)
    if p is not None:
        return vector_norm_backward(grad, self, p, norm, every_dim, False)
    return vector_norm_backward(grad, self, 2.0, norm, every_dim, False)


@helper
def norm_backward__dim(grad: Tensor, self: Tensor, p: Scalar | None, norm: Tensor, dim: list[int],
                       keepdim: bool) -> Tensor:
    """Gradient of the p-norm over ``dim`` (``p`` 2 when not given)."""
    if p is not None:
        return vector_norm_backward(grad, self, p, norm, dim, keepdim)
    return vector_norm_backward(grad, self, 2.0, norm, dim, keepdim)


@helper
def linalg_vector_norm_backward(grad: Tensor, self: Tensor, ord: Scalar, result: Tensor, dim: list[int] | None,
                                keepdim: bool) -> Tensor:
    """Gradient of ``linalg_vector_norm(self, ord, dim, keepdim)``: ``vector_norm_backward``."""
    return vector_norm_backward(grad, self, ord, result, dim, keepdim)


@helper
def cumsum_backward(grad: Tensor, dim: int) -> Tensor:
    """Gradient of ``cumsum(self, dim)``: ``out_k = sum_{i <= k} x_i``, so ``x_i`` receives
    ``sum_{k >= i} g_k``, the reversed cumulative sum ``total - cumsum(g) + g``."""
    return at.sum(grad, [dim], True) - at.cumsum(grad, dim) + grad


@helper
def nansum_backward(grad: Tensor, self: Tensor, dim: list[int] | None, keepdim: bool) -> Tensor:
    """Gradient of ``nansum(self, dim)``: the sum's gradient where ``self`` is a number, 0 at a NaN
    (which the sum skips)."""
    gradient = sum_backward(grad, self.sizes(), dim, keepdim)
    return at.where(at.isnan(self), at.new_zeros(gradient, []), gradient)


@helper
def prod_backward(grad: Tensor, self: Tensor, result: Tensor) -> Tensor:
    """Gradient of ``prod(self)``: each element's slope is the product of the others
    (``prod_others``, exact where ``self`` has zeros), conjugated, over the flattened tensor."""
    others = prod_others(at.reshape(self, [-1]), 0)
    return at.reshape(grad * at.conj(others), self.sizes())


@helper
def prod_backward__dim(grad: Tensor, self: Tensor, result: Tensor, dim: int, keepdim: bool) -> Tensor:
    """Gradient of ``prod(self, dim, keepdim)``: ``grad`` broadcast back over ``dim`` times the
    product of the others along it (conjugated); a 0-d ``self`` is its own product."""
    if self.dim() == 0:
        return grad
    d = wrap_dim(dim, self.dim())
    grad_kept = grad
    if not keepdim:
        grad_kept = at.unsqueeze(grad, d)
    return grad_kept * at.conj(prod_others(self, d))


@helper
def softmax_double_backward(grad: Tensor, grad_output: Tensor, dim: int, output: Tensor) -> Tensor:
    """Gradient of ``_softmax_backward_data(grad_output, output, dim) = y (g - sum(g y))`` (``y`` the
    softmax ``output``, ``g`` ``grad_output``, sums over ``dim``) for ``output``: along ``grad``,
    ``d/dy_j sum_i grad_i y_i (g_i - sum(g y)) = grad_j (g_j - sum(g y)) - g_j sum(grad y)``."""
    return grad * (grad_output - at.sum(grad_output * output, [dim], True)) - \
        grad_output * at.sum(grad * output, [dim], True)


# --- shape, padding and indexing -------------------------------------------------------------------

@helper
def permute_backwards(grad: Tensor, dims: list[int]) -> Tensor:
    """Gradient of ``permute(self, dims)``: ``grad`` permuted back by the inverse permutation."""
    return at.permute(grad, invert_permutation(dims, len(dims)))


@helper
def constant_pad_nd_backward(grad: Tensor, pad: list[int]) -> Tensor:
    """Gradient of ``constant_pad_nd(self, pad)``: the padding is constant, so ``grad`` with the
    padding cut off again, which is padding by the negated amounts (a negative pad crops; a
    negative pad of the forward, which cropped, becomes a zero padding)."""
    return at.constant_pad_nd(grad, negated(pad), 0)


@helper
def masked_fill_backward(grad: Tensor, mask: Tensor) -> Tensor:
    """Gradient of ``masked_fill(self, mask, value)`` for the 0-d tensor ``value``: it is copied
    to every position ``mask`` selects (``mask`` broadcast to ``grad``), so it gathers their sum."""
    return at.sum(at.where(mask, grad, at.new_zeros(grad, [])))


@helper
def take_backward(grad: Tensor, self: Tensor, index: Tensor) -> Tensor:
    """Gradient of ``take(self, index)`` (``self`` read as flat, negative indices from the end):
    each ``grad`` element goes back to the flat position it was read from, positions read
    several times gathering the sum."""
    numel = self.numel()
    flat_index = at.reshape(at.where(at.lt(index, 0), index + numel, index), [-1])
    flat = at.index_add(at.new_zeros(grad, [numel]), 0, flat_index, at.reshape(grad, [-1]))
    return at.view(flat, self.sizes())


@helper
def unbind_backward(grads: list[Tensor], dim: int) -> Tensor:
    """Gradient of ``unbind(self, dim)``: the slices' gradients stacked back along ``dim``, a
    slice without one (None) contributing zeros (the slices all have one shape; at least one has
    a gradient when this runs)."""
    like = grads[0]
    for i in range(len(grads)):
        if grads[i] is not None:
            like = grads[i]
    slices = []
    for i in range(len(grads)):
        if grads[i] is not None:
            slices.append(grads[i])
        else:
            slices.append(at.zeros_like(like))
    return at.stack(slices, dim)


@helper
def embedding_dense_double_backward(grad: Tensor, indices: Tensor, padding_idx: int) -> Tensor:
    """Gradient of ``embedding_dense_backward(grad_output, indices, ...)`` for ``grad_output``: that
    backward adds each ``grad_output`` row into the weight row its index names (none for
    ``padding_idx``), which is linear; its transpose reads ``grad``'s rows back at ``indices``
    (zero rows where the index is ``padding_idx``)."""
    rows = at.embedding(grad, indices)
    padded = at.unsqueeze(at.eq(indices, padding_idx), -1)
    return at.where(padded, at.new_zeros(rows, []), rows)


# --- losses and activations: second derivatives ---------------------------------------------------

@helper
def mse_loss_double_backward(grad: Tensor, self: Tensor, reduction: int) -> Tensor:
    """Gradient of ``mse_loss_backward`` for ``self``: the loss ``sum (x - t)^2`` (over N for the
    mean, ``reduction`` 1) has second derivative ``2`` (``2 / N``) on the diagonal, so ``grad``
    (already times ``grad_output``) scaled by it."""
    if reduction == 1:
        return at.div(grad * 2.0, self.numel())
    return grad * 2.0


@helper
def log_sigmoid_double_backward(grad: Tensor, self: Tensor) -> Tensor:
    """Gradient of ``log_sigmoid_backward`` for ``self``: ``d/dx log sigmoid(x) = 1 - sigmoid(x)``,
    whose derivative is ``-sigmoid(x) (1 - sigmoid(x))``."""
    s = at.sigmoid(self)
    return grad * (s * s - s)


@helper
def softplus_double_backward(grad: Tensor, self: Tensor, beta: float, threshold: float) -> Tensor:
    """Gradient of ``softplus_backward`` for ``self``: ``softplus(x) = log(1 + exp(beta x)) / beta``
    has slope ``sigmoid(beta x)`` and curvature ``beta sigmoid(beta x) (1 - sigmoid(beta x))``;
    where ``beta x > threshold`` softplus is ``x`` itself (curvature 0)."""
    s = at.sigmoid(self * beta)
    curvature = (s - s * s) * beta
    return at.where(at.gt(self * beta, threshold), at.new_zeros(grad, []), grad * curvature)


@helper
def smooth_l1_loss_double_backward(grad: Tensor, self: Tensor, target: Tensor, reduction: int,
                                   beta: float) -> Tensor:
    """Gradient of ``smooth_l1_loss_backward`` for ``self``: the loss is ``d^2 / (2 beta)`` for
    ``|d| < beta`` (``d = x - t``) and ``|d| - beta / 2`` beyond, so its curvature is ``1 / beta``
    inside and 0 outside (0 everywhere for ``beta = 0``, the L1 loss), over N for the mean."""
    if beta == 0.0:
        return at.zeros_like(grad)
    inside = at.lt(at.abs(self - target), beta)
    curvature = at.where(inside, grad / beta, at.new_zeros(grad, []))
    if reduction == 1:
        return at.div(curvature, self.numel())
    return curvature


@helper
def huber_loss_double_backward_grad_output(grad: Tensor, grad_output: Tensor, self: Tensor, target: Tensor,
                                           reduction: int, delta: float) -> Tensor:
    """Gradient of ``huber_loss_backward(grad_output, self, target, reduction, delta)`` for
    ``grad_output``: that backward is ``grad_output`` times the loss's slope ``h'(d)`` (``d = x - t``:
    ``d`` for ``|d| <= delta``, ``delta sign(d)`` beyond; over N for the mean), linear in
    ``grad_output``, so the transpose is ``grad * h'(d)``, summed to the 0-d ``grad_output`` of a
    reduced loss."""
    d = self - target
    slope = at.where(at.le(at.abs(d), delta), d, at.sign(d) * delta)
    return reduce_like_loss(grad * slope, reduction)


@helper
def soft_margin_loss_double_backward_grad_output(grad: Tensor, grad_output: Tensor, self: Tensor,
                                                 target: Tensor, reduction: int) -> Tensor:
    """Gradient of ``soft_margin_loss_backward`` for ``grad_output``: the loss ``log(1 + exp(-y x))``
    has slope ``-y sigmoid(-y x)``; the backward is ``grad_output`` times it (over N for the mean),
    so the transpose is ``grad`` times it, summed for a reduced loss."""
    slope = -target * at.sigmoid(-target * self)
    return reduce_like_loss(grad * slope, reduction)


@helper
def reduce_like_loss(elementwise: Tensor, reduction: int) -> Tensor:
    """``elementwise`` reduced as a loss's ``reduction`` says: 0 none, 1 mean, 2 sum."""
    if reduction == 1:
        return at.mean(elementwise)
    if reduction == 2:
        return at.sum(elementwise)
    return elementwise


@helper
def glu_double_backward_grad_output(grad: Tensor, self: Tensor, dim: int) -> Tensor:
    """Gradient of ``glu_backward(grad_output, self, dim)`` for ``grad_output``: with ``self`` split
    in halves ``a, b`` along ``dim``, glu's backward is ``[grad_output s, grad_output a s (1 - s)]``
    (``s = sigmoid(b)``), linear in ``grad_output``; its transpose reads ``grad``'s halves
    ``g_a s + g_b a s (1 - s)``."""
    d = wrap_dim(dim, self.dim())
    half = self.size(d) // 2
    a = at.narrow(self, d, 0, half)
    s = at.sigmoid(at.narrow(self, d, half, half))
    grad_a = at.narrow(grad, d, 0, half)
    grad_b = at.narrow(grad, d, half, half)
    return grad_a * s + grad_b * a * (s - s * s)


@helper
def native_dropout_double_backward(grad: Tensor, grad_output: Tensor, mask: Tensor, scale: float) -> Tensor:
    """Gradient of ``native_dropout_backward(grad_output, mask, scale) = grad_output * mask * scale``
    for ``grad_output``: ``grad * mask * scale``."""
    return at.mul(grad, mask) * scale


@helper
def huber_loss_double_backward(grad: Tensor, self: Tensor, target: Tensor, reduction: int, delta: float) -> Tensor:
    """Gradient of ``huber_loss_backward`` for ``self`` (``grad`` already times ``grad_output``): the
    slope ``h'(d)`` is ``d`` for ``|d| <= delta`` and constant beyond, so the curvature is 1 inside
    and 0 outside, over N for the mean."""
    inside = at.le(at.abs(self - target), delta)
    curvature = at.where(inside, grad, at.new_zeros(grad, []))
    if reduction == 1:
        return at.div(curvature, self.numel())
    return curvature


@helper
def soft_margin_loss_double_backward(grad: Tensor, self: Tensor, target: Tensor, reduction: int) -> Tensor:
    """Gradient of ``soft_margin_loss_backward`` for ``self`` (``grad`` already times
    ``grad_output``): the slope ``-y sigmoid(-y x)`` has derivative ``y^2 s (1 - s)`` with
    ``s = sigmoid(-y x)``, over N for the mean."""
    s = at.sigmoid(-target * self)
    curvature = grad * target * target * (s - s * s)
    if reduction == 1:
        return at.div(curvature, self.numel())
    return curvature


@helper
def glu_double_backward(grad: Tensor, grad_output: Tensor, self: Tensor, dim: int) -> Tensor:
    """Gradient of ``glu_backward(grad_output, self, dim)`` for ``self``: with halves ``a, b`` of
    ``self`` and of ``grad`` (``g_a, g_b``) and ``s = sigmoid(b)``, the backward's inner product with
    ``grad`` is ``go (g_a s + g_b a s (1 - s))``; its derivative for ``a`` is ``go g_b s (1 - s)``
    and for ``b`` ``go (g_a + g_b a (1 - 2 s)) s (1 - s)`` (``s' = s (1 - s)``)."""
    d = wrap_dim(dim, self.dim())
    half = self.size(d) // 2
    a = at.narrow(self, d, 0, half)
    s = at.sigmoid(at.narrow(self, d, half, half))
    slope = s - s * s
    grad_a = at.narrow(grad, d, 0, half)
    grad_b = at.narrow(grad, d, half, half)
    wrt_a = grad_output * grad_b * slope
    wrt_b = grad_output * (grad_a + grad_b * a - grad_b * a * s * 2.0) * slope
    return at.cat([wrt_a, wrt_b], d)


# --- lists of tensors: cat, stack, block_diag ------------------------------------------------------
# derivatives.yaml hands these backwards each input's sizes and dtype (``to_args_sizes(tensors)``,
# ``to_args_scalartypes(tensors)``), read from the inputs when the backward runs.

@helper
def to_args_sizes(tensors: list[Tensor]) -> list[list[int]]:
    """The sizes of each tensor of ``tensors``."""
    sizes = []
    for i in range(len(tensors)):
        sizes.append(tensors[i].sizes())
    return sizes


@helper
def to_args_scalartypes(tensors: list[Tensor]) -> list[ScalarType]:
    """The dtype of each tensor of ``tensors``."""
    dtypes = []
    for i in range(len(tensors)):
        dtypes.append(tensors[i].scalar_type())
    return dtypes


@helper
def cat_tensors_backward(grad: Tensor, sizes: list[list[int]], dtypes: list[ScalarType], dim: int) -> list[Tensor]:
    """Gradient of ``cat(tensors, dim)`` for each input (of ``sizes`` and ``dtypes``): the inputs are
    consecutive slices of the result along ``dim``, so each gets its slice of ``grad`` (the real part
    for a real input of a complex result). ``cat`` skips a 1-d empty input whatever ``dim`` says (a
    legacy rule), so it takes no slice and gets an empty gradient."""
    d = wrap_dim(dim, grad.dim())
    grads = []
    offset = 0
    for i in range(len(sizes)):
        if len(sizes[i]) == 1 and sizes[i][0] == 0:
            grads.append(at.new_zeros(grad, [0]))
        else:
            grads.append(handle_r_to_c(dtypes[i], at.narrow(grad, d, offset, sizes[i][d])))
            offset = offset + sizes[i][d]
    return grads


@helper
def stack_tensors_backward(grad: Tensor, dim: int, dtypes: list[ScalarType]) -> list[Tensor]:
    """Gradient of ``stack(tensors, dim)`` for each input (of ``dtypes``): input ``i`` is the result's
    index ``i`` along the new ``dim``, so it gets ``grad`` selected there (the real part for a real
    input of a complex result)."""
    d = wrap_dim(dim, grad.dim())
    grads = []
    for i in range(len(dtypes)):
        grads.append(handle_r_to_c(dtypes[i], at.select(grad, d, i)))
    return grads


@helper
def block_diag_backward(grad: Tensor, sizes: list[list[int]], dtypes: list[ScalarType]) -> list[Tensor]:
    """Gradient of ``block_diag(tensors)`` for each input (of ``sizes`` and ``dtypes``): input ``i`` is
    the block of the result's diagonal that starts where the blocks before it end (a 0-d input is a
    1 x 1 block, a 1-d input of n elements a 1 x n block), zeros elsewhere, so it gets that block of
    ``grad``, in its own shape (the real part for a real input of a complex result)."""
    grads = []
    row = 0
    column = 0
    for i in range(len(sizes)):
        rows = 1
        columns = 1
        if len(sizes[i]) == 2:
            rows = sizes[i][0]
            columns = sizes[i][1]
        if len(sizes[i]) == 1:
            columns = sizes[i][0]
        block = at.narrow(at.narrow(grad, 0, row, rows), 1, column, columns)
        grads.append(handle_r_to_c(dtypes[i], at.reshape(block, sizes[i])))
        row = row + rows
        column = column + columns
    return grads


# --- angles, extremes, scans and norms -------------------------------------------------------------

@helper
def angle_backward(grad: Tensor, self: Tensor) -> Tensor:
    """Gradient of ``angle(z) = atan2(y, x)`` (``z = x + iy``): ``d angle = (x dy - y dx) / |z|^2``, so
    torch's gradient of a real output for a complex input, ``grad (d/dx + i d/dy)``, is
    ``grad (-y + ix) / |z|^2 = grad i z / |z|^2 = grad i / conj(z)``; 0 at ``z = 0`` (torch's
    subgradient). A real input's angle is 0 or pi, piecewise constant: gradient 0. (``i`` is the
    square root of -1 in the input's complex dtype.)"""
    if is_real_type(self.scalar_type(), self):
        return at.zeros_like(grad)
    at_zero = at.eq(self, 0.0)
    imaginary_unit = at.sqrt(at.new_full(self, [], -1.0))
    safe = at.where(at_zero, at.ones_like(self), self)
    return at.where(at_zero, at.new_zeros(safe, []), grad * imaginary_unit / at.conj(safe))


@helper
def polar_backward(grad: Tensor, result: Tensor) -> tuple[Tensor, Tensor]:
    """Gradients of ``result = polar(abs, angle) = abs e^(i angle)`` for its real inputs: torch's
    gradient of a real input ``x`` of a complex output is ``Re(grad conj(d result/dx))``, with
    ``d result/d abs = e^(i angle)`` and ``d result/d angle = i result``; so ``Re(conj(grad) sgn(result))``
    (``abs`` is non-negative, as ``polar`` asks: ``e^(i angle)`` is ``sgn(result)``, and 0 at
    ``abs = 0``, where ``result`` no longer knows the angle) and ``Re(conj(grad) i result)``."""
    imaginary_unit = at.sqrt(at.new_full(result, [], -1.0))
    grad_conj = at.conj(grad)
    return at.real(grad_conj * at.sgn(result)), at.real(grad_conj * (result * imaginary_unit))


@helper
def extreme_backward(grad: Tensor, self: Tensor, extreme: Tensor, dims: list[int], keepdim: bool) -> Tensor:
    """Gradient of a max or min (``extreme``) of ``self`` over ``dims``: shared evenly by the elements
    equal to it (ties split the gradient, as ``amax``/``amin`` do)."""
    grad_kept = restore_reduced_dims(grad, dims, keepdim)
    mask = at.eq(self, restore_reduced_dims(extreme, dims, keepdim))
    return scale_grad_by_count(grad_kept, mask, dims)


@helper
def aminmax_backward(self: Tensor, dim: int | None, keepdim: bool, grad_min: Tensor | None,
                     grad_max: Tensor | None, min: Tensor, max: Tensor) -> Tensor:
    """Gradient of ``(min, max) = aminmax(self, dim, keepdim)``: ``amin``'s and ``amax``'s (ties
    share) over ``dim`` (every dim when None; none of a 0-d ``self``), summed; a missing gradient
    contributes nothing."""
    dims = []
    if self.dim() > 0:
        if dim is not None:
            dims.append(wrap_dim(dim, self.dim()))
        else:
            for d in range(self.dim()):
                dims.append(d)
    gradient = at.zeros_like(self)
    if grad_min is not None:
        gradient = gradient + extreme_backward(grad_min, self, min, dims, keepdim)
    if grad_max is not None:
        gradient = gradient + extreme_backward(grad_max, self, max, dims, keepdim)
    return gradient


@helper
def logcumsumexp_backward(grad: Tensor, self: Tensor, result: Tensor, dim: int) -> Tensor:
    """Gradient of ``r_k = log sum_{i <= k} exp(x_i)`` along ``dim``: ``d r_k / d x_i = exp(x_i - r_k)``
    for ``i <= k`` (the softmax of the prefix), so ``x_i`` receives ``sum_{k >= i} g_k exp(x_i - r_k)``
    (conjugated for complex inputs). Each exponent is at most 0 (``r_k >= x_i``), so it is
    computed as it stands, for every pair ``(i, k)`` (quadratic in the length of ``dim``, exact
    at any scale); the pairs ``i > k`` are masked before the exponential, so nothing overflows
    there and double backward sees no infinity. A 0-d ``self`` is its own result."""
    if self.dim() == 0:
        return grad
    d = wrap_dim(dim, self.dim())
    n = self.size(d)
    x = at.unsqueeze(at.movedim(self, d, -1), -1)                # [..., i, 1]
    r = at.unsqueeze(at.movedim(result, d, -1), -2)              # [..., 1, k]
    g = at.unsqueeze(at.movedim(grad, d, -1), -2)                # [..., 1, k]
    prefix = at.ne(at.triu(at.new_ones(self, [n, n])), 0.0)     # i <= k
    exponent = x - r
    zero = at.new_zeros(exponent, [])
    weights = at.where(prefix, at.exp(at.where(prefix, exponent, zero)), zero)
    return at.movedim(at.sum(g * at.conj(weights), [-1], False), -1, d)


@helper
def renorm_backward(grad: Tensor, self: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """Gradient of ``renorm(self, p, dim, maxnorm)``: each slice ``x`` along ``dim`` whose p-norm ``n``
    exceeds ``maxnorm`` is scaled by ``f(n) = maxnorm / (n + 1e-7)`` (torch's forward adds the
    1e-7), the others are kept. Where scaled, ``d (f x) = f dx + x f'(n) dn`` with
    ``f'(n) = -maxnorm / (n + 1e-7)^2``, so ``x`` receives ``f g + f'(n) <g, x> dn/dx``, the last
    term the norm's gradient (``vector_norm_backward``) for the coefficient ``f'(n) <g, x>``."""
    d = wrap_dim(dim, self.dim())
    dims = []
    for other in range(self.dim()):
        if other != d:
            dims.append(other)
    norm = at.linalg_vector_norm(self, p, dims, True)
    scaled = at.gt(norm, maxnorm)
    shifted = norm + 1e-7
    zero = at.new_zeros(norm, [])
    factor = at.where(scaled, at.mul(at.reciprocal(shifted), maxnorm), at.ones_like(norm))
    inner = at.sum(grad * self, dims, True)
    coefficient = at.where(scaled, at.mul(inner / (shifted * shifted), -maxnorm), zero)
    return grad * factor + vector_norm_backward(coefficient, self, p, norm, dims, True)


@helper
def _euclidean_dist_backward(grad: Tensor, x1: Tensor, x2: Tensor, result: Tensor) -> tuple[Tensor, Tensor]:
    """Gradients of ``r_pq = |x1_p - x2_q|`` (rows of ``x1 [..., P, M]`` and ``x2 [..., Q, M]``):
    ``d r_pq = <x1_p - x2_q, dx1_p - dx2_q> / r_pq``, so ``x1_p`` receives
    ``sum_q g_pq (x1_p - x2_q) / r_pq`` and ``x2_q`` the negated sum over ``p``; 0 where
    ``r_pq`` is 0 (torch's subgradient). The differences are formed as they are, not expanded as
    ``|x1|^2 + |x2|^2 - 2 x1 x2``, so nearby points lose no precision."""
    at_zero = at.eq(result, 0.0)
    safe = at.where(at_zero, at.ones_like(result), result)
    ratio = at.unsqueeze(at.where(at_zero, at.new_zeros(grad, []), grad / safe), -1)   # [..., P, Q, 1]
    weighted = ratio * (at.unsqueeze(x1, -2) - at.unsqueeze(x2, -3))                     # [..., P, Q, M]
    grad_x1 = sum_to(at.sum(weighted, [-2], False), x1.sizes())
    grad_x2 = sum_to(-at.sum(weighted, [-3], False), x2.sizes())
    return grad_x1, grad_x2


# --- losses and activations: gradients for the other inputs, second derivatives --------------------

@helper
def binary_cross_entropy_target_backward(grad: Tensor, self: Tensor, target: Tensor, weight: Tensor | None,
                                         reduction: int) -> Tensor:
    """Gradient of ``binary_cross_entropy`` for ``target``: the loss ``-w (t log x + (1 - t) log(1 - x))``
    (torch's logs floored at -100) is linear in ``t``, with slope ``-w (log x - log(1 - x))``,
    over N for the mean."""
    scaled = loss_scale(grad, reduction, self.numel())
    if weight is not None:
        scaled = scaled * weight
    log_self = at.clamp_min(at.log(self), -100.0)
    log_complement = at.clamp_min(at.log(at.rsub(self, 1.0)), -100.0)
    return scaled * (log_complement - log_self)


@helper
def binary_cross_entropy_double_backward(grad_output: Tensor, grad: Tensor, input: Tensor, target: Tensor,
                                         weight: Tensor | None, reduction: int) -> Tensor:
    """Gradient of ``binary_cross_entropy_backward(grad_output, input, target, weight, reduction)`` for
    ``input``: that backward is ``s w (x - t) / max(x (1 - x), 1e-12)`` (``s`` the ``grad_output``,
    over N for the mean; torch floors the denominator at 1e-12), whose derivative for ``x`` is
    ``s w (1 / q - (x - t) (1 - 2 x) / q^2)`` with ``q`` the floored denominator (the second term
    0 where the floor holds ``q`` constant), times ``grad``."""
    scaled = loss_scale(grad_output, reduction, input.numel())
    if weight is not None:
        scaled = scaled * weight
    product = input - input * input
    denominator = at.clamp_min(product, 1e-12)
    varying = at.gt(product, 1e-12)
    slope = at.where(varying, at.rsub(input * 2.0, 1.0), at.new_zeros(input, []))
    return grad * scaled * (at.reciprocal(denominator) - (input - target) * slope / (denominator * denominator))


@helper
def binary_cross_entropy_double_backward_grad_output(grad: Tensor, input: Tensor, target: Tensor,
                                                     weight: Tensor | None, reduction: int) -> Tensor:
    """Gradient of ``binary_cross_entropy_backward`` for ``grad_output``: that backward is linear in it
    (``grad_output`` times ``w (x - t) / max(x (1 - x), 1e-12)``, over N for the mean), so the
    transpose is ``grad`` times that factor, summed to the 0-d ``grad_output`` of a reduced loss."""
    factor = (input - target) / at.clamp_min(input - input * input, 1e-12)
    if weight is not None:
        factor = factor * weight
    if reduction == 0:
        return grad * factor
    return loss_scale(at.sum(grad * factor), reduction, input.numel())


@helper
def binary_cross_entropy_double_backward_target(grad: Tensor, grad_output: Tensor, self: Tensor, target: Tensor,
                                                weight: Tensor | None, reduction: int) -> Tensor:
    """Gradient of ``binary_cross_entropy_backward`` for ``target``: the backward
    ``s w (x - t) / max(x (1 - x), 1e-12)`` is linear in ``t`` with slope
    ``-s w / max(x (1 - x), 1e-12)``, times ``grad``."""
    scaled = loss_scale(grad_output, reduction, self.numel())
    if weight is not None:
        scaled = scaled * weight
    return -(grad * scaled / at.clamp_min(self - self * self, 1e-12))


@helper
def binary_cross_entropy_with_logits_backward(grad: Tensor, input: Tensor, target: Tensor, weight: Tensor | None,
                                              pos_weight: Tensor | None, reduction: int) -> Tensor:
    """Gradient of ``binary_cross_entropy_with_logits`` for ``input``: the loss
    ``-w (p t log s(x) + (1 - t) log s(-x))`` (``s`` the sigmoid, ``p`` the ``pos_weight``, 1 when
    None) has slope ``w (s(x) (1 - t) - p t s(-x))``, which is ``w (s(x) - t)`` for ``p = 1``;
    over N for the mean."""
    scaled = loss_scale(grad, reduction, input.numel())
    if weight is not None:
        scaled = scaled * weight
    if pos_weight is None:
        return scaled * (at.sigmoid(input) - target)
    positive = at.sigmoid(input)
    return scaled * (positive - target * positive - target * pos_weight * at.sigmoid(-input))


@helper
def binary_cross_entropy_with_logits_target_backward(grad: Tensor, input: Tensor, target: Tensor,
                                                     weight: Tensor | None, pos_weight: Tensor | None,
                                                     reduction: int) -> Tensor:
    """Gradient of ``binary_cross_entropy_with_logits`` for ``target``: the loss is linear in ``t``
    with slope ``w (log s(-x) - p log s(x))`` (``-w x`` for ``p = 1``), the logs of sigmoids taken as
    ``log_sigmoid`` (no underflow to ``log 0``); over N for the mean."""
    scaled = loss_scale(grad, reduction, input.numel())
    if weight is not None:
        scaled = scaled * weight
    if pos_weight is None:
        return -(scaled * input)
    return scaled * (at.log_sigmoid(-input) - at.log_sigmoid(input) * pos_weight)


@helper
def elu_double_backward(grad: Tensor, grad_output: Tensor, alpha: float, scale: float, input_scale: float,
                        is_result: bool, self_or_result: Tensor) -> Tensor:
    """Gradient of ``elu_backward`` for ``self_or_result``: that backward is ``grad_output`` times
    elu's slope, ``scale`` for ``x > 0`` and ``input_scale alpha scale exp(input_scale x)`` below,
    the latter ``input_scale (y + alpha scale)`` in terms of the result ``y``. Its derivative is 0 on
    the positive side and, below, ``input_scale`` times the slope (for ``x``) or ``input_scale`` (for
    ``y``); at 0 torch takes the positive side's 0."""
    scaled = grad * grad_output
    curvature = at.mul(scaled, input_scale)
    if not is_result:
        curvature = at.mul(at.elu_backward(scaled, alpha, scale, input_scale, is_result, self_or_result), input_scale)
    return at.where(at.ge(self_or_result, 0.0), at.new_zeros(curvature, []), curvature)


@helper
def gelu_double_backward(grad: Tensor, grad_output: Tensor, self: Tensor, approximate: str) -> Tensor:
    """Gradient of ``gelu_backward(grad_output, self, approximate)`` for ``self``: ``grad_output``
    times gelu's second derivative (``gelu_second_derivative``), times ``grad``."""
    return grad * grad_output * gelu_second_derivative(self, approximate)


@helper
def linear_double_backward(grads: list[Tensor], self: Tensor, grad_output: Tensor,
                           weight: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Gradients of ``linear_backward(self, grad_output, weight)`` = (``gi = go W``,
    ``gw = sum_b go_b^T x_b``, ``gb = sum_b go_b``) for ``self``, ``grad_output`` and ``weight``,
    given ``grads`` = (``Gi``, ``Gw``, ``Gb``) of those outputs (None: no gradient). The three are
    bilinear: ``<Gi, go W>`` gives ``go`` ``Gi W^T`` and ``W`` ``go^T Gi``; ``<Gw, go^T x>`` gives
    ``x`` ``go Gw`` and ``go`` ``x Gw^T``; ``<Gb, sum go>`` gives ``go`` ``Gb`` broadcast. The batch
    dims of ``x`` and ``go`` are flattened for the products with ``W``'s shape."""
    grad_self = None
    grad_grad_output = None
    grad_weight = None
    if grads[0] is not None:
        grad_grad_output = at.matmul(grads[0], at.t(weight))
        flat_grad_output = at.reshape(grad_output, [-1, grad_output.size(-1)])
        grad_weight = at.mm(at.t(flat_grad_output), at.reshape(grads[0], [-1, self.size(-1)]))
    if grads[1] is not None:
        grad_self = at.matmul(grad_output, grads[1])
        from_weight = at.matmul(self, at.t(grads[1]))
        if grad_grad_output is None:
            grad_grad_output = from_weight
        else:
            grad_grad_output = grad_grad_output + from_weight
    if grads[2] is not None:
        from_bias = at.expand(grads[2], grad_output.sizes())
        if grad_grad_output is None:
            grad_grad_output = from_bias
        else:
            grad_grad_output = grad_grad_output + from_bias
    return grad_self, grad_grad_output, grad_weight


# --- forward mode: tangents of norms, scans and extremes --------------------------------------------
# Each tangent is the transpose of the backward above: ``d out = sum_i (d out / d x_i) t_i``, with the
# same subgradients at the kinks, so forward and reverse mode agree.

@helper
def norm_jvp(self_p: Tensor, self_t: Tensor, p: Scalar | None, norm: Tensor) -> Tensor:
    """Tangent of the p-norm of every element (``p`` 2 when not given) along ``self_t``."""
    every_dim = []
    for d in range(self_p.dim()):
        every_dim.append(d)
    return norm_jvp__dim(self_p, self_t, p, norm, every_dim, False)


@helper
def norm_jvp__dim(self_p: Tensor, self_t: Tensor, p: Scalar | None, norm: Tensor, dim: list[int] | None,
                  keepdim: bool) -> Tensor:
    """Tangent of the p-norm over ``dim`` (``None`` or empty: every dim; ``p`` 2 when not given):
    ``d norm = Re sum_i conj(d norm / d x_i) t_i``, the gradient from ``vector_norm_backward`` for a
    gradient of ones (real for a complex input, whose norm is real)."""
    slope = vector_norm_backward(at.ones_like(norm), self_p, 2.0, norm, dim, keepdim)
    if p is not None:
        slope = vector_norm_backward(at.ones_like(norm), self_p, p, norm, dim, keepdim)
    return at.real(at.sum(at.conj(slope) * self_t, reduced_dims(dim, self_p.dim()), keepdim))


@helper
def linalg_vector_norm_jvp(self_p: Tensor, self_t: Tensor, ord: Scalar, norm: Tensor, dim: list[int] | None,
                           keepdim: bool) -> Tensor:
    """Tangent of ``linalg_vector_norm(self, ord, dim, keepdim)``: ``norm_jvp``."""
    return norm_jvp__dim(self_p, self_t, ord, norm, dim, keepdim)


@helper
def aminmax_jvp(self_p: Tensor, self_t: Tensor, extreme: Tensor, dim: int | None, keepdim: bool) -> Tensor:
    """Tangent of the min or max (``extreme``) of ``aminmax(self, dim, keepdim)``: the tangent's mean
    over the elements equal to it (ties share, as the backward splits the gradient evenly)."""
    dims = []
    if self_p.dim() > 0:
        if dim is not None:
            dims.append(wrap_dim(dim, self_p.dim()))
        else:
            for d in range(self_p.dim()):
                dims.append(d)
    mask = at.eq(self_p, restore_reduced_dims(extreme, dims, keepdim))
    return at.sum(self_t * mask, dims, keepdim) / at.sum(mask, dims, keepdim)


@helper
def logcumsumexp_jvp(self_p: Tensor, self_t: Tensor, dim: int) -> Tensor:
    """Tangent of ``r_k = log sum_{i <= k} exp(x_i)`` along ``dim``: ``sum_{i <= k} exp(x_i - r_k) t_i``,
    the prefix's softmax applied to the tangent. ``r_k`` is the ``logsumexp`` of the prefix, the
    later elements masked with ``-inf`` (``log 0``), which adds nothing to it; the pairs ``i > k``
    are masked before the exponential as in ``logcumsumexp_backward``."""
    if self_p.dim() == 0:
        return self_t
    d = wrap_dim(dim, self_p.dim())
    n = self_p.size(d)
    x = at.unsqueeze(at.movedim(self_p, d, -1), -1)               # [..., i, 1]
    t = at.unsqueeze(at.movedim(self_t, d, -1), -1)
    prefix = at.ne(at.triu(at.new_ones(self_p, [n, n])), 0.0)    # i <= k
    masked = at.where(prefix, x, at.log(at.new_zeros(x, [])))
    r = at.logsumexp(masked, [-2], True)                           # [..., 1, k]
    zero = at.new_zeros(masked, [])
    weights = at.where(prefix, at.exp(at.where(prefix, x - r, zero)), zero)
    return at.movedim(at.sum(weights * t, [-2], False), -1, d)


@helper
def renorm_jvp(self_p: Tensor, self_t: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """Tangent of ``renorm(self, p, dim, maxnorm)``: where a slice is scaled by
    ``f(n) = maxnorm / (n + 1e-7)``, ``d (f x) = f t + x f'(n) dn`` with ``dn`` the norm's tangent
    (``renorm_backward``'s transpose); elsewhere the tangent itself."""
    d = wrap_dim(dim, self_p.dim())
    dims = []
    for other in range(self_p.dim()):
        if other != d:
            dims.append(other)
    norm = at.linalg_vector_norm(self_p, p, dims, True)
    scaled = at.gt(norm, maxnorm)
    shifted = norm + 1e-7
    factor = at.where(scaled, at.mul(at.reciprocal(shifted), maxnorm), at.ones_like(norm))
    norm_t = norm_jvp__dim(self_p, self_t, p, norm, dims, True)
    coefficient = at.where(scaled, at.mul(norm_t / (shifted * shifted), -maxnorm), at.new_zeros(norm, []))
    return self_t * factor + self_p * coefficient


@helper
def safe_logsumexp_jvp(self_p: Tensor, self_t: Tensor, dim: list[int], keepdim: bool) -> Tensor:
    """Tangent of ``logsumexp(self, dim, keepdim)`` (``logsumexp_jvp``), 0 for a slice that is all
    ``-inf`` (whose logsumexp is ``-inf``: ``_safe_softmax`` gives such a slice zeros)."""
    total = at.logsumexp(self_p, dim, True)
    empty = at.logical_and(at.logical_not(at.isfinite(total)), at.lt(total, 0.0))
    safe = at.where(empty, at.new_zeros(total, []), total)
    return at.sum(at.exp(self_p - safe) * self_t, dim, keepdim)


# --- products of three: _trilinear ----------------------------------------------------------------

@helper
def wrap_opt_if(t: Tensor, condition: bool) -> Tensor | None:
    """``t`` when ``condition`` holds, else None (a saved input that no asked-for gradient reads)."""
    if condition:
        return t
    return None


@helper
def listed(values: list[int], value: int) -> bool:
    """Whether ``value`` is one of ``values``."""
    for i in range(len(values)):
        if values[i] == value:
            return True
    return False


@helper
def unsqueezed_at(t: Tensor, dims: list[int], ndim: int) -> Tensor:
    """``t`` with a size-1 dim inserted at each of ``dims`` (indices into the ``ndim`` dims of the
    result), in increasing order so that each lands at its own index."""
    expanded = t
    for d in range(ndim):
        if listed(dims, d):
            expanded = at.unsqueeze(expanded, d)
    return expanded


@helper
def trilinear_factor_backward(g: Tensor, a: Tensor, expand_a: list[int], b: Tensor, expand_b: list[int],
                              expand_own: list[int]) -> Tensor:
    """One input's gradient in ``_trilinear_backward``: ``g`` (``grad`` with the summed dims back) times
    the two other inputs ``a`` and ``b`` unsqueezed at their ``expand`` dims, summed over the input's
    own ``expand_own`` dims (where it was broadcast) and viewed without them. The input's sizes are
    the product's elsewhere, so it need not be saved."""
    ndim = g.dim()
    product = g * unsqueezed_at(a, expand_a, ndim) * unsqueezed_at(b, expand_b, ndim)
    unsqueezed_sizes = []
    own_sizes = []
    for d in range(ndim):
        if listed(expand_own, d):
            unsqueezed_sizes.append(1)
        else:
            unsqueezed_sizes.append(product.size(d))
            own_sizes.append(product.size(d))
    return at.reshape(sum_to(product, unsqueezed_sizes), own_sizes)


@helper
def _trilinear_backward(grad: Tensor, i1: Tensor | None, i2: Tensor | None, i3: Tensor | None, expand1: list[int],
                        expand2: list[int], expand3: list[int], sumdim: list[int],
                        grad_mask: list[bool]) -> tuple[Tensor, Tensor, Tensor]:
    """Gradients of ``_trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim)``: each input is
    unsqueezed at its ``expand`` dims, the three are multiplied (broadcasting) and the product is
    summed over ``sumdim``. The product is linear in each factor, so one input's gradient is
    ``grad`` (unsqueezed back at ``sumdim``) times the two other factors, summed over the input's
    own ``expand`` dims (``trilinear_factor_backward``). An input not in ``grad_mask`` gets None; an
    input is given (not None) when another input's gradient needs it."""
    grad_i1 = None
    grad_i2 = None
    grad_i3 = None
    g = unsqueezed_at(grad, sumdim, grad.dim() + len(sumdim))
    if grad_mask[0]:
        grad_i1 = trilinear_factor_backward(g, i2, expand2, i3, expand3, expand1)
    if grad_mask[1]:
        grad_i2 = trilinear_factor_backward(g, i1, expand1, i3, expand3, expand2)
    if grad_mask[2]:
        grad_i3 = trilinear_factor_backward(g, i1, expand1, i2, expand2, expand3)
    return grad_i1, grad_i2, grad_i3


# --- a power of a Scalar, layer and batch norm's tangents from saved statistics ---

@helper
def pow_backward_exponent__scalar(grad: Tensor, self: Scalar, exponent: Tensor, result: Tensor) -> Tensor:
    """Gradient of ``self ** exponent`` for ``exponent``, ``self`` a Scalar: ``pow_backward_exponent``
    with the base as a 0-d tensor of the result's dtype."""
    return pow_backward_exponent(grad, at.new_full(result, [], self), exponent, result)


@helper
def layer_norm_jvp__saved(input: Tensor, input_t: Tensor, weight: Tensor | None, weight_t: Tensor | None,
                          bias: Tensor | None, bias_t: Tensor | None, mean: Tensor, rstd: Tensor,
                          normalized_shape: list[int]) -> Tensor:
    """Tangent of ``native_layer_norm``'s output ``x_hat * weight + bias`` from the saved ``mean`` and
    ``rstd`` (``x_hat = (x - mean) rstd`` over the last ``len(normalized_shape)`` dims): ``x_hat``'s
    tangent is ``layer_norm_normalized_backward`` of ``input_t`` (its Jacobian is symmetric); a
    missing tangent contributes 0."""
    norm_dims = []
    for d in range(input.dim() - len(normalized_shape), input.dim()):
        norm_dims.append(d)
    normalized = (input - mean) * rstd
    out_t = layer_norm_normalized_backward(input_t, normalized, rstd, norm_dims)
    if weight is not None:
        out_t = out_t * weight
    if weight_t is not None:
        out_t = out_t + normalized * weight_t
    if bias_t is not None:
        out_t = out_t + bias_t
    return out_t


@helper
def batch_norm_jvp(input_p: Tensor, input_t: Tensor, weight_p: Tensor | None, weight_t: Tensor | None,
                   bias_p: Tensor | None, bias_t: Tensor | None, running_mean: Tensor | None,
                   running_var: Tensor | None, save_mean: Tensor, save_invstd: Tensor, train: bool,
                   eps: float) -> Tensor:
    """Tangent of batch norm's output ``x_hat * weight + bias``, all per channel (dim 1).
    Training: ``x_hat = (x - mean) invstd`` with the batch's statistics over every dim but 1 (the
    saved ``save_mean``, ``save_invstd``), layer norm's algebra over those dims, so ``x_hat``'s
    tangent is ``layer_norm_normalized_backward`` of ``input_t`` (a symmetric Jacobian).
    Evaluation: the running statistics are constants, ``invstd = 1 / sqrt(running_var + eps)``
    and ``x_hat``'s tangent is ``input_t * invstd``. A missing tangent contributes 0."""
    channel_sizes = [1, input_p.size(1)]
    batch_dims = [0]
    for d in range(2, input_p.dim()):
        channel_sizes.append(1)
        batch_dims.append(d)
    if not train and running_mean is not None and running_var is not None:
        invstd = at.reshape(at.rsqrt(running_var + eps), channel_sizes)
        normalized = (input_p - at.reshape(running_mean, channel_sizes)) * invstd
        out_t = input_t * invstd
    else:
        invstd = at.reshape(save_invstd, channel_sizes)
        normalized = (input_p - at.reshape(save_mean, channel_sizes)) * invstd
        out_t = layer_norm_normalized_backward(input_t, normalized, invstd, batch_dims)
    if weight_p is not None:
        out_t = out_t * at.reshape(weight_p, channel_sizes)
    if weight_t is not None:
        out_t = out_t + normalized * at.reshape(weight_t, channel_sizes)
    if bias_t is not None:
        out_t = out_t + at.reshape(bias_t, channel_sizes)
    return out_t


# --- convolution's tangent --------------------------------------------------------------------------

@helper
def convolution_jvp(input_p: Tensor, input_t: Tensor | None, weight_p: Tensor, weight_t: Tensor | None,
                    bias_p: Tensor | None, bias_t: Tensor | None, stride: list[int], padding: list[int],
                    dilation: list[int], transposed: bool, output_padding: list[int], groups: int) -> Tensor:
    """Tangent of ``convolution(input, weight, bias, ...)``: the convolution is bilinear in ``input``
    and ``weight`` and adds ``bias`` per output channel (dim 1), so its tangent is
    ``conv(input_t, weight) + conv(input, weight_t) + bias_t`` (``bias_t`` viewed along dim 1); a
    missing tangent contributes 0."""
    tangent = None
    if input_t is not None:
        tangent = at.convolution(input_t, weight_p, None, stride, padding, dilation, transposed, output_padding,
                                 groups)
    if weight_t is not None:
        from_weight = at.convolution(input_p, weight_t, None, stride, padding, dilation, transposed, output_padding,
                                     groups)
        if tangent is None:
            tangent = from_weight
        else:
            tangent = tangent + from_weight
    if tangent is None:
        tangent = at.zeros_like(at.convolution(input_p, weight_p, None, stride, padding, dilation, transposed,
                                               output_padding, groups))
    if bias_t is not None:
        channel_sizes = [1, bias_t.numel()]
        for d in range(2, tangent.dim()):
            channel_sizes.append(1)
        tangent = tangent + at.reshape(bias_t, channel_sizes)
    return tangent


@helper
def _convolution_jvp(input_p: Tensor, input_t: Tensor | None, weight_p: Tensor, weight_t: Tensor | None,
                     bias_p: Tensor | None, bias_t: Tensor | None, stride: list[int], padding: list[int],
                     dilation: list[int], transposed: bool, output_padding: list[int], groups: int, benchmark: bool,
                     deterministic: bool, cudnn_enabled: bool, allow_tf32: bool) -> Tensor:
    """Tangent of ``_convolution``: ``convolution_jvp`` (the backend flags change how the convolution
    is computed, not its value)."""
    return convolution_jvp(input_p, input_t, weight_p, weight_t, bias_p, bias_t, stride, padding, dilation, transposed,
                           output_padding, groups)



@helper
def convolution_backward_jvp_grad_bias(grad_out_t: Tensor, grad_bias: Tensor | None) -> Tensor | None:
    """Tangent of ``convolution_backward``'s bias gradient (``grad_bias``, None when not asked for):
    that gradient is ``grad_output`` summed over the batch and spatial dims (all but dim 1), a linear
    map, so its tangent is ``grad_out_t`` summed the same way."""
    if grad_bias is None:
        return None
    dims = [0]
    for d in range(2, grad_out_t.dim()):
        dims.append(d)
    return at.sum(grad_out_t, dims, False)

# --- factories like a tensor (no gradient) ---------------------------------------------------------
# derivatives.yaml makes constants with another tensor's options (``at::zeros(sizes, x.options())``,
# ``at::scalar_tensor(0., grad.options())``), which the importer writes ``at.new_zeros(x, sizes)``,
# ``at.new_ones`` and ``at.new_full`` (transpiler/yaml_import/main_dialect.py).

nondifferentiable(
    "new_ones(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, "
    "Device? device=None, bool? pin_memory=None) -> Tensor",
    "new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, "
    "Device? device=None, bool? pin_memory=None) -> Tensor",
)
