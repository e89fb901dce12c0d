"""Imported formula files back to derivatives.yaml entries (static: nothing is imported).

The file structure (decorators, nested ``backward``/``jvp``, assignments) is
read with :mod:`ast`; each formula expression is re-parsed from its source
text by the dialect parser (:func:`.pydialect.from_python`), which keeps the
parentheses that :mod:`ast` drops, and printed as C++ with the layout from its
``# cpp: {...}`` comment.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path

from transpiler.schema import FunctionSchema, SchemaError, parse_schema
from transpiler.yaml_import import cpp, pydialect
from transpiler.yaml_import.importer import FORMULA_FILE_PREFIX, GRAD_INPUT_MASK, non_tensor_arguments, primal_names
from transpiler.yaml_import.main_dialect import to_main
from transpiler.yaml_import.model import (
    NEEDS_INPUT_GRAD,
    NON_DIFFERENTIABLE,
    Entry,
    FormulaLine,
    Section,
    gradient_locals,
    return_names,
    tangent_locals,
)
from transpiler.yaml_import.pyformula import LAYOUT_COMMENT, ORIGINAL_COMMENT
from transpiler.yaml_import.syntax import Node

FORMULA_FILES = f"{FORMULA_FILE_PREFIX}*.py"


class ReadError(ValueError):
    """A formula file that is not in the shape ``import-yaml`` writes (1-based position)."""

    def __init__(self, path: str, line: int, col: int, message: str) -> None:
        super().__init__(f"{path}:{line}:{col}: {message}")
        self.path, self.line, self.col = path, line, col


@dataclass(frozen=True)
class ReadLine:
    """One formula assignment: the YAML key it stands for, its tree and its layout."""

    key: str
    tree: Node
    layout: cpp.Layout
    original: str | None = None     # the ``# yaml:`` formula, when the Python still is its rewrite

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.key.split(", "))

    def line(self) -> FormulaLine:
        if self.original is not None:
            return FormulaLine(self.key, self.original)
        return FormulaLine(self.key, cpp.render(cpp.print_tokens(self.tree), self.layout))


@dataclass(frozen=True)
class ReadFunction:
    """One ``@derivative`` function of an imported file."""

    schema: FunctionSchema
    schema_text: str
    flags: tuple[bool | str, ...] | None
    dispatch: str | None
    gradients: tuple[ReadLine, ...]
    non_differentiable: tuple[str, ...]
    auto_jvp: str | None
    tangents: tuple[ReadLine, ...]

    def section(self) -> Section:
        """The function as a derivatives.yaml section."""
        lines = [g.line() for g in self.gradients]
        lines += [FormulaLine(key, NON_DIFFERENTIABLE) for key in self.non_differentiable]
        if self.auto_jvp is not None:
            lines.append(FormulaLine("result", self.auto_jvp))
        lines += [t.line() for t in self.tangents]
        return Section(self.dispatch, tuple(lines))


def formula_files(directory: str | Path) -> list[Path]:
    """The formula files of an imported directory, in entry order."""
    return sorted(Path(directory).glob(FORMULA_FILES))


def read_directory(directory: str | Path) -> list[Entry]:
    """Every entry of an imported directory, in order."""
    functions: list[ReadFunction] = []
    for path in formula_files(directory):
        functions += read_functions(path.read_text(encoding="utf-8"), str(path))
    return group_entries(functions)


def group_entries(functions: list[ReadFunction]) -> list[Entry]:
    """Consecutive functions of one schema with dispatch keys form one entry."""
    entries: list[Entry] = []
    for function in functions:
        last = entries[-1] if entries else None
        section = function.section()
        if (last is not None and last.name == function.schema_text and function.dispatch is not None
                and last.sections[-1].dispatch is not None):
            entries[-1] = Entry(last.name, last.output_differentiability, last.sections + (section,))
        else:
            entries.append(Entry(function.schema_text, function.flags, (section,)))
    return entries


def read_functions(source: str, path: str) -> list[ReadFunction]:
    """The ``@derivative`` functions of one formula file, in order."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as error:
        raise ReadError(path, error.lineno or 1, error.offset or 1, f"cannot parse: {error.msg}") from None
    reader = _FileReader(path, source.encode("utf-8").splitlines())
    return [reader.function(node) for node in tree.body
            if isinstance(node, ast.FunctionDef) and reader.decorator(node, "derivative") is not None]


