"""Bytecode trust: a file CPython already compiled needs no syntax check.

Owns :func:`compiled_before`, the test that lets the per-file pass skip
``compile`` for a file whose up-to-date ``.pyc`` is in ``__pycache__`` (as pip
writes one for every installed file). Only the pyc's 16-byte header is read.
"""
from __future__ import annotations

import importlib.util
import os


def compiled_before(path: str, source: bytes) -> bool:
    """Whether this interpreter's bytecode of exactly ``source`` is in ``__pycache__``.

    CPython (at import, or pip at install time) writes a ``.pyc`` only after
    compiling the source without error, so an up-to-date one proves there is
    no syntax error. Up to date means: the magic number of this interpreter,
    and either the source hash (hash-based pycs) or, for timestamp pycs, the
    source's mtime and size as recorded, the pyc itself written in a later
    second than the source's recorded mtime (an edit in the second the pyc was
    written cannot go unnoticed) and after the source's last change of any
    kind (its ctime: an edit whose mtime was set back, by ``cp -p``, ``tar``
    or ``os.utime``, moves the ctime on). Only the 16-byte header is read.
    """
    try:
        pyc = importlib.util.cache_from_source(path)
        with open(pyc, "rb") as file:
            header = file.read(16)
            pyc_written = os.fstat(file.fileno()).st_mtime_ns
        source_status = os.stat(path)
    except (OSError, ValueError, NotImplementedError):
        return False
    if len(header) < 16 or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags = int.from_bytes(header[4:8], "little")
    if flags & 0b1:
        return header[8:16] == importlib.util.source_hash(source)
    recorded_mtime = int.from_bytes(header[8:12], "little")
    recorded_size = int.from_bytes(header[12:16], "little")
    source_changed = source_status.st_mtime_ns // 1_000_000_000
    return (flags == 0 and recorded_mtime == source_changed & 0xFFFFFFFF
            and recorded_size == len(source) & 0xFFFFFFFF and pyc_written // 1_000_000_000 > source_changed
            and pyc_written > source_status.st_ctime_ns)
