"""Every code block of the READMEs and docs/ that is meant to run, runs.

A block's language says what is done with it:

* ``python``: a formula file (it declares ``@derivative``) must lint clean with
  ``transpile lint``; any other block runs in a fresh interpreter, in an empty directory;
* ``toml``: parsed, and a ``[tool.transpile]`` table is read by the project and lint settings
  loaders (unknown keys or bad values fail);
* ``bash`` and blocks without a language (command lines, printed output) are not run.

A python or toml block that is not meant to run says why on the line before its fence:
``<!-- not run: REASON -->``, or ``<!-- run by tests/FILE.py -->`` when a test runs it (that test
must exist and read the document).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from transpiler.lint.settings import load_settings
from transpiler.project import find_project

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([REPO / "README.md", *REPO.glob("*/README.md"), *REPO.glob("transpiler/*/README.md"),
                    *(REPO / "docs").glob("*.md")])
FENCE = re.compile(r"^(?P<indent> *)```(?P<language>\w*)\n(?P<body>.*?)^(?P=indent)```$", re.M | re.S)
MARK = re.compile(r"<!-- (not run: .+|run by (tests/\S+\.py)) -->\s*$")
RUN = ("python", "toml")


def blocks() -> list[tuple[str, str, str, str]]:
    """(id, language, body, the mark on the line before, or "") of every fenced block."""
    found = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for fence in FENCE.finditer(text):
            line = text.count("\n", 0, fence.start()) + 1
            before = text[:fence.start()].rstrip("\n").rsplit("\n", 1)[-1]
            indent = fence["indent"]
            body = "".join(l[len(indent):] if l.startswith(indent) else l
                           for l in fence["body"].splitlines(keepends=True))
            mark = MARK.search(before)
            found.append((f"{document.relative_to(REPO)}:{line}", fence["language"], body,
                          mark.group(1) if mark else ""))
    return found


BLOCKS = blocks()
TO_RUN = [pytest.param(language, body, id=where) for where, language, body, mark in BLOCKS
          if language in RUN and not mark]


def test_blocks_not_run_say_why():
    marked = [(where, mark) for where, language, _, mark in BLOCKS if mark]
    for where, mark in marked:
        if mark.startswith("run by "):
            test = REPO / mark.removeprefix("run by ")
            document = where.split(":")[0]
            assert test.is_file() and Path(document).name in test.read_text(), (where, mark)
    assert len(TO_RUN) >= 8 and len(BLOCKS) > len(TO_RUN)


def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.mark.parametrize("language, body", TO_RUN)
def test_block_runs(language: str, body: str, tmp_path: Path):
    if language == "toml":
        table = tomllib.loads(body)
        if "tool" in table:
            (tmp_path / "pyproject.toml").write_text(body)
            os.chdir(tmp_path)
            try:
                find_project()
                load_settings(None)
            finally:
                os.chdir(REPO)
        return
    if "@derivative(" in body:
        (tmp_path / "block.py").write_text(body)
        done = subprocess.run([sys.executable, "-m", "transpiler", "lint", "--no-cache", "block.py"],
                              cwd=tmp_path, env=_environment(), capture_output=True, text=True, check=False)
    else:
        done = subprocess.run([sys.executable, "-c", body], cwd=tmp_path, env=_environment(),
                              capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
