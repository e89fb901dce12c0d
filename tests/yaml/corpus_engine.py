"""R1, R2 and RT on the reference engine for the imported derivatives.yaml corpus.

Run as a script (a fresh process: it imports the corpus as a package)::

    python tests/yaml/corpus_engine.py FORMULAS_DIR

``FORMULAS_DIR``: what ``transpile import-yaml`` wrote. The corpus's formulas
run in a table of their own (:func:`reference_engine.packages.package_dispatcher`;
the library's operators are untouched), with the engine's NumPy kernels and
the library's ``@helper`` for a FunctionsManual name it has. Each corpus entry
whose operator has an engine kernel and OpCases in ``tests/op_cases.py`` runs
every case of it: R1 ``gradcheck``, R2 ``gradgradcheck``, RT first and second
derivatives equal torch's built-in op's (as in ``tests/engine/test_tiers.py``).
Prints one JSON object: entry -> ``{"R1": bool, "R2": bool, "RT": bool,
"reason": first failure or ""}``.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
#: The package name the corpus directory is imported under (its directory may be named ``formulas``).
PACKAGE = "derivatives_corpus"


def main(formulas_dir: str) -> dict[str, dict]:
    sys.path[:0] = [str(REPO), str(REPO / "tests")]
    from reference_engine.packages import package_dispatcher

    with tempfile.TemporaryDirectory() as holder:      # kept while the formulas run: the engine reads their files
        (Path(holder) / PACKAGE).symlink_to(Path(formulas_dir).resolve(), target_is_directory=True)
        sys.path.insert(0, holder)
        return _run(package_dispatcher(PACKAGE))


def _run(table: Any) -> dict[str, dict]:
    """R1, R2 and RT of each corpus entry with an engine kernel and OpCases, on ``table``
    (a :class:`reference_engine.dispatch.Dispatcher`)."""
    import reference_engine as engine
    from formulas import registry
    from op_cases import cases
    from reference_engine.kernels import KERNELS
    from tests.engine.test_tiers import assert_gradients_equal_torch, engine_call

    results: dict[str, dict] = {}
    for entry in sorted(registry(PACKAGE).formulas):
        if entry not in KERNELS or not cases(entry):
            continue
        result = results[entry] = {"R1": True, "R2": True, "RT": True, "reason": ""}
        for tier in ("R1", "R2", "RT"):
            for case in cases(entry):
                try:
                    if tier == "RT":
                        assert_gradients_equal_torch(case, table.overload(entry))
                    else:
                        fn, inputs = engine_call(case, table.overload(entry))
                        check = engine.gradcheck if tier == "R1" else engine.gradgradcheck
                        assert check(fn, inputs), f"{tier.lower()} returned False"
                except Exception as error:      # any failure of the tier on this case
                    result[tier] = False
                    first_line = (str(error).strip().splitlines() or [""])[0][:200]
                    result["reason"] = result["reason"] or f"{tier} {case.name}: {type(error).__name__}: {first_line}"
                    break
    return results


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
