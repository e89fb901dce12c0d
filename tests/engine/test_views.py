"""In-place writes through views: gradients (first and second order) and errors equal torch's."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import reference_engine as engine


def _leaf(lib, values):
    if lib is engine:
        return engine.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)
    return torch.tensor(values, dtype=torch.float64, requires_grad=True)


def _grad(lib):
    return engine.grad if lib is engine else torch.autograd.grad


def _values(t):
    return np.asarray(t.detach().tolist())


# Each case maps a leaf x (6 elements, float64) to a scalar, written once for both libraries.
def issue_example(x, lib):          # the issue's reproduction: torch gives 18·x
    a = x * 1.0
    v = a.view(3, 2)
    v.mul_(3)
    return (a * a).sum()


def permute_add(x, lib):
    a = x.sin()
    a.view(2, 3).permute(1, 0).add_(x.view(3, 2))
    return (a * a * a).sum()


def narrow_mul(x, lib):
    a = x * 2.0
    a.narrow(0, 1, 3).mul_(x.narrow(0, 0, 3).exp())
    return (a * a).sum()


def transpose_write_through_t(x, lib):
    a = x.view(2, 3) * 1.0
    a.t().narrow(0, 2, 1).mul_(a.t().narrow(0, 0, 1).exp())
    return (a ** 3).sum()


def slice_assignment(x, lib):
    a = x * 1.0
    a[1:3] = x[3:5] * x[0]
    return (a * a * a).sum()


def select_assignment(x, lib):
    a = x.view(2, 3) * 1.0
    b = a.t()
    b[0] = b[1] * 2
    a[1, 2] = 7.0
    return (a ** 3).sum()


def view_of_view_of_view(x, lib):
    a = x * 1.0
    w = a.view(2, 3).permute(1, 0).narrow(0, 1, 2)
    w.mul_(x[:4].view(2, 2).sin())
    return (a * a).sum()


def nested_slices(x, lib):
    a = x * 1.0
    v = a[1:5]
    u = v[1:]
    u.mul_(x[:3])
    return (a * a * v.sum()).sum()


def other_view_sees_the_write(x, lib):
    a = x * 1.0
    flat = a.view(6)
    a.view(3, 2).unsqueeze(0).mul_(x.view(1, 3, 2))
    return (flat * flat).sum()


def write_to_the_base_seen_by_its_view(x, lib):
    a = x * 1.0
    v = a.view(3, 2)
    a.mul_(x)
    return (v ** 3).sum()


def base_without_grad_gets_history(x, lib):
    b = lib.zeros(6, dtype=lib.float64)
    v = b.view(2, 3)
    v.add_(x.view(2, 3) * x.view(2, 3))
    return (b * b).sum()


def leaf_view_updated_under_no_grad(x, lib):
    p = lib.zeros(6, dtype=lib.float64, requires_grad=True)
    with lib.no_grad():
        p.view(2, 3).add_(1.0)
    return (p * x * x).sum()


CASES = [issue_example, permute_add, narrow_mul, transpose_write_through_t, slice_assignment,
         select_assignment, view_of_view_of_view, nested_slices, other_view_sees_the_write,
         write_to_the_base_seen_by_its_view, base_without_grad_gets_history, leaf_view_updated_under_no_grad]



# --- in-place writes through the view operators of formulas/shape_views.py --------------
def _slice(lib, tensor, dim, start, end, step):
    return engine.slice(tensor, dim, start, end, step) if lib is engine else \
        torch.ops.aten.slice.Tensor(tensor, dim, start, end, step)


def select_mul(x, lib):
    a = x.view(2, 3) * 1.0
    a.select(1, 2).mul_(x.view(2, 3).select(1, 0))
    return (a * a * a).sum()


def slice_step_mul(x, lib):
    a = x * 1.0
    _slice(lib, a, 0, 1, None, 2).mul_(_slice(lib, x, 0, 0, 3, 1).exp())
    return (a * a * a).sum()


def transpose_mul(x, lib):
    a = x.view(2, 3) * 1.0
    a.transpose(0, 1).mul_(x.view(3, 2))
    return (a ** 3).sum()


def squeeze_mul(x, lib):
    a = x.view(1, 6, 1) * 1.0
    a.squeeze().mul_(x)
    a.squeeze(0).squeeze(-1).mul_(x.sin())
    return (a * a * a).sum()


def diagonal_mul(x, lib):
    a = x.view(2, 3) * 1.0
    a.diagonal(1).mul_(x.view(2, 3).diagonal().exp())
    return (a ** 3).sum()


def movedim_mul(x, lib):
    a = x.view(2, 3, 1) * 1.0
    a.movedim(0, 2).mul_(x.view(3, 1, 2))
    return (a * a * a).sum()


def flatten_that_copies_is_not_a_view(x, lib):
    a = x.view(2, 3) * 1.0
    f = a.transpose(0, 1).flatten()         # not viewable: a copy, the write does not reach a
    f.mul_(x)
    return (a * a).sum() + (f * f).sum()


CASES += [select_mul, slice_step_mul, transpose_mul, squeeze_mul, diagonal_mul, movedim_mul,
          flatten_that_copies_is_not_a_view]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_gradients_through_in_place_writes_to_views_equal_torch(case):
    values = [0.5, -1.0, 1.5, 2.0, -0.25, 0.75]
    results = []
    for lib in (engine, torch):
        x = _leaf(lib, values)
        (first,) = _grad(lib)(case(x, lib), [x], create_graph=True)
        (second,) = _grad(lib)((first * first).sum(), [x])
        results.append((_values(first), _values(second)))
    (first, second), (first_torch, second_torch) = results
    np.testing.assert_allclose(first, first_torch, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(second, second_torch, rtol=1e-12, atol=1e-12)


def test_the_issue_example_gives_18x():
    x = _leaf(engine, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    (g,) = engine.grad(issue_example(x, engine), [x])
    np.testing.assert_array_equal(g.numpy(), 18.0 * np.arange(6.0))


def test_views_know_their_base_and_share_its_version_counter():
    a = _leaf(engine, [1.0, 2.0, 3.0, 4.0]) * 1.0
    v = a.view(2, 2).t()
    assert v._base is a and v._is_view() and not a._is_view()
    v.mul_(2.0)
    assert a._version_value == v._version_value == 1
    assert a.grad_fn.name() == "CopySlices"
    np.testing.assert_array_equal(a.detach().numpy(), [2.0, 4.0, 6.0, 8.0])


def _error(lib, action):
    with pytest.raises(RuntimeError) as caught:
        action(lib)
    return str(caught.value)


def _write_expanded(lib):
    a = _leaf(lib, [1.0, 2.0]) * 1.0
    a.narrow(0, 0, 1).expand(3).mul_(2.0)


def _write_expanded_under_no_grad(lib):
    with lib.no_grad():
        lib.zeros(1, dtype=lib.float64).expand(3).add_(1.0)


def _write_view_of_leaf(lib):
    x = _leaf(lib, [1.0, 2.0, 3.0, 4.0])
    x.view(2, 2).mul_(2.0)


def _write_no_grad_view_of_leaf(lib):
    x = _leaf(lib, [1.0, 2.0, 3.0, 4.0])
    with lib.no_grad():
        v = x.view(2, 2)
    v.mul_(2.0)


def _write_no_grad_view_of_plain_tensor_with_grad_operand(lib):
    b = lib.zeros(4, dtype=lib.float64)
    with lib.no_grad():
        v = b.view(2, 2)
    v.mul_(_leaf(lib, [[1.0, 2.0], [3.0, 4.0]]))


def _use_no_grad_view_after_its_base_was_written(lib):
    x = _leaf(lib, [1.0, 2.0, 3.0, 4.0])
    a = x * 1.0
    with lib.no_grad():
        v = a.view(2, 2)
    a.mul_(2.0)
    _grad(lib)((v * x.view(2, 2)).sum(), [x])


@pytest.mark.parametrize("action, message", [
    (_write_expanded, "more than one element of the written-to tensor refers to a single memory location"),
    (_write_expanded_under_no_grad, "more than one element of the written-to tensor refers to a single memory"),
    (_write_view_of_leaf, "a view of a leaf Variable that requires grad is being used in an in-place operation"),
    (_write_no_grad_view_of_leaf, "A view was created in no_grad mode and is being modified inplace with grad "
                                  "mode enabled"),
    (_write_no_grad_view_of_plain_tensor_with_grad_operand, "A view was created in no_grad mode and is being "
                                                            "modified inplace"),
    (_use_no_grad_view_after_its_base_was_written, "A view was created in no_grad mode and its base or another "
                                                   "view of its base has been modified inplace"),
], ids=lambda a: getattr(a, "__name__", ""))
def test_refused_writes_raise_torchs_error(action, message):
    assert message in _error(torch, action)
    assert message in _error(engine, action)


def test_saved_tensor_written_through_a_view_is_reported():
    x = _leaf(engine, [1.0, 2.0, 3.0, 4.0])
    a = x * 1.0
    y = a.sin()                         # saves a
    a.view(2, 2).mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_a_root_does_not_keep_references_to_dropped_views():
    w = _leaf(engine, [1.0, 2.0, 3.0, 4.0])
    for _ in range(1000):
        w.view(2, 2).t()
    assert len(w._views) <= 130


# Operators returning several views (split, chunk, unbind): torch refuses in-place writes to their
# outputs, and any use of one after its base was written; torch names its own node (``Split``),
# the engine the library's (``SplitTensor``), so the messages are compared from "is a view".
MULTI_OUTPUT_TAIL = ("This view is the output of a function that returns multiple views. Such functions do not "
                     "allow the output views to be modified inplace. You should replace the inplace operation by "
                     "an out-of-place one.")


def _write_split_output(lib):
    a = _leaf(lib, [1.0, 2.0, 3.0, 4.0]) * 1.0
    a.split(2)[1].mul_(2.0)


def _write_chunk_output(lib):
    a = _leaf(lib, [1.0, 2.0, 3.0, 4.0]) * 1.0
    a.chunk(3)[0].add_(1.0)


def _write_unbind_output(lib):
    a = _leaf(lib, [[1.0, 2.0], [3.0, 4.0]]) * 1.0
    a.unbind(1)[0].mul_(2.0)


def _write_view_of_split_output(lib):
    a = _leaf(lib, [1.0, 2.0, 3.0, 4.0]) * 1.0
    a.split_with_sizes([1, 3])[1].view(3, 1).mul_(2.0)


def _write_split_output_of_plain_tensor_with_grad_operand(lib):
    parts = lib.zeros(4, dtype=lib.float64).split(2)
    parts[0].mul_(_leaf(lib, [1.0, 2.0]))


def _write_split_output_made_under_no_grad(lib):
    a = _leaf(lib, [1.0, 2.0, 3.0, 4.0]) * 1.0
    with lib.no_grad():
        parts = a.unbind()
    parts[0].mul_(2.0)


def _use_split_output_after_its_base_was_written(lib):
    x = _leaf(lib, [1.0, 2.0, 3.0, 4.0])
    a = x * 1.0
    first, second = a.split(2)
    a.mul_(2.0)
    _grad(lib)((second * second).sum(), [x])


@pytest.mark.parametrize("action, message", [
    (_write_split_output, "is a view and is being modified inplace. " + MULTI_OUTPUT_TAIL),
    (_write_chunk_output, "is a view and is being modified inplace. " + MULTI_OUTPUT_TAIL),
    (_write_unbind_output, "is a view and is being modified inplace. " + MULTI_OUTPUT_TAIL),
    (_write_view_of_split_output, "Output 0 of View is a view and is being modified inplace. " + MULTI_OUTPUT_TAIL),
    (_write_split_output_of_plain_tensor_with_grad_operand,
     "A view was created in no_grad mode and is being modified inplace with grad mode enabled. " + MULTI_OUTPUT_TAIL),
    (_write_split_output_made_under_no_grad,      # made under no_grad: the plain no_grad refusal
     "A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given that"),
    (_use_split_output_after_its_base_was_written,
     "Output 1 of Split"),
], ids=lambda a: getattr(a, "__name__", ""))
def test_writes_to_multi_output_views_raise_torchs_error(action, message):
    torch_message, engine_message = _error(torch, action), _error(engine, action)
    assert message in torch_message
    if message.startswith("Output 1 of Split"):    # the base was written: the node's own name, then torch's text
        tail = " is a view and its base or another view of its base has been modified inplace. " + MULTI_OUTPUT_TAIL
        assert torch_message.endswith(tail) and engine_message == "Output 1 of SplitTensor" + tail
    else:
        assert message in engine_message


def test_multi_output_views_share_memory_and_are_written_outside_a_graph():
    for lib in (engine, torch):
        a = lib.zeros(4, dtype=lib.float64)
        first, second = a.split(2)
        row = a.view(2, 2).unbind(1)[1]
        second.add_(1.0)
        row.add_(2.0)
        assert first._base is a and second._is_view() and row._base is a
        np.testing.assert_array_equal(_values(a), [0.0, 2.0, 1.0, 3.0])
