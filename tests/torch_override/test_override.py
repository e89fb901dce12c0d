"""``formulas.torch.override``: the package's formulas stand in for aten's own autograd.

torch 2.13 is the oracle: inside the context torch's operators record the
formulas' nodes and compute their gradients; outside, torch's own kernels are
back (values and node names before, inside and after).
"""
from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path

import pytest
import torch
import torch.autograd.forward_ad as fwAD

from formulas.torch import CapturedIntermediate, OverrideError, install, overridable, override, uninstall
from transpiler.formula_facts import StaleFormulaError
from tests.torch_override.aliasing import IN_PLACE_SCENARIOS, IN_PLACE_SOURCE, VIEW_SCENARIOS, same_as_torch
from tests.torch_override.conftest import importable_package


@pytest.fixture
def wrong_package(tmp_path, monkeypatch):
    """A formula package ``wrongops`` whose ``sin`` backward is twice the right one and has no jvp,
    whose ``cos`` captures an intermediate, and whose ``rrelu_with_noise`` writes its noise on the side."""
    with importable_package(tmp_path, monkeypatch, "wrongops", {"trig.py": '''
        from formulas import at, derivative

        @derivative("sin(Tensor self) -> Tensor")
        def sin(self):
            result = at.sin(self)
            def backward(grad):
                return grad * at.cos(self) * 2.0
            return result, backward

        @derivative("cos(Tensor self) -> Tensor")
        def cos(self):
            sin_self = at.sin(self)
            result = at.cos(self)
            def backward(grad):
                return -grad * sin_self
            return result, backward

        @derivative("rrelu_with_noise(Tensor self, Tensor(b!) noise, Scalar lower=0.125, "
                    "Scalar upper=0.3333333333333333, bool training=False, Generator? generator=None) -> Tensor")
        def rrelu_with_noise(self, noise, lower, upper, training, generator):
            result = at.rrelu_with_noise(self, noise, lower, upper, training, generator)
            def backward(grad):
                return grad, None
            return result, backward

        @derivative("exp(Tensor self, int dim) -> Tensor")
        def exp(self, dim):
            result = at.exp(self)
            def backward(grad):
                return grad * result
            return result, backward
    '''}) as name:
        yield name


def leaf(*shape: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=torch.float64, generator=generator).requires_grad_()


def sin_grad(x: torch.Tensor) -> torch.Tensor:
    (grad,) = torch.autograd.grad(torch.sin(x).sum(), x)
    return grad


def test_a_wrong_formula_changes_torch_sin_inside_the_context_only(wrong_package):
    x = leaf(5)
    right = torch.cos(x.detach())
    torch.testing.assert_close(sin_grad(x), right)
    with override(["sin"], package=wrong_package):
        torch.testing.assert_close(sin_grad(x), 2 * right)
    torch.testing.assert_close(sin_grad(x), right)


def test_leaving_restores_torchs_kernels_values_and_node_names():
    x = leaf(3, 4)
    def observe():
        y = torch.sin(x) * torch.mean(x, [1], True)
        grad, = torch.autograd.grad(y.sum(), x, create_graph=True)
        second, = torch.autograd.grad(grad.sum(), x)
        return y.grad_fn.name(), y.grad_fn.next_functions[0][0].name(), (y, grad, second)

    before = observe()
    with override(["sin", "mul.Tensor", "mean.dim"]):
        inside = observe()
    after = observe()
    assert before[:2] == after[:2] == ("MulBackward0", "SinBackward0")
    assert inside[:2] == ("MulTensorFormulaBackward", "SinFormulaBackward")
    for values in (inside[2], after[2]):
        for got, want in zip(values, before[2]):
            torch.testing.assert_close(got, want)


def test_double_backward_runs_the_formulas_again():
    x = leaf(6)
    with override(["sin", "cos", "mul.Tensor", "neg"]):
        grad, = torch.autograd.grad(torch.sin(x).sum(), x, create_graph=True)
        assert grad.grad_fn.name() == "MulTensorFormulaBackward"      # grad * cos(self), recorded by the formulas
        second, = torch.autograd.grad(grad.sum(), x)
        assert torch.autograd.gradgradcheck(torch.sin, (x,))
    torch.testing.assert_close(second, -torch.sin(x.detach()))


