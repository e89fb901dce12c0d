"""Every formula of a package as a ``torch.library`` custom operator, with no build.

``custom_ops("myops")`` defines, per formula, ``torch.ops.<namespace>.<name>.<overload>``
with ``torch.library.custom_op`` (the formula's schema, verbatim):

* the kernel runs the formula's forward with ``at`` on torch;
* ``register_fake`` runs the same forward on fake tensors: the forward is the
  shape rule. An output whose shape depends on tensor values has none, and the
  fake kernel refuses with :class:`NoShapeRule`;
* autograd: the formula's ``autograd.Function`` (:mod:`formulas.torch.function`)
  at the ``Autograd`` key, where ``register_autograd`` would put its own (which
  has no forward mode). Its forward redispatches to the op's kernel (or fake
  kernel), which runs the formula's forward once and hands the Function its
  backward closure; ``setup_context`` saves exactly the inputs and outputs the
  closure captures, metadata as plain values; the backward rebuilds the closure
  on the saved tensors, so double backward differentiates the formula again;
  forward mode (``torch.autograd.forward_ad``, ``torch.func.jvp``) runs the
  formula's jvp.

Views and in-place operators (a schema that aliases an input) are refused: a
custom op's outputs may not alias its inputs.
"""
from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from formulas.torch.backend import TorchBackend, load_package
from formulas.torch.function import PlannedForward, TorchFormula, below_autograd, records
from formulas.torch.generate import compile_custom_op


class NoShapeRule(RuntimeError):
    """A custom op's output shape depends on tensor values, so its forward is no shape rule."""


@dataclass
class CustomOps:
    """What :func:`custom_ops` registered: ``ops`` maps ``name.overload`` to the ``OpOverload``,
    ``refused`` maps the others to the reason."""

    namespace: str
    ops: dict[str, torch._ops.OpOverload] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    library: Any = field(default=None, repr=False)     # holds the Autograd registrations


_REGISTERED: dict[str, CustomOps] = {}


def custom_ops(package: str, namespace: str | None = None) -> CustomOps:
    """Register every formula of ``package`` as ``torch.ops.<namespace>.<op>`` (``namespace``:
    the package's top-level name). Registering a namespace again returns what is there."""
    namespace = namespace or package.split(".", 1)[0]
    if namespace in _REGISTERED:
        return _REGISTERED[namespace]
    backend = TorchBackend.for_package(package)
    registered = CustomOps(namespace, library=torch.library.Library(namespace, "IMPL"))
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
        registered.ops[name] = _define(namespace, formula, registered.library)
    _REGISTERED[namespace] = registered
    return registered


def _define(namespace: str, formula: TorchFormula, library: Any) -> torch._ops.OpOverload:
    formula.prepare()
    schema = formula.declared.schema
    arguments = schema[schema.index("("):]
    definition = torch.library.custom_op(f"{namespace}::{formula.op_name}", _kernel(formula),
                                         mutates_args=(), schema=arguments)
    definition.register_fake(_fake(formula))
    if "Tensor[]" in arguments or "Tensor?[]" in arguments:
        definition.register_vmap(_vmap_by_example(definition))
    name, _, overload_name = formula.op_name.partition(".")
    overload = getattr(getattr(getattr(torch.ops, namespace), name), overload_name or "default")
    with warnings.catch_warnings():      # custom_op put its own (backward-less) kernel there
        warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
        library.impl(formula.op_name, _autograd(formula, overload), "Autograd", with_keyset=True)
    return overload


@dataclass(eq=False)
class _Armed:
    """A Function's forward waiting for the op's kernel to run the formula: the kernel leaves its
    planned forward here, so the formula's forward runs once per call."""

    formula: TorchFormula
    want_jvp: bool
    planned: PlannedForward | None = None
    #: for the generated Function (:func:`formulas.torch.generate.compile_custom_op`): the names of
    #: what its backward keeps, which the kernel leaves in ``planned`` instead of a plan
    kept: tuple[str, ...] | None = None


_WAITING = threading.local()     # .armed: the _Armed of the forward redispatching on this thread


def _outputs(formula: TorchFormula, values: list[Any]) -> Any:
    """The formula's forward on ``values``, planned for a Function waiting for it; an output
    that is one of the inputs is copied (a custom op's output never aliases an input)."""
    armed = getattr(_WAITING, "armed", None)
    if armed is not None and armed.formula is formula and armed.planned is None:
        if armed.kept is not None:
            outputs, armed.planned = _kept_by(formula, armed.kept, values)
        else:
            armed.planned = formula.planned_forward(values, formula.tensors_of(values), armed.want_jvp)
            outputs = armed.planned.outputs
    else:
        outputs = formula.forward(values)[0]
    if type(outputs) is torch.Tensor:       # just an optimization of the general case below
        for value in values:
            if value is outputs:
                return outputs.clone()
        return outputs
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


