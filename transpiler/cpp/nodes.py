"""One formula -> its autograd node, backward function and forward wrapper (C++ text).

Saved-variable inference follows torchgen: only what the backward captures is
saved; a tensor the backward reads only through metadata methods saves that
metadata (sizes, dim, numel, scalar type, options) instead of the tensor;
inputs are ``SavedVariable(x, false)``, outputs ``SavedVariable(y, true)``;
non-tensor captures are plain members. ``apply()`` returns early when every
incoming gradient is undefined, computes the ``needs_input_grad`` mask from
``task_should_compute_output`` and stores only the gradients asked for.

Compiled autograd follows torch's own generated nodes (``Functions.cpp``):
``apply()`` unpacks the saved variables and calls ``<Node>_apply_functional``,
a function of the gradients, the mask and the unpacked values only;
``compiled_args`` collects every member into the cache key and
``apply_with_saved`` swaps them for the compiler's proxies, binds
``<Node>_apply_functional_ivalue`` once and proxies a call to it into the graph.
Forward mode is :mod:`transpiler.cpp.forward_ad`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

import libcst as cst

from transpiler.cpp import forward_ad
from transpiler.cpp import types as T
from transpiler.cpp.expressions import (
    EMITTED_METADATA, UNSUPPORTED_TYPE, Binding, Context, Untranslatable, cpp_name, translate, unsupported,
)
from transpiler.cpp.signature import borrowed_param, closure_parameter, is_borrowed, is_view, wrapper_signature
from transpiler.cpp.statements import translate_body
from transpiler.cpp.types import Kind, PyType
from transpiler.frontend import python_name
from transpiler.model import Capture, CaptureKind, Formula
from transpiler.cpp.operators import Resolved
from transpiler.schema import Argument, FunctionSchema, ListType, OptionalType, is_tensor_like


@dataclass(frozen=True)
class SavedTensor:
    """A captured tensor (or Tensor[], or Tensor?[] index list) kept as ``SavedVariable`` member(s)."""

    name: str
    member: str
    is_output: bool
    is_list: bool
    is_index_list: bool = False     # Tensor?[]: a None entry is saved as an undefined tensor

    @property
    def type(self) -> PyType:
        """The saved value's Python type: a tensor, a list of tensors, or an index list."""
        if self.is_index_list:
            return T.INDEX_LIST
        return T.TENSOR_LIST if self.is_list else T.TENSOR

    @property
    def packed(self) -> str:
        """The C++ type of the unpacked value."""
        return "std::vector<at::Tensor>" if self.type == T.TENSOR_LIST else T.cpp_value(self.type)


@dataclass(frozen=True)
class SavedMetadata:
    """One metadata method of a tensor the backward reads only through metadata (``self.sizes()``)."""

    tensor: str
    method: str
    member: str
    param: str              # the backward function's parameter holding it
    type: PyType


@dataclass(frozen=True)
class SavedValue:
    """A captured non-tensor (input, metadata local, scalar) kept as a plain member."""

    name: str
    member: str
    type: PyType


Saved = SavedTensor | SavedMetadata | SavedValue


@dataclass(frozen=True)
class EmittedFormula:
    """The C++ of one formula, ready to be placed in its module's file."""

    struct: str
    code: str            # node struct, backward function, apply(), forward wrapper
    registration: str    # the m.def(...) line
    has_views: bool = False    # the code marks views (it needs views.h)
    called: frozenset[str] = frozenset()   # the ATen functions (``at::<name>``) the code calls
    vmap_by_example: str | None = None     # the operator's name, if it takes vmap's rule of vmap.h
    aten_registrar: str | None = None      # a formula's entry of its module's aten_override::Registrars


def aten_registrar(op_name: str, wrapper: str, boxed: bool = False) -> str:
    """The entry of ``aten_override::Registrars`` (``aten_override.h``) registering the wrapper
    ``formulas::<wrapper>`` for aten's operator ``op_name`` at the key it is given; ``boxed``
    (an operator taking a list of tensors, whose aten kernels may have another C++ signature:
    ``aten_override_boxed.h``): the package's own operator's kernel, called boxed."""
    if boxed:
        name, _, overload = op_name.partition(".")
        register = f'aten_override::register_boxed(m, key, library_namespace, "{name}", "{overload}");'
    else:
        register = f'm.impl("{op_name}", torch::dispatch(key, TORCH_FN(formulas::{wrapper})));'
    return f'{{"{op_name}", +[](torch::Library& m, c10::DispatchKey key) {{ {register} }}}}'


def takes_tensor_list(schema: FunctionSchema) -> bool:
    """Whether the operator takes a ``Tensor[]`` or ``Tensor?[]``."""
    return any(isinstance(a.type, ListType) and is_tensor_like(a.type) for a in schema.arguments)


def vmap_by_example(schema: FunctionSchema) -> str | None:
    """The operator's name when ``torch.vmap`` needs the rule of ``vmap.h`` for it: a functional
    operator with a ``Tensor[]`` or ``Tensor?[]`` argument, for which torch generates no fallback
    (a view or in-place one keeps torch's refusal: run per example, it would not alias)."""
    functional = all(a.annotation is None for a in (*schema.arguments, *schema.returns))
    takes_list = takes_tensor_list(schema)
    return str(schema.name) if functional and takes_list else None


