"""Where the library gives no gradient torch gives, the compiled op refuses clearly, as the engine
and the override do (``tests/engine/test_torch_edges.py``), rather than return another one."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_sparse_embedding_is_refused_where_torchs_weight_gradient_is_sparse(formulas_ops):
    indices = torch.tensor([0, 2])
    theirs = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    torch.ops.aten.embedding(theirs, indices, -1, False, True).sum().backward()
    assert theirs.grad.layout == torch.sparse_coo
    ours = theirs.detach().clone().requires_grad_()
    with pytest.raises(NotImplementedError, match=r"^embedding\(sparse=True\): the formula library gives no sparse"):
        formulas_ops.embedding(ours, indices, -1, False, True).sum().backward()
    assert ours.grad is None
    dense = formulas_ops.embedding(ours, indices, -1, False, False)
    (gradient,) = torch.autograd.grad(dense.sum(), ours)
    torch.testing.assert_close(gradient, theirs.grad.to_dense())
