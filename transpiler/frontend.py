"""Front-end: formula files (statically, with libcst) to the typed model.

``parse_module(path, source)`` never raises on bad input. A file that does
not parse gives a ``DB000`` diagnostic; a formula that does not have the
required shape (DESIGN section 2) gives ``DB107`` and is left out of
``FormulaModule.formulas``. Nothing read here is imported or executed.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import keyword
import re
from dataclasses import replace
from collections.abc import Collection, Iterator, Mapping, Sequence
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import libcst as cst
from libcst._nodes.internal import CodegenState

from transpiler import codes, model_cache
from transpiler.dataflow import (
    FlowResult,
    ValueKind,
    analyze_body,
    assigned_names,
    assignment_names,
    at_operator,
    scope_names,
    closure_reads,
    global_reads,
    dotted_name,
    syntax_children,
    walk,
)
from transpiler.diagnostics import Diagnostic
from transpiler.family import MalformedMember, Member, family_members, stray_member
from transpiler.metadata import METADATA_METHODS
from transpiler.model import (
    CallSite,
    Capture,
    CaptureKind,
    Closure,
    ClosureRole,
    Formula,
    FormulaModule,
    Helper,
    HelperParam,
    JvpRule,
    Library,
    Positions,
    Span,
)
from transpiler.sources import (
    UndecodableSource,
    caused_by_recursion,
    python_sources,
    read_source,
    too_deep,
    too_large_for_formulas,
)
from transpiler.schema import Argument, FunctionSchema, SchemaError, parse_schema

if TYPE_CHECKING:   # imported where a jvp is derived: most runs derive none
    from transpiler.derive_jvp import OperatorTable

BACKWARD = "backward"
JVP = "jvp"
ORIGINAL_SELF = ("original_self_t", "original_self_p")   # derivatives.yaml's names in in-place jvps
NEEDS_INPUT_GRAD = "needs_input_grad"


_NEWLINE = re.compile(r"\r\n?|\n")


class _StartPositions(CodegenState):
    """Where every node of a module starts, as libcst's ``PositionProvider`` computes it (the
    same codegen pass, the same syntactic positions) but keeping only the starts: no end
    positions, no range objects, no generator per syntactic node, no code text; about a third
    of its cost.

    A node starts where its codegen starts (recorded before it, so no stack), unless it records
    a syntactic position inside (its own tokens, past its leading whitespace), which replaces
    that; a node met twice keeps its first start, as libcst's first ``setdefault``."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.line, self.column = 1, 0           # 1-based line, 0-based column, as libcst's
        self.starts: dict[cst.CSTNode, tuple[int, int]] = {}

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.add_token(token)

    def add_token(self, value: str) -> None:    # the text itself is not kept: only where it ends
        if "\n" in value or "\r" in value:
            segments = _NEWLINE.split(value)
            self.line += len(segments) - 1
            self.column = len(segments[-1])
        else:
            self.column += len(value)

    def pop_trailing_newline(self) -> None:     # the file's end: no node starts after it
        pass

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.starts.setdefault(node, (self.line, self.column))

    def after_codegen(self, node: cst.CSTNode) -> None:
        pass

    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None) -> _SyntacticStart:
        return _SyntacticStart(self, node, start_node)


class _SyntacticStart:
    """``with state.record_syntactic_position(node)``: the node starts where its own tokens do
    (or where ``start_node`` does), not where its leading whitespace does."""

    def __init__(self, state: _StartPositions, node: cst.CSTNode, start_node: cst.CSTNode | None) -> None:
        # taken here: libcst enters the block as soon as it asks for it, nothing is written between
        self.state, self.node, self.start_node, self.start = state, node, start_node, (state.line, state.column)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc_info: object) -> None:
        starts = self.state.starts
        starts[self.node] = starts[self.start_node] if self.start_node is not None else self.start


def start_positions(tree: cst.Module) -> dict[cst.CSTNode, tuple[int, int]]:
    """(line, 0-based column) where each node of ``tree`` starts, as libcst's ``PositionProvider``."""
    state = _StartPositions(tree)
    tree._codegen(state)
    return state.starts


class MalformedFormula(Exception):
    """A formula that does not have the required shape: becomes a DB107."""

    def __init__(self, node: cst.CSTNode, message: str) -> None:
        super().__init__(message)
        self.node = node
        self.message = message


@functools.lru_cache(maxsize=1024)
def parse_module(path: str, source: str) -> FormulaModule:
    """Build the typed model of one formula file; diagnostics instead of exceptions.

    Pure and memoised: the model is immutable, so the passes of one process
    (lint, then the C++ emitter, in ``transpile``) share one parse per file, and
    ``transpile`` keeps it between runs (:mod:`transpiler.model_cache`).
    """
    cache = model_cache.active()
    return cache.parse(path, source, _parse_module) if cache is not None else _parse_module(path, source)


def _parse_module(path: str, source: str) -> FormulaModule:
    return replace(_read_source(path, source), source_digest=source_digest(path, source))


def source_digest(path: str, source: str) -> str:
    """The hash of a formula file's path and text (:attr:`FormulaModule.source_digest`)."""
    digest = hashlib.blake2b(digest_size=20)
    for part in (path, source):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


