"""ATen's fused backward operators that the backwards of other modules call (one kernel where
the composed expression takes several; torch's own backwards call the same ops), each with its
own formula so that double backward through them exists:

- of pointwise functions and activations: tanh_backward, sigmoid_backward, threshold_backward,
  hardtanh_backward, leaky_relu_backward, softshrink_backward, hardshrink_backward,
  hardswish_backward, hardsigmoid_backward, elu_backward, gelu_backward, softplus_backward,
  silu_backward, mish_backward, logit_backward.
  They are linear in the incoming gradient, so their gradient with respect to it is the op
  itself, and the other input gets the derivative of the op's expression (softshrink_backward and
  hardshrink_backward are members of threshold_backward's formula family, ``@family_member``);
- of dropout: native_dropout_backward (the gradient times the mask and the scale), also a member
  of threshold_backward's family: the op applied to the gradient, its mask as data;
- of the softmaxes, ``max.dim``/``min.dim`` and ``gather``: _softmax_backward_data,
  _log_softmax_backward_data, value_selecting_reduction_backward, gather_backward;
- of views and selections: select_backward, slice_backward, diagonal_backward,
  index_select_backward, trace_backward, masked_select_backward, cummaxmin_backward, the gradient
  placed into zeros of the input's shape. Their own gradient is the adjoint placement (the
  forward view or selection applied to the gradient) and their jvp is the op applied to the
  tangent.

A topic's fused backward op that shares a helper with its forward stays with it (pooling,
``nll_loss_backward``, ``embedding_dense_backward``, ``embedding_backward``).
"""
from __future__ import annotations

from formulas import Scalar, Tensor, at, derivative, family_member, helper
from formulas.activations import (infinitely_differentiable_logit_backward, infinitely_differentiable_mish_backward,
                                  infinitely_differentiable_silu_backward)
from formulas.helpers import gelu_second_derivative, sum_to


@derivative("tanh_backward(Tensor grad_output, Tensor output) -> Tensor")
def tanh_backward(grad_output, output):
    result = at.tanh_backward(grad_output, output)
    grad_output_sizes = grad_output.sizes()
    output_sizes = output.sizes()
    def backward(grad, *, needs_input_grad):
        # result = grad_output * (1 - output^2)
        grad_grad_output = sum_to(at.tanh_backward(grad, output), grad_output_sizes) if needs_input_grad[0] else None
        grad_out = sum_to(grad * grad_output * output * -2, output_sizes) if needs_input_grad[1] else None
        return grad_grad_output, grad_out
    def jvp(grad_output_t, output_t):
        # d [g (1 - o^2)] = g_t (1 - o^2) - 2 g o o_t
        result_t = at.tanh_backward(grad_output_t, output) + grad_output * output * output_t * -2
        return result_t
    return result, backward


@derivative("sigmoid_backward(Tensor grad_output, Tensor output) -> Tensor")
def sigmoid_backward(grad_output, output):
    result = at.sigmoid_backward(grad_output, output)
    grad_output_sizes = grad_output.sizes()
    output_sizes = output.sizes()
    def backward(grad, *, needs_input_grad):
        # result = grad_output * output * (1 - output): d/d output = grad_output * (1 - 2 output)
        grad_grad_output = sum_to(at.sigmoid_backward(grad, output), grad_output_sizes) if needs_input_grad[0] else None
        grad_out = None
        if needs_input_grad[1]:
            # one product (not scaled - 2 scaled output): an infinite output gives -inf, as torch, not inf - inf
            grad_out = sum_to(grad * grad_output * (1.0 - (output + output)), output_sizes)
        return grad_grad_output, grad_out
    def jvp(grad_output_t, output_t):
        # d [g o (1 - o)] = g_t o (1 - o) + g (1 - 2 o) o_t
        result_t = at.sigmoid_backward(grad_output_t, output) + grad_output * output_t * (1.0 - (output + output))
        return result_t
    return result, backward


@derivative("threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor")
@family_member("softshrink_backward(Tensor grad_output, Tensor self, Scalar lambd) -> Tensor",
               rename={"threshold_backward": "softshrink_backward", "threshold": "lambd"})
@family_member("hardshrink_backward(Tensor grad_out, Tensor self, Scalar lambd) -> Tensor",
               rename={"threshold_backward": "hardshrink_backward", "threshold": "lambd", "grad_output": "grad_out",
                       "grad_output_sizes": "grad_out_sizes", "grad_output_t": "grad_out_t"})
