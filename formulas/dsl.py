"""The formula DSL: ``derivative``, ``helper``, ``nondifferentiable`` and ``at``.

Importing this module (or a formula file) only records what is declared; it
depends on neither the transpiler nor the reference engine. A consumer that
wants to *run* formulas installs an operator backend with :func:`use_backend`;
``at.<op>(...)`` then forwards to that backend's ``call(name, args, kwargs)``.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, Sequence


@dataclass(frozen=True)
class DeclaredFormula:
    """A function decorated with ``@derivative``: its schema and Python body."""

    schema: str
    fn: Callable[..., Any]
    output_differentiability: tuple[bool, ...] | None
    jvp: str | None = None     # "auto_linear" / "auto_element_wise"; None: a nested ``def jvp`` or none

    @property
    def op_name(self) -> str:
        """``name.overload`` as written before the argument list."""
        return self.schema.split("(", 1)[0].strip()


class Tensor:
    """Annotation marker for helper signatures (``x: Tensor``); never instantiated."""


class Scalar:
    """Annotation marker: a Python number that maps to ``at::Scalar``."""


class ScalarType:
    """Annotation marker: a dtype that maps to ``at::ScalarType``."""


class TensorOptions:
    """Annotation marker: dtype/device/layout bundle that maps to ``at::TensorOptions``."""


FORMULAS: dict[str, DeclaredFormula] = {}
HELPERS: dict[str, Callable[..., Any]] = {}
NONDIFFERENTIABLE: dict[str, str] = {}


JVP_RULES = ("auto_linear", "auto_element_wise")


def derivative(schema: str, *, output_differentiability: Sequence[bool] | None = None, jvp: str | None = None):
    """Declare ``fn`` as the forward+backward formula of the operator ``schema``.

    ``jvp`` names the rule its forward-mode derivative follows when it has no
    nested ``def jvp`` (``formulas/README.md``, "Forward mode")."""
    if jvp is not None and jvp not in JVP_RULES:
        raise ValueError(f"@derivative({schema!r}): jvp={jvp!r}; expected one of {JVP_RULES}")

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        diff = tuple(output_differentiability) if output_differentiability is not None else None
        declared = DeclaredFormula(schema, fn, diff, jvp)
        FORMULAS[declared.op_name] = declared
        return fn

    return register


def helper(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a typed Python function as a helper that backward formulas may call."""
    HELPERS[fn.__name__] = fn
    return fn


def nondifferentiable(*schemas: str) -> None:
    """Declare operators whose outputs carry no gradient (comparisons, ``zeros_like``...)."""
    for schema in schemas:
        NONDIFFERENTIABLE[schema.split("(", 1)[0].strip()] = schema


class Backend(Protocol):
    """What runs ``at.<op>``: the reference engine, a torch-backed oracle, ..."""

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any: ...


_backend: contextvars.ContextVar[Backend | None] = contextvars.ContextVar("formulas_backend", default=None)


@contextlib.contextmanager
def use_backend(backend: Backend) -> Iterator[Backend]:
    """Route ``at.<op>`` calls to ``backend`` inside the ``with`` block."""
    token = _backend.set(backend)
    try:
        yield backend
    finally:
        _backend.reset(token)


def set_default_backend(backend: Backend | None) -> None:
    """Install ``backend`` for the current context outside any ``with`` block."""
    _backend.set(backend)


class _Operator:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        backend = _backend.get()
        if backend is None:
            raise RuntimeError(
                f"at.{self.name}: no operator backend is installed; "
                "use formulas.use_backend(...) (the reference engine installs one on import)"
            )
        return backend.call(self.name, args, kwargs)

    def __repr__(self) -> str:
        return f"at.{self.name}"


class _OperatorNamespace:
    """``at``: ``at.sin(x)`` calls the current backend's ``sin``.

    The first access to ``at.<name>`` stores the operator as an instance
    attribute, so later accesses are plain attribute lookups.
    """

    def __getattr__(self, name: str) -> _Operator:
        if name.startswith("__"):
            raise AttributeError(name)
        op = _Operator(name)
        setattr(self, name, op)
        return op


at = _OperatorNamespace()
