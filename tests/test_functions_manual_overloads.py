"""The FunctionsManual signatures of ``formulas/functions_manual.py`` (``name__variant``) against
torch's own gradients, with torch as the operator backend (complex Scalars and dtypes, rounding
modes, negative dims). Through the C++ path they are proven by the imported entries that call them
(the corpus proof: mul.Scalar, div.Scalar, div.Scalar_mode, div.Tensor_mode, squeeze.dim, squeeze.dims)."""
from __future__ import annotations

import pytest

from formulas import use_backend
from formulas.functions_manual import (div_tensor_other_backward__mode, div_tensor_self_backward__mode,
                                       div_tensor_self_backward__scalar, div_tensor_self_backward__scalar_mode,
                                       mul_tensor_backward__scalar, unsqueeze_to__dim, unsqueeze_to__dims)
from tests.torch_backend import TorchBackend, unwrap, wrap

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def backend() -> TorchBackend:
    return TorchBackend.for_library()


def _call(backend: TorchBackend, helper, *args):
    with use_backend(backend):
        return unwrap(helper(*wrap(args)))


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("other", [2.5, -3, 0.5 - 1.5j])
@pytest.mark.parametrize("op", ["mul", "div"])
def test_product_and_quotient_by_a_scalar_equal_torch(backend, op, dtype, other):
    """``self * other`` and ``self / other`` for a Scalar ``other``: torch's gradient for ``self``,
    conjugated for a complex Scalar, and real for a real ``self`` (its imaginary part dropped)."""
    generator = torch.Generator().manual_seed(5)
    self = torch.randn(2, 3, dtype=dtype, generator=generator, requires_grad=True)
    result = torch.mul(self, other) if op == "mul" else torch.div(self, other)
    grad = torch.randn(result.shape, dtype=result.dtype, generator=generator)
    expected, = torch.autograd.grad(result, [self], grad)
    helper = mul_tensor_backward__scalar if op == "mul" else div_tensor_self_backward__scalar
    got = _call(backend, helper, grad, other, dtype)
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("rounding_mode", [None, "trunc", "floor"])
def test_division_with_a_rounding_mode_equals_torch(backend, rounding_mode):
    """A rounded quotient is a step function of both operands: zero gradients, as torch gives."""
    generator = torch.Generator().manual_seed(6)
    self = torch.randn(3, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    other = (torch.rand(3, 4, dtype=torch.float64, generator=generator) + 0.5).requires_grad_()
    result = torch.div(self, other, rounding_mode=rounding_mode)
    grad = torch.randn(result.shape, dtype=torch.float64, generator=generator)
    expected_self, expected_other = torch.autograd.grad(result, [self, other], grad)
    torch.testing.assert_close(
        _call(backend, div_tensor_self_backward__mode, grad, other.detach(), torch.float64, rounding_mode), expected_self)
    torch.testing.assert_close(
        _call(backend, div_tensor_other_backward__mode, grad, self.detach(), other.detach(), rounding_mode),
        expected_other)
    expected_scalar, = torch.autograd.grad(torch.div(self, 1.5, rounding_mode=rounding_mode), [self], grad)
    torch.testing.assert_close(
        _call(backend, div_tensor_self_backward__scalar_mode, grad, 1.5, torch.float64, rounding_mode), expected_scalar)


@pytest.mark.parametrize("shape, dim", [((1, 3, 1), 0), ((1, 3, 1), -1), ((1, 3, 1), 1), ((2, 1), -1), ((), 0),
                                        ((), -1), ((1,), 0), ((0, 1), 1)])
def test_unsqueeze_to_dim_undoes_squeeze_dim(backend, shape, dim):
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(x.squeeze(dim).shape, dtype=torch.float64)
    expected, = torch.autograd.grad(x.squeeze(dim), [x], grad)
    got = _call(backend, unsqueeze_to__dim, grad, dim, list(shape))
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("shape, dims", [((1, 3, 1), [0, -1]), ((1, 3, 1), [-1, 0]), ((1, 3, 1), []), ((1, 3, 1), [1]),
                                         ((1, 1, 2, 1), [1, 3]), ((), [0]), ((), []), ((0, 1), [0, 1])])
def test_unsqueeze_to_dims_undoes_squeeze_dims(backend, shape, dims):
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(x.squeeze(dims).shape, dtype=torch.float64)
    expected, = torch.autograd.grad(x.squeeze(dims), [x], grad)
    got = _call(backend, unsqueeze_to__dims, grad, dims, list(shape))
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected)