def _vmap_by_example(op: Any) -> Any:
    """``torch.vmap``'s rule for an op with a list of tensors among its arguments (``index.Tensor``'s
    indices, ``cat``'s inputs), for which torch generates no fallback: the op on each example of the
    batch, the results stacked along dim 0 (what the generated fallback does for the other ops)."""
    def rule(info: Any, in_dims: tuple, *args: Any) -> tuple[Any, Any]:
        def example(arg: Any, dim: Any, index: int) -> Any:
            if isinstance(arg, (list, tuple)):
                dims = dim if isinstance(dim, (list, tuple)) else [dim] * len(arg)
                return type(arg)(example(a, d, index) for a, d in zip(arg, dims))
            return arg if dim is None or arg is None else arg.select(dim, index)
        results = [op(*(example(a, d, index) for a, d in zip(args, in_dims))) for index in range(info.batch_size)]
        if isinstance(results[0], (tuple, list)):
            stacked = type(results[0])(torch.stack(parts) for parts in zip(*results))
            return stacked, type(results[0])(0 for _ in stacked)
        return torch.stack(results), 0
    return rule


def _autograd(formula: TorchFormula, overload: torch._ops.OpOverload) -> Any:
    """The op's kernel at the Autograd key: the call through the formula's Function, whose forward
    redispatches below autograd (to the kernel, or the fake kernel) as ``register_autograd``'s does."""
    first_keyword = len(formula.names) - formula.keyword_only

    def autograd_kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        below = keyset & torch._C._after_autograd_keyset
        if not records(args, kwargs):
            with below_autograd():
                return overload.redispatch(below, *args, **kwargs)

        def redispatch(values: Sequence[Any], tensors: Sequence[torch.Tensor], want_jvp: bool) -> PlannedForward:
            armed = _Armed(formula, want_jvp)
            waiting, _WAITING.armed = getattr(_WAITING, "armed", None), armed
            try:
                with torch._C._AutoDispatchBelowAutograd():
                    outputs = overload.redispatch(below, *values[:first_keyword],
                                                  **dict(zip(formula.names[first_keyword:], values[first_keyword:])))
            finally:
                _WAITING.armed = waiting
            # the general path, should the kernel not have run (a dispatch mode answering for it)
            planned = armed.planned or formula.planned_forward(values, tensors, want_jvp)
            flat_outputs = (outputs,) if type(outputs) is torch.Tensor else formula.flat_outputs(outputs)
            return tuple.__new__(PlannedForward, (outputs, flat_outputs, *planned[2:]))    # planned._replace

        return formula.call(formula.bind(args, kwargs), run=redispatch)

    autograd_kernel.__name__ = f"{formula.op_name}_formula_autograd"
    if formula.generated is None:
        return autograd_kernel
    # the formula written out per formula takes the calls it covers, this kernel the others
    return compile_custom_op(formula, formula.generated, autograd_kernel,
                             _generated_redispatch(formula, overload, formula.generated.kept))


def _kept_by(formula: TorchFormula, kept: tuple[str, ...], values: Sequence[Any]) -> tuple[Any, tuple[Any, ...]]:
    """The formula's forward on ``values`` (its outputs, as torch tensors) and the values of its
    backward closure's captures ``kept`` (none a tensor)."""
    outputs, backward, _ = formula.forward(values)
    cells = dict(zip(backward.__code__.co_freevars, backward.__closure__ or ()))
    return outputs, tuple(cells[name].cell_contents for name in kept)


def _generated_redispatch(formula: TorchFormula, overload: torch._ops.OpOverload, kept: tuple[str, ...]) -> Any:
    """What the generated Function's forward calls: the op below autograd, whose kernel runs the
    formula and leaves what the backward keeps (:func:`_kept_by`)."""
    first_keyword = len(formula.names) - formula.keyword_only
    keywords = formula.names[first_keyword:]
    after_autograd = torch._C._after_autograd_keyset

    def redispatch(keyset: Any, *values: Any) -> tuple[Any, tuple[Any, ...]]:
        armed = _Armed(formula, False, kept=kept)
        waiting, _WAITING.armed = getattr(_WAITING, "armed", None), armed
        try:
            with torch._C._AutoDispatchBelowAutograd():
                outputs = overload.redispatch(keyset & after_autograd, *values[:first_keyword],
                                              **dict(zip(keywords, values[first_keyword:])))
        finally:
            _WAITING.armed = waiting
        if armed.planned is None:    # a dispatch mode answered for the kernel: the formula for what is kept
            with torch._C._AutoDispatchBelowAutograd():
                return outputs, _kept_by(formula, kept, values)[1]
        return outputs, armed.planned

    return redispatch
