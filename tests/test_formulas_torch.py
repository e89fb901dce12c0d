"""The formula library proven with torch as the oracle, independent of the engine and the C++.

For every formula and every case of ``tests/op_cases.py``, on float64 torch
tensors (``formulas/torch/backend.py`` runs ``at.<op>`` with torch):

* the formula's forward equals the built-in op, bit for bit;
* its backward closure's gradients equal ``torch.autograd.grad`` of the
  built-in op, and it computes only the gradients ``needs_input_grad`` asks for;
* second order: the closure run with ``create_graph=True`` on inputs that
  require grad, differentiated again along a random projection, equals the
  built-in op's double backward;
* the formula as the package's ``torch.autograd.Function`` (``formulas.torch.TorchFormula``,
  which the override and custom ops run too) passes ``gradcheck`` and ``gradgradcheck``.
  The Function saves the captured inputs and outputs with ``save_for_backward`` and
  rebuilds the closure on the saved ones, so double backward differentiates the
  formula through its own node; a captured tensor that is neither an input nor
  an output is reported (the hazard the linter's DB100 is about). Gradients of
  unused outputs reach the closure as ``None``, as the contract says.

Besides: every declared schema is verbatim torch's, every formula has cases,
the catalogue is deterministic and keeps away from kinks and domain edges,
half_to_float softmax gradients come back in the input dtype (meta tensors),
and the torch backend resolves ``at.<op>`` among the declared overloads only.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pytest
import torch
import torchgen

import formulas
from formulas import DeclaredFormula, at, use_backend
from op_cases import ALL_CASES, OpCase, build_cases, ops, torch_args, torch_op
from formulas.torch import CapturedIntermediate, TorchFormula
from formulas.torch.backend import OracleTensor, OverloadError, TorchBackend, unwrap, wrap
from transpiler.schema import FunctionSchema, ListType, is_index_list, parse_schema

LIBRARY = formulas.load_library()
BACKEND = TorchBackend.for_library()
EXACT = {"rtol": 0.0, "atol": 0.0}


@dataclass(frozen=True)
class FormulaCall:
    """One formula applied to one case's arguments (torch values)."""

    formula: DeclaredFormula
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    differentiated: tuple[int, ...]     # positions of args whose tensors are differentiated

    @cached_property
    def schema(self) -> FunctionSchema:
        return parse_schema(self.formula.schema)

    @property
    def tensor_positions(self) -> tuple[int, ...]:
        """Positions in ``args`` of the schema's Tensor / Tensor? / Tensor[] arguments."""
        names = [arg.name for arg in self.schema.positional]
        return tuple(names.index(arg.name) for arg in self.schema.tensor_inputs)

    @property
    def list_output(self) -> bool:
        """Whether the schema returns one ``Tensor[]`` (split, unbind): every part is an output."""
        return len(self.schema.returns) == 1 and isinstance(self.schema.returns[0].type, ListType)

    def differentiable_outputs(self, outputs: Sequence[Any]) -> list[Any]:
        """The entries of ``outputs`` (one per output, or per part of a ``Tensor[]`` output)
        that belong to differentiable outputs."""
        if self.list_output:
            return list(outputs)
        flags = self.formula.output_differentiability or (True,) * len(self.schema.returns)
        return [out for out, diff in zip(outputs, flags) if diff]

    def needs_input_grad(self, differentiated: Sequence[int] | None = None) -> tuple[bool, ...]:
        """One flag per tensor argument: is it among ``differentiated`` (default: the case's)?"""
        chosen = self.differentiated if differentiated is None else differentiated
        return tuple(position in chosen for position in self.tensor_positions)

    def flat_tensors(self) -> list[torch.Tensor]:
        """Every tensor of the tensor arguments, lists flattened, schema order."""
        flat: list[torch.Tensor] = []
        for position in self.tensor_positions:
            value = self.args[position]
            flat += value if isinstance(value, list) else [value]
        return flat

    def with_flat_tensors(self, flat: Sequence[torch.Tensor]) -> list[Any]:
        """``args`` with the tensors of :meth:`flat_tensors` replaced by ``flat``."""
        args = list(self.args)
        remaining = iter(flat)
        for position in self.tensor_positions:
            value = args[position]
            args[position] = [next(remaining) for _ in value] if isinstance(value, list) else next(remaining)
        return args

    def index_tensors(self) -> list[torch.Tensor]:
        """The tensors of the ``Tensor?[]`` (index list) arguments: inputs without a gradient slot."""
        names = [arg.name for arg in self.schema.positional]
        return [t for arg in self.schema.arguments if is_index_list(arg.type)
                for t in self.args[names.index(arg.name)] if t is not None]

    def differentiated_indices(self) -> list[int]:
        """Indices into :meth:`flat_tensors` of the tensors the case differentiates."""
        indices: list[int] = []
        offset = 0
        for position in self.tensor_positions:
            value = self.args[position]
            width = len(value) if isinstance(value, list) else 1
            if position in self.differentiated:
                indices += range(offset, offset + width)
            offset += width
        return indices

    def differentiated_tensors(self) -> list[torch.Tensor]:
        flat = self.flat_tensors()
        return [flat[i] for i in self.differentiated_indices()]

    def differentiated_gradients(self, per_argument: Sequence[Any]) -> list[torch.Tensor | None]:
        """The gradients of :meth:`differentiated_tensors` among a backward's results."""
        flat = self.flat_gradients(per_argument)
        return [flat[i] for i in self.differentiated_indices()]

    def flat_gradients(self, per_argument: Sequence[Any]) -> list[torch.Tensor | None]:
        """Gradients per tensor argument (lists for Tensor[]) aligned with :meth:`flat_tensors`."""
        flat: list[torch.Tensor | None] = []
        for position, grad in zip(self.tensor_positions, per_argument):
            value = self.args[position]
            if isinstance(value, list):
                flat += [None] * len(value) if grad is None else list(grad)
            else:
                flat.append(grad)
        return flat


