"""What the back ends that run a formula need to know about it, read once from the front-end's model.

The front-end (:mod:`transpiler.frontend`, the one reader of formula files)
models each ``@derivative`` function of a file. The reference engine and the
torch back end (``formulas/torch/``) keep, per formula, a frozen
:class:`FormulaFacts` taken from that model the first time the formula is
recorded or run in forward mode (one read per source file). Here, beside the
model, so that both read it and neither imports the other for it; nothing
here imports torch, NumPy or the engine (libcst and the front-end on first use):

* ``settled``: the backward's captures whose cells never need a look when a
  node is recorded (inputs the forward never rebinds, metadata);
* ``mask_parameter``: the backward's keyword-only ``needs_input_grad``;
* ``jvp``: how the formula gives its forward-mode derivative (a nested
  ``def jvp``, an ``@derivative(jvp=...)`` rule, or none);
* ``differentiable_outputs``: the declared ``output_differentiability``.

The facts are plain data (names, tuples, frozensets): the model, whose libcst trees
are tens of thousands of objects that every full collection of the program's cycle
collector would scan, is let go once the facts of its file are taken. What needs
the model's syntax (forward mode compiling a jvp, the torch back end's generator)
reads it again with :func:`formula_model` / :func:`model_of_file`, through the
front-end's memo.

The facts describe the file as the front-end reads it, so they must be the
facts of the code that runs: ``@derivative`` stamps the file when it declares
the formula (:class:`formulas.dsl.SourceStamp`), and a file changed since then
raises :class:`StaleFormulaError` rather than running with another file's
facts. A formula the front-end has no model of (not declared with
``@derivative`` at the top level of a file, or no file at all) gets
:func:`unread_facts`: nothing settled (every captured cell is looked at) and
no nested jvp (forward mode raises, saying why).

Every formula also gets ``globals_written`` and ``globals_read``: the module
globals its code rebinds or changes in place, and those its nested functions
(the backward) read (:mod:`transpiler.module_globals`), and
``scalar_method_receivers``: the names its code calls a ``c10::Scalar`` method
on (``alpha.conj()``: the engine gives those ``Scalar`` arguments their methods,
:mod:`reference_engine.scalars`), read from the syntax of its ``def``: the
modelled formula's, or for a formula without a model, the ``def`` of its name
and first line in its file. A formula whose ``def`` the front-end cannot read
(no file, and no source in ``linecache``, where IPython and Jupyter keep each
cell's: the plain REPL, ``exec`` of a string; a lambda) has ``globals_written``
and ``scalar_method_receivers`` None: the engine refuses to record it rather
than leave a forward tensor kept in a module global unchecked (and gives every
``Scalar`` argument the methods). A modelled formula also gets
``backward_reads``, the parameters its backward reads (what the torch back end's
in-place kernels copy before the write).
"""
from __future__ import annotations

import gc
from dataclasses import dataclass, field
from types import CodeType
from typing import TYPE_CHECKING, Any, Mapping

from formulas.dsl import DeclaredFormula, SourceStamp, source_stamp

if TYPE_CHECKING:
    import libcst as cst

    from transpiler.model import Formula, FormulaModule
    from transpiler.raises import RaisedError
    from transpiler.module_globals import ModuleGlobalsWritten


#: The ``c10::Scalar`` methods formulas call (the C++ emitter's ``SCALAR_METHODS``), which the
#: engine gives a ``Scalar`` argument (:mod:`reference_engine.scalars`).
SCALAR_METHODS = frozenset({"conj", "toDouble", "toFloat", "toLong", "isComplex", "isFloatingPoint"})


class StaleFormulaError(RuntimeError):
    """A formula's file changed after the formula was declared (imported)."""


