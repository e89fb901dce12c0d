"""The corpus funnel's derived jvps (``transpiler.corpus_jvp``) on a five-entry corpus: the entries
whose backward transposes derive (their source returns ``outputs, backward, jvp``; one loops over
a range, accumulating the gradient; an in-place one whose jvp reads only its result's sizes), the
one not linear in the gradient and the in-place one whose jvp would read the input it overwrites
are refused with the reason, and the report counts and lists them, with the share among those
proven in reverse mode."""
from __future__ import annotations

from transpiler.corpus_jvp import CorpusJvps, DerivedSource, aten_operators, derive_corpus_jvps, report
from transpiler.frontend import SHIPPED_LIBRARY, load_library, operator_table

CORPUS = '''
from formulas import at, derivative


@derivative("sin(Tensor self) -> Tensor")
def sin(self):
    result = at.sin(self)
    def backward(grad):
        return grad * at.conj(at.cos(self))
    return result, backward


@derivative("cos(Tensor self) -> Tensor")
def cos(self):
    result = at.cos(self)
    def backward(grad):
        total = grad
        for _ in range(2):
            total = total + grad
        return total
    return result, backward


@derivative("tan(Tensor self) -> Tensor")
def tan(self):
    result = at.tan(self)
    def backward(grad):
        return grad * grad
    return result, backward


@derivative("squeeze_(Tensor(a!) self) -> Tensor(a!)")
def squeeze_(self):
    result = at.squeeze_(self)
    def backward(grad):
        return unsqueeze_to(grad, self.sizes())
    return result, backward


@derivative("mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)")
def mul__Tensor(self, other):
    result = at.mul_(self, other)
    def backward(grad):
        return grad * other, grad * self
    return result, backward
'''


def test_derived_and_refused_entries_are_counted_and_listed(tmp_path):
    (tmp_path / "corpus.py").write_text(CORPUS, encoding="utf-8")
    jvps = derive_corpus_jvps(load_library(str(tmp_path)), load_library(str(SHIPPED_LIBRARY)),
                              {"sin", "cos", "tan", "squeeze_", "mul_.Tensor"})
    assert sorted(jvps.derived) == ["cos", "sin", "squeeze_"] and jvps.derived["sin"].function == "sin"
    assert "def jvp(self_t):" in jvps.derived["sin"].source
    assert "return result, backward, jvp" in jvps.derived["sin"].source
    assert "_reversed_" in jvps.derived["cos"].source
    reason = ("the backward of `mul.Tensor` reads the value of `other` (a linear argument or the result) and its jvp "
              "(or its having none) does not show it affine in its linear arguments, so `grad * grad` is not shown "
              "to be linear in the gradient")
    # squeeze_'s backward is unsqueeze_to's, transposed to one reshape to the result's sizes: its
    # jvp reads neither `self` nor `self.sizes()`, which it would see squeezed after the write
    assert "self" not in jvps.derived["squeeze_"].source.split("def jvp(self_t):")[1].replace("self_t", "")
    # mul_'s jvp reads `self` (the other factor of other_t), which the write has changed
    in_place = ("the jvp reads `self`, which the operator writes in place: it would see the written value, not "
                "the input (derive its functional twin)")
    assert jvps.refused == {"tan": reason, "mul_.Tensor": in_place}
    jvps = CorpusJvps({name: jvps.derived[name] for name in ("sin", "cos")}, {"tan": reason})  # on three entries
    proofs = {"sin": {"status": "proven", "samples": 2, "source": "ours", "reason": ""},
              "cos": {"status": "failed", "samples": 2, "source": "ours", "reason": "F1: differs"}}
    lines = report(jvps, proofs, None)
    assert lines[0] == ("  without a jvp   3 emitted (no written forward formula in torch; 0 have its auto_linear / "
                        "auto_element_wise rule): 2 derive one, 1 refused")
    assert lines[1].endswith("1 proven, 1 failed, 0 without a case; 1 of the 2 derived with a case (50 %)")
    assert lines[2:] == [f"  tan [jvp not derived]: {reason}", "  cos [derived jvp failed]: F1: differs"]
    # the share among the entries proven in reverse mode: those without a jvp only (exp has one)
    among = report(jvps, proofs, ["sin", "tan", "exp"])[2]
    assert among == "    of those proven in reverse mode (CT): 1 of 2 (50 %) with a proven derived jvp"
    assert report(CorpusJvps({}, {}), {}, ["sin"])[2] == "    of those proven in reverse mode (CT): 0 of 0 (-) " \
                                                         "with a proven derived jvp"