@family_member("native_dropout_backward(Tensor grad_output, Tensor mask, float scale) -> Tensor",
               rename={"threshold_backward": "native_dropout_backward", "self": "mask", "threshold": "scale"})
def threshold_backward(grad_output, self, threshold):
    result = at.threshold_backward(grad_output, self, threshold)
    grad_output_sizes = grad_output.sizes()
    def backward(grad):
        # result = grad_output where self > threshold, else 0 (the shrinks: outside [-lambd, lambd];
        # dropout: grad_output * mask * scale): linear in grad_output, so its own adjoint there, and
        # piecewise constant in self (dropout's mask is data): no gradient
        return sum_to(at.threshold_backward(grad, self, threshold), grad_output_sizes), None
    def jvp(grad_output_t):
        # linear in grad_output; piecewise constant in self
        result_t = at.threshold_backward(grad_output_t, self, threshold)
        return result_t
    return result, backward


@derivative("_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor")
def _softmax_backward_data(grad_output, output, dim, input_dtype):
    result = at._softmax_backward_data(grad_output, output, dim, input_dtype)
    def backward(grad, *, needs_input_grad):
        # result = output * (grad_output - sum(grad_output * output)): self-adjoint in grad_output;
        # d/d output = grad_output * (grad - sum(grad * output)) - grad * sum(grad_output * output)
        grad_grad_output = at._softmax_backward_data(grad, output, dim, input_dtype) if needs_input_grad[0] else None
        grad_out = None
        if needs_input_grad[1]:
            grad_out = (grad_output * (grad - at.sum(grad * output, [dim], True))
                        - grad * at.sum(grad_output * output, [dim], True))
        return grad_grad_output, grad_out
    def jvp(grad_output_t, output_t):
        # d [o (g - sum(g o))] = (the op on g_t) + o_t (g - sum(g o)) - o sum(g o_t)
        result_t = (at._softmax_backward_data(grad_output_t, output, dim, input_dtype)
                    + output_t * (grad_output - at.sum(grad_output * output, [dim], True))
                    - output * at.sum(grad_output * output_t, [dim], True))
        return result_t
    return result, backward


@derivative("_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor")
def _log_softmax_backward_data(grad_output, output, dim, input_dtype):
    result = at._log_softmax_backward_data(grad_output, output, dim, input_dtype)
    def backward(grad, *, needs_input_grad):
        # result = grad_output - exp(output) * sum(grad_output)
        scaled = grad * at.exp(output)
        grad_grad_output = grad - at.sum(scaled, [dim], True) if needs_input_grad[0] else None
        grad_out = -scaled * at.sum(grad_output, [dim], True) if needs_input_grad[1] else None
        return grad_grad_output, grad_out
    def jvp(grad_output_t, output_t):
        # d [g - exp(o) sum(g)] = (the op on g_t) - exp(o) o_t sum(g)
        result_t = (at._log_softmax_backward_data(grad_output_t, output, dim, input_dtype)
                    - at.exp(output) * output_t * at.sum(grad_output, [dim], True))
        return result_t
    return result, backward


@derivative("value_selecting_reduction_backward(Tensor grad, int dim, Tensor indices, SymInt[] sizes, "
            "bool keepdim) -> Tensor")
def value_selecting_reduction_backward(grad, dim, indices, sizes, keepdim):
    result = at.value_selecting_reduction_backward(grad, dim, indices, sizes, keepdim)
    grad_sizes = grad.sizes()
    def backward(grad_result):
        # result scatters grad to indices along dim: its adjoint gathers them back
        indices_kept = indices
        if not keepdim and len(sizes) > 0:
            indices_kept = at.unsqueeze(indices, dim)
        return at.reshape(at.gather(grad_result, dim, indices_kept), grad_sizes), None
    def jvp(grad_t):
        # linear in grad; indices carry no tangent
        result_t = at.value_selecting_reduction_backward(grad_t, dim, indices, sizes, keepdim)
        return result_t
    return result, backward


@derivative("gather_backward(Tensor grad, Tensor self, int dim, Tensor index, bool sparse_grad) -> Tensor")
def gather_backward(grad, self, dim, index, sparse_grad):
    result = at.gather_backward(grad, self, dim, index, sparse_grad)
    def backward(grad_result):
        # result = zeros of self's shape with grad added at index along dim: its adjoint
        # gathers; self gives only its shape, and index is integral
        return at.gather(grad_result, dim, index), None, None
    def jvp(grad_t):
        # linear in grad; self gives only its shape
        result_t = at.gather_backward(grad_t, self, dim, index, sparse_grad)
        return result_t
    return result, backward


