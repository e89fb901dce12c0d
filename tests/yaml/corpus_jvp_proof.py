"""F1 of the jvps derived for the imported derivatives.yaml entries that have no written forward
formula in torch (none, or its ``auto_linear`` / ``auto_element_wise`` rule).

Run as a script (a fresh process: it imports the corpus as a package)::

    python tests/yaml/corpus_jvp_proof.py FORMULAS_DIR DERIVED_JSON ATEN_JSON

``DERIVED_JSON``: a file holding entry -> ``{"function": name, "source": text}``, the source
of the entry's formula with its derived jvp, returning ``outputs, backward, jvp``
(:func:`transpiler.corpus_jvp.derive_corpus_jvps`); ``ATEN_JSON``: name -> schema of the ATen
operators the derivation declared besides the libraries (:func:`transpiler.corpus_jvp.aten_operators`). Each formula runs on torch tensors
(``formulas.torch.backend``, the library's and the corpus's operators; libtorch's
``GradMode.is_enabled()`` is torch's grad mode, and a jvp asking it runs with grad mode off and
on; ``c10::fmap`` maps a function over a list), in its module's namespace plus every declared helper (the library's win), on the float64
cases ``corpus_proof.py`` uses (torch's OpInfo samples, else our inputs), at most ``MAX_SAMPLES``
each. On a case, every differentiated input gets a random tangent ``t``; the derived jvp's output
tangents must equal

* central finite differences of torch's built-in overload along ``t`` (gradcheck's
  tolerances),
* ``J t`` computed from torch's own reverse mode by the double-vjp trick (rtol 1e-7), where
  torch can differentiate its backward, and
* torch's forward AD (rtol 1e-7, tier RF) where torch has one: its auto rules (the entries with
  no forward formula at all make it raise, and it is no oracle there).

A case where no output of torch's overload is differentiable (``eq``, ``special_airy_ai``:
derivatives.yaml declares no gradient) proves that the derived jvp gives no tangent, as torch's
forward AD gives none. A case where torch's own double-vjp or forward AD disagrees with the
finite differences (a kink, outside the op's smooth domain) is skipped, as is one torch's
overload rejects or does not differentiate, and one where the derived jvp raises and torch's own
reverse mode raises too (``not_implemented`` in derivatives.yaml; arguments its forward does not
check, which its backward rejects: ``slow_conv3d_forward`` with a ``kernel_size`` other than the
weight's), as CT skips a case torch's backward rejects. Prints one JSON object: entry ->
``{"status": "proven" | "failed" | "no inputs", "samples": n, "source": ..., "reason": ...,
"no_tangent": bool}`` (``no_tangent``: proven on cases of the kind above only; its reason is
``NO_TANGENT`` then, else empty).
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import corpus_inputs  # next to this script: a script's own directory is on sys.path
import corpus_proof
import torch
import torch.autograd.forward_ad as fwAD
from corpus_engine import PACKAGE

REPO = Path(__file__).resolve().parents[2]
MAX_SAMPLES = 2      # the proof runs in every funnel: two cases an entry
EPSILON = 1e-6
FINITE_DIFFERENCE_TOLERANCE = {"rtol": 1e-3, "atol": 1e-5}     # torch gradcheck's
EXACT_TOLERANCE = {"rtol": 1e-7, "atol": 1e-9}
#: the reason of an entry proven only on cases where no output is differentiable (its result's
#: ``"no_tangent"`` is true then)
NO_TANGENT = "no output is differentiable: no tangent, as torch's forward AD"


def main(formulas_dir: str, derived_json: str, aten_json: str) -> dict[str, dict]:
    sys.path[:0] = [str(REPO)]
    derived = json.loads(Path(derived_json).read_text(encoding="utf-8"))
    aten = json.loads(Path(aten_json).read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as holder:      # kept while the formulas run
        (Path(holder) / PACKAGE).symlink_to(Path(formulas_dir).resolve(), target_is_directory=True)
        sys.path.insert(0, holder)
        return _run(derived, aten)


def _run(derived: dict[str, dict], aten: dict[str, str]) -> dict[str, dict]:
    from formulas.dsl import REGISTRIES, registry
    from formulas.torch.backend import TorchBackend

    torch.set_num_threads(1)
    torch.manual_seed(0)        # OpInfo samples draw from the global generator: the same cases every run
    backend = TorchBackend.for_package(PACKAGE, aten)
    declared = registry(PACKAGE).formulas
    # the library's helpers win: a derived jvp calls those its transposes use, and the corpus's
    # dialect holds only stubs of FunctionsManual's C++ ones (sum_to)
    helpers = {name: fn for table in REGISTRIES.values() for name, fn in table.helpers.items()}
    library_helpers = registry("formulas").helpers
    theirs_by_op = {}
    for op in derived:
        base, _, overload = op.partition(".")
        theirs_by_op[op] = getattr(getattr(torch.ops.aten, base), overload or "default")
    table = corpus_proof.opinfos()
    unique = {id(info): info for infos in table.values() for info in infos}
    unbound = {op: theirs for op, theirs in theirs_by_op.items()
               if not corpus_proof._opinfo_cases(theirs._schema,
                                                 corpus_proof._infos(op.partition(".")[0], theirs._schema, table))}
    recorded = corpus_proof.record(unbound, list(unique.values()))

    def prove_entry(op: str) -> dict:
        namespace = dict(declared[op].fn.__globals__)
        for name, helper in helpers.items():
            namespace.setdefault(name, helper)
        namespace.update(library_helpers)
        namespace.update(LIBTORCH)
        local: dict = {}
        exec(compile(derived[op]["source"], f"<derived jvp of {op}>", "exec"), namespace, local)  # noqa: S102
        theirs = theirs_by_op[op]
        schema = theirs._schema
        ours = corpus_proof.as_called(_on_torch(backend, local[derived[op]["function"]]), schema)
        theirs = corpus_proof.as_called(theirs, schema)
        infos = corpus_proof._infos(op.partition(".")[0], schema, table)
        # a jvp asking GradMode.is_enabled() runs with grad mode off and on: each branch is proven
        modes = (False, True) if "GradMode." in derived[op]["source"] else (False,)
        status, used, reason = prove(ours, theirs, schema, corpus_proof._opinfo_cases(schema, infos)
                                     + recorded.get(op, []), modes)
        source = "OpInfo"
        if status == "no inputs":
            source, first = "ours", reason
            status, used, reason = prove(ours, theirs, schema, corpus_inputs.cases(op, schema), modes)
            if status == "no inputs":
                source, reason = "", f"OpInfo: {first or 'none'}; our inputs: {reason or 'none'}"
        return {"status": status, "samples": used, "source": source, "reason": reason,
                "no_tangent": reason == NO_TANGENT}

    return corpus_proof.prove_in_parallel(list(derived), prove_entry, corpus_proof.WORKERS)


class GradMode:
    """libtorch's ``GradMode`` on torch tensors: ``is_enabled()`` is torch's grad mode."""

    is_enabled = staticmethod(torch.is_grad_enabled)


def _fmap(values, fn) -> list:
    """libtorch's ``c10::fmap``: ``fn`` applied to each value."""
    return [fn(value) for value in values]