def test_the_share_is_split_by_what_torchs_forward_ad_does():
    """Among the CT entries: torch's auto rule (sin), no differentiable output (eq: its jvp gives no
    tangent), and no forward formula at all (tan, refused; cos, proven)."""
    derived = {e: DerivedSource(e, "") for e in ("sin", "cos", "eq")}
    jvps = CorpusJvps(derived, {"tan": "not linear"}, frozenset({"sin"}))
    proofs = {"sin": {"status": "proven", "samples": 2, "source": "OpInfo", "reason": ""},
              "cos": {"status": "proven", "samples": 2, "source": "OpInfo", "reason": ""},
              "eq": {"status": "proven", "samples": 2, "source": "ours", "reason": "", "no_tangent": True}}
    lines = report(jvps, proofs, ["sin", "cos", "eq", "tan"])
    assert "; 1 give no tangent where no output is differentiable, as torch's): 3 proven," in lines[1]
    assert lines[2] == "    of those proven in reverse mode (CT): 3 of 4 (75 %) with a proven derived jvp"
    assert lines[3] == ("      by torch's forward AD there: 1 of the 1 with its auto rule; 1 with no differentiable "
                        "output (no tangent); 1 of the 2 where it raises (no forward formula: 50 %)")


def test_the_aten_operators_a_corpus_calls_that_no_library_declares_are_read_from_torchgen(tmp_path):
    """``_cdist_backward`` (called, declared nowhere) gets its schema from native_functions.yaml;
    ``sin`` (the corpus's) and ``cos`` (the library's) are declared already."""
    (tmp_path / "corpus.py").write_text(CORPUS.replace("return grad * at.conj(at.cos(self))",
                                                       "return at._cdist_backward(grad, self, self, 2.0, result)"))
    corpus = load_library(str(tmp_path))
    found = aten_operators(corpus, operator_table(corpus, load_library(str(SHIPPED_LIBRARY))))
    assert list(found) == ["_cdist_backward"]
    assert str(found["_cdist_backward"]).startswith("_cdist_backward(Tensor grad, Tensor x1, Tensor x2, float p, ")

ZERO_AND_MEAN = '''
from formulas import at, derivative


@derivative("poisson(Tensor self, Generator? generator=None) -> Tensor")
def poisson(self, generator=None):
    result = at.poisson(self, generator)
    def backward(grad):
        grad_self = at.zeros_like(self)
        return grad_self
    return result, backward


@derivative("abs(Tensor self) -> Tensor")
def abs(self):
    result = at.abs(self)
    def backward(grad):
        return at.mean(grad) * self
    return result, backward
'''


def test_a_zero_gradient_and_the_numel_of_a_linear_value_derive(tmp_path):
    """A gradient that is a zero maker whatever the incoming one (``poisson``'s) is the zero linear
    map: no tangent parameter; ``mean``'s transpose reads the ``numel()`` of its linear argument,
    told by the sizes rules (``huber_loss_backward``'s), and a full reduction is 0-d (the mean
    broadcast against ``self``, summed back to ``[]``)."""
    (tmp_path / "corpus.py").write_text(ZERO_AND_MEAN, encoding="utf-8")
    jvps = derive_corpus_jvps(load_library(str(tmp_path)), load_library(str(SHIPPED_LIBRARY)), {"poisson", "abs"})
    assert jvps.refused == {}
    assert "def jvp():" in jvps.derived["poisson"].source
    assert "reduced_numel(" in jvps.derived["abs"].source and "_sizes_4 = []" in jvps.derived["abs"].source


def test_no_differentiable_output_proves_no_tangent_as_torchs_forward_ad():
    """``eq.Scalar``: torch's output carries no gradient and its forward AD gives no tangent; a derived
    jvp giving none is proven (``NO_TANGENT``), one giving a tangent fails."""
    import torch

    corpus_jvp_proof = _proof_script()

    def giving(tangent):
        def ours(**arguments):
            return ["self_t"], lambda self_t: tangent
        return ours

    a = torch.tensor([0.7, 0.5, 2.1], dtype=torch.float64, requires_grad=True)
    schema = torch.ops.aten.eq.Scalar._schema
    none = corpus_jvp_proof.prove(giving(None), torch.ops.aten.eq.Scalar, schema, [((a, 0.5), {})])
    assert none == ("proven", 1, corpus_jvp_proof.NO_TANGENT)
    some = corpus_jvp_proof.prove(giving(torch.zeros(3)), torch.ops.aten.eq.Scalar, schema, [((a, 0.5), {})])
    assert some[0] == "failed" and "torch does not differentiate" in some[2]


