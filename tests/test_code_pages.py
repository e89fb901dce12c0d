"""docs/codes/ holds one page per diagnostic code, generated from transpiler/codes.py, and SARIF
rules point at them."""
from __future__ import annotations

import json
from pathlib import Path

from lint.test_driver import function_file
from transpiler import codes
from transpiler.lint.cli import main as lint_main

PAGES = Path(__file__).resolve().parents[1] / "docs" / "codes"


def test_pages_are_what_the_table_generates():
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in PAGES.iterdir()}
    assert on_disk == codes.pages(), "regenerate with `transpile rule --pages docs/codes`"
    assert set(on_disk) == {"README.md", *(f"{entry.code}.md" for entry in codes.CODES)}


def test_a_page_has_the_rule_sections():
    page = codes.KEPT_INTERMEDIATE.page()
    for section in ("# DB100", "## What it does", "## Why it matters", "## Example", "## Use instead"):
        assert f"\n{section}\n" in f"\n{page}"
    assert "Reported by `transpile`." in codes.UNKNOWN_OPERATOR.page()


def test_sarif_rules_link_their_page(tmp_path, monkeypatch, capsys):
    function_file(tmp_path / "ops.py")
    monkeypatch.chdir(tmp_path)
    assert lint_main(["--format", "sarif", "--no-cache", "ops.py"]) == 1
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert rules and all(rule["helpUri"] == (PAGES / f"{rule['id']}.md").as_uri() for rule in rules)
