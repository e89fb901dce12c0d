"""derivatives.yaml to Python formula files (``transpile import-yaml``).

Each entry (each dispatch section of an entry) becomes one ``@derivative``
function: the forward calls the operator, a nested ``backward`` holds one
assignment per gradient line (``grad_self = ...``, ``grad_self, grad_other =
...`` for a line that computes several inputs at once), and a nested ``jvp``
holds the forward-mode lines (``result_t = ...``). Formulas are translated by
parsing the C++ (:mod:`.cpp`) and printing the tree in the Python dialect
(:mod:`.pydialect`); every translation is checked to parse back to the same
tree. An entry that cannot be translated is a DB301 naming the entry; the
other entries are still imported.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

import yaml

from transpiler import codes
from transpiler.diagnostics import Diagnostic, TranspileError, unplaced
from transpiler.schema import FunctionSchema, ListType, SchemaError, parse_schema
from transpiler.yaml_import import cpp, pydialect
from transpiler.yaml_import.main_dialect import GRAD_INPUT_MASK, MATH, mask_positions, to_main
from transpiler.yaml_import.model import (
    AUTO_JVP,
    NEEDS_INPUT_GRAD,
    NON_DIFFERENTIABLE,
    ORIGINAL_SELF,
    Entry,
    FormulaLine,
    Section,
    differentiable_outputs,
    full_output_differentiability,
    implied_output_differentiability,
    gradient_locals,
    is_backward_line,
    return_names,
    tangent_locals,
)
from transpiler.yaml_import.pyformula import Assignment, Closure, PyFormula, Refusal, module_source
from transpiler.yaml_import.syntax import INTEGER_OPERATORS, Binary, Lambda, Member, Name, Node, Qualified, Unary, walk

ENTRIES_PER_FILE = 32
FORMULA_FILE_PREFIX = "derivatives_"
GENERATED_MARKER = "by `transpile import-yaml` (@generated)"
DIALECT_IMPORTS = ("cpp", "yaml_entry")
# Python modules the main dialect's formulas use (``math.pi`` for derivatives.yaml's ``M_PI``)
PYTHON_MODULES = (MATH,)
# Free names that torchgen's generated node provides rather than libtorch: whether the
# graph is retained, and the element index of a ``_foreach_`` formula (applied per element).
FOREACH_INDEX = "i"
NODE_VALUES = ("retain_variables", FOREACH_INDEX)

_YamlLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def untranslated(path: str, line: int, entry: str, message: str) -> Diagnostic:
    """The DB301 of an entry left out of the import."""
    return Diagnostic(path, line, 1, codes.IMPORT_YAML_ENTRY.code, f"entry `{entry}`: {message}")


@dataclass(frozen=True)
class ImportResult:
    """What an import gives: the files to write, how many entries were translated, the ones left out."""

    files: dict[str, str]          # file name -> text, for the output directory
    imported: int                  # entries translated
    problems: tuple[Diagnostic, ...]  # entries left out (DB301)

    def summary(self) -> str:
        """A line saying how many entries were imported, into how many formula files, and how many failed."""
        total = self.imported + len(self.problems)
        formula_files = sum(1 for name in self.files if name.startswith(FORMULA_FILE_PREFIX))
        return (f"imported {self.imported} of {total} entries into {formula_files} formula files; "
                f"{len(self.problems)} could not be translated")


# --------------------------------------------------------------------------- YAML

def read_entries(text: str) -> list[Entry | str]:
    """The entries of a derivatives.yaml, in order (a malformed item becomes the reason it is)."""
    items = yaml.load(text, Loader=_YamlLoader) or []
    return [_entry(item) for item in items]


def entry_lines(text: str) -> list[int]:
    """1-based line number of each item of the top-level list, in order (every item, so a
    malformed one does not shift the lines of those after it)."""
    root = yaml.compose(text, Loader=_YamlLoader)
    if not isinstance(root, yaml.SequenceNode):
        return []
    return [item.start_mark.line + 1 for item in root.value]


def _entry(item: object) -> Entry | str:
    """The entry an item of the YAML list describes, or why it describes none."""
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return "an item without a `name: <schema>` string"
    flags = item.get("output_differentiability")
    if flags is not None and not (isinstance(flags, list) and all(isinstance(f, (bool, str)) for f in flags)):
        return "output_differentiability must be a list of booleans or condition strings"
    if "dispatch" in item:
        dispatch = item["dispatch"]
        if not isinstance(dispatch, dict):
            return "dispatch must map dispatch keys to formulas"
        raw_sections = [(key, value) for key, value in dispatch.items()]
    else:
        raw_sections = [(None, {k: v for k, v in item.items() if k not in ("name", "output_differentiability")})]
    sections = []
    for key, formulas in raw_sections:
        if not isinstance(formulas, dict) or not all(isinstance(v, str) for v in formulas.values()):
            return f"the formulas of {key or 'the entry'} must be `name: formula` strings"
        sections.append(Section(key, tuple(FormulaLine(str(k), v) for k, v in formulas.items())))
    return Entry(item["name"], None if flags is None else tuple(flags), tuple(sections))


# --------------------------------------------------------------------------- translation

def translate_expression(source: str, names: dict[str, str], non_tensors: frozenset[str] = frozenset(),
                         integers: frozenset[str] = frozenset(), mask: tuple[int, ...] | None = None,
                         written_tangent: str | None = None) -> tuple[str, Node, cpp.Layout, str | None]:
    """A C++ formula as a Python expression of the main dialect (:mod:`.main_dialect`), its tree,
    its layout, and the original formula when the main dialect rewrote it (else None); checked to
    round-trip (else raises a DB301 for :func:`import_yaml` to place at the entry). ``non_tensors``:
    the entry's arguments that are not tensors; ``integers``: those that are integers; ``mask``:
    where the line's ``grad_input_mask`` flags are in ``needs_input_grad`` (``mask_positions``);
    ``written_tangent``: an in-place operator's jvp line, the written input's tangent (``to_main``)."""
    try:
        tree = cpp.parse(source)
        main = to_main(tree, non_tensors, integers=integers, mask=mask, written_tangent=written_tangent)
        python = pydialect.to_python(main, names)
        back = pydialect.from_python(python, pydialect.inverse_names(names))
    except TranspileError as error:
        raise _untranslatable(f"cannot translate `{source}`: {error.diagnostics[0].message}") from None
    if back != main:
        raise _untranslatable(f"`{source}` has no faithful Python spelling (operator precedence differs); "
                              "parenthesize it in the YAML")
    if main != tree:
        return python, main, {}, source
    printed = cpp.print_tokens(tree)
    return python, tree, cpp.layout_of(source, printed), None


def _untranslatable(message: str) -> TranspileError:
    """Why an entry cannot be translated, raised below :func:`import_yaml` (which names the entry)."""
    return unplaced(codes.IMPORT_YAML_ENTRY.code, message)


def non_tensor_arguments(schema: FunctionSchema) -> frozenset[str]:
    """The arguments of ``schema`` that are not tensors (their methods are not operators)."""
    tensors = {a.name for a in schema.tensor_inputs}
    return frozenset(a.name for a in schema.arguments if a.name not in tensors)


def integer_arguments(schema: FunctionSchema) -> frozenset[str]:
    """The arguments of ``schema`` that are integers (``int``, ``SymInt``), for integer division."""
    return frozenset(a.name for a in schema.arguments if str(a.type) in ("int", "SymInt"))


def written_tangent(schema: FunctionSchema) -> str | None:
    """The tangent of the one input an in-place operator writes (``self_t``), whose update in its
    jvp (``self_t.copy_(v)``) is the new tangent; None for a functional or out= operator."""
    written = [a.name for a in schema.arguments if a.annotation is not None and a.annotation.is_write]
    return f"{written[0]}_t" if len(written) == 1 and not schema.out else None


def free_names(trees: list[Node]) -> set[str]:
    """Plain identifiers the trees read (lambda parameters excluded)."""
    found, bound = set(), set()
    for tree in trees:
        for node in walk(tree):
            if isinstance(node, Name):
                found.add(node.ident)
            elif isinstance(node, Lambda):
                bound.update(name for _, name in node.params)
    return found - bound


def dialect_names(trees: list[Node]) -> set[str]:
    """Names the Python spelling needs besides plain identifiers: namespaces and ``cpp``."""
    needed = set()
    for tree in trees:
        for node in walk(tree):
            if isinstance(node, Qualified) and node != pydialect.NULLOPT:
                needed.add("cpp" if node.rooted else node.parts[0])
            elif isinstance(node, Lambda) or (isinstance(node, Member) and node.arrow) or (
                    isinstance(node, Unary) and node.op == "*") or (
                    isinstance(node, Binary) and node.op in INTEGER_OPERATORS.values()):
                needed.add("cpp")
    return needed


def translate_section(entry: Entry, section: Section, schema: FunctionSchema
                      ) -> tuple[PyFormula, set[str], set[str]]:
    """One section as a PyFormula (still unnamed: :func:`import_yaml` names the functions once
    every external name is known), with the external names and dialect names it uses."""
    outputs = return_names(schema)
    arg_names = tuple(a.name for a in schema.arguments if not a.is_out)
    local = pydialect.local_names((*arg_names, *outputs))
    backward_lines = [line for line in section.lines if is_backward_line(line, schema)]
    forward_lines = [line for line in section.lines if not is_backward_line(line, schema)]
    non_diff = tuple(line.key for line in backward_lines if line.formula == NON_DIFFERENTIABLE)
    gradient_lines = [line for line in backward_lines if line.formula != NON_DIFFERENTIABLE]
    diff_args = [a for a in arg_names if any(a in line.names for line in gradient_lines)]

    flags = implied_output_differentiability(schema, entry.output_differentiability,
                                             [line.formula for line in gradient_lines])
    if flags is None and non_diff and not gradient_lines:
        # torchgen builds no node when every input with a line is non_differentiable and none has
        # a gradient: no output carries a gradient (``special_airy_ai``'s is not a zero-gradient one)
        flags = (False,) * len(schema.returns)
    backward, backward_trees = _backward(schema, flags, gradient_lines, local)
    details: list[tuple[str, object]] = []
    if flags is not entry.output_differentiability:
        details.append(("output_differentiability", None))     # torchgen's rule gave @derivative's flags
    if section.dispatch is not None:
        details.append(("dispatch", section.dispatch))
    if non_diff:
        details.append(("non_differentiable", non_diff))
    ignored, refused = unmentioned_inputs(schema, gradient_lines, non_diff)
    if ignored:
        details.append(("ignores_grad", ignored))
    if refused:
        details.append(("refuses_grad", refused))
    jvp, jvp_trees = None, []
    auto = [line for line in forward_lines if line.formula in AUTO_JVP]
    if auto:
        if len(forward_lines) != 1 or auto[0].key != "result":
            raise _untranslatable(f"`{auto[0].formula}` is supported only as the single `result:` forward line")
        details.append(("jvp", auto[0].formula))
    elif forward_lines:
        jvp, jvp_trees = _jvp(schema, diff_args, forward_lines, local)
    full_flags = full_output_differentiability(schema, flags)
    if entry.output_differentiability is not None and full_flags != entry.output_differentiability:
        details.append(("output_differentiability", entry.output_differentiability))

    backward_locals = {*arg_names, *outputs, *backward.params, "grad", "grads", GRAD_INPUT_MASK,
                       *(f"grad_{o}" for o in outputs)}
    jvp_locals = {*arg_names, *outputs, *ORIGINAL_SELF, *(f"{a}_t" for a in arg_names),
                  *(f"{a}_p" for a in arg_names)}
    externals = (free_names(backward_trees) - backward_locals) | (free_names(jvp_trees) - jvp_locals)
    modules = externals & set(PYTHON_MODULES)       # imported as themselves, not declared external
    externals -= modules
    formula = PyFormula(
        function="",
        schema=entry.name,
        output_differentiability=full_flags,
        entry_details=tuple(details),
        params=tuple(local.get(a, a) for a in arg_names),
        outputs=tuple(local.get(o, o) for o in outputs),
        forward_call=forward_call(schema, local),
        backward=backward,
        jvp=jvp,
    )
    needed = dialect_names(backward_trees + jvp_trees) | ({"yaml_entry"} if details else set()) | modules
    return formula, externals, needed


#: The one tensor input torchgen lets require grad without a line of its entry: "Double-backwards
#: definitions sometimes take in 'input' and 'output', but only define the derivative for input"
#: (``gen_variable_type.emit_check_no_requires_grad``).
UNCHECKED_INPUT = "output"


def unmentioned_inputs(schema: FunctionSchema, gradient_lines: list[FormulaLine], non_diff: tuple[str, ...]
                       ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The tensor inputs of an entry with gradient lines that no line names, as torchgen treats them:
    ``(ignored, refused)``. It gives them no edge of the node, so no output carries a gradient through
    them; one that requires grad (in grad mode) raises "The function 'op' is not differentiable with
    respect to argument 'name'" (``check_no_requires_grad``), except :data:`UNCHECKED_INPUT`, which
    it ignores as it does a ``non_differentiable`` one (``_standard_gamma_grad``'s ``output``). An
    entry without a gradient line (every input ``non_differentiable``, or forward lines alone) has
    none: torchgen's node then takes every input."""
    if not gradient_lines:
        return (), ()
    named = {name for line in gradient_lines for name in line.names}
    unmentioned = [a.name for a in schema.tensor_inputs if a.name not in named and a.name not in non_diff]
    return (tuple(n for n in unmentioned if n == UNCHECKED_INPUT),
            tuple(n for n in unmentioned if n != UNCHECKED_INPUT))


