"""Where ``transpile`` may write, and how: never over what it did not write, never a missing or
half-written output directory, one-line diagnostics (exit 2) when the output cannot be written."""
from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.cpp.test_transpile_cli import GOOD
from transpiler import output
from transpiler.cpp import generate


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path below ``root`` (directories as None) with its bytes: what a refused run must not touch."""
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    """A user's project as the working directory: trig/ (formulas), notes.txt, an earlier out_cpp/."""
    (tmp_path / "trig").mkdir()
    (tmp_path / "trig" / "trig.py").write_text(GOOD)
    (tmp_path / "notes.txt").write_text("my notes\n")
    monkeypatch.chdir(tmp_path)
    assert generate.main(["--formulas", "trig", "--out", "out_cpp"]) == 0
    return tmp_path


def refused(capsys, argv: list[str], root: Path) -> str:
    """Run transpile expecting a refusal: exit 2, one line on stderr, nothing under ``root`` changed."""
    before = tree(root)
    capsys.readouterr()
    assert generate.main(argv) == 2
    printed = capsys.readouterr()
    assert tree(root) == before
    assert "Traceback" not in printed.err and len(printed.err.strip().splitlines()) == 1, printed.err
    return printed.err


REFUSALS = {
    "the working directory": (".", "is the working directory"),
    "a parent of the working directory": ("..", "is the working directory or one of its parents"),
    "the formulas directory": ("trig", "is or contains the input"),
    "a file": ("notes.txt", "is a file, not a directory"),
    "a directory of notes": ("notes", "not empty and not written by transpile (todo.txt)"),
    "a directory with a foreign file": ("out_cpp", "holds files transpile did not write (todo.txt)"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refuses_an_output_it_did_not_write(project, capsys, case):
    out, message = REFUSALS[case]
    (project / "notes").mkdir()
    (project / "notes" / "todo.txt").write_text("keep me\n")
    (project / "out_cpp" / "todo.txt").write_text("keep me too\n")
    (project / "trig" / "trig.py").write_text(GOOD.replace("grad * at.cos(self)", "at.cos(self) * grad"))
    root = project.parent if case == "a parent of the working directory" else project
    assert message in refused(capsys, ["--formulas", "trig", "--out", out], root)


def test_writes_into_an_empty_directory_and_its_own_output(project):
    (project / "empty").mkdir()
    assert generate.main(["--formulas", "trig", "--out", "empty"]) == 0
    assert (project / "empty" / "trig.cpp").is_file()
    (project / "trig" / "trig.py").write_text(GOOD.replace("grad * at.cos(self)", "at.cos(self) * grad"))
    assert generate.main(["--formulas", "trig", "--out", "empty"]) == 0
    assert "at::cos(self) * grad" in (project / "empty" / "trig.cpp").read_text()


def test_output_directory_keeps_its_mode(project):
    out = project / "out_cpp"
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~_umask()   # a new directory gets the umask's mode
    out.chmod(0o750)
    (project / "trig" / "trig.py").write_text(GOOD.replace("grad * at.cos(self)", "at.cos(self) * grad"))
    assert generate.main(["--formulas", "trig", "--out", "out_cpp"]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o750


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_the_output_directory_is_never_missing(project, monkeypatch):
    """After every rename the output directory is there and complete (old tree or new tree)."""
    out = project / "out_cpp"
    old_names = sorted(p.name for p in out.iterdir())
    seen = []

    def observed(rename):
        def call(*args, **kwargs):
            result = rename(*args, **kwargs)
            seen.append(sorted(p.name for p in out.iterdir()) if out.is_dir() else None)
            return result
        return call

    monkeypatch.setattr(os, "rename", observed(os.rename))
    monkeypatch.setattr(os, "replace", observed(os.replace))
    monkeypatch.setattr(output, "_exchange", observed(output._exchange))
    (project / "trig" / "trig.py").write_text(GOOD.replace("grad * at.cos(self)", "at.cos(self) * grad"))
    assert generate.main(["--formulas", "trig", "--out", "out_cpp"]) == 0
    assert seen and all(names == old_names for names in seen)
    assert "at::cos(self) * grad" in (out / "trig.cpp").read_text()


def test_without_an_exchange_rename_two_renames_still_write_it(project, monkeypatch):
    monkeypatch.setattr(output, "_exchange", lambda first, second: False)
    (project / "trig" / "trig.py").write_text(GOOD.replace("grad * at.cos(self)", "at.cos(self) * grad"))
    assert generate.main(["--formulas", "trig", "--out", "out_cpp"]) == 0
    assert "at::cos(self) * grad" in (project / "out_cpp" / "trig.cpp").read_text()
    assert sorted(p.name for p in project.iterdir()) == ["notes.txt", "out_cpp", "trig"]


def test_a_concurrent_run_waits_its_turn(project):
    """While another run writes (holds the lock), transpile waits, then writes the complete tree."""
    (project / "trig" / "trig.py").write_text(GOOD.replace("grad * at.cos(self)", "at.cos(self) * grad"))
    before = tree(project / "out_cpp")
    command = [sys.executable, "-m", "transpiler", "--formulas", "trig", "--out", "out_cpp"]
    waited = f"{project / 'out_cpp'}: waiting for another run to finish writing"
    said: list[str] = []
    with output.locked(project, project / "out_cpp"):
        waiting = subprocess.Popen(command, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        reader = threading.Thread(target=lambda: said.extend(line.rstrip("\n") for line in waiting.stderr))
        reader.start()
        deadline = time.monotonic() + 120     # a cold model cache is read first: slow on a loaded machine
        while waited not in said and waiting.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert waited in said and waiting.poll() is None     # it says so, and goes on waiting
        time.sleep(1)
        assert waiting.poll() is None and tree(project / "out_cpp") == before
    assert waiting.wait(timeout=120) == 0
    reader.join()       # and, before or after it, a cold model cache's progress line
    assert said.count(waited) == 1
    assert all(line.startswith("transpile: reading ") for line in said if line != waited)
    assert "at::cos(self) * grad" in (project / "out_cpp" / "trig.cpp").read_text()


def test_staging_directories_of_killed_runs_are_removed(project):
    for stale in (".out_cpp-new-0badc0de", ".out_cpp-old-0badc0de", ".out_cpp-new-k6q2w9_x"):
        (project / stale).mkdir()
        (project / stale / "trig.cpp").write_text("// half written\n")
    (project / ".other-new-1").mkdir()   # another output's staging: not ours to remove
    (project / "trig" / "trig.py").write_text(GOOD.replace("grad * at.cos(self)", "at.cos(self) * grad"))
    assert generate.main(["--formulas", "trig", "--out", "out_cpp"]) == 0
    assert sorted(p.name for p in project.iterdir()) == [".other-new-1", "notes.txt", "out_cpp", "trig"]


def test_bytes_do_not_depend_on_how_formulas_is_spelled(project, monkeypatch):
    spellings = {"plain": ("trig", project), "dot": (".", project / "trig"),
                 "absolute": (str(project / "trig"), project / "trig"),
                 "detour": ("../trig/../trig/", project / "notes_dir"), "link": ("linked", project)}
    (project / "notes_dir").mkdir()
    (project / "linked").symlink_to(project / "trig")
    written = {}
    for name, (formulas, where) in spellings.items():
        monkeypatch.chdir(where)
        assert generate.main(["--formulas", formulas, "--out", str(project / f"out_{name}")]) == 0
        written[name] = tree(project / f"out_{name}")
    assert all(files == written["plain"] for files in written.values())
    monkeypatch.chdir(project / "trig")
    assert generate.main(["--formulas", ".", "--out", str(project / "out_plain"), "--check"]) == 0


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EACCES, errno.EROFS])
def test_write_errors_are_one_line_diagnostics(project, capsys, monkeypatch, code):
    """A full disk, a read-only or unwritable directory: one line, exit 2, the output as it was."""
    def failing(self, data):
        raise OSError(code, os.strerror(code), str(self))

    monkeypatch.setattr(Path, "write_bytes", failing)
    (project / "trig" / "trig.py").write_text(GOOD.replace("grad * at.cos(self)", "at.cos(self) * grad"))
    before = tree(project / "out_cpp")
    capsys.readouterr()
    assert generate.main(["--formulas", "trig", "--out", "out_cpp"]) == 2
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if not line.startswith("transpile: reading ")]   # a cold cache's progress
    assert os.strerror(code) in err and "Traceback" not in err and len(said) == 1
    assert tree(project / "out_cpp") == before
    assert sorted(p.name for p in project.iterdir()) == ["notes.txt", "out_cpp", "trig"]


def test_an_output_that_cannot_be_created_is_a_diagnostic(project, capsys):
    err = refused(capsys, ["--formulas", "trig", "--out", "notes.txt/out_cpp"], project)
    assert err.startswith(f"transpile: {project / 'notes.txt'}: cannot write: ")
    err = refused(capsys, ["--formulas", "trig", "--out", "/proc/version/out_cpp"], project)
    assert err.startswith("transpile: /proc/version: cannot write: ")


def test_concurrent_processes_never_corrupt_the_output(project):
    """Four real processes at once: they take turns, none shows a traceback or fails, and the
    result is the complete, current output."""
    (project / "trig" / "trig.py").write_text(GOOD.replace("grad * at.cos(self)", "at.cos(self) * grad"))
    command = [sys.executable, "-m", "transpiler", "--formulas", "trig", "--out", "out_cpp", "--no-lint"]
    runs = [subprocess.Popen(command, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(4)]
    results = [(run.wait(timeout=120), run.stderr.read()) for run in runs]
    waiting = f"{project / 'out_cpp'}: waiting for another run to finish writing"
    for status, err in results:
        assert status == 0 and set(err.splitlines()) <= {waiting}, err
    assert "at::cos(self) * grad" in (project / "out_cpp" / "trig.cpp").read_text()
    assert sorted(p.name for p in project.iterdir()) == ["notes.txt", "out_cpp", "trig"]
    assert generate.main(["--formulas", "trig", "--out", "out_cpp", "--check"]) == 0


POLLER = """
import os, sys
out, stop = sys.argv[1:]
missing = checks = 0
while not os.path.exists(stop):
    checks += 1
    missing += not os.path.isdir(out)
print(missing, checks)
"""


def test_another_process_never_sees_the_output_missing(tmp_path):
    """A second process looks at the output directory in a tight loop while it is replaced 200
    times (the two-rename swap it replaces let such a poller see it missing thousands of times)."""
    out, stop = tmp_path / "out_cpp", tmp_path / "stop"
    files = {f"module{i}.cpp": "// generated\n" * 100 for i in range(9)}
    output.replace_directory(out, files)
    poller = subprocess.Popen([sys.executable, "-c", POLLER, str(out), str(stop)], stdout=subprocess.PIPE, text=True)
    for version in range(200):
        output.replace_directory(out, {**files, "module0.cpp": f"// version {version}\n"})
    stop.touch()
    missing, checks = map(int, poller.communicate(timeout=60)[0].split())
    assert checks > 0 and missing == 0
    assert (out / "module0.cpp").read_text() == "// version 199\n"
