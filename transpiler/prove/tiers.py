"""The proof tiers, run on one formula and one case.

A tier returns quietly when it passes, raises :class:`NotApplicable` (with the reason)
when it cannot run on this formula, and :class:`TierFailure` (the input slot, the worst
element and both values) when it fails. First-order tiers compare vector-Jacobian
products: for a random weight ``v`` of each output, the backward's gradient of every
differentiable input against ``v . (f(x + eps e_k) - f(x - eps e_k)) / (2 eps)`` for every
element ``k`` (central differences, float64), or against torch's built-in gradient.

=====  ============================================================================
L      ``transpile lint`` reports nothing on the formula's file
R1     reference engine: gradients == finite differences
R2     reference engine: ``gradgradcheck``
RT     reference engine gradients == the built-in torch op's (same schema), first and second order
T1     the formula's Python on torch tensors (``at`` is ``torch.ops.aten``): backward == finite differences
TT     the formula's Python on torch tensors: backward == the built-in torch op's gradient
F1     reference engine: the formula's jvp == directional finite differences
RF     reference engine: the formula's jvp == ``torch.func.jvp`` of the built-in op
=====  ============================================================================

The columns and the meaning of the tiers the suite also proves are the suite's
(:data:`transpiler.tier_table.TIERS`, ``TIER_MEANING``): one list, so a tier added there
takes its place here once it has a runner. T1 and TT are this module's own (a package
without engine kernels is proven through them).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from formulas.dsl import DeclaredFormula
from transpiler.tier_table import TIER_MEANING as SUITE_MEANING
from transpiler.tier_table import TIERS as SUITE_TIERS
from transpiler.prove.cases import Case
from transpiler.schema import FunctionSchema, parse_schema

#: tiers only ``transpile prove`` runs: the formula's Python on torch tensors
PROVE_ONLY_MEANING = {
    "T1": "formula on torch tensors: backward == finite differences",
    "TT": "formula on torch tensors: backward == the built-in torch op's gradient",
}
#: every column, in order: the suite's, with prove's own after RT
COLUMNS = (*SUITE_TIERS[:SUITE_TIERS.index("RT") + 1], *PROVE_ONLY_MEANING, *SUITE_TIERS[SUITE_TIERS.index("RT") + 1:])
MEANING = {**SUITE_MEANING, **PROVE_ONLY_MEANING}


def in_column_order(tiers: Any) -> list[str]:
    """``tiers`` (names) in :data:`COLUMNS` order."""
    return sorted(tiers, key=COLUMNS.index)


EPS, ATOL, RTOL = 1e-6, 1e-5, 1e-3          # against finite differences, as gradcheck
EXACT_ATOL, EXACT_RTOL = 1e-10, 1e-7        # two analytic gradients (against torch's), as the suite's RT


class NotApplicable(Exception):
    """The tier does not apply to this formula; the message says why."""


@dataclass
class TierFailure(Exception):
    """A tier failed for one input slot: the worst element and both values."""

    where: str                       # "input `self`", "output 0", ...
    detail: str
    element: tuple[int, ...] | None = None
    got: float | None = None
    expected: float | None = None
    expected_name: str = "finite differences"
    explanation: str = ""                 # which term of the backward explains it, when known

    def __str__(self) -> str:
        if self.element is None:
            return f"{self.where}: {self.detail}"
        return (f"{self.where}, worst at element {self.element}: formula {self.got!r}, "
                f"{self.expected_name} {self.expected!r} ({self.detail})"
                + (f"\n  {self.explanation}" if self.explanation else ""))


@dataclass(frozen=True)
class Subject:
    """The formula under proof."""

    package: str
    declared: DeclaredFormula

    @property
    def name(self) -> str:
        """The operator's name, ``name.overload``."""
        return self.declared.op_name

    @property
    def schema(self) -> FunctionSchema:
        """The parsed schema the formula declares."""
        return parse_schema(self.declared.schema)


