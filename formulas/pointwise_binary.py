"""Elementwise functions of several tensors (broadcasting): add/sub/mul/div (``.Tensor`` and
``.Scalar``), rsub, atan2, hypot, minimum/maximum, fmin/fmax, fmod/remainder, pow with a tensor
exponent or a scalar base, lerp, xlogy, logaddexp/logaddexp2, copysign, addcmul and addcdiv.

Tensor-tensor gradients are summed back to each input's shape with ``sum_to``. At ties
``minimum``/``maximum`` split the gradient in halves and ``fmin``/``fmax`` give it all to
``self``, as torch does; a NaN operand keeps torch's routing too. Formulas equal up to names are
one formula family (``@family_member``): maximum is minimum's with its operator and comparisons
swapped, fmax is fmin's, sub.Scalar/div.Scalar/remainder.Scalar are add/mul/fmod.Scalar's, and
remainder.Tensor is fmod.Tensor's with floor for trunc.
"""
from __future__ import annotations

from formulas import at, derivative, family_member
from formulas.helpers import (
    copysign_tensor_self_backward,
    div_tensor_other_backward,
    div_tensor_self_backward,
    maybe_multiply,
    sum_to,
)


@derivative("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", jvp="auto_linear")
def add_tensor(self, other, *, alpha=1):
    result = at.add(self, other, alpha=alpha)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        grad_self = sum_to(grad, self_sizes) if needs_input_grad[0] else None
        grad_other = sum_to(maybe_multiply(grad, alpha), other_sizes) if needs_input_grad[1] else None
        return grad_self, grad_other
    return result, backward


@derivative("sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", jvp="auto_linear")
def sub_tensor(self, other, *, alpha=1):
    result = at.sub(self, other, alpha=alpha)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        grad_self = sum_to(grad, self_sizes) if needs_input_grad[0] else None
        grad_other = sum_to(-maybe_multiply(grad, alpha), other_sizes) if needs_input_grad[1] else None
        return grad_self, grad_other
    return result, backward


@derivative("mul.Tensor(Tensor self, Tensor other) -> Tensor")
def mul_tensor(self, other):
    result = at.mul(self, other)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        grad_self = sum_to(grad * other, self_sizes) if needs_input_grad[0] else None
        grad_other = sum_to(grad * self, other_sizes) if needs_input_grad[1] else None
        return grad_self, grad_other
    def jvp(self_t, other_t):
        # product rule
        result_t = self_t * other + other_t * self
        return result_t
    return result, backward


@derivative("div.Tensor(Tensor self, Tensor other) -> Tensor")
def div_tensor(self, other):
    result = at.div(self, other)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    self_type = self.scalar_type()
    def backward(grad, *, needs_input_grad):
        grad_self = sum_to(div_tensor_self_backward(grad, other, self_type), self_sizes) if needs_input_grad[0] else None
        grad_other = sum_to(div_tensor_other_backward(grad, self, other), other_sizes) if needs_input_grad[1] else None
        return grad_self, grad_other
    def jvp(self_t, other_t):
        # quotient rule: (self_t - other_t * self / other) / other
        result_t = (self_t - other_t * result) / other
        return result_t
    return result, backward


@derivative("mul.Scalar(Tensor self, Scalar other) -> Tensor", jvp="auto_linear")
@family_member("div.Scalar(Tensor self, Scalar other) -> Tensor", rename={"mul": "div"})
def mul_scalar(self, other):
    result = at.mul(self, other)
    def backward(grad):
        return at.mul(grad, other)
    return result, backward


@derivative("add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor")
@family_member("sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", rename={"add": "sub"})
def add_scalar(self, other, alpha=1):
    result = at.add(self, other, alpha)
    def backward(grad):
        return grad
    def jvp(self_t):
        # affine in self: the tangent passes unchanged
        result_t = self_t
        return result_t
    return result, backward


@derivative("rsub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", jvp="auto_linear")
def rsub_tensor(self, other, *, alpha=1):
    result = at.rsub(self, other, alpha=alpha)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        # other - alpha * self
        grad_self = None
        if needs_input_grad[0]:
            grad_self = sum_to(-grad if alpha == 1 else -at.mul(grad, alpha), self_sizes)
        grad_other = sum_to(grad, other_sizes) if needs_input_grad[1] else None
        return grad_self, grad_other
    return result, backward


@derivative("rsub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor")
def rsub_scalar(self, other, alpha=1):
    result = at.rsub(self, other, alpha)
    def backward(grad):
        # other - alpha * self (one kernel when alpha is 1)
        return -grad if alpha == 1 else -at.mul(grad, alpha)
    def jvp(self_t):
        result_t = -at.mul(self_t, alpha)
        return result_t
    return result, backward


