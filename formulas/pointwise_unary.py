"""Elementwise functions of one tensor: neg, exp, log, the trigonometric and hyperbolic
functions and their inverses, sqrt, rsqrt, pow with a scalar exponent, abs, sign, sgn, clamps,
rounding, the erf family, logs and exps of other bases, reciprocal, sinc, square, logit,
deg2rad, rad2deg, clamp with tensor bounds (``clamp.Tensor``, elementwise in its three tensors), the modified Bessel functions of orders 0 and 1 (``i0``, ``special_i1`` and
their exponentially scaled ``special_i0e``, ``special_i1e``), and ``_to_copy`` (a dtype/device copy).

Rounding ops and ``sign`` are differentiable with a zero gradient, as in torch. Where torch
picks a subgradient at a kink it is kept: ``abs'(0) = sign(0) = 0``, a clamp passes the
gradient at its bounds (``min <= self <= max``) to ``self`` (with tensor bounds, a bound takes
it only where it is the result), ``sinc'(0) = 0``. Gradients that read the
output (``exp``, ``tanh``, ``sigmoid``, ``sqrt``, ``expm1``, ``exp2``, ``rsqrt``, ``reciprocal``,
``tan``, ``erfinv``) read ``result``, an output, so double backward sees it; never an intermediate.
Formulas equal up to names are one formula family (``@family_member``): ``sign``/``sgn`` and the
rounding ops are ``round``'s, ``clamp_max`` is ``clamp_min``'s with its bound and comparison swapped.
"""
from __future__ import annotations

from formulas import at, derivative, family_member
from formulas.helpers import (clamp_backward, clamp_backward__tensor, clamp_max_is_result, clamp_min_is_result, clamp_jvp, i1_backward,
                              i1e_backward, pow_backward, sum_to)


@derivative("neg(Tensor self) -> Tensor", jvp="auto_linear")
def neg(self):
    result = at.neg(self)
    def backward(grad):
        return -grad
    return result, backward


@derivative("exp(Tensor self) -> Tensor", jvp="auto_element_wise")
def exp(self):
    result = at.exp(self)
    def backward(grad):
        return grad * result
    return result, backward


@derivative("log(Tensor self) -> Tensor", jvp="auto_element_wise")
def log(self):
    result = at.log(self)
    def backward(grad):
        return grad / self
    return result, backward


@derivative("sin(Tensor self) -> Tensor", jvp="auto_element_wise")
def sin(self):
    result = at.sin(self)
    def backward(grad):
        return grad * at.cos(self)
    return result, backward


@derivative("cos(Tensor self) -> Tensor", jvp="auto_element_wise")
def cos(self):
    result = at.cos(self)
    def backward(grad):
        return -grad * at.sin(self)
    return result, backward


@derivative("tanh(Tensor self) -> Tensor", jvp="auto_element_wise")
def tanh(self):
    result = at.tanh(self)
    def backward(grad):
        # d tanh = 1 - tanh^2, fused in ATen's tanh_backward
        return at.tanh_backward(grad, result)
    return result, backward


@derivative("sigmoid(Tensor self) -> Tensor", jvp="auto_element_wise")
def sigmoid(self):
    result = at.sigmoid(self)
    def backward(grad):
        # d sigmoid = sigmoid * (1 - sigmoid), fused in ATen's sigmoid_backward
        return at.sigmoid_backward(grad, result)
    return result, backward


@derivative("sqrt(Tensor self) -> Tensor", jvp="auto_element_wise")
def sqrt(self):
    result = at.sqrt(self)
    def backward(grad):
        return grad / (result + result)
    return result, backward


@derivative("pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor", jvp="auto_element_wise")
def pow_tensor_scalar(self, exponent):
    result = at.pow(self, exponent)
    def backward(grad):
        return pow_backward(grad, self, exponent)
    return result, backward


@derivative("_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
            "bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor",
            jvp="auto_linear")
