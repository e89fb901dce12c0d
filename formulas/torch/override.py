"""Formulas swapped in for aten's own autograd, in process, with no build.

:func:`install` registers, for each chosen aten operator, a Python kernel at
the autograd dispatch keys of the devices (:data:`AUTOGRAD_KEYS`, with
``torch.library.Library("aten", "IMPL")``). The
kernel runs the operator through the formula's ``autograd.Function``
(:mod:`formulas.torch.function`): the forward below autograd, the backward the
formula's closure rebuilt from the saved inputs and outputs, so a
``create_graph=True`` backward runs the formulas again; forward mode runs the
formula's jvp. A call that records nothing (grad mode off, no input requiring
grad, no forward-mode level) goes straight to torch's kernel below autograd.
A view's output is torch's own view of its input (:func:`_view_kernel`); an in-place operator's
formula writes its input and marks it dirty, so torch rebases its history (:func:`_written_kernel`).
With ``compiled=True`` no Python kernel is registered: the package's loaded
library registers its generated C++ kernels (the forward wrappers that record
the transpiled nodes, running aten's own kernels below autograd) for the aten
operators at the same keys itself, in a ``torch::Library`` it destroys on
uninstall (``aten_override.h`` of the generated sources).

:func:`uninstall` removes exactly those registrations: torch's own kernels
come back. :func:`override` is the two as a context manager.

Nesting: registrations stack per operator; the most recent installation still
installed wins, and uninstalling it uncovers the one below (or torch's own).
Threads: the dispatcher is process-wide, so an installation changes the
operators for every thread while it lasts (the context manager is not a
thread-local switch); install and uninstall from one thread while no other
thread is running the operators.
"""
from __future__ import annotations

import contextlib
import re
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import torch

from formulas.dsl import DEFAULT_DISPATCH, dispatch_of, inputs_refusing_grad, inputs_without_gradient
from formulas.torch.backend import TorchBackend, load_package
from formulas.torch.function import TorchFormula, below_autograd, records
from formulas.torch.generate import compile_kernel
from transpiler.formula_facts import StaleFormulaError
from transpiler.raises import NOT_IMPLEMENTED


#: The per-device autograd keys the kernels are registered at. A registration at the ``Autograd``
#: alias would not reach an operator torch implements as ``CompositeImplicitAutograd``
#: (``var_mean.dim``, ``gather_backward``...): the dispatcher prefers that over the alias, but
#: not over a kernel registered at the device's own key.
AUTOGRAD_KEYS = ("AutogradCPU", "AutogradCUDA", "AutogradMeta", "AutogradXPU", "AutogradMPS")


class OverrideError(ValueError):
    """An operator cannot be overridden by the package's formula (named in the message)."""


def aten_overload(op_name: str) -> torch._ops.OpOverload:
    """``torch.ops.aten.<name>.<overload>`` for ``"name.overload"`` (``"name"``: the default overload)."""
    name, _, overload = op_name.partition(".")
    try:
        return getattr(getattr(torch.ops.aten, name), overload or "default")
    except AttributeError:
        raise OverrideError(f"{op_name}: torch {torch.__version__} has no operator aten::{op_name}") from None


def compiled_namespace(package: str) -> str:
    """The namespace ``transpile`` registers ``package``'s C++ in by default: its directory's name."""
    return package.rsplit(".", 1)[-1]


def compiled_overload(op_name: str, namespace: str) -> torch._ops.OpOverload | None:
    """``torch.ops.<namespace>.<name>.<overload>``, or None when no loaded library registers it."""
    name, _, overload = op_name.partition(".")
    if not torch._C._dispatch_has_kernel(f"{namespace}::{op_name}") and not torch._C._dispatch_has_kernel(
            f"{namespace}::{name}"):
        return None
    try:
        return getattr(getattr(getattr(torch.ops, namespace), name), overload or "default")
    except (AttributeError, RuntimeError):
        return None


