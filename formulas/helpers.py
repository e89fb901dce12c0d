"""Helpers shared by backward formulas: the ``FunctionsManual.cpp`` of this library.

Every helper is fully annotated (the C++ types follow from the annotations),
computes on tensors only through ``at.<op>`` calls of declared operators, and
uses only the Python constructs of ``formulas/README.md``.
"""
from __future__ import annotations

from formulas import Scalar, ScalarType, Tensor, at, helper


@helper
def wrap_dim(dim: int, ndim: int) -> int:
    """``dim`` (possibly negative) as an index into ``ndim`` dims; a 0-d tensor accepts 0 and -1."""
    bound = ndim if ndim > 0 else 1
    return dim + bound if dim < 0 else dim


@helper
def is_reduced_dim(dim: list[int] | None, d: int, ndim: int) -> bool:
    """Whether a reduction over ``dim`` (``None`` or empty: every dim) reduces dim ``d``."""
    if dim is None or len(dim) == 0:
        return True
    for i in range(len(dim)):
        if wrap_dim(dim[i], ndim) == d:
            return True
    return False


@helper
def reduced_numel(sizes: list[int], dim: list[int] | None) -> int:
    """How many elements a reduction over ``dim`` folds into each output element."""
    count = 1
    for d in range(len(sizes)):
        if is_reduced_dim(dim, d, len(sizes)):
            count = count * sizes[d]
    return count


@helper
def sum_to(grad: Tensor, sizes: list[int]) -> Tensor:
    """Sum ``grad`` down to ``sizes``: undo the broadcasting of an input of that shape."""
    leading = grad.dim() - len(sizes)
    reduced = grad
    if leading > 0:
        leading_dims = []
        for d in range(leading):
            leading_dims.append(d)
        reduced = at.sum(reduced, leading_dims, False)
    expanded_dims = []
    for d in range(len(sizes)):
        if sizes[d] == 1 and reduced.size(d) != 1:
            expanded_dims.append(d)
    if len(expanded_dims) > 0:
        reduced = at.sum(reduced, expanded_dims, True)
    return reduced


@helper
def sum_backward(grad: Tensor, sizes: list[int], dim: list[int] | None, keepdim: bool) -> Tensor:
    """Gradient of a sum over ``dim`` of a tensor of ``sizes``: ``grad`` broadcast back."""
    restored = grad
    if not keepdim:
        for d in range(len(sizes)):
            if is_reduced_dim(dim, d, len(sizes)):
                restored = at.unsqueeze(restored, d)
    return at.expand(restored, sizes)


@helper
def pow_backward(grad: Tensor, self: Tensor, exponent: float) -> Tensor:
    """Gradient of ``self ** exponent``; exactly zero for exponent 0 (no ``0 * inf`` at 0)."""
    if exponent == 0.0:
        return at.zeros_like(self)
    return grad * at.mul(at.pow(self, exponent - 1.0), exponent)


@helper
def invert_permutation(dims: list[int], ndim: int) -> list[int]:
    """The permutation that undoes ``permute(dims)`` (``dims`` may be negative)."""
    inverse = []
    for i in range(len(dims)):
        inverse.append(0)
    for i in range(len(dims)):
        inverse[wrap_dim(dims[i], ndim)] = i
    return inverse


@helper
def narrow_backward(grad: Tensor, sizes: list[int], dim: int, start: int, length: int) -> Tensor:
    """Gradient of ``narrow(dim, start, length)`` (``narrow_copy``'s too) of a tensor of ``sizes``:
    ``grad`` padded with zeros along ``dim`` (``dim`` and ``start`` may be negative, counting from
    the end): one zero-filled output and one copy, where concatenating zero blocks writes every
    element twice."""
    narrowed = wrap_dim(dim, len(sizes))
    first = start + sizes[narrowed] if start < 0 else start
    pad = []
    for later_dim in range(narrowed + 1, len(sizes)):     # pad pairs run from the last dim backwards
        pad.append(0)
        pad.append(0)
    pad.append(first)
    pad.append(sizes[narrowed] - first - length)
    return at.constant_pad_nd(grad, pad, 0)