def run_forward(call: FormulaCall, args: Sequence[Any] | None = None) -> tuple[tuple[torch.Tensor, ...], Callable]:
    """The formula's forward on torch values: its outputs (always a tuple) and backward closure."""
    args = call.args if args is None else args
    with use_backend(BACKEND):
        outputs, backward = call.formula.fn(*wrap(list(args)), **call.kwargs)
    outputs = tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)
    return tuple(unwrap(o) for o in outputs), backward


def run_backward(call: FormulaCall, backward: Callable, grads: Sequence[torch.Tensor],
                 needs_input_grad: tuple[bool, ...]) -> tuple[Any, ...]:
    """The closure's gradients, one per tensor argument (``None``: zero)."""
    declares_mask = "needs_input_grad" in inspect.signature(backward).parameters
    mask = {"needs_input_grad": list(needs_input_grad)} if declares_mask else {}
    with use_backend(BACKEND):
        if call.list_output:    # one argument: the list of the parts' gradients
            returned = backward(wrap(list(grads)), **mask)
        else:
            returned = backward(*wrap(list(grads)), **mask)
    count = len(call.tensor_positions)
    if count == 1:
        assert not isinstance(returned, tuple), f"backward of {call.formula.op_name} must return one gradient, not a tuple"
        returned = (returned,)
    assert isinstance(returned, tuple) and len(returned) == count, (
        f"backward of {call.formula.op_name} must return {count} gradient(s), returned {returned!r}")
    return tuple(unwrap(g) for g in returned)


def differentiable(call: FormulaCall, outputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    return call.differentiable_outputs(outputs)


def random_like(tensors: Sequence[torch.Tensor], seed: int, requires_grad: bool = False) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(t.shape, dtype=t.dtype, generator=generator).requires_grad_(requires_grad)
            for t in tensors]


def as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def formula_call(case: OpCase, requires_grad: bool = True) -> FormulaCall:
    args, kwargs = torch_args(case, requires_grad)
    return FormulaCall(LIBRARY[case.op], tuple(args), kwargs, case.differentiable)