@dataclass(frozen=True, slots=True)
class FormulaFacts:
    """The front-end's facts about one formula, as the engine and the torch back end use them."""

    settled: frozenset[str]                     # captures recording never looks at
    mask_parameter: str | None                  # the backward's ``needs_input_grad`` parameter
    jvp: str | None                             # "written" (a nested def jvp), a jvp= rule, or None
    differentiable_outputs: tuple[bool, ...] | None   # as declared; None: torch's default
    source: SourceStamp | None = None           # the file the facts were read from (None: unread)
    #: the nested functions' names, as the front-end found them
    backward_name: str = "backward"
    #: the forward names the formula returns as its outputs (None: not a plain name)
    outputs: tuple[str | None, ...] = ()
    #: why the front-end left the formula's written jvp out, or None
    jvp_left_out: str | None = None
    #: why there is no model (shown when forward mode needs one); "" when read
    unread_because: str = ""
    #: the module globals the formula's code rebinds (``global E``) and changes in place
    #: (``CACHE[k] = e``); None: the front-end read no ``def`` of it (nothing can be checked)
    globals_written: ModuleGlobalsWritten | None = None
    #: each function defined in the formula's body, by name -> the module globals it reads,
    #: among those written (empty when it writes none)
    globals_read: Mapping[str, frozenset[str]] = field(default_factory=dict, compare=False)
    #: the names its code (nested functions included) calls a ``c10::Scalar`` method on
    #: (:data:`SCALAR_METHODS`); None: the front-end read no ``def`` of it
    scalar_method_receivers: frozenset[str] | None = None
    #: the formula's parameters its backward (and the functions nested in it) reads from the
    #: formula's scope, its own parameters' defaults left out; None: no model
    backward_reads: frozenset[str] | None = None
    #: the ATen operators its backward calls (``at.<name>``), and the errors it makes by a call
    #: (``NotImplementedError("...")``, as :func:`transpiler.raises.called_error` reads them): what the
    #: torch back end checks before it stands in for an operator (empty: no model)
    backward_operators: frozenset[str] = frozenset()
    backward_errors: tuple[RaisedError, ...] = ()

    @property
    def modelled(self) -> bool:
        """Whether the front-end modelled the formula (:func:`formula_model` reads its model)."""
        return not self.unread_because


def unread_facts(declared: DeclaredFormula, because: str, module: FormulaModule | None = None) -> FormulaFacts:
    """Facts for a formula the front-end has no model of: nothing settled, no nested jvp; the
    module globals it writes and reads when ``module`` (its file, read) holds its ``def``."""
    fn = getattr(declared.fn, "__wrapped__", declared.fn)
    function = None if module is None else _def_of(fn.__code__, module)
    written, read = (None, {}) if function is None else _globals_facts(function)
    return FormulaFacts(frozenset(), None, declared.jvp, declared.output_differentiability,
                        unread_because=because, globals_written=written, globals_read=read,
                        scalar_method_receivers=None if function is None else _scalar_method_receivers(function))


#: A file's stamp -> (function name, op name, facts) of each formula the front-end modelled in it,
#: read once per file and stamp. Plain data: the model is let go once they are taken from it (its
#: libcst trees, tens of thousands of objects, would be scanned by every full collection of the
#: program's cycle collector).
_FILES: dict[SourceStamp, tuple[tuple[str, str, FormulaFacts], ...]] = {}


def facts_of(declared: DeclaredFormula) -> FormulaFacts:
    """The facts of ``declared``, from the front-end's model of its file (read once per file).

    Raises :class:`StaleFormulaError` when the file changed since the formula was declared."""
    fn = getattr(declared.fn, "__wrapped__", declared.fn)
    stamp = declared.source
    if stamp is None:
        return unread_facts(declared, f"{fn.__qualname__} has no source file the front-end can read",
                            _model_of_registered_source(fn.__code__.co_filename))
    if fn.__qualname__ != fn.__name__:
        return _unread_in_file(declared, f"{fn.__qualname__} is not defined at the top level of "
                                         f"{stamp.path}", stamp)
    found = _FILES.get(stamp)
    if found is None:
        found = _FILES[stamp] = _facts_of_file(stamp)
        # the model is gone: free its trees now (libcst's parser leaves reference cycles), once per
        # file, rather than leave them to the program's cycle collector (or to none, gc disabled)
        gc.collect()
    facts = _single(found, fn.__name__, declared.op_name)
    if facts is None:
        return _unread_in_file(declared, f"{stamp.path} has no single formula {fn.__name__} declared with "
                                         f"@derivative", stamp)
    return facts


def _unread_in_file(declared: DeclaredFormula, because: str, stamp: SourceStamp) -> FormulaFacts:
    facts = unread_facts(declared, because, _read_file(stamp))
    gc.collect()    # the model is gone (as in facts_of)
    return facts


def _facts_of_file(stamp: SourceStamp) -> tuple[tuple[str, str, FormulaFacts], ...]:
    module = _read_file(stamp)
    return tuple((f.function, f.op_name, _facts_from_model(f, stamp)) for f in module.formulas)


def _single(found: tuple[tuple[str, str, object], ...], function: str, op_name: str) -> Any:
    """The one entry of ``found`` (function name, op name, value) for ``function``: by its op name
    where the function is declared for several (a ``@family_member``); None when there is none."""
    values = [value for name, _, value in found if name == function]
    if len(values) > 1:
        values = [value for name, op, value in found if name == function and op == op_name]
    return values[0] if len(values) == 1 else None


