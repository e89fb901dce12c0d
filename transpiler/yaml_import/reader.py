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
from typing import NamedTuple

import libcst as cst

from transpiler import codes
from transpiler.diagnostics import Diagnostic, TranspileError
from transpiler.frontend import find_decorator, read_module
from transpiler.dataflow import assigned_names
from transpiler.model import CaptureKind, Closure, Formula, FormulaModule, JvpRule, returned_values
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
    return_names,
    tangent_locals,
)
from transpiler.yaml_import.pyformula import LAYOUT_COMMENT, ORIGINAL_COMMENT
from transpiler.yaml_import.syntax import Index, Literal, Name, Node, rewrite

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


class _Assignment(NamedTuple):
    """A formula line's statement before it is printed: ``statement`` (an assignment, or the
    backward's return) in ``line``, its expression ``value``, the YAML names of its key."""

    line: cst.SimpleStatementLine
    statement: cst.CSTNode
    value: cst.BaseExpression
    names: tuple[str, ...]


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
        outputs = self.output_names(formula)
        backward_names = {**pydialect.inverse_names({**local, GRAD_INPUT_MASK: NEEDS_INPUT_GRAD}), **outputs}
        arguments = (non_tensor_arguments(schema), integer_arguments(schema))
        gradients = self.gradient_lines(formula, backward_names, arguments)
        tangents: tuple[FormulaLine, ...] = ()
        if formula.jvp is not None and formula.jvp.rule is JvpRule.WRITTEN:
            self.refuse_forward_locals(formula.jvp)
            diff_args = [a.name for a in schema.arguments if any(a.name in g.names for g in gradients)]
            jvp_names = {**pydialect.inverse_names(primal_names(schema, diff_args, local)), **outputs}
            tangent_keys = {**pydialect.inverse_names(tangent_locals(schema)),
                            **{f"{output}_t": name for output, name in outputs.items()}}
            tangents = self.lines_of(formula.jvp.node, tangent_keys, jvp_names, arguments,
                                     written=written_tangent(schema))
        lines = [*gradients, *(FormulaLine(key, NON_DIFFERENTIABLE) for key in details.get("non_differentiable", ()))]
        if details.get("jvp") is not None:
            lines.append(FormulaLine("result", details["jvp"]))
        section = Section(formula.dispatch, (*lines, *tangents))
        return Entry(schema_text, tuple(flags) if flags is not None else None, (section,))

    def output_names(self, formula: Formula) -> dict[str, str]:
        """The forward's names for its outputs that are not the YAML's (``out`` for ``result0``; its
        tangent ``out_t`` is ``result0``'s)."""
        return {output: name for output, name in zip(formula.outputs, return_names(formula.schema))
                if output is not None and output != name}

    def refuse_forward_locals(self, closure: Closure) -> None:
        """DB300 for a closure reading a local of the forward other than an output: a derivatives.yaml
        formula sees the schema's arguments and outputs only."""
        for capture in closure.captures:
            if capture.kind not in (CaptureKind.INPUT, CaptureKind.OUTPUT):
                raise TranspileError([Diagnostic(
                    self.module.path, capture.first_use.line, capture.first_use.col, YAML_SHAPE,
                    f"`{capture.name}` is a local of the forward: a derivatives.yaml formula sees the schema's "
                    f"arguments and outputs only; compute it in the {closure.name}'s line")])

    def gradient_lines(self, formula: Formula, names: dict[str, str],
                       arguments: tuple[frozenset[str], frozenset[str]]) -> tuple[FormulaLine, ...]:
        """The backward's lines, one per input gradient it returns, keyed by what its ``return`` gives
        each tensor input: a local assigned once (``grad_self = ...``; a tuple of them, ``gi, gw, gb =
        f(...)``, is one line for their inputs, ``input, weight, bias: f(...)``), an expression (its own
        line), ``None`` (no line), or, for the whole return, one tuple-valued expression (``return
        f(..., needs_input_grad)``: a line for every tensor input). A gradient derivatives.yaml cannot
        hold (bound in a branch or a loop, bound twice, returned for two inputs) is a DB300: a line
        dropped would read as no gradient."""
        backward = formula.backward
        self.refuse_forward_locals(backward)
        inputs = tuple(a.name for a in formula.schema.tensor_inputs)
        body = backward.node.body.body
        last = body[-1] if body else None
        if not (len(backward.returns) == 1 and isinstance(last, cst.SimpleStatementLine)
                and last.body[0] is backward.returns[0] and backward.returns[0].value is not None):
            raise self.error(backward.returns[0] if backward.returns else backward.node,
                             "a derivatives.yaml backward is one expression per gradient: return the gradients "
                             "(None for none) once, as the backward's last statement")
        statement = backward.returns[0]
        returned = returned_values(statement)
        keys: dict[str, str] = {}
        expressions: list[tuple[tuple[str, ...], cst.BaseExpression]] = []
        whole = statement.value
        if _is_none(whole):
            pass        # no gradient at all
        elif len(inputs) > 1 and not isinstance(whole, cst.Tuple):
            if isinstance(whole, cst.Name):
                raise self.error(statement, f"the backward returns one name for {len(inputs)} tensor inputs "
                                 f"({', '.join(inputs)}): return one gradient per input")
            expressions.append((inputs, whole))     # one tuple-valued expression: a line for every input
        elif len(returned) != len(inputs):
            raise self.error(statement, f"the backward returns {len(returned)} gradients for {len(inputs)} "
                             f"tensor inputs ({', '.join(inputs)})")
        else:
            for name, value in zip(inputs, returned):
                if isinstance(value, cst.Name) and value.value in backward.rebound:
                    if value.value in keys:
                        raise self.error(value, f"`{value.value}` is returned for `{keys[value.value]}` and "
                                         f"`{name}`: a derivatives.yaml line is for one input each")
                    keys[value.value] = name
                elif not _is_none(value):
                    expressions.append(((name,), value))
        found, read = self.assignments(backward.node, keys, inputs)
        bound: set[str] = set()
        for line in body[:-1]:
            binds = read[line] if line in read else tuple(assigned_names([line]) & keys.keys())
            for local in binds:
                if local in bound or line not in read:
                    raise self.error(line, f"`{local}` is bound by a statement that is not its one line: "
                                     "derivatives.yaml has one expression per gradient; assign it once "
                                     f"(a branch as `{local} = ... if ... else None`)")
                bound.add(local)
        found += [_Assignment(last, statement, value, line_inputs) for line_inputs, value in expressions]
        return tuple(self.line(item, names, arguments, inputs) for item in found)

    def lines_of(self, closure: cst.FunctionDef, keys: dict[str, str], names: dict[str, str],
                 arguments: tuple[frozenset[str], frozenset[str]], written: str | None = None
                 ) -> tuple[FormulaLine, ...]:
        """The formula assignments of a closure as YAML lines: those whose targets are
        the tangent (or gradient) locals ``keys`` names (Python local -> YAML name);
        ``written``: in an in-place operator's jvp, the written input's tangent (``to_main``)."""
        found, _ = self.assignments(closure, keys)
        return tuple(self.line(item, names, arguments, (), written) for item in found)

    def assignments(self, closure: cst.FunctionDef, keys: dict[str, str], tensor_inputs: tuple[str, ...] = ()
                    ) -> tuple[list[FormulaLine | _Assignment], dict[cst.CSTNode, tuple[str, ...]]]:
        """The lines of a closure, in order: each assignment to locals ``keys`` names, a refusal's
        line (``not_implemented``, with ``tensor_inputs``); and the body statements read (those,
        and the list an element loop fills), each with the locals it binds."""
        lines: list[FormulaLine | _Assignment] = []
        read: dict[cst.CSTNode, tuple[str, ...]] = {}
        looped = {loop[0] for line in closure.body.body if (loop := _element_loop(line)) is not None}
        for line in closure.body.body:
            top = line
            match line:
                case cst.SimpleStatementLine(body=[cst.Assign(targets=[cst.AssignTarget(target=target)],
                                                              value=cst.List(elements=[]))]) if (
                        isinstance(target, cst.Name) and target.value in looped):
                    read[line] = ()     # the element loop after it is the line
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
                    read[line] = ()
                    continue
                case _:
                    continue
            targets = [e.value for e in target.elements] if isinstance(target, cst.Tuple) else [target]
            idents = [t.value for t in targets if isinstance(t, cst.Name)]
            if len(idents) != len(targets) or not any(i in keys for i in idents):
                continue     # a prelude statement such as ``grads = [...]``
            unnamed = [i for i in idents if i not in keys]
            if unnamed:
                kind = "gradient" if closure.name.value == "backward" else "tangent"
                raise self.error(statement, f"`{unnamed[0]}` is no {kind} the {closure.name.value} returns: a "
                                 "derivatives.yaml line gives each name of its key one item of the tuple; return it "
                                 "or leave it out of the targets")
            read[top] = tuple(idents)
            lines.append(_Assignment(line, statement, value, tuple(keys[i] for i in idents)))
        return lines, read

    def line(self, item: FormulaLine | _Assignment, names: dict[str, str],
             arguments: tuple[frozenset[str], frozenset[str]], tensor_inputs: tuple[str, ...],
             written: str | None = None) -> FormulaLine:
        """One line of :meth:`assignments` as YAML: an assignment's expression as C++, its ``# yaml:``
        original while the Python is still that, else printed from its tree with its ``# cpp:``
        layout (``grad_input_mask``: the flags of the inputs the line is for)."""
        if isinstance(item, FormulaLine):
            return item
        line, statement, value, line_inputs = item
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
        mask = mask_positions(line_inputs, tensor_inputs) if tensor_inputs else None
        formula = self.original(statement, comment_text, tree, arguments, mask, written)
        if formula is None:
            if tensor_inputs and (mask is not None or len(line_inputs) == 1):
                tree = self.line_mask(statement, tree, line_inputs, tensor_inputs)
            formula = cpp.render(cpp.print_tokens(tree), self.layout(statement, comment_text))
        return FormulaLine(", ".join(line_inputs), formula)

    def line_mask(self, statement: cst.CSTNode, tree: Node, line_inputs: tuple[str, ...],
                  tensor_inputs: tuple[str, ...]) -> Node:
        """``tree`` with the formula's flags ``grad_input_mask[k]`` (``needs_input_grad``: one per tensor
        input) as the line's own (torchgen's ``grad_input_mask`` of a line has one flag per input
        its key names, in the key's order; a one-input line has none: its flag is ``true`` there);
        a flag of another input, or the whole mask, has no spelling there (DB300)."""
        def flag(node: Node) -> Node | None:
            match node:
                case Index(Name(name), Literal("number", index)) if name == GRAD_INPUT_MASK and index.isdigit():
                    position = int(index)
                    if position < len(tensor_inputs) and tensor_inputs[position] in line_inputs:
                        if len(line_inputs) == 1:       # torchgen runs a one-input line only when
                            return Literal("bool", "true")  # its input needs a gradient, no mask
                        return Index(Name(GRAD_INPUT_MASK), Literal("number", str(line_inputs.index(
                            tensor_inputs[position]))))
                    raise self.error(statement, f"`{NEEDS_INPUT_GRAD}[{index}]` is not the flag of an input this "
                                     f"line is for ({', '.join(line_inputs)}): derivatives.yaml's "
                                     f"`{GRAD_INPUT_MASK}` holds only those")
                case Name(name) if name == GRAD_INPUT_MASK:
                    raise self.error(statement, f"`{NEEDS_INPUT_GRAD}` has a flag per tensor input "
                                     f"({', '.join(tensor_inputs)}), derivatives.yaml's `{GRAD_INPUT_MASK}` one per "
                                     f"input this line is for ({', '.join(line_inputs)}): pass "
                                     f"`[{NEEDS_INPUT_GRAD}[i], ...]` in the line's order")
            return None
        return rewrite(tree, flag)

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


def _is_none(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _has_comment(node: cst.CSTNode) -> bool:
    """Whether a comment sits anywhere in ``node``, its whitespace included (a tree walk rather
    than ``libcst.matchers.findall``: importing the matchers costs emit-yaml more than it reads)."""
    return isinstance(node, cst.Comment) or any(_has_comment(child) for child in node.children)


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)
