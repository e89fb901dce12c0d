"""``transpile lint``'s result cache: a file's findings, reused while nothing they depend on changed.

It lives in the project's cache directory (:func:`transpiler.project.build_cache`,
``lint-cache/`` below it; ``--cache-dir`` elsewhere) and is written like every other
output, through :func:`transpiler.output.write_file`: one JSON file per run
of the same paths from the same directory with the same linter, replaced
whole and atomically. Each file's entry holds what the per-file pass found and
what that result depends on: the file's own :class:`FileStamp`, and what its
analysis followed into the rest of the tree (the files it read, with their
stamps; the module names it looked up, with the file each named, or none; the
dotted names of files it used, which their parents' ``__init__.py`` decide).
The formula files' closure findings are one group that depends on every
formula file linted, the shipped library and every file of their packages.
An entry is used only when every dependency is as recorded, so an edit of any
of them (a base class, a followed helper, a formula of the library), a file
added where a module was missing, or another linter computes it again. What
the configuration selects, ignores or excludes is applied to the findings
after the cache (a different file list is a different tree: the recorded
lookups see it). A cache that cannot be read (missing, corrupt, from
another version, not a regular file, larger than :data:`MAX_CACHE_BYTES`,
nested deeper than :data:`MAX_NESTING`) is empty and replaced by this run's;
one that cannot be written leaves the run uncached with a one-line warning.
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol, final

import transpiler
from transpiler.sources import read_regular

try:                                  # hashlib's own blake2b; importing hashlib loads OpenSSL (about 15 ms)
    from _blake2 import blake2b
except ImportError:                   # pragma: no cover - an interpreter without the module
    from hashlib import blake2b

MAX_CACHE_BYTES = 256 * 2**20              # a larger file is not read (the torch tree's cache: about 1 MB)
MAX_NESTING = 16                           # the entries this code writes are 9 deep; a deeper document is not read
FORMAT = 1                                 # the layout of a cache file; another one is not read
SETTLED_NS = 2_000_000_000                 # a file changed this recently may change again unseen
KEPT_FILES = 64                            # cache files kept in the directory (least recently used go)
PACKAGE = Path(transpiler.__file__).resolve().parent


class FileStamp(NamedTuple):
    """What identifies a file's bytes without reading them: its status, and their hash when the
    file changed so recently (:data:`SETTLED_NS`) that another change within the file system's
    timestamp resolution could leave the status as it was."""

    mtime_ns: int
    ctime_ns: int
    size: int
    inode: int
    digest: str | None = None

    @staticmethod
    def of(status: os.stat_result, data: bytes) -> FileStamp:
        """The stamp of ``data``, read from a file whose status was ``status`` before the read."""
        changed = max(status.st_mtime_ns, status.st_ctime_ns)
        digest = _digest(data) if changed > time.time_ns() - SETTLED_NS else None
        return FileStamp(status.st_mtime_ns, status.st_ctime_ns, status.st_size, status.st_ino, digest)

    def matches(self, path: str) -> bool:
        """Whether ``path`` still holds the bytes this stamp was taken of."""
        try:
            status = os.stat(path)
        except OSError:
            return False
        if (status.st_mtime_ns, status.st_ctime_ns, status.st_size, status.st_ino) != self[:4]:
            return False
        if self.digest is None:
            return True
        try:
            return _digest(read_regular(path)[1]) == self.digest
        except OSError:
            return False


def stamp_file(path: str) -> FileStamp | None:
    """The stamp of ``path`` as it is now (None when it cannot be read)."""
    try:
        status, data = read_regular(path)        # bounded, and never waits on a FIFO
    except OSError:
        return None
    return FileStamp.of(status, data)


def _digest(data: bytes) -> str:
    return blake2b(data, digest_size=16).hexdigest()


@dataclass(frozen=True)
class Depends:
    """What a result was computed from, as it was then."""

    files: tuple[tuple[str, FileStamp | None], ...] = ()       # file read -> its stamp (None: unreadable)
    modules: tuple[tuple[str, str | None], ...] = ()           # dotted module looked up -> its file, or none
    module_names: tuple[tuple[str, str | None], ...] = ()      # file -> the dotted name it had
    listings: tuple[tuple[str, tuple[str, ...]], ...] = ()     # directory -> the ``*.py`` files below it

    def __add__(self, other: Depends) -> Depends:
        return Depends(self.files + other.files, self.modules + other.modules,
                       self.module_names + other.module_names, self.listings + other.listings)


class Tree(Protocol):
    """What a run's tree answers to the recorded lookups (:class:`transpiler.lint.ctx.tree.SourceTree`)."""

    paths: Mapping[str, str]

    def module_name(self, path: str) -> str | None:
        """The dotted module name of ``path`` in the tree (None outside a package)."""