def node_name(formula: Formula, taken: set[str]) -> str:
    """``<Op>Backward<N>`` in torchgen's spelling (``mul.Tensor`` -> ``MulTensorBackward0``); ``N``
    counts the formulas of one operator name emitted before (dispatch variants)."""
    base = formula.schema.name.node_prefix
    index = 0
    while f"{base}Backward{index}" in taken:
        index += 1
    return f"{base}Backward{index}"


def _saved_metadata(capture: Capture) -> list[str] | None:
    """The metadata the backward reads from a tensor capture, as saved (``size(i)`` is answered
    from the saved ``sizes``), or None when it reads more than the metadata the emitter writes."""
    methods = capture.metadata_methods
    if not methods or any(m not in EMITTED_METADATA for m in methods):
        return None
    return sorted({"sizes" if m == "size" else m for m in methods})


def _lend(item: SavedValue) -> str:
    """A plain member as the backward function's argument."""
    return f"formulas::runtime::borrow({item.member})" if item.type == T.optional(T.INT_LIST) else item.member


class ViewEmitter:
    """Views, as torch's ADInplaceOrView kernels make them (a mixin of :class:`FormulaEmitter`).

    An output whose schema annotation aliases a Tensor input (``Tensor(a) self -> Tensor(a)``)
    and that shares its storage (``reshape`` may copy) is marked with
    ``torch::autograd::as_view`` before ``set_history``, so that an in-place write to it
    rebases the base's history (``CopySlices``). Its view function, a
    ``torch::autograd::ViewFunc`` replaying the operator on a new base, is given where torch
    gives one: tensors without ``as_strided`` support, or view replay enabled. The parts of a
    ``Tensor[]`` output (``split``, ``unbind``) are marked as torch marks the outputs of its
    multi-output views (``CreationMeta::MULTI_OUTPUT_NODE``, no view function): an in-place
    write to one raises torch's error.
    """

    def view_outputs(self) -> list[tuple[int, Argument]]:
        """(output index, the input it is a view of) for each differentiable view output."""
        views = []
        for index in self.differentiable_outputs:
            returned = self.schema.returns[index].annotation
            if returned is None or returned.is_write:
                continue
            for arg in self.arguments:
                if (arg.annotation is not None and not arg.annotation.is_write
                        and set(arg.annotation.alias_set) & set(returned.alias_set)
                        and T.from_schema(arg.type) == T.TENSOR and not isinstance(arg.type, OptionalType)):
                    views.append((index, arg))
                    break
        return views

    def _view_func_name(self, index: int) -> str:
        return f"{self.struct.removesuffix('Backward0')}ViewFunc{index}"

    def _replay_arguments(self) -> list[Argument] | None:
        """The arguments a view function keeps (every one but the tensor it is replayed on);
        None when another argument is a tensor (a view function would have to save it)."""
        others = [a for a in self.arguments if T.from_schema(a.type) != T.TENSOR]
        return others if len(others) == len(self.arguments) - 1 else None

    def view_func_struct(self, views: list[tuple[int, Argument]]) -> str:
        """The ``ViewFunc`` struct that replays the view outputs ``views`` on another base ("" when none
        can)."""
        kept = self._replay_arguments()
        if kept is None or self.list_output:
            return ""
        structs = []
        for index, _ in views:
            name = self._view_func_name(index)
            members = [f"  {T.cpp_value(T.from_schema(a.type))} {cpp_name(a.name)}_{{}};" for a in kept]
            structs += [
                f"struct {name} : public formulas::runtime::ReplayViewFunc<{name}> {{",
                "  at::Tensor operator()(const at::Tensor& base) const override;",
                *members,
                "};",
                "",
            ]
        return "\n".join(structs)

    def view_func_replay(self, views: list[tuple[int, Argument]]) -> str:
        """Each view function's ``operator()``: the operator itself (this wrapper) on the new base."""
        kept = self._replay_arguments()
        if kept is None or self.list_output:
            return ""
        functions = []
        for index, source in views:
            arguments = []
            for arg in self.arguments:
                if arg is source:
                    arguments.append("base")
                elif T.from_schema(arg.type) == T.optional(T.INT_LIST):
                    arguments.append(f"formulas::runtime::borrow({cpp_name(arg.name)}_)")
                else:
                    arguments.append(f"{cpp_name(arg.name)}_")
            call = f"formulas::{self.wrapper_name}({', '.join(arguments)})"
            if len(self.schema.returns) > 1:
                call = f"std::get<{index}>({call})"
            functions += [f"at::Tensor {self._view_func_name(index)}::operator()(const at::Tensor& base) const {{",
                          f"  return {call};",
                          "}",
                          ""]
        return "\n".join(functions)

    def view_marking(self, outputs: list[str]) -> list[str]:
        """The wrapper's lines that make each view output a view of its input (torch's
        ``as_view``, see ``views.h``), run right before ``set_history``."""
        lines = []
        kept = self._replay_arguments()
        for index, source in self.view_outputs():
            out, base = outputs[index], self.signature.argument(source.name).given
            if self.list_output:    # several views: no view function (never written in place)
                lines.append(f"  formulas::runtime::as_multi_output_views({base}, {out});")
                continue
            lines += [f"  if (formulas::runtime::shares_storage({out}, {base})) {{",
                      f"    {out} = formulas::runtime::as_view({base}, {out}, [&] {{"]
            if kept is None:
                lines.append("      return std::unique_ptr<torch::autograd::ViewFunc>();")
            else:
                lines += [f"      auto replay = std::make_unique<{self._view_func_name(index)}>();",
                          *(f"      replay->{cpp_name(a.name)}_ = formulas::runtime::to_owned("
                            f"{self.signature.argument(a.name).given});" for a in kept),
                          "      return std::unique_ptr<torch::autograd::ViewFunc>(std::move(replay));"]
            lines += ["    });", "  }"]
        return lines


