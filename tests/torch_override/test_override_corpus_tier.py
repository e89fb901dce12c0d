"""The corpus tiers' proof through torch's aten operators (``tests/yaml/corpus_override.py``) on
formulas written as derivatives.yaml's entries are, in a package of their own: an entry with a
non-differentiable floating output is proven with forward AD (gradcheck's forward mode alone
would compare ``P``'s tangent with ``L``'s finite differences, and fail torch's own op too), an
entry whose formula calls a backward torch has no CPU kernel for is refused, saying which, one
torch does not differentiate is proven by its values, a backward may read ``GradMode.is_enabled()``; and
the funnel's report of the tiers groups the refusals by reason. An entry without a float64 case is
proven on complex128 ones (the conjugate Wirtinger derivatives gradcheck takes), with its dtype:
a formula right on real numbers that misses a conjugation fails there. An entry whose CPU kernels
take sparse layouts alone gets sparse cases."""
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

        @derivative("flip(Tensor self, int[] dims) -> Tensor")
        def flip(self, dims):
            result = at.flip(self, dims)
            def backward(grad):
                # IntArrayRef's methods (flip the last dim, then the others)
                return grad if dims.empty() else at.flip(at.flip(grad, [dims.back()]), dims.vec()[:dims.size() - 1])
            def jvp(self_t):
                return self_t if dims.empty() else at.flip(at.flip(self_t, dims.vec()[1:]), [dims.front()])
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

        @derivative("_conj(Tensor(a) self) -> Tensor(a)")
        def _conj(self):
            result = at._conj(self)
            def backward(grad):
                return at.conj(grad)
            def jvp(self_t):
                return at.conj(self_t)
            return result, backward

        @derivative("_fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward) -> Tensor")
        def _fft_c2c(self, dim, normalization, forward):
            result = at._fft_c2c(self, dim, normalization, forward)
            def backward(grad):
                return at._fft_c2c(grad, dim, normalization, not forward)
            return result, backward

        @derivative("view_as_real(Tensor(a) self) -> Tensor(a)")
        def view_as_real(self):
            result = at.view_as_real(self)
            def backward(grad):
                return at.view_as_complex(at.contiguous(grad))
            return result, backward

        @derivative("view_as_complex(Tensor(a) self) -> Tensor(a)")
        def view_as_complex(self):
            result = at.view_as_complex(self)
            def backward(grad):
                return at.view_as_real(at.resolve_conj(at.contiguous(grad)))
            return result, backward

        @derivative("crow_indices(Tensor(a) self) -> Tensor(a)", output_differentiability=[False])
        def crow_indices(self):
            result = at.crow_indices(self)
            def backward():
                return None
            return result, backward

        @derivative("_coalesce(Tensor self) -> Tensor")
        def _coalesce(self):
            result = at._coalesce(self)
            def backward(grad):
                return grad
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


@pytest.mark.parametrize("dims", [[0, 2], [1], []])
def test_the_cpp_methods_of_a_list_argument_run_as_python_spells_them(entries, dims):
    """derivatives.yaml calls ``IntArrayRef``'s methods on a list (``_fft_r2c``'s ``dim.back()``):
    the backward and the jvp run them on the Python list."""
    case = ((torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True), dims), {})
    assert corpus_override.prove("flip", "OP", True, [case], package=entries) == ("proven", 1, "")


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
    assert status == "refused"
    assert reason.startswith("OP: max_pool2d: its backward calls aten::max_pool2d_backward, which torch has no CPU kernel")


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
    results["OC"]["sin"] = {"status": "failed", "source": "OpInfo", "reason": "OC: gradgradcheck", "dtype": "float64"}
    results["OP"]["hardsigmoid"] = {"status": "first order", "source": "OpInfo", "reason": "gradcheck passes"}
    results["OP"]["_conj"] = {"status": "proven", "source": "OpInfo", "reason": "", "dtype": "complex128"}
    results["OC"]["_conj"] = {"status": "failed", "source": "OpInfo", "reason": "OC: gradcheck", "dtype": "complex128"}
    assert override_report(results) == [
        "  OC     0 proven (0 on torch's OpInfo samples, 0 without a gradient as torch's), 2 refused, 2 failed, 1 without inputs, of 5",
        ("  OP     2 proven (2 on torch's OpInfo samples, 0 without a gradient as torch's), 1 proven to first order "
         "(torch's own second order is not implemented), 2 refused, 0 failed, 1 without inputs, of 6"),
        "    [OC refused] writes noise in place besides what it returns (2): rrelu_with_noise, rrelu_with_noise_",
        "    _conj [OC failed on complex128]: OC: gradcheck",
        "    eq.Tensor [OC no inputs]: no OpInfo; our inputs: none",
        "    sin [OC failed]: OC: gradgradcheck",
        "    [OP refused] writes noise in place besides what it returns (2): rrelu_with_noise, rrelu_with_noise_",
        "    [OP proven on complex cases] (1): _conj (complex128)",
        "    eq.Tensor [OP no inputs]: no OpInfo; our inputs: none",
        "    hardsigmoid [OP first order]: gradcheck passes",
    ]