def forward_call(schema: FunctionSchema, local: dict[str, str]) -> str:
    """The forward: the operator on the formula's arguments, keyword-only ones by keyword
    (``at.gelu(self, approximate=approximate)``)."""
    args = [local.get(a.name, a.name) for a in schema.positional]
    args += [f"{local.get(a.name, a.name)}={local.get(a.name, a.name)}" for a in schema.kwarg_only]
    return f"at.{schema.name.base}({', '.join(args)})"


NOT_IMPLEMENTED = re.compile(r'not_implemented\("(?P<name>[^"\\]*)"\)')
"""A gradient line torch refuses: the backward raises its NotImplementedError (:class:`Refusal`)."""


def _backward(schema: FunctionSchema, flags: tuple[bool | str, ...] | None, lines: list[FormulaLine],
              local: dict[str, str]) -> tuple[Closure, list[Node]]:
    """The nested ``def backward``: one assignment per gradient line, one gradient returned
    per tensor input (``None`` for an input without a formula, or one torch refuses with
    ``not_implemented("name")``: the backward raises torch's error when it is asked for)."""
    names = {**local, GRAD_INPUT_MASK: NEEDS_INPUT_GRAD}
    targets = gradient_locals(schema)
    trees, assignments = [], []
    tensor_inputs = tuple(a.name for a in schema.tensor_inputs)
    for line in lines:
        refused = NOT_IMPLEMENTED.fullmatch(line.formula)
        if refused is not None and len(line.names) == 1 and line.names[0] in tensor_inputs:
            assignments.append(Refusal(tensor_inputs.index(line.names[0]), refused["name"]))
            continue
        python, tree, layout, original = translate_expression(line.formula, names, non_tensor_arguments(schema),
                                                              integer_arguments(schema),
                                                              mask_positions(line.names, tensor_inputs))
        trees.append(tree)
        assignments.append(Assignment(tuple(targets[n] for n in line.names), python, layout, original))
    used = free_names(trees)
    params, prelude = _gradient_params(schema, flags, return_names(schema), used)
    assigned = {n for assignment in assignments if isinstance(assignment, Assignment) for n in assignment.targets}
    returns = tuple(targets[a.name] if targets[a.name] in assigned else "None" for a in schema.tensor_inputs)
    refuses = any(isinstance(assignment, Refusal) for assignment in assignments)
    mask = (NEEDS_INPUT_GRAD,) if GRAD_INPUT_MASK in used or refuses else ()
    loop = _element_loop(schema, assignments, params, used)
    return Closure("backward", params, mask, prelude, tuple(assignments), returns, loop), trees


