"""The one table of diagnostic codes: every code declared once, with ruff-style docs.

``transpile rule CODE`` prints an entry, the diagnostics tables of README.md
and docs/commands.md are checked against :func:`markdown_table`, and the tests
check that no other module spells a code. To add a code, define one :class:`Code` below
and add it to ``CODES`` (in order); the passes report ``codes.<NAME>.code``,
so a code's literal appears in this file only.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class Code:
    """One diagnostic code and its documentation (the sections of a ruff rule page)."""

    code: str
    summary: str          # one line: the README table's "meaning" column
    what: str             # what it does (what the finding says about the code read)
    why: str              # why it matters
    example: str = ""     # code that gets the finding ("" where a file or the tool itself is at fault)
    fix: str = ""         # what to write instead, or what to do

    @property
    def stage(self) -> str:
        """Who reports it: the command the summary starts with (``transpile`` for DB2xx,
        ``emit-yaml``, ``import-yaml``), ``lint`` otherwise."""
        if self.summary.startswith("`"):
            return self.summary[1:].split("`", 1)[0]
        return "lint"

    def explain(self) -> str:
        """The text ``transpile rule CODE`` prints."""
        parts = [f"{self.code}: {self.summary}", "", "What it does", _para(self.what), "",
                 "Why it matters", _para(self.why)]
        if self.example:
            parts += ["", "Example", textwrap.indent(self.example.strip("\n"), "    ")]
        if "\n" in self.fix.strip():            # code to write instead
            parts += ["", "Use instead", textwrap.indent(self.fix.strip("\n"), "    ")]
        elif self.fix:
            parts += ["", "Fix", _para(self.fix)]
        return "\n".join(parts) + "\n"


def _para(text: str) -> str:
    return textwrap.fill(" ".join(text.split()), 88)


_SIN = '''\
@derivative("sin(Tensor self) -> Tensor")
def sin(self):
    result = at.sin(self)
    {forward}
    def backward(grad):
        return {returned}
    return result, backward
'''


def _sin(returned: str, forward: str = "") -> str:
    text = _SIN.format(forward=forward, returned=returned)
    return text.replace("    \n", "") if not forward else text


# One entry per code, named for the modules that report it (``codes.KEPT_INTERMEDIATE.code``):
# nowhere else is a code spelled out.
UNPARSABLE = Code(
    "DB000", "the file cannot be parsed",
    "The file is not valid Python for this interpreter: a syntax error found by the parser or by the "
    "compiler (`return` outside a function, a late `from __future__`, too many nested blocks), bytes that "
    "do not decode in the file's encoding (PEP 263), or an expression nested too deeply to analyse.",
    "Nothing in the file can be checked; the other files still are.",
    "def backward(grad)\n    return grad",
    "Fix the syntax error at the reported location (or split the expression that is too deep).")
UNREADABLE = Code(
    "DB001", "a path cannot be read (printed to stderr; exit 2)",
    "A path given on the command line does not exist, or a file cannot be read.",
    "It is an input error, not a finding: the run exits 2 so that CI does not mistake it for a clean run.",
    fix="Pass existing files or directories; check permissions.")
INTERNAL_ERROR = Code(
    "DB002", "internal error while checking one file (that file only; the others are still checked)",
    "The linter itself failed on this file (a bug, or a worker process that died).",
    "The file was not checked; the findings of the other files are still reported.",
    fix="Report it with the file attached; `# transpile: noqa` at the top of the file skips it meanwhile.")
KEPT_INTERMEDIATE = Code(
    "DB100", "backward uses a tensor computed in the forward that is neither an input nor an output",
    "Reports a backward closure that captures, or a `torch.autograd.Function` that keeps on `ctx` "
    "(`ctx.save_for_backward(...)` or `ctx.<attr> = ...`), a tensor computed in the forward from the "
    "inputs.",
    "The intermediate has no path to the inputs in the graph of the backward, so double backward through "
    "it drops its contribution: second derivatives are silently wrong (pytorch/pytorch#58509).",
    _sin("grad * c", forward="c = at.cos(self)"),
    _sin("grad * at.cos(self)") + "\n# `transpile lint --fix` rewrites it; a ctx-style Function saves inputs "
    "or outputs\n# and recomputes, or marks its backward @once_differentiable")
REBOUND_INPUT = Code(
    "DB101", "backward captures an input or output name that the forward rebinds",
    "Reports a captured input or output whose name the forward bound to another value "
    "(`self = self.contiguous()`) before the backward was defined.",
    "What the backward captures is really an intermediate (DB100) under an input's name.",
    _sin("grad * at.cos(self)", forward="self = at.mul(self, 1.0)"),
    "Give the rebound value a new name in the forward and use the input itself in the backward.")
IN_PLACE = Code(
    "DB102", "backward modifies a captured input or output in place",
    "Reports an in-place operation (`x.mul_(2)`, `x[0] = ...`, `x += ...`) on a captured input or output "
    "inside the backward.",
    "The saved value is shared with the forward's graph: a second backward (or the caller) sees the "
    "modified value, and autograd's version check fails or the gradient is wrong.",
    "def backward(grad):\n    self.mul_(2)\n    return grad * self",
    "Compute a new value (`at.mul(self, 2)`) instead of modifying the captured one.")
LATE_BINDING = Code(
    "DB103", "a captured name is rebound after the closure is defined",
    "Reports a name the backward captures that the forward binds again (or deletes) after `def backward`.",
    "Closures capture variables, not values: the backward sees the late value, not the one it was written "
    "for.",
    "def backward(grad):\n    return grad * scale\nscale = 2.0\nreturn result, backward",
    "Bind the captured name before the backward and give later values another name.")
NONLOCAL = Code(
    "DB104", "`nonlocal` / `global` inside a backward",
    "Reports `nonlocal` or `global` statements in a backward.",
    "The backward then reads or writes state that is not an input, an output or metadata, which the "
    "transpiled node cannot save and double backward cannot see.",
    "def backward(grad):\n    global calls\n    calls += 1\n    return grad",
    "Keep the backward a pure function of its gradients and the captured inputs and outputs.")
UNDECLARED_OPERATOR = Code(
    "DB105", "backward calls an operator that has no formula",
    "Reports an operator (`at.X(...)`, a Python operator on tensors, or one reached through a helper) "
    "that the backward runs but the library declares no formula for.",
    "Double backward through an operator without a derivative is impossible: the library must be closed "
    "under differentiation.",
    "def backward(grad):\n    return grad * at.sinh(self)    # no formula for sinh",
    "Declare the operator with @derivative (or nondifferentiable(...) when its output carries no "
    "gradient), or use declared operators.")
GRADIENT_COUNT = Code(
    "DB106", "backward returns the wrong number of gradients",
    "Reports a `return` of the backward whose number of gradients differs from the number of "
    "differentiable inputs (Tensor, Tensor?, Tensor[] arguments).",
    "Autograd matches gradients to inputs by position: a missing or extra gradient is an error at run "
    "time or a gradient given to the wrong input.",
    '@derivative("mul.Tensor(Tensor self, Tensor other) -> Tensor")\n...\n    def backward(grad):\n'
    "        return grad * other",
    "Return one gradient per differentiable input, in schema order (`None` for zero).")
FORMULA_SHAPE = Code(
    "DB107", "the formula does not have the required shape",
    "Reports a `@derivative` function that does not have the shape of a formula: the schema does not "
    "parse or does not match the parameters, there is no `def backward`, or the backward is not "
    "returned.",
    "Neither the linter nor the transpiler can tell inputs from intermediates in it.",
    '@derivative("sin(Tensor self) -> Tensor")\ndef sin(x):\n    ...',
    "Follow formulas/README.md: parameters named and ordered as the schema's arguments, "
    "`def backward(...)`, then `return <outputs>, backward`.")
UNSUPPORTED = Code(
    "DB200", "`transpile`: a construct that cannot be transliterated to C++",
    "Reports code outside the formula language of formulas/README.md: `**`, tensor methods that compute "
    "on values (`grad.exp()`, `.item()`), slicing, comprehensions, nested functions.",
    "`transpile` refuses the whole library when one formula cannot be written as C++.",
    "def backward(grad):\n    return grad * self ** 2",
    "Use `at.<op>(...)` calls and the documented Python subset (`at.pow(self, 2)`).")
UNKNOWN_OPERATOR = Code(
    "DB201", "`transpile`: a call to an unknown operator or function",
    "Reports a call to an `at.` operator or a function that the library does not declare.",
    "The C++ node could not call it; `transpile` refuses the library.",
    "def backward(grad):\n    return grad * at.sinh(self)",
    "Declare the operator (@derivative or nondifferentiable) or the helper (@helper).")
NO_OVERLOAD = Code(
    "DB202", "`transpile`: no declared overload accepts the call's arguments",
    "Reports an `at.X(...)` call whose arguments match none of the declared overloads of `X` (or more "
    "than one).",
    "The C++ call would not compile or would pick an overload by accident.",
    "def backward(grad):\n    return at.mul(grad)",
    "Pass the arguments of one declared schema (a Python number never matches a Tensor argument).")
UNKNOWN_NAME = Code(
    "DB203", "`transpile`: a name that is neither an input, a local nor a captured value",
    "Reports a name that is not bound in the formula, its backward, the module's constants or helpers.",
    "The generated C++ would refer to nothing.",
    "def backward(grad):\n    return grad * undefined_name",
    "Bind the name, or import the operator or helper it refers to.")
TYPE_CONFLICT = Code(
    "DB204", "`transpile`: one variable with conflicting C++ types",
    "Reports a variable, conditional expression or helper argument that takes values of different types.",
    "A C++ variable has one type.",
    "g = None\nif flag:\n    g = grad\nelse:\n    g = 1.0",
    "Bind one type per name (a new name for a value of another type).")
UNSUPPORTED_TYPE = Code(
    "DB205", "`transpile`: a schema or annotation type with no C++ spelling",
    "Reports a schema argument or helper annotation whose type has no C++ translation (`Dimname`, "
    "a `Tensor[]` output next to other outputs, an unannotated helper parameter).",
    "The node's members and the wrapper's signature cannot be written.",
    "@helper\ndef scale(x, factor):\n    ...",
    "Annotate helpers fully with the types of formulas/README.md; leave such operators to torch.")
DUPLICATE_OPERATOR = Code(
    "DB206", "`transpile`: a second formula for the same operator, or an operator the shipped library registers in the same namespace",
    "Reports a formula for an operator that another formula of the library already defines, or, "
    "under `--namespace formulas`, an operator the shipped library already registers.",
    "Both would register the same `torch.ops.<namespace>.<op>`.",
    fix="Keep one formula per operator, or give the package its own `--namespace`.")

EMIT_YAML_SHAPE = Code(
    "DB300", "`emit-yaml`: a formula that is not in the shape `transpile import-yaml` writes",
    "Reports, in a directory given to `transpile emit-yaml`, a formula line whose expression is outside "
    "the Python spelling of derivatives.yaml's C++ (transpiler/yaml_import/README.md), a decorator "
    "argument that is not a literal, or a `# cpp:` / `# yaml:` comment that is not the JSON it must be.",
    "The line has no derivatives.yaml text; `emit-yaml` writes nothing rather than a file torchgen "
    "would read differently.",
    "def backward(grad):\n    grad_self = grad ** 2",
    "Write the line in the dialect (`at.pow(grad, 2)`), or re-import the entry with `transpile import-yaml`.")
IMPORT_YAML_ENTRY = Code(
    "DB301", "`import-yaml`: a derivatives.yaml entry that cannot be translated to a Python formula",
    "Reports an entry of the derivatives.yaml given to `transpile import-yaml` whose schema does not parse, "
    "whose formula is C++ the importer's parser does not read, or whose Python spelling would parse "
    "differently (C++ reads `a == b & c` as `(a == b) & c`, Python as `a == (b & c)`).",
    "The entry is left out of the import (the others are written); a formula whose Python meant something "
    "else would be silently wrong.",
    "- name: cos(Tensor self) -> Tensor\n  self: grad * -self.sin( +",
    "Fix the entry's C++, or add the parentheses the message asks for.")

# The table, in order of code.
CODES: tuple[Code, ...] = (
    UNPARSABLE, UNREADABLE, INTERNAL_ERROR, KEPT_INTERMEDIATE, REBOUND_INPUT, IN_PLACE,
    LATE_BINDING, NONLOCAL, UNDECLARED_OPERATOR, GRADIENT_COUNT, FORMULA_SHAPE, UNSUPPORTED,
    UNKNOWN_OPERATOR, NO_OVERLOAD, UNKNOWN_NAME, TYPE_CONFLICT, UNSUPPORTED_TYPE,
    DUPLICATE_OPERATOR, EMIT_YAML_SHAPE, IMPORT_YAML_ENTRY,
)

BY_CODE: dict[str, Code] = {entry.code: entry for entry in CODES}


def lookup(code: str) -> Code | None:
    """The entry of ``code`` (case-insensitive), or None."""
    return BY_CODE.get(code.strip().upper())


def matching(prefix: str) -> list[str]:
    """Declared codes that start with ``prefix`` (``DB1`` -> DB100...DB107)."""
    prefix = prefix.strip().upper()
    return [entry.code for entry in CODES if entry.code.startswith(prefix)]


def markdown_table(stages: bool = False) -> str:
    """The README's diagnostics table; ``stages``: docs/commands.md's, with the command that reports each."""
    if not stages:
        rows = ["| code | meaning |", "|---|---|"]
        rows += [f"| {entry.code} | {entry.summary} |" for entry in CODES]
    else:
        rows = ["| code | from | meaning |", "|---|---|---|"]
        rows += [f"| {entry.code} | {entry.stage} | {entry.summary.removeprefix(f'`{entry.stage}`: ')} |"
                 for entry in CODES]
    return "\n".join(rows) + "\n"
