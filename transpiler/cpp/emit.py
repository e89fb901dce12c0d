"""A whole formula library -> the files of ``out_cpp/`` (name -> text), deterministically.

Layout (one translation unit per formula module, so ninja compiles them in
parallel and a change to one module recompiles one file):

* ``runtime.h``: fixed support code (:mod:`transpiler.cpp.runtime`);
* ``helpers.h`` / ``helpers.cpp``: every ``@helper`` as a C++ function in
  ``formulas::helpers``;
* ``<module>.cpp``: the nodes, backward functions and forward wrappers of the
  formulas of ``formulas/<module>.py`` and their ``TORCH_LIBRARY_FRAGMENT``.
"""
from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

import libcst as cst

from transpiler import module_results
from transpiler.module_results import all_of
from transpiler.cpp import types as T
from transpiler.cpp.expressions import (
    DUPLICATE_OPERATOR, OVERLOAD_SEPARATOR, UNSUPPORTED, UNSUPPORTED_TYPE, Binding, Context, HelperSignature, HelperTable,
    Untranslatable, cpp_name,
)
from transpiler.cpp.emit_once import emit_formula, translate_helper
from transpiler.cpp.nodes import emit_nondifferentiable, node_name
from transpiler.cpp.operators import method_only_source
from transpiler.cpp.runtime import ATEN_OVERRIDE_BOXED_HEADER, ATEN_OVERRIDE_HEADER, RUNTIME_HEADER, VIEWS_HEADER, VMAP_HEADER
from transpiler.cpp.signature import borrowed_param, is_view
from transpiler.diagnostics import Diagnostic, printable
from transpiler.model import Formula, FormulaModule, Helper, Library
from transpiler.schema import FunctionSchema


@dataclass(frozen=True)
class Output:
    """What ``transpile`` writes: file name -> text, plus counts for the summary."""

    files: dict[str, str]
    ops: int
    nodes: int
    helpers: int


class ModuleFile(NamedTuple):
    """One formula module's part of the output, as kept between runs (:mod:`transpiler.module_results`)."""

    text: str | None                      # its ``.cpp`` (None: nothing emitted)
    ops: int                              # operators emitted
    has_views: bool                       # it needs ``views.h``
    diagnostics: tuple[Diagnostic, ...]   # what it refused
    nodes: tuple[str, ...]                # the node names it took
    registered: tuple[str, ...]           # the non-differentiable operators it registered
    has_vmap_rules: bool = False          # it needs ``vmap.h`` (an operator taking a list of tensors)


def _diagnostic(module: FormulaModule, error: Untranslatable) -> Diagnostic:
    try:
        span = module.span(error.node)
        line, col = span.line, span.col
    except KeyError:   # a node synthesised by the emitter: point at the file
        line, col = 1, 1
    return Diagnostic(module.path, line, col, error.code, error.message)


def operator_table(library: Library, known: Mapping[str, FunctionSchema] | None = None,
                   ) -> dict[str, tuple[FunctionSchema, ...]]:
    """``at`` base name -> declared overloads, in declaration order: the library's own,
    then ``known`` ones (another library's operators it may call) it does not declare."""
    declared = dict(library.operators)
    for name, schema in (known or {}).items():
        declared.setdefault(name, schema)
    table: dict[str, list[FunctionSchema]] = {}
    for schema in declared.values():
        table.setdefault(schema.name.base, []).append(schema)
    return {name: tuple(schemas) for name, schemas in table.items()}


def helper_signature(helper: Helper, module: FormulaModule) -> HelperSignature:
    """The C++ signature of a formula helper, from its annotations (Untranslatable without one)."""
    params = []
    for param in helper.params:
        if param.annotation is None:
            raise Untranslatable(helper.node, UNSUPPORTED_TYPE,
                                 f"helper '{helper.name}' parameter '{param.name}' needs a type annotation")
        params.append((param.name, _annotation(param.annotation, helper), param.default))
    returns = _annotation(helper.returns, helper) if helper.returns is not None else T.NONE
    return HelperSignature(helper.name, tuple(params), returns)


def _annotation(text: str, helper: Helper) -> T.PyType:
    try:
        return T.from_annotation(text)
    except (T.UnsupportedType, T.TypeConflict):
        raise Untranslatable(helper.node, UNSUPPORTED_TYPE,
                             f"helper '{helper.name}': no C++ type for annotation '{text}'") from None