def test_a_jvp_asking_grad_mode_is_proven_with_it_off_and_on():
    """``silu``'s jvp branches on ``GradMode.is_enabled()``: a branch that is wrong fails, whichever."""
    import torch

    corpus_jvp_proof = _proof_script()

    def ours(**arguments):
        def jvp(self_t):
            right = self_t * torch.cos(arguments["self"].detach())
            return right if not corpus_jvp_proof.GradMode.is_enabled() else 2 * right
        return ["self_t"], jvp

    a = torch.tensor([0.7, 1.3, 2.1], dtype=torch.float64, requires_grad=True)
    schema = torch.ops.aten.sin.default._schema
    assert corpus_jvp_proof.prove(ours, torch.sin, schema, [((a,), {})])[0] == "proven"
    off_and_on = corpus_jvp_proof.prove(ours, torch.sin, schema, [((a,), {})], (False, True))
    assert off_and_on[0] == "failed" and "finite differences" in off_and_on[2]


def test_a_sample_checked_through_its_opinfos_gradcheck_wrapper_gets_the_wrappers_inputs_and_tangents():
    """``cholesky``'s OpInfo checks it through ``op(input + input.mH)``: the jvp is given that input and
    the wrapper's tangent of it (Hermitian), and equals finite differences of the op through it."""
    import torch

    corpus_jvp_proof = _proof_script()

    def ours(**arguments):
        return ["self_t"], lambda self_t: self_t * torch.cos(arguments["self"].detach())

    a = torch.tensor([[0.7, 1.3], [0.2, 2.1]], dtype=torch.float64, requires_grad=True)
    symmetric = (lambda op, x: op(x + x.mT))
    schema = torch.ops.aten.sin.default._schema
    assert corpus_jvp_proof.prove(ours, torch.sin, schema, [((a,), {}, symmetric)]) == ("proven", 1, "")

def test_a_derived_jvp_raising_where_torch_implements_no_derivative_is_no_case():
    """``igamma``'s derivative in its first input is ``not_implemented`` in derivatives.yaml: a derived
    jvp raising ``NotImplementedError`` there refuses as torch's reverse mode does (no case); the same
    raise where torch differentiates (``mul``) is a failure. ``slow_conv3d_forward`` with a
    ``kernel_size`` other than the weight's runs (its forward does not check it) but torch's backward
    rejects it: a derived jvp raising there (torch's ``_convolution_double_backward``) is no case either."""
    import torch

    corpus_jvp_proof = _proof_script()

    def raising(error):
        def formula(**arguments):
            def jvp(**tangents):
                raise error
            return ["self_t"], jvp
        return formula

    not_implemented = raising(NotImplementedError("the derivative for 'igamma: input' is not implemented."))
    a = torch.tensor([0.7, 1.3, 2.1], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([0.4, 1.1, 1.9], dtype=torch.float64)
    schema = torch.ops.aten.igamma.default._schema
    igamma = corpus_jvp_proof.prove(not_implemented, torch.igamma, schema, [((a, b), {})])
    assert igamma[0] == "no inputs" and "reverse mode raises there too (the derivative for 'igamma" in igamma[2]
    mul = corpus_jvp_proof.prove(not_implemented, torch.mul, schema, [((a, b), {})])
    assert mul[0] == "failed" and mul[2].startswith("F1: NotImplementedError")
    negative = raising(RuntimeError("negative output_padding is not supported"))
    conv = torch.ops.aten.slow_conv3d_forward.default
    weight = torch.ones(1, 2, 2, 1, 1, dtype=torch.float64, requires_grad=True)
    other_kernel = ((a.new_ones(1, 2, 2, 1, 1).requires_grad_(), weight, [1, 1, 1], None, [1, 1, 1], [1, 1, 1]), {})
    assert corpus_jvp_proof.prove(negative, conv, conv._schema, [other_kernel])[0] == "no inputs"
    its_kernel = ((other_kernel[0][0], weight, [2, 1, 1], None, [1, 1, 1], [1, 1, 1]), {})
    failed = corpus_jvp_proof.prove(negative, conv, conv._schema, [its_kernel])
    assert failed[0] == "failed" and failed[2] == "F1: RuntimeError: negative output_padding is not supported"


def _proof_script():
    """``tests/yaml/corpus_jvp_proof.py``, imported as its script imports its neighbours."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import corpus_jvp_proof

    return corpus_jvp_proof
