"""``transpile lint`` in a lint pipeline: configuration, excludes, stdin, formats, exit codes,
noqa forms, ``transpile rule``, pre-commit, the flake8 plugin, and what ``--fix`` keeps."""
from __future__ import annotations

import ast
import io
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lint.test_driver import FORMULA, FUNCTION, child_env, function_file, run_cli, write
from transpiler import codes, rule
from transpiler.lint.runner import lint
from transpiler.lint.settings import ConfigError, load_settings

REPO = Path(__file__).resolve().parents[2]


def project(tmp_path: Path, table: str) -> Path:
    write(tmp_path / "pyproject.toml", f"[project]\nname = 'x'\n\n[tool.transpile.lint]\n{table}\n")
    return tmp_path


def located(out: str) -> list[tuple[str, str]]:
    """(path relative to the project, code) of each text finding."""
    return [(line.split(":", 1)[0], line.split(": ", 1)[1].split(" ", 1)[0]) for line in out.splitlines()]


# --- configuration ---------------------------------------------------------------------------------

def test_select_ignore_and_per_file_ignores_from_pyproject(tmp_path, monkeypatch, capsys):
    project(tmp_path, 'select = ["DB1"]\nignore = ["DB104"]\nper-file-ignores = {"tests/*" = ["DB100"]}')
    function_file(tmp_path / "src" / "a.py")
    function_file(tmp_path / "tests" / "b.py")
    monkeypatch.chdir(tmp_path)
    status, out, _ = run_cli(["."], capsys)
    assert status == 1
    assert located(out) == [("src/a.py", "DB100")]


def test_command_line_select_and_ignore_override_the_configuration(tmp_path, monkeypatch, capsys):
    project(tmp_path, 'ignore = ["DB100"]')
    function_file(tmp_path / "a.py")
    monkeypatch.chdir(tmp_path)
    assert located(run_cli(["a.py"], capsys)[1]) == [("a.py", "DB104")]
    assert located(run_cli(["--ignore", "DB104", "a.py"], capsys)[1]) == [("a.py", "DB100")]
    assert located(run_cli(["--select", "DB100", "--ignore", "", "a.py"], capsys)[1]) == [("a.py", "DB100")]
    assert run_cli(["--isolated", "--extend-ignore", "DB1", "a.py"], capsys)[0] == 0


def test_default_excludes_and_gitignore_prune_the_walk(tmp_path, monkeypatch, capsys):
    for place in (".venv/lib/x.py", "build/y.py", "node_modules/z.py", "__pycache__/w.py",
                  "generated/g.py", "src/ignored_pb2.py", "src/kept.py"):
        function_file(tmp_path / place)
    write(tmp_path / ".gitignore", "generated/\n*_pb2.py\n")
    monkeypatch.chdir(tmp_path)
    status, out, _ = run_cli(["--select", "DB100", "."], capsys)
    assert located(out) == [("src/kept.py", "DB100")] and status == 1
    out = run_cli(["--select", "DB100", "--no-respect-gitignore", "."], capsys)[1]
    assert [p for p, _ in located(out)] == ["generated/g.py", "src/ignored_pb2.py", "src/kept.py"]


def test_exclude_and_extend_exclude(tmp_path, monkeypatch, capsys):
    project(tmp_path, 'extend-exclude = ["third_party", "src/gen/*"]')
    for place in ("third_party/a.py", "src/gen/b.py", "src/c.py", "build/d.py"):
        function_file(tmp_path / place)
    monkeypatch.chdir(tmp_path)
    assert [p for p, _ in located(run_cli(["--select", "DB100", "."], capsys)[1])] == ["src/c.py"]
    project(tmp_path, 'exclude = ["src"]')           # replaces the defaults: build/ is walked again
    assert [p for p, _ in located(run_cli(["--select", "DB100", "."], capsys)[1])] == [
        "build/d.py", "third_party/a.py"]