def _return_spelling(ty: T.PyType) -> str:
    return "void" if ty.kind is T.Kind.NONE else T.cpp_value(ty)


def _helper_declaration(signature: HelperSignature, by_value: set[str]) -> str:
    params = ", ".join(
        f"{T.cpp_value(ty) if name in by_value else borrowed_param(ty)} {cpp_name(name)}"
        for name, ty, _ in signature.params)
    return f"{_return_spelling(signature.returns)} {cpp_name(signature.name)}({params})"


def _kept_helpers_files(library: Library, context: Context, context_key: str | None,
                        ) -> tuple[str, str, tuple[Diagnostic, ...]]:
    """:func:`_helpers_files`, kept between runs under the text of every helper's module."""
    kept = module_results.active()
    digests = {m.path: m.source_digest for m in library.modules}
    helpers = [(h.path, h.name, digests[h.path]) for h in library.helpers]
    if kept is None or context_key is None or not all(digest for _, _, digest in helpers):
        return _helpers_files(library, context)
    key = module_results.key("helpers", context_key, helpers)
    found = kept.get(key, lambda kept: isinstance(kept, tuple) and len(kept) == 3 and all_of(str, kept[:2])
                     and all_of(Diagnostic, kept[2]))
    if found is None:
        found = _helpers_files(library, context)
    kept.put(key, found)
    return found


def _helpers_files(library: Library, context: Context) -> tuple[str, str, tuple[Diagnostic, ...]]:
    """``helpers.h``, ``helpers.cpp`` and what could not be transliterated."""
    diagnostics: list[Diagnostic] = []
    declarations, definitions = [], []
    called: set[str] = set()
    modules = {m.path: m for m in library.modules}
    for helper in library.helpers:
        signature = context.helpers[helper.name]
        by_value = helper.rebound & {p[0] for p in signature.params}
        declaration = _helper_declaration(signature, by_value)
        scope = replace(context, called=set()).bind({
            n: Binding(t, cpp_name(n), borrowed=n not in by_value and is_view(t)) for n, t, _ in signature.params})
        try:
            body = translate_helper(helper, scope, signature.returns)     # once per run (lint's check, then the output)
        except Untranslatable as error:
            diagnostics.append(_diagnostic(modules[helper.path], error))
            continue
        called |= scope.called
        declarations.append(f"{declaration};")
        definitions.append("\n".join([f"{declaration} {{", *body.lines, "}", ""]))
    header = "\n".join([
        "// @generated by transpiler.cpp from the @helper functions: do not edit.",
        "#pragma once",
        "",
        '#include "runtime.h"',
        "",
        "namespace formulas::helpers {",
        "",
        *declarations,
        "",
        "}  // namespace formulas::helpers",
        "",
    ])
    source_body = "\n".join(definitions)
    source = "\n".join([
        "// @generated by transpiler.cpp from the @helper functions: do not edit.",
        '#include "helpers.h"',
        "",
        *_operator_includes(called),
        "",
        "namespace formulas::helpers {",
        "",
        source_body,
        "}  // namespace formulas::helpers",
        "",
    ])
    return header, source, tuple(diagnostics)


def _operator_includes(called: set[str]) -> list[str]:
    """Per-operator ATen headers for the ATen functions the code calls (only what is used)."""
    includes = ["#include <ATen/TensorOperators.h>"]
    headers = sorted({_header(name) for name in called})
    return includes + [f"#include <ATen/ops/{header}.h>" for header in headers]


FUNCTIONAL_SUFFIX = "_functional"


def _header(name: str) -> str:
    """The per-operator header declaring ``at::name``: an in-place ``zero_`` lives in ``zero.h``, the
    functional variant ``rrelu_with_noise_functional`` in ``rrelu_with_noise.h`` (torchgen's base name
    drops the suffix)."""
    if name.endswith(FUNCTIONAL_SUFFIX):
        return name[:-len(FUNCTIONAL_SUFFIX)]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def _refuse_other_dispatch_keys(formula: Formula) -> None:
    """An imported formula of a derivatives.yaml ``dispatch:`` section other than ``Default``
    (``@yaml_entry(dispatch="AutogradNestedTensor")``) holds only for tensors of that key; the C++
    path registers one formula for every tensor, so such a section is refused (registered for all
    tensors, a nested-tensor formula would give dense tensors a wrong derivative)."""
    if formula.dispatch not in (None, "Default"):
        raise Untranslatable(formula.dispatch_node, UNSUPPORTED,
                             f"a formula for the dispatch key {formula.dispatch} only: the C++ path registers "
                             "one formula for every tensor, so only a derivatives.yaml Default section is "
                             "transliterated")