def refusal(formula: TorchFormula, compiled_in: str | None = None) -> str | None:
    """Why ``formula`` cannot stand in for its aten operator (through its compiled node in the
    loaded namespace ``compiled_in``, if given), or None when it can."""
    reason = _python_refusal(formula)
    if reason is not None or compiled_in is None:
        return reason or _function_refusal(formula)
    compiled = compiled_overload(formula.op_name, compiled_in)
    if compiled is None:
        return (f"{formula.op_name}: compiled=True runs torch.ops.{compiled_in}.{formula.op_name}, which no "
                f"loaded library registers: transpile the package (python -m transpiler --formulas DIR "
                f"--out OUT), build it (python -m transpiler.build --sources OUT) and load the library it "
                f"prints (transpiler.build.load_library(path)) first")
    if not torch._C._dispatch_has_kernel(f"{compiled_in}::_aten_override_install"):
        return (f"{formula.op_name}: the library loaded for torch.ops.{compiled_in} was built before "
                f"override(compiled=True) registered from C++: rebuild it from the package")
    aten = str(aten_overload(formula.op_name)._schema)
    if str(compiled._schema).replace(f"{compiled_in}::", "aten::", 1) != aten:
        return (f"{formula.op_name}: the loaded torch.ops.{compiled_in}.{formula.op_name} has the schema "
                f"`{compiled._schema}`, not torch's `{aten}`: rebuild the library from the package")
    return None


def _function_refusal(formula: TorchFormula) -> str | None:
    """Why ``formula``'s Python path (a ``torch.autograd.Function``) cannot stand in for its aten
    operator where the compiled node can: its output is a nested tensor viewing a strided input
    (``_nested_view_from_buffer``: a view whose gradient the backward reads through ``values``)."""
    try:
        facts = formula.facts
    except StaleFormulaError:
        return None             # its file changed since import: calling it says so (StaleFormulaError)
    if formula.view_of is not None and NESTED_VALUES in facts.backward_operators:
        return (f"{formula.op_name}: its output is a nested tensor viewing {formula.names[formula.view_of]} (the "
                f"schema `{formula.declared.schema}` returns a view of it, and the backward reads the gradient "
                f"through aten::{NESTED_VALUES}, which torch has for nested and sparse tensors alone; no sparse "
                "tensor is a view): a torch.autograd.Function cannot return a nested tensor made from strided "
                "inputs (torch raises \"NestedTensorImpl doesn't support sizes\"); torch's own node stays "
                "(the compiled override, compiled=True, runs it)")
    return None


def _python_refusal(formula: TorchFormula) -> str | None:
    try:
        overload = aten_overload(formula.op_name)
    except OverrideError as error:
        return str(error)
    declared = str(torch._C.parse_schema(f"aten::{formula.declared.schema}"))
    if declared != str(overload._schema):
        return f"{formula.op_name}: the formula's schema `{declared}` is not torch's `{overload._schema}`"
    written = [arg.name for arg in formula.schema.arguments if arg.annotation is not None and arg.annotation.is_write]
    if written and written_in_place(formula) is None:
        return (f"{formula.op_name}: writes {', '.join(written)} in place besides what it returns (an out= "
                "operator, or a write on the side), which an autograd kernel from a formula cannot record")
    dispatch = dispatch_of(formula.declared.fn)
    if dispatch != DEFAULT_DISPATCH:
        return (f"{formula.op_name}: the formula is derivatives.yaml's section for {dispatch}, which torch runs "
                "for those tensors only; the override stands in for strided tensors' autograd, where torch's "
                "own stays")
    unfit = _unfit_for_cpu(formula)
    if unfit is not None:
        return f"{formula.op_name}: {unfit}"
    return None


#: The dispatch keys under which an operator runs on a CPU tensor (its own kernel, or a composite's).
CPU_KERNEL_KEYS = ("CPU", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
                   "CompositeExplicitAutogradNonFunctional")


