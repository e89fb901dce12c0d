"""Per-module results kept between runs (:mod:`transpiler.module_results`): a run after an edit
re-lints and re-emits the edited module and what depends on it, and writes what a cold run writes."""
from __future__ import annotations

import functools
import pickle
import shutil

import pytest

from tests.cpp.test_model_cache import EXP, EXP_EDITED, files, transpile
from tests.cpp.test_transpile_cli import GOOD
from transpiler import model_summary, module_results, pipeline
from transpiler.cpp import emit
from transpiler.cpp.expressions import Context, HelperTable
from transpiler.schema import parse_schema

HELPER = """\


@helper
def twice(x: Tensor) -> Tensor:
    return x + x
"""
CALLER = """\
from formulas import at, derivative

from .a import twice


@derivative("sin(Tensor self) -> Tensor")
def sin(self):
    result = at.sin(self)
    def backward(grad):
        return twice(grad * at.cos(self))
    return result, backward
"""
WITH_HELPER = EXP.replace("import at, derivative", "import Tensor, at, derivative, helper") + HELPER
EDITS = {   # the helper's body, then its signature
    "body": WITH_HELPER.replace("return x + x", "return 2 * x"),
    "signature": WITH_HELPER.replace("(x: Tensor)", "(x: Tensor, times: int = 2)").replace("return x + x",
                                                                                        "return x * times"),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """One parse cache for the module's runs: the shipped library is parsed once."""
    return tmp_path_factory.mktemp("models")


def forget(models) -> None:
    """Remove every kept result (the parsed models stay)."""
    for results in models.glob("results-*"):
        shutil.rmtree(results)


def cold(formulas, out, models, *mode: str) -> int:
    """A run that computes every module's results (none kept), the parsed models reused."""
    forget(models)
    return transpile(formulas, out, "--cache-dir", str(models), *mode)


@pytest.fixture
def computed(monkeypatch) -> dict[str, list[str]]:
    """The modules whose C++ (``emitted``) and lint findings (``linted``) were computed, not kept,
    from now on, each computation of ``helpers.cpp`` (``helpers``), and the modules read from their
    summary whose syntax was loaded (``loaded``, :mod:`transpiler.model_summary`)."""
    found: dict[str, list[str]] = {"emitted": [], "linted": [], "helpers": [], "loaded": []}
    module_file, findings, helpers_files = emit._module_file, pipeline.formula_findings, emit._helpers_files
    deferred = model_summary.ModuleSummary.deferred

    def summarised(summary, load):
        def counted():
            found["loaded"].append(summary.path)
            return load()
        return deferred(summary, functools.cache(counted))

    def emitted(module, *args):
        found["emitted"].append(module.path)
        return module_file(module, *args)

    def linted(module, *args):
        found["linted"].append(module.path)
        return findings(module, *args)

    def helpers(library, *args):
        found["helpers"].append("helpers.cpp")
        return helpers_files(library, *args)

    monkeypatch.setattr(emit, "_module_file", emitted)
    monkeypatch.setattr(pipeline, "formula_findings", linted)
    monkeypatch.setattr(emit, "_helpers_files", helpers)
    monkeypatch.setattr(model_summary.ModuleSummary, "deferred", summarised)
    return found


def below(paths: list[str], directory) -> list[str]:
    """The file names of ``paths`` in ``directory`` (not the shipped library's), sorted, once each."""
    return sorted({path.rpartition("/")[2] for path in paths if path.startswith(str(directory))})


def test_an_edit_recomputes_only_the_edited_module_and_writes_what_a_cold_run_writes(tmp_path, models, computed):
    mode = ["--keep-going"]         # per-formula mode, as for the imported corpus (the helper test runs the default)
    formulas, out, cache = tmp_path / "pkg", tmp_path / "out", models
    formulas.mkdir()
    (formulas / "trig.py").write_text(GOOD)
    (formulas / "more.py").write_text(EXP)
    assert transpile(formulas, out, "--cache-dir", str(cache), *mode) == 0
    assert below(computed["emitted"], formulas) == below(computed["linted"], formulas) == ["more.py", "trig.py"]
    (formulas / "more.py").write_text(EXP_EDITED)
    for done in computed.values():
        done.clear()
    assert transpile(formulas, out, "--cache-dir", str(cache), *mode) == 0
    assert below(computed["emitted"], formulas) == below(computed["linted"], formulas) == ["more.py"]
    assert computed["helpers"] == []
    assert computed["loaded"] == []     # the edited module is parsed; of the others (and the shipped library)
                                        # only the summaries are read
    assert cold(formulas, tmp_path / "cold", models, *mode) == 0
    assert files(out) == files(tmp_path / "cold")
    assert b"result * grad" in (out / "more.cpp").read_bytes()


def test_an_edit_of_a_helper_recomputes_what_depends_on_it(tmp_path, models, computed):
    formulas, out, cache = tmp_path / "pkg", tmp_path / "out", models
    formulas.mkdir()
    (formulas / "a.py").write_text(WITH_HELPER)
    (formulas / "b.py").write_text(CALLER)
    assert transpile(formulas, out, "--cache-dir", str(cache)) == 0
    for edit, text in EDITS.items():
        (formulas / "a.py").write_text(text)
        for done in computed.values():
            done.clear()
        assert transpile(formulas, out, "--cache-dir", str(cache)) == 0
        # lint follows calls into helper bodies: the caller is linted again; the helper's body
        # leaves the caller's C++ as it was (helpers.cpp changes), its signature changes the call
        assert below(computed["linted"], formulas) == ["a.py", "b.py"], edit
        assert below(computed["emitted"], formulas) == (["a.py", "b.py"] if edit == "signature" else ["a.py"]), edit
        assert computed["helpers"] == ["helpers.cpp"], edit
        assert below(computed["loaded"], formulas) == ["b.py"], edit    # the caller's syntax, to lint and emit it
    assert cold(formulas, tmp_path / "cold", models) == 0
    assert files(out) == files(tmp_path / "cold")
    assert b"times" in (out / "helpers.cpp").read_bytes()


# An edit that changes what per-formula mode refuses: in the edited file (its one refusal fixed, a new
# one made: a lint finding, DB100, for the first cause), or in the file that calls an edited helper
# (its signature no longer takes the call: DB200 in the caller).
REFUSING = CALLER.replace("@derivative", """@derivative("tan(Tensor self) -> Tensor")
def tan(self):
    result = at.tan(self)
    def backward(grad):
        scale = {1: 2.0}
        return grad * result
    return result, backward


@derivative""")
REFUSAL_EDITS = {
    "formula": ("b.py", REFUSING.replace("scale = {1: 2.0}", "scale = 2.0").replace(
        "twice(grad * at.cos(self))", "twice(grad * middle)").replace(
        "result = at.sin(self)", "result = at.sin(self)\n    middle = at.cos(self)")),
    "helper": ("a.py", EDITS["signature"].replace("times: int = 2", "times: int")),
}


@pytest.mark.parametrize("edit", REFUSAL_EDITS)
def test_an_edit_that_changes_a_refusal_writes_and_reports_what_a_cold_run_does(tmp_path, models, capsys, edit):
    formulas, out = tmp_path / "pkg", tmp_path / "out"
    formulas.mkdir()
    (formulas / "a.py").write_text(WITH_HELPER)
    (formulas / "b.py").write_text(REFUSING)
    assert transpile(formulas, out, "--cache-dir", str(models), "--keep-going") == 1
    before = (out / "REFUSED").read_text()
    name, text = REFUSAL_EDITS[edit]
    (formulas / name).write_text(text)
    capsys.readouterr()
    warm = transpile(formulas, out, "--cache-dir", str(models), "--keep-going"), reported(capsys)
    cold_run = cold(formulas, tmp_path / "cold", models, "--keep-going"), reported(capsys)
    assert warm == cold_run and warm[0] == 1
    assert files(out) == files(tmp_path / "cold")     # the C++, MANIFEST and REFUSED
    assert (out / "REFUSED").read_text() != before
    assert ("DB100" if edit == "formula" else "missing argument 'times'") in (out / "REFUSED").read_text()


def reported(capsys) -> list[str]:
    """What a run printed, less the lines that name its output directory or time it."""
    printed = capsys.readouterr()
    return [line for line in printed.out.splitlines() if not line.startswith(("transpile: ", "  ops "))]


def test_corrupt_or_truncated_results_are_computed_again(tmp_path, models, computed):
    formulas, cache = tmp_path / "pkg", models
    forget(models)      # this package's results only, below
    formulas.mkdir()
    (formulas / "trig.py").write_text(GOOD)
    assert transpile(formulas, tmp_path / "first", "--cache-dir", str(cache)) == 0
    (results,) = cache.glob("results-*")
    kept = {entry: entry.read_bytes() for entry in results.iterdir()}
    damaged = {"truncated": lambda data: data[:len(data) // 2],
               "another shape": lambda data: pickle.dumps((module_results.FORMAT, ("junk",)))}
    for name, damage in damaged.items():
        for entry, data in kept.items():
            entry.write_bytes(damage(data))
        computed["emitted"].clear()
        assert transpile(formulas, tmp_path / name, "--cache-dir", str(cache)) == 0, name
        assert below(computed["emitted"], formulas) == ["trig.py"], name
        assert files(tmp_path / name) == files(tmp_path / "first"), name


def test_a_run_writes_only_the_results_it_computed_and_removes_the_unused(tmp_path, models):
    formulas, cache = tmp_path / "pkg", models
    forget(models)
    formulas.mkdir()
    (formulas / "a.py").write_text(EXP)
    (formulas / "trig.py").write_text(GOOD)
    assert transpile(formulas, tmp_path / "out", "--cache-dir", str(cache)) == 0
    (results,) = cache.glob("results-*")
    before = {entry.name: entry.stat().st_mtime_ns for entry in results.iterdir()}
    (formulas / "a.py").write_text(EXP_EDITED)
    assert transpile(formulas, tmp_path / "out", "--cache-dir", str(cache)) == 0
    after = {entry.name: entry.stat().st_mtime_ns for entry in results.iterdir()}
    kept = before.keys() & after.keys()
    assert kept and all(after[name] == before[name] for name in kept)     # not written again
    assert after.keys() - before.keys() and before.keys() - after.keys()  # a.py's new results, its old ones gone


def test_a_key_changes_with_the_generator(monkeypatch):
    key = module_results.key("module", "pkg/trig.py", ("sin", 5))
    assert key == module_results.key("module", "pkg/trig.py", ("sin", 5))
    assert key != module_results.key("module", "pkg/trig.py", ("sin", 6))
    monkeypatch.setattr(module_results, "generator_digest", lambda: "another transpiler")
    assert key != module_results.key("module", "pkg/trig.py", ("sin", 5))


def test_the_emitted_modules_keys_change_with_the_installed_torch(tmp_path, monkeypatch):
    # which ATen operators are Tensor methods only is read from the installed torchgen: another
    # torch is another context key (and so another key for every module's C++ and refusals)
    context = Context({"sin": (parse_schema("sin(Tensor self) -> Tensor"),)}, HelperTable(), {})
    keys = set()
    with module_results.kept_in(tmp_path, tmp_path, "pkg", False):
        for installed in [("native_functions.yaml", 1, 2), ("native_functions.yaml", 1, 3), None]:
            monkeypatch.setattr(emit, "method_only_source", lambda installed=installed: installed)
            emit._context_keys.clear()
            keys.add(emit._context_key(context, "pkg"))
    assert len(keys) == 3 and None not in keys
