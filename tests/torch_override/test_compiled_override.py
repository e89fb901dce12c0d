"""``formulas.torch.override(compiled=True)``: the package's transpiled C++ nodes stand in for aten's autograd.

A small formula package (a deliberately wrong ``sin``, a right ``cos`` with its jvp, an
in-place ``mul_.Tensor``) is transpiled and built once (cached in ``build/``), and its library
loaded: inside the context torch's own ``torch.sin`` records the compiled node and computes what
the package's C++ computes, registered for it from C++ (no Python per call, torch's own
kernel below autograd); outside, torch's kernels are back, the dispatch table as before.
"""
from __future__ import annotations

import sys
import textwrap

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch.utils._python_dispatch import TorchDispatchMode

from formulas.torch import install, overridable, override, uninstall
from tests.torch_override.aliasing import IN_PLACE_SCENARIOS, IN_PLACE_SOURCE, VIEW_SCENARIOS, same_as_torch
from tests.cpp.compiled import REPO, build_library
from transpiler.build import load_library
from transpiler.cpp import generate

PACKAGE = "compiledops"
SOURCE = '''
from formulas import at, derivative


@derivative("sin(Tensor self) -> Tensor")
def sin(self):
    result = at.sin(self)
    def backward(grad):
        return grad * at.cos(self) * 2.0
    return result, backward


@derivative("cos(Tensor self) -> Tensor")
def cos(self):
    result = at.cos(self)
    def backward(grad):
        return -grad * at.sin(self)
    def jvp(self_t):
        return -self_t * at.sin(self)
    return result, backward
'''

#: derivatives.yaml entries with tensor inputs no line names, as ``transpile import-yaml`` records
#: them: torch gives ``output`` no edge and refuses a ``target`` requiring grad in grad mode.
TORCHGEN_INPUTS = '''
from formulas import at, derivative
from transpiler.yaml_import.dialect import yaml_entry


@derivative("_standard_gamma_grad(Tensor self, Tensor output) -> Tensor")
@yaml_entry(ignores_grad=("output",))
def _standard_gamma_grad(self, output):
    result = at._standard_gamma_grad(self, output)
    def backward(grad, *, needs_input_grad):
        if needs_input_grad[0]:
            raise NotImplementedError("the derivative for '_standard_gamma_grad' is not implemented.")
        return None, None
    return result, backward


@derivative("soft_margin_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor")
@yaml_entry(refuses_grad=("target",))
def soft_margin_loss(self, target, reduction):
    result = at.soft_margin_loss(self, target, reduction)
    def backward(grad):
        # d/dx log(1 + exp(-t x)) = -t sigmoid(-t x); the mean (reduction 1) divides by the count
        slope = at.mul(at.neg(target), at.sigmoid(at.neg(at.mul(target, self))))
        return at.div(at.mul(slope, grad), self.numel() if reduction == 1 else 1), None
    return result, backward
'''


