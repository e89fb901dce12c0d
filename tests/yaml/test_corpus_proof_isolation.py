"""The corpus proof isolates entries: an operator that crashes the process (torch 2.13's own
``_batch_norm_no_update`` without running stats segfaults) fails that entry alone."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent))      # corpus_proof imports corpus_inputs as a script does
import corpus_proof  # noqa: E402


def _prove(op: str) -> dict:
    if op == "crashes":
        x = torch.randn(2, 3, dtype=torch.float64)
        torch.ops.aten._batch_norm_no_update(x, None, None, None, None, 0.5, 0.5)   # SIGSEGV in torch 2.13
    if op == "raises":
        raise ValueError("a broken case\nsecond line")
    return {"status": "proven", "samples": 1, "source": "ours", "reason": op}


def test_a_crash_or_an_error_is_the_failure_of_its_entry_only(monkeypatch):
    monkeypatch.setattr(corpus_proof, "CHUNK", 3)
    ops = ["a", "b", "crashes", "c", "raises", "d", "e"]
    results = corpus_proof.prove_isolated(ops, _prove)
    assert list(results) == ops
    for op in ("a", "b", "c", "d", "e"):          # before and after the crash, in its chunk and later ones
        assert results[op] == {"status": "proven", "samples": 1, "source": "ours", "reason": op}
    assert results["crashes"]["status"] == "failed"
    assert results["crashes"]["reason"] == "C1: the process proving it died (signal 11, SIGSEGV)"
    assert results["raises"] == {"status": "failed", "samples": 0, "source": "",
                                 "reason": "C1: the proof raised ValueError: a broken case"}


def test_workers_split_the_entries_and_keep_their_order(monkeypatch):
    monkeypatch.setattr(corpus_proof, "CHUNK", 2)
    ops = ["a", "crashes", "b", "c", "raises", "d"]
    results = corpus_proof.prove_in_parallel(ops, _prove, 2)
    assert list(results) == ops
    assert [results[op]["status"] for op in ops] == ["proven", "failed", "proven", "proven", "failed", "proven"]
    assert results["crashes"]["reason"] == "C1: the process proving it died (signal 11, SIGSEGV)"


def test_a_first_derivative_without_history_has_zero_second_derivatives():
    """torch's ``sgn`` of a real tensor has a first derivative that depends on nothing (no graph); an
    implementation whose zero first derivative keeps a graph has zero second derivatives, the
    same, and is proven; one whose second derivative is not zero is not."""
    x = torch.tensor([-1.5, 0.5, 2.0], dtype=torch.float64, requires_grad=True)
    same = corpus_proof.prove(lambda t: torch.sgn(t) + 0 * t * t, torch.sgn, [((x,), {})])
    assert same[0] == "proven"
    curved = corpus_proof.prove(lambda t: torch.sgn(t) + 1e-3 * t * t * t, lambda t: torch.sgn(t) + 1e-3 * t ** 3,
                                [((x,), {})])
    assert curved[0] == "proven"         # a real second derivative on both sides, equal
    wrong = corpus_proof.prove(lambda t: torch.sgn(t) + 1e-3 * t * t * t, torch.sgn, [((x,), {})])
    assert wrong[0] == "failed"


def _cases(op) -> list:
    import corpus_inputs

    schema = op._schema
    name = schema.name.removeprefix("aten::") + (f".{schema.overload_name}" if schema.overload_name else "")
    return corpus_inputs.cases(name, schema)


def test_an_in_place_operator_is_proven_writing_a_copy_of_its_input():
    """``celu_`` cannot write a leaf that requires grad: the proof calls it on a copy of each written
    tensor, so the in-place operator itself (and its rebased history) is what is checked."""
    celu_ = torch.ops.aten.celu_.default
    assert corpus_proof.prove(celu_, celu_, _cases(celu_))[0] == "no inputs"    # torch refuses the leaf
    called = corpus_proof.as_called(celu_, celu_._schema)
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    before = x.detach().clone()
    y = called(x, 1.0)
    assert torch.equal(x.detach(), before) and y.grad_fn.name() == "CeluBackward1"
    assert corpus_proof.prove(called, called, _cases(celu_))[0] == "proven"
    wrong = corpus_proof.as_called(lambda x, alpha: torch.ops.aten.celu_(x, alpha) * 1.001, celu_._schema)
    assert corpus_proof.prove(wrong, called, _cases(celu_))[0] == "failed"


def test_a_random_operator_draws_the_same_numbers_on_every_call():
    """``bernoulli_.float`` (a ``Generator?`` argument) is reproducible under the proof: the same
    draws on every call, the caller's random stream left as it was."""
    bernoulli_ = torch.ops.aten.bernoulli_.float
    called = corpus_proof.as_called(bernoulli_, bernoulli_._schema)
    x = torch.rand(5, dtype=torch.float64)
    state = torch.random.get_rng_state()
    assert torch.equal(called(x, 0.5), called(x, 0.5))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert corpus_proof.prove(called, called, _cases(bernoulli_))[0] == "proven"


