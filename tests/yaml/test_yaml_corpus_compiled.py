"""The imported derivatives.yaml through the one pipeline: per-formula transpile, compile, C1 and CT.

Runs ``transpile coverage --corpus`` (:mod:`transpiler.corpus`) as a user would: the corpus is
generated from the installed torch (never committed) into ``build/corpus``, transpiled with
``--keep-going``, compiled into ``build/`` (cached: one translation unit per formula file, so a
warm run recompiles nothing) and every compiled operator proven by ``tests/yaml/corpus_proof.py``
in a fresh process, on torch's own OpInfo float64 samples where one reaches the overload and on
our inputs (``tests/yaml/corpus_inputs.py``) otherwise. The funnel is printed (``-s``).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.cpp.compiled import REPO
from transpiler.corpus import OVERRIDE_PROOF

pytest.importorskip("expecttest")     # OpInfo's module needs it
pytest.importorskip("torch")

# Entries proven on both tiers, and of them those proven on torch's OpInfo samples (measured: 496
# and 342 with torch 2.13.0, `transpile coverage --corpus`, 75 of the 496 without a gradient);
# a change that loses one fails here.
AT_LEAST_PROVEN = 496
AT_LEAST_ON_OPINFO = 342
ENGINE_AT_LEAST = {"R1": 182, "R2": 175, "RT": 177}     # measured 182 / 175 / 177 of 207 (tests/yaml/corpus_engine.py)
# Entries emitted, and of those with a jvp the ones emitted with it (measured: 563 and 215 with torch 2.13.0).
AT_LEAST_EMITTED = 563
AT_LEAST_JVPS = 215
# Emitted entries without a jvp whose derived jvp passes F1 on torch (measured: 269 of the 341
# without one, 310 deriving, with torch 2.13.0); the lines' patterns.
AT_LEAST_DERIVED_PROVEN = 269
DERIVED_COUNTS = (r"^  without a jvp\s+(\d+) emitted \(no written forward formula in torch; \d+ have its auto_linear / "
                  r"auto_element_wise rule\): (\d+) derive one, (\d+) refused$")
FORWARD_PROOFS = r"^    F1 \+ RF of the jvps compiled .+: (\d+) proven, (\d+) failed, (\d+) without a case$"
GRADCHECKABLE = (r"^  (\d+) of (\d+) entries torch can gradcheck are proven \((\d+\.\d) %\): on torch's OpInfo "
                 r"samples (\d+), on our inputs (\d+)$")
DERIVED_PROOFS = r"^    F1 of the derived jvp .+: (\d+) proven, (\d+) failed, (\d+) without a case; "


@pytest.fixture(scope="module")
def funnel() -> subprocess.CompletedProcess:
    """``transpile coverage --corpus`` run once: the corpus imported into build/corpus/formulas and
    its library built into build/derivatives_ops."""
    done = subprocess.run([sys.executable, "-m", "transpiler", "coverage", "--corpus", "--build-dir",
                           str(REPO / "build")], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_the_corpus_funnel_reaches_c1_and_ct(funnel: subprocess.CompletedProcess):
    done = funnel
    print("\n" + done.stdout)
    counts = dict(re.findall(r"^  (\S+)\s+(\d+) of 687$", done.stdout, re.MULTILINE))
    assert counts["imported"] == "687"
    assert int(counts["emitted"]) == int(counts["compiled"]) >= AT_LEAST_EMITTED
    assert int(counts["CT"]) >= AT_LEAST_PROVEN
    assert int(counts["C1"]) >= int(counts["CT"])
    # every CT entry was proven on torch's OpInfo samples or on our inputs, and the funnel says which
    on_opinfo, on_ours = map(int, re.search(r"^  CT proven on torch's OpInfo samples (\d+), on our inputs (\d+)$",
                                            done.stdout, re.MULTILINE).groups())
    assert on_opinfo + on_ours == int(counts["CT"]) and on_opinfo >= AT_LEAST_ON_OPINFO
    # forward mode: the derivatives.yaml entries with a ``result:`` formula (a jvp), those emitted
    # with it, and those emitted without it (their jvp left out: forward AD raises torch's error)
    imported_jvps, emitted_jvps, without_jvps = map(int, re.search(
        r"^  with a jvp\s+(\d+) imported, (\d+) emitted with their jvp, (\d+) without \(forward AD raises torch's "
        r"error\)$", done.stdout, re.MULTILINE).groups())
    assert imported_jvps == 243 and AT_LEAST_JVPS <= emitted_jvps <= int(counts["emitted"])
    listed_without = re.findall(r"^  \S+ \[jvp left out\]: .+$", done.stdout, re.MULTILINE)
    assert len(listed_without) == without_jvps
    # those compiled with their jvp are proven in forward mode (F1 + RF), each that is not listed
    proven_jvps, failed_jvps, no_case_jvps = map(int, re.search(FORWARD_PROOFS, done.stdout, re.MULTILINE).groups())
    assert proven_jvps + failed_jvps + no_case_jvps == emitted_jvps
    assert len(re.findall(r"^  \S+ \[jvp (failed|no inputs)\]: .+$", done.stdout, re.MULTILINE)) \
        == failed_jvps + no_case_jvps
    # forward mode derived for the emitted entries torch gives none: counted, each refusal and
    # each entry that does not pass F1 listed with its reason
    without, derived, refused = map(int, re.search(DERIVED_COUNTS, done.stdout, re.MULTILINE).groups())
    proven, failed, no_case = map(int, re.search(DERIVED_PROOFS, done.stdout, re.MULTILINE).groups())
    assert derived + refused == without and proven + failed + no_case == derived
    assert proven >= AT_LEAST_DERIVED_PROVEN
    assert len(re.findall(r"^  \S+ \[jvp not derived\]: .+$", done.stdout, re.MULTILINE)) == refused
    assert len(re.findall(r"^  \S+ \[derived jvp (failed|no inputs)\]: .+$", done.stdout, re.MULTILINE)) \
        == failed + no_case
    # the share of the entries torch itself can gradcheck (its own overload passes gradcheck and
    # gradgradcheck on CPU float64 on one of the proof's cases) that are proven, split OpInfo/ours;
    # each of those not proven listed under its stage and reason
    proven_share = re.search(GRADCHECKABLE, done.stdout, re.MULTILINE)
    assert proven_share, done.stdout[-3000:]
    shared, gradcheckable, percent, share_opinfo, share_ours = proven_share.groups()
    assert int(shared) == int(share_opinfo) + int(share_ours) <= min(int(gradcheckable), int(counts["CT"]))
    assert f"{100 * int(shared) / int(gradcheckable):.1f}" == percent
    grouped = re.findall(r"^    (?:import|lint|emit|compile|C1|CT) .+ \((\d+)\)$", done.stdout, re.MULTILINE)
    assert sum(map(int, grouped)) == int(gradcheckable) - int(shared)
    # every entry that falls out is listed with its stage and reason
    listed = re.findall(r"^  \S+ \[(import|lint|emit|compile|C1|CT)\]: .+$", done.stdout, re.MULTILINE)
    assert len(listed) == 687 - int(counts["CT"])
    # the reference engine runs the imported formulas too, in a table of their own (measured with
    # torch 2.13.0: R1 173, R2 160, RT 168 of the 206 entries with an engine kernel and OpCases)
    engine = {tier: (int(passed), int(total)) for tier, passed, total
              in re.findall(r"^  engine (R1|R2|RT)\s+(\d+) of (\d+)$", done.stdout, re.MULTILINE)}
    assert engine["R1"][0] >= ENGINE_AT_LEAST["R1"] and engine["R2"][0] >= ENGINE_AT_LEAST["R2"]
    assert engine["RT"][0] >= ENGINE_AT_LEAST["RT"] and engine["R1"][1] >= 170
    # its stages, said on stderr as they start (a line each: stderr is not a terminal here)
    stages = [line.split(": ", 1)[1].split()[0] for line in done.stderr.splitlines()
              if line.startswith("coverage --corpus: ")]
    assert stages[:4] == ["import", "lint", "derive", "compile"] and stages[-3:] == ["prove", "run", "done"]
    assert all(stage in ("compile", "link", "precompiling") for stage in stages[4:-3])


# Emitted entries of different kinds (pointwise, binary, a helper of the shipped library's standing in for
# FunctionsManual's, a reduction with a default keyword argument, multiple outputs, a non-differentiable
# floating output with a jvp, a view, an in-place operator with its own formula), an entry refused for
# calling a backward torch has no CPU kernel for, and a view from complex to real numbers, proven on
# complex128 on OP and refused on OC (a compiled node refuses complex tensors); `transpile coverage
# --corpus --override` runs every emitted entry.
OVERRIDE_SAMPLE = ["sin", "mul.Tensor", "mean.dim", "cumsum", "max.dim", "linalg_lu", "t", "celu_", "max_pool2d",
                   "view_as_real"]


def test_emitted_entries_swapped_in_for_torchs_aten_operators(funnel: subprocess.CompletedProcess):
    """Tiers OP and OC on a sample of the corpus: each entry's formula (Python, then its compiled
    node) stands in for torch's own aten operator and is proven through it on torch's OpInfo samples
    (complex128 ones for an entry without a float64 case)."""
    done = subprocess.run([sys.executable, str(OVERRIDE_PROOF), str(REPO / "build" / "corpus" / "formulas"),
                           str(REPO / "build" / "derivatives_ops" / "derivatives_ops.so"),
                           json.dumps(OVERRIDE_SAMPLE), "[]"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for tier in ("OP", "OC"):
        by_entry = results[tier]
        pool = by_entry.pop("max_pool2d")
        assert pool["status"] == "refused" and "aten::max_pool2d_backward, which torch has no CPU" in pool["reason"], pool
        complex_ = by_entry.pop("view_as_real")
        assert (complex_["status"], complex_["source"], complex_["dtype"]) == (
            "proven" if tier == "OP" else "refused", "OpInfo", "complex128 -> float64"), complex_
        assert {entry: (r["status"], r["source"], r["dtype"]) for entry, r in by_entry.items()} == {
            entry: ("proven", "OpInfo", "float64") for entry in OVERRIDE_SAMPLE[:-2]}, by_entry
