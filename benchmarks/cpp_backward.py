"""Benchmark: backward time of every compiled formula op against the built-in torch op.

Same inputs for both (moderately sized float32 tensors, so kernel time rather
than dispatch overhead dominates), same upstream gradients; the graph is built
once and ``torch.autograd.grad(..., retain_graph=True)`` is timed, the two ops
interleaved, median of ``--repeat`` runs. Prints the per-op ratio
(compiled / built-in), the median ratio (aim: at most 1.0) and the worst (aim: at most 1.3).

Usage: ``python benchmarks/cpp_backward.py [--repeat N] [--threads N]``
(builds out_cpp/ first, cached, with ``python -m transpiler.build``).
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from transpiler.frontend import load_library  # noqa: E402


def _inputs() -> dict[str, tuple[tuple, dict]]:
    """Benchmark arguments per op (``name.overload``); tensors that require grad are float32."""
    g = torch.Generator().manual_seed(0)

    def normal(*shape):
        return torch.randn(*shape, generator=g)

    def positive(*shape):
        return torch.rand(*shape, generator=g) + 0.5

    n = 512
    a, b = normal(n, n), normal(n, n)
    index = torch.randint(0, n, (n, n // 2), generator=g)
    unary = {op: ((positive(n, n) if op in ("log", "sqrt") else normal(n, n),), {})
             for op in ("neg", "exp", "log", "sin", "cos", "tanh", "sigmoid", "sqrt", "relu")}
    return {
        **unary,
        "pow.Tensor_Scalar": ((positive(n, n), 2.5), {}),
        "add.Tensor": ((a, normal(n, 1)), {"alpha": 2.0}),
        "sub.Tensor": ((a, b), {"alpha": 0.5}),
        "mul.Tensor": ((a, b), {}),
        "div.Tensor": ((a, positive(n, n)), {}),
        "mul.Scalar": ((a, 2.5), {}),
        "div.Scalar": ((a, 2.5), {}),
        "sum": ((a,), {}),
        "sum.dim_IntList": ((a, [1], False), {}),
        "mean.dim": ((a, [0], True), {}),
        "var_mean.dim": ((a, [1], True, False), {}),
        "max.dim": ((a, 1, False), {}),
        "_softmax": ((a, 1, False), {}),
        "_log_softmax": ((a, 1, False), {}),
        "mm": ((normal(256, n), normal(n, 256)), {}),
        "addmm": ((normal(256), normal(256, n), normal(n, 256)), {"beta": 0.5, "alpha": 2.0}),
        "t": ((a,), {}),
        "view": ((a, [n * n]), {}),
        "reshape": ((a, [n // 2, 2 * n]), {}),
        "permute": ((normal(64, 64, 64), [2, 0, 1]), {}),
        "expand": ((normal(n, 1), [n, n]), {}),
        "unsqueeze": ((a, 1), {}),
        "narrow": ((a, 0, 10, 400), {}),
        "cat": (([a, b],), {"dim": 0}),
        "where.self": ((normal(n, n) > 0, a, b), {}),
        "gather": ((a, 1, index), {}),
        "scatter_add": ((a, 1, index, normal(n, n // 2)), {}),
        "_to_copy": ((a,), {}),
        "tanh_backward": ((normal(n, n), normal(n, n).tanh()), {}),
        "sigmoid_backward": ((normal(n, n), normal(n, n).sigmoid()), {}),
        "threshold_backward": ((normal(n, n), normal(n, n), 0.0), {}),
        "_softmax_backward_data": ((normal(n, n), normal(n, n).softmax(1), 1, torch.float32), {}),
        "_log_softmax_backward_data": ((normal(n, n), normal(n, n).log_softmax(1), 1, torch.float32), {}),
        "gather_backward": ((normal(n, n // 2), a, 1, index, False), {}),
        "value_selecting_reduction_backward": ((normal(n), 1, torch.randint(0, n, (n,), generator=g), [n, n],
                                                False), {}),
    }


def _op(namespace, op: str):
    name, _, overload = op.partition(".")
    return getattr(getattr(namespace, name), overload or "default")


def _prepare(fn, args: tuple, kwargs: dict):
    """Fresh leaves, the graph of ``fn`` on them, and a closure timing one backward."""
    leaves, call_args = [], []
    for arg in args:
        if isinstance(arg, torch.Tensor) and arg.is_floating_point():
            leaf = arg.clone().requires_grad_()
            leaves.append(leaf)
            call_args.append(leaf)
        elif isinstance(arg, list) and arg and isinstance(arg[0], torch.Tensor):
            group = [t.clone().requires_grad_() for t in arg]
            leaves.extend(group)
            call_args.append(group)
        else:
            call_args.append(arg)
    out = fn(*call_args, **kwargs)
    outs = [o for o in (out if isinstance(out, tuple) else (out,)) if o.is_floating_point()]
    upstream = [torch.ones_like(o) for o in outs]

    def backward() -> float:
        started = time.perf_counter()
        torch.autograd.grad(outs, leaves, upstream, retain_graph=True, allow_unused=True)
        return time.perf_counter() - started

    return backward


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    built = subprocess.run([sys.executable, "-m", "transpiler.build"], cwd=REPO, capture_output=True, text=True)
    if built.returncode != 0:
        raise SystemExit(built.stderr)
    torch.ops.load_library(built.stdout.strip().splitlines()[-1])
    ops = sorted(f.op_name for f in load_library(str(REPO / "formulas")).formulas)
    inputs = _inputs()
    ratios = []
    print(f"{'op':22} {'compiled ms':>12} {'built-in ms':>12} {'ratio':>7}")
    for op in ops:
        if op not in inputs:
            print(f"{op:22} {'(no benchmark inputs)':>33}")
            continue
        call_args, kwargs = inputs[op]
        ours = _prepare(_op(torch.ops.formulas, op), call_args, kwargs)
        theirs = _prepare(_op(torch.ops.aten, op), call_args, kwargs)
        ours(), theirs()   # warm-up
        mine, builtin = [], []
        for _ in range(args.repeat):
            mine.append(ours())
            builtin.append(theirs())
        ratio = statistics.median(mine) / statistics.median(builtin)
        ratios.append(ratio)
        print(f"{op:22} {statistics.median(mine) * 1e3:12.3f} {statistics.median(builtin) * 1e3:12.3f} {ratio:7.2f}")
    worst = max(ratios)
    print(f"median ratio over {len(ratios)} ops: {statistics.median(ratios):.3f} (aim: <= 1.0); "
          f"worst {worst:.2f} (aim: <= 1.3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
