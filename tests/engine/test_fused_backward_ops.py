"""Arguments the fused backward ops refuse (formulas/backward_ops.py): the engine raises what torch raises."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import reference_engine as engine

VALUES = np.array([-1.5, 0.5, 2.0])


@pytest.mark.parametrize("call, error, message", [
    (lambda lib, g, x: lib.leaky_relu_backward(g, x, -0.1, True), RuntimeError, "negative slope which is not supported"),
    (lambda lib, g, x: lib.gelu_backward(g, x, approximate="erf"), RuntimeError, "approximate argument must be"),
])
def test_refused_as_torch(call, error, message):
    with pytest.raises(error, match=message):
        call(torch.ops.aten, torch.tensor(VALUES), torch.tensor(VALUES))
    with pytest.raises(error, match=message):
        call(_Ops(), engine.tensor(VALUES), engine.tensor(VALUES))


class _Ops:
    """``engine.op(name)`` as attributes, the way ``torch.ops.aten`` is called above."""

    def __getattr__(self, name: str):
        return engine.op(name)
