"""``repr(tensor)`` as torch prints it: ``tensor([1.5000, 2.2500], requires_grad=True)``.

torch's print options at their defaults: 4 digits after the point, scientific notation when
the nonzero finite magnitudes span more than 1000x or leave [1e-4, 1e8], integral floats as
``1.``, every element right-aligned to the widest, rows wrapped at 80 columns, more than
1000 elements summarised to the first and last 3 along each dimension with ``...``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

PRECISION = 4
THRESHOLD = 1000
EDGE_ITEMS = 3
LINE_WIDTH = 80


class _Formatter:
    """One number format and width for every element shown (torch picks it from all of them)."""

    def __init__(self, shown: np.ndarray) -> None:
        self.floating = shown.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        flat = shown.reshape(-1)
        if not self.floating:
            self.width = max([self.width] + [len(str(v)) for v in flat.tolist()])
            return
        values = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
        if not values.size:
            return
        magnitudes = np.abs(values)
        smallest, largest = float(magnitudes.min()), float(magnitudes.max())
        self.int_mode = bool(np.all(values == np.ceil(values)))
        wide_range = largest / smallest > 1000.0 or largest > 1.0e8
        self.sci_mode = wide_range if self.int_mode else wide_range or smallest < 1.0e-4
        if self.sci_mode:
            texts = [f"{v:.{PRECISION}e}" for v in values.tolist()]
        elif self.int_mode:
            texts = [f"{v:.0f}." for v in values.tolist()]
        else:
            texts = [f"{v:.{PRECISION}f}" for v in values.tolist()]
        self.width = max(len(t) for t in texts)

    def format(self, value: Any) -> str:
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = f"{value:{self.width}.{PRECISION}e}"
        elif self.int_mode:
            text = f"{value:.0f}" + ("" if math.isinf(value) or math.isnan(value) else ".")
        else:
            text = f"{value:.{PRECISION}f}"
        return text.rjust(self.width)


def _summarised(array: np.ndarray) -> np.ndarray:
    """The elements a summarised print shows (the first and last EDGE_ITEMS along each dim)."""
    if array.ndim == 0:
        return array
    if array.ndim == 1:
        return np.concatenate([array[:EDGE_ITEMS], array[-EDGE_ITEMS:]]) if len(array) > 2 * EDGE_ITEMS else array
    rows = list(range(EDGE_ITEMS)) + list(range(len(array) - EDGE_ITEMS, len(array))) \
        if len(array) > 2 * EDGE_ITEMS else range(len(array))
    return np.stack([_summarised(array[i]) for i in rows])


def _vector(array: np.ndarray, indent: int, summarise: bool, formatter: _Formatter) -> str:
    per_line = max(1, (LINE_WIDTH - indent) // (formatter.width + 2))
    if summarise and len(array) > 2 * EDGE_ITEMS:
        items = ([formatter.format(v) for v in array[:EDGE_ITEMS].tolist()] + [" ..."]
                 + [formatter.format(v) for v in array[-EDGE_ITEMS:].tolist()])
    else:
        items = [formatter.format(v) for v in array.tolist()]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(array: np.ndarray, indent: int, summarise: bool, formatter: _Formatter) -> str:
    if array.ndim == 0:
        return formatter.format(array.item())
    if array.ndim == 1:
        return _vector(array, indent, summarise, formatter)
    if summarise and len(array) > 2 * EDGE_ITEMS:
        parts = ([_nested(array[i], indent + 1, summarise, formatter) for i in range(EDGE_ITEMS)] + ["..."]
                 + [_nested(array[i], indent + 1, summarise, formatter)
                    for i in range(len(array) - EDGE_ITEMS, len(array))])
    else:
        parts = [_nested(row, indent + 1, summarise, formatter) for row in array]
    return "[" + ("," + "\n" * (array.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def tensor_repr(array: np.ndarray, suffixes: list[str], default_dtype: bool) -> str:
    """``tensor(<values>, <suffixes>)`` for ``array``; ``default_dtype``: the dtype goes
    unsaid (float32, int64, bool), else ``suffixes`` should hold it (torch's order:
    size for an empty tensor, dtype, then grad_fn or requires_grad)."""
    prefix = "tensor("
    indent = len(prefix)
    if array.size == 0:
        body = "[]"
        if array.ndim != 1:
            suffixes = [f"size={tuple(array.shape)}"] + suffixes
    else:
        summarise = array.size > THRESHOLD
        formatter = _Formatter(_summarised(array) if summarise else array)
        body = _nested(array, indent, summarise, formatter)
    text = [prefix + body]
    line_length = len(text[0]) - text[0].rfind("\n") + 1
    for suffix in suffixes:
        if line_length + len(suffix) + 2 > LINE_WIDTH:
            text.append(",\n" + " " * indent + suffix)
            line_length = indent + len(suffix)
        else:
            text.append(", " + suffix)
            line_length += len(suffix) + 2
    return "".join(text) + ")"
