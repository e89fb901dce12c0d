"""Convolution: ``convolution`` (N-d, strided, padded, dilated, grouped, transposed or not) and
``conv1d``, ``conv2d``, ``conv_transpose1d``, ``conv_transpose2d.input`` as users call them (batched
or unbatched input; their backwards are ``convolution``'s). ``conv2d`` is ``conv1d``'s formula and
``conv_transpose2d.input`` is ``conv_transpose1d``'s (formula families: the operator renamed, the
defaults two-dimensional).

A convolution of ``input`` (N, g*ci, *L) with ``weight`` (g*co, ci, *K), per spatial dim with
stride s, padding p, dilation d, is

    out[n, g*co + o, l] = sum_{c, k} input_padded[n, g*ci + c, l*s + k*d] weight[g*co + o, c, k]

(``input_padded`` has p zeros on both sides; the output has Lo = (L + 2p - d(K-1) - 1) // s + 1
positions), plus ``bias[g*co + o]``. It is bilinear in ``(input, weight)``, so its backward is
made of convolutions (double backward stays intact):

- **input**: the adjoint of ``input -> out`` for a fixed weight is by definition the *transposed*
  convolution with the same weight, parameters and groups. A transposed convolution of Lo positions
  has (Lo - 1)s - 2p + d(K-1) + 1 + output_padding positions; the input had L, and the last
  (L + 2p - d(K-1) - 1) mod s of them were reached by no output position: that remainder is the
  ``output_padding`` which gives the input gradient the input's shape (always below the stride).
- **weight**: grad_weight[g*co + o, c, k] = sum_{n, l} grad[n, g*co + o, l] input_padded[n, g*ci + c, l*s + k*d]:
  a convolution where the batch and channel roles swap: the signal is ``input`` viewed as (ci, g*N, *L),
  the kernel is ``grad`` viewed as (g*co, N, *Lo), groups g, stride d, dilation s, padding p. It has
  (L + 2p - s(Lo - 1) - 1) // d + 1 >= K positions per dim (more when s does not divide evenly; the
  extra ones are inputs no output reached): its first K are the gradient.
- **bias**: grad summed over every dim but the channels.

A transposed convolution is the adjoint of the convolution with the same weight, so the roles flip:
its input gradient is the (plain) convolution of grad with the weight (cropped to the input's
positions: with ``output_padding`` >= stride, allowed when below the dilation, it reaches further),
and its weight gradient is the weight-gradient sum above with grad as the signal and the input as
the kernel.
"""
from __future__ import annotations

from formulas import Tensor, at, derivative, family_member, helper


@helper
def per_spatial_dim(values: list[int], spatial: int) -> list[int]:
    """A convolution parameter with one value per spatial dim (a single value means it for every dim)."""
    if len(values) != 1:
        return values
    expanded = []
    for d in range(spatial):
        expanded.append(values[0])
    return expanded


@helper
def crop_spatial(t: Tensor, sizes: list[int]) -> Tensor:
    """``t`` (N, C, *spatial) cut down to the first ``sizes[2:]`` positions of each spatial dim."""
    cropped = t
    for d in range(2, len(sizes)):
        if cropped.size(d) > sizes[d]:
            cropped = at.narrow(cropped, d, 0, sizes[d])
    return cropped


@helper
def batched(t: Tensor, weight_dim: int) -> Tensor:
    """``t`` with a batch dim of 1 put in front when it is unbatched (one dim fewer than the weight)."""
    return at.unsqueeze(t, 0) if t.dim() < weight_dim else t


@helper
def convolution_input_backward(grad: Tensor, weight: Tensor, input_sizes: list[int], stride: list[int],
                               padding: list[int], dilation: list[int], transposed: bool, groups: int) -> Tensor:
    """Gradient of a (transposed) convolution for its input of ``input_sizes``, batched or not: the
    transposed (plain) convolution of ``grad`` with the same weight (module docstring)."""
    sizes = []
    if len(input_sizes) < weight.dim():
        sizes.append(1)
    for d in range(len(input_sizes)):
        sizes.append(input_sizes[d])
    spatial = len(sizes) - 2
    stride_ = per_spatial_dim(stride, spatial)
    padding_ = per_spatial_dim(padding, spatial)
    dilation_ = per_spatial_dim(dilation, spatial)
    output_padding = []
    for d in range(spatial):
        # a plain convolution's input positions that the stride left beyond the last output's reach
        reach = dilation_[d] * (weight.size(d + 2) - 1) + 1
        output_padding.append(0 if transposed else (sizes[d + 2] + 2 * padding_[d] - reach) % stride_[d])
    gradient = crop_spatial(at.convolution(batched(grad, weight.dim()), weight, None, stride_, padding_, dilation_,
                                           not transposed, output_padding, groups), sizes)
    return at.squeeze(gradient, 0) if len(input_sizes) < weight.dim() else gradient