# -- the case as named values, and its differentiable slots ------------------------------

class CaseValues(dict):
    """A case's arguments by name, and the names of those differentiated (None: every float64
    one of a differentiable argument)."""

    differentiated: frozenset[str] | None = None


def named_values(schema: FunctionSchema, case: Case) -> CaseValues:
    """The case's arguments by name (positional ones in schema order)."""
    names = [a.name for a in schema.arguments if not a.is_out]
    values = CaseValues(zip(names, case.args))
    values.update(case.kwargs)
    if case.differentiable is not None:
        values.differentiated = frozenset(names[i] for i in case.differentiable)
    return values


def slots(schema: FunctionSchema, values: CaseValues) -> list[tuple[str, str, int | None]]:
    """``(label, argument, list index)`` of every float64 array a gradient is taken for."""
    found = []
    for argument in schema.arguments:
        if argument.is_out or not argument.is_differentiable or argument.name not in values:
            continue
        if getattr(values, "differentiated", None) is not None and argument.name not in values.differentiated:
            continue
        value = values[argument.name]
        if isinstance(value, np.ndarray) and value.dtype == np.float64:
            found.append((argument.name, argument.name, None))
        elif isinstance(value, list):
            found += [(f"{argument.name}[{i}]", argument.name, i) for i, v in enumerate(value)
                      if isinstance(v, np.ndarray) and v.dtype == np.float64]
    return found


def slot_array(values: dict[str, Any], where: tuple[str, str, int | None]) -> np.ndarray:
    """The array at one slot."""
    _, argument, index = where
    return values[argument] if index is None else values[argument][index]


def substituted(values: dict[str, Any], where: list[tuple[str, str, int | None]], tensors: list[Any],
                convert: Callable[[Any], Any]) -> dict[str, Any]:
    """``values`` converted (arrays by ``convert``) with ``tensors`` at the slots."""
    out = {k: ([convert(x) for x in v] if isinstance(v, list) else convert(v)) for k, v in values.items()}
    for (_, argument, index), tensor in zip(where, tensors):
        if index is None:
            out[argument] = tensor
        else:
            out[argument] = list(out[argument])
            out[argument][index] = tensor
    return out


def positional(schema: FunctionSchema, named: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Named values as a call: positional arguments in schema order, keyword-only ones by name."""
    args = [named[a.name] for a in schema.positional if a.name in named]
    kwargs = {a.name: named[a.name] for a in schema.kwarg_only if a.name in named}
    return args, kwargs


def _call(fn: Callable[..., Any], schema: FunctionSchema, named: dict[str, Any]) -> Any:
    args, kwargs = positional(schema, named)
    return fn(*args, **kwargs)


def _float_arrays(outputs: Any, to_numpy: Callable[[Any], np.ndarray]) -> list[np.ndarray]:
    outs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    arrays = [to_numpy(o) for o in outs if o is not None]
    return [a for a in arrays if a.dtype.kind == "f"]


# -- comparisons ---------------------------------------------------------------------------

def output_weights(shapes: list[tuple[int, ...]], seed: int = 1) -> list[np.ndarray]:
    """Standard normal arrays of ``shapes``, reproducible by ``seed`` (the ``v`` of ``v . J``)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for shape in shapes]


def numerical_vjp(forward: Callable[[list[np.ndarray]], list[np.ndarray]], inputs: list[np.ndarray],
                  weights: list[np.ndarray]) -> list[np.ndarray]:
    """``v . J`` for every input by central differences of ``forward`` (arrays to arrays)."""
    gradients = []
    for j, x in enumerate(inputs):
        g = np.zeros_like(x)
        for k in np.ndindex(x.shape):
            original = x[k]
            x[k] = original + EPS
            plus = forward(inputs)
            x[k] = original - EPS
            minus = forward(inputs)
            x[k] = original
            g[k] = sum(float(np.sum((p - m) * w)) for p, m, w in zip(plus, minus, weights)) / (2 * EPS)
        gradients.append(g)
    return gradients


