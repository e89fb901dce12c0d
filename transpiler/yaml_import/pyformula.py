"""The Python formula functions an import writes, as a typed model and its text.

:class:`PyFormula` says everything one formula function contains;
:func:`formula_source` prints it, :func:`module_source` prints a whole file.
The layout of the C++ source (spacing and comments that differ from the
printer's canonical spacing) rides along as a trailing ``# cpp: {...}``
comment on each formula statement; a statement the main dialect rewrote
(:mod:`.main_dialect`) carries its YAML formula instead, ``# yaml: "..."``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from transpiler.raises import not_implemented_message
from transpiler.yaml_import.cpp import Layout
from transpiler.yaml_import.model import NEEDS_INPUT_GRAD

LAYOUT_COMMENT = "# cpp: "
ORIGINAL_COMMENT = "# yaml: "      # the YAML formula of a line the main dialect rewrote (a JSON string)


@dataclass(frozen=True)
class Assignment:
    """``targets = expression`` inside backward or jvp: one derivatives.yaml line."""

    targets: tuple[str, ...]
    expression: str
    layout: Layout
    original: str | None = None       # the YAML formula, when the main dialect rewrote it


@dataclass(frozen=True)
class Refusal:
    """derivatives.yaml's ``input: not_implemented("name")``: ``if needs_input_grad[position]:
    raise NotImplementedError("<torch's text for name>")`` inside backward."""

    position: int                     # the input's place among the tensor inputs (grad_input_mask)
    name: str                         # not_implemented's argument


@dataclass(frozen=True)
class Closure:
    """A nested ``def backward(...)`` or ``def jvp(...)``."""

    name: str
    params: tuple[str, ...]
    kwonly: tuple[str, ...]
    prelude: tuple[str, ...]          # plain statements before the formulas (``grads = [...]``)
    assignments: tuple[Assignment | Refusal, ...]   # one per derivatives.yaml line, in its order
    returns: tuple[str, ...]          # one name (or ``None``) per returned value
    # a ``_foreach_`` backward applies each line to the list's elements one by one, ``i`` the index
    # (torchgen's loop): the gradient list it loops over (``grads``); None for other formulas
    element_loop: str | None = None


@dataclass(frozen=True)
class PyFormula:
    """One derivatives.yaml entry as a formula: its schema, forward call, backward and jvp closures."""

    function: str
    schema: str
    output_differentiability: tuple[bool, ...] | None
    entry_details: tuple[tuple[str, object], ...]    # keyword arguments of @yaml_entry, if any
    params: tuple[str, ...]
    outputs: tuple[str, ...]
    forward_call: str                 # ``at.max(self, dim, keepdim)``
    backward: Closure
    jvp: Closure | None


def _return_text(names: tuple[str, ...]) -> str:
    if not names:
        return "None"
    return names[0] if len(names) == 1 else ", ".join(names)


def _closure_lines(closure: Closure) -> list[str]:
    params = list(closure.params)
    if closure.kwonly:
        params += ["*", *closure.kwonly]
    lines = [f"    def {closure.name}({', '.join(params)}):"]
    lines += [f"        {statement}" for statement in closure.prelude]
    for assignment in closure.assignments:
        if isinstance(assignment, Refusal):
            lines.append(f"        if {NEEDS_INPUT_GRAD}[{assignment.position}]:")
            lines.append(f"            raise NotImplementedError({json.dumps(not_implemented_message(assignment.name))})")
            continue
        if closure.element_loop is not None:
            lines += _element_loop_lines(assignment, closure.element_loop)
            continue
        text = f"        {', '.join(assignment.targets)} = {assignment.expression}"
        if assignment.original is not None:
            text += f"  {ORIGINAL_COMMENT}{json.dumps(assignment.original)}"
        elif assignment.layout:
            text += f"  {LAYOUT_COMMENT}{json.dumps(assignment.layout, separators=(',', ':'))}"
        lines.append(text)
    lines.append(f"        return {_return_text(closure.returns)}")
    return lines


def _element_loop_lines(assignment: Assignment, grads: str) -> list[str]:
    """One ``_foreach_`` gradient line: the formula applied to each element ``i`` whose gradient
    ``grads[i]`` is defined, None (no gradient) for the others, as torchgen's loop does."""
    (target,) = assignment.targets
    text = f"                {target}.append({assignment.expression})"
    if assignment.original is not None:
        text += f"  {ORIGINAL_COMMENT}{json.dumps(assignment.original)}"
    elif assignment.layout:
        text += f"  {LAYOUT_COMMENT}{json.dumps(assignment.layout, separators=(',', ':'))}"
    return [f"        {target} = []",
            f"        for i in range(len({grads})):",
            f"            if {grads}[i] is not None:",
            text,
            "            else:",
            f"                {target}.append(None)"]


def formula_source(formula: PyFormula) -> str:
    """The text of one ``@derivative`` function."""
    decorator = f"@derivative({json.dumps(formula.schema)}"
    if formula.output_differentiability is not None:
        flags = ", ".join(str(flag) for flag in formula.output_differentiability)
        decorator += f", output_differentiability=[{flags}]"
    lines = [decorator + ")"]
    if formula.entry_details:
        details = ", ".join(f"{key}={_literal(value)}" for key, value in formula.entry_details)
        lines.append(f"@yaml_entry({details})")
    lines.append(f"def {formula.function}({', '.join(formula.params)}):")
    if formula.outputs:
        targets = ", ".join(formula.outputs)
        lines.append(f"    {targets} = {formula.forward_call}")
    else:
        lines.append(f"    {formula.forward_call}")
    lines += _closure_lines(formula.backward)
    if formula.jvp is not None:
        lines += _closure_lines(formula.jvp)
    if len(formula.outputs) == 1:
        outputs = formula.outputs[0]
    else:
        outputs = f"({', '.join(formula.outputs)})"
    lines.append(f"    return {outputs}, backward")
    return "\n".join(lines) + "\n"


def _literal(value: object) -> str:
    """A Python literal for a @yaml_entry argument (str, bool, or a tuple of them)."""
    if isinstance(value, tuple):
        items = [_literal(v) for v in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def module_source(docstring: str, imports: tuple[str, ...], formulas: tuple[PyFormula, ...],
                  modules: tuple[str, ...] = ()) -> str:
    """A formula file: docstring, the Python ``modules`` it uses (``math``), imports from ``formulas``
    and ``.externals``, the functions."""
    head = [f'"""{docstring}"""', "from __future__ import annotations", ""]
    head += [f"import {module}" for module in modules] + ([""] if modules else [])
    head.append("from formulas import at, derivative")
    if imports:
        head.append("")
        head.append("from .externals import (")
        head += [f"    {name}," for name in imports]
        head.append(")")
    body = "\n\n".join(formula_source(f) for f in formulas)
    return "\n".join(head) + "\n\n\n" + body