def _to_copy(self, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    result = at._to_copy(self, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory,
                         non_blocking=non_blocking, memory_format=memory_format)
    self_dtype = self.scalar_type()
    def backward(grad):
        # no copy when the dtype did not change
        return grad if grad.scalar_type() == self_dtype else at._to_copy(grad, dtype=self_dtype)
    return result, backward


@derivative("abs(Tensor self) -> Tensor", jvp="auto_element_wise")
def absolute(self):
    result = at.abs(self)
    def backward(grad):
        # torch's subgradient at 0 is sign(0) = 0
        return grad * at.sign(self)
    return result, backward


@derivative("clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", jvp="auto_element_wise")
def clamp(self, min=None, max=None):
    result = at.clamp(self, min, max)
    def backward(grad):
        return clamp_backward(grad, self, min, max)
    return result, backward


@derivative("clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor")
def clamp_tensor(self, min=None, max=None):
    result = at.clamp(self, min, max)
    self_sizes = self.sizes()
    min_sizes = self_sizes      # read only when there is that bound
    if min is not None:
        min_sizes = min.sizes()
    max_sizes = self_sizes
    if max is not None:
        max_sizes = max.sizes()
    def backward(grad, *, needs_input_grad):
        # minimum(maximum(self, min), max), the three broadcast: each element's gradient goes to the
        # one of self, min and max that is its result (self at a tie), summed to that input's shape
        grad_self = sum_to(clamp_backward__tensor(grad, self, min, max), self_sizes) if needs_input_grad[0] else None
        zero = at.new_zeros(grad, [])
        grad_min = None
        if min is not None and needs_input_grad[1]:
            grad_min = sum_to(at.where(clamp_min_is_result(self, min, max), grad, zero), min_sizes)
        grad_max = None
        if max is not None and needs_input_grad[2]:
            grad_max = sum_to(at.where(clamp_max_is_result(self, min, max), grad, zero), max_sizes)
        return grad_self, grad_min, grad_max
    def jvp(self_t, min_t, max_t):
        result_t = clamp_jvp(self, self_t, min, min_t, max, max_t)
        return result_t
    return result, backward


@derivative("clamp_min(Tensor self, Scalar min) -> Tensor", jvp="auto_element_wise")
@family_member("clamp_max(Tensor self, Scalar max) -> Tensor", rename={"clamp_min": "clamp_max", "min": "max", "ge": "le"})
def clamp_min(self, min):
    result = at.clamp_min(self, min)
    def backward(grad):
        return at.where(at.ge(self, min), grad, at.new_zeros(grad, []))
    return result, backward


@derivative("round(Tensor self) -> Tensor", jvp="auto_element_wise")
@family_member("sign(Tensor self) -> Tensor", rename={"round": "sign"})
@family_member("floor(Tensor self) -> Tensor", rename={"round": "floor"})
@family_member("ceil(Tensor self) -> Tensor", rename={"round": "ceil"})
@family_member("trunc(Tensor self) -> Tensor", rename={"round": "trunc"})
@family_member("sgn(Tensor self) -> Tensor", rename={"round": "sgn"})
def round_half_even(self):
    result = at.round(self)
    def backward(grad):
        # piecewise constant: zero gradient (torch's too)
        return at.zeros_like(grad)
    return result, backward


@derivative("round.decimals(Tensor self, *, int decimals) -> Tensor", jvp="auto_element_wise")
def round_decimals(self, *, decimals):
    result = at.round(self, decimals=decimals)
    def backward(grad):
        return at.zeros_like(grad)
    return result, backward


@derivative("frac(Tensor self) -> Tensor", jvp="auto_element_wise")
def frac(self):
    result = at.frac(self)
    def backward(grad):
        # self - trunc(self): slope 1 between the integers
        return grad
    return result, backward


@derivative("erf(Tensor self) -> Tensor", jvp="auto_element_wise")
def erf(self):
    result = at.erf(self)
    def backward(grad):
        # d erf = 2 / sqrt(pi) * exp(-x^2)
        return grad * at.exp(-(self * self)) * 1.1283791670955126
    return result, backward


@derivative("erfc(Tensor self) -> Tensor", jvp="auto_element_wise")
def erfc(self):
    result = at.erfc(self)
    def backward(grad):
        # erfc = 1 - erf
        return grad * at.exp(-(self * self)) * -1.1283791670955126
    return result, backward


@derivative("erfinv(Tensor self) -> Tensor", jvp="auto_element_wise")
def erfinv(self):
    result = at.erfinv(self)
    def backward(grad):
        # inverse function rule: 1 / erf'(result) = sqrt(pi) / 2 * exp(result^2)
        return grad * at.exp(result * result) * 0.886226925452758
    return result, backward


@derivative("expm1(Tensor self) -> Tensor", jvp="auto_element_wise")
def expm1(self):
    result = at.expm1(self)
    def backward(grad):
        # d (e^x - 1) = e^x = result + 1
        return grad + grad * result
    return result, backward


@derivative("log1p(Tensor self) -> Tensor", jvp="auto_element_wise")
def log1p(self):
    result = at.log1p(self)
    def backward(grad):
        return grad / (self + 1.0)
    return result, backward


@derivative("log2(Tensor self) -> Tensor", jvp="auto_element_wise")
def log2(self):
    result = at.log2(self)
    def backward(grad):
        # 1 / (x ln 2)
        return grad / (self * 0.6931471805599453)
    return result, backward


@derivative("log10(Tensor self) -> Tensor", jvp="auto_element_wise")
def log10(self):
    result = at.log10(self)
    def backward(grad):
        # 1 / (x ln 10)
        return grad / (self * 2.302585092994046)
    return result, backward


@derivative("exp2(Tensor self) -> Tensor", jvp="auto_element_wise")
def exp2(self):
    result = at.exp2(self)
    def backward(grad):
        # d 2^x = 2^x ln 2
        return grad * result * 0.6931471805599453
    return result, backward


@derivative("rsqrt(Tensor self) -> Tensor", jvp="auto_element_wise")
def rsqrt(self):
    result = at.rsqrt(self)
    def backward(grad):
        # d x^(-1/2) = -1/2 x^(-3/2) = -1/2 result^3
        return grad * at.pow(result, 3) * -0.5
    return result, backward


@derivative("reciprocal(Tensor self) -> Tensor", jvp="auto_element_wise")
def reciprocal(self):
    result = at.reciprocal(self)
    def backward(grad):
        # d 1/x = -1/x^2 = -result^2
        return -grad * result * result
    return result, backward


@derivative("asin(Tensor self) -> Tensor", jvp="auto_element_wise")
def asin(self):
    result = at.asin(self)
    def backward(grad):
        # 1 / sqrt(1 - x^2)
        return grad * at.rsqrt(at.rsub(self * self, 1))
    return result, backward


@derivative("acos(Tensor self) -> Tensor", jvp="auto_element_wise")
def acos(self):
    result = at.acos(self)
    def backward(grad):
        # -1 / sqrt(1 - x^2)
        return -grad * at.rsqrt(at.rsub(self * self, 1))
    return result, backward


@derivative("atan(Tensor self) -> Tensor", jvp="auto_element_wise")
def atan(self):
    result = at.atan(self)
    def backward(grad):
        # 1 / (1 + x^2)
        return grad / (self * self + 1.0)
    return result, backward


@derivative("tan(Tensor self) -> Tensor", jvp="auto_element_wise")
def tan(self):
    result = at.tan(self)
    def backward(grad):
        # 1 + tan^2
        return grad * (result * result + 1.0)
    return result, backward


@derivative("sinh(Tensor self) -> Tensor", jvp="auto_element_wise")
def sinh(self):
    result = at.sinh(self)
    def backward(grad):
        return grad * at.cosh(self)
    return result, backward


@derivative("cosh(Tensor self) -> Tensor", jvp="auto_element_wise")
def cosh(self):
    result = at.cosh(self)
    def backward(grad):
        return grad * at.sinh(self)
    return result, backward


@derivative("asinh(Tensor self) -> Tensor", jvp="auto_element_wise")
def asinh(self):
    result = at.asinh(self)
    def backward(grad):
        # 1 / sqrt(x^2 + 1)
        return grad * at.rsqrt(self * self + 1.0)
    return result, backward


@derivative("acosh(Tensor self) -> Tensor", jvp="auto_element_wise")
def acosh(self):
    result = at.acosh(self)
    def backward(grad):
        # 1 / sqrt(x^2 - 1)
        return grad * at.rsqrt(self * self - 1.0)
    return result, backward


@derivative("atanh(Tensor self) -> Tensor", jvp="auto_element_wise")
def atanh(self):
    result = at.atanh(self)
    def backward(grad):
        # 1 / (1 - x^2)
        return grad / at.rsub(self * self, 1)
    return result, backward


@derivative("sinc(Tensor self) -> Tensor", jvp="auto_element_wise")
def sinc(self):
    result = at.sinc(self)
    def backward(grad):
        # d/dx sin(pi x) / (pi x) = (cos(pi x) - sinc(x)) / x, whose limit at 0 is 0
        slope = (at.cos(self * 3.141592653589793) - result) / self
        return at.where(at.eq(self, 0), at.zeros_like(grad), grad * slope)
    return result, backward


@derivative("square(Tensor self) -> Tensor", jvp="auto_element_wise")
def square(self):
    result = at.square(self)
    def backward(grad):
        return grad * self * 2.0
    return result, backward


@derivative("logit(Tensor self, float? eps=None) -> Tensor", jvp="auto_element_wise")
def logit(self, eps=None):
    result = at.logit(self, eps)
    def backward(grad):
        # d/dx log(x / (1 - x)) = 1 / (x (1 - x))
        grad_self = grad / (self * at.rsub(self, 1))
        if eps is None:
            # outside [0, 1] the output is NaN, and so is torch's gradient
            return at.where(at.ne(result, result), result, grad_self)
        else:
            # the input is clamped to [eps, 1 - eps] first: no gradient beyond those bounds
            zeros = at.zeros_like(grad)
            return at.where(at.lt(self, eps), zeros, at.where(at.gt(self, 1.0 - eps), zeros, grad_self))
    return result, backward


@derivative("deg2rad(Tensor self) -> Tensor", jvp="auto_linear")
def deg2rad(self):
    result = at.deg2rad(self)
    def backward(grad):
        # x * pi / 180
        return grad * 0.017453292519943295
    return result, backward


@derivative("rad2deg(Tensor self) -> Tensor", jvp="auto_linear")
def rad2deg(self):
    result = at.rad2deg(self)
    def backward(grad):
        # x * 180 / pi
        return grad * 57.29577951308232
    return result, backward


# --- modified Bessel functions of the first kind: I_0' = I_1, I_1' = I_0 - I_1 / x -------------------

@derivative("i0(Tensor self) -> Tensor", jvp="auto_element_wise")
def i0(self):
    result = at.i0(self)
    def backward(grad):
        return grad * at.special_i1(self)
    return result, backward


@derivative("special_i0e(Tensor self) -> Tensor", jvp="auto_element_wise")
def special_i0e(self):
    result = at.special_i0e(self)
    def backward(grad):
        # (e^-|x| I_0)' = e^-|x| I_1 - sgn(x) e^-|x| I_0
        return grad * (at.special_i1e(self) - at.sgn(self) * result)
    return result, backward


@derivative("special_i1(Tensor self) -> Tensor", jvp="auto_element_wise")
def special_i1(self):
    result = at.special_i1(self)
    def backward(grad):
        return i1_backward(grad, self, result)
    return result, backward


@derivative("special_i1e(Tensor self) -> Tensor", jvp="auto_element_wise")
def special_i1e(self):
    result = at.special_i1e(self)
    def backward(grad):
        return i1e_backward(grad, self, result)
    return result, backward
