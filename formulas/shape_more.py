"""More shape operators: squeezes, flatten, transpose, movedim, stack, select, slice, diagonal,
repeat, flip, roll, constant padding (affine: its jvp pads the tangent with zeros), tril/triu,
clone and contiguous, with the fused backward ops (``formulas/shape_backward_ops.py``) their
views' backwards call.

Every view and permutation here is linear and only moves elements, so its backward puts the
gradient back where each element came from (a reshape, the inverse permutation, or zeros
around the selected region) and its jvp is the op applied to the tangent.
"""
from __future__ import annotations

from formulas import at, derivative
from formulas.helpers import (narrow_backward, negated, padded_repeats, repeat_backward, slice_bound, unsqueeze_to,
                              wrap_dim)


@derivative("squeeze(Tensor(a) self) -> Tensor(a)", jvp="auto_linear")
def squeeze(self):
    result = at.squeeze(self)
    self_sizes = self.sizes()
    def backward(grad):
        return unsqueeze_to(grad, self_sizes)
    return result, backward


@derivative("squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)", jvp="auto_linear")
def squeeze_dim(self, dim):
    result = at.squeeze(self, dim)
    self_sizes = self.sizes()
    def backward(grad):
        return at.reshape(grad, self_sizes)
    return result, backward


@derivative("squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)", jvp="auto_linear")
def squeeze_dims(self, dim):
    result = at.squeeze(self, dim)
    self_sizes = self.sizes()
    def backward(grad):
        return at.reshape(grad, self_sizes)
    return result, backward


@derivative("flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)",
            jvp="auto_linear")
def flatten_using_ints(self, start_dim=0, end_dim=-1):
    result = at.flatten(self, start_dim, end_dim)
    self_sizes = self.sizes()
    def backward(grad):
        return at.reshape(grad, self_sizes)
    return result, backward


@derivative("transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", jvp="auto_linear")
def transpose_int(self, dim0, dim1):
    result = at.transpose(self, dim0, dim1)
    def backward(grad):
        # a swap of two dims is its own inverse
        return at.transpose(grad, dim0, dim1)
    return result, backward


@derivative("movedim.int(Tensor(a) self, int source, int destination) -> Tensor(a)", jvp="auto_linear")
def movedim_int(self, source, destination):
    result = at.movedim(self, source, destination)
    def backward(grad):
        # moving the dim back from destination to source undoes the move
        return at.movedim(grad, destination, source)
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


@derivative("select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)", jvp="auto_linear")
def select_int(self, dim, index):
    result = at.select(self, dim, index)
    self_sizes = self.sizes()
    select_dim = wrap_dim(dim, self.dim())
    select_index = index + self_sizes[select_dim] if index < 0 else index
    def backward(grad):
        return at.select_backward(grad, self_sizes, select_dim, select_index)
    return result, backward


@derivative("slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) "
            "-> Tensor(a)", jvp="auto_linear")
def slice_tensor(self, dim=0, start=None, end=None, step=1):
    result = at.slice(self, dim, start, end, step)
    self_sizes = self.sizes()
    slice_dim = wrap_dim(dim, self.dim())
    dim_size = self_sizes[slice_dim]
    slice_start = 0 if start is None else slice_bound(start, dim_size)
    slice_end = dim_size if end is None else slice_bound(end, dim_size)
    def backward(grad):
        return at.slice_backward(grad, self_sizes, slice_dim, slice_start, slice_end, step)
    return result, backward


@derivative("diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)", jvp="auto_linear")
def diagonal(self, offset=0, dim1=0, dim2=1):
    result = at.diagonal(self, offset, dim1, dim2)
    self_sizes = self.sizes()
    def backward(grad):
        return at.diagonal_backward(grad, self_sizes, offset, dim1, dim2)
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
def tril(self, diagonal=0):
    result = at.tril(self, diagonal)
    def backward(grad):
        # a mask: the kept elements pass their gradient, the zeroed ones none
        return at.tril(grad, diagonal)
    return result, backward


@derivative("triu(Tensor self, SymInt diagonal=0) -> Tensor", jvp="auto_linear")
def triu(self, diagonal=0):
    result = at.triu(self, diagonal)
    def backward(grad):
        return at.triu(grad, diagonal)
    return result, backward


@derivative("clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor", jvp="auto_linear")
def clone(self, *, memory_format=None):
    result = at.clone(self, memory_format=memory_format)
    def backward(grad):
        return grad
    return result, backward


@derivative("contiguous(Tensor(a) self, *, MemoryFormat memory_format=contiguous_format) -> Tensor(a)",
            jvp="auto_linear")
def contiguous(self, *, memory_format="contiguous_format"):
    result = at.contiguous(self, memory_format=memory_format)
    def backward(grad):
        return grad
    return result, backward


@derivative("movedim.intlist(Tensor(a) self, int[] source, int[] destination) -> Tensor(a)", jvp="auto_linear")
def movedim_intlist(self, source, destination):
    result = at.movedim(self, source, destination)
    def backward(grad):
        return at.movedim(grad, destination, source)
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


@derivative("swapaxes(Tensor(a) self, int axis0, int axis1) -> Tensor(a)", jvp="auto_linear")
def swapaxes(self, axis0, axis1):
    result = at.swapaxes(self, axis0, axis1)
    def backward(grad):
        return at.swapaxes(grad, axis0, axis1)
    return result, backward


@derivative("swapdims(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", jvp="auto_linear")
def swapdims(self, dim0, dim1):
    result = at.swapdims(self, dim0, dim1)
    def backward(grad):
        return at.swapdims(grad, dim0, dim1)
    return result, backward


@derivative("unflatten.int(Tensor(a) self, int dim, SymInt[] sizes) -> Tensor(a)", jvp="auto_linear")
def unflatten_int(self, dim, sizes):
    result = at.unflatten(self, dim, sizes)
    self_sizes = self.sizes()
    def backward(grad):
        return at.reshape(grad, self_sizes)
    return result, backward


@derivative("narrow_copy(Tensor self, int dim, SymInt start, SymInt length) -> Tensor", jvp="auto_linear")
def narrow_copy(self, dim, start, length):
    result = at.narrow_copy(self, dim, start, length)
    self_sizes = self.sizes()
    narrow_dim = wrap_dim(dim, self.dim())
    narrow_start = start + self_sizes[narrow_dim] if start < 0 else start
    def backward(grad):
        return narrow_backward(grad, self_sizes, narrow_dim, narrow_start, length)
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
def fliplr(self):
    result = at.fliplr(self)
    def backward(grad):
        return at.fliplr(grad)
    return result, backward


@derivative("flipud(Tensor self) -> Tensor", jvp="auto_linear")
def flipud(self):
    result = at.flipud(self)
    def backward(grad):
        return at.flipud(grad)
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
