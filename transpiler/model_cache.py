"""The parsed model of each formula file, kept between runs of ``transpile`` (its parse cache).

Parsing a file with libcst and reading it into a :class:`~transpiler.model.FormulaModule`
is the largest part of a run's work (``transpile --keep-going`` on the imported
derivatives.yaml corpus, which parses the shipped library too: about 40 % of its CPU
time, two thirds under a profiler). :func:`transpiler.frontend.parse_module` is a
pure function of the file's path, its text and the transpiler itself, so its result is
kept here, content-addressed: the key hashes the path, the text, the generator (every
source file of ``transpiler/``), libcst's version and the interpreter's. An edited
file, another transpiler or another libcst is another key, so a stored model is never
used for an input it was not computed from; a file edited in a corpus is parsed again
and every other file's model is loaded (about three times faster than parsing it).

Entries are pickles (the model holds libcst trees, which JSON cannot carry), one file
each under the build cache (:func:`transpiler.project.build_cache`, ``model-cache/``),
written atomically through :func:`transpiler.output.write_file`; they are trusted as
the interpreter trusts its ``__pycache__``: only the user writes there. An entry that
cannot be read, or a model that cannot be pickled (too deep for the pickler), is
parsed again; a cache that cannot be written leaves the run uncached, silently (it
only costs time). The least recently used entries beyond :data:`KEPT_ENTRIES` go.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from transpiler.output import OutputError, write_file
from transpiler.sources import UndecodableSource, read_source

if TYPE_CHECKING:
    from transpiler.model import FormulaModule

DIRECTORY = "model-cache"
KEPT_ENTRIES = 512          # the imported corpus is 24 files, the shipped library 34: room for several versions
GENERATOR_SOURCES = Path(__file__).resolve().parent
FORMAT = 1                  # the layout of an entry; bump when what is stored changes shape

_active: ModelCache | None = None


@functools.cache
def generator_digest() -> str:
    """The hash of every source file of the transpiler (what ``MANIFEST`` calls the generator)."""
    generator = hashlib.sha256()
    for path in sorted(GENERATOR_SOURCES.rglob("*.py")):
        generator.update(path.read_bytes())
    return generator.hexdigest()


@functools.cache
def _libcst_version() -> str:
    from importlib.metadata import version

    return version("libcst")


def _formula_module() -> type:
    from transpiler.model import FormulaModule

    return FormulaModule


class ModelCache:
    """Parsed formula modules stored in ``directory``, by the hash of everything they depend on."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.stored = 0                 # entries written by this run (for the pruning)

    def key(self, path: str, source: str) -> str:
        digest = hashlib.blake2b(digest_size=20)
        for part in (f"format {FORMAT}", generator_digest(), _libcst_version(), sys.version, path, source):
            digest.update(part.encode("utf-8", "surrogatepass"))
            digest.update(b"\0")
        return digest.hexdigest()

    def parse(self, path: str, source: str, parse: Callable[[str, str], FormulaModule]) -> FormulaModule:
        """The stored model of (``path``, ``source``), else ``parse(path, source)``, stored."""
        entry = self.directory / f"{self.key(path, source)}.pickle"
        with contextlib.suppress(OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError,
                                 IndexError, TypeError, ValueError, RecursionError, MemoryError):
            data = entry.read_bytes()
            os.utime(entry)             # recently used: kept by the pruning
            stored = pickle.loads(data)
            if isinstance(stored, _formula_module()) and stored.path == path:
                return stored
        module = parse(path, source)
        try:
            data = pickle.dumps(module, protocol=pickle.HIGHEST_PROTOCOL)
            write_file(entry, data)
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError, MemoryError, OutputError):
            return module
        self.stored += 1
        return module

    def prepare(self, paths: list[str], parse: Callable[[str, str], FormulaModule]) -> None:
        """Parse the files of ``paths`` that have no entry yet on both cores: a second process parses
        and stores every other one (largest first) while this one parses the rest through
        ``parse(path, source)`` (which should come back here, so that its results are kept for the
        process too); the passes that follow load the second process's entries. Fewer than two
        files to parse, or a machine with one core: this process parses them, as it would anyway."""
        missing = []
        for path in paths:
            with contextlib.suppress(OSError, UndecodableSource):
                source = read_source(path)
                if not (self.directory / f"{self.key(path, source)}.pickle").is_file():
                    missing.append((os.path.getsize(path), path, source))
        if len(missing) < 2 or (os.cpu_count() or 1) < 2:
            return
        missing.sort(reverse=True)
        import multiprocessing

        worker = multiprocessing.get_context("fork").Process(
            target=self._store_each, args=([(path, source) for _, path, source in missing[1::2]], parse))
        worker.start()
        for _, path, source in missing[0::2]:
            parse(path, source)
        worker.join()

    def _store_each(self, files: list[tuple[str, str]], parse: Callable[[str, str], FormulaModule]) -> None:
        for path, source in files:
            parse(path, source)

    def prune(self) -> None:
        """Remove the least recently used entries beyond :data:`KEPT_ENTRIES`."""
        if not self.stored:
            return
        with contextlib.suppress(OSError):
            entries = sorted(self.directory.glob("*.pickle"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
            for stale in entries[KEPT_ENTRIES:]:
                stale.unlink(missing_ok=True)


@contextlib.contextmanager
def kept_in(directory: Path | None) -> Iterator[ModelCache | None]:
    """Keep parsed models in ``directory`` while the block runs (None: keep none), then prune it."""
    global _active
    outer, _active = _active, ModelCache(directory) if directory is not None else None
    try:
        yield _active
    finally:
        if _active is not None:
            _active.prune()
        _active = outer


def active() -> ModelCache | None:
    """The cache :func:`kept_in` set, if any."""
    return _active