def test_nested_overrides_stack_and_unwind(wrong_package):
    x = leaf(4)
    right = torch.cos(x.detach())
    with override(["sin"]) as outer:
        torch.testing.assert_close(sin_grad(x), right)
        assert torch.sin(x).grad_fn.name() == "SinFormulaBackward"
        with override(["sin"], package=wrong_package):
            torch.testing.assert_close(sin_grad(x), 2 * right)       # the innermost wins
        torch.testing.assert_close(sin_grad(x), right)
        assert torch.sin(x).grad_fn.name() == "SinFormulaBackward"
        assert outer.active
    assert torch.sin(x).grad_fn.name() == "SinBackward0"


def test_install_and_uninstall_out_of_order(wrong_package):
    x = leaf(4)
    right = torch.cos(x.detach())
    first = install(["sin"], package=wrong_package)
    second = install(["sin"])
    uninstall(first)                          # the later installation still holds
    assert torch.sin(x).grad_fn.name() == "SinFormulaBackward"
    torch.testing.assert_close(sin_grad(x), right)
    uninstall(second)
    uninstall(second)                         # idempotent
    assert torch.sin(x).grad_fn.name() == "SinBackward0"


def test_the_override_is_process_wide_across_threads(wrong_package):
    x = leaf(3)
    seen = {}
    with override(["sin"], package=wrong_package):
        thread = threading.Thread(target=lambda: seen.setdefault("grad", sin_grad(x)))
        thread.start()
        thread.join()
    torch.testing.assert_close(seen["grad"], 2 * torch.cos(x.detach()))


def test_calls_that_record_nothing_run_torchs_kernel():
    x = leaf(5)
    with override(["sin"]):
        with torch.no_grad():
            plain = torch.sin(x)
        detached = torch.sin(x.detach())
    assert plain.grad_fn is None and detached.grad_fn is None
    torch.testing.assert_close(plain, torch.sin(x.detach()), rtol=0, atol=0)


def test_forward_mode_runs_the_jvp_and_refuses_without_one(wrong_package):
    x, tangent = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    with override(["sin", "cos", "mul.Tensor"]), fwAD.dual_level():
        out = torch.sin(fwAD.make_dual(x, tangent))
        torch.testing.assert_close(fwAD.unpack_dual(out).tangent, torch.cos(x) * tangent)
    with override(["sin"], package=wrong_package), fwAD.dual_level():
        with pytest.raises(NotImplementedError, match="Trying to use forward AD with sin that does not support it"):
            torch.sin(fwAD.make_dual(x, tangent))


def test_forward_mode_reads_the_jvp_from_the_front_ends_model(tmp_path, monkeypatch):
    """The nested jvp and a ``jvp="derived"`` one (derived from the backward) as the engine reads them."""
    x, t = leaf(4).detach(), leaf(4, seed=1).detach()
    with importable_package(tmp_path, monkeypatch, "jvpops", {"trig.py": '''
        from formulas import at, derivative

        @derivative("sin(Tensor self) -> Tensor", jvp="derived")
        def sin(self):
            result = at.sin(self)
            def backward(grad):
                return grad * at.cos(self)
            return result, backward

        @derivative("cos(Tensor self) -> Tensor")
        def cos(self):
            result = at.cos(self)
            def backward(grad):
                return -grad * at.sin(self)
            def jvp(self_t):
                return self_t * at.sin(self) * 3.0
            return result, backward
    '''}) as package, override(["sin", "cos"], package=package), fwAD.dual_level():
        sin_t = fwAD.unpack_dual(torch.sin(fwAD.make_dual(x, t))).tangent
        cos_t = fwAD.unpack_dual(torch.cos(fwAD.make_dual(x, t))).tangent
    torch.testing.assert_close(sin_t, torch.cos(x) * t)
    torch.testing.assert_close(cos_t, 3 * torch.sin(x) * t)      # the package's (wrong) jvp, not torch's


