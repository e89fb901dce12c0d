"""What ``transpile`` computed for each formula module, kept between runs: its C++ and its lint findings.

A run after an edit of one formula file re-lints and re-emits that file and
what depends on it; every other module's result is taken from here. Each
result is stored under a key that hashes every input its computation read
(:func:`key`): the generator (every source file of ``transpiler/``, as
:func:`transpiler.model_cache.generator_digest`), the module's own path and
text (:attr:`transpiler.model.FormulaModule.source_digest`) and what it sees
of the rest of the library. For the emitted C++ of a module
(:func:`transpiler.cpp.emit.emit_library`) that is the whole operator table
and every helper's signature, the node names and registrations taken before
it that it could collide with, the namespace, the formulas per-formula mode
left out and the installed torch's ``native_functions.yaml`` (which ATen operators
are Tensor methods only: its path, size and modification time); for ``helpers.cpp``
every helper's module text and that yaml; for a module's lint
findings (:func:`transpiler.pipeline.formula_findings`) the operators declared
anywhere, the text of every module that defines a helper, and what the
emitter refused in it. An edit of a helper or of a schema is another key for
every module that sees it, an edit of the transpiler another key for all, so a
kept result is never used for inputs it was not computed from. A module read
otherwise than from its file's text (a formula whose jvp is derived against
the library) has no source digest and is never kept.

The results of one formula directory, namespace and mode are one directory in
the model cache's directory (:mod:`transpiler.model_cache`, trusted as it is),
one pickle per result named by its key: a result is read when the run asks for
it, a new one written atomically when the run ends, and the ones this run did
not use are removed then, so the directory holds one version of each module. A
run after an edit of one file reads the results of the others and writes only
the few it computed (the whole set is about 4 MB for the imported
derivatives.yaml corpus, mostly C++ text: lint's check of what the emitter
refuses keeps each module's refusals without its C++). An entry that cannot be read or holds
something else (truncated, corrupt, another format) is ignored: that result is
computed again; one that cannot be written leaves the next run to compute it
again, silently (it only costs time).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from transpiler.model_cache import MAX_ENTRY_BYTES, generator_digest
from transpiler.output import OutputError, write_file
from transpiler.sources import read_regular

FORMAT = 2                  # the layout of an entry; bump when what is stored changes shape
ENTRY = ".pickle"

_active: ModuleResults | None = None


def key(*parts: object) -> str:
    """The key of a result computed from ``parts`` (strings, or anything whose ``repr`` is
    deterministic and complete: frozen dataclasses of strings and numbers), by this generator."""
    digest = hashlib.blake2b(digest_size=20)
    for part in (f"format {FORMAT}", generator_digest(), *parts):
        digest.update((part if isinstance(part, str) else repr(part)).encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


def all_of(kind: type, items: object) -> bool:
    """Whether ``items`` is a tuple (or frozenset) of ``kind`` only: a part of a result's shape."""
    return isinstance(items, (tuple, frozenset)) and all(isinstance(item, kind) for item in items)


class ModuleResults:
    """The results kept in the directory ``entries`` (one file each), and the ones this run used
    or computed."""

    def __init__(self, entries: Path) -> None:
        self.entries = entries
        self.used: dict[str, object] = {}
        self.computed: set[str] = set()     # used, and not read from ``entries``: written at the end
        self.parts: dict[int, tuple[object, str]] = {}   # id(owner) -> (owner, text): see :meth:`part`
        self.made: dict[int, tuple[object, object]] = {}  # id(owner) -> (owner, value): see :meth:`once`

    def part(self, owner: object, make: Callable[[], object]) -> str:
        """``repr(make())``, made once per run for ``owner`` (held, so that its id is not reused):
        a part of several keys (a module's identity is in the key of each result of that module)."""
        found = self.parts.get(id(owner))
        if found is None or found[0] is not owner:
            found = self.parts[id(owner)] = (owner, repr(make()))
        return found[1]

    def once(self, owner: object, make: Callable[[], object]) -> object:
        """``make()``, made once per run for ``owner`` (held, so that its id is not reused): a value
        several computations of the run read (a helper's signature, in each emission's context)."""
        found = self.made.get(id(owner))
        if found is None or found[0] is not owner:
            found = self.made[id(owner)] = (owner, make())
        return found[1]

    def get(self, key: str, valid: Callable[[object], bool]) -> object | None:
        """The result stored under ``key`` if ``valid(result)`` (it has the shape the caller
        stores), else None: computed again."""
        if key in self.used:
            found = self.used[key]
        else:
            found = _read(self.entries / f"{key}{ENTRY}")
        if found is None or not valid(found):
            return None
        self.used[key] = found
        return found

    def put(self, key: str, result: object) -> None:
        """Keep ``result`` under ``key`` for this run (marked computed when it is new)."""
        if self.used.get(key, _ABSENT) is not result:
            self.computed.add(key)
        self.used[key] = result

    def finish(self) -> None:
        """Write the results this run computed, and remove the entries it did not use."""
        import pickle

        for name in self.computed:
            with contextlib.suppress(OutputError, pickle.PicklingError, TypeError, AttributeError, RecursionError):
                write_file(self.entries / f"{name}{ENTRY}",
                           pickle.dumps((FORMAT, self.used[name]), protocol=pickle.HIGHEST_PROTOCOL))
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.entries):
                if entry.name.endswith(ENTRY) and entry.name[:-len(ENTRY)] not in self.used:
                    os.unlink(entry.path)


_ABSENT = object()


def _read(entry: Path) -> object | None:
    import pickle

    with contextlib.suppress(OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError,
                             IndexError, KeyError, TypeError, ValueError, RecursionError, MemoryError):
        stored = pickle.loads(read_regular(entry, MAX_ENTRY_BYTES)[1])     # a FIFO never waited on, a device never read
        if isinstance(stored, tuple) and len(stored) == 2 and stored[0] == FORMAT:
            return stored[1]
    return None


@contextlib.contextmanager
def kept_in(directory: Path | None, formulas: Path, namespace: str, keep_going: bool,
            ) -> Iterator[ModuleResults | None]:
    """Keep the per-module results of ``transpile`` on ``formulas`` in ``directory`` while the
    block runs (None: keep none), in one subdirectory per formula directory, namespace and mode."""
    global _active
    results = None
    if directory is not None:
        run = hashlib.blake2b(digest_size=20)       # one file per run's inputs, whatever the generator
        run.update("\0".join([os.path.realpath(formulas), namespace, str(keep_going)]).encode("utf-8", "surrogatepass"))
        results = ModuleResults(directory / f"results-{run.hexdigest()}")
    outer, _active = _active, results
    try:
        yield results
        if results is not None:
            results.finish()
    finally:
        _active = outer


def active() -> ModuleResults | None:
    """The results :func:`kept_in` set, if any."""
    return _active
