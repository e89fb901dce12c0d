"""Forward mode for the imported derivatives.yaml entries that torch gives no written forward
formula (none, or only its ``auto_linear`` / ``auto_element_wise`` rule): the jvp derived from
each one's backward (:mod:`transpiler.derive_jvp`), and its proof.

``transpile coverage --corpus`` derives the jvp of every emitted entry none of whose formulas
has one, against the shipped library's operators (the corpus's own where the library has no
formula of an operator), and proves it with ``tests/yaml/corpus_jvp_proof.py`` (F1 on torch
tensors: finite differences and torch's double-vjp, and torch's forward AD where its auto rule
gives one; where no output is differentiable, no tangent, as torch's). An entry derives when
every formula of it (each dispatch section) does; the proof runs its section for every tensor
(or its first).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from transpiler.derive_jvp import DerivationRefused, OperatorTable, derive_jvp, with_jvp
from transpiler.frontend import find_decorator, operator_table
from transpiler.model import Library
from transpiler.schema import FunctionSchema, SchemaError, parse_schema

REPO = Path(__file__).resolve().parent.parent
PROOF = REPO / "tests" / "yaml" / "corpus_jvp_proof.py"


@dataclass(frozen=True)
class DerivedSource:
    """An entry's formula with its derived jvp, returning ``outputs, backward, jvp``."""

    function: str
    source: str


@dataclass(frozen=True)
class CorpusJvps:
    """The entries without a jvp: those whose jvp derives, and those refused with the reason;
    ``auto_rule``: those of them whose forward mode in torch is derivatives.yaml's
    ``auto_linear`` / ``auto_element_wise`` rule (torch's forward AD is an oracle there);
    ``aten``: the schemas of the ATen operators the derivation declared besides the libraries'
    (:func:`aten_operators`), for the proof to run them."""

    derived: dict[str, DerivedSource]
    refused: dict[str, str]
    auto_rule: frozenset[str] = frozenset()
    aten: dict[str, str] = field(default_factory=dict)


def derive_corpus_jvps(corpus: Library, shipped: Library, entries: set[str]) -> CorpusJvps:
    """Derive the jvp of each of ``entries`` none of whose formulas in ``corpus`` has one."""
    operators = operator_table(corpus, shipped)         # the library's formula of an operator wins
    aten = aten_operators(corpus, operators)
    operators = OperatorTable(operators.formulas, operators.helpers, {**aten, **operators.nondifferentiable})
    sections: dict[str, list] = {}
    for formula in corpus.formulas:
        if formula.op_name in entries:
            sections.setdefault(formula.op_name, []).append(formula)
    derived, refused, auto_rule = {}, {}, set()
    for entry, formulas in sorted(sections.items()):
        if any(f.jvp is not None for f in formulas):
            continue
        if any(_auto_rule(f) for f in formulas):
            auto_rule.add(entry)
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
    return CorpusJvps(derived, refused, frozenset(auto_rule), {name: str(schema) for name, schema in aten.items()})


_ATEN_CALL = re.compile(r"\bat\.([A-Za-z_][A-Za-z0-9_]*)\(")


def aten_operators(corpus: Library, operators: OperatorTable) -> dict[str, FunctionSchema]:
    """The ATen operators the corpus's formulas call (``at.X(...)``) that no library declares, by
    ``name.overload``, from the installed torchgen's ``native_functions.yaml`` (no ``out=``
    overloads): a backward transposed in a derived jvp may call them as the corpus's own formula
    does (``convolution_backward``'s ``_convolution_double_backward``). They have no formula: one
    applied to a linear value is still refused."""
    import torchgen

    declared = {f.schema.name.base for f in operators.formulas.values()}
    declared |= {schema.name.base for schema in operators.nondifferentiable.values()}
    called = {name for module in corpus.modules
              for name in _ATEN_CALL.findall(Path(module.path).read_text(encoding="utf-8"))} - declared
    path = Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"
    found: dict[str, FunctionSchema] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("- func: ") and line[8:].split("(", 1)[0].split(".", 1)[0] in called:
            try:
                schema = parse_schema(line[8:].strip())
            except SchemaError:
                continue
            if not schema.out:
                found[str(schema.name)] = schema
    return found


