"""The reference engine's convolution against torch eager on CPU, float64, in one run.

One mid-size ``conv2d`` (a batch of 8, 16 -> 32 channels, 32x32, 3x3 kernel, padding 1), and the
same with stride 2 and groups 4; per case:

* ``forward``: the NumPy kernel alone against ``torch.nn.functional.conv2d`` under ``no_grad``;
* ``fwd+bwd``: ``engine.conv2d`` recorded and ``.sum().backward()`` into input, weight and bias,
  against the same in torch.

Best of ``--repeat`` rounds, the two systems taking turns within a round; printed with the
ratio engine / torch.

Run: ``python benchmarks/convolution.py [--repeat N]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import reference_engine as engine  # noqa: E402
from reference_engine.kernels import KERNELS  # noqa: E402

CASES = {   # name: (input shape, weight shape, stride, padding, groups)
    "8x16x32x32 * 32x16x3x3, pad 1": ((8, 16, 32, 32), (32, 16, 3, 3), 1, 1, 1),
    "8x16x32x32 * 32x4x3x3, stride 2, pad 1, groups 4": ((8, 16, 32, 32), (32, 4, 3, 3), 2, 1, 4),
}


def _best(runs: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    best = {name: float("inf") for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    kernel = KERNELS["convolution"]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; float64, CPU")
    for name, (input_shape, weight_shape, stride, padding, groups) in CASES.items():
        x, w = rng.standard_normal(input_shape), rng.standard_normal(weight_shape)
        b = rng.standard_normal(weight_shape[0])
        tx, tw, tb = (torch.from_numpy(a) for a in (x, w, b))

        def engine_forward():
            return kernel(x, w, b, [stride], [padding], [1], False, [0], groups)

        def torch_forward():
            with torch.no_grad():
                return torch.nn.functional.conv2d(tx, tw, tb, stride, padding, 1, groups)

        def engine_backward():
            leaves = [engine.tensor(a, requires_grad=True) for a in (x, w, b)]
            engine.conv2d(*leaves, stride=stride, padding=padding, groups=groups).sum().backward()

        def torch_backward():
            leaves = [a.clone().requires_grad_() for a in (tx, tw, tb)]
            torch.nn.functional.conv2d(*leaves, stride=stride, padding=padding, groups=groups).sum().backward()

        times = _best({"engine forward": engine_forward, "torch forward": torch_forward,
                       "engine fwd+bwd": engine_backward, "torch fwd+bwd": torch_backward}, args.repeat)
        print(name)
        for part in ("forward", "fwd+bwd"):
            ours, theirs = times[f"engine {part}"], times[f"torch {part}"]
            print(f"  {part:8s} engine {ours * 1e3:8.2f} ms   torch {theirs * 1e3:8.2f} ms   "
                  f"ratio {ours / theirs:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