@derivative("atan2(Tensor self, Tensor other) -> Tensor")
def atan2(self, other):
    result = at.atan2(self, other)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        # d atan2(y, x) = (x dy - y dx) / (x^2 + y^2); at the origin (no derivative) torch picks 0
        # (signed as grad * x and -grad * y are: 0 and -0 at (+0, +0))
        squared_radius = self * self + other * other
        scaled = at.where(at.eq(squared_radius, 0.0), at.zeros_like(grad), grad / squared_radius)
        grad_self = sum_to(scaled * other, self_sizes) if needs_input_grad[0] else None
        grad_other = sum_to(-scaled * self, other_sizes) if needs_input_grad[1] else None
        return grad_self, grad_other
    def jvp(self_t, other_t):
        result_t = (self_t * other - other_t * self) / (self * self + other * other)
        return result_t
    return result, backward


@derivative("hypot(Tensor self, Tensor other) -> Tensor")
def hypot(self, other):
    result = at.hypot(self, other)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        # d sqrt(x^2 + y^2) = (x dx + y dy) / result
        scaled = grad / result
        grad_self = sum_to(scaled * self, self_sizes) if needs_input_grad[0] else None
        grad_other = sum_to(scaled * other, other_sizes) if needs_input_grad[1] else None
        return grad_self, grad_other
    def jvp(self_t, other_t):
        result_t = (self_t * self + other_t * other) / result
        return result_t
    return result, backward


@derivative("minimum(Tensor self, Tensor other) -> Tensor")
@family_member("maximum(Tensor self, Tensor other) -> Tensor", rename={"minimum": "maximum", "lt": "gt", "gt": "lt"})
def minimum(self, other):
    result = at.minimum(self, other)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        # the smaller input takes the gradient; a tie splits it in halves (torch's rule, which
        # also gives a NaN comparison's gradient to both)
        zeros = at.zeros_like(grad)
        tie = at.eq(self, other)
        grad_self = None
        if needs_input_grad[0]:
            grad_self = sum_to(at.where(tie, grad * 0.5, at.where(at.gt(self, other), zeros, grad)), self_sizes)
        grad_other = None
        if needs_input_grad[1]:
            grad_other = sum_to(at.where(tie, grad * 0.5, at.where(at.lt(self, other), zeros, grad)), other_sizes)
        return grad_self, grad_other
    def jvp(self_t, other_t):
        result_t = at.where(at.eq(self, other), (self_t + other_t) * 0.5,
                            at.where(at.lt(self, other), self_t, other_t))
        return result_t
    return result, backward


@derivative("fmin(Tensor self, Tensor other) -> Tensor")
@family_member("fmax(Tensor self, Tensor other) -> Tensor", rename={"fmin": "fmax", "le": "ge"})
def fmin(self, other):
    result = at.fmin(self, other)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        # fmin picks self where self <= other or other is NaN (ties go to self)
        zeros = at.zeros_like(grad)
        nan_other = at.ne(other, other)
        grad_self = None
        if needs_input_grad[0]:
            grad_self = sum_to(at.where(at.le(self, other), grad, at.where(nan_other, grad, zeros)), self_sizes)
        grad_other = None
        if needs_input_grad[1]:
            grad_other = sum_to(at.where(at.le(self, other), zeros, at.where(nan_other, zeros, grad)), other_sizes)
        return grad_self, grad_other
    def jvp(self_t, other_t):
        result_t = at.where(at.le(self, other), self_t, at.where(at.ne(other, other), self_t, other_t))
        return result_t
    return result, backward


@derivative("fmod.Tensor(Tensor self, Tensor other) -> Tensor")
@family_member("remainder.Tensor(Tensor self, Tensor other) -> Tensor", rename={"fmod": "remainder", "trunc": "floor"})
def fmod_tensor(self, other):
    result = at.fmod(self, other)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        # self - trunc(self / other) * other (remainder: floor), the quotient piecewise constant
        grad_self = sum_to(grad, self_sizes) if needs_input_grad[0] else None
        grad_other = sum_to(-grad * at.trunc(self / other), other_sizes) if needs_input_grad[1] else None
        return grad_self, grad_other
    def jvp(self_t, other_t):
        result_t = self_t - other_t * at.trunc(self / other)
        return result_t
    return result, backward


@derivative("fmod.Scalar(Tensor self, Scalar other) -> Tensor", jvp="auto_element_wise")
@family_member("remainder.Scalar(Tensor self, Scalar other) -> Tensor", rename={"fmod": "remainder"})
def fmod_scalar(self, other):
    result = at.fmod(self, other)
    def backward(grad):
        return grad
    return result, backward