@final
class Recorder:
    """``with Recorder() as followed:`` records what the analysis inside the block reads of the
    tree (``record_*``); ``followed.depends()`` is it as :class:`Depends`. (A class, not a
    generator context manager: it runs once per file linted.)"""

    def __init__(self) -> None:
        self.files: dict[str, FileStamp | None] = {}
        self.modules: dict[str, str | None] = {}
        self.module_names: dict[str, str | None] = {}
        self._outer: Recorder | None = None

    def __enter__(self) -> Recorder:
        global _recorder
        self._outer, _recorder = _recorder, self
        return self

    def __exit__(self, *_: object) -> None:
        global _recorder
        _recorder = self._outer

    def depends(self) -> Depends:
        """What the block read, as :class:`Depends`."""
        return Depends(tuple(self.files.items()), tuple(self.modules.items()), tuple(self.module_names.items()))


_recorder: Recorder | None = None


def record_file(path: str, stamp: FileStamp | None) -> None:
    """The analysis read ``path`` (None: could not)."""
    if _recorder is not None:
        _recorder.files[path] = stamp


def record_module(name: str, path: str | None) -> None:
    """The analysis looked up the dotted module ``name`` in the tree: ``path`` is it (None: absent)."""
    if _recorder is not None:
        _recorder.modules[name] = path


def record_module_name(path: str, name: str | None) -> None:
    """The analysis used the dotted module name of ``path`` (from its parents' ``__init__.py``)."""
    if _recorder is not None:
        _recorder.module_names[path] = name


def nesting(document: object) -> int:
    """How deeply lists and dicts nest in ``document`` (an explicit stack: never a RecursionError)."""
    deepest, stack = 0, [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (list, dict)):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (value.values() if isinstance(value, dict) else value))
    return deepest


def python_files_below(directory: str) -> tuple[str, ...]:
    """Every ``*.py`` file below ``directory`` (recursively), sorted."""
    return tuple(sorted(str(path) for path in Path(directory).rglob("*.py") if path.is_file()))


