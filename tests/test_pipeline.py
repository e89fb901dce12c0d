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
