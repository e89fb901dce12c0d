"""Which files and which codes: ``[tool.transpile.lint]`` in pyproject.toml, excludes, ``.gitignore``.

```toml
[tool.transpile.lint]
select = ["DB1"]                     # code prefixes to report (default: every code)
ignore = ["DB104"]                   # code prefixes not to report
per-file-ignores = {"tests/*" = ["DB100"]}
exclude = ["generated"]              # replaces the default excludes
extend-exclude = ["third_party"]     # adds to them
respect-gitignore = true
```

The configuration is the nearest ``pyproject.toml`` with a ``[tool.transpile.lint]``
table, looking up from the working directory (or the file ``--config`` names);
its patterns are relative to that file's directory. A pattern without ``/``
matches any file or directory name (``build``, ``*_pb2.py``); one with ``/``
matches the path from the configuration's directory (``src/gen/*``). Excludes
and the ``.gitignore`` files at or below a directory named on the command line
prune its walk (a directory named is walked even when a ``.gitignore`` above it
ignores it); a file named on the command line is checked anyway unless
``--force-exclude``.
"""
from __future__ import annotations

import errno
import fnmatch
import functools
import os
import re
import stat
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from transpiler.codes import opt_in_selected
from transpiler.diagnostics import printable
from transpiler.sources import special_kind

if sys.version_info >= (3, 11):
    import tomllib
else:                                       # pragma: no cover - Python 3.10
    import tomli as tomllib

DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".mypy_cache", ".nox", ".pants.d",
    ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv", "__pycache__", "__pypackages__",
    "_build", "buck-out", "build", "dist", "node_modules", "site-packages", "venv",
)
_GLOB = re.compile(r"[*?[]")
KEYS = ("select", "ignore", "per-file-ignores", "exclude", "extend-exclude", "respect-gitignore")


class ConfigError(Exception):
    """A configuration that cannot be used (exit 2 with this message)."""


@dataclass(frozen=True)
class Settings:
    """The resolved lint configuration."""

    root: Path = field(default_factory=Path.cwd)            # patterns are relative to it
    select: tuple[str, ...] = ("DB",)
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    respect_gitignore: bool = True
    force_exclude: bool = False
    source: Path | None = None                              # the pyproject.toml read, if any

    def enabled(self, code: str, path: str) -> bool:
        """Whether findings of ``code`` in ``path`` are reported."""
        if not _matches_prefix(code, self.select) or _matches_prefix(code, self.ignore):
            return False
        if not opt_in_selected(code, self.select):       # DB11x: only when selected by name
            return False
        if self.per_file_ignores:
            relative = self.relative(path)
            for pattern, codes in self.per_file_ignores:
                if _path_matches(relative, pattern) and _matches_prefix(code, codes):
                    return False
        return True

    def relative(self, path: str | Path) -> str:
        """``path`` relative to the configuration's directory, ``/``-separated."""
        absolute = os.path.abspath(path)
        try:
            return Path(os.path.relpath(absolute, self.root)).as_posix()
        except ValueError:                  # another drive
            return Path(absolute).as_posix()

    def excluded(self, path: str | Path, walked: bool = False) -> bool:
        """Whether ``path`` (a file or directory) matches an exclude pattern. ``walked``: its
        parent directories were checked already (a directory walk), so only its name is new."""
        names, name_globs, path_patterns = self._exclude_patterns
        parts = [os.path.basename(path)] if walked else self.relative(path).split("/")
        if any(part in names or any(fnmatch.fnmatchcase(part, glob) for glob in name_globs) for part in parts):
            return True
        return any(_path_matches(self.relative(path), pattern) for pattern in path_patterns)

    @functools.cached_property
    def _exclude_patterns(self) -> tuple[frozenset[str], tuple[str, ...], tuple[str, ...]]:
        """Exclude patterns as (plain names, name globs, path patterns): most are plain names."""
        stripped = [pattern.rstrip("/") for pattern in self.exclude]
        names = frozenset(p for p in stripped if "/" not in p and not _GLOB.search(p))
        globs = tuple(p for p in stripped if "/" not in p and _GLOB.search(p))
        return names, globs, tuple(p for p in stripped if "/" in p)


def _matches_prefix(code: str, prefixes: Iterable[str]) -> bool:
    return any(code.startswith(prefix) for prefix in prefixes)


def _path_matches(relative: str, pattern: str) -> bool:
    pattern = pattern.rstrip("/")
    if "/" not in pattern:
        return any(fnmatch.fnmatchcase(part, pattern) for part in relative.split("/"))
    pattern = pattern.removeprefix("./")
    return fnmatch.fnmatchcase(relative, pattern) or fnmatch.fnmatchcase(relative, f"{pattern}/*")


def find_config(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` with a ``[tool.transpile.lint]`` table."""
    for directory in [start, *start.parents]:
        candidate = directory / "pyproject.toml"
        if candidate.is_file() and _table(candidate) is not None:
            return candidate
    return None


def _table(path: Path) -> Mapping[str, object] | None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{path}: cannot read the configuration: {error}") from None
    table = data.get("tool", {}).get("transpile", {}).get("lint")
    return table if isinstance(table, dict) else None


def load_settings(config: Path | None = None, start: Path | None = None) -> Settings:
    """Settings from ``config`` (a pyproject.toml), or the nearest one above ``start`` (the cwd)."""
    path = config if config is not None else find_config((start or Path.cwd()).resolve())
    if path is None:
        return Settings()
    table = _table(path)
    if table is None:
        if config is not None:
            raise ConfigError(f"{path}: no [tool.transpile.lint] table")
        return Settings()
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) in [tool.transpile.lint]: {', '.join(unknown)}; "
                          f"known: {', '.join(KEYS)}")
    settings = Settings(root=path.resolve().parent, source=path)
    exclude = _strings(path, table, "exclude", settings.exclude)
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{path}: per-file-ignores must be a table of pattern = [codes]")
    respect = table.get("respect-gitignore", True)
    if not isinstance(respect, bool):
        raise ConfigError(f"{path}: respect-gitignore must be true or false")
    return replace(
        settings,
        select=codes(path, _strings(path, table, "select", settings.select), "select"),
        ignore=codes(path, _strings(path, table, "ignore", ()), "ignore"),
        per_file_ignores=tuple((pattern, codes(path, _strings(path, per_file, pattern, ()), pattern))
                               for pattern in per_file),
        exclude=(*exclude, *_strings(path, table, "extend-exclude", ())),
        respect_gitignore=respect,
    )


def _strings(path: Path, table: Mapping[str, object], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = table.get(key, default)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{path}: {key} must be a list of strings")
    return tuple(value)


def codes(where: object, prefixes: Iterable[str], key: str) -> tuple[str, ...]:
    """Code prefixes as given, upper-cased; one that matches no declared code is an error."""
    from transpiler.codes import matching

    result = []
    for prefix in prefixes:
        prefix = prefix.strip().upper()
        if not prefix or not matching(prefix):
            place = key if str(where) == key else f"{where}: {key}"     # the flag, or the file and its key
            raise ConfigError(f"{place}: {prefix!r} matches no code; `transpile rule` lists them")
        result.append(prefix)
    return tuple(result)


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