def assert_gradients_equal(actual: Sequence[torch.Tensor | None], expected: Sequence[torch.Tensor | None],
                           like: Sequence[torch.Tensor]) -> None:
    """Gradients equal, ``None`` standing for zeros shaped like the input."""
    for got, want, tensor in zip(actual, expected, like, strict=True):
        got = torch.zeros_like(tensor) if got is None else got
        want = torch.zeros_like(tensor) if want is None else want
        torch.testing.assert_close(got, want)


def case_ids(case: OpCase) -> str:
    return case.name


# ---------------------------------------------------------------------------
# the library declares torch's operators and the catalogue covers it

def test_every_formula_has_cases_and_every_case_a_formula():
    assert set(ops()) == set(LIBRARY)


def test_every_declared_schema_is_torchs_own():
    native_functions = Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"
    torch_schemas = {line.removeprefix("- func:").strip()
                     for line in native_functions.read_text().splitlines() if line.startswith("- func:")}
    declared = [d.schema for d in LIBRARY.values()] + list(formulas.NONDIFFERENTIABLE.values())
    assert [schema for schema in declared if schema not in torch_schemas] == []


def test_case_names_are_unique_and_the_catalogue_deterministic():
    assert len({case.name for case in ALL_CASES}) == len(ALL_CASES)
    def identical(a: Any, b: Any) -> bool:
        if isinstance(a, np.ndarray):
            return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
        if isinstance(a, (list, tuple)):
            return type(a) is type(b) and len(a) == len(b) and all(map(identical, a, b))
        return type(a) is type(b) and a == b

    again = build_cases()
    assert [c.name for c in again] == [c.name for c in ALL_CASES]
    for first, second in zip(ALL_CASES, again):
        assert identical(first.args, second.args) and first.kwargs == second.kwargs, first.name


def test_inputs_keep_away_from_kinks_ties_and_domain_edges():
    def smallest_magnitude(array: np.ndarray) -> float:
        return float(np.abs(array).min()) if array.size else np.inf

    for case in ALL_CASES:
        if case.op in ("log", "sqrt") or (case.op == "pow.Tensor_Scalar" and case.args[1] != int(case.args[1])):
            assert smallest_magnitude(case.args[0]) >= 0.5 and (case.args[0] > 0).all(), case.name
        if case.op == "relu":
            assert smallest_magnitude(case.args[0]) >= 0.3, case.name
        if case.op == "div.Tensor":
            assert smallest_magnitude(case.args[1]) >= 0.3, case.name
        if case.op == "max.dim" and case.args[0].size:
            ordered = np.sort(case.args[0].ravel())
            assert (np.diff(ordered) >= 0.2).all(), case.name
        if case.op in ("hardsigmoid", "hardsigmoid_backward"):     # kinks at -3 and 3
            assert smallest_magnitude(np.abs(case.args[-1]) - 3.0) >= 0.15, case.name


# ---------------------------------------------------------------------------
# forward and first order against torch

@pytest.mark.parametrize("case", ALL_CASES, ids=case_ids)
def test_forward_and_gradients_match_builtin(case: OpCase):
    call = formula_call(case)
    expected = as_tuple(torch_op(case.op)(*call.args, **call.kwargs))
    with torch.no_grad():
        outputs, backward = run_forward(call)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        torch.testing.assert_close(got, want, **EXACT)

    inputs = call.differentiated_tensors()
    grads = random_like(differentiable(call, expected), seed=0)
    want = torch.autograd.grad(differentiable(call, expected), inputs, grads, allow_unused=True)
    with torch.no_grad():
        per_argument = run_backward(call, backward, grads, call.needs_input_grad())
    got = call.differentiated_gradients(per_argument)
    assert_gradients_equal(got, want, inputs)
    for position, grad in zip(call.tensor_positions, per_argument):
        if position not in case.differentiable:
            assert grad is None, f"gradient for non-differentiable argument {position}"


MASKED_CASES = [case for case in ALL_CASES if len(case.differentiable) > 1
                and "needs_input_grad" in inspect.signature(run_forward(formula_call(case, False))[1]).parameters]