class ResultCache:
    """The entries of one cache file, checked against the files as they are now.

    ``get``/``put`` take and give JSON values; what they mean is the caller's.
    Stamps of files that many entries depend on are checked once per run. What a
    run neither asked for nor stored (a file deleted since) is not kept.
    """

    def __init__(self, path: Path, entries: dict[str, object]) -> None:
        self.path = path
        self.entries = entries
        self.changed = False
        self._used: set[str] = set()
        self._current: dict[tuple[str, FileStamp], bool] = {}

    @staticmethod
    def open(directory: Path, paths: Iterable[str], options: str = "") -> ResultCache:
        """The cache of a run over ``paths`` from the working directory with the ``options`` that
        change what a file's result is (``--no-bytecode-cache``); empty when there is none or it
        cannot be read."""
        key = "\0".join([tool_fingerprint(), options, os.getcwd(), *sorted(os.path.abspath(p) for p in paths)])
        path = directory / f"{blake2b(key.encode('utf-8', 'surrogateescape'), digest_size=12).hexdigest()}.json"
        try:
            document = json.loads(read_regular(path, MAX_CACHE_BYTES)[1])
            entries = document["entries"] if document.get("format") == FORMAT and nesting(document) <= MAX_NESTING else {}
        except (OSError, ValueError, AttributeError, KeyError, TypeError, RecursionError, MemoryError):
            return ResultCache(path, {})         # a FIFO or device, huge, corrupt, deeply nested: rebuilt
        with contextlib.suppress(OSError):
            os.utime(path)                                  # recently used: kept by the pruning
        return ResultCache(path, entries if isinstance(entries, dict) else {})

    def get(self, key: str, tree: Tree) -> object | None:
        """The value stored under ``key``, if every dependency it was stored with is unchanged."""
        self._used.add(key)
        entry = self.entries.get(key)
        try:
            return entry["value"] if self._up_to_date(entry["depends"], tree) else None
        except (AttributeError, KeyError, TypeError, ValueError):   # not an entry this code wrote
            return None

    def put(self, key: str, value: object, depends: Depends) -> None:
        """Store ``value`` for ``key``, valid while everything in ``depends`` is as recorded."""
        self._used.add(key)
        self.entries[key] = {"value": value, "depends": {
            "files": {path: None if s is None else list(s) for path, s in depends.files},
            "modules": dict(depends.modules), "module_names": dict(depends.module_names),
            "listings": {directory: list(files) for directory, files in depends.listings}}}
        self.changed = True

    def _up_to_date(self, depends: dict, tree: Tree) -> bool:
        for name, path in depends["modules"].items():
            if tree.paths.get(name) != path:
                return False
        for path, name in depends["module_names"].items():
            if tree.module_name(path) != name:
                return False
        for path, recorded in depends["files"].items():
            if recorded is None:
                if os.access(path, os.R_OK):               # unreadable then, readable now
                    return False
                continue
            stamp = FileStamp(*recorded)
            known = self._current.get((path, stamp))
            if known is None:
                known = self._current[(path, stamp)] = stamp.matches(path)
            if not known:
                return False
        return all(python_files_below(directory) == tuple(files) for directory, files in depends["listings"].items())

    def save(self) -> str | None:
        """Write the entries if they changed; a one-line warning when they cannot be written."""
        unused = self.entries.keys() - self._used
        if not (self.changed or unused):
            return None
        # imported only to write: it loads ctypes and OpenSSL (about 5 ms a run)
        from transpiler.output import OutputError, write_file

        for key in unused:
            del self.entries[key]
        document = json.dumps({"format": FORMAT, "entries": self.entries}, separators=(",", ":"))
        try:
            write_file(self.path, document)
        except OutputError as error:
            return f"{error} (the lint cache; this run was not cached)"
        _prune(self.path.parent)
        return None


def _prune(directory: Path) -> None:
    """Keep the :data:`KEPT_FILES` most recently used cache files; remove what killed runs left
    half written an hour ago or earlier."""
    with contextlib.suppress(OSError):
        caches = sorted(directory.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        hour_ago = time.time() - 3600
        for stale in [*caches[KEPT_FILES:], *(p for p in directory.glob(".*.json-new-*") if p.stat().st_mtime < hour_ago)]:
            stale.unlink()


def tool_fingerprint() -> str:
    """What identifies the linter that computes the results: this interpreter, and the bytes of
    the transpiler's sources and of libcst's entry module (the formula front-end). Bytes, not
    stamps: an edit that restores a source's size and modification time is still another
    linter (hashing them costs about 3 ms a run). libcst's version file names its release."""
    digest = blake2b(f"{sys.version}\0{PACKAGE}".encode("utf-8", "surrogateescape"), digest_size=16)
    sources = [os.path.join(directory, name) for directory, _, names in sorted(os.walk(PACKAGE))
               for name in sorted(names) if name.endswith(".py")]
    libcst = importlib.util.find_spec("libcst")
    if libcst is not None and libcst.origin is not None:
        sources += [libcst.origin, os.path.join(os.path.dirname(libcst.origin), "_version.py")]
    for source in sources:
        digest.update(f"\0{source}\0".encode("utf-8", "surrogateescape"))
        with contextlib.suppress(OSError), open(source, "rb") as file:
            digest.update(file.read())
    return digest.hexdigest()