# --- shape and indexing helpers ----------------------------------------------------

@helper
def slice_bound(bound: int, size: int) -> int:
    """A ``slice`` start or end as torch clamps it: a negative bound counts from the end, and
    the result lies in ``[0, size]``."""
    wrapped = bound + size if bound < 0 else bound
    if wrapped < 0:
        return 0
    if wrapped > size:
        return size
    return wrapped


@helper
def negated(values: list[int]) -> list[int]:
    """Each of ``values`` negated (the shifts that undo a ``roll``)."""
    result = []
    for i in range(len(values)):
        result.append(0 - values[i])
    return result


@helper
def reverse_list(values: list[int]) -> list[int]:
    """``values`` last to first."""
    result = []
    for i in range(len(values)):
        result.append(values[len(values) - 1 - i])
    return result


@helper
def broadcast_sizes(a: list[int], b: list[int]) -> list[int]:
    """The sizes two tensors of sizes ``a`` and ``b`` broadcast to."""
    if a == b:      # one shape: nothing broadcasts (an optimization: the loop below gives the same)
        return list(a)
    ndim = len(a) if len(a) > len(b) else len(b)
    result = []
    for d in range(ndim):
        i = d - (ndim - len(a))
        j = d - (ndim - len(b))
        size_a = a[i] if i >= 0 else 1
        size_b = b[j] if j >= 0 else 1
        result.append(size_b if size_a == 1 else size_a)
    return result


@helper
def repeat_backward(grad: Tensor, repeats: list[int], sizes: list[int]) -> Tensor:
    """Gradient of ``repeat(repeats)`` of a tensor of ``sizes``: ``grad`` viewed as
    ``[r0, s0, r1, s1, ...]`` (sizes padded with leading 1s) and summed over every ``r``."""
    lead = len(repeats) - len(sizes)
    split = []
    repeat_dims = []
    for d in range(len(repeats)):
        size = sizes[d - lead] if d >= lead else 1
        repeat_dims.append(len(split))
        split.append(repeats[d])
        split.append(size)
    if len(repeat_dims) == 0:
        return grad
    summed = at.sum(at.reshape(grad, split), repeat_dims, False)
    return at.reshape(summed, sizes)


@helper
def padded_repeats(dims: list[int], ndim: int) -> list[int]:
    """``tile``'s ``dims`` as ``repeat``'s repeats: leading 1s up to ``ndim`` entries."""
    repeats = []
    for d in range(ndim - len(dims)):
        repeats.append(1)
    for d in range(len(dims)):
        repeats.append(dims[d])
    return repeats


@helper
def gelu_second_derivative(self: Tensor, approximate: str) -> Tensor:
    """The second derivative of gelu at ``self``: what ``gelu_backward``'s gradient needs."""
    if approximate == "tanh":
        # f = x (1 + tanh u) / 2, u = k (x + c x^3): f'' = (1 - t^2) (u' - x t u'^2 + x u'' / 2),
        # u' = k (1 + 3 c x^2), u'' = 6 k c x (k = sqrt(2 / pi), c = 0.044715)
        squared = self * self
        inner = at.tanh((self + squared * self * 0.044715) * 0.7978845608028654)
        slope = (squared * 0.134145 + 1.0) * 0.7978845608028654
        curvature = self * 0.21406444881780076
        return at.tanh_backward(slope - self * inner * slope * slope + self * curvature * 0.5, inner)
    # f = x Phi(x): f'' = 2 phi(x) + x phi'(x) = phi(x) (2 - x^2)
    return at.exp(self * self * -0.5) * 0.3989422804014327 * at.rsub(self * self, 2.0)


# --- FunctionsManual names: helpers derivatives.yaml's formulas call, written from the mathematics

