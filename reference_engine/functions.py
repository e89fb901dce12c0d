"""Module functions, as torch's: ``engine.sin(x)``, ``engine.mm(a, b)``, ``engine.cat([a, b], 0)``.

Generated from the declared schemas: every declared operator is a module
function (its dispatcher entry point, looked up when the attribute is read, so
an operator declared later, by a user's formula file or ``define``, is one
too), and the composite methods of :mod:`reference_engine.methods`
(``matmul``, ``softmax``, ``max()``...) are the same methods called as
functions. ``reference_engine.__getattr__`` serves them.
"""
from __future__ import annotations

from typing import Any, Callable

from reference_engine.dispatch import dispatcher
from reference_engine.dtypes import bool_
from reference_engine.missing import missing_attribute
from reference_engine.tensor import Tensor

#: Tensor methods built from declared operators that torch also offers as ``torch.<name>``.
COMPOSITES = ("argmax", "argmin", "clone", "flatten", "floor_divide", "log_softmax", "matmul", "max", "mean",
              "min", "permute", "reshape", "softmax", "transpose")


def stack(tensors: list[Tensor] | tuple[Tensor, ...], dim: int = 0) -> Tensor:
    """``torch.stack``: the tensors joined along a new dimension ``dim`` (``cat`` of them
    unsqueezed there)."""
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) > 1:
        raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                           f"{' and '.join(str(list(s)) for s in sorted(shapes))}")
    return dispatcher.call("cat", ([t.unsqueeze(dim) for t in tensors], dim), {})


# ----------------------------------------------------------------------------- losses
_REDUCTION_ENUM = {"none": 0, "mean": 1, "sum": 2}


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, ignore_index: int = -100,
             reduction: str = "mean") -> Tensor:
    """``torch.nn.functional.nll_loss`` for class-index targets: the declared ``nll_loss_forward``
    on a (N, C) or (C,) input; other ranks (torch's ``nll_loss2d``) are refused."""
    if reduction not in _REDUCTION_ENUM:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if input.dim() not in (1, 2):
        raise NotImplementedError(f"nll_loss of a {input.dim()}-D input (torch's nll_loss2d / nll_loss_nd) is not "
                                  f"declared in the library: reshape to (N, C) and targets to (N,)")
    return dispatcher.call("nll_loss_forward", (input, target, weight, _REDUCTION_ENUM[reduction], ignore_index),
                           {})[0]


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """``torch.nn.functional.cross_entropy`` for class-index targets, composed as torch does
    (``cross_entropy_loss`` is CompositeImplicit): ``nll_loss(log_softmax(input, class dim))``.
    Probability targets and label smoothing are refused, not approximated."""
    if target.is_floating_point():
        raise NotImplementedError("cross_entropy with class-probability targets is not supported: pass class "
                                  "indices (an int64 tensor)")
    if label_smoothing != 0.0:
        raise NotImplementedError("cross_entropy with label_smoothing is not supported")
    class_dim = 0 if input.dim() == 1 else 1
    return nll_loss(dispatcher.call("log_softmax", (input, class_dim), {}), target, weight, ignore_index, reduction)


# ----------------------------------------------------------------------------- pooling
def max_pool2d(input: Tensor, kernel_size: int | list[int], stride: int | list[int] | None = None,
               padding: int | list[int] = 0, dilation: int | list[int] = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """``torch.nn.functional.max_pool2d`` (and ``torch.max_pool2d``): the declared
    ``max_pool2d_with_indices``, its values, and its indices too when ``return_indices``."""
    values, indices = dispatcher.call("max_pool2d_with_indices",
                                      (input, kernel_size, [] if stride is None else stride, padding, dilation,
                                       ceil_mode), {})
    return (values, indices) if return_indices else values


# ----------------------------------------------------------------------------- dropout
def dropout(input: Tensor, p: float = 0.5, training: bool = True, *, mask: Tensor | None = None) -> Tensor:
    """``torch.nn.functional.dropout``: in training, each element zeroed with probability ``p`` and
    the others scaled by ``1 / (1 - p)``; the input itself otherwise. The kept elements are drawn
    from the engine's generator (``native_dropout``), or given as ``mask`` (a bool tensor of the
    input's shape, e.g. the mask of a torch run), applied by ``native_dropout_backward``: either way
    the gradient is ``mask / (1 - p)``, and differentiable again."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training:
        return input
    if mask is None:
        return dispatcher.call("native_dropout", (input, p, True), {})[0]
    if mask.dtype != bool_ or tuple(mask.shape) != tuple(input.shape):
        raise ValueError(f"dropout mask must be a bool tensor of the input's shape {list(input.shape)}, "
                         f"got {mask.dtype} of shape {list(mask.shape)}")
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    return dispatcher.call("native_dropout_backward", (input, mask, scale), {})


#: Module functions built from declared operators that are not methods in torch.
FUNCTIONS: dict[str, Callable[..., Any]] = {"stack": stack, "nll_loss": nll_loss, "cross_entropy": cross_entropy,
                                            "max_pool2d": max_pool2d, "dropout": dropout}


def module_function(name: str) -> Callable[..., Any]:
    """``engine.<name>``: a composite, else the declared operator ``name`` (any overload);
    a plain AttributeError when there is neither (saying so when torch has the name). A composite steps aside
    for a declared operator of its name, except the methods of :data:`COMPOSITES`, which
    choose per call (``max()`` and ``max(dim)``)."""
    if name in COMPOSITES:
        return getattr(Tensor, name)
    if name in FUNCTIONS and name not in dispatcher.packets:
        return FUNCTIONS[name]
    if name.startswith("__"):
        raise AttributeError(f"module 'reference_engine' has no attribute '{name}'")
    try:
        return dispatcher.packet(name).op
    except AttributeError:
        raise missing_attribute("reference_engine", "torch", name) from None


def names() -> list[str]:
    """Every module function name (for ``dir(engine)``)."""
    return sorted(set(COMPOSITES) | set(FUNCTIONS) | set(dispatcher.packets))