@derivative("hardtanh_backward(Tensor grad_output, Tensor self, Scalar min_val, Scalar max_val) -> Tensor")
def hardtanh_backward(grad_output, self, min_val, max_val):
    result = at.hardtanh_backward(grad_output, self, min_val, max_val)
    grad_output_sizes = grad_output.sizes()
    def backward(grad):
        # result = grad_output strictly inside (min_val, max_val), else 0: linear in grad_output,
        # piecewise constant in self (no gradient)
        return sum_to(at.hardtanh_backward(grad, self, min_val, max_val), grad_output_sizes), None
    def jvp(grad_output_t):
        # linear in grad_output; piecewise constant in self
        result_t = at.hardtanh_backward(grad_output_t, self, min_val, max_val)
        return result_t
    return result, backward


@derivative("leaky_relu_backward(Tensor grad_output, Tensor self, Scalar negative_slope, bool self_is_result) -> Tensor")
def leaky_relu_backward(grad_output, self, negative_slope, self_is_result):
    result = at.leaky_relu_backward(grad_output, self, negative_slope, self_is_result)
    grad_output_sizes = grad_output.sizes()
    def backward(grad):
        # result = grad_output where self > 0, else negative_slope * grad_output: linear in
        # grad_output, piecewise constant in self (no gradient)
        return sum_to(at.leaky_relu_backward(grad, self, negative_slope, self_is_result), grad_output_sizes), None
    def jvp(grad_output_t):
        # linear in grad_output; piecewise constant in self
        result_t = at.leaky_relu_backward(grad_output_t, self, negative_slope, self_is_result)
        return result_t
    return result, backward


@derivative("hardswish_backward(Tensor grad_output, Tensor self) -> Tensor")
def hardswish_backward(grad_output, self):
    result = at.hardswish_backward(grad_output, self)
    grad_output_sizes = grad_output.sizes()
    self_sizes = self.sizes()
    def backward(grad, *, needs_input_grad):
        # result = grad_output * (0 up to -3, x / 3 + 1/2 inside, 1 from 3 on): the slope in
        # self is 1/3 strictly inside (-3, 3), else 0 (at NaN too: torch's kernel takes the last branch)
        grad_grad_output = sum_to(at.hardswish_backward(grad, self), grad_output_sizes) if needs_input_grad[0] else None
        grad_self = None
        if needs_input_grad[1]:
            scaled = grad * grad_output / 3.0
            grad_self = sum_to(at.where(at.abs(self) < 3.0, scaled, at.zeros_like(scaled)), self_sizes)
        return grad_grad_output, grad_self
    def jvp(grad_output_t, self_t):
        slope_t = grad_output * self_t / 3.0
        result_t = at.hardswish_backward(grad_output_t, self) + at.where(at.abs(self) < 3.0, slope_t, at.zeros_like(slope_t))
        return result_t
    return result, backward


@helper
def below_threshold(scaled: Tensor, threshold: Scalar) -> Tensor:
    """1 where ``scaled < threshold``, else 0, in ``scaled``'s dtype: a mask to multiply by."""
    return at.where(scaled < threshold, at.ones_like(scaled), at.zeros_like(scaled))


@derivative("elu_backward(Tensor grad_output, Scalar alpha, Scalar scale, Scalar input_scale, bool is_result, "
            "Tensor self_or_result) -> Tensor")
def elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result):
    result = at.elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result)
    grad_output_sizes = grad_output.sizes()
    self_or_result_sizes = self_or_result.sizes()
    def backward(grad, *, needs_input_grad):
        # result = grad_output * (scale for x > 0, else input_scale * alpha * scale * exp(input_scale x)),
        # the negative branch written with the result y as input_scale * (y + alpha * scale)
        grad_grad_output = None
        if needs_input_grad[0]:
            grad_grad_output = sum_to(at.elu_backward(grad, alpha, scale, input_scale, is_result, self_or_result),
                                      grad_output_sizes)
        grad_self_or_result = None
        if needs_input_grad[1]:
            scaled = grad * grad_output
            if is_result:
                # slope input_scale in y on the negative branch
                curvature = at.mul(scaled, input_scale)
            else:
                # the negative branch's slope, times input_scale once more
                curvature = at.mul(at.elu_backward(scaled, alpha, scale, input_scale, is_result, self_or_result),
                                   input_scale)
            # at x = 0 (or y = 0) torch's second derivative is the positive branch's 0, though its
            # elu_backward there is the negative branch's slope: 0 is the value taken; at NaN the
            # positive branch too (its kernel's). The 0/1 mask multiplies, so an infinite
            # grad_output gives inf * 0 = NaN on the positive branch, as torch
            grad_self_or_result = sum_to(curvature * below_threshold(self_or_result, 0.0), self_or_result_sizes)
        return grad_grad_output, grad_self_or_result
    def jvp(grad_output_t, self_or_result_t):
        scaled = grad_output * self_or_result_t
        if is_result:
            curvature = at.mul(scaled, input_scale)
        else:
            curvature = at.mul(at.elu_backward(scaled, alpha, scale, input_scale, is_result, self_or_result),
                               input_scale)
        result_t = (at.elu_backward(grad_output_t, alpha, scale, input_scale, is_result, self_or_result)
                    + curvature * below_threshold(self_or_result, 0.0))
        return result_t
    return result, backward


@derivative("gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor")
def gelu_backward(grad_output, self, *, approximate="none"):
    result = at.gelu_backward(grad_output, self, approximate=approximate)
    grad_output_sizes = grad_output.sizes()
    self_sizes = self.sizes()
    def backward(grad, *, needs_input_grad):
        # result = grad_output * gelu'(self)
        grad_grad_output = None
        if needs_input_grad[0]:
            grad_grad_output = sum_to(at.gelu_backward(grad, self, approximate=approximate), grad_output_sizes)
        grad_self = None
        if needs_input_grad[1]:
            grad_self = sum_to(grad * grad_output * gelu_second_derivative(self, approximate), self_sizes)
        return grad_grad_output, grad_self
    def jvp(grad_output_t, self_t):
        result_t = (at.gelu_backward(grad_output_t, self, approximate=approximate)
                    + grad_output * self_t * gelu_second_derivative(self, approximate))
        return result_t
    return result, backward


@derivative("softplus_backward(Tensor grad_output, Tensor self, Scalar beta, Scalar threshold) -> Tensor")
def softplus_backward(grad_output, self, beta, threshold):
    result = at.softplus_backward(grad_output, self, beta, threshold)
    grad_output_sizes = grad_output.sizes()
    self_sizes = self.sizes()
    def backward(grad, *, needs_input_grad):
        # result = grad_output * sigmoid(beta x), grad_output alone where beta x > threshold:
        # the slope in self is beta s (1 - s) strictly below the threshold, 0 from it on (torch's
        # one-sided choice at it), multiplied by the 0/1 mask: an infinite grad_output gives
        # inf * 0 = NaN where the result is infinite, as torch
        grad_grad_output = None
        if needs_input_grad[0]:
            grad_grad_output = sum_to(at.softplus_backward(grad, self, beta, threshold), grad_output_sizes)
        grad_self = None
        if needs_input_grad[1]:
            scaled = at.mul(self, beta)
            curvature = at.mul(at.sigmoid_backward(grad * grad_output, at.sigmoid(scaled)), beta)
            grad_self = sum_to(curvature * below_threshold(scaled, threshold), self_sizes)
        return grad_grad_output, grad_self
    def jvp(grad_output_t, self_t):
        scaled = at.mul(self, beta)
        curvature = at.mul(at.sigmoid_backward(grad_output * self_t, at.sigmoid(scaled)), beta)
        result_t = (at.softplus_backward(grad_output_t, self, beta, threshold)
                    + curvature * below_threshold(scaled, threshold))
        return result_t
    return result, backward


@derivative("select_backward(Tensor grad_output, SymInt[] input_sizes, int dim, SymInt index) -> Tensor",
            jvp="auto_linear")
def select_backward(grad_output, input_sizes, dim, index):
    result = at.select_backward(grad_output, input_sizes, dim, index)
    def backward(grad):
        # result is grad_output placed at ``index`` of zeros: its adjoint reads that slice back
        return at.select(grad, dim, index)
    return result, backward


@derivative("slice_backward(Tensor grad_output, SymInt[] input_sizes, int dim, SymInt start, SymInt end, "
            "SymInt step) -> Tensor", jvp="auto_linear")
def slice_backward(grad_output, input_sizes, dim, start, end, step):
    result = at.slice_backward(grad_output, input_sizes, dim, start, end, step)
    def backward(grad):
        return at.slice(grad, dim, start, end, step)
    return result, backward


