"""``transpile``'s parse cache (:mod:`transpiler.model_cache`): a run that reuses it writes what a
cold run writes, and a model is reused only for the input, transpiler and libcst it came from."""
from __future__ import annotations

import dataclasses
import os
import pickle

import libcst as cst
import pytest

from tests.cpp.test_keep_going import GOOD, REFUSED
from transpiler import frontend, model_cache, syntax_pickle
from transpiler.library_discovery import SHIPPED_FORMULAS, shipped_context_files
from transpiler.cpp import generate
from transpiler.model import Positions

EXP = '''\
from formulas import at, derivative


@derivative("exp(Tensor self) -> Tensor")
def exp(self):
    result = at.exp(self)
    def backward(grad):
        return grad * result
    return result, backward
'''
# the same file edited as a developer would: another body; in per-formula mode, also a formula that is refused
EXP_EDITED = EXP.replace("return grad * result", "return result * grad")
EDITS = {"default": ([], EXP_EDITED, 0), "keep-going": (["--keep-going"], EXP_EDITED + REFUSED.split("@helper")[0], 1)}


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """The files parsed (not loaded from the cache) from now on; the process's own memo cleared."""
    parsed: list[str] = []
    parse = frontend._parse_module

    def counted(path: str, source: str):
        parsed.append(path)
        return parse(path, source)

    monkeypatch.setattr(frontend, "_parse_module", counted)
    frontend.parse_module.cache_clear()
    yield parsed
    frontend.parse_module.cache_clear()


def transpile(formulas, out, *options: str) -> int:
    frontend.parse_module.cache_clear()     # each run as a fresh process would make it
    return generate.main(["--formulas", str(formulas), "--out", str(out), *options])


def files(directory) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


@pytest.mark.parametrize("edit", EDITS)
def test_a_run_after_editing_one_file_writes_what_a_cold_run_writes(tmp_path, capsys, parses, edit):
    mode, edited, code = EDITS[edit]
    formulas, out, cache = tmp_path / "pkg", tmp_path / "out", tmp_path / "cache"
    formulas.mkdir()
    (formulas / "trig.py").write_text(GOOD)
    (formulas / "more.py").write_text(EXP)
    assert transpile(formulas, out, "--cache-dir", str(cache), *mode) == 0
    unchanged = (out / "trig.cpp").stat().st_mtime_ns
    (formulas / "more.py").write_text(edited)
    parses.clear()
    warm = transpile(formulas, out, "--cache-dir", str(cache), *mode)
    assert parses == [str(formulas / "more.py")]          # the other file and the shipped library: loaded
    cold = transpile(formulas, tmp_path / "cold", "--no-cache", *mode)
    assert warm == cold == code
    assert files(out) == files(tmp_path / "cold")
    assert b"result * grad" in (out / "more.cpp").read_bytes()
    assert (out / "trig.cpp").stat().st_mtime_ns == unchanged   # ninja recompiles only what changed
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("transpile: reading ")]
    shipped = len(shipped_context_files())       # the shipped files that can add to the library
    assert said == [f"transpile: reading {2 + shipped} formula files (once: kept parsed in {cache})",   # cold
                    f"transpile: reading 1 formula files (once: kept parsed in {cache})"]               # the edit


SOURCE = GOOD


def test_a_model_is_kept_for_its_path_text_transpiler_and_libcst_only(tmp_path, monkeypatch):
    cache = model_cache.ModelCache(tmp_path)
    key = cache.key("pkg/trig.py", SOURCE)
    assert key == cache.key("pkg/trig.py", SOURCE)
    others = {cache.key("pkg/other.py", SOURCE), cache.key("pkg/trig.py", SOURCE + "\n# edited\n")}
    monkeypatch.setattr(model_cache, "generator_digest", lambda: "another transpiler")
    others.add(cache.key("pkg/trig.py", SOURCE))
    monkeypatch.undo()
    monkeypatch.setattr(model_cache, "_libcst_version", lambda: "0.0.0")
    others.add(cache.key("pkg/trig.py", SOURCE))
    assert key not in others and len(others) == 4


def plain(module) -> str:
    """The model's repr with deferred formulas and closures (:mod:`transpiler.model_summary`) read in full."""
    return repr(module).replace("DeferredFormula(", "Formula(").replace("DeferredClosure(", "Closure(")


def test_a_stored_model_is_reused_and_an_unreadable_one_is_parsed_again(tmp_path):
    cache = model_cache.ModelCache(tmp_path)
    parsed: list[str] = []

    def parse(path: str, source: str):
        parsed.append(path)
        return frontend._parse_module(path, source)

    first = cache.parse("pkg/trig.py", SOURCE, parse)
    cache.store()
    again = cache.parse("pkg/trig.py", SOURCE, parse)
    assert parsed == ["pkg/trig.py"] and again is not first
    assert [f.op_name for f in again.formulas] == ["sin", "cos"]      # from the summary
    assert plain(again) == plain(first)     # the same model (libcst nodes compare by identity)
    assert again.span(again.formulas[0].node) == first.span(first.formulas[0].node)
    assert parsed == ["pkg/trig.py"]        # the syntax was loaded, not parsed
    key = cache.key("pkg/trig.py", SOURCE)
    full, summary = tmp_path / f"{key}.pickle", tmp_path / f"{key}.summary.pickle"
    full.write_bytes(b"not a pickle")       # the summary is read; the syntax, once read, is parsed again
    deferred = cache.parse("pkg/trig.py", SOURCE, parse)
    assert parsed == ["pkg/trig.py"] and plain(deferred) == plain(first)
    assert parsed == ["pkg/trig.py"] * 2
    summary.write_bytes(b"not a pickle")
    assert plain(cache.parse("pkg/trig.py", SOURCE, parse)) == plain(first)
    assert parsed == ["pkg/trig.py"] * 3


