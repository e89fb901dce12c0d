"""C1 and CT for every compiled operator of the imported derivatives.yaml corpus.

Run as a script (a fresh process: the corpus library registers ``torch.ops.<namespace>``)::

    python tests/yaml/corpus_proof.py LIBRARY NAMESPACE OPS_JSON [JVPS_JSON [TORCH_ONLY_JSON]]

``OPS_JSON``: the emitted operators (``name.overload`` list); ``JVPS_JSON``: those of them emitted
with their jvp (derivatives.yaml's ``result:``), whose forward mode is proven too; ``TORCH_ONLY_JSON``:
entries not compiled, whose torch overload is only judged. Prints one JSON object: operator ->
``{"status": ..., "samples": n, "source": ..., "reason": ..., "without_gradient": ..., "torch_gradchecks": ...}``
(and ``"forward": {"status": ..., "samples": n, "reason": ...}`` for an operator with its jvp),
where ``torch_gradchecks`` says whether torch's own overload passes gradcheck and gradgradcheck on
one of the entry's cases (the first it differentiates where it does; every case ours fails is judged
too): the entries torch itself can gradcheck on CPU float64. Status is ``not compiled`` for a
torch-only entry, else

* ``proven``: on every usable float64 case (at most ``MAX_SAMPLES``), torch ``gradcheck``
  and ``gradgradcheck`` pass on the compiled op (C1) and its forward value, first and
  second derivatives equal those of torch's built-in overload on the same arguments (CT);
* ``failed``: a case where one of those does not hold (``reason`` says which);
* ``no inputs``: no case that torch's own overload accepts with a differentiable
  float64 output (``reason`` says why), unless torch's overload differentiates none of the
  cases it accepts (derivatives.yaml declares no gradient: a comparison, ``isnan``, the
  ``special_*`` polynomials): then the entry is ``proven`` ``without_gradient`` where ours gives
  torch's values and none of its outputs requires grad (:func:`prove_no_gradient`).

The cases, in order of preference (``source`` names the one used):

1. ``OpInfo``: torch's own float64 OpInfo samples
   (``torch.testing._internal.common_methods_invocations.op_db``), either bound to the
   overload's schema (an ``add`` sample with a number ``other`` binds ``add.Scalar``,
   ``max`` with a ``dim`` binds ``max.dim``; OpInfos are found by name, alias, ``aten_name``
   and ``nn.functional.<name>``), or the exact ATen call torch makes while running an
   OpInfo sample forward and backward (``nn.functional.pad`` calls ``reflection_pad2d``,
   its backward ``reflection_pad2d_backward``), recorded with a dispatch mode. A sample of an
   OpInfo with a ``gradcheck_wrapper`` of its own (a Hermitian input for ``cholesky``, a
   triangular one for ``cholesky_inverse``) is checked through that wrapper, ours and torch's alike;
2. ``ours``: :mod:`tests.yaml.corpus_inputs`: arguments written by hand for entries whose
   arguments carry meaning, then arguments generated from the schema.

An in-place overload (``celu_``) takes its functional twin's OpInfos, and is called, ours and
torch's alike, on a fresh copy of each tensor it writes (:func:`as_called`); an operator with a
``Generator?`` argument draws the same numbers on every call.

Every float64 tensor argument of a case is differentiated. A case torch's own overload
rejects, or whose output torch does not differentiate, is skipped, never counted.

Forward mode (:func:`prove_forward`), on the first ``FORWARD_SAMPLES`` of the same cases: F1,
``gradcheck(..., check_forward_ad=True, fast_mode=True)`` of the compiled op (its output tangent
along a random direction equals finite differences along it), and RF, its output tangents along
random input tangents equal torch's forward AD of the built-in overload (rtol 1e-7), or, for an entry
whose built-in forward AD is inexact (:data:`TANGENT_ORACLES`), of an exact composition of torch
ops. A case where torch's own forward AD fails that gradcheck (a kink) is skipped.

Each entry's failure is its own: the operators are proven in forked children (``WORKERS`` at
once), ``CHUNK`` at a time, each reporting every result as it has it; a child that dies (torch 2.13 segfaults on
``_batch_norm_no_update`` without running stats) fails the entry it was proving, with the
signal, and the chunk goes on in a fresh child from the next entry.
"""
from __future__ import annotations

import gc
import json
import os
import re
import signal
import sys
from typing import Callable, NamedTuple

import corpus_inputs  # next to this script: a script's own directory is on sys.path
import torch
from torch.autograd import gradcheck, gradgradcheck
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map
from transpiler.prove.opinfo import opinfo_samples

