"""Pooling over the last two dims of a (C, H, W) or (N, C, H, W) input: max and average, and their
backward operators."""
from __future__ import annotations

import numpy as np

from reference_engine.kernels.registry import kernel
from reference_engine.kernels.common import _array, _wrap_dim


# ----------------------------------------------------------------------------- pooling over the last two dims
# of a (C, H, W) or (N, C, H, W) input (formulas/pooling.py): max_pool2d_with_indices, avg_pool2d and their
# backward operators. A window's cells are read one kernel offset at a time, vectorized over the output.
_POOL_PAIR_FORMS = {"kernel_size": "must either be", "stride": "must either be omitted,",
                    "padding": "must either be", "dilation": "must be either"}


def _pool_pair(op: str, name: str, values: list[int], default: tuple[int, int] | None = None) -> tuple[int, int]:
    """A 2-d pooling argument given as one int or two (``default`` when empty, for ``stride``)."""
    if not values and default is not None:
        return default
    if len(values) not in (1, 2):
        raise RuntimeError(f"{op}: {name} {_POOL_PAIR_FORMS[name]} a single int, or a tuple of two ints")
    return values[0], values[-1]


def _pooled_size(size: int, kernel: int, pad: int, stride: int, dilation: int, ceil_mode: bool) -> int:
    """Outputs along one dim: windows of ``kernel`` cells ``dilation`` apart, ``stride`` apart,
    over the input padded by ``pad`` on both sides; with ``ceil_mode`` a last partial window
    counts when it starts inside the input or its left padding."""
    if stride == 0:
        raise RuntimeError("stride should not be zero")
    if pad < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {pad}")
    if pad > int(((kernel - 1) * dilation + 1) / 2):      # C++ division, truncated (kernel may be 0)
        raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={pad}, "
                           f"kernel_size={kernel} and dilation={dilation}")
    span = size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _pool_geometry(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int], pad: tuple[int, int],
                   dilation: tuple[int, int], ceil_mode: bool) -> tuple[int, int]:
    """The output's (height, width), after torch's checks of the arguments against ``x``."""
    out_h = _pooled_size(x.shape[-2], kernel[0], pad[0], stride[0], dilation[0], ceil_mode)
    out_w = _pooled_size(x.shape[-1], kernel[1], pad[1], stride[1], dilation[1], ceil_mode)
    if kernel[0] <= 0 or kernel[1] <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {kernel[0]} kW: {kernel[1]}")
    if stride[0] <= 0 or stride[1] <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dH: {stride[0]} dW: {stride[1]}")
    if dilation[0] <= 0 or dilation[1] <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {dilation[0]} "
                           f"dilationW: {dilation[1]}")
    if x.ndim not in (3, 4) or 0 in x.shape[-3:]:      # only a batch may be empty
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, "
                           f"but got:{list(x.shape)}")
    if kernel[1] // 2 < pad[1] or kernel[0] // 2 < pad[0]:
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got padW = {pad[1]}, "
                           f"padH = {pad[0]}, kW = {kernel[1]}, kH = {kernel[0]}")
    if out_h < 1 or out_w < 1:
        planes, height, width = x.shape[-3:]
        raise RuntimeError(f"Given input size: ({planes}x{height}x{width}). Calculated output size: "
                           f"({planes}x{out_h}x{out_w}). Output size is too small")
    return out_h, out_w


def _max_pool_arguments(x, kernel_size, stride, padding, dilation):
    x = _array(x)
    kernel = _pool_pair("max_pool2d", "kernel_size", kernel_size)
    steps = _pool_pair("max_pool2d", "stride", stride, kernel)
    pad = _pool_pair("max_pool2d", "padding", padding)
    dilation = _pool_pair("max_pool2d", "dilation", dilation)
    if x.ndim not in (3, 4):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    return x, kernel, steps, pad, dilation


def _avg_pool_arguments(x, kernel_size, stride, padding, divisor_override):
    x = _array(x)
    kernel = _pool_pair("avg_pool2d", "kernel_size", kernel_size)
    steps = _pool_pair("avg_pool2d", "stride", stride, kernel)
    pad = _pool_pair("avg_pool2d", "padding", padding)
    if divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    if x.ndim == 0:     # torch reads the planes as size(-3)
        raise IndexError("Dimension specified as -3 but tensor has no dimensions")
    _wrap_dim(-3, x.ndim)
    return x, kernel, steps, pad