def _kept_module_file(module: FormulaModule, context: Context, context_key: str | None, taken: set[str],
                      namespace: str, root: str, registered: set[str], text: bool = True) -> ModuleFile:
    """:func:`_module_file`, kept between runs under its inputs: the module (its text and what
    per-formula mode left out of it), the ``context`` (``context_key``), and the node names and
    registrations taken before it that its own could meet. ``text=False``: what it refuses and the
    names it takes, kept without its C++ (``text`` None: lint's check reads no C++, so a run after
    an edit does not read it back)."""
    kept = module_results.active()
    if kept is None or context_key is None or not module.source_digest:
        return _module_file(module, context, taken, namespace, root, registered)
    declared = {str(s.name) for s in module.nondifferentiable}
    key = module_results.key(
        "module" if text else "module refusals", context_key, _display(module.path, root), _identity(module, kept),
        _taken_read(module, taken), sorted(registered & declared))
    found = kept.get(key, _is_module_file)
    if found is None:
        found = _module_file(module, context, taken, namespace, root, registered)
        found = found if text else found._replace(text=None)
    kept.put(key, found)
    return found


def _taken_read(module: FormulaModule, taken: set[str]) -> list[str]:
    """The node names taken before ``module`` that naming its nodes reads (:func:`node_name`): for
    each of its operators' prefixes, ``<prefix>Backward0``, ``1``, ... as long as they are taken
    (sorted)."""
    found = []
    for base in {f.schema.name.node_prefix for f in module.formulas}:
        index = 0
        while (name := f"{base}Backward{index}") in taken:
            found.append(name)
            index += 1
    return sorted(found)


def _is_module_file(kept: object) -> bool:
    return (isinstance(kept, ModuleFile) and isinstance(kept.text, (str, type(None))) and type(kept.ops) is int
            and type(kept.has_views) is bool and all_of(Diagnostic, kept.diagnostics) and all_of(str, kept.nodes)
            and all_of(str, kept.registered) and type(kept.has_vmap_rules) is bool)


def _identity(module: FormulaModule, kept: module_results.ModuleResults) -> str:
    """What a module is, for a key of :mod:`transpiler.module_results`: its path and text, and what
    per-formula mode kept of it (its formulas, whether each kept its jvp, its helpers); made once
    per run for each module (it is in the key of each of its results)."""
    return kept.part(module, lambda: (
        module.path, module.source_digest,
        [(f.op_name, f.span.line, f.jvp is None, f.jvp_left_out) for f in module.formulas],
        [h.name for h in module.helpers], [_schema_text(s) for s in module.nondifferentiable]))


