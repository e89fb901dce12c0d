"""Our inputs for corpus entries that torch's OpInfo samples do not reach (``corpus_proof.py``).

:func:`cases` gives ``(args, kwargs)`` pairs for an ATen overload: first the hand-written
ones of :data:`WRITTEN` (entries whose arguments carry meaning: sizes that must agree
with a gradient's shape, dims, indices, a mask), then ones generated from the schema (a
float64 tensor of one shape for every ``Tensor``, defaults where the schema has them,
small values otherwise). They are ours, not torch's, and labelled so in the funnel; the
proof still compares against torch's own overload on the same arguments and skips any
case torch rejects.
"""
from __future__ import annotations

import re

import torch

SHAPES = ((3, 4), (2, 3, 4), (1, 2, 3, 4), (1, 2, 2, 3, 4), (5,))
#: a square matrix's shape, which the complex cases have too (an eigendecomposition's input)
SQUARE = (3, 3)


def _tensor(*shape: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed + 7 * len(shape) + sum(shape))
    return torch.randn(shape, dtype=torch.float64, generator=generator).requires_grad_()


def _positive(*shape: int) -> torch.Tensor:
    """A differentiated tensor with values in [0.5, 2.5]."""
    generator = torch.Generator().manual_seed(sum(shape))
    return (0.5 + 2 * torch.rand(shape, dtype=torch.float64, generator=generator)).requires_grad_()


def _constant(*shape: int) -> torch.Tensor:
    """A tensor argument that is not differentiated (values in [0.1, 0.3])."""
    generator = torch.Generator().manual_seed(sum(shape))
    return 0.1 + 0.2 * torch.rand(shape, dtype=torch.float64, generator=generator)


def _fractional_max_pool3d_indices(self: torch.Tensor) -> torch.Tensor:
    """The indices ``fractional_max_pool3d`` (kernel 2, output 2 per dim) returns for ``self``."""
    return torch.ops.aten.fractional_max_pool3d(self.detach(), [2, 2, 2], [2, 2, 2], _constant(1, 1, 3))[1]


def _with_log_sigmoid_buffer(op, grad_output: torch.Tensor, self: torch.Tensor) -> torch.Tensor:
    """``op`` (``log_sigmoid_backward``) called with the buffer ``log_sigmoid_forward`` returns for
    ``self``, made again on each call: torch's CPU kernel reads ``self``'s sigmoid from the buffer, so
    a buffer held fixed while finite differences move ``self`` is another function (torch's own op
    fails gradcheck on it). The buffer is not differentiated, as torch says."""
    return op(grad_output, self, torch.ops.aten.log_sigmoid_forward(self.detach())[1])


def _padded(op, *args, **kwargs) -> torch.Tensor:
    """``op``'s nested tensor output as the strided tensor ``to_padded_tensor(0.0)`` makes of it
    (differentiable, twice): gradcheck and the proof's projections take strided outputs only."""
    value = op(*args, **kwargs)
    return value.to_padded_tensor(0.0) if value.is_nested else value


