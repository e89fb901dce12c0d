"""A formula's Python run on torch tensors: ``at.<op>(...)`` runs the declared operator's
``torch.ops.aten`` overload.

The operator backend is the torch back end's own :class:`~formulas.torch.backend.TorchBackend`
for the formula's package (the shipped library's operators and the package's), so a formula
proven here resolves its calls exactly as ``formulas.torch`` runs it; formulas see its
:class:`~formulas.torch.backend.OracleTensor`. Autograd is torch's own, so a backward run on
tensors that require grad can be differentiated again.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import libcst as cst
import torch

from formulas import use_backend
from formulas.torch.backend import TorchBackend, unwrap, wrap


@functools.cache
def backend_for(package: str) -> TorchBackend:
    """The torch back end for ``package``'s formulas (built once per package)."""
    return TorchBackend.for_package(package)


def run_formula(fn: Callable[..., Any], package: str, args: list[Any], kwargs: dict[str, Any],
                needs_input_grad: tuple[bool, ...], backward_source: str | None = None
                ) -> tuple[Any, Callable[..., Any]]:
    """``fn``'s outputs (torch tensors) and its backward, which takes and returns torch
    tensors (``None`` kept), both run with ``package``'s torch back end; a backward with a
    ``needs_input_grad`` parameter gets the mask given. With ``backward_source`` (a
    module holding one ``def``), that function replaces the backward, closing over the same
    forward values."""
    backend = backend_for(package)
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


def run_jvp(fn: Callable[..., Any], package: str, named: dict[str, Any], tangents: dict[str, Any],
            jvp_source: str | None = None) -> Any:
    """The tangents of ``fn``'s outputs that its written ``def jvp`` (or the one ``jvp_source``
    defines, in its place) gives for the inputs' ``tangents`` (by argument name; an input
    without one gets zeros, as torch passes an undefined tangent): ``fn`` compiled from the
    front-end's model to return its jvp too, run on torch tensors with ``named`` (the call's
    arguments by name)."""
    from transpiler.prove.terms import model_of

    found = model_of(fn)
    if found is None or found[1].jvp is None or found[1].jvp.index is None:
        raise LookupError("the formula has no written jvp to run on torch")
    formula = found[1]
    body = list(formula.node.body.body)
    if jvp_source is not None:
        replacement = cst.parse_module(jvp_source).body[0]
        body = [replacement if isinstance(s, cst.FunctionDef) and s.name.value == "jvp" else s for s in body]
    outputs = cst.Module([]).code_for_node(formula.returned_display)
    body[-1] = cst.parse_statement(f"return {outputs}, backward, jvp")
    source = cst.Module([]).code_for_node(formula.node.with_changes(
        decorators=(), body=formula.node.body.with_changes(body=body)))
    local: dict[str, Any] = {}
    exec(compile(source, fn.__code__.co_filename, "exec"), fn.__globals__, local)
    returning_jvp = local[fn.__name__]
    backend = backend_for(package)
    arguments = [a for a in formula.schema.arguments if not a.is_out]
    with use_backend(backend):
        given = [a for a in arguments if a.name in named]
        _, _, jvp = returning_jvp(*wrap([named[a.name] for a in given if not a.kwarg_only]),
                                  **{a.name: wrap(named[a.name]) for a in given if a.kwarg_only})
        code = jvp.__code__
        values = {}
        for param in code.co_varnames[:code.co_argcount]:
            name = param[:-2]
            if param.endswith("_t"):
                tangent = tangents.get(name)
                values[param] = tangent if tangent is not None else _zeros_like(named[name])
            elif param.endswith("_p"):
                values[param] = named[name]
            else:
                raise LookupError(f"the jvp's parameter `{param}` is not run on torch here")
        return unwrap(jvp(**{param: wrap(value) for param, value in values.items()}))


def _zeros_like(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_zeros_like(v) for v in value]
    return torch.zeros_like(value)


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