@derivative("diagonal_backward(Tensor grad_output, SymInt[] input_sizes, int offset, int dim1, int dim2) "
            "-> Tensor", jvp="auto_linear")
def diagonal_backward(grad_output, input_sizes, offset, dim1, dim2):
    result = at.diagonal_backward(grad_output, input_sizes, offset, dim1, dim2)
    def backward(grad):
        return at.diagonal(grad, offset, dim1, dim2)
    return result, backward


@derivative("index_select_backward(Tensor grad, SymInt[] self_sizes, int dim, Tensor index) -> Tensor")
def index_select_backward(grad, self_sizes, dim, index):
    result = at.index_select_backward(grad, self_sizes, dim, index)
    def backward(grad_result):
        # result is grad added at ``index`` into zeros: its adjoint reads the rows at ``index``
        return at.index_select(grad_result, dim, index), None
    def jvp(grad_t):
        result_t = at.index_select_backward(grad_t, self_sizes, dim, index)
        return result_t
    return result, backward


@derivative("hardsigmoid_backward(Tensor grad_output, Tensor self) -> Tensor")
def hardsigmoid_backward(grad_output, self):
    result = at.hardsigmoid_backward(grad_output, self)
    grad_output_sizes = grad_output.sizes()
    def backward(grad):
        # result = grad_output / 6 strictly inside (-3, 3), else 0 (at NaN too): linear in grad_output
        # (its own adjoint), piecewise constant in self (no gradient)
        # (a where, not hardsigmoid_backward itself: torch has no derivative of that)
        sixth = grad / 6.0
        return sum_to(at.where(at.abs(self) < 3.0, sixth, at.zeros_like(sixth)), grad_output_sizes), None
    def jvp(grad_output_t):
        # linear in grad_output; piecewise constant in self
        sixth_t = grad_output_t / 6.0
        result_t = at.where(at.abs(self) < 3.0, sixth_t, at.zeros_like(sixth_t))
        return result_t
    return result, backward


@helper
def silu_second_derivative(self: Tensor) -> Tensor:
    """``silu''(x)`` for ``silu(x) = x s(x)``: ``silu' = s + x s (1 - s)``, so
    ``silu'' = 2 s (1 - s) + x s (1 - s) (1 - 2 s) = s (1 - s) (2 + x (1 - 2 s))``, the factor
    ``s (1 - s)`` fused as ``sigmoid_backward``."""
    s = at.sigmoid(self)
    return at.sigmoid_backward(2.0 + self * (1.0 - (s + s)), s)


@derivative("silu_backward(Tensor grad_output, Tensor self) -> Tensor")
def silu_backward(grad_output, self):
    result = at.silu_backward(grad_output, self)
    grad_output_sizes = grad_output.sizes()
    self_sizes = self.sizes()
    def backward(grad, *, needs_input_grad):
        # result = grad_output * silu'(self), of composed ops below (torch has no derivative of the
        # fused kernel, so a backward calling it could not be differentiated once more on torch)
        grad_grad_output = None
        if needs_input_grad[0]:
            grad_grad_output = sum_to(infinitely_differentiable_silu_backward(grad, self), grad_output_sizes)
        grad_self = None
        if needs_input_grad[1]:
            grad_self = sum_to(grad * grad_output * silu_second_derivative(self), self_sizes)
        return grad_grad_output, grad_self
    def jvp(grad_output_t, self_t):
        result_t = (infinitely_differentiable_silu_backward(grad_output_t, self)
                    + grad_output * self_t * silu_second_derivative(self))
        return result_t
    return result, backward


@helper
def mish_second_derivative(self: Tensor) -> Tensor:
    """``mish''(x)`` for ``mish(x) = x t``, ``t = tanh(softplus(x))``, ``t' = (1 - t^2) s`` (``s`` the
    sigmoid): ``mish' = t + x s (1 - t^2)``, so ``mish'' = 2 s (1 - t^2) + x (1 - t^2) (s (1 - s) -
    2 t s^2) = (1 - t^2) s (2 + x (1 - s - 2 t s))``, the factor ``1 - t^2`` fused as
    ``tanh_backward``."""
    s = at.sigmoid(self)
    t = at.tanh(at.softplus(self))
    return at.tanh_backward(s * (2.0 + self * (1.0 - s - 2.0 * t * s)), t)


