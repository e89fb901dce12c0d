"""The compiled tiers of ``transpile prove --compiled``: the package transpiled and built as
``transpile`` and ``python -m transpiler.build`` do (cached), then its ``torch.ops.<namespace>``
operators checked.

=====  ==================================================================================
C1     the compiled op passes ``torch.autograd.gradcheck`` and ``gradgradcheck``
CT     the compiled op's gradients equal the built-in torch op's (first order)
=====  ==================================================================================
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from transpiler.prove.tiers import (
    EXACT_ATOL,
    EXACT_RTOL,
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

COMPILED_MEANING = {
    "C1": "compiled op: torch gradcheck + gradgradcheck",
    "CT": "compiled op gradients == the built-in torch op's",
}
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


def tier_ct(subject: Subject, values: dict[str, Any]) -> None:
    import torch

    from transpiler.prove.tiers import builtin, output_weights

    builtin(subject)
    run = TorchRun(subject, values)
    _, tensors = run.named(run.arrays(), requires_grad=True)
    outs = [o for o in flat_tensors(differentiable_returns(subject, _call_compiled(run, tensors)))
            if isinstance(o, torch.Tensor) and o.is_floating_point()]
    weights = output_weights([tuple(o.shape) for o in outs])
    got = torch.autograd.grad(outs, tensors, [torch.from_numpy(w) for w in weights], allow_unused=True)
    expected = run.builtin_vjp(weights)
    for slot, ((label, _, _), g, e) in enumerate(zip(run.where, got, expected)):
        e = np.zeros(run.arrays()[slot].shape) if e is None else e
        try:
            compare(f"input `{label}`", None if g is None else as_numpy(g), e, "torch's built-in", EXACT_ATOL, EXACT_RTOL)
        except TierFailure as failure:
            failure.explanation = run.explain(slot, e, weights)
            raise


COMPILED_RUNNERS = {"C1": tier_c1, "CT": tier_ct}
