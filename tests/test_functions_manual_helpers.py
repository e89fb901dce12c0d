"""The FunctionsManual-named helpers of ``formulas/helpers.py`` on the paths the op cases
(float64 only) do not reach, against torch: run with torch as the operator backend (complex
dtypes, which the reference engine lacks, and the raw negative dims derivatives.yaml passes).
Compiled: ``tests/cpp/test_compiled_functions_manual_helpers.py``."""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pytest

import formulas.functions_manual as fm
from formulas.indexing import index_backward
from formulas.helpers import (clamp_backward, clamp_backward__tensor, clamp_backward_min_max, clamp_jvp,
                              copysign_tensor_self_backward, div_tensor_other_backward, div_tensor_self_backward,
                              gather_with_keepdimed_indices, handle_r_to_c, logsumexp_jvp, maybe_multiply,
                              mul_tensor_backward, negated, reverse_list, unsqueeze_to)
from formulas.linalg import linalg_solve_triangular_forward_AD
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


def test_reverse_list_and_negated_undo_a_roll(backend):
    """roll's backward (derivatives.yaml): ``roll(grad, negated(reverse_list(shifts)), reverse_list(dims))``."""
    x = torch.arange(24.0, dtype=torch.float64).reshape(2, 3, 4)
    shifts, dims = [1, -2], [2, 0]
    assert backend.run(reverse_list, shifts) == [-2, 1]
    back = torch.roll(torch.roll(x, shifts, dims), backend.run(negated, backend.run(reverse_list, shifts)),
                      backend.run(reverse_list, dims))
    assert torch.equal(back, x)


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


# --- helpers written from the mathematics for the imported corpus (formulas/functions_manual.py) ---
#
# Each case gives torch's function, its inputs and the helper's gradient of it (a backward's own
# gradient for the ``*_double_backward`` helpers); the helper must equal torch's gradient, and as a
# function of its tensor inputs pass gradcheck and gradgradcheck (finite differences, first and
# second order, float64).


class HelperCase(NamedTuple):
    """``torch_fn(*inputs)`` and ``helper_fn(backend, grad, *inputs)``, the helper's gradient of it for the
    inputs at positions ``wrt`` (a tensor, or a tuple of them in that order)."""

    name: str
    torch_fn: Callable
    inputs: Callable[[], tuple]
    helper_fn: Callable
    wrt: tuple[int, ...] = (0,)
    smooth: bool = True         # gradcheck the helper too (False: a step function of its inputs)


def _randn(*shape, low=None, dtype=torch.float64, seed=0):
    generator = torch.Generator().manual_seed(seed + len(shape))
    x = torch.randn(shape, dtype=dtype, generator=generator)
    return x.abs() + low if low is not None else x


def _second(first: Callable, wrt_first: int = 0) -> Callable:
    """``(grad_output, *inputs) -> first derivative of first(*inputs) for input wrt_first, along
    grad_output``: a backward as a function, whose own gradient the double-backward helpers give."""
    def backward(grad_output, *inputs):
        inputs = [x.detach().requires_grad_() if not x.requires_grad and x.is_floating_point() else x
                  for x in inputs]
        out = first(*inputs)
        return torch.autograd.grad(out, inputs[wrt_first], grad_output, create_graph=True)[0]
    return backward


_F = torch.nn.functional
_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}

