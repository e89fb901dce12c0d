"""``jvp="derived"`` in the front-end and ``transpile --show-jvp``: the derived source, and the
refusals as one-line diagnostics (the numerical proof is tests/engine/test_derived_jvp.py)."""
from __future__ import annotations

import textwrap

import pytest

from transpiler.derive_jvp import code
from transpiler.frontend import load_library
from transpiler.model import JvpRule
from transpiler.show_jvp import main as show_jvp


def _package(tmp_path, source: str):
    package = tmp_path / "mine"
    package.mkdir()
    (package / "ops.py").write_text(textwrap.dedent(source))
    return load_library(str(package))


def test_a_derived_jvp_is_the_formulas_jvp(tmp_path):
    library = _package(tmp_path, '''
        from formulas import at, derivative

        @derivative("my_sin(Tensor self) -> Tensor", jvp="derived")
        def my_sin(self):
            result = at.sin(self)
            def backward(grad):
                return grad * at.cos(self)
            return result, backward
        ''')
    [formula] = library.formulas
    assert not library.diagnostics
    assert formula.jvp.rule is JvpRule.DERIVED and formula.jvp.params == ("self_t",)
    text = code(formula.jvp.node)
    assert "self_t * factor_3" in text and "at.cos(self)" in text


def test_a_backward_not_linear_in_grad_is_db107_naming_the_step(tmp_path):
    library = _package(tmp_path, '''
        from formulas import at, derivative

        @derivative("squared(Tensor self) -> Tensor", jvp="derived")
        def squared(self):
            result = at.mul(self, self)
            def backward(grad):
                return grad * grad
            return result, backward
        ''')
    [diagnostic] = library.diagnostics
    assert diagnostic.code == "DB107" and (diagnostic.line, diagnostic.col) == (4, 47)
    assert "`grad * grad` is not shown to be linear in the gradient" in diagnostic.message