MAX_SAMPLES = 4
FORWARD_SAMPLES = 2     # cases a jvp is proven on (F1 + RF; the tangents' random directions differ per case)
CHUNK = 32          # entries proven per forked child
WORKERS = 2         # forked children proving at once (each on every WORKERS-th entry)
# gradcheck builds dense Jacobians: a case whose input elements times output elements pass this is skipped
MAX_JACOBIAN = 200_000
RECORDED_PER_OP = 8


def opinfos() -> dict[str, list]:
    """OpInfos by every name that can denote an ATen operator: name, aliases, aten_name, nn.functional.<name>."""
    from torch.testing._internal.common_methods_invocations import op_db

    table: dict[str, list] = {}
    for info in op_db:
        if not info.supports_autograd:
            continue
        names = {info.name, info.name.replace(".", "_"), info.name.rsplit(".", 1)[-1] if
                 info.name.startswith("nn.functional.") else info.name}
        names |= {getattr(a, "name", a) for a in getattr(info, "aliases", ()) or ()}
        names |= {info.aten_name} if getattr(info, "aten_name", None) else set()
        for name in names:
            table.setdefault(name, []).append(info)
    return table


_SAMPLES: dict[tuple[int, torch.dtype], list] = {}


def samples(info, dtype: torch.dtype = torch.float64) -> list:
    """An OpInfo's float64 (or ``dtype``) samples that require grad (made once, as the library's proof makes them)."""
    if (id(info), dtype) not in _SAMPLES:
        try:
            _SAMPLES[id(info), dtype] = opinfo_samples(info, dtype)
        except Exception:  # noqa: BLE001 - an OpInfo whose sample generator does not run here gives none
            _SAMPLES[id(info), dtype] = []
    return _SAMPLES[id(info), dtype]


# --- binding a call to a schema --------------------------------------------------------------

def _fits(value, jit_type) -> bool:
    kind = jit_type.kind()
    if kind == "OptionalType":
        return value is None or _fits(value, jit_type.getElementType())
    if kind == "TensorType":
        return isinstance(value, torch.Tensor)
    if kind == "NumberType":
        return isinstance(value, (bool, int, float, complex))
    if kind in ("IntType", "SymIntType"):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "FloatType":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "BoolType":
        return isinstance(value, bool)
    if kind == "StringType":
        return isinstance(value, str)
    if kind == "ScalarTypeType":
        return isinstance(value, torch.dtype)
    if kind == "LayoutType":
        return isinstance(value, torch.layout)
    if kind == "MemoryFormatType":
        return isinstance(value, torch.memory_format)
    if kind == "DeviceObjType":
        return isinstance(value, (torch.device, str))
    if kind == "ListType":
        return isinstance(value, (list, tuple)) and all(_fits(v, jit_type.getElementType()) for v in value)
    return False


def bind(schema, args: tuple, kwargs: dict):
    """``(args, kwargs)`` for ``schema`` if the call fits it by position, name and type, else None."""
    positional = [a for a in schema.arguments if not a.kwarg_only]
    if len(args) > len(positional):
        return None
    names = {a.name for a in schema.arguments}
    if any(name not in names for name in kwargs):
        return None
    bound = []
    for i, argument in enumerate(schema.arguments):
        given = i < len(args) and not argument.kwarg_only
        if given or argument.name in kwargs:
            if given and argument.name in kwargs:
                return None
            value = args[i] if given else kwargs[argument.name]
            if argument.N and isinstance(value, int) and argument.real_type.kind() == "ListType":
                value = [value] * argument.N
            if not _fits(value, argument.real_type):
                return None
            bound.append((argument, value))
        elif not argument.has_default_value():
            return None
    return (tuple(v for a, v in bound if not a.kwarg_only), {a.name: v for a, v in bound if a.kwarg_only})


# --- recording the ATen calls an OpInfo sample makes ----------------------------------------

def _fresh(value):
    """A leaf copy of a tensor argument (every float64 one requires grad), other values as they are."""
    if not isinstance(value, torch.Tensor):
        return value
    copy = value.detach().contiguous().clone()      # gradcheck refuses overlapping (expanded) inputs
    return copy.requires_grad_() if copy.dtype == torch.float64 else copy


class _Recorder(TorchDispatchMode):
    def __init__(self, wanted: dict[str, object], found: dict[str, list]):
        super().__init__()
        self.wanted, self.found = wanted, found

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.name().removeprefix("aten::")
        name = name.removesuffix(".default")
        if name in self.wanted and len(self.found.setdefault(name, [])) < RECORDED_PER_OP:
            self.found[name].append((tree_map(_fresh, args), tree_map(_fresh, kwargs)))
        return func(*args, **kwargs)


def _words(name: str) -> set[str]:
    """The words of an operator or OpInfo name (``_upsample_nearest_exact2d`` -> upsample, nearest, exact)."""
    words = {re.sub(r"\d+d?$", "", word) for word in name.replace(".", "_").split("_")}
    words = {w for w in words if len(w) > 2} - {"nn", "functional", "backward", "default", "int", "tensor"}
    return words | {RELATED[w] for w in words if w in RELATED}


