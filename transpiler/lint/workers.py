"""Workers: the per-file pass over many files, on every core, through the result cache.

Owns the process pool (forked workers, largest files first, few large chunks),
the threshold below which a run stays serial, :class:`WorkerDied` when a
worker process is killed, the per-file entries of the result cache
(:mod:`transpiler.lint.cache`), and the second look at files whose classes
derive from a Function class of another linted file.
"""
from __future__ import annotations

import functools
import os

from transpiler.lint import ctx
from transpiler.lint.cache import ResultCache
from transpiler.lint.ctx.tree import current_tree
from transpiler.lint.file_check import SYNTAX, FileReport, check_file

PARALLEL_MIN_FILES = 200   # fewer files left to check run serially: starting 2 workers costs ~35 ms CPU (measured), about
                           # what 200 typical torch files cost serially (50 ms; 400: 230 ms)


class WorkerDied(Exception):
    """A ``--jobs`` worker process died: the run cannot be completed (exit 2)."""


def per_file_pass(files: list[str], jobs: int | None = None, trust_bytecode: bool = True,
                  cache: ResultCache | None = None) -> list[FileReport]:
    """The per-file pass of one run: names resolve across ``files`` (:func:`ctx.use_tree`), every
    file is checked (:func:`check_files`), then again each file whose classes derive from a
    Function class of another of them."""
    ctx.use_tree(files)
    reports = check_files(files, jobs, trust_bytecode, cache)
    return subclasses_of_tree_functions(reports, trust_bytecode, cache)


def check_files(files: list[str], jobs: int | None = None, trust_bytecode: bool = True,
                cache: ResultCache | None = None) -> list[FileReport]:
    """The per-file pass over ``files``, in parallel when there are many of them; with a
    ``cache``, over the files whose cached report is out of date.

    A worker process that dies (killed, out of memory) raises :class:`WorkerDied`
    instead of leaving the run waiting for its results forever.
    """
    if cache is None:
        return _check_files(files, jobs, trust_bytecode)
    tree = current_tree()
    reports: dict[str, FileReport] = {}
    for path in files:
        stored = cache.get(f"file:{path}", tree)
        report = FileReport.from_json(path, stored) if stored is not None else None
        if report is not None:
            reports[path] = report
    for report in _check_files([path for path in files if path not in reports], jobs, trust_bytecode):
        reports[report.path] = report
        if report.cacheable:
            cache.put(f"file:{report.path}", report.as_json(), report.depends)
    return [reports[path] for path in files]


def _check_files(files: list[str], jobs: int | None, trust_bytecode: bool) -> list[FileReport]:
    check = functools.partial(check_file, trust_bytecode=trust_bytecode)
    workers = jobs if jobs is not None else len(os.sched_getaffinity(0))
    if workers < 2 or len(files) < PARALLEL_MIN_FILES:
        return [check(path) for path in files]
    import concurrent.futures       # here: a run that stays serial (one file edited) never loads the pool
    import multiprocessing
    from concurrent.futures.process import BrokenProcessPool

    largest_first = sorted(files, key=_size, reverse=True)        # balances the workers' load
    context = multiprocessing.get_context("fork")
    try:
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            # few large chunks: each is one round trip to a worker (small ones cost more than they balance)
            chunk = max(4, len(files) // (workers * 8))
            reports = {r.path: r for r in pool.map(check, largest_first, chunksize=chunk)}
    except BrokenProcessPool:
        raise WorkerDied("a worker process died before finishing its files (killed, or out of memory); "
                         "nothing was reported; run again, or with --jobs 1 to find the file") from None
    return [reports[path] for path in files]


def subclasses_of_tree_functions(reports: list[FileReport], trust_bytecode: bool,
                                 cache: ResultCache | None = None) -> list[FileReport]:
    """Check again the files whose classes derive from a Function class of another linted file
    (``class Impl(ProjectBase)``: the text prefilter cannot see that ``ProjectBase`` is one)."""
    names = {name.encode() for r in reports for name in r.function_names}
    subclass_files = {r.path for r in reports if r.base_names & names and all(d.code != SYNTAX for d in r.diagnostics)}
    ctx.derive_from_tree(subclass_files)
    return [_check_tree_bases(r.path, trust_bytecode, cache) if r.path in subclass_files else r
            for r in reports]


def _check_tree_bases(path: str, trust_bytecode: bool, cache: ResultCache | None) -> FileReport:
    """:func:`check_file` with ``tree_bases``, through the ``cache``."""
    stored = cache.get(f"bases:{path}", current_tree()) if cache is not None else None
    report = FileReport.from_json(path, stored) if stored is not None else None
    if report is not None:
        return report
    report = check_file(path, trust_bytecode, tree_bases=True)
    if cache is not None and report.cacheable:
        cache.put(f"bases:{path}", report.as_json(), report.depends)
    return report



def _size(path: str) -> int:
    """The file's size in bytes (0 when it cannot be read: it is reported by its check)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0

