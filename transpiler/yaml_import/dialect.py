"""Declarations the imported formulas use besides ``formulas.derivative`` and ``at``.

An imported directory has an ``externals.py`` that binds every non-formula
name the formulas call, from this module:

- ``external("sum_backward")``: a C++ function that exists in libtorch
  (``FunctionsManual.cpp``, ATen, c10). ``transpile`` transliterates a call to
  it only through the library's ``@helper`` of that name (refused, DB201,
  without one). It has no Python body, so calling it from Python raises.
- ``node_value("retain_variables")``: a value the generated autograd node
  provides (``retain_variables``; ``i``, the element index of a ``_foreach_`` formula).
- ``namespace("std")``: a C++ namespace or class whose members are named with
  dots (``std.get[0](t)`` is ``std::get<0>(t)``).
- ``cpp``: the dialect's spellings of C++ syntax Python does not have
  (``cpp.arrow(x).m`` for ``x->m``, ``cpp.deref(x)`` for ``*x``,
  ``cpp.lambda_(T)(lambda i: ...)`` for a typed lambda, ``cpp.root.std`` for ``::std``,
  ``cpp.int_div(a, b)`` / ``cpp.int_mod(a, b)`` for C++'s truncating ``/`` and ``%`` of integers).
- ``@yaml_entry(...)``: what derivatives.yaml says about an entry beyond the
  formula (its dispatch key, inputs marked ``non_differentiable``, an
  ``auto_linear``/``auto_element_wise`` forward-mode rule, and the
  ``output_differentiability`` spelling when it is not one bool per output),
  and what torchgen makes of the tensor inputs no line names: ``ignores_grad``
  (``output``: no gradient flows through it, as ``non_differentiable``) and
  ``refuses_grad`` (one requiring grad raises torch's "not differentiable with
  respect to argument"); those two are implied by the lines, so not written back.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from transpiler.yaml_import.pydialect import unescape


@dataclass(frozen=True)
class External:
    """A C++ function or constant the formulas refer to by name."""

    name: str

    def __call__(self, *args: Any) -> Any:
        raise NotImplementedError(
            f"{self.name} is a C++ function of libtorch; the imported formula can be linted and "
            "transpiled, not run in Python"
        )

    def __getitem__(self, template_args: Any) -> "External":
        return External(f"{self.name}<{template_args}>")


def external(name: str) -> External:
    """Declare the C++ function (or type, or constant) ``name``."""
    return External(name)


@dataclass(frozen=True)
class Namespace:
    """A C++ namespace: attribute access gives its members (``std.get``)."""

    name: str

    def __getattr__(self, member: str) -> "Namespace":
        if member.startswith("__"):
            raise AttributeError(member)
        return Namespace(f"{self.name}::{unescape(member)}")

    def __getitem__(self, template_args: Any) -> External:
        return External(f"{self.name}<{template_args}>")

    def __call__(self, *args: Any) -> Any:
        return External(self.name)(*args)


def node_value(name: str) -> External:
    """Declare a name the generated autograd node provides while its backward runs:
    ``retain_variables`` (false once the graph is freed) or ``i``, the element index of
    a ``_foreach_`` formula, which torchgen applies to each list element in turn."""
    return External(name)


def namespace(name: str) -> Namespace:
    """Declare the C++ namespace (or class used as one) ``name``."""
    return Namespace(name)


class _CppSyntax:
    """``cpp``: C++ constructs spelled as calls (see :mod:`transpiler.yaml_import.pydialect`)."""

    root = Namespace("")

    @staticmethod
    def arrow(pointer: Any) -> Any:
        """``cpp.arrow(p).m`` is ``p->m``."""
        return pointer

    @staticmethod
    def deref(pointer: Any) -> Any:
        """``cpp.deref(p)`` is ``*p``."""
        return pointer

    @staticmethod
    def int_div(a: int, b: int) -> int:
        """``cpp.int_div(a, b)`` is C++'s ``a / b`` of integers: the quotient truncated toward zero."""
        quotient = abs(a) // abs(b)
        return quotient if (a < 0) == (b < 0) else -quotient

    @staticmethod
    def int_mod(a: int, b: int) -> int:
        """``cpp.int_mod(a, b)`` is C++'s ``a % b`` of integers: the remainder takes the sign of ``a``."""
        return a - b * _CppSyntax.int_div(a, b)

    @staticmethod
    def lambda_(*param_types: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """``cpp.lambda_(T)(lambda i: ...)`` is ``[](T i){return ...;}``."""
        return lambda fn: fn


cpp = _CppSyntax()


@dataclass(frozen=True)
class YamlEntry:
    """What ``@yaml_entry`` records on a formula function."""

    dispatch: str | None = None
    non_differentiable: tuple[str, ...] = ()
    jvp: str | None = None
    output_differentiability: tuple[bool | str, ...] | None = None
    ignores_grad: tuple[str, ...] = ()
    refuses_grad: tuple[str, ...] = ()


def yaml_entry(*, dispatch: str | None = None, non_differentiable: Sequence[str] = (),
               jvp: str | None = None, output_differentiability: Sequence[bool | str] | None = None,
               ignores_grad: Sequence[str] = (), refuses_grad: Sequence[str] = ()):
    """Record the derivatives.yaml details of the decorated formula (kept by ``emit-yaml``; the
    last two follow from its lines: see the module's docstring)."""
    record = YamlEntry(dispatch, tuple(non_differentiable), jvp,
                       None if output_differentiability is None else tuple(output_differentiability),
                       tuple(ignores_grad), tuple(refuses_grad))

    def attach(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.yaml_entry = record
        return fn

    return attach
