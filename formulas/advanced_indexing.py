"""Indexing with index tensors: ``index.Tensor`` (``x[mask]``, ``x[idx]``, ``x[:, idx]``) and
``index_put`` (``x[mask] = v``).

``indices`` is a ``Tensor?[]``: entry ``i`` indexes dimension ``i`` of ``self`` with an integer
tensor of positions or a boolean mask (the positions of its true elements, one dimension per
mask dimension); ``None`` keeps a whole dimension. The index tensors broadcast together. Both
operators only move elements, so they are linear in ``self`` and ``values``; the index tensors
are integral or boolean and carry no gradient (a ``Tensor?[]`` argument has no gradient slot).
"""
from __future__ import annotations

from formulas import at, derivative
from formulas.helpers import sum_to


@derivative("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor")
def index_tensor(self, indices):
    result = at.index(self, indices)
    self_sizes = self.sizes()
    def backward(grad):
        # result[k] = self[p(k)]: each grad[k] is added at p(k) into zeros of self's shape (a
        # position read several times gets the sum); index_put accumulating is linear in grad,
        # so double backward reads the same positions back with index. The zeros are one 0-d
        # zero expanded: index_put's copy of them is the only full-size write.
        zeros = at.expand(at.new_zeros(grad, []), self_sizes)
        return at.index_put(zeros, indices, grad, True)
    def jvp(self_t):
        result_t = at.index(self_t, indices)
        return result_t
    return result, backward


@derivative("index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor")
def index_put(self, indices, values, accumulate=False):
    result = at.index_put(self, indices, values, accumulate)
    values_sizes = values.sizes()
    def backward(grad, *, needs_input_grad):
        grad_self = None
        if needs_input_grad[0]:
            # accumulating adds values on top of self, which passes through; writing replaces
            # the indexed elements of self, which get no gradient
            grad_self = grad if accumulate else at.index_put(grad, indices, at.new_zeros(grad, []), False)
        grad_values = None
        if needs_input_grad[1]:
            # values (broadcast to the indexed shape) landed at the indexed positions: their
            # gradients, summed back over the broadcast. As in torch, with accumulate=False and a
            # position indexed twice (which value is written is unspecified) every one of those
            # values gets that position's gradient.
            grad_values = sum_to(at.index(grad, indices), values_sizes)
        return grad_self, grad_values
    def jvp(self_t, values_t):
        result_t = at.index_put(self_t, indices, values_t, accumulate)
        return result_t
    return result, backward