def _unfit_for_cpu(formula: TorchFormula) -> str | None:
    """Why ``formula`` cannot stand in for its operator's autograd on a CPU tensor, None when it can
    (or the operator does not run on CPU, or the formula has no model to tell): its backward calls
    an aten operator no overload of which runs on a CPU tensor (``to_padded_tensor``: the formula
    differentiates nested tensors; ``max_pool2d_backward``: torch reaches ``max_pool2d``'s formula
    on another device only), or the operator is a CPU composite (torch differentiates the
    operators it calls there; the override stands in for it, ``var_mean.dim``) whose formula raises
    derivatives.yaml's ``not_implemented`` (``chunk``, a composite of ``split``)."""
    overload = aten_overload(formula.op_name)
    name = str(overload._schema.name) + ("" if overload._overloadname == "default" else f".{overload._overloadname}")
    composite = _has_kernel(name, "CompositeImplicitAutograd") and not _has_kernel(name, "CPU")
    if not any(_has_kernel(name, key) for key in CPU_KERNEL_KEYS):
        return None             # torch runs it on another device only
    try:
        facts = formula.facts
    except StaleFormulaError:
        return None             # its file changed since import: calling it says so (StaleFormulaError)
    if composite:
        error = next((e for e in facts.backward_errors if NOT_IMPLEMENTED.fullmatch(e.message)), None)
        if error is not None:
            return (f"its backward raises derivatives.yaml's not_implemented (\"{error.message}\"); torch's "
                    f"CPU {formula.op_name} is a composite, differentiated through the operators it calls, "
                    "which the override keeps")
    for operator in sorted(facts.backward_operators):
        packet = getattr(torch.ops.aten, operator, None)
        if packet is None:
            continue
        names = [f"aten::{operator}" + ("" if overload == "default" else f".{overload}")
                 for overload in packet.overloads() if not _writes_out(getattr(packet, overload))]
        if not any(_has_kernel(name, key) for name in names for key in CPU_KERNEL_KEYS):
            return (f"its backward calls aten::{operator}, which torch has no CPU kernel for (" + (
                f"torch's CPU {formula.op_name} is a composite, differentiated through the operators it "
                "calls, which the override keeps)" if composite else
                "the formula differentiates another layout's or device's tensors; torch's own stays on CPU)"))
    return None


#: torch's accessor of the values of a nested or sparse tensor (``Tensor.values()``; a strided one
#: has none: "values expected sparse tensor layout but got Strided").
NESTED_VALUES = "values"


def _writes_out(overload: torch._ops.OpOverload) -> bool:
    """An ``out=`` overload (``max_pool2d_backward.grad_input``): not what a formula's call runs."""
    return any(argument.is_out for argument in overload._schema.arguments)


def _has_kernel(name: str, key: str) -> bool:
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(name, key)
    except RuntimeError:        # an overload Python lists that the dispatcher does not (``sin.int``)
        return False


def written_in_place(formula: TorchFormula) -> int | None:
    """The position (in the formula's parameters) of the tensor an in-place operator writes and
    returns (``celu_(Tensor(a!) self, ...) -> Tensor(a!)``), None for any other operator."""
    schema = formula.schema
    written = [arg for arg in schema.arguments if arg.annotation is not None and arg.annotation.is_write]
    if len(written) != 1 or len(schema.returns) != 1 or str(written[0].type) != "Tensor":
        return None
    returned = schema.returns[0].annotation
    if returned is None or not returned.is_write or returned.alias_set != written[0].annotation.alias_set:
        return None
    return formula.positions[written[0].name]


def functional_twin(op_name: str) -> str | None:
    """``"sin"`` for the in-place ``"sin_"`` (``"mul.Tensor"`` for ``"mul_.Tensor"``), else None."""
    name, dot, overload = op_name.partition(".")
    if len(name) < 2 or not name.endswith("_") or name.endswith("__"):
        return None
    return name[:-1] + dot + overload


def in_place_refusal(op_name: str, twin: TorchFormula) -> str | None:
    """Why the in-place ``op_name`` cannot run through its functional twin's formula ``twin``
    (its schema must be the twin's with ``self`` written in place and returned), or None."""
    reason = _python_refusal(twin)
    if reason is not None:
        return f"{op_name}: its functional twin cannot be overridden ({reason})"
    try:
        in_place = aten_overload(op_name)._schema
    except OverrideError as error:
        return str(error)
    functional = aten_overload(twin.op_name)._schema
    def signature(schema: Any) -> list[tuple[str, str]]:
        return [(arg.name, str(arg.type)) for arg in schema.arguments]
    if twin.view_of is not None:
        return (f"{op_name}: an in-place view operator (it changes self's shape or strides), which its "
                f"functional twin {twin.op_name} applied to a copy cannot be")
    writes_self = bool(in_place.arguments) and in_place.arguments[0].name == "self" and \
        in_place.arguments[0].alias_info is not None and in_place.arguments[0].alias_info.is_write
    if not writes_self or signature(in_place) != signature(functional) or len(in_place.returns) != 1:
        return (f"{op_name}: torch's schema `{in_place}` is not its functional twin's `{functional}` "
                "with self written in place")
    return None