HELPER_CASES = [
    HelperCase("log1p", torch.log1p, lambda: (_randn(3, 4, low=0.2),),
               lambda b, g, x: b.run(fm.log1p_backward, g, x)),
    HelperCase("log1p complex", torch.log1p, lambda: (_randn(3, 4, dtype=torch.complex128),),
               lambda b, g, x: b.run(fm.log1p_backward, g, x)),
    HelperCase("sinc", torch.sinc, lambda: (_randn(3, 4),), lambda b, g, x: b.run(fm.sinc_backward, g, x)),
    HelperCase("sinc at 0", torch.sinc, lambda: (torch.tensor([0.0, 0.5, -1.5], dtype=torch.float64),),
               lambda b, g, x: b.run(fm.sinc_backward, g, x), smooth=False),
    HelperCase("deg2rad", torch.deg2rad, lambda: (_randn(5),), lambda b, g, x: b.run(fm.deg2rad_backward, g)),
    HelperCase("rad2deg", torch.rad2deg, lambda: (_randn(5),), lambda b, g, x: b.run(fm.rad2deg_backward, g)),
    HelperCase("sgn complex", torch.sgn, lambda: (_randn(2, 3, dtype=torch.complex128),),
               lambda b, g, x: b.run(fm.sgn_backward, x, g, torch.sgn(x))),
    HelperCase("sgn complex at 0", torch.sgn, lambda: (torch.tensor([0j, 1 - 2j], dtype=torch.complex128),),
               lambda b, g, x: b.run(fm.sgn_backward, x, g, torch.sgn(x)), smooth=False),
    HelperCase("sgn real", torch.sgn, lambda: (_randn(4),),
               lambda b, g, x: b.run(fm.sgn_backward, x, g, torch.sgn(x)), smooth=False),
    HelperCase("index with a repeated position and a whole dim",
               lambda x: torch.ops.aten.index(x, [None, torch.tensor([2, 0, 2])]), lambda: (_randn(2, 3),),
               lambda b, g, x: b.run(index_backward, torch.zeros_like(x), [None, torch.tensor([2, 0, 2])], g)),
    HelperCase("mean dims", lambda x: torch.mean(x, [0, -1]), lambda: (_randn(2, 3, 4),),
               lambda b, g, x: b.run(fm.mean_backward, g, list(x.shape), [0, -1], x.numel(), False)),
    HelperCase("mean keepdim", lambda x: torch.mean(x, [1], True), lambda: (_randn(2, 3, 4),),
               lambda b, g, x: b.run(fm.mean_backward, g, list(x.shape), [1], x.numel(), True)),
    HelperCase("mean all", lambda x: torch.mean(x, None), lambda: (_randn(2, 3),),
               lambda b, g, x: b.run(fm.mean_backward, g, list(x.shape), None, x.numel(), False)),
    HelperCase("logsumexp", lambda x: torch.logsumexp(x, [1]), lambda: (_randn(3, 4) * 5,),
               lambda b, g, x: b.run(fm.logsumexp_backward, g, x, torch.logsumexp(x, [1]), [1], False)),
    HelperCase("logsumexp keepdim", lambda x: torch.logsumexp(x, [0, 2], True), lambda: (_randn(2, 3, 2),),
               lambda b, g, x: b.run(fm.logsumexp_backward, g, x, torch.logsumexp(x, [0, 2], True), [0, 2], True)),
    HelperCase("var", lambda x: torch.var(x, [1]), lambda: (_randn(3, 4),),
               lambda b, g, x: b.run(fm.var_backward, g, x, [1], None, False)),
    HelperCase("var correction 0 all", lambda x: torch.var(x, None, correction=0), lambda: (_randn(3, 4),),
               lambda b, g, x: b.run(fm.var_backward, g, x, None, 0, False)),
    HelperCase("var complex keepdim", lambda x: torch.var(x, [-1], correction=2, keepdim=True),
               lambda: (_randn(3, 5, dtype=torch.complex128),),
               lambda b, g, x: b.run(fm.var_backward, g, x, [-1], 2, True)),
    HelperCase("std", lambda x: torch.std(x, [0], correction=1), lambda: (_randn(4, 3),),
               lambda b, g, x: b.run(fm.std_backward, torch.std(x, [0]), g, x, [0], 1, False)),
    HelperCase("std of a constant row", lambda x: torch.std(x, [1]),
               lambda: (torch.tensor([[1.0, 1.0, 1.0], [0.5, -1.0, 2.0]], dtype=torch.float64),),
               lambda b, g, x: b.run(fm.std_backward, torch.std(x, [1]), g, x, [1], None, False), smooth=False),
    HelperCase("var_mean", lambda x: torch.var_mean(x, [1], correction=0), lambda: (_randn(3, 4),),
               lambda b, g, x: b.run(fm.var_mean_backward, g[0], g[1], x, [1], 0, False)),
    HelperCase("std_mean", lambda x: torch.std_mean(x, [0, 1], keepdim=True), lambda: (_randn(3, 4),),
               lambda b, g, x: b.run(fm.std_mean_backward, g[0], g[1], x, torch.std(x, [0, 1], keepdim=True),
                                     [0, 1], None, True)),
    HelperCase("std_mean, mean only", lambda x: torch.std_mean(x, [1])[1] * 1.0, lambda: (_randn(3, 4),),
               lambda b, g, x: b.run(fm.std_mean_backward, None, g, x, torch.std(x, [1]), [1], None, False)),
    *[HelperCase(f"norm p={p}", lambda x, p=p: torch.norm(x, p), lambda: (_randn(3, 4),),
                 lambda b, g, x, p=p: b.run(fm.norm_backward, g, x, p, torch.norm(x, p)), smooth=p != float("inf"))
      for p in (2, 1, 3, 0.5, float("inf"), None)],
    HelperCase("norm dim", lambda x: torch.norm(x, 3, [1], True), lambda: (_randn(3, 4),),
               lambda b, g, x: b.run(fm.norm_backward__dim, g, x, 3, torch.norm(x, 3, [1], True), [1], True)),
    HelperCase("linalg_vector_norm", lambda x: torch.linalg.vector_norm(x, 2, [0]), lambda: (_randn(3, 4),),
               lambda b, g, x: b.run(fm.linalg_vector_norm_backward, g, x, 2, torch.linalg.vector_norm(x, 2, [0]),
                                     [0], False)),
    HelperCase("cumsum", lambda x: torch.cumsum(x, -1), lambda: (_randn(3, 4),),
               lambda b, g, x: b.run(fm.cumsum_backward, g, -1)),
    HelperCase("nansum", lambda x: torch.nansum(x, [1]),
               lambda: (torch.tensor([[1.0, float("nan"), 2.0], [0.5, -1.0, 3.0]], dtype=torch.float64),),
               lambda b, g, x: b.run(fm.nansum_backward, g, x, [1], False), smooth=False),
    HelperCase("prod", torch.prod, lambda: (_randn(2, 3),), lambda b, g, x: b.run(fm.prod_backward, g, x, torch.prod(x))),
    HelperCase("prod with a zero", torch.prod, lambda: (torch.tensor([[2.0, 0.0], [-1.5, 3.0]], dtype=torch.float64),),
               lambda b, g, x: b.run(fm.prod_backward, g, x, torch.prod(x)), smooth=False),   # FD leaves the zero
    HelperCase("prod complex", torch.prod, lambda: (_randn(4, dtype=torch.complex128),),
               lambda b, g, x: b.run(fm.prod_backward, g, x, torch.prod(x))),
    HelperCase("prod dim", lambda x: torch.prod(x, 1), lambda: (torch.tensor([[2.0, 0.0, 1.5], [-1.5, 3.0, 0.5]],
                                                                            dtype=torch.float64),),
               lambda b, g, x: b.run(fm.prod_backward__dim, g, x, torch.prod(x, 1), 1, False), smooth=False),
    HelperCase("prod dim keepdim", lambda x: torch.prod(x, -2, True), lambda: (_randn(3, 2),),
               lambda b, g, x: b.run(fm.prod_backward__dim, g, x, torch.prod(x, -2, True), -2, True)),
    HelperCase("atan2", torch.atan2, lambda: (_randn(3, 4), _randn(3, 4, seed=4)),
               lambda b, g, y, x: b.run(fm.atan2_backward, g, y, x, [True, True]), wrt=(0, 1)),
    HelperCase("atan2 at the origin", torch.atan2, lambda: (torch.tensor([0.0, 1.0], dtype=torch.float64),
                                                            torch.tensor([0.0, -2.0], dtype=torch.float64)),
               lambda b, g, y, x: b.run(fm.atan2_backward, g, y, x, [True, True]), wrt=(0, 1), smooth=False),
    HelperCase("atan2, other only", torch.atan2, lambda: (_randn(3), _randn(3, seed=4)),
               lambda b, g, y, x: b.run(fm.atan2_backward, g, y, x, [False, True])[1], wrt=(1,)),
    HelperCase("_softmax_backward_data", lambda go, y: torch.ops.aten._softmax_backward_data(go, y, 1, torch.float64),
               lambda: (_randn(3, 4), torch.softmax(_randn(3, 4, seed=6), 1)),
               lambda b, g, go, y: (b.run(fm.softmax_double_backward, g, go, 1, y),), wrt=(1,)),
    HelperCase("permute", lambda x: x.permute(2, 0, 1), lambda: (_randn(2, 3, 4),),
               lambda b, g, x: b.run(fm.permute_backwards, g, [2, 0, -2])),
    HelperCase("constant_pad_nd", lambda x: _F.pad(x, [1, 2, -1, 0]), lambda: (_randn(3, 4),),
               lambda b, g, x: b.run(fm.constant_pad_nd_backward, g, [1, 2, -1, 0])),
    HelperCase("masked_fill value", lambda v: torch.masked_fill(_randn(3, 4), _randn(4, seed=5) > 0, v),
               lambda: (torch.tensor(0.5, dtype=torch.float64),),
               lambda b, g, v: b.run(fm.masked_fill_backward, g, _randn(4, seed=5) > 0)),
    HelperCase("take", lambda x: torch.take(x, torch.tensor([[0, 5, -1], [5, 2, 0]])), lambda: (_randn(2, 3),),
               lambda b, g, x: b.run(fm.take_backward, g, x, torch.tensor([[0, 5, -1], [5, 2, 0]]))),
    HelperCase("unbind", lambda x: torch.unbind(x, 1), lambda: (_randn(2, 3, 2),),
               lambda b, g, x: b.run(fm.unbind_backward, list(g), 1)),
    HelperCase("unbind, one slice used", lambda x: torch.unbind(x, -1)[1] * 1.0, lambda: (_randn(2, 3),),
               lambda b, g, x: b.run(fm.unbind_backward, [None, g, None], -1)),
    HelperCase("embedding_dense_backward", lambda go: torch.ops.aten.embedding_dense_backward(
        go, torch.tensor([[0, 2], [2, 3]]), 5, 3, False), lambda: (_randn(2, 2, 3),),
        lambda b, g, go: b.run(fm.embedding_dense_double_backward, g, torch.tensor([[0, 2], [2, 3]]), 3)),
    HelperCase("native_dropout_backward", lambda go: torch.ops.aten.native_dropout_backward(
        go, _randn(3, 4, seed=7) > 0, 2.0), lambda: (_randn(3, 4),),
        lambda b, g, go: b.run(fm.native_dropout_double_backward, g, go, _randn(3, 4, seed=7) > 0, 2.0)),
    HelperCase("glu_backward", _second(lambda x: _F.glu(x, 1)), lambda: (_randn(3, 4), _randn(3, 8, seed=1)),
               lambda b, g, go, x: (b.run(fm.glu_double_backward_grad_output, g, x, 1),
                                    b.run(fm.glu_double_backward, g, go, x, 1)), wrt=(0, 1)),
    HelperCase("log_sigmoid_backward", _second(_F.logsigmoid), lambda: (_randn(3, 4), _randn(3, 4, seed=1)),
               lambda b, g, go, x: b.run(fm.log_sigmoid_double_backward, g * go, x), wrt=(1,)),
    HelperCase("softplus_backward", _second(lambda x: _F.softplus(x, 2.0, 1.5)),
               lambda: (_randn(3, 4), _randn(3, 4, seed=1)),
               lambda b, g, go, x: b.run(fm.softplus_double_backward, g * go, x, 2.0, 1.5), wrt=(1,), smooth=False),
]
def _sizes_and_dtypes(*tensors):
    return [list(t.shape) for t in tensors], [t.dtype for t in tensors]


