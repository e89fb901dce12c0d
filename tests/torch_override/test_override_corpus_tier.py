"""The corpus tiers' proof through torch's aten operators (``tests/yaml/corpus_override.py``) on
formulas written as derivatives.yaml's entries are, in a package of their own: an entry with a
non-differentiable floating output is proven with forward AD (gradcheck's forward mode alone
would compare ``P``'s tangent with ``L``'s finite differences, and fail torch's own op too), an
entry whose formula calls a backward torch has no CPU kernel for is refused, saying which, one
torch does not differentiate is proven by its values, a backward may read ``GradMode.is_enabled()``; and
the funnel's report of the tiers groups the refusals by reason."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "yaml"))  # corpus_override imports its neighbours as a script
import corpus_inputs
import corpus_override

from tests.torch_override.conftest import importable_package
from transpiler.corpus import override_report


@pytest.fixture
def entries(tmp_path, monkeypatch):
    """A package ``tierops`` with two entries as ``transpile import-yaml`` writes them."""
    with importable_package(tmp_path, monkeypatch, "tierops", {
        "entries.py": '''
        from formulas import at, derivative, nondifferentiable
        from transpiler.yaml_import.dialect import namespace

        GradMode = namespace("GradMode")

        nondifferentiable("max_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, "
                          "int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> Tensor")

        @derivative("lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True, bool unpack_pivots=True) "
                    "-> (Tensor P, Tensor L, Tensor U)", output_differentiability=[False, True, True])
        def lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots):
            P, L, U = at.lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots)
            def backward(grad_L, grad_U):
                lower = at.tril(grad_L, -1) if grad_L is not None else at.zeros_like(LU_data)
                return lower + at.triu(grad_U) if grad_U is not None else lower, None
            def jvp(LU_data_t):
                return at.tril(LU_data_t, -1), at.triu(LU_data_t)
            return (P, L, U), backward

        @derivative("exp(Tensor self) -> Tensor")
        def exp(self):
            result = at.exp(self)
            def backward(grad):
                return grad * result
            def jvp(self_t):
                return self_t * result if self.is_contiguous() and not self.is_complex() else at.mul(self_t, result)
            return result, backward

        @derivative("silu(Tensor self) -> Tensor")
        def silu(self):
            result = at.silu(self)
            def backward(grad):
                sigmoid = at.sigmoid(self)
                if GradMode.is_enabled():      # as derivatives.yaml's: a double-differentiable backward
                    return grad * sigmoid * (1 + self * (1 - sigmoid))
                return grad * (sigmoid + self * sigmoid * (1 - sigmoid))
            return result, backward

        @derivative("isnan(Tensor self) -> Tensor", output_differentiability=[False])
        def isnan(self):
            result = at.isnan(self)
            def backward():
                return None
            return result, backward

        @derivative("one_hot(Tensor self, int num_classes=-1) -> Tensor", output_differentiability=[False])
        def one_hot(self, num_classes):
            result = at.one_hot(self, num_classes)
            def backward():
                return None
            return result, backward

        @derivative("hardsigmoid(Tensor self) -> Tensor")
        def hardsigmoid(self):
            result = at.hardsigmoid(self)
            def backward(grad):
                return at.hardsigmoid_backward(grad, self)
            return result, backward

        @derivative("normal.Tensor_float(Tensor mean, float std=1, *, Generator? generator=None) -> Tensor")
        def normal_Tensor_float(mean, std, generator):
            result = at.normal(mean, std, generator=generator)
            def backward(grad):
                return at.new_zeros(grad, mean.sizes())
            return result, backward

        @derivative("max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
                    "int[2] dilation=1, bool ceil_mode=False) -> Tensor")
        def max_pool2d(self, kernel_size, stride, padding, dilation, ceil_mode):
            result = at.max_pool2d(self, kernel_size, stride, padding, dilation, ceil_mode)
            def backward(grad):
                return at.max_pool2d_backward(grad, self, kernel_size, stride, padding, dilation, ceil_mode)
            return result, backward
    ''',
    }) as package:
        yield package


@pytest.fixture
def wrong(tmp_path, monkeypatch):
    """A package ``wrongops`` whose ``hardsigmoid`` has a wrong first derivative (1.5 times torch's)."""
    with importable_package(tmp_path, monkeypatch, "wrongops", {
        "entries.py": '''
        from formulas import at, derivative

        @derivative("hardsigmoid(Tensor self) -> Tensor")
        def hardsigmoid(self):
            result = at.hardsigmoid(self)
            def backward(grad):
                return at.hardsigmoid_backward(grad, self) * 1.5
            return result, backward
    ''',
    }) as package:
        yield package


def _case(op: str) -> tuple:
    return corpus_inputs.cases(op, corpus_override.aten_overload(op)._schema)[0]


def test_generated_arguments_take_the_dtype_torch_asks_for_and_lists_of_ints_have_values(entries):
    assert _case("one_hot")[0][0].dtype == torch.long                # "only applicable to index tensor of type Long"
    assert _case("_is_all_true")[0][0].dtype == torch.bool           # torch asserts self.scalar_type() == kBool
    assert [a.dtype for a in _case("embedding_renorm_")[0][:2]] == [torch.float64, torch.long]  # argument 'indices'
    assert _case("_efficientzerotensor") == (([1, 1],), {})
    # torch's op takes integers alone and declares no gradient: proven by its values
    assert corpus_override.prove("one_hot", "OP", False, [_case("one_hot")], package=entries) == \
        ("proven", 1, corpus_override.corpus_proof.WITHOUT_GRADIENT)


def test_an_argument_torch_does_not_differentiate_is_made_a_constant():
    grad_output, self = (torch.randn(3, dtype=torch.float64, requires_grad=True) for _ in range(2))
    buffer = torch.ops.aten.log_sigmoid_forward(self.detach())[1].requires_grad_()
    aten = torch.ops.aten.log_sigmoid_backward.default
    args, _ = corpus_override.as_torch_differentiates(aten, aten._schema, (grad_output, self, buffer), {})
    assert [t.requires_grad for t in args] == [True, True, False]       # "not differentiable ... 'buffer'"
    zeta = torch.ops.aten.special_zeta.default
    s, other = (1.5 + torch.rand(3, dtype=torch.float64)).requires_grad_(), torch.rand(3, dtype=torch.float64)
    args, _ = corpus_override.as_torch_differentiates(zeta, zeta._schema, (s, other.requires_grad_()), {})
    assert [t.requires_grad for t in args] == [False, True]            # not_implemented("zeta") for self alone
    assert corpus_override.as_torch_differentiates(zeta, zeta._schema, (s.detach(), other), {}) is None


def test_an_entry_torch_differentiates_once_is_proven_to_first_order(entries, wrong):
    case = ((torch.randn(3, 4, dtype=torch.float64, requires_grad=True),), {})
    status, used, reason = corpus_override.prove("hardsigmoid", "OP", False, [case], package=entries)
    assert (status, used) == (corpus_override.FIRST_ORDER, 1)
    assert reason.endswith("(RuntimeError: derivative for aten::hardsigmoid_backward is not implemented), "
                           "and the override raises torch's error")
    assert corpus_override.prove("hardsigmoid", "OP", False, [case], package=wrong) == ("failed", 1, "OP: gradcheck")


def test_a_random_operator_is_proven_on_a_fixed_draw(entries):
    case = ((torch.randn(3, dtype=torch.float64, requires_grad=True),), {})
    assert corpus_override.prove("normal.Tensor_float", "OP", False, [case], package=entries) == \
        (corpus_override.FIXED_DRAW, 1, corpus_override.PARTIAL[corpus_override.FIXED_DRAW])


def test_a_non_differentiable_output_is_left_out_of_the_checks(entries):
    generator = torch.Generator().manual_seed(0)
    factors, pivots = torch.linalg.lu_factor(torch.randn(3, 3, dtype=torch.float64, generator=generator))
    case = ((factors.requires_grad_(), pivots), {})
    assert corpus_override.differentiable_positions(torch.ops.aten.lu_unpack(*case[0])) == (1, 2)
    assert corpus_override.prove("lu_unpack", "OP", True, [case], package=entries) == ("proven", 1, "")


def test_a_formula_calling_a_backward_without_a_cpu_kernel_is_refused(entries):
    x = torch.randn(1, 4, 4, dtype=torch.float64, requires_grad=True)
    status, _, reason = corpus_override.prove("max_pool2d", "OP", False, [((x, [2, 2]), {})], package=entries)
    assert (status, reason) == ("refused", "OP: " + corpus_override.no_cpu_kernel("aten::max_pool2d_backward"))


def test_an_entry_torch_does_not_differentiate_is_proven_by_its_values(entries):
    case = ((torch.tensor([1.0, float("nan"), 2.0], dtype=torch.float64, requires_grad=True),), {})
    assert corpus_override.prove("isnan", "OP", False, [case], package=entries) == \
        ("proven", 1, corpus_override.corpus_proof.WITHOUT_GRADIENT)


def test_an_entry_without_inputs_for_want_of_a_cpu_kernel_says_so():
    assert corpus_inputs.why_none(torch.ops.aten._conv_depthwise2d.default._schema) == \
        "none (torch has no CPU kernel for aten::_conv_depthwise2d: it runs on another device or layout)"


def test_a_backward_reads_whether_grad_mode_is_on(entries):
    case = ((torch.randn(3, 4, dtype=torch.float64, requires_grad=True),), {})
    assert corpus_override.prove("silu", "OP", False, [case], package=entries) == ("proven", 1, "")


def test_a_jvp_reads_whether_an_input_is_contiguous(entries):
    # as derivatives.yaml's _linalg_det: `A_p.is_contiguous() && !A_p.is_complex()`
    case = ((torch.randn(3, 4, dtype=torch.float64).t().requires_grad_(),), {})
    assert corpus_override.prove("exp", "OP", True, [case], package=entries) == ("proven", 1, "")


def test_the_funnel_reports_the_tiers_side_by_side_with_every_reason():
    def side(entry):
        return {"status": "refused", "source": "", "reason": f"{entry}: writes noise in place besides what it returns"}
    results = {tier: {"rrelu_with_noise": side("rrelu_with_noise"), "rrelu_with_noise_": side("rrelu_with_noise_"),
                      "sin": {"status": "proven", "source": "OpInfo", "reason": ""},
                      "eq.Tensor": {"status": "no inputs", "source": "", "reason": "no OpInfo; our inputs: none"}}
               for tier in ("OC", "OP")}
    results["OC"]["sin"] = {"status": "failed", "source": "OpInfo", "reason": "OC: gradgradcheck"}
    results["OP"]["hardsigmoid"] = {"status": "first order", "source": "OpInfo", "reason": "gradcheck passes"}
    assert override_report(results) == [
        "  OC     0 proven (0 on torch's OpInfo samples, 0 without a gradient as torch's), 2 refused, 1 failed, 1 without inputs, of 4",
        ("  OP     1 proven (1 on torch's OpInfo samples, 0 without a gradient as torch's), 1 proven to first order "
         "(torch's own second order is not implemented), 2 refused, 0 failed, 1 without inputs, of 5"),
        "    [OC refused] writes noise in place besides what it returns (2): rrelu_with_noise, rrelu_with_noise_",
        "    eq.Tensor [OC no inputs]: no OpInfo; our inputs: none",
        "    sin [OC failed]: OC: gradgradcheck",
        "    [OP refused] writes noise in place besides what it returns (2): rrelu_with_noise, rrelu_with_noise_",
        "    eq.Tensor [OP no inputs]: no OpInfo; our inputs: none",
        "    hardsigmoid [OP first order]: gradcheck passes",
    ]
