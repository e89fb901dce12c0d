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
``ours``; and ``dtype``, the kind of its cases), or ``refused`` with the reason: where the override refuses the entry (a view or
in-place operator, a schema not torch's, no compiled node loaded) or where its formula calls an
operator torch has no CPU kernel for (``max_pool2d_backward``: the entry is reached on another
device only).

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


def no_cpu_kernel(operator: str) -> str:
    """Why an entry whose formula calls ``operator`` (``aten::max_pool2d_backward``) is refused:
    torch has no CPU kernel for it. Such an entry is one torch reaches on another device only
    (its CPU operator is composite, or differentiates through another entry)."""
    return (f"the formula calls {operator}, which torch has no CPU kernel for (torch's own CPU op "
            "differentiates through another formula)")


#: What an entry's formula raises where derivatives.yaml declares its derivative not implemented.
NOT_IMPLEMENTED = re.compile(r"the derivative for '[^']+' is not implemented")


def not_implemented(message: str) -> str:
    """Why an entry whose formula raises ``message`` (derivatives.yaml's ``not_implemented``) where
    torch's own op differentiates is refused: torch's CPU op is a composite of other entries
    (``chunk`` of ``split``), so its own entry's formula is reached on no device torch runs here."""
    return (f"the formula raises \"{NOT_IMPLEMENTED.search(message).group(0)}\" where torch's own CPU op "
            "differentiates through other formulas (it is a composite of them)")


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
    from formulas.torch import override

    plain = corpus_proof.as_called(aten_overload(entry), aten_overload(entry)._schema)   # random ops: same draws
    used, skipped, undifferentiated, differentiated = 0, "", [], False
    for args, kwargs, *wrapper in cases:
        # an OpInfo sample checked through its OpInfo's gradcheck_wrapper (a Hermitian input for
        # cholesky, a triangular one for cholesky_inverse) calls the op through it, as corpus_proof
        aten = _through(wrapper[0], plain) if wrapper else plain
        inputs = _differentiated(args, kwargs, with_complex)
        if not inputs:
            skipped = skipped or f"no float64{' or complex128' if with_complex else ''} tensor to differentiate"
            continue
        why = _too_large(aten, args, kwargs, inputs) or _torch_differentiates(aten, args, kwargs, inputs, with_complex)
        if why == corpus_proof.NO_GRADIENT:
            undifferentiated.append((args, kwargs, *wrapper))
        differentiated |= not why or why.startswith("too large")
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
        except Exception as error:  # noqa: BLE001 - whatever the override raises where torch does not is a failure
            missing = corpus_proof.NO_CPU_KERNEL.search(str(error))
            if missing:     # torch's own CPU op differentiates through another entry's formula
                return "refused", used, f"{tier}: {no_cpu_kernel(missing.group(1))}"
            if isinstance(error, NotImplementedError) and NOT_IMPLEMENTED.search(str(error)):
                return "refused", used, f"{tier}: {not_implemented(str(error))}"
            if REFUSES_COMPLEX.search(str(error)):      # a compiled node, on complex tensors
                return "refused", used, f"{tier}: {REFUSES_COMPLEX_REASON}"
            return "failed", used, f"{tier}: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
        if failing:
            check = gradcheck if failing == "gradcheck" else gradgradcheck
            if check(on(), tuple(inputs), raise_exception=False, masked=masked):
                return "failed", used, f"{tier}: {failing}" + (" (with forward AD)" if forward_ad and
                                                              failing == "gradcheck" else "")
            skipped = skipped or f"torch's own op fails {failing} on it"     # outside its smooth domain: no case
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
    return ("proven", used, "") if used else ("no inputs", 0, skipped)


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
