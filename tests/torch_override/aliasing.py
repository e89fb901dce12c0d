"""Views and in-place writes through the override, against torch's own behaviour.

Each scenario is a function of no arguments that builds float64 leaves, calls aten's views and
in-place operators, and returns the values, first- and second-order gradients it sees, or
raises. :func:`same_as_torch` runs one with torch's own kernels, then inside an override, and
asserts the same tensors, or the same kind of error (its message up to the node's name). The
scenarios of :data:`VIEW_SCENARIOS` use the shipped library's views; those of
:data:`IN_PLACE_SCENARIOS` the in-place formula of :data:`IN_PLACE_SOURCE` (``mul_.Tensor``),
in a package of the test's own.
"""
from __future__ import annotations

import re
from typing import Callable, ContextManager

import torch

#: An in-place operator's own formula, as derivatives.yaml writes one: its backward reads ``self``,
#: the value before the write; its jvp, ``original_self_p``.
IN_PLACE_SOURCE = '''
from formulas import at, derivative


@derivative("mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)")
def mul__Tensor(self, other):
    result = at.mul_(self, other)
    def backward(grad):
        return grad * other, grad * self
    def jvp(self_t, other_t, original_self_p):
        return self_t * other + other_t * original_self_p
    return result, backward
'''


def leaf(*shape: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=torch.float64, generator=generator).requires_grad_()


def orders(output: torch.Tensor, leaves: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    """``output``'s values, the first-order gradients of its sum and the second-order ones of
    the squared first-order gradients' sum, with respect to ``leaves``."""
    first = torch.autograd.grad(output.sum(), leaves, create_graph=True)
    second = torch.autograd.grad(sum((g * g).sum() for g in first), leaves)
    return [output.detach(), *first, *second]


def _view_written(view: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], list[torch.Tensor]]:
    """A view of a non-leaf written in place through (torch's ``CopySlices``), then the base used."""
    def scenario() -> list[torch.Tensor]:
        x = leaf(3, 4)
        y = x * 1.0
        v = view(y)
        w = leaf(*v.shape, seed=1)
        v.mul_(w)
        return orders(torch.sin(y) + y, (x, w))
    return scenario


def _split_written() -> None:
    y = leaf(6) * 1.0
    part, _ = y.split(3)
    part.mul_(2.0)          # torch forbids writing one of several views


def _view_of_leaf_written() -> None:
    leaf(3, 4).t().mul_(2.0)


def _expanded_written() -> None:
    (leaf(3, 1) * 1.0).expand(3, 4).mul_(2.0)


VIEW_SCENARIOS: dict[str, Callable[[], object]] = {
    "t": _view_written(lambda y: y.t()),
    "select": _view_written(lambda y: y.select(0, 1)),
    "narrow": _view_written(lambda y: y.narrow(1, 1, 2)),
    "diagonal": _view_written(lambda y: y.diagonal()),
    "view of a view": _view_written(lambda y: y.transpose(0, 1).unsqueeze(0).squeeze(0)[1]),
    "split (torch forbids)": _split_written,
    "view of a leaf (torch forbids)": _view_of_leaf_written,
    "expand (torch forbids)": _expanded_written,
}


def _written() -> list[torch.Tensor]:
    x, w = leaf(5), leaf(5, seed=1)
    y = x * 1.0
    y.mul_(w)
    return orders(y * y, (x, w))


def _written_through_a_view() -> list[torch.Tensor]:
    x, w = leaf(5), leaf(5, seed=1)
    y = x * 1.0
    y[1:].mul_(w[1:])
    return orders(y * y, (x, w))


def _written_view_then_read() -> list[torch.Tensor]:
    x, w = leaf(3, 4), leaf(4, 3, seed=1)
    y = x * 1.0
    v = y.t()
    v.mul_(w)
    return orders(v * y.t(), (x, w))


def _leaf_written() -> list[torch.Tensor]:
    x, w = leaf(5), leaf(5, seed=1)
    try:
        x.mul_(w)
    finally:
        assert torch.equal(x, leaf(5)), "written before the error"


def _view_of_leaf_written_in_place() -> list[torch.Tensor]:
    x, w = leaf(5), leaf(5, seed=1)
    try:
        x[1:].mul_(w[1:])
    finally:
        assert torch.equal(x, leaf(5)), "written before the error"


def _no_grad_view_written() -> list[torch.Tensor]:
    y = leaf(5) * 1.0
    with torch.no_grad():
        v = y[1:]
    v.mul_(leaf(4, seed=1))


def _saved_then_written() -> list[torch.Tensor]:
    x, w = leaf(5), leaf(5, seed=1)
    y = x * 1.0
    z = torch.sin(y)            # saves y
    y.mul_(w)
    return torch.autograd.grad(z.sum(), x)


IN_PLACE_SCENARIOS: dict[str, Callable[[], object]] = {
    "written": _written,
    "written through a view": _written_through_a_view,
    "a view written, then read": _written_view_then_read,
    "a leaf written (torch forbids)": _leaf_written,
    "a view of a leaf written (torch forbids)": _view_of_leaf_written_in_place,
    "a no_grad view written (torch forbids)": _no_grad_view_written,
    "a saved tensor written (version counter)": _saved_then_written,
}


def _outcome(scenario: Callable[[], object]) -> object:
    try:
        return scenario()
    except RuntimeError as error:
        # the same error up to the node's name ("output 0 of Mul" / "of MulTensorFormula")
        return re.sub(r"(of|is) \w+,? is", r"\1 NODE is", str(error).split("\n")[0])


def same_as_torch(scenario: Callable[[], object], override: Callable[[], ContextManager]) -> None:
    """``scenario`` inside ``override()`` sees what it sees with torch's own kernels."""
    theirs = _outcome(scenario)
    with override():
        ours = _outcome(scenario)
    if isinstance(theirs, str) or isinstance(ours, str):
        assert ours == theirs
        return
    assert len(ours) == len(theirs)
    for mine, builtin in zip(ours, theirs):
        torch.testing.assert_close(mine, builtin)