def ours(op: str) -> list:
    """Our complex cases of ``op`` (``corpus_inputs.complex_cases``), as the proof labels them."""
    schema = corpus_override.aten_overload(op)._schema
    return [(*case, "ours") for case in corpus_inputs.complex_cases(op, schema)]


def test_an_entry_without_a_float64_case_is_proven_on_complex128(entries):
    # torch's _conj rejects a real tensor
    assert corpus_override.prove_by_kind("_conj", "OP", True, ours("_conj"), package=entries) == \
        ("proven", 2, "", "ours", "complex128")


def test_a_list_of_dims_gets_a_value(entries):
    # _fft_c2c's `SymInt[] dim` (the first dim); on our one-dimensional case (gradgradcheck of a
    # complex fft is slow on the others)
    one_dimensional = [case for case in ours("_fft_c2c") if case[0][0].dim() == 1]
    assert one_dimensional[0][0][1] == [0]
    assert corpus_override.prove_by_kind("_fft_c2c", "OP", False, one_dimensional, package=entries) == \
        ("proven", 1, "", "ours", "complex128")


def test_the_dtype_of_a_proof_from_real_inputs_to_complex_outputs_says_both(entries):
    case = ((torch.randn(3, 2, dtype=torch.float64, requires_grad=True),), {}, "ours")
    assert corpus_override.prove_by_kind("view_as_complex", "OP", False, [case], package=entries) == \
        ("proven", 1, "", "ours", "float64 -> complex128")


def test_a_formula_missing_a_conjugation_fails_on_complex128(entries):
    # the package's exp: `grad * result`, right on real numbers; derivatives.yaml's is
    # `grad * result.conj()`
    status, _, reason, _, dtype = corpus_override.prove_by_kind("exp", "OP", False, ours("exp")[:1], package=entries)
    assert (status, reason, dtype) == ("failed", "OP: gradcheck", "complex128")


def test_an_output_processed_by_a_cases_wrapper_is_the_formulas(entries):
    # as linalg.eig's OpInfo samples (`output_process_fn_grad`: the eigenvectors' moduli), the
    # formula's node is that of the op's own output, under the processing
    def moduli(op, *args, **kwargs):
        return op(*args, **kwargs).abs()
    args, kwargs = ours("_conj")[0][:2]
    assert corpus_override.prove("_conj", "OP", True, [(args, kwargs, moduli)], package=entries,
                                 with_complex=True) == ("proven", 1, "")


def sparse(op: str) -> list:
    """Our sparse cases of ``op`` (``corpus_inputs.sparse_cases``), as the proof labels them."""
    return [(*case, "ours") for case in corpus_inputs.sparse_cases(op, corpus_override.aten_overload(op)._schema)]


def test_a_sparse_accessor_is_proven_without_a_gradient_on_its_layout(entries):
    # crow_indices takes a CSR tensor (torch has one kernel for the compressed layouts); torch does
    # not differentiate it
    assert corpus_override.prove_by_kind("crow_indices", "OP", False, sparse("crow_indices")[:1], package=entries) == \
        ("proven", 1, corpus_override.corpus_proof.WITHOUT_GRADIENT, "ours", "float64 sparse_csr")


def test_a_sparse_input_is_checked_first_order_and_says_why_not_second(entries):
    # _coalesce of an uncoalesced COO tensor: gradcheck(masked=True) through the override; torch's
    # gradgradcheck refuses a sparse first derivative, its own op's too
    assert corpus_override.prove_by_kind("_coalesce", "OP", False, sparse("_coalesce")[:1], package=entries) == \
        ("no inputs", 0, corpus_override.SPARSE_FIRST_ORDER, "", "")
