"""Shape operators that copy: cat, stack, the ``select``/``slice``/``diagonal`` scatters,
narrow_copy, constant padding (affine: its jvp pads the tangent with zeros), repeat, tile, flip,
fliplr, flipud, rot90, roll, tril/triu and clone.

Each is linear in its tensor inputs and only moves (or drops, or zero-fills) elements: the
backward takes the gradient back to where each element came from, the jvp is the op applied to
the tangents.
"""
from __future__ import annotations

from formulas import at, derivative, family_member
from formulas.helpers import (
    narrow_backward,
    negated,
    padded_repeats,
    repeat_backward,
    wrap_dim,
)


@derivative("cat(Tensor[] tensors, int dim=0) -> Tensor", jvp="auto_linear")
def cat(tensors, dim=0):
    result = at.cat(tensors, dim)
    cat_dim = wrap_dim(dim, result.dim())
    # size of each input along cat_dim; -1 marks a legacy 1-d empty input, which
    # cat accepts next to tensors of any rank and skips
    sizes_along_dim = []
    for i in range(len(tensors)):
        skipped = result.dim() != 1 and tensors[i].dim() == 1 and tensors[i].size(0) == 0
        sizes_along_dim.append(-1 if skipped else tensors[i].size(cat_dim))
    def backward(grad):
        grads = []
        offset = 0
        for i in range(len(sizes_along_dim)):
            if sizes_along_dim[i] < 0:
                grads.append(at.new_zeros(grad, [0]))
            else:
                grads.append(at.narrow(grad, cat_dim, offset, sizes_along_dim[i]))
                offset = offset + sizes_along_dim[i]
        return grads
    return result, backward


@derivative("stack(Tensor[] tensors, int dim=0) -> Tensor", jvp="auto_linear")
def stack(tensors, dim=0):
    result = at.stack(tensors, dim)
    stack_dim = wrap_dim(dim, result.dim())
    count = len(tensors)
    def backward(grad):
        grads = []
        for i in range(count):
            grads.append(at.select(grad, stack_dim, i))
        return grads
    return result, backward


@derivative("repeat(Tensor self, SymInt[] repeats) -> Tensor", jvp="auto_linear")
def repeat(self, repeats):
    result = at.repeat(self, repeats)
    self_sizes = self.sizes()
    def backward(grad):
        return repeat_backward(grad, repeats, self_sizes)
    return result, backward


@derivative("flip(Tensor self, int[] dims) -> Tensor", jvp="auto_linear")
def flip(self, dims):
    result = at.flip(self, dims)
    def backward(grad):
        return at.flip(grad, dims)
    return result, backward


@derivative("roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor", jvp="auto_linear")
def roll(self, shifts, dims=[]):
    result = at.roll(self, shifts, dims)
    back_shifts = negated(shifts)
    def backward(grad):
        return at.roll(grad, back_shifts, dims)
    return result, backward


@derivative("tril(Tensor self, SymInt diagonal=0) -> Tensor", jvp="auto_linear")
@family_member("triu(Tensor self, SymInt diagonal=0) -> Tensor", rename={"tril": "triu"})
def tril(self, diagonal=0):
    result = at.tril(self, diagonal)
    def backward(grad):
        # a mask: the kept elements pass their gradient, the zeroed ones none
        return at.tril(grad, diagonal)
    return result, backward


@derivative("clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor", jvp="auto_linear")
def clone(self, *, memory_format=None):
    result = at.clone(self, memory_format=memory_format)
    def backward(grad):
        return grad
    return result, backward


@derivative("select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor", jvp="auto_linear")
def select_scatter(self, src, dim, index):
    result = at.select_scatter(self, src, dim, index)
    src_sizes = src.sizes()
    def backward(grad, *, needs_input_grad):
        # the overwritten slice of self gets no gradient; src gets that slice's
        grad_self = at.select_scatter(grad, at.new_zeros(grad, src_sizes), dim, index) if needs_input_grad[0] else None
        grad_src = at.select(grad, dim, index) if needs_input_grad[1] else None
        return grad_self, grad_src
    return result, backward


@derivative("slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, "
            "SymInt step=1) -> Tensor", jvp="auto_linear")
def slice_scatter(self, src, dim=0, start=None, end=None, step=1):
    result = at.slice_scatter(self, src, dim, start, end, step)
    src_sizes = src.sizes()
    def backward(grad, *, needs_input_grad):
        grad_self = None
        if needs_input_grad[0]:
            grad_self = at.slice_scatter(grad, at.new_zeros(grad, src_sizes), dim, start, end, step)
        grad_src = at.slice(grad, dim, start, end, step) if needs_input_grad[1] else None
        return grad_self, grad_src
    return result, backward


@derivative("diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor",
            jvp="auto_linear")
def diagonal_scatter(self, src, offset=0, dim1=0, dim2=1):
    result = at.diagonal_scatter(self, src, offset, dim1, dim2)
    src_sizes = src.sizes()
    def backward(grad, *, needs_input_grad):
        grad_self = None
        if needs_input_grad[0]:
            grad_self = at.diagonal_scatter(grad, at.new_zeros(grad, src_sizes), offset, dim1, dim2)
        grad_src = at.diagonal(grad, offset, dim1, dim2) if needs_input_grad[1] else None
        return grad_self, grad_src
    return result, backward


@derivative("narrow_copy(Tensor self, int dim, SymInt start, SymInt length) -> Tensor", jvp="auto_linear")
def narrow_copy(self, dim, start, length):
    result = at.narrow_copy(self, dim, start, length)
    self_sizes = self.sizes()
    def backward(grad):
        return narrow_backward(grad, self_sizes, dim, start, length)
    return result, backward


@derivative("constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor")
def constant_pad_nd(self, pad, value=0):
    # pad holds (before, after) pairs from the last dim backwards; a negative amount crops
    result = at.constant_pad_nd(self, pad, value)
    def backward(grad):
        # the padded cells are constant: padding grad by the negated amounts crops them off again
        # (and puts zeros where self was cropped)
        return at.constant_pad_nd(grad, negated(pad), 0)
    def jvp(self_t):
        # affine in self: the constant value has no tangent
        result_t = at.constant_pad_nd(self_t, pad, 0)
        return result_t
    return result, backward


@derivative("fliplr(Tensor self) -> Tensor", jvp="auto_linear")
@family_member("flipud(Tensor self) -> Tensor", rename={"fliplr": "flipud"})
def fliplr(self):
    result = at.fliplr(self)
    def backward(grad):
        return at.fliplr(grad)
    return result, backward


@derivative("rot90(Tensor self, int k=1, int[] dims=[0,1]) -> Tensor", jvp="auto_linear")
def rot90(self, k=1, dims=[0, 1]):
    result = at.rot90(self, k, dims)
    def backward(grad):
        # rotating back by the same number of quarter turns
        return at.rot90(grad, 0 - k, dims)
    return result, backward


@derivative("tile(Tensor self, SymInt[] dims) -> Tensor", jvp="auto_linear")
def tile(self, dims):
    result = at.tile(self, dims)
    self_sizes = self.sizes()
    # tile is repeat with dims padded by leading 1s to self's rank
    repeats = padded_repeats(dims, self.dim())
    def backward(grad):
        return repeat_backward(grad, repeats, self_sizes)
    return result, backward