@dataclass
class CompiledRegistrations:
    """One compiled installation: the ``torch::Library`` the loaded package's C++ made
    (``aten_override.h``), registering its generated kernels for the aten operators at
    :data:`AUTOGRAD_KEYS`; :meth:`_destroy` destroys it, taking exactly those registrations back."""

    namespace: str
    handle: int

    @classmethod
    def install(cls, namespace: str, ops: list[str]) -> CompiledRegistrations:
        """Register the package's compiled kernels for ``ops`` under ``namespace``; the handle that takes them
        back."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
            handle = getattr(torch.ops, namespace)._aten_override_install(ops, list(AUTOGRAD_KEYS))
        return cls(namespace, handle)

    def _destroy(self) -> None:
        getattr(torch.ops, self.namespace)._aten_override_uninstall(self.handle)


@dataclass
class Installation:
    """The registrations one :func:`install` made; :func:`uninstall` takes them back."""

    package: str
    ops: tuple[str, ...]
    library: Any = field(repr=False)
    active: bool = True


def overridable(package: str = "formulas", compiled: bool = False) -> tuple[list[str], dict[str, str]]:
    """The operators of ``package`` that :func:`install` can override (on the compiled path: whose
    compiled node a loaded library registers), and the others with the reason."""
    formulas = _formulas(package)
    namespace = compiled_namespace(package) if compiled else None
    accepted: list[str] = []
    refused: dict[str, str] = {}
    for name, formula in formulas.items():
        reason = refusal(formula, namespace)
        if reason is None:
            accepted.append(name)
        else:
            refused[name] = reason
    return accepted, refused


def in_place_twins(package: str = "formulas") -> tuple[dict[str, str], dict[str, str]]:
    """The in-place aten operators (``"sin_"``, ``"mul_.Tensor"``) that :func:`install` can run
    through their functional twin's formula in ``package``, each with its twin; and the other
    in-place twins torch has of the package's operators, with the reason they cannot be."""
    accepted: dict[str, str] = {}
    refused: dict[str, str] = {}
    for name, formula in _formulas(package).items():
        base, dot, overload = name.partition(".")
        in_place = f"{base}_{dot}{overload}"
        try:
            aten_overload(in_place)
        except OverrideError:
            continue        # torch has no in-place twin of it
        reason = in_place_refusal(in_place, formula)
        if reason is None:
            accepted[in_place] = name
        else:
            refused[in_place] = reason
    return accepted, refused


def install(ops: Iterable[str] | None = None, *, package: str = "formulas", compiled: bool = False) -> Installation:
    """Make the aten operators ``ops`` (``"sin"``, ``"mul.Tensor"``; None: every operator of
    ``package`` that can be, see :func:`overridable`) run ``package``'s formulas for autograd.
    ``compiled``: run the package's transpiled C++ nodes, from its built library, loaded (its
    ``torch.ops.<package's directory name>`` operators), instead of the Python formulas.
    A named operator that cannot be is an :class:`OverrideError`, and nothing is installed."""
    formulas = _formulas(package)
    namespace = compiled_namespace(package) if compiled else None
    if ops is None:
        chosen = overridable(package, compiled)[0]
    else:
        chosen = list(dict.fromkeys(ops))
        for name in chosen:
            twin = functional_twin(name)
            if twin is not None and twin in formulas and name not in formulas and namespace is None:
                reason = in_place_refusal(name, formulas[twin])
            elif name not in formulas:
                raise OverrideError(f"{name}: package `{package}` has no formula for it")
            else:
                reason = refusal(formulas[name], namespace)
            if reason is not None:
                raise OverrideError(reason)
    if namespace is not None:
        library: Any = CompiledRegistrations.install(namespace, chosen)
        _forget_traced_dispatch(chosen)
        return Installation(package, tuple(chosen), library)
    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
        for name in chosen:
            if name not in formulas:
                kernel = _in_place_kernel(name, formulas[functional_twin(name)])
            elif written_in_place(formulas[name]) is not None:
                kernel = _written_kernel(formulas[name])
            elif formulas[name].view_of is not None:
                kernel = _view_kernel(formulas[name])
            else:
                kernel = _kernel(formulas[name])
            kernel = _taking_inputs_as_torch(name, formulas.get(name) or formulas[functional_twin(name)], kernel)
            for key in AUTOGRAD_KEYS:
                library.impl(name, kernel, key)
    _forget_traced_dispatch(chosen)
    return Installation(package, tuple(chosen), library)