def _read_source(path: str, source: str) -> FormulaModule:
    too_large = too_large_for_formulas(path, source)
    if too_large is not None:
        return FormulaModule(path, (), (), (), (too_large,))
    try:
        tree = cst.parse_module(source)
    except (cst.ParserSyntaxError, cst.CSTValidationError) as error:   # the latter: a name that is no identifier
        return FormulaModule(path, (), (), (), (_syntax_diagnostic(path, source, error),))
    except RecursionError:
        return FormulaModule(path, (), (), (), (too_deep(path, source),))
    try:
        return read_tree(path, tree)
    except Exception as error:
        if not caused_by_recursion(error):
            raise
        return FormulaModule(path, (), (), (), (too_deep(path, source),))


def read_tree(path: str, tree: cst.Module, operators: OperatorTable | None = None) -> FormulaModule:
    """The model of an already parsed file; its nodes are ``tree``'s own (for codemods).
    ``operators``: what ``jvp="derived"`` formulas are derived against (None: left pending)."""
    positions = Positions(start_positions(tree))
    return _ModuleReader(path, tree, positions, operators).read()


SHIPPED_LIBRARY = Path(__file__).resolve().parent.parent / "formulas"


def load_library(directory: str, files: Sequence[Path] | None = None) -> Library:
    """Every ``*.py`` file under ``directory`` (sorted by path; ``files``: those of them), one
    FormulaModule each, with the ``jvp="derived"`` formulas' jvps derived (:func:`with_derived_jvps`)."""
    files = python_sources(directory).files if files is None else files
    library = Library(tuple(read_module(str(p)) for p in files))
    if not any(f.derives_jvp for f in library.formulas):
        return library
    same = Path(directory).resolve() == SHIPPED_LIBRARY
    return with_derived_jvps(library, None if same else load_library(str(SHIPPED_LIBRARY)))


def operator_table(*libraries: Library) -> OperatorTable:
    """The formulas, helpers and non-differentiable operators of ``libraries`` (later ones win)."""
    from transpiler.derive_jvp import OperatorTable

    formulas, helpers, nondifferentiable = {}, {}, {}
    for library in libraries:
        formulas.update((f.op_name, f) for f in library.formulas)
        helpers.update((h.name, h) for h in library.helpers)
        nondifferentiable.update((str(s.name), s) for m in library.modules for s in m.nondifferentiable)
    return OperatorTable(formulas, helpers, nondifferentiable)


def with_derived_jvps(library: Library, context: Library | None = None) -> Library:
    """``library`` with the jvp of each ``jvp="derived"`` formula derived from its backward against
    the operators of ``context`` (the shipped library, for another package) and ``library``; a
    formula whose backward cannot be transposed is a DB107 naming the step."""
    operators = operator_table(*([context] if context is not None else []), library)
    return Library(tuple(_derived(module, operators) if _derives(module) else module for module in library.modules))


def derivation_refusals(modules: Sequence[FormulaModule], context: Sequence[FormulaModule],
                        sources: Mapping[str, str] | None = None) -> list[Diagnostic]:
    """The DB107 of each ``jvp="derived"`` formula of ``modules`` whose backward cannot be
    transposed, derived as ``transpile`` derives it (:func:`with_derived_jvps`, against the operators
    of ``context`` and ``modules``), for ``transpile lint``, which reads ``modules`` without deriving.
    ``sources``: their texts by path where already read (stdin, fixed files); the rest are read."""
    deriving = [module for module in modules if _derives(module)]
    if not deriving:
        return []
    operators = operator_table(Library(tuple(context)), Library(tuple(modules)))
    found = []
    for module in deriving:
        derived = _derived(module, operators, (sources or {}).get(module.path))
        found += [d for d in derived.diagnostics if d not in module.diagnostics]
    return found


def _derives(module: FormulaModule) -> bool:
    return any(f.derives_jvp for f in module.formulas)


def _derived(module: FormulaModule, operators: OperatorTable, source: str | None = None) -> FormulaModule:
    """``module`` read again (from ``source``, or its file) with its derived jvps derived against ``operators``."""
    return read_tree(module.path, cst.parse_module(read_source(module.path) if source is None else source), operators)


def read_module(path: str, memoised: bool = True) -> FormulaModule:
    """Read (PEP 263) and parse one formula file; undecodable bytes are its DB000. ``memoised``:
    through :func:`parse_module`'s memo (False: the model is the caller's alone, its trees freed
    with it: the reference engine keeps only plain facts of it)."""
    try:
        source = read_source(path)
    except UndecodableSource as problem:
        return FormulaModule(path, (), (), (), (problem.diagnostic,))
    return (parse_module if memoised else parse_module.__wrapped__)(path, source)


def _syntax_diagnostic(path: str, source: str, error: cst.ParserSyntaxError | cst.CSTValidationError) -> Diagnostic:
    """DB000 at the error; Python's own parser gives the most precise location and words."""
    # libcst's own location; a node it refuses to build has none (the file's start)
    line, col = (error.raw_line, error.raw_column + 1) if isinstance(error, cst.ParserSyntaxError) else (1, 1)
    try:
        ast.parse(source)
    except ValueError:  # NUL bytes: Python refuses before parsing
        message = "the file contains a NUL byte"
    except SyntaxError as python_error:
        line, col = python_error.lineno or 1, python_error.offset or 1
        message = python_error.msg
    else:  # a construct libcst does not know yet
        message = error.message if isinstance(error, cst.ParserSyntaxError) else str(error)
    return Diagnostic(path, line, col, codes.UNPARSABLE.code, f"cannot parse the file: {message}; fix the syntax error")