def test_named_files_are_checked_unless_force_exclude(tmp_path, monkeypatch, capsys):
    function_file(tmp_path / "build" / "a.py")
    function_file(tmp_path / "src" / "gen_b.py")
    write(tmp_path / ".gitignore", "gen_*.py\n")
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    assert run_cli(["build/a.py"], capsys)[0] == 1
    assert run_cli(["src/gen_b.py"], capsys)[0] == 1
    assert run_cli(["--force-exclude", "build/a.py", "src/gen_b.py"], capsys) == (0, "", "")


@pytest.mark.parametrize("table, message", [
    ('select = ["XY1"]', "matches no code"),
    ('colour = "red"', "unknown key"),
    ("select = 3", "list of strings"),
    ("select = [", "cannot read the configuration"),
])
def test_bad_configuration_is_exit_2_with_the_reason(tmp_path, monkeypatch, capsys, table, message):
    project(tmp_path, table)
    function_file(tmp_path / "a.py")
    monkeypatch.chdir(tmp_path)
    status, out, err = run_cli(["a.py"], capsys)
    assert status == 2 and out == "" and message in err and "Traceback" not in err


def test_configuration_is_found_above_the_working_directory(tmp_path, monkeypatch):
    project(tmp_path, 'ignore = ["DB104"]')
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    settings = load_settings()
    assert settings.ignore == ("DB104",) and settings.root == tmp_path.resolve()
    with pytest.raises(ConfigError):
        load_settings(tmp_path / "missing.toml")


# --- stdin, formats, exit codes ---------------------------------------------------------------------

def test_stdin_with_a_filename(tmp_path, monkeypatch, capsys):
    project(tmp_path, 'per-file-ignores = {"tests/*" = ["DB104"]}')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(FUNCTION.format(noqa="", noqa_global="").encode())))
    status, out, _ = run_cli(["-", "--stdin-filename", "tests/t.py"], capsys)
    assert status == 1 and located(out) == [("tests/t.py", "DB100")]


def test_stdin_formula_file_gets_the_closure_rules_and_diff(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(FORMULA.encode())))
    status, out, _ = run_cli(["-", "--diff"], capsys)
    assert status == 1
    assert "-    c = at.cos(self)\n" in out and "+        c = at.cos(self)\n" in out


def lint_stdin(argv: list[str], data: bytes, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "transpiler", "lint", "--isolated", *argv], input=data,
                          capture_output=True, env=child_env(), cwd=cwd)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_fix_on_stdin_prints_the_fixed_source_as_fix_writes_it(tmp_path, newline):
    data = FORMULA.replace("\n", newline).encode()
    done = lint_stdin(["--fix", "-", "--stdin-filename", "f.py"], data, tmp_path)
    on_disk = tmp_path / "f.py"
    on_disk.write_bytes(data)
    assert lint_stdin(["--fix", "f.py"], b"", tmp_path).returncode == 0
    assert done.returncode == 0 and done.stderr == b""
    assert done.stdout == on_disk.read_bytes() != data      # the same fix, line endings kept
    assert b"        c = at.cos(self)" + newline.encode() in done.stdout


def test_fix_on_stdin_reports_what_is_left_to_stderr_and_exits_1(tmp_path):
    data = FUNCTION.format(noqa="", noqa_global="").encode()     # ctx-style: no fix-it
    done = lint_stdin(["--fix", "-", "--stdin-filename", "t.py"], data, tmp_path)
    assert done.returncode == 1 and done.stdout == data
    *findings, nothing_fixed = done.stderr.decode().splitlines()
    assert [line.split()[1] for line in findings] == ["DB100", "DB104"]
    assert nothing_fixed == ("transpile lint: --fix fixed nothing: 2 findings, of which 1 has an unsafe fix "
                             "(add --unsafe-fixes to apply it)")
    assert lint_stdin(["--fix", "--exit-zero", "-"], data, tmp_path).returncode == 0


@pytest.mark.parametrize("argv, message", [
    (["-", "x.py"], "cannot be combined"), (["--stdin-filename", "a.py", "x.py"], "needs -")])
def test_stdin_usage_errors(argv, message, capsys):
    status, _, err = run_cli(argv, capsys)
    assert status == 2 and message in err


