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

Entries are pickles (the model holds libcst trees, which JSON cannot carry; pickled by
:mod:`transpiler.syntax_pickle`, several times cheaper than libcst's own reduction), one file
each under the build cache (:func:`transpiler.project.build_cache`, ``model-cache/``),
written atomically through :func:`transpiler.output.write_file` by a second process
while the run goes on with lint and emission (the second core; the run waits for it
before it ends, so its cost is the run's; a run with only :data:`FEW_ENTRIES` new models, one
file edited, writes them itself). A cold run reads on both cores (:meth:`ModelCache.prepare`):
a second process reads the last new files (:data:`HELPER_SHARE` of their bytes; in a run on
another package, the shipped library's, of which it reads little but the summaries) and stores
them, and the run loads their summaries as a run after an edit does. Entries are trusted as
the interpreter trusts its ``__pycache__``: only the user writes there. An entry that
cannot be read, or a model that cannot be pickled (too deep for the pickler), is
parsed again; a cache that cannot be written leaves the run uncached, silently (it
only costs time). Beside each model its summary is kept (:mod:`transpiler.model_summary`):
a stored model is given to the run as its summary, whose syntax is loaded only when a
computation reads it, so a run after an edit of one file loads that file's model and
the small summaries of the others. The least recently used entries beyond :data:`KEPT_ENTRIES` go.
The same directory keeps what the run computed from the models
(:mod:`transpiler.module_results`) and the per-file lint findings
(:mod:`transpiler.lint.cache`).
"""
from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from transpiler.output import OutputError, write_file
from transpiler.sources import UndecodableSource, read_regular, read_source

if TYPE_CHECKING:
    from transpiler.model import FormulaModule

DIRECTORY = "model-cache"
KEPT_ENTRIES = 1024         # a model and its summary: the imported corpus is 24 files, the shipped library 34: room for several versions
GENERATOR_SOURCES = Path(__file__).resolve().parent
FORMAT = 4                  # the layout of an entry; bump when what is stored changes shape
MAX_ENTRY_BYTES = 256 * 2**20   # a larger entry is not read (the largest formula file's model: about 0.6 MB)
FEW_ENTRIES = 2             # this many new models are written by the run itself: a second process costs more
                            # (fork, copied pages) than pickling them (one formula file: about 30 ms)
HELPER_SHARE = 0.46         # of the new files' bytes, read by the second process (:meth:`ModelCache.prepare`): it
                            # also pickles their summaries before this process may go on (per byte, about 0.3
                            # of reading it with FORMAT 3, CPU time of each process, imported corpus and shipped
                            # library: 0.44; FORMAT 4's summaries cost 0.6 of those, 0.125 instead of 0.21 of
                            # reading the shipped library's files, measured alike): 1 / (2 + 0.18)

_active: ModelCache | None = None


@functools.cache
def generator_digest() -> str:
    """The hash of every source file of the transpiler, its C++ headers included (what ``MANIFEST``
    calls the generator)."""
    generator = hashlib.sha256()
    for path in sorted(p for p in GENERATOR_SOURCES.rglob("*") if p.suffix in (".py", ".h")):   # .h: runtime.h
        generator.update(path.read_bytes())
    return generator.hexdigest()


@functools.cache
def _libcst_version() -> str:
    """libcst's version, from the module its build writes (importlib.metadata, the fallback, costs
    a run more to import than the lookup it makes)."""
    try:
        from libcst._version import __version__
    except ImportError:
        from importlib.metadata import version

        return version("libcst")
    return __version__


def _formula_module() -> type:
    from transpiler.model import FormulaModule

    return FormulaModule


def _module_summary() -> type:
    from transpiler.model_summary import ModuleSummary

    return ModuleSummary


class ModelCache:
    """Parsed formula modules stored in ``directory``, by the hash of everything they depend on."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.pending: dict[Path, FormulaModule] = {}   # parsed by this run, not stored yet (entry -> model)
        self.pending_summaries: dict[Path, FormulaModule] = {}   # read whole by this run: their summaries
        self.stored = 0                 # entries written by this run (for the pruning)
        self.writers: list[int] = []    # processes storing entries in the background
        self.read: dict[str, tuple[str, str]] = {}   # path -> (text, key), as :meth:`uncached` read it
        self.helper = 0                 # the process reading and storing part of the files (:meth:`prepare`)
        self.helper_ready = -1          # the pipe on which it says its summaries are stored

    def key(self, path: str, source: str) -> str:
        """The cache key of ``path`` with ``source``: a hash of it with the format, generator, libcst and
        Python versions."""
        known = self.read.get(path)
        if known is not None and known[0] == source:
            return known[1]
        digest = hashlib.blake2b(digest_size=20)
        for part in (f"format {FORMAT}", generator_digest(), _libcst_version(), sys.version, path, source):
            digest.update(part.encode("utf-8", "surrogatepass"))
            digest.update(b"\0")
        return digest.hexdigest()

    def parse(self, path: str, source: str, parse: Callable[[str, str], FormulaModule]) -> FormulaModule:
        """The stored model of (``path``, ``source``), else ``parse(path, source)``, to be stored
        (:meth:`store`). A stored model is given as its summary (:mod:`transpiler.model_summary`):
        its syntax is loaded only when a computation reads it."""
        key = self.key(path, source)
        entry, summary_entry = self.directory / f"{key}.pickle", self.directory / f"{key}.summary.pickle"
        summary = self._stored(summary_entry, path, _module_summary())
        if summary is not None and summary.source_digest:
            with contextlib.suppress(OSError):
                os.utime(entry)         # the full model goes with its summary in the pruning

            @functools.cache
            def load() -> FormulaModule:
                self._wait_for_helper()     # it may be storing this model still
                full = self._stored(entry, path, _formula_module())
                if full is None or full.source_digest != summary.source_digest:
                    full = parse(path, source)      # gone or damaged: parsed again
                    self.pending[entry] = full
                return full
            return summary.deferred(load)
        module = self._stored(entry, path, _formula_module())
        if module is None:
            module = parse(path, source)
            self.pending[entry] = module
        self.pending_summaries[summary_entry] = module
        return module

    def _stored(self, entry: Path, path: str, kind: type) -> object | None:
        """The ``kind`` of ``path`` pickled in ``entry``; None when it cannot be read or holds another thing."""
        import pickle

        with contextlib.suppress(OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError,
                                 IndexError, KeyError, TypeError, ValueError, RecursionError, MemoryError):
            data = read_regular(entry, MAX_ENTRY_BYTES)[1]      # a FIFO never waited on, a device never read
            os.utime(entry)             # recently used: kept by the pruning
            stored = pickle.loads(data)
            if isinstance(stored, kind) and stored.path == path:
                return stored
        return None

    def uncached(self, paths: list[str]) -> int:
        """How many of ``paths`` have no stored model (they will be parsed: the slow part of a run)."""
        count = 0
        for path in paths:
            with contextlib.suppress(OSError, UndecodableSource):
                source = read_source(path)
                self.read[path] = source, self.key(path, source)     # read once: :meth:`prepare` takes them
                count += not (self.directory / f"{self.read[path][1]}.pickle").is_file()
        return count

    def prepare(self, paths: list[str], parse: Callable[[str, str], FormulaModule],
                meanwhile: Callable[[], object] | None = None) -> None:
        """Read the models of ``paths`` through ``parse(path, source)`` (which should come back to
        :meth:`parse`, so that the process keeps them), then store the new ones on the second core
        while this process goes on with lint and emission; ``meanwhile()`` (work that needs no
        model) is run once this process has read its own files, before it waits for the second's.

        When the machine has a second core and more than :data:`FEW_ENTRIES` files are new, the
        last of them (:data:`HELPER_SHARE` of their bytes: in a run on another package,
        the shipped library's files, of which the run reads little more than the summaries) are read
        by a second process, which stores them, summaries first: this process reads its own
        meanwhile and then loads those summaries, each full model when a computation reads it
        (:meth:`_wait_for_helper`).

        The cyclic garbage collector is paused while they are read and then told to leave them
        alone (:func:`gc.freeze`): the models live as long as the run and hold no cycles to find,
        and collecting while hundreds of thousands of syntax nodes are made was two thirds of
        the time of reading them back (0.7 s instead of 2.2 s of CPU for the imported corpus and
        the shipped library, measured)."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            sources = {}
            for path in paths:
                with contextlib.suppress(OSError, UndecodableSource):   # the reader reports them later
                    sources[path] = self.read[path][0] if path in self.read else read_source(path)
            theirs = self._start_helper(sources, parse) if (os.cpu_count() or 1) > 1 else []
            for path, source in sources.items():
                if path not in theirs:
                    parse(path, source)
            if meanwhile is not None:
                meanwhile()
            if theirs:
                self._wait_for_summaries()
                for path in theirs:     # their summaries, stored by the helper (a model it could not store: parsed)
                    parse(path, sources[path])
        finally:
            gc.freeze()
            if collecting:
                gc.enable()
        self.store(background=True)

    def _start_helper(self, sources: dict[str, str], parse: Callable[[str, str], FormulaModule]) -> list[str]:
        """Fork the process that reads (through ``parse``) and stores the last new files of
        ``sources``; the paths it takes (none when too few are new)."""
        new = [path for path, source in sources.items() if not (self.directory / f"{self.key(path, source)}.pickle").is_file()]
        theirs = _helpers_share(new, [len(sources[path]) for path in new]) if len(new) > FEW_ENTRIES else []
        if not theirs:
            return []
        try:
            ready, told = os.pipe()
        except OSError:                 # no descriptor left: every file is read here
            return []
        try:
            helper = os.fork()
        except OSError:                 # no process left: every file is read here
            os.close(ready)
            os.close(told)
            return []
        if helper:
            os.close(told)
            self.helper, self.helper_ready, self.stored = helper, ready, self.stored + 2 * len(theirs)
            return theirs
        try:                            # the helper: read, store the summaries, say so, store the models
            os.close(ready)
            for path in theirs:
                parse(path, sources[path])
            pending, self.pending = self.pending, {}
            self._write({}, self.pending_summaries)
            os.write(told, b"1")
            self._write(pending, {})
        finally:
            os._exit(0)

    def _wait_for_summaries(self) -> None:
        """Wait until the helper has stored the summaries of its files (or has died: then its files
        are parsed here)."""
        try:
            with contextlib.suppress(OSError):
                os.read(self.helper_ready, 1)
        finally:
            os.close(self.helper_ready)

    def _wait_for_helper(self) -> None:
        """Wait until the helper has stored every model it read (its full models are read from there)."""
        if self.helper:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.helper, 0)
            self.helper = 0

    def store(self, background: bool = False) -> None:
        """Write the models parsed since the last call and the summaries of the models read whole;
        ``background``: in a second process (when the machine has a second core, there are more
        than :data:`FEW_ENTRIES` models and a process can be started), which :meth:`finish` waits for."""
        pending, self.pending = self.pending, {}
        summaries, self.pending_summaries = self.pending_summaries, {}
        if not pending and not summaries:
            return
        self.stored += len(pending) + len(summaries)
        if background and (os.cpu_count() or 1) > 1 and len(pending) > FEW_ENTRIES:
            try:
                writer = os.fork()
            except OSError:             # no process left: written here
                writer = -1
            if writer > 0:
                self.writers.append(writer)
                return
            if writer == 0:
                try:                    # the child: write, and leave without running the parent's exit code
                    self._write(pending, summaries)
                finally:
                    os._exit(0)
        self._write(pending, summaries)

    def _write(self, pending: dict[Path, FormulaModule], summaries: dict[Path, FormulaModule]) -> None:
        """Pickle and write the models and summaries, the cyclic collector paused: pickling makes no
        garbage but memoises a tuple per node, which sets it off again and again (with it running,
        pickling the shipped library's and the imported corpus's models took 1.2 to 1.5 times as long,
        measured)."""
        import pickle

        from transpiler.model_summary import summarize
        from transpiler.syntax_pickle import dumps

        collecting = gc.isenabled()
        gc.disable()
        try:
            for entry, module in [*pending.items(), *summaries.items()]:
                try:
                    stored = summarize(module) if entry in summaries else module
                    write_file(entry, dumps(stored))
                except (pickle.PicklingError, TypeError, AttributeError, KeyError, RecursionError, MemoryError,
                        OutputError):
                    continue            # not kept: parsed again next time
        finally:
            if collecting:
                gc.enable()

    def finish(self) -> None:
        """Store what is still pending, wait for the background writers, prune; give the models
        :meth:`prepare` froze back to the collector."""
        gc.unfreeze()
        self._wait_for_helper()
        self.store()
        for writer in self.writers:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(writer, 0)
        self.writers.clear()
        self.prune()

    def prune(self) -> None:
        """Remove the least recently used entries beyond :data:`KEPT_ENTRIES`."""
        if not self.stored:
            return
        with contextlib.suppress(OSError):
            entries = sorted(self.directory.glob("*.pickle"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
            for stale in entries[KEPT_ENTRIES:]:
                stale.unlink(missing_ok=True)


def _helpers_share(paths: list[str], sizes: list[int]) -> list[str]:
    """Of ``paths``, from the last, each that fits in :data:`HELPER_SHARE` of their ``sizes`` with
    those taken before it (never the first: this process reads at least one)."""
    room, taken = HELPER_SHARE * sum(sizes), []
    for index in range(len(paths) - 1, 0, -1):
        if sizes[index] <= room:
            room -= sizes[index]
            taken.append(paths[index])
    return taken[::-1]


@contextlib.contextmanager
def kept_in(directory: Path | None) -> Iterator[ModelCache | None]:
    """Keep parsed models in ``directory`` while the block runs (None: keep none)."""
    global _active
    outer, _active = _active, ModelCache(directory) if directory is not None else None
    try:
        yield _active
    finally:
        if _active is not None:
            _active.finish()
        _active = outer


def active() -> ModelCache | None:
    """The cache :func:`kept_in` set, if any."""
    return _active
