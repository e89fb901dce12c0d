"""The lint driver: paths, output formats, exit codes, ``# noqa``, DB000, internal errors, --fix."""
from __future__ import annotations

import json
import os
import py_compile
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from transpiler.lint import bytecode, cli, prefilter, runner, workers
from transpiler.lint.runner import lint, lint_paths
from transpiler.lint.workers import check_files

REPO = Path(__file__).resolve().parents[2]
CTX_FIXTURES = REPO / "tests" / "lint" / "fixtures" / "ctx"

FUNCTION = '''\
import torch


class Keep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y){noqa}
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        global SEEN{noqa_global}
        return grad * y
'''
CLEAN = "import torch\n\nvalue = torch.zeros(3)\n"
FORMULA = '''\
from formulas import at, derivative


@derivative("sin(Tensor self) -> Tensor")
def sin(self):
    result = at.sin(self)
    c = at.cos(self)

    def backward(grad):
        return grad * c

    return result, backward
'''


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def child_env() -> dict[str, str]:
    """A child process's environment: this one's as the test sees it (its own lint cache), the
    repository importable."""
    return {**os.environ, "PYTHONPATH": str(REPO)}


def function_file(path: Path, noqa: str = "", noqa_global: str = "") -> Path:
    return write(path, FUNCTION.format(noqa=noqa, noqa_global=noqa_global))


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    status = cli.main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_text_output_is_flake8_style_sorted_by_path_line_col(tmp_path, capsys):
    function_file(tmp_path / "b.py")
    function_file(tmp_path / "a" / "z.py")
    status, out, _ = run_cli([str(tmp_path)], capsys)
    assert status == 1
    lines = out.splitlines()
    locations = [line.split(": ", 1)[0] for line in lines]
    assert locations == [f"{tmp_path}/a/z.py:8:9", f"{tmp_path}/a/z.py:14:9",
                         f"{tmp_path}/b.py:8:9", f"{tmp_path}/b.py:14:9"]
    assert lines[0].split(": ", 1)[1].startswith("DB100 ctx.save_for_backward keeps `y`")
    assert lines[1].split(": ", 1)[1].startswith("DB104 `global SEEN`")


def test_json_output_has_the_contract_keys_and_fix_where_present(tmp_path, capsys):
    function_file(tmp_path / "ctx_style.py")
    write(tmp_path / "formula.py", FORMULA)
    status, out, _ = run_cli(["--format", "json", str(tmp_path)], capsys)
    assert status == 1
    records = json.loads(out)
    assert [(r["path"].rsplit("/", 1)[1], r["line"], r["col"], r["code"]) for r in records] == [
        ("ctx_style.py", 8, 9, "DB100"), ("ctx_style.py", 14, 9, "DB104"), ("formula.py", 10, 23, "DB100")]
    assert set(records[0]) == {"path", "line", "col", "code", "message", "fix"}
    assert records[0]["fix"].startswith("unsafe (--unsafe-fixes): where forward computes the intermediate")
    assert set(records[1]) == {"path", "line", "col", "code", "message"}
    assert records[2]["fix"] == "recompute at the top of backward: c = at.cos(self)"


def test_exit_status_zero_when_clean(tmp_path, capsys):
    write(tmp_path / "clean.py", CLEAN)
    assert run_cli([str(tmp_path / "clean.py")], capsys) == (0, "", "")


def test_missing_path_is_exit_2_with_a_message_and_the_rest_is_still_checked(tmp_path, capsys):
    function_file(tmp_path / "real.py")
    status, out, err = run_cli([str(tmp_path / "nope.py"), str(tmp_path / "real.py")], capsys)
    assert status == 2
    assert f"{tmp_path}/nope.py: no such file or directory" in err
    assert "DB100" in out and "Traceback" not in err


def test_usage_error_is_exit_2(capsys):
    status, _, err = run_cli(["--format", "xml"], capsys)
    assert status == 2 and "invalid choice" in err


def test_noqa_with_the_code_suppresses_only_that_code(tmp_path):
    path = function_file(tmp_path / "f.py", noqa="  # noqa: DB104", noqa_global="  # noqa: DB100,DB104")
    assert [(d.code, d.line) for d in lint([str(path)]).diagnostics] == [("DB100", 8)]


