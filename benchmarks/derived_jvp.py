"""Forward mode through derived jvps against the formulas' own jvps (issue 25).

For every formula of the shipped library whose jvp derives and that has its own jvp (written
or ``auto_*``), the first OpCase of the op is run through ``engine.jvp`` both ways, taking
turns within each round (best of ``--repeat`` rounds), and the ratio derived / own is printed
per op, then the median and the worst. Both run in the same process on the same inputs.

Run: ``python benchmarks/derived_jvp.py [--repeat N] [--ops OP ...]``.
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


def _timed(run, derived: bool) -> float:
    start = time.perf_counter()
    if derived:
        with derived_jvps():
            run()
    else:
        run()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--ops", nargs="*", help="only these operators (name.overload)")
    args = parser.parse_args()
    library = load_library(str(SHIPPED_LIBRARY))
    operators = operator_table(library)
    ratios: dict[str, float] = {}
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
        _timed(run, True), _timed(run, False)                     # warm: the derived formula compiles once
        own, derived = [], []
        for _ in range(args.repeat):
            own.append(_timed(run, False))
            derived.append(_timed(run, True))
        ratios[formula.op_name] = min(derived) / min(own)
        print(f"{formula.op_name:40s} own {min(own) * 1e6:9.1f} us  derived {min(derived) * 1e6:9.1f} us  "
              f"ratio {ratios[formula.op_name]:5.2f}")
    if ratios:
        worst = max(ratios, key=ratios.get)
        print(f"{len(ratios)} ops: derived / own median {statistics.median(ratios.values()):.2f}x, "
              f"worst {ratios[worst]:.2f}x ({worst})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
