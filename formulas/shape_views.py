"""Views: operators whose output aliases their input (``Tensor(a)`` in the schema): view, reshape,
unsqueeze, squeezes, flatten, unflatten, permute, transpose/swapaxes/swapdims, ``t``, ``mT`` and
``mH`` (the last two dims), movedim, expand, expand_as, reshape_as, narrow, select, slice, diagonal
and contiguous.

Every one is linear and only moves elements, so its backward puts the gradient back where each
element came from (a reshape, the inverse permutation, or zeros around the selected region: the
fused ``select_backward``/``slice_backward``/``diagonal_backward`` of ``backward_ops.py``) and its
jvp is the op applied to the tangent. The splits, whose output is a list of views, are in
``lists.py``.
"""
from __future__ import annotations

from formulas import at, derivative, family_member
from formulas.helpers import (
    invert_permutation,
    narrow_backward,
    slice_bound,
    sum_to,
    unsqueeze_to,
    wrap_dim,
)


@derivative("view(Tensor(a) self, SymInt[] size) -> Tensor(a)", jvp="auto_linear")
def view(self, size):
    result = at.view(self, size)
    self_sizes = self.sizes()
    def backward(grad):
        # grad may be non-contiguous (e.g. from an expand), so reshape, not view
        return at.reshape(grad, self_sizes)
    return result, backward


@derivative("reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)", jvp="auto_linear")
def reshape(self, shape):
    result = at.reshape(self, shape)
    self_sizes = self.sizes()
    def backward(grad):
        return at.reshape(grad, self_sizes)
    return result, backward


@derivative("reshape_as(Tensor(a) self, Tensor other) -> Tensor(a)")
def reshape_as(self, other):
    result = at.reshape_as(self, other)
    self_sizes = self.sizes()
    def backward(grad):
        # other lends only its shape: no gradient
        return at.reshape(grad, self_sizes), None
    def jvp(self_t):
        result_t = at.reshape_as(self_t, other)
        return result_t
    return result, backward


@derivative("unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", jvp="auto_linear")
@family_member("squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)", rename={"unsqueeze": "squeeze"})
@family_member("squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)", rename={"unsqueeze": "squeeze"})
def unsqueeze(self, dim):
    result = at.unsqueeze(self, dim)
    self_sizes = self.sizes()
    def backward(grad):
        return at.reshape(grad, self_sizes)
    return result, backward


@derivative("permute(Tensor(a) self, int[] dims) -> Tensor(a)", jvp="auto_linear")
def permute(self, dims):
    result = at.permute(self, dims)
    inverse = invert_permutation(dims, self.dim())
    def backward(grad):
        return at.permute(grad, inverse)
    return result, backward


@derivative("expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)", jvp="auto_linear")
def expand(self, size, *, implicit=False):
    result = at.expand(self, size, implicit=implicit)
    self_sizes = self.sizes()
    def backward(grad):
        return sum_to(grad, self_sizes)
    return result, backward


@derivative("expand_as(Tensor(a) self, Tensor other) -> Tensor(a)")
def expand_as(self, other):
    result = at.expand_as(self, other)
    self_sizes = self.sizes()
    def backward(grad):
        # other lends only its shape: no gradient
        return sum_to(grad, self_sizes), None
    def jvp(self_t):
        result_t = at.expand_as(self_t, other)
        return result_t
    return result, backward


@derivative("narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)", jvp="auto_linear")
def narrow(self, dim, start, length):
    result = at.narrow(self, dim, start, length)
    self_sizes = self.sizes()
    def backward(grad):
        return narrow_backward(grad, self_sizes, dim, start, length)
    return result, backward


@derivative("squeeze(Tensor(a) self) -> Tensor(a)", jvp="auto_linear")
def squeeze(self):
    result = at.squeeze(self)
    self_sizes = self.sizes()
    def backward(grad):
        return unsqueeze_to(grad, self_sizes)
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
@family_member("swapdims(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", rename={"transpose": "swapdims"})
@family_member("swapaxes(Tensor(a) self, int axis0, int axis1) -> Tensor(a)",
               rename={"transpose": "swapaxes", "dim0": "axis0", "dim1": "axis1"})
def transpose_int(self, dim0, dim1):
    result = at.transpose(self, dim0, dim1)
    def backward(grad):
        # a swap of two dims is its own inverse
        return at.transpose(grad, dim0, dim1)
    return result, backward


@derivative("movedim.int(Tensor(a) self, int source, int destination) -> Tensor(a)", jvp="auto_linear")
@family_member("movedim.intlist(Tensor(a) self, int[] source, int[] destination) -> Tensor(a)")
def movedim_int(self, source, destination):
    result = at.movedim(self, source, destination)
    def backward(grad):
        # moving the dim back from destination to source undoes the move
        return at.movedim(grad, destination, source)
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


@derivative("contiguous(Tensor(a) self, *, MemoryFormat memory_format=contiguous_format) -> Tensor(a)",
            jvp="auto_linear")
def contiguous(self, *, memory_format="contiguous_format"):
    result = at.contiguous(self, memory_format=memory_format)
    def backward(grad):
        return grad
    return result, backward


@derivative("unflatten.int(Tensor(a) self, int dim, SymInt[] sizes) -> Tensor(a)", jvp="auto_linear")
def unflatten_int(self, dim, sizes):
    result = at.unflatten(self, dim, sizes)
    self_sizes = self.sizes()
    def backward(grad):
        return at.reshape(grad, self_sizes)
    return result, backward


@derivative("t(Tensor(a) self) -> Tensor(a)", jvp="auto_linear")
def t(self):
    result = at.t(self)
    def backward(grad):
        return at.t(grad)
    return result, backward


@derivative("mT(Tensor(a) self) -> Tensor(a)", jvp="auto_linear")
def mT(self):
    # the transpose of the last two dims (of each matrix of a batch): its own adjoint
    result = at.mT(self)
    def backward(grad):
        return at.mT(grad)
    return result, backward


@derivative("mH(Tensor(a) self) -> Tensor(a)", jvp="auto_linear")
def mH(self):
    # the conjugate transpose of the last two dims: its own adjoint (mT on real dtypes)
    result = at.mH(self)
    def backward(grad):
        return at.mH(grad)
    return result, backward
