"""``transpile coverage --corpus``: the funnel of PyTorch's derivatives.yaml through the one pipeline.

The installed torch's derivatives.yaml is imported (never committed) into
``<build-dir>/corpus/formulas``, linted, transpiled per formula
(``--keep-going``) into ``<build-dir>/corpus/cpp``, compiled (cached, one
translation unit per formula file) and every compiled operator proven in a fresh
process by ``tests/yaml/corpus_proof.py`` (C1 gradcheck + gradgradcheck, CT value,
first and second derivatives equal torch's built-in overload's; for an entry emitted with its jvp,
F1 and RF: forward-mode gradcheck, and tangents equal torch's forward AD) on float64 cases:
torch's OpInfo samples first (bound to the overload's schema, or the ATen calls an
OpInfo sample makes), our inputs (``tests/yaml/corpus_inputs.py``) where none
reaches the overload. Prints, as counts of the entries: imported, lint-clean (no
DB0xx/DB1xx finding outside a jvp: a finding inside one leaves out the jvp alone), emitted, compiled, C1, CT, how many CT entries were proven
on OpInfo samples and how many on our inputs, how many of them without a gradient (entries torch does
not differentiate: our values equal torch's and no output requires grad), and the entries with a jvp
(imported, emitted with it), and the entries without one (no ``result:``) whose jvp derives from
their backward and passes F1 on torch (:mod:`transpiler.corpus_jvp`; each refusal and failure
with its reason, and, compiled, the share of the CT entries); then each entry that falls out,
with the stage and the reason. Compiled, the proof also judges torch's own overload of every
entry (gradcheck and gradgradcheck on CPU float64 on the proof's cases) and the funnel prints
"N of M entries torch can gradcheck are proven (P %)", split OpInfo/ours, with each of those
not proven grouped by stage and reason (:func:`gradcheckable_report`). The reference engine runs the
imported formulas too (``tests/yaml/corpus_engine.py``, in a table of their own:
the library's operators are untouched): R1, R2 and RT on the library's OpCases
for each entry whose operator has an engine kernel, printed after the funnel
with each entry that fails a tier. ``--override`` adds tiers OP and OC
(``tests/yaml/corpus_override.py``): each emitted entry swapped in for torch's own
aten operator (``formulas.torch.override``, the Python path and the compiled node;
with ``--no-compile`` the Python path alone) and proven through it on the same cases, counted by outcome. Says each stage on stderr as it starts (import, lint and
emit, compile N/M with the unit, prove, engine), as the build does (``-q``: nothing). Exit 0.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from transpiler import model_cache

REPO = Path(__file__).resolve().parent.parent
NAMESPACE = "derivatives"
PROOF = REPO / "tests" / "yaml" / "corpus_proof.py"
ENGINE_PROOF = REPO / "tests" / "yaml" / "corpus_engine.py"
ENGINE_TIERS = ("R1", "R2", "RT")
OVERRIDE_PROOF = REPO / "tests" / "yaml" / "corpus_override.py"


def main(argv: list[str]) -> int:
    """``transpile coverage --corpus``: import, emit, build and prove torch's derivatives.yaml, print the
    funnel."""
    parser = argparse.ArgumentParser(prog="transpile coverage --corpus", description=__doc__)
    parser.add_argument("--build-dir", type=Path, default=REPO / "build", help="where the corpus is built")
    parser.add_argument("--no-compile", action="store_true",
                        help="stop after emitting (no build, no proof on the compiled ops or the engine; "
                             "the derived jvps' F1 on torch still runs)")
    parser.add_argument("--override", action="store_true",
                        help="also prove every emitted entry swapped in for torch's own aten operator "
                             "(tiers OP and OC, formulas.torch.override; with --no-compile OP alone; long: "
                             "minutes per hundred entries)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    with model_cache.kept_in(args.build_dir / model_cache.DIRECTORY):   # a rerun parses what changed only
        return _funnel(args)


def _funnel(args: argparse.Namespace) -> int:
    import torchgen

    from transpiler.build_progress import Progress, run_child_build
    from transpiler.corpus_jvp import derive_corpus_jvps, proof_environment
    from transpiler.corpus_jvp import prove as prove_derived
    from transpiler.corpus_jvp import report as derived_report
    from transpiler.cpp.generate import differs, generate_each
    from transpiler.cpp.per_formula import Entries
    from transpiler.frontend import SHIPPED_LIBRARY, load_library
    from transpiler.output import replace_directory
    from transpiler.yaml_import.importer import import_yaml, left_out_entries

    yaml_path = Path(torchgen.__file__).parent / "packaged" / "autograd" / "derivatives.yaml"
    work = args.build_dir / "corpus"
    formulas, out = work / "formulas", work / "cpp"
    progress = Progress("--corpus", quiet=args.quiet, command="coverage")
    progress.say(f"import {yaml_path.name}")
    yaml_text = yaml_path.read_text(encoding="utf-8")
    imported = import_yaml(yaml_text, str(yaml_path))
    if differs(formulas, imported.files, manifest=False):
        replace_directory(formulas, imported.files)
    library = load_library(str(formulas))
    not_imported = left_out_entries(yaml_text, imported)
    entries = sorted({f.op_name for f in library.formulas} | not_imported.keys())
    owners = Entries(library)
    # An entry with dispatch sections is several formulas (its Default one first): it goes on while
    # any of them does, and falls out with the reason of its first formula.
    sections: dict[str, set] = {}
    for module in library.modules:
        for formula in module.formulas:
            sections.setdefault(formula.op_name, set()).add(owners.key(module, formula))
    stopped: dict[tuple, tuple[str, str]] = {}      # formula key -> (stage, reason)
    fallen: dict[str, tuple[str, str]] = {name: ("import", problem.format())   # entry -> (stage, reason)
                                          for name, problem in not_imported.items()}
    imported_entries = [e for e in entries if e not in fallen]

    def stop(diagnostics, stage: str) -> None:
        for diagnostic in diagnostics:
            key, _ = owners.owner(diagnostic)
            stopped.setdefault(key, (stage, diagnostic.format()))
        for entry, keys in sections.items():
            if entry not in fallen and keys <= stopped.keys():
                fallen[entry] = stopped[min(keys)]
    # a finding inside a written jvp leaves out the jvp alone (the backward is emitted, forward AD
    # raises torch's error), as per-formula mode does
    progress.say(f"lint and emit {len(library.formulas)} formulas, each on its own")
    generated = generate_each(formulas, True, NAMESPACE)     # lints once: its findings are the lint stage's
    stop([d for d in generated.lint_findings
          if d.code[:3] in ("DB0", "DB1") and not owners.in_jvp(owners.owner(d)[0], d)], "lint")
    lint_clean = [e for e in entries if e not in fallen]
    if differs(out, generated.files):
        replace_directory(out, generated.files)
    stop([refusal.diagnostic for refusal in generated.refused], "emit")
    emitted = [e for e in entries if e not in fallen]
    # forward mode derived for the emitted entries torch gives none (transpiler.corpus_jvp)
    progress.say("derive the jvps of the emitted entries without one, and prove them (F1 on torch)")
    derived_jvps = derive_corpus_jvps(library, load_library(str(SHIPPED_LIBRARY)), set(emitted))
    derived_proofs = prove_derived(formulas, derived_jvps, work)
    compiled, c1, ct = [], [], []
    forward: dict[str, dict] = {}                     # entries compiled with their jvp -> F1 + RF's result
    sources: Counter = Counter()                      # CT entries by where their cases came from
    without_gradient = 0            # CT entries torch does not differentiate: values and no gradient proven
    proven_on: dict[str, str] = {}  # CT entry -> where its cases came from
    torch_verdicts: dict[str, bool] = {}    # entry -> torch's own overload gradchecks on CPU float64
    if not args.no_compile:
        progress.say(f"compile the {len(emitted)} emitted entries")
        build = run_child_build([sys.executable, "-m", "transpiler.build", "--sources", str(out), "--build-dir",
                                 str(args.build_dir), "--name", f"{NAMESPACE}_ops"], progress)
        if build.returncode != 0:
            for entry in emitted:
                fallen.setdefault(entry, ("compile", "the corpus library does not compile (see the build log)"))
            print(build.stderr[-3000:], file=sys.stderr)
        else:
            compiled = emitted
            library_path = build.stdout.strip().splitlines()[-1]
            progress.say(f"prove the {len(compiled)} compiled entries (C1, CT) in a fresh process, and judge "
                         "torch's own overload of every entry (gradcheck, gradgradcheck)")
            with_their_jvp = _with_their_jvp(library, compiled, generated)
            torch_only = [e for e in entries if e not in compiled]
            proof = subprocess.run([sys.executable, str(PROOF), library_path, NAMESPACE, json.dumps(compiled),
                                    json.dumps(with_their_jvp), json.dumps(torch_only)], capture_output=True, text=True,
                                   env=proof_environment())
            results = json.loads(proof.stdout.strip().splitlines()[-1]) if proof.returncode == 0 else {}
            # an entry whose proof died or raised has no verdict: not one torch was seen to gradcheck
            torch_verdicts = {entry: result.get("torch_gradchecks", False) for entry, result in results.items()}
            for entry in compiled:
                result = results.get(entry, {"status": "failed", "reason": "the proof did not run"})
                if entry in with_their_jvp:
                    forward[entry] = result.get("forward", {"status": "failed", "reason": "F1: the proof did not run"})
                if result["status"] == "proven":
                    c1.append(entry)
                    ct.append(entry)
                    sources[result["source"]] += 1
                    proven_on[entry] = result["source"]
                    without_gradient += result.get("without_gradient", False)
                elif result["status"] == "failed" and result["reason"].startswith("CT"):
                    c1.append(entry)
                    fallen[entry] = ("CT", result["reason"])
                elif result["status"] == "failed":
                    fallen[entry] = ("C1", result["reason"])
                else:
                    fallen[entry] = ("C1", f"no inputs: {result['reason']}")
    total = len(entries)
    print(f"derivatives.yaml corpus ({yaml_path}): {total} entries ({len(library.formulas)} formulas)")
    for label, count in (("imported", len(imported_entries)), ("lint-clean", len(lint_clean)), ("emitted", len(emitted)),
                         ("compiled", len(compiled)), ("C1", len(c1)), ("CT", len(ct))):
        print(f"  {label:<11}{count:>5} of {total}")
    if ct:
        print(f"  CT proven on torch's OpInfo samples {sources['OpInfo']}, on our inputs {sources['ours']}")
        print(f"  CT without a gradient {without_gradient} (derivatives.yaml declares none: torch's values, and no "
              "output carries a gradient, as torch's)")
    # forward mode: entries whose formula has a jvp (derivatives.yaml's ``result:``), and how many of
    # them were emitted with it (the jvp is transliterated into the forward wrapper with its formula)
    with_jvp = sorted({f.op_name for f in library.formulas if f.jvp is not None})
    without_jvp = {refusal.entry for refusal in generated.jvp_left_out}
    print(f"  with a jvp {len(with_jvp):>5} imported, {len(set(with_jvp) & set(emitted) - without_jvp)} emitted "
          f"with their jvp, {len(without_jvp & set(emitted))} without (forward AD raises torch's error)")
    if compiled:
        outcomes = Counter(result["status"] for result in forward.values())
        print(f"    F1 + RF of the jvps compiled (== finite differences and torch's forward AD): "
              f"{outcomes['proven']} proven, {outcomes['failed']} failed, {outcomes['no inputs']} without a case")
    print("\n".join(derived_report(derived_jvps, derived_proofs, None if args.no_compile else ct)))
    fallen = {entry: fallen[entry] for entry in entries if entry in fallen}   # not helpers or module-level code
    stages = Counter(stage for stage, _ in fallen.values())
    print("fallen out: " + ", ".join(f"{stage} {n}" for stage, n in sorted(stages.items())))
    for entry, (stage, reason) in sorted(fallen.items()):
        print(f"  {entry} [{stage}]: {reason}")
    for refusal in sorted(generated.jvp_left_out, key=lambda r: r.entry):
        if refusal.entry in emitted:
            print(f"  {refusal.entry} [jvp left out]: {refusal.diagnostic.format()}")
    for entry, result in sorted(forward.items()):
        if result["status"] != "proven":
            print(f"  {entry} [jvp {result['status']}]: {result['reason']}")
    if torch_verdicts:
        print("\n".join(gradcheckable_report(torch_verdicts, proven_on, fallen)))
    if not args.no_compile:
        sys.stdout.flush()          # the funnel, before the engine's stage line
        progress.say("run the entries with an engine kernel in the reference engine (R1, R2, RT)")
        _print_engine_tiers(formulas)
        if args.override and compiled:
            progress.say(f"prove the {len(emitted)} emitted entries through torch's aten ops (OP, OC)")
            _print_override_tiers(formulas, library_path, emitted, sorted(without_jvp))
    elif args.override:     # no corpus library: the Python path (OP) alone
        progress.say(f"prove the {len(emitted)} emitted entries through torch's aten ops (OP)")
        _print_override_tiers(formulas, "", emitted, sorted(without_jvp))
    progress.done()
    return 0


def _with_their_jvp(library, compiled: list[str], generated) -> list[str]:
    """The compiled entries whose written jvp (derivatives.yaml's ``result:``) was emitted with them."""
    left_out = {refusal.entry for refusal in generated.jvp_left_out}
    written = {f.op_name for f in library.formulas if f.jvp is not None}
    return [entry for entry in compiled if entry in written and entry not in left_out]


def gradcheckable_report(torch_verdicts: dict[str, bool], proven_on: dict[str, str],
                         fallen: dict[str, tuple[str, str]]) -> list[str]:
    """The share of the entries torch itself can gradcheck (``torch_verdicts``: its own overload
    passes gradcheck and gradgradcheck on CPU float64 on one of the proof's cases) that are proven
    (``proven_on``: CT entry -> ``OpInfo`` or ``ours``), split by where the cases came from; then
    each one that is not, grouped by its stage and reason (``fallen``: entry -> (stage, reason))."""
    gradcheckable = sorted(entry for entry, passes in torch_verdicts.items() if passes)
    proven = [entry for entry in gradcheckable if entry in proven_on]
    on_opinfo = sum(proven_on[entry] == "OpInfo" for entry in proven)
    share = 100 * len(proven) / len(gradcheckable) if gradcheckable else 0.0
    lines = [(f"torch's own overload passes gradcheck and gradgradcheck (CPU, float64) on {len(gradcheckable)} of "
              f"{len(torch_verdicts)} entries"),
             (f"  {len(proven)} of {len(gradcheckable)} entries torch can gradcheck are proven ({share:.1f} %): "
              f"on torch's OpInfo samples {on_opinfo}, on our inputs {len(proven) - on_opinfo}")]
    groups: dict[str, list[str]] = {}
    for entry in gradcheckable:
        if entry not in proven_on:
            stage, reason = fallen[entry]
            groups.setdefault(_reason_group(stage, reason), []).append(f"{entry}: {_without_location(reason)}")
    if groups:
        lines.append(f"  the {len(gradcheckable) - len(proven)} not proven, by reason:")
    for group, members in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])):
        lines.append(f"    {group} ({len(members)})")
        lines.extend(f"      {member}" for member in members)
    return lines


