"""ATen's fused backward operators that the backwards of ``formulas/shape_more.py`` and
``formulas/indexing_more.py`` call (one kernel each, as torch's own backwards use): the gradient
placed into zeros of the input's shape. Each is linear in the incoming gradient, so its own
gradient is the adjoint placement (the forward view or selection applied to the gradient) and
its jvp is the op applied to the tangent. They live apart from their forward ops because a
formula's backward is emitted as ``<function>_backward``, the name of these operators.
"""
from __future__ import annotations

from formulas import at, derivative


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
