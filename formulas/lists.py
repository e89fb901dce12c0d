"""Operators with a ``Tensor[]`` output: split (.Tensor, .sizes), split_with_sizes, chunk, unbind.

Each output is a view of one part of ``self`` along ``dim``, and the parts tile ``self``
exactly, so the map is linear and only moves elements: the backward puts every part's
gradient back where the part came from (a ``cat`` of the parts' gradients along ``dim``, or a
``stack`` for unbind, whose parts dropped ``dim``) and the jvp is the op applied to the tangent.

The backward of a ``Tensor[]`` output takes ``grads``, one entry per output; an output that
received no gradient has ``None`` there (zero), so the helpers fill those parts with zeros.
``chunk`` is ``split.Tensor``'s formula and ``split.sizes`` is ``split_with_sizes``'s (formula
families).
"""
from __future__ import annotations

from formulas import Tensor, at, derivative, family_member, helper
from formulas.helpers import wrap_dim


@helper
def split_backward_parts(grads: list[Tensor], dim: int, self_sizes: list[int], part_sizes: list[int]) -> Tensor:
    """The gradient of ``self`` cut along ``dim`` into parts of ``part_sizes``: the parts'
    gradients joined along ``dim``, zeros for a part whose gradient is ``None``."""
    defined = 0
    for i in range(len(grads)):
        if grads[i] is not None:
            defined = i
    parts = []
    for i in range(len(grads)):
        if grads[i] is None:
            sizes = list(self_sizes)
            sizes[dim] = part_sizes[i]
            parts.append(at.new_zeros(grads[defined], sizes))
        else:
            parts.append(grads[i])
    return at.cat(parts, dim)


@helper
def unbind_backward_parts(grads: list[Tensor], dim: int, self_sizes: list[int]) -> Tensor:
    """The gradient of ``self`` unbound along ``dim``: the slices' gradients stacked along
    ``dim``, zeros for a slice whose gradient is ``None``."""
    defined = 0
    for i in range(len(grads)):
        if grads[i] is not None:
            defined = i
    slice_sizes = []
    for d in range(len(self_sizes)):
        if d != dim:
            slice_sizes.append(self_sizes[d])
    parts = []
    for i in range(len(grads)):
        if grads[i] is None:
            parts.append(at.new_zeros(grads[defined], slice_sizes))
        else:
            parts.append(grads[i])
    return at.stack(parts, dim)


@derivative("split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]", jvp="auto_linear")
@family_member("chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]",
               rename={"split": "chunk", "split_size": "chunks", "split_dim": "chunk_dim"})
def split_tensor(self, split_size, dim=0):
    result = at.split(self, split_size, dim)
    self_sizes = self.sizes()
    split_dim = wrap_dim(dim, self.dim())
    part_sizes = []
    for i in range(len(result)):
        part_sizes.append(result[i].size(split_dim))
    def backward(grads):
        return split_backward_parts(grads, split_dim, self_sizes, part_sizes)
    return result, backward


@derivative("split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]",
            jvp="auto_linear")
# ``x.split([1, 3])``: split_with_sizes, reached through split's name
@family_member("split.sizes(Tensor(a -> *) self, SymInt[] split_size, int dim=0) -> Tensor(a)[]",
               rename={"split_with_sizes": "split", "split_sizes": "split_size"})
def split_with_sizes(self, split_sizes, dim=0):
    result = at.split_with_sizes(self, split_sizes, dim)
    self_sizes = self.sizes()
    split_dim = wrap_dim(dim, self.dim())
    def backward(grads):
        return split_backward_parts(grads, split_dim, self_sizes, split_sizes)
    return result, backward


@derivative("unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]", jvp="auto_linear")
def unbind_int(self, dim=0):
    result = at.unbind(self, dim)
    self_sizes = self.sizes()
    unbind_dim = wrap_dim(dim, self.dim())
    def backward(grads):
        return unbind_backward_parts(grads, unbind_dim, self_sizes)
    return result, backward
