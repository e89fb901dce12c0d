"""A reference autograd engine on NumPy that runs the formula library directly.

Importing this package loads the formulas of ``formulas/`` and installs the
engine as the ``at`` backend, so ``at.sin(x)`` inside a formula reaches the
NumPy kernel and ``x.sin()`` on an engine tensor records a node whose
backward is the formula's closure.

Layout: :mod:`~reference_engine.tensor` (data and metadata),
:mod:`~reference_engine.binding` and :mod:`~reference_engine.dispatch`
(schemas, overload resolution, the autograd layer),
:mod:`~reference_engine.kernels` (NumPy), :mod:`~reference_engine.formula_node`
and :mod:`~reference_engine.graph` (nodes, saved tensors, the double-backward
guard), :mod:`~reference_engine.engine` (``backward``/``grad``),
:mod:`~reference_engine.methods` (Tensor operators, composites, in-place),
:mod:`~reference_engine.function` (custom ``Function``),
:mod:`~reference_engine.gradcheck`, :mod:`~reference_engine.dot`,
:mod:`~reference_engine.forward_ad` (``jvp``: forward mode through the formulas' jvps).
"""
from __future__ import annotations

from typing import Any, Callable

import formulas
from reference_engine import methods  # noqa: F401 - installs the Tensor operators and registers their refresh hook
from reference_engine.dispatch import Dispatcher, dispatcher
from reference_engine import autograd, nn
from reference_engine.dtypes import CPU, Device, DType, bool_, float32, float64, int64
from reference_engine.dot import render, to_dot
from reference_engine.engine import backward, grad
from reference_engine.forward_ad import jvp
from reference_engine.factories import (
    Generator, arange, as_tensor, eye, from_numpy, full, linspace, manual_seed, ones, ones_like, rand,
    randn, tensor, zeros, zeros_like,
)
from reference_engine.function import Function, FunctionCtx, once_differentiable
from reference_engine.functions import module_function, names as _function_names
from reference_engine.overload import Overload
from reference_engine.gradcheck import GradcheckError, gradcheck, gradgradcheck
from reference_engine.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from reference_engine.tensor import Tensor, is_tensor

# the submodule attribute ``dot`` (Graphviz export) would shadow the operator ``engine.dot(a, b)``:
# the module stays importable (``importlib.import_module("reference_engine.dot")``)
del dot  # noqa: F821

bool = bool_  # noqa: A001 - the dtype, as torch.bool
# torch's other names of the dtypes (torch.float is torch.float32...)
float = float32
double = float64
long = int64


class EngineBackend:
    """The ``formulas.Backend`` that runs ``at.<op>`` on this engine."""

    def __init__(self, table: Dispatcher) -> None:
        self.call = table.call


backend = EngineBackend(dispatcher)


def refresh() -> None:
    """Rebuild the operator table after formulas were declared or replaced, and the methods."""
    dispatcher.refresh()        # its refresh hooks rebind the Tensor methods


def op(name: str) -> Overload:
    """The declared operator ``name.overload`` as a callable, bypassing overload resolution."""
    return dispatcher.overload(name)


def define(schema: str, kernel: Callable[..., Any], formula: Callable[..., Any] | None = None,
           output_differentiability: tuple[bool, ...] | None = None) -> Overload:
    """Declare an engine-only operator (schema, NumPy kernel, optional formula); see
    :meth:`Dispatcher.define`. The ``Tensor`` methods are refreshed."""
    return dispatcher.define(schema, kernel, formula, output_differentiability)


def __getattr__(name: str) -> Any:
    """``engine.sin``, ``engine.mm``, ``engine.where``...: the declared operators and composites
    as module functions (:mod:`reference_engine.functions`)."""
    return module_function(name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_function_names()))


def device(type: str | Device = "cpu") -> Device:
    """``torch.device``: the engine's one device, the CPU (any other is an error)."""
    return Device.of(type)


def install() -> None:
    """Make this engine the default ``at`` backend (done on import)."""
    formulas.set_default_backend(backend)


formulas.load_library()
refresh()
install()

__all__ = [
    "CPU", "DType", "Device", "Function", "FunctionCtx", "Generator", "GradcheckError", "Tensor", "arange",
    "as_tensor", "autograd", "backend", "backward", "bool", "bool_", "define", "device", "double", "enable_grad",
    "eye", "float", "float32", "float64", "from_numpy", "full", "grad", "gradcheck", "gradgradcheck", "install",
    "int64", "is_grad_enabled", "is_tensor", "jvp", "linspace", "long", "manual_seed", "nn", "no_grad",
    "once_differentiable", "ones", "ones_like", "op", "rand", "randn", "refresh", "render", "set_grad_enabled",
    "tensor", "to_dot", "zeros", "zeros_like",
]