# an operator word -> the word of the OpInfo that calls the operator under another name
RELATED = {"upsample": "interpolate", "reflection": "pad", "replication": "pad", "adaptive": "pool"}


def record(wanted: dict[str, object], infos, dtype: torch.dtype = torch.float64) -> dict[str, list]:
    """The calls of the wanted ATen overloads made while OpInfo samples run forward and backward.

    Only OpInfos that share a word with a wanted operator's name run (``nn.functional.pad`` for
    ``reflection_pad2d_backward``), each on its first samples (float64 ones, or ``dtype``'s: complex
    outputs then differentiated too, on the real part of a random projection).
    """
    found: dict[str, list] = {}
    words = set().union(*(_words(name) for name in wanted))
    for info in infos:
        if not _words(info.name) & words:
            continue
        for sample in samples(info, dtype)[:4]:
            try:
                with _Recorder(wanted, found):
                    value = info.op(sample.input, *sample.args, **sample.kwargs)
                    outputs = _outputs(value, with_complex=dtype.is_complex)
                    if outputs:
                        inputs = [t for t in _flat((sample.input, sample.args, sample.kwargs)) if t.requires_grad]
                        total = sum(torch.real((o * torch.randn_like(o)).sum()) for o in outputs)
                        torch.autograd.grad(total, inputs, create_graph=True, allow_unused=True)
            except Exception:  # noqa: BLE001, S112 - a sample that fails here recorded what it called until then
                continue
        gc.collect()
    return found


# --- the proof ------------------------------------------------------------------------------

def _flat(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flat(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _flat(v)]
    return []


def _differentiated(args: tuple, kwargs: dict, with_complex: bool = False) -> list[torch.Tensor]:
    """The float64 tensors of a case that require grad (``with_complex``: and the complex128 ones)."""
    dtypes = (torch.float64, torch.complex128) if with_complex else (torch.float64,)
    return [t for t in _flat((args, kwargs)) if t.dtype in dtypes and t.requires_grad]


def _outputs(value, with_complex: bool = False) -> list[torch.Tensor]:
    """The floating outputs that require grad (``with_complex``: and the complex ones)."""
    values = value if isinstance(value, (tuple, list)) else (value,)
    return [v for v in values if isinstance(v, torch.Tensor) and v.requires_grad and
            (v.dtype.is_floating_point or with_complex and v.dtype.is_complex)]


def _replace(value, inputs, tensors):
    if isinstance(value, torch.Tensor):
        for old, new in zip(inputs, tensors):
            if value is old:
                return new
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_replace(v, inputs, tensors) for v in value)
    if isinstance(value, dict):
        return {k: _replace(v, inputs, tensors) for k, v in value.items()}
    return value


def _grads(fn, args, kwargs, inputs, seed, with_complex: bool = False):
    """Value, first and second derivatives of a fixed random projection of ``fn``'s differentiable outputs
    (``with_complex``: complex ones too; a complex output's projection is the real part of its product
    with complex weights, and the second derivative is that of the first's squared modulus, real
    numbers both, as autograd differentiates: the conjugate Wirtinger derivatives, torch's convention)."""
    outputs = _outputs(fn(*args, **kwargs), with_complex)
    generator = torch.Generator().manual_seed(seed)
    weights = [torch.randn(o.shape, dtype=o.dtype, generator=generator) for o in outputs]
    total = sum(torch.real((o * w).sum()) for o, w in zip(outputs, weights))
    first = torch.autograd.grad(total, inputs, create_graph=True, allow_unused=True)
    firsts = [g for g in first if g is not None and g.requires_grad]
    if not firsts:      # no first derivative depends on the inputs: every second derivative is 0
        return [o.detach() for o in outputs], first, (None,) * len(inputs)
    second = torch.autograd.grad(sum(torch.real((g * g.conj()).sum()) for g in firsts), inputs, allow_unused=True)
    return [o.detach() for o in outputs], first, second


def _same(a, b) -> bool:
    """Equal to rounding; ``None`` (no dependence) is a zero (a 1x1 ``det``'s second derivative is
    ``None`` in torch and 1e-16 through a formula that forms it)."""
    if a is None or b is None:
        return a is b or _same(torch.zeros_like(b) if a is None else a, torch.zeros_like(a) if b is None else b)
    return a.shape == b.shape and torch.allclose(a, b, rtol=1e-7, atol=1e-9, equal_nan=True)


def _too_large(theirs, args, kwargs, inputs) -> str:
    with torch.no_grad():
        try:
            outputs = _flat(theirs(*args, **kwargs))
        except Exception:  # noqa: BLE001 - _torch_differentiates says why
            return ""
    size = sum(t.numel() for t in inputs) * sum(t.numel() for t in outputs)
    return f"too large for gradcheck ({size} Jacobian entries)" if size > MAX_JACOBIAN else ""


