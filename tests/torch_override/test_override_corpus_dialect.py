"""The override on formulas written as ``transpile import-yaml`` writes derivatives.yaml's entries.

Such a formula calls FunctionsManual helpers by their C++ names (declared with
``external``), some of them C++ overloads the shipped library writes as
``name__variant``, and ``c10::Scalar``'s methods on its Scalar arguments
(``other.toDouble()``). Through ``formulas.torch.override`` each runs as the C++
emitter and the reference engine run it; torch 2.13 is the oracle.
"""
from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch.autograd import gradcheck, gradgradcheck

from formulas.torch import override
from formulas.torch.backend import OracleTensor
from formulas.helper_overloads import HelperOverloads, fits
from formulas.torch.backend import HELPER_VALUES
from tests.torch_override.conftest import importable_package


@pytest.fixture
def dialect_package(tmp_path, monkeypatch):
    """A package ``yamlops`` in the imported corpus's dialect."""
    with importable_package(tmp_path, monkeypatch, "yamlops", {
        "externals.py": '''
        from transpiler.yaml_import.dialect import external, yaml_entry

        maybe_multiply = external("maybe_multiply")
        mul_tensor_backward = external("mul_tensor_backward")
        prod_backward = external("prod_backward")
        sum_backward = external("sum_backward")
        sinh_forward_AD = external("sinh_forward_AD")
    ''',
        "entries.py": '''
        from formulas import at, derivative

        from .externals import maybe_multiply, mul_tensor_backward, prod_backward, sum_backward, yaml_entry
        from .externals import sinh_forward_AD

        @derivative("mul.Scalar(Tensor self, Scalar other) -> Tensor")
        def mul_Scalar(self, other):
            result = at.mul(self, other)
            def backward(grad):
                return mul_tensor_backward(grad, other, self.scalar_type())
            return result, backward

        @derivative("prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")
        def prod_dim_int(self, dim, keepdim, dtype):
            result = at.prod(self, dim, keepdim, dtype=dtype)
            def backward(grad):
                return prod_backward(grad, self, result, dim, keepdim)
            return result, backward

        @derivative("xlogy.Scalar_Other(Tensor self, Scalar other) -> Tensor")
        def xlogy_Scalar_Other(self, other):
            result = at.xlogy(self, other)
            def backward(grad):
                return at.xlogy(grad, other) if other.toDouble() > 0. else at.masked_fill(
                    at.xlogy(grad, other), self == 0., 0.)
            return result, backward

        @derivative("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
        def add_Tensor(self, other, alpha):
            result = at.add(self, other, alpha=alpha)
            def backward(grad):
                return grad, maybe_multiply(grad, alpha.conj())
            return result, backward

        @derivative("sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")
        @yaml_entry(dispatch="Default")
        def sum_dim_IntList(self, dim, keepdim, dtype):
            result = at.sum(self, dim, keepdim, dtype=dtype)
            def backward(grad):
                return sum_backward(grad, self.sizes(), dim, keepdim)
            return result, backward

        @derivative("sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor")
        @yaml_entry(dispatch="AutogradNestedTensor")
        def sum_dim_IntList__AutogradNestedTensor(self, dim, keepdim, dtype):
            result = at.sum(self, dim, keepdim, dtype=dtype)
            def backward(grad):
                return at._nested_sum_backward(grad, self, dim, keepdim)
            return result, backward

        @derivative("max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
                    "int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)", output_differentiability=[True, False])
        def max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode):
            result0, result1 = at.max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
            def backward(grad):
                return at.max_pool2d_with_indices_backward(grad, self, kernel_size, stride, padding, dilation,
                                                           ceil_mode, result1)
            return (result0, result1), backward

        @derivative("div.Scalar_mode(Tensor self, Scalar other, *, str? rounding_mode) -> Tensor")
        def div_Scalar_mode(self, other, rounding_mode):
            result = at.div(self, other, rounding_mode=rounding_mode)
            def backward(grad):
                return grad / other if rounding_mode is None else at.zeros_like(grad)
            def jvp(self_t):
                return at.new_zeros(result, result.sizes()) if rounding_mode.has_value() else self_t / other
            return result, backward

        @derivative("sinh(Tensor self) -> Tensor")
        def sinh(self):
            result = at.sinh(self)
            def backward(grad):
                return grad * at.cosh(self)
            def jvp(self_t):
                return sinh_forward_AD(self_t, self)
            return result, backward
    ''',
    }) as package:
        yield package


