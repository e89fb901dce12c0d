"""Typed model of a derivatives.yaml: entries, dispatch sections, formula lines.

Both directions of the importer meet here: :mod:`.importer` builds entries
from the YAML and writes them as Python, :mod:`.reader` reads the Python back
into the same entries, and :mod:`.emit` prints entries as YAML.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from transpiler.schema import FunctionSchema, is_tensor_like

NON_DIFFERENTIABLE = "non_differentiable"
AUTO_JVP = ("auto_linear", "auto_element_wise")
NEEDS_INPUT_GRAD = "needs_input_grad"
ORIGINAL_SELF = ("original_self_p", "original_self_t")


@dataclass(frozen=True)
class FormulaLine:
    """One ``key: formula`` line: ``self: grad * other``, ``self, other: f(...)``, ``result: ...``."""

    key: str
    formula: str

    @property
    def names(self) -> tuple[str, ...]:
        """The names the key lists (torchgen splits on commas and strips)."""
        return tuple(part.strip() for part in self.key.split(","))


@dataclass(frozen=True)
class Section:
    """The formulas of one dispatch key (``dispatch`` is None when the entry has no ``dispatch:``)."""

    dispatch: str | None
    lines: tuple[FormulaLine, ...]


@dataclass(frozen=True)
class Entry:
    """One ``- name: <schema>`` item of derivatives.yaml."""

    name: str                                           # the schema text, as written
    output_differentiability: tuple[bool | str, ...] | None
    sections: tuple[Section, ...]

    @property
    def op_name(self) -> str:
        """The operator's name, ``name.overload``, from the entry's schema."""
        return self.name.split("(", 1)[0].strip()


def return_names(schema: FunctionSchema) -> tuple[str, ...]:
    """How formulas call the outputs (torchgen's ``cpp.return_names``, ``self`` being ``result``)."""
    names = []
    arguments = {a.name for a in schema.arguments}
    for i, ret in enumerate(schema.returns):
        if schema.name.inplace:
            names.append("result")
        elif ret.name:
            names.append(f"{ret.name}_return" if ret.name in arguments else ret.name)
        else:
            names.append("result" if len(schema.returns) == 1 else f"result{i}")
    return tuple(names)


def differentiable_outputs(schema: FunctionSchema, flags: tuple[bool | str, ...] | None) -> tuple[int, ...]:
    """Indices of the outputs that get a gradient: tensor returns not marked False.

    A shorter ``output_differentiability`` list leaves the remaining outputs
    non-differentiable; a condition string (``["!dtype || ..."]``) counts as True.
    """
    if flags is None:
        flags = (True,) * len(schema.returns)
    return tuple(
        i for i, ret in enumerate(schema.returns)
        if i < len(flags) and flags[i] is not False and is_tensor_like(ret.type)
    )


SINGLE_GRAD = re.compile(r"(^|\W)grad($|\W)")


def implied_output_differentiability(schema: FunctionSchema, flags: tuple[bool | str, ...] | None,
                                     gradient_formulas: Sequence[str]) -> tuple[bool | str, ...] | None:
    """``flags`` as torchgen reads them: when derivatives.yaml gives none and a gradient formula
    uses ``grad`` (the first output's gradient), only the first tensor output is differentiable
    (``max.dim``'s ``indices``, ``frexp``'s integer ``exponent``); otherwise ``flags`` unchanged."""
    tensors = [i for i, ret in enumerate(schema.returns) if is_tensor_like(ret.type)]
    if flags is not None or len(tensors) < 2 or not any(SINGLE_GRAD.search(f) for f in gradient_formulas):
        return flags
    return tuple(i == tensors[0] for i in range(len(schema.returns)))


def full_output_differentiability(schema: FunctionSchema,
                                  flags: tuple[bool | str, ...] | None) -> tuple[bool, ...] | None:
    """``output_differentiability`` as one bool per return (what ``@derivative`` takes)."""
    if flags is None:
        return None
    return tuple(i < len(flags) and flags[i] is not False for i in range(len(schema.returns)))


def is_backward_line(line: FormulaLine, schema: FunctionSchema) -> bool:
    """A line about inputs (a gradient) rather than outputs (a forward-mode tangent)."""
    arguments = {a.name for a in schema.arguments}
    return line.names[0] in arguments


def _unique(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def gradient_locals(schema: FunctionSchema) -> dict[str, str]:
    """The Python local that holds each input's gradient inside ``backward``.

    ``grad_<input>``, with underscores appended when the formula already has a
    name so spelled (``sigmoid_backward(Tensor grad_output, Tensor output)``:
    the gradient of ``output`` is ``grad_output_``).
    """
    outputs = return_names(schema)
    taken = {a.name for a in schema.arguments} | set(outputs) | {"grad", "grads", NEEDS_INPUT_GRAD}
    taken |= {f"grad_{o}" for o in outputs}
    return {a.name: _unique(f"grad_{a.name}", taken) for a in schema.arguments}


def tangent_locals(schema: FunctionSchema) -> dict[str, str]:
    """The Python local that holds each output's tangent inside ``jvp``: ``<output>_t``
    (underscores appended on a clash, as for :func:`gradient_locals`)."""
    outputs = return_names(schema)
    arguments = [a.name for a in schema.arguments]
    taken = set(arguments) | set(outputs) | set(ORIGINAL_SELF)
    taken |= {f"{a}_t" for a in arguments} | {f"{a}_p" for a in arguments}
    return {o: _unique(f"{o}_t", taken) for o in outputs}