NO_GRADIENT = "torch's own op gives no output that requires grad"


def _torch_differentiates(theirs, args, kwargs, inputs, with_complex: bool = False) -> str:
    """Empty if torch's overload takes the case and differentiates it twice (``with_complex``: a
    complex output too), else why not."""
    try:
        value = theirs(*args, **kwargs)
        if not _outputs(value, with_complex):
            if not any(t.requires_grad for t in _flat(value)):
                return NO_GRADIENT
            return "torch's own op gives no differentiable float64 output (a complex or integer one)"
        _grads(theirs, args, kwargs, inputs, 0, with_complex)
    except Exception as error:  # noqa: BLE001 - any refusal of torch's makes it no case
        return f"torch's own op rejects it: {str(error).splitlines()[0][:120]}"
    return ""


class Proof(NamedTuple):
    """An entry's proof over its cases (:func:`prove`)."""

    status: str             # proven, failed or no inputs
    used: int               # the cases it was checked on
    reason: str             # why it failed or had no inputs; WITHOUT_GRADIENT for a proof by values
    torch_gradchecks: bool  # torch's own overload passes gradcheck and gradgradcheck on one of these cases


def torch_fails(theirs, args, kwargs, inputs, seed: int | None = None) -> str:
    """The check torch's own overload fails on a case (``gradcheck``, ``gradgradcheck``, or why it
    raised), empty when it passes both: whether torch itself can gradcheck the entry on CPU float64.
    ``seed``: the global seed before each check, as :func:`prove` seeds our op's (gradgradcheck's
    random output gradients then are the same for both)."""
    def on(*tensors):
        return theirs(*_replace(args, inputs, tensors), **_replace(kwargs, inputs, tensors))
    try:
        for label, check in (("gradcheck", gradcheck), ("gradgradcheck", gradgradcheck)):
            if seed is not None:
                torch.manual_seed(seed)
            if not check(on, tuple(inputs), raise_exception=False):
                return label
    except Exception as error:  # noqa: BLE001 - a check torch's own op raises in is one it fails
        return f"{label} raised {type(error).__name__}"
    return ""


def prove(ours, theirs, cases) -> Proof:
    """The :class:`Proof` over ``cases``: ``(args, kwargs)`` pairs, or ``(args, kwargs,
    wrapper)`` for an OpInfo sample whose OpInfo checks the op through a ``gradcheck_wrapper``
    (``wrapper(op, *args, **kwargs)``: a Hermitian or triangular input made so inside the checked
    function, since finite differences leave that structure), which both ops are then called through.
    Where no case has a differentiable output in torch but some run there, :func:`prove_no_gradient`
    on those: status ``proven`` with reason :data:`WITHOUT_GRADIENT`. Torch's own verdict
    (:func:`torch_fails`) is taken on each case until one passes it, and on any case ours fails."""
    used, skipped, undifferentiated, differentiated, torch_passes = 0, "", [], False, False
    plain_ours, plain_theirs = ours, theirs
    for args, kwargs, *wrapper in cases:
        ours, theirs = (_through(wrapper[0], plain_ours), _through(wrapper[0], plain_theirs)) if wrapper else \
            (plain_ours, plain_theirs)
        inputs = _differentiated(args, kwargs)
        if not inputs:
            skipped = skipped or "no float64 tensor to differentiate"
            continue
        why = _too_large(theirs, args, kwargs, inputs) or _torch_differentiates(theirs, args, kwargs, inputs)
        if why == NO_GRADIENT:
            undifferentiated.append((args, kwargs, *wrapper))
        differentiated |= why.startswith("too large")
        if why:
            skipped = skipped or why
            continue
        used += 1
        differentiated = True

        def on(op, args=args, kwargs=kwargs, inputs=inputs):
            return lambda *tensors: op(*_replace(args, inputs, tensors), **_replace(kwargs, inputs, tensors))
        theirs_fail = None if torch_passes else torch_fails(theirs, args, kwargs, inputs, seed=used)
        torch_passes = torch_passes or theirs_fail == ""
        try:
            for label, check in (("gradcheck", gradcheck), ("gradgradcheck", gradgradcheck)):
                # gradgradcheck draws random output gradients: the same ones for both ops, so that a
                # case at the edge of finite differences' precision (matrix_exp's OpInfo samples) is
                # judged alike for ours and torch's
                torch.manual_seed(used)
                if not check(on(ours), tuple(inputs), raise_exception=False):
                    if theirs_fail is None:
                        theirs_fail = torch_fails(theirs, args, kwargs, inputs, seed=used)
                    if theirs_fail:
                        why = f"torch's own op fails {theirs_fail} on it"
                        break
                    return Proof("failed", used, f"C1: {label}{_check_message(check, on(ours), inputs)}",
                                 torch_passes)
            else:
                why = ""
            if why:         # outside the op's smooth domain (a log of a negative number, a kink): not a case
                skipped, used = skipped or why, used - 1
                continue
            mine = _grads(ours, args, kwargs, inputs, used)
        except Exception as error:  # noqa: BLE001 - whatever our op raises where torch's does not is a failure
            return Proof("failed", used, _raised(error), torch_passes)
        theirs_ = _grads(theirs, args, kwargs, inputs, used)
        for label, a, b in (("forward value", mine[0], theirs_[0]), ("first derivative", mine[1], theirs_[1]),
                            ("second derivative", mine[2], theirs_[2])):
            if len(a) != len(b) or not all(_same(x, y) for x, y in zip(a, b)):
                return Proof("failed", used, f"CT: {label} differs from torch's", torch_passes)
        if used >= MAX_SAMPLES:
            break
    if undifferentiated and not differentiated:       # torch differentiates none of the cases it runs
        return Proof(*prove_no_gradient(plain_ours, plain_theirs, undifferentiated), False)
    return Proof("proven", used, "", torch_passes) if used else Proof("no inputs", 0, skipped, torch_passes)


