"""A formula's Python run on torch tensors: ``at.<op>(...)`` is ``torch.ops.aten.<op>``.

:class:`AtenBackend` is the operator backend (``formulas.use_backend``); formulas see the torch
back end's :class:`~formulas.torch.backend.OracleTensor` (``wrap``/``unwrap``), a torch tensor with
the metadata methods of the authoring conventions and the Python operators routed to ``at``.
Autograd is torch's own, so a backward run on tensors that require grad can be
differentiated again.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from formulas import use_backend
from formulas.torch.backend import unwrap, wrap

#: schema defaults a formula spells as the schema does, as torch values
_SYMBOLIC_DEFAULTS: dict[str, Any] = {"contiguous_format": torch.contiguous_format}


class AtenBackend:
    """``at.<name>(...)`` runs ``torch.ops.aten.<name>``, whose overload torch picks."""

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        packet = getattr(torch.ops.aten, name, None)
        if packet is None:
            raise LookupError(f"at.{name}: torch has no aten operator `{name}`")
        kwargs = {key: _SYMBOLIC_DEFAULTS.get(value, value) if isinstance(value, str) else value
                  for key, value in kwargs.items()}
        return wrap(packet(*unwrap(args), **unwrap(kwargs)))


def run_formula(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], needs_input_grad: tuple[bool, ...],
                backward_source: str | None = None) -> tuple[Any, Callable[..., Any]]:
    """``fn``'s outputs (torch tensors) and its backward, which takes and returns torch
    tensors (``None`` kept), both run with ``at`` on torch; a backward with a
    ``needs_input_grad`` parameter gets the mask given. With ``backward_source`` (a
    module holding one ``def``), that function replaces the backward, closing over the same
    forward values."""
    backend = AtenBackend()
    with use_backend(backend):
        outputs, backward = fn(*wrap(args), **wrap(kwargs))
    if backward_source is not None:
        backward = recompiled(backward, backward_source)
    code = backward.__code__
    keywords = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    mask = {"needs_input_grad": needs_input_grad} if "needs_input_grad" in keywords else {}

    def torch_backward(*grads: Any) -> Any:
        with use_backend(backend):
            return unwrap(backward(*wrap(list(grads)), **mask))

    return unwrap(outputs), torch_backward


def recompiled(closure: Callable[..., Any], source: str) -> Callable[..., Any]:
    """The function ``source`` defines, run where ``closure`` runs: its module's globals and
    the values of its free names."""
    environment = dict(closure.__globals__)
    cells = closure.__closure__ or ()
    environment.update((name, cell.cell_contents) for name, cell in zip(closure.__code__.co_freevars, cells))
    before = set(environment)
    exec(compile(source, closure.__code__.co_filename, "exec"), environment)
    (defined,) = [environment[name] for name in set(environment) - before if callable(environment[name])]
    return defined


def builtin_overload(schema_name: str) -> Any | None:
    """``torch.ops.aten.<name>.<overload>`` for ``name.overload``, or None when torch has none."""
    base, _, overload = schema_name.partition(".")
    packet = getattr(torch.ops.aten, base, None)
    if packet is None:
        return None
    return getattr(packet, overload or "default", None)