_LOCATION = re.compile(r"^\S+:\d+:\d+: ")
_CODE = re.compile(r"\b(DB\d{3})\b")


def _without_location(reason: str) -> str:
    return _LOCATION.sub("", reason)


def _reason_group(stage: str, reason: str) -> str:
    """The group of an unproven entry: its stage and the diagnostic's code (``emit DB201``), or the
    check that failed (``C1 gradcheck``, ``CT first derivative differs from torch's``)."""
    code = _CODE.search(reason)
    if code:
        return f"{stage} {code.group(1)}"
    head = _without_location(reason).removeprefix(f"{stage}: ")
    if NO_CPU_KERNEL_REASON in head:
        return f"{stage} calls a kernel torch has no CPU version of"
    return f"{stage} {head.split(':')[0]}"


#: corpus_proof's words for a formula calling a kernel torch has no CPU version of
NO_CPU_KERNEL_REASON = "which torch has no CPU kernel for"


def _print_engine_tiers(formulas: Path) -> None:
    """R1/R2/RT of the corpus entries the reference engine has kernels and OpCases for."""
    from transpiler.corpus_jvp import proof_environment

    done = subprocess.run([sys.executable, str(ENGINE_PROOF), str(formulas)], capture_output=True, text=True,
                          env=proof_environment())
    if done.returncode != 0:
        print("reference engine: the corpus did not run (tests/yaml/corpus_engine.py failed):")
        print(done.stderr[-3000:])
        return
    results = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"reference engine: {len(results)} entries with an engine kernel and OpCases")
    for tier in ENGINE_TIERS:
        print(f"  engine {tier} {sum(r[tier] for r in results.values()):>5} of {len(results)}")
    for entry, result in sorted(results.items()):
        if result["reason"]:
            print(f"    {entry}: {result['reason']}")