def compare(where: str, got: np.ndarray | None, expected: np.ndarray, expected_name: str,
            atol: float = ATOL, rtol: float = RTOL) -> None:
    """Raise :class:`TierFailure` at the worst element where ``got`` is not close to ``expected``."""
    got = np.zeros_like(expected) if got is None else np.asarray(got, np.float64)
    if got.shape != expected.shape:
        raise TierFailure(where, f"a value of shape {got.shape}, the input has shape {expected.shape}")
    bad = ~np.isclose(got, expected, rtol=rtol, atol=atol)
    if not bad.any():
        return
    error = np.where(bad, np.abs(got - expected), -1)
    worst = np.unravel_index(int(np.argmax(error)), got.shape)
    raise TierFailure(where, f"{int(bad.sum())} of {bad.size} elements differ; atol={atol}, rtol={rtol}",
                      tuple(int(i) for i in worst), float(got[worst]), float(expected[worst]), expected_name)


# -- the two ways of running a formula -------------------------------------------------------

def differentiable_returns(subject: Subject, outputs: Any) -> list[Any]:
    """The outputs of the schema's differentiable returns, one per return (a list for a
    ``Tensor[]`` return), in order."""
    count = len(subject.schema.returns)
    per_return = [outputs] if count == 1 else list(outputs)
    flags = subject.schema.output_flags(subject.declared.output_differentiability)
    return [o for o, keep in zip(per_return, flags) if keep]


def flat_tensors(returns: list[Any]) -> list[Any]:
    """The tensors of :func:`differentiable_returns`, lists flattened."""
    return [t for r in returns for t in (r if isinstance(r, (list, tuple)) else [r])]


def regrouped(returns: list[Any], flat: list[Any]) -> list[Any]:
    """``flat`` (one value per float tensor of ``returns``) grouped as ``returns`` are."""
    grouped, k = [], 0
    for r in returns:
        if isinstance(r, (list, tuple)):
            grouped.append(list(flat[k:k + len(r)]))
            k += len(r)
        else:
            grouped.append(flat[k])
            k += 1
    return grouped