def test_show_jvp_prints_the_derived_source(capsys):
    assert show_jvp(["sin"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("def jvp(self_t):") and "at.cos(self)" in printed


def test_show_jvp_says_why_a_backward_is_refused_and_what_is_unknown(tmp_path, capsys):
    _package(tmp_path, '''
        from formulas import at, derivative

        @derivative("squared(Tensor self) -> Tensor")
        def squared(self):
            result = at.mul(self, self)
            def backward(grad):
                return grad * grad
            return result, backward
        ''')
    assert show_jvp(["squared", "--formulas", str(tmp_path / "mine")]) == 1
    assert "`grad * grad` is not shown to be linear in the gradient" in capsys.readouterr().err
    assert show_jvp(["no_such_op"]) == 2
    assert "no formula for `no_such_op`" in capsys.readouterr().err


#: An operator with two outputs, linear in ``grad`` (``w`` held): its backward reads ``grad`` for
#: ``w``'s gradient, its jvp in ``w_t``'s term only; ``user``'s backward unpacks both outputs.
TWO_OUTPUTS = '''
    from formulas import at, derivative

    @derivative("scaled_pair(Tensor grad, Tensor w) -> (Tensor, Tensor)")
    def scaled_pair(grad, w):
        first, second = at.scaled_pair(grad, w)
        def backward(grad_first, grad_second):
            grad_grad = at.mul(grad_first, w) + at.mul(grad_second, at.neg(w))
            grad_w = at.mul(grad_first, grad) - at.mul(grad_second, grad)
            return grad_grad, grad_w
        def jvp(grad_t, w_t):
            return grad_t * w + grad * w_t, -(grad_t * w) - grad * w_t
        return (first, second), backward

    @derivative("user(Tensor self, Tensor w) -> Tensor", jvp="derived")
    def user(self, w):
        result = at.user(self, w)
        def backward(grad):
            first, second = at.scaled_pair(grad, w)
            return first, second
        return result, backward
    '''


def test_an_unpacked_call_with_several_outputs_transposes_to_its_backward_given_each_adjoint(tmp_path):
    library = _package(tmp_path, TWO_OUTPUTS)
    assert not library.diagnostics
    [user] = [f for f in library.formulas if f.op_name == "user"]
    text = code(user.jvp.node)
    # the backward of scaled_pair for `grad`, its gradients the tangents of self and w
    assert "at.mul(self_t, w) + at.mul(w_t, at.neg(w))" in text
    assert "grad_w" not in text                     # w's gradient (the stand-in for `grad`) is dead


def test_an_operator_whose_jvp_reads_the_linear_value_in_its_own_term_is_refused(tmp_path):
    library = _package(tmp_path, TWO_OUTPUTS.replace("return grad_t * w + grad * w_t,", "return grad_t * grad,"))
    [diagnostic] = library.diagnostics
    assert diagnostic.code == "DB107"
    assert "reads the value of `grad`" in diagnostic.message and "does not show it affine" in diagnostic.message


def test_an_operator_whose_jvp_helper_shows_it_affine_term_by_term_transposes(tmp_path):
    """``scaled_pair``'s jvp is a helper: its body, a choice on a flag between sums, reads ``grad``
    only in ``w_t``'s terms, so ``grad`` gets a stand-in; reading it in ``grad_t``'s is refused."""
    helper = '''
    from formulas import helper

    @helper
    def pair_tangent(grad_t: Tensor, w_t: Tensor, grad: Tensor, w: Tensor, flip: bool) -> Tensor:
        return grad_t * w + grad * w_t if flip else grad_t * w - grad * w_t

    '''
    jvp = "return pair_tangent(grad_t, w_t, grad, w, True), pair_tangent(grad_t, w_t, grad, w, False)"
    library = _package(tmp_path, helper + TWO_OUTPUTS.replace("return grad_t * w + grad * w_t, -(grad_t * w) - grad * w_t",
                                                                jvp))
    assert not library.diagnostics
    [user] = [f for f in library.formulas if f.op_name == "user"]
    assert "at.mul(self_t, w) + at.mul(w_t, at.neg(w))" in code(user.jvp.node)
    (tmp_path / "refused").mkdir()
    refused = _package(tmp_path / "refused", helper.replace("grad_t * w + grad", "grad_t * grad + grad")
                       + TWO_OUTPUTS.replace("return grad_t * w + grad * w_t, -(grad_t * w) - grad * w_t", jvp))
    [diagnostic] = refused.diagnostics
    assert diagnostic.code == "DB107" and "does not show it affine" in diagnostic.message


def test_the_sizes_of_a_squeezed_gradient_are_told(tmp_path):
    """A transpose that needs the sizes of a gradient ``squeeze``d at a dim (``cat``'s: its entries')
    gets them from ``squeezed_sizes``."""
    library = _package(tmp_path, '''
        from formulas import at, derivative

        @derivative("joined(Tensor self) -> Tensor", jvp="derived")
        def joined(self):
            result = at.joined(self)
            def backward(grad):
                return at.cat([at.squeeze(grad, 0)], -1)
            return result, backward
        ''')
    assert not library.diagnostics
    assert "squeezed_sizes(result.sizes(), 0)" in code(library.formulas[0].jvp.node)

def test_one_int_for_an_int1_list_and_a_negative_dim_pick_their_overloads(tmp_path):
    library = _package(tmp_path, '''
        from formulas import at, derivative

        @derivative("picked(Tensor self, Tensor other, int dim) -> Tensor", jvp="derived")
        def picked(self, other, dim):
            result = at.picked(self, other, dim)
            def backward(grad):
                return at.squeeze(at.unsqueeze(grad, -1), -1), at.sum(grad, dim, True)
            return result, backward
        ''')
    assert not library.diagnostics
    text = code(library.formulas[0].jvp.node)
    assert "([dim]), True)" in text                 # sum.dim_IntList's dims: a list of one
    # squeeze.dim (not squeeze.dims) for `-1`: its transpose gives back the unsqueezed sizes
    assert "unsqueezed_sizes(result.sizes(), -1)" in text and "at.reshape(self_t, " in text
    assert "unsqueezed_sizes" in library.formulas[0].references     # the helper its C++ needs (a package's copy)


def test_a_not_implemented_input_raises_only_where_it_can_have_a_tangent(tmp_path):
    library = _package(tmp_path, '''
        from formulas import at, derivative

        @derivative("masked_scale(Tensor self, Tensor mask) -> Tensor", jvp="derived")
        def masked_scale(self, mask):
            result = at.masked_scale(self, mask)
            def backward(grad, *, needs_input_grad):
                if needs_input_grad[1]:
                    raise NotImplementedError("the derivative for 'masked_scale: mask' is not implemented.")
                return grad * mask, None
            return result, backward

        @derivative("scale_(Tensor(a!) self) -> Tensor(a!)", jvp="derived")
        def scale_(self):
            result = at.scale_(self)
            def backward(grad, *, needs_input_grad):
                if needs_input_grad[0]:
                    raise NotImplementedError("the derivative for 'scale_' is not implemented.")
                return grad
            return result, backward
        ''')
    assert not library.diagnostics
    masked, in_place = (code(f.jvp.node) for f in library.formulas)
    assert "if (mask.is_floating_point() or mask.is_complex()):\n        raise NotImplementedError" in masked
    # an input written in place is not read after the write: its test stays `True`
    assert in_place.startswith("def jvp(self_t):\n    raise NotImplementedError")


def test_a_diagonal_gradient_reading_grad_twice_is_evaluated_on_the_tangent(tmp_path):
    library = _package(tmp_path, '''
        from formulas import at, derivative, sum_to

        @derivative("my_fmin(Tensor self, Tensor other) -> Tensor", jvp="derived")
        def my_fmin(self, other):
            result = at.fmin(self, other)
            self_sizes = self.sizes()
            other_sizes = other.sizes()
            def backward(grad, *, needs_input_grad):
                zeros = at.zeros_like(grad)
                nan_other = at.ne(other, other)
                grad_self = None
                if needs_input_grad[0]:
                    grad_self = sum_to(at.where(at.le(self, other), grad, at.where(nan_other, grad, zeros)), self_sizes)
                grad_other = None
                if needs_input_grad[1]:
                    grad_other = sum_to(at.where(at.le(self, other), zeros, at.where(nan_other, zeros, grad)), other_sizes)
                return grad_self, grad_other
            return result, backward

        @derivative("my_scaled(Tensor self, Tensor other) -> Tensor", jvp="derived")
        def my_scaled(self, other):
            result = at.mul(self, other)
            self_sizes = self.sizes()
            def backward(grad):
                return sum_to(at.where(at.gt(other, 0), grad * other, at.zeros_like(grad)), self_sizes), None
            return result, backward
        ''')
    assert not library.diagnostics
    fmin, scaled = (code(f.jvp.node) for f in library.formulas)
    # the two shares, where-terms on one condition merged, are fmin's own jvp at the broadcast tangents
    assert "at.where(factor_48, self_broadcast_45, at.where(nan_other, self_broadcast_45, other_broadcast_46))" in fmin
    assert "if diagonal_share_47.sizes() != result.sizes():" in fmin
    # read once, the gradient is transposed step by step
    assert "diagonal_share" not in scaled and "at.where(" in scaled


def test_a_list_started_in_a_loop_is_made_again_in_each_pass_that_replays_it(tmp_path):
    """The sizes of ``gradient`` grow in each iteration, so the list of its pieces' sizes made in an
    iteration holds that iteration's sizes: every pass over the loop (the branch replayed for its
    reverse sweep too) makes it again rather than reading the one the first pass left."""
    import numpy as np

    import reference_engine as engine
    from formulas import at
    from formulas.helpers import concatenated_sizes, narrow_backward, narrowed_sizes, wrap_dim
    library = _package(tmp_path, '''
        from formulas import at, derivative

        @derivative("grown_rows(Tensor self, int n) -> Tensor", jvp="derived")
        def grown_rows(self, n):
            result = at.grown_rows(self, n)
            def backward(grad):
                gradient = grad
                if self.dim() > 0:
                    rows = self.size(0)
                    while rows < n:
                        gradient = at.cat([gradient, at.narrow(gradient, 0, 0, rows)], 0)
                        rows = rows + rows
                    gradient = at.narrow(gradient, 0, 0, self.size(0))
                return gradient
            return result, backward
        ''')
    [formula] = library.formulas
    text = code(formula.jvp.node)
    namespace = {"at": at, "narrow_backward": narrow_backward, "narrowed_sizes": narrowed_sizes,
                 "concatenated_sizes": concatenated_sizes, "wrap_dim": wrap_dim}
    self_value, result_value = engine.Tensor(np.ones((3, 2))), engine.Tensor(np.ones((4, 2)))
    tangent = engine.Tensor(np.arange(6.0).reshape(3, 2))
    local: dict = {}
    exec(text, {**namespace, "self": self_value, "result": result_value, "n": 8}, local)  # noqa: S102
    # the backward reads the first 3 rows of grad: the jvp writes the tangent there, zeros below
    np.testing.assert_array_equal(local["jvp"](tangent).numpy(), np.vstack([np.arange(6.0).reshape(3, 2), np.zeros((1, 2))]))


def test_an_operator_whose_jvp_branches_on_metadata_shows_it_affine_branch_by_branch(tmp_path):
    """``scaled_pair``'s jvp adds ``w_t``'s terms (reading ``grad``) under an ``if`` on metadata:
    each branch is read term by term, so ``grad`` gets a stand-in; a branch reading ``grad`` in
    ``grad_t``'s term is refused."""
    branched = ("first_t = grad_t * w\n            second_t = -(grad_t * w)\n"
                "            if w.dim() >= 0:\n                first_t = first_t + grad * w_t\n"
                "                second_t = second_t - grad * w_t\n            return first_t, second_t")
    written = "return grad_t * w + grad * w_t, -(grad_t * w) - grad * w_t"
    library = _package(tmp_path, TWO_OUTPUTS.replace(written, branched))
    assert not library.diagnostics
    [user] = [f for f in library.formulas if f.op_name == "user"]
    assert "at.mul(self_t, w) + at.mul(w_t, at.neg(w))" in code(user.jvp.node)
    (tmp_path / "refused").mkdir()
    refused = _package(tmp_path / "refused", TWO_OUTPUTS.replace(written, branched.replace(
        "first_t = first_t + grad * w_t", "first_t = first_t * grad")))
    [diagnostic] = refused.diagnostics
    assert diagnostic.code == "DB107" and "does not show it affine" in diagnostic.message


@pytest.mark.parametrize("returned, derived", [
    ("-0.5 * grad * at.cos(self)", "at.mul(grad_self_"),     # the number last: mul.Scalar(grad, -0.5), as Tensor.__rmul__
])
def test_a_number_before_the_gradient_is_torchs_reflected_method(tmp_path, returned, derived):
    library = _package(tmp_path, f'''
        from formulas import at, derivative

        @derivative("scaled(Tensor self) -> Tensor", jvp="derived")
        def scaled(self):
            result = at.sin(self)
            def backward(grad):
                return {returned}
            return result, backward
        ''')
    assert not library.diagnostics
    assert derived in code(library.formulas[0].jvp.node)