def uninstall(installation: Installation) -> None:
    """Remove ``installation``'s registrations (idempotent); what was below comes back."""
    if installation.active:
        installation.library._destroy()
        installation.active = False
        _forget_traced_dispatch(installation.ops)


def _forget_traced_dispatch(names: Iterable[str]) -> None:
    """Forget what torch.compile and torch's Python dispatcher learnt before a registration change:
    torch.compile's graphs hold the autograd of the aten operators as it was when traced (its guards
    do not see a registration change), and each operator caches the kernel it chose per dispatch
    key the first time a trace called it; either would run the replaced formula silently."""
    torch._dynamo.reset()
    for name in names:
        base, _, overload = name.partition(".")
        getattr(getattr(torch.ops.aten, base), overload or "default")._dispatch_cache.clear()


@contextlib.contextmanager
def override(ops: Iterable[str] | None = None, *, package: str = "formulas",
             compiled: bool = False) -> Iterator[Installation]:
    """:func:`install` for the ``with`` block, :func:`uninstall` on leaving it."""
    installation = install(ops, package=package, compiled=compiled)
    try:
        yield installation
    finally:
        uninstall(installation)


_PREPARED: dict[str, tuple[tuple[tuple[str, int], ...], dict[str, TorchFormula]]] = {}


def _formulas(package: str) -> dict[str, TorchFormula]:
    """``package``'s formulas ready to run; prepared again only when its declarations changed."""
    declared = load_package(package).formulas
    key = tuple((name, id(formula)) for name, formula in declared.items())
    cached = _PREPARED.get(package)
    if cached is None or cached[0] != key:
        backend = TorchBackend.for_package(package)
        cached = _PREPARED[package] = (key, {name: TorchFormula(f, backend) for name, f in declared.items()})
    return cached[1]


#: each formula's autograd kernel, made on its first installation (compiling its generated path)
_KERNELS: weakref.WeakKeyDictionary[TorchFormula, Any] = weakref.WeakKeyDictionary()


def _kernel(formula: TorchFormula) -> Any:
    kernel = _KERNELS.get(formula)
    if kernel is None:
        kernel = _KERNELS[formula] = _made_kernel(formula)
    return kernel


def _made_kernel(formula: TorchFormula) -> Any:
    below = aten_overload(formula.op_name)._op      # the OpOverload's own call, without its Python layer
    call, bind = formula.prepare().call, formula.bind
    is_grad_enabled = torch.is_grad_enabled

    def autograd_kernel(*args: Any, **kwargs: Any) -> Any:
        # records(args, kwargs), its call saved where the first argument requires grad
        if not (args and isinstance(args[0], torch.Tensor) and args[0].requires_grad and is_grad_enabled()) \
                and not records(args, kwargs):
            with torch._C._AutoDispatchBelowAutograd():
                return below(*args, **kwargs)
        return call(bind(args, kwargs))

    autograd_kernel.__name__ = f"{formula.op_name}_formula_autograd"
    if formula.generated is None:
        return autograd_kernel
    # the formula written out per formula takes the calls it covers, this kernel the others
    return compile_kernel(formula, formula.generated, autograd_kernel)


def _taking_inputs_as_torch(op_name: str, formula: TorchFormula, kernel: Any) -> Any:
    """``kernel``, or where the formula declares tensor inputs torch does not differentiate
    (:func:`formulas.dsl.inputs_without_gradient`, :func:`formulas.dsl.inputs_refusing_grad`) the
    kernel taking them as torch does: in grad mode, one it refuses that requires grad raises torch's
    error (``check_no_requires_grad``); one without gradient is handed over detached (no output
    carries a gradient, nor a tangent, through it)."""
    fn, arguments = formula.declared.fn, formula.schema.arguments
    # torch hands the kernel its arguments in the schema's order, or by the schema's names
    tensors = {arg.name: i for i, arg in enumerate(arguments) if arg in formula.schema.tensor_inputs}
    detached = [tensors[name] for name in inputs_without_gradient(fn) if name in tensors]
    refused = [tensors[name] for name in inputs_refusing_grad(fn) if name in tensors]
    if not detached and not refused:
        return kernel
    base = op_name.partition(".")[0]

    def given(args: tuple[Any, ...], kwargs: dict[str, Any], position: int) -> Any:
        return args[position] if position < len(args) else kwargs.get(arguments[position].name)

    def kernel_taking_inputs_as_torch(*args: Any, **kwargs: Any) -> Any:
        if torch.is_grad_enabled():
            for position in refused:
                if any(t.requires_grad for t in _tensors(given(args, kwargs, position))):
                    raise RuntimeError(f"The function '{base}' is not differentiable with respect to argument "
                                       f"'{arguments[position].name}'. This input cannot have "
                                       "requires_grad True.")
        args, kwargs = list(args), dict(kwargs)
        for position in detached:
            value = _detached(given(args, kwargs, position))
            if position < len(args):
                args[position] = value
            elif arguments[position].name in kwargs:
                kwargs[arguments[position].name] = value
        return kernel(*args, **kwargs)

    kernel_taking_inputs_as_torch.__name__ = getattr(kernel, "__name__", f"{op_name}_formula_autograd")
    return kernel_taking_inputs_as_torch


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of an argument's ``value``: itself, those of a list, or none."""
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in _tensors(v)] if isinstance(value, (list, tuple)) else []