def test_a_syntax_tree_pickled_by_its_field_values_loads_back_the_same_tree():
    tree = cst.parse_module((SHIPPED_FORMULAS / "helpers.py").read_text(encoding="utf-8"))
    shared = tree.body[0]
    tree_again, shared_again = pickle.loads(syntax_pickle.dumps((tree, shared)))
    assert tree_again.deep_equals(tree) and tree_again.code == tree.code
    assert shared_again is tree_again.body[0]      # a node held twice is one node once loaded


def same_model(loaded: object, fresh: object, nodes: dict[cst.CSTNode, cst.CSTNode]) -> bool:
    """Whether ``loaded`` is ``fresh`` field by field, the fields that do not compare included
    (a module's positions, a formula's dataflow): a syntax node is the same tree, and each loaded node
    stands for one fresh node wherever it is held (``nodes``: loaded -> fresh, filled here); positions
    are the same, in the same order."""
    if isinstance(fresh, cst.CSTNode):
        if type(loaded) is not type(fresh) or nodes.get(loaded, fresh) is not fresh:
            return False
        if loaded in nodes:
            return True             # compared where first met
        nodes[loaded] = fresh
    if isinstance(fresh, Positions):
        return type(loaded) is Positions and same_model(list(loaded.starts.items()), list(fresh.starts.items()), nodes)
    if dataclasses.is_dataclass(fresh) and not isinstance(fresh, type):
        return type(loaded) is type(fresh) and all(
            same_model(getattr(loaded, f.name), getattr(fresh, f.name), nodes) for f in dataclasses.fields(fresh))
    if isinstance(fresh, (tuple, list)):
        return type(loaded) is type(fresh) and len(loaded) == len(fresh) and all(
            same_model(a, b, nodes) for a, b in zip(loaded, fresh))
    if isinstance(fresh, dict):
        return type(loaded) is dict and same_model(list(loaded.items()), list(fresh.items()), nodes)
    return type(loaded) is type(fresh) and loaded == fresh


def test_a_stored_model_loads_back_equal_to_a_fresh_one_field_by_field():
    path = str(SHIPPED_FORMULAS / "convolution.py")     # helpers, a formula family, written jvps
    fresh = frontend._parse_module(path, (SHIPPED_FORMULAS / "convolution.py").read_text(encoding="utf-8"))
    loaded, nodes = pickle.loads(syntax_pickle.dumps(fresh)), {}
    assert same_model(loaded, fresh, nodes)
    assert len(nodes) == len(fresh.positions) > 5000     # every node of the file
    assert not same_model(loaded, dataclasses.replace(fresh, positions=Positions(dict(reversed(
        fresh.positions.starts.items())))), {})      # the comparison sees the positions


def test_entries_written_in_the_background_are_pruned_to_the_most_recently_used(tmp_path, monkeypatch):
    monkeypatch.setattr(model_cache, "KEPT_ENTRIES", 2)
    cache = model_cache.ModelCache(tmp_path)
    for index in range(3):
        cache.parse(f"pkg/m{index}.py", SOURCE, frontend._parse_module)
    cache.store(background=True)        # written by a second process, waited for
    cache.finish()
    assert len(list(tmp_path.glob("*.pickle"))) == 2     # pruned at the end of the run
    for index in range(3):
        cache.parse(f"pkg/m{index}.py", SOURCE, frontend._parse_module)
    cache.store()
    oldest = cache.directory / f"{cache.key('pkg/m0.py', SOURCE)}.pickle"
    os.utime(oldest, ns=(1, 1))
    cache.prune()
    assert len(list(tmp_path.glob("*.pickle"))) == 2 and not oldest.exists()


def test_a_second_process_reads_the_last_new_files_and_one_that_cannot_store_them_leaves_them_here(
        tmp_path, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(model_cache, "HELPER_SHARE", 0.5)
    paths = [f"pkg/m{index}.py" for index in range(4)]
    cache = model_cache.ModelCache(tmp_path)
    parsed: list[str] = []      # what this process parsed (the second process's parses are its own)

    def parse(path: str, source: str):
        def counted(path: str, source: str):
            parsed.append(path)
            return frontend._parse_module(path, source)
        return cache.parse(path, source, counted)

    monkeypatch.setattr(model_cache, "read_source", lambda path: SOURCE)
    cache.prepare(paths, parse)
    read = [parse(path, SOURCE) for path in paths]       # as the run reads them: stored or deferred
    cache.finish()
    assert parsed == paths[:2]          # the last two, half of the bytes, were read by the second process
    assert [plain(module) for module in read] == [plain(frontend._parse_module(path, SOURCE)) for path in paths]
    assert len(list(tmp_path.glob("*.pickle"))) == 8      # every model and its summary stored

    parent = os.getpid()
    store = model_cache.ModelCache._write

    def dies_in_the_second_process(self, pending, summaries):
        if os.getpid() != parent:
            raise MemoryError
        store(self, pending, summaries)
    monkeypatch.setattr(model_cache.ModelCache, "_write", dies_in_the_second_process)
    cache, parsed[:] = model_cache.ModelCache(tmp_path / "other"), []
    cache.prepare(paths, parse)
    cache.finish()
    assert parsed == paths              # what it could not store is parsed here

    def no_process_left():
        raise BlockingIOError("fork: Resource temporarily unavailable")
    monkeypatch.setattr(os, "fork", no_process_left)
    cache, parsed[:] = model_cache.ModelCache(tmp_path / "third"), []
    cache.prepare(paths, parse)
    cache.finish()
    assert parsed == paths and len(list((tmp_path / "third").glob("*.pickle"))) == 8   # read and stored here