def test_helper_overloads_and_scalar_methods_run_as_in_cpp(dialect_package):
    """``mul_tensor_backward(grad, other: Scalar, ...)`` runs ``mul_tensor_backward__scalar``,
    ``prod_backward`` with five arguments ``prod_backward__dim``; ``other.toDouble()`` and
    ``alpha.conj()`` are c10::Scalar's; an entry's Default dispatch section is its formula (not
    its nested tensors' one below it); ``int[2] padding=0`` reaches torch as ``[0, 0]``; gradients
    equal torch's to second order."""
    generator = torch.Generator().manual_seed(0)
    x = (torch.rand(3, 4, dtype=torch.float64, generator=generator) + 0.5).requires_grad_()
    y = torch.randn(3, 4, dtype=torch.float64, generator=generator).requires_grad_()
    calls = {"mul.Scalar": (lambda x: torch.ops.aten.mul.Scalar(x, 2.5), (x,)),
             "prod.dim_int": (lambda x: torch.ops.aten.prod.dim_int(x, 1), (x,)),
             "xlogy.Scalar_Other": (lambda x: torch.ops.aten.xlogy.Scalar_Other(x, 3.0), (x,)),
             "add.Tensor": (lambda x, y: torch.ops.aten.add.Tensor(x, y, alpha=-2), (x, y)),
             "sum.dim_IntList": (lambda x: torch.ops.aten.sum.dim_IntList(x, [1]), (x,)),
             "max_pool2d_with_indices": (lambda x: torch.ops.aten.max_pool2d_with_indices(x[None], [2, 2])[0], (x,))}
    for op, (call, inputs) in calls.items():
        theirs = torch.autograd.grad(call(*inputs).sum(), inputs)
        with override([op], package=dialect_package):
            assert call(*inputs).grad_fn.name().endswith("FormulaBackward"), op
            mine = torch.autograd.grad(call(*inputs).sum(), inputs)
            assert gradcheck(call, inputs) and gradgradcheck(call, inputs), op
        for a, b in zip(mine, theirs):
            torch.testing.assert_close(a, b)


def test_no_fitting_overload_names_each_one():
    def pick(grad: str, dim: int) -> str:
        return "dim"

    def pick__dims(grad: str, dims: list[int]) -> str:
        return "dims"

    overloads = HelperOverloads("pick", [pick, pick__dims], HELPER_VALUES)
    assert overloads("g", 1) == "dim" and overloads("g", [0, 1]) == "dims" and overloads("g", dims=[0]) == "dims"
    with pytest.raises(TypeError, match=r"no overload of helper 'pick' accepts \(str, float\): pick\(.*pick__dims"):
        overloads("g", 1.5)


@pytest.mark.parametrize(("annotation", "value", "expected"), [
    ("Tensor | None", None, True), ("Tensor | None", 1.0, False), ("list[int]", (1, 2), True),
    ("list[int] | None", [True], False), ("int", True, False), ("Scalar", 2, True), ("float", 2, True),
    ("ScalarType", torch.float64, True), ("list[Tensor]", [1], False),
])
def test_annotations_fit_the_values_torch_hands_formulas(annotation, value, expected):
    assert fits(annotation, value, HELPER_VALUES) is expected
    assert fits("Tensor", OracleTensor(torch.zeros(1)), HELPER_VALUES)


def test_a_jvp_calling_a_cpp_only_function_is_left_out(dialect_package):
    """A jvp calling a C++ function with no ``@helper`` of its name: forward mode raises torch's
    error saying so (as the C++ emitter leaves it out); the backward runs."""
    x = torch.rand(3, dtype=torch.float64).requires_grad_()
    with override(["sinh"], package=dialect_package):
        assert gradcheck(torch.sinh, (x,)) and gradgradcheck(torch.sinh, (x,))
        with fwAD.dual_level(), pytest.raises(NotImplementedError, match="sinh_forward_AD, C\\+\\+ only"):
            torch.sinh(fwAD.make_dual(x.detach(), torch.ones(3, dtype=torch.float64)))


def test_a_jvp_calls_std_optionals_methods_on_an_optional_argument(dialect_package):
    """``rounding_mode.has_value()`` in a jvp is ``rounding_mode is not None``: tangents equal torch's."""
    x, t = torch.rand(3, dtype=torch.float64) + 1, torch.ones(3, dtype=torch.float64)
    for mode in (None, "floor"):
        theirs = torch.func.jvp(lambda x: torch.div(x, 2.0, rounding_mode=mode), (x,), (t,))
        with override(["div.Scalar_mode"], package=dialect_package):
            mine = torch.func.jvp(lambda x: torch.ops.aten.div.Scalar_mode(x, 2.0, rounding_mode=mode), (x,), (t,))
        torch.testing.assert_close(mine, theirs)
