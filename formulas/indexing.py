"""Selection by mask or index: ``where.self`` (and a number for either side: ``where.ScalarSelf``,
``where.ScalarOther``), ``gather``, ``scatter_add``, ``scatter`` (``src``,
``value``), ``index_select``, ``index_add``, ``index_fill``, ``index_copy``, ``masked_fill``,
``masked_scatter``, ``masked_select``, and advanced indexing: ``index.Tensor`` (``x[mask]``,
``x[idx]``, ``x[:, idx]``) and ``index_put`` (``x[mask] = v``).

Each is linear in its floating inputs and only moves or drops elements, so the gradient goes
back to where each output element came from (zero where a value was overwritten), and the jvp
is the op applied to the tangents; index and mask tensors carry no gradient. For ``index`` and
``index_put``, ``indices`` is a ``Tensor?[]``: entry ``i`` indexes dimension ``i`` of ``self`` with
an integer tensor of positions or a boolean mask (the positions of its true elements, one
dimension per mask dimension); ``None`` keeps a whole dimension; the index tensors broadcast
together and get no gradient slot.
"""
from __future__ import annotations

from formulas import Tensor, at, derivative, family_member, helper
from formulas.helpers import broadcast_sizes, sum_to


@derivative("where.self(Tensor condition, Tensor self, Tensor other) -> Tensor")
def where_self(condition, self, other):
    result = at.where(condition, self, other)
    self_sizes = self.sizes()
    other_sizes = other.sizes()
    def backward(grad, *, needs_input_grad):
        zeros = at.zeros_like(grad)
        grad_self = sum_to(at.where(condition, grad, zeros), self_sizes) if needs_input_grad[1] else None
        grad_other = sum_to(at.where(condition, zeros, grad), other_sizes) if needs_input_grad[2] else None
        return None, grad_self, grad_other
    def jvp(self_t, other_t):
        # the condition is boolean: no tangent
        result_t = at.where(condition, self_t, other_t)
        return result_t
    return result, backward


@derivative("where.ScalarSelf(Tensor condition, Scalar self, Tensor other) -> Tensor")
def where_scalar_self(condition, self, other):
    result = at.where(condition, self, other)
    other_sizes = other.sizes()
    def backward(grad):
        # the number stands where the condition holds: other's gradient is grad elsewhere
        return None, sum_to(at.where(condition, 0, grad), other_sizes)
    def jvp(other_t):
        result_t = at.where(condition, 0, other_t)
        return result_t
    return result, backward


@derivative("where.ScalarOther(Tensor condition, Tensor self, Scalar other) -> Tensor")
def where_scalar_other(condition, self, other):
    result = at.where(condition, self, other)
    self_sizes = self.sizes()
    def backward(grad):
        # self stands where the condition holds, the number elsewhere
        return None, sum_to(at.where(condition, grad, 0), self_sizes)
    def jvp(self_t):
        result_t = at.where(condition, self_t, 0)
        return result_t
    return result, backward


@derivative("gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor")
def gather(self, dim, index, *, sparse_grad=False):
    result = at.gather(self, dim, index, sparse_grad=sparse_grad)
    def backward(grad):
        # grad added at index into zeros of self's shape (one in-place scatter in ATen's
        # gather_backward, which reads only self's shape); index is integral: no gradient
        return at.gather_backward(grad, self, dim, index, sparse_grad), None
    def jvp(self_t):
        # linear in self; the index has no tangent
        result_t = at.gather(self_t, dim, index, sparse_grad=sparse_grad)
        return result_t
    return result, backward


@derivative("scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor")
def scatter_add(self, dim, index, src):
    result = at.scatter_add(self, dim, index, src)
    def backward(grad, *, needs_input_grad):
        grad_self = grad if needs_input_grad[0] else None
        grad_src = at.gather(grad, dim, index) if needs_input_grad[2] else None
        return grad_self, None, grad_src
    def jvp(self_t, src_t):
        # linear in self and src; the index has no tangent
        result_t = at.scatter_add(self_t, dim, index, src_t)
        return result_t
    return result, backward


@derivative("index_select(Tensor self, int dim, Tensor index) -> Tensor")
def index_select(self, dim, index):
    result = at.index_select(self, dim, index)
    self_sizes = self.sizes()
    def backward(grad):
        # each selected row's gradient is added back at its index (repeated indices accumulate)
        return at.index_select_backward(grad, self_sizes, dim, index), None
    def jvp(self_t):
        result_t = at.index_select(self_t, dim, index)
        return result_t
    return result, backward


@derivative("masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor")
def masked_fill_scalar(self, mask, value):
    result = at.masked_fill(self, mask, value)
    self_sizes = self.sizes()
    def backward(grad):
        # the filled elements no longer depend on self (which may have broadcast with the mask)
        return sum_to(at.masked_fill(grad, mask, 0), self_sizes), None
    def jvp(self_t):
        result_t = at.masked_fill(self_t, mask, 0)
        return result_t
    return result, backward


