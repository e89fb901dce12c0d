"""``formulas.torch.custom_ops``: formulas as ``torch.library`` custom operators, no build.

``torch.library.opcheck`` (schema, autograd registration, fake tensors, AOT
dispatch with dynamic shapes) passes on a sample of the shipped ops (the first
op case of every op in :data:`OPCHECK_SAMPLE`) and on a user package; gradcheck
and gradgradcheck pass on the first case of every registered op, whose outputs
and gradients equal torch's built-in op; ``torch.compile(fullgraph=True)`` runs
a function of them.
"""
from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import formulas
import formulas.torch.function
from formulas.torch import NoShapeRule, TorchFormula, custom_ops
from tests.op_cases import ALL_CASES, OpCase, differentiable_view, first_and_second_order, torch_args, torch_op
from tests.torch_override.conftest import importable_package

SHIPPED = custom_ops("formulas", namespace="formulas_py")


def first_cases() -> list[OpCase]:
    seen: dict[str, OpCase] = {}
    for case in ALL_CASES:
        if case.op in SHIPPED.ops:
            seen.setdefault(case.op, case)
    return list(seen.values())


FIRST_CASES = first_cases()
def has_jvp(op: str) -> bool:
    return TorchFormula(formulas.load_library()[op], None).has_jvp


OPCHECK_SAMPLE = ("sin", "mul.Tensor", "div.Tensor", "sum.dim_IntList", "max.dim", "cat", "mm", "where.self",
                  "_softmax", "index.Tensor", "mean.dim", "pow.Tensor_Scalar", "layer_norm", "stack")


def test_every_formula_is_registered_or_refused_with_a_reason():
    import formulas

    assert sorted([*SHIPPED.ops, *SHIPPED.refused]) == sorted(formulas.load_library())
    assert all("alias" in reason or "keyword-only" in reason for reason in SHIPPED.refused.values())
    assert {op for op in SHIPPED.ops if not any(c.op == op for c in FIRST_CASES)} == set()


@pytest.mark.parametrize("case", [c for c in FIRST_CASES if c.op in OPCHECK_SAMPLE], ids=lambda c: c.name)
def test_opcheck(case: OpCase):
    args, kwargs = torch_args(case)
    result = torch.library.opcheck(SHIPPED.ops[case.op], args, kwargs)
    assert set(result.values()) == {"SUCCESS"}, result


@pytest.mark.parametrize("case", FIRST_CASES, ids=lambda c: c.name)
def test_gradcheck_gradgradcheck_and_equal_to_builtin(case: OpCase):
    call, leaves = differentiable_view(case, SHIPPED.ops[case.op])
    assert torch.autograd.gradcheck(call, leaves)
    assert torch.autograd.gradgradcheck(call, leaves)
    ours = first_and_second_order(SHIPPED.ops[case.op], case)
    theirs = first_and_second_order(torch_op(case.op), case)
    for order in range(3):
        assert len(ours[order]) == len(theirs[order])
        for mine, builtin in zip(ours[order], theirs[order]):
            torch.testing.assert_close(mine, builtin)


@pytest.mark.parametrize("case", [c for c in FIRST_CASES if c.op in OPCHECK_SAMPLE and has_jvp(c.op)], ids=lambda c: c.name)
def test_forward_mode_runs_the_formulas_jvp_and_equals_torchs(case: OpCase):
    """Forward AD (gradcheck's check_forward_ad) and ``torch.func.jvp`` through the custom op
    equal torch's own operator's."""
    call, leaves = differentiable_view(case, SHIPPED.ops[case.op])
    assert torch.autograd.gradcheck(call, leaves, check_forward_ad=True)
    theirs, _ = differentiable_view(case, torch_op(case.op))
    primals = [leaf.detach() for leaf in leaves]
    generator = torch.Generator().manual_seed(0)
    tangents = [torch.randn(p.shape, dtype=p.dtype, generator=generator) for p in primals]
    got = torch.func.jvp(call, tuple(primals), tuple(tangents))
    want = torch.func.jvp(theirs, tuple(primals), tuple(tangents))
    torch.testing.assert_close(got, want)


def test_the_formulas_forward_runs_once_per_call(monkeypatch):
    """The kernel the autograd forward redispatches to runs the formula's forward and hands the
    Function its closure: once per call, not again in setup_context."""
    runs = []
    original = formulas.torch.function.TorchFormula.forward
    def counted(self, values, want_jvp=False):
        runs.append(self.op_name)
        return original(self, values, want_jvp)
    monkeypatch.setattr(formulas.torch.function.TorchFormula, "forward", counted)
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    y = SHIPPED.ops["mul.Tensor"](x, x)
    assert runs == ["mul.Tensor"]
    torch.autograd.grad(y.sum(), x)
    assert runs == ["mul.Tensor"]