class FormulaEmitter(ViewEmitter):
    """Builds the C++ of one formula from the model and the library's context."""

    def __init__(self, formula: Formula, context: Context, struct: str) -> None:
        self.formula = formula
        self.context = context
        self.struct = struct
        self.schema = formula.schema
        self.written = _written_in_place(formula)
        self.signature = wrapper_signature(formula)
        # Named as the formula's parameters: a schema argument ``from`` (a Python keyword) is ``from_``.
        self.arguments = [a.argument for a in self.signature.arguments]
        self.forward_context = context.bind({
            a.name: Binding(a.type, cpp_name(a.name), borrowed=is_view(a.type) and not a.rebound)
            for a in self.signature.arguments})
        self.forward = translate_body(formula.forward, self.forward_context, return_type=None)
        if len(self.schema.returns) > 1 and not isinstance(formula.returned_display, cst.Tuple):
            raise unsupported(formula.returned_display, "outputs that are not a tuple of names")
        self.output_types = list(self.signature.output_types)
        self.differentiable_outputs = formula.differentiable_outputs
        self.list_output = self.signature.list_output
        if not self.list_output and any(self.output_types[i] != T.TENSOR for i in self.differentiable_outputs):
            raise Untranslatable(formula.schema_node, UNSUPPORTED_TYPE,
                                 f"{formula.op_name}: only Tensor outputs, or one Tensor[] output, can be "
                                 "differentiable here (mark the others False in output_differentiability)")
        if self.list_output and isinstance(formula.returned[0], cst.Name) \
                and self.type_of(formula.returned[0].value) != T.TENSOR_LIST:
            raise unsupported(formula.returned[0], f"{formula.op_name} returns "
                              f"{self.type_of(formula.returned[0].value)} for its Tensor[] output; return the "
                              "list of tensors the operator gives (`result = at.split(...)`)")
        self.saved = self._saved()
        if self.written is not None:
            self._check_in_place()

    def _check_in_place(self) -> None:
        """An in-place formula's output is what the in-place operator itself returns (its input,
        written); its jvp writes the input's tangent in place (:mod:`transpiler.cpp.forward_ad`)."""
        operator = self.schema.name.base
        if not any(_assigns_call(statement, self.formula.outputs[0], operator) for statement in self.formula.forward):
            raise Untranslatable(self.formula.schema_node, UNSUPPORTED_TYPE,
                                 f"{self.formula.op_name}: an in-place formula's forward returns what the in-place "
                                 f"operator returns (`{self.formula.outputs[0] or 'result'} = at.{operator}(...)`), "
                                 "the tensor it writes")

    # --- model ---------------------------------------------------------------------------------
    def type_of(self, name: str) -> PyType:
        """The type of ``name`` in the forward: a local of the formula, else a name of its context."""
        if name in self.forward.locals.types:
            return self.forward.locals.types[name]
        return self.forward_context.names[name].type

    def _saved(self) -> list[Saved]:
        saved: list[Saved] = []
        for capture in self.formula.captures:
            ty = self.type_of(capture.name)
            member = f"{cpp_name(capture.name)}_"
            if ty.kind is Kind.TENSOR:
                methods = _saved_metadata(capture)
                if methods is not None:
                    saved.extend(SavedMetadata(capture.name, m, f"{cpp_name(capture.name)}_{m}_", f"saved_{cpp_name(capture.name)}_{m}",
                                               EMITTED_METADATA[m][0]) for m in methods)
                    continue
                saved.append(SavedTensor(capture.name, member, capture.kind is CaptureKind.OUTPUT, False))
            elif ty in (T.TENSOR_LIST, T.INDEX_LIST):
                saved.append(SavedTensor(capture.name, member, capture.kind is CaptureKind.OUTPUT, True,
                                         ty == T.INDEX_LIST))
            else:
                saved.append(SavedValue(capture.name, member, ty))
        return saved

    @property
    def grad_types(self) -> list[PyType]:
        """The type of each differentiable input's gradient (a tensor, or a list of them)."""
        return [T.TENSOR_LIST if T.from_schema(a.type) == T.TENSOR_LIST else T.TENSOR
                for a in self.formula.differentiable_inputs]

    @property
    def backward_return(self) -> PyType:
        """The backward function's return type: the one gradient type, or a tuple of them."""
        types = self.grad_types
        return types[0] if len(types) == 1 else T.tuple_of(*types)

    # --- text ----------------------------------------------------------------------------------
    def emit(self) -> EmittedFormula:
        """The formula's C++: node struct, backward, functional, apply, compiled autograd, jvp, view replay
        and wrapper."""
        views = self.view_outputs()
        parts = [self.struct_text(), self.backward_function(), self.functional_text(), self.apply_text(),
                 self.compiled_autograd_text(),
                 forward_ad.jvp_function(self.formula, self.signature, self.context, self.type_of, self.written),
                 self.view_func_struct(views),
                 self.wrapper_text(), self.view_func_replay(views)]
        schema = str(self.schema).replace("\\", "\\\\").replace('"', '\\"')
        registration = f'm.def("{schema}", TORCH_FN(formulas::{self.wrapper_name}));'
        return EmittedFormula(self.struct, "\n".join(p for p in parts if p), registration,
                              bool(views) or self.written is not None,    # in place: VariableTypeUtils.h
                              vmap_by_example=vmap_by_example(self.schema),
                              aten_registrar=aten_registrar(self.formula.op_name, self.wrapper_name,
                                                            boxed=takes_tensor_list(self.schema)))

    @property
    def wrapper_name(self) -> str:
        """The name of the kernel wrapper that records the node."""
        return self.signature.name

    @property
    def backward_name(self) -> str:
        """In its own namespace: the backward of ``diagonal`` never collides with the wrapper of
        an operator ``diagonal_backward``."""
        return f"backwards::{cpp_name(self.formula.function)}"

    def struct_text(self) -> str:
        """The node's struct declaration: its saved members, ``apply`` and ``release_variables``."""
        members, releases = [], []
        for item in self.saved:
            if isinstance(item, SavedTensor) and item.is_list:
                members.append(f"  std::vector<torch::autograd::SavedVariable> {item.member};")
                members.append(f"  bool {cpp_name(item.name)}_released_ = false;")
                releases.append(f"    {item.member}.clear();")
                releases.append(f"    {cpp_name(item.name)}_released_ = true;")
            elif isinstance(item, SavedTensor):
                members.append(f"  torch::autograd::SavedVariable {item.member};")
                releases.append(f"    {item.member}.reset_data();")
            else:
                members.append(f"  {T.cpp_value(item.type)} {item.member}{{}};")
        for arg in self.formula.differentiable_inputs:
            if T.from_schema(arg.type) == T.TENSOR_LIST:
                members.append(f"  size_t {cpp_name(arg.name)}_size_ = 0;")
        release_body = "\n".join(["    std::lock_guard<std::mutex> lock(mutex_);", *releases])
        return "\n".join([
            f"struct {self.struct} : public torch::autograd::TraceableFunction {{",
            "  using TraceableFunction::TraceableFunction;",
            "  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override;",
            f'  std::string name() const override {{ return "{self.struct}"; }}',
            "  void compiled_args(torch::dynamo::autograd::CompiledNodeArgs& args) const override;",
            "  torch::autograd::variable_list apply_with_saved(const torch::autograd::variable_list& grads,",
            "                                                  torch::dynamo::autograd::SwapSavedVariables& saved) override;",
            "  void release_variables() override {",
            release_body,
            "  }",
            *members,
            "};",
            "",
        ])

    def _backward_params(self) -> tuple[list[str], dict[str, Binding]]:
        """The backward function's parameter declarations (apply() passes them in this order)
        and the bindings its body sees; a parameter the body rebinds is taken by value."""
        rebound = self.formula.backward.rebound
        declarations: list[str] = []
        bindings: dict[str, Binding] = {}

        def parameter(name: str, ty: PyType, declared: str) -> None:
            declaration, bindings[name] = closure_parameter(name, ty, rebound, declared)
            declarations.append(declaration)

        for grad in self.formula.backward.params:
            if self.list_output:
                parameter(grad, T.TENSOR_LIST, "at::TensorList")
            else:
                parameter(grad, T.TENSOR, "const at::Tensor&")
        metadata: dict[str, dict[str, str]] = {}
        for item in self.saved:
            if isinstance(item, SavedMetadata):
                metadata.setdefault(item.tensor, {})[item.method] = item.param
                declarations.append(f"{borrowed_param(item.type)} {item.param}")
            elif isinstance(item, SavedTensor):
                parameter(item.name, item.type, borrowed_param(item.type))
            else:
                parameter(item.name, item.type, borrowed_param(item.type))
        for tensor, methods in metadata.items():
            bindings[tensor] = Binding(T.TENSOR, cpp_name(tensor), methods)
        mask = self.formula.backward.needs_input_grad
        if mask is not None:
            count = len(self.formula.differentiable_inputs)
            parameter(mask, T.list_of(T.BOOL, count), f"const std::array<bool, {count}>&")
        return declarations, bindings

    def backward_function(self) -> str:
        """The backward as a C++ function in ``namespace backwards``, translated from the formula's closure."""
        declarations, bindings = self._backward_params()
        body = translate_body(self.formula.backward.node.body.body, self.context.bind(bindings), self.backward_return)
        return "\n".join([
            "namespace backwards {",
            f"{T.cpp_value(self.backward_return)} {cpp_name(self.formula.function)}(",
            "    " + ",\n    ".join(declarations) + ") {",
            *body.lines,
            "}",
            "}  // namespace backwards",
            "",
        ])

    # --- apply(), its functional form and compiled autograd ----------------------------------------
    def _functional_params(self) -> list[tuple[str, str, str]]:
        """(member, C++ parameter type, packed C++ type) of every value ``apply_functional`` takes
        after the gradients and the mask: the unpacked saved values, then list sizes."""
        params = []
        for item in self.saved:
            if isinstance(item, SavedTensor):
                packed = item.packed
            else:
                packed = T.cpp_value(item.type)
            params.append((item.member, f"const {packed}&", packed))
        for arg in self.formula.differentiable_inputs:
            if T.from_schema(arg.type) == T.TENSOR_LIST:
                params.append((f"{cpp_name(arg.name)}_size_", "size_t", "size_t"))
        return params

    def _index_ranges(self, size_prefix: str) -> list[str]:
        lines = ["  formulas::runtime::IndexRanges ranges;"]
        for arg in self.formula.differentiable_inputs:
            count = f"{size_prefix}{cpp_name(arg.name)}_size_" if T.from_schema(arg.type) == T.TENSOR_LIST else "1"
            lines.append(f"  const auto {cpp_name(arg.name)}_ix = ranges.next({count});")
        return lines

    def _needs_input_grad(self) -> list[str]:
        inputs = self.formula.differentiable_inputs
        return [f"  const std::array<bool, {len(inputs)}> needs_input_grad = {{",
                *(f"      formulas::runtime::should_compute(*this, {cpp_name(a.name)}_ix)," for a in inputs),
                "  };"]

    def _unpacked(self) -> tuple[list[str], list[str]]:
        """apply()'s lines unpacking the saved variables, and the functional's arguments."""
        lines, arguments = [], []
        for item in self.saved:
            if isinstance(item, SavedTensor) and item.is_list:
                # released, the list is empty rather than undefined: torch's error, as a SavedVariable gives
                lines.append(f"  TORCH_CHECK(!{cpp_name(item.name)}_released_, torch::autograd::ERR_BACKWARD_TWICE);")
                unpack = "unpack_index_list" if item.is_index_list else "unpack_list"
                lines.append(f"  const auto {cpp_name(item.name)} = formulas::runtime::{unpack}({item.member});")
                arguments.append(cpp_name(item.name))
            elif isinstance(item, SavedTensor):
                owner = "getptr()" if item.is_output else ""
                lines.append(f"  const auto {cpp_name(item.name)} = {item.member}.unpack({owner});")
                arguments.append(cpp_name(item.name))
            else:
                arguments.append(item.member)
        arguments += [f"{cpp_name(a.name)}_size_" for a in self.formula.differentiable_inputs
                      if T.from_schema(a.type) == T.TENSOR_LIST]
        return lines, arguments

    @property
    def functional_name(self) -> str:
        """The name of the node's ``<Node>_apply_functional`` function."""
        return f"{self.struct}_apply_functional"

    def functional_text(self) -> str:
        """``<Node>_apply_functional``: the gradients of the asked inputs from the gradients, the
        mask and the unpacked saved values; and its ``ivalue`` form for compiled autograd."""
        inputs = self.formula.differentiable_inputs
        params = self._functional_params()
        signature = ", ".join(["torch::autograd::variable_list&& grads",
                               f"std::array<bool, {len(inputs)}> needs_input_grad",
                               *(f"{ty} {member}" for member, ty, _ in params)])
        lines = [f"torch::autograd::variable_list {self.functional_name}({signature}) {{",
                 *self._index_ranges(""),
                 "  torch::autograd::variable_list grad_inputs(ranges.size());",
                 "  if (!formulas::runtime::any_defined(grads)) {",
                 "    return grad_inputs;",
                 "  }",
                 # no gradient asked for (always so for a formula without tensor inputs)
                 "  if (" + (" && ".join(f"!needs_input_grad[{i}]" for i in range(len(inputs))) or "true") + ") {",
                 "    return grad_inputs;",
                 "  }"]
        if self.list_output:
            arguments = ["grads"]       # one gradient per output of the list, undefined for none
        else:
            arguments = [f"grads[{index}]" for index in range(len(self.formula.backward.params))]
        for item in self.saved:
            arguments.append(_lend(item) if isinstance(item, SavedValue) else item.member)
        if self.formula.backward.needs_input_grad is not None:
            arguments.append("needs_input_grad")
        call = f"formulas::{self.backward_name}({', '.join(arguments)})"   # qualified: no ADL into at::
        if len(inputs) == 1:
            lines.append(f"  formulas::runtime::store(grad_inputs, {cpp_name(inputs[0].name)}_ix, {call});")
        else:
            lines.append(f"  const auto input_grads = {call};")
            for index, arg in enumerate(inputs):
                lines.append(f"  if (needs_input_grad[{index}]) {{")
                lines.append(f"    formulas::runtime::store(grad_inputs, {cpp_name(arg.name)}_ix, std::get<{index}>(input_grads));")
                lines.append("  }")
        lines += ["  return grad_inputs;", "}", ""]
        unpack = [f"  auto {member} = packed_args.unpack<{packed}>();" for member, _, packed in params]
        lines += [
            f"torch::autograd::variable_list {self.functional_name}_ivalue(",
            "    const torch::autograd::variable_list& grads, const torch::autograd::ivalue_list& args) {",
            "  auto packed_args = torch::dynamo::autograd::PackedArgs(args);",
            f"  auto needs_input_grad = packed_args.unpack<std::array<bool, {len(inputs)}>>();",
            *unpack,
            f"  return {self.functional_name}(" + ", ".join(
                ["torch::autograd::variable_list(grads)", "needs_input_grad", *(m for m, _, _ in params)]) + ");",
            "}",
            "",
        ]
        return "\n".join(lines)

    def apply_text(self) -> str:
        """``<Node>::apply``: unpack the saved values and call the functional under the node's lock."""
        unpack, arguments = self._unpacked()
        call = ", ".join(["std::move(grads)", "needs_input_grad", *arguments])
        return "\n".join([
            f"torch::autograd::variable_list {self.struct}::apply(torch::autograd::variable_list&& grads) {{",
            "  std::lock_guard<std::mutex> lock(mutex_);",
            *self._index_ranges(""),
            *self._needs_input_grad(),
            *unpack,
            f"  return {self.functional_name}({call});",
            "}",
            "",
        ])

    def _members(self) -> list[tuple[str, bool | None]]:
        """Every member compiled autograd must see: (name, is_output for saved variables)."""
        members: list[tuple[str, bool | None]] = []
        for item in self.saved:
            members.append((item.member, item.is_output if isinstance(item, SavedTensor) else None))
        members += [(f"{cpp_name(a.name)}_size_", None) for a in self.formula.differentiable_inputs
                    if T.from_schema(a.type) == T.TENSOR_LIST]
        return members

    def compiled_autograd_text(self) -> str:
        """The node's compiled autograd hooks: ``compiled_args`` and ``apply_with_saved``."""
        members = self._members()
        swapped = [item.member for item in self.saved]   # list sizes are collected, never swapped
        collect = [f"  args.collect({m}, {'true' if out else 'false'});" if out is not None else f"  args.collect({m});"
                   for m, out in members]
        unpack, arguments = self._unpacked()
        inputs = self.formula.differentiable_inputs
        schema = [f"std::array<bool, {len(inputs)}>", *(packed for _, _, packed in self._functional_params())]
        return "\n".join([
            f"void {self.struct}::compiled_args(torch::dynamo::autograd::CompiledNodeArgs& args) const {{",
            *collect,
            "}",
            "",
            f"torch::autograd::variable_list {self.struct}::apply_with_saved(",
            "    const torch::autograd::variable_list& grads, torch::dynamo::autograd::SwapSavedVariables& saved) {",
            *(f"  saved.before({m});" for m in swapped),
            "  static bool functional_bound = false;",
            "  if (!functional_bound) {",
            "    functional_bound = true;",
            "    const std::vector<at::TypePtr> functional_schema = {",
            *(f"        torch::dynamo::autograd::IValuePacker<{ty}>::packed_type()," for ty in schema),
            "    };",
            "    torch::dynamo::autograd::getPyCompilerInterface()->bind_function(",
            f'        saved.get_py_compiler(), std::string(library_namespace) + "_{self.struct}", {self.functional_name}_ivalue,',
            "        functional_schema);",
            "  }",
            *self._index_ranges(""),
            *self._needs_input_grad(),
            *unpack,
            "  torch::dynamo::autograd::PackedArgs functional_args;",
            "  functional_args.pack(needs_input_grad);",
            *(f"  functional_args.pack({argument});" for argument in arguments),
            "  const auto functional_output_metadata = torch::dynamo::autograd::IValuePacker<",
            "      std::vector<std::optional<torch::autograd::InputMetadata>>>::pack(",
            "          torch::dynamo::autograd::get_input_metadata(next_edges()));",
            "  auto functional_outputs = torch::dynamo::autograd::getPyCompilerInterface()->call_function(",
            "      saved.get_py_compiler(), \"apply_functional\",",
            f'      std::string(library_namespace) + "_{self.struct}", grads, functional_args.vec(),',
            "      functional_output_metadata);",
            *(f"  saved.after({m});" for m in swapped),
            "  return functional_outputs;",
            "}",
            "",
        ])

    def _alias_guards(self, outputs: list[str]) -> list[str]:
        """An output that may be its input itself (``Tensor(a) -> Tensor(a)``, e.g. ``contiguous``)
        becomes a fresh alias, so that ``set_history`` cannot rewrite the input's own history."""
        lines = []
        for index in self.differentiable_outputs:
            returned = self.schema.returns[index].annotation
            if returned is None or returned.is_write:      # an in-place output is its input, rebased
                continue
            for arg in self.arguments:
                if not (arg.annotation is not None and set(arg.annotation.alias_set) & set(returned.alias_set)
                        and T.from_schema(arg.type) == T.TENSOR):
                    continue
                if self.list_output:
                    lines += [f"  for (auto& part : {outputs[index]}) {{",
                              f"    if (part.is_same({cpp_name(arg.name)})) {{",
                              "      part = part.alias();",
                              "    }",
                              "  }"]
                else:
                    lines += [f"  if ({outputs[index]}.is_same({cpp_name(arg.name)})) {{",
                              f"    {outputs[index]} = {outputs[index]}.alias();",
                              "  }"]
        return lines

    def _saved_before_the_write(self, item: Saved) -> bool:
        """Whether ``item`` is the written tensor's metadata or values, kept from before the write."""
        if isinstance(item, SavedMetadata):
            return item.tensor == self.written
        return isinstance(item, SavedTensor) and item.name == self.written and not item.is_output

    def _before_the_write(self) -> list[str]:
        """An in-place operator's wrapper: torch's checks (a leaf that requires grad, a view it may
        not write) and the written tensor's metadata the backward reads, saved before the write."""
        if self.written is None:
            return []
        tensor = cpp_name(self.written)
        lines = [f"  torch::autograd::check_inplace({tensor}, static_cast<bool>(grad_fn));"]
        saved = []
        for item in filter(self._saved_before_the_write, self.saved):
            if isinstance(item, SavedMetadata):
                saved.append(f"    grad_fn->{item.member} = {EMITTED_METADATA[item.method][1].format(tensor)};")
            else:
                # its values before the write: a copy made with autograd on, so that a double
                # backward through it reaches the input (torchgen saves ``self.clone()`` alike)
                saved.append(f"    grad_fn->{item.member} = torch::autograd::SavedVariable({tensor}.clone(), false);")
        if saved:
            lines += ["  if (grad_fn) {", *saved, "  }"]
        return lines

    def _edge_inputs(self) -> list[str]:
        """The tensors the node's edges go to, one per differentiable input in schema order: an
        input torch gives no gradient edge (:attr:`Formula.inputs_without_gradient`) is an undefined
        tensor there, so it neither makes the outputs require grad nor receives a gradient."""
        edges = []
        for a in self.formula.differentiable_inputs:
            argument = self.signature.argument(a.name)
            without = a.name in self.formula.inputs_without_gradient and argument.type == T.TENSOR
            edges.append("at::Tensor()" if without else argument.given)
        return edges

    def _refused_grad_lines(self) -> list[str]:
        """torch's refusal of an input its derivatives.yaml entry gives no line requiring grad in
        grad mode (:attr:`Formula.inputs_refusing_grad`; torchgen's ``check_no_requires_grad``)."""
        op = self.formula.op_name.partition(".")[0]
        checks = [f'    formulas::runtime::check_no_requires_grad({self.signature.argument(name).given}, "{name}", "{op}");'
                  for name in self.formula.inputs_refusing_grad]
        return ["  if (at::GradMode::is_enabled()) {", *checks, "  }"] if checks else []

    def wrapper_text(self) -> str:
        """The kernel wrapper: run the operator, record the node on the outputs and save what backward needs."""
        params, prologue = self.signature.declarations()
        given = [self.signature.argument(a.name).given for a in self.formula.differentiable_inputs]
        inputs = ", ".join(self._edge_inputs())
        # an in-place operator's kernel returns the tensor it writes by reference, as ATen's do: its
        # kernel registers for aten's operator (aten_override.h) only with aten's C++ signature
        return_type = "at::Tensor&" if self.written is not None else self.signature.return_type
        lines = [f"{return_type} {self.wrapper_name}({', '.join(params)}) {{", *prologue,
                 *forward_ad.forbid_lines(self.formula, self.signature),
                 *self._refused_grad_lines(),
                 f"  c10::intrusive_ptr<{self.struct}> grad_fn;",
                 f"  if (torch::autograd::compute_requires_grad({inputs})) {{",
                 f"    grad_fn = c10::make_intrusive<{self.struct}>();",
                 f"    grad_fn->set_next_edges(torch::autograd::collect_next_edges({inputs}));",
                 "  }",
                 *self._before_the_write(),
                 *forward_ad.before_write_lines(self.formula, self.signature, self.written),
                 "  std::optional<at::AutoDispatchBelowADInplaceOrView> below_autograd(std::in_place);",
                 *self.forward.lines]
        outputs = []
        context = self.forward_context.bind({n: Binding(t, cpp_name(n)) for n, t in self.forward.locals.types.items()})
        for index, (node, ty) in enumerate(zip(self.formula.returned, self.output_types)):
            if isinstance(node, cst.Name):
                outputs.append(cpp_name(node.value))
            else:
                value = translate(node, context, ty)
                lines.append(f"  auto output{index} = {value.text};")
                outputs.append(f"output{index}")
        lines += self._alias_guards(outputs)
        lines.append("  below_autograd.reset();")
        if self.written is not None:     # what ADInplaceOrView does for torch's in-place kernels
            lines.append(f"  torch::autograd::increment_version({cpp_name(self.written)});")
        lines += self.view_marking(outputs)
        differentiable = " || ".join(f"formulas::runtime::differentiable_dtype({outputs[index]})"
                                     for index in self.differentiable_outputs)
        if differentiable:          # an integer or bool result (``x.long()``) gets no history, as in torch
            lines += [f"  if (grad_fn && !({differentiable})) {{", "    grad_fn.reset();", "  }"]
        lines += forward_ad.tangent_lines(self.formula, self.signature, outputs, self.written)
        lines.append("  if (grad_fn) {")
        checked = list(given)
        checked += [outputs[index] for index in self.differentiable_outputs]
        lines += [f'    formulas::runtime::refuse_complex("{self.formula.op_name}", {tensor});' for tensor in checked]
        for index in self.differentiable_outputs:
            if self.written is not None:      # the input's own history (a view's base's: CopySlices)
                lines.append(f"    torch::autograd::rebase_history({outputs[index]}, grad_fn);")
            else:
                lines.append(f"    torch::autograd::set_history({outputs[index]}, grad_fn);")
        for arg in self.formula.differentiable_inputs:
            if T.from_schema(arg.type) == T.TENSOR_LIST:
                lines.append(f"    grad_fn->{cpp_name(arg.name)}_size_ = {cpp_name(arg.name)}.size();")
        for item in self.saved:
            source = cpp_name(item.tensor if isinstance(item, SavedMetadata) else item.name)
            if self._saved_before_the_write(item):
                continue
            if isinstance(item, SavedTensor) and item.is_list:
                save = "save_index_list" if item.is_index_list else "save_list"
                lines.append(f"    grad_fn->{item.member} = formulas::runtime::{save}({source});")
            elif isinstance(item, SavedTensor):
                flag = "true" if item.is_output else "false"
                lines.append(f"    grad_fn->{item.member} = torch::autograd::SavedVariable({source}, {flag});")
            elif isinstance(item, SavedMetadata):
                template = EMITTED_METADATA[item.method][1]
                lines.append(f"    grad_fn->{item.member} = {template.format(source)};")
            elif is_borrowed(item.type) and item.name in self.forward_context.names:   # a kernel argument
                lines.append(f"    grad_fn->{item.member} = formulas::runtime::to_owned({source});")
            elif item.type.kind in (Kind.LIST, Kind.OPTIONAL, Kind.STR):
                lines.append(f"    grad_fn->{item.member} = std::move({source});")   # a forward local, last use
            else:
                lines.append(f"    grad_fn->{item.member} = {source};")
        lines.append("  }")
        result = outputs[0] if len(outputs) == 1 else f"std::make_tuple({', '.join(outputs)})"
        if self.written is not None:
            result = self.signature.argument(self.written).parameter
        lines += [f"  return {result};", "}", ""]
        return "\n".join(lines)


