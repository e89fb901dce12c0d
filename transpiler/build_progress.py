"""Progress of ``python -m transpiler.build`` on stderr: a line per stage and per compiled unit
(``transpile coverage --corpus`` says its stages the same way, and its build's units).

``cpp_extension.load`` runs ``ninja -v`` and, when asked to be verbose, lets it write to file
descriptor 1. :func:`ninja_progress` points that descriptor at a pipe for the duration, turns
ninja's ``[N/M] c++ ... -c unit.cpp`` status lines into ``compile N/M unit.cpp`` and keeps every
other line (compiler errors) for the failure message. On a terminal a unit's line replaces the
previous one; elsewhere (a log, CI) each is a line of its own. Quiet: nothing is printed.
"""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

_STATUS = re.compile(r"^\[(\d+)/(\d+)\] (.*)$")
_UNIT = re.compile(r" -c (\S+) ")


class Progress:
    """Stage lines for one library's build (``command`` names another long command), on stderr;
    silent when ``quiet``."""

    def __init__(self, name: str, quiet: bool = False, command: str = "build"):
        self.name, self.quiet, self.command = name, quiet, command
        self.started = time.perf_counter()
        self.terminal = sys.stderr.isatty()
        self._pending_return = False        # a terminal line that the next one replaces

    def say(self, text: str, replaceable: bool = False) -> None:
        """Print ``text`` on stderr after the command and target's name (unless quiet); ``replaceable``: the
        next line on a terminal overwrites it."""
        if self.quiet:
            return
        line = f"{self.command} {self.name}: {text}"
        if self.terminal and replaceable:
            sys.stderr.write(f"\r\033[K{line}")
            self._pending_return = True
        else:
            sys.stderr.write(("\r\033[K" if self._pending_return else "") + line + "\n")
            self._pending_return = False
        sys.stderr.flush()

    def done(self) -> None:
        """Say the build is done, with the seconds it took."""
        self.say(f"done in {time.perf_counter() - self.started:.1f} s")


@contextlib.contextmanager
def ninja_progress(progress: Progress) -> Iterator[list[str]]:
    """Run the body with file descriptor 1 read line by line: ninja's status lines become
    ``progress`` lines; the other lines are collected in the yielded list."""
    sys.stdout.flush()
    saved = os.dup(1)
    read_end, write_end = os.pipe()
    other: list[str] = []

    def pump() -> None:
        with os.fdopen(read_end, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                _report(line.rstrip("\n"), progress, other)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    os.dup2(write_end, 1)
    os.close(write_end)
    status = os.environ.get("NINJA_STATUS")
    os.environ["NINJA_STATUS"] = "[%f/%t] "     # finished / total: off a terminal ninja prints an edge when done
    try:
        yield other
    finally:
        if status is None:
            del os.environ["NINJA_STATUS"]
        else:
            os.environ["NINJA_STATUS"] = status
        sys.stdout.flush()
        os.dup2(saved, 1)               # closes the pipe's last write end: the reader sees its end
        os.close(saved)
        reader.join()


def _report(line: str, progress: Progress, other: list[str]) -> None:
    status = _STATUS.match(line)
    if status is None:
        other.append(line)
        return
    done, total, command = status.groups()
    unit = _UNIT.search(command + " ")
    if unit is not None:
        progress.say(f"compile {done}/{total} {os.path.basename(unit.group(1))}", replaceable=True)
    else:
        progress.say(f"link {done}/{total} {progress.name}.so", replaceable=True)


def run_child_build(command: list[str], progress: Progress) -> subprocess.CompletedProcess[str]:
    """Run a ``python -m transpiler.build`` process, its progress lines (``build NAME: ...``) said
    again by ``progress`` (a unit's line replaceable, as the build's own); the result's ``stderr``
    holds its other lines (compiler errors), ``stdout`` what it printed there (the library's path)."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as stdout:
        child = subprocess.Popen(command, stdout=stdout, stderr=subprocess.PIPE, text=True, errors="replace")
        other = []
        for line in child.stderr:
            said = _CHILD.match(line.rstrip("\n"))
            if said is None:
                other.append(line)
            elif not said.group(1).startswith("done in"):
                progress.say(said.group(1), replaceable=said.group(1).startswith(("compile ", "link ")))
        child.stderr.close()
        returncode = child.wait()
        stdout.seek(0)
        return subprocess.CompletedProcess(command, returncode, stdout.read(), "".join(other))


_CHILD = re.compile(r"^build \S+: (.*)$")
