"""Forward-mode AD in the forward wrapper: a formula's ``jvp`` -> C++ (torchgen's VariableType pattern).

Two parts per formula, both placed by :mod:`transpiler.cpp.nodes`:

* ``<function>_jvp(...)``: the Python ``jvp`` transliterated; its parameters are
  the jvp's own (tangents ``<input>_t``, primals ``<input>_p``) then what it
  captures (inputs, outputs, forward metadata and scalars), in first-use order;
* the wrapper's lines: when an input whose tangent the jvp takes carries one
  (``isFwGradDefined``), a complex input or output is refused (the formulas are
  derived for real dtypes, as in backward), every such tangent is read at level 0
  (an undefined one as zeros), the jvp runs on the primals (``_fw_primal(0)``) with autograd on
  (so its own operations are differentiable), and each differentiable output
  gets its tangent with ``_set_fw_grad(..., /*level*/ 0, /*is_inplace_op*/ false)``.
  An in-place operator (``celu_(Tensor(a!) self)``) writes its tangent in place too, as
  torchgen's in-place kernels do: ``self_t`` is ``self``'s own tangent (zeros when it has none),
  the jvp writes it (``self_t.zero_()``, ``self_t.copy_(...)``) and the output, ``self``
  itself, gets it with ``is_inplace_op`` true; ``original_self_t`` / ``original_self_p`` are
  copies of the tangent and of the values before the write, and the outputs the jvp reads are
  their primals (the written ``self`` carries a tangent).
  A formula without a jvp gets torch's ``TORCH_CHECK_NOT_IMPLEMENTED`` "Trying to
  use forward AD with <op> that does not support it" instead: never a silently
  missing tangent.
"""
from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from transpiler.cpp import types as T
from transpiler.cpp.expressions import Binding, Context, cpp_name, unsupported
from transpiler.cpp.signature import WrapperSignature, closure_parameter, is_borrowed, is_view
from transpiler.cpp.statements import translate_body
from transpiler.cpp.types import PyType
from transpiler.model import CaptureKind, Closure, Formula, returned_values


def _input_type(signature: WrapperSignature, name: str) -> PyType:
    return signature.argument(name).type


def _given(signature: WrapperSignature, name: str) -> str:
    """The kernel's own argument ``name`` (tangents belong to the inputs as given, even when the
    forward rebinds the name)."""
    return signature.argument(name).given_tensor


def _tangent_inputs(formula: Formula, jvp: Closure) -> list[str]:
    """Differentiable inputs whose tangents the jvp takes, in schema order."""
    taken = set(jvp.tangents.values())
    return [a.name for a in formula.differentiable_inputs if a.name in taken]


def _returned_outputs(formula: Formula, jvp: Closure) -> list[int]:
    """Which outputs the jvp's tangents belong to, in the order it returns them: every
    differentiable output, or, when every ``return`` names the same ``<output>_t`` (the
    derivatives.yaml dialect: the others get no tangent), those outputs."""
    by_name = {f"{formula.outputs[i]}_t": i for i in formula.differentiable_outputs
               if formula.outputs[i] is not None}
    shapes = set()
    for statement in jvp.returns:
        values = returned_values(statement)
        named = all(isinstance(v, cst.Name) and v.value in by_name for v in values)
        shapes.add(tuple(by_name[v.value] for v in values) if named else None)
    if len(shapes) == 1 and None not in shapes:
        return list(shapes.pop())
    return list(formula.differentiable_outputs)


def _return_type(count: int) -> PyType:
    return T.TENSOR if count == 1 else T.tuple_of(*([T.TENSOR] * count))


def jvp_function_name(formula: Formula) -> str:
    """The C++ name of the formula's jvp function, ``<function>_jvp``."""
    return cpp_name(f"{formula.function}_jvp")


