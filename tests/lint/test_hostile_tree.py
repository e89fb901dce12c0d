"""Hostile trees: ``transpile lint``, ``transpile`` and ``transpile --check`` end in bounded time and
memory with a documented exit status, one line per problem and never a traceback.

Among the formula files: a FIFO (never opened: opening one waits for a writer), a symlink to
``/dev/zero`` (never read), a symlink loop, and file names with a space, a line break or bytes
that are not UTF-8. Special files are skipped with a one-line note; ``transpile`` refuses a
file name that is not a module name (exit 2) and lint reads it, printing the name escaped so
that it cannot forge a line of output. Each command runs in a child process under a time
limit and an address-space limit.
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from lint.test_driver import FORMULA, FUNCTION, child_env, write

from transpiler import sources
from transpiler.lint import file_check, workers
from transpiler.lint.runner import lint

MEMORY_LIMIT = 3 * 2**30          # bytes of address space for each command (a read of /dev/zero would pass it)
TIME_LIMIT = 120                  # seconds: a FIFO opened for reading would wait forever


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def transpile(*argv: str | bytes, cwd: Path, timeout: int = TIME_LIMIT,
              build: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m transpiler *argv`` in a child under the limits; ``build``: its build cache."""
    env = child_env() if build is None else {**child_env(), "TRANSPILE_BUILD_DIR": str(build)}
    return subprocess.run([sys.executable, "-m", "transpiler", *argv], capture_output=True, timeout=timeout,
                          preexec_fn=limited, env=env, cwd=cwd)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """One build cache for this module's ``transpile`` runs: the shipped library's models are
    parsed by the first run only (about 2.4 s of CPU each; the cache is content-addressed, so a
    model is never used for another input), not by every hostile tree's."""
    return tmp_path_factory.mktemp("models")


HOSTILE = {
    "fifo": lambda package: os.mkfifo(package / "fifo.py"),
    "device": lambda package: os.symlink("/dev/zero", package / "zero.py"),
    "symlink loop": lambda package: os.symlink("loop.py", package / "loop.py"),
    "space": lambda package: write(package / "with space.py", FUNCTION.format(noqa="", noqa_global="")),
    "line break": lambda package: write(package / "new\nline.py", FUNCTION.format(noqa="", noqa_global="")),
    "not UTF-8": lambda package: (package / os.fsdecode(b"bad\xff.py")).write_text(
        FUNCTION.format(noqa="", noqa_global="")),
}
CLEAN_FORMULA = FORMULA.replace("c = at.cos(self)\n", "").replace("grad * c", "grad * at.cos(self)")
SPECIAL = {"fifo": "a FIFO", "device": "a character device", "symlink loop": "Too many levels of symbolic links"}
MISNAMED = {"space": "with space.py", "line break": "new\\nline.py", "not UTF-8": "bad\\xff.py"}


@pytest.mark.parametrize("kind", HOSTILE)
def test_every_command_ends_with_a_documented_status_and_one_line_per_problem(tmp_path, kind, models):
    package = tmp_path / "hostile"
    write(package / "__init__.py", "")
    write(package / "ok.py", CLEAN_FORMULA)
    HOSTILE[kind](package)
    out = tmp_path / "out"
    runs = {"lint": transpile("lint", "--no-cache", str(package), cwd=tmp_path),
            "transpile": transpile("--formulas", str(package), "--out", str(out), cwd=tmp_path, build=models),
            "again": transpile("--formulas", str(package), "--out", str(out), cwd=tmp_path, build=models),
            "check": transpile("--formulas", str(package), "--out", str(out), "--check", cwd=tmp_path,
                               build=models)}
    for name, run in runs.items():
        assert b"Traceback" not in run.stdout + run.stderr, (name, run.stderr.decode(errors="replace"))
    if kind in SPECIAL:
        for name, run in runs.items():
            assert run.returncode == 0, (name, run.stdout, run.stderr)
            (note,) = [line for line in run.stderr.decode().splitlines() if "note:" in line]
            assert SPECIAL[kind] in note and note.endswith("skipped")
        assert b"up to date" in runs["again"].stdout and b"up to date" in runs["check"].stdout
    else:
        lines = runs["lint"].stdout.decode().splitlines()
        assert runs["lint"].returncode == 1 and len(lines) == 2            # DB100 and DB104, one line each
        assert all(line.startswith(f"{package}/{MISNAMED[kind]}:") for line in lines)
        for name in ("transpile", "again", "check"):
            run = runs[name]
            (line,) = run.stderr.decode().splitlines()
            assert run.returncode == 2 and MISNAMED[kind] in line and "not a Python module name" in line
        assert not out.exists()


