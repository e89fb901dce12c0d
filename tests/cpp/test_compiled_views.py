"""Compiled view operators return real views: in-place writes through them equal torch's built-ins.

Each case is written once over an operator table: ``torch.ops.formulas`` (the compiled
formulas) or the built-in operators; gradients (first and second order) and errors must
be the same.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch


BUILTIN = SimpleNamespace(view=torch.ops.aten.view, reshape=torch.ops.aten.reshape, permute=torch.ops.aten.permute,
                          narrow=torch.ops.aten.narrow, t=torch.ops.aten.t, expand=torch.ops.aten.expand,
                          unsqueeze=torch.ops.aten.unsqueeze)


def issue_example(x, F):        # the issue's reproduction: torch gives 18·x
    a = x * 1.0
    v = F.view(a, [3, 2])
    v.mul_(3)
    return (a * a).sum()


def permute_add(x, F):
    a = x.sin()
    F.permute(F.view(a, [2, 3]), [1, 0]).add_(F.view(x, [3, 2]))
    return (a * a * a).sum()


def narrow_mul(x, F):
    a = x * 2.0
    F.narrow(a, 0, 1, 3).mul_(F.narrow(x, 0, 0, 3).exp())
    return (a * a).sum()


def transpose_then_builtin_slice(x, F):
    a = F.view(x, [2, 3]) * 1.0
    F.t(a)[2:].mul_(F.t(a)[:1].exp())      # torch's own slice of a compiled view
    return (a ** 3).sum()


def view_of_view_of_view(x, F):
    a = x * 1.0
    w = F.narrow(F.permute(F.view(a, [2, 3]), [1, 0]), 0, 1, 2)
    w.mul_(F.view(F.narrow(x, 0, 0, 4), [2, 2]).sin())
    return (a * a).sum()


def unsqueeze_write_seen_by_other_view(x, F):
    a = x * 1.0
    flat = F.view(a, [6])
    F.unsqueeze(F.view(a, [3, 2]), 0).mul_(F.view(x, [1, 3, 2]))
    return (flat * flat).sum()


def write_to_the_base_seen_by_its_view(x, F):
    a = x * 1.0
    v = F.view(a, [3, 2])
    a.mul_(x)
    return (v ** 3).sum()


def reshape_that_copies_is_not_a_view(x, F):
    a = F.view(x, [2, 3]) * 1.0
    r = F.reshape(F.t(a), [6])          # not viewable: a copy, so the write does not reach a
    r.mul_(x)
    return (a * a).sum() + (r * r).sum()


def base_without_grad_gets_history(x, F):
    b = torch.zeros(6, dtype=torch.float64)
    F.view(b, [2, 3]).add_(F.view(x, [2, 3]) * F.view(x, [2, 3]))
    return (b * b).sum()


CASES = [issue_example, permute_add, narrow_mul, transpose_then_builtin_slice, view_of_view_of_view,
         unsqueeze_write_seen_by_other_view, write_to_the_base_seen_by_its_view,
         reshape_that_copies_is_not_a_view, base_without_grad_gets_history]


# --- the view operators of formulas/shape_views.py ----------------------------------------
BUILTIN.select, BUILTIN.slice, BUILTIN.transpose = torch.ops.aten.select, torch.ops.aten.slice, torch.ops.aten.transpose
BUILTIN.squeeze, BUILTIN.diagonal, BUILTIN.movedim = torch.ops.aten.squeeze, torch.ops.aten.diagonal, torch.ops.aten.movedim
BUILTIN.flatten = torch.ops.aten.flatten


def select_mul(x, F):
    a = F.view(x, [2, 3]) * 1.0
    F.select(a, 1, 2).mul_(F.select(F.view(x, [2, 3]), 1, 0))
    return (a * a * a).sum()


def slice_step_mul(x, F):
    a = x * 1.0
    F.slice(a, 0, 1, None, 2).mul_(F.slice(x, 0, 0, 3, 1).exp())
    return (a * a * a).sum()


def transpose_mul(x, F):
    a = F.view(x, [2, 3]) * 1.0
    F.transpose(a, 0, 1).mul_(F.view(x, [3, 2]))
    return (a ** 3).sum()


def squeeze_mul(x, F):
    a = F.view(x, [1, 6, 1]) * 1.0
    F.squeeze(a).mul_(x)
    F.squeeze(F.squeeze(a, 0), [-1]).mul_(x.sin())
    return (a * a * a).sum()


def diagonal_mul(x, F):
    a = F.view(x, [2, 3]) * 1.0
    F.diagonal(a, 1).mul_(F.diagonal(F.view(x, [2, 3])).exp())
    return (a ** 3).sum()


def movedim_mul(x, F):
    a = F.view(x, [2, 3, 1]) * 1.0
    F.movedim(a, 0, 2).mul_(F.view(x, [3, 1, 2]))
    return (a * a * a).sum()


def flatten_that_copies_is_not_a_view(x, F):
    a = F.view(x, [2, 3]) * 1.0
    f = F.flatten(F.transpose(a, 0, 1))     # not viewable: a copy, the write does not reach a
    f.mul_(x)
    return (a * a).sum() + (f * f).sum()


CASES += [select_mul, slice_step_mul, transpose_mul, squeeze_mul, diagonal_mul, movedim_mul,
          flatten_that_copies_is_not_a_view]



def _gradients(case, table):
    x = torch.tensor([0.5, -1.0, 1.5, 2.0, -0.25, 0.75], dtype=torch.float64, requires_grad=True)
    (first,) = torch.autograd.grad(case(x, table), [x], create_graph=True)
    (second,) = torch.autograd.grad((first * first).sum(), [x])
    return first.detach(), second


@pytest.mark.parametrize("replay", [False, True], ids=["as_strided", "view_replay"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_gradients_through_in_place_writes_to_compiled_views_equal_builtin(formulas_ops, case, replay):
    expected = _gradients(case, BUILTIN)
    previous = torch._C._is_view_replay_enabled()
    torch._C._set_view_replay_enabled(replay)
    try:
        got = _gradients(case, formulas_ops)
    finally:
        torch._C._set_view_replay_enabled(previous)
    torch.testing.assert_close(got[0], expected[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got[1], expected[1], rtol=1e-12, atol=1e-12)


def test_compiled_views_are_marked_as_views(formulas_ops):
    F = formulas_ops
    a = torch.arange(6.0, dtype=torch.float64, requires_grad=True) * 1.0
    for view in (F.view(a, [3, 2]), F.permute(F.view(a, [3, 2]), [1, 0]), F.narrow(a, 0, 1, 2),
                 F.unsqueeze(a, 0), F.expand(F.narrow(a, 0, 0, 1), [4]), F.reshape(a, [2, 3])):
        assert view._is_view() and view._base is a
    assert not F.reshape(F.t(F.view(a, [2, 3])), [6])._is_view()       # reshape copied


def test_the_view_function_replays_the_compiled_operator(formulas_ops):
    """With view replay on (torch's ViewFunc path), a write regenerates the view's history
    by replaying the compiled operator, not with as_strided."""
    F = formulas_ops
    x = torch.arange(6.0, dtype=torch.float64, requires_grad=True)
    previous = torch._C._is_view_replay_enabled()
    torch._C._set_view_replay_enabled(True)
    try:
        v = F.permute(F.view(x * 1.0, [2, 3]), [1, 0])
        v.mul_(2.0)
        assert type(v.grad_fn).__name__ != "AsStridedBackward0"
        assert v.grad_fn.name() == "PermuteBackward0"
    finally:
        torch._C._set_view_replay_enabled(previous)
    a = x * 1.0
    v = F.permute(F.view(a, [2, 3]), [1, 0])
    v.mul_(2.0)
    assert v.grad_fn.name() == "AsStridedBackward0"      # torch's default for strided tensors


def _write_expanded(F):
    a = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True) * 1.0
    F.expand(F.narrow(a, 0, 0, 1), [3]).mul_(2.0)


def _write_view_of_leaf(F):
    x = torch.ones(4, dtype=torch.float64, requires_grad=True)
    F.view(x, [2, 2]).mul_(2.0)


def _write_no_grad_view_of_leaf(F):
    x = torch.ones(4, dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        v = F.view(x, [2, 2])
    v.mul_(2.0)


def _use_no_grad_view_after_its_base_was_written(F):
    x = torch.ones(4, dtype=torch.float64, requires_grad=True)
    a = x * 1.0
    with torch.no_grad():
        v = F.view(a, [2, 2])
    a.mul_(2.0)
    (v * F.view(x, [2, 2])).sum().backward()


@pytest.mark.parametrize("action, message", [
    (_write_expanded, "more than one element of the written-to tensor refers to a single memory location"),
    (_write_view_of_leaf, "a view of a leaf Variable that requires grad is being used in an in-place operation"),
    (_write_no_grad_view_of_leaf, "A view was created in no_grad mode and is being modified inplace"),
    (_use_no_grad_view_after_its_base_was_written, "A view was created in no_grad mode and its base or another "
                                                   "view of its base has been modified inplace"),
], ids=lambda a: getattr(a, "__name__", ""))
def test_refused_writes_raise_torchs_error(formulas_ops, action, message):
    for table in (BUILTIN, formulas_ops):
        with pytest.raises(RuntimeError, match=message):
            action(table)


def test_leaf_view_updated_under_no_grad_like_builtin(formulas_ops):
    results = []
    for table in (BUILTIN, formulas_ops):
        p = torch.zeros(6, dtype=torch.float64, requires_grad=True)
        with torch.no_grad():
            table.view(p, [2, 3]).add_(1.0)
        (p * p).sum().backward()
        results.append(p.grad)
    torch.testing.assert_close(results[0], results[1])


def test_the_new_view_operators_return_views_of_their_input(formulas_ops):
    """select, slice, transpose, squeeze (3 overloads), diagonal, movedim, flatten and contiguous
    mark their output a view of the input, as torch's own do; flatten and contiguous
    of a non-contiguous input copy."""
    F = formulas_ops
    a = torch.arange(6.0, dtype=torch.float64, requires_grad=True) * 1.0
    m = F.view(a, [2, 3])
    for view in (F.select(m, 1, 2), F.slice(a, 0, 1, None, 2), F.transpose(m, 0, 1), F.squeeze(F.view(a, [1, 6])),
                 F.squeeze(F.view(a, [1, 6]), 0), F.squeeze(F.view(a, [1, 6]), [0]), F.diagonal(m, 1),
                 F.movedim(m, 0, 1), F.flatten(m), F.contiguous(a)):
        assert view._is_view() and view._base is a
    assert not F.flatten(F.transpose(m, 0, 1))._is_view()
    assert not F.contiguous(F.transpose(m, 0, 1))._is_view()


# Operators returning several views (split, chunk, unbind): their outputs are torch's multi-output
# views. Torch's messages name the node (``Split`` for its own, ``SplitTensor`` for ours), so the
# cases compare from "is a view" on.
MULTI_OUTPUT_TAIL = ("This view is the output of a function that returns multiple views. Such functions do not "
                     "allow the output views to be modified inplace. You should replace the inplace operation by "
                     "an out-of-place one.")
MULTI_OUTPUT_OPS = SimpleNamespace(split=torch.ops.aten.split.Tensor, split_with_sizes=torch.ops.aten.split_with_sizes,
                                   chunk=torch.ops.aten.chunk, unbind=torch.ops.aten.unbind.int)


def _write_split_output(F):
    a = torch.ones(4, dtype=torch.float64, requires_grad=True) * 1.0
    F.split(a, 2)[1].mul_(2.0)


def _write_chunk_output(F):
    a = torch.ones(4, dtype=torch.float64, requires_grad=True) * 1.0
    F.chunk(a, 3)[0].add_(1.0)


def _write_unbind_output(F):
    a = torch.ones(2, 2, dtype=torch.float64, requires_grad=True) * 1.0
    F.unbind(a, 1)[0].mul_(2.0)


def _write_split_with_sizes_output(F):
    a = torch.ones(4, dtype=torch.float64, requires_grad=True) * 1.0
    F.split_with_sizes(a, [1, 3])[1].mul_(2.0)


def _use_split_output_after_its_base_was_written(F):
    x = torch.ones(4, dtype=torch.float64, requires_grad=True)
    a = x * 1.0
    first, second = F.split(a, 2)
    a.mul_(2.0)
    (second * second).sum().backward()


def _write_split_output_of_plain_tensor_with_grad_operand(F):
    parts = F.split(torch.zeros(4, dtype=torch.float64), 2)
    parts[0].mul_(torch.ones(2, dtype=torch.float64, requires_grad=True))


def _write_unbind_output_made_under_no_grad(F):
    a = torch.ones(2, 2, dtype=torch.float64, requires_grad=True) * 1.0
    with torch.no_grad():
        parts = F.unbind(a, 0)
    parts[0].mul_(2.0)


@pytest.mark.parametrize("action, message", [
    (_write_split_output_of_plain_tensor_with_grad_operand,
     "A view was created in no_grad mode and is being modified inplace with grad mode enabled. " + MULTI_OUTPUT_TAIL),
    (_write_unbind_output_made_under_no_grad,      # made under no_grad: the plain no_grad refusal
     "A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given that"),
    (_write_split_output, "is a view and is being modified inplace. " + MULTI_OUTPUT_TAIL),
    (_write_chunk_output, "is a view and is being modified inplace. " + MULTI_OUTPUT_TAIL),
    (_write_unbind_output, "is a view and is being modified inplace. " + MULTI_OUTPUT_TAIL),
    (_write_split_with_sizes_output, "is a view and is being modified inplace. " + MULTI_OUTPUT_TAIL),
    (_use_split_output_after_its_base_was_written,
     "is a view and its base or another view of its base has been modified inplace. " + MULTI_OUTPUT_TAIL),
], ids=lambda a: getattr(a, "__name__", ""))
def test_writes_to_multi_output_views_raise_torchs_error(formulas_ops, action, message):
    for table in (MULTI_OUTPUT_OPS, formulas_ops):
        with pytest.raises(RuntimeError) as caught:
            action(table)
        assert message in str(caught.value)


def test_multi_output_views_are_views_of_their_input_and_written_outside_a_graph(formulas_ops):
    F = formulas_ops
    a = torch.zeros(4, dtype=torch.float64)
    parts = [*F.split(a, 2), *F.chunk(a, 4), *F.split_with_sizes(a, [3, 1]), *F.unbind(F.view(a, [2, 2]), 1)]
    assert all(part._is_view() and part._base is a for part in parts)
    F.split(a, 2)[1].add_(1.0)
    F.unbind(F.view(a, [2, 2]), 0)[0].add_(2.0)
    torch.testing.assert_close(a, torch.tensor([2.0, 2.0, 1.0, 1.0], dtype=torch.float64))
    x = torch.ones(4, dtype=torch.float64, requires_grad=True)
    assert F.split(x * 1.0, 2)[0].grad_fn.name() == "SplitTensorBackward0"
