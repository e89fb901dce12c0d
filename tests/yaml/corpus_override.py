"""Tiers OP and OC for the imported derivatives.yaml corpus: each emitted entry swapped in for
torch's own aten operator (``formulas.torch.override``) and proven through that operator.

Run as a script (a fresh process: it imports the corpus as a package and loads its library)::

    python tests/yaml/corpus_override.py FORMULAS_DIR LIBRARY OPS_JSON WITHOUT_JVP_JSON [TIERS_JSON]

``FORMULAS_DIR``: what ``transpile import-yaml`` wrote, imported as the package ``derivatives``
(the namespace ``transpile coverage --corpus`` compiles it in, so ``override(compiled=True)``
finds its nodes); ``LIBRARY``: the corpus library built from it (``""``: OP alone);
``OPS_JSON``: the entries (``name.overload``); ``WITHOUT_JVP_JSON``: those emitted without
their jvp (forward AD of the compiled node raises torch's error, so OC does not check it);
``TIERS_JSON``: the tiers to run (default ``["OP", "OC"]``, ``["OP"]`` without a library).
Prints one JSON object: ``{"OP": {entry: result}, "OC": {...}}``, a result as
``corpus_proof.py``'s (``proven``, ``failed``, ``no inputs``; ``source``: ``OpInfo`` or
``ours``; and ``dtype``, the kind of its cases), or ``refused`` with the reason: where the override refuses the entry (a
schema not torch's, no compiled node loaded, a formula torch runs on other tensors or devices only:
``max_pool2d``'s calls ``max_pool2d_backward``, which has no CPU kernel).

On each case (the cases of ``corpus_proof.py``: torch's float64 OpInfo samples bound to the
overload or the ATen calls they make, called through the OpInfo's ``gradcheck_wrapper`` where
it has one of its own, our inputs where none reaches it; at most
:data:`MAX_SAMPLES`), with the entry alone overridden (so a failure is its own), calling
``torch.ops.aten.<op>``: the formula's node is recorded (``<Op>FormulaBackward``; a
``CppFunction`` on OC), ``gradcheck`` (with forward AD where the formula has a jvp) and
``gradgradcheck`` pass (on the outputs torch's own operator differentiates: gradcheck's forward
mode would compare ``linalg_lu``'s ``P`` with ``L``'s finite differences), and outputs, first and
second derivatives equal torch's own operator's on the same case, computed outside the override. A case torch's own operator rejects, does not
differentiate twice or fails gradcheck on is no case. Where torch's own operator differentiates none
of the cases it runs (a comparison, ``isnan``, the ``special_*`` polynomials), the entry is proven
``without_gradient`` as in CT (``corpus_proof.prove_no_gradient``): through the override, its
values equal torch's and none of its outputs requires grad.

An entry with no float64 case is proven on complex ones (:func:`complex_cases`: complex128 and
float64 OpInfo samples, or the ATen calls complex128 ones make, then ours made complex), complex
inputs and outputs differentiated (gradcheck's conjugate Wirtinger derivatives); one whose CPU
kernels take sparse layouts alone, on ours in those layouts (``corpus_inputs.sparse_cases``:
gradcheck with ``masked=True`` on densified outputs, first order alone, :data:`SPARSE_FIRST_ORDER`).
Each result says the kind of its cases: ``dtype`` (:func:`dtype_of`; ``float64`` on the float64 ones).
On OC a complex case is refused (:data:`REFUSES_COMPLEX_REASON`): the compiled nodes record no
complex tensor.
"""
from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

import corpus_inputs  # next to this script: a script's own directory is on sys.path
import corpus_proof
import torch
from corpus_proof import (
    _differentiated,
    _flat,
    _grads,
    _outputs,
    _replace,
    _same,
    _through,
    _too_large,
    _torch_differentiates,
)
from torch.autograd import gradcheck, gradgradcheck
from torch.utils._pytree import tree_map
from transpiler.raises import NOT_IMPLEMENTED