@derivative("masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor")
def masked_fill_tensor(self, mask, value):
    result = at.masked_fill(self, mask, value)
    self_sizes = self.sizes()
    value_sizes = value.sizes()
    def backward(grad, *, needs_input_grad):
        grad_self = sum_to(at.masked_fill(grad, mask, 0), self_sizes) if needs_input_grad[0] else None
        grad_value = None
        if needs_input_grad[2]:
            # the 0-d value is copied into every masked element: their gradients add up
            grad_value = sum_to(at.where(mask, grad, at.zeros_like(grad)), value_sizes)
        return grad_self, None, grad_value
    def jvp(self_t, value_t):
        result_t = at.masked_fill(self_t, mask, value_t)
        return result_t
    return result, backward


@derivative("masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor")
def masked_scatter(self, mask, source):
    result = at.masked_scatter(self, mask, source)
    self_sizes = self.sizes()
    source_sizes = source.sizes()
    source_numel = source.numel()
    def backward(grad, *, needs_input_grad):
        grad_self = sum_to(at.masked_fill(grad, mask, 0), self_sizes) if needs_input_grad[0] else None
        grad_source = None
        if needs_input_grad[2]:
            # the first k elements of source (k masked elements, in order) went to the masked
            # places: they get those gradients, the unused rest of source none. (Composed, not
            # ATen's masked_scatter_backward, whose own forward AD in torch 2.13 refuses a
            # source of another shape than self.)
            selected = at.masked_select(grad, mask)
            unused = at.new_zeros(selected, [source_numel - selected.size(0)])
            grad_source = at.reshape(at.cat([selected, unused], 0), source_sizes)
        return grad_self, None, grad_source
    def jvp(self_t, source_t):
        result_t = at.masked_scatter(self_t, mask, source_t)
        return result_t
    return result, backward


@derivative("masked_select(Tensor self, Tensor mask) -> Tensor")
def masked_select(self, mask):
    result = at.masked_select(self, mask)
    self_sizes = self.sizes()
    full_sizes = broadcast_sizes(self.sizes(), mask.sizes())
    def backward(grad):
        # the selected elements of the broadcast self, in order, get grad; then undo the broadcast
        zeros = at.new_zeros(grad, full_sizes)
        return sum_to(at.masked_scatter(zeros, mask, grad), self_sizes), None
    def jvp(self_t):
        result_t = at.masked_select(self_t, mask)
        return result_t
    return result, backward


@derivative("scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor")
def scatter_src(self, dim, index, src):
    result = at.scatter(self, dim, index, src)
    def backward(grad, *, needs_input_grad):
        # overwritten elements of self get no gradient; src's elements get the gradient of
        # the place they were written to (indices must not repeat along dim, as in torch)
        grad_self = at.scatter(grad, dim, index, 0) if needs_input_grad[0] else None
        grad_src = at.gather(grad, dim, index) if needs_input_grad[2] else None
        return grad_self, None, grad_src
    def jvp(self_t, src_t):
        result_t = at.scatter(self_t, dim, index, src_t)
        return result_t
    return result, backward


@derivative("scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor")
@family_member("index_fill.int_Scalar(Tensor self, int dim, Tensor index, Scalar value) -> Tensor",
               rename={"scatter": "index_fill"})
def scatter_value(self, dim, index, value):
    result = at.scatter(self, dim, index, value)
    def backward(grad):
        return at.scatter(grad, dim, index, 0), None
    def jvp(self_t):
        result_t = at.scatter(self_t, dim, index, 0)
        return result_t
    return result, backward


@derivative("index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor")
def index_add(self, dim, index, source, *, alpha=1):
    result = at.index_add(self, dim, index, source, alpha=alpha)
    def backward(grad, *, needs_input_grad):
        # result = self + alpha * (source's rows added at index): each source row reads the
        # gradient of the row it was added to
        grad_self = grad if needs_input_grad[0] else None
        grad_source = at.mul(at.index_select(grad, dim, index), alpha) if needs_input_grad[2] else None
        return grad_self, None, grad_source
    def jvp(self_t, source_t):
        result_t = at.index_add(self_t, dim, index, source_t, alpha=alpha)
        return result_t
    return result, backward


@derivative("index_copy(Tensor self, int dim, Tensor index, Tensor source) -> Tensor")
def index_copy(self, dim, index, source):
    result = at.index_copy(self, dim, index, source)
    def backward(grad, *, needs_input_grad):
        # the copied-over rows of self get no gradient; each source row gets its row's
        # (indices must not repeat, as in torch)
        grad_self = at.index_fill(grad, dim, index, 0) if needs_input_grad[0] else None
        grad_source = at.index_select(grad, dim, index) if needs_input_grad[2] else None
        return grad_self, None, grad_source
    def jvp(self_t, source_t):
        result_t = at.index_copy(self_t, dim, index, source_t)
        return result_t
    return result, backward


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


@helper
def index_backward(zeros_like_self: Tensor, indices: list[Tensor | None], grad: Tensor) -> Tensor:
    """Gradient of ``index(self, indices)``, given zeros of ``self``'s shape: ``result[k] =
    self[p(k)]``, so each ``grad[k]`` is added at ``p(k)`` (``index_put`` accumulating: a position
    read several times gets the sum of their gradients, one never read gets 0)."""
    return at.index_put(zeros_like_self, indices, grad, True)


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