@pytest.fixture(scope="module")
def compiled_package(tmp_path_factory):
    """The package importable and its library built and loaded; its name."""
    root = tmp_path_factory.mktemp("compiled")
    package = root / PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "trig.py").write_text(textwrap.dedent(SOURCE))
    (package / "in_place.py").write_text(IN_PLACE_SOURCE)
    (package / "torchgen_inputs.py").write_text(TORCHGEN_INPUTS)
    assert generate.main(["--formulas", str(package), "--out", str(root / "out")]) == 0
    load_library(build_library(root / "out", REPO / "build"))
    sys.path.insert(0, str(root))
    yield PACKAGE
    sys.path.remove(str(root))
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def leaf(seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(6, dtype=torch.float64, generator=generator).requires_grad_()


def test_the_compiled_node_runs_inside_the_context_only(compiled_package):
    x = leaf()
    right = torch.cos(x.detach())
    with override(["sin"], package=compiled_package, compiled=True):
        y = torch.sin(x)
        assert type(y.grad_fn).__name__ == "CppFunction"        # the transpiled node, not torch's
        (grad,) = torch.autograd.grad(y.sum(), x)
        torch.testing.assert_close(grad, 2 * right)
    y = torch.sin(x)
    assert type(y.grad_fn).__name__ == "SinBackward0"
    torch.testing.assert_close(torch.autograd.grad(y.sum(), x)[0], right)


def python_calls(function) -> tuple[int, set[str]]:
    """The fewest Python calls ``function()`` makes over five runs (``sys.setprofile`` "call"
    events: one-off work such as a cache fill or a collector callback lands in a single run) and
    the files of every Python function any of the runs called."""
    counts, files = [], set()
    for _ in range(5):
        calls = 0

        def count(frame, event, arg):
            nonlocal calls
            if event == "call":
                calls += 1
                files.add(frame.f_code.co_filename)

        sys.setprofile(count)
        try:
            function()
        finally:
            sys.setprofile(None)
        counts.append(calls)
    return min(counts), files


class AtenCalls(TorchDispatchMode):
    """The aten operators reaching the dispatcher below autograd, in order."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


def test_the_library_registers_from_cpp_and_uninstall_restores_the_dispatch_table(compiled_package):
    x = leaf(5)
    before = torch._C._dispatch_dump_table("aten::cos")
    def forward_and_backward():
        return torch.autograd.grad(torch.cos(x).sum(), x)

    forward_and_backward()                  # warm: first calls fill caches
    builtin, _ = python_calls(forward_and_backward)
    with override(["cos"], package=compiled_package, compiled=True):
        assert torch._C._dispatch_dump_table("aten::cos") != before
        forward_and_backward()
        # no Python kernel: forward and backward make the Python calls torch's own do, and
        # none of them is ours (neither formulas' nor the package's)
        calls, files = python_calls(forward_and_backward)
        assert calls == builtin
        ours = (str(REPO / "formulas"), PACKAGE)
        assert not [f for f in files if any(part in f for part in ours)]
        with AtenCalls() as below:          # below autograd: torch's own aten::cos, once
            y = torch.cos(x)
        assert below.ops == [torch.ops.aten.cos.default] and type(y.grad_fn).__name__ == "CppFunction"
    assert torch._C._dispatch_dump_table("aten::cos") == before


def test_compiled_installations_nest_and_come_off_in_any_order(compiled_package):
    x = leaf(6)
    first = install(["sin"], package=compiled_package, compiled=True)
    second = install(["sin", "cos"], package=compiled_package, compiled=True)
    uninstall(first)                                          # the one below goes; the top stays
    assert type(torch.sin(x).grad_fn).__name__ == "CppFunction"
    uninstall(second)
    uninstall(second)                                         # idempotent
    assert torch.sin(x).grad_fn.name() == "SinBackward0" and torch.cos(x).grad_fn.name() == "CosBackward0"


def test_compiled_nodes_pass_gradcheck_gradgradcheck_and_forward_ad(compiled_package):
    x = leaf(1)
    with override(["cos"], package=compiled_package, compiled=True):
        assert torch.autograd.gradcheck(torch.cos, (x,), check_forward_ad=True)
        assert torch.autograd.gradgradcheck(torch.cos, (x,))
        (grad,) = torch.autograd.grad(torch.cos(x).sum(), x, create_graph=True)
        (second,) = torch.autograd.grad(grad.sum(), x)
        tangent = torch.ones(6, dtype=torch.float64)
        with fwAD.dual_level():
            forward = fwAD.unpack_dual(torch.cos(fwAD.make_dual(x.detach(), tangent))).tangent
    torch.testing.assert_close(grad, -torch.sin(x.detach()))
    torch.testing.assert_close(second, -torch.cos(x.detach()))
    torch.testing.assert_close(forward, -torch.sin(x.detach()))


def test_compiled_and_python_overrides_nest(compiled_package):
    x = leaf(2)
    right = torch.cos(x.detach())
    outer = install(["sin"], package=compiled_package, compiled=True)
    with override(["sin"]):                                  # the Python path of the shipped formula
        assert torch.sin(x).grad_fn.name() == "SinFormulaBackward"
        torch.testing.assert_close(torch.autograd.grad(torch.sin(x).sum(), x)[0], right)
    torch.testing.assert_close(torch.autograd.grad(torch.sin(x).sum(), x)[0], 2 * right)
    uninstall(outer)
    assert torch.sin(x).grad_fn.name() == "SinBackward0"


def test_overridable_on_the_compiled_path_lists_what_the_library_registers(compiled_package):
    accepted, refused = overridable(compiled_package, compiled=True)
    assert sorted(accepted) == ["_standard_gamma_grad", "cos", "mul_.Tensor", "sin", "soft_margin_loss"]
    assert refused == {}


@pytest.mark.parametrize("scenario", VIEW_SCENARIOS.values(), ids=VIEW_SCENARIOS)
def test_views_and_in_place_writes_through_them_equal_torchs_compiled(formulas_ops, scenario):
    """The shipped library's compiled views (the node's kernel marks the output a view of its input,
    as ADInplaceOrView does, then sets its history) stand in for torch's: writes through them too."""
    same_as_torch(scenario, lambda: override(compiled=True))


