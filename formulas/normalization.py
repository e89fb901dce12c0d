"""Layer normalization: ``native_layer_norm`` and the ``layer_norm`` users call.

Over the last ``k = len(normalized_shape)`` dims, ``N`` elements each:
``mean = sum(x) / N``, ``rstd = 1 / sqrt(sum((x - mean)^2) / N + eps)``, ``x_hat = (x - mean) rstd``,
``out = x_hat * weight + bias``. ``native_layer_norm`` also returns ``mean`` and ``rstd``, which
carry no gradient (as in torch): a backward that captured them would lose their dependence on the
input in double backward, so the backwards recompute ``rstd`` and ``x_hat`` from the input with
differentiable operators.
"""
from __future__ import annotations

from formulas import Tensor, at, derivative, helper
from formulas.helpers import sum_to

# --- layer normalization -------------------------------------------------------------

@helper
def layer_norm_rstd(input: Tensor, norm_dims: list[int], eps: float) -> Tensor:
    """``1 / sqrt(var + eps)`` of ``input`` over ``norm_dims`` (biased variance, dims kept), built
    from differentiable operators."""
    centered = input - at.mean(input, norm_dims, True)
    return at.rsqrt(at.mean(centered * centered, norm_dims, True) + eps)


@helper
def layer_norm_normalized(input: Tensor, rstd: Tensor, norm_dims: list[int]) -> Tensor:
    """``x_hat = (input - mean) * rstd`` over ``norm_dims``."""
    return (input - at.mean(input, norm_dims, True)) * rstd


@helper
def layer_norm_normalized_backward(grad_normalized: Tensor, normalized: Tensor, rstd: Tensor,
                                   norm_dims: list[int]) -> Tensor:
    """The gradient of ``x -> x_hat`` applied to ``grad_normalized``:
    ``rstd (g - mean(g) - x_hat mean(g x_hat))`` over ``norm_dims``. Its Jacobian
    ``rstd (I - 1 1^T / N - x_hat x_hat^T / N)`` is symmetric, so this is also the jvp."""
    return (grad_normalized - at.mean(grad_normalized, norm_dims, True)
            - normalized * at.mean(grad_normalized * normalized, norm_dims, True)) * rstd


@helper
def layer_norm_input_backward(grad: Tensor, input: Tensor, weight: Tensor | None, norm_dims: list[int],
                              eps: float) -> Tensor:
    """The input's gradient: ``x_hat``'s gradient ``grad * weight`` through ``x -> x_hat``."""
    rstd = layer_norm_rstd(input, norm_dims, eps)
    grad_normalized = grad * weight if weight is not None else grad
    return layer_norm_normalized_backward(grad_normalized, layer_norm_normalized(input, rstd, norm_dims), rstd,
                                          norm_dims)


@helper
def layer_norm_weight_backward(grad: Tensor, input: Tensor, normalized_shape: list[int], norm_dims: list[int],
                               eps: float) -> Tensor:
    """The weight's gradient: ``grad * x_hat`` summed over the leading dims."""
    normalized = layer_norm_normalized(input, layer_norm_rstd(input, norm_dims, eps), norm_dims)
    return sum_to(grad * normalized, normalized_shape)


@helper
def layer_norm_backward(grad: Tensor, input: Tensor, weight: Tensor | None, normalized_shape: list[int],
                        norm_dims: list[int], eps: float,
                        output_mask: list[bool]) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """The gradients of ``x_hat * weight + bias`` for the input, weight and bias, those
    ``output_mask`` asks for (None for the others); the weight's and bias's sum over the leading dims."""
    grad_input = layer_norm_input_backward(grad, input, weight, norm_dims, eps) if output_mask[0] else None
    grad_weight = layer_norm_weight_backward(grad, input, normalized_shape, norm_dims, eps) if output_mask[1] else None
    grad_bias = sum_to(grad, normalized_shape) if output_mask[2] else None
    return grad_input, grad_weight, grad_bias


@helper
def layer_norm_jvp(input: Tensor, input_t: Tensor, weight: Tensor | None, weight_t: Tensor | None,
                   bias_t: Tensor | None, norm_dims: list[int], eps: float) -> Tensor:
    """The tangent of ``x_hat * weight + bias`` (weight and bias optional)."""
    rstd = layer_norm_rstd(input, norm_dims, eps)
    normalized = layer_norm_normalized(input, rstd, norm_dims)
    normalized_t = layer_norm_normalized_backward(input_t, normalized, rstd, norm_dims)
    out_t = normalized_t
    if weight is not None:
        out_t = normalized_t * weight + normalized * weight_t
    if bias_t is not None:
        out_t = out_t + bias_t
    return out_t


@helper
def trailing_dims(ndim: int, count: int) -> list[int]:
    """The last ``count`` dims of an ``ndim``-dimensional tensor."""
    dims = []
    for d in range(ndim - count, ndim):
        dims.append(d)
    return dims


@derivative("native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) "
            "-> (Tensor, Tensor, Tensor)", output_differentiability=[True, False, False])
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    out, mean, rstd = at.native_layer_norm(input, normalized_shape, weight, bias, eps)
    norm_dims = trailing_dims(input.dim(), len(normalized_shape))
    def backward(grad, *, needs_input_grad):
        grad_input, grad_weight, grad_bias = layer_norm_backward(grad, input, weight, normalized_shape, norm_dims, eps,
                                                                 needs_input_grad)
        return grad_input, grad_weight, grad_bias
    def jvp(input_t, weight_t, bias_t):
        out_t = layer_norm_jvp(input, input_t, weight, weight_t, bias_t, norm_dims, eps)
        return out_t
    return (out, mean, rstd), backward


@derivative("layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
            "float eps=1e-05, bool cudnn_enable=True) -> Tensor")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    # torch's composite over native_layer_norm, one node here with its output's derivative
    result = at.layer_norm(input, normalized_shape, weight, bias, eps, cudnn_enable)
    norm_dims = trailing_dims(input.dim(), len(normalized_shape))
    def backward(grad, *, needs_input_grad):
        grad_input, grad_weight, grad_bias = layer_norm_backward(grad, input, weight, normalized_shape, norm_dims, eps,
                                                                 needs_input_grad)
        return grad_input, grad_weight, grad_bias
    def jvp(input_t, weight_t, bias_t):
        result_t = layer_norm_jvp(input, input_t, weight, weight_t, bias_t, norm_dims, eps)
        return result_t
    return result, backward