#: The Python meaning, on torch, of the libtorch names the imported formulas call that the
#: library has no helper of (the dialect's stubs raise): grad mode is torch's
LIBTORCH = {"GradMode": GradMode, "fmap": _fmap}


def _on_torch(backend, formula):
    """``formula`` (returning ``outputs, backward, jvp``) called on torch values: its jvp's
    parameters (``<input>_t``) and the jvp, made to take and give torch tensors."""
    from formulas.dsl import use_backend
    from formulas.torch.backend import unwrap, wrap
    from reference_engine.scalars import scalar_value

    def run(**arguments):
        with use_backend(backend):      # numbers with c10::Scalar's methods (``alpha.conj()``), as the engine's
            _, _, jvp = formula(**{name: scalar_value(wrap(value)) for name, value in arguments.items()})

        def tangents(**given):
            with use_backend(backend):
                return unwrap(jvp(**{name: wrap(value) for name, value in given.items()}))
        return jvp.__code__.co_varnames[:jvp.__code__.co_argcount], tangents
    return run


def _arguments(schema, args: tuple, kwargs: dict) -> dict:
    """The case's arguments by their Python names (``from`` -> ``from_``), the schema's
    defaults for those not given: how a formula is called."""
    import keyword

    found = {}
    for i, argument in enumerate(schema.arguments):
        name = f"{argument.name}_" if keyword.iskeyword(argument.name) else argument.name
        if i < len(args) and not argument.kwarg_only:
            found[name] = args[i]
        elif argument.name in kwargs:
            found[name] = kwargs[argument.name]
        else:
            found[name] = argument.default_value
    return found


