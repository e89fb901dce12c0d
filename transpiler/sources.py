"""The one reader of Python source files, for lint and the transpile front-end alike.

A file's text is its bytes decoded in the encoding it declares (PEP 263: a
``coding`` comment on line 1 or 2, or a UTF-8 BOM; UTF-8 by default). Line
endings are kept as written, so a rewrite (``lint --fix``) keeps them too.
Bytes that do not decode are a ``DB000`` diagnostic at their place (line,
column and byte offset), never a ``UnicodeDecodeError``. Kept free of libcst so
the lint driver can use it on every file. A file too deeply nested for the
linter's recursive passes is a ``DB000`` too (:func:`too_deep`). Every read
is bounded (:func:`read_regular`): a FIFO, a device or a file larger than the
limit is an ``OSError`` saying so, never a hang or an unbounded read.
"""
from __future__ import annotations

import errno
import io
import os
import stat
import sys
import tokenize
from pathlib import Path
from typing import NamedTuple

from transpiler import codes
from transpiler.diagnostics import Diagnostic, printable

SYNTAX = codes.UNPARSABLE.code
MAX_SOURCE_BYTES = 32 * 2**20    # the largest Python sources in the wild are ~6 MB (generated API clients)
MAX_FORMULA_CHARS = 2 * 2**20    # libcst's tree costs ~0.5 GB per MB and its parser aborts when an allocation
                                 # fails (a 10 MB line under a 6 GB limit); formula files are ~20 kB


class UndecodableSource(Exception):
    """The file's bytes are not text in its declared encoding; ``diagnostic`` says where."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.format())
        self.diagnostic = diagnostic


def source_encoding(path: str, data: bytes) -> str:
    """The encoding ``data`` declares (``utf-8-sig`` with a BOM), as ``tokenize`` reads it."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:      # an unknown encoding, a BOM with another coding line, or bad bytes
        if str(error).startswith("invalid or missing encoding declaration"):
            return "utf-8"            # no declaration and not UTF-8: decoding says where
        raise UndecodableSource(Diagnostic(
            path, 1, 1, SYNTAX, f"cannot decode the file: {error}; "
            "declare an encoding Python knows (PEP 263) or save the file as UTF-8")) from None
    return encoding


def decode_source(path: str, data: bytes) -> str:
    """The text of ``data`` (``path`` only names it in diagnostics); raises :class:`UndecodableSource`."""
    encoding = source_encoding(path, data)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        offset = error.start
        line_start = data.rfind(b"\n", 0, offset) + 1
        line = data.count(b"\n", 0, offset) + 1
        column = len(data[line_start:offset].decode(encoding, "replace")) + 1
        shown = "utf-8" if encoding == "utf-8-sig" else encoding
        raise UndecodableSource(Diagnostic(
            path, line, column, SYNTAX,
            f"cannot decode the file: byte 0x{data[offset]:02x} at byte offset {offset} is not valid {shown}; "
            "save the file as UTF-8 or declare its encoding on line 1 or 2 (PEP 263: `# -*- coding: latin-1 -*-`)",
        )) from None


def read_source(path: str | Path) -> str:
    """The text of the file at ``path``; raises :class:`UndecodableSource` or ``OSError``."""
    return decode_source(str(path), read_regular(path)[1])


def read_regular(path: str | Path, limit: int = MAX_SOURCE_BYTES) -> tuple[os.stat_result, bytes]:
    """The status and bytes of the regular file at ``path`` (symlinks followed), at most ``limit``
    bytes. Raises ``OSError`` (``strerror`` says what, in words) for anything else: a FIFO or
    a device (opened without blocking, never read), a larger file, a missing or looping path."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(errno.EINVAL, f"not a regular file ({special_kind(status.st_mode)})", str(path))
        with open(descriptor, "rb", closefd=False) as file:
            data = file.read(limit + 1)
    finally:
        os.close(descriptor)
    if len(data) > limit:
        amount = f"{limit // 2**20} MiB" if limit % 2**20 == 0 else f"{limit} bytes"
        raise OSError(errno.EFBIG, f"larger than {amount}, the most this reads", str(path))
    return status, data


class SourceListing(NamedTuple):
    """The ``*.py`` files below a directory, as ``transpile`` reads a formula directory."""

    files: list[Path]        # regular files (symlinks to them followed), sorted
    skipped: list[str]       # one-line notes: ``*.py`` entries that are no regular file (never opened)
    misnamed: list[Path]     # regular files whose name (or a directory's below) is not a Python module name


def python_sources(directory: str | Path) -> SourceListing:
    """Every ``*.py`` file below ``directory``; FIFOs, devices and symlink loops are skipped, never
    opened. A formula file is a module of its package, so its name and its directories' must be
    identifiers (``with space.py``, a name with a line break or with bytes that are not UTF-8, kept
    as surrogates, are not): C++ file names and the MANIFEST's lines follow from them."""
    files, skipped, misnamed = [], [], []
    for path in sorted(Path(directory).rglob("*.py")):
        try:
            mode = path.stat().st_mode
        except OSError as error:
            skipped.append(f"{printable(str(path))}: cannot be read ({error.strerror}); skipped")
            continue
        if not stat.S_ISREG(mode):
            if not stat.S_ISDIR(mode):
                skipped.append(f"{printable(str(path))}: not a regular file ({special_kind(mode)}); skipped")
        elif all(part.isidentifier() for part in path.relative_to(directory).with_suffix("").parts):
            files.append(path)
        else:
            misnamed.append(path)
    return SourceListing(files, skipped, misnamed)


def special_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return kind
    return "a special file"


def encode_source(text: str, encoding: str) -> bytes:
    """``text`` back to bytes in the encoding the file declared (a BOM stays a BOM)."""
    return text.encode(encoding)


def caused_by_recursion(error: BaseException) -> bool:
    """Whether ``error`` is, or was raised while handling, a ``RecursionError``
    (libcst's position provider turns one into a ``KeyError`` on the way out)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, RecursionError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def too_large_for_formulas(path: str, source: str) -> Diagnostic | None:
    """DB000 for a formula file too large for the formula front-end (libcst), None for the others."""
    if len(source) <= MAX_FORMULA_CHARS:
        return None
    return Diagnostic(path, 1, 1, SYNTAX,
                      f"cannot analyse the file: {len(source):,} characters of formulas, more than the "
                      f"{MAX_FORMULA_CHARS // 2**20} Mi the formula front-end reads (its syntax tree costs about "
                      "0.5 GB a MB); split it into several files")


def too_deep(path: str, source: str) -> Diagnostic:
    """DB000 at the most deeply nested expression: too deep for the linter's recursive passes."""
    import ast      # here: a run with nothing changed never parses

    line = 1
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    if tree is not None:                        # an explicit stack: this walk must not recurse
        deepest, stack = -1, [(tree, 0)]
        while stack:
            node, depth = stack.pop()
            if depth > deepest and hasattr(node, "lineno"):
                deepest, line = depth, node.lineno
            stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return Diagnostic(path, line, 1, SYNTAX,
                      "cannot analyse the file: an expression is nested too deeply for the linter "
                      f"(Python recursion limit {sys.getrecursionlimit()}); split it into smaller statements")