def test_multiple_outputs_lists_and_masks():
    x = leaf(3, 4)
    parts = [leaf(2, 3, seed=1), leaf(1, 3, seed=2)]
    with override(["max.dim", "cat", "sum.dim_IntList", "index.Tensor"]):
        values, indices = torch.max(x, 1)
        assert values.grad_fn.name() == "MaxDimFormulaBackward" and not indices.requires_grad
        assert torch.autograd.gradcheck(lambda t: torch.max(t, 1)[0], (x,))
        assert torch.autograd.gradgradcheck(lambda a, b: torch.cat([a, b]), parts)
        assert torch.autograd.gradgradcheck(lambda a: a[torch.tensor([0, 2, 0])], (x,))


def test_a_captured_intermediate_is_refused_at_the_call(wrong_package):
    with override(["cos"], package=wrong_package):
        with pytest.raises(CapturedIntermediate, match="captures `sin_self`.*DB100"):
            torch.cos(leaf(3))


def test_operators_that_cannot_be_overridden_are_refused_with_the_reason(wrong_package):
    with pytest.raises(OverrideError, match=r"exp: torch .* has no operator aten::exp\b|schema"):
        install(["exp"], package=wrong_package)
    with pytest.raises(OverrideError, match="package `wrongops` has no formula for it"):
        install(["tan"], package=wrong_package)
    with pytest.raises(OverrideError, match="rrelu_with_noise: writes noise in place besides what it returns"):
        install(["rrelu_with_noise"], package=wrong_package)
    with pytest.raises(OverrideError, match=r"sin: compiled=True runs torch.ops.wrongops.sin, which no loaded "
                                            r"library registers: transpile .* build .* load"):
        install(["sin"], package=wrong_package, compiled=True)
    assert torch.sin(leaf(2)).grad_fn.name() == "SinBackward0"      # nothing was left installed


def test_a_formula_torch_runs_for_other_tensors_or_devices_only_is_refused(tmp_path, monkeypatch):
    """derivatives.yaml's formula of a CPU composite (``linear``, ``chunk``) or its section for nested
    tensors is one torch never runs on a strided CPU tensor; installed, it would break the
    composite's gradient there, so it is refused and torch's own stays."""
    with importable_package(tmp_path, monkeypatch, "otherkeys", {"ops.py": '''
        from formulas import at, derivative, nondifferentiable
        from transpiler.yaml_import.dialect import yaml_entry

        nondifferentiable("linear_backward(Tensor self, Tensor grad_output, Tensor weight, bool[3] output_mask) "
                          "-> (Tensor, Tensor, Tensor)")

        @derivative("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor")
        def linear(input, weight, bias):
            result = at.linear(input, weight, bias)
            def backward(grad, *, needs_input_grad):
                return at.linear_backward(input, grad, weight, needs_input_grad)
            return result, backward

        @derivative("chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]")
        def chunk(self, chunks, dim):
            result = at.chunk(self, chunks, dim)
            def backward(grads, *, needs_input_grad):
                if needs_input_grad[0]:
                    raise NotImplementedError("the derivative for 'chunk' is not implemented.")
                return None
            return result, backward

        @derivative("sin(Tensor self) -> Tensor")
        @yaml_entry(dispatch="AutogradNestedTensor")
        def sin(self):
            result = at.sin(self)
            def backward(grad):
                return grad * at.cos(self)
            return result, backward
    '''}) as name:
        accepted, refused = overridable(name)
        assert accepted == []
        assert "calls aten::linear_backward, which torch has no CPU kernel for" in refused["linear"]
        assert "raises derivatives.yaml's not_implemented" in refused["chunk"]
        assert "section for AutogradNestedTensor" in refused["sin"]
        for op in ("linear", "chunk", "sin"):
            with pytest.raises(OverrideError, match=f"{op}: .*torch's"):
                install([op], package=name)
    x, w = leaf(2, 3), leaf(4, 3)
    torch.nn.functional.linear(x, w).sum().backward()       # torch's own composite, as before
    assert w.grad is not None and torch.sin(leaf(2)).grad_fn.name() == "SinBackward0"