@derivative("pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor")
def pow_tensor_tensor(self, exponent):
    result = at.pow(self, exponent)
    self_sizes = self.sizes()
    exponent_sizes = exponent.sizes()
    def backward(grad, *, needs_input_grad):
        # d x^y = y x^(y-1) dx + x^y ln x dy; exactly 0 for y = 0 (no 0 * inf at x = 0), and
        # the ln 0 term is 0 where 0^y is flat in y (y >= 0), as torch has it
        zeros = at.zeros_like(grad)
        grad_self = None
        if needs_input_grad[0]:
            grad_self = sum_to(at.where(at.eq(exponent, 0), zeros, grad * exponent * at.pow(self, exponent - 1.0)),
                               self_sizes)
        grad_exponent = None
        if needs_input_grad[1]:
            by_log = grad * result * at.log(self)
            grad_exponent = sum_to(at.where(at.eq(self, 0), at.where(at.ge(exponent, 0), zeros, by_log), by_log),
                                   exponent_sizes)
        return grad_self, grad_exponent
    def jvp(self_t, exponent_t):
        zeros = at.zeros_like(result)
        by_self = at.where(at.eq(exponent, 0), zeros, self_t * exponent * at.pow(self, exponent - 1.0))
        by_log = exponent_t * result * at.log(self)
        result_t = by_self + at.where(at.eq(self, 0), at.where(at.ge(exponent, 0), zeros, by_log), by_log)
        return result_t
    return result, backward


@derivative("pow.Scalar(Scalar self, Tensor exponent) -> Tensor")
def pow_scalar(self, exponent):
    result = at.pow(self, exponent)
    def backward(grad):
        # d b^y = b^y ln b dy; 0 where b = 0 and y >= 0 (0^y flat there), as torch has it
        by_log = grad * result * at.log(at.add(at.zeros_like(result), self))
        if self == 0:
            return at.where(at.ge(exponent, 0), at.zeros_like(grad), by_log)
        return by_log
    def jvp(exponent_t):
        by_log = exponent_t * result * at.log(at.add(at.zeros_like(result), self))
        result_t = at.where(at.ge(exponent, 0), at.zeros_like(by_log), by_log) if self == 0 else by_log
        return result_t
    return result, backward


@derivative("lerp.Scalar(Tensor self, Tensor end, Scalar weight) -> Tensor", jvp="auto_linear")
def lerp_scalar(self, end, weight):
    result = at.lerp(self, end, weight)
    self_sizes = self.sizes()
    end_sizes = end.sizes()
    def backward(grad, *, needs_input_grad):
        # self + weight * (end - self)
        scaled = at.mul(grad, weight)
        grad_self = sum_to(grad - scaled, self_sizes) if needs_input_grad[0] else None
        grad_end = sum_to(scaled, end_sizes) if needs_input_grad[1] else None
        return grad_self, grad_end
    return result, backward


@derivative("lerp.Tensor(Tensor self, Tensor end, Tensor weight) -> Tensor")
def lerp_tensor(self, end, weight):
    result = at.lerp(self, end, weight)
    self_sizes = self.sizes()
    end_sizes = end.sizes()
    weight_sizes = weight.sizes()
    def backward(grad, *, needs_input_grad):
        # self + weight * (end - self)
        scaled = grad * weight
        grad_self = sum_to(grad - scaled, self_sizes) if needs_input_grad[0] else None
        grad_end = sum_to(scaled, end_sizes) if needs_input_grad[1] else None
        grad_weight = sum_to(grad * (end - self), weight_sizes) if needs_input_grad[2] else None
        return grad_self, grad_end, grad_weight
    def jvp(self_t, end_t, weight_t):
        result_t = self_t + weight * (end_t - self_t) + weight_t * (end - self)
        return result_t
    return result, backward


@derivative("xlogy.Tensor(Tensor self, Tensor other) -> Tensor")
def xlogy_tensor(self, other):
    result = at.xlogy(self, other)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        # x log y (0 where x = 0): d/dx = log y, as xlogy(grad, y) (0 for a zero grad), which
        # torch zeroes where x = 0 and y <= 0 (log y is -inf or NaN there)
        grad_self = None
        if needs_input_grad[0]:
            by_log = at.xlogy(grad, other)
            grad_self = sum_to(at.where(at.eq(self, 0), at.where(at.le(other, 0), at.zeros_like(by_log), by_log),
                                        by_log), self_sizes)
        grad_other = sum_to(grad * self / other, other_sizes) if needs_input_grad[1] else None
        return grad_self, grad_other
    def jvp(self_t, other_t):
        by_log = at.xlogy(self_t, other)
        masked = at.where(at.eq(self, 0), at.where(at.le(other, 0), at.zeros_like(by_log), by_log), by_log)
        result_t = masked + other_t * self / other
        return result_t
    return result, backward