def _given(parameters, arguments: dict, inputs: list, tangents: list) -> dict:
    """The jvp's arguments: each differentiated input's tangent, zeros for another tensor, ``None``
    for an absent one; a tensor list's, the list of its entries' ones."""
    def of(value):
        if isinstance(value, (list, tuple)):
            return [of(v) for v in value]
        tangent = next((t for x, t in zip(inputs, tangents) if x is value), None)
        return tangent if tangent is not None or value is None else torch.zeros_like(value)
    return {parameter: of(arguments.get(parameter[:-2])) for parameter in parameters}


def _tuple(value) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _close(a: torch.Tensor, b: torch.Tensor, tolerance: dict) -> bool:
    return a.shape == b.shape and torch.allclose(a, b, equal_nan=True, **tolerance)


def _double_vjp(theirs, inputs, tangents, positions) -> list[torch.Tensor] | None:
    """``J t`` of torch's overload from its reverse mode (vjp of the vjp); None where torch
    cannot differentiate its backward."""
    try:
        outputs = [_tuple(theirs(*inputs))[i] for i in positions]
        weights = [torch.zeros_like(o, requires_grad=True) for o in outputs]
        firsts = torch.autograd.grad(outputs, inputs, weights, create_graph=True, allow_unused=True)
        pairs = [(g, t) for g, t in zip(firsts, tangents) if g is not None and g.requires_grad]
        if not pairs:
            return [torch.zeros_like(o) for o in outputs]
        seconds = torch.autograd.grad([g for g, _ in pairs], weights, [t for _, t in pairs], allow_unused=True)
    except RuntimeError:
        return None
    return [torch.zeros_like(o) if s is None else s.detach() for s, o in zip(seconds, outputs)]


def _torch_refusal(theirs, inputs, positions) -> str:
    """The first line of the error torch's own reverse mode raises on these inputs (derivatives.yaml's
    ``not_implemented``, or arguments its backward rejects), or ``""`` when it differentiates them: a
    derived jvp that raises there refuses as torch does, and the case is no case."""
    try:
        outputs = [_tuple(theirs(*inputs))[i] for i in positions]
        torch.autograd.grad(outputs, inputs, [torch.ones_like(o) for o in outputs], allow_unused=True)
    except RuntimeError as error:
        return str(error).splitlines()[0][:160]
    return ""