@helper
def convolution_weight_backward(grad: Tensor, input: Tensor, weight_sizes: list[int], stride: list[int],
                                padding: list[int], dilation: list[int], transposed: bool, groups: int) -> Tensor:
    """Gradient of a (transposed) convolution for its weight of ``weight_sizes``, the input
    batched or not: a convolution with batch and channel roles swapped (module docstring)."""
    spatial = len(weight_sizes) - 2
    signal = batched(grad if transposed else input, len(weight_sizes))
    kernel = batched(input if transposed else grad, len(weight_sizes))
    batch = signal.size(0)
    if batch == 0:
        return at.new_zeros(grad, weight_sizes)
    # signal (N, g*cs, *L) as (cs, g*N, *L), group-major channels; kernel (N, g*ck, *Lk) as (g*ck, N, *Lk)
    grouped_sizes = [batch, groups, signal.size(1) // groups]
    swapped_sizes = [signal.size(1) // groups, groups * batch]
    order = [2, 1, 0]
    for d in range(spatial):
        grouped_sizes.append(signal.size(d + 2))
        swapped_sizes.append(signal.size(d + 2))
        order.append(d + 3)
    swapped_signal = at.reshape(at.permute(at.reshape(signal, grouped_sizes), order), swapped_sizes)
    no_padding = []
    for d in range(spatial):
        no_padding.append(0)
    # stride and dilation trade places: the kernel's step over the signal is the stride
    correlation = at.convolution(swapped_signal, at.transpose(kernel, 0, 1), None,
                                 per_spatial_dim(dilation, spatial), per_spatial_dim(padding, spatial),
                                 per_spatial_dim(stride, spatial), False, no_padding, groups)
    return crop_spatial(at.transpose(correlation, 0, 1), weight_sizes)


@helper
def convolution_to_sizes(input: Tensor, weight: Tensor, stride: list[int], padding: list[int], dilation: list[int],
                         transposed: bool, groups: int, sizes: list[int]) -> Tensor:
    """The (transposed) convolution of ``input``, batched or not, with ``weight``, no bias, whose result
    has ``sizes`` (a plain one's are its own; a transposed one's ``output_padding`` is what reaches them)."""
    output_padding = [0]
    if transposed:
        spatial = weight.dim() - 2
        stride_ = per_spatial_dim(stride, spatial)
        padding_ = per_spatial_dim(padding, spatial)
        dilation_ = per_spatial_dim(dilation, spatial)
        output_padding = []
        for d in range(spatial):
            reach = (input.size(input.dim() - spatial + d) - 1) * stride_[d] - 2 * padding_[d] \
                + dilation_[d] * (weight.size(d + 2) - 1) + 1
            output_padding.append(sizes[len(sizes) - spatial + d] - reach)
    if input.dim() < weight.dim():
        return at.squeeze(at.convolution(at.unsqueeze(input, 0), weight, None, stride, padding, dilation, transposed,
                                         output_padding, groups), 0)
    return at.convolution(input, weight, None, stride, padding, dilation, transposed, output_padding, groups)


@helper
def convolution_input_backward_transposed(input: Tensor, weight: Tensor, input_sizes: list[int], stride: list[int],
                                          padding: list[int], dilation: list[int], transposed: bool, groups: int,
                                          grad_sizes: list[int]) -> Tensor:
    """``convolution_input_backward``'s transpose in ``grad`` (of ``grad_sizes``, the convolution's
    result's): the convolution itself applied to ``input`` (of ``input_sizes``)."""
    return convolution_to_sizes(input, weight, stride, padding, dilation, transposed, groups, grad_sizes)


@helper
def convolution_weight_backward_transposed(weight: Tensor, input: Tensor, weight_sizes: list[int], stride: list[int],
                                           padding: list[int], dilation: list[int], transposed: bool, groups: int,
                                           grad_sizes: list[int]) -> Tensor:
    """``convolution_weight_backward``'s transpose in ``grad`` (of ``grad_sizes``, the convolution's
    result's): the convolution itself of ``input`` with ``weight`` (of ``weight_sizes``)."""
    return convolution_to_sizes(input, weight, stride, padding, dilation, transposed, groups, grad_sizes)


@helper
def convolution_bias_backward(grad: Tensor, weight_dim: int) -> Tensor:
    """Gradient of a convolution's bias: ``grad`` summed over every dim but the channels (dim 1,
    or dim 0 when unbatched: one dim fewer than the weight)."""
    channels = 1 if grad.dim() == weight_dim else 0
    dims = []
    for d in range(grad.dim()):
        if d != channels:
            dims.append(d)
    return at.sum(grad, dims, False)


@helper
def convolution_bias_backward_transposed(bias: Tensor, weight_dim: int, grad_sizes: list[int]) -> Tensor:
    """``convolution_bias_backward``'s transpose in ``grad`` (of ``grad_sizes``): ``bias`` broadcast
    along the channels dim (dim 1, or 0 when unbatched) over the others."""
    channels = 1 if len(grad_sizes) == weight_dim else 0
    along_channels = [grad_sizes[channels]]
    for d in range(channels + 1, len(grad_sizes)):
        along_channels.append(1)
    return at.expand(at.reshape(bias, along_channels), grad_sizes)


@helper
def convolution_gradients(grad: Tensor, input: Tensor, weight: Tensor, stride: list[int], padding: list[int],
                          dilation: list[int], transposed: bool, groups: int,
                          output_mask: list[bool]) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """The gradients of a (transposed) convolution for its input, weight and bias, those
    ``output_mask`` asks for (None for the others): every convolution operator's backward."""
    grad_input = None
    if output_mask[0]:
        grad_input = convolution_input_backward(grad, weight, input.sizes(), stride, padding, dilation, transposed,
                                                groups)
    grad_weight = None
    if output_mask[1]:
        grad_weight = convolution_weight_backward(grad, input, weight.sizes(), stride, padding, dilation, transposed,
                                                  groups)
    grad_bias = convolution_bias_backward(grad, weight.dim()) if output_mask[2] else None
    return grad_input, grad_weight, grad_bias


@derivative("convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, "
            "SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor")
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    result = at.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    def backward(grad, *, needs_input_grad):
        grad_input, grad_weight, grad_bias = convolution_gradients(grad, input, weight, stride, padding, dilation,
                                                                   transposed, groups, needs_input_grad)
        return grad_input, grad_weight, grad_bias
    def jvp(input_t, weight_t, bias_t):
        # bilinear in (input, weight), affine in bias
        result_t = (at.convolution(input_t, weight, bias_t, stride, padding, dilation, transposed, output_padding,
                                   groups)
                    + at.convolution(input, weight_t, None, stride, padding, dilation, transposed, output_padding,
                                     groups))
        return result_t
    return result, backward


@derivative("conv1d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=1, SymInt[1] padding=0, "
            "SymInt[1] dilation=1, SymInt groups=1) -> Tensor")
@family_member("conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0, "
               "SymInt[2] dilation=1, SymInt groups=1) -> Tensor",
               rename={"conv1d": "conv2d"}, defaults={"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1]})
def conv1d(input, weight, bias=None, stride=[1], padding=[0], dilation=[1], groups=1):
    result = at.conv1d(input, weight, bias, stride, padding, dilation, groups)
    def backward(grad, *, needs_input_grad):
        grad_input, grad_weight, grad_bias = convolution_gradients(grad, input, weight, stride, padding, dilation,
                                                                   False, groups, needs_input_grad)
        return grad_input, grad_weight, grad_bias
    def jvp(input_t, weight_t, bias_t):
        result_t = (at.conv1d(input_t, weight, bias_t, stride, padding, dilation, groups)
                    + at.conv1d(input, weight_t, None, stride, padding, dilation, groups))
        return result_t
    return result, backward


@derivative("conv_transpose1d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=1, "
            "SymInt[1] padding=0, SymInt[1] output_padding=0, SymInt groups=1, SymInt[1] dilation=1) -> Tensor")
@family_member("conv_transpose2d.input(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, "
               "SymInt[2] padding=0, SymInt[2] output_padding=0, SymInt groups=1, SymInt[2] dilation=1) -> Tensor",
               rename={"conv_transpose1d": "conv_transpose2d"},
               defaults={"stride": [1, 1], "padding": [0, 0], "output_padding": [0, 0], "dilation": [1, 1]})
def conv_transpose1d(input, weight, bias=None, stride=[1], padding=[0], output_padding=[0], groups=1, dilation=[1]):
    result = at.conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups, dilation)
    def backward(grad, *, needs_input_grad):
        grad_input, grad_weight, grad_bias = convolution_gradients(grad, input, weight, stride, padding, dilation,
                                                                   True, groups, needs_input_grad)
        return grad_input, grad_weight, grad_bias
    def jvp(input_t, weight_t, bias_t):
        result_t = (at.conv_transpose1d(input_t, weight, bias_t, stride, padding, output_padding, groups, dilation)
                    + at.conv_transpose1d(input, weight_t, None, stride, padding, output_padding, groups, dilation))
        return result_t
    return result, backward
