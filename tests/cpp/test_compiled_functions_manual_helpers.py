"""The compiled library on dtypes the op cases (float64) do not reach, against torch's built-in
ops: a float32 input beside a float64 one gets torch's gradient, and a complex tensor is refused
with a clear error rather than given a wrong derivative. (The FunctionsManual-named helpers with
torch as the backend: ``tests/test_functions_manual_helpers.py``.)"""
from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("alpha", [1, 2.5])
def test_compiled_add_and_sub_give_each_input_its_gradient(formulas_ops, op, alpha):
    """A float32 input of a float64 sum gets torch's gradient (``maybe_multiply`` skips alpha = 1)."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    y = torch.randn(2, 1, dtype=torch.float32, generator=generator, requires_grad=True)
    ours = getattr(formulas_ops, op).Tensor(x, y, alpha=alpha)
    theirs = getattr(torch.ops.aten, op).Tensor(x, y, alpha=alpha)
    upstream = torch.randn(theirs.shape, dtype=theirs.dtype, generator=generator)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = torch.autograd.grad(ours, [x, y], upstream)
    expected = torch.autograd.grad(theirs, [x, y], upstream)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("call", [
    pytest.param(lambda ops, z, x: ops.sin(z), id="sin-complex-input"),
    pytest.param(lambda ops, z, x: ops.mul.Tensor(x, z.detach()), id="mul-complex-output"),
    pytest.param(lambda ops, z, x: ops.abs(z), id="abs-complex-input-real-output"),
])
def test_a_complex_tensor_is_refused_when_a_gradient_is_required(formulas_ops, call):
    """torch.sin of a complex z has the gradient grad * conj(cos(z)); the library's real formula would
    give grad * cos(z), so the compiled op raises instead (and records nothing)."""
    z = torch.randn(3, dtype=torch.complex128, requires_grad=True)
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="derivatives are for real dtypes"):
        call(formulas_ops, z, x)
    with torch.no_grad():                 # no gradient required: the forward runs as torch's does
        torch.testing.assert_close(formulas_ops.sin(z), torch.sin(z))



@pytest.mark.parametrize("call", [
    pytest.param(lambda ops, z: ops.abs(z), id="abs-complex-input-real-output"),
    pytest.param(lambda ops, z: ops.sin(z), id="sin-complex-input"),
    pytest.param(lambda ops, z: ops.mul.Tensor(z, z), id="mul-complex-inputs"),
])
def test_a_complex_tangent_is_refused(formulas_ops, call):
    """Forward mode: abs of a complex z has the tangent re(conj(sgn z) t); the library's real jvp
    would give t * sign(z), so a complex input or output with a tangent is refused, as in backward."""
    z = torch.randn(3, dtype=torch.complex128)
    t = torch.randn(3, dtype=torch.complex128)
    with pytest.raises(RuntimeError, match="derivatives are for real dtypes"):
        torch.func.jvp(lambda w: call(formulas_ops, w), (z,), (t,))


def test_a_real_tangent_beside_a_complex_forward_still_flows(formulas_ops):
    """Only a complex tensor that carries a tangent (or gets one) is refused: a real pair still gets
    torch's tangent, and a complex op without tangents runs as torch's does."""
    x, t = torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    ours = torch.func.jvp(formulas_ops.sin, (x,), (t,))
    torch.testing.assert_close(ours, torch.func.jvp(torch.sin, (x,), (t,)))
    z = torch.randn(3, dtype=torch.complex128)
    torch.testing.assert_close(formulas_ops.sin(z), torch.sin(z))