def prove(ours, theirs, schema, cases, grad_modes: tuple[bool, ...] = (False,)) -> tuple[str, int, str]:
    """``(status, cases used, reason)`` of the derived jvp ``ours`` over ``cases``, run in each of
    ``grad_modes`` (grad mode on and off, for a jvp that asks ``GradMode.is_enabled()``). A case where no
    output of torch's is differentiable proves that the jvp gives no tangent, as torch's forward AD;
    an entry proven on such cases only has the reason ``NO_TANGENT``."""
    used, skipped, untangled = 0, "", 0
    for args, kwargs, *wrapper in cases:
        inputs = corpus_proof._differentiated(args, kwargs)
        if not inputs:
            skipped = skipped or "no float64 tensor to differentiate"
            continue
        wrapped_tangents = None
        if wrapper:     # checked through the OpInfo's gradcheck_wrapper: the inputs and tangents it makes
            generator = torch.Generator().manual_seed(used)
            args, kwargs, inputs, wrapped_tangents = _through_wrapper(
                wrapper[0], args, kwargs, inputs, [torch.randn(x.shape, dtype=x.dtype, generator=generator)
                                                   for x in inputs])

        def on(op, args=args, kwargs=kwargs, inputs=inputs):
            return lambda *tensors: op(*corpus_proof._replace(args, inputs, tensors),
                                       **corpus_proof._replace(kwargs, inputs, tensors))
        try:
            values = _tuple(theirs(*args, **kwargs))
        except Exception as error:  # noqa: BLE001 - any refusal of torch's makes it no case
            skipped = skipped or f"torch's own op rejects it: {str(error).splitlines()[0][:120]}"
            continue
        positions = [i for i, v in enumerate(values) if isinstance(v, torch.Tensor) and v.requires_grad
                     and v.dtype.is_floating_point]
        generator = torch.Generator().manual_seed(used)
        tangents = wrapped_tangents or [torch.randn(x.shape, dtype=x.dtype, generator=generator) for x in inputs]
        if not positions:
            verdict, reason = _no_tangent(ours, on(theirs), schema, args, kwargs, inputs, tangents)
            if verdict == "failed":
                return "failed", used, reason
            if verdict == "skipped":
                skipped = skipped or reason
                continue
            used, untangled = used + 1, untangled + 1
            if used >= MAX_SAMPLES:
                break
            continue
        with torch.no_grad():
            plus = _tuple(on(theirs)(*[x + EPSILON * t for x, t in zip(inputs, tangents)]))
            minus = _tuple(on(theirs)(*[x - EPSILON * t for x, t in zip(inputs, tangents)]))
        differences = [(plus[i] - minus[i]) / (2 * EPSILON) for i in positions]
        exact = _double_vjp(on(theirs), inputs, tangents, positions)
        if exact is not None and not all(_close(a, b, FINITE_DIFFERENCE_TOLERANCE)
                                         for a, b in zip(exact, differences)):
            skipped = skipped or "torch's own derivative differs from finite differences there (a kink)"
            continue
        forward = _forward_ad(on(theirs), inputs, tangents, positions)
        if forward is not None and not all(_close(a, b, FINITE_DIFFERENCE_TOLERANCE)
                                           for a, b in zip(forward, differences)):
            skipped = skipped or "torch's forward AD differs from finite differences there (a kink)"
            continue
        used += 1
        failure, raised = "", ""
        for enabled in grad_modes:
            failure, raised = _check(ours, schema, args, kwargs, inputs, tangents, differences, exact, forward,
                                     enabled)
            if failure or raised:
                break
        if failure:
            return "failed", used, failure
        if raised:
            refusal = _torch_refusal(on(theirs), inputs, positions)
            if not refusal:
                return "failed", used, f"F1: {raised}"
            skipped, used = skipped or f"torch's own reverse mode raises there too ({refusal})", used - 1
            continue
        if used >= MAX_SAMPLES:
            break
    if not used:
        return "no inputs", 0, skipped
    return "proven", used, NO_TANGENT if untangled == used else ""


def _through_wrapper(wrapper, args, kwargs, inputs, tangents) -> tuple[tuple, dict, list, list]:
    """A sample an OpInfo checks through its ``gradcheck_wrapper`` (``op(input + input.mH, ...)``: a
    Hermitian input for ``cholesky``) as a plain case: the arguments the wrapper gives the op, their
    differentiated tensors, and the tangents the wrapper gives those (its forward AD along the
    sample's inputs' ``tangents``: Hermitian ones there)."""
    given: dict = {}

    def capture(*args, **kwargs):
        given.update(args=args, kwargs=kwargs)
        return args[0]
    made, made_tangents = [], []

    def plain(value):
        if isinstance(value, (list, tuple)):
            return type(value)(plain(v) for v in value)
        if not isinstance(value, torch.Tensor):
            return value
        primal, tangent = fwAD.unpack_dual(value)
        if tangent is None:
            return value
        made.append(primal.detach().clone().requires_grad_(True))
        made_tangents.append(tangent.detach().clone())
        return made[-1]
    with fwAD.dual_level():
        duals = [fwAD.make_dual(x.detach(), t) for x, t in zip(inputs, tangents)]
        wrapper(capture, *corpus_proof._replace(args, inputs, duals), **corpus_proof._replace(kwargs, inputs, duals))
        made_args, made_kwargs = plain(given["args"]), {k: plain(v) for k, v in given["kwargs"].items()}
    return made_args, made_kwargs, made, made_tangents


