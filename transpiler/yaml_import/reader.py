"""Imported formula files back to derivatives.yaml entries (static: nothing is imported).

A function of the front-end's model (:func:`transpiler.frontend.parse_module`,
the one reader of formula files): each ``@derivative`` formula's decorators,
``backward`` and ``jvp`` closures come from it; each formula expression, a
libcst tree with its parentheses, becomes a :mod:`.syntax` tree
(:func:`.pydialect.from_cst`) and is printed as C++ with the layout from its
``# cpp: {...}`` comment. A file the front-end rejects fails with its
diagnostics; a formula outside the shape ``import-yaml`` writes is a DB300.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import libcst as cst

from transpiler import codes
from transpiler.diagnostics import Diagnostic, TranspileError
from transpiler.frontend import find_decorator, read_module
from transpiler.model import Formula, FormulaModule, JvpRule
from transpiler.raises import not_implemented_message, raised_error
from transpiler.yaml_import import cpp, pydialect
from transpiler.yaml_import.importer import (
    FOREACH_INDEX, FORMULA_FILE_PREFIX, GRAD_INPUT_MASK, integer_arguments, non_tensor_arguments, primal_names,
    written_tangent,
)
from transpiler.yaml_import.main_dialect import mask_positions, to_main
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
YAML_SHAPE = codes.EMIT_YAML_SHAPE.code     # a formula that is not in the shape ``import-yaml`` writes


def formula_files(directory: str | Path) -> list[Path]:
    """The formula files of an imported directory, in entry order."""
    return sorted(Path(directory).glob(FORMULA_FILES))


def read_directory(directory: str | Path) -> list[Entry]:
    """Every entry of an imported directory, in order."""
    functions: list[Entry] = []
    for path in formula_files(directory):
        functions += read_functions(read_module(str(path)))
    return group_entries(functions)


def group_entries(functions: list[Entry]) -> list[Entry]:
    """Consecutive functions of one schema with dispatch keys form one entry."""
    entries: list[Entry] = []
    for function in functions:
        last = entries[-1] if entries else None
        section = function.sections[0]
        if (last is not None and last.name == function.name and section.dispatch is not None
                and last.sections[-1].dispatch is not None):
            entries[-1] = Entry(last.name, last.output_differentiability, last.sections + (section,))
        else:
            entries.append(function)
    return entries


def read_functions(module: FormulaModule) -> list[Entry]:
    """The ``@derivative`` functions of one formula file's model, in order, each an entry of one section.

    Raises :class:`TranspileError` with the front-end's diagnostics (DB000, DB107) or a DB300
    for a function that is not in the shape ``import-yaml`` writes.
    """
    if module.diagnostics:
        raise TranspileError(list(module.diagnostics))
    reader = _FormulaReader(module)
    return [reader.function(formula) for formula in module.formulas]


class _FormulaReader:
    """Reads the derivatives.yaml lines out of the front-end's model of one file."""

    def __init__(self, module: FormulaModule) -> None:
        self.module = module

    def error(self, node: cst.CSTNode, message: str) -> TranspileError:
        span = self.module.span(node)
        return TranspileError([Diagnostic(self.module.path, span.line, span.col, YAML_SHAPE, message)])

    def literal(self, node: cst.BaseExpression) -> object:
        """The value of a decorator argument, which must be a literal (string, boolean, list)."""
        match node:
            case cst.SimpleString() | cst.ConcatenatedString():
                value = node.evaluated_value
                if isinstance(value, str):
                    return value
            case cst.Name(value="True" | "False" | "None" as name):
                return {"True": True, "False": False, "None": None}[name]
            case cst.List(elements=elements) | cst.Tuple(elements=elements):
                values = [self.literal(e.value) for e in elements if not isinstance(e, cst.StarredElement)]
                if len(values) == len(elements):
                    return values if isinstance(node, cst.List) else tuple(values)
        raise self.error(node, "decorator arguments must be literals (strings, booleans, lists)")

    def keywords(self, function: cst.FunctionDef, name: str) -> dict[str, object]:
        """The literal keyword arguments of the decorator ``@name(...)``, empty when it is absent."""
        decorator = find_decorator(function, name)
        if decorator is None or not isinstance(decorator.decorator, cst.Call):
            return {}
        return {a.keyword.value: self.literal(a.value) for a in decorator.decorator.args if a.keyword is not None}

    def function(self, formula: Formula) -> Entry:
        node, schema = formula.node, formula.schema
        derivative = find_decorator(node, "derivative").decorator
        schema_text = next(a.value for a in derivative.args if a.keyword is None).evaluated_value
        keywords = self.keywords(node, "derivative")
        details = self.keywords(node, "yaml_entry")
        flags = details.get("output_differentiability", keywords.get("output_differentiability"))
        local = pydialect.local_names((*(a.name for a in schema.arguments), *return_names(schema)))
        backward_names = {**local, GRAD_INPUT_MASK: NEEDS_INPUT_GRAD}
        arguments = (non_tensor_arguments(schema), integer_arguments(schema))
        gradients = self.lines_of(formula.backward.node, gradient_locals(schema),
                                  pydialect.inverse_names(backward_names), arguments,
                                  tuple(a.name for a in schema.tensor_inputs))
        tangents: tuple[FormulaLine, ...] = ()
        if formula.jvp is not None and formula.jvp.rule is JvpRule.WRITTEN:
            diff_args = [a.name for a in schema.arguments if any(a.name in g.names for g in gradients)]
            tangents = self.lines_of(formula.jvp.node, tangent_locals(schema),
                                     pydialect.inverse_names(primal_names(schema, diff_args, local)), arguments,
                                     written=written_tangent(schema))
        lines = [*gradients, *(FormulaLine(key, NON_DIFFERENTIABLE) for key in details.get("non_differentiable", ()))]
        if details.get("jvp") is not None:
            lines.append(FormulaLine("result", details["jvp"]))
        section = Section(formula.dispatch, (*lines, *tangents))
        return Entry(schema_text, tuple(flags) if flags is not None else None, (section,))

    def lines_of(self, closure: cst.FunctionDef, locals_: dict[str, str], names: dict[str, str],
                 arguments: tuple[frozenset[str], frozenset[str]], tensor_inputs: tuple[str, ...] = (),
                 written: str | None = None) -> tuple[FormulaLine, ...]:
        """The formula assignments of a closure as YAML lines: those whose targets are
        the gradient (or tangent) locals ``locals_`` gives (YAML name -> Python local);
        ``tensor_inputs``: the entry's, for the gradient lines' ``grad_input_mask``;
        ``written``: in an in-place operator's jvp, the written input's tangent (``to_main``)."""
        keys = pydialect.inverse_names(locals_)
        lines = []
        looped = {loop[0] for line in closure.body.body if (loop := _element_loop(line)) is not None}
        for line in closure.body.body:
            match line:
                case cst.SimpleStatementLine(body=[cst.Assign(targets=[cst.AssignTarget(target=target)],
                                                              value=cst.List(elements=[]))]) if (
                        isinstance(target, cst.Name) and target.value in looped):
                    continue     # ``grad_self = []`` before its element loop
                case cst.SimpleStatementLine(body=[cst.Assign(targets=[cst.AssignTarget(target=target)]) as statement]):
                    value = statement.value
                case cst.For() if (loop := _element_loop(line)) is not None:
                    target, line = cst.Name(loop[0]), loop[1]
                    statement = line.body[0]
                    value = loop[2]
                case cst.If() if tensor_inputs and (refused := _refusal(line)) is not None:
                    position, name = refused
                    if position >= len(tensor_inputs):
                        raise self.error(line, f"needs_input_grad[{position}]: the entry has "
                                         f"{len(tensor_inputs)} tensor inputs")
                    lines.append(FormulaLine(tensor_inputs[position], f'not_implemented("{name}")'))
                    continue
                case _:
                    continue
            targets = [e.value for e in target.elements] if isinstance(target, cst.Tuple) else [target]
            idents = [t.value for t in targets if isinstance(t, cst.Name)]
            if len(idents) != len(targets) or not all(i in keys for i in idents):
                continue     # a prelude statement such as ``grads = [...]``
            key = ", ".join(keys[i] for i in idents)
            comment = line.trailing_whitespace.comment
            comment_text = comment.value if comment is not None else ""
            expression = _code(value)
            if "\n" in expression and _has_comment(value):
                raise self.error(statement, f"`{expression}`: a comment inside a formula has no "
                                 "place in derivatives.yaml; move it after the line")
            try:
                tree = pydialect.from_cst(value, names)
            except TranspileError as error:
                raise self.error(statement, f"`{expression}`: {error.diagnostics[0].message}") from None
            mask = mask_positions(tuple(keys[i] for i in idents), tensor_inputs) if tensor_inputs else None
            formula = self.original(statement, comment_text, tree, arguments, mask, written)
            if formula is None:
                formula = cpp.render(cpp.print_tokens(tree), self.layout(statement, comment_text))
            lines.append(FormulaLine(key, formula))
        return tuple(lines)

    def original(self, statement: cst.CSTNode, comment: str, tree: Node,
                 arguments: tuple[frozenset[str], frozenset[str]], mask: tuple[int, ...] | None = None,
                 written: str | None = None) -> str | None:
        """The ``# yaml: "..."`` formula of a line the main dialect rewrote, as long as the Python is
        still its rewrite (an edited line is printed from its tree instead). ``arguments``: the
        entry's non-tensor and integer arguments; ``mask``: the line's ``grad_input_mask`` positions;
        ``written``: the written input's tangent, in an in-place operator's jvp."""
        if not comment.startswith(ORIGINAL_COMMENT):
            return None
        try:
            original = json.loads(comment[len(ORIGINAL_COMMENT):])
            rewritten = (to_main(cpp.parse(original), arguments[0], integers=arguments[1], mask=mask,
                                 written_tangent=written)
                         if isinstance(original, str) else None)
        except json.JSONDecodeError as error:
            raise self.error(statement, f"the yaml comment is not a JSON string of a C++ formula: {error}") from None
        except TranspileError as error:
            raise self.error(statement, "the yaml comment is not a JSON string of a C++ formula: "
                             f"{error.diagnostics[0].message}") from None
        if rewritten is None:
            raise self.error(statement, "the yaml comment must be a JSON string")
        return original if rewritten == tree else None

    def layout(self, statement: cst.CSTNode, comment: str) -> cpp.Layout:
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