def _assigns_call(statement: cst.BaseStatement, name: str | None, operator: str) -> bool:
    """Whether ``statement`` is ``<name> = at.<operator>(...)``."""
    match statement:
        case cst.SimpleStatementLine(body=[cst.Assign(
                targets=[cst.AssignTarget(target=cst.Name(value=target))],
                value=cst.Call(func=cst.Attribute(value=cst.Name(value="at"), attr=cst.Name(value=called))))]):
            return target == name and called == operator
    return False


def _written_in_place(formula: Formula) -> str | None:
    """The tensor an in-place operator writes and returns (``celu_(Tensor(a!) self, ...) ->
    Tensor(a!)``), None for a functional one; other writes (``out=``, a running statistic
    updated on the side) are refused."""
    written = [a for a in formula.schema.arguments if a.annotation is not None and a.annotation.is_write]
    if not written:
        return None
    returns = formula.schema.returns
    if (len(written) == 1 and not written[0].is_out and T.from_schema(written[0].type) == T.TENSOR
            and not isinstance(written[0].type, OptionalType) and len(returns) == 1
            and returns[0].annotation is not None and returns[0].annotation.is_write
            and returns[0].annotation.alias_set == written[0].annotation.alias_set):
        return python_name(written[0].name)
    raise Untranslatable(formula.schema_node, UNSUPPORTED_TYPE,
                         f"{formula.op_name}: writes its argument '{written[0].name}' in place (Tensor(a!)) besides "
                         "what it returns; out= operators and writes on the side are not supported")


