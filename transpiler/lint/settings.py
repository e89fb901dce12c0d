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
prune its walk (:mod:`transpiler.lint.discovery` does the walk); a file named
on the command line is checked anyway unless ``--force-exclude``.
"""
from __future__ import annotations

import fnmatch
import functools
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from transpiler.codes import opt_in_selected

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


EVERY_FILE = Settings(exclude=(), respect_gitignore=False)   # as ``transpile`` reads a formula directory