def _element_loop(statement: cst.CSTNode) -> tuple[str, cst.SimpleStatementLine, cst.BaseExpression] | None:
    """``(target, line, formula)`` of a ``_foreach_`` gradient line as ``import-yaml`` writes it
    (``for i in range(len(grads)): if grads[i] is not None: target.append(formula) else:
    target.append(None)``), ``line`` the statement holding the formula and its comment."""
    match statement:
        case cst.For(target=cst.Name(value=index), iter=cst.Call(func=cst.Name(value="range"), args=[cst.Arg(
                        value=cst.Call(func=cst.Name(value="len"), args=[cst.Arg(value=cst.Name(value=grads))]))]),
                     body=cst.IndentedBlock(body=[cst.If(
                         body=cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Expr(value=cst.Call(
                             func=cst.Attribute(value=cst.Name(value=target), attr=cst.Name(value="append")),
                             args=[cst.Arg(value=formula)]))]) as line]),
                         orelse=cst.Else(body=cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Expr(
                             value=cst.Call(func=cst.Attribute(value=cst.Name(value=other), attr=cst.Name(value="append")),
                             args=[cst.Arg(value=cst.Name(value="None"))]))])])))]),
                     orelse=None) if index == FOREACH_INDEX and other == target and grads == "grads":
            return target, line, formula
    return None