def _on_the_unit_interval(*shape, seed=0):
    return torch.sigmoid(_randn(*shape, seed=seed))


HELPER_CASES += [
    HelperCase("to_args_sizes and to_args_scalartypes", lambda a, b: torch.cat([a, b]),
               lambda: (_randn(2, 3), _randn(1, 3, dtype=torch.complex128)),
               lambda b, g, x, y: tuple(b.run(fm.cat_tensors_backward, g, b.run(fm.to_args_sizes, [x, y]),
                                         b.run(fm.to_args_scalartypes, [x, y]), 0)), wrt=(0, 1)),
    HelperCase("cat", lambda a, b, c: torch.cat([a, b, c], -1), lambda: (_randn(2, 3), _randn(2, 1), _randn(2, 2)),
               lambda b, g, *xs: tuple(b.run(fm.cat_tensors_backward, g, *_sizes_and_dtypes(*xs), -1)),
               wrt=(0, 1, 2)),
    HelperCase("cat, a legacy empty input skipped", lambda a, b, c: torch.cat([a, b, c], 1),
               lambda: (_randn(2, 3), _randn(0), _randn(2, 2)),
               lambda b, g, *xs: tuple(b.run(fm.cat_tensors_backward, g, *_sizes_and_dtypes(*xs), 1)),
               wrt=(0, 1, 2)),
    HelperCase("cat, real and complex", lambda a, b: torch.cat([a, b]),
               lambda: (_randn(2, 3), _randn(1, 3, dtype=torch.complex128)),
               lambda b, g, *xs: tuple(b.run(fm.cat_tensors_backward, g, *_sizes_and_dtypes(*xs), 0)), wrt=(0, 1)),
    HelperCase("stack", lambda a, b: torch.stack([a, b], -2), lambda: (_randn(2, 3), _randn(2, 3, seed=1)),
               lambda b, g, x, y: tuple(b.run(fm.stack_tensors_backward, g, -2, [x.dtype, y.dtype])), wrt=(0, 1)),
    HelperCase("stack 0-d", lambda a, b: torch.stack([a, b]), lambda: (_randn(), _randn(seed=1)),
               lambda b, g, x, y: tuple(b.run(fm.stack_tensors_backward, g, 0, [x.dtype, y.dtype])), wrt=(0, 1)),
    HelperCase("block_diag", torch.block_diag, lambda: (_randn(2, 3), _randn(), _randn(4), _randn(0, 2), _randn(3, 1)),
               lambda b, g, *xs: tuple(b.run(fm.block_diag_backward, g, *_sizes_and_dtypes(*xs))),
               wrt=(0, 1, 2, 3, 4)),
    HelperCase("angle complex", torch.angle, lambda: (_randn(2, 3, dtype=torch.complex128),),
               lambda b, g, x: b.run(fm.angle_backward, g, x)),
    HelperCase("angle complex at 0", torch.angle, lambda: (torch.tensor([0j, -1 + 2j], dtype=torch.complex128),),
               lambda b, g, x: b.run(fm.angle_backward, g, x), smooth=False),
    HelperCase("angle real", torch.angle, lambda: (torch.tensor([-1.5, 0.0, 2.0], dtype=torch.float64),),
               lambda b, g, x: b.run(fm.angle_backward, g, x), smooth=False),
    HelperCase("polar", torch.polar, lambda: (_randn(2, 3, low=0.1), _randn(2, 3, seed=1) * 3),
               lambda b, g, a, t: b.run(fm.polar_backward, g, torch.polar(a, t)), wrt=(0, 1)),
    HelperCase("polar at abs 0", torch.polar, lambda: (torch.tensor([0.0, 2.0], dtype=torch.float64),
                                                      torch.tensor([0.5, -2.5], dtype=torch.float64)),
               lambda b, g, a, t: b.run(fm.polar_backward, g, torch.polar(a, t)), wrt=(0, 1), smooth=False),
    *[HelperCase(f"aminmax dim={dim} keepdim={keepdim}", lambda x, d=dim, k=keepdim: torch.aminmax(x, dim=d, keepdim=k),
                 lambda: (torch.tensor([[1.0, 3.0, 3.0, -2.0], [0.5, 0.5, 0.25, 4.0], [2.0, -2.0, -2.0, 2.0]],
                                       dtype=torch.float64),),
                 lambda b, g, x, d=dim, k=keepdim: b.run(fm.aminmax_backward, x, d, k, g[0], g[1],
                                                         *torch.aminmax(x, dim=d, keepdim=k)), smooth=False)
      for dim, keepdim in ((None, False), (None, True), (1, False), (-2, True))],
    HelperCase("aminmax, max only", lambda x: torch.aminmax(x, dim=0).max * 1.0, lambda: (_randn(3, 2),),
               lambda b, g, x: b.run(fm.aminmax_backward, x, 0, False, None, g, *torch.aminmax(x, dim=0)),
               smooth=False),
    HelperCase("aminmax 0-d", lambda x: torch.aminmax(x, dim=0), lambda: (_randn(),),
               lambda b, g, x: b.run(fm.aminmax_backward, x, 0, False, g[0], g[1], *torch.aminmax(x, dim=0)),
               smooth=False),
    HelperCase("logcumsumexp", lambda x: torch.logcumsumexp(x, 1), lambda: (_randn(3, 5) * 4,),
               lambda b, g, x: b.run(fm.logcumsumexp_backward, g, x, torch.logcumsumexp(x, 1), 1)),
    HelperCase("logcumsumexp far apart", lambda x: torch.logcumsumexp(x, -2),
               lambda: (torch.tensor([[900.0, -3.0], [0.0, 700.0], [-800.0, 1.0]], dtype=torch.float64),),
               lambda b, g, x: b.run(fm.logcumsumexp_backward, g, x, torch.logcumsumexp(x, -2), -2), smooth=False),
    HelperCase("logcumsumexp complex", lambda x: torch.logcumsumexp(x, 0),
               lambda: (_randn(4, 2, dtype=torch.complex128),),
               lambda b, g, x: b.run(fm.logcumsumexp_backward, g, x, torch.logcumsumexp(x, 0), 0)),
    HelperCase("logcumsumexp 0-d", lambda x: torch.logcumsumexp(x, 0), lambda: (_randn(),),
               lambda b, g, x: b.run(fm.logcumsumexp_backward, g, x, torch.logcumsumexp(x, 0), 0)),
    *[HelperCase(f"renorm p={p} dim={dim}", lambda x, p=p, dim=dim: torch.renorm(x, p, dim, 1.5),
                 lambda: (_randn(3, 4, 2) * 2,),
                 lambda b, g, x, p=p, dim=dim: b.run(fm.renorm_backward, g, x, p, dim, 1.5))
      for p, dim in ((2, 0), (1, -1), (3.5, 1))],
    HelperCase("_euclidean_dist", torch.ops.aten._euclidean_dist, lambda: (_randn(4, 3), _randn(5, 3, seed=1)),
               lambda b, g, x1, x2: b.run(fm._euclidean_dist_backward, g, x1, x2,
                                          torch.ops.aten._euclidean_dist(x1, x2)), wrt=(0, 1)),
    HelperCase("_euclidean_dist batched", torch.ops.aten._euclidean_dist,
               lambda: (_randn(2, 4, 3), _randn(2, 5, 3, seed=1)),
               lambda b, g, x1, x2: b.run(fm._euclidean_dist_backward, g, x1, x2,
                                          torch.ops.aten._euclidean_dist(x1, x2)), wrt=(0, 1)),
    HelperCase("gelu_backward none", _second(_F.gelu), lambda: (_randn(3, 4), _randn(3, 4, seed=1)),
               lambda b, g, go, x: b.run(fm.gelu_double_backward, g, go, x, "none"), wrt=(1,)),
    HelperCase("gelu_backward tanh", _second(lambda x: _F.gelu(x, approximate="tanh")),
               lambda: (_randn(3, 4), _randn(3, 4, seed=1)),
               lambda b, g, go, x: b.run(fm.gelu_double_backward, g, go, x, "tanh"), wrt=(1,)),
    HelperCase("elu_backward of the input", lambda go, x: torch.ops.aten.elu_backward(go, 1.3, 1.1, 0.7, False, x),
               lambda: (_randn(3, 4), _randn(3, 4, seed=1)),
               lambda b, g, go, x: b.run(fm.elu_double_backward, g, go, 1.3, 1.1, 0.7, False, x), wrt=(1,),
               smooth=False),
    HelperCase("elu_backward of the result", lambda go, y: torch.ops.aten.elu_backward(go, 1.3, 1.1, 0.7, True, y),
               lambda: (_randn(3, 4), _F.elu(_randn(3, 4, seed=1), 1.3) * 1.1),
               lambda b, g, go, y: b.run(fm.elu_double_backward, g, go, 1.3, 1.1, 0.7, True, y), wrt=(1,),
               smooth=False),
]
for _weighted in (False, True):
    _w = _randn(4, seed=8) if _weighted else None
    _pw = _randn(4, low=0.5, seed=10) if _weighted else None
    for _reduction, _code in _REDUCTIONS.items():
        HELPER_CASES += [
            HelperCase(f"binary_cross_entropy target {_reduction} weighted={_weighted}",
                       lambda x, t, r=_reduction, w=_w: _F.binary_cross_entropy(x, t, w, reduction=r),
                       lambda: (_on_the_unit_interval(3, 4), _on_the_unit_interval(3, 4, seed=1)),
                       lambda b, g, x, t, c=_code, w=_w: b.run(fm.binary_cross_entropy_target_backward, g, x, t, w, c),
                       wrt=(1,)),
            HelperCase(f"binary_cross_entropy_backward {_reduction} weighted={_weighted}",
                       lambda go, x, t, r=_code, w=_w: torch.ops.aten.binary_cross_entropy_backward(go, x, t, w, r),
                       lambda r=_reduction: (_randn(3, 4, seed=2) if r == "none" else torch.tensor(1.3, dtype=torch.float64),
                                             _on_the_unit_interval(3, 4), _on_the_unit_interval(3, 4, seed=1)),
                       lambda b, g, go, x, t, c=_code, w=_w: (
                           b.run(fm.binary_cross_entropy_double_backward_grad_output, g, x, t, w, c),
                           b.run(fm.binary_cross_entropy_double_backward, go, g, x, t, w, c),
                           b.run(fm.binary_cross_entropy_double_backward_target, g, go, x, t, w, c)),
                       wrt=(0, 1, 2)),
            HelperCase(f"binary_cross_entropy_with_logits {_reduction} weighted={_weighted}",
                       lambda x, t, r=_reduction, w=_w, pw=_pw: _F.binary_cross_entropy_with_logits(
                           x, t, w, reduction=r, pos_weight=pw),
                       lambda: (_randn(3, 4) * 3, _on_the_unit_interval(3, 4, seed=1)),
                       lambda b, g, x, t, c=_code, w=_w, pw=_pw: (
                           b.run(fm.binary_cross_entropy_with_logits_backward, g, x, t, w, pw, c),
                           b.run(fm.binary_cross_entropy_with_logits_target_backward, g, x, t, w, pw, c)),
                       wrt=(0, 1)),
        ]
