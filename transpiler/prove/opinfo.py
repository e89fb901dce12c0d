"""Torch's own OpInfo sample inputs as cases of a declared operator (DESIGN section 7).

For a declared formula ``name.overload``, the OpInfos of
``torch.testing._internal.common_methods_invocations.op_db`` (it needs the ``expecttest``
package) that go by ``name`` (their ``name`` or ``aten_name``, ``nn.functional.name``; or that
:data:`OPINFO_NAMES` lists for it) are asked for
``sample_inputs("cpu", torch.float64, requires_grad=True)``. A sample becomes a case of the
declared overload only when that overload is what it calls:

1. running the OpInfo's op on it below autograd calls exactly one ATen operator
   (``detach`` aside), the declared overload, on the sample's own tensors. The
   recorded call, already in schema form, is the case (this also covers an op
   such as ``softmax`` that calls ``_softmax``, or a ``where`` OpInfo whose
   lambda reorders the arguments); or, for an overload that is a composite
   (``reshape`` runs as ``view``),
2. its ``(input, *args, **kwargs)`` binds onto the declared schema (types
   checked as torch's argument parser does) and onto no other overload of
   ``native_functions.yaml`` with the same name, so torch picks ours, and the
   declared overload called with them computes exactly what the OpInfo's op does.

A bound sample is converted to the cases' conventions (``tests/op_cases.py``,
:mod:`transpiler.prove.cases`): float64, bool and int64 tensors become contiguous NumPy
arrays, dtypes become NumPy scalar types. Every sample that cannot be a case is kept as a
:class:`Dropped` with the reason (a Python scalar where the schema wants a Tensor, a
keyword the schema lacks, another dtype, another overload called...). Each OpInfo's
samples are generated under their own fixed seed, so the cases are the same on every
run; at most :data:`MAX_CASES_PER_OPINFO` cases are taken from one OpInfo (the first
ones, in OpInfo's order), which bounds the run time. Importing ``op_db`` costs about
2.5 s of CPU once per process; the samples are drawn by :func:`float64_samples`.

The suite's catalogue (``tests/opinfo_cases.py``) and ``transpile prove`` both make their
OpInfo cases here. Nothing here names an operator except :data:`OPINFO_NAMES`.
"""
from __future__ import annotations

import functools
import os
import random
import zlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from reference_engine.binding import REQUIRED, parse_default
from formulas.torch.backend import accepts, wrap
from transpiler.schema import Argument, FunctionSchema, ListType, parse_schema

MAX_CASES_PER_OPINFO = 12
"""Cases taken from one OpInfo (variant) for one formula: the first ones that convert."""

OPINFO_NAMES: dict[str, tuple[str, ...]] = {
    # declared operator -> OpInfo names that reach it but are named differently
    "_softmax": ("softmax",),
    "_log_softmax": ("log_softmax",),
    "max_pool2d_with_indices": ("nn.functional.max_pool2d",),
    "index": ("__getitem__",),     # x[idx], x[mask], x[:, idx] record index.Tensor
    "native_layer_norm": ("layer_norm",),
    "convolution": ("conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"),
}

_NUMPY_DTYPES = {torch.float64: np.float64, torch.bool: np.bool_, torch.int64: np.int64}
_IGNORED_CALLS = frozenset({"aten.detach.default",      # autograd's bookkeeping on the outputs
                            "aten.lift_fresh.default"})  # a constant made from Python data (x[[0, 2]])


@dataclass(frozen=True)
class OpInfoSample:
    """One OpInfo sample as a call of the declared overload ``op``: positional arguments in
    schema order, keyword-only ones by name, the positions differentiated (None: every float
    one) and the OpInfo it came from (``name`` or ``name.variant_test_name``)."""

    op: str
    id: str                   # ``opinfo-<label>-<index of the sample>``
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    differentiable: tuple[int, ...] | None
    opinfo: str


@dataclass(frozen=True)
class Dropped:
    """A sample that is not a case of ``op``, and why."""

    op: str
    opinfo: str
    sample: int               # the sample's position in OpInfo's ``sample_inputs``
    reason: str


class _SkipSample(Exception):
    """A sample that cannot be a case; the message is the reason."""


def _opinfo_label(info: Any) -> str:
    return f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name


