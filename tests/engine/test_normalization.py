"""The engine's layer normalization (formulas/normalization.py) beyond the tier tests: torch's errors
on bad arguments."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import reference_engine as engine
from reference_engine.dispatch import dispatcher


def f64(values, requires_grad=False):
    return engine.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


@pytest.mark.parametrize("op", ["native_layer_norm", "layer_norm"])
@pytest.mark.parametrize("normalized_shape, weight_shape, bias_shape, message", [
    ([], None, None, r"Expected normalized_shape to be at least 1-dimensional, i\.e\., containing at least one "
                     r"element, but got normalized_shape = \[\]"),
    ([3], None, None, r"Given normalized_shape=\[3\], expected input with shape \[\*, 3\], but got input of "
                      r"size\[2, 3, 4\]"),
    ([2, 4], None, None, r"expected input with shape \[\*, 2, 4\]"),
    ([4], (3,), None, r"Expected weight to be of same shape as normalized_shape, but got weight of shape \[3\] "
                      r"and normalized_shape = \[4\]"),
    ([3, 4], (1, 4), None, r"got weight of shape \[1, 4\] and normalized_shape = \[3, 4\]"),
    ([4], None, (2, 2), r"Expected bias to be of same shape as normalized_shape, but got bias of shape \[2, 2\]"),
])
def test_layer_norm_errors_say_what_torch_says(op, normalized_shape, weight_shape, bias_shape, message):
    x = np.zeros((2, 3, 4))
    weight = None if weight_shape is None else np.ones(weight_shape)
    bias = None if bias_shape is None else np.zeros(bias_shape)
    to_engine = lambda a: None if a is None else f64(a)
    to_torch = lambda a: None if a is None else torch.from_numpy(a)
    with pytest.raises(RuntimeError, match=message):
        dispatcher.call(op, (f64(x), normalized_shape, to_engine(weight), to_engine(bias), 1e-5), {})
    with pytest.raises(RuntimeError, match=message):
        getattr(torch.ops.aten, op)(torch.from_numpy(x), normalized_shape, to_torch(weight), to_torch(bias), 1e-5)
