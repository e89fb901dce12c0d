"""The override takes the tensor inputs derivatives.yaml gives no gradient as torch does
(``transpile import-yaml`` records torchgen's rule on the formula: ``@yaml_entry(ignores_grad=...)``,
``@yaml_entry(refuses_grad=...)``), and refuses at install an operator whose output is a nested
tensor viewing a strided input, saying why."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "yaml"))  # corpus_override imports its neighbours as a script
import corpus_override

from formulas.torch import OverrideError, override, overridable
from tests.torch_override.conftest import importable_package

GAMMA_GRAD = '''
from formulas import at, derivative
from transpiler.yaml_import.dialect import yaml_entry

@derivative("_standard_gamma_grad(Tensor self, Tensor output) -> Tensor")
{decorator}
def _standard_gamma_grad(self, output):
    result = at._standard_gamma_grad(self, output)
    def backward(grad, *, needs_input_grad):
        if needs_input_grad[0]:
            raise NotImplementedError("the derivative for '_standard_gamma_grad' is not implemented.")
        return None, None
    return result, backward
'''

ENTRIES = '''
from formulas import at, derivative
from transpiler.yaml_import.dialect import yaml_entry

@derivative("soft_margin_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor")
@yaml_entry(refuses_grad=("target",))
def soft_margin_loss(self, target, reduction):
    result = at.soft_margin_loss(self, target, reduction)
    def backward(grad):
        # d/dx log(1 + exp(-t x)) = -t sigmoid(-t x); the mean (reduction 1) divides by the count
        slope = at.mul(at.neg(target), at.sigmoid(at.neg(at.mul(target, self))))
        return at.div(at.mul(slope, grad), self.numel() if reduction == 1 else 1), None
    return result, backward

@derivative("_nested_view_from_buffer(Tensor(a) self, Tensor nested_size, Tensor nested_strides, Tensor offsets) "
            "-> Tensor(a)")
@yaml_entry(non_differentiable=("nested_size", "nested_strides"), refuses_grad=("offsets",))
def _nested_view_from_buffer(self, nested_size, nested_strides, offsets):
    result = at._nested_view_from_buffer(self, nested_size, nested_strides, offsets)
    def backward(grad):
        return at.values(grad), None, None, None
    return result, backward
'''


@pytest.fixture
def entries(tmp_path, monkeypatch):
    with importable_package(tmp_path, monkeypatch, "torchgenops", {"entries.py": ENTRIES}) as package:
        yield package


@pytest.mark.parametrize("decorator, expected", [
    ('@yaml_entry(ignores_grad=("output",))', ("proven", 1, corpus_override.corpus_proof.WITHOUT_GRADIENT)),
    ("", ("failed", 1, "OP: an output carries a gradient where torch's does not")),
])
def test_an_input_torchgen_ignores_carries_no_gradient(tmp_path, monkeypatch, decorator, expected):
    """``_standard_gamma_grad``'s ``output`` has no line (torchgen ignores it; ``self``'s gradient is
    ``not_implemented``): through the override no output carries a gradient through it, as in torch;
    without the imported rule one would."""
    generator = torch.Generator().manual_seed(0)
    x = (torch.rand(4, dtype=torch.float64, generator=generator) + 0.5).requires_grad_()
    output = torch._standard_gamma(x.detach(), generator=generator).requires_grad_()
    with importable_package(tmp_path, monkeypatch, "gammaops", {"entries.py": GAMMA_GRAD.format(decorator=decorator)}):
        assert corpus_override.prove("_standard_gamma_grad", "OP", False, [((x, output), {})],
                                     package="gammaops") == expected


def test_an_input_torch_refuses_to_see_requiring_grad_raises_torchs_error(entries):
    """``soft_margin_loss``'s ``target`` has no line: requiring grad in grad mode, it raises torch's
    error inside the override too; constant, the gradient is torch's; in no_grad mode nothing is checked."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(5, dtype=torch.float64, generator=generator, requires_grad=True)
    target = torch.randn(5, dtype=torch.float64, generator=generator)
    loss = torch.ops.aten.soft_margin_loss.default
    with pytest.raises(RuntimeError) as theirs:
        loss(x, target.requires_grad_(), 1)
    expected = torch.autograd.grad(loss(x, target.detach(), 1), x)
    with override(["soft_margin_loss"], package=entries):
        for args, kwargs in (((x.detach(), target, 1), {}), ((x.detach(),), {"target": target})):
            with pytest.raises(RuntimeError) as mine:
                loss(*args, **kwargs)
            assert str(mine.value) == str(theirs.value)
        with torch.no_grad():
            assert not loss(x, target, 1).requires_grad
        value = loss(x, target.detach(), 1)
        assert value.grad_fn.name().endswith("FormulaBackward")
        torch.testing.assert_close(torch.autograd.grad(value, x), expected)


def test_an_output_that_is_a_nested_tensor_viewing_a_strided_input_is_refused_at_install(entries):
    reason = overridable(entries)[1]["_nested_view_from_buffer"]
    assert reason.startswith("_nested_view_from_buffer: its output is a nested tensor viewing self")
    assert "a torch.autograd.Function cannot return a nested tensor made from strided inputs" in reason
    with pytest.raises(OverrideError, match="nested tensor viewing self"):
        with override(["_nested_view_from_buffer"], package=entries):
            pass
    assert "soft_margin_loss" in overridable(entries)[0]