@functools.cache
def _native_overloads() -> dict[str, tuple[FunctionSchema, ...]]:
    """Every functional ATen overload by base name (``out=`` and named-tensor overloads left out:
    a plain sample never binds to them)."""
    import torchgen  # a file lookup only: torchgen ships the yaml

    path = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native", "native_functions.yaml")
    overloads: dict[str, list[FunctionSchema]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("- func:") and "Dimname" not in line:
                schema = parse_schema(line[len("- func:"):].strip())
                if not schema.out:
                    overloads.setdefault(schema.name.base, []).append(schema)
    return {name: tuple(schemas) for name, schemas in overloads.items()}


def _bind(schema: FunctionSchema, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's values by schema argument name, or :class:`_SkipSample` when it does not bind."""
    if not accepts(schema, wrap(args), wrap(kwargs)):
        raise _SkipSample(f"does not bind to {schema}")
    return {**{arg.name: value for arg, value in zip(schema.positional, args)}, **kwargs}


def _direct_call(schema: FunctionSchema, info: Any, sample: Any, torch_op: Callable[[str], Any]) -> dict[str, Any]:
    """Step 2: the sample's own arguments, bound onto ``schema`` and no rival overload,
    computing what the OpInfo's op computes (``torch_op(name)`` runs the declared overload)."""
    args, kwargs = (sample.input, *sample.args), dict(sample.kwargs)
    bound = _bind(schema, args, kwargs)
    rivals = [str(other.name) for other in _native_overloads().get(schema.name.base, ())
              if other.name != schema.name and accepts(other, wrap(args), wrap(kwargs))]
    if rivals:
        raise _SkipSample(f"binds to {schema.name} and also to {', '.join(rivals)}")
    with torch.no_grad():
        expected = _tensors(info.op(*args, **kwargs))
        try:
            got = _tensors(torch_op(str(schema.name))(*args, **kwargs))
        except RuntimeError as err:
            raise _SkipSample(f"{schema.name} refuses the arguments as given: {str(err).splitlines()[0]}") from None
    if len(got) != len(expected) or not all(
            g.shape == e.shape and g.dtype == e.dtype and torch.equal(g, e) for g, e in zip(got, expected)):
        raise _SkipSample(f"{schema.name} on the arguments as given computes something else than the OpInfo's op")
    return bound


class _Recorder(TorchDispatchMode):
    """Records the ATen calls made below autograd."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls.append((func, args, kwargs or {}))
        return func(*args, **(kwargs or {}))


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return _tensors(list(value.values()))
    return []


def _traced_call(schema: FunctionSchema, info: Any, sample: Any) -> dict[str, Any]:
    """Step 1: the one ATen call the OpInfo's op makes on the sample, when it is ``schema``'s."""
    recorder = _Recorder()
    with recorder:
        info.op(sample.input, *sample.args, **sample.kwargs)
    calls = [(func, args, kwargs) for func, args, kwargs in recorder.calls if str(func) not in _IGNORED_CALLS]
    names = [str(func) for func, _, _ in calls]
    overload = f"aten.{schema.name.base}.{schema.name.overload or 'default'}"
    if names != [overload]:
        raise _SkipSample(f"calls {', '.join(names) or 'no ATen operator'}, not {overload}")
    _, args, kwargs = calls[0]
    own = {id(t) for t in _tensors((sample.input, sample.args, sample.kwargs))}
    own |= {id(t) for func, args, _ in recorder.calls if str(func) == "aten.lift_fresh.default"
            for t in _tensors(args)}      # lift_fresh returns its argument: the sample's index values
    if any(id(t) not in own for t in _tensors((args, kwargs))):
        raise _SkipSample(f"calls {overload} on tensors it computed, not on its own inputs")
    try:
        return _bind(schema, tuple(args), dict(kwargs))
    except _SkipSample:          # e.g. a Python number where the schema wants a Tensor
        given = ", ".join(type(a).__name__ for a in (*args, *kwargs.values()))
        raise _SkipSample(f"calls {overload} with arguments ({given}) its declared schema does not take") from None


def _numpy(value: Any) -> Any:
    """A bound value in the catalogue's conventions, or :class:`_SkipSample`."""
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided:
            raise _SkipSample(f"a {value.layout} tensor")
        if value.dtype not in _NUMPY_DTYPES:
            raise _SkipSample(f"a {value.dtype} tensor")
        return np.array(value.detach().resolve_neg().numpy(), dtype=_NUMPY_DTYPES[value.dtype], order="C")
    if isinstance(value, torch.dtype):
        if value not in _NUMPY_DTYPES:
            raise _SkipSample(f"dtype {value}")
        return _NUMPY_DTYPES[value]
    if isinstance(value, (list, tuple)):
        return [_numpy(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise _SkipSample(f"a {type(value).__name__} argument")


def _default(arg: Argument) -> Any:
    """``arg``'s default as torch passes it: a single value of a fixed-size list (``SymInt[2]
    stride=1``) is that value repeated, as the operator's own declaration has it (``[1, 1]``)."""
    default = parse_default(arg.default)
    if isinstance(arg.type, ListType) and arg.type.size is not None and isinstance(default, int):
        return [default] * arg.type.size
    return default


def _case(op: str, schema: FunctionSchema, bound: dict[str, Any], info: Any, index: int) -> OpInfoSample:
    """The bound call as an :class:`OpInfoSample`: positional arguments up to the last one given
    (earlier gaps filled with their defaults), keyword-only ones as keywords."""
    given = [i for i, arg in enumerate(schema.positional) if arg.name in bound]
    args = []
    for arg in schema.positional[:given[-1] + 1 if given else 0]:
        default = _default(arg)
        if arg.name not in bound and default is REQUIRED:
            raise _SkipSample(f"no value for `{arg.name}`")
        args.append(_numpy(bound[arg.name]) if arg.name in bound else default)
    kwargs = {}
    for arg in schema.kwarg_only:
        if arg.name in bound:
            if _tensors(bound[arg.name]):
                raise _SkipSample(f"a tensor for keyword-only `{arg.name}`")
            kwargs[arg.name] = _numpy(bound[arg.name])
    label = _opinfo_label(info)
    # a floating tensor the sample leaves without requires_grad while it marks others (bce's
    # ``weight``: torch refuses to differentiate it) is not differentiated here either
    frozen = [i for i, arg in enumerate(schema.positional[:len(args)])
              if arg.name in bound and any(t.is_floating_point() and not t.requires_grad
                                          for t in _tensors(bound[arg.name]))]
    differentiable = None
    if frozen and any(t.requires_grad for value in bound.values() for t in _tensors(value)):
        float_positions = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
        differentiable = tuple(i for i in float_positions if i not in frozen)
    return OpInfoSample(op, f"opinfo-{label}-{index}", tuple(args), kwargs, differentiable, label)


def _names_of(info: Any) -> set[str]:
    """The operator names an OpInfo goes by: its name, its ``aten_name``, the name without
    ``nn.functional.`` (whose ``aten_name`` is often left at the Python name), and ``X`` of
    an OpInfo named ``torch.ops.aten.X.overload``."""
    names = {info.name, info.aten_name, info.name.removeprefix("nn.functional.")}
    if info.name.startswith("torch.ops.aten."):
        names.add(info.name.split(".")[3])
    return names


def _opinfos_of(op: str, op_db: list[Any]) -> list[Any]:
    base = op.partition(".")[0]
    wanted = {base, *OPINFO_NAMES.get(base, ())}
    return [info for info in op_db if _names_of(info) & wanted]


def float64_samples(info: Any) -> list[Any]:
    """The OpInfo's float64 CPU samples (:func:`opinfo_samples`)."""
    return opinfo_samples(info, torch.float64)


def opinfo_samples(info: Any, dtype: torch.dtype) -> list[Any]:
    """The OpInfo's CPU samples of ``dtype``, the same ones ``info.sample_inputs`` gives outside a
    unittest case: the generator made under a seed of its own, then the random generators
    reseeded with torch's test ``SEED`` before each sample, as its tracking iterator does. Drawn
    here without that iterator, which walks the whole interpreter stack (with source lines)
    twice per OpInfo looking for a running unittest: two thirds of the collection time. The
    seeding is that of ``set_rng_seed`` for the CPU alone (``torch.manual_seed`` also queues a
    seeding of each uninitialised accelerator, recording the Python stack each time)."""
    from torch.testing._internal.common_utils import SEED

    with torch.random.fork_rng():
        torch.manual_seed(zlib.crc32(_opinfo_label(info).encode()))
        generator = iter(info.sample_inputs_func(info, "cpu", dtype, True))
        samples = []
        while True:
            torch.default_generator.manual_seed(SEED)
            random.seed(SEED)
            np.random.seed(SEED)
            try:
                samples.append(next(generator))
            except StopIteration:
                return samples


def aten_op(op: str) -> Any:
    """``torch.ops.aten.<name>.<overload or default>``."""
    name, _, overload = op.partition(".")
    return getattr(getattr(torch.ops.aten, name), overload or "default")


def samples_of(op: str, schema_text: str, op_db: list[Any], torch_op: Callable[[str], Any] = aten_op
               ) -> tuple[list[OpInfoSample], list[Dropped]]:
    """The OpInfo samples of ``op`` (declared with ``schema_text``) that are calls of it, and
    those that are not, with the reason; ``torch_op(name)`` is the operator a directly bound
    sample is checked against (default: torch's aten overload)."""
    schema = parse_schema(schema_text)
    cases: list[OpInfoSample] = []
    dropped: list[Dropped] = []
    for info in _opinfos_of(op, op_db):
        label = _opinfo_label(info)
        if torch.float64 not in info.supported_dtypes("cpu"):
            dropped.append(Dropped(op, label, -1, "no float64 support on CPU"))
            continue
        taken = 0
        for index, sample in enumerate(float64_samples(info)):
            if taken == MAX_CASES_PER_OPINFO:
                break
            try:
                try:
                    bound = _traced_call(schema, info, sample)
                except _SkipSample as traced:
                    try:
                        bound = _direct_call(schema, info, sample, torch_op)
                    except _SkipSample as direct:
                        raise _SkipSample(f"{traced}; {direct}") from None
                cases.append(_case(op, schema, bound, info, index))
                taken += 1
            except _SkipSample as reason:
                dropped.append(Dropped(op, label, index, str(reason)))
    return cases, dropped


@functools.cache
def opinfo_database() -> tuple[Any, ...]:
    """torch's OpInfo database (imported once); empty without the ``expecttest`` package."""
    try:
        from torch.testing._internal.common_methods_invocations import op_db as database
    except ImportError:
        return ()
    return tuple(database)

