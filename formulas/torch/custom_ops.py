"""Every formula of a package as a ``torch.library`` custom operator, with no build.

``custom_ops("myops")`` defines, per formula, ``torch.ops.<namespace>.<name>.<overload>``
with ``torch.library.custom_op`` (the formula's schema, verbatim):

* the kernel runs the formula's forward with ``at`` on torch;
* ``register_fake`` runs the same forward on fake tensors: the forward is the
  shape rule. An output whose shape depends on tensor values has none, and the
  fake kernel refuses with :class:`NoShapeRule`;
* ``register_autograd``: ``setup_context`` runs the forward again (on the
  inputs, with no grad) to rebuild the backward closure, saves exactly the
  inputs and outputs it captures (``ctx.save_for_backward``) and keeps its
  metadata as plain values; the backward rebuilds the closure on the saved
  tensors, so double backward differentiates the formula again.

Views and in-place operators (a schema that aliases an input) are refused: a
custom op's outputs may not alias its inputs. ``torch.library`` has no
forward-mode registration for custom ops, so a tangent reaching one raises
torch's own error.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from formulas.torch.backend import TorchBackend, load_package
from formulas.torch.function import TorchFormula, below_autograd, by_id, plan_closure


class NoShapeRule(RuntimeError):
    """A custom op's output shape depends on tensor values, so its forward is no shape rule."""


@dataclass
class CustomOps:
    """What :func:`custom_ops` registered: ``ops`` maps ``name.overload`` to the ``OpOverload``,
    ``refused`` maps the others to the reason."""

    namespace: str
    ops: dict[str, torch._ops.OpOverload] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)


_REGISTERED: dict[str, CustomOps] = {}


def custom_ops(package: str, namespace: str | None = None) -> CustomOps:
    """Register every formula of ``package`` as ``torch.ops.<namespace>.<op>`` (``namespace``:
    the package's top-level name). Registering a namespace again returns what is there."""
    namespace = namespace or package.split(".", 1)[0]
    if namespace in _REGISTERED:
        return _REGISTERED[namespace]
    backend = TorchBackend.for_package(package)
    registered = CustomOps(namespace)
    for name, declared in load_package(package).formulas.items():
        formula = TorchFormula(declared, backend)
        if any(arg.annotation is not None for arg in (*formula.schema.arguments, *formula.schema.returns)):
            registered.refused[name] = (f"{name}: a view or in-place operator (its schema aliases an input); "
                                        "a custom op's outputs may not alias its inputs")
            continue
        if any(slot >= len(formula.names) - formula.keyword_only for slot in formula.gradient_slots):
            registered.refused[name] = (f"{name}: a keyword-only tensor argument; torch.library's autograd "
                                        "takes gradients for positional arguments only")
            continue
        registered.ops[name] = _define(namespace, formula)
    _REGISTERED[namespace] = registered
    return registered


def _define(namespace: str, formula: TorchFormula) -> torch._ops.OpOverload:
    schema = formula.declared.schema
    arguments = schema[schema.index("("):]
    definition = torch.library.custom_op(f"{namespace}::{formula.op_name}", _kernel(formula),
                                         mutates_args=(), schema=arguments)
    definition.register_fake(_fake(formula))
    definition.register_autograd(_backward(formula), setup_context=_setup_context(formula))
    name, _, overload = formula.op_name.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), name), overload or "default")


def _outputs(formula: TorchFormula, values: list[Any]) -> Any:
    """The formula's forward on ``values``; an output that is one of the inputs is copied (a
    custom op's output never aliases an input)."""
    outputs, _, _ = formula.forward(values)
    inputs = {id(v) for v in values if isinstance(v, torch.Tensor)}
    def fresh(output: Any) -> Any:
        return output.clone() if id(output) in inputs else output
    if isinstance(outputs, (tuple, list)):
        return type(outputs)(fresh(o) for o in outputs)
    return fresh(outputs)


def _kernel(formula: TorchFormula) -> Any:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        return _outputs(formula, formula.bind(args, kwargs))
    return kernel


def _fake(formula: TorchFormula) -> Any:
    def fake(*args: Any, **kwargs: Any) -> Any:
        try:
            return _outputs(formula, formula.bind(args, kwargs))
        except (torch._subclasses.fake_tensor.DynamicOutputShapeException,
                torch._subclasses.fake_tensor.DataDependentOutputException) as error:
            raise NoShapeRule(f"{formula.op_name}: its output shape depends on tensor values, so its "
                              f"forward is no shape rule for fake tensors ({error})") from None
    return fake


def _setup_context(formula: TorchFormula) -> Any:
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any,
                      keyword_only_inputs: dict[str, Any] | None = None) -> None:
        keyword_only = keyword_only_inputs or {}
        values = [*inputs, *(keyword_only[name] for name in formula.names[len(inputs):])]
        with torch.no_grad(), below_autograd():
            rerun, backward, _ = formula.forward(values)
        saveable = by_id([t for v in values for t in (v if isinstance(v, (list, tuple)) else [v])
                          if isinstance(t, torch.Tensor)])
        saveable.update(zip(map(id, formula.flat_outputs(rerun)), formula.flat_outputs(output)))
        plan, to_save = plan_closure(backward, saveable, formula.op_name)
        ctx.save_for_backward(*to_save)
        outputs = formula.flat_outputs(output)
        kept = {id(o) for o in formula.differentiable(outputs)}
        ctx.mark_non_differentiable(*(o for o in outputs if id(o) not in kept))
        ctx.plan = plan
        ctx.positional = list(inputs)     # what backward needs of them: their count, list lengths
    return setup_context


def _backward(formula: TorchFormula) -> Any:
    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        if formula.list_output:
            (grads,) = grads
        output_grads = formula.differentiable(grads)
        # one gradient per argument the dispatcher passed: it drops trailing ones equal to their
        # defaults (setup_context saw them filled in), needs_input_grad has the count it passed
        nothing = tuple(None for _ in ctx.needs_input_grad)
        if all(g is None for g in output_grads):
            return nothing
        asked = list(ctx.needs_input_grad)
        needs = [i < len(asked) and (any(asked[i]) if isinstance(asked[i], (list, tuple)) else bool(asked[i]))
                 for i in formula.gradient_slots]
        per_slot = formula.run_backward(ctx.plan.rebuild(ctx.saved_tensors), output_grads, needs)
        per_argument = list(nothing)
        for slot, grad in zip(formula.gradient_slots, per_slot):
            if slot < len(per_argument):    # else a trailing default argument: no tensor to differentiate
                per_argument[slot] = grad
        for position, grad in enumerate(per_argument):     # a tensor list's gradient is a list
            given = ctx.positional[position]
            if grad is None and isinstance(given, list) and any(isinstance(t, torch.Tensor) for t in given):
                per_argument[position] = [None] * len(given)
        return tuple(per_argument)
    return backward
