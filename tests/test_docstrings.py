"""Every public function, class and method of ``transpiler/``, ``reference_engine/`` and
``formulas/`` has a docstring.

Public: a function or class at a module's top level, or a method in such a class's body, with a
name that does not start with ``_``. Read statically (``ast``; nothing is imported). Exempt:

- a registration (``@derivative``, ``@family_member``, ``@kernel``): its decorator names the
  operator it is, by schema or by name, which is the line a docstring would repeat;
- an override whose meaning its base class documents: a libcst visitor hook (``visit_*`` /
  ``leave_*`` in a class based on ``CSTVisitor``, ``CSTTransformer`` or a
  ``MatcherDecoratable*``), a ``torch.autograd.Function`` hook (``forward``, ``backward``,
  ``setup_context``, ``jvp``, ``vjp``), and a method whose same-named method is documented in a
  base class defined in the same package (bases are matched by name, transitively).
"""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED_PACKAGES = ("transpiler", "reference_engine", "formulas")
REGISTRATIONS = frozenset({"derivative", "family_member", "kernel"})
LIBCST_VISITORS = frozenset({"CSTVisitor", "CSTTransformer", "MatcherDecoratableVisitor",
                             "MatcherDecoratableTransformer"})
AUTOGRAD_HOOKS = frozenset({"forward", "backward", "setup_context", "jvp", "vjp"})


def _name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def _is_autograd_function(base: ast.expr) -> bool:
    return ast.unparse(base) in {"Function", "autograd.Function", "torch.autograd.Function"}


def _public_classes(tree: ast.Module) -> list[ast.ClassDef]:
    return [node for node in tree.body if isinstance(node, ast.ClassDef) and not node.name.startswith("_")]


def _methods(cls: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in cls.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def class_index(paths) -> dict[str, ast.ClassDef]:
    """Each top-level class of ``paths`` by name: the bases an override can inherit from."""
    return {node.name: node for path in paths for node in ast.parse(path.read_bytes(), str(path)).body
            if isinstance(node, ast.ClassDef)}


def _is_documented_override(cls: ast.ClassDef, name: str, index: dict[str, ast.ClassDef],
                            seen: frozenset[str] = frozenset()) -> bool:
    for base in cls.bases:
        base_name = _name(base)
        if name.startswith(("visit_", "leave_")) and base_name in LIBCST_VISITORS:
            return True
        if name in AUTOGRAD_HOOKS and _is_autograd_function(base):
            return True
        parent = index.get(base_name)
        if parent is None or base_name in seen:
            continue
        if any(m.name == name and ast.get_docstring(m) is not None for m in _methods(parent)):
            return True
        if _is_documented_override(parent, name, index, seen | {base_name}):
            return True
    return False


def undocumented(path: Path, root: Path = REPO, index: dict[str, ast.ClassDef] | None = None) -> list[str]:
    """``path:line: name`` (relative to ``root``) for each public top-level function or class, and
    each public method of a public class, of ``path`` without a docstring and not exempt."""
    tree = ast.parse(path.read_bytes(), str(path))
    index = class_index([path]) if index is None else index
    found = []
    for node in tree.body:
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and not node.name.startswith("_") and ast.get_docstring(node) is None
                and not REGISTRATIONS & {_name(d) for d in node.decorator_list}):
            found.append(f"{path.relative_to(root)}:{node.lineno}: {node.name}")
    for cls in _public_classes(tree):
        for method in _methods(cls):
            if (not method.name.startswith("_") and ast.get_docstring(method) is None
                    and not _is_documented_override(cls, method.name, index)):
                found.append(f"{path.relative_to(root)}:{method.lineno}: {cls.name}.{method.name}")
    return found


def test_every_public_function_class_and_method_has_a_docstring():
    missing = []
    for package in CHECKED_PACKAGES:
        paths = sorted((REPO / package).rglob("*.py"))
        index = class_index(paths)
        missing += [line for path in paths for line in undocumented(path, index=index)]
    assert not missing, "public, without a docstring (say what it is in a line):\n" + "\n".join(missing)


def test_a_function_without_a_docstring_is_reported_and_a_registration_is_not(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("@derivative('neg(Tensor self) -> Tensor')\ndef neg(self):\n    pass\n\n\n"
                      "def helper():\n    pass\n\n\ndef _private():\n    pass\n\n\n"
                      "class Documented:\n    '''What it is.'''\n")
    assert undocumented(module, tmp_path) == ["module.py:6: helper"]


def test_a_method_without_a_docstring_is_reported_and_a_documented_override_is_not(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("class Base:\n    '''A base.'''\n    def run(self):\n        '''What run does.'''\n\n\n"
                      "class Child(Base):\n    '''A child.'''\n    def run(self):\n        pass\n\n"
                      "    def extra(self):\n        pass\n\n"
                      "    def visit_Name(self, node):\n        pass\n\n\n"
                      "class Visitor(cst.CSTVisitor):\n    '''A visitor.'''\n"
                      "    def visit_Name(self, node):\n        pass\n")
    assert undocumented(module, tmp_path) == ["module.py:12: Child.extra", "module.py:15: Child.visit_Name"]
