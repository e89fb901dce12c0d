"""Result dtypes of binary operators follow torch's promotion (0-d tensors, Python numbers)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import reference_engine as engine

# (values, dtype): dimensioned and 0-d tensors of every engine dtype.
OPERANDS = [([1.5, -2.5], "float32"), ([1.0, 2.0], "float64"), ([1, 2], "int64"), ([True, False], "bool"),
            (2.5, "float32"), (0.5, "float64"), (3, "int64"), (True, "bool")]
NUMBERS = [2.5, 3, True]
OPERATORS = ["__add__", "__sub__", "__mul__", "__truediv__", "__radd__", "__rmul__"]


def _tensor(lib, values, dtype):
    if lib is engine:
        return engine.tensor(np.asarray(values, dtype=dtype))
    return torch.tensor(values, dtype=getattr(torch, dtype))


def _dtype_name(t):
    return t.dtype.name if isinstance(t, engine.Tensor) else str(t.dtype).removeprefix("torch.")


def _outcome(lib, left, operator, right):
    try:
        result = getattr(_tensor(lib, *left), operator)(right if not isinstance(right, tuple) else _tensor(lib, *right))
    except (RuntimeError, TypeError) as error:
        return type(error).__name__
    return _dtype_name(result), np.asarray(result.tolist(), dtype=np.float64)


@pytest.mark.parametrize("left, right", list(itertools.product(OPERANDS, OPERANDS + NUMBERS)))
def test_result_dtype_and_values_equal_torch(left, right):
    for operator in OPERATORS:
        got, expected = _outcome(engine, left, operator, right), _outcome(torch, left, operator, right)
        if isinstance(expected, str):       # torch refuses (bool - bool): the engine need not agree
            continue
        assert got[0] == expected[0], (left, operator, right)
        np.testing.assert_allclose(got[1], expected[1], rtol=1e-6)


def test_float32_tensor_with_float64_zero_dim_tensor_stays_float32_with_gradients():
    x = engine.tensor(np.array([1.5, -2.0], dtype=np.float32), requires_grad=True)
    s = engine.tensor(np.float64(3.0), requires_grad=True)
    y = x * s + s
    xt = torch.tensor([1.5, -2.0], dtype=torch.float32, requires_grad=True)
    st = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    yt = xt * st + st
    assert _dtype_name(y) == _dtype_name(yt) == "float32"
    gx, gs = engine.grad(y.sum(), [x, s])
    gxt, gst = torch.autograd.grad(yt.sum(), [xt, st])
    assert (_dtype_name(gx), _dtype_name(gs)) == (_dtype_name(gxt), _dtype_name(gst)) == ("float32", "float64")
    np.testing.assert_allclose(gx.numpy(), gxt.numpy())
    np.testing.assert_allclose(gs.numpy(), gst.numpy())
