"""The one writer of every command (``transpile``, ``import-yaml``, ``emit-yaml``, the build).

Rules, so that no command deletes or damages what it did not write:

* A generated directory is written only where it is missing, empty, or holds
  nothing but what the same command wrote before (its marker: ``MANIFEST`` for
  ``transpile``, the ``__init__.py`` of ``import-yaml``, the build's stamp).
  Never a file, the working directory or one of its parents, or a directory
  that holds the inputs (:func:`check_directory`).
* A directory is replaced as a whole: the new tree is written next to it
  (``.<name>-new-*``) and swapped in with one ``renameat2(RENAME_EXCHANGE)``,
  so there is no moment at which the directory is missing or half written.
  Where the kernel or file system cannot exchange, two renames do it (a
  window of microseconds in which the directory is missing).
* Writers into one parent directory take turns under an exclusive lock on it
  (held only while a tree is written and swapped, milliseconds), so concurrent
  runs never race: each swaps in a complete tree, the last one stays. Staging
  trees left by killed runs (``.<name>-new-*``, ``.<name>-old-*``) are removed
  under that lock.
* The directory keeps its mode (a new one gets the umask's), a file keeps its
  mode; unchanged files keep their timestamps, so ninja recompiles only what
  changed.

Every failure is an :class:`OutputError` whose text is a one-line diagnostic
(``path: what happened; what to do``): the commands print it and exit 2.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path


class OutputError(Exception):
    """An output that must not or cannot be written; ``str()`` is the one-line diagnostic."""


def describe(error: OSError, path: Path | str, doing: str = "cannot write") -> OutputError:
    """An ``OSError`` as a one-line diagnostic naming the path and the reason."""
    where = error.filename if error.filename else path
    reason = error.strerror or str(error)
    hint = {
        errno.ENOSPC: "free some space and run again",
        errno.EDQUOT: "free some space and run again",
        errno.EACCES: "choose a directory you can write to",
        errno.EPERM: "choose a directory you can write to",
        errno.EROFS: "choose a directory on a writable file system",
    }.get(error.errno or 0, "check the path and run again")
    return OutputError(f"{where}: {doing}: {reason}; {hint}")


def check_directory(out: Path, owned: Callable[[Path], bool], written: Callable[[Path], set[str]],
                    command: str, inputs: Iterable[Path] = ()) -> None:
    """Refuse an output directory this command must not replace.

    ``owned(out)`` says whether ``out`` carries this command's marker;
    ``written(out)`` names the entries it wrote there (anything else is foreign).
    ``inputs`` are directories the command reads: ``out`` must not be or hold one.
    """
    resolved = out.resolve()
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out}: is a file, not a directory; choose a directory for the output")
    working = Path.cwd().resolve()
    if resolved == working or resolved in working.parents:
        raise OutputError(f"{out}: is the working directory or one of its parents, which {command} would "
                          "overwrite; choose a new directory")
    for source in inputs:
        source = source.resolve()
        if resolved == source or resolved in source.parents:
            raise OutputError(f"{out}: is or contains the input {source}, which {command} would overwrite; "
                              "choose a new directory")
    if not out.is_dir():
        return
    try:
        present = {entry.name for entry in out.iterdir()}
    except OSError as error:
        raise describe(error, out, "cannot read") from None
    if not present:
        return
    if not owned(out):
        raise OutputError(f"{out}: not empty and not written by {command} ({_some(present)}); "
                          "choose an empty or new directory (it is replaced as a whole)")
    foreign = present - written(out)
    if foreign:
        raise OutputError(f"{out}: holds files {command} did not write ({_some(foreign)}); move them away "
                          "or choose another directory (it is replaced as a whole)")


def _some(names: set[str], shown: int = 3) -> str:
    listed = ", ".join(sorted(names)[:shown])
    return listed + (f" and {len(names) - shown} more" if len(names) > shown else "")


@contextlib.contextmanager
def locked(directory: Path, target: Path) -> Iterator[None]:
    """Hold the exclusive writer lock of ``directory`` (the parent of ``target``, or ``target``
    itself when it is never replaced), waiting while another run holds it."""
    try:
        descriptor = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as error:
        raise describe(error, directory, "cannot open") from None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"{target}: waiting for another run to finish writing", file=sys.stderr)
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)   # releases the lock


def remove_stale_staging(out: Path) -> list[Path]:
    """Remove the staging trees of killed runs next to ``out`` (call with the lock held)."""
    removed = []
    for prefix in (f".{out.name}-new-", f".{out.name}-old-"):
        for path in out.parent.glob(f"{prefix}*"):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def replace_directory(out: Path, files: Mapping[str, str | bytes]) -> None:
    """Make ``out`` hold exactly ``files`` (name -> text or bytes), swapped in whole.

    Call :func:`check_directory` first; this only writes. Raises :class:`OutputError`.
    """
    out = out.resolve()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with locked(out.parent, out):
            remove_stale_staging(out)
            _replace_locked(out, files)
    except OSError as error:
        raise describe(error, out) from None


def _replace_locked(out: Path, files: Mapping[str, str | bytes]) -> None:
    staging = out.parent / f".{out.name}-new-{_token()}"
    os.mkdir(staging, 0o777)              # the umask applies, as to any new directory
    try:
        if out.is_dir():
            os.chmod(staging, stat.S_IMODE(out.stat().st_mode))
        for name, content in sorted(files.items()):
            data = content.encode("utf-8") if isinstance(content, str) else content
            old = out / name
            if old.is_file() and old.stat().st_size == len(data) and old.read_bytes() == data:
                _keep(old, staging / name)            # same bytes: keep the timestamp for ninja
            else:
                (staging / name).write_bytes(data)
        if not out.exists():
            os.rename(staging, out)
        elif _exchange(staging, out):
            shutil.rmtree(staging, ignore_errors=True)   # now the old tree
        else:
            _swap_with_two_renames(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _keep(old: Path, new: Path) -> None:
    """``old``'s file at ``new`` too, timestamp and all: a second link to it (nothing copied; the old
    tree's name for it goes with the old tree), or a copy where this file system has no links."""
    try:
        os.link(old, new)
    except OSError:
        shutil.copy2(old, new)


def _swap_with_two_renames(staging: Path, out: Path) -> None:
    """The fallback where no exchange rename exists: ``out`` is missing between the two renames."""
    retired = out.parent / f".{out.name}-old-{_token()}"
    os.rename(out, retired)
    try:
        os.rename(staging, out)
    except BaseException:
        os.rename(retired, out)                       # put the old tree back
        raise
    shutil.rmtree(retired, ignore_errors=True)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _token() -> str:
    """A random suffix for a temporary name (eight hex digits, as ``secrets.token_hex(4)``: that module
    is not imported for it, nor ``ctypes`` until a swap: a run with nothing to write needs neither)."""
    return os.urandom(4).hex()


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2``); False where this system cannot."""
    import ctypes

    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), os.fspath(second))


def write_file(path: Path, content: str | bytes) -> None:
    """Write ``content`` (text as UTF-8) to ``path`` through a temporary file in the same directory,
    keeping an existing file's mode. Raises :class:`OutputError`."""
    if path.is_dir():
        raise OutputError(f"{path}: is a directory; name a file to write")
    data = content.encode("utf-8") if isinstance(content, str) else content
    temporary = path.parent / f".{path.name}-new-{_token()}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "xb") as handle:     # created with the umask's mode, as any new file
            handle.write(data)
        if path.is_file():
            os.chmod(temporary, stat.S_IMODE(path.stat().st_mode))
        os.replace(temporary, path)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(error, OSError):
            raise describe(error, path) from None
        raise