def emit_nondifferentiable(schema: FunctionSchema) -> EmittedFormula:
    """The forward wrapper of an operator declared ``nondifferentiable``: ATen's operator run below
    autograd, so its outputs carry no gradient and no tangent (comparisons, ``argmax``, ``zeros_like``)."""
    arguments = [a for a in schema.arguments if not a.is_out]
    params = ", ".join(f"{T.cpp_kernel_param(a.type)} {cpp_name(a.name)}" for a in arguments)
    returns = [T.cpp_value(T.from_schema(r.type)) for r in schema.returns]
    return_type = returns[0] if len(returns) == 1 else f"std::tuple<{', '.join(returns)}>"
    name = "nondifferentiable_" + re.sub(r"\W", "_", str(schema.name))
    resolved = Resolved(schema, tuple(cpp_name(a.name) for a in arguments))
    call = resolved.cpp()
    code = "\n".join([f"{return_type} {name}({params}) {{",
                      "  at::AutoDispatchBelowADInplaceOrView below_autograd;",
                      f"  return {call};",
                      "}",
                      ""])
    text = str(schema).replace("\\", "\\\\").replace('"', '\\"')
    called = frozenset({resolved.function} - {None})
    return EmittedFormula(name, code, f'm.def("{text}", TORCH_FN(formulas::{name}));', called=called,
                          vmap_by_example=vmap_by_example(schema))


def emit_formula(formula: Formula, context: Context, struct: str) -> EmittedFormula:
    """The C++ of ``formula``; raises ``Untranslatable`` for code it cannot transliterate."""
    scope = replace(context, called=set())
    try:
        emitted = FormulaEmitter(formula, scope, struct).emit()
    except T.UnsupportedType as error:
        raise Untranslatable(formula.schema_node, UNSUPPORTED_TYPE,
                             f"no C++ spelling for the schema type '{error}' of {formula.op_name}") from None
    return replace(emitted, called=frozenset(scope.called))


__all__ = ["EmittedFormula", "emit_formula", "emit_nondifferentiable", "node_name"]