@dataclass
class EngineRun:
    """The formula through the reference engine (the package's own operator table)."""

    subject: Subject
    values: dict[str, Any]

    def __post_init__(self) -> None:
        self.where = slots(self.subject.schema, self.values)
        self.overload = engine_overload(self.subject)

    def call(self, tensors: list[Any]) -> Any:
        """The op called through the engine with ``tensors`` in the case's tensor slots (as engine tensors)."""
        import reference_engine as engine

        def convert(v: Any) -> Any:
            return engine.Tensor(v.copy()) if isinstance(v, np.ndarray) else v
        return _call(self.overload, self.subject.schema, substituted(self.values, self.where, tensors, convert))

    def inputs(self, requires_grad: bool = True) -> list[Any]:
        """The case's tensors as fresh engine tensors (requiring grad unless told)."""
        import reference_engine as engine

        return [engine.Tensor(self.array(i).copy(), requires_grad=requires_grad) for i in range(len(self.where))]

    def array(self, i: int) -> np.ndarray:
        """The array in the case's tensor slot ``i``."""
        return slot_array(self.values, self.where[i])

    def forward(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """The differentiable outputs, as float arrays, of the op run through the engine on ``arrays``."""
        import reference_engine as engine

        outs = flat_tensors(differentiable_returns(self.subject, self.call([engine.Tensor(a.copy()) for a in arrays])))
        return _float_arrays(outs, lambda t: np.asarray(t._data))

    def vjp(self, weights: list[np.ndarray]) -> list[np.ndarray | None]:
        """The gradients of the case's tensors for the output ``weights`` (vector-Jacobian product),
        through the engine."""
        import reference_engine as engine

        tensors = self.inputs()
        outs = [o for o in flat_tensors(differentiable_returns(self.subject, self.call(tensors)))
                if o is not None and o.is_floating_point()]
        grads = engine.grad(outs, tensors, [engine.Tensor(w) for w in weights], allow_unused=True)
        return [None if g is None else np.asarray(g._data) for g in grads]

    def second_order(self, weights: list[np.ndarray], grad_weights: list[np.ndarray]) -> list[np.ndarray | None]:
        """The engine's second-order gradients (:func:`first_and_second_order`)."""
        import reference_engine as engine

        tensors = self.inputs()
        outs = [o for o in flat_tensors(differentiable_returns(self.subject, self.call(tensors)))
                if o is not None and o.is_floating_point()]
        second = first_and_second_order(engine.grad, outs, tensors, [engine.Tensor(w) for w in weights],
                                        [engine.Tensor(v) for v in grad_weights])
        return [None if g is None else np.asarray(g.detach()._data) for g in second]


def first_and_second_order(grad: Callable[..., Any], outs: list[Any], inputs: list[Any], weights: list[Any],
                           grad_weights: list[Any]) -> list[Any]:
    """The second-order gradients ``d/dx <v2, d/dx <v, f(x)>>`` with ``grad`` (the engine's or
    torch's ``autograd.grad``), built as the suite's RT builds them (the weighted sums as
    losses); ``None`` where no first-order gradient has a graph."""
    products = [(o * w).sum() for o, w in zip(outs, weights)]
    first = grad(sum(products[1:], products[0]), inputs, create_graph=True, allow_unused=True)
    weighted = [(g * v).sum() for g, v in zip(first, grad_weights) if g is not None]
    loss = sum(weighted[1:], weighted[0]) if weighted else None
    if loss is None or not loss.requires_grad:
        return [None] * len(inputs)
    return list(grad(loss, inputs, allow_unused=True))


def engine_overload(subject: Subject) -> Any:
    """The engine's overload running the subject's formula; NotApplicable without a kernel."""
    if subject.package == "formulas":
        import reference_engine as engine

        overload = engine.op(subject.name)
    else:
        overload = _dispatcher(subject.package).overload(subject.name)
    if overload.kernel is None:
        raise NotApplicable(f"the reference engine has no kernel for `{subject.name}` "
                            "(reference_engine.define(schema, kernel) gives it one)")
    return overload


_DISPATCHERS: dict[str, Any] = {}


def _dispatcher(package: str) -> Any:
    from reference_engine.packages import package_dispatcher

    if package not in _DISPATCHERS:
        _DISPATCHERS[package] = package_dispatcher(package)
    return _DISPATCHERS[package]


@dataclass
class TorchRun:
    """The formula's Python on torch tensors (``at`` is ``torch.ops.aten``)."""

    subject: Subject
    values: dict[str, Any]

    def __post_init__(self) -> None:
        self.where = slots(self.subject.schema, self.values)

    def named(self, arrays: list[np.ndarray], requires_grad: bool = False) -> tuple[dict[str, Any], list[Any]]:
        """The case's arguments as torch values, with ``arrays`` as the slots' tensors."""
        tensors = [to_torch(a).requires_grad_(requires_grad) for a in arrays]
        return substituted(self.values, self.where, tensors, to_torch), tensors

    def arrays(self) -> list[np.ndarray]:
        """The arrays of the case's tensor slots."""
        return [slot_array(self.values, w) for w in self.where]

    def forward(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """The differentiable outputs, as float arrays, of the formula run through torch on ``arrays``."""
        from transpiler.prove.torch_run import run_formula

        named, _ = self.named(arrays)
        outputs, _ = run_formula(self.subject.declared.fn, self.subject.package,
                                 *positional(self.subject.schema, named), self.mask())
        return _float_arrays(flat_tensors(differentiable_returns(self.subject, outputs)), lambda t: t.detach().numpy())

    def vjp(self, weights: list[np.ndarray], backward_source: str | None = None) -> list[np.ndarray | None]:
        """The formula's backward (or the one ``backward_source`` defines) applied to
        ``weights`` (one per differentiable float output)."""
        import torch

        from transpiler.prove.torch_run import run_formula

        named, _ = self.named(self.arrays())
        outputs, backward = run_formula(self.subject.declared.fn, self.subject.package,
                                        *positional(self.subject.schema, named), self.mask(), backward_source)
        grads = regrouped(differentiable_returns(self.subject, outputs), [torch.from_numpy(w) for w in weights])
        return self.by_slot(backward(*grads))

    def explain(self, slot: int, expected: np.ndarray, weights: list[np.ndarray]) -> str:
        """Which term of the backward's return explains the gap at ``slot`` (a line)."""
        from transpiler.prove.terms import explain

        _, argument, index = self.where[slot]
        if index is not None:
            return "no term is named for an element of a list input"
        differentiable = [a.name for a in self.subject.schema.arguments if a.is_differentiable and not a.is_out]
        found = explain(self.subject.declared.fn, lambda source: self.vjp(weights, source)[slot],
                        differentiable.index(argument), expected, expected.size == 1)
        return str(found)

    def jvp(self, tangents: list[np.ndarray], jvp_source: str | None = None) -> list[np.ndarray]:
        """The formula's written jvp (or the one ``jvp_source`` defines) on torch tensors: the
        tangent of every differentiable float output for ``tangents`` (one per slot)."""
        from transpiler.prove.torch_run import run_jvp

        named, _ = self.named(self.arrays())
        by_argument: dict[str, Any] = {}
        for (_, argument, index), tangent in zip(self.where, tangents):
            if index is None:
                by_argument[argument] = to_torch(tangent)
            else:
                listed = by_argument.setdefault(argument, [None] * len(named[argument]))
                listed[index] = to_torch(tangent)
        for argument, value in by_argument.items():
            if isinstance(value, list):
                by_argument[argument] = [v if v is not None else _zeros(t) for v, t in zip(value, named[argument])]
        returned = run_jvp(self.subject.declared.fn, self.subject.package, named, by_argument, jvp_source)
        flags = self.subject.schema.output_flags(self.subject.declared.output_differentiability)
        per_output = returned if sum(flags) > 1 else (returned,)
        return [as_numpy(t) for t in flat_tensors(list(per_output)) if t is not None]

    def explain_jvp(self, output: int, expected: np.ndarray, tangents: list[np.ndarray]) -> str:
        """Which term of the jvp's return explains the gap at differentiable output ``output``."""
        from transpiler.prove.terms import explain

        def tangent_of(source: str) -> np.ndarray:
            return self.jvp(tangents, source)[output]
        try:
            found = explain(self.subject.declared.fn, tangent_of, output, expected, expected.size == 1, role="jvp")
        except LookupError as why:
            return f"no term is named: {why}"
        return str(found)

    def mask(self) -> tuple[bool, ...]:
        """``needs_input_grad``: per differentiable argument, whether a slot differentiates it."""
        wanted = {argument for _, argument, _ in self.where}
        return tuple(a.name in wanted for a in self.subject.schema.arguments if a.is_differentiable and not a.is_out)

    def by_slot(self, returned: Any) -> list[np.ndarray | None]:
        """A backward's return value as one gradient (or None) per slot."""
        differentiable = [a.name for a in self.subject.schema.arguments if a.is_differentiable and not a.is_out]
        returned = returned if isinstance(returned, tuple) else (returned,)
        by_argument = dict(zip(differentiable, returned))
        found = []
        for _, argument, index in self.where:
            g = by_argument.get(argument)
            if g is not None and index is not None:
                g = g[index]
            found.append(None if g is None else as_numpy(g))
        return found

    def builtin_vjp(self, weights: list[np.ndarray]) -> list[np.ndarray | None]:
        """torch's own gradient of the built-in operator with the subject's schema."""
        import torch

        overload = builtin(self.subject)
        named, tensors = self.named(self.arrays(), requires_grad=True)
        try:
            outputs = _call(overload, self.subject.schema, named)
            outs = [o for o in flat_tensors(differentiable_returns(self.subject, outputs))
                    if isinstance(o, torch.Tensor) and o.is_floating_point()]
            grads = torch.autograd.grad(outs, tensors, [torch.from_numpy(w) for w in weights], allow_unused=True)
        except RuntimeError as error:
            if "is not differentiable with respect to" in str(error) or "is not implemented" in str(error):
                raise NotApplicable(f"torch's aten::{self.subject.name} gives no such gradient: "
                                    f"{str(error).splitlines()[0].strip()}") from None
            raise
        return [None if g is None else as_numpy(g) for g in grads]

    def builtin_second_order(self, weights: list[np.ndarray], grad_weights: list[np.ndarray]
                             ) -> list[np.ndarray | None]:
        """torch's second-order gradients of the built-in operator (:func:`first_and_second_order`)."""
        import torch

        _, tensors = self.named(self.arrays(), requires_grad=True)
        try:
            second = first_and_second_order(torch.autograd.grad, builtin_outputs(self, tensors), tensors,
                                            [torch.from_numpy(w) for w in weights],
                                            [torch.from_numpy(v) for v in grad_weights])
        except RuntimeError as error:      # torch's own double backward fails: no oracle on this case
            raise NotApplicable(f"torch's aten::{self.subject.name} gives no second-order gradient: "
                                f"{str(error).splitlines()[0].strip()}") from None
        return [None if g is None else as_numpy(g) for g in second]


def builtin_outputs(run: "TorchRun", tensors: list[Any]) -> list[Any]:
    """The built-in operator's differentiable float outputs with ``tensors`` at the slots."""
    import torch

    named = substituted(run.values, run.where, tensors, to_torch)
    outputs = _call(builtin(run.subject), run.subject.schema, named)
    return [o for o in flat_tensors(differentiable_returns(run.subject, outputs))
            if isinstance(o, torch.Tensor) and o.is_floating_point()]


def _zeros(like: Any) -> Any:
    import torch

    return torch.zeros_like(like)


def to_torch(value: Any) -> Any:
    """An array as a torch tensor, a NumPy dtype as torch's; anything else unchanged."""
    import torch

    if isinstance(value, np.ndarray):      # default strides, even at size 0 (gradcheck needs them)
        source = torch.from_numpy(value.copy(order="C"))
        return torch.empty(source.shape, dtype=source.dtype).copy_(source)
    if isinstance(value, type) and issubclass(value, np.generic) or isinstance(value, np.dtype):
        return getattr(torch, np.dtype(value).name)
    return value


def as_numpy(tensor: Any) -> np.ndarray:
    """A torch gradient's values (a ZeroTensor's too)."""
    return tensor.detach().numpy(force=True)


def builtin(subject: Subject) -> Any:
    """torch's ``aten::<name>.<overload>`` when its schema is the subject's; NotApplicable otherwise."""
    from transpiler.prove.torch_run import builtin_overload

    overload = builtin_overload(subject.name)
    if overload is None:
        raise NotApplicable(f"torch has no operator `aten::{subject.name}`")
    theirs = parse_schema(str(overload._schema).removeprefix("aten::"))
    if _signature(theirs) != _signature(subject.schema):
        raise NotApplicable(f"torch's `aten::{subject.name}` has another schema: {theirs}")
    return overload


def _signature(schema: FunctionSchema) -> list[tuple[str, str]]:
    return [(a.name, str(a.type)) for a in schema.arguments if not a.is_out]


# -- the tiers -----------------------------------------------------------------------------

def _weights_for(outputs: list[np.ndarray]) -> list[np.ndarray]:
    return output_weights([o.shape for o in outputs])


def _check_against(where: list[tuple[str, str, int | None]], got: list[np.ndarray | None],
                   expected: list[np.ndarray | None], expected_name: str,
                   explain: Callable[[int, np.ndarray], str] | None = None, what: str = "input") -> None:
    """Compare slot by slot; ``explain(slot, expected)`` names the term behind a failure."""
    for slot, ((label, _, _), g, e) in enumerate(zip(where, got, expected)):
        if e is None:
            e = np.zeros_like(g) if g is not None else None
        if e is None:
            continue
        exact = expected_name != "finite differences"
        try:
            compare(f"{what} `{label}`", g, e, expected_name, *((EXACT_ATOL, EXACT_RTOL) if exact else (ATOL, RTOL)))
        except TierFailure as failure:
            if explain is not None:
                failure.explanation = explain(slot, e)
            raise


def tier_r1(subject: Subject, values: dict[str, Any]) -> None:
    """R1: the engine's gradients equal finite differences."""
    run = EngineRun(subject, values)
    arrays = [run.array(i).copy() for i in range(len(run.where))]
    weights = _weights_for(run.forward(arrays))
    torch_run = TorchRun(subject, values)
    _check_against(run.where, run.vjp(weights), numerical_vjp(run.forward, arrays, weights), "finite differences",
                   lambda slot, expected: torch_run.explain(slot, expected, weights))


def tier_r2(subject: Subject, values: dict[str, Any]) -> None:
    """R2: the engine's ``gradgradcheck`` passes."""
    import reference_engine as engine

    run = EngineRun(subject, values)
    tensors = run.inputs()
    try:
        engine.gradgradcheck(lambda *t: run.call(list(t)), tensors)
    except engine.GradcheckError as error:
        raise TierFailure("second order", str(error)) from None


def tier_rt(subject: Subject, values: dict[str, Any]) -> None:
    """RT: the engine's first- and second-order gradients equal torch's built-in op's."""
    builtin(subject)
    run = EngineRun(subject, values)
    torch_run = TorchRun(subject, values)
    arrays = [run.array(i).copy() for i in range(len(run.where))]
    weights = _weights_for(run.forward(arrays))
    _check_against(run.where, run.vjp(weights), torch_run.builtin_vjp(weights), "torch's built-in",
                   lambda slot, expected: torch_run.explain(slot, expected, weights))
    grad_weights = output_weights([a.shape for a in arrays], seed=2)
    _check_against(run.where, run.second_order(weights, grad_weights),
                   torch_run.builtin_second_order(weights, grad_weights), "torch's built-in",
                   what="second-order gradient of input")


def tier_t1(subject: Subject, values: dict[str, Any]) -> None:
    """T1: the formula's Python on torch tensors gives gradients equal to finite differences."""
    run = TorchRun(subject, values)
    arrays = [a.copy() for a in run.arrays()]
    weights = _weights_for(run.forward(arrays))
    _check_against(run.where, run.vjp(weights), numerical_vjp(run.forward, arrays, weights), "finite differences",
                   lambda slot, expected: run.explain(slot, expected, weights))


def tier_tt(subject: Subject, values: dict[str, Any]) -> None:
    """TT: the formula's Python on torch tensors gives gradients equal to torch's built-in op's."""
    builtin(subject)
    run = TorchRun(subject, values)
    weights = _weights_for(run.forward(run.arrays()))
    _check_against(run.where, run.vjp(weights), run.builtin_vjp(weights), "torch's built-in",
                   lambda slot, expected: run.explain(slot, expected, weights))


def _engine_jvp(run: EngineRun, tangents: list[np.ndarray]) -> list[np.ndarray]:
    """The engine's tangents of the differentiable float outputs (forward mode)."""
    import reference_engine as engine

    try:
        _, got = engine.jvp(lambda *t: run.call(list(t)), run.inputs(False), [engine.Tensor(t) for t in tangents])
    except NotImplementedError as error:
        raise NotApplicable("the formula defines no jvp") from error
    return [np.asarray(g._data) for g in flat_tensors(differentiable_returns(run.subject, got))
            if g.is_floating_point()]


def tier_f1(subject: Subject, values: dict[str, Any]) -> None:
    """F1 on the engine: its jvp's tangents equal central differences along the same tangent."""
    run = EngineRun(subject, values)
    arrays = [run.array(i).copy() for i in range(len(run.where))]
    tangents = output_weights([a.shape for a in arrays], seed=2)
    got = _engine_jvp(run, tangents)
    plus = run.forward([a + EPS * t for a, t in zip(arrays, tangents)])
    minus = run.forward([a - EPS * t for a, t in zip(arrays, tangents)])
    torch_run = TorchRun(subject, values)
    for i, (g, p, m) in enumerate(zip(got, plus, minus)):
        expected = (p - m) / (2 * EPS)
        try:
            compare(f"output {i} (jvp)", g, expected, "finite differences")
        except TierFailure as failure:
            failure.explanation = torch_run.explain_jvp(i, expected, tangents)
            raise


def tier_rf(subject: Subject, values: dict[str, Any]) -> None:
    """RF: the engine's jvp equals ``torch.func.jvp`` of the built-in op (NotApplicable where torch has
    none)."""
    import torch

    overload = builtin(subject)
    run = EngineRun(subject, values)
    arrays = [run.array(i).copy() for i in range(len(run.where))]
    if not arrays:
        raise NotApplicable("no differentiable input")
    tangents = output_weights([a.shape for a in arrays], seed=3)
    got = _engine_jvp(run, tangents)

    def call(*tensors: Any) -> tuple[Any, ...]:
        named = substituted(values, run.where, list(tensors), to_torch)
        outputs = flat_tensors(differentiable_returns(subject, _call(overload, subject.schema, named)))
        return tuple(o for o in outputs if o.is_floating_point())
    try:
        _, expected = torch.func.jvp(call, tuple(to_torch(a) for a in arrays),
                                     tuple(torch.from_numpy(t) for t in tangents))
    except RuntimeError as error:      # torch's own forward AD fails (NotImplementedError too): no oracle
        raise NotApplicable(f"torch's aten::{subject.name} gives no forward-mode derivative here: "
                            f"{str(error).splitlines()[0].strip()}") from None
    if len(got) != len(expected):
        raise TierFailure("outputs", f"{len(got)} tangents, torch's built-in gives {len(expected)}")
    torch_run = TorchRun(subject, values)
    for i, (g, e) in enumerate(zip(got, expected)):
        try:
            compare(f"output {i} (jvp)", g, as_numpy(e), "torch's built-in", EXACT_ATOL, EXACT_RTOL)
        except TierFailure as failure:
            failure.explanation = torch_run.explain_jvp(i, as_numpy(e), tangents)
            raise


def tier_l(subject: Subject, values: dict[str, Any]) -> None:
    """L: ``transpile lint`` reports nothing within the formula's lines."""
    import inspect

    from transpiler.lint.runner import lint_paths

    fn = subject.declared.fn
    path = inspect.getsourcefile(fn)
    lines, start = inspect.getsourcelines(fn)
    findings = [d for d in lint_paths([path]) if start <= d.line < start + len(lines)]
    if findings:
        raise TierFailure("lint", "; ".join(d.format() for d in findings))


RUNNERS: dict[str, Callable[[Subject, dict[str, Any]], None]] = {
    "L": tier_l, "R1": tier_r1, "R2": tier_r2, "RT": tier_rt, "T1": tier_t1, "TT": tier_tt, "F1": tier_f1,
    "RF": tier_rf,
}
#: the tiers ``check_formula`` runs by default (the compiled ones need ``transpile prove --compiled``)
TIERS = tuple(in_column_order(RUNNERS))
#: tiers that compare a backward with finite differences: a failure there is explained by a term
FINITE_DIFFERENCE_TIERS = ("R1", "T1")
