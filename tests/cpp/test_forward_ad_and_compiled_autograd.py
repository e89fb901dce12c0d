"""Tiers F1 and CA: every formula, compiled, in forward mode and under compiled autograd.

For each OpCase (tests/op_cases.py):

* F1: ``torch.autograd.gradcheck(..., check_forward_ad=True)`` passes on
  ``torch.ops.formulas.<op>`` (float64), and ``torch.func.jvp`` of it equals
  ``torch.func.jvp`` of the built-in op on the same inputs and random tangents;
* CA: first-order gradients computed under ``torch._dynamo.compiled_autograd``
  equal eager ones, and the compiled graph calls the node's bound functional
  (``formulas_<Node>``), so the compiled path really ran.
"""
from __future__ import annotations

import pytest

from tests.cpp.test_compiled_ops import compiled_op
from tests.op_cases import ALL_CASES, OpCase, differentiable_view, torch_jvp_op

torch = pytest.importorskip("torch")


def _tangents(leaves: list, seed: int) -> tuple:
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(x.shape, dtype=x.dtype, generator=generator) for x in leaves)


def _as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


@pytest.mark.tier("F1")
@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.name)
def test_forward_ad_gradcheck_and_jvp_equal_builtin(formulas_ops, case: OpCase):
    call, leaves = differentiable_view(case, compiled_op(formulas_ops, case.op))
    assert torch.autograd.gradcheck(call, leaves, check_forward_ad=True, check_backward_ad=False,
                                    check_undefined_grad=False, check_batched_grad=False, raise_exception=True)
    builtin, _ = differentiable_view(case, torch_jvp_op(case.op))
    primals = tuple(x.detach() for x in leaves)
    tangents = _tangents(leaves, seed=0)
    ours = torch.func.jvp(call, primals, tangents)
    theirs = torch.func.jvp(builtin, primals, tangents)
    for mine, expected in zip(ours, theirs):   # outputs, then their tangents
        for a, b in zip(_as_tuple(mine), _as_tuple(expected), strict=True):
            torch.testing.assert_close(a, b)


def test_forward_ad_inside_dual_level(formulas_ops):
    """The issue's report: ``formulas.sin`` of a dual tensor had no tangent."""
    import torch.autograd.forward_ad as fwAD

    x, t = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    with fwAD.dual_level():
        y = formulas_ops.sin(fwAD.make_dual(x, t))
        torch.testing.assert_close(fwAD.unpack_dual(y).tangent, torch.cos(x) * t)
        plain = formulas_ops.sin(x)              # no tangent in, none out
        assert fwAD.unpack_dual(plain).tangent is None


def test_reverse_over_forward(formulas_ops):
    """The jvp runs with autograd on: the tangent has a graph back to the primal, so its
    gradient (a Hessian-vector product) is right."""
    import torch.autograd.forward_ad as fwAD

    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    v = torch.randn(4, dtype=torch.float64)
    with fwAD.dual_level():
        tangent = fwAD.unpack_dual(formulas_ops.sin(fwAD.make_dual(x, v))).tangent
        (hvp,) = torch.autograd.grad(tangent.sum(), x)
    torch.testing.assert_close(hvp, -torch.sin(x.detach()) * v)


def test_functorch_transforms_compose(formulas_ops):
    """The op registers one CompositeImplicitAutograd kernel: functorch runs it on its wrapper
    tensors, whose level-0 tangent is that level's, so jvp nests (forward over forward) and
    jacfwd works."""
    x, t = torch.randn(4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)

    def tangent(a):
        return torch.func.jvp(formulas_ops.sin, (a,), (t,))[1]

    torch.testing.assert_close(torch.func.jvp(tangent, (x,), (t,))[1], -torch.sin(x) * t * t)
    torch.testing.assert_close(torch.func.jacfwd(formulas_ops.mul.Tensor, argnums=1)(x, x), torch.diag(x))


def _compiled_autograd_gradients(call, leaves: list, upstream: list) -> tuple[list, str]:
    from torch._dynamo import compiled_autograd

    graphs = []

    def compiler(graph):
        graphs.append(graph)
        return graph

    outs = tuple(o for o in _as_tuple(call(*leaves)) if o.requires_grad)
    compiled_autograd.reset()      # a graph cached for an earlier case of the op would be reused
    with compiled_autograd._enable(compiler):
        grads = torch.autograd.grad(outs, leaves, upstream, allow_unused=True)
    assert len(graphs) == 1, "compiled autograd did not capture the backward"
    return list(grads), graphs[0].code


@pytest.mark.tier("CA")
@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.name)
def test_compiled_autograd_equals_eager(formulas_ops, case: OpCase):
    call, leaves = differentiable_view(case, compiled_op(formulas_ops, case.op))
    outs = tuple(o for o in _as_tuple(call(*leaves)) if o.requires_grad)   # total_weight carries no gradient
    upstream = list(_tangents(outs, seed=1))
    eager = torch.autograd.grad(outs, leaves, upstream, allow_unused=True)
    compiled, code = _compiled_autograd_gradients(call, leaves, upstream)
    node = next(o.grad_fn for o in outs if o.grad_fn is not None)
    assert f"formulas_{node.name()}" in code
    for a, b in zip(compiled, eager, strict=True):
        if a is None or b is None:
            assert a is None and b is None
        else:
            torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_autograd_with_torch_compile(formulas_ops, backend: str):
    """A chain of generated nodes under compiled autograd with Dynamo tracing the graph
    (backends "eager" and "aot_eager"), as torch's own tests enable it."""
    from torch._dynamo import compiled_autograd

    ops = formulas_ops
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    y = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)

    def loss(a, b):
        var, mean = ops.var_mean.dim(a, [1])
        values, _ = ops.max.dim(a, 1)
        joined = ops.cat([a, b], 0)
        product = ops.addmm(ops.sin(a)[0], ops.t(a), a, beta=0.5, alpha=2)
        return (var * mean).sum() + values.sum() + ops.sum(ops.mul.Scalar(joined, 3.0)) + ops.sum(product)

    eager = torch.autograd.grad(loss(x, y), (x, y))
    torch._dynamo.reset()
    with compiled_autograd._enable(torch.compile(backend=backend)):
        loss(x, y).backward()
    torch.testing.assert_close(x.grad, eager[0])
    torch.testing.assert_close(y.grad, eager[1])
