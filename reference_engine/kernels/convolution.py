"""Convolutions (``conv1d``, ``conv2d``, transposed) through ``convolution``."""
from __future__ import annotations

from typing import Any

import numpy as np

from reference_engine.kernels.registry import kernel
from reference_engine.kernels.common import _array, _TORCH_DTYPE_NAMES


def _conv_param(values: Any, name: str, spatial: int) -> list[int]:
    """``stride``/``padding``/... as one value per spatial dim; a single value is every dim's."""
    values = [values] if isinstance(values, int) else list(values)
    if len(values) == 1:
        return values * spatial
    if len(values) != spatial:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {spatial} values to match "
                           f"the convolution dimensions, but got {name}={values}")
    return values


def _check_convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """The checks torch makes before a convolution; returns the per-dim parameters."""
    if weight.ndim < 3:
        raise RuntimeError("weight should have at least three dimensions")
    spatial = weight.ndim - 2
    stride, padding, dilation, output_padding = (
        _conv_param(values, name, spatial) for values, name in
        ((stride, "stride"), (padding, "padding"), (dilation, "dilation"), (output_padding, "output_padding")))
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(op < 0 for op in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if x.ndim != weight.ndim:
        raise RuntimeError(f"Expected {weight.ndim}-dimensional input for {weight.ndim}-dimensional weight "
                           f"{list(weight.shape)}, but got {x.ndim}-dimensional input of size {list(x.shape)} instead")
    if x.dtype != weight.dtype:
        raise RuntimeError(f"expected scalar type {_TORCH_DTYPE_NAMES.get(x.dtype.name, x.dtype.name)} but found "
                           f"{_TORCH_DTYPE_NAMES.get(weight.dtype.name, weight.dtype.name)}")
    if weight.shape[0] < groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at dimension 0, but got "
                           f"weight of size {list(weight.shape)} instead")
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                           f"got weight of size [{list(weight.shape)}] instead")
    in_channels = weight.shape[0] if transposed else weight.shape[1] * groups
    out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
    if x.shape[1] != in_channels:
        given = f"transposed={int(transposed)}" if transposed else f"groups={groups}"
        raise RuntimeError(f"Given {given}, weight of size {list(weight.shape)}, expected input{list(x.shape)} to "
                           f"have {in_channels} channels, but got {x.shape[1]} channels instead")
    if bias is not None and (np.ndim(bias) != 1 or np.shape(bias)[0] != out_channels):
        given = "transposed=1, " if transposed else ""
        raise RuntimeError(f"Given {given}weight of size {list(weight.shape)}, expected bias to be 1-dimensional with "
                           f"{out_channels} elements, but got bias of size {list(np.shape(bias))} instead")
    if transposed:
        if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
            raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                               f"output_padding={output_padding}, stride={stride}, dilation={dilation}")
    else:
        padded = [size + 2 * p for size, p in zip(x.shape[2:], padding)]
        reach = [d * (k - 1) + 1 for k, d in zip(weight.shape[2:], dilation)]
        if any(size < r for size, r in zip(padded, reach)):
            raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel "
                               f"size: ({' x '.join(map(str, reach))}). Kernel size can't be greater than actual "
                               "input size")
    return stride, padding, dilation, output_padding


def _windows(padded, kernel_sizes, stride, dilation, out_sizes):
    """A strided view of ``padded`` (N, C, *spatial): (N, C, *out_sizes, *kernel_sizes), element
    ``[n, c, *o, *k]`` being ``padded[n, c, *(o * stride + k * dilation)]`` (no copy)."""
    strides = padded.strides
    return np.lib.stride_tricks.as_strided(
        padded, (*padded.shape[:2], *out_sizes, *kernel_sizes),
        (*strides[:2], *(st * s for st, s in zip(strides[2:], stride)),
         *(st * d for st, d in zip(strides[2:], dilation))), writeable=False)


