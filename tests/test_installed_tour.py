"""The README's tour, as a user runs it: a plain (non-editable) ``pip install .`` into a fresh
virtual environment, every step from a directory that has nothing to do with this clone.

The environment first has the base install only (its dependencies from the package index, no
torch): lint, ``transpile`` and the engine run there, and building says in one line what to
install. Then it is given the running interpreter's site-packages (a ``.pth`` file, so it works
whether the suite runs in the system interpreter or in a virtualenv of its own) and the tour
builds and gradchecks the C++.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
INSTALL_HINT = "needs torch (torch==2.13.0, not installed); install it with: " \
               "python3 -m pip install 'derivatives-transpiler[torch]'"

pytest.importorskip("torch")


def tour_blocks() -> dict[str, str]:
    """The tour's Python blocks: the formula file, the engine step, the build step, the torch step,
    the test file."""
    readme = (REPO / "README.md").read_text()
    tour = readme[readme.index("## A tour"):readme.index("## derivatives.yaml")]
    blocks = re.findall(r"```python\n(.*?)```", tour, re.S)
    named = {"formula": [b for b in blocks if b.startswith("# myops/sinh.py")],
             "engine": [b for b in blocks if "import reference_engine as engine" in b and "myops" in b],
             "build": [b for b in blocks if "transpiler.build" in b],
             "torch": [b for b in blocks if "from formulas.torch import" in b],
             "test": [b for b in blocks if b.startswith("# test_myops.py")]}
    assert all(len(found) == 1 for found in named.values()), named
    return {name: found[0] for name, found in named.items()}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with this project installed as a wheel, its dependencies from the package index."""
    environment = tmp_path_factory.mktemp("venv") / "env"
    venv.create(environment, with_pip=True)
    python = environment / "bin" / "python"
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", str(REPO)],
                          capture_output=True, text=True, env=_clean_env(), cwd=environment)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return environment


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without this checkout on the path (the suite runs with PYTHONPATH set)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, **extra}


def _site_packages(environment: Path) -> Path:
    (found,) = (environment / "lib").glob("python3*/site-packages")
    return found


def _see_running_interpreters_packages(environment: Path) -> None:
    """Put the site-packages of the interpreter running the suite (torch, ninja) on the venv's path,
    after its own: a ``.pth`` line, whose own ``.pth`` files (an editable install of this clone)
    are not processed."""
    outer = [p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages"))
             and Path(p).is_dir() and not Path(p).resolve().is_relative_to(environment.resolve())]
    (_site_packages(environment) / "zz_running_interpreter.pth").write_text("".join(f"{p}\n" for p in outer))


def _with_the_suites_precompiled_headers(build_dir: Path) -> Path:
    """``build_dir`` (the tour's libraries, lint cache and prove output, apart from the suite's) with
    the suite's precompiled libtorch headers (``build/precompiled``, keyed on torch, compiler and
    flags) in place of its own: precompiling them costs more than building the tour's one op."""
    from transpiler.build import PRECOMPILED_DIRECTORY

    shared, own = REPO / "build" / PRECOMPILED_DIRECTORY, build_dir / PRECOMPILED_DIRECTORY
    shared.mkdir(parents=True, exist_ok=True)
    build_dir.mkdir(parents=True, exist_ok=True)
    if not own.is_symlink():
        shutil.rmtree(own, ignore_errors=True)      # its own, from a run before this one shared them
        own.symlink_to(shared, target_is_directory=True)
    return build_dir


def test_readme_tour_runs_from_an_unrelated_directory(installed: Path, tmp_path: Path):
    python, transpile = installed / "bin" / "python", installed / "bin" / "transpile"
    work = tmp_path / "elsewhere"
    (work / "myops").mkdir(parents=True)
    env = _clean_env(TRANSPILE_BUILD_DIR=str(_with_the_suites_precompiled_headers(REPO / "build" / "tour")))

    def run(*command: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(command), cwd=work, env=env, capture_output=True, text=True, timeout=900)

    where = run(str(python), "-c", "import formulas, reference_engine, transpiler; "
                "print(transpiler.__file__, formulas.__file__, reference_engine.__file__)")
    site = installed / "lib"
    assert all(Path(p).is_relative_to(site) for p in where.stdout.split()), where.stdout + where.stderr

    blocks = tour_blocks()
    (work / "myops" / "sinh.py").write_text(blocks["formula"])
    no_torch = run(str(python), "-c", "import torch")
    assert no_torch.returncode == 1 and "No module named 'torch'" in no_torch.stderr
    lint = run(str(transpile), "lint", "myops")                                   # step 2
    assert (lint.returncode, lint.stdout) == (0, ""), lint.stdout + lint.stderr
    shipped = run(str(transpile), "lint", "--no-cache", str(_site_packages(installed) / "formulas"))
    assert (shipped.returncode, shipped.stdout) == (0, ""), shipped.stdout + shipped.stderr
    generated = run(str(transpile), "--formulas", "myops", "--out", "my_cpp")     # step 3
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert "TORCH_LIBRARY_FRAGMENT(myops, m)" in (work / "my_cpp" / "sinh.cpp").read_text()
    check = run(str(transpile), "--check", "--formulas", "myops", "--out", "my_cpp")
    assert check.returncode == 0, check.stdout + check.stderr
    engine = run(str(python), "-c", blocks["engine"])                              # step 4
    assert engine.returncode == 0 and "digraph" in engine.stdout, engine.stderr[-3000:]
    unbuilt = run(str(transpile), "build", "--sources", "my_cpp")
    assert (unbuilt.returncode, unbuilt.stdout) == (2, "")
    assert unbuilt.stderr == f"python -m transpiler.build {INSTALL_HINT}\n"

    _see_running_interpreters_packages(installed)
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

    proved = run(str(transpile), "prove", "myops")                                # step 7
    assert proved.returncode == 0, proved.stdout + proved.stderr
    assert proved.stdout.splitlines()[1].split() == ["sinh", "ok", "ok", "ok", "ok", "ok", "ok", "n/a", "n/a"]
    compiled = run(str(transpile), "prove", "myops", "--compiled")
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    assert compiled.stdout.splitlines()[:2] == ["op       L    R1    R2    RT    T1    TT    C1    CT    F1    RF    CA",
                                                "sinh    ok    ok    ok    ok    ok    ok    ok    ok   n/a   n/a    ok"]
    (work / "test_myops.py").write_text(blocks["test"])
    tested = run(str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_myops.py")
    assert "2 passed" in tested.stdout, tested.stdout[-3000:] + tested.stderr[-3000:]
    (work / "wrongops").mkdir()
    (work / "wrongops" / "sin.py").write_text(WRONG_SIN)
    wrong = run(str(transpile), "prove", "wrongops")
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert "sin: tier T1 (formula on torch tensors: backward == finite differences), case 2x3: input `self`" \
        in wrong.stdout
    assert "the term `0.1 * self` at wrongops/sin.py:8:39 explains it" in wrong.stdout


WRONG_SIN = """\
from formulas import at, derivative


@derivative("sin(Tensor self) -> Tensor")
def sin(self):
    result = at.sin(self)
    def backward(grad):
        return grad * (at.cos(self) + 0.1 * self)
    return result, backward
"""
