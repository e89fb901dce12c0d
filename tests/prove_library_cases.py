"""The suite's input catalogue (``tests/op_cases.py``) as ``PROVE_CASES`` for the shipped
library: ``transpile prove --cases tests/prove_library_cases.py`` proves it on the inputs
its tier tests use (the catalogue's cases; the OpInfo samples stay the suite's own)."""
from __future__ import annotations

from op_cases import ALL_CASES

from formulas import load_library

_FORMULAS = load_library()

PROVE_CASES: dict[str, list[dict]] = {}
for _case in ALL_CASES:
    if _case.op in _FORMULAS:
        PROVE_CASES.setdefault(_case.op, []).append({"name": _case.id, "args": _case.args, "kwargs": _case.kwargs,
                                                     "differentiable": _case.differentiable})
