"""The override's generated fast path (``formulas.torch.generate``): taken for the formulas it
covers, the general path kept for the others, and the same results as the general path."""
from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD

from formulas.torch import override
from formulas.torch.override import _formulas, aten_overload, overridable
from tests.op_cases import ALL_CASES, differentiable_view, first_and_second_order
from tests.torch_override.conftest import importable_package

BENCHMARKED = ("sin", "mul.Tensor", "sum.dim_IntList", "logsumexp")
FORMULAS = _formulas("formulas")
GENERATED = {op for op in overridable()[0] if FORMULAS[op].generated is not None}
# the first case of every shipped op the generator covers
CASES = list({case.op: case for case in reversed(ALL_CASES) if case.op in GENERATED}.values())


def _node_module(output: torch.Tensor) -> str:
    """The module of the autograd.Function that recorded ``output``'s node."""
    return output.grad_fn._forward_cls.__module__


def test_the_benchmarked_ops_take_the_generated_path():
    x = torch.randn(3, 4, requires_grad=True)
    calls = {"sin": (x,), "mul.Tensor": (x, x.detach() + 1), "sum.dim_IntList": (x, [1]), "logsumexp": (x, [1])}
    for op in BENCHMARKED:
        assert "def _F_kernel(" in FORMULAS[op].generated.source, FORMULAS[op].not_generated
        with override([op]):
            out = aten_overload(op)(*calls[op])
        assert _node_module(out) == "formulas.torch.generate" and out.grad_fn.name().endswith("FormulaBackward")
    assert len(GENERATED) > 150      # of the 261 overridable: every view and in-place operator is not


def test_a_formula_the_generator_does_not_cover_keeps_the_general_path(tmp_path, monkeypatch):
    with importable_package(tmp_path, monkeypatch, "scaledops", {"ops.py": '''
        from formulas import at, derivative

        SCALE = 3.0

        @derivative("exp(Tensor self) -> Tensor")
        def exp(self):
            result = at.exp(self)
            def backward(grad):
                return grad * result * SCALE
            return result, backward

        @derivative("sin(Tensor self) -> Tensor")
        def sin(self):
            result = at.sin(self)
            def backward(grad):
                return grad * at.cos(self) * 3.0
            return result, backward
    '''}) as package:
        formulas = _formulas(package)
        assert formulas["exp"].generated is None and "the name SCALE" in formulas["exp"].not_generated
        assert formulas["sin"].generated is not None
        x = torch.randn(5, dtype=torch.float64, requires_grad=True)
        with override(["exp", "sin"], package=package):
            ys = torch.exp(x), torch.sin(x)
            grads = [torch.autograd.grad(y.sum(), x)[0] for y in ys]
        assert [_node_module(y) for y in ys] == ["formulas.torch.function", "formulas.torch.generate"]
        torch.testing.assert_close(grads[0], 3 * torch.exp(x.detach()))
        torch.testing.assert_close(grads[1], 3 * torch.cos(x.detach()))


def test_a_formula_file_edited_after_import_is_not_generated_from_its_new_text(tmp_path, monkeypatch):
    """The generator reads the front-end's model, stamped at import: an edited file is never the
    source of the generated code (the imported function multiplies by 3, the edited text by 50)."""
    with importable_package(tmp_path, monkeypatch, "editedops", {"ops.py": '''
        from formulas import at, derivative, helper

        @helper
        def tripled(grad):
            return grad * 3.0

        @derivative("sin(Tensor self) -> Tensor")
        def sin(self):
            result = at.sin(self)
            def backward(grad):
                return tripled(grad) * at.cos(self)
            return result, backward
    '''}) as package:
        formulas = _formulas(package)
        path = tmp_path / package / "ops.py"
        path.write_text(path.read_text().replace("3.0", "50.0"))
        assert formulas["sin"].generated is None and "changed after its formulas were imported" in \
            formulas["sin"].not_generated
        x = torch.randn(5, dtype=torch.float64, requires_grad=True)
        with override(["sin"], package=package):
            grad, = torch.autograd.grad(torch.sin(x).sum(), x)
        torch.testing.assert_close(grad, 3 * torch.cos(x.detach()))


def _general(op: str):
    """``op`` through the general path (the formula as written), whatever its kernel is."""
    formula = FORMULAS[op]
    return lambda *args, **kwargs: formula.call(formula.bind(args, kwargs))


def _tangents(fn, case) -> list[torch.Tensor]:
    call, leaves = differentiable_view(case, fn)
    generator = torch.Generator().manual_seed(1)
    with fwAD.dual_level():
        out = call(*(fwAD.make_dual(x, torch.randn(x.shape, dtype=x.dtype, generator=generator)) for x in leaves))
        return [fwAD.unpack_dual(o).tangent for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_generated_path_equals_the_general_path(case):
    """Outputs, first- and second-order gradients exactly the general path's; forward mode (the
    generated kernel hands it to the general path) the jvp's."""
    aten = aten_overload(case.op)
    with override([case.op]):
        call, leaves = differentiable_view(case, aten)
        assert _node_module(call(*leaves)) == "formulas.torch.generate"
        generated = first_and_second_order(aten, case)
        general = first_and_second_order(_general(case.op), case)
        if FORMULAS[case.op].has_jvp:
            for mine, theirs in zip(_tangents(aten, case), _tangents(_general(case.op), case)):
                assert torch.equal(mine, theirs)
    for order in range(3):
        assert len(generated[order]) == len(general[order])
        for mine, theirs in zip(generated[order], general[order]):
            assert torch.equal(mine, theirs)
