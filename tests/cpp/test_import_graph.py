"""The C++ emitter's modules import one another without a cycle (imports inside functions
included): forward AD and the node emitter share the wrapper signature, not each other."""
from __future__ import annotations

import ast
from pathlib import Path

CPP = Path(__file__).resolve().parents[2] / "transpiler" / "cpp"
PACKAGE = "transpiler.cpp"


def imports_of(path: Path) -> set[str]:
    """The ``transpiler.cpp`` modules ``path`` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == PACKAGE:
                found.update(f"{PACKAGE}.{alias.name}" for alias in node.names)
            elif node.module.startswith(f"{PACKAGE}."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith(f"{PACKAGE}."))
    return found


def test_no_import_cycle_in_the_cpp_emitter() -> None:
    graph = {f"{PACKAGE}.{path.stem}": imports_of(path) for path in CPP.glob("*.py") if path.stem != "__init__"}
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for imported in sorted(graph.get(module, ())):
            assert state.get(imported) != "open", " -> ".join([*path, module, imported])
            if imported not in state:
                visit(imported, [*path, module])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert f"{PACKAGE}.nodes" not in graph[f"{PACKAGE}.forward_ad"]