class _ModuleReader:
    """Reads the top-level statements of one parsed file into a FormulaModule."""

    def __init__(self, path: str, tree: cst.Module, positions: Positions,
                 operators: OperatorTable | None = None) -> None:
        self.path = path
        self.tree = tree
        self.positions = positions
        self.operators = operators
        self.diagnostics: list[Diagnostic] = []

    def read(self) -> FormulaModule:
        functions = [s for s in self.tree.body if isinstance(s, cst.FunctionDef)]
        helper_returns = {f.name.value: self.annotation(f.returns) for f in functions}
        helpers = tuple(self.helper(f) for f in functions if find_decorator(f, "helper") is not None)
        formulas = []
        for function in functions:
            decorator = find_decorator(function, "derivative")
            if decorator is None:
                if (stray := stray_member(function)) is not None:
                    self.report(stray, codes.FORMULA_SHAPE.code, "@family_member without @derivative declares nothing; "
                                "put it below the @derivative of the family's body")
                continue
            members: tuple[Member, ...] = ((function, decorator),)
            try:    # a formula family: one formula per member (transpiler/family.py)
                members, origins = family_members(function, decorator)
                self.positions.add_copies(origins)
            except MalformedMember as problem:
                self.report(problem.node, codes.FORMULA_SHAPE.code, problem.message)
            for member, member_decorator in members:
                try:
                    formulas.append(self.formula(member, member_decorator, helper_returns))
                except MalformedFormula as problem:
                    self.report(problem.node, codes.FORMULA_SHAPE.code, problem.message)
        nondifferentiable = tuple(
            schema for statement in self.tree.body if isinstance(statement, cst.SimpleStatementLine)
            for schema in self.nondifferentiable(statement)
        )
        return FormulaModule(
            self.path, tuple(formulas), helpers, nondifferentiable, tuple(self.diagnostics),
            positions=self.positions, function_returns=helper_returns,
        )

    # ---- helpers ---------------------------------------------------------------
    def report(self, node: cst.CSTNode, code: str, message: str) -> None:
        span = self.positions[node]
        self.diagnostics.append(Diagnostic(self.path, span.line, span.col, code, message))

    def annotation(self, annotation: cst.Annotation | None) -> str | None:
        """The source text of an annotation (``list[int]``), None when absent."""
        return self.tree.code_for_node(annotation.annotation) if annotation is not None else None

    def helper(self, function: cst.FunctionDef) -> Helper:
        params = tuple(
            HelperParam(p.name.value, self.annotation(p.annotation), p.default)
            for p in (*function.params.params, *function.params.kwonly_params)
        )
        return Helper(self.path, function.name.value, self.positions[function], params,
                      self.annotation(function.returns), function, frozenset(assigned_names(function.body.body)),
                      closure_facts(function).calls, references(function))

    def nondifferentiable(self, line: cst.SimpleStatementLine) -> Iterator[FunctionSchema]:
        for small in line.body:
            if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
                continue
            call = small.value
            name = dotted_name(call.func)
            if name is None or name.rsplit(".", 1)[-1] != "nondifferentiable":
                continue
            for arg in call.args:
                text = _string_value(arg.value)
                if text is None:
                    self.report(arg.value, codes.FORMULA_SHAPE.code, "nondifferentiable() takes schema strings; "
                                "write each schema as a string literal")
                    continue
                try:
                    yield parse_schema(text)
                except SchemaError as error:
                    self.report(arg.value, codes.FORMULA_SHAPE.code, f"schema does not parse: {error}; "
                                "write it in native_functions.yaml syntax")

    # ---- formulas --------------------------------------------------------------
    def formula(self, function: cst.FunctionDef, decorator: cst.Decorator,
                helper_returns: Mapping[str, str | None]) -> Formula:
        schema, output_diff, jvp_rule = self.decorator_arguments(decorator)
        dispatch_node, dispatch = yaml_dispatch_key(function)
        without_gradient = (*yaml_entry_names(function, "non_differentiable"), *yaml_entry_names(function, "ignores_grad"))
        params = self.check_params(function, schema)
        body = list(function.body.body) if isinstance(function.body, cst.IndentedBlock) else []
        backward_index, backward_def = self.find_backward(function, body)
        jvp_index, jvp_def = self.find_jvp(body, jvp_rule)
        final_return = self.check_final_return(function, body)
        forward = tuple(s for i, s in enumerate(body[:-1]) if i not in (backward_index, jvp_index))
        for statement in forward:
            stray = _find_return(statement)
            if stray is not None:
                raise MalformedFormula(stray, "the forward returns early; a formula ends with a single "
                                       "`return <outputs>, backward`")
        returned = self.returned(final_return, schema)
        outputs = tuple(item.value if isinstance(item, cst.Name) else None for item in returned)
        grads, mask = self.backward_params(backward_def, schema, output_diff)
        facts = forward_dataflow(schema, params, function, backward_def, helper_returns)
        closure_scope = _ClosureScope(function, params, outputs, facts)
        backward = self.closure(ClosureRole.BACKWARD, backward_def, self.positions[backward_def], grads,
                                backward_index, closure_scope, needs_input_grad=mask)
        jvp = None
        derived = jvp_rule is not None and jvp_rule[0] is JvpRule.DERIVED
        if jvp_def is not None or (jvp_rule is not None and not derived):
            jvp = self.jvp(schema, params, backward, jvp_def, jvp_index, jvp_rule, closure_scope)
        formula = Formula(
            path=self.path,
            function=function.name.value,
            span=self.positions[function],
            schema=schema,
            schema_node=next(a.value for a in decorator.decorator.args if a.keyword is None),
            output_differentiability=output_diff,
            differentiable_outputs=tuple(i for i, flag in enumerate(schema.output_flags(output_diff)) if flag),
            params=params,
            differentiable_inputs=tuple(replace(a, name=python_name(a.name)) for a in schema.tensor_inputs),
            outputs=outputs,
            returned=returned,
            returned_display=final_return.value.elements[0].value,
            rebound_inputs=frozenset(p for p in params if p in facts.bindings),
            forward=forward,
            forward_flow=facts,
            backward=backward,
            node=function,
            jvp=jvp,
            derives_jvp=derived,
            dispatch=dispatch,
            dispatch_node=dispatch_node,
            inputs_without_gradient=tuple(python_name(n) for n in without_gradient),
            inputs_refusing_grad=tuple(python_name(n) for n in yaml_entry_names(function, "refuses_grad")),
            references=references(function) | (references(jvp.node, closure_scope.locals)   # a synthesised jvp's too
                                                if jvp is not None and jvp.index is None else frozenset()),
        )
        if derived and self.operators is not None:
            from transpiler.derive_jvp import DerivationRefused, derive_jvp

            try:
                node = derive_jvp(formula, self.operators)
            except DerivationRefused as refusal:
                raise MalformedFormula(jvp_rule[1], f"jvp=\"derived\": the backward cannot be transposed: "
                                       f"{refusal.reason}; write a nested `def jvp(...)`") from None
            jvp = self.jvp(schema, params, backward, node, None, jvp_rule, closure_scope)
            formula = replace(formula, jvp=jvp, references=formula.references | references(node, closure_scope.locals))
        return formula

    def decorator_arguments(self, decorator: cst.Decorator
                            ) -> tuple[FunctionSchema, tuple[bool, ...] | None, tuple[JvpRule, cst.Arg] | None]:
        call = decorator.decorator
        if not isinstance(call, cst.Call):
            raise MalformedFormula(decorator, "@derivative needs the operator schema: "
                                   "@derivative(\"name.overload(Tensor self, ...) -> Tensor\")")
        positional = [a for a in call.args if a.keyword is None]
        text = _string_value(positional[0].value) if positional else None
        if text is None or len(positional) != 1:
            raise MalformedFormula(call, "@derivative takes the schema as one string literal argument")
        try:
            schema = parse_schema(text)
        except SchemaError as error:
            raise MalformedFormula(positional[0].value, f"schema does not parse: {error}; "
                                   "write it in native_functions.yaml syntax") from None
        output_diff = None
        jvp_rule = None
        for arg in call.args:
            if arg.keyword is None:
                continue
            if arg.keyword.value == JVP:
                jvp_rule = (_jvp_rule(arg), arg)
                continue
            if arg.keyword.value != "output_differentiability":
                raise MalformedFormula(arg, f"@derivative has no argument `{arg.keyword.value}`; "
                                       "only output_differentiability=[...] and jvp=\"auto_linear\" / "
                                       "\"auto_element_wise\"")
            output_diff = _bool_list(arg.value)
            if output_diff is None:
                raise MalformedFormula(arg.value, "output_differentiability must be a literal list of "
                                       "True/False, one per schema return")
            if len(output_diff) != len(schema.returns):
                raise MalformedFormula(arg.value, f"output_differentiability has {len(output_diff)} entries "
                                       f"but the schema has {len(schema.returns)} returns; give one per return")
        return schema, output_diff, jvp_rule

    def check_params(self, function: cst.FunctionDef, schema: FunctionSchema) -> tuple[str, ...]:
        params = function.params
        if isinstance(params.star_arg, cst.Param) or params.star_kwarg is not None:
            raise MalformedFormula(params, "a formula takes exactly the schema's arguments, "
                                   "no *args or **kwargs")
        names = tuple(p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params))
        expected = tuple(python_name(a.name) for a in schema.arguments if not a.is_out)
        if names != expected:
            raise MalformedFormula(function.name, f"parameters ({', '.join(names)}) do not match the schema's "
                                   f"arguments ({', '.join(expected)}); use the same names in the same order")
        return names

    def find_backward(self, function: cst.FunctionDef, body: list[cst.BaseStatement]
                      ) -> tuple[int, cst.FunctionDef]:
        found = [(i, s) for i, s in enumerate(body) if isinstance(s, cst.FunctionDef) and s.name.value == BACKWARD]
        if not found:
            lambdas = [t for s in body if isinstance(s, cst.SimpleStatementLine) for a in s.body
                       if isinstance(a, cst.Assign) and isinstance(a.value, cst.Lambda)
                       for t in a.targets if isinstance(t.target, cst.Name) and t.target.value == BACKWARD]
            if lambdas:
                raise MalformedFormula(lambdas[0].target, "backward is a lambda; write it as a nested "
                                       "`def backward(...)` taking one gradient per differentiable output "
                                       "(a lambda's defaults would hide what it captures)")
            raise MalformedFormula(function.name, "the formula has no nested `def backward(...)`; define one "
                                   "taking one gradient per differentiable output")
        if len(found) > 1:
            raise MalformedFormula(found[1][1].name, "the formula defines `backward` twice; keep one")
        return found[0]

    def find_jvp(self, body: list[cst.BaseStatement], rule: tuple[JvpRule, cst.Arg] | None
                 ) -> tuple[int | None, cst.FunctionDef | None]:
        found = [(i, s) for i, s in enumerate(body) if isinstance(s, cst.FunctionDef) and s.name.value == JVP]
        if len(found) > 1:
            raise MalformedFormula(found[1][1].name, "the formula defines `jvp` twice; keep one")
        if found and rule is not None:
            raise MalformedFormula(rule[1], f"the formula defines `jvp` and declares jvp=\"{rule[0].value}\"; "
                                   "keep one of them")
        return found[0] if found else (None, None)

    def jvp(self, schema: FunctionSchema, params: tuple[str, ...], backward: Closure,
            written: cst.FunctionDef | None, index: int | None, rule: tuple[JvpRule, cst.Arg] | None,
            scope: _ClosureScope) -> Closure:
        """The written ``def jvp`` checked, or the one its rule stands for (see :func:`synthesise_jvp`)."""
        if rule is not None and rule[0] is JvpRule.DERIVED:
            node, span, kind = written, self.positions[rule[1]], JvpRule.DERIVED
        elif written is not None:
            node, span, kind = written, self.positions[written], JvpRule.WRITTEN
            self.check_jvp_params(node, schema)
        else:
            kind, arg = rule
            node, span = synthesise_jvp(kind, schema, params, backward, arg), self.positions[arg]
        names = tuple(p.name.value for p in node.params.params)
        return self.closure(ClosureRole.JVP, node, span, names, index, scope, rule=kind)

    def check_jvp_params(self, node: cst.FunctionDef, schema: FunctionSchema) -> None:
        params = node.params
        if params.star_kwarg is not None or isinstance(params.star_arg, cst.Param) or params.posonly_params \
                or params.kwonly_params or any(p.default is not None for p in params.params):
            raise MalformedFormula(params, "jvp takes tangents `<input>_t` (and, in the derivatives.yaml "
                                   "dialect, primals `<input>_p`) as plain parameters; no defaults, *, ** or `/`")
        differentiable = {python_name(a.name) for a in schema.tensor_inputs}
        inputs = {python_name(a.name) for a in schema.arguments if not a.is_out}
        for param in params.params:
            name = param.name.value
            if name.endswith("_t") and name[:-2] in differentiable:
                continue
            if name.endswith("_p") and name[:-2] in inputs:
                continue
            if name in ORIGINAL_SELF and "self" in inputs:   # in-place ops: self before the write
                continue
            raise MalformedFormula(param, f"jvp parameter `{name}` is neither the tangent `<input>_t` of a "
                                   f"differentiable input ({', '.join(sorted(differentiable))}) nor a primal "
                                   "`<input>_p`; name it after the input")

    def check_final_return(self, function: cst.FunctionDef, body: list[cst.BaseStatement]) -> cst.Return:
        last = body[-1] if body else function
        statement = last.body[0] if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 else None
        if not isinstance(statement, cst.Return):
            raise MalformedFormula(last, "the formula does not end with `return <outputs>, backward`; "
                                   "return the outputs and the closure last")
        value = statement.value
        if (
            not isinstance(value, cst.Tuple) or len(value.elements) != 2
            or not isinstance(value.elements[1].value, cst.Name)
            or value.elements[1].value.value != BACKWARD
            or isinstance(value.elements[0], cst.StarredElement)
        ):
            raise MalformedFormula(statement, "the formula does not end with `return <outputs>, backward`; "
                                   "return the outputs and the closure last")
        return statement

    def returned(self, final_return: cst.Return, schema: FunctionSchema) -> tuple[cst.BaseExpression, ...]:
        """The returned output expressions, one per schema return."""
        value = final_return.value.elements[0].value
        if isinstance(value, (cst.Tuple, cst.List)):
            items = [e.value for e in value.elements]
            if len(items) != len(schema.returns) or len(schema.returns) == 1:
                raise MalformedFormula(value, f"returns {len(items)} outputs as a tuple but the schema has "
                                       f"{len(schema.returns)}; return one name per schema return, "
                                       "a tuple only when there are several")
        else:
            items = [value]
            if len(schema.returns) != 1:
                raise MalformedFormula(value, f"the schema has {len(schema.returns)} returns; return them "
                                       "as a tuple of names: `return (a, b), backward`")
        return tuple(items)

    def backward_params(self, node: cst.FunctionDef, schema: FunctionSchema,
                        output_diff: tuple[bool, ...] | None) -> tuple[tuple[str, ...], str | None]:
        """The backward's gradient parameters and its mask parameter (None when not declared), checked."""
        params = node.params
        if params.star_kwarg is not None or isinstance(params.star_arg, cst.Param) or params.posonly_params:
            raise MalformedFormula(params, "backward takes one gradient per differentiable output and "
                                   "optionally `*, needs_input_grad`; no *args, **kwargs or `/`")
        mask = None
        for kwonly in params.kwonly_params:
            if kwonly.name.value != NEEDS_INPUT_GRAD:
                raise MalformedFormula(kwonly, f"backward has keyword-only parameter "
                                       f"`{kwonly.name.value}`; the only one allowed is `{NEEDS_INPUT_GRAD}`")
            mask = kwonly.name.value
        # a parameter with a default is not a gradient: it binds a forward value (a capture)
        grads = tuple(p.name.value for p in params.params if p.default is None)
        expected = differentiable_output_count(schema, output_diff)
        if len(grads) != expected:
            raise MalformedFormula(node.name, f"backward takes {len(grads)} gradient(s) but the formula has "
                                   f"{expected} differentiable output(s); take one gradient per output")
        return grads, mask

    def closure(self, role: ClosureRole, node: cst.FunctionDef, span: Span, params: tuple[str, ...],
                index: int | None, scope: _ClosureScope, needs_input_grad: str | None = None,
                rule: JvpRule = JvpRule.WRITTEN) -> Closure:
        """The model of one closure: its own facts and its captures (see :meth:`captures`)."""
        rebound, returns, calls = closure_facts(node)
        return Closure(role, node, span, params, self.captures(node, span, scope), index, rebound, returns,
                       calls, needs_input_grad, rule)

    # ---- captures --------------------------------------------------------------
    def captures(self, closure: cst.FunctionDef, span: Span, scope: _ClosureScope) -> tuple[Capture, ...]:
        """Every forward name ``closure`` reads (its parameters' defaults included), classified, in
        order of first use; a synthesised closure's reads have no position: they are at ``span``."""
        first_uses = self.first_uses(closure, scope.forward_names)
        metadata = metadata_reads(closure, first_uses)
        captures = []
        for name, first_use in first_uses.items():
            kind, reason = classify_capture(name, scope.params, scope.outputs, scope.facts)
            bindings = [b for b in scope.facts.bindings.get(name, []) if b.value is not None]
            definition = bindings[-1].value if bindings else None
            captures.append(Capture(name, kind, self.positions.get(first_use, span), definition, reason,
                                    metadata[name]))
        return tuple(sorted(captures, key=lambda capture: capture.first_use))

    def first_uses(self, closure: cst.FunctionDef, forward_names: set[str]) -> dict[str, cst.Name]:
        """For each forward name ``closure`` reads, the read that comes first in the source (the
        reads are met in evaluation order: a comprehension's iterable before its element); of a
        synthesised closure, the first read met."""
        uses: dict[str, cst.Name] = {}
        defaults = [n for d in _backward_defaults(closure) for n in _names_read(d, forward_names)]
        for read in [*defaults, *closure_reads(closure, forward_names)]:
            current = uses.get(read.value)
            if current is None or _earlier(self.positions.get(read), self.positions.get(current)):
                uses[read.value] = read
        return uses


