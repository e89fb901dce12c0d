"""docs/architecture.md names only files that exist: each step's owner is a module of the tree.

A backticked path (``transpiler/pipeline.py``, ``transpiler/lint/rules/``) must exist as written,
from the repository's root; a bare name (``nodes.py``, ``kernels/``) must exist there or in a folder
that an earlier path of the same line names (``transpiler/cpp/emit.py`` (files), ``nodes.py``...).
"""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCUMENT = REPO / "docs" / "architecture.md"
NAMED = re.compile(r"`([\w./]+(?:\.py|\.h|/))`")


def missing_files(text: str, root: Path) -> list[str]:
    """``line N: name`` for every file or folder ``text`` names that ``root`` lacks."""
    missing = []
    for number, line in enumerate(text.splitlines(), start=1):
        folders = [root]
        for name in NAMED.findall(line):
            if "/" in name.rstrip("/"):
                path = root / name
                found = path.exists()
            else:
                path = next((folder / name for folder in folders if (folder / name).exists()), None)
                found = path is not None
            if found:
                folders.append(path if name.endswith("/") else path.parent)
            else:
                missing.append(f"line {number}: {name}")
    return missing


def test_the_architecture_names_files_that_exist():
    assert missing_files(DOCUMENT.read_text(encoding="utf-8"), REPO) == []


def test_a_bare_name_is_looked_for_beside_the_paths_before_it(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    for name in ("pkg/a.py", "pkg/sub/b.py"):
        (tmp_path / name).write_text("")
    text = ("| x | `pkg/a.py`, `b.py`, `sub/`, `b.py` |\n"     # b.py is in pkg/sub/, named after it
            "| y | `pkg/sub/`: `b.py`, `a.py`; `pkg/gone.py`, `pkg/`, `a.py` |\n")
    assert missing_files(text, tmp_path) == ["line 1: b.py", "line 2: a.py", "line 2: pkg/gone.py"]
