"""``transpile coverage``: the op x proof-tier table of DESIGN section 7 for the shipped library.

It is ``transpile prove`` on the shipped formulas (:mod:`transpiler.prove`, the code path a
user's package is proven by), on the inputs of the suite's tier tests (the repository's
``tests/prove_library_cases.py`` and torch's OpInfo samples); ``--compiled`` adds the compiled
tiers. ``--from FILE`` prints instead the report the suite's own tier tests wrote (``pytest
--tier-report FILE``), which holds the tiers only the suite runs (FB, CA, OP, OC, OI, E).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from transpiler.needs import repository_missing, torch_missing
from transpiler.tier_table import NOT_APPLICABLE, TIER_MEANING, TIERS, TierTable

def _library_ops(repo: Path) -> tuple[list[str], frozenset[str]]:
    """Every declared operator of the library, and those declared ``nondifferentiable``."""
    from transpiler.frontend import load_library

    library = load_library(str(repo / "formulas"))
    differentiable = {f.op_name for f in library.formulas}
    nondifferentiable = frozenset(str(s.name) for m in library.modules for s in m.nondifferentiable) - differentiable
    return sorted(differentiable | nondifferentiable), nondifferentiable


def main(argv: list[str] | None = None) -> int:
    """``transpile coverage``: the op x tier table of the library's proofs (``--corpus``: the
    derivatives.yaml funnel)."""
    argv = list(argv or ())
    asks_help = bool({"-h", "--help"} & set(argv))
    missing = None if asks_help else repository_missing("transpile coverage", "tests") or torch_missing("transpile coverage")
    if missing:
        print(missing, file=sys.stderr)
        return 2
    if argv and argv[0] == "--corpus":          # the derivatives.yaml funnel (transpiler.corpus)
        from transpiler.corpus import main as corpus_main

        return corpus_main(argv[1:])
    parser = argparse.ArgumentParser(prog="transpile coverage", description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="report", metavar="FILE",
                        help="print the report the suite's tier tests wrote (`pytest -m tier --tier-report FILE`) "
                             "instead of proving the library")
    parser.add_argument("-k", dest="select", action="append", default=[], metavar="TEXT",
                        help="only the ops whose name contains TEXT (repeat for several)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--compiled", action="store_true",
                        help="also build the library (cached) and prove its compiled ops (C1, CT, F1, CA)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    try:
        args = parser.parse_args(argv)
        if args.report is not None and (args.select or args.compiled):
            parser.error("--from prints a report as it is: -k and --compiled prove the library instead")
    except SystemExit as exit_request:       # usage error (2) or --help (0), already printed
        return int(exit_request.code or 0)
    repo = Path(__file__).resolve().parent.parent
    if args.report is None:
        from transpiler.prove.cli import main as prove_main

        return prove_main([str(repo / "formulas"), "--cases", str(repo / "tests" / "prove_library_cases.py"),
                           "--format", args.format, *[arg for text in args.select for arg in ("-k", text)],
                           *(["--compiled"] if args.compiled else []), *(["-q"] if args.quiet else [])])
    try:
        table = TierTable.from_json(json.loads(Path(args.report).read_text()))
    except (OSError, ValueError) as err:
        print(f"transpile coverage: cannot read {args.report}: {err}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, AttributeError) as err:
        print(f"transpile coverage: {args.report} is not a tier report (written by `pytest --tier-report FILE`): "
              f"{err!r}", file=sys.stderr)
        return 2
    ops, nondifferentiable = _library_ops(repo)
    from formulas.torch import in_place_twins, overridable      # torch is there: checked above

    not_overridable = frozenset(overridable()[1])
    with_in_place_twin = frozenset(in_place_twins()[0].values())
    proven = all(table.proven(op, op in nondifferentiable, op in not_overridable, op not in with_in_place_twin)
                 for op in ops)
    if args.format == "json":
        print(json.dumps(table.as_json(), indent=1, sort_keys=True))
        return 0 if proven else 1
    print(table.render(ops, nondifferentiable, not_overridable, with_in_place_twin))
    for tier in TIERS:
        print(f"  {tier:>2}: {TIER_MEANING[tier]}")
    print(f"  {NOT_APPLICABLE}: a gradient tier of an operator declared nondifferentiable, tiers OP and OC of "
          "an operator formulas.torch.override refuses, or tier OI of one without an in-place twin it runs "
          "(docs/torch.md)")
    return 0 if proven else 1