def test_a_file_that_vanishes_during_the_run_is_unreadable_not_an_internal_error(tmp_path, monkeypatch):
    formula = write(tmp_path / "formula.py", FORMULA)
    check_files = workers.check_files

    def then_delete(*args, **kwargs):
        reports = check_files(*args, **kwargs)
        formula.unlink()                               # after the per-file pass, before the closure rules
        return reports

    monkeypatch.setattr(workers, "check_files", then_delete)
    (found,) = lint([str(formula)]).diagnostics
    assert (found.code, found.message) == ("DB001", "cannot read the file: No such file or directory")


def test_a_file_larger_than_the_limit_is_one_unreadable_line(tmp_path, monkeypatch):
    monkeypatch.setattr(file_check.read_regular, "__defaults__", (1000,))
    big = write(tmp_path / "big.py", "x = 1\n" * 200)
    (found,) = lint([str(big)]).diagnostics
    assert (found.code, found.message) == ("DB001", "cannot read the file: larger than 1000 bytes, the most this reads")


def test_a_generated_comment_never_breaks_on_a_directory_name():
    from transpiler.cpp.emit import _display

    shown = _display("/tmp/odd\nname/pkg/f.py", "/tmp/odd\nname/pkg")
    assert shown == "pkg/f.py"
    shown = _display("/tmp/x/new\nline\x1b/f.py", "/tmp/x/new\nline\x1b")
    assert shown == "new\\nline\\x1b/f.py" and "\n" not in shown


