"""Reference engine against HIPS ``autograd`` and torch eager (DESIGN section 8).

Three workloads, each the same computation in all three systems, timed in
one run (best of ``--repeat`` rounds, the systems taking turns within a round), printed with the ratios engine / peer:

* ``chain``: forward + backward of a 1,200-op elementwise chain on 16-element
  float64 arrays (per-op Python overhead);
* ``mlp``: one training step of a 2-layer MLP (64x32 batch, 64 hidden, 10
  classes, log-softmax cross entropy, SGD update);
* ``large``: forward + backward of a 24-op elementwise chain on 1M elements;

and the cost of one operator, ``x.sin()`` on 16 elements, recorded and under
``no_grad``, next to ``numpy.sin`` on the same array.

The chain is also run as *formulas alone*: the four formulas called directly
(their forward returns the closure, the closures then run in reverse order),
with no recording, scheduling or checks. No engine that runs these formulas as
written can beat that time; the engine's time minus it is its bookkeeping.

The chain is also run on *a minimal Python tape* (:class:`TapeValue`, micrograd's core on
NumPy): per operation the NumPy call, one result object holding the array, its parents and a
closure; backward a topological walk calling each closure and summing gradients, the chain's
math as its formulas do it. It is the least any reverse-mode engine written in Python does per
operation, so it shows where torch eager sits against what a Python engine can do at all; the
engine's ratio to it is printed in the same run. Measured (CPU time, load 15 to 17): the tape
is 0.45x to 0.52x torch eager, the formulas alone 0.77x to 0.81x, the engine 1.31x to 1.36x:
a Python engine can beat torch eager by about 2x on 16-element operations at the limit, and
1.0x torch leaves these formulas about 0.2x torch (some 1.2 us per operation) for all of
recording, scheduling and checking, where the engine spends 2.6 to 3.1 us.

Timings are the best of ``--repeat`` rounds, which leave out most of the cycle collector's
full collections: a graph's objects promoted to the oldest generation make one every dozen or
so chain runs, and it scans every object of the process (torch's and the formula models'
included). Amortised they add to the engine and to HIPS autograd (about 9 tracked objects
kept per operation each, ``--count``), and much less to the tape (4.5), nothing to torch.

The chain, the MLP step and the large workload are also run as *NumPy calls alone*: the
bare NumPy calls their math needs, no framework. Where torch beats that (its
C++ dispatch against NumPy's per-call overhead on 16 elements, its vectorised
kernels on 1M), no engine that calls NumPy can match torch. On the MLP step it does not:
NumPy's 64x32 by 32x64 float64 matmul takes about 6 us where torch's takes 9.5, an
elementwise op on 640 elements 0.5 to 0.9 us where torch's takes 1.2 to 2.2, and the step's
NumPy calls alone take about 0.3x torch eager.

Run: ``python benchmarks/engine.py [--repeat N] [--cpu-time]``; ``--cpu-time`` times with
the process's CPU time (steadier on a shared, loaded machine); ``--count`` prints Python
calls and bytecodes per chain operator (engine forward and backward, the formulas alone, the
minimal tape, HIPS autograd) and the objects the cycle collector tracks that a forward keeps
per operator instead: deterministic where timings on a loaded machine are not.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from typing import Callable

import autograd
import autograd.numpy as anp
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import reference_engine as engine  # noqa: E402

CHAIN_OPS = 1200
LARGE_OPS = 24


#: The clock timings read: wall time, or with ``--cpu-time`` the process's CPU time.
clock = time.perf_counter


def _best_interleaved(runs: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Best time of each system; the systems take turns, so a load spike hits all of them."""
    for fn in runs.values():
        fn()   # warm-up: caches, allocator
    best = {name: float("inf") for name in runs}
    for _ in range(repeat):
        for name, fn in runs.items():
            start = clock()
            fn()
            best[name] = min(best[name], clock() - start)
    return best


