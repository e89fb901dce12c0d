"""Forward mode through derived jvps against the formulas' own jvps (issue 25).

For every formula of the shipped library whose jvp derives and that has its own jvp (written
or ``auto_*``), the first OpCase of the op is run through ``engine.jvp`` three ways in turn
within each round: its own jvp, the derived one, and its own again. Each timing is the CPU
time of this thread (``--clock cpu``: time spent waiting for a core on a loaded machine is not
counted; ``--clock wall`` counts it) over ``--calls`` calls; the best of ``--repeat`` rounds is
kept per way. Printed per op: derived / own, and the noise, own again / own (the written jvp
timed against itself: a ratio means something only next to it); then the median and the worst
of both and how many ops are above 1.5x. Everything runs in one process on the same inputs.

Run: ``python benchmarks/derived_jvp.py [--repeat N] [--calls N] [--clock cpu|wall] [--ops OP ...]``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from op_cases import cases

import reference_engine as engine
from reference_engine.forward_ad import derived_jvps
from tests.engine.test_tiers import _weights, engine_call
from transpiler.derive_jvp import DerivationRefused, derive_jvp
from transpiler.frontend import SHIPPED_LIBRARY, load_library, operator_table


#: Above this, a derived jvp misses issue 25's cost aim.
AIM = 1.5
CLOCKS = {"cpu": time.thread_time, "wall": time.perf_counter}


def _timed(run, derived: bool, calls: int, clock) -> float:
    start = clock()
    if derived:
        with derived_jvps():
            for _ in range(calls):
                run()
    else:
        for _ in range(calls):
            run()
    return (clock() - start) / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--calls", type=int, default=5, help="calls per timing (default 5)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    parser.add_argument("--ops", nargs="*", help="only these operators (name.overload)")
    args = parser.parse_args()
    library = load_library(str(SHIPPED_LIBRARY))
    operators = operator_table(library)
    clock = CLOCKS[args.clock]
    ratios: dict[str, float] = {}
    noise: dict[str, float] = {}
    for formula in library.formulas:
        if formula.jvp is None or (args.ops and formula.op_name not in args.ops) or not cases(formula.op_name):
            continue
        try:
            derive_jvp(formula, operators)
        except DerivationRefused:
            continue
        fn, inputs = engine_call(cases(formula.op_name)[0])
        primals = [t.detach() for t in inputs]
        tangents = [engine.Tensor(v) for v in _weights([t.shape for t in inputs], seed=3)]
        def run(fn=fn, primals=primals, tangents=tangents):
            return engine.jvp(fn, primals, tangents)
        _timed(run, True, 1, clock), _timed(run, False, 1, clock)   # warm: the derived formula compiles once
        own, derived, again = [], [], []
        for _ in range(args.repeat):
            own.append(_timed(run, False, args.calls, clock))
            derived.append(_timed(run, True, args.calls, clock))
            again.append(_timed(run, False, args.calls, clock))
        ratios[formula.op_name] = min(derived) / min(own)
        noise[formula.op_name] = min(again) / min(own)
        print(f"{formula.op_name:40s} own {min(own) * 1e6:9.1f} us  derived {min(derived) * 1e6:9.1f} us  "
              f"ratio {ratios[formula.op_name]:5.2f}  noise {noise[formula.op_name]:5.2f}")
    if ratios:
        worst = max(ratios, key=ratios.get)
        spread = max(noise, key=lambda op: abs(noise[op] - 1))
        print(f"{len(ratios)} ops: derived / own median {statistics.median(ratios.values()):.2f}x, "
              f"worst {ratios[worst]:.2f}x ({worst}), {sum(r > AIM for r in ratios.values())} above {AIM}x; "
              f"noise (own / own) median {statistics.median(noise.values()):.2f}x, "
              f"farthest from 1 {noise[spread]:.2f}x ({spread}), {sum(r > AIM for r in noise.values())} above {AIM}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
