"""The jvp derived from each backward by transposition (``transpiler.derive_jvp``), proven on
the library: for every formula and every OpCase, the derived jvp's tangents equal those of the
formula's own jvp (written or ``auto_*``), or torch's forward AD where the formula has none;
no formula's backward is refused."""
from __future__ import annotations

import contextlib
import functools
import inspect
import textwrap

import numpy as np
import pytest
import torch
from op_cases import ALL_CASES, OpCase, differentiable_view, torch_jvp_op

import reference_engine as engine
from formulas import FORMULAS, at, helpers
from formulas.helpers import (
    convolution_sizes,
    diagonal_sizes,
    embedded_sizes,
    flattened_sizes,
    matmul_sizes,
    narrowed_sizes,
    permuted_sizes,
    reverse_list,
    transposed_sizes,
    unsqueezed_sizes,
)
from reference_engine.forward_ad import derived_jvps
from tests.engine.test_tiers import _as_list, _weights, engine_call
from transpiler.derive_jvp import OPERATOR_BACKWARD_HELPERS, DerivationRefused, derive_jvp
from transpiler.frontend import SHIPPED_LIBRARY, load_library, operator_table


@functools.cache
def derivations() -> dict[str, str | None]:
    """Each formula's op -> None when its jvp derives, else the refusal's reason."""
    library = load_library(str(SHIPPED_LIBRARY))
    operators = operator_table(library)
    found: dict[str, str | None] = {}
    for formula in library.formulas:
        try:
            derive_jvp(formula, operators)
            found[formula.op_name] = None
        except DerivationRefused as refusal:
            found[formula.op_name] = refusal.reason
    return found


DERIVED_CASES = [case for case in ALL_CASES if case.op in FORMULAS and derivations().get(case.op, "") is None]


def _tangents(case: OpCase, derived: bool) -> list:
    fn, inputs = engine_call(case)
    tangents = _weights([t.shape for t in inputs], seed=3)
    primals = [t.detach() for t in inputs]
    if derived:
        with derived_jvps():
            outs, out_tangents = engine.jvp(fn, primals, [engine.Tensor(v) for v in tangents])
    else:
        outs, out_tangents = engine.jvp(fn, primals, [engine.Tensor(v) for v in tangents])
    return [t.numpy() for o, t in zip(_as_list(outs), _as_list(out_tangents)) if o.is_floating_point()], tangents


def _torch_tangents(case: OpCase, tangents: list) -> list:
    builtin, leaves = differentiable_view(case, torch_jvp_op(case.op))
    _, expected = torch.func.jvp(builtin, tuple(x.detach() for x in leaves),
                                 tuple(torch.from_numpy(v) for v in tangents))
    return [t.numpy(force=True) for t in _as_list(expected)]


@pytest.mark.parametrize("case", DERIVED_CASES, ids=lambda c: c.name)
def test_derived_jvp_equals_the_formulas_own(case: OpCase):
    got, tangents = _tangents(case, derived=True)
    try:
        expected, _ = _tangents(case, derived=False)
    except NotImplementedError:             # the formula declares no jvp: torch is the oracle
        expected = _torch_tangents(case, tangents)
    assert len(got) == len(expected)
    for i, (a, b) in enumerate(zip(got, expected)):
        assert a.shape == b.shape, f"tangent {i}"
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-10, err_msg=f"tangent {i}")