def test_an_opinfo_gradcheck_wrapper_makes_a_structured_input_checkable():
    """``cholesky`` reads one triangle of a Hermitian input and torch's gradient is Hermitian, so
    finite differences of the raw op disagree with torch's own backward (no case); through its
    OpInfo's ``gradcheck_wrapper`` (``A + A^H``), as torch checks it, the case proves, and a wrong
    gradient there fails."""
    def gradcheck_wrapper_hermitian_input(op, a):       # torch's OpInfo wrapper of that name
        return op(a + a.mH)

    a = torch.tensor([[2.0, 0.3], [-0.2, 1.5]], dtype=torch.float64, requires_grad=True)
    cholesky = torch.ops.aten.cholesky.default
    assert corpus_proof.prove(cholesky, cholesky, [((a,), {})])[0] == "no inputs"
    assert corpus_proof.prove(cholesky, cholesky, [((a,), {}, gradcheck_wrapper_hermitian_input)])[0] == "proven"
    def skewed(x):
        return cholesky(x) + 1e-3 * torch.triu(x, 1).sum()
    assert corpus_proof.prove(skewed, cholesky, [((a,), {}, gradcheck_wrapper_hermitian_input)])[0] == "failed"


def test_an_operator_torch_does_not_differentiate_is_proven_by_its_values_and_no_gradient():
    """``special_airy_ai`` (derivatives.yaml: ``x: non_differentiable``) gives no output that
    requires grad: an op with torch's values and no gradient is proven ``without_gradient``; one
    that attaches a (zero) gradient, or gives other values, fails CT."""
    airy = torch.ops.aten.special_airy_ai.default
    x = torch.tensor([-1.5, 0.5, 2.0], dtype=torch.float64, requires_grad=True)
    # torch cannot gradcheck an op it does not differentiate: not one of the entries it can
    assert corpus_proof.prove(airy, airy, [((x,), {})]) == ("proven", 1, corpus_proof.WITHOUT_GRADIENT, False)
    with_gradient = corpus_proof.prove(lambda t: airy(t) + 0 * t, airy, [((x,), {})])
    assert with_gradient == ("failed", 1, "CT: an output carries a gradient where torch's does not", False)
    other_values = corpus_proof.prove(lambda t: airy(t.detach()) * 2, airy, [((x,), {})])
    assert other_values == ("failed", 1, "CT: forward value differs from torch's", False)
    # a case torch differentiates (sin) next to one it does not: no proof without a gradient
    mixed = corpus_proof.prove(airy, lambda t: torch.sin(t) if t.numel() == 3 else airy(t),
                               [((x,), {}), ((x[:2].detach().requires_grad_(),), {})])
    assert mixed[0] == "failed"


def test_torchs_own_verdict_is_recorded_with_the_proof():
    """Whether torch's own overload passes gradcheck and gradgradcheck on the proof's cases: ``relu``
    at 0 does not (torch's derivative there is 0, the finite difference 1/2), so a case with a 0 is
    no case and torch cannot gradcheck the entry on it; away from 0 it can, whether or not ours is
    right there. A kernel torch has no CPU version of is named in the reason."""
    at_zero = torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64, requires_grad=True)
    away = torch.tensor([-1.0, 0.5, 2.0], dtype=torch.float64, requires_grad=True)
    relu = torch.relu
    assert corpus_proof.prove(relu, relu, [((at_zero,), {})]) == ("no inputs", 0,
                                                                   "torch's own op fails gradcheck on it", False)
    assert corpus_proof.prove(relu, relu, [((at_zero,), {}), ((away,), {})]) == ("proven", 1, "", True)
    assert corpus_proof.prove(lambda t: 2 * relu(t), relu, [((away,), {})]) == ("failed", 1, "CT: forward value "
                                                                                "differs from torch's", True)
    assert corpus_proof.torch_gradchecks(relu, [((at_zero,), {})]) is False
    assert corpus_proof.torch_gradchecks(relu, [((at_zero,), {}), ((away,), {})]) is True

    wrong = corpus_proof.prove(lambda t: relu(t) + (t - t.detach()) / 2, relu, [((away,), {})])   # torch's values
    assert wrong.status == "failed" and wrong.reason.startswith("C1: gradcheck (Jacobian mismatch for output 0")

    def no_cpu_kernel(t):
        return torch.ops.aten.linear_backward(t, t, t.unsqueeze(0), [True, True, True])[0]
    failed = corpus_proof.prove(no_cpu_kernel, torch.sin, [((away,), {})])
    assert failed.status == "failed" and failed.torch_gradchecks
    assert failed.reason.startswith("C1: the formula calls aten::linear_backward, which torch has no CPU kernel for")