def _element_loop(schema: FunctionSchema, assignments: list[Assignment | Refusal], params: tuple[str, ...],
                  used: set[str]) -> str | None:
    """The gradient list a ``_foreach_`` backward loops over when its lines read the element index
    ``i`` (torchgen applies each line to every element of the lists), else None."""
    if not schema.name.base.startswith("_foreach_") or FOREACH_INDEX not in used:
        return None
    if params != ("grads",) or not all(isinstance(a, Assignment) and len(a.targets) == 1 for a in assignments):
        raise _untranslatable("a `_foreach_` formula is applied per element only as one gradient list `grads` "
                              "and one input per line")
    return "grads"


def _gradient_params(schema: FunctionSchema, flags: tuple[bool | str, ...] | None, outputs: tuple[str, ...],
                     used: set[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """backward's parameters (one per differentiable output) and the statements that
    bind the names the formulas use for them (``grad`` is the first output's gradient,
    ``grads`` the list of them, ``grad_<output>`` a named one)."""
    indices = differentiable_outputs(schema, flags)
    if len(indices) == 1:
        named = [f"grad_{outputs[indices[0]]}"]
        for candidate in ("grads", "grad", *named):
            if candidate in used:
                return (candidate,), ()
        return ("grad",), ()
    params = tuple(f"grad_{outputs[i]}" for i in indices)
    prelude = []
    if "grads" in used:
        prelude.append(f"grads = [{', '.join(params)}]")
    if "grad" in used and params:
        prelude.append(f"grad = {params[0]}")
    return params, tuple(prelude)


def primal_names(schema: FunctionSchema, diff_args: Iterable[str], local: dict[str, str]) -> dict[str, str]:
    """C++ to Python names inside ``jvp``: the primal ``x_p`` of a (non-list)
    differentiable input is the input itself, so it is spelled ``x``."""
    primals = {f"{a}_p": local.get(a, a) for a in diff_args if not isinstance(schema.argument(a).type, ListType)}
    return {**local, **primals}


def _jvp(schema: FunctionSchema, diff_args: list[str], lines: list[FormulaLine], local: dict[str, str]
         ) -> tuple[Closure, list[Node]]:
    """The nested ``def jvp``: tangents in, one tangent per forward line out (``x_t`` keep their names)."""
    names = primal_names(schema, diff_args, local)
    trees, assignments = [], []
    targets = tangent_locals(schema)
    for line in lines:
        python, tree, layout, original = translate_expression(line.formula, names, non_tensor_arguments(schema),
                                                              integer_arguments(schema),
                                                              written_tangent=written_tangent(schema))
        trees.append(tree)
        if not all(n in targets for n in line.names):
            raise _untranslatable(f"`{line.key}` names neither an input nor an output")
        assignments.append(Assignment(tuple(targets[n] for n in line.names), python, layout, original))
    used = free_names(trees)
    params = [f"{a}_t" for a in diff_args]
    params += [f"{a}_p" for a in diff_args if f"{a}_p" in used and f"{a}_p" not in names]
    params += [name for name in ORIGINAL_SELF if name in used]
    returns = tuple(t for a in assignments for t in a.targets)
    return Closure("jvp", tuple(params), (), (), tuple(assignments), returns), trees


# --------------------------------------------------------------------------- files

def function_name(entry: Entry, section: Section, taken: set[str]) -> str:
    """A Python name no other module-level name has: ``max_dim``, ``mean__AutogradNestedTensor``
    for a dispatch key, ``sigmoid_backward_formula`` when formulas call the C++ ``sigmoid_backward``."""
    base = pydialect.escape(entry.op_name.replace(".", "_"), plain=True)
    if section.dispatch not in (None, "Default"):
        base = f"{base}__{section.dispatch}"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_formula" if n == 2 else f"{base}_formula_{n - 1}"
    taken.add(name)
    return name


@dataclass(frozen=True)
class _Translated:
    """One entry's functions and the module-level names they need."""

    entry: Entry
    formulas: tuple[PyFormula, ...]
    externals: frozenset[str]
    dialect: frozenset[str]


def import_yaml(text: str, path: str = "derivatives.yaml") -> ImportResult:
    """Translate a derivatives.yaml; the files of the output directory and the problems."""
    translated, problems = _translate_entries(text, path)
    all_externals = set().union(*(t.externals for t in translated))
    taken = {pydialect.escape(n, plain=True) for n in all_externals}
    taken |= {"at", "derivative", *DIALECT_IMPORTS, *pydialect.NAMESPACES}
    translated = [replace(t, formulas=tuple(replace(f, function=function_name(t.entry, s, taken))
                                            for f, s in zip(t.formulas, t.entry.sections)))
                  for t in translated]
    files = {}
    for start in range(0, len(translated), ENTRIES_PER_FILE):
        chunk = translated[start:start + ENTRIES_PER_FILE]
        doc = (f"Imported entries {start + 1} to {start + len(chunk)} of {Path(path).name}, "
               "by `transpile import-yaml` (@generated).")
        files[f"{FORMULA_FILE_PREFIX}{start // ENTRIES_PER_FILE:03d}.py"] = _module(doc, chunk)
    files["externals.py"] = externals_source(all_externals)
    files["__init__.py"] = f'"""Formulas imported from {Path(path).name} {GENERATED_MARKER}."""\n'
    return ImportResult(files, len(translated), tuple(problems))


def _translate_entries(text: str, path: str) -> tuple[list[_Translated], list[Diagnostic]]:
    """Every entry translated, or a problem naming it."""
    lines = entry_lines(text)
    translated: list[_Translated] = []
    problems: list[Diagnostic] = []
    for index, entry in enumerate(read_entries(text)):
        line = lines[index] if index < len(lines) else 1
        if isinstance(entry, str):
            problems.append(untranslated(path, line, f"#{index}", entry))
            continue
        try:
            schema = parse_schema(entry.name)
            results = [translate_section(entry, section, schema) for section in entry.sections]
        except SchemaError as error:
            problems.append(untranslated(path, line, entry.name, str(error)))
            continue
        except TranspileError as error:
            problems.append(untranslated(path, line, entry.name, error.diagnostics[0].message))
            continue
        translated.append(_Translated(entry, tuple(r[0] for r in results),
                                      frozenset().union(*(r[1] for r in results)),
                                      frozenset().union(*(r[2] for r in results))))
    return translated, problems


def left_out_entries(text: str, result: ImportResult) -> dict[str, Diagnostic]:
    """Operator name (``name.overload``) -> the DB301 of each entry of ``text`` that ``result`` left out."""
    by_line = {problem.line: problem for problem in result.problems}
    left_out = {}
    for line, entry in zip(entry_lines(text), read_entries(text)):
        if isinstance(entry, Entry) and line in by_line:
            try:
                left_out[str(parse_schema(entry.name).name)] = by_line[line]
            except SchemaError:
                left_out[entry.name] = by_line[line]
    return left_out


def _module(docstring: str, chunk: list[_Translated]) -> str:
    """One formula file: the chunk's functions, importing exactly the names they use."""
    externals = set().union(*(c.externals for c in chunk))
    dialect = set().union(*(c.dialect for c in chunk)) - {"at"}
    modules = tuple(sorted(dialect & set(PYTHON_MODULES)))
    dialect -= set(modules)
    imports = tuple(sorted(dialect, key=lambda n: (n not in DIALECT_IMPORTS, n))) + tuple(
        sorted(pydialect.escape(n, plain=True) for n in externals))
    return module_source(docstring, imports, tuple(f for c in chunk for f in c.formulas), modules)


def externals_source(names: set[str]) -> str:
    """``externals.py``: the dialect names and one ``external(...)`` per C++ name the formulas use
    (``node_value(...)`` for the names the autograd node itself provides)."""
    declarations = ["namespace", *(["external"] if names - set(NODE_VALUES) else []),
                    *(["node_value"] if names & set(NODE_VALUES) else [])]
    lines = [
        '"""C++ names the imported formulas call: FunctionsManual helpers, ATen/c10 functions, types'
        " and constants (@generated by `transpile import-yaml`).\"\"\"",
        "from __future__ import annotations",
        "",
        f"from transpiler.yaml_import.dialect import {', '.join(sorted([*DIALECT_IMPORTS, *declarations]))}",
        "",
        "__all__ = [",
        *(f"    {name!r}," for name in (*DIALECT_IMPORTS, *pydialect.NAMESPACES[1:],
                                       *sorted(pydialect.escape(n, plain=True) for n in names))),
        "]",
        "",
    ]
    lines += [f"{ns} = namespace({ns!r})" for ns in pydialect.NAMESPACES[1:]]
    lines += [f"{pydialect.escape(n, plain=True)} = {'node_value' if n in NODE_VALUES else 'external'}({n!r})"
              for n in sorted(names)]
    return "\n".join(lines) + "\n"