def test_bare_noqa_suppresses_everything_on_its_line(tmp_path):
    path = function_file(tmp_path / "f.py", noqa="  # noqa", noqa_global="  # NOQA:db104")
    assert lint([str(path)]).diagnostics == ()


def test_syntax_error_is_db000_at_its_location_and_other_files_go_on(tmp_path):
    write(tmp_path / "broken.py", "x = 1\ndef f(:\n    pass\n")
    function_file(tmp_path / "fine.py")
    found = [(Path(d.path).name, d.line, d.col, d.code) for d in lint([str(tmp_path)]).diagnostics]
    assert found == [("broken.py", 2, 7, "DB000"), ("fine.py", 8, 9, "DB100"), ("fine.py", 14, 9, "DB104")]


def test_syntax_error_column_counts_characters_not_bytes(tmp_path):
    write(tmp_path / "wide.py", 'x = "ééé" + (\n')
    (diagnostic,) = lint([str(tmp_path / "wide.py")]).diagnostics
    assert (diagnostic.line, diagnostic.col) == (1, 13)


def test_finding_column_counts_characters_not_bytes(tmp_path):
    source = FUNCTION.format(noqa="", noqa_global="").replace(
        "        ctx.save_for_backward(y)", "        é = 1; ctx.save_for_backward(y)")
    write(tmp_path / "wide.py", source)
    assert [(d.line, d.col) for d in lint([str(tmp_path / "wide.py")]).diagnostics][0] == (8, 16)


def test_internal_error_on_one_file_is_a_diagnostic_and_the_others_go_on(tmp_path, monkeypatch):
    function_file(tmp_path / "a.py")
    function_file(tmp_path / "b.py")
    real = runner.ctx.check_module

    def explode_on_a(tree, path):
        if path.endswith("a.py"):
            raise RuntimeError("boom")
        return real(tree, path)

    monkeypatch.setattr(runner.ctx, "check_module", explode_on_a)
    found = [(Path(d.path).name, d.code) for d in lint([str(tmp_path)], jobs=1).diagnostics]
    assert found == [("a.py", "DB002"), ("b.py", "DB100"), ("b.py", "DB104")]
    assert "internal error" in lint([str(tmp_path / "a.py")], jobs=1).diagnostics[0].message


def test_directories_are_searched_recursively_for_python_files_only(tmp_path):
    function_file(tmp_path / "pkg" / "deep" / "mod.py")
    function_file(tmp_path / "pkg" / "notes.txt")
    result = lint([str(tmp_path)])
    assert result.files == 1
    assert {Path(d.path).name for d in result.diagnostics} == {"mod.py"}


def test_default_path_is_formulas_directory(tmp_path, monkeypatch, capsys):
    function_file(tmp_path / "formulas" / "mine.py")
    monkeypatch.chdir(tmp_path)
    status, out, _ = run_cli([], capsys)
    assert status == 1 and out.startswith("formulas/mine.py:8:9: DB100")


def test_formula_files_get_closure_rules_and_ctx_rules(tmp_path):
    both = FORMULA + "\n\n" + FUNCTION.format(noqa="", noqa_global="")   # the Function starts at line 15
    write(tmp_path / "both.py", both)
    result = lint([str(tmp_path / "both.py")])
    assert result.formula_files == 1 and result.functions == 1
    assert [(d.line, d.code) for d in result.diagnostics] == [(10, "DB100"), (22, "DB100"), (28, "DB104")]


def test_fix_rewrites_formula_files_and_reports_what_is_left(tmp_path, capsys):
    path = write(tmp_path / "formula.py", FORMULA)
    function_file(tmp_path / "ctx_style.py")
    status, out, err = run_cli(["--fix", str(tmp_path)], capsys)
    assert status == 1
    assert "c = at.cos(self)\n        return grad * c" in path.read_text()
    assert f"fixed {path}" in err
    assert "formula.py" not in out and "ctx_style.py:8:9: DB100" in out
    assert run_cli([str(path)], capsys)[0] == 0