def test_sarif_output(tmp_path, capsys):
    function_file(tmp_path / "f.py")
    status, out, _ = run_cli(["--format", "sarif", str(tmp_path)], capsys)
    log = json.loads(out)
    assert status == 1 and log["version"] == "2.1.0"
    run = log["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["DB100", "DB104"]
    assert run["tool"]["driver"]["rules"][0]["shortDescription"]["text"] == codes.BY_CODE["DB100"].summary
    first = run["results"][0]
    assert first["ruleId"] == "DB100" and first["ruleIndex"] == 0
    region = first["locations"][0]["physicalLocation"]
    assert region["region"] == {"startLine": 8, "startColumn": 9}
    assert region["artifactLocation"]["uri"] == (tmp_path / "f.py").as_uri()


def applied(text: str, replacements: list[dict]) -> str:
    """``text`` with SARIF whole-line replacements applied (last first, as they do not overlap)."""
    lines = text.splitlines(keepends=True)
    for replacement in reversed(replacements):
        region = replacement["deletedRegion"]
        assert region["startColumn"] == region["endColumn"] == 1
        lines[region["startLine"] - 1:region["endLine"] - 1] = [replacement["insertedContent"]["text"]]
    return "".join(lines)


@pytest.mark.parametrize("name, text, flags", [("pkg/sin.py", FORMULA, []),
                                               ("f.py", FUNCTION.format(noqa="", noqa_global=""), ["--unsafe-fixes"])],
                         ids=["formula", "function"])
def test_sarif_fixes_are_the_edits_of_lint_fix(tmp_path, capsys, name, text, flags):
    """A finding with a fix carries it as SARIF ``fixes`` (its edits on the file's lines), in a
    formula file (DB100's recompute) as in a Function (DB100's recompute, or @once_differentiable);
    applied, they give what ``--fix`` writes."""
    path = write(tmp_path / name, text)
    status, out, _ = run_cli(["--no-cache", "--select", "DB100", "--format", "sarif", str(path)], capsys)
    [result] = json.loads(out)["runs"][0]["results"]
    [fix] = result["fixes"]
    [change] = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == path.as_uri()
    assert fix["description"]["text"] == lint([str(path)], edits=True).diagnostics[0].fix
    expected = applied(text, change["replacements"])
    run_cli(["--no-cache", "--select", "DB100", "--fix", *flags, str(path)], capsys)
    assert path.read_text() == expected != text


def test_sarif_results_without_a_fix_have_no_fixes(tmp_path, capsys):
    path = write(tmp_path / "pkg" / "sin.py", FORMULA.replace("c = at.cos(self)", "c = at.cos(self)\n    if self.dim() > 1:\n        c = at.sin(self)"))
    status, out, _ = run_cli(["--no-cache", "--format", "sarif", str(path)], capsys)
    results = json.loads(out)["runs"][0]["results"]
    assert "DB100" in [r["ruleId"] for r in results] and all("fixes" not in r for r in results)


def test_github_annotations_escape_what_workflow_commands_need(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    function_file(tmp_path / "a,b.py")
    out = run_cli(["--format", "github", "a,b.py"], capsys)[1]
    first = out.splitlines()[0]
    assert first.startswith("::error file=a%2Cb.py,line=8,col=9,title=DB100::DB100 ctx.save_for_backward keeps")
    assert len(out.splitlines()) == 2


def test_exit_zero_and_version(tmp_path, capsys):
    function_file(tmp_path / "f.py")
    status, out, _ = run_cli(["--exit-zero", str(tmp_path)], capsys)
    assert status == 0 and "DB100" in out
    status, out, _ = run_cli(["--version"], capsys)
    assert status == 0 and re.fullmatch(r"transpile lint \S+\n", out)


# --- noqa ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("comment, left", [
    ("# transpile: noqa", []),
    ("# transpile: noqa: DB104", [("DB100", 8)]),
    ("# transpile: noqa: DB1", []),
    ("# noqa", [("DB100", 8), ("DB104", 14)]),          # an ordinary noqa on its own line is not file-level
])
def test_file_level_noqa(tmp_path, comment, left):
    path = write(tmp_path / "f.py", f"{comment}\n" + FUNCTION.format(noqa="", noqa_global=""))
    assert [(d.code, d.line - 1) for d in lint([str(path)]).diagnostics] == left