HELPER_CASES += [
    HelperCase(f"linear_backward {which}",
               lambda x, go, w, m=mask: tuple(o for o, keep in zip(_linear_backward(x, go, w), m) if keep),
               lambda: (_randn(2, 3, 4), _randn(2, 3, 5, seed=1), _randn(5, 4, seed=2)),
               lambda b, g, x, go, w, m=mask: tuple(
                   torch.zeros_like(like) if out is None else out   # None: no gradient reaches that input
                   for out, like in zip(b.run(fm.linear_double_backward, _fill(g, m), x, go, w), (x, go, w))),
               wrt=(0, 1, 2))
    for which, mask in (("all", [True, True, True]), ("input only", [True, False, False]),
                        ("weight and bias", [False, True, True]))
]


def _linear_backward(x, go, w):
    """``aten.linear_backward``'s three outputs, which torch 2.13 runs on no CPU kernel, spelled with
    the products that define them (input: ``go W``, weight: ``go^T x`` over the batch, bias: the
    batch sum of ``go``), so that torch's autograd gives their gradients."""
    flat_go = go.reshape(-1, go.shape[-1])
    return go @ w, flat_go.T @ x.reshape(-1, x.shape[-1]), flat_go.sum(0)


def _fill(grads, mask):
    """The gradients of the outputs ``mask`` keeps, None for the others (a tuple of one output or a
    tensor for a single one)."""
    grads = list(grads) if isinstance(grads, tuple) else [grads]
    return [grads.pop(0) if keep else None for keep in mask]