@helper
def maybe_multiply(t: Tensor, s: Scalar) -> Tensor:
    """``t * s``; ``t`` itself when ``s`` is 1 (multiplying by one changes nothing)."""
    if s == 1:
        return t
    return at.mul(t, s)


@helper
def is_real_type(scalar_type: ScalarType, like: Tensor) -> bool:
    """Whether ``scalar_type`` is a real dtype: its real part (``real`` of a 0-d tensor of that
    dtype, made like ``like``) has the same dtype; a complex dtype's real part does not."""
    return at.real(at.new_zeros(like, [], dtype=scalar_type)).scalar_type() == scalar_type


@helper
def handle_r_to_c(self_type: ScalarType, gradient: Tensor) -> Tensor:
    """The gradient of an input of dtype ``self_type``: the real part of ``gradient`` when the
    input is real and the gradient complex (a real input moves along the real axis only),
    otherwise ``gradient``."""
    if self_type == gradient.scalar_type() or not is_real_type(self_type, gradient):
        return gradient
    return at.real(gradient)


@helper
def gather_with_keepdimed_indices(source: Tensor, dim: int, indices: Tensor, keepdim: bool) -> Tensor:
    """The elements of ``source`` at ``indices`` along ``dim``, where ``indices`` are those of a
    reduction over ``dim`` that kept the dim or not (``keepdim``): the tangent of ``max.dim``,
    ``min.dim`` and their kin is the input's tangent at the selected elements."""
    if keepdim or source.dim() == 0:
        return at.gather(source, dim, indices)
    return at.squeeze(at.gather(source, dim, at.unsqueeze(indices, dim)), dim)


@helper
def mul_tensor_backward(grad: Tensor, other: Tensor, self_type: ScalarType) -> Tensor:
    """Gradient of ``self * other`` for ``self`` (of dtype ``self_type``): ``grad`` times the
    conjugate of ``other``, not yet summed to ``self``'s shape."""
    return handle_r_to_c(self_type, grad * at.conj(other))


@helper
def div_tensor_self_backward(grad: Tensor, other: Tensor, self_type: ScalarType) -> Tensor:
    """Gradient of ``self / other`` for ``self`` (of dtype ``self_type``): ``grad`` over the
    conjugate of ``other``, not yet summed to ``self``'s shape."""
    return handle_r_to_c(self_type, grad / at.conj(other))


@helper
def div_tensor_other_backward(grad: Tensor, self: Tensor, other: Tensor) -> Tensor:
    """Gradient of ``self / other`` for ``other``: d/d other = -self / other^2, conjugated; not
    yet summed to ``other``'s shape."""
    return handle_r_to_c(other.scalar_type(), -grad * at.conj(self / other / other))


@helper
def copysign_tensor_self_backward(grad: Tensor, self: Tensor, result: Tensor) -> Tensor:
    """Gradient of ``copysign(self, other)`` for ``self``: ``|self|`` with ``other``'s sign has
    slope ``result / self`` (+-1), and 0 at ``self = 0`` as torch has it; not yet summed to
    ``self``'s shape."""
    return at.where(at.eq(self, 0), at.zeros_like(grad), grad * (result / self))


@helper
def clamp_backward(grad: Tensor, self: Tensor, min: Scalar | None, max: Scalar | None) -> Tensor:
    """Gradient of ``clamp(self, min, max)``: ``grad`` where ``min <= self <= max`` (bounds
    included, as in torch; a missing bound does not bind; 0 at a NaN ``self``), 0 elsewhere."""
    zero = at.new_zeros(grad, [])      # a 0-d zero that where broadcasts (no full zeros tensor written)
    if min is not None:
        if max is not None:
            return at.where(at.logical_and(at.ge(self, min), at.le(self, max)), grad, zero)
        return at.where(at.ge(self, min), grad, zero)
    if max is not None:
        return at.where(at.le(self, max), grad, zero)
    return grad


