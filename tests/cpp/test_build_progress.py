"""``python -m transpiler.build`` says what it does: ninja's status lines become ``compile N/M
unit`` lines on stderr (one per line off a terminal), other output is kept for a failure's
message, and ``--quiet`` prints nothing; packages share the precompiled libtorch header."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from transpiler.build_progress import Progress, ninja_progress, run_child_build
from transpiler.cpp import generate

REPO = Path(__file__).resolve().parents[2]

NINJA = ("[1/3] c++ -MMD -MF sinh.o.d -DX -c /tmp/p/sinh.cpp -o sinh.o\n"
         "/tmp/p/sinh.cpp:3:1: error: expected ';'\n"
         "[2/3] c++ -MMD -MF helpers.o.d -c /tmp/p/helpers.cpp -o helpers.o\n"
         "[3/3] c++ sinh.o helpers.o -shared -o myops_ops.so\n")


def test_ninja_lines_become_progress_lines_and_the_rest_is_kept(capfd):
    progress = Progress("myops_ops")
    with ninja_progress(progress) as other:
        subprocess.run(["printf", "%s", NINJA], stdout=1, check=True)    # as cpp_extension runs ninja
    out, err = capfd.readouterr()
    assert out == ""
    assert err.splitlines() == ["build myops_ops: compile 1/3 sinh.cpp", "build myops_ops: compile 2/3 helpers.cpp",
                                "build myops_ops: link 3/3 myops_ops.so"]
    assert other == ["/tmp/p/sinh.cpp:3:1: error: expected ';'"]


def test_quiet_prints_nothing(capfd):
    progress = Progress("myops_ops", quiet=True)
    with ninja_progress(progress):
        subprocess.run(["printf", "%s", NINJA], stdout=1, check=True)
    progress.say("precompiling")
    progress.done()
    assert capfd.readouterr() == ("", "")


def test_on_a_terminal_a_unit_replaces_the_previous_line(monkeypatch, capsys):
    progress = Progress("myops_ops")
    progress.terminal = True
    progress.say("compile 1/2 a.cpp", replaceable=True)
    progress.say("compile 2/2 b.cpp", replaceable=True)
    progress.done()
    err = capsys.readouterr().err
    assert err.startswith("\r\033[Kbuild myops_ops: compile 1/2 a.cpp\r\033[Kbuild myops_ops: compile 2/2 b.cpp")
    assert err.endswith(" s\n") and err.count("\n") == 1


CHILD = """
import sys
for line in ("build derivatives_ops: precompiling libtorch's headers", "build derivatives_ops: compile 1/2 a.cpp",
             "a.cpp:3:1: warning: unused", "build derivatives_ops: link 2/2 derivatives_ops.so",
             "build derivatives_ops: done in 1.0 s"):
    print(line, file=sys.stderr)
print("/tmp/derivatives_ops.so")
"""


def test_a_child_build_s_progress_is_said_by_the_command_that_runs_it(capfd):
    """``transpile coverage --corpus`` builds in a child process: its stage and unit lines come
    under the corpus command's name, the rest stays for a failure's message."""
    progress = Progress("--corpus", command="coverage")
    done = run_child_build([sys.executable, "-c", CHILD], progress)
    assert (done.returncode, done.stdout, done.stderr) == (0, "/tmp/derivatives_ops.so\n", "a.cpp:3:1: warning: unused\n")
    assert capfd.readouterr().err.splitlines() == [
        "coverage --corpus: precompiling libtorch's headers", "coverage --corpus: compile 1/2 a.cpp",
        "coverage --corpus: link 2/2 derivatives_ops.so"]
    run_child_build([sys.executable, "-c", CHILD], Progress("--corpus", quiet=True, command="coverage"))
    assert capfd.readouterr().err == ""


def test_a_child_build_s_units_replace_each_other_on_a_terminal(capfd):
    progress = Progress("--corpus", command="coverage")
    progress.terminal = True
    run_child_build([sys.executable, "-c", CHILD], progress)
    progress.say("prove")
    assert capfd.readouterr().err == (
        "coverage --corpus: precompiling libtorch's headers\n\r\033[Kcoverage --corpus: compile 1/2 a.cpp"
        "\r\033[Kcoverage --corpus: link 2/2 derivatives_ops.so\r\033[Kcoverage --corpus: prove\n")


FORMULA = '''\
from formulas import at, derivative


@derivative("{op}(Tensor self) -> Tensor")
def {op}(self):
    result = at.{op}(self)
    def backward(grad):
        return grad * {derivative}
    return result, backward
'''


def test_two_packages_share_one_precompiled_header_and_say_what_they_compile(tmp_path):
    """Packages built with the same torch and flags into one cache share the precompiled libtorch
    header (GCC uses it: ``-H`` marks it ``!``), and the build's stderr names each unit."""
    pytest.importorskip("torch")
    build_dir = REPO / "build"
    headers = []
    for package, op, derivative in (("sinhpch", "sinh", "at.cosh(self)"), ("coshpch", "cosh", "at.sinh(self)")):
        (tmp_path / package).mkdir()
        (tmp_path / package / f"{op}.py").write_text(FORMULA.format(op=op, derivative=derivative))
        out = tmp_path / f"{package}_cpp"
        shutil.rmtree(build_dir / f"{package}_ops", ignore_errors=True)    # this test's own: built afresh
        assert generate.main(["--formulas", str(tmp_path / package), "--out", str(out)]) == 0
        done = subprocess.run([sys.executable, "-m", "transpiler.build", "--sources", str(out),
                               "--build-dir", str(build_dir)], cwd=REPO, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"build {package}_ops: compile " in done.stderr and f" {op}.cpp\n" in done.stderr
        cflags = (build_dir / f"{package}_ops" / "build.ninja").read_text().split("\ncflags = ", 1)[1].split("\n")[0]
        headers.append(cflags.split("-include ", 1)[1].split()[0])
        included = subprocess.run(["c++", *cflags.split(), "-Winvalid-pch", "-H", "-fsyntax-only", str(out / f"{op}.cpp")],
                                  capture_output=True, text=True)
        assert included.stderr.startswith(f"! {headers[-1]}.gch\n"), included.stderr[:2000]
    assert headers[0] == headers[1] and Path(headers[0]).parent.parent == build_dir / "precompiled"