def test_file_level_noqa_skips_a_file_that_does_not_parse(tmp_path):
    path = write(tmp_path / "f.py", "# transpile: noqa\ndef f(:\n")
    assert lint([str(path)]).diagnostics == ()


def test_noqa_codes_are_prefixes(tmp_path):
    path = function_file(tmp_path / "f.py", noqa="  # noqa: DB1", noqa_global="  # noqa: DB10")
    assert lint([str(path)]).diagnostics == ()
    path = function_file(tmp_path / "g.py", noqa="  # noqa: DB2", noqa_global="  # noqa: DB105 DB104")
    assert [d.code for d in lint([str(path)]).diagnostics] == ["DB100"]


# --- transpile rule and the table of codes -----------------------------------------------------------

def test_rule_explains_a_code_with_ruff_sections(capsys):
    assert rule.main(["db100"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("DB100: backward uses a tensor computed in the forward")
    for section in ("What it does", "Why it matters", "Example", "Use instead"):
        assert f"\n{section}\n" in out
    assert rule.main(["DB999"]) == 2 and "unknown code" in capsys.readouterr().err


def test_every_code_has_its_documentation():
    assert [c.code for c in codes.CODES] == sorted({c.code for c in codes.CODES})
    for entry in codes.CODES:
        assert entry.summary and entry.what and entry.why and (entry.fix or entry.example), entry.code


def test_readme_diagnostics_table_is_the_table_of_codes():
    readme = (REPO / "README.md").read_text()
    assert codes.markdown_table() in readme


def test_codes_are_spelled_only_in_the_table():
    """The passes (rule modules, ctx rules, the front-end, the emitter) report ``codes.<NAME>.code``:
    a code's literal is in codes.py once, so a grep for it finds its one declaration."""
    spelled = []
    for path in sorted((REPO / "transpiler").rglob("*.py")):
        if path.name == "codes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and re.fullmatch(r"DB[0-9]{3}", node.value):
                spelled.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value}")
    assert spelled == []
    table = (REPO / "transpiler" / "codes.py").read_text()
    for entry in codes.CODES:
        assert table.count(f'"{entry.code}"') == 1, entry.code
        used = [p for p in (REPO / "transpiler").rglob("*.py") if p.name != "codes.py"
                and f"codes.{_name_of(entry)}.code" in p.read_text()]
        assert used, f"{entry.code} is declared but no pass reports it"


def _name_of(entry: codes.Code) -> str:
    return next(name for name, value in vars(codes).items() if value is entry)


def test_commands_doc_table_is_the_table_of_codes():
    doc = (REPO / "docs" / "commands.md").read_text()
    assert codes.markdown_table(stages=True) in doc


# --- pre-commit and flake8 ----------------------------------------------------------------------------

def test_pre_commit_hook_runs_the_linter():
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    (hook,) = hooks
    assert hook["id"] == "transpile-lint" and hook["language"] == "python"
    assert hook["entry"].split()[:2] == ["transpile", "lint"] and "--force-exclude" in hook["entry"]
    assert hook["types"] == ["python"]


def entry_point_site(tmp_path: Path) -> Path:
    """A dist-info that declares the plugin as pyproject.toml does (the package itself is on PYTHONPATH)."""
    import tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]["flake8.extension"]
    site = tmp_path / "site"
    info = site / "transpile_flake8_plugin-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: transpile-flake8-plugin\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(
        "[flake8.extension]\n" + "".join(f"{name} = {target}\n" for name, target in declared.items()))
    return site


