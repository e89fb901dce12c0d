"""The formula DSL: ``derivative`` (and its families: ``family_member``), ``helper``, ``nondifferentiable``
and ``at``.

Importing this module (or a formula file) only records what is declared; it
depends on neither the transpiler nor the reference engine. A consumer that
wants to *run* formulas installs an operator backend with :func:`use_backend`;
``at.<op>(...)`` then forwards to that backend's ``call(name, args, kwargs)``.
"""
from __future__ import annotations

import contextlib
import contextvars
import importlib
import os
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Protocol, Sequence


class SourceStamp(NamedTuple):
    """A formula file as it was when the formula was declared (what was imported): consumers
    that read the file later (the reference engine's facts) check it has not changed since."""

    path: str
    mtime_ns: int
    size: int


def source_stamp(path: str) -> SourceStamp | None:
    """The stamp of the file at ``path`` now; None when there is no such file (``<string>``)."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return SourceStamp(path, status.st_mtime_ns, status.st_size)


@dataclass(frozen=True)
class DeclaredFormula:
    """A function decorated with ``@derivative``: its schema and Python body."""

    schema: str
    fn: Callable[..., Any]
    output_differentiability: tuple[bool, ...] | None
    jvp: str | None = None     # "auto_linear" / "auto_element_wise" / "derived"; None: a nested ``def jvp`` or none
    source: SourceStamp | None = None   # the file ``fn`` was defined in, when it was declared

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


@dataclass
class Registry:
    """What the formula files of one package declare (``formulas`` is the shipped library).

    Each top-level package has its own registry, so importing another package's
    formulas (an imported derivatives.yaml corpus, a user's ``myops``) never
    replaces the library's entries of the same operator name.
    """

    package: str
    formulas: dict[str, DeclaredFormula] = field(default_factory=dict)
    helpers: dict[str, Callable[..., Any]] = field(default_factory=dict)
    nondifferentiable: dict[str, str] = field(default_factory=dict)


#: Top-level package name -> its registry.
REGISTRIES: dict[str, Registry] = {}


def import_package_modules(package: str) -> None:
    """Import every module of ``package`` (its formulas register themselves) whose file ``transpile``
    reads: a regular file (symlinks followed) named as a module. A FIFO, a device, a symlink loop
    or an odd name among its ``*.py`` files is left alone, never opened."""
    from pathlib import Path

    imported = importlib.import_module(package)
    for directory in getattr(imported, "__path__", []):
        for path in sorted(Path(directory).rglob("*.py")):
            parts = path.relative_to(directory).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts and path.is_file() and all(part.isidentifier() for part in parts):
                importlib.import_module(".".join((package, *parts)))


def registry(package: str) -> Registry:
    """The registry of the top-level package ``package`` (created empty on first use)."""
    found = REGISTRIES.get(package)
    if found is None:
        found = REGISTRIES[package] = Registry(package)
    return found


def _registry_of(module: str) -> Registry:
    """The registry a declaration made in the module named ``module`` goes to."""
    return registry(module.split(".", 1)[0])


#: The shipped library's registry and its three tables (what the reference engine runs).
LIBRARY = registry(__name__.split(".", 1)[0])
FORMULAS: dict[str, DeclaredFormula] = LIBRARY.formulas
HELPERS: dict[str, Callable[..., Any]] = LIBRARY.helpers
NONDIFFERENTIABLE: dict[str, str] = LIBRARY.nondifferentiable


JVP_RULES = ("auto_linear", "auto_element_wise", "derived")


def derivative(schema: str, *, output_differentiability: Sequence[bool] | None = None, jvp: str | None = None):
    """Declare ``fn`` as the forward+backward formula of the operator ``schema``.

    ``jvp`` names the rule its forward-mode derivative follows when it has no
    nested ``def jvp`` (``formulas/README.md``, "Forward mode")."""
    if jvp is not None and jvp not in JVP_RULES:
        raise ValueError(f"@derivative({schema!r}): jvp={jvp!r}; expected one of {JVP_RULES}")

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        diff = tuple(output_differentiability) if output_differentiability is not None else None
        table = _registry_of(fn.__module__).formulas
        stamp = source_stamp(fn.__code__.co_filename)
        declared = DeclaredFormula(schema, fn, diff, jvp, stamp)
        if declared.op_name not in table or dispatch_of(fn) == DEFAULT_DISPATCH:
            # an imported entry's later dispatch sections (AutogradNestedTensor...) keep its Default one
            table[declared.op_name] = declared
        for member in reversed(fn.__dict__.get(FAMILY_MEMBERS, ())):     # stacked bottom-up: source order
            declared = DeclaredFormula(member.schema, member.function(fn), diff, jvp, stamp)
            table[declared.op_name] = declared
        return fn

    return register


#: The dispatch section of a formula for strided tensors' autograd (every device's).
DEFAULT_DISPATCH = "Default"


def dispatch_of(fn: Callable[..., Any]) -> str:
    """The autograd key ``fn`` is the formula of: :data:`DEFAULT_DISPATCH`, or the key of an imported
    derivatives.yaml dispatch section (``@yaml_entry(dispatch="AutogradNestedTensor")``)."""
    return getattr(getattr(fn, "yaml_entry", None), "dispatch", None) or DEFAULT_DISPATCH


def inputs_without_gradient(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The tensor inputs of ``fn`` no gradient flows through, whether they require grad or not: an
    imported derivatives.yaml entry's ``non_differentiable`` ones and those torchgen ignores
    (``@yaml_entry(ignores_grad=("output",))``: ``_standard_gamma_grad``'s)."""
    entry = getattr(fn, "yaml_entry", None)
    return (*getattr(entry, "non_differentiable", ()), *getattr(entry, "ignores_grad", ()))


def inputs_refusing_grad(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The tensor inputs of ``fn`` torch refuses to see requiring grad in grad mode ("not
    differentiable with respect to argument"): an imported entry's tensor inputs no line names
    (``@yaml_entry(refuses_grad=("weight",))``: ``binary_cross_entropy``'s)."""
    return getattr(getattr(fn, "yaml_entry", None), "refuses_grad", ())


#: The attribute of a formula function that holds the ``@family_member``\ s stacked below its ``@derivative``.
FAMILY_MEMBERS = "__family_members__"


@dataclass(frozen=True)
class FamilyMember:
    """One more member of a formula family (:func:`family_member`): the operator ``schema`` whose formula is
    the family's body with the identifiers of ``rename`` replaced and the Python ``defaults`` given."""

    schema: str
    rename: Mapping[str, str]
    defaults: Mapping[str, Any]

    @property
    def function_name(self) -> str:
        """The member's function name: the operator's ``name.overload``, ``_`` for ``.``, lower case."""
        return self.schema.split("(", 1)[0].strip().replace(".", "_").lower()

    def function(self, template: Callable[..., Any]) -> Callable[..., Any]:
        """The member's formula function: ``template``'s code with the identifiers renamed (what the
        front-end's expansion does to the source), under the member's name and defaults."""
        code = _renamed_code(template.__code__, self.rename, template.__code__.co_qualname, self.function_name)
        member = types.FunctionType(code, template.__globals__, self.function_name,
                                    template.__defaults__, template.__closure__)
        member.__kwdefaults__ = dict(template.__kwdefaults__) if template.__kwdefaults__ else None
        member.__qualname__ = self.function_name
        member.__module__ = template.__module__
        member.__doc__ = template.__doc__
        positional = code.co_varnames[:code.co_argcount]
        keyword_only = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
        first_default = len(positional) - len(template.__defaults__ or ())
        for name, value in self.defaults.items():
            if name in positional[first_default:]:
                values = list(member.__defaults__)
                values[positional.index(name) - first_default] = value
                member.__defaults__ = tuple(values)
            elif name in keyword_only and name in (member.__kwdefaults__ or {}):
                member.__kwdefaults__[name] = value
            else:
                raise TypeError(f"@family_member({self.schema!r}): defaults names `{name}`, which is no parameter "
                                f"with a default of {template.__name__} (after renaming); give defaults only "
                                "for parameters that have one")
        return member


def _renamed_code(code: types.CodeType, rename: Mapping[str, str], old_qualname: str,
                  new_qualname: str) -> types.CodeType:
    """``code`` (and the functions nested in it) with every identifier of ``rename`` replaced:
    global, attribute and local names (parameters included); keyword names at call sites and
    string constants stay, as the front-end leaves ``f(name=...)``'s ``name`` and literals."""
    def renamed(names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(rename.get(name, name) for name in names)

    consts = tuple(_renamed_code(c, rename, old_qualname, new_qualname) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)
    qualname = new_qualname + code.co_qualname[len(old_qualname):] \
        if code.co_qualname.startswith(old_qualname) else code.co_qualname
    name = new_qualname if code.co_qualname == old_qualname else code.co_name
    return code.replace(co_names=renamed(code.co_names), co_varnames=renamed(code.co_varnames),
                        co_cellvars=renamed(code.co_cellvars), co_freevars=renamed(code.co_freevars),
                        co_consts=consts, co_name=name, co_qualname=qualname)


def family_member(schema: str, *, rename: Mapping[str, str] | None = None, defaults: Mapping[str, Any] | None = None):
    """Declare one more member of a formula family: the operator ``schema``, whose formula is the
    function below it with every identifier of ``rename`` replaced (``{"minimum": "maximum",
    "lt": "gt", "gt": "lt"}``: operators, locals, parameters; not keyword names in calls nor
    strings) and the Python ``defaults`` given for the parameters that differ.

    Stack it below the family's ``@derivative``, whose other arguments (``output_differentiability``,
    ``jvp``) every member shares; the member's function is named after its operator
    (``max.dim`` -> ``max_dim``). ``docs/formulas.md`` ("Formula families") has the rules."""
    rename = dict(rename or {})
    for old, new in rename.items():
        if not (isinstance(old, str) and old.isidentifier() and isinstance(new, str) and new.isidentifier()):
            raise ValueError(f"@family_member({schema!r}): rename maps identifiers to identifiers, "
                             f"not {old!r}: {new!r}")
        if {old, new} & {"backward", "jvp", "needs_input_grad"}:
            raise ValueError(f"@family_member({schema!r}): rename may not change backward, jvp or needs_input_grad")
    member = FamilyMember(schema, rename, dict(defaults or {}))

    def stack(fn: Callable[..., Any]) -> Callable[..., Any]:
        if declared(fn) is not None:
            raise TypeError(f"@family_member({schema!r}) sits above @derivative on {fn.__name__}; put it below the "
                            "@derivative of the family's body")
        fn.__dict__.setdefault(FAMILY_MEMBERS, []).append(member)
        return fn

    return stack


def declared(fn: Callable[..., Any]) -> DeclaredFormula | None:
    """What ``@derivative`` recorded for the function ``fn`` (in any package's registry), None
    when ``fn`` was not declared with it."""
    for table in REGISTRIES.values():
        for entry in table.formulas.values():
            if entry.fn is fn:
                return entry
    return None


#: Each helper -> the file it was declared in, stamped when it was (:func:`helper_source`).
_HELPER_SOURCES: dict[Callable[..., Any], SourceStamp | None] = {}


def helper(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a typed Python function as a helper that backward formulas may call."""
    _registry_of(fn.__module__).helpers[fn.__name__] = fn
    _HELPER_SOURCES[fn] = source_stamp(fn.__code__.co_filename)
    return fn


def helper_source(fn: Callable[..., Any]) -> SourceStamp | None:
    """The file the helper ``fn`` was declared in, as it was then (None: no file, not a helper)."""
    return _HELPER_SOURCES.get(fn)


def nondifferentiable(*schemas: str) -> None:
    """Declare operators whose outputs carry no gradient (comparisons, ``zeros_like``...), in
    the registry of the package of the module that calls it."""
    table = _registry_of(sys._getframe(1).f_globals.get("__name__", "")).nondifferentiable
    for schema in schemas:
        table[schema.split("(", 1)[0].strip()] = schema


class Backend(Protocol):
    """What runs ``at.<op>``: the reference engine, a torch-backed oracle, ..."""

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The result of the aten operator ``name`` on ``args`` and ``kwargs``."""


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
