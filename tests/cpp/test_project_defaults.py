"""Defaults come from the user's project (working directory or ``[tool.transpile]``), never from the
installed package; the build goes to a per-user cache and refuses directories it did not create."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.cpp.test_transpile_cli import GOOD
from transpiler import build, project
from transpiler.cpp import generate

REPO = Path(__file__).resolve().parents[2]


def repository_snapshot() -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (REPO / "out_cpp").iterdir()}


def test_transpile_defaults_to_the_working_directory(tmp_path: Path, monkeypatch, capsys):
    (tmp_path / "formulas").mkdir()
    (tmp_path / "formulas" / "trig.py").write_text(GOOD)
    monkeypatch.chdir(tmp_path)
    before = repository_snapshot()
    assert generate.main([]) == 0
    assert "trig.cpp" in {p.name for p in (tmp_path / "out_cpp").iterdir()}
    # a user's formulas/ is named after the project, so only the shipped library is torch.ops.formulas
    assert f"TORCH_LIBRARY_FRAGMENT({tmp_path.name}, m)" in (tmp_path / "out_cpp" / "trig.cpp").read_text()
    assert generate.main(["--check"]) == 0
    assert repository_snapshot() == before


def test_transpile_without_formulas_here_says_so(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert generate.main([]) == 2
    assert capsys.readouterr().err == (f"transpile: {Path('formulas')}: not a directory "
                                       "(give --formulas DIR or run in the project)\n")
    assert list(tmp_path.iterdir()) == []


def test_pyproject_table_sets_paths_and_namespace(tmp_path: Path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "mine"\n\n[tool.transpile]\nformulas = "src/ops"\nout = "generated/cpp"\n'
        'namespace = "mine"\nbuild-dir = ".cache/ops"\n')
    (tmp_path / "src" / "ops").mkdir(parents=True)
    (tmp_path / "src" / "ops" / "trig.py").write_text(GOOD)
    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path / "docs")                  # anywhere inside the project
    monkeypatch.delenv(project.CACHE_ENV, raising=False)
    assert generate.main([]) == 0
    assert "TORCH_LIBRARY_FRAGMENT(mine, m)" in (tmp_path / "generated" / "cpp" / "trig.cpp").read_text()
    assert project.find_project().build_dir == tmp_path / ".cache" / "ops"
    assert build.default_name(tmp_path / "generated" / "cpp") == "mine_ops"


@pytest.mark.parametrize("table, message", [
    ('namespace = "aten"', "namespace 'aten': torch uses it already"),
    ('namespace = "my-ops"', "namespace 'my-ops': must be an identifier"),
    ('output = "x"', "unknown [tool.transpile] key(s) output"),
    ('formulas = [', "cannot read it"),
    ('[broken', "cannot read it"),
])
def test_bad_configuration_is_one_line(tmp_path: Path, monkeypatch, capsys, table, message):
    (tmp_path / "pyproject.toml").write_text(f"[tool.transpile]\n{table}\n")
    monkeypatch.chdir(tmp_path)
    assert generate.main([]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.splitlines()) == 1


def test_build_cache_is_per_user_and_overridable(tmp_path: Path, monkeypatch):
    monkeypatch.delenv(project.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    assert project.find_project().build_dir == tmp_path / "xdg" / "derivatives-transpiler"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert project.find_project().build_dir == Path.home() / ".cache" / "derivatives-transpiler"
    monkeypatch.setenv(project.CACHE_ENV, str(tmp_path / "mine"))
    assert project.find_project().build_dir == tmp_path / "mine"


def test_the_repository_is_a_project_too(monkeypatch):
    monkeypatch.chdir(REPO / "tests")
    found = project.find_project()
    assert (found.formulas, found.out, found.namespace) == (REPO / "formulas", REPO / "out_cpp", "formulas")


def test_build_defaults_to_the_working_directory(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert build.main([]) == 2
    assert capsys.readouterr().err == f"{tmp_path / 'out_cpp'}: no generated C++ here; run `transpile` first\n"


@pytest.mark.parametrize("case", ["foreign files", "a file", "the sources", "cannot be created"])
def test_build_refuses_a_directory_it_did_not_create(tmp_path: Path, monkeypatch, capsys, case):
    (tmp_path / "formulas").mkdir()
    (tmp_path / "formulas" / "trig.py").write_text(GOOD)
    monkeypatch.chdir(tmp_path)
    assert generate.main(["--namespace", "trig"]) == 0
    cache = tmp_path / "cache"
    cache.mkdir()
    if case == "foreign files":
        (cache / "trig_ops").mkdir()
        (cache / "trig_ops" / "thesis.tex").write_text("years of work\n")
        argv = ["--build-dir", str(cache)]
    elif case == "a file":
        (cache / "trig_ops").write_text("a file\n")
        argv = ["--build-dir", str(cache)]
    elif case == "the sources":
        argv = ["--build-dir", str(tmp_path), "--name", "out_cpp"]
    else:
        argv = ["--build-dir", "/proc/version"]
    before = sorted((str(p), p.read_bytes() if p.is_file() else b"") for p in tmp_path.rglob("*"))
    capsys.readouterr()
    assert build.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m transpiler.build: ") and len(err.splitlines()) == 1
    assert sorted((str(p), p.read_bytes() if p.is_file() else b"") for p in tmp_path.rglob("*")) == before


def test_someone_elses_broken_pyproject_is_not_ours_to_judge(tmp_path: Path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[project\nname = \n")
    monkeypatch.chdir(tmp_path)
    assert project.find_project().formulas == tmp_path / "formulas"
