"""Fixtures of the compiled-op tests: the extension is built once per session (cached in build/)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def build_library(sources: Path, build_dir: Path, name: str) -> Path:
    """Run ``python -m transpiler.build`` and return the path it prints last."""
    done = subprocess.run(
        [sys.executable, "-m", "transpiler.build", "--sources", str(sources), "--build-dir", str(build_dir),
         "--name", name],
        cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def formulas_ops() -> object:
    """``torch.ops.formulas`` with the library built from the checked-in out_cpp/."""
    import torch

    torch.ops.load_library(str(build_library(REPO / "out_cpp", REPO / "build", "formulas_ops")))
    return torch.ops.formulas