for _reduction, _code in _REDUCTIONS.items():
    _target = _randn(3, 4, seed=9)
    _go = (lambda: _randn(3, 4, seed=2)) if _reduction == "none" else (lambda: torch.tensor(1.7, dtype=torch.float64))
    HELPER_CASES += [
        HelperCase(f"mse_loss_backward {_reduction}", _second(lambda x, r=_reduction, t=_target: _F.mse_loss(x, t, reduction=r)),
                   lambda go=_go: (go(), _randn(3, 4, seed=1)),
                   lambda b, g, go, x, c=_code: b.run(fm.mse_loss_double_backward, g * go, x, c), wrt=(1,)),
        HelperCase(f"smooth_l1_loss_backward {_reduction}",
                   _second(lambda x, r=_reduction, t=_target: _F.smooth_l1_loss(x, t, reduction=r, beta=0.8)),
                   lambda go=_go: (go(), _randn(3, 4, seed=1)),
                   lambda b, g, go, x, c=_code, t=_target: b.run(fm.smooth_l1_loss_double_backward, g * go, x, t, c, 0.8),
                   wrt=(1,), smooth=False),
        HelperCase(f"huber_loss_backward {_reduction}",
                   _second(lambda x, r=_reduction, t=_target: _F.huber_loss(x, t, reduction=r, delta=0.8)),
                   lambda go=_go: (go(), _randn(3, 4, seed=1)),
                   lambda b, g, go, x, c=_code, t=_target: (
                       b.run(fm.huber_loss_double_backward_grad_output, g, go, x, t, c, 0.8),
                       b.run(fm.huber_loss_double_backward, g * go, x, t, c, 0.8)),
                   wrt=(0, 1), smooth=False),
        HelperCase(f"soft_margin_loss_backward {_reduction}",
                   _second(lambda x, r=_reduction, t=_target: _F.soft_margin_loss(x, torch.sign(t), reduction=r)),
                   lambda go=_go: (go(), _randn(3, 4, seed=1)),
                   lambda b, g, go, x, c=_code, t=_target: (
                       b.run(fm.soft_margin_loss_double_backward_grad_output, g, go, x, torch.sign(t), c),
                       b.run(fm.soft_margin_loss_double_backward, g * go, x, torch.sign(t), c)),
                   wrt=(0, 1)),
    ]


def _grad_like(out):
    if isinstance(out, (tuple, list)):
        return tuple(_randn(*o.shape, dtype=o.dtype, seed=11 + i) for i, o in enumerate(out))
    return _randn(*out.shape, dtype=out.dtype, seed=11)


