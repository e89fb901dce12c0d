"""The FunctionsManual-named helpers of ``formulas/helpers.py`` on the paths the op cases
(float64 only) do not reach, against torch: run with torch as the operator backend (complex
dtypes, which the reference engine lacks, and the raw negative dims derivatives.yaml passes).
Compiled: ``tests/cpp/test_compiled_functions_manual_helpers.py``."""
from __future__ import annotations

import pytest

from formulas.helpers import (clamp_backward, copysign_tensor_self_backward, div_tensor_other_backward,
                              div_tensor_self_backward, gather_with_keepdimed_indices, handle_r_to_c, logsumexp_jvp,
                              maybe_multiply, mul_tensor_backward, unsqueeze_to)
from formulas.torch.backend import TorchBackend

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def backend() -> TorchBackend:
    return TorchBackend.for_library()


@pytest.mark.parametrize("input_dtype, gradient_dtype, real_part", [
    (torch.float64, torch.complex128, True),      # a real input of a complex result
    (torch.float32, torch.complex64, True),
    (torch.float32, torch.float64, False),        # real either way: the gradient as it is
    (torch.complex64, torch.complex128, False),   # a complex input keeps the imaginary part
    (torch.complex128, torch.complex128, False),
])
def test_handle_r_to_c_takes_the_real_part_only_for_a_real_input(backend, input_dtype, gradient_dtype, real_part):
    gradient = torch.tensor([1.5, -2.0], dtype=gradient_dtype)
    if gradient.is_complex():
        gradient = gradient + 0.25j
    got = backend.run(handle_r_to_c, input_dtype, gradient)
    expected = gradient.real if real_part else gradient
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("alpha", [1, 1.0, 2.5, -1, 0])
def test_maybe_multiply(backend, alpha):
    t = torch.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=torch.float64)
    got = backend.run(maybe_multiply, t, alpha)
    torch.testing.assert_close(got, t * alpha, rtol=0, atol=0)
    if alpha == 1:
        assert got is t


@pytest.mark.parametrize("shape, dim", [((3, 4), 1), ((3, 4), -1), ((3, 4), 0), ((3, 4), -2), ((2, 3, 4), -2),
                                        ((2, 3, 4), 2), ((5,), 0), ((5,), -1), ((), 0), ((), -1), ((0, 3), 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_gather_with_keepdimed_indices_picks_the_reduced_elements(backend, shape, dim, keepdim):
    """The values of ``max.dim`` are the input at its indices; the tangent of ``max.dim`` is
    the tangent at its indices (torch's forward AD)."""
    generator = torch.Generator().manual_seed(len(shape) * 10 + dim)
    x = torch.randn(shape, dtype=torch.float64, generator=generator)
    tangent = torch.randn(shape, dtype=torch.float64, generator=generator)
    values, indices = torch.max(x, dim, keepdim)
    torch.testing.assert_close(backend.run(gather_with_keepdimed_indices, x, dim, indices, keepdim), values)
    import torch.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        expected = fwAD.unpack_dual(torch.max(fwAD.make_dual(x, tangent), dim, keepdim).values).tangent
    got = backend.run(gather_with_keepdimed_indices, tangent, dim, indices, keepdim)
    assert got.shape == values.shape
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("self_dtype, other_dtype", [(torch.float64, torch.float64), (torch.complex128, torch.complex128),
                                                     (torch.float64, torch.complex128), (torch.complex128, torch.float64)])
@pytest.mark.parametrize("op", ["mul", "div"])
def test_product_and_quotient_gradients_equal_torch(backend, op, self_dtype, other_dtype):
    """``mul_tensor_backward`` and ``div_tensor_*_backward`` give torch's gradients of ``mul`` and
    ``div``, complex (conjugated) and mixed real/complex (a real input gets a real gradient)."""
    generator = torch.Generator().manual_seed(2)
    self = torch.randn(2, 3, dtype=self_dtype, generator=generator, requires_grad=True)
    other = (torch.randn(2, 3, dtype=other_dtype, generator=generator) + 2).requires_grad_()
    result = getattr(torch, op)(self, other)
    grad = torch.randn(result.shape, dtype=result.dtype, generator=generator)
    expected = torch.autograd.grad(result, [self, other], grad)
    if op == "mul":
        got = (backend.run(mul_tensor_backward, grad, other.detach(), self_dtype),
               backend.run(mul_tensor_backward, grad, self.detach(), other_dtype))
    else:
        got = (backend.run(div_tensor_self_backward, grad, other.detach(), self_dtype),
               backend.run(div_tensor_other_backward, grad, self.detach(), other.detach()))
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("low, high", [(-0.5, 0.5), (None, 0.0), (0.0, None), (None, None), (0.5, 0.5)])
def test_clamp_backward_equals_torch_bounds_included(backend, low, high):
    self = torch.tensor([-1.0, -0.5, 0.0, 0.25, 0.5, 2.0], dtype=torch.float64, requires_grad=True)
    grad = torch.arange(1.0, 7.0, dtype=torch.float64)
    expected, = torch.autograd.grad(torch.clamp(self, low, high) if (low, high) != (None, None) else self * 1.0,
                                    [self], grad)
    torch.testing.assert_close(backend.run(clamp_backward, grad, self.detach(), low, high), expected)


def test_copysign_tensor_self_backward_is_zero_at_zero(backend):
    self = torch.tensor([-2.0, -0.0, 0.0, 1.5], dtype=torch.float64, requires_grad=True)
    other = torch.tensor([1.0, -1.0, -3.0, -0.0], dtype=torch.float64)
    result = torch.copysign(self, other)
    grad = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    expected, = torch.autograd.grad(result, [self], grad)
    got = backend.run(copysign_tensor_self_backward, grad, self.detach(), result.detach())
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("shape", [(1, 3, 1, 2), (1,), (), (2, 3), (1, 1), (0, 1)])
def test_unsqueeze_to_undoes_squeeze(backend, shape):
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(x.squeeze().shape, dtype=torch.float64)
    expected, = torch.autograd.grad(x.squeeze(), [x], grad)
    got = backend.run(unsqueeze_to, grad, list(shape))
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("shape, dim, keepdim", [((3, 4), [1], False), ((3, 4), [0, 1], True), ((2, 3, 4), [-1], False),
                                                 ((2, 3, 4), [0, -1], True), ((5,), [0], False), ((), [0], True),
                                                 ((0, 3), [1], False)])
def test_logsumexp_jvp_equals_forward_ad(backend, shape, dim, keepdim):
    """The tangent of ``logsumexp``, and of ``log_softmax`` as derivatives.yaml writes it
    (``self_t - logsumexp_jvp(self_p, self_t, {dim}, true)``), equal torch's forward AD."""
    import torch.autograd.forward_ad as fwAD
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(shape, dtype=torch.float64, generator=generator) * 3
    tangent = torch.randn(shape, dtype=torch.float64, generator=generator)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, tangent)
        expected = fwAD.unpack_dual(torch.logsumexp(dual, dim, keepdim)).tangent
        expected_log_softmax = fwAD.unpack_dual(torch.log_softmax(dual, dim[0])).tangent if x.dim() else None
    torch.testing.assert_close(backend.run(logsumexp_jvp, x, tangent, dim, keepdim), expected)
    if expected_log_softmax is not None:
        got = tangent - backend.run(logsumexp_jvp, x, tangent, [dim[0]], True)
        torch.testing.assert_close(got, expected_log_softmax)
