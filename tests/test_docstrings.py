"""Every public function and class of ``transpiler/``, ``reference_engine/`` and ``formulas/`` has a
docstring.

Public: defined at a module's top level with a name that does not start with ``_``. Read
statically (``ast``; nothing is imported). A registration (``@derivative``, ``@family_member``,
``@kernel``) is exempt: its decorator names the operator it is, by schema or by name, which is
the line a docstring would repeat.
"""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED_PACKAGES = ("transpiler", "reference_engine", "formulas")
REGISTRATIONS = frozenset({"derivative", "family_member", "kernel"})


def _decorator_name(decorator: ast.expr) -> str:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def undocumented(path: Path, root: Path = REPO) -> list[str]:
    """``path:line: name`` (relative to ``root``) for each public top-level function or class of
    ``path`` without a docstring."""
    found = []
    for node in ast.parse(path.read_bytes(), str(path)).body:
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and not node.name.startswith("_") and ast.get_docstring(node) is None
                and not REGISTRATIONS & {_decorator_name(d) for d in node.decorator_list}):
            found.append(f"{path.relative_to(root)}:{node.lineno}: {node.name}")
    return found


def test_every_public_function_and_class_has_a_docstring():
    missing = [line for package in CHECKED_PACKAGES for path in sorted((REPO / package).rglob("*.py"))
               for line in undocumented(path)]
    assert not missing, "public, without a docstring (say what it is in a line):\n" + "\n".join(missing)


def test_a_function_without_a_docstring_is_reported_and_a_registration_is_not(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("@derivative('neg(Tensor self) -> Tensor')\ndef neg(self):\n    pass\n\n\n"
                      "def helper():\n    pass\n\n\ndef _private():\n    pass\n\n\n"
                      "class Documented:\n    '''What it is.'''\n")
    assert undocumented(module, tmp_path) == ["module.py:6: helper"]
