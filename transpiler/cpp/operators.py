"""Operator calls: which declared schema an ``at.X(...)`` call means, and its C++ spelling.

The library declares every operator its code calls (``@derivative`` or
``nondifferentiable``); those schemas give argument positions and types.
Whether the C++ API has a function ``at::X`` or only a method ``x.X()`` is
ATen's ``variants`` line in ``native_functions.yaml``. For the operators the
shipped library declares that fact is kept here (:data:`SHIPPED_METHOD_ONLY`,
checked against the installed torch by ``tests/cpp/test_operators.py``), so
lint and ``transpile`` need no torch; any other operator is looked up lazily in
the torchgen that torch ships, and without torch it is taken to be a function
``at::X`` (the C++ is compiled with torch installed, where a wrong guess would
be a compile error, never a wrong derivative).
"""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass

from transpiler.cpp import types as T
from transpiler.cpp.types import Kind, PyType
from transpiler.schema import Argument, FunctionSchema, OperatorName

#: The shipped library's operators that ATen offers only as Tensor methods (``x.view(...)``;
#: there is no ``at::view``), by ``name`` or ``name.overload`` as ``variants`` lines say.
SHIPPED_METHOD_ONLY = frozenset({"contiguous", "expand", "expand_as", "mH", "mT", "new_full", "new_ones", "new_zeros",
                                 "repeat", "reshape_as", "view"})


@functools.cache
def _native_functions() -> str | None:
    """The installed torchgen's ``native_functions.yaml``; None when torch is not installed."""
    try:
        import torchgen  # a file lookup only: torchgen ships the yaml
    except ImportError:
        return None
    return os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native", "native_functions.yaml")


@functools.cache
def method_only_source() -> tuple[str, int, int] | None:
    """What :func:`torchgen_method_only_operators` reads, as a part of the keys of results kept
    between runs (:mod:`transpiler.module_results`): the yaml's path, size and modification time
    (another torch installed is another key); None when torch is not installed."""
    path = _native_functions()
    if path is None:
        return None
    try:
        found = os.stat(path)
    except OSError:
        return None
    return path, found.st_size, found.st_mtime_ns


@functools.cache
def torchgen_method_only_operators() -> frozenset[str] | None:
    """``name.overload`` of every ATen operator the C++ API offers only as a Tensor method, read
    from the installed torchgen's ``native_functions.yaml`` (kept between runs of ``transpile``
    under :func:`method_only_source`, :mod:`transpiler.module_results`: a run after an edit does
    not scan the yaml again); None when torch is not installed."""
    from transpiler import module_results

    source = method_only_source()
    if source is None:
        return None
    kept = module_results.active()
    if kept is None:
        return _read_method_only(source[0])
    key = module_results.key("method-only operators", source)
    found = kept.get(key, lambda kept: isinstance(kept, frozenset) and module_results.all_of(str, kept))
    if found is None:
        found = _read_method_only(source[0])
    kept.put(key, found)
    return found


def _read_method_only(path: str) -> frozenset[str]:
    """:func:`torchgen_method_only_operators`, read from the yaml ``path``."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    methods = set()
    name = None     # the entry whose first ``variants`` line is still to come
    for match in _FUNC_OR_VARIANTS.finditer(text):      # one scan of the file, not a split and a search per entry
        func, variants = match.groups()
        if func is not None:
            name = func
        elif name is not None:
            if "function" not in variants.split("#", 1)[0]:
                methods.add(name)
            name = None
    return frozenset(methods)


# An entry's ``- func: name.overload(...)`` line, or one of its ``variants:`` lines.
_FUNC_OR_VARIANTS = re.compile(r"^- func: *([^(]*?) *\(|^  variants: *(.*)$", re.M)


def is_method_only(name: OperatorName) -> bool:
    """Whether ATen spells the operator ``name`` only as a Tensor method (see the module docstring)."""
    def listed(methods: frozenset[str]) -> bool:
        return str(name) in methods or (name.overload == "" and name.base in methods)

    if listed(SHIPPED_METHOD_ONLY):
        return True
    methods = torchgen_method_only_operators()
    return methods is not None and listed(methods)


@dataclass(frozen=True)
class Resolved:
    """A call bound to one schema: the C++ text of each argument, in schema order."""

    schema: FunctionSchema
    arguments: tuple[str, ...]

    @property
    def return_type(self) -> PyType:
        """The Python type of what the resolved overload returns (NONE, one type, or a tuple)."""
        returns = [T.from_schema(r.type) for r in self.schema.returns]
        if not returns:
            return T.NONE
        return returns[0] if len(returns) == 1 else T.tuple_of(*returns)

    @property
    def function(self) -> str | None:
        """The ATen function ``at::<name>`` the call is spelled with; None for a Tensor method."""
        if is_method_only(self.schema.name):
            return None
        return self.schema.name.base

    def cpp(self) -> str:
        """The C++ call: ``at::<function>(...)``, or a method call on the first argument."""
        function = self.function
        if function is None:
            receiver, *rest = self.arguments
            return f"{receiver}.{self.schema.name.base}({', '.join(rest)})"
        return f"at::{function}({', '.join(self.arguments)})"


def accepts(param: PyType, arg: PyType) -> bool:
    """Whether an argument of type ``arg`` may be passed where the schema says ``param``."""
    if param == arg:
        return True
    if arg.kind is Kind.NONE:
        return param.kind in (Kind.OPTIONAL, Kind.TENSOR)
    if param.kind is Kind.OPTIONAL:
        return accepts(param.elem, arg)
    if param.kind is Kind.SCALAR:
        return arg.kind in T.NUMBERS
    if param.kind is Kind.FLOAT:
        return arg.kind in (Kind.INT, Kind.FLOAT, Kind.BOOL, Kind.SCALAR)
    if param.kind is Kind.INT:
        return arg.kind in (Kind.INT, Kind.BOOL, Kind.SCALAR)
    if param.kind is Kind.LIST:
        if arg.kind is Kind.LIST:
            return arg.elem.kind is Kind.UNKNOWN or accepts(param.elem, arg.elem)
        return param.elem.kind is Kind.INT and arg.kind is Kind.INT   # int[1] takes one int
    return False


def cpp_default(arg: Argument) -> str:
    """The C++ spelling of a schema default (``None``, ``False``, ``[0, 1]``, ``Mean``, ``long``...)."""
    text = arg.default or ""
    ty = T.from_schema(arg.type)
    if text == "None":
        return "std::nullopt"
    if text in ("True", "False"):
        return text.lower()
    if text.startswith("["):
        inner = text[1:-1].strip()
        return f"{T.cpp_value(ty if ty.kind is Kind.LIST else ty.elem)}{{{inner}}}"
    if text.startswith(("'", '"')):
        return '"' + text[1:-1] + '"'
    named = {"Mean": "at::Reduction::Mean", "Sum": "at::Reduction::Sum", "long": "at::kLong",
             "contiguous_format": "at::MemoryFormat::Contiguous", "per_tensor_affine": "at::kPerTensorAffine"}
    if text in named:
        return named[text]
    if ty.kind is Kind.LIST:
        return f"{T.cpp_value(ty)}{{{text}}}"
    return text
