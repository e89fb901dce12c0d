"""Behaviour of the generated nodes beyond gradcheck: names, saved variables, masks, partial outputs."""
from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

OUT_CPP = Path(__file__).resolve().parents[2] / "out_cpp"


def test_node_is_named_like_torchgen(formulas_ops):
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    assert formulas_ops.sin(x).grad_fn.name() == "SinBackward0"
    assert formulas_ops.mul.Tensor(x, x).grad_fn.name() == "MulTensorBackward0"


def test_no_node_without_requires_grad(formulas_ops):
    assert formulas_ops.sin(torch.randn(3)).grad_fn is None
    with torch.no_grad():
        assert formulas_ops.sin(torch.randn(3, requires_grad=True)).grad_fn is None


def test_release_variables_frees_saved_tensors(formulas_ops):
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    y = formulas_ops.sin(x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_release_variables_frees_a_saved_index_list(formulas_ops):
    # index.Tensor saves its Tensor?[] as SavedVariables in a vector: released, torch's error, not
    # an index_put with no index
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    y = formulas_ops.index.Tensor(x, [None, torch.tensor([0, 2])]).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_only_requested_gradients(formulas_ops):
    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, dtype=torch.float64)           # needs no gradient
    (gx,) = torch.autograd.grad(formulas_ops.mul.Tensor(x, w).sum(), [x])
    torch.testing.assert_close(gx, w.expand(2, 3))
    assert w.grad is None


def test_undefined_gradient_of_one_output(formulas_ops):
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    for used in (0, 1):   # only var, only mean: the other output's gradient is undefined
        ours = formulas_ops.var_mean.dim(x, [1], True, False)[used].sum()
        builtin = torch.ops.aten.var_mean.dim(x, [1], True, False)[used].sum()
        torch.testing.assert_close(torch.autograd.grad(ours, x)[0], torch.autograd.grad(builtin, x)[0])


def test_saved_variable_inference_in_generated_code():
    reductions = (OUT_CPP / "reductions.cpp").read_text()
    sum_node = reductions[reductions.index("struct SumBackward0"):reductions.index("at::Tensor sum_all(")]
    assert "std::vector<int64_t> self_sizes_" in sum_node         # metadata, not the tensor
    assert "torch::autograd::SavedVariable" not in sum_node
    unary = (OUT_CPP / "pointwise_unary.cpp").read_text()
    assert "grad_fn->result_ = torch::autograd::SavedVariable(result, true);" in unary   # exp: output
    assert "grad_fn->self_ = torch::autograd::SavedVariable(self, false);" in unary      # sin: input
    assert "formulas::runtime::should_compute(*this, other_ix)" in (OUT_CPP / "pointwise_binary.cpp").read_text()