def _earlier(position: Span | None, than: Span | None) -> bool:
    """Whether ``position`` comes before ``than`` in the source; a synthesised node's (None) is
    compared with nothing, so the first read met stays."""
    return position is not None and than is not None and position < than


class _ClosureScope:
    """What a formula's closures may read from its forward, and how each name is classified."""

    def __init__(self, function: cst.FunctionDef, params: tuple[str, ...], outputs: tuple[str | None, ...],
                 facts: FlowResult) -> None:
        self.params, self.outputs, self.facts = params, outputs, facts
        scope = scope_names(function)
        self.locals = scope.local      # what shadows a module-level name in the formula's body
        # a name the forward declares ``global`` and binds is forward state a closure can read
        assigned_globals = {name for name in scope.globals if name in facts.bindings}
        self.forward_names = (set(scope.local) | assigned_globals) - {BACKWARD, JVP}


def python_name(argument: str) -> str:
    """The parameter name for a schema argument: ``from`` (a Python keyword) is spelled ``from_``."""
    return f"{argument}_" if keyword.iskeyword(argument) else argument


def parameter_arguments(schema: FunctionSchema, params: tuple[str, ...]) -> dict[str, Argument]:
    """The schema argument of each formula parameter (matched by order, see :func:`python_name`)."""
    return dict(zip(params, (a for a in schema.arguments if not a.is_out)))