def test_flake8_runs_the_plugin_on_a_fixture(tmp_path):
    pytest.importorskip("flake8")
    function_file(tmp_path / "f.py", noqa_global="  # noqa: DB104")
    write(tmp_path / "formula.py", FORMULA)
    import importlib.metadata

    installed = {entry.name for entry in importlib.metadata.entry_points(group="flake8.extension")}
    # an installed copy of the project (pip install -e .) declares the plugin already: a second
    # declaration would make flake8 run it twice
    sites = [REPO] if "DB" in installed else [entry_point_site(tmp_path), REPO]
    env = {**child_env(), "PYTHONPATH": os.pathsep.join(map(str, sites))}
    completed = subprocess.run([sys.executable, "-m", "flake8", "--select", "DB", "f.py", "formula.py"],
                               cwd=tmp_path, capture_output=True, text=True, env=env)
    assert completed.returncode == 1, completed.stderr
    assert completed.stdout.splitlines() == [
        "f.py:8:9: DB100 " + completed.stdout.split("f.py:8:9: DB100 ", 1)[1].splitlines()[0],
        "formula.py:10:23: DB100 " + completed.stdout.split("formula.py:10:23: DB100 ", 1)[1].splitlines()[0],
    ]


# --- what --fix keeps ----------------------------------------------------------------------------------

def fixed(tmp_path: Path, capsys, path: Path) -> None:
    status, _, err = run_cli(["--fix", str(path)], capsys)
    assert status == 0, err


def test_fix_keeps_crlf_line_endings(tmp_path, capsys):
    path = tmp_path / "formula.py"
    path.write_bytes(FORMULA.replace("\n", "\r\n").encode())
    fixed(tmp_path, capsys, path)
    data = path.read_bytes()
    assert b"        c = at.cos(self)\r\n        return grad * c\r\n" in data
    assert b"\n" not in data.replace(b"\r\n", b"")


def test_fix_keeps_the_file_mode_and_writes_through_symlinks(tmp_path, capsys):
    target = write(tmp_path / "real" / "formula.py", FORMULA)
    target.chmod(0o750)
    link = tmp_path / "link.py"
    link.symlink_to(target)
    fixed(tmp_path, capsys, link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert "        c = at.cos(self)\n        return grad * c" in target.read_text()
    assert stat.S_IMODE(target.stat().st_mode) == 0o750


def test_fix_keeps_latin1_files_in_latin1(tmp_path, capsys):
    path = tmp_path / "formula.py"
    path.write_bytes(("# -*- coding: latin-1 -*-\n# café\n" + FORMULA).encode("latin-1"))
    fixed(tmp_path, capsys, path)
    assert path.read_bytes().startswith("# -*- coding: latin-1 -*-\n# café\n".encode("latin-1"))


def test_fix_leaves_findings_silenced_by_noqa(tmp_path, capsys):
    source = FORMULA.replace("return grad * c", "return grad * c  # noqa: DB100")
    path = write(tmp_path / "formula.py", source)
    assert run_cli(["--fix", str(path)], capsys)[0] == 0
    assert path.read_text() == source
    path = write(tmp_path / "other.py", FORMULA)
    assert run_cli(["--fix", "--ignore", "DB100", str(path)], capsys)[0] == 0
    assert path.read_text() == FORMULA


def test_diff_shows_the_fix_and_writes_nothing(tmp_path, capsys):
    path = write(tmp_path / "formula.py", FORMULA)
    status, out, _ = run_cli(["--diff", str(path)], capsys)
    assert status == 1 and path.read_text() == FORMULA
    assert out.startswith(f"--- a/{path}\n+++ b/{path}\n@@")
    assert run_cli(["--diff", "--exit-zero", str(path)], capsys)[0] == 0


def test_transpile_lints_every_file_it_reads(tmp_path):
    """``lint_paths`` (transpile's lint) ignores excludes and .gitignore: it checks what transpile emits."""
    from transpiler.lint.runner import lint_paths

    function_file(tmp_path / "build" / "a.py")
    write(tmp_path / ".gitignore", "build/\n")
    assert [d.code for d in lint_paths([str(tmp_path)])] == ["DB100", "DB104"]
    assert lint([str(tmp_path)]).diagnostics == ()
