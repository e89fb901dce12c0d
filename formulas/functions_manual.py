"""FunctionsManual's other signatures of the library's helpers, for the imported derivatives.yaml.

derivatives.yaml calls some FunctionsManual functions under one name with several C++
signatures (``unsqueeze_to(grad, sizes)`` for ``squeeze()``, ``unsqueeze_to(grad, dim, sizes)``
for ``squeeze.dim``; ``mul_tensor_backward`` with a Tensor or a Scalar ``other``). The library
helper of that name has one of them; each other one is a helper ``name__variant``, which the C++
path tries, in order, when a call of ``name`` does not fit ``name`` itself. Each is derived
here from the mathematics, like the helpers it extends.
"""
from __future__ import annotations

from formulas import Scalar, ScalarType, Tensor, at, helper
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
