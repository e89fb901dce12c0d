"""Shape and layout operators: views, permutations, broadcasting, concatenation, slicing."""
from __future__ import annotations

from formulas import at, derivative
from formulas.helpers import invert_permutation, narrow_backward, sum_to, wrap_dim


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


@derivative("unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", jvp="auto_linear")
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


@derivative("narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)", jvp="auto_linear")
def narrow(self, dim, start, length):
    result = at.narrow(self, dim, start, length)
    self_sizes = self.sizes()
    narrow_dim = wrap_dim(dim, self.dim())
    narrow_start = start + self_sizes[narrow_dim] if start < 0 else start
    def backward(grad):
        return narrow_backward(grad, self_sizes, narrow_dim, narrow_start, length)
    return result, backward