def differentiable_output_count(schema: FunctionSchema, output_diff: tuple[bool, ...] | None) -> int:
    """How many gradients a backward takes: tensor returns marked differentiable."""
    return sum(schema.output_flags(output_diff))


def forward_dataflow(schema: FunctionSchema, params: tuple[str, ...], function: cst.FunctionDef,
                     backward: cst.FunctionDef, helper_returns: Mapping[str, str | None]) -> FlowResult:
    """Run the dataflow over a formula's body (everything but the backward and the final return)."""
    env = {
        name: ValueKind.TENSOR if argument.is_tensor_like else ValueKind.SCALAR
        for name, argument in parameter_arguments(schema, params).items()
    }
    body = function.body.body if isinstance(function.body, cst.IndentedBlock) else ()
    return analyze_body(body, env, helper_returns=helper_returns,
                        skip=lambda node: node is backward or (isinstance(node, cst.FunctionDef)
                                                              and node.name.value == JVP))


def synthesise_jvp(rule: JvpRule, schema: FunctionSchema, params: tuple[str, ...], backward: Closure,
                   where: cst.CSTNode) -> cst.FunctionDef:
    """The ``def jvp`` a rule stands for (derivatives.yaml's ``auto_element_wise`` / ``auto_linear``).

    * ``auto_element_wise`` (one tensor input, one differentiable output, the op
      applied element by element): the Jacobian is diagonal, so the JVP is the
      backward applied to the tangent, ``jvp(self_t) = backward(self_t)`` (real
      dtypes; torch conjugates before and after for complex ones).
    * ``auto_linear`` (the op is linear in its tensor arguments taken together:
      every ``Tensor`` argument is differentiable and enters linearly): the JVP is
      the op applied to the tangents, the other arguments unchanged:
      ``add(self, other, alpha)`` -> ``add(self_t, other_t, alpha=alpha)``.
    """
    arguments = parameter_arguments(schema, params)
    tensors = [name for name, arg in arguments.items() if arg.is_differentiable]
    tangents = ", ".join(f"{name}_t" for name in tensors)
    if rule is JvpRule.AUTO_ELEMENT_WISE:
        if len(tensors) != 1 or len(backward.params) != 1 or backward.needs_input_grad is not None:
            raise MalformedFormula(where, "jvp=\"auto_element_wise\" needs one tensor input, one differentiable "
                                   "output and a backward without needs_input_grad; write `def jvp` instead")
        head = cst.parse_statement(f"def jvp({tangents}):\n    {backward.params[0]} = {tangents}\n")
        body = (*head.body.body, *backward.node.body.body)
        return head.with_changes(body=head.body.with_changes(body=body))
    keyword_only = {a.name for a in schema.arguments if a.kwarg_only}
    args = ", ".join(
        (f"{name}=" if arguments[name].name in keyword_only else "") + (f"{name}_t" if name in tensors else name)
        for name in params)
    return cst.parse_statement(f"def jvp({tangents}):\n    return at.{schema.name.base}({args})\n")


