"""Benchmark: backward time of every compiled formula op against the built-in torch op.

Every differentiable op of the library. Same inputs for both (moderately sized
float32 tensors, so kernel time rather than dispatch overhead dominates: the
hand-written ones below, else the op's largest case in tests/op_cases.py tiled
up to 512 x 512 elements), same upstream gradients; the graph is built
once and ``torch.autograd.grad(..., retain_graph=True)`` is timed, the two ops
interleaved, median of ``--repeat`` runs. Prints the per-op ratio
(compiled / built-in) and how the inputs were made, the median ratio (aim: at
most 1.0), the worst (aim: at most 1.3) and the ops above 1.3.

Usage: ``python benchmarks/cpp_backward.py [--repeat N] [--threads N] [--ops OP ...]``
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

from tests import op_cases  # noqa: E402
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
    images, pooled = normal(8, 16, 64, 64), (8, 16, 32, 32)        # pooled by a 3x3 window, stride 2, padding 1
    max_indices = torch.ops.aten.max_pool2d_with_indices(images, [3], [2], [1])[1]
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
        "outer": ((normal(n), normal(n)), {}),
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
        "max_pool2d_with_indices": ((images, [3], [2], [1], [1], False), {}),
        "max_pool2d_with_indices_backward": ((normal(*pooled), images, [3], [2], [1], [1], False, max_indices), {}),
        "avg_pool2d": ((images, [3], [2], [1], False, True, None), {}),
        "avg_pool2d_backward": ((normal(*pooled), images, [3], [2], [1], False, True, None), {}),
    }


# Why an op's compiled backward takes more time than torch's built-in one, where the cause is
# known (printed next to the ops above 1.3x): a floor a formula cannot remove, or, said so, work
# not done yet.
FLOORS = {
    "hardsigmoid": "torch's fused hardsigmoid_backward has no derivative, and the compiled double backward "
                   "differentiates what the backward calls: hardtanh_backward then / 6, 2 kernels",
    "layer_norm": "torch runs one fused native_layer_norm_backward, whose own derivative (torch's "
                  "layer_norm_double_backward) takes the total derivative through its mean and rstd arguments "
                  "and refuses gradients for them: not a formula of that op's own inputs, so not one the library "
                  "can prove by finite differences; composed from the input instead (about a dozen kernels)",
    "native_layer_norm": "as layer_norm",
    "ger": "a one-column result (vec2 of size 1): every BLAS product of the (N, 1) gradient with a vector "
           "(mv, mm, matmul alike) takes ~5x torch's broadcast multiply and sum; outer, the same formula, "
           "is below 1x on a square case",
    "linalg_vector_norm": "not a floor: general p guards the zero norm and zero elements with where/ones_like "
                          "(about 14 small kernels against torch's ~6); not sped up yet",
    "norm.ScalarOpt_dim": "as linalg_vector_norm (general p)",
    "logit": "torch calls its fused logit_backward only when no double backward is recorded (it has no "
             "derivative); a formula has one backward for both, composed: 5 kernels",
    "silu": "as logit: torch's fused silu_backward runs only without double backward; composed: 4 kernels",
    "log_sigmoid": "torch's fused log_sigmoid_backward reads a buffer that only log_sigmoid_forward returns; "
                   "composed: 3 kernels",
    "prod": "torch branches on the data (any zero?) and divides result by self when there is none; a static "
            "formula always computes the zero-exact product of the others (about 20 kernels)",
    "prod.dim_int": "as prod: torch branches on zeros in the data, a static formula cannot",
    "cumprod": "torch branches on the data (any zero?) and divides a reversed cumsum by self when there is "
               "none; a static formula always computes the exact form (a doubling recurrence: about 10 kernels per "
               "doubling of the scanned length, plus 12)",
    "pow.Scalar": "the exponent's gradient needs log(base) of a Scalar base: torch takes it in C++, a formula "
                  "can only take the log of a tensor it first fills (zeros_like, add, log)",
    "sgn": "torch returns a zero tensor that is never written (_is_zerotensor) for a real input; "
           "zeros_like writes its zeros",
    "max": "torch tests the 0-d extreme for NaN with .item() and builds one mask; a static formula builds "
           "both masks (isnan, eq) and selects",
    "min": "as max",
    "fmod.Tensor": "torch's other-gradient is one div with rounding_mode='trunc', which the library does not "
                   "declare: div + trunc",
}

TARGET_ELEMENTS = 1 << 18
"""Elements the largest input tensor of a generated case is tiled up to (512 x 512)."""


def _float32(value):
    """A torch value of an :class:`OpCase` in the benchmark's dtype: float tensors and dtypes become float32."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.float()
    if isinstance(value, list):
        return [_float32(v) for v in value]
    return torch.float32 if value is torch.float64 else value