REPO = Path(__file__).resolve().parents[2]
#: The package name the corpus is imported under: the namespace its library registers.
PACKAGE = "derivatives"
MAX_SAMPLES = 2
TIERS = ("OP", "OC")


def aten_overload(op: str) -> torch._ops.OpOverload:
    base, _, overload = op.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def recorded_by_the_formula(tier: str, outputs: list[torch.Tensor]) -> bool:
    """Whether every differentiable output's node is the formula's (not torch's own)."""
    if tier == "OC":
        return all(type(o.grad_fn).__name__ == "CppFunction" for o in outputs)
    return all(o.grad_fn.name().endswith("FormulaBackward") for o in outputs)


#: What a compiled node raises where it records a complex tensor (``formulas::runtime::refuse_complex``).
REFUSES_COMPLEX = re.compile(r"the formula library's derivatives are for real dtypes")
REFUSES_COMPLEX_REASON = ("the compiled node refuses complex tensors (the C++ emitter's nodes differentiate real dtypes "
                          "alone: formulas::runtime::refuse_complex), so an entry proven on complex cases is so on OP alone")


def differentiable_positions(value) -> tuple[int, ...] | None:
    """The positions of the outputs of torch's own operator (``value``, computed on the case) that
    carry a gradient, where some tuple output of floating dtype carries none (``linalg_lu``'s
    permutation ``P``); None where each floating output does, or there is one. gradcheck's forward
    mode compares every floating output's tangent against the finite differences of only those that
    require grad, so such a non-differentiable output fails torch's own op there too: the checks
    see the outputs that carry a gradient."""
    if not isinstance(value, (tuple, list)):
        return None
    floating = [isinstance(v, torch.Tensor) and (v.dtype.is_floating_point or v.dtype.is_complex) for v in value]
    carrying = [isinstance(v, torch.Tensor) and v.requires_grad for v in value]
    if all(carry or not is_float for carry, is_float in zip(carrying, floating)):
        return None
    return tuple(i for i, carry in enumerate(carrying) if carry)


