"""The metadata says what the project is: a licence file and its SPDX name, a changelog entry for
the version (whose tag pre-commit users pin), and extras that say what they install."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_licence_file_is_the_declared_licence():
    assert PROJECT["license"] == "BSD-3-Clause" and PROJECT["license-files"] == ["LICENSE"]
    assert (REPO / "LICENSE").read_text().startswith("BSD 3-Clause License\n")


def test_changelog_has_the_version_and_its_tag_scheme():
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert re.search(rf"^## {re.escape(PROJECT['version'])}$", changelog, re.M)
    assert f"rev: v{PROJECT['version']}" in changelog
    assert f"rev: v{PROJECT['version']}" in (REPO / ".pre-commit-hooks.yaml").read_text()


def test_extras_say_what_they_install():
    extras = PROJECT["optional-dependencies"]
    assert extras["torch"] == ["torch==2.13.0", "ninja"]
    assert "derivatives-transpiler[torch]" in extras["test"] and "pytest>=7" in extras["test"]
    assert extras["flake8"] == ["flake8>=6"]
    assert not any(dep.startswith("torch") for dep in PROJECT["dependencies"])


def test_the_headers_the_emitter_copies_are_package_data():
    """``runtime.h``, ``views.h``, ``vmap.h`` and the aten override's two are real headers of
    ``transpiler.cpp``, shipped in the wheel."""
    from fnmatch import fnmatch

    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    headers = sorted(path.relative_to(REPO / "transpiler").as_posix() for path in (REPO / "transpiler" / "cpp").glob("*.h"))
    assert headers == ["cpp/aten_override.h", "cpp/aten_override_boxed.h", "cpp/runtime.h", "cpp/views.h", "cpp/vmap.h"]
    assert all(any(fnmatch(header, pattern) for pattern in package_data["transpiler"]) for header in headers)
