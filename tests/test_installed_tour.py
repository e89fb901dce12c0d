"""The README's tour, as a user runs it: a plain (non-editable) ``pip install .`` into a fresh
virtual environment, every step from a directory that has nothing to do with this clone."""
from __future__ import annotations

import os
import re
import subprocess
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytest.importorskip("torch")


def tour_blocks() -> dict[str, str]:
    """The tour's Python blocks: the formula file, the engine step, the build step, the torch step."""
    readme = (REPO / "README.md").read_text()
    tour = readme[readme.index("## A tour"):readme.index("## derivatives.yaml")]
    blocks = re.findall(r"```python\n(.*?)```", tour, re.S)
    named = {"formula": [b for b in blocks if b.startswith("# myops/sinh.py")],
             "engine": [b for b in blocks if "from myops.sinh import sinh" in b],
             "build": [b for b in blocks if "transpiler.build" in b],
             "torch": [b for b in blocks if "from formulas.torch import" in b]}
    assert all(len(found) == 1 for found in named.values()), named
    return {name: found[0] for name, found in named.items()}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv (seeing the system's libcst, numpy, torch) with this project installed as a wheel."""
    environment = tmp_path_factory.mktemp("venv") / "env"
    venv.create(environment, system_site_packages=True, with_pip=True)
    python = environment / "bin" / "python"
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(REPO)],
                          capture_output=True, text=True, env=_clean_env(), cwd=environment)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return environment


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without this checkout on the path (the suite runs with PYTHONPATH set)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, **extra}


def test_readme_tour_runs_from_an_unrelated_directory(installed: Path, tmp_path: Path):
    python, transpile = installed / "bin" / "python", installed / "bin" / "transpile"
    work = tmp_path / "elsewhere"
    (work / "myops").mkdir(parents=True)
    env = _clean_env(TRANSPILE_BUILD_DIR=str(REPO / "build" / "tour"))   # shares the suite's compiler cache

    def run(*command: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(command), cwd=work, env=env, capture_output=True, text=True, timeout=900)

    where = run(str(python), "-c", "import formulas, reference_engine, transpiler; "
                "print(transpiler.__file__, formulas.__file__, reference_engine.__file__)")
    site = installed / "lib"
    assert all(Path(p).is_relative_to(site) for p in where.stdout.split()), where.stdout + where.stderr

    blocks = tour_blocks()
    (work / "myops" / "sinh.py").write_text(blocks["formula"])
    lint = run(str(transpile), "lint", "myops")                                   # step 2
    assert (lint.returncode, lint.stdout) == (0, ""), lint.stdout + lint.stderr
    generated = run(str(transpile), "--formulas", "myops", "--out", "my_cpp")     # step 3
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert "TORCH_LIBRARY_FRAGMENT(myops, m)" in (work / "my_cpp" / "sinh.cpp").read_text()
    check = run(str(transpile), "--check", "--formulas", "myops", "--out", "my_cpp")
    assert check.returncode == 0, check.stdout + check.stderr
    engine = run(str(python), "-c", blocks["engine"])                              # step 4
    assert engine.returncode == 0 and "digraph" in engine.stdout, engine.stderr[-3000:]
    built = run(str(python), "-c", blocks["build"])                                # step 5
    assert built.returncode == 0, built.stderr[-3000:]
    assert (REPO / "build" / "tour" / "myops_ops" / "myops_ops.so").is_file()
    swapped = run(str(python), "-c", blocks["torch"])                              # step 5b
    assert swapped.returncode == 0, swapped.stderr[-3000:]

    # the defaults are this directory's, never the installed package's
    bare = run(str(transpile))
    assert bare.returncode == 2 and "formulas: not a directory" in bare.stderr, bare.stderr
    assert sorted(p.name for p in work.iterdir()) == ["my_cpp", "myops"]
    assert not list(site.rglob("out_cpp"))