def prove(entry: str, tier: str, forward_ad: bool, cases: list, package: str = PACKAGE,
          with_complex: bool = False) -> tuple[str, int, str]:
    """``(status, cases used, reason)`` of ``entry`` through ``torch.ops.aten.<entry>`` with the
    formula of ``package`` swapped in (``tier``: OP the Python path, OC the compiled node);
    ``with_complex``: complex128 inputs and complex outputs are differentiated too."""
    from formulas.torch import OverrideError, override

    plain = corpus_proof.as_called(aten_overload(entry), aten_overload(entry)._schema)   # random ops: same draws
    used, skipped, undifferentiated, differentiated = 0, "", [], False
    once, drawn = [], []    # cases torch differentiates once only; a random op's cases torch fails gradcheck on
    for args, kwargs, *wrapper in cases:
        # an OpInfo sample checked through its OpInfo's gradcheck_wrapper (a Hermitian input for
        # cholesky, a triangular one for cholesky_inverse) calls the op through it, as corpus_proof
        aten = _through(wrapper[0], plain) if wrapper else plain
        inputs = _differentiated(args, kwargs, with_complex)
        if not inputs:
            if declares_no_gradient(entry, package) and _runs(aten, args, kwargs):
                undifferentiated.append((args, kwargs, *wrapper))     # an integer or boolean case (one_hot)
            skipped = skipped or f"no float64{' or complex128' if with_complex else ''} tensor to differentiate"
            continue
        why = _too_large(aten, args, kwargs, inputs) or _torch_differentiates(aten, args, kwargs, inputs, with_complex)
        if why.startswith("torch's own op rejects it") and not wrapper:
            args, kwargs = as_torch_differentiates(aten, aten_overload(entry)._schema, args, kwargs) or (args, kwargs)
            inputs = _differentiated(args, kwargs, with_complex=with_complex)
            why = (_too_large(aten, args, kwargs, inputs) or _torch_differentiates(aten, args, kwargs, inputs, with_complex)
                   if inputs else why)
        if why == corpus_proof.NO_GRADIENT and not _flat(aten(*args, **kwargs)):
            why = NO_TENSOR     # mkldnn_rnn_layer_backward's CPU kernel: undefined outputs, nothing to compare
        if why == corpus_proof.NO_GRADIENT:
            undifferentiated.append((args, kwargs, *wrapper))
        if why.startswith("torch's own op rejects it") and differentiates_once(aten, args, kwargs, inputs):
            (drawn if random_op(entry) else once).append((args, kwargs, *wrapper))
        differentiated |= not why or why.startswith("too large") or bool(once)
        if why:
            skipped = skipped or why
            continue

        kept = differentiable_positions(aten(*args, **kwargs))

        def on(args=args, kwargs=kwargs, inputs=inputs, aten=aten, kept=kept):
            def call(*tensors):
                value = aten(*_replace(args, inputs, tensors), **_replace(kwargs, inputs, tensors))
                return densified(value if kept is None else tuple(value[i] for i in kept))
            return call
        theirs = _grads(aten, args, kwargs, inputs, used, with_complex)
        failing, masked = "", any(t.layout != torch.strided for t in inputs)
        try:
            with override([entry], package=package, compiled=tier == "OC"):
                if not recorded_by_the_formula(tier, _outputs(own_value(plain, wrapper, args, kwargs), with_complex)):
                    return "failed", used, f"{tier}: torch's own node is recorded, not the formula's"
                checks = (("gradcheck", lambda f, x: gradcheck(f, x, check_forward_ad=forward_ad, raise_exception=False,
                                                               masked=masked)),
                          ("gradgradcheck", lambda f, x: gradgradcheck(f, x, raise_exception=False)))[:2 - masked]
                failing = next((label for label, check in checks if not check(on(), tuple(inputs))), "")
                mine = None if failing else _grads(aten, args, kwargs, inputs, used, with_complex)
        except OverrideError as error:     # install's refusal (a formula torch runs on other tensors only)
            return "refused", used, f"{tier}: {error}"
        except Exception as error:  # noqa: BLE001 - whatever the override raises where torch does not is a failure
            if REFUSES_COMPLEX.search(str(error)):      # a compiled node, on complex tensors
                return "refused", used, f"{tier}: {REFUSES_COMPLEX_REASON}"
            return "failed", used, f"{tier}: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
        if failing:
            check = gradcheck if failing == "gradcheck" else gradgradcheck
            if check(on(), tuple(inputs), raise_exception=False, masked=masked):
                return "failed", used, f"{tier}: {failing}" + (" (with forward AD)" if forward_ad and
                                                              failing == "gradcheck" else "")
            skipped = skipped or f"torch's own op fails {failing} on it"     # outside its smooth domain: no case
            if failing == "gradcheck" and random_op(entry):     # torch's derivative is not a fixed draw's
                drawn.append((args, kwargs, *wrapper))
            continue
        if masked:
            skipped = skipped or SPARSE_FIRST_ORDER
            continue
        used += 1
        for label, a, b in (("forward value", mine[0], theirs[0]), ("first derivative", mine[1], theirs[1]),
                            ("second derivative", mine[2], theirs[2])):
            if len(a) != len(b) or not all(_same(x, y) for x, y in zip(a, b)):
                return "failed", used, f"{tier}: {label} differs from torch's"
        if used >= MAX_SAMPLES:
            break
    if undifferentiated and not differentiated:       # torch differentiates none of the cases it runs
        def overridden(*args, **kwargs):
            with override([entry], package=package, compiled=tier == "OC"):
                return plain(*args, **kwargs)
        return corpus_proof.prove_no_gradient(overridden, plain, undifferentiated, tier)
    if not used and (once or drawn):
        return prove_as_torch(entry, tier, forward_ad, once or drawn, package, gradchecked=bool(once))
    return ("proven", used, "") if used else ("no inputs", 0, skipped)


