"""No import cycles in ``transpiler/``, ``reference_engine/`` or ``formulas/`` (the formula DSL, the
library and the torch back end), imports inside functions included, and none across them.

The graph is built statically (``ast``; nothing is imported): one node per
module, one edge per import statement anywhere in the module (at the top, in
a function, in a ``try``), relative imports resolved against the importing
module's package, and ``from package import name`` an edge to the submodule
``package.name`` when there is one, to ``package`` otherwise. Imports under
``if TYPE_CHECKING:`` are left out: they never run. A cycle is a strongly
connected component of the graph; each one is named with a path through it
and the line of every import on that path.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHECKED_PACKAGES = ("transpiler", "reference_engine", "formulas")


@dataclass(frozen=True, order=True)
class ImportEdge:
    """``importer`` imports ``imported`` at ``line`` of ``path``."""

    importer: str
    imported: str
    path: str
    line: int


def module_files(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``*.py`` below ``root/<package>`` (``__init__.py``
    is its package's module)."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return modules


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree``, at any depth, but those under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and _type_checking_only(node):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return found


def _base_of(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The absolute module a ``from ... import`` names (relative levels resolved)."""
    if not node.level:
        return node.module or ""
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    package = package[:len(package) - (node.level - 1)]
    return ".".join([*package, *([node.module] if node.module else [])])


def import_graph(root: Path, packages: tuple[str, ...]) -> list[ImportEdge]:
    """Every import edge between the modules of ``packages`` under ``root``."""
    modules = module_files(root, packages)
    edges = set()
    for importer, path in modules.items():
        tree = ast.parse(path.read_bytes(), str(path))
        is_package = path.name == "__init__.py"
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _base_of(node, importer, is_package)
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            shown = path.relative_to(root).as_posix()
            edges.update(ImportEdge(importer, target, shown, node.lineno)
                         for target in targets if target in modules and target != importer)
    return sorted(edges)


def strongly_connected(edges: list[ImportEdge]) -> list[list[str]]:
    """The components of more than one module (Tarjan's algorithm, iterative), each sorted."""
    successors: dict[str, list[str]] = {}
    for edge in edges:
        successors.setdefault(edge.importer, []).append(edge.imported)
        successors.setdefault(edge.imported, [])
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for start in sorted(successors):
        if start in index:
            continue
        work = [(start, iter(successors[start]))]
        index[start] = lowlink[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    lowlink[parent] = min(lowlink[parent], lowlink[node])
                if lowlink[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
            elif child not in index:
                index[child] = lowlink[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(successors[child])))
            elif child in on_stack:
                lowlink[node] = min(lowlink[node], index[child])
    return sorted(components)


def a_cycle(component: list[str], edges: list[ImportEdge]) -> list[ImportEdge]:
    """A shortest cycle through the component's first module, as the imports that make it."""
    members = set(component)
    first = component[0]
    by_importer: dict[str, list[ImportEdge]] = {}
    for edge in edges:
        if edge.importer in members and edge.imported in members:
            by_importer.setdefault(edge.importer, []).append(edge)
    reached: dict[str, list[ImportEdge]] = {first: []}
    frontier = [first]
    while frontier:
        following = []
        for module in frontier:
            for edge in by_importer.get(module, []):
                if edge.imported == first:
                    return [*reached[module], edge]
                if edge.imported not in reached:
                    reached[edge.imported] = [*reached[module], edge]
                    following.append(edge.imported)
        frontier = following
    raise AssertionError(f"{component} is not a cycle")


def describe(components: list[list[str]], edges: list[ImportEdge]) -> str:
    """One paragraph per cycle: its modules, then a path round it with each import's place."""
    lines = []
    for component in components:
        lines.append(f"cycle among {', '.join(component)}:")
        lines += [f"  {edge.importer} -> {edge.imported}  ({edge.path}:{edge.line})"
                  for edge in a_cycle(component, edges)]
    return "\n".join(lines)


def test_no_import_cycles_in_the_packages():
    edges = import_graph(REPO, CHECKED_PACKAGES)
    cycles = strongly_connected(edges)
    assert not cycles, f"{len(cycles)} import cycle(s):\n{describe(cycles, edges)}"


# The graph builder on a tiny package.

def write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


ACYCLIC = {
    "pkg/__init__.py": "",
    "pkg/a.py": "from pkg import b\nfrom . import c\n",
    "pkg/b.py": "import pkg.c\n",
    "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n",
    "pkg/sub/__init__.py": "from .. import c\nfrom ..b import name\n",
}


def test_the_graph_resolves_absolute_relative_and_from_package_imports(tmp_path):
    root = write_package(tmp_path, ACYCLIC)
    edges = {(e.importer, e.imported) for e in import_graph(root, ("pkg",))}
    assert edges == {("pkg.a", "pkg.b"), ("pkg.a", "pkg.c"), ("pkg.b", "pkg.c"),
                     ("pkg.sub", "pkg.c"), ("pkg.sub", "pkg.b")}
    assert strongly_connected(import_graph(root, ("pkg",))) == []


@pytest.mark.parametrize("late_import, line", [
    ("import pkg.a\n", 2),                                         # at the top
    ("def later():\n    from pkg.a import something\n", 3),        # inside a function
    ("def later():\n    from .. import a\n", 3),                   # relative, from a subpackage's module
])
def test_a_cycle_is_found_and_named_with_its_lines(tmp_path, late_import, line):
    files = {**ACYCLIC, "pkg/sub/d.py": "from pkg import c\n", "pkg/c.py": "from pkg.sub import d\n"}
    files["pkg/sub/d.py"] += late_import
    root = write_package(tmp_path, files)
    edges = import_graph(root, ("pkg",))
    cycles = strongly_connected(edges)
    assert cycles == [["pkg.a", "pkg.b", "pkg.c", "pkg.sub.d"]]
    text = describe(cycles, edges)
    assert text.splitlines() == [
        "cycle among pkg.a, pkg.b, pkg.c, pkg.sub.d:",
        "  pkg.a -> pkg.c  (pkg/a.py:2)",
        "  pkg.c -> pkg.sub.d  (pkg/c.py:1)",
        f"  pkg.sub.d -> pkg.a  (pkg/sub/d.py:{line})",
    ]


def test_two_separate_cycles_are_both_named(tmp_path):
    root = write_package(tmp_path, {
        "pkg/__init__.py": "", "pkg/x.py": "from pkg import y\n", "pkg/y.py": "from pkg import x\n",
        "pkg/u.py": "def f():\n    import pkg.v\n", "pkg/v.py": "from .u import f\n", "pkg/w.py": "from pkg import x\n",
    })
    edges = import_graph(root, ("pkg",))
    assert strongly_connected(edges) == [["pkg.u", "pkg.v"], ["pkg.x", "pkg.y"]]