def _module_file(module: FormulaModule, context: Context, taken: set[str],
                 namespace: str, root: str, registered: set[str]) -> ModuleFile:
    """The module's C++, its number of operators, whether it has view operators (views.h), and the
    node names (``taken`` so far) and registrations it adds. ``registered``: the operators
    registered so far (each non-differentiable one is registered once, by the first module
    declaring it, and not at all when it has a formula)."""
    taken_before, registered_before = taken, registered
    taken, registered = set(taken), set(registered)
    diagnostics: list[Diagnostic] = []
    emitted = []
    for formula in module.formulas:
        struct = node_name(formula, taken)
        try:
            _refuse_other_dispatch_keys(formula)
            emitted.append(emit_formula(formula, context, struct))
        except Untranslatable as error:
            diagnostics.append(_diagnostic(module, error))
            continue
        taken.add(struct)
    for schema in module.nondifferentiable:
        if str(schema.name) in registered:
            continue
        registered.add(str(schema.name))
        try:
            emitted.append(emit_nondifferentiable(schema))
        except T.UnsupportedType as error:
            diagnostics.append(Diagnostic(module.path, 1, 1, UNSUPPORTED_TYPE,
                                          f"no C++ spelling for the schema type '{error}' of the "
                                          f"non-differentiable {schema.name}"))
    added = (tuple(diagnostics), tuple(sorted(taken - taken_before)), tuple(sorted(registered - registered_before)))
    if not emitted:
        return ModuleFile(None, 0, False, *added)
    code = "\n".join(e.code for e in emitted)
    vmap_rules = [e.vmap_by_example for e in emitted if e.vmap_by_example]
    aten_registrars = [e.aten_registrar for e in emitted if e.aten_registrar]
    text = "\n".join([
        f"// @generated by transpiler.cpp from {_display(module.path, root)}: do not edit.",
        '#include "helpers.h"',
        '#include "runtime.h"',
        "",
        *_operator_includes(set().union(*(e.called for e in emitted))),
        "#include <ATen/core/LegacyTypeDispatch.h>",
        *(['#include "views.h"'] if any(e.has_views for e in emitted) else []),
        *(['#include "vmap.h"'] if vmap_rules else []),
        "#include <torch/csrc/autograd/functions/utils.h>",
        "#include <torch/csrc/dynamo/compiled_autograd.h>",
        "#include <torch/library.h>",
        *(['#include "aten_override.h"'] if aten_registrars else []),
        *(['#include "aten_override_boxed.h"'] if any("register_boxed" in r for r in aten_registrars) else []),
        "",
        "#include <array>",
        "#include <optional>",
        "#include <tuple>",
        "",
        "namespace formulas {",
        "namespace {",
        "",
        "// the operators' namespace: compiled autograd binds each node's functional under",
        "// <namespace>_<Node>, so packages loaded side by side never share a binding",
        f'constexpr const char* library_namespace = "{namespace}";',
        "",
        code,
        *_aten_registrars(aten_registrars),
        "}  // namespace",
        "}  // namespace formulas",
        "",
        f"TORCH_LIBRARY_FRAGMENT({namespace}, m) {{",
        *(f"  {e.registration}" for e in emitted),
        "}",
        "",
        *_vmap_registrations(namespace, vmap_rules),
    ])
    return ModuleFile(text, len(emitted), any(e.has_views for e in emitted), *added, bool(vmap_rules))


def _aten_registrars(entries: list[str]) -> list[str]:
    """The module's operators' kernels for aten's operators, registered only when
    ``override(compiled=True)`` installs them (``aten_override.h``)."""
    if not entries:
        return []
    return ["// override(compiled=True): each operator's kernel for aten's, registered on install (aten_override.h)",
            "const aten_override::Registrars aten_registrars({",
            *(f"    {entry}," for entry in entries),
            "});",
            ""]


def aten_override_source(namespace: str) -> str:
    """``aten_override.cpp``: the operators ``override(compiled=True)`` calls to register the
    generated kernels for aten's operators (``torch.ops.<namespace>._aten_override_install(ops,
    keys)`` returns a handle) and to take them back (``_aten_override_uninstall(handle)``)."""
    return "\n".join([
        "// @generated by transpiler.cpp: override(compiled=True)'s install and uninstall: do not edit.",
        '#include "aten_override.h"',
        "",
        "#include <torch/library.h>",
        "",
        f"TORCH_LIBRARY_FRAGMENT({namespace}, m) {{",
        '  m.def("_aten_override_install(str[] ops, str[] keys) -> int", '
        "TORCH_FN(formulas::aten_override::install));",
        '  m.def("_aten_override_uninstall(int handle) -> ()", TORCH_FN(formulas::aten_override::uninstall));',
        "}",
        ""])


def _vmap_registrations(namespace: str, operators: list[str]) -> list[str]:
    """The ``FuncTorchBatched`` block giving ``operators`` (each takes a list of tensors, for which
    torch generates no vmap fallback) the rule of ``vmap.h``: the operator per example, stacked."""
    if not operators:
        return []
    rule = "torch::CppFunction::makeFromBoxedFunction<&formulas::runtime::vmap_by_example>()"
    return [f"TORCH_LIBRARY_IMPL({namespace}, FuncTorchBatched, m) {{",
            *(f'  m.impl("{op}", {rule});' for op in operators),
            "}",
            ""]


def _display(path: str, root: str) -> str:
    """A stable, machine-independent name for a source path in generated comments: the formula
    directory's own name, then the path below it (the same however the directory was spelled);
    a line break or other control character in a name is escaped, so it cannot end the comment."""
    real_root = os.path.realpath(root)
    below = os.path.relpath(os.path.realpath(path), real_root)
    return printable("/".join([os.path.basename(real_root), *below.split(os.sep)]))