def _detached(value: Any) -> Any:
    """``value`` (a tensor, a list of them, or anything else) with each tensor detached."""
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (list, tuple)):
        return type(value)(_detached(v) for v in value)
    return value


def _view_kernel(formula: TorchFormula) -> Any:
    """A view operator's autograd kernel: the formula's Function (as :func:`_kernel`), whose forward
    runs below autograd but above ``ADInplaceOrView``, so the output is torch's own view of the input. An
    ``autograd.Function`` marks such an output as made in a custom Function, on which torch forbids
    an in-place write (its rebase would bypass the Function's backward); the view gets back the
    creation mode torch's own kernel gives it, so a write through it rebases its base's history
    (``CopySlices``) and the view's node is made again from its base, as for torch's own views: the
    formula's backward is that of the view, so nothing it computes is lost. A view of anything but an
    input keeps torch's refusal; the outputs of split and unbind keep theirs (``MULTI_OUTPUT_NODE``)."""
    below = aten_overload(formula.op_name)._op
    call, bind, viewed = formula.prepare().call, formula.bind, formula.view_of
    made_in_function = torch._C._autograd.CreationMeta.IN_CUSTOM_FUNCTION
    get_creation_meta, set_creation_meta = torch._C._autograd._get_creation_meta, torch._C._autograd._set_creation_meta

    def view_kernel(*args: Any, **kwargs: Any) -> Any:
        if not records(args, kwargs):
            with torch._C._AutoDispatchBelowAutograd():
                return below(*args, **kwargs)
        values = bind(args, kwargs)
        if torch.autograd.forward_ad._current_level >= 0 and \
                torch.autograd.forward_ad.unpack_dual(values[viewed]).tangent is None:
            # the viewed input has no tangent, so the view has none (the others lend their shape:
            # expand_as' `other`); a Function's jvp cannot say so for a view, so they go without theirs
            values = [torch.autograd.forward_ad.unpack_dual(v).primal if isinstance(v, torch.Tensor) and i != viewed
                      else v for i, v in enumerate(values)]
        result = call(values)
        if type(result) is torch.Tensor and result._is_view() and get_creation_meta(result) == made_in_function:
            base = result._base
            if any(t is base or t._base is base for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor)):
                set_creation_meta(result, torch._C._autograd.CreationMeta.DEFAULT if torch.is_grad_enabled()
                                  else torch._C._autograd.CreationMeta.NO_GRAD_MODE)
        return result

    view_kernel.__name__ = f"{formula.op_name}_formula_autograd"
    return view_kernel


def _written_kernel(formula: TorchFormula) -> Any:
    """An in-place operator's autograd kernel from its own formula (``celu_``, ``fill_.Scalar``):
    the formula's Function writes the tensor and marks it dirty (:meth:`TorchFormula.call_in_place`):
    torch rebases its history on the formula's node (a view's base's, through ``CopySlices``) and
    bumps its version counter. torch's errors for a write it forbids come first (:func:`check_in_place`).
    Where the backward reads the written argument, a copy of it is made first, with autograd on, for
    the backward to read (its value before the write): a fact of the front-end's, read on the first
    recorded call (:func:`_backward_reads`)."""
    below = aten_overload(formula.op_name)._op
    position = written_in_place(formula)
    reads_original = None
    formula.prepare()

    def written_kernel(*args: Any, **kwargs: Any) -> Any:
        nonlocal reads_original
        if not records(args, kwargs):
            with below_autograd():
                return below(*args, **kwargs)
        if reads_original is None:
            reads_original = _backward_reads(formula, formula.names[position])
        values = formula.bind(args, kwargs)
        written = values[position]
        if torch.is_grad_enabled() and _requires_grad(args, kwargs):
            check_in_place(written)
        return formula.call_in_place(values, position, written.clone() if reads_original else None)

    written_kernel.__name__ = f"{formula.op_name}_formula_autograd"
    return written_kernel


