"""How generated C++ functions take their parameters, and the forward wrapper's signature.

The wrapper signature is computed once per formula (:func:`wrapper_signature`) and read by the
node emitter (:mod:`transpiler.cpp.nodes`: the wrapper, its edges, views) and by forward AD
(:mod:`transpiler.cpp.forward_ad`: which tensors carry tangents).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from transpiler.cpp import types as T
from transpiler.cpp.expressions import Binding, cpp_name
from transpiler.cpp.types import Kind, PyType
from transpiler.frontend import python_name
from transpiler.model import Formula
from transpiler.schema import Argument, FunctionSchema, OptionalType


def borrowed_param(ty: PyType) -> str:
    """Parameter type of a generated function (helpers, backward): lists are borrowed views."""
    if ty == T.INT_LIST:
        return "at::IntArrayRef"
    if ty == T.optional(T.INT_LIST):
        return "at::OptionalIntArrayRef"
    if ty == T.TENSOR_LIST:
        return "at::TensorList"
    return T.cpp_param(ty)


def is_view(ty: PyType) -> bool:
    """Whether generated functions take ``ty`` as a non-owning view (see :func:`borrowed_param`)."""
    return borrowed_param(ty) != T.cpp_param(ty)


def is_borrowed(ty: PyType) -> bool:
    """Whether a value of ``ty`` may be a borrowed view (ArrayRef, string_view) that a node must copy."""
    inner = ty.elem if ty.kind is Kind.OPTIONAL else ty
    return inner.kind in (Kind.LIST, Kind.STR)


def closure_parameter(name: str, ty: PyType, rebound: frozenset[str], declared: str | None = None
                      ) -> tuple[str, Binding]:
    """A parameter of a generated closure function (backward, jvp) and the binding its body sees:
    taken as ``declared`` (default :func:`borrowed_param`), or by value when the body rebinds it."""
    if name in rebound:
        return f"{T.cpp_value(ty)} {cpp_name(name)}", Binding(ty, cpp_name(name))
    return f"{declared or borrowed_param(ty)} {cpp_name(name)}", Binding(ty, cpp_name(name), borrowed=is_view(ty))


@dataclass(frozen=True)
class KernelArgument:
    """One argument of the forward wrapper (the operator's kernel)."""

    argument: Argument       # the schema argument, named as the formula's parameter (``from`` -> ``from_``)
    type: PyType
    rebound: bool            # the forward binds the name again: the kernel's own value is kept apart

    @property
    def name(self) -> str:
        """The argument's name in the schema."""
        return self.argument.name

    @property
    def optional_tensor(self) -> bool:
        """A ``Tensor?``: the kernel takes ``<name>_opt`` and unwraps it to ``<name>``."""
        return isinstance(self.argument.type, OptionalType) and self.type == T.TENSOR

    @property
    def parameter(self) -> str:
        """The kernel's own C++ parameter name: ``self``; ``self_arg`` when the forward rebinds
        ``self``; ``bias_opt`` for a ``Tensor?``."""
        if self.optional_tensor:
            return f"{cpp_name(self.name)}_opt"
        return f"{cpp_name(self.name)}_arg" if self.rebound else cpp_name(self.name)

    @property
    def given(self) -> str:
        """The argument as the caller gave it (edges go to it, not to a rebound local): the kernel's
        parameter when the forward rebinds the name, else the name."""
        return self.parameter if self.rebound else cpp_name(self.name)

    @property
    def given_tensor(self) -> str:
        """:attr:`given`, a ``Tensor?`` unwrapped (the tensor forward AD reads tangents from)."""
        return cpp_name(self.name) if self.optional_tensor else self.given


@dataclass(frozen=True)
class WrapperSignature:
    """The forward wrapper's C++ signature, computed once per formula."""

    name: str                                   # the C++ function (the formula's name)
    schema: FunctionSchema
    arguments: tuple[KernelArgument, ...]       # schema order, out= arguments left out
    differentiable_outputs: tuple[int, ...]     # ``Formula.differentiable_outputs``

    def argument(self, name: str) -> KernelArgument:
        """The argument named ``name`` (the formula's parameter name)."""
        return next(a for a in self.arguments if a.name == name)

    def __contains__(self, name: str) -> bool:
        return any(a.name == name for a in self.arguments)

    @property
    def output_types(self) -> tuple[PyType, ...]:
        """One per schema return (raises ``UnsupportedType`` for a type with no C++ spelling)."""
        return tuple(T.from_schema(r.type) for r in self.schema.returns)

    @property
    def list_output(self) -> bool:
        """The schema returns one ``Tensor[]`` (split, unbind): its backward takes the list of gradients."""
        return self.output_types == (T.TENSOR_LIST,)

    @property
    def return_type(self) -> str:
        """The wrapper's C++ return type: the one output's type, or a ``std::tuple`` of them."""
        returns = [T.cpp_value(t) for t in self.output_types]
        return returns[0] if len(returns) == 1 else f"std::tuple<{', '.join(returns)}>"

    def declarations(self) -> tuple[list[str], list[str]]:
        """The kernel's parameter declarations, and the prologue lines that turn them into the
        names the forward reads (a ``Tensor?`` unwrapped, a rebound argument copied)."""
        params, prologue = [], []
        for arg in self.arguments:
            declared = T.cpp_kernel_param(arg.argument.type)
            if arg.argument.annotation is not None and arg.argument.annotation.is_write:
                declared = "at::Tensor&"        # the tensor an in-place operator writes, as ATen takes it
            name = cpp_name(arg.name)
            params.append(f"{declared} {arg.parameter}")
            if arg.optional_tensor:
                constness = "" if arg.rebound else "const "
                prologue.append(f"  {constness}at::Tensor {name} = {arg.parameter}.value_or(at::Tensor());")
            elif arg.rebound:   # a local copy, not the dispatcher's argument
                prologue.append(f"  {T.cpp_value(arg.type)} {name} = formulas::runtime::to_owned({arg.parameter});")
        return params, prologue


def wrapper_signature(formula: Formula) -> WrapperSignature:
    """The signature of ``formula``'s forward wrapper (raises ``UnsupportedType`` for an argument
    type with no C++ spelling)."""
    arguments = tuple(
        KernelArgument(replace(a, name=python_name(a.name)), T.from_schema(a.type),
                       python_name(a.name) in formula.rebound_inputs)
        for a in formula.schema.arguments if not a.is_out)
    return WrapperSignature(cpp_name(formula.function), formula.schema, arguments, formula.differentiable_outputs)


__all__ = ["KernelArgument", "WrapperSignature", "borrowed_param", "closure_parameter", "is_borrowed", "is_view",
           "wrapper_signature"]