def _written() -> dict[str, list]:
    """The hand-written cases, built when asked for (each call makes fresh leaves)."""
    t = _tensor
    mask = torch.tensor([[True, False, True, False], [False, True, True, False], [True, True, False, False]])
    return {
        # grad_output of a view's backward has the view's shape; input_sizes is the base's
        "diagonal_backward": [((t(3), [3, 4], 0, 0, 1), {}), ((t(3), [3, 4], 1, 0, 1), {}),
                              ((t(2, 2), [3, 2, 4], -1, 0, 2), {})],
        "select_backward": [((t(4), [3, 4], 0, 1), {}), ((t(3, 2), [3, 4, 2], 1, -1), {})],
        "slice_backward": [((t(2, 4), [5, 4], 0, 1, 4, 2), {}), ((t(3, 2), [3, 4], 1, 0, 2, 1), {})],
        "slice_scatter": [((t(5, 4), t(2, 4), 0, 1, 4, 2), {})],
        "select_scatter": [((t(3, 4), t(4), 0, 1), {}), ((t(3, 4), t(3), 1, 2), {})],
        "diagonal_scatter": [((t(3, 4), t(3), 0, 0, 1), {}), ((t(3, 4), t(2), 2, 0, 1), {})],
        # the gradient of masked_scatter's source: as many elements as the mask selects
        "masked_scatter_backward": [((t(3, 4), mask, [6]), {}), ((t(3, 4), mask, [2, 4]), {})],
        "_reshape_alias": [((t(3, 4), [4, 3], [3, 1]), {}), ((t(2, 3, 4), [6, 4], [4, 1]), {})],
        "_unsafe_view": [((t(3, 4), [4, 3]), {}), ((t(2, 3, 4), [6, 4]), {})],
        "_reshape_copy": [((t(3, 4), [4, 3]), {}), ((t(2, 3, 4), [-1]), {})],
        "index_select": [((t(3, 4), 1, torch.tensor([0, 2, 2])), {})],
        # a boolean condition (torch's OpInfo calls where with self first: it binds no overload)
        "where.self": [((mask, t(3, 4), t(3, 4, seed=1)), {}), ((mask[:, :1], t(1, 4), t(3, 1)), {})],
        "index_fill.int_Scalar": [((t(3, 4), 1, torch.tensor([0, 2]), 1.5), {})],
        "repeat": [((t(2, 3), [2, 1, 3]), {})],
        "_neg_view": [((t(3, 4),), {})],
        "_lazy_clone": [((t(3, 4),), {})],
        "alias": [((t(3, 4),), {})],
        "lift": [((t(3, 4),), {})],
        "lift_fresh": [((t(3, 4),), {})],
        "pixel_shuffle": [((t(1, 8, 2, 3), 2), {})],
        "pixel_unshuffle": [((t(1, 2, 4, 6), 2), {})],
        "im2col": [((t(1, 2, 4, 5), [2, 2], [1, 1], [0, 0], [1, 1]), {})],
        "col2im": [((t(1, 8, 12), [4, 5], [2, 2], [1, 1], [0, 0], [1, 1]), {})],
        "view.dtype": [((t(3, 4), torch.float64), {})],
        # inside the logarithm's domain: other > 0 (xlogy), other > -1 (xlog1py)
        "xlogy.Scalar_Self": [((0.5, _positive(3, 4)), {}), ((2.0, _positive(5)), {})],
        "special_xlog1py.self_scalar": [((0.5, _positive(3, 4)), {}), ((2.0, _positive(5)), {})],
        "fill.Tensor": [((t(3, 4), t()), {})],
        "fill_.Tensor": [((t(3, 4), t()), {})],
        # a probability per element, in [0, 1]
        "bernoulli_.Tensor": [((t(3, 4), _constant(3, 4)), {})],
        # noise is rrelu's random slope, not differentiated
        "rrelu_with_noise_backward": [((t(3, 4), t(3, 4), _constant(3, 4), 0.1, 0.3, True, False), {})],
        # padding: (left, right, top, bottom, front, back), smaller than the padded dims
        "reflection_pad2d": [((t(1, 2, 3, 4), [1, 1, 2, 1]), {})],
        "reflection_pad2d_backward": [((t(1, 2, 6, 6), t(1, 2, 3, 4), [1, 1, 2, 1]), {})],
        "reflection_pad3d": [((t(1, 1, 2, 3, 4), [1, 1, 1, 1, 1, 0]), {})],
        "reflection_pad3d_backward": [((t(1, 1, 3, 5, 6), t(1, 1, 2, 3, 4), [1, 1, 1, 1, 1, 0]), {})],
        "replication_pad3d": [((t(1, 1, 2, 3, 4), [1, 2, 1, 1, 0, 1]), {})],
        "replication_pad3d_backward": [((t(1, 1, 3, 5, 7), t(1, 1, 2, 3, 4), [1, 2, 1, 1, 0, 1]), {})],
        # convolutions: input (N, C_in, *spatial), weight (C_out, C_in / groups, *kernel), bias (C_out)
        "_convolution": [((t(1, 2, 5, 5), t(3, 2, 3, 3), t(3), [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
                           False, False, False, False), {}),
                         ((t(1, 2, 4, 4), t(2, 1, 2, 2), None, [2, 1], [0, 1], [1, 1], True, [1, 0], 2,
                           False, False, False, False), {})],
        "_slow_conv2d_forward": [((t(1, 2, 4, 4), t(3, 2, 2, 2), [2, 2], t(3), [1, 1], [0, 0]), {})],
        "slow_conv3d_forward": [((t(1, 2, 3, 3, 3), t(2, 2, 2, 2, 2), [2, 2, 2], t(2), [1, 1, 1], [0, 0, 0]), {})],
        # a transposed convolution's weight is (C_in, C_out, *kernel)
        "slow_conv_transpose2d": [((t(1, 2, 3, 3), t(2, 3, 2, 2), [2, 2], t(3), [2, 1]), {})],
        "slow_conv_transpose3d": [((t(1, 2, 2, 2, 3), t(2, 2, 2, 2, 2), [2, 2, 2], t(2)), {})],
        "max_pool2d": [((t(1, 2, 4, 5), [2, 2]), {}), ((t(2, 5, 5), [3, 2], [2, 1], [1, 0]), {})],
        # random_samples (one per batch and channel, per pooled dim) in [0, 1) are not differentiated
        "fractional_max_pool2d": [((t(1, 2, 5, 5), [2, 2], [3, 3], _constant(1, 2, 2)), {})],
        "fractional_max_pool3d": [((t(1, 1, 4, 4, 4), [2, 2, 2], [2, 2, 2], _constant(1, 1, 3)), {})],
        "grid_sampler_2d": [((t(1, 2, 3, 4), _constant(1, 2, 3, 2) * 4 - 0.8, 0, 0, False), {})],
        "bmm": [((t(2, 3, 4), t(2, 4, 2)), {})],
        "clamp": [((t(3, 4), -0.5, 0.5), {}), ((t(5), None, 0.2), {})],
        "count_nonzero.dim_IntList": [((t(3, 4), [1]), {})],
        "unsafe_split_with_sizes": [((t(5, 4), [2, 3]), {}), ((t(3, 4), [1, 3], 1), {})],
        "linear_backward": [((t(2, 3), t(2, 4), t(4, 3), [True, True, True]), {})],
        "norm.ScalarOpt_dtype": [((t(3, 4), 2.0), {"dtype": torch.float64}),
                                 ((t(5), 3.0), {"dtype": torch.float64})],
        "norm.ScalarOpt_dim_dtype": [((t(3, 4), 2.0, [1], False), {"dtype": torch.float64}),
                                     ((t(2, 3, 4), 1.5, [0, 2], True), {"dtype": torch.float64})],
        # indices: a list of index tensors (None for a dim taken whole); distinct, so a put is a function
        "_unsafe_index.Tensor": [((t(3, 4), [torch.tensor([0, 2, 2])]), {}),
                                 ((t(3, 4), [None, torch.tensor([1, 3])]), {})],
        "_unsafe_index_put": [((t(3, 4), [torch.tensor([0, 2])], t(2, 4), True), {}),
                              ((t(3, 4), [torch.tensor([2, 0])], t(2, 4), False), {})],
        "_index_put_impl_": [((t(3, 4), [torch.tensor([0, 2])], t(2, 4), True), {}),
                             ((t(3, 4), [torch.tensor([2, 0])], t(2, 4), False), {})],
        # the statistics of an evaluation-mode batch norm are not differentiated
        "_native_batch_norm_legit_no_training": [((t(2, 3, 4), t(3), t(3), _constant(3), 0.5 + _constant(3),
                                                   0.1, 1e-5), {})],
        # the target of a soft-margin loss and rrelu's noise are not differentiated
        "soft_margin_loss_backward": [((t(), t(3, 4), _constant(3, 4), 1), {}), ((t(3, 4), t(3, 4), _constant(3, 4), 0), {})],
        "rrelu_with_noise_functional": [((t(3, 4), _constant(3, 4), 0.1, 0.3, False), {})],
        # probabilities, rates
        "multinomial": [((_positive(3, 4), 2), {})],
        "poisson": [((_positive(3, 4),), {})],
        "special_zeta.self_scalar": [((2.5, _positive(3, 4)), {})],
        # torch differentiates the regularized incomplete gammas in other alone: self is not differentiated
        "igamma": [((_positive(3, 4).detach(), _positive(3, 4)), {})],
        "igammac": [((_positive(3, 4).detach(), _positive(3, 4)), {})],
        # a power of a positive base, elementwise over lists of tensors
        "_foreach_pow.List": [(([_positive(3, 4), _positive(5)], [t(3, 4), t(5)]), {})],
        # the indices are those of the forward's maxima; grad_output has the pooled shape
        "fractional_max_pool3d_backward": [((t(1, 1, 2, 2, 2), t(1, 1, 4, 4, 4), [2, 2, 2], [2, 2, 2],
                                             _fractional_max_pool3d_indices(t(1, 1, 4, 4, 4))), {})],
        # log_sigmoid's buffer is the one log_sigmoid_forward returns for self, made on each call
        "log_sigmoid_backward": [((t(3, 4), t(3, 4, seed=1)), {}, _with_log_sigmoid_buffer)],
        # shapes (concentrations) of a gamma draw: positive
        "_standard_gamma": [((_positive(3, 4),), {})],
        # the Hurwitz zeta: self > 1, other > 0; torch differentiates other alone (self: not_implemented)
        "special_zeta": [((_positive(3, 4).detach() + 1, _positive(3, 4)), {})],
        # a sum-mode bag's backward: grad (bags, D); indices, offset2bag (the bag of each index) vectors
        "_embedding_bag_dense_backward": [((t(2, 3), torch.tensor([0, 2, 1, 3]), torch.tensor([0, 0, 1, 1]),
                                            torch.tensor([2, 2]), torch.zeros(2, 3, dtype=torch.long), 5, False,
                                            0, None), {})],
        # the grid's last dim is (x, y); a mask's and the nested sizes' rows are the components
        "_grid_sampler_2d_cpu_fallback": [((t(1, 2, 3, 4), _constant(1, 2, 3, 2) * 4 - 0.8, 0, 0, False), {})],
        "_nested_tensor_from_mask": [((t(2, 3, 4), torch.tensor([[True, True, False], [True, False, False]])), {},
                                      _padded)],
        "_nested_view_from_buffer": [((t(6), torch.tensor([[2], [4]]), torch.tensor([[1], [1]]), torch.tensor([0, 2])),
                                      {}, _padded)],
        # upsampling: output_size of the spatial dims; a backward's grad_output has that size
        # and input_size is the full input shape
        **{name: [((t(1, 2, 2, 3), [4, 5]), {})] for name in ("upsample_nearest2d", "_upsample_nearest_exact2d")},
        **{f"{name}_backward": [((t(1, 2, 4, 5), [4, 5], [1, 2, 2, 3]), {})]
           for name in ("upsample_nearest2d", "_upsample_nearest_exact2d")},
        **{name: [((t(1, 1, 2, 2, 3), [3, 4, 5]), {})] for name in ("upsample_nearest3d", "_upsample_nearest_exact3d")},
        **{f"{name}_backward": [((t(1, 1, 3, 4, 5), [3, 4, 5], [1, 1, 2, 2, 3]), {})]
           for name in ("upsample_nearest3d", "_upsample_nearest_exact3d")},
        # the anti-aliased ones (align_corners False), down and up
        **{name: [((t(1, 1, 5, 6), [3, 4], False), {}), ((t(1, 1, 2, 3), [3, 5], False), {})]
           for name in ("_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa", "_upsample_lanczos2d_aa")},
        **{f"{name}_backward": [((t(1, 1, 3, 4), [3, 4], [1, 1, 5, 6], False), {}),
                                ((t(1, 1, 3, 5), [3, 5], [1, 1, 2, 3], False), {})]
           for name in ("_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa", "_upsample_lanczos2d_aa")},
    }


def _default(argument):
    """A value for a schema argument from its type alone (None where there is no sensible one)."""
    kind = argument.real_type.kind()
    if kind == "NumberType" or kind == "FloatType":
        return 0.5
    if kind in ("IntType", "SymIntType"):
        return 1
    if kind == "BoolType":
        return False
    if _dims(argument):
        return [0]          # the first dim: every generated shape has one (wrapped: an internal op may want it so)
    return _int_list(argument)


def _dims(argument) -> bool:
    """Whether ``argument`` is a list of dims (``int[] dim``, ``int[1] dims``): it gets one, the first."""
    element = argument.real_type.getElementType().kind() if argument.real_type.kind() == "ListType" else ""
    return element in ("IntType", "SymIntType") and argument.name in ("dim", "dims")


def _unfilled(argument) -> bool:
    """Whether :func:`_generated` has no value for ``argument`` (it then makes no case)."""
    kind = argument.real_type.kind()
    if kind in ("TensorType", "OptionalType") or argument.has_default_value():
        return False
    if kind == "ListType" and argument.real_type.getElementType().kind() == "TensorType":
        return False
    return _default(argument) is None


def why_none(schema) -> str:
    """Why :func:`cases` makes no case for ``schema``: the first argument it has no value for."""
    name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
    if not torch._C._dispatch_has_computed_kernel_for_dispatch_key(name, "CPU"):
        return f"none (torch has no CPU kernel for {name}: it runs on another device or layout)"
    unfilled = [a for a in schema.arguments if _unfilled(a)]
    if unfilled:
        return f"none (no value is generated for the argument '{unfilled[0].name}' of type {unfilled[0].real_type})"
    return "none"


def _generated(schema, shapes=SHAPES) -> list:
    cases = []
    for shape in shapes:
        args, kwargs, fits, by_name = [], {}, True, False
        for i, argument in enumerate(schema.arguments):
            kind = argument.real_type.kind()
            if kind == "TensorType":
                value = _tensor(*shape, seed=i)
            elif argument.has_default_value():
                by_name = True      # later arguments follow a left-out one: pass them by name
                continue
            elif kind == "OptionalType":
                value = None
            elif kind == "ListType" and argument.real_type.getElementType().kind() == "TensorType":
                value = [_tensor(*shape, seed=i), _tensor(*shape, seed=i + 1)]
            else:
                value = _default(argument)
                if value is None:
                    fits = False
                    break
            if argument.kwarg_only or by_name:
                kwargs[argument.name] = value
            else:
                args.append(value)
        if fits:
            cases.append((tuple(args), kwargs))
    return cases


def cases(op: str, schema) -> list:
    """``(args, kwargs)`` pairs for the ATen overload ``op`` (``name.overload``) with ``schema``."""
    written = _written()
    found, generated = written.get(op, written.get(op.removesuffix(".default"), [])), _generated(schema)
    if found or not generated:
        return found + generated
    base, _, overload = op.partition(".")
    retypings = dtypes_torch_wants(getattr(getattr(torch.ops.aten, base), overload or "default"), schema, generated[0])
    for name, dtype in retypings:
        generated = [_retyped(schema, *case, name, dtype) or case for case in generated]
    return generated


def _int_list(argument):
    """A value for an ``int[]`` / ``SymInt[]`` argument (sizes, strides, dims): ones, ``N`` of them
    where the schema fixes the length (``int[2]``), else two; None for another type."""
    kind = argument.real_type.kind()
    if kind == "ListType" and argument.real_type.getElementType().kind() in ("IntType", "SymIntType"):
        return [1] * (argument.N or 2)
    return None


#: torch's own errors for a tensor argument of another dtype than the float64 one generated: each
#: names the dtype it wants (``Long``, ``Bool``) and the argument (``name``; absent: the operator's
#: first tensor argument, as ``one_hot``'s ``self``). Read by :func:`dtypes_torch_wants`.
DTYPE_ERRORS = (
    # embedding_renorm_'s indices, _embedding_bag_backward's indices
    re.compile(r"Expected tensor for argument #\d+ '(?P<name>\w+)' to have one of the following scalar types: "
               r"(?P<dtype>\w+)"),
    # _nested_tensor_from_mask's mask
    re.compile(r"Expected (?P<name>\w+) to be of ScalarType (?P<dtype>\w+)"),
    # _is_all_true's and _is_any_true's self (an internal assert of torch's)
    re.compile(r"(?P<name>\w+)\.scalar_type\(\) == at::k(?P<dtype>\w+)"),
    # one_hot's self
    re.compile(r"applicable to index tensor of type (?P<dtype>\w+)Tensor"),
)


def dtypes_torch_wants(aten, schema, case: tuple) -> list[tuple[str, torch.dtype]]:
    """The ``(argument, dtype)`` changes that make a generated ``case`` one torch's own ``aten``
    takes: each tensor argument it rejects for its dtype, saying which dtype it wants
    (:data:`DTYPE_ERRORS`: indices Long, a mask Bool), made of that dtype (not differentiated), until
    torch takes the case or says something else. Learnt on the first generated case alone (the one
    the proof calls first) and applied to every shape: the cases as torch's own operator types its
    arguments, with no table of operators."""
    args, kwargs = case
    retypings: list[tuple[str, torch.dtype]] = []
    for _ in range(len(schema.arguments)):
        try:
            aten(*_copies(args), **_copies(kwargs))
            return retypings
        except Exception as error:  # noqa: BLE001 - torch's refusal says which argument to change, or nothing
            wanted = _wanted_dtype(str(error), schema)
            changed = wanted and _retyped(schema, args, kwargs, *wanted)
            if not changed:
                return retypings
            retypings.append(wanted)
            args, kwargs = changed
    return retypings


def _wanted_dtype(message: str, schema) -> tuple[str, torch.dtype] | None:
    """``(argument name, dtype)`` that ``message`` (torch's error) asks for, or None."""
    for pattern in DTYPE_ERRORS:
        found = pattern.search(message)
        dtype = found and getattr(torch, found.group("dtype").lower(), None)
        if isinstance(dtype, torch.dtype):
            first = next((a.name for a in schema.arguments if a.real_type.kind() == "TensorType"), None)
            return found.groupdict().get("name") or first, dtype
    return None


def _retyped(schema, args: tuple, kwargs: dict, name: str, dtype: torch.dtype) -> tuple | None:
    """``(args, kwargs)`` with the tensor argument ``name`` of ``dtype`` (integers counting up
    modulo its first dimension, so that they index it and its peers of the same shape; alternating
    booleans); None where there is no such tensor argument or it has that dtype already."""
    position = next((i for i, a in enumerate(schema.arguments) if a.name == name), None)
    if position is None:
        return None
    args = list(args)
    value = args[position] if position < len(args) else kwargs.get(name)
    if not isinstance(value, torch.Tensor) or value.dtype == dtype:
        return None
    counting = torch.arange(value.numel())
    retyped = (counting % 2 == 0 if dtype == torch.bool else
               (counting % max(value.shape[0] if value.dim() else 1, 1)).to(dtype)).reshape(value.shape)
    if position < len(args):
        args[position] = retyped
    else:
        kwargs = {**kwargs, name: retyped}
    return tuple(args), kwargs


def _copies(value):
    """``value`` with fresh copies of its tensors (an in-place operator writes a copy, never a leaf)."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_copies(v) for v in value)
    if isinstance(value, dict):
        return {k: _copies(v) for k, v in value.items()}
    return value


def complex_cases(op: str, schema) -> list:
    """Our cases of an entry proven on complex128 (``corpus_override.py``, where it has no float64
    case): those of :func:`cases` and one generated of a :data:`SQUARE` shape, each differentiated
    float64 tensor made a complex128 one (its imaginary part drawn as its real part is); then the
    same float64 ones as they are, for an entry from real inputs to complex outputs (``polar``)."""
    floating = cases(op, schema) + _generated(schema, (SQUARE,))
    return [tuple(_remade(value, _complexified) for value in case) for case in floating] + floating


def _complexified(tensor: torch.Tensor) -> torch.Tensor:
    """A complex128 tensor with ``tensor``'s values as its real part (its imaginary part drawn)."""
    generator = torch.Generator().manual_seed(tensor.numel())
    return torch.complex(tensor, torch.randn(tensor.shape, dtype=torch.float64, generator=generator))


def _remade(value, make):
    """``value`` (a case's args or kwargs, or one of their values) with each float64 tensor that
    requires grad made by ``make`` from it, a leaf that requires grad; a tensor not differentiated
    stays as it is."""
    if isinstance(value, torch.Tensor):
        if value.dtype != torch.float64 or not value.requires_grad:
            return value
        return make(value.detach()).requires_grad_()
    if isinstance(value, (list, tuple)):
        return type(value)(_remade(v, make) for v in value)
    if isinstance(value, dict):
        return {k: _remade(v, make) for k, v in value.items()}
    return value


def _uncoalesced(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` as a sparse COO tensor whose every element is given twice, halved (uncoalesced)."""
    coalesced = tensor.to_sparse()
    indices, values = coalesced.indices(), coalesced.values()
    return torch.sparse_coo_tensor(torch.cat([indices, indices], 1), torch.cat([values, values]) / 2, tensor.shape,
                                   check_invariants=True)


#: the sparse layouts the kernels of a dispatch key take, each made from a strided tensor
SPARSE_LAYOUTS = {
    "SparseCPU": (_uncoalesced, torch.Tensor.to_sparse),
    "SparseCsrCPU": (torch.Tensor.to_sparse_csr, torch.Tensor.to_sparse_csc),
}


def sparse_cases(op: str, schema) -> list:
    """Our cases of an entry with kernels for sparse layouts (``corpus_override.py`` tries them
    where strided ones make no case: ``_coalesce``, ``crow_indices``, whose CPU kernels take sparse
    tensors alone): those generated from the schema (:func:`cases`' last ones), each
    differentiated tensor in each layout of :data:`SPARSE_LAYOUTS` torch has a kernel of the
    entry's for (COO uncoalesced and coalesced; CSR and CSC), a leaf that requires grad; a shape the
    layout does not take (a one-dimensional CSR tensor) makes no case."""
    name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
    makers = [make for key, layouts in SPARSE_LAYOUTS.items()
              if torch._C._dispatch_has_kernel_for_dispatch_key(name, key) for make in layouts]
    cases = []
    for make in makers:
        for case in _generated(schema):
            try:
                cases.append(tuple(_remade(value, make) for value in case))
            except (RuntimeError, IndexError):  # torch's own conversion refuses the shape
                continue
    return cases