def _window_cells(size: int, out: int, stride: int, pad: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Along one dim, the input position of each output's cell at kernel ``offset`` (clipped into
    range) and whether it lies inside the input."""
    positions = np.arange(out) * stride - pad + offset
    inside = (positions >= 0) & (positions < size)
    return np.clip(positions, 0, max(size - 1, 0)), inside


def _check_pooled_size(tensor: np.ndarray, x: np.ndarray, out_h: int, out_w: int) -> None:
    """torch's check that a backward's ``grad_output`` (or ``indices``) has the forward output's shape."""
    for dim, size in ((x.ndim - 3, x.shape[-3]), (x.ndim - 2, out_h), (x.ndim - 1, out_w)):
        if tensor.ndim != x.ndim or tensor.shape[dim] != size:
            got = tensor.shape[dim] if dim < tensor.ndim else 0
            raise RuntimeError(f"Expected a tensor of dimension {x.ndim} and tensor.size[{dim}] == {size} but got: "
                               f"dimension {tensor.ndim} and tensor.size[{dim}] = {got}")


@kernel("max_pool2d_with_indices")
def max_pool2d_with_indices(x, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    """Each window's maximum and its flat index into the H*W plane: the first maximum in row-major
    order, or the last NaN when the window holds one (as torch's CPU kernel picks)."""
    x, kernel, steps, pad, dilation = _max_pool_arguments(x, kernel_size, stride, padding, dilation)
    out_h, out_w = _pool_geometry(x, kernel, steps, pad, dilation, ceil_mode)
    height, width = x.shape[-2:]
    # a window's index starts at its first cell inside the input (torch's, even when -inf wins)
    first_row = np.arange(out_h) * steps[0] - pad[0]
    first_row = first_row + (-np.minimum(first_row, 0) + dilation[0] - 1) // dilation[0] * dilation[0]
    first_col = np.arange(out_w) * steps[1] - pad[1]
    first_col = first_col + (-np.minimum(first_col, 0) + dilation[1] - 1) // dilation[1] * dilation[1]
    shape = x.shape[:-2] + (out_h, out_w)
    indices = np.broadcast_to(first_row[:, None] * width + first_col[None, :], shape).copy()
    values = np.full(shape, -np.inf).astype(x.dtype) if x.dtype.kind == "f" else np.full(shape, np.iinfo(x.dtype).min)
    for i in range(kernel[0]):
        rows, rows_inside = _window_cells(height, out_h, steps[0], pad[0], i * dilation[0])
        for j in range(kernel[1]):
            cols, cols_inside = _window_cells(width, out_w, steps[1], pad[1], j * dilation[1])
            cell = x[..., rows[:, None], cols[None, :]]
            taken = (rows_inside[:, None] & cols_inside[None, :]) & ((cell > values) | np.isnan(cell))
            values = np.where(taken, cell, values)
            indices = np.where(taken, rows[:, None] * width + cols[None, :], indices)
    return values, indices.astype(np.int64)


@kernel("max_pool2d_with_indices_backward")
def max_pool2d_with_indices_backward(grad_output, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """``grad_output`` added at ``indices`` into zeros of ``x``'s shape (indices outside the plane,
    which torch's forward gives a window lying wholly in the padding, add nothing)."""
    x, kernel, steps, pad, dilation = _max_pool_arguments(x, kernel_size, stride, padding, dilation)
    grad_output, indices = _array(grad_output), _array(indices)
    out_h, out_w = _pool_geometry(x, kernel, steps, pad, dilation, ceil_mode)
    _check_pooled_size(grad_output, x, out_h, out_w)
    _check_pooled_size(indices, x, out_h, out_w)
    if indices.dtype != np.int64:
        found = {"float64": "Double", "float32": "Float", "bool": "Bool"}[indices.dtype.name]
        raise RuntimeError(f"expected scalar type Long but found {found}")
    planes = int(np.prod(x.shape[:-2]))
    plane_size = x.shape[-2] * x.shape[-1]
    flat_indices = indices.reshape(planes, out_h * out_w)
    kept = (flat_indices >= 0) & (flat_indices < plane_size)
    out = np.zeros((planes, plane_size), grad_output.dtype)
    plane_of = np.broadcast_to(np.arange(planes)[:, None], flat_indices.shape)
    np.add.at(out, (plane_of[kept], flat_indices[kept]), grad_output.reshape(planes, out_h * out_w)[kept])
    return out.reshape(x.shape)


def _avg_divisors(size: int, out: int, kernel: int, stride: int, pad: int, count_include_pad: bool) -> np.ndarray:
    """Along one dim, each window's extent that divides: its cells up to the padded input's end,
    or only those inside the input."""
    starts = np.arange(out) * stride - pad
    ends = np.minimum(starts + kernel, size + pad)
    if count_include_pad:
        return ends - starts
    return np.maximum(np.minimum(ends, size) - np.maximum(starts, 0), 0)


def _avg_pool_divisor(x, out_h, out_w, kernel, steps, pad, count_include_pad, divisor_override):
    """Each output's divisor (0 where its window holds no input cell, whose output is 0)."""
    height, width = x.shape[-2:]
    inside = (_avg_divisors(height, out_h, kernel[0], steps[0], pad[0], False)[:, None]
              * _avg_divisors(width, out_w, kernel[1], steps[1], pad[1], False)[None, :])
    if divisor_override is not None:
        divisor = np.full((out_h, out_w), divisor_override)
    elif count_include_pad:
        divisor = (_avg_divisors(height, out_h, kernel[0], steps[0], pad[0], True)[:, None]
                   * _avg_divisors(width, out_w, kernel[1], steps[1], pad[1], True)[None, :])
    else:
        divisor = inside
    return np.where(inside > 0, divisor, 0)


@kernel("avg_pool2d")
def avg_pool2d(x, kernel_size, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Each window's sum of input cells over its divisor: ``divisor_override``, else the window's
    size up to the padded input's end (``count_include_pad``) or its count of input cells."""
    x, kernel, steps, pad = _avg_pool_arguments(x, kernel_size, stride, padding, divisor_override)
    out_h, out_w = _pool_geometry(x, kernel, steps, pad, (1, 1), ceil_mode)
    height, width = x.shape[-2:]
    total = np.zeros(x.shape[:-2] + (out_h, out_w), x.dtype)
    for i in range(kernel[0]):
        rows, rows_inside = _window_cells(height, out_h, steps[0], pad[0], i)
        for j in range(kernel[1]):
            cols, cols_inside = _window_cells(width, out_w, steps[1], pad[1], j)
            inside = rows_inside[:, None] & cols_inside[None, :]
            total = total + np.where(inside, x[..., rows[:, None], cols[None, :]], 0)
    divisor = _avg_pool_divisor(x, out_h, out_w, kernel, steps, pad, count_include_pad, divisor_override)
    safe = np.where(divisor == 0, 1, divisor)
    if x.dtype.kind == "f":
        return np.where(divisor == 0, 0, total / safe).astype(x.dtype)
    return np.where(divisor == 0, 0, np.trunc(total / safe)).astype(x.dtype)     # C++ integer division


@kernel("avg_pool2d_backward")
def avg_pool2d_backward(grad_output, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """Each output's gradient over its divisor, added to every input cell of its window."""
    x, kernel, steps, pad = _avg_pool_arguments(x, kernel_size, stride, padding, divisor_override)
    grad_output = _array(grad_output)
    out_h, out_w = _pool_geometry(x, kernel, steps, pad, (1, 1), ceil_mode)
    _check_pooled_size(grad_output, x, out_h, out_w)
    height, width = x.shape[-2:]
    divisor = _avg_pool_divisor(x, out_h, out_w, kernel, steps, pad, count_include_pad, divisor_override)
    share = np.where(divisor == 0, 0, grad_output / np.where(divisor == 0, 1, divisor)).astype(grad_output.dtype)
    out = np.zeros(x.shape, grad_output.dtype)
    for i in range(kernel[0]):
        rows, rows_inside = _window_cells(height, out_h, steps[0], pad[0], i)
        for j in range(kernel[1]):
            cols, cols_inside = _window_cells(width, out_w, steps[1], pad[1], j)
            # within one kernel offset distinct outputs read distinct cells, so += adds each once
            kept_rows, kept_cols = np.flatnonzero(rows_inside), np.flatnonzero(cols_inside)
            out[..., rows[kept_rows][:, None], cols[kept_cols][None, :]] += \
                share[..., kept_rows[:, None], kept_cols[None, :]]
    return out