def test_a_formula_file_too_large_for_the_front_end_is_one_line_under_a_memory_limit(tmp_path, models):
    """libcst's parser aborts the process (SIGABRT) when an allocation fails: a formula file over
    the front-end's limit is one DB000 line instead, in lint and in transpile."""
    line = "x = [" + "1, " * (sources.MAX_FORMULA_CHARS // 3 + 1000) + "]\n"
    huge = write(tmp_path / "pkg" / "huge.py", FORMULA + line)
    runs = [transpile("lint", "--no-cache", str(huge), cwd=tmp_path),
            transpile("--formulas", str(huge.parent), "--out", str(tmp_path / "out"), cwd=tmp_path, build=models)]
    for run in runs:
        (finding,) = run.stdout.decode().splitlines()
        assert run.returncode == 1 and "huge.py:1:1: DB000 cannot analyse the file: 2," in finding
        assert b"Traceback" not in run.stderr and "split it" in finding


def test_a_file_the_linter_runs_out_of_memory_on_is_one_db000_line(tmp_path, monkeypatch):
    """A 10 MB line in a formula file under a 3 GB limit: the syntax tree the linter builds to find
    its ``@derivative`` functions raised MemoryError, reported as DB002 "please report it"."""
    def out_of_memory(tree):
        raise MemoryError

    monkeypatch.setattr(file_check, "uses_derivative", out_of_memory)
    huge = write(tmp_path / "huge.py", FORMULA)
    (found,) = lint([str(huge)]).diagnostics
    assert (found.code, found.line, found.col) == ("DB000", 1, 1)
    assert found.message == (f"cannot analyse the file: its {len(FORMULA.encode())} bytes need more memory than "
                             "this process may use; split it into smaller files")


PEAK_MEMORY = """\
import resource, sys
from transpiler.cli import main
main(["lint", "--no-cache", sys.argv[1]])     # not the command's run(): it leaves without returning
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def test_lint_of_a_formula_file_takes_within_4x_the_memory_of_an_ordinary_file_of_its_size(tmp_path):
    """The issue's measure (a formula file cost 2.3 GB a MB, an ordinary file 0.45): the same long
    line of data in a formula file and in an ordinary file the linter analyses (it has a Function
    class), each linted alone in a child; peak resident memory of the whole process."""
    line = "x = [" + "1, " * (128 * 1024 // 3) + "]\n"
    ordinary = FUNCTION.format(noqa="", noqa_global="") + line
    formula = FORMULA + line
    peaks = {}
    for name, text in (("formula", formula), ("ordinary", ordinary + " " * (len(formula) - len(ordinary)))):
        path = write(tmp_path / name / "module.py", text)
        run = subprocess.run([sys.executable, "-c", PEAK_MEMORY, str(path)], capture_output=True, text=True,
                             timeout=TIME_LIMIT, preexec_fn=limited, env=child_env(), cwd=tmp_path, check=False)
        assert "Traceback" not in run.stderr, run.stderr
        peaks[name] = int(run.stderr.splitlines()[-1])
    assert peaks["formula"] < 4 * peaks["ordinary"], peaks


HOSTILE_CACHE_FILES = {"fifo": os.mkfifo, "device": lambda path: os.symlink("/dev/zero", path)}
"""What hung ``transpile`` (a FIFO read waits for a writer) or ate its memory (``/dev/zero``) in
the model and module-result caches; a symlink loop or a damaged pickle there was already an error
the cache caught (computed again)."""


def test_hostile_model_and_result_cache_files_are_computed_again_in_bounded_time(tmp_path):
    """``transpile`` keeps parsed models and per-module results as pickles in the build cache: a
    FIFO there is never waited on, a device never read; the run writes what a fresh one does (the
    lint cache's hostile files: ``tests/lint/test_cache.py``)."""
    package = tmp_path / "pkg"
    write(package / "__init__.py", "")
    write(package / "ok.py", CLEAN_FORMULA)
    env = {**child_env(), "TRANSPILE_BUILD_DIR": str(tmp_path / "cache")}
    argv = [sys.executable, "-m", "transpiler", "--formulas", str(package), "--out", str(tmp_path / "out")]
    first = subprocess.run(argv, capture_output=True, timeout=TIME_LIMIT, env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    written = (tmp_path / "out" / "ok.cpp").read_bytes()
    caches = sorted((tmp_path / "cache").rglob("*.pickle"))     # the modules' models, then the results
    assert len(caches) >= 2 and caches[-1].parent.name.startswith("results-")
    (tmp_path / "out" / "ok.cpp").unlink()                 # so that the run writes, reading its caches
    for number, cache in enumerate(caches):               # the kinds in turn
        cache.unlink()
        list(HOSTILE_CACHE_FILES.values())[number % 2](cache)
    run = subprocess.run(argv, capture_output=True, timeout=TIME_LIMIT, env=env, cwd=tmp_path, preexec_fn=limited)
    assert run.returncode == 0 and b"Traceback" not in run.stderr, run.stderr
    assert (tmp_path / "out" / "ok.cpp").read_bytes() == written


def test_prove_leaves_the_hostile_entries_of_a_package_out_with_one_note_each(tmp_path):
    """``transpile prove`` imports the package's modules as ``transpile`` reads its files: a FIFO,
    a ``/dev/zero`` link, a symlink loop and a file whose name is no module name are left out (one
    note each, never opened), and the formulas beside them are proven (all kinds in one package)."""
    package = tmp_path / "hostile"
    write(package / "__init__.py", "")
    write(package / "ok.py", CLEAN_FORMULA)
    for make in HOSTILE.values():
        make(package)
    run = transpile("prove", "-q", str(package), cwd=tmp_path, timeout=5 * TIME_LIMIT)   # torch's import, the tiers
    notes = run.stderr.decode().splitlines()
    assert run.returncode == 0 and b"Traceback" not in run.stderr, notes
    assert len(notes) == len(HOSTILE) and all(note.startswith("transpile prove: note: ") for note in notes)
    assert all(note.endswith("skipped") for note in notes)
    assert run.stdout.decode().splitlines()[1].split() == ["sin", "ok", "ok", "ok", "ok", "ok", "ok", "n/a", "n/a"]