def _jvp_rule(arg: cst.Arg) -> JvpRule:
    text = _string_value(arg.value)
    rules = [r for r in JvpRule if r is not JvpRule.WRITTEN]
    for rule in rules:
        if text == rule.value:
            return rule
    raise MalformedFormula(arg.value, "jvp= takes \"auto_linear\", \"auto_element_wise\" or \"derived\"; "
                           "otherwise write a nested `def jvp(...)`")


def classify_capture(name: str, params: tuple[str, ...], outputs: tuple[str | None, ...],
                     facts: FlowResult) -> tuple[CaptureKind, str]:
    """The CaptureKind of a forward name the backward reads, and why when ILLEGAL."""
    kind = facts.env.get(name, ValueKind.SCALAR)
    rebound = name in facts.bindings
    if name in params and not rebound:
        return CaptureKind.INPUT, ""
    if name in outputs:  # also an input rebound before being returned: the capture is the output
        return CaptureKind.OUTPUT, ""
    if kind == ValueKind.TENSOR:
        if name in params:
            return CaptureKind.ILLEGAL, f"input `{name}` is rebound in the forward, so it holds an intermediate"
        return CaptureKind.ILLEGAL, f"`{name}` is a tensor computed in the forward"
    if kind == ValueKind.VALUE:
        return CaptureKind.ILLEGAL, f"`{name}` is read from a tensor's values"
    if kind == ValueKind.METADATA:
        return CaptureKind.METADATA, ""
    return CaptureKind.SCALAR, ""