def test_every_shipped_operator_is_overridable():
    """Views and all: the shipped library has no operator writing anything but what it returns."""
    accepted, refused = overridable()
    assert accepted and refused == {}


@pytest.mark.parametrize("scenario", VIEW_SCENARIOS.values(), ids=VIEW_SCENARIOS)
def test_views_and_in_place_writes_through_them_equal_torchs(scenario):
    """A view's output is torch's own view of the input, recorded by the formula: a write through
    it rebases its base as torch's does; what torch forbids raises its error."""
    same_as_torch(scenario, override)


@pytest.fixture
def in_place_package(tmp_path, monkeypatch):
    """A formula package ``inplaceops`` with an in-place operator's own formula (``mul_.Tensor``)."""
    with importable_package(tmp_path, monkeypatch, "inplaceops", {"ops.py": IN_PLACE_SOURCE}) as name:
        yield name


@pytest.mark.parametrize("scenario", IN_PLACE_SCENARIOS.values(), ids=IN_PLACE_SCENARIOS)
def test_an_in_place_formula_equals_torchs_in_place_operator(in_place_package, scenario):
    """The formula's Function marks the written tensor dirty: torch rebases it (through a view too),
    its version counter catches a saved tensor written; what torch forbids raises its error first."""
    same_as_torch(scenario, lambda: override(package=in_place_package))


def test_an_in_place_formula_records_its_node_and_runs_its_jvp(in_place_package):
    def observe():
        x, w = leaf(5), leaf(5, seed=1)
        y = x * 1.0
        y.mul_(w)
        with fwAD.dual_level():
            dual = fwAD.make_dual(x.detach() * 1.0, torch.ones(5, dtype=torch.float64))
            written = dual.mul_(fwAD.make_dual(w.detach(), torch.full((5,), 2.0, dtype=torch.float64)))
            tangent = fwAD.unpack_dual(dual).tangent
            assert written is dual and fwAD.unpack_dual(written).tangent is tangent
        return y.grad_fn.name(), tangent
    theirs = observe()
    with override(package=in_place_package):
        ours = observe()
    assert ours[0] == "MulTensorFormulaBackward"
    torch.testing.assert_close(ours[1], theirs[1])


def test_facts_of_a_file_edited_after_import_are_refused(tmp_path, monkeypatch):
    """Whether an in-place formula's backward reads the written argument, and which Scalar arguments
    get c10::Scalar's methods, are the front-end's facts of the imported file: edited since, the
    first recorded call raises rather than run with another text's facts."""
    source = IN_PLACE_SOURCE + '''
@derivative("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
def add_Tensor(self, other, alpha=1):
    result = at.add(self, other, alpha=alpha)
    def backward(grad):
        return grad, grad * alpha.conj()
    return result, backward
'''
    with importable_package(tmp_path, monkeypatch, "editedinplaceops", {"ops.py": source}) as package:
        importlib.import_module(f"{package}.ops")
        path = tmp_path / package / "ops.py"
        path.write_text(path.read_text() + "\n")
        x, w = leaf(5), leaf(5, seed=1)
        with override(package=package):
            for call in (lambda: (x * 1.0).mul_(w), lambda: torch.add(x, w, alpha=2)):
                with pytest.raises(StaleFormulaError, match="changed after its formulas were imported"):
                    call()


def in_place_after(op_output):
    """An in-place write to an op's output (whose backward saves it), then backward: the error."""
    x = leaf(4)
    y = op_output(x)
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as raised:
        torch.autograd.grad(y.sum(), x)
    return str(raised.value)


def test_an_in_place_write_to_a_saved_output_raises_torchs_error():
    """The formula's Function saves its outputs with save_for_backward: torch's version counter
    catches a later in-place write, as it does for its own node."""
    torchs = in_place_after(torch.exp)
    with override(["exp"]):
        ours = in_place_after(torch.exp)
    assert "output 0 of Exp," in torchs and "output 0 of ExpFormula," in ours