def _auto_rule(formula) -> bool:
    """Whether the imported formula declares ``@yaml_entry(jvp="auto_linear" | "auto_element_wise")``
    (read from its source, statically)."""
    decorator = find_decorator(formula.node, "yaml_entry")
    return decorator is not None and isinstance(decorator.decorator, cst.Call) and any(
        arg.keyword is not None and arg.keyword.value == "jvp" for arg in decorator.decorator.args)


def prove(formulas: Path, jvps: CorpusJvps, work: Path) -> dict[str, dict]:
    """F1 of each derived jvp (``tests/yaml/corpus_jvp_proof.py``, a fresh process): entry ->
    ``{"status", "samples", "source", "reason", "no_tangent"}`` (``no_tangent``: proven where no
    output is differentiable only); every entry failed when the proof did not run."""
    sources = work / "derived_jvps.json"
    sources.write_text(json.dumps({e: {"function": d.function, "source": d.source}
                                   for e, d in jvps.derived.items()}), encoding="utf-8")
    aten = work / "aten_operators.json"
    aten.write_text(json.dumps(jvps.aten), encoding="utf-8")
    done = subprocess.run([sys.executable, str(PROOF), str(formulas), str(sources), str(aten)], capture_output=True,
                          text=True, check=False, env=proof_environment())
    if done.returncode == 0:
        return json.loads(done.stdout.strip().splitlines()[-1])
    reason = f"F1: the proof did not run ({(done.stderr.strip().splitlines() or ['?'])[-1][:160]})"
    return {entry: {"status": "failed", "samples": 0, "source": "", "reason": reason} for entry in jvps.derived}


def proof_environment() -> dict[str, str]:
    """The environment of a proof run as a script (``tests/yaml/corpus_*.py``): this checkout first on
    its path, as the proof's own directory is (without it a script in a second checkout, a git
    worktree, would import the packages of the checkout installed in the environment)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}


def report(jvps: CorpusJvps, proofs: dict[str, dict], reverse_proven: list[str] | None) -> list[str]:
    """The funnel's lines on forward mode for entries without a written jvp: counts, then each
    entry refused or not proven with its reason. ``reverse_proven``: the entries proven in reverse
    mode (CT), when the corpus was compiled; among them, the split by what torch's forward AD does:
    its auto rule, no tangent (no output is differentiable), or a raise (no forward formula)."""
    proven = sorted(e for e, p in proofs.items() if p["status"] == "proven")
    failed = sorted(e for e, p in proofs.items() if p["status"] == "failed")
    untangled = {e for e in proven if proofs[e].get("no_tangent")}     # no output differentiable
    with_case = len(proven) + len(failed)
    without = len(jvps.derived) + len(jvps.refused)
    counts = (f"  without a jvp {without:>3} emitted (no written forward formula in torch; {len(jvps.auto_rule)} have "
              f"its auto_linear / auto_element_wise rule): {len(jvps.derived)} derive one, {len(jvps.refused)} refused")
    proof = (f"    F1 of the derived jvp (on torch: == finite differences, torch's double-vjp and, where it has its "
             f"auto rule, torch's forward AD; {len(untangled)} give no tangent where no output is differentiable, "
             f"as torch's): {len(proven)} proven, {len(failed)} failed, {len(proofs) - with_case} without a "
             f"case; {len(proven)} of the {with_case} derived with a case ({_share(len(proven), with_case)})")
    lines = [counts, proof]
    if reverse_proven is not None:
        among = set(reverse_proven) & (set(jvps.derived) | set(jvps.refused))
        shown = among & set(proven)
        lines.append(f"    of those proven in reverse mode (CT): {len(shown)} of {len(among)} "
                     f"({_share(len(shown), len(among))}) with a proven derived jvp")
        auto, raising = among & jvps.auto_rule, among - jvps.auto_rule - untangled
        lines.append(f"      by torch's forward AD there: {len(shown & auto)} of the {len(auto)} with its auto rule; "
                     f"{len(among & untangled)} with no differentiable output (no tangent); {len(shown & raising)} "
                     f"of the {len(raising)} where it raises (no forward formula: "
                     f"{_share(len(shown & raising), len(raising))})")
    for entry, reason in sorted(jvps.refused.items()):
        lines.append(f"  {entry} [jvp not derived]: {reason}")
    for entry, proof in sorted(proofs.items()):
        if proof["status"] != "proven":
            lines.append(f"  {entry} [derived jvp {proof['status']}]: {proof['reason']}")
    return lines


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f} %" if whole else "-"