def metadata_reads(closure: cst.FunctionDef, names: Collection[str]) -> dict[str, tuple[str, ...]]:
    """For each of ``names``, the metadata methods (``x.sizes()``, ``x.size(0)``...) through which
    ``closure``'s body reads it, sorted; () when the body reads it otherwise too, or not at all.
    Nested functions are not entered."""
    methods: dict[str, set[str] | None] = {name: set() for name in names}
    receivers: set[int] = set()   # Name nodes that are not a use of their value
    for node in walk(closure.body, lambda child: type(child) is not cst.FunctionDef):
        kind = type(node)   # leaf classes: ``type``, not the ABCs' slow ``isinstance``
        if kind is cst.Call:
            func = node.func
            if (type(func) is cst.Attribute and type(func.value) is cst.Name
                    and func.attr.value in METADATA_METHODS):
                found = methods.get(func.value.value)
                if found is not None:
                    found.add(func.attr.value)
                    receivers.add(id(func.value))
        elif kind is cst.Attribute:
            receivers.add(id(node.attr))   # ``x.name``: the attribute name is not a use
        elif kind is cst.Name and node.value in methods and id(node) not in receivers:
            methods[node.value] = None     # read otherwise: not metadata only
    return {name: tuple(sorted(found or ())) for name, found in methods.items()}


#: Capture kinds whose cell always holds what the forward bound, and never a forward tensor.
_SETTLED_CAPTURES = (CaptureKind.INPUT, CaptureKind.METADATA)


def settled_captures(formula: Formula) -> frozenset[str]:
    """The backward's captures a runtime need not look at: inputs the forward never rebinds
    (they hold the arguments) and metadata (sizes, dims, dtypes and what is computed from
    them: never a tensor), less any name a nested function declares ``nonlocal`` (it could
    rebind the cell). The reference engine's capture plan: every other captured cell is
    inspected when a node is recorded."""
    rebindable = _nonlocal_names(formula.node)
    return frozenset(c.name for c in formula.captures
                     if c.kind in _SETTLED_CAPTURES and c.name not in rebindable)


def _nonlocal_names(node: cst.CSTNode) -> set[str]:
    if isinstance(node, cst.Nonlocal):
        return {item.name.value for item in node.names}
    names: set[str] = set()
    for child in syntax_children(node):
        names |= _nonlocal_names(child)
    return names


