"""Output formats of ``transpile lint``: text (flake8 style), JSON, SARIF 2.1.0, GitHub annotations."""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from transpiler.codes import BY_CODE
from transpiler.diagnostics import Diagnostic
from transpiler.needs import REPOSITORY

FORMATS = ("text", "json", "sarif", "github")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
CODE_PAGES = REPOSITORY / "docs" / "codes"     # one page per code (`transpile rule --pages`)


def render(format: str, findings: Sequence[Diagnostic], version: Callable[[], str]) -> str:
    """``findings`` in ``format``; "" when a line-oriented format has nothing to say. ``version``
    gives the tool's version, which SARIF records (called only for it: looking it up is slow)."""
    if format == "json":
        return json.dumps([d.as_json() for d in findings], indent=2) + "\n"
    if format == "sarif":
        return json.dumps(sarif(findings, version()), indent=2) + "\n"
    if format == "github":
        return "".join(github(d) + "\n" for d in findings)
    return "".join(d.format() + "\n" for d in findings)


def github(diagnostic: Diagnostic) -> str:
    """A GitHub Actions workflow command: an error annotation at the finding."""
    properties = ",".join(f"{key}={_escape(str(value), property=True)}" for key, value in (
        ("file", diagnostic.path), ("line", diagnostic.line), ("col", diagnostic.col), ("title", diagnostic.code)))
    return f"::error {properties}::{_escape(f'{diagnostic.code} {diagnostic.message}')}"


def _escape(text: str, property: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property else text


def sarif(findings: Sequence[Diagnostic], version: str) -> dict[str, object]:
    """A SARIF 2.1.0 log with one run of ``transpile lint`` ``version``: the rules that fired (from
    the table of codes) and the results."""
    fired = sorted({d.code for d in findings})
    rules = []
    for code in fired:
        entry = BY_CODE.get(code)
        rule: dict[str, object] = {"id": code}
        if entry is not None:
            rule.update(shortDescription={"text": entry.summary}, fullDescription={"text": entry.what},
                        help={"text": entry.explain()})
            page = CODE_PAGES / f"{code}.md"
            if page.is_file():            # a clone has the pages; an installed package has only `help`
                rule["helpUri"] = page.as_uri()
        rules.append(rule)
    results = [{
        "ruleId": d.code,
        "ruleIndex": fired.index(d.code),
        "level": "error",
        "message": {"text": d.message},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": _uri(d.path)},
            "region": {"startLine": d.line, "startColumn": d.col},
        }}],
        **({"fixes": [_fix(d)]} if d.edits else {}),
    } for d in findings]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "transpile lint", "version": version, "rules": rules}},
            "results": results,
        }],
    }


def _fix(diagnostic: Diagnostic) -> dict[str, object]:
    """A finding's fix as SARIF's ``artifactChanges[].replacements[]``, on whole lines of its file."""
    replacements = [{
        "deletedRegion": {"startLine": edit.first, "startColumn": 1, "endLine": edit.end, "endColumn": 1},
        "insertedContent": {"text": edit.text},
    } for edit in diagnostic.edits]
    return {"description": {"text": diagnostic.fix},
            "artifactChanges": [{"artifactLocation": {"uri": _uri(diagnostic.path)}, "replacements": replacements}]}


def _uri(path: str) -> str:
    """A relative path as a relative URI; an absolute one as a ``file://`` URI."""
    return Path(path).as_uri() if os.path.isabs(path) else Path(path).as_posix()