def _check(ours, schema, args, kwargs, inputs, tangents, differences, exact, forward,
           grad_enabled: bool) -> tuple[str, str]:
    """``(failure, raised)`` of the derived jvp's tangents on a case, run with grad mode
    ``grad_enabled``: both empty when they equal the finite differences, torch's double-vjp and
    torch's forward AD (``exact``, ``forward``: None where torch has none); ``raised``, what the
    derived jvp raised (``Type: message``), for :func:`prove` to ask torch's reverse mode."""
    try:
        with torch.set_grad_enabled(grad_enabled):
            arguments = _arguments(schema, args, kwargs)
            parameters, jvp = ours(**arguments)
            got = [t.detach() if isinstance(t, torch.Tensor) else t
                   for t in _tuple(jvp(**_given(parameters, arguments, inputs, tangents)))]
    except Exception as error:  # noqa: BLE001 - a failure unless torch's reverse mode raises there too
        return "", f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
    if len(got) != len(differences):
        return f"F1: {len(got)} tangents for {len(differences)} differentiable outputs", ""
    for i, (tangent, difference) in enumerate(zip(got, differences)):
        tangent = torch.zeros_like(difference) if tangent is None else tangent
        if not _close(tangent, difference, FINITE_DIFFERENCE_TOLERANCE):
            return f"F1: output {i}'s tangent differs from finite differences", ""
        if exact is not None and not _close(tangent, exact[i], EXACT_TOLERANCE):
            return f"F1: output {i}'s tangent differs from torch's double-vjp", ""
        if forward is not None and not _close(tangent, forward[i], EXACT_TOLERANCE):
            return f"RF: output {i}'s tangent differs from torch's forward AD", ""
    return "", ""


def _forward_ad(theirs, inputs, tangents, positions) -> list[torch.Tensor] | None:
    """``J t`` of torch's overload by its forward AD (derivatives.yaml's ``auto_linear`` /
    ``auto_element_wise`` rules); None where torch has none (it raises)."""
    try:
        with fwAD.dual_level():
            duals = [fwAD.make_dual(x.detach(), t) for x, t in zip(inputs, tangents)]
            values = _tuple(theirs(*duals))
            unpacked = [fwAD.unpack_dual(values[i]) for i in positions]
            return [torch.zeros_like(u.primal) if u.tangent is None else u.tangent.clone() for u in unpacked]
    except Exception:  # noqa: BLE001 - torch's forward AD refusing (no formula) is no oracle here
        return None


def _no_tangent(ours, theirs, schema, args, kwargs, inputs, tangents) -> tuple[str, str]:
    """``("proven" | "failed" | "skipped", reason)`` of a case where no output of torch's overload
    carries a gradient: torch's forward AD gives its outputs no tangent, and the derived jvp must
    give none either (``None``: a zero tensor would be a tangent on an output torch does not
    differentiate, an error of its C++ forward wrapper)."""
    try:
        with fwAD.dual_level():
            duals = [fwAD.make_dual(x.detach(), t) for x, t in zip(inputs, tangents)]
            given = [fwAD.unpack_dual(v).tangent for v in _tuple(theirs(*duals))
                     if isinstance(v, torch.Tensor)]
    except Exception as error:  # noqa: BLE001 - any refusal of torch's forward AD makes it no case
        return "skipped", f"torch's forward AD rejects it: {str(error).splitlines()[0][:120]}"
    if any(tangent is not None for tangent in given):
        return "skipped", "torch's forward AD gives a tangent to an output its reverse mode does not differentiate"
    try:
        with torch.no_grad():
            arguments = _arguments(schema, args, kwargs)
            parameters, jvp = ours(**arguments)
            got = _tuple(jvp(**_given(parameters, arguments, inputs, tangents)))
    except Exception as error:  # noqa: BLE001 - whatever the derived jvp raises is its failure
        return "failed", f"F1: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
    if any(tangent is not None for tangent in got):
        return "failed", "F1: a tangent on an output torch does not differentiate (its forward AD gives none)"
    return "proven", ""


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3]), sort_keys=True))