#: torch's error for a kernel it has no CPU version of (``aten::max_pool2d_backward``)
NO_CPU_KERNEL = re.compile(r"Could not run '(aten::\w+)' with arguments from the 'CPU' backend")


def _raised(error: Exception) -> str:
    """The C1 failure an exception of our op's is; a formula calling a kernel torch has no CPU
    version of says so (torch's own CPU op differentiates through another path)."""
    missing = NO_CPU_KERNEL.search(str(error))
    if missing:
        return (f"C1: the formula calls {missing.group(1)}, which torch has no CPU kernel for (torch's own op "
                "reaches another formula on CPU)")
    return f"C1: {type(error).__name__}: {str(error).splitlines()[0][:160]}"


def torch_gradchecks(theirs, cases) -> bool:
    """Whether torch's own overload passes gradcheck and gradgradcheck on one of ``cases`` it
    differentiates (the verdict :func:`prove` takes, for an entry not compiled)."""
    for args, kwargs, *wrapper in cases:
        op = _through(wrapper[0], theirs) if wrapper else theirs
        inputs = _differentiated(args, kwargs)
        usable = inputs and not (_too_large(op, args, kwargs, inputs) or _torch_differentiates(op, args, kwargs, inputs))
        if usable and not torch_fails(op, args, kwargs, inputs):
            return True
    return False


def _check_message(check, fn, inputs) -> str:
    """What a failing check says, its first sentence (``Backward is not reentrant``, ``Jacobian
    mismatch for output 0 with respect to input 1``), in parentheses."""
    try:
        check(fn, tuple(inputs))
    except Exception as error:  # noqa: BLE001 - the check's own error is the message wanted
        first = (str(error).strip().splitlines() or [""])[0]
        return f" ({re.split(r'[,.]', first)[0][:120]})" if first else ""
    return ""


def _logcumsumexp_by_prefixes(self, dim):
    """``logcumsumexp(self, dim)`` as the ``logsumexp`` of each prefix, whose forward AD (the prefix's
    softmax applied to the tangent) is exact in float64. torch 2.13's own forward AD of
    ``logcumsumexp`` normalizes every prefix by the largest element of the whole ``dim``: it loses
    digits where a prefix lies far below it (1e-6 on OpInfo's samples; a tangent of 0 where the
    exponentials underflow)."""
    if self.dim() == 0:
        return torch.logsumexp(self, 0)
    prefixes = [torch.logsumexp(self.narrow(dim, 0, k + 1), dim) for k in range(self.size(dim))]
    return torch.stack(prefixes, dim)


TANGENT_ORACLES: dict[str, Callable] = {
    # entry -> a composition of torch ops with the entry's values whose forward AD is exact, for
    # RF where torch's own forward AD of the entry is not (tests/yaml/test_corpus_forward_proof.py)
    "logcumsumexp": _logcumsumexp_by_prefixes,
}