@pytest.mark.parametrize("case", HELPER_CASES, ids=lambda case: case.name)
def test_functions_manual_helper_equals_torch(backend, case):
    inputs = [x.requires_grad_() if i in case.wrt else x for i, x in enumerate(case.inputs())]
    out = case.torch_fn(*inputs)
    grad = _grad_like(out)
    expected = torch.autograd.grad(out, [inputs[i] for i in case.wrt], grad, allow_unused=True)
    expected = [torch.zeros_like(inputs[i]) if e is None else e for i, e in zip(case.wrt, expected)]
    got = case.helper_fn(backend, grad, *[x.detach() for x in inputs])
    got = list(got) if isinstance(got, tuple) else [got]
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("case", [c for c in HELPER_CASES if c.smooth], ids=lambda case: case.name)
def test_functions_manual_helper_passes_gradcheck_and_gradgradcheck(backend, case):
    """The helper's own first and second derivatives by finite differences: what the double backward
    of an entry that calls it computes."""
    inputs = case.inputs()
    out = case.torch_fn(*[x.requires_grad_() if i in case.wrt else x for i, x in enumerate(inputs)])
    grad = _grad_like(out)
    grads = list(grad) if isinstance(grad, tuple) else [grad]
    floating = [i for i, x in enumerate(inputs) if x.is_floating_point() or x.is_complex()]

    def helper(*values):
        grad_values, input_values = values[:len(grads)], list(inputs)
        for i, value in zip(floating, values[len(grads):]):
            input_values[i] = value
        got = case.helper_fn(backend, grad_values if isinstance(grad, tuple) else grad_values[0], *input_values)
        return got
    values = [g.detach().requires_grad_() for g in grads] + [inputs[i].detach().requires_grad_() for i in floating]
    assert torch.autograd.gradcheck(helper, values)
    assert torch.autograd.gradgradcheck(helper, values)


_TRILINEAR = {"bilinear": ([1, 3], [0], [1, 2], [2, 3]),        # torch.nn.functional.bilinear's call
              "outer": ([1], [0], [], [])}                        # x_i y_j z_ij (no sum)


def _trilinear_inputs(kind):
    if kind == "bilinear":
        return _randn(4, 3), _randn(5, 3, 2, seed=1), _randn(4, 2, seed=2)
    return _randn(3), _randn(2, seed=1), _randn(3, 2, seed=2)


HELPER_CASES += [
    HelperCase(f"_trilinear {kind} mask={mask}",
               lambda a, b, c, e=expands: torch.ops.aten._trilinear(a, b, c, *e),
               lambda kind=kind: _trilinear_inputs(kind),
               lambda b_, g, x, y, z, e=expands, m=mask: tuple(
                   out for out in b_.run(fm._trilinear_backward, g, b_.run(fm.wrap_opt_if, x, m[1] or m[2]),
                                         b_.run(fm.wrap_opt_if, y, m[0] or m[2]),
                                         b_.run(fm.wrap_opt_if, z, m[0] or m[1]), *e, m) if out is not None),
               wrt=tuple(i for i in range(3) if mask[i]))
    for kind, expands in _TRILINEAR.items() for mask in ([True, True, True], [True, False, False], [False, True, True])
]


class JvpCase(NamedTuple):
    """``torch_fn(x)`` and ``helper_fn(backend, x, tangent)``, its tangent along ``tangent``."""

    name: str
    torch_fn: Callable
    x: Callable[[], torch.Tensor]
    helper_fn: Callable


JVP_CASES = [
    *[JvpCase(f"norm p={p}", lambda x, p=p: torch.norm(x, p), lambda: _randn(3, 4),
              lambda b, x, t, p=p: b.run(fm.norm_jvp, x, t, p, torch.norm(x, p))) for p in (2, 1, 3.5, float("inf"))],
    JvpCase("norm dim keepdim", lambda x: torch.norm(x, 3, [1], True), lambda: _randn(3, 4),
            lambda b, x, t: b.run(fm.norm_jvp__dim, x, t, 3, torch.norm(x, 3, [1], True), [1], True)),
    JvpCase("norm, every dim as []", lambda x: torch.dist(x, torch.zeros(()), 2), lambda: _randn(2, 3),
            lambda b, x, t: b.run(fm.norm_jvp__dim, x, t, 2, torch.dist(x, torch.zeros(()), 2), [], False)),
    JvpCase("norm complex", lambda x: torch.norm(x), lambda: _randn(2, 3, dtype=torch.complex128),
            lambda b, x, t: b.run(fm.norm_jvp, x, t, None, torch.norm(x))),
    JvpCase("linalg_vector_norm", lambda x: torch.linalg.vector_norm(x, 1.5, [0]), lambda: _randn(3, 4),
            lambda b, x, t: b.run(fm.linalg_vector_norm_jvp, x, t, 1.5, torch.linalg.vector_norm(x, 1.5, [0]),
                                  [0], False)),
    *[JvpCase(f"aminmax dim={dim} keepdim={keepdim}", lambda x, d=dim, k=keepdim: torch.aminmax(x, dim=d, keepdim=k),
              lambda: torch.tensor([[1.0, 3.0, 3.0], [0.5, 0.5, -4.0]], dtype=torch.float64),
              lambda b, x, t, d=dim, k=keepdim: tuple(b.run(fm.aminmax_jvp, x, t, extreme, d, k)
                                                      for extreme in torch.aminmax(x, dim=d, keepdim=k)))
      for dim, keepdim in ((None, False), (1, False), (-1, True), (0, True))],
    JvpCase("logcumsumexp", lambda x: torch.logcumsumexp(x, -1), lambda: _randn(3, 5) * 4,
            lambda b, x, t: b.run(fm.logcumsumexp_jvp, x, t, -1)),
    JvpCase("logcumsumexp 0-d", lambda x: torch.logcumsumexp(x, 0), lambda: _randn(),
            lambda b, x, t: b.run(fm.logcumsumexp_jvp, x, t, 0)),
    *[JvpCase(f"renorm p={p} dim={dim}", lambda x, p=p, dim=dim: torch.renorm(x, p, dim, 1.5), lambda: _randn(3, 4, 2) * 2,
              lambda b, x, t, p=p, dim=dim: b.run(fm.renorm_jvp, x, t, p, dim, 1.5)) for p, dim in ((2, 0), (1, -1))],
    JvpCase("safe_logsumexp", lambda x: torch.logsumexp(x, [1], True), lambda: _randn(3, 4),
            lambda b, x, t: b.run(fm.safe_logsumexp_jvp, x, t, [1], True)),
    # x holds A (3 x 3, only its upper triangle read, unit diagonal on the right) and B beside it
    *[JvpCase(f"linalg_solve_triangular_forward_AD left={left}",
              lambda x, left=left: _solve_triangular(x, left),
              lambda left=left: _randn(3, 5) if left else _randn(5, 3),
              lambda b, x, t, left=left: b.run(linalg_solve_triangular_forward_AD, *_triangular_parts(t, left),
                                               _triangular_parts(x, left)[0] + _FOUR, _solve_triangular(x, left),
                                               True, left, not left))
      for left in (True, False)],
]
_FOUR = 4 * torch.eye(3, dtype=torch.float64)     # keeps the triangle well conditioned


