"""The FunctionsManual-named helpers of ``formulas/helpers.py`` on the paths the op cases
(float64 only) do not reach, against torch: run with torch as the operator backend (complex
dtypes, which the reference engine lacks, and the raw negative dims derivatives.yaml passes).
Compiled: ``tests/cpp/test_compiled_functions_manual_helpers.py``."""
from __future__ import annotations

import pytest

from formulas import use_backend
from formulas.helpers import gather_with_keepdimed_indices, handle_r_to_c, maybe_multiply
from tests.torch_backend import TorchBackend, unwrap, wrap

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def backend() -> TorchBackend:
    return TorchBackend.for_library()


def _call(backend: TorchBackend, helper, *args):
    with use_backend(backend):
        return unwrap(helper(*wrap(args)))


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
    got = _call(backend, handle_r_to_c, input_dtype, gradient)
    expected = gradient.real if real_part else gradient
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("alpha", [1, 1.0, 2.5, -1, 0])
def test_maybe_multiply(backend, alpha):
    t = torch.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=torch.float64)
    got = _call(backend, maybe_multiply, t, alpha)
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
    torch.testing.assert_close(_call(backend, gather_with_keepdimed_indices, x, dim, indices, keepdim), values)
    import torch.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        expected = fwAD.unpack_dual(torch.max(fwAD.make_dual(x, tangent), dim, keepdim).values).tangent
    got = _call(backend, gather_with_keepdimed_indices, tangent, dim, indices, keepdim)
    assert got.shape == values.shape
    torch.testing.assert_close(got, expected)