def jvp_function(formula: Formula, signature: WrapperSignature, context: Context,
                 type_of: Callable[[str], PyType], written: str | None = None) -> str:
    """``<function>_jvp(...)``: the formula's jvp as a C++ function ('' when it has none).
    ``context``: the library's; ``type_of``: the type of a forward name (what a capture is);
    ``written``: the input an in-place operator writes (None: a functional one)."""
    jvp = formula.jvp
    if jvp is None:
        return ""
    for param in jvp.node.params.params:
        if _source(param.name.value, written) not in signature:
            raise unsupported(param, f"the jvp parameter `{param.name.value}` (the value before an "
                              "in-place write, in a functional operator's jvp)")
    declarations: list[str] = []
    bindings: dict[str, Binding] = {}
    # a tangent or primal: its input's type
    parameters = [(p, _input_type(signature, _source(p, written))) for p in jvp.params]
    parameters += [(c.name, type_of(c.name)) for c in jvp.captures]
    # the written input's tangent is written in place: a handle of its own (the same tensor)
    by_value = jvp.rebound | ({f"{written}_t"} if written is not None else set())
    for name, ty in parameters:
        declaration, bindings[name] = closure_parameter(name, ty, by_value)
        declarations.append(declaration)
    returns = T.TENSOR_LIST if signature.list_output else _return_type(len(_returned_outputs(formula, jvp)))
    body = translate_body(jvp.node.body.body, context.bind(bindings), returns)
    return "\n".join([
        f"{T.cpp_value(returns)} {jvp_function_name(formula)}(",
        "    " + ",\n    ".join(declarations) + ") {",
        *body.lines,
        "}",
        "",
    ])


ORIGINAL = "original_"    # derivatives.yaml's ``original_self_t`` / ``original_self_p``: before an in-place write


def _source(param: str, written: str | None) -> str:
    """The input a jvp parameter belongs to: ``self_t`` and ``original_self_p`` to ``self`` (the
    latter only where ``self`` is written in place)."""
    name = param[:-2]
    if written is not None and name == ORIGINAL + written:
        return written
    return name


def _original(param: str, written: str | None) -> bool:
    return written is not None and param[:-2] == ORIGINAL + written


def _argument(signature: WrapperSignature, jvp: Closure, name: str, kind: CaptureKind | None,
              written: str | None = None) -> str:
    """What the wrapper passes for a jvp parameter or capture."""
    if name in jvp.tangents or (kind is None and _original(name, written)):
        return cpp_name(name)                              # read once before the call
    if kind is CaptureKind.OUTPUT and written is not None:
        return f"formulas::runtime::primal({cpp_name(name)})"   # the written input, which carries a tangent
    source = name[:-2] if kind is None else name             # ``self_p`` is the primal of ``self``
    if kind is None or kind is CaptureKind.INPUT:
        ty = _input_type(signature, source)
        if ty == T.TENSOR:
            return f"formulas::runtime::primal({_given(signature, source)})"
        if ty == T.TENSOR_LIST:
            return f"formulas::runtime::primals({_given(signature, source)})"
        if ty == T.optional(T.STR):     # the dispatcher lends an optional string_view: the jvp keeps a string
            return f"std::optional<std::string>({cpp_name(source)})"
        if is_borrowed(ty) and not is_view(ty):
            return f"formulas::runtime::to_owned({cpp_name(source)})"   # the dispatcher lends an ArrayRef
    return cpp_name(source)


def forbid_lines(formula: Formula, signature: WrapperSignature) -> list[str]:
    """A formula without a jvp: torch's error when an input carries a tangent."""
    if formula.jvp is not None or not formula.differentiable_inputs:
        return []
    condition = " || ".join(_defined(signature, a.name) for a in formula.differentiable_inputs)
    op = formula.op_name
    if formula.jvp_left_out is not None:     # per-formula mode left a written jvp out
        reason = formula.jvp_left_out.replace("\\", "\\\\").replace('"', '\\"')
        return [f'  TORCH_CHECK_NOT_IMPLEMENTED(!({condition}), "Trying to use forward AD with {op} that does not '
                f'support it because its jvp could not be transliterated to C++ ({reason})");']
    return [f'  TORCH_CHECK_NOT_IMPLEMENTED(!({condition}), "Trying to use forward AD with {op} that does not '
            f'support it because its formula defines no jvp; add a nested `def jvp(...)` (or '
            f'@derivative(..., jvp=\\"auto_linear\\" / \\"auto_element_wise\\")) to the formula");']