def _triangular_parts(x, left):
    """``(A, B)`` of a :func:`_solve_triangular` case: A's columns (rows) first, then B's."""
    return (x[:, :3], x[:, 3:]) if left else (x[:3], x[3:])


def _solve_triangular(x, left):
    """``solve_triangular(A + 4 I, B)``: upper, on the left; unitriangular on the right."""
    a, b = _triangular_parts(x, left)
    return torch.linalg.solve_triangular(a + _FOUR, b, upper=True, left=left, unitriangular=not left)


@pytest.mark.parametrize("case", JVP_CASES, ids=lambda case: case.name)
def test_functions_manual_jvp_equals_forward_ad(backend, case):
    import torch.autograd.forward_ad as fwAD
    x = case.x()
    tangent = _randn(*x.shape, dtype=x.dtype, seed=13)
    with fwAD.dual_level():
        out = case.torch_fn(fwAD.make_dual(x, tangent))
        outs = out if isinstance(out, tuple) else (out,)
        expected = [fwAD.unpack_dual(o).tangent for o in outs]
    got = case.helper_fn(backend, x, tangent)
    got = list(got) if isinstance(got, tuple) else [got]
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        torch.testing.assert_close(g, e)


def test_safe_logsumexp_jvp_is_zero_on_a_slice_of_minus_infinity(backend):
    """``_safe_softmax`` of a slice that is all ``-inf`` is zeros, and so is its tangent: the jvp
    ``result * (t - safe_logsumexp_jvp(...))`` needs a finite value there (``logsumexp_jvp`` gives NaN)."""
    x = torch.tensor([[float("-inf")] * 3, [0.5, -1.0, float("-inf")]], dtype=torch.float64)
    tangent = _randn(2, 3, seed=13)
    got = backend.run(fm.safe_logsumexp_jvp, x, tangent, [1], True)
    torch.testing.assert_close(got[0], torch.zeros(1, dtype=torch.float64), rtol=0, atol=0)
    softmax = torch.softmax(x[1], 0)
    torch.testing.assert_close(got[1], (softmax * tangent[1]).sum(0, keepdim=True))


def test_logcumsumexp_jvp_is_the_prefix_softmax_at_any_scale(backend):
    """Elements hundreds apart: the tangent of ``r_k`` is the softmax of the prefix ``x_0..x_k``
    applied to the tangent (torch's own forward AD loses it here, so the softmaxes are the oracle)."""
    x = torch.tensor([[900.0, -3.0], [0.0, 700.0], [-800.0, 1.0]], dtype=torch.float64)
    tangent = _randn(3, 2, seed=13)
    expected = torch.stack([(torch.softmax(x[:k + 1], 0) * tangent[:k + 1]).sum(0) for k in range(3)])
    torch.testing.assert_close(backend.run(fm.logcumsumexp_jvp, x, tangent, 0), expected)


def _bounds():
    """Bounds that cross (``min > max`` in some places) and broadcast against a (3, 4) ``self``."""
    return _randn(3, 4, seed=20) * 0.5 - 0.3, _randn(4, seed=21) * 0.5 + 0.3


def _equal_bounds():
    """Bounds equal in half the places (``self`` below, between and above them), crossing elsewhere."""
    low = _randn(3, 4, seed=22) * 0.5
    return low, torch.where(torch.arange(12).reshape(3, 4) % 2 == 0, low, _randn(3, 4, seed=23) * 0.5)


HELPER_CASES_CLAMP = [
    HelperCase("clamp.Tensor equal bounds", lambda x, lo, hi: torch.clamp(x, lo, hi),
               lambda: (_randn(3, 4), *_equal_bounds()),
               lambda b, g, x, lo, hi: (b.run(clamp_backward__tensor, g, x, lo, hi),
                                        *b.run(clamp_backward_min_max, g, x, lo, hi, [True, True])),
               wrt=(0, 1, 2), smooth=False),
    HelperCase("clamp.Tensor", lambda x, lo, hi: torch.clamp(x, lo, hi), lambda: (_randn(3, 4), *_bounds()),
               lambda b, g, x, lo, hi: (b.run(clamp_backward__tensor, g, x, lo, hi),
                                        *[b.run(fm.sum_to, out, list(like.shape)) for out, like in
                                          zip(b.run(clamp_backward_min_max, g, x, lo, hi, [True, True]),
                                              (lo, hi))]),
               wrt=(0, 1, 2), smooth=False),
    HelperCase("clamp.Tensor min only", lambda x, lo: torch.clamp(x, lo, None), lambda: (_randn(3, 4), _bounds()[0]),
               lambda b, g, x, lo: (b.run(clamp_backward__tensor, g, x, lo, None),
                                    b.run(clamp_backward_min_max, g, x, lo, None, [True, False])[0]),
               wrt=(0, 1), smooth=False),
    HelperCase("clamp.Tensor max only", lambda x, hi: torch.clamp(x, None, hi), lambda: (_randn(3, 4), _bounds()[1]),
               lambda b, g, x, hi: (b.run(clamp_backward__tensor, g, x, None, hi),
                                    b.run(fm.sum_to, b.run(clamp_backward_min_max, g, x, None, hi,
                                                          [False, True])[1], list(hi.shape))),
               wrt=(0, 1), smooth=False),
    HelperCase("pow.Scalar", lambda e: torch.pow(2.5, e), lambda: (_randn(3, 4),),
               lambda b, g, e: b.run(fm.pow_backward_exponent__scalar, g, 2.5, e, torch.pow(2.5, e))),
    HelperCase("pow.Scalar of 0", lambda e: torch.pow(0.0, e), lambda: (_randn(5).abs() + 0.5,),
               lambda b, g, e: b.run(fm.pow_backward_exponent__scalar, g, 0.0, e, torch.pow(0.0, e)), smooth=False),
]


