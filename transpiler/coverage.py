"""``transpile coverage``: the op x proof-tier table of DESIGN section 7.

The tiers are established by the test suite (tests marked ``tier``); this
command runs those tests (or reads a report a previous run wrote with
``--tier-report``) and prints where every formula of the library stands.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

TIERS = ("L", "R1", "R2", "RT", "C1", "CT", "F1", "RF", "CA")
TIER_MEANING = {
    "L": "transpile lint reports nothing",
    "R1": "reference engine gradcheck",
    "R2": "reference engine gradgradcheck",
    "RT": "reference engine == torch, 1st and 2nd order",
    "C1": "compiled op: torch gradcheck + gradgradcheck",
    "CT": "compiled op == built-in torch op, 1st and 2nd order",
    "F1": "compiled op: torch gradcheck(check_forward_ad=True), torch.func.jvp == built-in op's",
    "RF": "reference engine jvp == torch.func.jvp of the built-in op",
    "CA": "compiled op: backward under compiled autograd == eager",
}
_SYMBOL = {"passed": "ok", "failed": "FAIL", "skipped": "skip", None: "-"}


@dataclass
class TierTable:
    """Outcomes per (op, tier): a tier passes only if every test of it passed."""

    results: dict[str, dict[str, str]] = field(default_factory=dict)

    def record(self, op: str, tier: str, outcome: str) -> None:
        if tier not in TIERS:
            raise ValueError(f"unknown tier {tier!r}; expected one of {TIERS}")
        row = self.results.setdefault(op, {})
        previous = row.get(tier)
        if previous is None or previous == "passed" or outcome == "failed":
            row[tier] = outcome

    def render(self, ops: list[str] | None = None) -> str:
        names = sorted(set(self.results) | set(ops or ()))
        width = max([len(n) for n in names] + [2])
        lines = [f"{'op':<{width}}  " + "  ".join(f"{t:>4}" for t in TIERS)]
        for name in names:
            row = self.results.get(name, {})
            lines.append(f"{name:<{width}}  " + "  ".join(f"{_SYMBOL[row.get(t)]:>4}" for t in TIERS))
        complete = sum(all(self.results.get(n, {}).get(t) == "passed" for t in TIERS) for n in names)
        lines.append(f"{complete}/{len(names)} ops proven on every tier")
        return "\n".join(lines)

    def as_json(self) -> dict[str, dict[str, str]]:
        return self.results

    @classmethod
    def from_json(cls, data: dict[str, dict[str, str]]) -> "TierTable":
        return cls({op: dict(row) for op, row in data.items()})


def _library_ops(repo: Path) -> list[str]:
    from transpiler.frontend import load_library

    return sorted(f.op_name for f in load_library(str(repo / "formulas")).formulas)


def main(argv: list[str] | None = None) -> int:
    if argv and argv[0] == "--corpus":          # the derivatives.yaml funnel (transpiler.corpus)
        from transpiler.corpus import main as corpus_main

        return corpus_main(argv[1:])
    parser = argparse.ArgumentParser(prog="transpile coverage", description=__doc__)
    parser.add_argument("--from", dest="report", metavar="FILE",
                        help="print a report written by `pytest --tier-report FILE` instead of running the tests")
    parser.add_argument("pytest_args", nargs="*", help="extra arguments for pytest (e.g. -k sin)")
    args = parser.parse_args(argv)
    repo = Path(__file__).resolve().parent.parent
    if args.report:
        try:
            data = json.loads(Path(args.report).read_text())
        except (OSError, ValueError) as err:
            print(f"transpile coverage: cannot read {args.report}: {err}", file=sys.stderr)
            return 2
    else:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "tiers.json")
            cmd = [sys.executable, "-m", "pytest", "-q", "-m", "tier", "-p", "no:cacheprovider",
                   "--tier-report", out, *args.pytest_args]
            subprocess.run(cmd, cwd=repo, stdout=subprocess.DEVNULL, check=False)
            if not os.path.exists(out):
                print("transpile coverage: the tier tests did not run (see `python -m pytest -m tier`)",
                      file=sys.stderr)
                return 2
            data = json.loads(Path(out).read_text())
    table = TierTable.from_json(data)
    print(table.render(_library_ops(repo)))
    for tier in TIERS:
        print(f"  {tier:>2}: {TIER_MEANING[tier]}")
    proven = all(table.results.get(op, {}).get(t) == "passed" for op in _library_ops(repo) for t in TIERS)
    return 0 if proven else 1