@derivative("logaddexp(Tensor self, Tensor other) -> Tensor")
def logaddexp(self, other):
    result = at.logaddexp(self, other)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        # d log(e^x + e^y) / dx = e^x / (e^x + e^y) = sigmoid(x - y)
        grad_self = sum_to(grad * at.sigmoid(self - other), self_sizes) if needs_input_grad[0] else None
        grad_other = sum_to(grad * at.sigmoid(other - self), other_sizes) if needs_input_grad[1] else None
        return grad_self, grad_other
    def jvp(self_t, other_t):
        result_t = self_t * at.sigmoid(self - other) + other_t * at.sigmoid(other - self)
        return result_t
    return result, backward


@derivative("logaddexp2(Tensor self, Tensor other) -> Tensor")
def logaddexp2(self, other):
    result = at.logaddexp2(self, other)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        # d log2(2^x + 2^y) / dx = 2^x / (2^x + 2^y) = sigmoid((x - y) ln 2)
        grad_self = None
        if needs_input_grad[0]:
            grad_self = sum_to(grad * at.sigmoid((self - other) * 0.6931471805599453), self_sizes)
        grad_other = None
        if needs_input_grad[1]:
            grad_other = sum_to(grad * at.sigmoid((other - self) * 0.6931471805599453), other_sizes)
        return grad_self, grad_other
    def jvp(self_t, other_t):
        result_t = (self_t * at.sigmoid((self - other) * 0.6931471805599453)
                    + other_t * at.sigmoid((other - self) * 0.6931471805599453))
        return result_t
    return result, backward


@derivative("xlogy.Scalar_Other(Tensor self, Scalar other) -> Tensor", jvp="auto_element_wise")
def xlogy_scalar_other(self, other):
    result = at.xlogy(self, other)
    def backward(grad):
        # x log c (0 where x = 0): d/dx = log c, as xlogy(grad, c) (0 for a zero grad), which
        # torch zeroes where x = 0 when c <= 0 (log c is -inf or NaN)
        by_log = at.xlogy(grad, other)
        if other > 0:
            return by_log
        return at.where(at.eq(self, 0), at.zeros_like(by_log), by_log)
    return result, backward


@derivative("copysign.Tensor(Tensor self, Tensor other) -> Tensor")
def copysign_tensor(self, other):
    result = at.copysign(self, other)
    self_sizes = self.sizes()
    def backward(grad, *, needs_input_grad):
        # piecewise constant in other
        grad_self = None
        if needs_input_grad[0]:
            grad_self = sum_to(copysign_tensor_self_backward(grad, self, result), self_sizes)
        return grad_self, None
    def jvp(self_t):
        result_t = at.where(at.eq(self, 0), at.zeros_like(result), self_t * (result / self))
        return result_t
    return result, backward


@derivative("addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor")
def addcmul(self, tensor1, tensor2, *, value=1):
    result = at.addcmul(self, tensor1, tensor2, value=value)
    self_sizes = self.sizes()
    tensor1_sizes = tensor1.sizes()
    tensor2_sizes = tensor2.sizes()
    def backward(grad, *, needs_input_grad):
        # self + value * tensor1 * tensor2
        grad_self = sum_to(grad, self_sizes) if needs_input_grad[0] else None
        grad_tensor1 = sum_to(at.mul(grad * tensor2, value), tensor1_sizes) if needs_input_grad[1] else None
        grad_tensor2 = sum_to(at.mul(grad * tensor1, value), tensor2_sizes) if needs_input_grad[2] else None
        return grad_self, grad_tensor1, grad_tensor2
    def jvp(self_t, tensor1_t, tensor2_t):
        result_t = self_t + at.mul(tensor1_t * tensor2 + tensor2_t * tensor1, value)
        return result_t
    return result, backward


@derivative("addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor")
def addcdiv(self, tensor1, tensor2, *, value=1):
    result = at.addcdiv(self, tensor1, tensor2, value=value)
    self_sizes = self.sizes()
    tensor1_sizes = tensor1.sizes()
    tensor2_sizes = tensor2.sizes()
    def backward(grad, *, needs_input_grad):
        # self + value * tensor1 / tensor2; value is applied to tensor2's factors before they meet
        # grad (tensor2 is often the smaller, broadcast operand)
        grad_self = sum_to(grad, self_sizes) if needs_input_grad[0] else None
        grad_tensor1 = None
        if needs_input_grad[1]:
            grad_tensor1 = sum_to(grad * at.mul(at.reciprocal(tensor2), value), tensor1_sizes)
        grad_tensor2 = None
        if needs_input_grad[2]:
            grad_tensor2 = sum_to(grad * tensor1 * -at.mul(at.reciprocal(tensor2 * tensor2), value), tensor2_sizes)
        return grad_self, grad_tensor1, grad_tensor2
    def jvp(self_t, tensor1_t, tensor2_t):
        result_t = self_t + at.mul((tensor1_t - tensor2_t * tensor1 / tensor2) / tensor2, value)
        return result_t
    return result, backward
