"""examples/classifier.py runs from any directory, draws its picture only where asked (and skips
it with a note without Graphviz), and the committed picture is the graph it draws today."""
from __future__ import annotations

import html
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import reference_engine as engine

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "classifier.py"
PICTURE = REPO / "examples" / "classifier_graph.svg"


def dot_graph(text: str) -> tuple[dict[str, tuple[str, ...]], set[tuple[str, str]]]:
    """Node id -> label lines, and the edges, of engine.to_dot's DOT."""
    nodes = {ident: tuple(label.encode().decode("unicode_escape").split("\n"))
             for ident, label in re.findall(r'^  (n\d+) \[label="((?:[^"\\]|\\.)*)"', text, re.M)}
    edges = set(re.findall(r"^  (n\d+) -> (n\d+)", text, re.M))
    return nodes, edges


def svg_graph(text: str) -> tuple[dict[str, tuple[str, ...]], set[tuple[str, str]]]:
    """The same, read back from Graphviz's SVG (node titles, their text lines, edge titles)."""
    nodes = {ident: tuple(html.unescape(line) for line in re.findall(r"<text[^>]*>([^<]*)</text>", body))
             for ident, body in re.findall(r'<g id="node\d+" class="node">\s*<title>(n\d+)</title>(.*?)</g>',
                                           text, re.S)}
    edges = {tuple(html.unescape(title).split("->"))
             for title in re.findall(r'<g id="edge\d+" class="edge">\s*<title>([^<]*)</title>', text)}
    return nodes, edges


def run_example(*args: str, cwd: Path, path: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": path or os.environ["PATH"]}
    return subprocess.run([sys.executable, str(EXAMPLE), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_committed_picture_is_the_graph_the_example_draws():
    example = runpy.run_path(str(EXAMPLE))
    example["train"]()
    loss = example["cross_entropy"](example["model"](example["points"]), example["labels"])
    drawn = dot_graph(engine.to_dot(loss, "loss", params=example["params"]))
    assert len(drawn[0]) > 10 and drawn[1]
    assert svg_graph(PICTURE.read_text()) == drawn, \
        "regenerate: python examples/classifier.py --graph examples/classifier_graph.svg (needs Graphviz)"


def test_runs_from_another_directory_and_writes_nothing_unasked(tmp_path):
    done = run_example(cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("loss 1.133 -> ") and "accuracy 100%" in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_without_graphviz_the_picture_is_skipped_with_a_note(tmp_path):
    python_only = tmp_path / "bin"
    python_only.mkdir()
    done = run_example("--graph", "loss.svg", cwd=tmp_path, path=str(python_only))   # no `dot` on PATH
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("graph skipped: render needs Graphviz's `dot` program")
    assert not (tmp_path / "loss.svg").exists()