def prove_forward(ours, theirs, cases, oracle=None) -> tuple[str, int, str]:
    """``(status, cases used, reason)`` of the compiled op's jvp over ``cases`` (as :func:`prove`'s):
    F1, forward-mode gradcheck (tangents against finite differences), and RF, output tangents equal to
    torch's forward AD of its own overload along the same random tangents, or of ``oracle`` (the
    entry's :data:`TANGENT_ORACLES`) where that one is inexact."""
    used, skipped = 0, ""
    plain_ours, plain_theirs = ours, theirs
    plain_oracle = theirs if oracle is None else oracle
    for args, kwargs, *wrapper in cases:
        ours, theirs, exact = (_through(wrapper[0], plain_ours), _through(wrapper[0], plain_theirs),
                               _through(wrapper[0], plain_oracle)) if wrapper else \
            (plain_ours, plain_theirs, plain_oracle)
        inputs = _differentiated(args, kwargs)
        why = "" if inputs else "no float64 tensor to differentiate"
        why = why or _too_large(theirs, args, kwargs, inputs) or _torch_differentiates(theirs, args, kwargs, inputs)
        if why:
            skipped = skipped or why
            continue

        def on(op, args=args, kwargs=kwargs, inputs=inputs):
            return lambda *tensors: op(*_replace(args, inputs, tensors), **_replace(kwargs, inputs, tensors))
        # fast mode: J u along a random u against finite differences along u (a few calls a case)
        forward_only = {"check_forward_ad": True, "check_backward_ad": False, "check_undefined_grad": False,
                        "check_batched_grad": False, "fast_mode": True, "raise_exception": False}
        try:
            if not gradcheck(on(theirs), tuple(inputs), **forward_only):
                skipped = skipped or "torch's own forward AD fails gradcheck on it"
                continue
        except Exception as error:  # noqa: BLE001 - torch's own forward AD refuses this case: no case
            skipped = skipped or f"torch's own forward AD rejects it: {str(error).splitlines()[0][:120]}"
            continue
        used += 1
        try:
            if not gradcheck(on(ours), tuple(inputs), **forward_only):
                return "failed", used, "F1: forward-mode gradcheck"
            mine = _tangents(ours, args, kwargs, inputs, used)
        except Exception as error:  # noqa: BLE001 - whatever our jvp raises where torch's does not is a failure
            return "failed", used, f"F1: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
        expected = _tangents(exact, args, kwargs, inputs, used)
        if len(mine) != len(expected) or not all(_same(a, b) for a, b in zip(mine, expected)):
            return "failed", used, ("RF: an output tangent differs from torch's forward AD"
                                    + ("" if oracle is None else " of an exact composition"))
        if used >= FORWARD_SAMPLES:
            break
    return ("proven", used, "") if used else ("no inputs", 0, skipped)


def _tangents(fn, args, kwargs, inputs, seed) -> list:
    """The output tangents of ``fn`` along random tangents of ``inputs`` (forward AD, one level)."""
    import torch.autograd.forward_ad as fwad

    generator = torch.Generator().manual_seed(seed)
    directions = [torch.randn(t.shape, dtype=t.dtype, generator=generator) for t in inputs]
    with fwad.dual_level():
        duals = [fwad.make_dual(t.detach(), d) for t, d in zip(inputs, directions)]
        value = fn(*_replace(args, inputs, duals), **_replace(kwargs, inputs, duals))
        values = value if isinstance(value, (tuple, list)) else (value,)
        return [fwad.unpack_dual(v).tangent for v in values
                if isinstance(v, torch.Tensor) and v.dtype.is_floating_point]


def _through(wrapper, op):
    """``op`` called through an OpInfo's ``gradcheck_wrapper``."""
    return lambda *args, **kwargs: wrapper(op, *args, **kwargs)


WITHOUT_GRADIENT = "without a gradient: values equal torch's, and neither op's output carries a gradient"


def prove_no_gradient(ours, theirs, cases, tier: str = "CT") -> tuple[str, int, str]:
    """The proof of an entry whose output torch does not differentiate (derivatives.yaml's
    ``output_differentiability: [False]`` or every input ``non_differentiable``), on cases whose
    float64 inputs require grad: ours gives torch's values (dtype, shape, elements) and no output of
    ours requires grad either, which is all that formula says. ``cases`` are ones torch runs;
    ``tier`` names the check in a failure's reason."""
    used = 0
    for args, kwargs, *wrapper in cases[:MAX_SAMPLES]:
        mine_op, theirs_op = (_through(wrapper[0], ours), _through(wrapper[0], theirs)) if wrapper else (ours, theirs)
        try:
            mine = _flat(mine_op(*args, **kwargs))
        except Exception as error:  # noqa: BLE001 - torch's op runs this case: ours must too
            return "failed", used, f"{tier}: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
        expected = _flat(theirs_op(*args, **kwargs))
        used += 1
        if any(t.requires_grad for t in mine):
            return "failed", used, f"{tier}: an output carries a gradient where torch's does not"
        if len(mine) != len(expected) or not all(_same_value(a, b) for a, b in zip(mine, expected)):
            return "failed", used, f"{tier}: forward value differs from torch's"
    return "proven", used, WITHOUT_GRADIENT


