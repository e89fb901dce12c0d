"""Layers that are neither activations, losses, normalization, convolution nor pooling:
``linear``, ``embedding`` with its fused backwards ``embedding_dense_backward`` and
``embedding_backward`` (its dense and sparse dispatch), and dropout as its
deterministic part (``native_dropout`` with the mask it drew; ``native_dropout_backward``, which
applies a given mask, is a member of ``threshold_backward``'s family in ``backward_ops.py``).
"""
from __future__ import annotations

from formulas import Tensor, at, derivative, helper
from formulas.helpers import sum_to

# --- dropout -------------------------------------------------------------------------

@derivative("native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)",
            output_differentiability=[True, False])
def native_dropout(input, p, train):
    result, mask = at.native_dropout(input, p, train)
    # training (train None or True) keeps an element with probability 1 - p and scales it by
    # 1 / (1 - p) (0 for p = 1, where every element is dropped); evaluation is the identity
    training = True
    if train is not None:
        training = train
    scale = 1.0
    if training:
        scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    def backward(grad):
        # result = input * mask * scale with the mask drawn in the forward: linear in input
        return at.native_dropout_backward(grad, mask, scale)
    def jvp(input_t):
        result_t = at.native_dropout_backward(input_t, mask, scale)
        return result_t
    return (result, mask), backward


@derivative("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor")
def linear(input, weight, bias=None):
    result = at.linear(input, weight, bias)
    input_sizes = input.sizes()
    # a 1-d weight is one output feature whose dim the result leaves out: input @ weight
    weight_is_vector = weight.dim() == 1
    out_features = 1 if weight_is_vector else weight.size(0)
    in_features = weight.size(-1)
    rows = 1
    for d in range(len(input_sizes) - 1):
        rows = rows * input_sizes[d]
    bias_sizes = [out_features]       # read only when there is a bias
    if bias is not None:
        bias_sizes = bias.sizes()
    def backward(grad, *, needs_input_grad):
        # result = input weight^T + bias over the last dim of input
        grad_input = None
        grad_weight = None
        if weight_is_vector:
            # result = input @ weight: grad_input = grad weight^T (an outer product), grad_weight = input^T grad
            if needs_input_grad[0]:
                grad_input = at.unsqueeze(grad, -1) * weight
            if needs_input_grad[1]:
                grad_weight = at.mv(at.t(at.reshape(input, [rows, in_features])), at.reshape(grad, [rows]))
        else:
            grad_input = at.matmul(grad, weight) if needs_input_grad[0] else None
            if needs_input_grad[1]:
                grad_weight = at.mm(at.t(at.reshape(grad, [rows, out_features])), at.reshape(input, [rows, in_features]))
        grad_bias = sum_to(grad, bias_sizes) if needs_input_grad[2] else None
        return grad_input, grad_weight, grad_bias
    def jvp(input_t, weight_t, bias_t):
        result_t = at.linear(input_t, weight, bias_t) + at.matmul(input, at.t(weight_t))
        return result_t
    return result, backward


@derivative("embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, "
            "bool sparse=False) -> Tensor")
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    result = at.embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
    num_weights = weight.size(0)
    def backward(grad):
        if sparse:
            # torch's weight gradient is then a sparse COO tensor, which the library does not make
            raise NotImplementedError("embedding(sparse=True): the formula library gives no sparse gradient; "
                                      "use sparse=False (a dense weight gradient) or torch's own embedding")
        # result[i] = weight[indices[i]]: the gradient sums the rows back (padding row and
        # frequency scaling as torch), fused in ATen's embedding_dense_backward
        return at.embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq), None
    def jvp(weight_t):
        result_t = at.embedding(weight_t, indices, padding_idx, scale_grad_by_freq, sparse)
        return result_t
    return result, backward


@helper
def embedding_dense_backward_transpose(grad: Tensor, indices: Tensor, num_weights: int, padding_idx: int,
                                       scale_grad_by_freq: bool) -> Tensor:
    """The transpose of ``embedding_dense_backward``, linear in its gradient: that op gives
    ``result[r] = s_r sum_{i: indices[i] = r} grad_output[i]`` with ``s_r = 0`` for the padding row
    and ``1 / count_r`` when scaled, so the transpose reads row ``indices[i]`` of ``grad`` back,
    times ``s_{indices[i]}``."""
    read = at.embedding(grad, indices, -1, False, False)
    if padding_idx < 0 and not scale_grad_by_freq:
        return read
    position_sizes = list(indices.sizes())
    position_sizes.append(1)
    ones = at.exp(at.new_zeros(grad, position_sizes))
    counts = at.embedding_dense_backward(ones, indices, num_weights, padding_idx, False)
    used = at.gt(counts, 0.0)
    row_factor = at._to_copy(used, dtype=counts.scalar_type())
    if scale_grad_by_freq:
        row_factor = at.where(used, row_factor / counts, row_factor)
    return read * at.embedding(row_factor, indices, -1, False, False)


@derivative("embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, SymInt padding_idx, "
            "bool scale_grad_by_freq) -> Tensor")
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    result = at.embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
    def backward(grad):
        return embedding_dense_backward_transpose(grad, indices, num_weights, padding_idx, scale_grad_by_freq), None
    def jvp(grad_output_t):
        result_t = at.embedding_dense_backward(grad_output_t, indices, num_weights, padding_idx, scale_grad_by_freq)
        return result_t
    return result, backward


@derivative("embedding_backward(Tensor grad, Tensor indices, SymInt num_weights, SymInt padding_idx, "
            "bool scale_grad_by_freq, bool sparse) -> Tensor")
def embedding_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq, sparse):
    # embedding's weight gradient: embedding_dense_backward, or a sparse tensor of the same values
    result = at.embedding_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq, sparse)
    def backward(grad_result):
        if sparse:
            raise NotImplementedError("embedding_backward(sparse=True): the formula library gives no derivative of "
                                      "a sparse gradient; use sparse=False (a dense weight gradient)")
        return embedding_dense_backward_transpose(grad_result, indices, num_weights, padding_idx,
                                                  scale_grad_by_freq), None
    def jvp(grad_t):
        result_t = at.embedding_backward(grad_t, indices, num_weights, padding_idx, scale_grad_by_freq, sparse)
        return result_t
    return result, backward