@derivative("mish_backward(Tensor grad_output, Tensor self) -> Tensor")
def mish_backward(grad_output, self):
    result = at.mish_backward(grad_output, self)
    grad_output_sizes = grad_output.sizes()
    self_sizes = self.sizes()
    def backward(grad, *, needs_input_grad):
        # result = grad_output * mish'(self), of composed ops below (as silu_backward's)
        grad_grad_output = None
        if needs_input_grad[0]:
            grad_grad_output = sum_to(infinitely_differentiable_mish_backward(grad, self), grad_output_sizes)
        grad_self = None
        if needs_input_grad[1]:
            grad_self = sum_to(grad * grad_output * mish_second_derivative(self), self_sizes)
        return grad_grad_output, grad_self
    def jvp(grad_output_t, self_t):
        result_t = (infinitely_differentiable_mish_backward(grad_output_t, self)
                    + grad_output * self_t * mish_second_derivative(self))
        return result_t
    return result, backward


@derivative("logit_backward(Tensor grad_output, Tensor self, float? eps=None) -> Tensor")
def logit_backward(grad_output, self, eps=None):
    result = at.logit_backward(grad_output, self, eps)
    grad_output_sizes = grad_output.sizes()
    self_sizes = self.sizes()
    def backward(grad, *, needs_input_grad):
        # 2 x - 1 from x clamped into [eps, 1 - eps]: the same inside, finite outside (an infinite
        # x would make the outside's derivatives 0 * inf)
        clamped = at.clamp(self, eps, 1.0 - eps) if eps is not None else self
        # result = grad_output / (x (1 - x)) inside [eps, 1 - eps] (0 outside), or NaN outside
        # [0, 1] without eps: linear in grad_output; d/dx = grad_output (2 x - 1) / (x (1 - x))^2
        # inside, which is the op applied twice to grad_output (2 x - 1): its selection gives the
        # outside's 0 (or NaN) as the first derivative's, and no 0 / 0 is formed there. The op composed of
        # differentiable ops (as silu_backward's)
        grad_grad_output = None
        if needs_input_grad[0]:
            grad_grad_output = sum_to(infinitely_differentiable_logit_backward(grad, self, eps), grad_output_sizes)
        grad_self = None
        if needs_input_grad[1]:
            grad_self = sum_to(infinitely_differentiable_logit_backward(infinitely_differentiable_logit_backward(
                grad * grad_output * (clamped + clamped - 1.0), self, eps), self, eps), self_sizes)
        return grad_grad_output, grad_self
    def jvp(grad_output_t, self_t):
        clamped = at.clamp(self, eps, 1.0 - eps) if eps is not None else self
        result_t = (infinitely_differentiable_logit_backward(grad_output_t, self, eps)
                    + infinitely_differentiable_logit_backward(infinitely_differentiable_logit_backward(
                        grad_output * self_t * (clamped + clamped - 1.0), self, eps), self, eps))
        return result_t
    return result, backward


@derivative("trace_backward(Tensor grad, SymInt[] sizes) -> Tensor", jvp="auto_linear")
def trace_backward(grad, sizes):
    result = at.trace_backward(grad, sizes)
    def backward(grad_result):
        # result is the 0-d grad placed on the diagonal of zeros: its adjoint sums that diagonal
        return at.sum(at.diagonal(grad_result, 0, 0, 1))
    return result, backward


@derivative("masked_select_backward(Tensor grad, Tensor input, Tensor mask) -> Tensor")
def masked_select_backward(grad, input, mask):
    result = at.masked_select_backward(grad, input, mask)
    def backward(grad_result):
        # result is grad scattered in order into the positions where mask (broadcast with input)
        # holds, zeros elsewhere: its adjoint reads those positions back; input gives only its shape
        return at.masked_select(grad_result, mask), None, None
    def jvp(grad_t):
        result_t = at.masked_select_backward(grad_t, input, mask)
        return result_t
    return result, backward


@derivative("cummaxmin_backward(Tensor grad, Tensor input, Tensor indices, int dim) -> Tensor")
def cummaxmin_backward(grad, input, indices, dim):
    result = at.cummaxmin_backward(grad, input, indices, dim)
    def backward(grad_result):
        # result adds grad at indices along dim into zeros of input's shape: its adjoint gathers;
        # input gives only its shape, and indices are integral
        return at.gather(grad_result, dim, indices), None, None
    def jvp(grad_t):
        result_t = at.cummaxmin_backward(grad_t, input, indices, dim)
        return result_t
    return result, backward