def _same_value(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.is_floating_point or a.dtype.is_complex:
        return torch.allclose(a, b, rtol=1e-7, atol=1e-9, equal_nan=True)
    return torch.equal(a, b)


def _opinfo_cases(schema, infos, dtype: torch.dtype = torch.float64, processed: bool = False) -> list:
    """The float64 (or ``dtype``) samples of ``infos`` that bind to ``schema``; one whose OpInfo has a
    gradcheck wrapper of its own keeps the sample's own call (the wrapper reads it: ``upper=`` by name)
    and the wrapper; ``processed``: one whose sample has an ``output_process_fn_grad`` too, the two
    composed (:func:`_processed`)."""
    from torch.testing._internal.opinfo.core import OpInfo

    cases = []
    for info in infos:
        for sample in samples(info, dtype):
            call = ((sample.input, *sample.args), dict(sample.kwargs))
            bound = bind(schema, *call)
            if bound is not None:
                wrapped = info.gradcheck_wrapper is not OpInfo.gradcheck_wrapper
                if processed and _processes(sample.output_process_fn_grad):
                    cases.append((*call, _processed(info.gradcheck_wrapper, sample.output_process_fn_grad)))
                    continue
                cases.append((*call, info.gradcheck_wrapper) if wrapped else bound)
    return cases


def _processes(output_process_fn_grad) -> bool:
    """Whether a sample's ``output_process_fn_grad`` is other than the identity (SampleInput's default)."""
    unchanged = object()
    try:
        return output_process_fn_grad(unchanged) is not unchanged
    except Exception:  # noqa: BLE001 - one that cannot take an arbitrary value processes what it gets
        return True


def _processed(wrapper, output_process_fn_grad):
    """An OpInfo's ``gradcheck_wrapper`` with its sample's ``output_process_fn_grad`` on the op's value,
    as torch's own gradient tests check the op: ``linalg.eig``'s eigenvectors by their moduli (a
    complex eigenvector is defined up to a phase, which its gradient does not see)."""
    return lambda op, *args, **kwargs: output_process_fn_grad(wrapper(op, *args, **kwargs))


def _written(schema) -> list[int]:
    """The positions of the arguments an in-place operator writes (``Tensor(a!) self``)."""
    return [i for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write]


def _infos(base: str, schema, table: dict[str, list]) -> list:
    """The OpInfos of an operator; an in-place one (``celu_``) takes its functional twin's samples."""
    if base in table or not _written(schema):
        return table.get(base, [])
    return table.get(base.removesuffix("_"), [])


def as_called(op, schema):
    """``op`` as the proof calls it. An in-place operator writes a fresh copy of each tensor it
    writes (the inputs stay leaves, and the copy's history is what it rebases), so the in-place
    operator itself is what is checked; an operator that draws random numbers (a ``Generator?``
    argument) draws the same ones on every call (a fixed seed, the caller's stream untouched),
    so that its finite differences and the two operators' values compare like for like."""
    written = _written(schema)
    names = [a.name for a in schema.arguments]
    random = any(str(a.type) == "Optional[Generator]" for a in schema.arguments)
    if not written and not random:
        return op

    def call(*args, **kwargs):
        args = list(args)
        for i in written:
            if i < len(args) and isinstance(args[i], torch.Tensor):
                args[i] = args[i].clone()
            elif names[i] in kwargs and isinstance(kwargs[names[i]], torch.Tensor):
                kwargs[names[i]] = kwargs[names[i]].clone()
        if not random:
            return op(*args, **kwargs)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            return op(*args, **kwargs)
    return call


def main(library: str, namespace: str, ops_json: str, jvps_json: str = "[]", torch_only_json: str = "[]") -> None:
    torch.set_num_threads(1)        # small cases; and forked children (prove_isolated) need no thread team
    torch.ops.load_library(library)
    torch.manual_seed(0)        # OpInfo samples draw from the global generator: the same cases every run
    ops, torch_only = json.loads(ops_json), json.loads(torch_only_json)
    with_jvp = set(json.loads(jvps_json))
    table = opinfos()
    theirs_by_op = {}
    for op in ops + torch_only:
        base, _, overload = op.partition(".")
        found = getattr(getattr(torch.ops.aten, base, None), overload or "default", None)
        if found is not None:
            theirs_by_op[op] = found
    unique = {id(info): info for infos in table.values() for info in infos}
    unbound = {op: theirs for op, theirs in theirs_by_op.items()     # no OpInfo sample binds to them
               if not _opinfo_cases(theirs._schema, _infos(op.partition(".")[0], theirs._schema, table))}
    recorded = record(unbound, list(unique.values()))

    def prove_entry(op: str) -> dict:
        base, _, overload = op.partition(".")
        theirs = theirs_by_op.get(op)
        if theirs is None:
            return {"status": "not compiled" if op in torch_only else "no inputs", "samples": 0, "source": "",
                    "reason": "torch has no such aten overload", "torch_gradchecks": False}
        infos = _infos(base, theirs._schema, table)
        cases = _opinfo_cases(theirs._schema, infos) + recorded.get(op, [])
        schema = theirs._schema
        theirs = as_called(theirs, schema)
        if op in torch_only:        # not compiled: torch's own verdict alone
            verdict = torch_gradchecks(theirs, cases) or torch_gradchecks(theirs, corpus_inputs.cases(op, schema))
            return {"status": "not compiled", "samples": 0, "source": "", "reason": "", "torch_gradchecks": verdict}
        ours = as_called(getattr(getattr(getattr(torch.ops, namespace), base), overload or "default"), schema)
        status, used, reason, on_torch = prove(ours, theirs, cases)
        source = "OpInfo"
        if status == "no inputs":
            opinfo_reason = reason or ("no OpInfo sample calls this overload" if infos or op in recorded
                                       else "no OpInfo")
            source = "ours"
            cases = corpus_inputs.cases(op, schema)
            status, used, reason, on_ours = prove(ours, theirs, cases)
            on_torch = on_torch or on_ours
            if status == "no inputs":
                source = ""
                reason = f"{opinfo_reason}; our inputs: {reason or corpus_inputs.why_none(schema)}"
        result = {"status": status, "samples": used, "source": source, "reason": reason,
                  "without_gradient": status == "proven" and reason == WITHOUT_GRADIENT, "torch_gradchecks": on_torch}
        if op in with_jvp:
            forward, samples_used, why = prove_forward(ours, theirs, cases, TANGENT_ORACLES.get(op))
            result["forward"] = {"status": forward, "samples": samples_used, "reason": why}
        return result

    print(json.dumps(prove_in_parallel(ops + torch_only, prove_entry, WORKERS), sort_keys=True))


def prove_in_parallel(ops: list[str], prove_entry: Callable[[str], dict], workers: int) -> dict[str, dict]:
    """:func:`prove_isolated` on every ``workers``-th op in each of ``workers`` forked processes at once."""
    import tempfile

    with tempfile.TemporaryDirectory() as holder:
        children = []
        for index in range(workers):
            path = os.path.join(holder, f"{index}.json")
            pid = os.fork()
            if pid == 0:
                try:
                    results = prove_isolated(ops[index::workers], prove_entry)
                    with open(path, "w", encoding="utf-8") as out:
                        json.dump(results, out)
                finally:
                    os._exit(0)
            children.append((pid, path))
        results: dict[str, dict] = {}
        for pid, path in children:
            _, status = os.waitpid(pid, 0)
            if os.path.exists(path):
                with open(path, encoding="utf-8") as report:
                    results.update(json.load(report))
    for op in ops:      # a worker that died outside every entry's proof leaves its entries unproven
        results.setdefault(op, {"status": "failed", "samples": 0, "source": "",
                                "reason": "C1: the process proving it died"})
    return {op: results[op] for op in ops}


def prove_isolated(ops: list[str], prove_entry: Callable[[str], dict]) -> dict[str, dict]:
    """``prove_entry`` of every op, in forked children (``CHUNK`` ops each), so that a crash is the
    failure of the op it happened on: the child reports each result as it has it, and the parent
    starts the next child after the op that was running when one died."""
    torch.set_num_threads(1)        # no OpenMP thread team in the parent: a forked child would hang on it
    results: dict[str, dict] = {}
    pending = list(ops)
    while pending:
        chunk = pending[:CHUNK]
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:                                     # the child: prove, report, never return
            os.close(read_end)
            with os.fdopen(write_end, "w") as report:
                for op in chunk:
                    report.write(json.dumps([op, _proof_or_error(prove_entry, op)]) + "\n")
                    report.flush()
            os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end) as report:
            for line in report:
                if line.endswith("\n"):                  # a line cut short by a crash is no result
                    op, result = json.loads(line)
                    results[op] = result
        _, status = os.waitpid(pid, 0)
        done = sum(op in results for op in chunk)
        pending = pending[done:]
        if done < len(chunk):
            crashed = pending.pop(0)
            results[crashed] = {"status": "failed", "samples": 0, "source": "",
                                "reason": f"C1: the process proving it died ({_death(status)})"}
    return results


def _proof_or_error(prove_entry: Callable[[str], dict], op: str) -> dict:
    """``prove_entry(op)``, or the failure that an exception outside the checks is."""
    try:
        return prove_entry(op)
    except Exception as error:  # noqa: BLE001 - one entry's error is that entry's failure
        return {"status": "failed", "samples": 0, "source": "",
                "reason": f"C1: the proof raised {type(error).__name__}: {str(error).splitlines()[0][:160]}"}


def _death(status: int) -> str:
    """How a child ended, from its wait status (``signal 11, SIGSEGV``, ``exit code 1``)."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        return f"signal {number}, {signal.Signals(number).name}"
    return f"exit code {os.WEXITSTATUS(status)}"


if __name__ == "__main__":
    main(*sys.argv[1:6])
