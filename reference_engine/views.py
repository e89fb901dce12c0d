"""Views: tensors over their base's memory, and in-place writes through them (torch's rules).

A view operator (its schema's output aliases its input: ``view``, ``permute``,
``narrow``, ``expand``, ``unsqueeze``, ``t``, ``reshape`` when it does not
copy) returns a tensor over the input's array; :func:`make_view` gives it the
input's version counter and a :class:`ViewInfo`: its *root* (the first tensor
of the chain that is not itself a view) and the view operators that lead from
the root to it, which can be replayed on any tensor of the root's shape. The
root keeps weak references to its views.

A recorded in-place write through a view rebases the root's history, as
torch does: the root's new ``grad_fn`` is a :class:`CopySlices` node (the
root's old value outside the view's region, the in-place result inside it),
and every live view of the root gets a new ``grad_fn``, its operators replayed
on the root's new history (torch regenerates them as ``AsStridedBackward0``).
A recorded write to a root that has views regenerates them the same way.
Torch's errors are kept: a view of a leaf that requires grad, or a view made
under ``no_grad`` of a tensor in a graph, cannot be written in place with grad
mode on. An expanded view (elements sharing memory; NumPy's array is read-only)
is written as torch writes it (:func:`writable`): a part of it whose elements
each have their own memory (``x.expand(3, 4)[0, 1] = 5.``), or all of it by a
fill (``fill_`` of a number, ``zero_``: one value for every element) or an
``index_put_`` (deprecated by torch: :func:`check_expanded_index_put`), the
write reaching every element over that memory; other writes raise torch's
error, and a recorded write into elements sharing memory raises it when the
backward reaches it.
An in-place write whose tensor operand shares memory with the written tensor is
refused as torch refuses it (:func:`check_operand_overlap`).
An output of an operator returning several views (``split``, ``chunk``, ``unbind``),
and any view of one, is never written in place while recording, and after a
recorded write to its root its history raises (torch's multi-output views).
"""
from __future__ import annotations

import warnings
import weakref
from typing import Any, NamedTuple, Sequence

import numpy as np

from reference_engine.graph import Node
from reference_engine.grad_mode import grad_mode, set_grad_enabled
from reference_engine.tensor import Tensor

VIEW_OF_LEAF_MESSAGE = "a view of a leaf Variable that requires grad is being used in an in-place operation."
NO_GRAD_VIEW_MESSAGE = (
    "A view was created in no_grad mode and {what}. Given that this use case is ambiguous and "
    "error-prone, it is forbidden. You can clarify your code by moving both the view and the inplace "
    "either both inside the no_grad block (if you don't want the inplace to be tracked) or both outside "
    "(if you want the inplace to be tracked).")
MULTI_OUTPUT_MESSAGE = (
    "{what}. This view is the output of a function that returns multiple views. Such functions do not "
    "allow the output views to be modified inplace. You should replace the inplace operation by an "
    "out-of-place one.")
OVERLAP_MESSAGE = (
    "unsupported operation: more than one element of the written-to tensor refers to a single memory "
    "location. Please clone() the tensor before performing the operation.")
EXPANDED_INDEX_PUT_WARNING = (
    "Use of index_put_ on expanded tensors is deprecated. Please clone() the tensor before performing this "
    "operation. This also applies to advanced indexing e.g. tensor[indices] = tensor")
EXPANDED_ORDER_MESSAGE = (
    "index_put_ into an expanded tensor writes different values to elements that refer to a single memory "
    "location: torch's result depends on the order its kernel visits them, which the reference engine does "
    "not reproduce. Please clone() the tensor before performing the operation.")
OPERAND_OVERLAP_MESSAGE = (
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single "
    "memory location. Please clone() the tensor before performing the operation.")
ORDER_DEPENDENT_MESSAGE = (
    "{what}: some elements of the input tensor and the written-to tensor refer to a single memory location "
    "at different positions of strided views; torch does not check such views and its result depends on the "
    "order its kernel visits the elements, which the reference engine does not reproduce. Please clone() the "
    "input tensor before performing the operation.")