def _tiled(value, factor: int):
    """``value`` repeated ``factor`` times along every dim longer than 1 (values stay in the case's
    domain; size-1 dims stay size 1, so broadcasting between arguments is kept)."""
    if isinstance(value, torch.Tensor) and value.dim():
        return value.repeat([factor if size > 1 else 1 for size in value.shape])
    if isinstance(value, list) and any(isinstance(v, torch.Tensor) for v in value):
        return [_tiled(v, factor) for v in value]      # a Tensor?[] index list keeps its None entries
    return value


def _tensors(values) -> list[torch.Tensor]:
    out = []
    for value in values:
        if isinstance(value, torch.Tensor):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, torch.Tensor))
    return out


def _outputs(out) -> list[torch.Tensor]:
    return [o for o in (out if isinstance(out, tuple) else (out,)) if isinstance(o, torch.Tensor)]


def _too_large(op: str, args: list, kwargs: dict) -> bool:
    """Whether ``op`` on ``args`` would make an output of more than 4 x :data:`TARGET_ELEMENTS`
    elements (tiling both operands of ``outer`` squares the output), found on the meta device;
    an op the meta device cannot size (data-dependent output: ``masked_select``) is let through."""
    meta = [[t if t is None else t.to("meta") for t in a]
            if isinstance(a, list) and any(isinstance(t, torch.Tensor) for t in a)
            else a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
    try:
        outputs = _outputs(_op(torch.ops.aten, op)(*meta, **kwargs))
    except NotImplementedError:
        return False
    except RuntimeError:
        return True
    return any(o.numel() > 4 * TARGET_ELEMENTS for o in outputs)


def _case_inputs(op: str) -> tuple[tuple, dict, tuple[int, ...], str]:
    """Benchmark arguments for ``op`` generated from its test cases (tests/op_cases.py): the case
    with the most elements, tiled up to about :data:`TARGET_ELEMENTS` elements when the tiled call
    runs in both libraries with the same output shapes (else the case as it is); returns the
    arguments, the differentiated positions and a label of how they were made."""
    candidates = sorted(op_cases.cases(op), key=lambda case: -max(
        (t.numel() for t in _tensors(op_cases.torch_args(case, requires_grad=False)[0])), default=0))
    best = candidates[0]
    for case in candidates[:3]:
        args, kwargs = op_cases.torch_args(case, requires_grad=False)
        args, kwargs = [_float32(a) for a in args], {k: _float32(v) for k, v in kwargs.items()}
        largest = max((t for t in _tensors(args) if t.dim()), key=torch.Tensor.numel, default=None)
        if largest is None or any(t.numel() == 0 for t in _tensors(args)):
            continue
        rank = max(1, sum(size > 1 for size in largest.shape))
        factor = max(1, round((TARGET_ELEMENTS / largest.numel()) ** (1 / rank)))
        tiled = [_tiled(a, factor) for a in args]
        if _too_large(op, tiled, kwargs):
            continue
        try:
            with torch.no_grad():
                ours = _outputs(_op(torch.ops.formulas, op)(*tiled, **kwargs))
                theirs = _outputs(_op(torch.ops.aten, op)(*tiled, **kwargs))
        except RuntimeError:
            continue
        if [o.shape for o in ours] == [o.shape for o in theirs]:
            return tuple(tiled), kwargs, case.differentiable, f"{case.id} tiled x{factor}"
    args, kwargs = op_cases.torch_args(best, requires_grad=False)
    return (tuple(_float32(a) for a in args), {k: _float32(v) for k, v in kwargs.items()}, best.differentiable,
            best.id)


def _op(namespace, op: str):
    name, _, overload = op.partition(".")
    return getattr(getattr(namespace, name), overload or "default")


def _prepare(fn, args: tuple, kwargs: dict, differentiable: tuple[int, ...]):
    """Fresh leaves for the ``differentiable`` positions, the graph of ``fn`` on them, and a
    closure timing one backward."""
    leaves, call_args = [], []
    for position, arg in enumerate(args):
        if position in differentiable and isinstance(arg, torch.Tensor):
            leaf = arg.clone().requires_grad_()
            leaves.append(leaf)
            call_args.append(leaf)
        elif position in differentiable and isinstance(arg, list):
            group = [t.clone().requires_grad_() for t in arg]
            leaves.extend(group)
            call_args.append(group)
        else:
            call_args.append(arg)
    out = fn(*call_args, **kwargs)
    outs = [o for o in _outputs(out) if o.is_floating_point() and o.requires_grad]
    upstream = [torch.ones_like(o) for o in outs]

    def backward() -> float:
        started = time.perf_counter()
        torch.autograd.grad(outs, leaves, upstream, retain_graph=True, allow_unused=True)
        return time.perf_counter() - started

    return backward


def _floating_positions(args: tuple) -> tuple[int, ...]:
    return tuple(i for i, arg in enumerate(args) if (isinstance(arg, torch.Tensor) and arg.is_floating_point())
                 or (isinstance(arg, list) and arg and isinstance(arg[0], torch.Tensor)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    parser.add_argument("--ops", nargs="*", help="only these ops (name.overload); default every op")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    built = subprocess.run([sys.executable, "-m", "transpiler.build"], cwd=REPO, capture_output=True, text=True)
    if built.returncode != 0:
        raise SystemExit(built.stderr)
    torch.ops.load_library(built.stdout.strip().splitlines()[-1])
    ops = sorted(f.op_name for f in load_library(str(REPO / "formulas")).formulas)
    if args.ops:
        ops = [op for op in ops if op in args.ops]
    hand_written = _inputs()
    ratios: dict[str, float] = {}
    print(f"{'op':34} {'compiled ms':>11} {'built-in ms':>11} {'ratio':>6}  inputs")
    for op in ops:
        if op in hand_written:
            call_args, kwargs = hand_written[op]
            differentiable, label = _floating_positions(call_args), "hand-written"
        else:
            call_args, kwargs, differentiable, label = _case_inputs(op)
        ours = _prepare(_op(torch.ops.formulas, op), call_args, kwargs, differentiable)
        theirs = _prepare(_op(torch.ops.aten, op), call_args, kwargs, differentiable)
        ours()   # warm-up
        try:
            theirs()
        except RuntimeError as err:       # hardsigmoid_backward: torch has no derivative of it
            print(f"{op:34} not timed: the built-in has no backward ({str(err).splitlines()[0]})", flush=True)
            continue
        mine, builtin = [], []
        for _ in range(args.repeat):
            mine.append(ours())
            builtin.append(theirs())
        ratio = statistics.median(mine) / statistics.median(builtin)
        ratios[op] = ratio
        print(f"{op:34} {statistics.median(mine) * 1e3:11.3f} {statistics.median(builtin) * 1e3:11.3f} "
              f"{ratio:6.2f}  {label}", flush=True)
    worst = max(ratios, key=ratios.get)
    print(f"median ratio over {len(ratios)} ops: {statistics.median(ratios.values()):.3f} (aim: <= 1.0); "
          f"worst {ratios[worst]:.2f} ({worst}; aim: <= 1.3)")
    slow = sorted((op for op in ratios if ratios[op] > 1.3), key=ratios.get, reverse=True)
    print(f"above 1.3x: {', '.join(f'{op} {ratios[op]:.2f}' for op in slow) or 'none'}")
    for op in slow:
        print(f"  {op}: {FLOORS.get(op, 'no known floor (timing noise, or not sped up yet)')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