def yaml_dispatch_key(function: cst.FunctionDef) -> tuple[cst.Decorator | None, str | None]:
    """The ``@yaml_entry(dispatch="<key>")`` decorator of an imported formula and its key; (None, None)
    when it declares none (or not as a string literal)."""
    decorator = find_decorator(function, "yaml_entry")
    if decorator is None or not isinstance(decorator.decorator, cst.Call):
        return None, None
    for arg in decorator.decorator.args:
        if arg.keyword is not None and arg.keyword.value == "dispatch":
            key = _string_value(arg.value)
            return (decorator, key) if key is not None else (None, None)
    return None, None


def yaml_entry_names(function: cst.FunctionDef, keyword: str) -> tuple[str, ...]:
    """The input names an imported formula's ``@yaml_entry(<keyword>=("output",))`` lists (the
    string literals of a tuple or list; () when it lists none)."""
    decorator = find_decorator(function, "yaml_entry")
    if decorator is None or not isinstance(decorator.decorator, cst.Call):
        return ()
    for arg in decorator.decorator.args:
        if arg.keyword is not None and arg.keyword.value == keyword and isinstance(arg.value, (cst.Tuple, cst.List)):
            names = (_string_value(element.value) for element in arg.value.elements)
            return tuple(name for name in names if name is not None)
    return ()


def find_decorator(function: cst.FunctionDef, name: str) -> cst.Decorator | None:
    """The decorator ``@name``/``@name(...)``/``@pkg.name(...)`` of ``function``, if any."""
    for decorator in function.decorators:
        expression = decorator.decorator
        target = expression.func if isinstance(expression, cst.Call) else expression
        dotted = dotted_name(target)
        if dotted is not None and dotted.rsplit(".", 1)[-1] == name:
            return decorator
    return None


def _string_value(node: cst.BaseExpression) -> str | None:
    if not isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        return None
    try:
        value = node.evaluated_value
    except (SyntaxError, ValueError):  # e.g. a NUL byte inside the literal
        return None
    return value if isinstance(value, str) else None


def _bool_list(node: cst.BaseExpression) -> tuple[bool, ...] | None:
    if not isinstance(node, (cst.List, cst.Tuple)):
        return None
    values = []
    for element in node.elements:
        if not (isinstance(element.value, cst.Name) and element.value.value in ("True", "False")):
            return None
        values.append(element.value.value == "True")
    return tuple(values)


def _backward_defaults(backward: cst.FunctionDef) -> list[cst.BaseExpression]:
    """Default values of the backward's parameters: evaluated in the forward, read as captures."""
    params = backward.params
    return [p.default for p in (*params.params, *params.kwonly_params) if p.default is not None]


def _names_read(expression: cst.BaseExpression, names: set[str]) -> list[cst.Name]:
    """Reads of ``names`` in an expression evaluated in the forward's own scope."""
    holder = cst.Lambda(params=cst.Parameters(), body=expression)
    return list(closure_reads(holder, names))


class BodyFacts(NamedTuple):
    """What :func:`closure_facts` finds in a function's body."""

    rebound: frozenset[str]           # what its own body rebinds (see :func:`~transpiler.dataflow.assigned_names`)
    returns: tuple[cst.Return, ...]   # its own ``return`` statements
    calls: tuple[CallSite, ...]       # its calls by name, nested functions included, in source order


def closure_facts(function: cst.FunctionDef) -> BodyFacts:
    """What a closure's own body (nested functions not entered) rebinds and returns, and the calls
    by name of its whole body (``at.X(...)`` as the operator ``X``, ``f(...)`` / ``m.f(...)`` as
    the function ``f``), in one walk."""
    rebound: set[str] = set()
    returns: list[cst.Return] = []
    calls: list[CallSite] = []
    stack: list[tuple[cst.CSTNode, bool]] = [(function.body, True)]   # (node, in the function's own scope)
    while stack:
        node, own = stack.pop()
        kind = type(node)       # leaf classes: ``type``, not the ABCs' slow ``isinstance``
        if own:
            if kind is cst.Return:
                returns.append(node)
            else:
                rebound.update(assignment_names(node))
        if kind is cst.Call:
            call = _call_site(node)
            if call is not None:
                calls.append(call)
        stack.extend(zip(reversed(syntax_children(node)), repeat(own and kind is not cst.FunctionDef)))
    return BodyFacts(frozenset(rebound), tuple(returns), tuple(calls))


def references(function: cst.FunctionDef, shadowed: Collection[str] = ()) -> frozenset[str]:
    """The module-level names ``function`` reads (:func:`~transpiler.dataflow.global_reads`; ``shadowed``:
    the locals of the function it stands in): :attr:`Formula.references`, :attr:`Helper.references`."""
    return frozenset(name.value for name in global_reads(function, shadowed))


def _call_site(node: cst.Call) -> CallSite | None:
    operator = at_operator(node)
    if operator is not None:
        return CallSite(node, operator, True)
    dotted = dotted_name(node.func)
    if dotted is None or dotted.split(".", 1)[0] == "at":
        return None
    return CallSite(node, dotted.rsplit(".", 1)[-1], False)


def _find_return(node: cst.CSTNode) -> cst.Return | None:
    """A ``return`` in forward code (not inside a nested function or lambda)."""
    kind = type(node)       # leaf classes: ``type``, not the ABCs' slow ``isinstance``
    if kind is cst.Return:
        return node
    if kind is cst.FunctionDef or kind is cst.ClassDef or kind is cst.Lambda:
        return None
    for child in syntax_children(node):
        found = _find_return(child)
        if found is not None:
            return found
    return None