def test_every_formula_derives():
    refused = {op: reason for op, reason in derivations().items() if reason is not None}
    assert not refused
    assert len(derivations()) >= 200


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_matrix_exp_differential_is_linear_and_its_adjoint_is_its_transpose(dtype):
    """``linalg_matrix_exp_differential`` is declared self-transposed (``SELF_TRANSPOSED_HELPERS``):
    linear in its direction and, with ``adjoint``, the adjoint under ``<X, Y> = Re tr(X^H Y)``; and
    the differential it computes is that of ``matrix_exp`` (central differences, step 1e-6)."""
    from formulas.linalg import linalg_matrix_exp_differential as differential
    from formulas.torch.backend import TorchBackend
    backend, generator = TorchBackend.for_library(), torch.Generator().manual_seed(5)
    a, e, f, g = (torch.randn(2, 3, 3, dtype=dtype, generator=generator) for _ in range(4))
    def apply(direction, adjoint=False):
        return backend.run(differential, a, direction, adjoint)
    torch.testing.assert_close(apply(2.0 * e - 3.0 * f), 2.0 * apply(e) - 3.0 * apply(f), rtol=1e-12, atol=1e-12)
    inner = torch.sum(g.conj() * apply(e)).real
    torch.testing.assert_close(inner, torch.sum(apply(g, True).conj() * e).real, rtol=1e-12, atol=1e-12)
    step = 1e-6
    expected = (torch.linalg.matrix_exp(a + step * e) - torch.linalg.matrix_exp(a - step * e)) / (2 * step)
    torch.testing.assert_close(apply(e), expected, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("input_sizes, weight_sizes, stride, padding, dilation, transposed, output_padding, groups", [
    ((2, 4, 7), (6, 2, 3), [2], [1], [1], False, [0], 2),
    ((2, 5, 4), (3, 2, 2, 3), [2, 1], [1, 0], [2, 1], False, [0], 1),          # unbatched
    ((2, 4, 3), (4, 3, 3), [2], [1], [1], True, [1], 2),
    ((1, 2, 3, 2), (2, 2, 2, 2), [2, 1], [1, 0], [1, 2], True, [1, 1], 1),    # output_padding reaching past the stride
    # padding beyond the kernel's reach d(K-1): the gradient is cropped
    ((1, 1, 2, 2, 2), (1, 1, 1, 1, 1), [1, 1, 1], [1, 1, 1], [1, 1, 1], False, [0], 1),
    ((1, 2, 3, 2), (2, 2, 2, 1), [1, 2], [3, 2], [2, 1], False, [0], 1),
    ((2, 2, 5), (2, 3, 2), [2], [3], [1], True, [1], 1),
])
def test_convolution_gradients_transpose_to_their_declared_helpers(input_sizes, weight_sizes, stride, padding, dilation,
                                                                   transposed, output_padding, groups):
    """Each ``TRANSPOSED_BY_HELPERS`` helper of ``formulas/convolution.py`` is torch's gradient, and it
    and its transposing helper are adjoint: ``<H(g), x> = <g, T(x, sizes of g)>`` for the gradient ``g``
    of a convolution's result."""
    from formulas import convolution as conv
    from formulas.torch.backend import TorchBackend
    from transpiler.derive_jvp import TRANSPOSED_BY_HELPERS
    backend, generator = TorchBackend.for_library(), torch.Generator().manual_seed(7)
    input, weight = (torch.randn(sizes, dtype=torch.float64, generator=generator) for sizes in (input_sizes, weight_sizes))
    bias = torch.zeros(weight_sizes[1] * groups if transposed else weight_sizes[0], dtype=torch.float64)
    batched = len(input_sizes) == len(weight_sizes)
    leaves = [t.requires_grad_() for t in (input, weight, bias)]
    result = torch.convolution(input if batched else input.unsqueeze(0), weight, bias, stride, padding, dilation,
                               transposed, output_padding, groups)
    result = result if batched else result.squeeze(0)
    grad = torch.randn(result.shape, dtype=torch.float64, generator=generator)
    torchs = dict(zip(("convolution_input_backward", "convolution_weight_backward", "convolution_bias_backward"),
                      torch.autograd.grad(result, leaves, grad)))
    input, weight, result = input.detach(), weight.detach(), result.detach()
    parameters = (stride, padding, dilation, transposed, groups)
    pairs = {"convolution_input_backward": ((grad, weight, list(input_sizes), *parameters), input_sizes),
             "convolution_weight_backward": ((grad, input, list(weight_sizes), *parameters), weight_sizes),
             "convolution_bias_backward": ((grad, len(weight_sizes)), [result.shape[1 if batched else 0]])}
    assert set(pairs) == set(TRANSPOSED_BY_HELPERS) - {"reversed_linear_recurrence"}    # the scan's: below
    for name, (arguments, sizes) in pairs.items():
        direction = torch.randn(sizes, dtype=torch.float64, generator=generator)
        gradient = backend.run(getattr(conv, name), *arguments)
        torch.testing.assert_close(gradient, torchs[name], rtol=1e-12, atol=1e-12)
        transposed_direction = backend.run(getattr(conv, TRANSPOSED_BY_HELPERS[name][2]), direction, *arguments[1:],
                                           list(result.shape))
        assert transposed_direction.shape == result.shape
        torch.testing.assert_close(torch.sum(gradient * direction), torch.sum(grad * transposed_direction),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sizes, dim", [((3, 5), 1), ((6, 2), 0), ((2, 3, 4), -1), ((1, 4), 0), ((0, 3), 1)])
def test_the_scans_recurrence_transposes_to_its_declared_helper(sizes, dim):
    """``reversed_linear_recurrence`` (``TRANSPOSED_BY_HELPERS``) and its transposing helper are
    adjoint in ``offset``: ``<R(offset), a> = <offset, T(a)>``; neither reads the last factor (an
    infinity there leaves both finite), and ``T`` is the recurrence read from the first entry."""
    from formulas import scans
    from formulas.torch.backend import TorchBackend
    backend, generator = TorchBackend.for_library(), torch.Generator().manual_seed(3)
    offset, factor, adjoint = (torch.randn(sizes, dtype=torch.float64, generator=generator) for _ in range(3))
    if sizes[dim]:
        factor.narrow(dim, sizes[dim] - 1, 1).fill_(float("inf"))
    recurrence = backend.run(scans.reversed_linear_recurrence, offset, factor, dim)
    transposed = backend.run(scans.reversed_linear_recurrence_transposed, adjoint, factor, dim, list(sizes))
    assert transposed.shape == offset.shape and torch.isfinite(transposed).all()
    torch.testing.assert_close(torch.sum(recurrence * adjoint), torch.sum(offset * transposed), rtol=1e-12, atol=1e-12)
    expected = adjoint.clone()           # y_k = a_k + factor_{k-1} y_{k-1}, step by step
    for k in range(1, sizes[dim]):
        expected.narrow(dim, k, 1).add_(factor.narrow(dim, k - 1, 1) * expected.narrow(dim, k - 1, 1))
    torch.testing.assert_close(transposed, expected, rtol=1e-12, atol=1e-12)


#: Each ``OPERATOR_BACKWARD_HELPERS`` helper with (grad's shape, its other arguments): the operator's
#: own backward, then uses where ``grad`` has other sizes (the transpose written out for them).
OPERATOR_BACKWARD_CASES = {
    "sum_backward": [((3,), ([2, 3], [0], False)), ((2, 1), ([2, 3], [1], True)), ((), ([2, 3], None, False)),
                     ((), ([2, 3], [], True)), ((4,), ([2, 3, 4], [-3, 1], False)),
                     ((3,), ([2, 3], [0], True)), ((1,), ([2, 3], [0], False))],
    "unsqueeze_to": [((3,), ([1, 3],)), ((2, 3), ([2, 1, 3, 1],)), ((1, 3), ([1, 1, 3],))],
    "repeat_backward": [((4, 3), ([2, 1], [2, 3])), ((2, 4, 3), ([2, 2, 1], [2, 3])), ((12,), ([2, 1], [2, 3])),
                        ((), ([], [])), ((2, 3), ([2], [1, 3]))],
}


@pytest.mark.parametrize("name", sorted(OPERATOR_BACKWARD_CASES))
def test_operator_backward_helpers_transpose_to_their_operator(name):
    """An ``OPERATOR_BACKWARD_HELPERS`` helper transposes to the operator it is the backward of (and,
    for a ``grad`` of other sizes, to the transpose written out): ``<helper(g), t> = <g, T(t)>``
    for every ``g`` and ``t``, and ``T(t)`` has ``g``'s shape."""
    others = list(inspect.signature(getattr(helpers, name)).parameters)[1:]
    rng = np.random.default_rng(7)
    for grad_shape, arguments in OPERATOR_BACKWARD_CASES[name]:
        g = engine.Tensor(rng.standard_normal(grad_shape))
        forward = getattr(helpers, name)(g, *arguments)
        fields = {p: repr(a) for p, a in zip(others, arguments)}
        fields.update(adjoint="adjoint", grad_sizes=repr(list(grad_shape)), result="transposed")
        fields.update({f"_{stem}": stem for stem in ("kept", "d", "lead", "split", "dims")})
        body = textwrap.indent(OPERATOR_BACKWARD_HELPERS[name].format(**fields), "    ")
        local: dict = {}
        exec(f"def transpose(adjoint):\n{body}    return transposed\n", {"at": at, **vars(helpers)}, local)  # noqa: S102
        t = engine.Tensor(rng.standard_normal(forward.shape))
        transposed = local["transpose"](t)
        assert tuple(transposed.shape) == grad_shape, (grad_shape, arguments)
        np.testing.assert_allclose(np.sum(forward.numpy() * t.numpy()), np.sum(g.numpy() * transposed.numpy()),
                                   rtol=1e-12, atol=1e-12, err_msg=str((grad_shape, arguments)))


def test_xlogy_derived_jvp_keeps_the_subgradient_where_self_is_zero():
    """``xlogy`` transposes as a scaling of ``self`` (``SCALES_SELF``): the derived jvp equals the
    written one where the OpCases do not reach, at ``self = 0`` with ``other <= 0`` (torch's 0, not
    -inf or NaN) and ``other = 0`` elsewhere (-inf times the tangent)."""
    self = np.array([[0.0, 0.0, 1.5, -2.0, 0.0], [0.0, 3.0, 0.0, 1.0, -1.0]])
    other = np.array([0.0, -1.0, 0.0, 2.0, 0.5])
    tangents = [np.array([[1.0, -2.0, 0.5, 0.0, 3.0], [0.0, 1.0, 2.0, -1.0, 0.5]]), np.zeros(5)]    # other's part aside
    cases = [(engine.op("xlogy.Tensor"), [self, other], tangents),
             (lambda x: engine.op("xlogy.Scalar_Other")(x, -1.5), [self], tangents[:1])]
    for fn, primals, directions in cases:
        found = []
        for derived in (True, False):
            with derived_jvps() if derived else contextlib.nullcontext():
                _, tangent = engine.jvp(fn, [engine.Tensor(p) for p in primals], [engine.Tensor(d) for d in directions])
            found.append(tangent.numpy())
        np.testing.assert_array_equal(found[0], found[1])


@pytest.mark.parametrize("sizes", [[], [4], [2, 3], [2, 1, 3]])
def test_unsqueezed_sizes_are_those_of_unsqueeze(sizes: list[int]):
    """The sizes rule of ``unsqueeze`` (the derivation's ``unsqueezed_sizes``) at every dim."""
    for dim in range(-len(sizes) - 1, len(sizes) + 1):
        assert unsqueezed_sizes(sizes, dim) == list(np.expand_dims(np.zeros(sizes), dim).shape), dim


def test_sizes_helpers_are_those_of_their_operators():
    """The sizes rules of ``SIZES_HELPERS`` (``formulas/helpers.py``) against torch's results."""
    x = torch.zeros(2, 3, 4)
    assert transposed_sizes([2, 3, 4], 0, -1) == list(x.transpose(0, -1).shape)
    assert reverse_list([2, 3]) == list(torch.zeros(2, 3).t().shape)
    assert permuted_sizes([2, 3, 4], [2, 0, 1]) == list(x.permute(2, 0, 1).shape)
    assert flattened_sizes([2, 3, 4], -2, -1) == list(x.flatten(-2, -1).shape)
    assert flattened_sizes([], 0, -1) == list(torch.zeros(()).flatten().shape)
    assert narrowed_sizes([2, 3, 4], -1, 2) == list(x.narrow(-1, 1, 2).shape)
    for offset in (-2, 0, 1, 5):
        assert diagonal_sizes([2, 3, 4], offset, 2, 0) == list(x.diagonal(offset, 2, 0).shape), offset
    for a, b in [([3], [3]), ([3], [2, 3, 4]), ([2, 3, 4], [4]), ([5, 1, 3, 4], [2, 4, 6]), ([3, 4], [4, 2])]:
        assert matmul_sizes(a, b) == list(torch.matmul(torch.zeros(a), torch.zeros(b)).shape), (a, b)
    assert embedded_sizes([7, 5], [2, 3]) == list(torch.nn.functional.embedding(
        torch.zeros(2, 3, dtype=torch.long), torch.zeros(7, 5)).shape)
    for transposed, weight in ((False, [6, 2, 3, 2]), (True, [4, 3, 3, 2])):
        output_padding = [1, 0] if transposed else [0]
        expected = torch.ops.aten.convolution(torch.zeros(2, 4, 9, 7), torch.zeros(weight), None, [2, 1], [1],
                                              [1, 2], transposed, output_padding, 2).shape
        assert convolution_sizes([2, 4, 9, 7], weight, [2, 1], [1], [1, 2], transposed, output_padding, 2) \
            == list(expected), transposed