class AnswersSinh(torch.utils._python_dispatch.TorchDispatchMode):
    """A dispatch mode that answers the custom sinh itself, so its kernel never runs."""

    def __init__(self, op):
        super().__init__()
        self.op = op

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is self.op:
            return torch.sinh(args[0])
        return func(*args, **(kwargs or {}))


def test_without_the_kernel_the_function_plans_the_closure_itself(user_package):
    """The general path: when the redispatch does not reach the kernel (a dispatch mode answered
    it), the Function runs the formula's forward to plan the closure; gradients are the same."""
    custom_ops(user_package)
    sinh = torch.ops.myops_custom.sinh.default
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    with AnswersSinh(sinh):
        y = sinh(x)
    assert y.grad_fn.name() == "SinhFormulaBackward"
    (grad,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    (second,) = torch.autograd.grad(grad.sum(), x)
    torch.testing.assert_close(grad, torch.cosh(x.detach()))
    torch.testing.assert_close(second, torch.sinh(x.detach()))


def test_torch_compile_fullgraph_runs_them():
    ops = SHIPPED.ops
    def loss(a, b):
        return ops["sum.dim_IntList"](ops["mul.Tensor"](ops["sin"](a), b), [1], False).sum()

    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    got = torch.autograd.grad(compiled(a, b), (a, b))
    want = torch.autograd.grad((torch.sin(a) * b).sum(), (a, b))
    for mine, expected in zip(got, want):
        torch.testing.assert_close(mine, expected)


@pytest.fixture
def user_package(tmp_path, monkeypatch):
    with importable_package(tmp_path, monkeypatch, "myops_custom", {"ops.py": '''
        from formulas import at, derivative

        @derivative("sinh(Tensor self) -> Tensor")
        def sinh(self):
            result = at.sinh(self)
            def backward(grad):
                # d/dx sinh(x) = cosh(x) = (e^x + e^-x) / 2
                return grad * (at.exp(self) + at.exp(-self)) / 2
            return result, backward

        @derivative("nonzero(Tensor self) -> Tensor", output_differentiability=[False])
        def nonzero(self):
            result = at.nonzero(self)
            def backward(grad):
                return None
            return result, backward
    '''}) as name:
        yield name


def test_a_user_package_passes_opcheck_and_refuses_a_value_dependent_shape(user_package):
    registered = custom_ops(user_package)
    assert registered.namespace == "myops_custom"
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    sinh = torch.ops.myops_custom.sinh.default
    assert set(torch.library.opcheck(sinh, (x,)).values()) == {"SUCCESS"}
    assert torch.autograd.gradgradcheck(sinh, (x,))
    assert sinh(x).grad_fn.name() == "SinhFormulaBackward"
    nonzero = torch.ops.myops_custom.nonzero.default
    # with a shape environment (opcheck, torch.compile) the value-dependent size is a symbol
    assert set(torch.library.opcheck(nonzero, (torch.tensor([0.0, 1.0]),)).values()) == {"SUCCESS"}
    with FakeTensorMode() as mode, pytest.raises(NoShapeRule, match="nonzero: its output shape depends on tensor values"):
        nonzero(mode.from_tensor(torch.tensor([0.0, 1.0])))


def test_vmap_over_an_op_with_a_list_of_tensors_runs_it_per_example():
    """torch generates no vmap fallback for an op with a ``Tensor?[]`` or ``Tensor[]`` argument
    (``index.Tensor``, ``cat``): their custom ops carry a rule that runs the op per example, so
    ``torch.vmap`` and what is built on it (``jacrev``) give torch's values and gradients."""
    index, cat = SHIPPED.ops["index.Tensor"], SHIPPED.ops["cat"]
    x = torch.linspace(0.0, 1.0, 15, dtype=torch.float64).reshape(3, 5).requires_grad_()
    per_row = torch.tensor([[0, 1], [2, 3], [4, 4]])
    ours = torch.vmap(lambda t, i: index(t, [i]))(x, per_row)
    theirs = torch.vmap(lambda t, i: t[i])(x, per_row)
    assert torch.equal(ours, theirs)
    weights = torch.arange(6.0, dtype=torch.float64).reshape(3, 2)
    assert torch.equal(torch.autograd.grad((ours * weights).sum(), x)[0],
                       torch.autograd.grad((theirs * weights).sum(), x)[0])
    shared = torch.tensor([0, 2, 4])
    assert torch.equal(torch.func.jacrev(lambda t: index(t, [shared]))(x.detach()[0]),
                       torch.func.jacrev(lambda t: t[shared])(x.detach()[0]))
    tail = torch.ones(3, 2, dtype=torch.float64)
    assert torch.equal(torch.vmap(lambda a, b: cat([a, b], 0))(x, tail), torch.vmap(lambda a, b: torch.cat([a, b]))(x, tail))
