"""Fixtures of the compiled-op tests: the extension is built once per session (cached in build/)."""
from __future__ import annotations

import pytest

from tests.cpp.compiled import REPO, build_library


@pytest.fixture(scope="session")
def formulas_ops() -> object:
    """``torch.ops.formulas`` with the library built from the checked-in out_cpp/."""
    import torch

    torch.ops.load_library(str(build_library(REPO / "out_cpp", REPO / "build", "formulas_ops")))
    return torch.ops.formulas