@pytest.mark.parametrize("mask", [[True, False], [False, True]])
def test_clamp_backward_min_max_mask_is_one_flag_per_bound(backend, mask):
    """derivatives.yaml passes ``clamp_backward_min_max`` its line's ``grad_input_mask``, one flag
    for ``min`` and one for ``max``: a bound not asked for gets no gradient (None)."""
    x, (lo, hi), g = _randn(3, 4), _bounds(), _randn(3, 4, seed=5)
    got = backend.run(clamp_backward_min_max, g, x, lo, hi, mask)
    assert [gradient is not None for gradient in got] == mask


@pytest.mark.parametrize("case", HELPER_CASES_CLAMP, ids=lambda case: case.name)
def test_clamp_and_scalar_power_helpers_equal_torch(backend, case):
    test_functions_manual_helper_equals_torch(backend, case)


@pytest.mark.parametrize("case", [c for c in HELPER_CASES_CLAMP if c.smooth], ids=lambda case: case.name)
def test_clamp_and_scalar_power_helpers_pass_gradcheck(backend, case):
    test_functions_manual_helper_passes_gradcheck_and_gradgradcheck(backend, case)


@pytest.mark.parametrize("with_bounds", [(True, True), (True, False), (False, True)])
def test_clamp_jvp_equals_forward_ad(backend, with_bounds):
    """Ties and a NaN included: with one bound torch's tangent is the bound's there."""
    import torch.autograd.forward_ad as fwAD
    x, (lo, hi) = _randn(3, 4), _bounds()
    x[0], x[1], x[2, 0] = lo[0], hi, float("nan")      # self at min, at max, NaN
    lo, hi = (lo if with_bounds[0] else None), (hi if with_bounds[1] else None)
    tangents = [_randn(*t.shape, seed=30 + i) if t is not None else None for i, t in enumerate((x, lo, hi))]
    with fwAD.dual_level():
        duals = [fwAD.make_dual(t, dt) if t is not None else None for t, dt in zip((x, lo, hi), tangents)]
        expected = fwAD.unpack_dual(torch.clamp(*duals)).tangent
    got = backend.run(clamp_jvp, x, tangents[0], lo, tangents[1], hi, tangents[2])
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_jvp_from_the_saved_statistics_equals_forward_ad(backend, affine):
    import torch.autograd.forward_ad as fwAD
    x, weight, bias = _randn(2, 3, 4), (_randn(3, 4, seed=1) if affine else None), (_randn(3, 4, seed=2) if affine else None)
    tangents = [_randn(*t.shape, seed=40 + i) if t is not None else None for i, t in enumerate((x, weight, bias))]
    out, mean, rstd = torch.native_layer_norm(x, [3, 4], weight, bias, 1e-5)
    with fwAD.dual_level():
        duals = [fwAD.make_dual(t, dt) if t is not None else None for t, dt in zip((x, weight, bias), tangents)]
        expected = fwAD.unpack_dual(torch.native_layer_norm(duals[0], [3, 4], duals[1], duals[2], 1e-5)[0]).tangent
    got = backend.run(fm.layer_norm_jvp__saved, x, tangents[0], weight, tangents[1], bias, tangents[2], mean, rstd,
                      [3, 4])
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("train, affine", [(True, True), (True, False), (False, True)])
def test_batch_norm_jvp_from_the_saved_statistics_equals_forward_ad(backend, train, affine):
    """``native_batch_norm``'s output tangent, training (batch statistics) and evaluating (running ones)."""
    import torch.autograd.forward_ad as fwAD
    x = _randn(3, 2, 4, 5)
    weight, bias = (_randn(2, seed=1), _randn(2, seed=2)) if affine else (None, None)
    running_mean, running_var = _randn(2, seed=3), _randn(2, seed=4).abs() + 0.5
    tangents = [_randn(*t.shape, seed=60 + i) if t is not None else None for i, t in enumerate((x, weight, bias))]
    args = (running_mean, running_var, train, 0.1, 1e-5)
    _, save_mean, save_invstd = torch.native_batch_norm(x, weight, bias, *args)
    with fwAD.dual_level():
        duals = [fwAD.make_dual(t, dt) if t is not None else None for t, dt in zip((x, weight, bias), tangents)]
        expected = fwAD.unpack_dual(torch.native_batch_norm(*duals, running_mean.clone(), running_var.clone(),
                                                            *args[2:])[0]).tangent
    got = backend.run(fm.batch_norm_jvp, x, tangents[0], weight, tangents[1], bias, tangents[2], running_mean,
                      running_var, save_mean, save_invstd, train, 1e-5)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("tangents", [(True, True, True), (True, False, False), (False, True, False), (False, False, True)])
def test_convolution_jvp_equals_forward_ad(backend, transposed, tangents):
    import torch.autograd.forward_ad as fwAD
    x = _randn(2, 4, 5, 6)
    weight = _randn(4, 3, 3, 2, seed=1) if transposed else _randn(6, 2, 3, 2, seed=1)
    bias = _randn(6, seed=2)       # six output channels either way
    args = ([2, 1], [1, 0], [1, 2], transposed, [1, 0] if transposed else [0, 0], 2)
    primal = (x, weight, bias)
    tangent = [_randn(*t.shape, seed=50 + i) if keep else None for i, (t, keep) in enumerate(zip(primal, tangents))]
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) if t is not None else p for p, t in zip(primal, tangent)]
        expected = fwAD.unpack_dual(torch.ops.aten.convolution(*duals, *args)).tangent
    got = backend.run(fm.convolution_jvp, x, tangent[0], weight, tangent[1], bias, tangent[2], *args)
    torch.testing.assert_close(got, expected)
    got = backend.run(fm._convolution_jvp, x, tangent[0], weight, tangent[1], bias, tangent[2], *args,
                      False, False, True, True)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("eps", [None, 0.2])
def test_infinitely_differentiable_logit_backward_equals_the_fused_kernel_outside_its_domain(backend, eps):
    """Inside ``[eps, 1 - eps]`` (``[0, 1]`` without eps) the op cases check it; outside, it is 0 with
    eps and NaN without, as ``logit_backward``."""
    from formulas.activations import infinitely_differentiable_logit_backward

    x = torch.tensor([-0.5, 0.1, 0.5, 0.9, 1.5], dtype=torch.float64)
    grad = torch.tensor([1.0, -2.0, 0.5, 3.0, 1.25], dtype=torch.float64)
    got = backend.run(infinitely_differentiable_logit_backward, grad, x, eps)
    torch.testing.assert_close(got, torch.ops.aten.logit_backward(grad, x, eps), equal_nan=True)
