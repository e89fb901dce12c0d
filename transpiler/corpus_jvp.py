"""Forward mode for the imported derivatives.yaml entries that torch gives none (no ``result:``):
the jvp derived from each one's backward (:mod:`transpiler.derive_jvp`), and its proof.

``transpile coverage --corpus`` derives the jvp of every emitted entry none of whose formulas
has one, against the shipped library's operators (the corpus's own where the library has no
formula of an operator), and proves it with ``tests/yaml/corpus_jvp_proof.py`` (F1 on torch
tensors: finite differences and torch's double-vjp; torch has no forward AD to compare with
there). An entry derives when every formula of it (each dispatch section) does; the proof runs
its section for every tensor (or its first).
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from transpiler.derive_jvp import DerivationRefused, derive_jvp, with_jvp
from transpiler.frontend import operator_table
from transpiler.model import Library

PROOF = Path(__file__).resolve().parent.parent / "tests" / "yaml" / "corpus_jvp_proof.py"


@dataclass(frozen=True)
class DerivedSource:
    """An entry's formula with its derived jvp, returning ``outputs, backward, jvp``."""

    function: str
    source: str


@dataclass(frozen=True)
class CorpusJvps:
    """The entries without a jvp: those whose jvp derives, and those refused with the reason."""

    derived: dict[str, DerivedSource]
    refused: dict[str, str]


def derive_corpus_jvps(corpus: Library, shipped: Library, entries: set[str]) -> CorpusJvps:
    """Derive the jvp of each of ``entries`` none of whose formulas in ``corpus`` has one."""
    operators = operator_table(corpus, shipped)         # the library's formula of an operator wins
    sections: dict[str, list] = {}
    for formula in corpus.formulas:
        if formula.op_name in entries:
            sections.setdefault(formula.op_name, []).append(formula)
    derived, refused = {}, {}
    for entry, formulas in sorted(sections.items()):
        if any(f.jvp is not None for f in formulas):
            continue
        proven = next((f for f in formulas if f.dispatch is None), formulas[0])
        reason, source = None, None
        for formula in formulas:
            try:
                jvp = derive_jvp(formula, operators)
            except DerivationRefused as refusal:
                reason = refusal.reason + (f" (dispatch {formula.dispatch})" if formula.dispatch else "")
                break
            if formula is proven:
                source = DerivedSource(formula.function,
                                       cst.Module([]).code_for_node(with_jvp(formula, jvp, return_jvp=True)))
        if reason is not None:
            refused[entry] = reason
        else:
            derived[entry] = source
    return CorpusJvps(derived, refused)


def prove(formulas: Path, jvps: CorpusJvps, work: Path) -> dict[str, dict]:
    """F1 of each derived jvp (``tests/yaml/corpus_jvp_proof.py``, a fresh process): entry ->
    ``{"status", "samples", "source", "reason"}``; every entry failed when the proof did not run."""
    sources = work / "derived_jvps.json"
    sources.write_text(json.dumps({e: {"function": d.function, "source": d.source}
                                   for e, d in jvps.derived.items()}), encoding="utf-8")
    done = subprocess.run([sys.executable, str(PROOF), str(formulas), str(sources)], capture_output=True, text=True,
                          check=False)
    if done.returncode == 0:
        return json.loads(done.stdout.strip().splitlines()[-1])
    reason = f"F1: the proof did not run ({(done.stderr.strip().splitlines() or ['?'])[-1][:160]})"
    return {entry: {"status": "failed", "samples": 0, "source": "", "reason": reason} for entry in jvps.derived}


def report(jvps: CorpusJvps, proofs: dict[str, dict], reverse_proven: list[str] | None) -> list[str]:
    """The funnel's lines on forward mode for entries without a jvp: counts, then each entry
    refused or not proven with its reason. ``reverse_proven``: the entries proven in reverse mode
    (CT), when the corpus was compiled."""
    proven = sorted(e for e, p in proofs.items() if p["status"] == "proven")
    failed = sorted(e for e, p in proofs.items() if p["status"] == "failed")
    with_case = len(proven) + len(failed)
    without = len(jvps.derived) + len(jvps.refused)
    counts = (f"  without a jvp {without:>3} emitted (no forward formula in torch): {len(jvps.derived)} derive one, "
              f"{len(jvps.refused)} refused")
    proof = (f"    F1 of the derived jvp (on torch: == finite differences and torch's double-vjp; torch has no "
             f"forward AD there): {len(proven)} proven, {len(failed)} failed, {len(proofs) - with_case} without a "
             f"case; {len(proven)} of the {with_case} derived with a case ({_share(len(proven), with_case)})")
    lines = [counts, proof]
    if reverse_proven is not None:
        among = set(reverse_proven) & (set(jvps.derived) | set(jvps.refused))
        lines.append(f"    of those proven in reverse mode (CT): {len(among & set(proven))} of {len(among)} "
                     f"({_share(len(among & set(proven)), len(among))}) with a proven derived jvp")
    for entry, reason in sorted(jvps.refused.items()):
        lines.append(f"  {entry} [jvp not derived]: {reason}")
    for entry, proof in sorted(proofs.items()):
        if proof["status"] != "proven":
            lines.append(f"  {entry} [derived jvp {proof['status']}]: {proof['reason']}")
    return lines


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f} %" if whole else "-"
