"""No tracebacks: deep expressions, broken pipes, internal errors, encodings, compile-stage
errors and dead workers each give a one-line diagnostic (per file) and the documented exit status."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lint.test_driver import FORMULA, LATER, child_env, compile_with_timestamps, function_file, run_cli, write
from transpiler.frontend import load_library
from transpiler.lint import ctx
from transpiler.lint.runner import lint

REPO = Path(__file__).resolve().parents[2]


def deep_formula(terms: int) -> str:
    return FORMULA.replace("return grad * c", "return " + " + ".join(["grad"] * terms)).replace(
        "    c = at.cos(self)\n", "")


def deep_function(terms: int) -> str:
    return textwrap.dedent(f"""\
        import torch


        class Deep(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = {" + ".join(["x"] * terms)}
                ctx.save_for_backward(y)
                return x.clone()
        """)


def test_deep_formula_is_one_db000_and_the_other_files_still_report(tmp_path, capsys):
    write(tmp_path / "deep.py", deep_formula(600))
    write(tmp_path / "other.py", FORMULA)
    function_file(tmp_path / "ctx_style.py")
    status, out, err = run_cli([str(tmp_path)], capsys)
    assert status == 1 and "Traceback" not in err + out
    lines = out.splitlines()
    (deep,) = [line for line in lines if "deep.py" in line]
    assert deep.startswith(f"{tmp_path}/deep.py:9:1: DB000 cannot analyse the file: an expression is nested too deeply")
    assert any("other.py:10:23: DB100" in line for line in lines)
    assert any("ctx_style.py:8:9: DB100" in line for line in lines)


def test_deep_expression_in_a_function_file_is_checked_or_reported_on_one_line(tmp_path):
    write(tmp_path / "deep.py", deep_function(500))
    function_file(tmp_path / "other.py")
    found = lint([str(tmp_path)]).diagnostics
    assert [(Path(d.path).name, d.code) for d in found] == [
        ("deep.py", "DB100"), ("other.py", "DB100"), ("other.py", "DB104")]


@pytest.mark.parametrize("bytecode", [False, True])
def test_expression_too_deep_for_the_compiler_or_the_ctx_rules_is_one_db000(tmp_path, bytecode):
    deep = write(tmp_path / "deep.py", deep_function(3000))
    function_file(tmp_path / "other.py")
    if bytecode:                  # CPython compiled it (with a higher limit): only the ctx rules see it
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(100_000)
        try:
            compile_with_timestamps(deep, LATER, LATER + 5)
        finally:
            sys.setrecursionlimit(limit)
    found = lint([str(tmp_path)]).diagnostics
    assert [(Path(d.path).name, d.code) for d in found] == [("deep.py", "DB000"), ("other.py", "DB100"),
                                                            ("other.py", "DB104")]
    assert "nested too deeply" in found[0].message


def test_transpile_front_end_reports_a_deep_formula_too(tmp_path):
    write(tmp_path / "deep.py", deep_formula(600))
    (module,) = load_library(str(tmp_path)).modules
    assert [(d.code, d.line) for d in module.diagnostics] == [("DB000", 9)]


def test_internal_error_whose_text_recurses_stays_one_line_for_its_file(tmp_path, monkeypatch):
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RecursionError("maximum recursion depth exceeded")

    def explode(tree, path):
        if path.endswith("bad.py"):
            raise Unprintable()
        return real(tree, path)

    real = ctx.check_module
    monkeypatch.setattr(ctx, "check_module", explode)
    function_file(tmp_path / "bad.py")
    function_file(tmp_path / "good.py")
    found = [(Path(d.path).name, d.code, d.message) for d in lint([str(tmp_path)]).diagnostics]
    assert [(name, code) for name, code, _ in found] == [("bad.py", "DB002"), ("good.py", "DB100"), ("good.py", "DB104")]
    assert "Unprintable: (no description)" in found[0][2]


def test_broken_pipe_exits_quietly(tmp_path):
    saves = "".join(f"        y{i} = x.exp()\n        ctx.save_for_backward(y{i})\n" for i in range(100))
    for index in range(30):                                  # far more output than a pipe buffers
        write(tmp_path / f"f{index:03}.py", "import torch\n\n\nclass K(torch.autograd.Function):\n"
              f"    @staticmethod\n    def forward(ctx, x):\n{saves}        return x\n")
    process = subprocess.Popen([sys.executable, "-m", "transpiler", "lint", "--jobs", "1", str(tmp_path)],
                               cwd=REPO, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.readline()
    process.stdout.close()                                    # what `| head -1` does
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141
    assert err == ""


def test_latin1_file_with_a_coding_declaration_is_read_by_lint_and_transpile(tmp_path):
    source = "# -*- coding: latin-1 -*-\n# café\n" + FORMULA
    (tmp_path / "formula.py").write_bytes(source.encode("latin-1"))
    assert [(d.code, d.line) for d in lint([str(tmp_path)]).diagnostics] == [("DB100", 12)]
    (module,) = load_library(str(tmp_path)).modules
    assert module.diagnostics == () and [f.op_name for f in module.formulas] == ["sin"]


def test_undecodable_bytes_are_db000_with_the_byte_offset_in_lint_and_transpile(tmp_path):
    (tmp_path / "formula.py").write_bytes(FORMULA.encode().replace(b"# noqa", b"") + b"x = '\xff'\n")
    offset = len(FORMULA.encode()) + 5
    (found,) = lint([str(tmp_path)]).diagnostics
    assert (found.code, found.line, found.col) == ("DB000", FORMULA.count("\n") + 1, 6)
    assert f"byte 0xff at byte offset {offset} is not valid utf-8" in found.message
    (module,) = load_library(str(tmp_path)).modules
    assert [(d.code, d.line, d.col) for d in module.diagnostics] == [("DB000", FORMULA.count("\n") + 1, 6)]


@pytest.mark.parametrize("data, where, message", [
    (b"x = '\xff'\n", (1, 6), "byte 0xff at byte offset 5 is not valid utf-8"),
    (b"# -*- coding: klingon -*-\nx = 1\n", (1, 1), "unknown encoding: klingon"),
    (b"\xef\xbb\xbf# -*- coding: latin-1 -*-\nx = 1\n", (1, 1), "encoding problem"),
])
def test_bad_encodings_are_db000_in_lint_and_transpile(tmp_path, data, where, message):
    (tmp_path / "f.py").write_bytes(data)
    for found in (lint([str(tmp_path)]).diagnostics, load_library(str(tmp_path)).diagnostics):
        assert [(d.code, d.line, d.col) for d in found] == [("DB000", *where)]
        assert message in found[0].message


NESTED = "".join("    " * depth + f"for i{depth} in x:\n" for depth in range(21)) + "    " * 21 + "pass\n"


@pytest.mark.parametrize("source, line, message", [
    ("x = 1\nreturn x\n", 2, "'return' outside function"),
    ("x = 1\nfrom __future__ import annotations\n", 2, "from __future__ imports must occur at the beginning"),
    ("*a = b\n", 1, "starred assignment target must be in a list or tuple"),
    (NESTED, 21, "too many statically nested blocks"),
    ("def f():\n    yield 1\n    return\nawait f()\n", 4, "'await' outside function"),
    ("async def g():\n    yield 1\n    return 2\n", 3, "'return' with value in async generator"),
    ("break\n", 1, "'break' outside loop"),
])
def test_compile_stage_syntax_errors_are_db000(tmp_path, source, line, message):
    write(tmp_path / "bad.py", source)
    function_file(tmp_path / "other.py")
    found = lint([str(tmp_path)], trust_bytecode=False).diagnostics
    assert [(Path(d.path).name, d.code, d.line) for d in found][0] == ("bad.py", "DB000", line)
    assert message in found[0].message
    assert [Path(d.path).name for d in found[1:]] == ["other.py", "other.py"]


DEAD_WORKER = """
import os, sys
from transpiler.lint import cli, workers

real = workers.check_file
def check_file(path, trust_bytecode=True):
    if path.endswith("f007.py"):
        os._exit(9)                   # a worker killed mid-run
    return real(path, trust_bytecode)
workers.check_file = check_file
workers.PARALLEL_MIN_FILES = 1
sys.exit(cli.main(["--jobs", "2", sys.argv[1]]))
"""


def test_a_dead_worker_fails_the_run_with_a_message(tmp_path):
    for index in range(20):
        function_file(tmp_path / f"f{index:03}.py")
    completed = subprocess.run([sys.executable, "-c", DEAD_WORKER, str(tmp_path)], cwd=REPO, env=child_env(),
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 2
    assert completed.stderr.startswith("transpile lint: error: a worker process died")
    assert "Traceback" not in completed.stderr
