"""Atomic writes: a failed or interrupted run leaves the destination as it was."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def write_file(path: Path, content: str | bytes) -> None:
    """Write ``content`` (text as UTF-8) to ``path`` through a temporary file in the same directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content.encode("utf-8") if isinstance(content, str) else content)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def replace_directory(directory: Path, files: dict[str, str]) -> None:
    """Make ``directory`` hold exactly ``files`` (name -> text), swapping it in at the end."""
    directory = directory.resolve()
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}."))
    try:
        for name, text in files.items():
            (staging / name).write_text(text, encoding="utf-8")
        if directory.exists():
            retired = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.old."))
            os.replace(directory, retired / directory.name)
            os.replace(staging, directory)
            shutil.rmtree(retired)
        else:
            os.replace(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
