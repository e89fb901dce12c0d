"""The command line introduces itself (``--help`` lists every command, ``transpile help``), lints
``.`` by default, prints messages once, and says in one line what a command needs that is missing
(torch, or the repository)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from lint.test_driver import function_file
from transpiler import cli, needs
from transpiler.yaml_import import main_dialect

INSTALL = "python3 -m pip install 'derivatives-transpiler[torch]'"


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exit_:          # argparse's --help
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def test_help_lists_every_command_with_one_line(capsys):
    code, out, _ = run(["--help"], capsys)
    assert code == 0
    listed = {line.split()[0]: line for line in out.split("commands (", 1)[1].splitlines()[1:]}
    assert set(cli.SUBCOMMANDS) | {"(none)", "help"} == set(listed)
    assert all(len(line.split()) > 3 for line in listed.values())      # a real description each
    assert run(["help"], capsys)[1] == out


@pytest.mark.parametrize("command", sorted(cli.SUBCOMMANDS))
def test_help_command_prints_its_usage_even_without_torch(command, capsys, monkeypatch):
    monkeypatch.setattr(needs, "has_torch", lambda: False)
    code, out, _ = run(["help", command], capsys)
    assert code == 0 and out.startswith("usage: ") and ("transpile " + command in out or "transpiler." in out)


def test_unknown_command_is_one_line_naming_the_commands(capsys):
    for argv in (["help", "lnt"], ["lnt"]):
        code, out, err = run(argv, capsys)
        assert code == 2 and out == "" and err.count("\n") == 1
        assert "'lnt'" in err and "lint, " in err


def test_lint_without_a_path_lints_the_working_directory_less_the_excludes(tmp_path, monkeypatch, capsys):
    function_file(tmp_path / "pkg" / "ops.py")
    function_file(tmp_path / "build" / "generated.py")       # excluded by default, as in ruff
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(["lint", "--no-cache"], capsys)
    assert code == 1
    assert {line.split(":", 1)[0] for line in out.splitlines()} == {str(Path("pkg") / "ops.py")}


def test_a_bad_select_is_named_once(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["lint", "--select", "DB9", "."], capsys)
    assert (code, err) == (2, "transpile lint: error: --select: 'DB9' matches no code; `transpile rule` lists them\n")


@pytest.fixture
def without_torch(monkeypatch):
    """As if torch (and the torchgen it ships) were not installed."""
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "torchgen", None)
    main_dialect.aten_names.cache_clear()
    yield
    main_dialect.aten_names.cache_clear()


@pytest.mark.parametrize("argv, command", [
    (["build", "--sources", "out_cpp"], "python -m transpiler.build"),
    (["import-yaml", "derivatives.yaml", "-o", "corpus"], "transpile import-yaml"),
    (["coverage"], "transpile coverage"),
    (["coverage", "--corpus"], "transpile coverage"),
])
def test_commands_needing_torch_say_what_to_install(without_torch, argv, command, capsys):
    code, out, err = run(argv, capsys)
    assert (code, out) == (2, "")
    assert err == f"{command} needs torch (torch==2.13.0, not installed); install it with: {INSTALL}\n"


def test_emit_yaml_needing_aten_facts_says_what_to_install(tmp_path, monkeypatch, capsys):
    """An imported line keeps its ``# yaml:`` text only while it is still that text's rewrite, which
    takes ATen's operator list: without torch, emit-yaml says so."""
    pytest.importorskip("torchgen")
    (tmp_path / "d.yaml").write_text("- name: sin(Tensor self) -> Tensor\n"
                                     "  self: grad * self.cos().conj()\n"
                                     "  result: auto_element_wise\n")
    assert run(["import-yaml", str(tmp_path / "d.yaml"), "-o", str(tmp_path / "corpus")], capsys)[0] == 0
    monkeypatch.setitem(sys.modules, "torchgen", None)
    main_dialect.aten_names.cache_clear()
    try:
        code, _, err = run(["emit-yaml", str(tmp_path / "corpus"), "-o", str(tmp_path / "out.yaml")], capsys)
    finally:
        main_dialect.aten_names.cache_clear()
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("transpile emit-yaml: reading ATen's operators") and err.endswith(f"{INSTALL}\n")
    assert not (tmp_path / "out.yaml").exists()


def test_coverage_outside_a_clone_says_it_needs_the_repository(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(needs, "REPOSITORY", tmp_path)
    code, out, err = run(["coverage"], capsys)
    assert (code, out) == (2, "")
    assert err.startswith("transpile coverage runs the repository's tests, which an installed package does not have")
