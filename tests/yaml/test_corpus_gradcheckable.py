"""The corpus funnel's share of the entries torch itself can gradcheck that are proven
(:func:`transpiler.corpus.gradcheckable_report`): counted over torch's own verdicts only, split by
where the cases came from, and every entry torch can gradcheck that is not proven listed under
its stage and reason, never a generic one."""
from __future__ import annotations

import re

from transpiler.corpus import gradcheckable_report

# The reasons the funnel gives, as it gives them (a diagnostic with its location, a proof's failure).
FALLEN = {
    "mvlgamma": ("emit", ("/b/corpus/formulas/derivatives_007.py:117:21: DB201 cannot transliterate a call to "
                         "'mvlgamma_backward' to C++")),
    "index_reduce": ("emit", ("/b/corpus/formulas/derivatives_004.py:314:34: DB201 cannot transliterate a call to "
                             "'index_reduce_backward' to C++")),
    "clamp.Tensor": ("C1", "C1: gradcheck (Backward is not reentrant)"),
    "max_pool2d": ("C1", ("C1: the formula calls aten::max_pool2d_backward, which torch has no CPU kernel for "
                         "(torch's own op reaches another formula on CPU)")),
    "atan2": ("CT", "CT: first derivative differs from torch's"),
    "_conj": ("C1", "no inputs: no float64 tensor to differentiate"),    # torch cannot gradcheck it either
}


def test_counts_only_the_entries_torch_gradchecks_and_groups_the_rest_by_reason():
    verdicts = {"sin": True, "mul.Tensor": True, "cumsum": True, "eq.Tensor": False, "_conj": False,
                **{entry: True for entry in FALLEN if entry != "_conj"}}
    proven_on = {"sin": "OpInfo", "mul.Tensor": "OpInfo", "cumsum": "ours", "eq.Tensor": "OpInfo"}
    lines = gradcheckable_report(verdicts, proven_on, FALLEN)
    assert lines[0] == ("torch's own overload passes gradcheck and gradgradcheck (CPU, float64) on 8 of 10 "
                        "entries")
    # eq.Tensor is proven (without a gradient) but torch cannot gradcheck it: in neither count
    assert lines[1] == ("  3 of 8 entries torch can gradcheck are proven (37.5 %): on torch's OpInfo samples 2, "
                        "on our inputs 1")
    assert re.fullmatch(r"  (\d+) of (\d+) entries torch can gradcheck are proven \((\d+\.\d) %\): on torch's "
                        r"OpInfo samples (\d+), on our inputs (\d+)", lines[1])
    assert lines[2] == "  the 5 not proven, by reason:"
    assert lines[3:] == [
        "    emit DB201 (2)",
        "      index_reduce: DB201 cannot transliterate a call to 'index_reduce_backward' to C++",
        "      mvlgamma: DB201 cannot transliterate a call to 'mvlgamma_backward' to C++",
        "    C1 calls a kernel torch has no CPU version of (1)",
        ("      max_pool2d: C1: the formula calls aten::max_pool2d_backward, which torch has no CPU kernel for "
        "(torch's own op reaches another formula on CPU)"),
        "    C1 gradcheck (Backward is not reentrant) (1)",
        "      clamp.Tensor: C1: gradcheck (Backward is not reentrant)",
        "    CT first derivative differs from torch's (1)",
        "      atan2: CT: first derivative differs from torch's",
    ]


def test_every_entry_torch_gradchecks_proven():
    lines = gradcheckable_report({"sin": True, "cos": True}, {"sin": "OpInfo", "cos": "ours"}, {})
    assert lines[1:] == [("  2 of 2 entries torch can gradcheck are proven (100.0 %): on torch's OpInfo samples 1, "
                         "on our inputs 1")]