def test_in_place_writes_through_torchs_views_of_outputs_equal_torchs():
    """torch's own views and in-place ops on an overridden op's output rebase its node."""
    def observe():
        x = leaf(5)
        y = torch.sin(x) * 1.0
        y[1:3].mul_(torch.cos(x[1:3]))
        y.unsqueeze(0).add_(1.0)
        (grad,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        (second,) = torch.autograd.grad(grad.sum(), x)
        return grad, second
    want = observe()
    with override(["sin", "cos", "mul.Tensor"]):
        got = observe()
    for mine, theirs in zip(got, want):
        torch.testing.assert_close(mine, theirs)


def test_torch_compile_traces_the_swapped_in_formula(wrong_package):
    x = leaf(4)
    with override(["sin"], package=wrong_package):
        compiled = torch.compile(lambda a: torch.sin(a).sum(), fullgraph=True, backend="aot_eager")
        (grad,) = torch.autograd.grad(compiled(x), x)
    torch.testing.assert_close(grad, 2 * torch.cos(x.detach()))


def test_a_graph_compiled_before_the_override_runs_the_swapped_in_formula_inside_it(wrong_package):
    """torch.compile's guards do not see a registration change: install and uninstall drop its graphs."""
    x = leaf(4)
    compiled = torch.compile(lambda a: torch.sin(a).sum(), fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(torch.autograd.grad(compiled(x), x)[0], torch.cos(x.detach()))
    with override(["sin"], package=wrong_package):
        torch.testing.assert_close(torch.autograd.grad(compiled(x), x)[0], 2 * torch.cos(x.detach()))
    torch.testing.assert_close(torch.autograd.grad(compiled(x), x)[0], torch.cos(x.detach()))


def test_install_and_uninstall_forget_the_kernels_torchs_python_dispatcher_cached(wrong_package):
    """torch's Python dispatcher (which torch.compile and make_fx trace under) caches, per operator,
    the kernel it chose per dispatch key; install and uninstall clear the overridden operators'
    cache, so a call cached before the override runs the swapped-in formula inside it."""
    from torch._dispatch.python import enable_python_dispatcher

    x = leaf(4)
    with enable_python_dispatcher():
        torch.testing.assert_close(sin_grad(x), torch.cos(x.detach()))     # caches sin's autograd kernel
        assert torch._C.DispatchKey.AutogradCPU in torch.ops.aten.sin.default._dispatch_cache
        with override(["sin"], package=wrong_package):
            torch.testing.assert_close(sin_grad(x), 2 * torch.cos(x.detach()))
        torch.testing.assert_close(sin_grad(x), torch.cos(x.detach()))


def func_compositions(f, x, t):
    """torch.func transforms of ``f`` and their compositions, first and second order."""
    grad = torch.func.grad(lambda a: f(a).sum())
    return {
        "grad": grad(x),
        "jvp": torch.func.jvp(f, (x,), (t,))[1],
        "vjp": torch.func.vjp(f, x)[1](t)[0],
        "grad of grad": torch.func.grad(lambda a: grad(a).sum())(x),
        "jvp of grad": torch.func.jvp(grad, (x,), (t,))[1],
        "grad of jvp": torch.func.grad(lambda a: torch.func.jvp(f, (a,), (t,))[1].sum())(x),
        "jvp of jvp": torch.func.jvp(lambda a: torch.func.jvp(f, (a,), (t,))[1], (x,), (t,))[1],
        "jacrev of jacrev": torch.func.jacrev(torch.func.jacrev(f))(x),
        "jacfwd of jacrev (vmap)": torch.func.jacfwd(torch.func.jacrev(f))(x),
    }


@pytest.mark.parametrize("ops", [["sin"], ["cos"], ["sin", "cos", "mul.Tensor", "neg"], None], ids=str)
def test_torch_func_transforms_and_their_compositions_equal_torchs(ops):
    """The overridden kernel records its node at the level it is called at, with the caller's
    grad modes for the levels below: every composition equals torch's own (a formula reached
    inside another op's backward, ``cos`` in ``sin``'s, included)."""
    x, t = leaf(5).detach(), leaf(5, seed=1).detach()
    def f(a):
        return torch.sin(a) * torch.cos(a).sum(0, keepdim=True)
    want = func_compositions(f, x, t)
    with override(ops):
        got = func_compositions(f, x, t)
    for name in want:
        torch.testing.assert_close(got[name], want[name], msg=name)


def test_formulas_imports_without_torch_and_formulas_torch_says_what_to_install():
    import subprocess

    script = ("import sys; sys.modules['torch'] = None\n"
              "import formulas; assert len(formulas.load_library()) > 200\n"
              "try:\n    import formulas.torch\nexcept ImportError as error:\n    print(error)\n")
    repo = Path(__file__).resolve().parents[2]         # `python -c` imports from its working directory first
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "formulas.torch needs torch: pip install torch==2.13.0 (or the [torch] extra)"


IN_PLACE = {   # an in-place op named to the override: a call of it on y (a non-leaf float64 tensor)
    "sin_": lambda y, w: y.sin_(),
    "exp_": lambda y, w: y.exp_(),
    "mul_.Tensor": lambda y, w: y.mul_(w),
    "addcmul_": lambda y, w: y.addcmul_(w, w, value=0.5),
    "index_add_": lambda y, w: y.index_add_(0, torch.tensor([0, 2]), w[:2]),
}


@pytest.mark.parametrize("op", sorted(IN_PLACE))
def test_an_in_place_op_runs_its_functional_twins_formula_and_equals_torch(op):
    """``sin_`` through the ``sin`` formula: the twin on a copy of self, then copy_ rebases self
    (on a view too); first and second order equal torch's own in-place op."""
    def observe():
        x, w = leaf(5), leaf(5, seed=1)
        y, through_view = x * 1.0, x * 2.0
        IN_PLACE[op](y, w)
        recorded.append(y.grad_fn.name())
        IN_PLACE[op](through_view[1:], w[1:])
        first = torch.autograd.grad((y + through_view).sum(), (x, w), create_graph=True, allow_unused=True)
        first = [g if g is not None else torch.zeros(5, dtype=torch.float64) for g in first]
        total = sum(g.sum() for g in first)
        second = torch.autograd.grad(total, (x, w), allow_unused=True) if total.requires_grad else ()
        return y + through_view, first, [g for g in second if g is not None]
    recorded: list[str] = []
    want = observe()
    with override([op]):
        got = observe()
    assert recorded[0].endswith("Backward0") and recorded[1] == "torch::autograd::CopyBackwards"   # torch's, ours
    torch.testing.assert_close(got[0], want[0])
    for mine, theirs in zip(got[1] + got[2], want[1] + want[2]):
        torch.testing.assert_close(mine, theirs)


def test_in_place_twins_raise_torchs_errors():
    x = leaf(3)
    with override(["sin_", "mul_.Tensor"]):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            x.sin_()
        y = x * 1.0
        z = y * y                                  # saves y
        y.sin_()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            torch.autograd.grad(z.sum(), x)
        with pytest.raises(RuntimeError, match="result type Double can't be cast to the desired output type Long"):
            torch.ones(3, dtype=torch.long).mul_(x)
        tangent = torch.ones(3, dtype=torch.float64)
        with fwAD.dual_level():
            dual = fwAD.make_dual(x.detach(), tangent) * 1.0
            dual.sin_()
            torch.testing.assert_close(fwAD.unpack_dual(dual).tangent, torch.cos(x.detach()))


def test_an_in_place_op_whose_twin_is_refused_is_refused():
    with pytest.raises(OverrideError, match=r"t_: an in-place view operator .* functional twin t"):
        install(["t_"])
    with pytest.raises(OverrideError, match="pow_.Scalar: torch's schema .* is not its functional twin's"):
        install(["pow_.Scalar"])
