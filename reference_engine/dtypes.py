"""The engine's dtypes: ``float64``, ``float32``, ``int64`` and ``bool`` over NumPy."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class DType:
    """A tensor element type; compares by identity like ``torch.dtype``."""

    name: str
    numpy: np.dtype
    is_floating_point: bool

    def __repr__(self) -> str:
        return f"reference_engine.{self.name}"


float64 = DType("float64", np.dtype(np.float64), True)
float32 = DType("float32", np.dtype(np.float32), True)
int64 = DType("int64", np.dtype(np.int64), False)
bool_ = DType("bool", np.dtype(np.bool_), False)

DTYPES = (float64, float32, int64, bool_)
_BY_NUMPY = {d.numpy: d for d in DTYPES}


def from_numpy(dtype: np.dtype) -> DType:
    """The engine dtype of a NumPy dtype; a clear error for unsupported ones."""
    found = _BY_NUMPY.get(dtype)
    if found is None:
        raise TypeError(f"unsupported dtype {dtype}: the reference engine supports "
                        f"{', '.join(d.name for d in DTYPES)}")
    return found


def to_numpy(dtype: DType | np.dtype | type | None) -> np.dtype | None:
    """A NumPy dtype from an engine dtype (or anything NumPy understands)."""
    if dtype is None:
        return None
    if isinstance(dtype, DType):
        return dtype.numpy
    return from_numpy(np.dtype(dtype)).numpy


@dataclass(frozen=True)
class Device:
    """``x.device``: the engine computes on the CPU only (``torch.device('cpu')``)."""

    type: str = "cpu"

    @staticmethod
    def of(device: Device | str) -> Device:
        """The device a ``device=`` argument names; a clear error for any but the CPU."""
        name = device.type if isinstance(device, Device) else str(device)
        if name != "cpu":
            raise RuntimeError(f"the reference engine computes on the CPU only, not on '{name}'")
        return CPU

    def __repr__(self) -> str:
        return f"device(type='{self.type}')"

    def __str__(self) -> str:
        return self.type


CPU = Device()


@dataclass(frozen=True)
class TensorOptions:
    """What ``x.options()`` returns: the dtype (the engine has one device, the CPU)."""

    dtype: DType
    device: str = "cpu"