def emit_library(library: Library, known_operators: Mapping[str, FunctionSchema] | None = None,
                 namespace: str = "formulas", root: str = "formulas", texts: bool = True,
                 ) -> tuple[Output, list[Diagnostic]]:
    """Every output file of ``library`` (the formulas under ``root``), registered as
    ``torch.ops.<namespace>``; diagnostics for what cannot be transliterated.
    ``known_operators`` are operators declared elsewhere (the shipped library) that the
    formulas may call: they are resolved, not emitted. ``texts=False``: the diagnostics alone
    are wanted (:func:`refusals`); a module whose result is kept between runs may then be left
    out of the files."""
    diagnostics: list[Diagnostic] = []
    modules = {m.path: m for m in library.modules}
    helpers = {}
    kept = module_results.active()
    for helper in library.helpers:
        try:
            if kept is None:
                helpers[helper.name] = helper_signature(helper, modules[helper.path])
            else:       # the same signature object in each emission of the run: its key text is made once
                helpers[helper.name] = kept.once(helper, lambda: helper_signature(helper, modules[helper.path]))
        except Untranslatable as error:
            diagnostics.append(_diagnostic(modules[helper.path], error))
    context = Context(operator_table(library, known_operators), HelperTable(helpers), {})
    context_key = _context_key(context, namespace)
    header, source, refused = _kept_helpers_files(library, context, context_key)
    diagnostics += refused
    files = {"runtime.h": RUNTIME_HEADER, "helpers.h": header, "helpers.cpp": source,
             "aten_override.h": ATEN_OVERRIDE_HEADER, "aten_override.cpp": aten_override_source(namespace)}
    diagnostics += _duplicate_operators(library)
    taken: set[str] = set()
    registered = {f.op_name for f in library.formulas}
    ops = 0
    for module in sorted(library.modules, key=lambda m: m.path):
        result = _kept_module_file(module, context, context_key, taken, namespace, root, registered, texts)
        diagnostics += result.diagnostics
        taken.update(result.nodes)
        registered.update(result.registered)
        if result.text is not None:
            files[_file_name(module.path, files)] = result.text
            ops += result.ops
            if result.has_views:       # a module with view operators
                files["views.h"] = VIEWS_HEADER
            if result.has_vmap_rules:  # a module with an operator taking a list of tensors
                files["vmap.h"] = VMAP_HEADER
            if "aten_override_boxed.h" in result.text:      # one whose aten kernel is registered boxed
                files["aten_override_boxed.h"] = ATEN_OVERRIDE_BOXED_HEADER
    return Output(files, ops, len(taken), len(helpers)), sorted(set(diagnostics))


def _context_key(context: Context, namespace: str) -> str | None:
    """What every module's C++ depends on beyond the module: the operator table (in declaration
    order), the helpers' signatures (a default as its source text) and the ATen operators that are
    Tensor methods only (the installed torch's, :func:`~transpiler.cpp.operators.method_only_source`);
    None when results are not kept."""
    if module_results.active() is None:
        return None
    for earlier, earlier_namespace, key in _context_keys:
        if earlier_namespace == namespace and _same_tables(earlier, context):
            return key
    kept = module_results.active()
    # one line per helper and per operator name (each text a repr: no line break in it), joined rather
    # than the repr of a list of them, which would quote every text again
    helpers = "\n".join(kept.part(signature, lambda: (
        name, [(p, ty, None if default is None else _code(default)) for p, ty, default in signature.params],
        signature.returns)) for name, signature in context.helpers.items())
    operators = "\n".join(f"{name!r}: [{', '.join(_schema_text(schema) for schema in schemas)}]"
                          for name, schemas in context.operators.items())
    key = module_results.key("context", namespace, operators, helpers, context.names, method_only_source())
    _context_keys[:] = [(context, namespace, key)]
    return key


# A run's emissions (lint's check, then the one that writes) are usually in the same context: its
# key is made once. The last context is held with its key, so the schemas compared by identity live.
_context_keys: list[tuple[Context, str, str]] = []


def _same_tables(earlier: Context, context: Context) -> bool:
    """Whether ``context`` has ``earlier``'s operator table (the same schema objects, in the same
    order), helpers and names: the same context key."""
    if list(earlier.operators) != list(context.operators) or list(earlier.helpers) != list(context.helpers):
        return False
    for name, schemas in context.operators.items():
        before = earlier.operators[name]
        if len(before) != len(schemas) or any(a is not b for a, b in zip(before, schemas)):
            return False
    return dict(earlier.helpers) == dict(context.helpers) and dict(earlier.names) == dict(context.names)