def test_lint_paths_is_the_api_for_transpile(tmp_path):
    function_file(tmp_path / "f.py")
    found = lint_paths([str(tmp_path), str(tmp_path / "missing")])
    assert [(d.code, d.line) for d in found] == [("DB100", 8), ("DB104", 14), ("DB001", 1)]


def test_parallel_run_gives_the_same_result_as_a_sequential_one(monkeypatch):
    files = sorted(str(p) for p in CTX_FIXTURES.glob("*.py"))
    monkeypatch.setattr(workers, "PARALLEL_MIN_FILES", 1)
    assert check_files(files, jobs=2) == check_files(files, jobs=1)


def test_statistics_count_files_functions_and_codes(tmp_path, capsys):
    function_file(tmp_path / "f.py")
    write(tmp_path / "broken.py", "def (\n")
    status, _, err = run_cli(["--statistics", str(tmp_path)], capsys)
    assert status == 1
    assert err.splitlines() == ["files checked: 2", "torch.autograd.Function subclasses analysed: 1",
                                "formula files: 0", "DB000: 1", "DB100: 1", "DB104: 1"]


def test_transpile_lint_command_end_to_end(tmp_path):
    function_file(tmp_path / "f.py")
    completed = subprocess.run([sys.executable, "-m", "transpiler", "lint", str(tmp_path)],
                               cwd=REPO, capture_output=True, text=True, env=child_env())
    assert completed.returncode == 1
    assert completed.stdout.startswith(f"{tmp_path}/f.py:8:9: DB100 ")
    assert completed.stderr == ""


@pytest.mark.parametrize("garbage", [b"\x00\x01\x02", b"\xff\xfe not utf8 \x80", b"def f(:\n" * 3, b""])
def test_no_input_makes_a_traceback(tmp_path, garbage):
    write(tmp_path / "odd.py", "")
    (tmp_path / "odd.py").write_bytes(garbage)
    result = lint([str(tmp_path / "odd.py")])
    assert all(d.code in ("DB000",) for d in result.diagnostics)
    assert (len(result.diagnostics) == 0) == (garbage == b"")


def test_symbol_table_errors_are_db000_in_every_kind_of_file(tmp_path):
    write(tmp_path / "plain.py", "nonlocal x\n")
    function_file(tmp_path / "function.py")
    source = (tmp_path / "function.py").read_text() + "\nnonlocal z\n"
    write(tmp_path / "function.py", source)
    found = [(Path(d.path).name, d.line, d.code) for d in lint([str(tmp_path)]).diagnostics]
    assert found == [("function.py", 17, "DB000"), ("plain.py", 1, "DB000")]


def test_compiler_warnings_about_the_linted_code_are_not_passed_on(tmp_path, capsys):
    write(tmp_path / "warns.py", "y = '\\d'\n")                  # invalid escape sequence
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_cli([str(tmp_path)], capsys) == (0, "", "")
    assert caught == []


LATER = int(time.time()) + 3600    # a second after the test files' last change of any kind (their ctime)


def compile_with_timestamps(path: Path, source_second: int, pyc_second: float) -> Path:
    """``path``'s pyc as CPython writes it, with chosen source and pyc modification times."""
    os.utime(path, (source_second, source_second))
    pyc = Path(py_compile.compile(str(path), doraise=True))
    os.utime(pyc, (pyc_second, pyc_second))
    return pyc


def test_up_to_date_bytecode_proves_the_syntax(tmp_path):
    path = write(tmp_path / "ok.py", "x = 1\n")
    compile_with_timestamps(path, LATER, LATER + 5)
    assert bytecode.compiled_before(str(path), path.read_bytes())


def test_edited_source_is_checked_again(tmp_path):
    path = write(tmp_path / "edited.py", "x = 1\n")
    compile_with_timestamps(path, LATER, LATER + 5)
    path.write_text("x = (\n")                              # other size, new mtime
    assert not bytecode.compiled_before(str(path), path.read_bytes())
    assert [d.code for d in lint([str(path)]).diagnostics] == ["DB000"]


