"""The compiled tiers of ``transpile prove --compiled``: the package transpiled and built as
``transpile`` and ``python -m transpiler.build`` do (cached), then its ``torch.ops.<namespace>``
operators checked.

=====  ==================================================================================
C1     the compiled op passes ``torch.autograd.gradcheck`` and ``gradgradcheck``
CT     the compiled op's gradients equal the built-in torch op's, first and second order
F1     the engine's F1, then the compiled op's ``gradcheck(check_forward_ad=True)`` and its
       ``torch.func.jvp`` == the built-in op's; where torch's own forward AD of the built-in op
       raises on a case (``hardsigmoid_backward``, ``native_dropout_backward``; ``norm.Scalar``,
       whose 0-d result torch gives a keepdim-shaped tangent), the case is proven against finite
       differences alone, as where torch has no such operator (RF is ``n/a`` there)
CA     the compiled op's backward under ``torch._dynamo.compiled_autograd`` == eager, and the
       compiled graph calls the node's bound functional (``<namespace>_<Node>``)
=====  ==================================================================================

The tolerances are the suite's (``tests/cpp/``): ``torch.testing.assert_close``'s for float64
where it compares with torch's built-in op, exact under compiled autograd.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from transpiler.prove.tiers import (
    NotApplicable,
    Subject,
    TierFailure,
    TorchRun,
    as_numpy,
    compare,
    differentiable_returns,
    flat_tensors,
    positional,
)

#: ``torch.testing.assert_close``'s tolerances for float64, which the suite's compiled tiers use
CLOSE_ATOL, CLOSE_RTOL = 1e-7, 1e-7
#: package -> the ``torch.ops`` namespace its built library registers
NAMESPACES: dict[str, str] = {}


class BuildFailed(RuntimeError):
    """Transpiling or compiling the package failed; the message says which and why."""


def build_package(directory: Path, package: str) -> None:
    """Transpile ``directory`` into the build cache, compile it (progress on stderr), load it."""
    from transpiler.build import load_library
    from transpiler.cpp.generate import SHIPPED_FORMULAS
    from transpiler.project import build_cache, default_namespace, find_project

    namespace = default_namespace(directory, SHIPPED_FORMULAS)
    out = build_cache(find_project().build_dir) / "prove" / namespace / "cpp"
    out.parent.mkdir(parents=True, exist_ok=True)
    print(f"transpile prove: transpiling {directory} into {out}", file=sys.stderr)
    generated = subprocess.run([sys.executable, "-m", "transpiler", "--formulas", str(directory), "--out", str(out),
                                "--namespace", namespace], capture_output=True, text=True, check=False)
    if generated.returncode != 0:
        raise BuildFailed(f"transpile failed:\n{generated.stdout}{generated.stderr}")
    print(f"transpile prove: building {namespace} (python -m transpiler.build; cached)", file=sys.stderr)
    built = subprocess.run([sys.executable, "-m", "transpiler.build", "--sources", str(out)],
                           stdout=subprocess.PIPE, text=True, check=False)
    if built.returncode != 0 or not built.stdout.strip():
        raise BuildFailed(f"the C++ build of {out} failed (its errors are above)")
    load_library(built.stdout.strip().splitlines()[-1])
    NAMESPACES[package] = namespace


def compiled_op(subject: Subject) -> Any:
    """``torch.ops.<namespace>.<name>.<overload>`` of the subject's built package."""
    import torch

    namespace = NAMESPACES.get(subject.package)
    if namespace is None:
        raise NotApplicable("the package was not built (transpile prove --compiled)")
    base, _, overload = subject.name.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), base), overload or "default")


def _call_compiled(run: TorchRun, tensors: list[Any]) -> Any:
    from transpiler.prove.tiers import substituted, to_torch

    args, kwargs = positional(run.subject.schema, substituted(run.values, run.where, tensors, to_torch))
    return compiled_op(run.subject)(*args, **kwargs)


def tier_c1(subject: Subject, values: dict[str, Any]) -> None:
    """C1: torch's ``gradcheck`` and ``gradgradcheck`` pass on the compiled op."""
    import torch
    from torch.autograd.gradcheck import GradcheckError

    run = TorchRun(subject, values)
    _, tensors = run.named(run.arrays(), requires_grad=True)
    if not tensors:
        raise NotApplicable("no differentiable input")

    def fn(*inputs: Any) -> Any:
        outs = [o for o in flat_tensors(differentiable_returns(subject, _call_compiled(run, list(inputs))))
                if isinstance(o, torch.Tensor) and o.is_floating_point()]
        return tuple(outs)
    for check, order in ((torch.autograd.gradcheck, "first order"), (torch.autograd.gradgradcheck, "second order")):
        try:
            check(fn, tuple(tensors))
        except GradcheckError as error:
            raise TierFailure(order, " ".join(str(error).split())[:400]) from None


def _compiled_outputs(run: TorchRun, tensors: list[Any]) -> list[Any]:
    import torch

    return [o for o in flat_tensors(differentiable_returns(run.subject, _call_compiled(run, tensors)))
            if isinstance(o, torch.Tensor) and o.is_floating_point()]


