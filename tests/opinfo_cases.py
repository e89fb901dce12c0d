"""Torch's own OpInfo sample inputs as extra OpCases for the RT and CT tiers (DESIGN section 7).

The samples are made into calls of each declared formula of ``formulas/`` by
:mod:`transpiler.prove.opinfo` (which ``transpile prove`` uses too: how a sample becomes
a case, and why one is dropped, is described there); here they become
:class:`OpInfoCase` (an ``OpCase`` of ``tests/op_cases.py``), checked against the
catalogue's torch operator (``torch_op``, which stands in for the ops of
``TORCH_EQUIVALENTS``). ``python -m tests.opinfo_cases`` lists, per formula, the cases
and the samples left out. Building the catalogue costs about 5 s of CPU once per process.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from tests.op_cases import OpCase, torch_op
from transpiler.prove.opinfo import MAX_CASES_PER_OPINFO, Dropped, samples_of

__all__ = ["MAX_CASES_PER_OPINFO", "Dropped", "OpInfoCase", "OpInfoCatalogue", "catalogue"]


@dataclass(frozen=True)
class OpInfoCase(OpCase):
    """An :class:`OpCase` made from one OpInfo sample."""

    opinfo: str = ""          # the OpInfo it came from: ``name`` or ``name.variant_test_name``


@dataclass(frozen=True)
class OpInfoCatalogue:
    """The OpInfo cases of the declared formulas, and the samples left out."""

    cases: tuple[OpInfoCase, ...]
    dropped: tuple[Dropped, ...]

    @property
    def ops(self) -> list[str]:
        """Operators with at least one OpInfo case, sorted."""
        return sorted({case.op for case in self.cases})


def _cases_of(op: str, schema_text: str, op_db: list[Any]) -> tuple[list[OpInfoCase], list[Dropped]]:
    samples, dropped = samples_of(op, schema_text, op_db, torch_op)
    return [OpInfoCase(s.op, s.id, s.args, s.kwargs, s.differentiable, opinfo=s.opinfo) for s in samples], dropped


@functools.cache
def catalogue() -> OpInfoCatalogue:
    """The OpInfo cases of every formula of the shipped library (computed once per process)."""
    import formulas
    from torch.testing._internal.common_methods_invocations import op_db

    cases: list[OpInfoCase] = []
    dropped: list[Dropped] = []
    for op, declared in sorted(formulas.load_library().items()):
        op_cases, op_dropped = _cases_of(op, declared.schema, op_db)
        cases += op_cases
        dropped += op_dropped
    return OpInfoCatalogue(tuple(cases), tuple(dropped))


def main() -> None:
    """``python -m tests.opinfo_cases``: per formula, its OpInfo cases and why samples were left out."""
    from collections import Counter

    import formulas

    result = catalogue()
    counts = Counter(case.op for case in result.cases)
    for op in sorted(formulas.load_library()):
        print(f"{op}: {counts[op]} cases")
        reasons = Counter(f"{d.opinfo}: {d.reason}" for d in result.dropped if d.op == op)
        for reason, times in sorted(reasons.items()):
            print(f"    dropped {times}x  {reason}")
    print(f"OpInfo samples: {len(result.ops)} ops, {len(result.cases)} cases, {len(result.dropped)} samples dropped")


if __name__ == "__main__":
    main()