class _FileReader:
    def __init__(self, path: str, lines: list[bytes]) -> None:
        self.path = path
        self.lines = lines

    def error(self, node: ast.AST, message: str) -> ReadError:
        return ReadError(self.path, node.lineno, node.col_offset + 1, message)

    def literal(self, node: ast.expr) -> object:
        """The value of a decorator argument, which must be a literal."""
        try:
            return ast.literal_eval(node)
        except ValueError:
            raise self.error(node, "decorator arguments must be literals (strings, booleans, lists)") from None

    def decorator(self, function: ast.FunctionDef, name: str) -> ast.Call | None:
        for decorator in function.decorator_list:
            if isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Name) and decorator.func.id == name:
                return decorator
        return None

    def function(self, node: ast.FunctionDef) -> ReadFunction:
        derivative = self.decorator(node, "derivative")
        if not derivative.args or not isinstance(derivative.args[0], ast.Constant):
            raise self.error(node, "@derivative needs the schema string")
        schema_text = derivative.args[0].value
        try:
            schema = parse_schema(schema_text)
        except SchemaError as error:
            raise self.error(node, f"the schema does not parse: {error}") from None
        keywords = {k.arg: self.literal(k.value) for k in derivative.keywords}
        details_call = self.decorator(node, "yaml_entry")
        details = {k.arg: self.literal(k.value) for k in details_call.keywords} if details_call else {}
        flags = details.get("output_differentiability", keywords.get("output_differentiability"))
        closures = {s.name: s for s in node.body if isinstance(s, ast.FunctionDef)}
        if "backward" not in closures:
            raise self.error(node, f"`{node.name}` has no nested `def backward`")
        local = pydialect.local_names((*(a.name for a in schema.arguments), *return_names(schema)))
        backward_names = {**local, GRAD_INPUT_MASK: NEEDS_INPUT_GRAD}
        non_tensors = non_tensor_arguments(schema)
        gradients = self.lines_of(closures["backward"], gradient_locals(schema),
                                  pydialect.inverse_names(backward_names), non_tensors)
        tangents: tuple[ReadLine, ...] = ()
        if "jvp" in closures:
            diff_args = [a.name for a in schema.arguments if any(a.name in g.names for g in gradients)]
            tangents = self.lines_of(closures["jvp"], tangent_locals(schema),
                                     pydialect.inverse_names(primal_names(schema, diff_args, local)), non_tensors)
        return ReadFunction(
            schema, schema_text, tuple(flags) if flags is not None else None, details.get("dispatch"),
            gradients, tuple(details.get("non_differentiable", ())), details.get("jvp"), tangents,
        )

    def lines_of(self, closure: ast.FunctionDef, locals_: dict[str, str], names: dict[str, str],
                 non_tensors: frozenset[str]) -> tuple[ReadLine, ...]:
        """The formula assignments of a closure as YAML lines: those whose targets are
        the gradient (or tangent) locals ``locals_`` gives (YAML name -> Python local)."""
        keys = pydialect.inverse_names(locals_)
        lines = []
        for statement in closure.body:
            if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
                continue
            target = statement.targets[0]
            targets = target.elts if isinstance(target, ast.Tuple) else [target]
            idents = [t.id for t in targets if isinstance(t, ast.Name)]
            if len(idents) != len(targets) or not all(i in keys for i in idents):
                continue     # a prelude statement such as ``grads = [...]``
            key = ", ".join(keys[i] for i in idents)
            expression, comment = self.source_of(statement.value)
            try:
                tree = pydialect.from_python(expression, names)
            except pydialect.DialectError as error:
                raise self.error(statement, f"`{expression}`: {error}") from None
            lines.append(ReadLine(key, tree, self.layout(statement, comment),
                                  self.original(statement, comment, tree, non_tensors)))
        return tuple(lines)

    def original(self, statement: ast.stmt, comment: str, tree: Node, non_tensors: frozenset[str]) -> str | None:
        """The ``# yaml: "..."`` formula of a line the main dialect rewrote, as long as the Python is
        still its rewrite (an edited line is printed from its tree instead)."""
        if not comment.startswith(ORIGINAL_COMMENT):
            return None
        try:
            original = json.loads(comment[len(ORIGINAL_COMMENT):])
            rewritten = to_main(cpp.parse(original), non_tensors) if isinstance(original, str) else None
        except (json.JSONDecodeError, cpp.CppSyntaxError) as error:
            raise self.error(statement, f"the yaml comment is not a JSON string of a C++ formula: {error}") from None
        if rewritten is None:
            raise self.error(statement, "the yaml comment must be a JSON string")
        return original if rewritten == tree else None

    def layout(self, statement: ast.stmt, comment: str) -> cpp.Layout:
        """The ``# cpp: {...}`` layout of a formula line (none: canonical spacing)."""
        if not comment.startswith(LAYOUT_COMMENT):
            return {}
        try:
            layout = json.loads(comment[len(LAYOUT_COMMENT):])
        except json.JSONDecodeError as error:
            raise self.error(statement, f"the layout comment is not JSON: {error.msg}") from None
        if not (isinstance(layout, dict) and all(isinstance(v, str) for v in layout.values())):
            raise self.error(statement, "the layout comment must map token positions to spacing strings")
        return layout

    def source_of(self, node: ast.expr) -> tuple[str, str]:
        """The source text of an expression and the comment that ends its last line."""
        first, last = node.lineno - 1, node.end_lineno - 1
        if first == last:
            text = self.lines[first][node.col_offset:node.end_col_offset]
        else:
            text = b"\n".join([self.lines[first][node.col_offset:], *self.lines[first + 1:last],
                               self.lines[last][:node.end_col_offset]])
        rest = self.lines[last][node.end_col_offset:].strip()
        return text.decode("utf-8"), rest.decode("utf-8")