@helper
def clamp_backward__tensor(grad: Tensor, self: Tensor, min: Tensor | None, max: Tensor | None) -> Tensor:
    """Gradient of ``clamp(self, min, max)`` for ``self``, ``min`` and ``max`` tensors (broadcast):
    ``grad`` where ``min <= self <= max`` (bounds included; a missing bound does not bind), 0
    elsewhere, also where ``min > max`` (the result is then ``max``)."""
    zero = at.new_zeros(grad, [])
    if min is not None:
        if max is not None:
            return at.where(at.logical_and(at.ge(self, min), at.le(self, max)), grad, zero)
        return at.where(at.ge(self, min), grad, zero)
    if max is not None:
        return at.where(at.le(self, max), grad, zero)
    return grad


@helper
def clamp_min_is_result(self: Tensor, min: Tensor, max: Tensor | None) -> Tensor:
    """Where ``clamp(self, min, max)`` is ``min`` for the gradient (broadcast): ``self < min``, and
    ``min < max`` when ``max`` is given (where ``min > max`` the result is ``max``; where ``min ==
    max`` and ``self`` is below, torch gives neither bound the gradient)."""
    below = at.lt(self, min)
    if max is not None:
        below = at.logical_and(below, at.lt(min, max))
    return below


@helper
def clamp_max_is_result(self: Tensor, min: Tensor | None, max: Tensor) -> Tensor:
    """Where ``clamp(self, min, max)`` is ``max`` for the gradient (broadcast): ``self > max``, or
    ``min > max`` when ``min`` is given."""
    above = at.gt(self, max)
    if min is not None:
        above = at.logical_or(above, at.gt(min, max))
    return above


@helper
def clamp_backward_min_max(grad: Tensor, self: Tensor, min: Tensor | None, max: Tensor | None,
                           grad_input_mask: list[bool]) -> tuple[Tensor, Tensor]:
    """Gradients of ``clamp(self, min, max) = minimum(maximum(self, min), max)`` for the bounds:
    each takes ``grad`` where it is the result (``clamp_min_is_result``, ``clamp_max_is_result``:
    never both); None for a bound not given or not asked for. Not yet summed to the bounds' shapes.
    ``grad_input_mask`` has one flag per bound, ``[min, max]`` (the line's own ``grad_input_mask``
    in derivatives.yaml)."""
    zero = at.new_zeros(grad, [])
    grad_min = None
    grad_max = None
    if min is not None and grad_input_mask[0]:
        grad_min = at.where(clamp_min_is_result(self, min, max), grad, zero)
    if max is not None and grad_input_mask[1]:
        grad_max = at.where(clamp_max_is_result(self, min, max), grad, zero)
    return grad_min, grad_max


@helper
def clamp_jvp(self_p: Tensor, self_t: Tensor, min_p: Tensor | None, min_t: Tensor | None, max_p: Tensor | None,
              max_t: Tensor | None) -> Tensor:
    """Tangent of ``clamp(self, min, max)`` for tensor bounds: the tangent of whichever of ``self``,
    ``min`` and ``max`` the result is, as torch's forward AD picks it; a bound without a tangent
    contributes 0. With both bounds: ``max``'s where ``min > max``, else ``min``'s where ``self <
    min``, ``max``'s where ``self > max``. With one bound, ``self``'s only where ``self`` is strictly
    inside it, so the bound's at a tie and at a NaN ``self`` (the gradient passes to ``self`` at a
    tie: torch's two conventions differ there)."""
    zero = at.new_zeros(self_t, [])
    from_min = zero
    if min_t is not None:
        from_min = min_t
    from_max = zero
    if max_t is not None:
        from_max = max_t
    if min_p is not None:
        if max_p is not None:
            inside = at.where(at.lt(self_p, min_p), from_min, at.where(at.gt(self_p, max_p), from_max, self_t))
            return at.where(at.gt(min_p, max_p), from_max, inside)
        return at.where(at.gt(self_p, min_p), self_t, from_min)
    if max_p is not None:
        return at.where(at.lt(self_p, max_p), self_t, from_max)
    return self_t


