"""C1 and CT for every compiled operator of the imported derivatives.yaml corpus, on OpInfo inputs.

Run as a script (a fresh process: the corpus library registers ``torch.ops.<namespace>``)::

    python tests/yaml/corpus_proof.py LIBRARY NAMESPACE OPS_JSON

``OPS_JSON``: the emitted operators (``name.overload`` list). Prints one JSON object:
operator -> ``{"status": ..., "samples": n, "reason": ...}``, where status is

* ``proven``: on every applicable float64 OpInfo sample (at most ``MAX_SAMPLES``),
  torch ``gradcheck`` and ``gradgradcheck`` pass on the compiled op (C1) and its
  forward value, first and second derivatives equal torch's built-in op's (CT);
* ``failed``: a sample where one of those does not hold (``reason`` says which);
* ``no inputs``: no OpInfo for the operator, or none of its samples calls this
  overload with a differentiable float64 output.

The inputs are torch's own (``torch.testing._internal.common_methods_invocations``),
so the cases are not ours.
"""
from __future__ import annotations

import json
import sys

import torch
from torch.autograd import gradcheck, gradgradcheck

MAX_SAMPLES = 4


def opinfos() -> dict[str, list]:
    from torch.testing._internal.common_methods_invocations import op_db

    table: dict[str, list] = {}
    for info in op_db:
        names = {info.name, *(getattr(a, "name", a) for a in getattr(info, "aliases", ()) or ())}
        aten = getattr(info, "aten_name", None)
        names |= {aten} if aten else set()
        for name in names:
            table.setdefault(name, []).append(info)
    return table


def _tensors(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    found = [a for a in args if isinstance(a, torch.Tensor)]
    found += [t for a in args if isinstance(a, (list, tuple)) for t in a if isinstance(t, torch.Tensor)]
    return [t for t in found if t.dtype == torch.float64 and t.requires_grad]


def _outputs(value) -> list[torch.Tensor]:
    values = value if isinstance(value, (tuple, list)) else (value,)
    return [v for v in values if isinstance(v, torch.Tensor) and v.requires_grad and v.dtype.is_floating_point]


def _grads(fn, args, kwargs, inputs, seed):
    """First and second derivatives of a fixed random projection of ``fn``'s differentiable outputs."""
    outputs = _outputs(fn(*args, **kwargs))
    generator = torch.Generator().manual_seed(seed)
    weights = [torch.randn(o.shape, dtype=o.dtype, generator=generator) for o in outputs]
    total = sum((o * w).sum() for o, w in zip(outputs, weights))
    first = torch.autograd.grad(total, inputs, create_graph=True, allow_unused=True)
    firsts = [g for g in first if g is not None and g.requires_grad]
    if not firsts:
        return outputs, first, ()
    second = torch.autograd.grad(sum((g * g).sum() for g in firsts), inputs, allow_unused=True)
    return outputs, first, second


def _same(a, b) -> bool:
    if a is None or b is None:
        return (a is None or not bool(a.abs().sum())) and (b is None or not bool(b.abs().sum()))
    return a.shape == b.shape and torch.allclose(a, b, rtol=1e-7, atol=1e-9, equal_nan=True)


def prove(ours, theirs, samples) -> tuple[str, int, str]:
    used = 0
    for sample in samples:
        args, kwargs = (sample.input, *sample.args), dict(sample.kwargs)
        inputs = _tensors(args, kwargs)
        if not inputs:
            continue
        try:
            value = ours(*args, **kwargs)
        except (RuntimeError, TypeError) as error:
            if any(word in str(error).lower() for word in ("overload", "schema", "expected a value of type")):
                continue          # this sample calls another overload
            return "failed", used, f"forward raised {type(error).__name__}: {str(error)[:160]}"
        if not _outputs(value):
            continue
        used += 1

        def positional(*tensors):
            replaced = iter(tensors)
            call = [next(replaced) if any(a is t for t in inputs) else a for a in args]
            return ours(*call, **kwargs)
        try:
            if not gradcheck(positional, tuple(inputs), raise_exception=False):
                return "failed", used, "C1: gradcheck"
            if not gradgradcheck(positional, tuple(inputs), raise_exception=False):
                return "failed", used, "C1: gradgradcheck"
            mine = _grads(ours, args, kwargs, inputs, used)
            torch_ = _grads(theirs, args, kwargs, inputs, used)
        except RuntimeError as error:
            return "failed", used, f"{type(error).__name__}: {str(error)[:160]}"
        for label, a, b in (("forward", mine[0], torch_[0]), ("first", mine[1], torch_[1]),
                            ("second", mine[2], torch_[2])):
            if len(a) != len(b) or not all(_same(x, y) for x, y in zip(a, b)):
                return "failed", used, f"CT: {label} derivative differs from torch"
        if used >= MAX_SAMPLES:
            break
    return ("proven", used, "") if used else ("no inputs", 0, "no OpInfo sample calls this overload")


def main(library: str, namespace: str, ops_json: str) -> None:
    torch.ops.load_library(library)
    table = opinfos()
    results = {}
    for op in json.loads(ops_json):
        base, _, overload = op.partition(".")
        infos = table.get(base, [])
        if not infos:
            results[op] = {"status": "no inputs", "samples": 0, "reason": "no OpInfo"}
            continue
        ours = getattr(getattr(torch.ops, namespace), base)
        ours = getattr(ours, overload or "default")
        theirs = getattr(getattr(torch.ops.aten, base), overload or "default")
        status, used, reason = "no inputs", 0, "no OpInfo sample calls this overload"
        for info in infos:
            if not info.supports_autograd:
                continue
            samples = info.sample_inputs("cpu", torch.float64, requires_grad=True)
            status, used, reason = prove(ours, theirs, samples)
            if status != "no inputs":
                break
        results[op] = {"status": status, "samples": used, "reason": reason}
    print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main(*sys.argv[1:4])
