"""The helpers of ``formulas/functions_manual.py`` (FunctionsManual's other signatures ``name__variant``
and its functions the library lacked) against torch's own gradients, with torch as the operator
backend (complex Scalars and dtypes, rounding modes, negative dims, missing pieces, zeros). Through
the C++ path they are proven by the imported entries that call them (the corpus proof)."""
from __future__ import annotations

import pytest

from formulas.functions_manual import (div_tensor_other_backward__mode, div_tensor_self_backward__mode,
                                       div_tensor_self_backward__scalar, div_tensor_self_backward__scalar_mode,
                                       max_pool_double_backward, mul_tensor_backward__scalar, pow_backward_exponent,
                                       pow_backward_self, slice_backward_wrapper, split_backward,
                                       split_with_sizes_backward, unsqueeze_to__dim, unsqueeze_to__dims)
from formulas.torch.backend import TorchBackend

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def backend() -> TorchBackend:
    return TorchBackend.for_library()


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
    got = backend.run(helper, grad, other, dtype)
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
        backend.run(div_tensor_self_backward__mode, grad, other.detach(), torch.float64, rounding_mode), expected_self)
    torch.testing.assert_close(
        backend.run(div_tensor_other_backward__mode, grad, self.detach(), other.detach(), rounding_mode),
        expected_other)
    expected_scalar, = torch.autograd.grad(torch.div(self, 1.5, rounding_mode=rounding_mode), [self], grad)
    torch.testing.assert_close(
        backend.run(div_tensor_self_backward__scalar_mode, grad, 1.5, torch.float64, rounding_mode), expected_scalar)


@pytest.mark.parametrize("shape, dim", [((1, 3, 1), 0), ((1, 3, 1), -1), ((1, 3, 1), 1), ((2, 1), -1), ((), 0),
                                        ((), -1), ((1,), 0), ((0, 1), 1)])
def test_unsqueeze_to_dim_undoes_squeeze_dim(backend, shape, dim):
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(x.squeeze(dim).shape, dtype=torch.float64)
    expected, = torch.autograd.grad(x.squeeze(dim), [x], grad)
    got = backend.run(unsqueeze_to__dim, grad, dim, list(shape))
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("shape, dims", [((1, 3, 1), [0, -1]), ((1, 3, 1), [-1, 0]), ((1, 3, 1), []), ((1, 3, 1), [1]),
                                         ((1, 1, 2, 1), [1, 3]), ((), [0]), ((), []), ((0, 1), [0, 1])])
def test_unsqueeze_to_dims_undoes_squeeze_dims(backend, shape, dims):
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(x.squeeze(dims).shape, dtype=torch.float64)
    expected, = torch.autograd.grad(x.squeeze(dims), [x], grad)
    got = backend.run(unsqueeze_to__dims, grad, dims, list(shape))
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("pool, dims, shape, kernel", [(torch.nn.functional.max_pool2d, 2, (2, 3, 5, 4), 2),
                                                       (torch.nn.functional.max_pool2d, 2, (3, 5, 5), 3),   # unbatched
                                                       (torch.nn.functional.max_pool3d, 3, (1, 2, 4, 4, 3), 2)])
def test_max_pool_double_backward_is_the_transpose_of_max_pool_backward(backend, pool, dims, shape, kernel):
    """Max pooling's backward scatters ``grad_output`` to the input positions of its indices; the
    gradient of that for ``grad_output`` is torch's own (autograd through the backward op)."""
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(shape, dtype=torch.float64, generator=generator, requires_grad=True)
    output, indices = pool(x, kernel, stride=1, return_indices=True)
    grad_output = torch.randn(output.shape, dtype=torch.float64, generator=generator, requires_grad=True)
    grad_input, = torch.autograd.grad(output, [x], grad_output, create_graph=True)
    upstream = torch.randn(shape, dtype=torch.float64, generator=generator)
    expected, = torch.autograd.grad(grad_input, [grad_output], upstream)
    got = backend.run(max_pool_double_backward, upstream, indices, dims)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("shape, dim, start, end, step", [((5, 4), 0, 1, 4, 2), ((5, 4), -1, None, None, 1),
                                                           ((5, 4), 1, None, 2, 1), ((6,), 0, 2, None, 3),
                                                           ((3, 6), 1, -4, -1, 2), ((3, 6), 1, 2, 100, 1)])
def test_slice_backward_wrapper_equals_torch(backend, shape, dim, start, end, step):
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    result = torch.ops.aten.slice.Tensor(x, dim, start, end, step)
    grad = torch.randn(result.shape, dtype=torch.float64)
    expected, = torch.autograd.grad(result, [x], grad)
    torch.testing.assert_close(backend.run(slice_backward_wrapper, grad, list(shape), dim, start, end, step),
                               expected)


@pytest.mark.parametrize("shape, dim, split, missing", [((7, 3), 0, 3, [1]), ((7, 3), 0, [2, 5], [0]),
                                                        ((2, 6), -1, 2, []), ((2, 6), 1, [1, 0, 5], [1, 2]),
                                                        ((4,), 0, 4, []), ((0, 2), 0, 2, [])])
def test_split_backwards_equal_torch(backend, shape, dim, split, missing):
    """The pieces' gradients concatenated, zeros for a piece without one (None)."""
    generator = torch.Generator().manual_seed(8)
    x = torch.randn(shape, dtype=torch.float64, generator=generator, requires_grad=True)
    pieces = torch.split(x, split, dim)
    grads = [None if i in missing else torch.randn(p.shape, dtype=torch.float64, generator=generator)
             for i, p in enumerate(pieces)]
    used = [i for i in range(len(pieces)) if grads[i] is not None]
    expected, = torch.autograd.grad([pieces[i] for i in used], [x], [grads[i] for i in used])
    if isinstance(split, int):
        got = backend.run(split_backward, grads, split, dim, list(shape), None)
    else:
        got = backend.run(split_with_sizes_backward, grads, split, dim, list(shape), None)
    torch.testing.assert_close(got, expected)


def test_pow_backwards_equal_torch_at_zeros_and_negative_bases(backend):
    """``self ** exponent``: torch's gradients on a grid of bases and exponents with zeros, negative
    bases and non-integer exponents (NaN where torch has NaN)."""
    bases = torch.tensor([-2.0, -0.5, 0.0, 0.5, 1.0, 3.0], dtype=torch.float64)
    exponents = torch.tensor([-1.5, -1.0, 0.0, 0.5, 1.0, 2.0, 3.0], dtype=torch.float64)
    self = bases[:, None].expand(6, 7).clone().requires_grad_()
    exponent = exponents[None, :].expand(6, 7).clone().requires_grad_()
    result = torch.pow(self, exponent)
    grad = torch.ones_like(result)
    expected_self, expected_exponent = torch.autograd.grad(result, [self, exponent], grad)
    torch.testing.assert_close(backend.run(pow_backward_self, grad, self.detach(), exponent.detach()),
                               expected_self, equal_nan=True)
    torch.testing.assert_close(
        backend.run(pow_backward_exponent, grad, self.detach(), exponent.detach(), result.detach()),
        expected_exponent, equal_nan=True)