def _backward_reads(formula: TorchFormula, name: str) -> bool:
    """Whether the formula's backward reads its parameter ``name`` (the front-end's facts)."""
    facts = formula.facts
    if facts.backward_reads is None:
        raise RuntimeError(f"{formula.op_name}: the front-end has no model of its formula ({facts.unread_because}), "
                           f"so whether its backward reads `{name}` as it was before the write is not known; "
                           f"declare the formula with @derivative at the top level of a module file")
    return name in facts.backward_reads


def _requires_grad(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in (*args, *kwargs.values()))


#: What torch's ``handle_view_on_rebase`` adds to its message per way a view was made, where it
#: forbids an in-place write through the view.
_FORBIDDEN_VIEW_WRITE = {
    torch._C._autograd.CreationMeta.MULTI_OUTPUT_NODE:
        " This view is the output of a function that returns multiple views. Such functions do not allow the "
        "output views to be modified inplace. You should replace the inplace operation by an out-of-place one.",
    torch._C._autograd.CreationMeta.NO_GRAD_MODE:
        " Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by "
        "moving both the view and the inplace either both inside the no_grad block (if you don't want the inplace "
        "to be tracked) or both outside (if you want the inplace to be tracked).",
    torch._C._autograd.CreationMeta.IN_CUSTOM_FUNCTION:
        " This view was created inside a custom Function (or because an input was returned as-is) and the autograd "
        "logic to handle view+inplace would override the custom backward associated with the custom Function, "
        "leading to incorrect gradients. This behavior is forbidden. You can fix this by cloning the output of "
        "the custom Function.",
}


def check_in_place(tensor: torch.Tensor) -> None:
    """torch's ``check_inplace``, before an in-place operator that records writes ``tensor``: its
    errors for a leaf that requires grad, a view of one, and a view torch forbids writing through
    (made in no_grad mode, one of several outputs, made in a custom Function). torch raises them before
    the write; an ``autograd.Function`` marking the tensor dirty would raise some after it."""
    if tensor._is_view():
        creation = torch._C._autograd._get_creation_meta(tensor)
        if creation in _FORBIDDEN_VIEW_WRITE:
            node = tensor.grad_fn
            what = (f"Output {tensor.output_nr} of {re.sub(r'Backward[0-9]*$', '', node.name())} is a view and is "
                    "being modified inplace."
                    if node is not None else
                    "A view was created in no_grad mode and is being modified inplace with grad mode enabled.")
            raise RuntimeError(what + _FORBIDDEN_VIEW_WRITE[creation])
        if tensor.requires_grad and tensor._base.is_leaf:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    if tensor.requires_grad and tensor.is_leaf:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")


def _in_place_kernel(op_name: str, twin: TorchFormula) -> Any:
    """The in-place operator's autograd kernel through its functional twin's formula: the twin
    applied to a copy of ``self`` (its saved input must not change), then ``self.copy_`` of the
    result with autograd on, which rebases ``self``'s history (views included), bumps its version
    and raises torch's own errors (a leaf that requires grad)."""
    overload = aten_overload(op_name)
    twin.prepare()

    def in_place_kernel(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if not records((self, *args), kwargs):
            with below_autograd():
                return overload(self, *args, **kwargs)
        result = twin.call(twin.bind((self.clone(), *args), kwargs))
        if not torch.can_cast(result.dtype, self.dtype):    # copy_ would cast where torch refuses
            raise RuntimeError(f"result type {_scalar_type(result.dtype)} can't be cast to the desired "
                               f"output type {_scalar_type(self.dtype)}")
        return self.copy_(result)

    in_place_kernel.__name__ = f"{op_name}_formula_autograd"
    return in_place_kernel


def _scalar_type(dtype: torch.dtype) -> str:
    """The name torch's messages give ``dtype`` (``Float`` for ``torch.float32``)."""
    return torch.empty(0, dtype=dtype).type().rsplit(".", 1)[-1].removesuffix("Tensor")
