"""Building generated C++ for the tests: ``python -m transpiler.build`` as a user runs it."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build_library(sources: Path, build_dir: Path, name: str | None = None) -> Path:
    """Run ``python -m transpiler.build`` (cached in ``build_dir``; ``name`` by default from the
    sources' namespace) and return the path it prints last."""
    done = subprocess.run(
        [sys.executable, "-m", "transpiler.build", "--sources", str(sources), "--build-dir", str(build_dir),
         *(["--name", name] if name else [])],
        cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    return Path(done.stdout.strip().splitlines()[-1])