def test_same_size_edit_in_the_second_the_pyc_was_written_is_checked_again(tmp_path):
    path = write(tmp_path / "racy.py", "x = 1\n")
    compile_with_timestamps(path, LATER, LATER + 0.4)
    path.write_text("x = (\n")
    assert len("x = (\n") == len("x = 1\n")
    os.utime(path, (LATER + 0.8, LATER + 0.8))      # same second: the header still matches
    assert [d.code for d in lint([str(path)]).diagnostics] == ["DB000"]


def test_an_edit_whose_modification_time_was_set_back_is_checked_again(tmp_path):
    """``cp -p``, ``tar`` or ``os.utime`` restore the recorded mtime of an edited file of the same
    size; its ctime, which cannot be set back, says it changed after the pyc was written."""
    path = write(tmp_path / "restored.py", "x = 1\n")
    long_ago = int(time.time()) - 100
    os.utime(path, (long_ago, long_ago))
    py_compile.compile(str(path), doraise=True)            # written now, seconds after the recorded mtime
    time.sleep(0.05)                                        # the edit is in a later clock tick
    path.write_text("x = (\n")
    os.utime(path, (long_ago, long_ago))
    assert not bytecode.compiled_before(str(path), path.read_bytes())
    assert [d.code for d in lint([str(path)]).diagnostics] == ["DB000"]                  # --no-cache
    assert [d.code for d in lint([str(path)], cache_dir=tmp_path / "cache").diagnostics] == ["DB000"]


def test_hash_based_bytecode_is_checked_against_the_source_hash(tmp_path):
    path = write(tmp_path / "hashed.py", "x = 1\n")
    py_compile.compile(str(path), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    assert bytecode.compiled_before(str(path), path.read_bytes())
    assert not bytecode.compiled_before(str(path), b"x = 2\n")


def test_bytecode_from_another_python_is_not_trusted(tmp_path):
    path = write(tmp_path / "other.py", "x = 1\n")
    pyc = compile_with_timestamps(path, LATER, LATER + 5)
    pyc.write_bytes(b"\x00\x00\r\n" + pyc.read_bytes()[4:])
    assert not bytecode.compiled_before(str(path), path.read_bytes())


def test_no_bytecode_cache_gives_the_same_result():
    files = [str(CTX_FIXTURES), str(REPO / "transpiler")]
    assert lint(files, trust_bytecode=False) == lint(files)


def test_noqa_applies_to_closure_rule_findings_too(tmp_path):
    path = write(tmp_path / "formula.py", FORMULA.replace("return grad * c\n", "return grad * c  # noqa: DB100\n"))
    assert lint([str(path)]).diagnostics == ()
    write(path, FORMULA.replace("return grad * c\n", "return grad * c  # noqa: DB105\n"))
    assert [d.code for d in lint([str(path)]).diagnostics] == ["DB100"]


PREFILTER_CASES = [   # (source, may it define a torch.autograd.Function subclass)
    (b"import sympy\nimport torch\nclass align(sympy.Function):\n    pass\n# autograd\n", False),
    (b"import sympy as sp\nclass A(sp.Function):\n    pass\n# autograd\n", False),
    (b"import sympy\nimport torch\nclass A(sympy.Function, torch.autograd.Function):\n    pass\n", True),
    (b"import torch.autograd as ag\nclass A(ag.Function):\n    pass\n", True),
    (b"import autograd\nfrom torch import autograd\nclass A(autograd.Function):\n    pass\n", True),
    (b"from torch.autograd import Function\nclass A(Function):\n    pass\n", True),
    (b"from torch.autograd.function import InplaceFunction\nclass A(InplaceFunction):\n    pass\n", True),
    (b"import torch\nclass A(torch.autograd.function.Function):\n    pass\n", True),
    (b"import torch\nclass A(FunctionalTensor):\n    pass\n# autograd.Function\n", False),
]


@pytest.mark.parametrize(("source", "expected"), PREFILTER_CASES)
def test_prefilter_skips_function_classes_of_other_packages(source, expected):
    # sympy.Function (torch/_inductor/utils.py) cost a full parse and analysis for nothing
    assert prefilter.may_define_function("module.py", source) is expected