def before_write_lines(formula: Formula, signature: WrapperSignature, written: str | None) -> list[str]:
    """An in-place operator's jvp reading ``original_self_t`` / ``original_self_p``: copies of the
    ``written`` input's tangent and values, made before the write when a tangent is taken."""
    jvp = formula.jvp
    originals = [] if jvp is None or written is None else [p for p in jvp.params if _original(p, written)]
    inputs = [] if not originals else _tangent_inputs(formula, jvp)
    if not inputs:
        return []
    condition = " || ".join(_defined(signature, name) for name in inputs)
    given = _given(signature, written)
    lines = [f"  at::Tensor {cpp_name(p)};" for p in originals] + [f"  if ({condition}) {{"]
    for param in originals:
        read = "tangent" if param.endswith("_t") else "primal"
        lines.append(f"    {cpp_name(param)} = formulas::runtime::{read}({given}).clone();")
    return lines + ["  }"]


def _defined(signature: WrapperSignature, name: str) -> str:
    if _input_type(signature, name) == T.TENSOR_LIST:
        return f"torch::autograd::isFwGradDefinedTensorList({_given(signature, name)})"
    return f"torch::autograd::isFwGradDefined({_given(signature, name)})"


def tangent_lines(formula: Formula, signature: WrapperSignature, outputs: list[str],
                  written: str | None = None) -> list[str]:
    """The wrapper's forward-mode block (after the forward, with autograd on again); ``outputs``:
    the C++ names of the wrapper's outputs, one per schema return; ``written``: the input an
    in-place operator writes."""
    jvp = formula.jvp
    if jvp is None:
        return []
    inputs = _tangent_inputs(formula, jvp)
    if not inputs:
        return []
    condition = " || ".join(_defined(signature, name) for name in inputs)
    returned = _returned_outputs(formula, jvp)
    refused = [_given(signature, name) for name in inputs] + [outputs[index] for index in returned]
    op = formula.op_name
    # no tangent on an integer or bool result (``x.long()``), as in torch
    differentiable = " || ".join(f"formulas::runtime::differentiable_dtype({outputs[index]})" for index in returned)
    lines = [f"  if (({condition}) && ({differentiable})) {{"]
    lines += [f'    formulas::runtime::refuse_complex("{op}", {tensor});' for tensor in refused]
    for param, source in jvp.tangents.items():
        if _original(param, written):
            continue
        read = "tangents" if _input_type(signature, source) == T.TENSOR_LIST else "tangent"
        lines.append(f"    const auto {cpp_name(param)} = formulas::runtime::{read}({_given(signature, source)});")
    arguments = [_argument(signature, jvp, p, None, written) for p in jvp.params]
    arguments += [_argument(signature, jvp, c.name, c.kind, written) for c in jvp.captures]
    call = f"formulas::{jvp_function_name(formula)}({', '.join(arguments)})"
    if written is not None:
        # the jvp wrote the input's own tangent and returns it (torch's in-place formulas do), or
        # returns another tensor, which is copied into the tangent the input already has
        output = outputs[returned[0]]
        lines += [f"    const auto written_tangent = {call};",
                  f"    const auto& existing_tangent = {output}._fw_grad(/*level*/ 0);",
                  "    if (existing_tangent.defined() && !existing_tangent.is_same(written_tangent)) {",
                  "      existing_tangent.copy_(written_tangent);",
                  "    } else if (!existing_tangent.defined()) {",
                  f"      {output}._set_fw_grad(written_tangent, /*level*/ 0, /*is_inplace_op*/ true);",
                  "    }",
                  "  }"]
        return lines
    if len(returned) == 1:
        lines.append(f"    formulas::runtime::set_tangent({outputs[returned[0]]}, {call});")
    else:
        lines.append(f"    const auto output_tangents = {call};")
        for position, index in enumerate(returned):
            lines.append(f"    formulas::runtime::set_tangent({outputs[index]}, std::get<{position}>(output_tangents));")
    lines.append("  }")
    return lines


__all__ = ["before_write_lines", "forbid_lines", "jvp_function", "jvp_function_name", "tangent_lines"]
