"""The op x proof-tier table (DESIGN section 7): the tiers, what each means, and the table of
outcomes the suite's tier tests record and ``transpile coverage`` / ``transpile prove`` print."""
from __future__ import annotations

from dataclasses import dataclass, field

TIERS = ("L", "R1", "R2", "RT", "C1", "CT", "F1", "RF", "FB", "CA", "OP", "OC", "OI", "E")
TIER_MEANING = {
    "L": "transpile lint reports nothing",
    "R1": "reference engine gradcheck",
    "R2": "reference engine gradgradcheck",
    "RT": "reference engine == torch, 1st and 2nd order",
    "C1": "compiled op: torch gradcheck + gradgradcheck",
    "CT": "compiled op == built-in torch op, 1st and 2nd order",
    "F1": "forward mode: jvp == finite differences (prove: the engine's; compiled op: torch gradcheck("
          "check_forward_ad=True)), compiled op's torch.func.jvp == built-in op's where torch's own runs",
    "RF": "reference engine jvp == torch.func.jvp of the built-in op",
    "FB": "fwgrad_bwgrad: forward mode over the backward, every jvp derived (reference engine) == "
          "reverse-over-reverse of the built-in op",
    "CA": "compiled op: backward under compiled autograd == eager",
    "OP": "torch's aten op with the formula swapped in (formulas.torch.override): gradcheck, "
          "gradgradcheck, forward AD, == torch's own autograd",
    "OC": "torch's aten op with the compiled node swapped in (override(compiled=True)): gradcheck, "
          "gradgradcheck, forward AD, == torch's own autograd",
    "OI": "the op's in-place twin (sin_ for sin) through the override, its functional formula: gradcheck, "
          "gradgradcheck, forward AD, == torch's own in-place op",
    "E": "at the op's domain edges (zeros, ties, +-inf, NaN, size-0 inputs): reference engine == built-in "
         "torch op, values and 1st and 2nd order (or torch's error), or torch's bug named and proven",
}
_SYMBOL = {"passed": "ok", "failed": "FAIL", "skipped": "skip", None: "-"}
#: Tiers that prove gradients: they do not apply to an operator declared ``nondifferentiable``
#: (its output carries no gradient, in torch too), shown ``n/a``. Such an operator is proven by
#: L, RT and CT (engine and compiled op return torch's values, with no gradient) and RF and F1
#: (their jvps give torch's tangents: none).
GRADIENT_TIERS = ("R1", "R2", "C1", "FB", "CA", "OP", "OC", "OI")
#: Tiers OP and OC do not apply to an operator ``formulas.torch.override`` refuses (one that writes an
#: argument besides what it returns: an ``out=`` op, a running statistic); shown ``n/a``, listed in docs/torch.md.
OVERRIDE_TIERS = ("OP", "OC")
#: Tier OI does not apply to an operator without an in-place twin the override runs
#: (``formulas.torch.in_place_twins``): torch has none, or its twin is refused.
IN_PLACE_TIERS = ("OI",)
NOT_APPLICABLE = "n/a"


def grid(columns: list[str] | tuple[str, ...], rows: list[tuple[str, list[str]]]) -> list[str]:
    """The op x tier table's lines: a header, then one line per op with its cells under their
    tiers. ``transpile coverage`` (the suite's report) and ``transpile prove`` print with it."""
    width = max([len(op) for op, _ in rows] + [2])
    lines = [f"{'op':<{width}}  " + "  ".join(f"{t:>4}" for t in columns)]
    lines += [f"{op:<{width}}  " + "  ".join(f"{c:>4}" for c in cells) for op, cells in rows]
    return lines


def _exempt(nondifferentiable: bool, not_overridable: bool, no_in_place_twin: bool = False) -> frozenset[str]:
    """The tiers that do not apply to an operator (shown ``n/a`` unless a test of them ran)."""
    return frozenset((GRADIENT_TIERS if nondifferentiable else ()) + (OVERRIDE_TIERS if not_overridable else ())
                     + (IN_PLACE_TIERS if no_in_place_twin else ()))


