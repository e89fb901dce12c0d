"""``engine.autograd``: the names of ``torch.autograd`` the engine has (``grad``, ``backward``,
``Function``, ``gradcheck``, ``gradgradcheck``, the grad-mode switches), the same objects as
``engine.grad`` and friends."""
from __future__ import annotations

from reference_engine.engine import backward, grad
from reference_engine.function import Function, FunctionCtx, once_differentiable
from reference_engine.grad_mode import (
    enable_grad,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from reference_engine.gradcheck import GradcheckError, gradcheck, gradgradcheck
from reference_engine.missing import missing_attribute

__all__ = ["Function", "FunctionCtx", "GradcheckError", "backward", "enable_grad", "grad", "gradcheck",
           "gradgradcheck", "is_grad_enabled", "no_grad", "once_differentiable", "set_grad_enabled"]


def __getattr__(name: str) -> object:
    raise missing_attribute(__name__, "torch.autograd", name)
