"""Pooling over the last two dims of a (C, H, W) or (N, C, H, W) input: ``max_pool2d_with_indices``
(what ``F.max_pool2d`` runs) and ``avg_pool2d``, with their fused ATen backward operators, each
given its own formula so that double backward stays intact.

Both forwards read windows of the input. Max pooling copies one element per window (the index
it returns, flat over H*W), so its gradient adds each output's gradient at that element and its
tangent is the input's tangent there. Average pooling is linear: out = sum over the window's
in-input cells / divisor (the divisor fixed by the window's geometry), so its gradient spreads
each output's gradient, divided by that divisor, over its window. Both backward operators are
linear in the incoming gradient: their own gradient is the adjoint placement (a gather by the
indices; average pooling of the gradient), and ``self`` gives them only its shape.
"""
from __future__ import annotations

from formulas import Tensor, at, derivative, helper


@helper
def gather_by_plane_indices(source: Tensor, indices: Tensor) -> Tensor:
    """The elements of ``source`` (..., H, W) at ``indices`` (..., oH, oW), each a flat index into
    its own H*W plane: a tensor shaped like ``indices``."""
    picked = at.gather(at.flatten(source, -2, -1), -1, at.flatten(indices, -2, -1))
    return at.reshape(picked, indices.sizes())


@derivative("max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
            "int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)", output_differentiability=[True, False])
def max_pool2d_with_indices(self, kernel_size, stride=[], padding=0, dilation=1, ceil_mode=False):
    result, indices = at.max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
    def backward(grad):
        # out[p] = self[indices[p]]: each output's gradient is added at its window's maximum
        return at.max_pool2d_with_indices_backward(grad, self, kernel_size, stride, padding, dilation, ceil_mode,
                                                   indices)
    def jvp(self_t):
        # the selected element moves with its own tangent
        result_t = gather_by_plane_indices(self_t, indices)
        return result_t
    return (result, indices), backward


@derivative("max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, "
            "int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor")
def max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    result = at.max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
                                                 ceil_mode, indices)
    def backward(grad):
        # result adds grad_output[p] at indices[p] into zeros of self's shape: its adjoint reads
        # grad back at the indices; self gives only its shape, indices are integral
        return gather_by_plane_indices(grad, indices), None, None
    def jvp(grad_output_t):
        # linear in grad_output
        result_t = at.max_pool2d_with_indices_backward(grad_output_t, self, kernel_size, stride, padding, dilation,
                                                       ceil_mode, indices)
        return result_t
    return result, backward


@derivative("avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, "
            "bool count_include_pad=True, int? divisor_override=None) -> Tensor", jvp="auto_linear")
def avg_pool2d(self, kernel_size, stride=[], padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    result = at.avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    def backward(grad):
        # out[p] = sum_{q in window p} self[q] / divisor[p]: grad[p] / divisor[p] goes to each q
        return at.avg_pool2d_backward(grad, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                      divisor_override)
    return result, backward


@derivative("avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, "
            "bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor")
def avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override):
    result = at.avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                    divisor_override)
    def backward(grad):
        # result is the adjoint of average pooling applied to grad_output: its own adjoint is
        # average pooling again; self gives only its shape
        return at.avg_pool2d(grad, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override), None
    def jvp(grad_output_t):
        # linear in grad_output
        result_t = at.avg_pool2d_backward(grad_output_t, self, kernel_size, stride, padding, ceil_mode,
                                          count_include_pad, divisor_override)
        return result_t
    return result, backward
