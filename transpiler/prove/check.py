"""``check_formula``: every applicable proof tier on one formula, one ``AssertionError``.

The formula is the decorated function itself or an operator name (``"sin"``,
``"mul.Tensor"``) of ``package`` (default: the shipped library). The inputs are the
operator's arguments in schema order (torch tensors or NumPy arrays; float64 ones are
differentiated); without inputs, the cases :mod:`transpiler.prove.cases` makes from the
schema are used. See ``docs/testing.md``.
"""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

import numpy as np

from formulas.dsl import DeclaredFormula, registry
from transpiler.needs import TorchMissing
from transpiler.prove.cases import Case, NoCases, schema_cases
from transpiler.prove.tiers import (
    RUNNERS,
    MEANING,
    TIERS,
    NotApplicable,
    Subject,
    TierFailure,
    named_values,
)

NO_CASE = "not run: torch's operator refuses every generated case; give the op PROVE_CASES"


@dataclass(frozen=True)
class Outcome:
    """One tier of one formula: ``ok``, ``FAIL`` or ``n/a`` and what to say about it."""

    tier: str
    status: str
    message: str = ""
    case: Case | None = None


def require_torch() -> None:
    """Raise :class:`~transpiler.needs.TorchMissing` (one line, with the install command) when
    torch is not installed."""
    try:
        importlib.import_module("torch")
    except ImportError:
        raise TorchMissing("proving formulas") from None


def import_package(package: str) -> list[str]:
    """Import every module of ``package`` (its formulas register themselves); return a one-line
    note for each ``*.py`` entry left out, as ``transpile`` leaves it out: a FIFO, a device or a
    symlink loop (never opened), a file whose name is not a module name."""
    if package == "formulas":
        import formulas

        formulas.load_library()
        return []
    from formulas.dsl import import_package_modules
    from transpiler.diagnostics import printable
    from transpiler.sources import python_sources

    import_package_modules(package)
    notes = []
    for directory in getattr(importlib.import_module(package), "__path__", []):
        listing = python_sources(directory)
        notes += listing.skipped
        notes += [f"{printable(str(path))}: not a Python module name; skipped" for path in listing.misnamed]
    return notes


def subject_of(formula: Callable[..., Any] | str, package: str | None) -> Subject:
    """The formula named by a decorated function or an operator name."""
    if callable(formula):
        owner = package or formula.__module__.split(".", 1)[0]
        found = [d for d in registry(owner).formulas.values() if d.fn is formula]
        if not found:
            raise ValueError(f"{getattr(formula, '__name__', formula)!r} is not a @derivative of package {owner!r}")
        return Subject(owner, found[0])
    owner = package or "formulas"
    import_package(owner)
    table = registry(owner).formulas
    declared: DeclaredFormula | None = table.get(formula)
    if declared is None:      # a base name: its one overload
        matches = sorted(name for name in table if name.split(".", 1)[0] == formula)
        if len(matches) != 1:
            found = f"; give one of {', '.join(matches)}" if matches else ""
            raise ValueError(f"package {owner!r} has {len(matches) or 'no'} formulas for {formula!r}{found}")
        declared = table[matches[0]]
    return Subject(owner, declared)


def formula_names(package: str) -> list[str]:
    """The operator names of every formula of ``package`` (imported), sorted."""
    import_package(package)
    return sorted(registry(package).formulas)


