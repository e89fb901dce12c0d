"""``torch.vmap`` over the compiled operators that take a list of tensors (``index.Tensor``'s and
``index_put``'s ``Tensor?[]``, ``cat``'s and ``stack``'s ``Tensor[]``), for which torch generates
no fallback: the generated library registers the rule of ``vmap.h`` (the operator per example,
stacked), so vmap and what is built on it give the built-in operators' values and gradients."""
from __future__ import annotations

import pytest

from transpiler.cpp.nodes import vmap_by_example
from transpiler.schema import parse_schema

torch = pytest.importorskip("torch")


def test_only_functional_operators_taking_a_list_of_tensors_get_the_rule():
    assert vmap_by_example(parse_schema("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor")) == "index.Tensor"
    assert vmap_by_example(parse_schema("cat(Tensor[] tensors, int dim=0) -> Tensor")) == "cat"
    assert vmap_by_example(parse_schema("sin(Tensor self) -> Tensor")) is None     # torch's fallback runs it
    # run per example, an in-place operator would write slices, not its argument: torch's refusal stays
    assert vmap_by_example(parse_schema("index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, "
                                        "bool accumulate=False) -> Tensor(a!)")) is None


def test_vmap_over_compiled_operators_taking_a_list_of_tensors_equals_torch(formulas_ops):
    x = torch.linspace(0.0, 1.0, 15, dtype=torch.float64).reshape(3, 5).requires_grad_()
    rows = torch.tensor([[0, 1], [2, 3], [4, 4]])
    ours = torch.vmap(lambda t, i: formulas_ops.index.Tensor(t, [i]))(x, rows)
    theirs = torch.vmap(lambda t, i: t[i])(x, rows)
    assert torch.equal(ours, theirs)
    weights = torch.arange(6.0, dtype=torch.float64).reshape(3, 2)
    assert torch.equal(torch.autograd.grad((ours * weights).sum(), x)[0],
                       torch.autograd.grad((theirs * weights).sum(), x)[0])
    shared = torch.tensor([0, 2, 4])
    for transform in (torch.func.jacrev, torch.func.jacfwd):
        assert torch.equal(transform(lambda t: formulas_ops.index.Tensor(t, [shared]))(x.detach()[0]),
                           transform(lambda t: t[shared])(x.detach()[0]))
    assert torch.allclose(torch.vmap(torch.func.grad(lambda t: formulas_ops.index.Tensor(t, [shared]).pow(2).sum()))(x),
                          torch.vmap(torch.func.grad(lambda t: t[shared].pow(2).sum()))(x), rtol=0, atol=0)
    cube = torch.linspace(-1.0, 1.0, 30, dtype=torch.float64).reshape(2, 3, 5)
    assert torch.equal(torch.vmap(lambda t, i: formulas_ops.index.Tensor(t, [None, i]))(cube, rows[:2]),
                       torch.vmap(lambda t, i: t[:, i])(cube, rows[:2]))           # a None entry: a whole dim
    nested = torch.tensor([[[0, 1], [1, 2], [3, 4]], [[4, 3], [2, 1], [0, 0]]])
    assert torch.equal(torch.vmap(torch.vmap(lambda t, i: formulas_ops.index.Tensor(t, [i])))(cube, nested),
                       torch.vmap(torch.vmap(lambda t, i: t[i]))(cube, nested))
    outer_only = torch.tensor([[0, 1], [1, 2], [2, 0]])      # batched by the inner vmap, cube by the outer
    assert torch.equal(
        torch.vmap(torch.vmap(lambda t, i: formulas_ops.index.Tensor(t, [i]), in_dims=(None, 0)),
                   in_dims=(0, None))(cube, outer_only),
        torch.vmap(torch.vmap(lambda t, i: t[i], in_dims=(None, 0)), in_dims=(0, None))(cube, outer_only))
    assert torch.equal(torch.vmap(lambda t, i, v: formulas_ops.index_put(t, [i], v))(x, rows, weights),
                       torch.vmap(lambda t, i, v: torch.index_put(t, (i,), v))(x, rows, weights))
    tail = torch.ones(3, 2, dtype=torch.float64)
    assert torch.equal(torch.vmap(lambda a, b: formulas_ops.cat([a, b], 0))(x, tail),
                       torch.vmap(lambda a, b: torch.cat([a, b]))(x, tail))
    assert torch.equal(torch.vmap(lambda a: formulas_ops.cat([a, tail[0]], 0))(x),       # an entry not batched
                       torch.vmap(lambda a: torch.cat([a, tail[0]]))(x))
    assert torch.equal(torch.vmap(lambda a, b: formulas_ops.stack([a, b], 1), in_dims=(1, None))(x, x[:, 0]),
                       torch.vmap(lambda a, b: torch.stack([a, b], 1), in_dims=(1, None))(x, x[:, 0]))