@pytest.mark.parametrize("case", MASKED_CASES, ids=case_ids)
def test_backward_computes_only_the_gradients_asked_for(case: OpCase):
    call = formula_call(case)
    expected = as_tuple(torch_op(case.op)(*call.args, **call.kwargs))
    grads = random_like(differentiable(call, expected), seed=1)
    with torch.no_grad():
        _, backward = run_forward(call)
    for asked in case.differentiable:
        with torch.no_grad():
            per_argument = run_backward(call, backward, grads, call.needs_input_grad([asked]))
        for position, grad in zip(call.tensor_positions, per_argument):
            if position == asked:
                want, = torch.autograd.grad(differentiable(call, expected), call.args[position], grads,
                                            retain_graph=True, allow_unused=True)
                assert_gradients_equal([grad], [want], [call.args[position]])
            else:
                assert grad is None, f"argument {position} was not asked for but got a gradient"


@pytest.mark.parametrize("op", ["_softmax", "_log_softmax"])
def test_half_to_float_gradient_comes_back_in_the_input_dtype(op: str):
    # CPU kernels refuse half_to_float; meta tensors still prove dtypes and shapes
    x = torch.empty(3, 4, device="meta", dtype=torch.float16, requires_grad=True)
    call = FormulaCall(LIBRARY[op], (x, 1, True), {}, (0,))
    expected = torch_op(op)(x, 1, True)
    want, = torch.autograd.grad(expected, x, torch.empty_like(expected))
    with torch.no_grad():
        (output,), backward = run_forward(call)
        grad, = run_backward(call, backward, [torch.empty_like(expected)], (True,))
    assert (output.dtype, output.shape) == (expected.dtype, expected.shape) == (torch.float32, x.shape)
    assert (grad.dtype, grad.shape, grad.device) == (want.dtype, want.shape, want.device) == (torch.float16, x.shape, x.device)


def _several_differentiable_outputs(call: FormulaCall) -> bool:
    return call.list_output or sum(call.formula.output_differentiability or (True,) * len(call.schema.returns)) > 1


MULTI_OUTPUT_CASES = [case for case in ALL_CASES if _several_differentiable_outputs(formula_call(case, False))]


@pytest.mark.parametrize("case", MULTI_OUTPUT_CASES, ids=case_ids)
def test_backward_accepts_a_missing_output_gradient(case: OpCase):
    call = formula_call(case)
    expected = differentiable(call, as_tuple(torch_op(case.op)(*call.args, **call.kwargs)))
    inputs = call.differentiated_tensors()
    with torch.no_grad():
        _, backward = run_forward(call)
    for used in range(len(expected)):
        grad = random_like([expected[used]], seed=4)[0]
        want = torch.autograd.grad(expected[used], inputs, grad, retain_graph=True, allow_unused=True)
        grads = [grad if i == used else None for i in range(len(expected))]
        with torch.no_grad():
            got = call.differentiated_gradients(run_backward(call, backward, grads, call.needs_input_grad()))
        assert_gradients_equal(got, want, inputs)


# ---------------------------------------------------------------------------
# second order against torch

def projected_second_order(first: Sequence[torch.Tensor | None], wrt: Sequence[torch.Tensor],
                           seed: int) -> list[torch.Tensor | None]:
    """Gradient of <first, v> (v random, fixed by ``seed``) with respect to ``wrt``."""
    projections = random_like([torch.empty(0) if g is None else g for g in first], seed)
    terms = [(g * v).sum() for g, v in zip(first, projections) if g is not None and g.requires_grad]
    if not terms:
        return [None] * len(wrt)
    return list(torch.autograd.grad(torch.stack(terms).sum(), wrt, allow_unused=True))