def declares_no_gradient(entry: str, package: str = PACKAGE) -> bool:
    """Whether ``entry``'s formula declares none of its outputs differentiable
    (``output_differentiability=[False]``, as the importer writes an entry whose every input is
    ``non_differentiable``): a case of integer or boolean tensors alone (``one_hot``'s indices,
    ``_is_all_true``'s booleans), which torch's own operator takes where it takes no float64 one, is
    then one to prove its values on (there is no gradient to prove)."""
    from formulas.torch import load_package

    declared = load_package(package).formulas[entry].output_differentiability
    return declared is not None and not any(declared)


def _runs(aten, args, kwargs) -> bool:
    """Whether torch's own operator takes the case."""
    try:
        aten(*args, **kwargs)
    except Exception:  # noqa: BLE001 - any refusal of torch's makes it no case
        return False
    return True


#: Why a case whose outputs in torch are all undefined (``None``) is none.
NO_TENSOR = "torch's own op returns no defined tensor on it"


#: torch's error for a tensor argument it does not differentiate that requires grad
NOT_DIFFERENTIABLE = re.compile(r"not differentiable with respect to argument '(?P<name>\w+)'")


def as_torch_differentiates(aten, schema, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    """The case with the float64 arguments torch's own operator does not differentiate made
    constants (no longer requiring grad), as torch itself says: the argument its forward names
    (``log_sigmoid_backward``'s ``buffer``: "not differentiable with respect to argument"), and each
    input whose first derivative alone raises torch's "not implemented" where the others' do not
    (``special_zeta``'s ``self``: derivatives.yaml's ``not_implemented("zeta")``; its ``other`` is
    then proven alone). None where torch says neither."""
    names, changed = [a.name for a in schema.arguments], False
    for _ in names:
        try:
            value = aten(*args, **kwargs)
            break
        except Exception as error:  # noqa: BLE001 - only torch's "not differentiable" changes the case
            named = NOT_DIFFERENTIABLE.search(str(error))
            position = names.index(named.group("name")) if named and named.group("name") in names else None
            if position is None:
                return None
            given = args[position] if position < len(args) else kwargs.get(names[position])
            if not isinstance(given, torch.Tensor) or not given.requires_grad:
                return None
            args, kwargs = _replace(args, [given], [given.detach()]), _replace(kwargs, [given], [given.detach()])
            changed = True
    else:
        return None
    outputs, inputs = _outputs(value), _differentiated(args, kwargs)
    unimplemented = []
    for tensor in inputs if outputs else ():
        try:
            torch.autograd.grad(sum(o.sum() for o in outputs), [tensor], retain_graph=True, allow_unused=True)
        except NotImplementedError as error:
            if not NOT_IMPLEMENTED.search(str(error)):
                return (args, kwargs) if changed else None
            unimplemented.append(tensor)
        except Exception:  # noqa: BLE001 - another refusal: the case as it is, which torch rejects
            return (args, kwargs) if changed else None
    if not unimplemented:
        return (args, kwargs) if changed else None
    constants = [t.detach() for t in unimplemented]
    return _replace(args, unimplemented, constants), _replace(kwargs, unimplemented, constants)


def differentiates_once(aten, args, kwargs, inputs) -> bool:
    """Whether torch's own operator gives the case's first derivatives and raises computing the
    second (``hardsigmoid``: its ``hardsigmoid_backward`` has no derivative; ``_cdist_forward``'s
    ``_cdist_backward`` is ``not_implemented``): a case to prove to first order."""
    try:
        first = _first_and_second(aten, args, kwargs, inputs, 0) if inputs else None
    except Exception:  # noqa: BLE001 - torch's own op rejects the case itself
        return False
    return first is not None and isinstance(first[2], str)


def _first_and_second(fn, args, kwargs, inputs, seed):
    """``(values, first derivatives, second derivatives or the error computing them raised)`` of a
    fixed random projection of ``fn``'s differentiable outputs (as ``corpus_proof._grads``); None
    where the first derivatives raise."""
    outputs = _outputs(fn(*args, **kwargs))
    if not outputs:
        return None
    generator = torch.Generator().manual_seed(seed)
    total = sum((o * torch.randn(o.shape, dtype=o.dtype, generator=generator)).sum() for o in outputs)
    try:
        first = torch.autograd.grad(total, inputs, create_graph=True, allow_unused=True)
    except Exception:  # noqa: BLE001 - no first derivative: not a case of either kind
        return None
    firsts = [g for g in first if g is not None and g.requires_grad]
    try:
        second = (torch.autograd.grad(sum((g * g).sum() for g in firsts), inputs, allow_unused=True) if firsts
                  else (None,) * len(inputs))
    except Exception as error:  # noqa: BLE001 - the error is what is compared
        second = f"{type(error).__name__}: {str(error).strip().splitlines()[0]}"
    return [o.detach() for o in outputs], first, second


def random_op(entry: str) -> bool:
    """Whether ``entry`` draws random numbers (a ``Generator?`` argument: ``normal``, ``_standard_gamma``).
    The proof calls it with a fixed seed (``corpus_proof.as_called``), a deterministic function of
    its inputs; torch's derivative of it is still not that function's (``normal``'s is zero, its
    finite differences one; ``_standard_gamma``'s is the implicit reparameterization's), so torch's own
    op fails gradcheck, and the formula is proven equal to torch's derivative instead."""
    return any(str(a.type) == "Optional[Generator]" for a in aten_overload(entry)._schema.arguments)


#: The statuses of an entry proven short of a full proof, with what was proven.
FIRST_ORDER = "first order"
FIXED_DRAW = "fixed draw"
PARTIAL = {
    FIRST_ORDER: "gradcheck passes through the override, values and first derivatives equal torch's",
    FIXED_DRAW: "a random operator on a fixed seed: values and derivatives equal torch's (torch's derivative is "
                "not the finite differences of a fixed draw: its own op fails gradcheck)",
}


def prove_as_torch(entry: str, tier: str, forward_ad: bool, cases: list, package: str = PACKAGE,
                   gradchecked: bool = True) -> tuple[str, int, str]:
    """``(status, cases used, reason)`` of an entry on ``cases`` torch's own operator differentiates
    short of gradgradcheck: ``gradchecked``, cases it differentiates once only (status
    :data:`FIRST_ORDER`: gradcheck, with forward AD where the formula has a jvp, passes through the
    override); else a random operator's, whose derivative is not finite differences' (status
    :data:`FIXED_DRAW`, forward AD compared with torch's). On both, through the override, the
    formula's node is recorded, values and first derivatives equal torch's, and the second derivatives
    equal torch's, or raise torch's error where torch's raise (where ours give one instead,
    gradgradcheck passes through the override, and the reason says so)."""
    from formulas.torch import override

    plain = corpus_proof.as_called(aten_overload(entry), aten_overload(entry)._schema)
    status, used, twice, untangented, skipped = FIRST_ORDER if gradchecked else FIXED_DRAW, 0, False, "", ""
    raised = ""     # torch's error computing the second derivative
    for args, kwargs, *wrapper in cases:
        aten = _through(wrapper[0], plain) if wrapper else plain
        inputs = _differentiated(args, kwargs)

        def on(args=args, kwargs=kwargs, inputs=inputs, aten=aten):
            return lambda *tensors: aten(*_replace(args, inputs, tensors), **_replace(kwargs, inputs, tensors))
        if gradchecked and not gradcheck(on(), tuple(inputs), raise_exception=False):
            skipped = skipped or "torch's own op fails gradcheck on it"     # outside its smooth domain: no case
            continue
        theirs = _first_and_second(aten, args, kwargs, inputs, used)
        try:
            theirs_tangents = None if gradchecked or not forward_ad else \
                corpus_proof._tangents(aten, args, kwargs, inputs, used)
        except Exception as error:  # noqa: BLE001 - torch has no forward AD here: tangents are not compared
            theirs_tangents, untangented = None, f"torch's own forward AD raises {type(error).__name__}"
        used += 1
        try:
            with override([entry], package=package, compiled=tier == "OC"):
                if not recorded_by_the_formula(tier, _outputs(aten(*args, **kwargs))):
                    return "failed", used, f"{tier}: torch's own node is recorded, not the formula's"
                if gradchecked and not gradcheck(on(), tuple(inputs), check_forward_ad=forward_ad,
                                                 raise_exception=False):
                    return "failed", used, f"{tier}: gradcheck" + (" (with forward AD)" if forward_ad else "")
                mine = _first_and_second(aten, args, kwargs, inputs, used - 1)
                if theirs_tangents is not None:
                    tangents = corpus_proof._tangents(aten, args, kwargs, inputs, used - 1)
                    if len(tangents) != len(theirs_tangents) or \
                            not all(_same(a, b) for a, b in zip(tangents, theirs_tangents)):
                        return "failed", used, f"{tier}: an output tangent differs from torch's forward AD"
                second_ours = isinstance(mine[2], str) or not isinstance(theirs[2], str) or \
                    gradgradcheck(on(), tuple(inputs), raise_exception=False)
        except Exception as error:  # noqa: BLE001 - whatever the override raises where torch does not is a failure
            return "failed", used, f"{tier}: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
        for label, a, b in (("forward value", mine[0], theirs[0]), ("first derivative", mine[1], theirs[1])):
            if len(a) != len(b) or not all(_same(x, y) for x, y in zip(a, b)):
                return "failed", used, f"{tier}: {label} differs from torch's"
        raised = theirs[2][:160] if isinstance(theirs[2], str) else raised
        if isinstance(theirs[2], str) and isinstance(mine[2], str):
            if mine[2] != theirs[2]:
                return "failed", used, f"{tier}: the second derivative raises {mine[2][:120]}, not torch's {theirs[2][:120]}"
        elif isinstance(theirs[2], str):
            if not second_ours:
                return "failed", used, f"{tier}: gradgradcheck (torch's own second derivative raises)"
            twice = True
        elif isinstance(mine[2], str) or len(mine[2]) != len(theirs[2]) or \
                not all(_same(x, y) for x, y in zip(mine[2], theirs[2])):
            return "failed", used, f"{tier}: second derivative differs from torch's"
        if used >= MAX_SAMPLES:
            break
    if not used:
        return "no inputs", 0, skipped
    second = ("the formula's second derivative passes gradgradcheck" if twice else
              "the override raises torch's error") if raised else ""
    reason = (PARTIAL[status] + (f"; torch's own second derivative raises ({raised}), and {second}" if raised else "")
              + (f"; {untangented}: tangents not compared" if untangented else ""))
    return status, used, reason


#: why a case with a sparse input is no case, its first order checked: torch's gradgradcheck differentiates
#: the first derivatives, sparse there, and refuses them (``Sparse output is not supported at gradcheck``)
SPARSE_FIRST_ORDER = ("first order alone on a sparse input: gradcheck(masked=True) passes through the override, "
                      "gradgradcheck takes no sparse first derivative (for torch's own op neither)")


def densified(value):
    """``value`` with each sparse tensor made strided (``to_dense(masked_grad=True)``, gradcheck
    takes no sparse output: the unspecified elements' gradients are ignored, ``masked=True``)."""
    if isinstance(value, torch.Tensor):
        return value.to_dense(masked_grad=True) if value.layout != torch.strided else value
    if isinstance(value, (tuple, list)):
        return type(value)(densified(v) for v in value)
    return value


def own_value(op, wrapper: list, args: tuple, kwargs: dict):
    """The value of ``op`` itself on a case, called through the case's ``wrapper`` (none, or an
    OpInfo's ``gradcheck_wrapper`` composed with its sample's ``output_process_fn_grad``), which
    may process it (``linalg_eig``'s eigenvectors by their moduli): the outputs whose nodes are the
    formula's."""
    if not wrapper:
        return op(*args, **kwargs)
    values = []
    wrapper[0](lambda *a, **k: values.append(op(*a, **k)) or values[-1], *args, **kwargs)
    return values[-1]


#: the complex dtype an entry without a float64 case is proven on
COMPLEX = torch.complex128
COMPLEX_NAME = str(COMPLEX).removeprefix("torch.")


def complex_cases(op: str, schema, infos: list, every_info: list, recorded: list) -> list:
    """The cases of an entry proven on complex128 (it has no float64 case): its OpInfos' complex128,
    then float64, samples bound to the overload, each through its OpInfo's ``gradcheck_wrapper``
    and its sample's ``output_process_fn_grad`` (``linalg.eig``'s: a complex eigenvector is defined
    up to a phase, so torch checks the eigenvectors' moduli), or where none binds the ATen calls
    such samples make (``recorded``, the float64 ones, and those of the complex128 samples of
    ``every_info``'s OpInfos, recorded here), each complex128 tensor of those differentiated as
    every float64 one is; then ours (:func:`corpus_inputs.complex_cases`). Each case ends with
    its source (``OpInfo``, ``ours``)."""
    bound = [case for dtype in (COMPLEX, torch.float64)
             for case in corpus_proof._opinfo_cases(schema, infos, dtype, processed=True)]
    if not bound:
        calls = recorded + corpus_proof.record({op: aten_overload(op)}, every_info, COMPLEX).get(op, [])
        bound = [(*_complex_differentiated(case[:2]), *case[2:]) for case in calls]
    return [(*case, "OpInfo") for case in bound] + [(*case, "ours") for case in corpus_inputs.complex_cases(op, schema)]


def _complex_differentiated(case: tuple) -> tuple:
    """A recorded case with each complex128 tensor a leaf that requires grad (as every float64 one of
    it is: ``corpus_proof._fresh``)."""
    def leaf(value):
        if isinstance(value, torch.Tensor) and value.dtype == COMPLEX and not value.requires_grad:
            return value.detach().clone().requires_grad_()
        return value
    return tuple(tree_map(leaf, part) for part in case)


def dtype_of(op, args: tuple, kwargs: dict, wrapper: list) -> str:
    """The dtypes a case is proven on: its differentiated inputs' (complex128 where one is; with
    their layout where not strided: ``float64 sparse_coo``), and its outputs' after an arrow where
    they differ (``float64 -> complex128``: ``view_as_complex``)."""
    def name(tensors) -> str:
        return COMPLEX_NAME if any(t.dtype == COMPLEX for t in tensors) else "float64"
    differentiated = _differentiated(args, kwargs, with_complex=True)
    layouts = sorted({str(t.layout).removeprefix("torch.") for t in differentiated} - {"strided"})
    inputs = " ".join([name(differentiated), *layouts])
    try:
        with torch.no_grad():
            value = _through(wrapper[0], op)(*args, **kwargs) if wrapper else op(*args, **kwargs)
    except Exception:  # noqa: BLE001 - a case torch's op rejects is no case: its inputs name it
        return inputs
    outputs = [t for t in corpus_proof._flat(value) if t.dtype.is_floating_point or t.dtype.is_complex]
    label = name(outputs) if outputs else inputs
    return inputs if label == inputs else f"{inputs} -> {label}"


def prove_by_kind(op: str, tier: str, forward_ad: bool, cases: list, package: str = PACKAGE) -> tuple[str, int, str, str, str]:
    """``(status, cases used, reason, source, dtype)`` of ``op`` on ``cases`` of other kinds than
    float64 strided tensors (:func:`complex_cases`, or sparse ones: ``corpus_inputs.sparse_cases``;
    each ending with its source), through :func:`prove` with complex inputs and outputs
    differentiated, on the cases of one source and kind (:func:`dtype_of`) at a time, in order: the
    first that has a usable case decides, and names its source and kind."""
    plain = aten_overload(op)
    groups: dict[tuple[str, str], list] = {}
    for *case, source in cases:
        groups.setdefault((source, dtype_of(plain, case[0], case[1], case[2:])), []).append(tuple(case))
    reasons = []
    for (source, dtype), group in groups.items():
        status, used, reason = prove(op, tier, forward_ad, group, package, with_complex=True)
        if status != "no inputs":
            return status, used, reason, source, dtype
        reasons.append(reason)
    return "no inputs", 0, next((r for r in reasons if r), "none"), "", ""


def main(formulas_dir: str, library: str, ops_json: str, without_jvp_json: str,
         tiers_json: str = json.dumps(TIERS)) -> dict[str, dict]:
    sys.path[:0] = [str(REPO)]
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as holder:      # the corpus importable as ``derivatives``
        (Path(holder) / PACKAGE).symlink_to(Path(formulas_dir).resolve(), target_is_directory=True)
        sys.path.insert(0, holder)
        if library:
            torch.ops.load_library(library)
        tiers = [tier for tier in json.loads(tiers_json) if library or tier == "OP"]
        return _run(json.loads(ops_json), set(json.loads(without_jvp_json)), tiers)


def _run(ops: list[str], without_jvp: set[str], tiers: list[str]) -> dict[str, dict]:
    from formulas.torch import TorchBackend, TorchFormula, load_package, overridable

    declared = load_package(PACKAGE).formulas
    backend = TorchBackend.for_package(PACKAGE)     # a jvp calling an undeclared at.<op> is left out
    refused = {tier: overridable(PACKAGE, compiled=tier == "OC")[1] for tier in tiers}
    torch.manual_seed(0)        # OpInfo samples draw from the global generator: the same cases every run
    table = corpus_proof.opinfos()
    schemas = {op: aten_overload(op)._schema for op in ops}
    unbound = {op: aten_overload(op) for op in ops
               if not corpus_proof._opinfo_cases(schemas[op], corpus_proof._infos(op.partition(".")[0], schemas[op], table))}
    unique = {id(info): info for infos in table.values() for info in infos}
    recorded = corpus_proof.record(unbound, list(unique.values())) if unbound else {}

    def prove_entry(key: str) -> dict:
        tier, op = key.split(" ", 1)
        if op in refused[tier]:
            return {"status": "refused", "samples": 0, "source": "", "reason": refused[tier][op], "dtype": ""}
        schema = schemas[op]
        forward_ad = TorchFormula(declared[op], backend).has_jvp and not (tier == "OC" and op in without_jvp)
        opinfo = corpus_proof._opinfo_cases(schema, corpus_proof._infos(op.partition(".")[0], schema, table))
        status, used, reason = prove(op, tier, forward_ad, opinfo + recorded.get(op, []))
        source, dtype = "OpInfo", "float64"
        if status == "no inputs":
            source, first_reason = "ours", reason or "no OpInfo sample calls this overload"
            status, used, reason = prove(op, tier, forward_ad, corpus_inputs.cases(op, schema))
            if status == "no inputs":
                source, reason = "", f"{first_reason}; our inputs: {reason or corpus_inputs.why_none(schema)}"
        if status == "no inputs":       # no float64 case: complex ones (complex inputs or outputs)
            infos = corpus_proof._infos(op.partition(".")[0], schema, table)
            cases = complex_cases(op, schema, infos, list(unique.values()), recorded.get(op, []))
            status, used, why, source, dtype = prove_by_kind(op, tier, forward_ad, cases)
            reason = why if status != "no inputs" else f"{reason}; on {COMPLEX_NAME}: {why}"
        sparse = corpus_inputs.sparse_cases(op, schema) if status == "no inputs" else []
        if sparse:        # a kernel for sparse layouts (the only ones: _coalesce)
            status, used, why, source, dtype = prove_by_kind(op, tier, forward_ad, [(*c, "ours") for c in sparse])
            reason = why if status != "no inputs" else f"{reason}; on sparse layouts: {why}"
        return {"status": status, "samples": used, "source": source, "reason": reason, "dtype": dtype,
                "without_gradient": status == "proven" and reason == corpus_proof.WITHOUT_GRADIENT}

    keys = [f"{tier} {op}" for tier in refused for op in ops]
    results = corpus_proof.prove_in_parallel(keys, prove_entry, corpus_proof.WORKERS)
    by_tier: dict[str, dict] = {tier: {} for tier in refused}
    for key, result in results.items():
        tier, op = key.split(" ", 1)
        by_tier[tier][op] = result
    return by_tier


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:6]), sort_keys=True))
