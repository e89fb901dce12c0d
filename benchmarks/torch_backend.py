"""Benchmark: per-call forward+backward of formulas inside torch, no build (DESIGN section 9).

For a few ops (``sin``, ``mul.Tensor``, ``sum.dim_IntList``) on small float32
tensors, so that per-call overhead dominates, one forward and one backward
(``torch.autograd.grad``) are timed for five implementations of the same math,
interleaved, median of ``--repeat`` rounds of ``--calls`` calls:

* ``builtin``: torch's own kernel and autograd;
* ``function``: a hand-written ``torch.autograd.Function`` (forward below
  autograd, ``save_for_backward``, backward in torch ops);
* ``custom_op``: a hand-written ``torch.library.custom_op`` + ``register_autograd``;
* ``override``: the aten op with the formula swapped in (``formulas.torch.override``);
* ``formula_op``: the formula as a custom op (``formulas.torch.custom_ops``);
* ``compiled``: with ``--library PATH`` (the shipped library built by
  ``python -m transpiler.build``), the aten op with the formula's transpiled
  C++ node swapped in (``override(compiled=True)``).

Prints microseconds per call and the ratios override / function, formula_op /
custom_op and each / builtin (aims: override no slower than the hand-written
Function, compiled within 1.1x of builtin).

Usage: ``python benchmarks/torch_backend.py [--repeat N] [--calls N] [--size N] [--library PATH]``
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from formulas.torch import custom_ops, override  # noqa: E402


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


@torch.library.custom_op("bench_hand::sin", mutates_args=())
def hand_sin(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x)


@torch.library.custom_op("bench_hand::mul", mutates_args=())
def hand_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a * b


@torch.library.custom_op("bench_hand::sum_dim", mutates_args=())
def hand_sum_dim(x: torch.Tensor, dim: list[int]) -> torch.Tensor:
    return x.sum(dim)


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


hand_sin.register_autograd(_sin_backward, setup_context=_sin_setup)
hand_mul.register_autograd(_mul_backward, setup_context=_mul_setup)
hand_sum_dim.register_autograd(_sum_backward, setup_context=_sum_setup)


def cases(size: int) -> dict[str, tuple[tuple, dict[str, Callable]]]:
    """Per op: its arguments, and the five implementations."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=g).requires_grad_()
    b = torch.randn(size, size, generator=g).requires_grad_()
    aten = torch.ops.aten
    ours = custom_ops("formulas", namespace="bench_formulas").ops
    return {
        "sin": ((a,), {"builtin": aten.sin.default, "function": SinFunction.apply, "custom_op": hand_sin,
                       "override": aten.sin.default, "formula_op": ours["sin"]}),
        "mul.Tensor": ((a, b), {"builtin": aten.mul.Tensor, "function": MulFunction.apply, "custom_op": hand_mul,
                                "override": aten.mul.Tensor, "formula_op": ours["mul.Tensor"]}),
        "sum.dim_IntList": ((a, [1]), {"builtin": aten.sum.dim_IntList, "function": SumDimFunction.apply,
                                       "custom_op": hand_sum_dim, "override": aten.sum.dim_IntList,
                                       "formula_op": ours["sum.dim_IntList"]}),
    }


def per_call_us(fn: Callable, args: tuple, calls: int, op: str | None, compiled: bool = False) -> float:
    """Microseconds per forward+backward call of ``fn`` (``op``: run with that op overridden)."""
    leaves = [a for a in args if isinstance(a, torch.Tensor)]
    context = override([op], compiled=compiled) if op else _nothing()
    with context:
        start = time.perf_counter()
        for _ in range(calls):
            torch.autograd.grad(fn(*args).sum(), leaves)
        return (time.perf_counter() - start) / calls * 1e6


def measure(op: str, name: str, impls: dict[str, Callable], args: tuple, calls: int) -> float:
    """:func:`per_call_us` of implementation ``name`` of ``op``."""
    overridden = op if name in ("override", "compiled") else None
    return per_call_us(impls[name], args, calls, overridden, compiled=name == "compiled")


class _nothing:
    def __enter__(self) -> None: ...
    def __exit__(self, *exc: object) -> None: ...


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--library", help="the built shipped library (formulas_ops.so): adds the compiled override")
    options = parser.parse_args(argv)
    torch.set_num_threads(1)
    names: tuple[str, ...] = ("builtin", "function", "custom_op", "override", "formula_op")
    if options.library:
        from transpiler.build import load_library

        load_library(options.library)
        names += ("compiled",)
    print(f"per call forward+backward, float32 {options.size}x{options.size}, median of {options.repeat} x "
          f"{options.calls} calls, us (ratio to builtin)")
    print(f"{'op':<18}" + "".join(f"{n:>20}" for n in names) + f"{'override/function':>20}{'formula_op/custom_op':>22}")
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
              f"{median['formula_op'] / median['custom_op']:>21.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
