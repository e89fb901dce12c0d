"""Activation functions: relu, leaky_relu, elu, selu, celu, gelu (exact and tanh), silu, mish,
softplus, log_sigmoid, hardtanh, relu6, hardswish, hardsigmoid, threshold, softshrink, hardshrink.

At a kink the gradient is torch's one-sided choice: the negative branch at 0 for
``leaky_relu``/``elu``/``selu``/``celu``, zero at the bounds of ``hardtanh``/``relu6``,
``threshold``'s ``self > threshold`` test. ``hardshrink`` is a member of ``softshrink``'s formula
family (``@family_member``: the same formula, its operators renamed). Their fused backward ops are
in ``backward_ops.py``; the softmaxes are in ``softmax.py``.
"""
from __future__ import annotations

import math

from formulas import Tensor, at, derivative, family_member, helper


@derivative("relu(Tensor self) -> Tensor", jvp="auto_element_wise")
def relu(self):
    result = at.relu(self)
    def backward(grad):
        # grad where the output is positive, else 0: one kernel
        return at.threshold_backward(grad, result, 0)
    return result, backward


@derivative("leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor", jvp="auto_element_wise")
def leaky_relu(self, negative_slope=0.01):
    result = at.leaky_relu(self, negative_slope)
    def backward(grad):
        # grad for x > 0, else negative_slope * grad: one kernel
        return at.leaky_relu_backward(grad, self, negative_slope, False)
    return result, backward


@derivative("elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor",
            jvp="auto_element_wise")
def elu(self, alpha=1, scale=1, input_scale=1):
    result = at.elu(self, alpha, scale, input_scale)
    def backward(grad):
        # scale * x for x > 0, else scale * alpha * (exp(input_scale * x) - 1): one kernel
        return at.elu_backward(grad, alpha, scale, input_scale, False, self)
    return result, backward


@derivative("selu(Tensor self) -> Tensor", jvp="auto_element_wise")
def selu(self):
    result = at.selu(self)
    def backward(grad):
        # elu with alpha 1.6732632..., scale 1.0507009...: one kernel
        return at.elu_backward(grad, 1.6732632423543772, 1.0507009873554805, 1, False, self)
    return result, backward


@derivative("celu(Tensor self, Scalar alpha=1.0) -> Tensor", jvp="auto_element_wise")
def celu(self, alpha=1.0):
    result = at.celu(self, alpha)
    def backward(grad):
        # x for x > 0, else alpha * (exp(x / alpha) - 1): elu with input_scale 1 / alpha, one kernel
        return at.elu_backward(grad, alpha, 1, 1.0 / alpha, False, self)
    return result, backward


@derivative("gelu(Tensor self, *, str approximate='none') -> Tensor", jvp="auto_element_wise")
def gelu(self, *, approximate="none"):
    result = at.gelu(self, approximate=approximate)
    def backward(grad):
        # x Phi(x) (or its tanh approximation): Phi(x) + x phi(x), one kernel
        return at.gelu_backward(grad, self, approximate=approximate)
    return result, backward


@derivative("silu(Tensor self) -> Tensor", jvp="auto_element_wise")
def silu(self):
    result = at.silu(self)
    def backward(grad):
        return infinitely_differentiable_silu_backward(grad, self)
    return result, backward


@helper
def infinitely_differentiable_silu_backward(grad: Tensor, self: Tensor) -> Tensor:
    """Gradient of ``silu(x) = x s(x)`` (``s`` the sigmoid), ``grad (s + x s (1 - s))``, of
    differentiable ops (the second term fused as ``sigmoid_backward(x, s)``): what ``silu_backward``
    computes in one kernel."""
    s = at.sigmoid(self)
    return grad * (s + at.sigmoid_backward(self, s))


@derivative("mish(Tensor self) -> Tensor", jvp="auto_element_wise")
def mish(self):
    result = at.mish(self)
    def backward(grad):
        return infinitely_differentiable_mish_backward(grad, self)
    return result, backward


@helper
def infinitely_differentiable_mish_backward(grad: Tensor, self: Tensor) -> Tensor:
    """Gradient of ``mish(x) = x tanh(softplus(x))``: with ``t = tanh(softplus(x))`` and
    ``softplus' = s(x)``, ``grad (t + x s (1 - t^2))``, the second term as ``tanh_backward(x s, t)``,
    of differentiable ops: what ``mish_backward`` computes in one kernel."""
    t = at.tanh(at.softplus(self))
    return grad * (t + at.tanh_backward(self * at.sigmoid(self), t))


