"""Elementwise operators: unary functions, binary arithmetic with broadcasting, copies.

Binary gradients are summed back to each input's shape with ``sum_to``;
``exp``, ``tanh``, ``sigmoid`` and ``sqrt`` differentiate through their output
``result`` (an output, so double backward sees it), never an intermediate.
"""
from __future__ import annotations

from formulas import at, derivative
from formulas.helpers import (div_tensor_other_backward, div_tensor_self_backward, maybe_multiply,
                              pow_backward, sum_to)


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


@derivative("relu(Tensor self) -> Tensor", jvp="auto_element_wise")
def relu(self):
    result = at.relu(self)
    def backward(grad):
        # grad where the output is positive, else 0: one kernel
        return at.threshold_backward(grad, result, 0)
    return result, backward


@derivative("pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor", jvp="auto_element_wise")
def pow_tensor_scalar(self, exponent):
    result = at.pow(self, exponent)
    def backward(grad):
        return pow_backward(grad, self, exponent)
    return result, backward


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
def mul_scalar(self, other):
    result = at.mul(self, other)
    def backward(grad):
        return at.mul(grad, other)
    return result, backward


@derivative("div.Scalar(Tensor self, Scalar other) -> Tensor", jvp="auto_linear")
def div_scalar(self, other):
    result = at.div(self, other)
    def backward(grad):
        return at.div(grad, other)
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