# ----------------------------------------------------------------------------- the chain
def _chain(x, c, ops: int, sin, tanh):
    """``ops`` operations cycling through sin, multiply, tanh, add."""
    for i in range(ops // 4):
        x = sin(x)
        x = x * c
        x = tanh(x)
        x = x + c
    return x


def chain_workloads(size: int, ops: int) -> dict[str, Callable[[], object]]:
    rng = np.random.default_rng(0)
    x0, c0 = rng.standard_normal(size), rng.uniform(0.5, 1.0, size)

    def run_engine():
        x = engine.tensor(x0, requires_grad=True)
        c = engine.tensor(c0)
        _chain(x, c, ops, engine.Tensor.sin, engine.Tensor.tanh).sum().backward()
        return x.grad

    def run_hips():
        return autograd.grad(lambda x: anp.sum(_chain(x, c0, ops, anp.sin, anp.tanh)))(x0)

    def run_torch():
        x = torch.tensor(x0, requires_grad=True)
        c = torch.tensor(c0)
        _chain(x, c, ops, torch.sin, torch.tanh).sum().backward()
        return x.grad

    return {"engine": run_engine, "autograd": run_hips, "torch": run_torch}


def formulas_alone(size: int, ops: int) -> Callable[[], object]:
    """The chain's forward and backward as bare formula calls: the floor for running them."""
    rng = np.random.default_rng(0)
    x0, c0 = rng.standard_normal(size), rng.uniform(0.5, 1.0, size)
    formula = {name: engine.dispatcher.overload(name).formula for name in ("sin", "mul.Tensor", "tanh", "add.Tensor")}
    sin, mul, tanh, add = formula["sin"], formula["mul.Tensor"], formula["tanh"], formula["add.Tensor"]
    first_only = (True, False)     # the needs_input_grad of x * c and x + c

    def run():
        with engine.no_grad():
            x, c = engine.tensor(x0), engine.tensor(c0)
            tape = []
            for _ in range(ops // 4):
                x, backward = sin(x)
                tape.append(backward)
                x, backward = mul(x, c)
                tape.append(backward)
                x, backward = tanh(x)
                tape.append(backward)
                x, backward = add(x, c)
                tape.append(backward)
            grad = engine.tensor(np.ones(size))
            for i in range(len(tape) - 1, -1, -1):
                grad = tape[i](grad, needs_input_grad=first_only)[0] if i % 2 else tape[i](grad)
            return grad
    return run


def numpy_alone(size: int, ops: int) -> Callable[[], object]:
    """The chain's forward and backward as the bare NumPy calls its math needs (sin, multiply,
    tanh, add; then the chain rule backwards, ``cos`` recomputed as the sin formula does): the
    floor of any engine that calls NumPy once per operation, framework-free."""
    rng = np.random.default_rng(0)
    x0, c0 = rng.standard_normal(size), rng.uniform(0.5, 1.0, size)

    def run():
        x, saved = x0, []
        for _ in range(ops // 4):
            y = np.tanh(np.sin(x) * c0)
            saved.append((x, y))
            x = y + c0
        grad = np.ones(size)
        for x, y in reversed(saved):      # add: grad; tanh: grad (1 - y^2); mul: grad c; sin: grad cos x
            grad = grad * (1 - y * y) * c0 * np.cos(x)
        return grad
    return run


# ----------------------------------------------------------------------------- a minimal Python tape
class TapeValue:
    """The least a reverse-mode engine in Python on NumPy does per operation (micrograd's
    ``Value`` on arrays): call the NumPy kernel, make one result holding the array, its parents
    and the closure that maps its gradient to theirs. No dispatch, dtype or shape checks, saved
    tensor guards, grad mode or node records: the chain's math only, as its formulas do it."""

    __slots__ = ("value", "grad", "parents", "backward")

    def __init__(self, value: np.ndarray, parents: tuple = (), backward: Callable | None = None) -> None:
        self.value, self.grad, self.parents, self.backward = value, None, parents, backward

    def sin(self) -> TapeValue:
        x = self.value
        return TapeValue(np.sin(x), (self,), lambda grad: (grad * np.cos(x),))

    def tanh(self) -> TapeValue:
        y = np.tanh(self.value)
        return TapeValue(y, (self,), lambda grad: (grad * (1 - y * y),))      # tanh_backward

    def __mul__(self, other: TapeValue | np.ndarray) -> TapeValue:
        if type(other) is not TapeValue:        # a constant: no gradient for it
            return TapeValue(self.value * other, (self,), lambda grad: (grad * other,))
        x, y = self.value, other.value
        return TapeValue(x * y, (self, other), lambda grad: (grad * y, grad * x))

    def __add__(self, other: TapeValue | np.ndarray) -> TapeValue:
        if type(other) is not TapeValue:
            return TapeValue(self.value + other, (self,), lambda grad: (grad,))
        return TapeValue(self.value + other.value, (self, other), lambda grad: (grad, grad))

    def sum(self) -> TapeValue:
        shape = self.value.shape
        return TapeValue(self.value.sum(), (self,), lambda grad: (np.broadcast_to(grad, shape),))

    def backward_pass(self) -> None:
        """Accumulate into ``grad`` of every value this one depends on: a topological walk (depth
        first, no recursion), then each closure newest first, gradients summed per parent."""
        order, expanded, stack = [], set(), [(self, False)]
        while stack:
            value, done = stack.pop()
            if done:
                order.append(value)         # after every value it depends on
            elif value not in expanded:
                expanded.add(value)
                stack.append((value, True))
                for parent in value.parents:
                    stack.append((parent, False))
        self.grad = np.ones_like(self.value)
        for value in reversed(order):
            if value.backward is not None:
                for parent, grad in zip(value.parents, value.backward(value.grad)):
                    parent.grad = grad if parent.grad is None else parent.grad + grad


def minimal_tape(size: int, ops: int) -> Callable[[], object]:
    """The chain on :class:`TapeValue`: the floor of a Python engine, measured."""
    rng = np.random.default_rng(0)
    x0, c0 = rng.standard_normal(size), rng.uniform(0.5, 1.0, size)

    def run():
        x = TapeValue(x0)
        _chain(x, c0, ops, TapeValue.sin, TapeValue.tanh).sum().backward_pass()
        return x.grad
    return run


# ----------------------------------------------------------------------------- the MLP step
def mlp_workloads() -> dict[str, Callable[[], object]]:
    rng = np.random.default_rng(1)
    batch, features, hidden, classes, lr = 64, 32, 64, 10, 0.1
    data = rng.standard_normal((batch, features))
    onehot = np.eye(classes)[rng.integers(0, classes, batch)]
    init = [rng.standard_normal((features, hidden)) * 0.1, np.zeros(hidden),
            rng.standard_normal((hidden, classes)) * 0.1, np.zeros(classes)]

    def loss_of(w1, b1, w2, b2, x, y, relu, exp, log, rowsum):
        z = relu(x @ w1 + b1) @ w2 + b2
        log_probs = z - log(rowsum(exp(z)))
        return -(log_probs * y).sum() / batch

    engine_params = [engine.tensor(p.copy(), requires_grad=True) for p in init]
    x_e, y_e = engine.tensor(data), engine.tensor(onehot)

    def run_engine():
        loss = loss_of(*engine_params, x_e, y_e, engine.Tensor.relu, engine.Tensor.exp, engine.Tensor.log,
                       lambda t: t.sum([1], True))
        loss.backward()
        with engine.no_grad():
            for p in engine_params:
                p -= p.grad * lr
                p.grad = None
        return loss

    hips_params = [p.copy() for p in init]

    def hips_loss(params):
        return loss_of(*params, data, onehot, lambda t: anp.maximum(t, 0), anp.exp, anp.log,
                       lambda t: anp.sum(t, axis=1, keepdims=True))

    hips_grad = autograd.grad(hips_loss)

    def run_hips():
        grads = hips_grad(hips_params)
        for i, g in enumerate(grads):
            hips_params[i] = hips_params[i] - lr * g
        return grads

    torch_params = [torch.tensor(p.copy(), requires_grad=True) for p in init]
    x_t, y_t = torch.tensor(data), torch.tensor(onehot)

    def run_torch():
        loss = loss_of(*torch_params, x_t, y_t, torch.relu, torch.exp, torch.log,
                       lambda t: t.sum(1, keepdim=True))
        loss.backward()
        with torch.no_grad():
            for p in torch_params:
                p -= p.grad * lr
                p.grad = None
        return loss

    def run_numpy():
        """The bare NumPy calls of the step's math, as its formulas do it: the floor."""
        w1, b1, w2, b2 = numpy_params
        hidden_out = np.maximum(data @ w1 + b1, 0)
        z = hidden_out @ w2 + b2
        e = np.exp(z)
        s = np.sum(e, 1, keepdims=True)
        loss = -np.sum((z - np.log(s)) * onehot) / batch
        grad_z = onehot * (-1 / batch)          # d loss / d log_probs; then log-sum-exp's part
        grad_z = grad_z + e * (-np.sum(grad_z, 1, keepdims=True) / s)
        grad_hidden = np.where(hidden_out <= 0, 0.0, grad_z @ w2.T)     # threshold_backward
        grads = (data.T @ grad_hidden, np.sum(grad_hidden, 0), hidden_out.T @ grad_z, np.sum(grad_z, 0))
        for p, g in zip(numpy_params, grads):
            p -= g * lr
        return loss

    numpy_params = [p.copy() for p in init]
    return {"engine": run_engine, "autograd": run_hips, "torch": run_torch, "numpy": run_numpy}


# ----------------------------------------------------------------------------- one operator
def single_op_costs(repeat: int, calls: int = 2000) -> dict[str, float]:
    """Seconds per ``x.sin()`` on 16 float64 elements: recorded, unrecorded (no_grad), raw NumPy."""
    x0 = np.random.default_rng(2).standard_normal(16)
    leaf = engine.tensor(x0, requires_grad=True)

    def recorded():
        for _ in range(calls):
            leaf.sin()

    def unrecorded():
        with engine.no_grad():
            for _ in range(calls):
                leaf.sin()

    def raw():
        for _ in range(calls):
            np.sin(x0)

    best = _best_interleaved({"recorded": recorded, "unrecorded": unrecorded, "numpy": raw}, repeat)
    return {name: seconds / calls for name, seconds in best.items()}


# ----------------------------------------------------------------------------- bytecode counts
def count_execution(fn: Callable[[], object]) -> tuple[int, int]:
    """(Python calls, bytecodes) executed by ``fn()``: a timing-free measure of overhead."""
    counts = [0, 0]

    def tracer(frame, event, arg):
        if event == "call":
            counts[0] += 1
            frame.f_trace_opcodes = True
        elif event == "opcode":
            counts[1] += 1
        return tracer

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return counts[0], counts[1]


def tracked_per_op(forward: Callable[[], object], ops: int) -> float:
    """Objects the cycle collector tracks that ``forward()``'s result keeps alive, per operator
    (after a collection, which stops tracking tuples of numbers): what every young-generation
    collection scans again while a graph is alive."""
    gc.collect()
    before = len(gc.get_objects())
    graph = forward()
    gc.collect()
    kept = len(gc.get_objects()) - before
    del graph
    return kept / ops


def print_counts(ops: int) -> None:
    """Calls and bytecodes per operator of the chain workload (engine forward and backward, the
    formulas alone, the minimal tape's, HIPS autograd's), and the tracked objects a forward keeps
    per operator (engine, tape, HIPS autograd)."""
    rng = np.random.default_rng(0)
    x0, c0 = rng.standard_normal(16), rng.uniform(0.5, 1.0, 16)

    def engine_forward():
        x = engine.tensor(x0, requires_grad=True)
        return _chain(x, engine.tensor(c0), ops, engine.Tensor.sin, engine.Tensor.tanh).sum()

    def tape_forward():
        return _chain(TapeValue(x0), c0, ops, TapeValue.sin, TapeValue.tanh).sum()

    def hips_forward():     # the vjp closure holds HIPS's graph
        return autograd.make_vjp(lambda x: anp.sum(_chain(x, c0, ops, anp.sin, anp.tanh)))(x0)

    hips = autograd.grad(lambda x: anp.sum(_chain(x, c0, ops, anp.sin, anp.tanh)))
    engine_forward().backward()     # warm caches, then count
    hips(x0)
    counts = {"engine forward": count_execution(engine_forward)}
    loss = engine_forward()
    counts["engine backward"] = count_execution(loss.backward)
    formulas = formulas_alone(16, ops)
    formulas()
    counts["formulas alone (fwd + bwd)"] = count_execution(formulas)
    counts["minimal tape forward"] = count_execution(tape_forward)
    value = tape_forward()
    counts["minimal tape backward"] = count_execution(value.backward_pass)
    counts["autograd forward + backward"] = count_execution(lambda: hips(x0))
    for name, (calls, codes) in counts.items():
        print(f"{name:28} {calls / ops:6.1f} calls/op {codes / ops:7.0f} bytecodes/op")
    print("tracked objects a forward keeps per op: " + ", ".join(
        f"{name} {tracked_per_op(forward, ops):.2f}"
        for name, forward in (("engine", engine_forward), ("minimal tape", tape_forward), ("autograd", hips_forward))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--count", action="store_true",
                        help="print Python calls and bytecodes per chain operator instead of timings")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with the process's CPU time, not wall time: steadier on a loaded machine "
                             "(waiting for a core is not counted)")
    args = parser.parse_args(argv)
    if args.count:
        print_counts(CHAIN_OPS)
        return 0
    if args.cpu_time:
        global clock
        clock = time.process_time
    torch.set_num_threads(1)
    chain = f"chain ({CHAIN_OPS} ops, 16 elements)"
    large = f"large ({LARGE_OPS} ops, 1M elements)"
    mlp = "mlp training step (64x32 -> 64 -> 10)"
    workloads = {
        chain: {**chain_workloads(16, CHAIN_OPS), "formulas": formulas_alone(16, CHAIN_OPS),
                "tape": minimal_tape(16, CHAIN_OPS), "numpy": numpy_alone(16, CHAIN_OPS)},
        mlp: mlp_workloads(),
        large: {**chain_workloads(1_000_000, LARGE_OPS), "numpy": numpy_alone(1_000_000, LARGE_OPS)},
    }
    print(f"{'workload':40} {'engine':>10} {'autograd':>10} {'torch':>10} {'vs autograd':>12} {'vs torch':>9}"
          f"  ({'CPU' if args.cpu_time else 'wall'} time)")
    timed = {}
    for name, runs in workloads.items():
        times = timed[name] = _best_interleaved(runs, args.repeat)
        print(f"{name:40} {times['engine'] * 1e3:8.2f}ms {times['autograd'] * 1e3:8.2f}ms "
              f"{times['torch'] * 1e3:8.2f}ms {times['engine'] / times['autograd']:11.2f}x "
              f"{times['engine'] / times['torch']:8.2f}x")
    floor = timed[chain]
    print(f"chain, formulas alone (no autograd):     {floor['formulas'] * 1e3:8.2f}ms = "
          f"{floor['formulas'] / floor['autograd']:.2f}x autograd, {floor['formulas'] / floor['torch']:.2f}x torch; "
          f"the engine's bookkeeping: {(floor['engine'] - floor['formulas']) / CHAIN_OPS * 1e6:.2f}us per op")
    print(f"chain, a minimal Python tape (floor):    {floor['tape'] * 1e3:8.2f}ms = "
          f"{floor['tape'] / floor['autograd']:.2f}x autograd, {floor['tape'] / floor['torch']:.2f}x torch; "
          f"the engine is {floor['engine'] / floor['tape']:.2f}x it")
    for name in (chain, mlp, large):     # the NumPy calls alone: what no engine calling NumPy can go below
        times = timed[name]
        print(f"{name.split(' ')[0] + ', NumPy calls alone (floor):':40} {times['numpy'] * 1e3:8.2f}ms = "
              f"{times['numpy'] / times['autograd']:.2f}x autograd, {times['numpy'] / times['torch']:.2f}x torch")
    per_op = single_op_costs(args.repeat)
    print(f"x.sin() on 16 elements: recorded {per_op['recorded'] * 1e6:.2f}us, unrecorded "
          f"{per_op['unrecorded'] * 1e6:.2f}us, numpy.sin {per_op['numpy'] * 1e6:.2f}us "
          f"(unrecorded / numpy {per_op['unrecorded'] / per_op['numpy']:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