@helper
def infinitely_differentiable_logit_backward(grad: Tensor, self: Tensor, eps: float | None) -> Tensor:
    """Gradient of ``logit(x) = log(x / (1 - x))``, ``grad / (x (1 - x))``, of differentiable ops:
    what ``logit_backward`` computes in one kernel. With ``eps`` the input is clamped to
    ``[eps, 1 - eps]`` first, so the gradient is 0 outside it; without, logit is NaN outside
    ``[0, 1]`` and so is its gradient. A NaN input gives NaN either way, as the kernel."""
    if eps is not None:
        # outside is x < eps or x > 1 - eps, as the kernel tests it: a NaN input is inside (NaN);
        # an outside entry's slope is never formed (its 0 / 0 would make the derivatives NaN)
        outside = at.logical_or(at.lt(self, eps), at.gt(self, 1.0 - eps))
        inside_only = at.masked_fill(self, outside, 0.5)
        return at.masked_fill(grad / (inside_only * (1.0 - inside_only)), outside, 0.0)
    slope = grad / (self * (1.0 - self))
    return at.masked_fill(slope, at.logical_or(at.lt(self, 0.0), at.gt(self, 1.0)), math.nan)


@derivative("softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor", jvp="auto_element_wise")
def softplus(self, beta=1, threshold=20):
    result = at.softplus(self, beta, threshold)
    def backward(grad):
        # log(1 + exp(beta x)) / beta: sigmoid(beta x); linear (slope 1) above the threshold; one kernel
        return at.softplus_backward(grad, self, beta, threshold)
    return result, backward


@derivative("log_sigmoid(Tensor self) -> Tensor", jvp="auto_element_wise")
def log_sigmoid(self):
    result = at.log_sigmoid(self)
    def backward(grad):
        # d log s(x) = 1 - s(x) = s(-x)
        return grad * at.sigmoid(-self)
    return result, backward


@derivative("hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor", jvp="auto_element_wise")
def hardtanh(self, min_val=-1, max_val=1):
    result = at.hardtanh(self, min_val, max_val)
    def backward(grad):
        # slope 1 strictly inside (min_val, max_val), 0 at and beyond the bounds: one kernel
        return at.hardtanh_backward(grad, self, min_val, max_val)
    return result, backward


@derivative("relu6(Tensor self) -> Tensor", jvp="auto_element_wise")
def relu6(self):
    result = at.relu6(self)
    def backward(grad):
        # hardtanh(x, 0, 6): slope 1 strictly inside (0, 6), else 0
        return at.hardtanh_backward(grad, self, 0, 6)
    return result, backward


@derivative("hardswish(Tensor self) -> Tensor", jvp="auto_element_wise")
def hardswish(self):
    result = at.hardswish(self)
    def backward(grad):
        # x relu6(x + 3) / 6: 0 up to -3, x / 3 + 1/2 inside, 1 from 3 on (torch's choice at -3 and 3)
        return at.hardswish_backward(grad, self)
    return result, backward


@derivative("threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor", jvp="auto_element_wise")
def threshold(self, threshold, value):
    result = at.threshold(self, threshold, value)
    def backward(grad):
        # self where self > threshold, else the constant value
        return at.threshold_backward(grad, self, threshold)
    return result, backward


@derivative("softshrink(Tensor self, Scalar lambd=0.5) -> Tensor", jvp="auto_element_wise")
@family_member("hardshrink(Tensor self, Scalar lambd=0.5) -> Tensor",
               rename={"softshrink": "hardshrink", "softshrink_backward": "hardshrink_backward"})
def softshrink(self, lambd=0.5):
    result = at.softshrink(self, lambd)
    def backward(grad):
        # slope 1 outside [-lambd, lambd] (softshrink: x -+ lambd, hardshrink: x), 0 inside (bounds
        # included, as torch): one kernel
        return at.softshrink_backward(grad, self, lambd)
    return result, backward


# --- hardsigmoid ---------------------------------------------------------------------
# torch has no derivative of its fused hardsigmoid_backward, so the compiled backwards, whose ATen
# calls torch differentiates, write it as hardtanh_backward(grad, self, -3, 3) / 6 (two kernels):
# the same function, differentiable in torch and here.

@derivative("hardsigmoid(Tensor self) -> Tensor", jvp="auto_element_wise")
def hardsigmoid(self):
    result = at.hardsigmoid(self)
    def backward(grad):
        # relu6(x + 3) / 6: slope 1/6 strictly inside (-3, 3), 0 at and beyond (torch's choice at the kinks)
        return at.hardtanh_backward(grad, self, -3.0, 3.0) / 6.0
    return result, backward