@helper
def unsqueeze_to(grad: Tensor, sizes: list[int]) -> Tensor:
    """Gradient of ``squeeze()`` of a tensor of ``sizes``: ``grad`` with every size-1 dim put back."""
    restored = grad
    for d in range(len(sizes)):
        if sizes[d] == 1:
            restored = at.unsqueeze(restored, d)
    return restored


@helper
def logsumexp_jvp(self_p: Tensor, self_t: Tensor, dim: list[int], keepdim: bool) -> Tensor:
    """Tangent of ``logsumexp(self_p, dim, keepdim)`` along ``self_t``: the tangent weighted by
    the softmax of each slice, d/dx_i log sum_j exp(x_j) = exp(x_i - logsumexp(x)), and summed."""
    softmax = at.exp(self_p - at.logsumexp(self_p, dim, True))
    return at.sum(softmax * self_t, dim, keepdim)


@helper
def restore_reduced_dims(output: Tensor, dims: list[int], keepdim: bool) -> Tensor:
    """``output`` of a reduction over ``dims`` with the reduced dims put back as size 1 (as
    ``keepdim=True`` would have given it), so that it broadcasts against the input."""
    if keepdim or len(dims) == 0:
        return output
    ndim = output.dim() + len(dims)
    restored = output
    for d in range(ndim):
        if is_reduced_dim(dims, d, ndim):
            restored = at.unsqueeze(restored, d)
    return restored


@helper
def scale_grad_by_count(grad: Tensor, mask: Tensor, dims: list[int]) -> Tensor:
    """``grad`` (reduced dims kept) shared evenly by the elements of each slice over ``dims``
    where ``mask`` holds: the gradient of ``amax``/``amin`` with ties."""
    return at.mul(at.div(grad, at.sum(mask, dims, True)), mask)


@helper
def unsqueezed_sizes(sizes: list[int], dim: int) -> list[int]:
    """The sizes of ``unsqueeze`` at ``dim`` of a tensor of ``sizes``. (Derived jvps ask it for
    the sizes of a gradient unsqueezed inside a backward.)"""
    at_dim = wrap_dim(dim, len(sizes) + 1)
    unsqueezed = []
    for d in range(len(sizes)):
        if d == at_dim:
            unsqueezed.append(1)
        unsqueezed.append(sizes[d])
    if at_dim == len(sizes):
        unsqueezed.append(1)
    return unsqueezed



@helper
def squeezed_sizes(sizes: list[int], dim: int) -> list[int]:
    """The sizes of ``squeeze`` at ``dim`` of a tensor of ``sizes``: without that dim where it is 1.
    (Derived jvps ask it for the sizes of a gradient squeezed inside a backward.)"""
    at_dim = wrap_dim(dim, len(sizes))
    squeezed = []
    for d in range(len(sizes)):
        if d != at_dim or sizes[d] != 1:
            squeezed.append(sizes[d])
    return squeezed

@helper
def concatenated_sizes(sizes: list[list[int]], dim: int) -> list[int]:
    """The sizes of ``cat`` along ``dim`` of tensors of ``sizes`` (a legacy 1-d empty one is
    skipped, as cat skips it). (Derived jvps ask it for the sizes of a gradient joined inside a
    backward.)"""
    first = 0
    for i in range(len(sizes)):
        if len(sizes[first]) == 1 and sizes[first][0] == 0:
            first = i
    joined = list(sizes[first])
    if len(joined) == 1 and joined[0] == 0:
        return joined
    at_dim = wrap_dim(dim, len(joined))
    total = 0
    for i in range(len(sizes)):
        if not (len(sizes[i]) == 1 and sizes[i][0] == 0) or len(joined) == 1:
            total = total + sizes[i][at_dim]
    joined[at_dim] = total
    return joined


