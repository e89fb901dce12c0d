"""The ctx fixtures against torch itself: a Function is flagged exactly when gradgradcheck fails.

Each fixture Function listed here runs under ``torch.autograd.gradgradcheck``
(CPU, float64) on a small input: the lint must report a finding inside the
class when double backward is wrong, and stay silent when it is right. The
fixtures are this project's own files, run only here; the linter itself never
imports what it reads.
"""
from __future__ import annotations

import ast
import functools
import importlib.util
import warnings
from pathlib import Path

import pytest
import torch

from transpiler.lint.runner import lint

FIXTURES = Path(__file__).parent / "fixtures" / "ctx"
D = torch.float64


def leaf(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=D, requires_grad=True)


def constant(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=D)


# fixture -> Function -> its inputs (tensors that require grad are checked)
CASES = {
    "no_gradient_slot": {
        "CrossEntropyWithLabels": lambda: (leaf(2, 3), torch.tensor([0, 2]), torch.tensor(1.5, dtype=D)),
        "RotaryTables": lambda: (leaf(3), constant(3)),
        "SetupContextFrozenWeight": lambda: (leaf(2, 3), constant(3, 4)),
        "WeightGetsAGradient": lambda: (leaf(3), leaf(3)),
        "OperatorOnADifferentiableInput": lambda: (leaf(3),),
    },
    "outputs_and_views": {
        "SqueezedOutput": lambda: (leaf(1, 3),),
        "ViewOfTheOutputSaved": lambda: (leaf(3),),
        "BaseOfTheReturnedView": lambda: (leaf(1, 3),),
        "NonDifferentiableOutput": lambda: (leaf(3),),
        "SetupContextMarksTheIndices": lambda: (leaf(4),),
        "SavedOnlyWhereItIsTheOutput": lambda: (leaf(3),),
        "SetupContextMarksAFloatOutput": lambda: (leaf(3),),
        "ClonedOnlyWhenSaving": lambda: (leaf(3),),
    },
    "enable_grad": {
        "GraphRecordedInForward": lambda: (leaf(3),),
        "RecomputesForDoubleBackward": lambda: (leaf(3),),
        "DetachedLeaf": lambda: (leaf(3),),
        "ComputedAfterTheBlock": lambda: (leaf(3),),
    },
    "module_functions": {
        "HelperComputesTheIntermediate": lambda: (leaf(2, 3), leaf(3, 4)),
        "HelperSavesOnCtx": lambda: (leaf(3),),
        "MatmulOperator": lambda: (leaf(2, 3), constant(3, 4)),
        "CallablePassedIn": lambda: (constant(3, 2), constant(4, 2), torch.tensor(1.5, dtype=D, requires_grad=True),
                                     lambda a, b: torch.cdist(a, b) ** 2),
        "ProjectedByTheSubclass": lambda: (leaf(2, 3),),
        "LocalHelpers": lambda: (leaf(3, 2).t(), leaf(3, 4)),      # a strided x: contiguous() copies it
        "HelperOnLabels": lambda: (leaf(2, 3), torch.tensor([[0], [2]])),
        "HelperOutputReturned": lambda: (leaf(2, 3), leaf(3, 4)),
        "KernelHeldInAVariable": lambda: (leaf(2, 3),),
        "KernelHeldInAVariableOnLabels": lambda: (leaf(3), torch.tensor([0, 1, 2])),
        "KernelHeldInAVariableOutputKept": lambda: (leaf(2, 3),),
        "HelperCalledTwice": lambda: (leaf(3),),
        "CallThroughAModuleAlias": lambda: (leaf(3),),
        "ComputedByADispatchedImplementation": lambda: (leaf(3),),
        "HelperCalledTwiceOutputKept": lambda: (leaf(3),),
        "DispatchedOnLabels": lambda: (leaf(3), torch.tensor([0.0, 1.0, 2.0], dtype=D)),
    },
    "once_differentiable": {"RaisesOnlyOnOneBranch": lambda: (leaf(3),)},
    "gradients_in_forward": {
        "GradientsAccumulatedInAClosure": lambda: (leaf(4),),
        "FunctionalGradients": lambda: (leaf(3),),
        "ClosureCollectsInputs": lambda: (leaf(3), leaf(3)),
    },
    "ctx_forms": {name: (lambda: (leaf(3),)) for name in [
        "Setattr", "CtxDict", "ListOnCtx", "LambdaOnCtx", "PartialOnCtx", "ModuleGlobal",
        "ClassAttribute", "AliasedSave", "ClassmethodForward", "SetattrOfAnInput"]},
}


def load(fixture: str):
    spec = importlib.util.spec_from_file_location(f"ctx_fixture_{fixture}", FIXTURES / f"{fixture}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache                    # one lint per fixture file, not one per Function checked
def flagged_classes(fixture: str) -> frozenset[str]:
    path = FIXTURES / f"{fixture}.py"
    lines = {d.line for d in lint([str(path)]).diagnostics}
    tree = ast.parse(path.read_text())
    return frozenset(node.name for node in tree.body if isinstance(node, ast.ClassDef)
                     and any(node.lineno <= line <= node.end_lineno for line in lines))


@pytest.mark.parametrize("fixture,name", [(f, n) for f, names in CASES.items() for n in names])
def test_flagged_exactly_when_double_backward_is_wrong(fixture: str, name: str):
    torch.manual_seed(0)
    function = getattr(load(fixture), name)
    arguments = CASES[fixture][name]()
    positions = [i for i, a in enumerate(arguments) if isinstance(a, torch.Tensor) and a.requires_grad]

    def first_output(*checked):
        given = list(arguments)
        for position, tensor in zip(positions, checked):
            given[position] = tensor
        output = function.apply(*given)
        return output[0] if isinstance(output, tuple) else output

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        correct = torch.autograd.gradgradcheck(first_output, tuple(arguments[i] for i in positions),
                                               raise_exception=False)
    assert (name in flagged_classes(fixture)) == (not correct)


def test_a_backward_that_refuses_double_backward_raises_instead_of_being_wrong():
    """once_differentiable.py's RefusesDoubleBackward is silent: first order is right, and double
    backward is torch's error, not a wrong number (the spikingjelly construct of issue 23)."""
    function = load("once_differentiable").RefusesDoubleBackward
    assert "RefusesDoubleBackward" not in flagged_classes("once_differentiable")
    x = leaf(3)
    assert torch.autograd.gradcheck(function.apply, (x,))
    (first,) = torch.autograd.grad(function.apply(x).sum(), x, create_graph=False)
    assert torch.allclose(first, 2 * x.exp())
    with pytest.raises(RuntimeError, match="first-order backward only"):
        torch.autograd.grad(function.apply(x).sum(), x, create_graph=True)