class ViewStep(NamedTuple):
    """One view operator of a chain."""

    #: the :class:`~reference_engine.overload.Overload` (a module above this one): its ``run``
    #: replays the step, recorded when grad mode is on
    overload: Any
    arguments: tuple        # the schema's arguments after the tensor


class ViewInfo:
    """What makes a tensor a view: its root base, the operators from it, whether it was
    made with grad mode on (``grad_mode``; set after the fact for a recorded view op, whose
    forward ran below autograd) and whether a step returned several views (``multi_output``:
    made with grad mode on, it is never written in place while recording, and ``steps`` is
    never replayed)."""

    __slots__ = ("base", "steps", "grad_mode", "multi_output")

    def __init__(self, base: Tensor, steps: tuple[ViewStep, ...], grad_mode: bool,
                 multi_output: bool = False) -> None:
        self.base = base
        self.steps = steps
        self.grad_mode = grad_mode
        self.multi_output = multi_output


def make_view(result: Tensor, source: Tensor, overload: Any, arguments: Sequence[Any],
              multi_output: bool = False) -> None:
    """Mark ``result`` (an array over ``source``'s memory) as a view of ``source``'s root
    (``multi_output``: one of several views the operator returned).

    A root gets both ``_view`` (None) and ``_views`` set, a view ``_view``, so that reading
    them here never raises (a missing slot costs an exception): this runs on every view op."""
    counter = source._version
    if counter is None:         # never viewed, saved or written: not a view, no views yet
        counter = source._version = [0, 0]
        parent = None
        source._view = None
        views = source._views = []
    else:
        parent = getattr(source, "_view", None)
        if parent is None:
            views = getattr(source, "_views", None)
            if views is None:
                source._view = None
                views = source._views = []
        else:
            views = parent.base._views
    result._version = counter
    step = ViewStep(overload, tuple(arguments))
    if parent is None:
        result._view = ViewInfo(source, (step,), grad_mode.enabled, multi_output)
    else:
        result._view = ViewInfo(parent.base, parent.steps + (step,), grad_mode.enabled,
                                multi_output or parent.multi_output)
    if len(views) >= _PRUNE_AT and not len(views) % _PRUNE_AT:      # views made and dropped in a loop
        views[:] = [ref for ref in views if ref() is not None]
    views.append(weakref.ref(result))


_PRUNE_AT = 64


def mark_recorded(out: Any) -> Any:
    """A view op's output whose node was just recorded: made in grad mode (its forward ran
    below autograd, where :func:`make_view` saw grad mode off)."""
    if out._version is not None:
        info = getattr(out, "_view", None)
        if info is not None:
            info.grad_mode = True
    return out


def replay(steps: Sequence[ViewStep], tensor: Tensor) -> Tensor:
    """The view operators of ``steps`` applied to ``tensor`` (recorded when grad mode is on)."""
    for overload, arguments in steps:
        tensor = overload.run([tensor, *arguments])
    return tensor


def check_view_write(view: Tensor, info: ViewInfo) -> None:
    """Torch's refusals of a recorded in-place write through ``view``."""
    if info.multi_output and info.grad_mode:      # made under no_grad: the plain no_grad refusal below
        if view._grad_fn is None:
            what = "A view was created in no_grad mode and is being modified inplace with grad mode enabled"
        else:
            what = f"Output {view._output_nr} of {_short_name(view._grad_fn)} is a view and is being modified inplace"
        raise RuntimeError(MULTI_OUTPUT_MESSAGE.format(what=what))
    if not info.grad_mode:
        raise RuntimeError(NO_GRAD_VIEW_MESSAGE.format(what="is being modified inplace with grad mode enabled"))
    if info.base._grad_fn is None and info.base._requires_grad:
        raise RuntimeError(VIEW_OF_LEAF_MESSAGE)