def load_case_file(path: str) -> Any:
    """The Python file ``path`` imported as a module (its directory first on ``sys.path`` while
    it imports), for its ``PROVE_CASES`` (``transpile prove --cases``)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(f"_prove_cases_{Path(path).stem}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(Path(path).resolve().parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    return module


def _entry_case(label: str, entry: Any) -> Case:
    """One ``PROVE_CASES`` entry: a tuple of arguments in schema order, or a dict with ``args``
    and optionally ``kwargs`` (keyword-only arguments by name), ``name`` and ``differentiable``
    (the positions in ``args`` to differentiate; default every float64 tensor)."""
    if isinstance(entry, dict):
        positions = entry.get("differentiable")
        return Case(str(entry.get("name", label)), tuple(entry["args"]), dict(entry.get("kwargs", {})),
                    None if positions is None else tuple(positions))
    return Case(label, tuple(entry))


def declared_cases(package: str, case_files: Iterable[Any] = ()) -> dict[str, list[Case]]:
    """The package's ``PROVE_CASES`` (op name -> entries), from every module of it; those of
    ``case_files`` (modules from :func:`load_case_file`) replace them for the ops they name. A
    case is named ``<module>[<index>]`` unless it names itself."""
    modules = sorted((m for name, m in sys.modules.items() if name == package or name.startswith(f"{package}.")),
                     key=lambda m: m.__name__)
    cases: dict[str, list[Case]] = {}
    for module in modules:
        for op, calls in (getattr(module, "PROVE_CASES", None) or {}).items():
            cases.setdefault(op, []).extend(_entry_case(f"{module.__name__.rsplit('.', 1)[-1]}[{i}]", entry)
                                            for i, entry in enumerate(calls))
    for module in case_files:
        for op, calls in (getattr(module, "PROVE_CASES", None) or {}).items():
            stem = module.__name__.removeprefix("_prove_cases_")
            cases[op] = [_entry_case(f"{stem}[{i}]", entry) for i, entry in enumerate(calls)]
    unknown = set(cases) - set(registry(package).formulas)
    if unknown:
        raise ValueError(f"PROVE_CASES of {package} names ops without a formula: {', '.join(sorted(unknown))}")
    return cases


#: the tiers run on torch's OpInfo samples: those that compare with torch's built-in op
OPINFO_TIERS = ("RT", "CT", "RF")


def package_cases(subject: Subject, case_files: Iterable[Any] = ()) -> list[Case]:
    """The subject's cases: its package's (or ``case_files``') ``PROVE_CASES`` for it, else
    made from its schema (:class:`NoCases` when the schema has an argument no generated case
    can choose); then, for :data:`OPINFO_TIERS`, torch's OpInfo samples of the operator."""
    own = declared_cases(subject.package, case_files).get(subject.name)
    if own is not None:
        cases = [replace(given_case(subject, case.args), name=case.name, kwargs={**case.kwargs},
                         differentiable=case.differentiable) for case in own]
    else:
        cases = [case for case in schema_cases(subject.schema) if accepted(subject, case)]
    return cases + opinfo_cases(subject)


def opinfo_cases(subject: Subject) -> list[Case]:
    """torch's OpInfo samples that are calls of the subject's operator (:mod:`transpiler.prove.opinfo`),
    when torch has an operator of the same schema; none without the ``expecttest`` package."""
    from transpiler.prove.opinfo import opinfo_database, samples_of
    from transpiler.prove.tiers import builtin

    try:
        builtin(subject)
    except NotApplicable:
        return []
    samples, _ = samples_of(subject.name, subject.declared.schema, list(opinfo_database()))
    return [Case(sample.id, sample.args, dict(sample.kwargs), sample.differentiable, OPINFO_TIERS)
            for sample in samples]


def accepted(subject: Subject, case: Case) -> bool:
    """Whether torch's built-in operator (or, without one, the formula's forward on torch)
    runs on a generated case: size 0 or a 0-dim tensor is kept only where the op allows it."""
    from transpiler.prove.tiers import TorchRun, builtin, positional

    run = TorchRun(subject, named_values(subject.schema, case))
    named, _ = run.named(run.arrays())
    try:
        try:
            operator = builtin(subject)
        except NotApplicable:
            run.forward(run.arrays())
        else:
            args, kwargs = positional(subject.schema, named)
            outputs = operator(*args, **kwargs)
            if not all(bool(o.isfinite().all()) for o in (outputs if isinstance(outputs, tuple) else (outputs,))
                       if o.is_floating_point()):
                return False     # outside the domain (a variance of one element): no derivative to check
    except Exception:            # torch refuses these inputs: not a case of this operator
        return False
    return True


def _as_array(value: Any) -> Any:
    """A torch tensor as a NumPy array (lists of them too); anything else unchanged."""
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        return value.detach().cpu().numpy().copy()
    if isinstance(value, (list, tuple)) and any(type(v).__module__.startswith("torch") for v in value):
        return [_as_array(v) for v in value]
    return value


def given_case(subject: Subject, inputs: tuple[Any, ...]) -> Case:
    """The inputs as a case: positional in schema order, keyword-only arguments by name."""
    schema = subject.schema
    arguments = [a for a in schema.arguments if not a.is_out]
    if len(inputs) > len(arguments):
        raise TypeError(f"{subject.name} takes {len(arguments)} arguments ({schema}); {len(inputs)} were given")
    args = tuple(_as_array(v) for a, v in zip(arguments, inputs) if not a.kwarg_only)
    kwargs = {a.name: _as_array(v) for a, v in zip(arguments, inputs) if a.kwarg_only}
    return Case("given", args, kwargs)


def run_tiers(subject: Subject, cases: Iterable[Case], tiers: Iterable[str] = TIERS,
              runners: dict[str, Callable[[Subject, Any], None]] = RUNNERS) -> list[Outcome]:
    """Each tier on every case (L once): the first failing case makes the tier ``FAIL``; a tier
    that applies to no case is ``n/a`` with the reason."""
    cases, tiers = list(cases), list(tiers)
    if not cases:
        return [Outcome(tier, "-", NO_CASE) for tier in tiers]
    outcomes = []
    for tier in tiers:
        if tier not in runners:
            raise ValueError(f"unknown tier {tier!r}; expected some of {', '.join(runners)}")
        outcome: Outcome | None = None
        reason = "no case"
        ran = False
        for case in cases[:1] if tier == "L" else cases:
            if case.tiers is not None and tier not in case.tiers:
                continue
            try:
                runners[tier](subject, named_values(subject.schema, case))
                ran = True
            except NotApplicable as why:
                reason = str(why)
            except TierFailure as failure:
                outcome = Outcome(tier, "FAIL", str(failure), case)
                break
            except Exception as error:       # the formula itself raised: that is the failure
                first_line = (str(error).splitlines() or [""])[0]
                outcome = Outcome(tier, "FAIL", f"raised {type(error).__name__}: {first_line}", case)
                break
        outcomes.append(outcome or (Outcome(tier, "ok") if ran else Outcome(tier, "n/a", reason)))
    return outcomes


def reproduction(subject: Subject, case: Case) -> str:
    """A ``check_formula`` call with the case's inputs."""
    def spell(value: Any) -> str:
        if isinstance(value, np.ndarray):
            return f"torch.tensor({value.tolist()!r}, dtype=torch.{value.dtype})"
        if isinstance(value, list):
            return "[" + ", ".join(spell(v) for v in value) + "]"
        return repr(value)
    values = [*case.args, *case.kwargs.values()]
    return f"check_formula({subject.name!r}, {', '.join(spell(v) for v in values)}, package={subject.package!r})"


def failure_report(subject: Subject, outcomes: list[Outcome]) -> str:
    """The ``AssertionError`` message: every failing tier, each with its input and case."""
    lines = [f"formula {subject.name} ({subject.declared.schema}) of package {subject.package!r}:"]
    for outcome in outcomes:
        if outcome.status != "FAIL":
            continue
        assert outcome.case is not None
        lines.append(f"tier {outcome.tier} ({MEANING[outcome.tier]}), case {outcome.case.name}: {outcome.message}")
        lines.append(f"  reproduce: {reproduction(subject, outcome.case)}")
    return "\n".join(lines)


def check_formula(formula: Callable[..., Any] | str, *inputs: Any, tiers: Iterable[str] | None = None,
                  package: str | None = None) -> list[Outcome]:
    """Run the applicable tiers; raise one ``AssertionError`` naming every failing tier (the
    formula, the input, the worst element with both values, the term of the backward that
    explains it where one does, and a call that reproduces it). A tier named in ``tiers``
    that does not apply is a failure too. Returns the outcomes."""
    require_torch()
    subject = subject_of(formula, package)
    if inputs:
        cases = [given_case(subject, inputs)]
    else:
        try:
            cases = package_cases(subject)
        except NoCases as why:
            raise ValueError(f"{subject.name}: {why}") from None
    asked = tuple(tiers) if tiers is not None else TIERS
    outcomes = run_tiers(subject, cases, asked)
    failed = [o for o in outcomes if o.status == "FAIL"]
    missing = [o for o in outcomes if o.status == "-" or (tiers is not None and o.status == "n/a")]
    if failed or missing:
        report = failure_report(subject, failed)
        report += "".join(f"\ntier {o.tier} did not run: {o.message}" if o.status == "-" else
                          f"\ntier {o.tier} was asked for but does not apply: {o.message}" for o in missing)
        raise AssertionError(report)
    return outcomes
