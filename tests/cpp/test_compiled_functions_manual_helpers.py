"""The FunctionsManual-named helpers compiled, on the paths the op cases (float64 only) do not
reach: ``handle_r_to_c`` and ``maybe_multiply`` in the nodes of ``add.Tensor`` and ``sub.Tensor``,
against torch's built-in ops. (The helpers with torch as the backend:
``tests/test_functions_manual_helpers.py``.)"""
from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("other_dtype", [torch.complex128, torch.float32], ids=str)
@pytest.mark.parametrize("alpha", [1, 2.5])
def test_compiled_add_and_sub_give_each_input_its_gradient(formulas_ops, op, other_dtype, alpha):
    """A float64 input of a complex (or float32 with float64) sum gets torch's gradient, made
    real by ``handle_r_to_c`` in the node itself: torch's engine would otherwise cast a complex
    gradient to real with a warning that the imaginary part is discarded."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    y = torch.randn(2, 1, dtype=other_dtype, generator=generator, requires_grad=True)
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