def tier_ct(subject: Subject, values: dict[str, Any]) -> None:
    """CT: the compiled op's first- and second-order gradients equal torch's built-in op's."""
    import torch

    from transpiler.prove.tiers import builtin, first_and_second_order, output_weights

    builtin(subject)
    run = TorchRun(subject, values)
    _, tensors = run.named(run.arrays(), requires_grad=True)
    outs = _compiled_outputs(run, tensors)
    weights = output_weights([tuple(o.shape) for o in outs])
    got = torch.autograd.grad(outs, tensors, [torch.from_numpy(w) for w in weights], allow_unused=True)
    expected = run.builtin_vjp(weights)
    for slot, ((label, _, _), g, e) in enumerate(zip(run.where, got, expected)):
        e = np.zeros(run.arrays()[slot].shape) if e is None else e
        try:
            compare(f"input `{label}`", None if g is None else as_numpy(g), e, "torch's built-in",
                    CLOSE_ATOL, CLOSE_RTOL)
        except TierFailure as failure:
            failure.explanation = run.explain(slot, e, weights)
            raise
    grad_weights = output_weights([a.shape for a in run.arrays()], seed=2)
    _, tensors = run.named(run.arrays(), requires_grad=True)
    second = first_and_second_order(torch.autograd.grad, _compiled_outputs(run, tensors), tensors,
                                    [torch.from_numpy(w) for w in weights], [torch.from_numpy(v) for v in grad_weights])
    expected_second = run.builtin_second_order(weights, grad_weights)
    for slot, ((label, _, _), g, e) in enumerate(zip(run.where, second, expected_second)):
        compare(f"second-order gradient of input `{label}`", None if g is None else as_numpy(g),
                np.zeros(run.arrays()[slot].shape) if e is None else e, "torch's built-in", CLOSE_ATOL, CLOSE_RTOL)


def has_jvp(subject: Subject) -> bool:
    """Whether the formula gives a forward-mode derivative (a ``def jvp`` or a ``jvp=`` rule)."""
    from transpiler.prove.terms import model_of

    if subject.declared.jvp is not None:
        return True
    found = model_of(subject.declared.fn)
    return found is not None and found[1].jvp is not None


def tier_f1(subject: Subject, values: dict[str, Any]) -> None:
    """F1: the engine's F1, then the compiled op's forward AD passes ``gradcheck`` and equals the built-in
    op's ``torch.func.jvp`` where torch has one."""
    import torch
    from torch.autograd.gradcheck import GradcheckError

    from transpiler.prove.tiers import builtin, tier_f1 as engine_f1

    try:
        engine_f1(subject, values)
    except NotApplicable:            # no engine kernel: the compiled op is checked below
        pass
    if not has_jvp(subject):
        raise NotApplicable("the formula defines no jvp")
    run = TorchRun(subject, values)
    _, tensors = run.named(run.arrays(), requires_grad=True)
    if not tensors:
        raise NotApplicable("no differentiable input")

    def compiled(*inputs: Any) -> tuple[Any, ...]:
        return tuple(_compiled_outputs(run, list(inputs)))
    try:
        torch.autograd.gradcheck(compiled, tuple(tensors), check_forward_ad=True, check_backward_ad=False,
                                 check_undefined_grad=False, check_batched_grad=False)
    except GradcheckError as error:
        raise TierFailure("forward mode", " ".join(str(error).split())[:400]) from None
    try:
        builtin(subject)
    except NotApplicable:
        return                       # no built-in op to compare the tangents with
    from transpiler.prove.tiers import builtin_outputs

    primals = tuple(t.detach() for t in tensors)
    generator = torch.Generator().manual_seed(0)
    tangents = tuple(torch.randn(t.shape, dtype=t.dtype, generator=generator) for t in primals)
    _, ours = torch.func.jvp(compiled, primals, tangents)
    try:
        _, theirs = torch.func.jvp(lambda *inputs: tuple(builtin_outputs(run, list(inputs))), primals, tangents)
    except RuntimeError:             # torch's own forward AD fails (NotImplementedError too): no oracle
        return                       # the tangents were proven against finite differences above
    for i, (mine, expected) in enumerate(zip(ours, theirs, strict=True)):
        compare(f"output {i} (compiled jvp)", as_numpy(mine), as_numpy(expected), "torch's built-in",
                CLOSE_ATOL, CLOSE_RTOL)


def tier_ca(subject: Subject, values: dict[str, Any]) -> None:
    """CA: the compiled op's backward under compiled autograd calls the formula's node and equals eager mode."""
    import torch
    from torch._dynamo import compiled_autograd

    run = TorchRun(subject, values)
    _, tensors = run.named(run.arrays(), requires_grad=True)
    if not tensors:
        raise NotApplicable("no differentiable input")

    def outputs() -> list[Any]:
        return [o for o in _compiled_outputs(run, tensors) if o.requires_grad]
    generator = torch.Generator().manual_seed(1)
    upstream = [torch.randn(o.shape, dtype=o.dtype, generator=generator) for o in outputs()]
    if not upstream:
        raise NotApplicable("no output carries a gradient")
    eager = torch.autograd.grad(outputs(), tensors, upstream, allow_unused=True)
    graphs = []

    def compiler(graph: Any) -> Any:
        graphs.append(graph)
        return graph
    outs = outputs()
    compiled_autograd.reset()        # a graph cached for an earlier case of the op would be reused
    with compiled_autograd._enable(compiler):
        got = torch.autograd.grad(outs, tensors, upstream, allow_unused=True)
    if len(graphs) != 1:
        raise TierFailure("compiled autograd", "did not capture the backward")
    functional = f"{NAMESPACES[subject.package]}_{next(o.grad_fn for o in outs if o.grad_fn is not None).name()}"
    if functional not in graphs[0].code:
        raise TierFailure("compiled autograd", f"the compiled graph does not call `{functional}`")
    for (label, _, _), g, e in zip(run.where, got, eager):
        if (g is None) != (e is None):
            raise TierFailure(f"input `{label}`", "a gradient under compiled autograd, none in eager mode"
                              if e is None else "no gradient under compiled autograd, one in eager mode")
        if g is not None:
            compare(f"input `{label}`", as_numpy(g), as_numpy(e), "eager", 0.0, 0.0)


COMPILED_RUNNERS = {"C1": tier_c1, "CT": tier_ct, "F1": tier_f1, "CA": tier_ca}