@kernel("convolution")
def convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """N-d convolution (cross-correlation) of ``x`` (N, C_in, *spatial) with ``weight``, or its
    transpose (the adjoint of the convolution with the same weight) when ``transposed``."""
    x, weight = _array(x), _array(weight)
    stride, padding, dilation, output_padding = _check_convolution(
        x, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    spatial = weight.ndim - 2
    batch, kernel_sizes = x.shape[0], weight.shape[2:]
    kernel_axes = tuple(range(-spatial, 0))
    if not transposed:
        out_sizes = [(size + 2 * p - d * (k - 1) - 1) // s + 1
                     for size, k, s, p, d in zip(x.shape[2:], kernel_sizes, stride, padding, dilation)]
        padded = np.pad(x, [(0, 0), (0, 0), *((p, p) for p in padding)]) if any(padding) else x
        windows = _windows(padded, kernel_sizes, stride, dilation, out_sizes)
        group_in, group_out = weight.shape[1], weight.shape[0] // groups
        parts = []
        for g in range(groups):     # im2col (tensordot copies the windows) and one matrix product per group
            columns = windows[:, g * group_in:(g + 1) * group_in]
            kernel_g = weight[g * group_out:(g + 1) * group_out]
            parts.append(np.moveaxis(np.tensordot(columns, kernel_g, ((1, *kernel_axes), (1, *range(2, 2 + spatial)))),
                                     -1, 1))
        out = parts[0] if groups == 1 else np.concatenate(parts, axis=1)
    else:
        # every input element spreads weight-scaled copies over its kernel's reach: the sum of
        # those, cropped by the padding (and extended by output_padding at the end)
        out_sizes = [(size - 1) * s - 2 * p + d * (k - 1) + op + 1 for size, k, s, p, d, op in
                     zip(x.shape[2:], kernel_sizes, stride, padding, dilation, output_padding)]
        if any(size <= 0 for size in out_sizes):
            raise RuntimeError(f"Given input size per channel: {list(x.shape[2:])}, the calculated output size "
                               f"{out_sizes} is too small: reduce the padding")
        group_in, group_out = weight.shape[0] // groups, weight.shape[1]
        full = np.zeros((batch, group_out * groups,
                         *((size - 1) * s + d * (k - 1) + 1 + op for size, k, s, d, op in
                           zip(x.shape[2:], kernel_sizes, stride, dilation, output_padding))),
                        dtype=np.result_type(x, weight))
        for g in range(groups):
            # (N, *spatial, group_out, *kernel): each input position's contribution per kernel offset
            spread = np.tensordot(x[:, g * group_in:(g + 1) * group_in], weight[g * group_in:(g + 1) * group_in],
                                  ((1,), (0,)))
            spread = np.moveaxis(spread, 1 + spatial, 1)
            for offset in np.ndindex(*kernel_sizes):
                target = tuple(slice(k * d, k * d + (size - 1) * s + 1, s) for k, d, s, size in
                               zip(offset, dilation, stride, x.shape[2:]))
                full[(slice(None), slice(g * group_out, (g + 1) * group_out), *target)] += \
                    spread[(Ellipsis, *offset)]
        out = full[(slice(None), slice(None), *(slice(p, p + size) for p, size in zip(padding, out_sizes)))]
    out = np.ascontiguousarray(out, dtype=np.result_type(x, weight))
    if bias is not None:
        out += np.reshape(bias, (-1, *(1,) * spatial))
    return out


def _conv_nd(name, spatial, x, weight, bias, stride, padding, dilation, groups, transposed=False, output_padding=0):
    """``conv{1,2}d`` / ``conv_transpose{1,2}d``: ``convolution`` of a batched or unbatched input."""
    x = _array(x)
    if x.ndim not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) input to {name}, but got "
                           f"input of size: {list(x.shape)}")
    def per_dim(values):        # an int[N] argument given one value means it for every dim
        values = [values] if isinstance(values, int) else list(values)
        return values * spatial if len(values) == 1 else values
    out = convolution(x if x.ndim == spatial + 2 else x[None], weight, bias, per_dim(stride), per_dim(padding),
                      per_dim(dilation), transposed, per_dim(output_padding), groups)
    return out if x.ndim == spatial + 2 else out[0]


@kernel("conv1d")
def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv_nd("conv1d", 1, x, weight, bias, stride, padding, dilation, groups)


@kernel("conv2d")
def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv_nd("conv2d", 2, x, weight, bias, stride, padding, dilation, groups)


@kernel("conv_transpose1d")
def conv_transpose1d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_nd("conv_transpose1d", 1, x, weight, bias, stride, padding, dilation, groups, True, output_padding)


@kernel("conv_transpose2d.input")
def conv_transpose2d_input(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_nd("conv_transpose2d", 2, x, weight, bias, stride, padding, dilation, groups, True, output_padding)