@helper
def stacked_sizes(sizes: list[list[int]], dim: int) -> list[int]:
    """The sizes of ``stack`` along ``dim`` of tensors of ``sizes``. (Derived jvps ask it for the
    sizes of a gradient stacked inside a backward.)"""
    stacked = unsqueezed_sizes(sizes[0], dim)
    stacked[wrap_dim(dim, len(sizes[0]) + 1)] = len(sizes)
    return stacked


@helper
def reduced_sizes(sizes: list[int], dim: list[int] | None, keepdim: bool) -> list[int]:
    """The sizes of a sum over ``dim`` (``None`` or empty: every dim) of a tensor of ``sizes``;
    a reduced dim stays as 1 when ``keepdim``. (Derived jvps ask it for the sizes of a gradient
    summed inside a backward.)"""
    reduced = []
    for d in range(len(sizes)):
        if not is_reduced_dim(dim, d, len(sizes)):
            reduced.append(sizes[d])
        elif keepdim:
            reduced.append(1)
    return reduced


@helper
def transposed_sizes(sizes: list[int], dim0: int, dim1: int) -> list[int]:
    """The sizes of ``transpose`` of ``dim0`` and ``dim1`` of a tensor of ``sizes``. (Derived jvps
    ask it, as the ones below, for the sizes of a gradient reshaped inside a backward.)"""
    first = wrap_dim(dim0, len(sizes))
    second = wrap_dim(dim1, len(sizes))
    swapped = []
    for d in range(len(sizes)):
        swapped.append(sizes[second] if d == first else (sizes[first] if d == second else sizes[d]))
    return swapped


@helper
def permuted_sizes(sizes: list[int], dims: list[int]) -> list[int]:
    """The sizes of ``permute`` by ``dims`` of a tensor of ``sizes``."""
    permuted = []
    for d in range(len(dims)):
        permuted.append(sizes[wrap_dim(dims[d], len(sizes))])
    return permuted


@helper
def flattened_sizes(sizes: list[int], start_dim: int, end_dim: int) -> list[int]:
    """The sizes of ``flatten`` from ``start_dim`` to ``end_dim`` of a tensor of ``sizes`` (a 0-d
    tensor flattens to one element)."""
    if len(sizes) == 0:
        return [1]
    start = wrap_dim(start_dim, len(sizes))
    end = wrap_dim(end_dim, len(sizes))
    flattened = []
    joined = 1
    for d in range(len(sizes)):
        if d < start or d > end:
            flattened.append(sizes[d])
        else:
            joined = joined * sizes[d]
            if d == end:
                flattened.append(joined)
    return flattened


@helper
def narrowed_sizes(sizes: list[int], dim: int, length: int) -> list[int]:
    """The sizes of ``narrow`` to ``length`` elements along ``dim`` of a tensor of ``sizes``."""
    narrowed = list(sizes)
    narrowed[wrap_dim(dim, len(sizes))] = length
    return narrowed


@helper
def diagonal_sizes(sizes: list[int], offset: int, dim1: int, dim2: int) -> list[int]:
    """The sizes of ``diagonal`` at ``offset`` of dims ``dim1`` and ``dim2`` of a tensor of ``sizes``:
    the other dims, then the diagonal's length."""
    first = wrap_dim(dim1, len(sizes))
    second = wrap_dim(dim2, len(sizes))
    rows = sizes[first] + offset if offset < 0 else sizes[first]
    columns = sizes[second] - offset if offset > 0 else sizes[second]
    length = rows if rows < columns else columns
    kept = []
    for d in range(len(sizes)):
        if d != first and d != second:
            kept.append(sizes[d])
    kept.append(length if length > 0 else 0)
    return kept


@helper
def embedded_sizes(weight: list[int], indices: list[int]) -> list[int]:
    """The sizes of ``embedding`` of a weight of sizes ``weight`` at indices of sizes ``indices``:
    one row of the weight per index."""
    embedded = list(indices)
    embedded.append(weight[len(weight) - 1])
    return embedded


