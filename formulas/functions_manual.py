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

from formulas import Scalar, ScalarType, Tensor, TensorOptions, at, helper
from formulas.helpers import div_tensor_other_backward, div_tensor_self_backward, handle_r_to_c, wrap_dim


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