def _edge(t: Tensor) -> tuple | None:
    if not t._requires_grad:
        return None
    return (t, 0) if t._grad_fn is None else (t._grad_fn, t._output_nr)


def _meta(t: Tensor) -> tuple | None:
    return (t._data.shape, t._data.dtype) if t._requires_grad else None


class CopySlices(Node):
    """The root's history after an in-place write through one of its views: the gradient
    of the root goes to the root's old value outside the view's region and, replayed
    through the view's operators, to the in-place result inside it (torch's CopySlices).
    A view whose elements share memory (``overlapping``: a fill of an expanded view) has
    no such region: the root's gradient raises torch's error, as torch's node does when it
    writes the view's gradient into the root's."""

    __slots__ = ("steps", "overlapping")

    def __init__(self, base: Tensor, result: Tensor, steps: tuple[ViewStep, ...], overlapping: bool) -> None:
        super().__init__((_edge(base), _edge(result)), (_meta(base), _meta(result)), 1)
        self.steps = steps
        self.overlapping = overlapping

    def apply(self, grads: list, create_graph: bool) -> Sequence[Tensor | None]:
        grad = grads[0]
        base_grad = view_grad = None
        if self.edge_targets[0] is not None:
            if self.overlapping:
                raise RuntimeError(OVERLAP_MESSAGE)
            base_grad = grad * Tensor._wrap(self._outside_region(grad._data.shape, self.input_meta[0][1]))
        if self.edge_targets[1] is not None:
            view_grad = replay(self.steps, grad)
        return base_grad, view_grad

    def _outside_region(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Ones, with zeros on the elements the view covers (found by replaying the view's
        operators on the elements' positions)."""
        positions = Tensor._wrap(np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape))
        with set_grad_enabled(False):
            covered = replay(self.steps, positions)._data
        mask = np.ones(positions._data.size, dtype=dtype)
        mask[covered.ravel()] = 0
        return mask.reshape(shape)


class ViewOfNoGradViewBackward(Node):
    """``grad_fn`` of a view made under ``no_grad`` whose root was then written in place with
    grad mode on: torch refuses to use it; reaching it raises torch's message."""

    __slots__ = ()
    always_needed = True

    def __init__(self) -> None:
        super().__init__((), (), 1)

    def apply(self, grads: list, create_graph: bool) -> Sequence[Tensor | None]:
        raise RuntimeError(NO_GRAD_VIEW_MESSAGE.format(
            what="its base or another view of its base has been modified inplace with grad mode enabled"))


def _short_name(node: Node) -> str:
    """A node's name as torch's view messages give it (``SplitTensorBackward0`` -> ``SplitTensor``)."""
    name = node.name()
    return name[:name.rfind("Backward")] if "Backward" in name else name


class MultiOutputViewBackward(Node):
    """``grad_fn`` of a view among several views an operator returned, after its root was
    written in place with grad mode on: torch refuses to use it; reaching it raises torch's message."""

    __slots__ = ("what",)
    always_needed = True

    def __init__(self, what: str) -> None:
        super().__init__((), (), 1)
        self.what = what

    def apply(self, grads: list, create_graph: bool) -> Sequence[Tensor | None]:
        raise RuntimeError(MULTI_OUTPUT_MESSAGE.format(what=self.what))


def rebase(view: Tensor, info: ViewInfo, result: Tensor) -> None:
    """After a recorded in-place write of ``result`` into ``view``: the root's history becomes
    a :class:`CopySlices` node and its views' histories follow."""
    root = info.base
    node = CopySlices(root, result, info.steps, overlapping(view._data))
    root._grad_fn, root._output_nr, root._requires_grad = node, 0, True
    regenerate_views(root)


def regenerate_views(root: Tensor) -> None:
    """Give every live view of ``root`` a history over the root's current one."""
    refs = getattr(root, "_views", None)
    if not refs:
        return
    alias = Tensor._wrap(root._data)        # the root's value and history, without its view list
    alias._version = root._counter()
    alias._grad_fn, alias._output_nr, alias._requires_grad = root._grad_fn, root._output_nr, root._requires_grad
    live = []
    with set_grad_enabled(True):
        for ref in refs:
            view = ref()
            if view is None:
                continue
            live.append(ref)
            if not view._data.dtype.kind == "f":
                continue
            info = view._view
            if info.multi_output and info.grad_mode:
                if type(view._grad_fn) is MultiOutputViewBackward:     # refused at an earlier write
                    continue
                indirect = "its base or another view of its base has been modified inplace"
                if view._grad_fn is not None:
                    what = f"Output {view._output_nr} of {_short_name(view._grad_fn)} is a view and {indirect}"
                else:
                    what = f"A view was created in no_grad mode and {indirect} with grad mode enabled"
                view._grad_fn, view._output_nr, view._requires_grad = MultiOutputViewBackward(what), 0, True
                continue
            if not info.grad_mode:
                view._grad_fn, view._output_nr, view._requires_grad = ViewOfNoGradViewBackward(), 0, True
                continue
            fresh = replay(info.steps, alias)
            view._grad_fn, view._output_nr, view._requires_grad = fresh._grad_fn, fresh._output_nr, True
    refs[:] = live


def overlapping(array: np.ndarray) -> bool:
    """Whether several elements of ``array`` share memory (an expanded view): torch's
    ``has_internal_overlap``, a stride of 0 on a dimension of more than one element."""
    return any(s == 0 and n > 1 for s, n in zip(array.strides, array.shape))


def writable(t: Tensor, what: str, region: np.ndarray | None = None, shared: bool = False) -> np.ndarray:
    """``t``'s array, writable, to write ``region`` of it (a view of it; all of it when None) in
    place where ``t._data`` is read-only: NumPy's expanded arrays are, torch's are not. Torch
    refuses a write into a region whose elements share memory (:data:`OVERLAP_MESSAGE`) unless
    the operator writes ``shared`` memory (``fill_`` of a number, ``zero_``: one value for every
    element; ``index_put_``, deprecated: :func:`check_expanded_index_put`); it writes any other,
    through the memory the view shares with its root. Memory read-only otherwise (a tensor that
    is not a view, or a view of a read-only array) is refused with the engine's message."""
    if not shared and overlapping(t._data if region is None else region):
        raise RuntimeError(OVERLAP_MESSAGE)
    if getattr(t, "_view", None) is not None:
        alias = t._data.view()
        try:
            alias.setflags(write=True)      # NumPy allows it when the memory's owner is writable
            return alias
        except ValueError:
            pass
    raise RuntimeError(f"{what}: the tensor's memory is read-only; clone() it before writing to it")


def check_expanded_index_put(target: np.ndarray, key: Any, values: Any, stacklevel: int) -> None:
    """Torch's warning for ``target[key] = values`` (``index_put_``) where ``target``'s elements
    share memory (torch deprecates it, then writes in its kernel's order), and the engine's
    refusal where elements sharing memory would get different values (that order decides).
    ``stacklevel``: the warning's, the user's line (the frames between differ by caller)."""
    warnings.warn(EXPANDED_INDEX_PUT_WARNING, UserWarning, stacklevel=stacklevel + 1)
    addresses = _addresses(target)[key]
    try:
        written = np.ascontiguousarray(np.broadcast_to(np.asarray(values, target.dtype), addresses.shape))
    except ValueError:
        return          # values of a shape that does not fit: the write's own error follows
    order = np.argsort(addresses, axis=None, kind="stable")
    addresses = addresses.ravel()[order]
    written = written.view(f"V{target.itemsize}").ravel()[order]      # compared as bytes: NaN, -0.0
    if np.any((addresses[1:] == addresses[:-1]) & (written[1:] != written[:-1])):
        raise RuntimeError(EXPANDED_ORDER_MESSAGE)


def check_operand_overlap(target: np.ndarray, operands: Sequence[Any], what: str, same_allowed: bool = True) -> None:
    """Torch's refusal of an in-place write into ``target`` that reads a tensor operand sharing
    memory with it: in part (``x[1:].add_(x[:-1])``, ``x.add_(x.t())``, ``x.add_(x[0])``), or at
    all when not ``same_allowed`` (``index_put_``); the same elements with the same strides
    (``x.add_(x)``) are allowed. Torch leaves views that are not dense (strided: ``x[::2]``,
    ``x[:, 1:]``, a diagonal, an expanded operand) unchecked and then computes in its kernel's
    order; the engine computes the operands before writing, so it allows them when no element
    is read at a position other than the one it is written at (then both orders agree), and
    refuses the others (:data:`ORDER_DEPENDENT_MESSAGE`)."""
    for operand in operands:
        if not isinstance(operand, Tensor):
            continue
        data = operand._data
        if data.base is None and target.base is None and data is not target:
            continue        # two arrays that own their memory (the update ``p -= p.grad * lr``): apart
        if not np.may_share_memory(target, data):
            continue
        status = _overlap_status(target, data)
        if status == "partial" or status == "same" and not same_allowed:
            raise RuntimeError(OPERAND_OVERLAP_MESSAGE)
        if status == "not dense" and (_read_elsewhere(target, data) if same_allowed
                                      else np.shares_memory(target, data)):
            raise RuntimeError(ORDER_DEPENDENT_MESSAGE.format(what=what))


def _overlap_status(a: np.ndarray, b: np.ndarray) -> str:
    """How two arrays that may share memory overlap, as torch classifies two tensors: ``'same'``
    (the same elements, shape and strides), ``'partial'`` (dense arrays whose byte spans meet
    otherwise), ``'apart'`` or ``'not dense'`` (a layout torch does not analyse). Strides of
    dimensions of size 1 are not compared: NumPy and torch give them different values."""
    if a is b:
        return "same"
    if not a.size or not b.size:
        return "apart"
    if not (_dense(a) and _dense(b)):
        return "not dense"
    span_a, span_b = _span(a), _span(b)
    if span_a == span_b:
        same = a.shape == b.shape and all(n == 1 or x == y for n, x, y in zip(a.shape, a.strides, b.strides))
        return "same" if same else "partial"
    return "partial" if span_a[0] < span_b[1] and span_b[0] < span_a[1] else "apart"


def _dense(a: np.ndarray) -> bool:
    """Torch's "non-overlapping and dense": the elements fill their span, in some order of the dims."""
    expected = a.itemsize
    for stride, size in sorted((s, n) for s, n in zip(a.strides, a.shape) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _span(a: np.ndarray) -> tuple[int, int]:
    """The bytes a dense array's elements fill (its strides are positive)."""
    start = _start(a)
    return start, start + a.size * a.itemsize


def _start(a: np.ndarray) -> int:
    """The address of ``a``'s first element."""
    return a.__array_interface__["data"][0]


def _read_elsewhere(target: np.ndarray, operand: np.ndarray) -> bool:
    """Whether an element of ``target`` is read, through ``operand`` broadcast to its shape, at
    another position than its own (one element's address per position, both arrays of one dtype)."""
    if target.itemsize != operand.itemsize:
        return np.shares_memory(target, operand)
    try:
        shape = np.broadcast_shapes(target.shape, operand.shape)
    except ValueError:
        return False            # the operator's own shape error follows
    if shape != target.shape:
        return False
    written = _addresses(target)
    read = np.broadcast_to(_addresses(operand), shape)
    moved = read != written
    return bool(np.isin(read[moved], written).any())


def _addresses(a: np.ndarray) -> np.ndarray:
    """The address of each element of ``a``."""
    out = np.asarray(_start(a), dtype=np.intp)
    for axis, (size, stride) in enumerate(zip(a.shape, a.strides)):
        out = out + (np.arange(size, dtype=np.intp) * stride).reshape((size,) + (1,) * (a.ndim - axis - 1))
    return out