@helper
def matmul_sizes(a: list[int], b: list[int]) -> list[int]:
    """The sizes of ``matmul`` of tensors of sizes ``a`` and ``b``: a vector factor is one row (one
    column) whose added dim is dropped; the batch dims broadcast."""
    if len(a) == 1 and len(b) == 1:
        return []
    a_batch = []
    for d in range(len(a) - 2):
        a_batch.append(a[d])
    b_batch = []
    for d in range(len(b) - 2):
        b_batch.append(b[d])
    joined = broadcast_sizes(a_batch, b_batch)
    if len(a) > 1:
        joined.append(a[len(a) - 2])
    if len(b) > 1:
        joined.append(b[len(b) - 1])
    return joined


@helper
def triangular_solved_sizes(a: list[int], b: list[int]) -> list[int]:
    """The sizes of ``linalg_solve_triangular`` of a square ``a`` and ``b``, on the left or on the right:
    the batch dims broadcast, then ``b``'s matrix dims."""
    joined = matmul_sizes(a, b)         # the batch dims broadcast, then a's rows and b's columns
    joined[len(joined) - 2] = b[len(b) - 2]
    return joined


@helper
def convolution_sizes(input: list[int], weight: list[int], stride: list[int], padding: list[int],
                      dilation: list[int], transposed: bool, output_padding: list[int], groups: int) -> list[int]:
    """The sizes of ``convolution`` of an input of sizes ``input`` (batched or not) with a weight of
    sizes ``weight`` (a parameter with one value means it for every spatial dim)."""
    spatial = len(weight) - 2
    joined = []
    if len(input) == len(weight):
        joined.append(input[0])
    joined.append(weight[1] * groups if transposed else weight[0])
    first = len(input) - spatial
    for d in range(spatial):
        step = stride[0] if len(stride) == 1 else stride[d]
        pad = padding[0] if len(padding) == 1 else padding[d]
        spread = (dilation[0] if len(dilation) == 1 else dilation[d]) * (weight[d + 2] - 1)
        if transposed:
            extra = output_padding[0] if len(output_padding) == 1 else output_padding[d]
            joined.append((input[first + d] - 1) * step - 2 * pad + spread + 1 + extra)
        else:
            joined.append((input[first + d] + 2 * pad - spread - 1) // step + 1)
    return joined


@helper
def i1_backward(grad: Tensor, self: Tensor, result: Tensor) -> Tensor:
    """Gradient of the modified Bessel function ``I_1``: from ``(x^-1 I_1)' = x^-1 I_2`` and
    ``I_0 - I_2 = (2/x) I_1``, ``I_1'(x) = I_0(x) - I_1(x) / x`` (``result`` is ``I_1(self)``); at
    ``x = 0`` the series ``I_1(x) = x/2 + x^3/16 + ...`` gives ``1/2`` (a 1 stands in for the zero
    in both branches, so no NaN reaches either branch's gradient). A NaN input gets ``1/2`` too,
    torch's answer there (its test ``|x| > eps`` is false for NaN)."""
    at_zero = at.logical_not(at.abs(self) > 0.0)
    safe = at.where(at_zero, at.ones_like(self), self)
    slope = at.where(at_zero, at.ones_like(self) * 0.5, at.i0(safe) - result / safe)
    return grad * slope


@helper
def i1e_backward(grad: Tensor, self: Tensor, result: Tensor) -> Tensor:
    """Gradient of ``i1e(x) = e^-|x| I_1(x)`` (``result``): the product rule with
    :func:`i1_backward`'s ``I_1'`` gives ``i0e(x) - i1e(x) / x - sgn(x) i1e(x)``; ``1/2`` at 0 (and
    at NaN, as torch)."""
    at_zero = at.logical_not(at.abs(self) > 0.0)
    safe = at.where(at_zero, at.ones_like(self), self)
    slope = at.where(at_zero, at.ones_like(self) * 0.5,
                     at.special_i0e(safe) - result / safe - at.sgn(safe) * result)
    return grad * slope
