"""Discovery: which files a run lints.

The paths named on the command line, directories walked for ``*.py`` files
(sorted), pruned by the excludes of :class:`~transpiler.lint.settings.Settings`
and by the ``.gitignore`` files at or below a directory named (a directory
named is walked even when a ``.gitignore`` above it ignores it); a file named
is checked anyway unless ``--force-exclude``. Special files (FIFOs, devices,
symlink loops) are never opened, only noted.
"""
from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from transpiler.diagnostics import printable
from transpiler.lint.settings import Settings
from transpiler.sources import special_kind


class Listing(NamedTuple):
    """The files a run lints, and what it cannot or does not."""

    files: list[str]                         # in order
    unreadable: list[tuple[str, str]]        # a path named that cannot be read -> why (exit 2)
    skipped: list[str]                       # one-line notes: ``*.py`` entries that are no regular file


def python_files(paths: Iterable[str], settings: Settings) -> Listing:
    """Files to lint, in order (directories: ``*.py`` below, sorted, pruned by excludes and
    ``.gitignore``), the paths named that cannot be read, and the special files skipped (a FIFO,
    a device, a symlink loop: never opened)."""
    files: dict[str, None] = {}
    unreadable: list[tuple[str, str]] = []
    skipped: list[str] = []
    for path in paths:
        try:
            mode = os.stat(path).st_mode
        except OSError as error:
            unreadable.append((path, "no such file or directory" if error.errno == errno.ENOENT
                               else f"cannot read: {error.strerror}"))
            continue
        if stat.S_ISDIR(mode):
            if not (settings.force_exclude and settings.excluded(path)):
                files.update((found, None) for found in _walk(str(Path(path)), settings, [], skipped))
        elif stat.S_ISREG(mode):
            if not (settings.force_exclude and (settings.excluded(path) or _git_ignored(path, settings))):
                files[path] = None
        else:
            skipped.append(f"{printable(path)}: not a regular file ({special_kind(mode)}); skipped")
    return Listing(list(files), unreadable, skipped)


def _walk(directory: str, settings: Settings, ignores: list[tuple[str, object]], skipped: list[str]) -> list[str]:
    ignores = [*ignores, *_gitignore(directory, settings)]
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError:
        return []
    found: list[str] = []
    for entry in entries:
        path = entry.name if directory == "." else os.path.join(directory, entry.name)
        python = entry.name.endswith(".py")
        try:
            is_dir = entry.is_dir()
            regular = python and not is_dir and entry.is_file()      # file types from the directory: no stat
            special = python and not (is_dir or regular) and special_kind(entry.stat().st_mode)
        except OSError as error:                    # a symlink loop, a link into nowhere
            if python:
                skipped.append(f"{printable(path)}: cannot be read ({error.strerror}); skipped")
            continue
        if settings.excluded(path, walked=True) or (ignores and _ignored(path, is_dir, ignores)):
            continue
        if is_dir:
            found.extend(_walk(path, settings, ignores, skipped))
        elif regular:
            found.append(path)
        elif special:
            skipped.append(f"{printable(path)}: not a regular file ({special}); skipped")
    return found


def _gitignore(directory: str, settings: Settings) -> list[tuple[str, object]]:
    """The ``.gitignore`` of ``directory`` as (its directory, compiled spec), if any."""
    if not settings.respect_gitignore:
        return []
    path = os.path.join(directory, ".gitignore")
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            lines = file.read().splitlines()
    except OSError:
        return []
    import pathspec

    return [(os.path.abspath(directory), pathspec.GitIgnoreSpec.from_lines(lines))]


def _ignores_above(path: str, settings: Settings) -> list[tuple[str, object]]:
    """``.gitignore`` files of the directories above ``path`` up to the repository's top."""
    if not settings.respect_gitignore:
        return []
    above: list[tuple[str, object]] = []
    directory = Path(path).resolve().parent
    for candidate in [directory, *directory.parents]:
        above[:0] = _gitignore(str(candidate), settings)
        if (candidate / ".git").exists():
            break
    else:
        return []                                       # not in a repository: no .gitignore above applies
    return above


def _ignored(path: str, is_dir: bool, ignores: list[tuple[str, object]]) -> bool:
    absolute = os.path.abspath(path)
    for base, spec in ignores:
        relative = os.path.relpath(absolute, base).replace(os.sep, "/")
        if relative == ".." or relative.startswith("../"):
            continue
        if spec.match_file(f"{relative}/" if is_dir else relative):
            return True
    return False


def _git_ignored(path: str, settings: Settings) -> bool:
    return _ignored(path, False, _ignores_above(path, settings))
