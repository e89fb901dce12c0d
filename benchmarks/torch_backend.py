"""Benchmark: per-call forward+backward of formulas inside torch, no build (DESIGN section 9).

For a few ops (``sin``, ``mul.Tensor``, ``sum.dim_IntList``, ``logsumexp``) on small float32
tensors, so that per-call overhead dominates, one forward and one backward
(``torch.autograd.grad``) are timed for five implementations of the same math,
interleaved, median of ``--repeat`` rounds of ``--calls`` calls:

* ``builtin``: torch's own kernel and autograd;
* ``function``: a hand-written ``torch.autograd.Function`` (forward below
  autograd, ``save_for_backward``, backward in torch ops);
* ``custom_op``: a hand-written ``torch.library.custom_op`` + ``register_autograd``;
* ``floor``: the aten op with the hand-written Function registered as its autograd
  kernel (``torch.library`` at ``AutogradCPU``: a kernel that applies the Function, its forward
  below autograd, where an input requires grad, else runs torch's kernel below autograd), the
  floor of any Python override: torch's dispatch into a Python kernel plus the Function;
* ``override``: the aten op with the formula swapped in (``formulas.torch.override``);
* ``formula_op``: the formula as a custom op (``formulas.torch.custom_ops``);
* ``compiled``: with ``--library PATH`` (the shipped library built by
  ``python -m transpiler.build``), the aten op with the formula's transpiled
  C++ node swapped in (``override(compiled=True)``: the library registers its C++ kernel
  for the aten op itself, no Python in the call).

Prints microseconds per call and the ratios override / function, floor / function (what no
Python override can go below), override / floor, formula_op / custom_op, compiled / function and
each / builtin (aims: override no slower than the hand-written Function, compiled within 1.1x of
builtin). ``--cpu-time`` times with the process's CPU time (steadier on a shared, loaded
machine); ``--count`` prints the Python calls one forward+backward makes per implementation
instead: deterministic where timings on a loaded machine are not.

Usage: ``python benchmarks/torch_backend.py [--repeat N] [--calls N] [--size N] [--library PATH]
[--cpu-time] [--count]``
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from formulas.torch import custom_ops, override  # noqa: E402


#: The clock timings read: wall time, or with ``--cpu-time`` the process's CPU time.
clock = time.perf_counter


class SinFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.cos(x)


class MulFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, grad * a


class SumDimFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        ctx.sizes, ctx.dim = x.shape, dim
        return x.sum(dim)

    @staticmethod
    def backward(ctx, grad):
        return grad.unsqueeze(ctx.dim[0]).expand(ctx.sizes), None


class LogsumexpFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        result = torch.logsumexp(x, dim)
        ctx.save_for_backward(x, result)
        ctx.dim = dim
        return result

    @staticmethod
    def backward(ctx, grad):
        x, result = ctx.saved_tensors
        return grad.unsqueeze(ctx.dim[0]) * torch.exp(x - result.unsqueeze(ctx.dim[0])), None


@torch.library.custom_op("bench_hand::sin", mutates_args=())
def hand_sin(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x)


@torch.library.custom_op("bench_hand::mul", mutates_args=())
def hand_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a * b


@torch.library.custom_op("bench_hand::sum_dim", mutates_args=())
def hand_sum_dim(x: torch.Tensor, dim: list[int]) -> torch.Tensor:
    return x.sum(dim)


@torch.library.custom_op("bench_hand::logsumexp", mutates_args=())
def hand_logsumexp(x: torch.Tensor, dim: list[int]) -> torch.Tensor:
    return torch.logsumexp(x, dim)


def _sin_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _sin_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * torch.cos(x)


def _mul_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _mul_backward(ctx, grad):
    a, b = ctx.saved_tensors
    return grad * b, grad * a


def _sum_setup(ctx, inputs, output):
    ctx.sizes, ctx.dim = inputs[0].shape, inputs[1]


def _sum_backward(ctx, grad):
    return grad.unsqueeze(ctx.dim[0]).expand(ctx.sizes), None


def _logsumexp_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], output)
    ctx.dim = inputs[1]


def _logsumexp_backward(ctx, grad):
    x, result = ctx.saved_tensors
    return grad.unsqueeze(ctx.dim[0]) * torch.exp(x - result.unsqueeze(ctx.dim[0])), None


hand_sin.register_autograd(_sin_backward, setup_context=_sin_setup)
hand_logsumexp.register_autograd(_logsumexp_backward, setup_context=_logsumexp_setup)
hand_mul.register_autograd(_mul_backward, setup_context=_mul_setup)
hand_sum_dim.register_autograd(_sum_backward, setup_context=_sum_setup)


@contextlib.contextmanager
def function_as_kernel(op: str, function: type[torch.autograd.Function]):
    """The aten operator ``op`` with ``function`` as its autograd kernel, its forward below
    autograd (as the override's): the floor of a Python override."""

    class Below(function):
        @staticmethod
        def forward(ctx, *args):
            with torch._C._AutoDispatchBelowAutograd():
                return function.forward(ctx, *args)

    apply = super(torch.autograd.Function, Below).apply     # without Function.apply's Python layer
    name, _, overload = op.partition(".")
    below = getattr(getattr(torch.ops.aten, name), overload or "default")._op

    def kernel(*args):      # the least a kernel does: record only where autograd has something to record
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            return apply(*args)
        with torch._C._AutoDispatchBelowAutograd():
            return below(*args)

    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
        library.impl(op, kernel, "AutogradCPU")
    try:
        yield
    finally:
        library._destroy()


def cases(size: int) -> dict[str, tuple[tuple, dict[str, Callable]]]:
    """Per op: its arguments, and the implementations."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=g).requires_grad_()
    b = torch.randn(size, size, generator=g).requires_grad_()
    aten = torch.ops.aten
    ours = custom_ops("formulas", namespace="bench_formulas").ops
    return {
        "sin": ((a,), {"builtin": aten.sin.default, "function": SinFunction.apply, "custom_op": hand_sin,
                       "floor": aten.sin.default, "override": aten.sin.default, "formula_op": ours["sin"]}),
        "mul.Tensor": ((a, b), {"builtin": aten.mul.Tensor, "function": MulFunction.apply, "custom_op": hand_mul,
                                "floor": aten.mul.Tensor, "override": aten.mul.Tensor,
                                "formula_op": ours["mul.Tensor"]}),
        "sum.dim_IntList": ((a, [1]), {"builtin": aten.sum.dim_IntList, "function": SumDimFunction.apply,
                                       "custom_op": hand_sum_dim, "floor": aten.sum.dim_IntList,
                                       "override": aten.sum.dim_IntList, "formula_op": ours["sum.dim_IntList"]}),
        "logsumexp": ((a, [1]), {"builtin": aten.logsumexp.default, "function": LogsumexpFunction.apply,
                                 "custom_op": hand_logsumexp, "floor": aten.logsumexp.default,
                                 "override": aten.logsumexp.default, "formula_op": ours["logsumexp"]}),
    }


FUNCTIONS = {"sin": SinFunction, "mul.Tensor": MulFunction, "sum.dim_IntList": SumDimFunction,
             "logsumexp": LogsumexpFunction}


def context(op: str, name: str) -> contextlib.AbstractContextManager:
    """What implementation ``name`` of ``op`` runs in: the op overridden, or nothing."""
    if name in ("override", "compiled"):
        return override([op], compiled=name == "compiled")
    if name == "floor":
        return function_as_kernel(op, FUNCTIONS[op])
    return contextlib.nullcontext()


def measure(op: str, name: str, impls: dict[str, Callable], args: tuple, calls: int) -> float:
    """Microseconds per forward+backward call of implementation ``name`` of ``op``."""
    fn = impls[name]
    leaves = [a for a in args if isinstance(a, torch.Tensor)]
    with context(op, name):
        start = clock()
        for _ in range(calls):
            torch.autograd.grad(fn(*args).sum(), leaves)
        return (clock() - start) / calls * 1e6


def python_calls(op: str, name: str, impls: dict[str, Callable], args: tuple) -> int:
    """Python function calls (and generator resumptions) one forward+backward of implementation
    ``name`` of ``op`` makes, the benchmark's own loop and ``.sum()`` included."""
    fn = impls[name]
    leaves = [a for a in args if isinstance(a, torch.Tensor)]
    calls = 0

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        calls += event == "call"

    with context(op, name):
        torch.autograd.grad(fn(*args).sum(), leaves)        # warm: caches filled
        sys.setprofile(count)
        try:
            torch.autograd.grad(fn(*args).sum(), leaves)
        finally:
            sys.setprofile(None)
    return calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--library", help="the built shipped library (formulas_ops.so): adds the compiled override")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with the process's CPU time, not wall time: steadier on a loaded machine")
    parser.add_argument("--count", action="store_true",
                        help="print the Python calls of one forward+backward per implementation instead of timings")
    options = parser.parse_args(argv)
    torch.set_num_threads(1)
    names: tuple[str, ...] = ("builtin", "function", "custom_op", "floor", "override", "formula_op")
    if options.library:
        from transpiler.build import load_library

        load_library(options.library)
        names += ("compiled",)
    if options.count:
        print("Python calls per forward+backward (sys.setprofile 'call' events)")
        print(f"{'op':<18}" + "".join(f"{n:>12}" for n in names))
        for op, (args, impls) in cases(options.size).items():
            impls["compiled"] = impls["override"]
            print(f"{op:<18}" + "".join(f"{python_calls(op, n, impls, args):>12}" for n in names))
        return 0
    if options.cpu_time:
        global clock
        clock = time.process_time
    print(f"per call forward+backward, float32 {options.size}x{options.size}, median of {options.repeat} x "
          f"{options.calls} calls, us of {'CPU' if options.cpu_time else 'wall'} time (ratio to builtin)")
    print(f"{'op':<18}" + "".join(f"{n:>20}" for n in names) +
          f"{'override/function':>20}{'floor/function':>17}{'override/floor':>17}{'formula_op/custom_op':>22}" +
          (f"{'compiled/function':>20}" if options.library else ""))
    for op, (args, impls) in cases(options.size).items():
        times: dict[str, list[float]] = {n: [] for n in names}
        impls["compiled"] = impls["override"]
        for name in names:                          # warm up (first calls build caches)
            measure(op, name, impls, args, 5)
        for _ in range(options.repeat):
            for name in names:
                times[name].append(measure(op, name, impls, args, options.calls))
        median = {n: statistics.median(t) for n, t in times.items()}
        cells = "".join(f"{median[n]:>11.1f} ({median[n] / median['builtin']:>5.2f}x)" for n in names)
        print(f"{op:<18}{cells}{median['override'] / median['function']:>19.2f}x"
              f"{median['floor'] / median['function']:>16.2f}x{median['override'] / median['floor']:>16.2f}x"
              f"{median['formula_op'] / median['custom_op']:>21.2f}x" +
              (f"{median['compiled'] / median['function']:>19.2f}x" if options.library else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