def _print_override_tiers(formulas: Path, library: str, emitted: list[str], without_jvp: list[str]) -> None:
    """OP and OC of the emitted entries: each swapped in for torch's own aten operator, proven
    through it (``tests/yaml/corpus_override.py``), counted; then each entry that is not, with why."""
    from transpiler.corpus_jvp import proof_environment

    done = subprocess.run([sys.executable, str(OVERRIDE_PROOF), str(formulas), library, json.dumps(emitted),
                           json.dumps(without_jvp)], capture_output=True, text=True, env=proof_environment())
    if done.returncode != 0:
        print("override: the corpus did not run (tests/yaml/corpus_override.py failed):")
        print(done.stderr[-3000:])
        return
    results = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"through torch's aten operators (formulas.torch.override): {len(emitted)} emitted entries")
    print("\n".join(override_report(results)))


def override_report(results: dict[str, dict[str, dict]]) -> list[str]:
    """The OP and OC lines of the funnel from ``corpus_override.py``'s results (tier -> entry ->
    result): per tier, next to each other, the entries proven (on OpInfo samples), refused, failed
    and without inputs; then the refused by reason, each reason with its entries, the entries
    proven on complex cases with their dtypes (a result's ``dtype``: ``complex128``, ``float64 ->
    complex128``; float64 where it has none), and each entry failed or without inputs with its
    reason (and the dtype it failed on, where not float64)."""
    lines = []
    for tier, by_entry in sorted(results.items()):
        statuses = Counter(r["status"] for r in by_entry.values())
        on_opinfo = sum(r["status"] == "proven" and r["source"] == "OpInfo" for r in by_entry.values())
        without_gradient = sum(r.get("without_gradient", False) for r in by_entry.values())
        lines.append(f"  {tier} {statuses['proven']:>5} proven ({on_opinfo} on torch's OpInfo samples, "
                     f"{without_gradient} without a gradient as torch's), "
                     + _short_of_full(statuses) +
                     f"{statuses['refused']} refused, {statuses['failed']} failed, "
                     f"{statuses['no inputs']} without inputs, of {len(by_entry)}")
    for tier, by_entry in sorted(results.items()):
        refused: dict[str, list[str]] = {}
        for entry, result in sorted(by_entry.items()):
            if result["status"] == "refused":
                refused.setdefault(_refusal_reason(entry, tier, result["reason"]), []).append(entry)
        for reason, entries in sorted(refused.items(), key=lambda item: (-len(item[1]), item[0])):
            lines.append(f"    [{tier} refused] {reason} ({len(entries)}): {', '.join(entries)}")
        on_complex = [f"{entry} ({result['dtype']})" for entry, result in sorted(by_entry.items())
                      if result["status"] == "proven" and _on_complex(result)]
        if on_complex:
            lines.append(f"    [{tier} proven on complex cases] ({len(on_complex)}): {', '.join(on_complex)}")
        for entry, result in sorted(by_entry.items()):
            if result["status"] in ("failed", "no inputs", *SHORT_OF_FULL):
                on = f" on {result['dtype']}" if _on_complex(result) else ""
                lines.append(f"    {entry} [{tier} {result['status']}{on}]: {result['reason']}")
    return lines


def _on_complex(result: dict) -> bool:
    """Whether an override result's cases were complex ones (its ``dtype`` other than float64)."""
    return result.get("dtype", "float64") not in ("float64", "")


#: OP / OC statuses of entries proven short of a full proof (``tests/yaml/corpus_override.py``), with
#: how the funnel counts them: to first order where torch's own second derivative is not implemented;
#: a random operator on a fixed draw, equal to torch's, where torch's derivative is not finite differences'.
SHORT_OF_FULL = {
    "first order": "proven to first order (torch's own second order is not implemented)",
    "fixed draw": "random, equal to torch's on a fixed draw (torch's own fails gradcheck)",
}


def _short_of_full(statuses: Counter) -> str:
    """The funnel's counts of :data:`SHORT_OF_FULL` entries, where there are any (each ends ``, ``)."""
    return "".join(f"{statuses[status]} {label}, " for status, label in SHORT_OF_FULL.items() if statuses[status])


def _refusal_reason(entry: str, tier: str, reason: str) -> str:
    """A refusal's reason without the entry's or tier's name it starts with, so that entries refused
    for the same reason group (``rrelu_with_noise: writes noise in place ...``)."""
    return reason.removeprefix(f"{entry}: ").removeprefix(f"{tier}: ")
