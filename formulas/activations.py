"""Activation functions: leaky_relu, elu, selu, celu, gelu (exact and tanh), silu, mish,
softplus, log_sigmoid, hardtanh, relu6, hardswish, threshold, softshrink, hardshrink.

At a kink the gradient is torch's one-sided choice: the negative branch at 0 for
``leaky_relu``/``elu``/``selu``/``celu``, zero at the bounds of ``hardtanh``/``relu6``,
``threshold``'s ``self > threshold`` test.
"""
from __future__ import annotations

from formulas import at, derivative


@derivative("leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor", jvp="auto_element_wise")
def leaky_relu(self, negative_slope=0.01):
    result = at.leaky_relu(self, negative_slope)
    def backward(grad):
        return at.where(self > 0, grad, at.mul(grad, negative_slope))
    return result, backward


@derivative("elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor",
            jvp="auto_element_wise")
def elu(self, alpha=1, scale=1, input_scale=1):
    result = at.elu(self, alpha, scale, input_scale)
    def backward(grad):
        # scale * x for x > 0, else scale * alpha * (exp(input_scale * x) - 1)
        negative = at.mul(at.mul(at.mul(at.exp(at.mul(self, input_scale)), alpha), scale), input_scale)
        return at.where(self > 0, at.mul(grad, scale), grad * negative)
    return result, backward


@derivative("selu(Tensor self) -> Tensor", jvp="auto_element_wise")
def selu(self):
    result = at.selu(self)
    def backward(grad):
        # scale * x for x > 0, else scale * alpha * (exp(x) - 1); scale * alpha = 1.7580993...
        return at.where(self > 0, grad * 1.0507009873554805, grad * at.exp(self) * 1.7580993408473766)
    return result, backward


@derivative("celu(Tensor self, Scalar alpha=1.0) -> Tensor", jvp="auto_element_wise")
def celu(self, alpha=1.0):
    result = at.celu(self, alpha)
    def backward(grad):
        # x for x > 0, else alpha * (exp(x / alpha) - 1)
        return at.where(self > 0, grad, grad * at.exp(at.div(self, alpha)))
    return result, backward


@derivative("gelu(Tensor self, *, str approximate='none') -> Tensor", jvp="auto_element_wise")
def gelu(self, *, approximate="none"):
    result = at.gelu(self, approximate=approximate)
    def backward(grad):
        if approximate == "tanh":
            # 0.5 x (1 + tanh(u)), u = k (x + c x^3): 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'
            inner = at.tanh((self + self * self * self * 0.044715) * 0.7978845608028654)
            slope = (self * self * 0.134145 + 1.0) * 0.7978845608028654
            return grad * ((inner + 1.0) * 0.5 + at.tanh_backward(self * slope * 0.5, inner))
        # x Phi(x): Phi(x) + x phi(x)
        cdf = (at.erf(self * 0.7071067811865476) + 1.0) * 0.5
        pdf = at.exp(self * self * -0.5) * 0.3989422804014327
        return grad * (cdf + self * pdf)
    return result, backward


@derivative("silu(Tensor self) -> Tensor", jvp="auto_element_wise")
def silu(self):
    result = at.silu(self)
    def backward(grad):
        # x s(x): s + x s (1 - s), the second term fused as sigmoid_backward(x, s)
        s = at.sigmoid(self)
        return grad * (s + at.sigmoid_backward(self, s))
    return result, backward


@derivative("mish(Tensor self) -> Tensor", jvp="auto_element_wise")
def mish(self):
    result = at.mish(self)
    def backward(grad):
        # x tanh(softplus(x)): t + x s(x) (1 - t^2), the second term as tanh_backward(x s, t)
        t = at.tanh(at.softplus(self))
        return grad * (t + at.tanh_backward(self * at.sigmoid(self), t))
    return result, backward


@derivative("softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor", jvp="auto_element_wise")
def softplus(self, beta=1, threshold=20):
    result = at.softplus(self, beta, threshold)
    def backward(grad):
        # log(1 + exp(beta x)) / beta: sigmoid(beta x); linear (slope 1) above the threshold
        scaled = at.mul(self, beta)
        return at.where(scaled > threshold, grad, grad * at.sigmoid(scaled))
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
        # slope 1 strictly inside (min_val, max_val), 0 at and beyond the bounds
        zeros = at.zeros_like(grad)
        return at.where(at.le(self, min_val), zeros, at.where(at.ge(self, max_val), zeros, grad))
    return result, backward


@derivative("relu6(Tensor self) -> Tensor", jvp="auto_element_wise")
def relu6(self):
    result = at.relu6(self)
    def backward(grad):
        # hardtanh(x, 0, 6)
        zeros = at.zeros_like(grad)
        return at.where(at.le(self, 0), zeros, at.where(at.ge(self, 6), zeros, grad))
    return result, backward


@derivative("hardswish(Tensor self) -> Tensor", jvp="auto_element_wise")
def hardswish(self):
    result = at.hardswish(self)
    def backward(grad):
        # x relu6(x + 3) / 6: 0 up to -3, x / 3 + 1/2 inside, 1 from 3 on (torch's choice at -3 and 3)
        inside = grad * (self / 3.0 + 0.5)
        return at.where(at.le(self, -3.0), at.zeros_like(grad), at.where(at.lt(self, 3.0), inside, grad))
    return result, backward


@derivative("threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor", jvp="auto_element_wise")
def threshold(self, threshold, value):
    result = at.threshold(self, threshold, value)
    def backward(grad):
        # self where self > threshold, else the constant value
        return at.threshold_backward(grad, self, threshold)
    return result, backward


@derivative("softshrink(Tensor self, Scalar lambd=0.5) -> Tensor", jvp="auto_element_wise")
def softshrink(self, lambd=0.5):
    result = at.softshrink(self, lambd)
    def backward(grad):
        # x -+ lambd outside [-lambd, lambd], 0 inside (bounds included, as torch)
        return at.where(at.le(at.abs(self), lambd), at.zeros_like(grad), grad)
    return result, backward


@derivative("hardshrink(Tensor self, Scalar lambd=0.5) -> Tensor", jvp="auto_element_wise")
def hardshrink(self, lambd=0.5):
    result = at.hardshrink(self, lambd)
    def backward(grad):
        # x outside [-lambd, lambd], 0 inside (bounds included, as torch)
        return at.where(at.le(at.abs(self), lambd), at.zeros_like(grad), grad)
    return result, backward