@pytest.mark.parametrize("scenario", IN_PLACE_SCENARIOS.values(), ids=IN_PLACE_SCENARIOS)
def test_an_in_place_formula_equals_torchs_in_place_operator_compiled(compiled_package, scenario):
    """The compiled in-place kernel: torch's check_inplace, the write (its version bumped), then
    rebase_history on the node (a view's base through CopySlices)."""
    same_as_torch(scenario, lambda: override(["mul_.Tensor"], package=compiled_package, compiled=True))


def test_torch_func_and_torch_compile_through_the_compiled_node(compiled_package):
    x, t = leaf(3).detach(), leaf(4).detach()
    with override(["cos"], package=compiled_package, compiled=True):
        grad = torch.func.grad(lambda a: torch.cos(a).sum())
        second = torch.func.grad(lambda a: grad(a).sum())(x)
        tangent = torch.func.jvp(grad, (x,), (t,))[1]
        compiled = torch.compile(lambda a: torch.cos(a).sum(), fullgraph=True, backend="aot_eager")
        (traced,) = torch.autograd.grad(compiled(x.requires_grad_()), x)
    torch.testing.assert_close(second, -torch.cos(x.detach()))
    torch.testing.assert_close(tangent, -torch.cos(x.detach()) * t)
    torch.testing.assert_close(traced, -torch.sin(x.detach()))


def test_the_corpus_proof_on_complex128_says_a_compiled_node_refuses_complex_tensors(compiled_package, monkeypatch):
    """Tier OC's complex cases (``tests/yaml/corpus_override.py``) through a compiled node: the node
    refuses to record a complex tensor (torch's error, never a derivative of a formula derived for
    real dtypes), and the proof says the entry is refused for it, where it proves its float64 case."""
    monkeypatch.syspath_prepend(str(REPO / "tests" / "yaml"))     # the script imports its neighbours
    import corpus_override

    real = leaf()
    complex_ = torch.complex(leaf().detach(), leaf(1).detach()).requires_grad_()
    assert corpus_override.prove_by_kind("cos", "OC", True, [((real,), {}, "ours")], package=compiled_package) == \
        ("proven", 1, "", "ours", "float64")
    assert corpus_override.prove_by_kind("cos", "OC", True, [((complex_,), {}, "ours")], package=compiled_package) == \
        ("refused", 0, f"OC: {corpus_override.REFUSES_COMPLEX_REASON}", "ours", "complex128")


def test_the_compiled_node_takes_the_inputs_torchgen_gives_no_gradient_as_torch_does(compiled_package):
    """An input with no line in derivatives.yaml: ``output`` (ignored) gets no edge, so a result from
    it alone does not require grad, as torch's; ``target`` (refused) requiring grad in grad mode raises
    torch's error from the compiled node; constant, the gradient is torch's."""
    generator = torch.Generator().manual_seed(0)
    x = (torch.rand(4, dtype=torch.float64, generator=generator) + 0.5)
    output = torch._standard_gamma(x, generator=generator).requires_grad_()
    target = torch.randn(4, dtype=torch.float64, generator=generator)
    loss = torch.ops.aten.soft_margin_loss.default
    with pytest.raises(RuntimeError) as theirs:
        loss(x.requires_grad_(), target.requires_grad_(), 1)
    expected = torch.autograd.grad(loss(x, target.detach(), 1), x)
    assert not torch._standard_gamma_grad(x.detach(), output).requires_grad
    with override(["_standard_gamma_grad", "soft_margin_loss"], package=compiled_package, compiled=True):
        assert not torch._standard_gamma_grad(x.detach(), output).requires_grad
        with pytest.raises(RuntimeError) as mine:
            loss(x, target, 1)
        assert str(mine.value) == str(theirs.value)
        with torch.no_grad():
            assert not loss(x, target, 1).requires_grad
        value = loss(x, target.detach(), 1)
        assert type(value.grad_fn).__name__ == "CppFunction"
        torch.testing.assert_close(torch.autograd.grad(value, x), expected)
