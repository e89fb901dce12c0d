"""Every lint test gets its own cache directory: ``transpile lint`` caches its results by default
(``$TRANSPILE_BUILD_DIR``/lint), and a test's outcome must not depend on an earlier run's cache."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _own_lint_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TRANSPILE_BUILD_DIR", str(tmp_path_factory.mktemp("build")))
