"""NumPy kernels: the value semantics of every declared operator.

``KERNELS["name.overload"]`` takes the schema's arguments positionally, in
schema order, with tensors as NumPy arrays (or, for wrapped numbers, Python
scalars), and returns arrays. Trailing arguments that mean nothing on a
single-device NumPy engine (layout, device, pin_memory, memory_format...) are
accepted and ignored (``*_options``). Kernels never record a graph: the
autograd layer of :mod:`reference_engine.dispatch` is above them.

One module per topic; importing the package registers every kernel, and every
public name of a topic module is importable from here.
"""
from __future__ import annotations

from reference_engine.kernels.registry import DEFAULT_KEYWORD_KERNELS, kernel, KERNELS, VIEW_OPS
from reference_engine.kernels.common import result_dtype
from reference_engine.kernels.factories import new_zeros, ones_like, zeros_like
from reference_engine.kernels.pointwise import (
    add, addcdiv, addcmul, clamp, clamp_max, clamp_min, div, frac, lerp, log, pow_, relu, round_decimals,
    rsub, sigmoid, sqrt, sub, where, xlogy, xlogy_scalar_other,
)
from reference_engine.kernels.activations import (
    celu, elu, gelu, hardshrink, hardtanh, leaky_relu, logit, softplus, softshrink, threshold,
)
from reference_engine.kernels.reductions import (
    cumprod, cumsum, linalg_vector_norm, logsumexp, max_all, mean_all, mean_dim, min_all, norm_scalar,
    norm_scalaropt_dim, prod_all, prod_dim, sum_all, sum_dim, var_mean_dim,
)
from reference_engine.kernels.linear_algebra import (
    addbmm, addmm, addmv, addr, baddbmm, bmm, dot, linalg_matrix_exp, linalg_solve_triangular, matmul, mm, mv,
    outer,
)
from reference_engine.kernels.shapes import (
    cat, chunk, clone, conj, constant_pad_nd, contiguous, diagonal, diagonal_backward, diagonal_scatter,
    expand, expand_as, flatten, flip, fliplr, flipud, movedim, movedim_intlist, narrow, narrow_copy, permute,
    repeat, reshape, roll, rot90, select, select_backward, select_scatter, slice_backward, slice_scatter,
    slice_tensor, split, split_with_sizes, squeeze, squeeze_dim, squeeze_dims, stack, t, tile, to_copy,
    transpose, tril, triu, unbind, unflatten, unsqueeze, view,
)
from reference_engine.kernels.indexing import (
    gather, index_add, index_copy, index_fill, index_put, index_select, index_select_backward, index_tensor,
    masked_fill, masked_scatter, masked_select, scatter, scatter_add,
)
from reference_engine.kernels.backward_ops import (
    cummaxmin_backward, elu_backward, embedding_backward, gather_backward, gelu_backward,
    hardsigmoid_backward, hardswish_backward, hardtanh_backward, leaky_relu_backward, log_softmax_backward_data,
    logit_backward, masked_select_backward, mish_backward, shrink_backward, sigmoid_backward,
    silu_backward, softmax_backward_data, softplus_backward, tanh_backward, threshold_backward,
    trace_backward, value_selecting_reduction_backward,
)
from reference_engine.kernels.nn import (
    binary_cross_entropy, binary_cross_entropy_with_logits, embedding, embedding_dense_backward, huber_loss,
    l1_loss, layer_norm, linear, log_softmax, log_softmax_int, mse_loss, native_dropout,
    native_dropout_backward, native_layer_norm, nll_loss_backward, nll_loss_forward, smooth_l1_loss, softmax,
    softmax_int,
)
from reference_engine.kernels.pooling import (
    avg_pool2d, avg_pool2d_backward, max_pool2d_with_indices, max_pool2d_with_indices_backward,
)
from reference_engine.kernels.convolution import (
    conv1d, conv2d, conv_transpose1d, conv_transpose2d_input, convolution,
)

__all__ = [
    "add", "addbmm", "addcdiv", "addcmul", "addmm", "addmv", "addr", "avg_pool2d", "avg_pool2d_backward",
    "baddbmm", "binary_cross_entropy", "binary_cross_entropy_with_logits", "bmm", "cat", "celu", "chunk",
    "clamp", "clamp_max", "clamp_min", "clone", "conj", "constant_pad_nd", "contiguous", "conv1d", "conv2d",
    "conv_transpose1d", "conv_transpose2d_input", "convolution", "cummaxmin_backward", "cumprod",
    "cumsum",
    "DEFAULT_KEYWORD_KERNELS", "diagonal", "diagonal_backward", "diagonal_scatter", "div", "dot", "elu",
    "elu_backward", "embedding", "embedding_backward", "embedding_dense_backward", "expand", "expand_as", "flatten", "flip",
    "fliplr", "flipud", "frac", "gather", "gather_backward", "gelu", "gelu_backward", "hardshrink",
    "hardsigmoid_backward", "hardswish_backward", "hardtanh", "hardtanh_backward", "huber_loss", "index_add",
    "index_copy", "index_fill", "index_put", "index_select", "index_select_backward", "index_tensor",
    "kernel", "KERNELS", "l1_loss", "layer_norm", "leaky_relu", "leaky_relu_backward", "lerp",
    "linalg_matrix_exp", "linalg_solve_triangular", "linalg_vector_norm", "linear", "log", "log_softmax", "log_softmax_backward_data", "log_softmax_int",
    "logit", "logit_backward", "logsumexp", "masked_fill", "masked_scatter", "masked_select",
    "masked_select_backward", "matmul", "max_all", "mish_backward",
    "max_pool2d_with_indices", "max_pool2d_with_indices_backward", "mean_all", "mean_dim", "min_all", "mm",
    "movedim", "movedim_intlist", "mse_loss", "mv", "narrow", "narrow_copy", "native_dropout",
    "native_dropout_backward", "native_layer_norm", "new_zeros", "nll_loss_backward", "nll_loss_forward",
    "norm_scalar", "norm_scalaropt_dim", "ones_like", "outer", "permute", "pow_", "prod_all", "prod_dim",
    "relu", "repeat", "reshape", "result_dtype", "roll", "rot90", "round_decimals", "rsub", "scatter",
    "scatter_add", "select", "select_backward", "select_scatter", "shrink_backward", "sigmoid",
    "sigmoid_backward", "silu_backward", "slice_backward", "slice_scatter", "slice_tensor", "smooth_l1_loss", "softmax",
    "softmax_backward_data", "softmax_int", "softplus", "softplus_backward", "softshrink", "split",
    "split_with_sizes", "sqrt", "squeeze", "squeeze_dim", "squeeze_dims", "stack", "sub", "sum_all",
    "sum_dim", "t", "tanh_backward", "threshold", "threshold_backward", "tile", "to_copy", "trace_backward",
    "transpose",
    "tril", "triu", "unbind", "unflatten", "unsqueeze", "value_selecting_reduction_backward", "var_mean_dim",
    "view", "VIEW_OPS", "where", "xlogy", "xlogy_scalar_other", "zeros_like",
]