@pytest.mark.parametrize("case", ALL_CASES, ids=case_ids)
def test_second_order_matches_builtin(case: OpCase):
    call = formula_call(case)
    inputs = call.differentiated_tensors()
    expected = as_tuple(torch_op(case.op)(*call.args, **call.kwargs))
    grads = random_like(differentiable(call, expected), seed=2, requires_grad=True)
    want_first = torch.autograd.grad(differentiable(call, expected), inputs, grads,
                                     create_graph=True, allow_unused=True)
    want = projected_second_order(want_first, inputs + grads, seed=3)

    outputs, backward = run_forward(call)      # grad mode on: outputs stay connected to the inputs
    per_argument = run_backward(call, backward, grads, call.needs_input_grad())
    got_first = call.differentiated_gradients(per_argument)
    got = projected_second_order(got_first, inputs + grads, seed=3)
    assert_gradients_equal(got, want, inputs + grads)


# ---------------------------------------------------------------------------
# gradcheck and gradgradcheck through a torch.autograd.Function calling the closure

def apply_formula(call: FormulaCall) -> Callable[..., tuple[torch.Tensor, ...]]:
    """The formula as the package's ``torch.autograd.Function`` (``formulas.torch.TorchFormula``),
    returning its floating outputs (gradcheck cannot take finite differences of a bool output
    such as native_dropout's mask)."""
    formula = TorchFormula(call.formula, BACKEND)

    def run(*flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outputs = formula.call(formula.bind(call.with_flat_tensors(flat), call.kwargs))
        return tuple(o for o in formula.flat_outputs(outputs) if o.is_floating_point())
    return run


@pytest.mark.parametrize("case", ALL_CASES, ids=case_ids)
def test_gradcheck_and_gradgradcheck_through_autograd_function(case: OpCase):
    call = formula_call(case)
    flat = call.flat_tensors()
    assert torch.autograd.gradcheck(apply_formula(call), flat)
    assert torch.autograd.gradgradcheck(apply_formula(call), flat)


def test_the_function_harness_reports_a_captured_intermediate():
    def sin_capturing_cos(self):
        cos_self = at.cos(self)
        result = at.sin(self)
        def backward(grad):
            return grad * cos_self
        return result, backward

    bad = DeclaredFormula("sin(Tensor self) -> Tensor", sin_capturing_cos, None)
    x = torch.rand(3, dtype=torch.float64, requires_grad=True)
    call = FormulaCall(bad, (x,), {}, (0,))
    with pytest.raises(CapturedIntermediate, match="`cos_self`"):
        torch.autograd.gradcheck(apply_formula(call), [x])


# ---------------------------------------------------------------------------
# the torch backend itself

def test_backend_resolves_among_declared_overloads():
    x = OracleTensor(torch.arange(6, dtype=torch.float64).reshape(2, 3))
    assert BACKEND.resolve("mul", (x, x), {}).name.overload == "Tensor"
    assert BACKEND.resolve("mul", (x, 2.5), {}).name.overload == "Scalar"
    assert BACKEND.resolve("sum", (x,), {"dtype": None}).name.overload == ""
    assert BACKEND.resolve("sum", (x, [1], True), {}).name.overload == "dim_IntList"
    with use_backend(BACKEND):
        total = at.sum(x, [1], True)
    assert isinstance(total, OracleTensor) and total.sizes() == [2, 1]
    torch.testing.assert_close(total.tensor, torch.tensor([[3.0], [12.0]], dtype=torch.float64))


def test_backend_rejects_undeclared_operators_and_mismatched_arguments():
    x = OracleTensor(torch.ones(2, dtype=torch.float64))
    with pytest.raises(OverloadError, match="declares no operator `bucketize`"):
        BACKEND.call("bucketize", (x,), {})
    with pytest.raises(OverloadError, match="matches no declared overload"):
        BACKEND.call("mul", (x, "two"), {})
    with pytest.raises(OverloadError, match="matches no declared overload"):
        BACKEND.call("sum", (x,), {"keepdim": True})


def test_oracle_tensor_metadata_and_operators():
    t = torch.zeros(2, 0, 3, dtype=torch.float64)
    x = OracleTensor(t)
    assert (x.sizes(), x.size(-1), x.dim(), x.numel(), x.scalar_type()) == ([2, 0, 3], 3, 3, 0, torch.float64)
    assert x.options().dtype == torch.float64 and x.options().device == t.device
    assert x.is_floating_point() and not x.is_complex() and OracleTensor(t.to(torch.complex128)).is_complex()
    y = OracleTensor(torch.tensor([1.0, -2.0], dtype=torch.float64))
    with use_backend(BACKEND):
        combined = (y * y - y) / y + (-y)
        positive = y > 0
    torch.testing.assert_close(combined.tensor, torch.tensor([-1.0, -1.0], dtype=torch.float64))
    assert positive.tensor.tolist() == [True, False]


# ---------------------------------------------------------------------------
# the per-call fast paths against the general ones they stand for

def test_fast_paths_agree_with_the_general_ones():
    from formulas.torch.function import FlatArguments, plan_closure

    x, y = torch.ones(2), torch.zeros(3)
    for values in ([x, y, 2.0], [x, None, [1, 2]], [3, y, False]):     # Tensor, Tensor?, Scalar slots
        single = FlatArguments.of_single(values, (0, 1))
        general = FlatArguments.of(values)
        assert (single.template, single.tensors) == (general.template, general.tensors)
        assert single.values(general.tensors) == values == general.values(general.tensors)
    sizes = [2, 3]
    for value in (sizes, (1, None, True)):      # a list of sizes, copied without a call per element
        assert wrap(value) == unwrap(value) == value
    assert wrap(sizes) is not sizes and unwrap(sizes) is not sizes
    with use_backend(BACKEND):      # resolved with keywords, then with a list: the key of each its own
        summed = at.sum(OracleTensor(torch.ones(2, 3)), [1], False, dtype=torch.float64)
        listed = at.sum(OracleTensor(torch.ones(2, 3)), [1], False)
    assert summed.scalar_type() == torch.float64 and listed.scalar_type() == torch.float32
    # a closure's captured list of sizes is kept as it is (as a Python closure shares it); one
    # holding a tensor is planned and filled again, its tensor the saved one
    inputs = OracleTensor(torch.ones(2))

    def forward():
        pair = [inputs, 1]
        def backward(grad):
            return sizes, pair
        return backward
    backward = forward()
    plan, saved = plan_closure(backward, (inputs.tensor,), "op")
    kept, filled = plan.rebuild([torch.full((2,), 5.0)])(None)
    assert saved == (0,) and kept is sizes and filled[1] == 1 and filled[0].tensor.tolist() == [5.0, 5.0]


@pytest.mark.parametrize("op, make_args", [
    ("mul.Tensor", lambda t: (t(3, 4), t(4))),                            # every tensor slot filled
    ("binary_cross_entropy", lambda t: (t(5).sigmoid(), t(5).sigmoid().detach(), None, 1)),  # an absent Tensor?
    ("cat", lambda t: ([t(2, 3), t(1, 3)], 0)),                          # a list of tensors
], ids=["slots", "absent", "list"])
def test_lean_call_agrees_with_the_planned_one(op, make_args):
    """``TorchFormula.call`` outside transforms and forward mode (``PlainFormulaFunction``, just
    an optimization) against ``call_planned`` (``FormulaFunction``): values, gradients and the
    gradients of gradients (``create_graph=True``) equal."""
    formula = TorchFormula(LIBRARY[op], BACKEND)
    generator = torch.Generator().manual_seed(0)

    def tensor(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, dtype=torch.float64).requires_grad_()

    args = make_args(tensor)
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    leaves += [t for a in args if isinstance(a, list) for t in a]
    results = []
    for call in (formula.call, formula.call_planned):
        output = call(formula.bind(args, {}))
        assert type(output.grad_fn).__name__.endswith("FormulaBackward")
        grads = torch.autograd.grad(output.square().sum(), leaves, create_graph=True)
        second = torch.autograd.grad(sum(g.square().sum() for g in grads), leaves, allow_unused=True)
        results.append((output, grads, second))
    (lean, lean_grads, lean_second), (planned, planned_grads, planned_second) = results
    torch.testing.assert_close(lean, planned)
    torch.testing.assert_close(lean_grads, planned_grads)
    torch.testing.assert_close(lean_second, planned_second)
