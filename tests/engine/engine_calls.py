"""Calling a library operator on the reference engine with an ``OpCase``'s arguments (shared by the
engine's tier tests)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import reference_engine as engine
from op_cases import OpCase


def _engine_value(value: Any, requires_grad: bool) -> Any:
    if isinstance(value, np.ndarray):
        return engine.Tensor(value.copy(), requires_grad=requires_grad and value.dtype == np.float64)
    if isinstance(value, list) and value and all(isinstance(v, np.ndarray) or v is None for v in value):
        return [_engine_value(v, requires_grad) for v in value]      # Tensor[], Tensor?[] (None kept)
    return value


def engine_call(case: OpCase, overload: Callable[..., Any] | None = None
                ) -> tuple[Callable[..., Any], list[engine.Tensor]]:
    """``fn(*tensors)`` running the case's overload (the library's unless ``overload`` is
    given) with ``tensors`` at the differentiated positions (lists flattened), and those
    tensors (float64, requiring grad)."""
    args = [_engine_value(a, i in case.differentiable) for i, a in enumerate(case.args)]
    kwargs = dict(case.kwargs)
    layout = []        # (position, list length or None)
    inputs: list[engine.Tensor] = []
    for i in case.differentiable:
        if isinstance(args[i], list):
            layout.append((i, len(args[i])))
            inputs.extend(args[i])
        else:
            layout.append((i, None))
            inputs.append(args[i])
    overload = overload or engine.op(case.op)

    def fn(*tensors: engine.Tensor) -> Any:
        call_args = list(args)
        k = 0
        for position, length in layout:
            if length is None:
                call_args[position] = tensors[k]
                k += 1
            else:
                call_args[position] = list(tensors[k:k + length])
                k += length
        return overload(*call_args, **kwargs)

    return fn, inputs
