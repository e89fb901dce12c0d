"""ATen's fused backward operators, called by the backwards of tanh, sigmoid, relu, the
softmaxes, max.dim and gather: one kernel where the composed expression takes three (torch's own
backwards call the same ops). Each has its own formula, so double backward through them
exists: they are linear in the incoming gradient, so their gradient with respect to it is
the op itself (or its adjoint), and the other input gets the derivative of the op's
expression.
"""
from __future__ import annotations

from formulas import at, derivative
from formulas.helpers import sum_to


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
            scaled = grad * grad_output
            grad_out = sum_to(scaled - scaled * (output + output), output_sizes)
        return grad_grad_output, grad_out
    def jvp(grad_output_t, output_t):
        # d [g o (1 - o)] = g_t o (1 - o) + g (1 - 2 o) o_t
        scaled = grad_output * output_t
        result_t = at.sigmoid_backward(grad_output_t, output) + (scaled - scaled * (output + output))
        return result_t
    return result, backward


@derivative("threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor")
def threshold_backward(grad_output, self, threshold):
    result = at.threshold_backward(grad_output, self, threshold)
    grad_output_sizes = grad_output.sizes()
    def backward(grad):
        # result = grad_output where self > threshold, else 0: linear in grad_output, and
        # piecewise constant in self (no gradient)
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