def _worst(previous: str | None, outcome: str) -> str:
    return outcome if previous is None or previous == "passed" or outcome == "failed" else previous


@dataclass
class TierTable:
    """Outcomes per (op, tier): a tier passes only if every test of it passed. ``opinfo`` holds,
    per op, the outcome of each case made from torch's OpInfo samples (over all its tiers)."""

    results: dict[str, dict[str, str]] = field(default_factory=dict)
    opinfo: dict[str, dict[str, str]] = field(default_factory=dict)

    def record(self, op: str, tier: str, outcome: str, opinfo_case: str | None = None) -> None:
        """One test's outcome; ``opinfo_case`` names the OpInfo case it ran, if it ran one."""
        if tier not in TIERS:
            raise ValueError(f"unknown tier {tier!r}; expected one of {TIERS}")
        row = self.results.setdefault(op, {})
        row[tier] = _worst(row.get(tier), outcome)
        if opinfo_case is not None:
            cases = self.opinfo.setdefault(op, {})
            cases[opinfo_case] = _worst(cases.get(opinfo_case), outcome)

    def opinfo_summary(self, ops: list[str] | None = None) -> str:
        """``OpInfo samples: N ops, M cases``: the ops whose OpInfo cases all passed, and the
        cases run; then the ops whose OpInfo cases failed and the ops (given or recorded) that have none."""
        passing = [op for op, cases in self.opinfo.items() if all(o == "passed" for o in cases.values())]
        line = f"OpInfo samples: {len(passing)} ops, {sum(map(len, self.opinfo.values()))} cases"
        failing = sorted(set(self.opinfo) - set(passing))
        if failing:
            line += f"; failing: {', '.join(failing)}"
        without = sorted((set(ops or ()) | set(self.results)) - set(self.opinfo))
        if without:
            line += f"; no OpInfo sample for: {', '.join(without)}"
        return line

    def render(self, ops: list[str] | None = None, nondifferentiable: frozenset[str] = frozenset(),
               not_overridable: frozenset[str] = frozenset(), with_in_place_twin: frozenset[str] | None = None) -> str:
        """The table; ``nondifferentiable`` ops show ``n/a`` on the gradient tiers,
        ``not_overridable`` ones on tiers OP and OC, and (``with_in_place_twin`` given) the others
        on tier OI, which they need not pass."""
        names = sorted(set(self.results) | set(ops or ()))
        rows = []
        for name in names:
            row = self.results.get(name, {})
            exempt = _exempt(name in nondifferentiable, name in not_overridable,
                             with_in_place_twin is not None and name not in with_in_place_twin)
            cells = [NOT_APPLICABLE if t in exempt and t not in row else _SYMBOL[row.get(t)] for t in TIERS]
            rows.append((name, cells))
        lines = grid(TIERS, rows)
        complete = sum(self.proven(n, n in nondifferentiable, n in not_overridable,
                                   with_in_place_twin is not None and n not in with_in_place_twin) for n in names)
        lines.append(f"{complete}/{len(names)} ops proven on every tier")
        if self.opinfo:
            lines.append(self.opinfo_summary(ops))
        return "\n".join(lines)

    def proven(self, op: str, nondifferentiable: bool = False, not_overridable: bool = False,
               no_in_place_twin: bool = False) -> bool:
        """Whether every tier that applies to ``op`` passed."""
        row = self.results.get(op, {})
        exempt = _exempt(nondifferentiable, not_overridable, no_in_place_twin)
        return all(row.get(t) == "passed" for t in TIERS if not (t in exempt and t not in row))

    def as_json(self) -> dict[str, dict[str, dict[str, str]]]:
        """The table as JSON: the tier results and the OpInfo cases per op."""
        return {"tiers": self.results, "opinfo": self.opinfo}

    @classmethod
    def from_json(cls, data: dict[str, dict[str, dict[str, str]]]) -> "TierTable":
        """The table read back from :meth:`as_json`'s form."""
        return cls({op: dict(row) for op, row in data["tiers"].items()},
                   {op: dict(cases) for op, cases in data["opinfo"].items()})
