"""One run of ``transpile`` reads every file once and emits once (:mod:`transpiler.pipeline`)."""
from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest

from transpiler import frontend, pipeline
from transpiler.cpp import emit

FORMULA = '''\
from formulas import at, derivative


@derivative("sin(Tensor self) -> Tensor")
def sin(self):
    result = at.sin(self)

    def backward(grad):
        return {returned}

    return result, backward
'''


@pytest.fixture
def counted(monkeypatch) -> tuple[Counter, list[int]]:
    """The files the front-end reads (path -> times) and the number of emissions."""
    reads: Counter = Counter()
    emissions = [0]
    read_module, emit_library = frontend.read_module, emit.emit_library

    def counting_read(path):
        reads[Path(path).resolve()] += 1
        return read_module(path)

    def counting_emit(*args, **kwargs):
        emissions[0] += 1
        return emit_library(*args, **kwargs)

    monkeypatch.setattr(frontend, "read_module", counting_read)
    monkeypatch.setattr(emit, "emit_library", counting_emit)
    return reads, emissions


def package(directory: Path, returned: str) -> Path:
    directory.mkdir()
    (directory / "op.py").write_text(FORMULA.format(returned=returned))
    return directory


def test_a_clean_package_is_read_once_linted_and_emitted_once(tmp_path, counted):
    reads, emissions = counted
    result = pipeline.run(package(tmp_path / "ops", "grad * at.cos(self)"), "ops")
    assert result.diagnostics == () and "op.cpp" in result.files
    assert emissions == [1]
    assert reads[(tmp_path / "ops" / "op.py").resolve()] == 1
    assert set(reads.values()) == {1}                    # the shipped library too: each file once
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.files = {}


def test_what_the_emitter_refuses_is_reported_by_the_same_emission(tmp_path, counted):
    _, emissions = counted
    result = pipeline.run(package(tmp_path / "ops", "grad.exp()"), "ops")
    assert [(d.line, d.code) for d in result.diagnostics] == [(9, "DB200")]
    assert result.refusals == result.diagnostics and result.files == {}
    assert emissions == [1]


def test_without_lint_the_emitter_still_runs_once(tmp_path, counted):
    _, emissions = counted
    result = pipeline.run(package(tmp_path / "ops", "grad.exp()"), "ops", lint=False)
    assert [d.code for d in result.diagnostics] == ["DB200"]
    assert emissions == [1]


CAPTURING = '''\
from formulas import at, derivative


@derivative("{op}(Tensor self) -> Tensor")
def {op}(self):
    result = at.{op}(self)
    twice = self * 2

    def backward(grad):
        return grad * twice

    return result, backward
'''


def test_closure_rules_beside_the_emitters_check_find_what_they_find_here(tmp_path, monkeypatch):
    # per-formula mode: the closure rules of the files read now run in a second process beside
    # the emitter's check (:func:`pipeline._beside`); the same findings as when they run here
    formulas = tmp_path / "ops"
    formulas.mkdir()
    for op in ("sin", "cos", "tan", "exp"):
        (formulas / f"{op}.py").write_text(CAPTURING.format(op=op))
    beside, sides = pipeline._beside, []

    def recorded(work, side, size):
        result, found = beside(work, side, size)
        sides.append(sorted(found))
        return result, found

    monkeypatch.setattr(pipeline, "_beside", recorded)
    there = pipeline.run(formulas, "ops", keep_going=True)
    monkeypatch.setattr(pipeline, "BESIDE_MIN_FILES", 5)
    here = pipeline.run(formulas, "ops", keep_going=True)
    assert sides == [sorted(str(p) for p in formulas.glob("*.py")), []]
    assert there.lint_findings == here.lint_findings and there.files == here.files
    assert {(Path(d.path).name, d.code) for d in there.lint_findings} == {
        (f"{op}.py", "DB100") for op in ("sin", "cos", "tan", "exp")}


def test_the_shipped_files_left_unread_declare_nothing():
    # what a run on another package does not read of the shipped library (by its text,
    # :func:`library_discovery.shipped_context_files`) has no top-level declaration
    import ast

    from transpiler import library_discovery
    from transpiler.sources import python_sources

    unread = set(python_sources(library_discovery.SHIPPED_FORMULAS).files) - set(
        library_discovery.shipped_context_files())
    assert {p.relative_to(library_discovery.SHIPPED_FORMULAS).as_posix() for p in unread} >= {
        "torch/function.py", "torch/generate.py", "torch/override.py", "torch/backend.py"}
    for path in unread:
        for statement in ast.parse(path.read_text(encoding="utf-8")).body:
            calls = [statement.value] if isinstance(statement, ast.Expr) else []
            names = [d.func if isinstance(d, ast.Call) else d for d in getattr(statement, "decorator_list", [])]
            names += [c.func for c in calls if isinstance(c, ast.Call)]
            assert not any(ast.unparse(n).rsplit(".", 1)[-1] in ("derivative", "helper", "nondifferentiable")
                           for n in names), (path, statement.lineno)