# A run computes the context key of two emissions (lint's check and the one that writes) over the
# same schemas and helper defaults: their text is made once. By the schema object: hashing a
# schema (a dataclass of tuples of dataclasses) for a cache of its value cost more than its text.
_schema_texts: dict[int, tuple[FunctionSchema, str]] = {}
# Each argument's kind, which the schema's ``str`` does not say alone: positional, keyword-only, ``out=``
_ARGUMENT_KINDS = {(False, False): "p", (True, False): "k", (False, True): "o", (True, True): "O"}


def _schema_text(schema: FunctionSchema) -> str:
    """Every field of the schema, quoted: its ``str`` (names, types, aliases, defaults, returns) and the
    kind of each argument, which ``str`` leaves out (whether it is an ``out=``); several times cheaper
    than its dataclass ``repr`` (a run after an edit makes the text of about 1,000 schemas)."""
    found = _schema_texts.get(id(schema))
    if found is None or found[0] is not schema:       # held with its text, so its id is not reused
        kinds = "".join(_ARGUMENT_KINDS[a.kwarg_only, a.is_out] for a in schema.arguments)
        found = _schema_texts[id(schema)] = (schema, repr(f"{schema!s} {kinds}"))     # quoted: one line, delimited
    return found[1]


@functools.lru_cache(maxsize=4096)
def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def refusals(modules: tuple[FormulaModule, ...], library: tuple[FormulaModule, ...] = (),
             known_operators: Mapping[str, FunctionSchema] | None = None) -> list[Diagnostic]:
    """What ``transpile`` refuses (DB2xx) in ``modules``, by the emitter's own check, nothing written:
    ``transpile lint`` reports these too. ``library``: the rest of the package they belong to
    (checked with them, not reported); ``known_operators``: another package's operators they may
    call, as ``transpile --formulas`` allows. A second formula for an operator counts only within
    ``modules``."""
    paths = {module.path for module in modules}
    _, found = emit_library(Library((*modules, *library)), known_operators, texts=False)
    found = [d for d in found if d.path in paths and d.code != DUPLICATE_OPERATOR]
    return sorted({*found, *_duplicate_operators(Library(modules))})


def with_helpers_of(library: Library, other: Library) -> Library:
    """``library`` plus the helpers of ``other`` (the shipped library) that its formulas and helpers
    name and it does not define, with the ones those name (the model's ``references``: called, or
    passed as a value, and not shadowed by a local): a package emits its own copy of every helper
    it uses (``from formulas.helpers import sum_to``), since another package's C++ is not linked
    with it. They are added as helper-only modules, so no formula of ``other`` is emitted."""
    own = {h.name for h in library.helpers}
    offered = {h.name: h.references for h in other.helpers if h.name not in own}     # the last of a name
    wanted: set[str] = set()
    used = set().union(*(item.references for item in (*library.formulas, *library.helpers)))
    while called := {name for name in offered.keys() - wanted
                     if name in used or name.rpartition(OVERLOAD_SEPARATOR)[0] in used}:   # with its overloads
        wanted |= called
        used = set().union(*(offered[name] for name in called))
    if not wanted:
        return library
    added = tuple(replace(m, formulas=(), nondifferentiable=(),
                          helpers=tuple(h for h in m.helpers if h.name in wanted))
                  for m in other.modules if any(h.name in wanted for h in m.helpers))
    return Library((*library.modules, *added))


def _file_name(path: str, taken: dict[str, str]) -> str:
    """``<module>.cpp``; a second module of the same name (another sub-package) gets a numbered name."""
    stem = os.path.splitext(os.path.basename(path))[0]
    name, index = f"{stem}.cpp", 2
    while name in taken:
        name, index = f"{stem}_{index}.cpp", index + 1
    return name


def _duplicate_operators(library: Library) -> list[Diagnostic]:
    """A second formula for an operator: both would register ``torch.ops.formulas.<op>``."""
    first: dict[str, tuple[str, int]] = {}
    found = []
    for module in sorted(library.modules, key=lambda m: m.path):
        for formula in module.formulas:
            if formula.op_name in first:
                path, line = first[formula.op_name]
                where = module.span(formula.schema_node)
                found.append(Diagnostic(module.path, where.line, where.col, DUPLICATE_OPERATOR,
                                        f"{formula.op_name} already has a formula ({path}:{line}); keep one"))
            else:
                first[formula.op_name] = (module.path, formula.span.line)
    return found


__all__ = ["Output", "emit_library", "operator_table", "refusals", "with_helpers_of"]
