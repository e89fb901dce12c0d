"""Operators declared ``nondifferentiable``, compiled: tiers CT and F1.

For each case of ``op_cases.NONDIFFERENTIABLE_CASES``, ``torch.ops.formulas.<op>`` (the
generated wrapper, ATen's operator below autograd) on inputs whose floating tensors require grad:

* CT: returns the built-in op's values, dtype and shape, and its output requires no grad (nor
  the built-in's: torch gives these operators no gradient);
* F1: ``torch.func.jvp`` of it equals that of the built-in op (the output and a zero tangent).
"""
from __future__ import annotations

import pytest

from tests.cpp.test_compiled_ops import compiled_op
from tests.op_cases import NONDIFFERENTIABLE_CASES, OpCase, torch_args, torch_op

torch = pytest.importorskip("torch")


def _floating_positions(case: OpCase) -> list[int]:
    return [i for i, a in enumerate(case.args) if getattr(a, "dtype", None) == "float64"]


@pytest.mark.tier("CT")
@pytest.mark.parametrize("case", NONDIFFERENTIABLE_CASES, ids=lambda c: c.name)
def test_values_equal_builtin_without_gradient(formulas_ops, case: OpCase):
    args, kwargs = torch_args(case)
    want = torch_op(case.op)(*args, **kwargs)
    got = compiled_op(formulas_ops, case.op)(*args, **kwargs)
    assert not want.requires_grad and not got.requires_grad and got.grad_fn is None
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.tier("F1")
@pytest.mark.parametrize("case", [c for c in NONDIFFERENTIABLE_CASES if _floating_positions(c)], ids=lambda c: c.name)
def test_jvp_equals_builtin(formulas_ops, case: OpCase):
    floats = _floating_positions(case)
    args, kwargs = torch_args(case, requires_grad=False)
    generator = torch.Generator().manual_seed(0)
    tangents = tuple(torch.randn(args[i].shape, dtype=args[i].dtype, generator=generator) for i in floats)

    def calling(fn):
        def call(*primals):
            filled = list(args)
            for i, p in zip(floats, primals):
                filled[i] = p
            return fn(*filled, **kwargs)
        return call

    primals = tuple(args[i] for i in floats)
    ours = torch.func.jvp(calling(compiled_op(formulas_ops, case.op)), primals, tangents)
    theirs = torch.func.jvp(calling(torch_op(case.op)), primals, tangents)
    for mine, expected in zip(ours, theirs, strict=True):    # the output, then its tangent
        torch.testing.assert_close(mine, expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.uint8])
def test_a_cast_to_an_integer_dtype_has_no_gradient_as_in_torch(formulas_ops, dtype):
    """``x.long()`` is ``_to_copy(x, dtype=int64)``: on a tensor requiring grad (or carrying a
    tangent) torch returns a result with no history and no tangent, and no error; so does the
    compiled op, while a cast to another floating dtype keeps both."""
    import torch.autograd.forward_ad as fwAD

    x = torch.tensor([-1.5, 0.0, 2.5], dtype=torch.float64, requires_grad=True)
    want = torch.ops.aten._to_copy(x, dtype=dtype)
    got = formulas_ops._to_copy(x, dtype=dtype)
    assert torch.equal(got, want) and got.dtype == dtype
    assert not want.requires_grad and not got.requires_grad and got.grad_fn is None
    with fwAD.dual_level():
        dual = fwAD.make_dual(x.detach(), torch.ones_like(x))
        assert fwAD.unpack_dual(torch.ops.aten._to_copy(dual, dtype=dtype)).tangent is None
        assert fwAD.unpack_dual(formulas_ops._to_copy(dual, dtype=dtype)).tangent is None
        kept = fwAD.unpack_dual(formulas_ops._to_copy(dual, dtype=torch.float32)).tangent
        assert kept is not None and torch.equal(kept, torch.ones(3, dtype=torch.float32))
    (g,) = torch.autograd.grad(formulas_ops._to_copy(x, dtype=torch.float32).sum(), x)
    assert torch.equal(g, torch.ones_like(x))