def formula_model(declared: DeclaredFormula) -> Formula:
    """The front-end's model of the modelled formula ``declared`` (its facts say
    :attr:`FormulaFacts.modelled`), for what its facts do not keep: forward mode compiles its jvp
    from it, the torch back end generates its Python from it (:func:`model_of_file`)."""
    fn = getattr(declared.fn, "__wrapped__", declared.fn)
    module = model_of_file(declared.source)
    return _single(tuple((f.function, f.op_name, f) for f in module.formulas), fn.__name__, declared.op_name)


def model_of_file(stamp: SourceStamp) -> FormulaModule:
    """The front-end's model of the file ``stamp`` names, kept in the front-end's memo (read
    once while it keeps it); the file must still be as stamped (:class:`StaleFormulaError`
    otherwise)."""
    return _read_file(stamp, memoised=True)


def _model_of_registered_source(filename: str) -> FormulaModule | None:
    """The front-end's model of the source ``linecache`` holds for ``filename``, a name that is no
    file (IPython and Jupyter register each cell's source under its own name, never changed);
    None when it holds none (``exec`` of a string, the plain REPL)."""
    import linecache

    lines = linecache.getlines(filename)
    if not lines:
        return None
    from transpiler.frontend import parse_module    # libcst: on first use only

    return parse_module(filename, "".join(lines))


def _read_file(stamp: SourceStamp, memoised: bool = False) -> FormulaModule:
    from transpiler.frontend import parse_module, read_module    # libcst: on first use only

    if source_stamp(stamp.path) != stamp:
        raise StaleFormulaError(f"{stamp.path}: the file changed after its formulas were imported, so the "
                                f"front-end's facts about them would not be those of the code that runs; "
                                f"reload the module (importlib.reload) or restart the program")
    parsed = parse_module.cache_info().misses
    module = read_module(stamp.path, memoised)
    if memoised and parse_module.cache_info().misses != parsed:
        # libcst's parser leaves reference cycles behind: free them now, once per file, rather
        # than leave them to the program's cycle collector (or to none, with gc disabled)
        gc.collect()
    if source_stamp(stamp.path) != stamp:     # changed while it was read
        raise StaleFormulaError(f"{stamp.path}: the file changed while the engine read it; reload the "
                                f"module (importlib.reload) or restart the program")
    return module


def _facts_from_model(formula: Formula, source: SourceStamp) -> FormulaFacts:
    from transpiler.dataflow import closure_reads
    from transpiler.frontend import settled_captures
    from transpiler.raises import called_error

    jvp = "derived" if formula.derives_jvp else formula.jvp.rule.value if formula.jvp is not None else None
    written, read = _globals_facts(formula.node)
    backward_reads = frozenset(name.value for name in closure_reads(formula.backward.node, set(formula.params)))
    return FormulaFacts(settled_captures(formula), formula.backward.needs_input_grad, jvp,
                        formula.output_differentiability, source, formula.backward.node.name.value,
                        formula.outputs, formula.jvp_left_out, globals_written=written, globals_read=read,
                        scalar_method_receivers=_scalar_method_receivers(formula.node), backward_reads=backward_reads,
                        backward_operators=frozenset(call.name for call in formula.backward.calls if call.operator),
                        backward_errors=tuple(error for call in formula.backward.calls if not call.operator
                                              if (error := called_error(call.node)) is not None))


def _scalar_method_receivers(function: cst.FunctionDef) -> frozenset[str]:
    from transpiler.dataflow import method_receivers

    return method_receivers(function, SCALAR_METHODS)


def _globals_facts(function: cst.FunctionDef) -> tuple[ModuleGlobalsWritten, dict[str, frozenset[str]]]:
    """The module globals ``function`` writes, and of those, what each function defined in its
    body reads (functions of one name, in two branches: what either reads)."""
    import libcst as cst

    from transpiler.dataflow import walk
    from transpiler.module_globals import module_globals_read, module_globals_written

    written = module_globals_written(function)
    names = written.assigned | written.changed
    read: dict[str, frozenset[str]] = {}
    if names:
        for node in walk(function.body, lambda child: type(child) is not cst.FunctionDef):
            if type(node) is cst.FunctionDef:
                name = node.name.value
                read[name] = read.get(name, frozenset()) | (module_globals_read(node, function) & names)
    return written, read


def _def_of(code: CodeType, module: FormulaModule) -> cst.FunctionDef | None:
    """The ``def`` in ``module`` that compiled to ``code``: its name, on its first line (the
    first decorator's, as ``co_firstlineno``); None when there is none (a lambda, a file
    without it)."""
    import libcst as cst

    for node in module.positions:
        if type(node) is cst.FunctionDef and node.name.value == code.co_name:
            first = node.decorators[0] if node.decorators else node
            if module.span(first).line == code.co_firstlineno:
                return node
    return None