def _refusal(statement: cst.If) -> tuple[int, str] | None:
    """``(position, name)`` of ``if needs_input_grad[position]: raise NotImplementedError(<torch's
    not_implemented("name") text>)``, what ``import-yaml`` writes for ``not_implemented("name")``."""
    match statement:
        case cst.If(test=cst.Subscript(value=cst.Name(value=mask), slice=[cst.SubscriptElement(
                        slice=cst.Index(value=cst.Integer() as position))]),
                    body=cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Raise() as raised])]),
                    orelse=None) if mask == NEEDS_INPUT_GRAD:
            error = raised_error(raised)
            if error is None or error.error_type != "NotImplementedError":
                return None
            refused = NOT_IMPLEMENTED_TEXT.fullmatch(error.message)
            return (int(position.value), refused["name"]) if refused is not None else None
    return None


NOT_IMPLEMENTED_TEXT = re.compile(re.escape(not_implemented_message("@")).replace("@", '(?P<name>[^"\\\\]*)'))


def _has_comment(node: cst.CSTNode) -> bool:
    """Whether a comment sits anywhere in ``node``, its whitespace included (a tree walk rather
    than ``libcst.matchers.findall``: importing the matchers costs emit-yaml more than it reads)."""
    return isinstance(node, cst.Comment) or any(_has_comment(child) for child in node.children)


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)
