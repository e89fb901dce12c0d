"""Executing the graph: ``backward()`` and ``grad()``.

Nodes run newest first: every node has a creation number (``seq``) above
those of its inputs, so the pending node with the highest number has
received every gradient it will get (each node that can send it one is
newer, and so already ran). A heap of pending nodes is the whole schedule
(a node that is the only pending one skips it):
no dependency counting, no recursion (a chain of 100,000 nodes needs no deep
Python stack). Gradients arriving at the same input are summed. With
``inputs`` given (``grad``), nodes that lead to none of them are skipped and
the gradients of the inputs are returned instead of accumulated in ``.grad``.
"""
from __future__ import annotations

from heapq import heappop, heappush
from typing import Any, Sequence

import numpy as np

from reference_engine.dispatch import dispatcher
from reference_engine.dtypes import from_numpy
from reference_engine.graph import Node
from reference_engine.grad_mode import check_thread, grad_mode
from reference_engine.tensor import Tensor


def _as_list(tensors: Tensor | Sequence[Tensor] | None) -> list:
    if tensors is None:
        return []
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _root_gradients(roots: list[Tensor], grad_outputs: list) -> list[Tensor | None]:
    if grad_outputs and len(grad_outputs) != len(roots):
        raise RuntimeError(f"grad_outputs has {len(grad_outputs)} entries but there are {len(roots)} outputs")
    grads = []
    for i, root in enumerate(roots):
        if not isinstance(root, Tensor):
            raise TypeError(f"element {i} of the outputs is a {type(root).__name__}, not a Tensor")
        if not root._requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        grad = grad_outputs[i] if grad_outputs else None
        if grad is None:
            if root._data.size != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs "
                                   f"(element {i} has shape {list(root.shape)})")
            grad = Tensor._wrap(np.ones(root._data.shape, root._data.dtype))
        elif not isinstance(grad, Tensor):
            raise TypeError(f"grad_outputs[{i}] must be a Tensor or None, got {type(grad).__name__}")
        elif grad._data.shape != root._data.shape:
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {list(grad.shape)} "
                               f"and output[{i}] has a shape of {list(root.shape)}")
        grads.append(grad)
    return grads


def _creation_order(roots: list[Node]) -> list[Node]:
    """Every node reachable from ``roots``, oldest first (a node's inputs come before it)."""
    seen = set(roots)
    stack = list(roots)
    while stack:                         # depth first, no recursion
        for target in stack.pop().edge_targets:
            if target is not None and type(target) is not Tensor and target not in seen:
                seen.add(target)
                stack.append(target)
    return sorted(seen, key=lambda node: node.seq)


def _needed(oldest_first: list[Node], leaf_inputs: set[int], node_inputs: set[Node]) -> set[Node]:
    """The nodes whose backward can send a gradient to one of the requested inputs."""
    needed: set[Node] = set()
    for node in oldest_first:            # every node after the nodes it sends gradients to
        if node.always_needed:
            needed.add(node)
            continue
        for target in node.edge_targets:
            if target is None:
                continue
            if id(target) in leaf_inputs if type(target) is Tensor else (target in needed or target in node_inputs):
                needed.add(node)
                break
    return needed


def _accumulate_leaf(leaf: Tensor, grad: Tensor, create_graph: bool) -> None:
    if not create_graph:
        grad = Tensor._wrap(grad._data.copy())    # .grad never aliases another tensor's data
    leaf.grad = grad if leaf.grad is None else leaf.grad + grad


def run_backward(outputs: Tensor | Sequence[Tensor], grad_outputs: Tensor | Sequence | None = None,
                 retain_graph: bool | None = None, create_graph: bool = False,
                 inputs: Sequence[Tensor] | None = None, allow_unused: bool = False) -> list | None:
    """Propagate gradients from ``outputs``; accumulate into leaves' ``.grad``, or
    return the gradients of ``inputs`` when given."""
    roots = _as_list(outputs)
    root_grads = _root_gradients(roots, _as_list(grad_outputs))
    if retain_graph is None:
        retain_graph = create_graph
    captured: list | None = None        # the gradients grad() returns, one per input
    leaf_slot: dict[int, int] = {}
    node_slot: dict[tuple[Node, int], int] = {}
    if inputs is not None:
        for i, t in enumerate(inputs):
            if not isinstance(t, Tensor) or not t._requires_grad:
                raise RuntimeError(f"input {i} of grad() does not require grad")
            if t._grad_fn is None:
                leaf_slot[id(t)] = i
            else:
                node_slot[(t._grad_fn, t._output_nr)] = i
        captured = [None] * len(inputs)

    def capture(slot: int | None, grad: Tensor) -> None:
        if slot is not None:
            captured[slot] = grad if captured[slot] is None else captured[slot] + grad

    # Leaf gradients are summed here and written to ``.grad`` only once the whole backward
    # succeeded: after a failure (a backward that raised) no leaf has been touched, and the
    # graph is not released, so a retry gives the right gradients, never double-counted ones.
    leaf_grads: dict[int, tuple[Tensor, Tensor]] = {}

    def to_leaf(leaf: Tensor, grad: Tensor) -> None:
        if captured is None:
            previous = leaf_grads.get(id(leaf))
            leaf_grads[id(leaf)] = (leaf, grad if previous is None else previous[1] + grad)
        else:
            capture(leaf_slot.get(id(leaf)), grad)

    buffers: dict[Node, list] = {}      # gradients of each pending node's outputs
    pending: list[tuple[int, Node]] = []    # heap of (-seq, node): newest first
    for root, grad in zip(roots, root_grads):
        fn = root._grad_fn
        if fn is None:
            to_leaf(root, grad)
            continue
        buffer = buffers.get(fn)
        if buffer is None:
            buffer = buffers[fn] = [None] * fn.num_outputs
            heappush(pending, (-fn.seq, fn))
        nr = root._output_nr
        buffer[nr] = grad if buffer[nr] is None else buffer[nr] + grad

    skipped: set[Node] = set()      # grad(): nodes that lead to none of the inputs
    watched: set[Node] = set()      # grad(): nodes skipped or whose output gradients are returned
    if captured is not None:
        capture_nodes = {node for node, _ in node_slot}
        reachable = _creation_order([node for _, node in pending])
        needed = _needed(reachable, set(leaf_slot), capture_nodes)
        skipped = {node for node in reachable if node not in needed}
        watched = skipped | capture_nodes

    visited = []
    check_thread()
    previous_mode = grad_mode.enabled
    grad_mode.enabled = create_graph
    try:
        # ``follow``: a node that became pending while no other was: it runs next without a trip
        # through the heap (a chain of single-input nodes never touches it); pushed to the heap
        # when another node becomes pending before it ran
        follow = None
        node = heappop(pending)[1] if pending else None
        while node is not None:
            visited.append(node)
            buffer = buffers.pop(node)
            if watched and node in watched:
                for nr, grad in enumerate(buffer):
                    if grad is not None:
                        capture(node_slot.get((node, nr)), grad)
                if node in skipped:
                    buffer = (None,)
            targets = node.edge_targets
            if buffer[0] is None and all(grad is None for grad in buffer):     # no gradient arrived:
                input_grads = (None,) * len(targets)                             # backward not called
            else:
                input_grads = node.apply(buffer, create_graph)      # one gradient (or None) per edge
                if len(input_grads) != len(targets):
                    raise RuntimeError(f"{node.name()} returned {len(input_grads)} gradients for its "
                                       f"{len(targets)} inputs")
            # the edges by index, not zip(targets, output_nrs, input_grads, input_meta): zip of
            # four tuples (the count is checked above) costs more than routing a gradient
            i = -1
            for target in targets:
                i += 1
                if target is None:
                    continue
                grad = input_grads[i]
                if grad is not None:
                    meta = node.input_meta[i]       # (shape, dtype), compared one by one: no tuple built
                    # (a dtype equal to the input's but another object takes conform_gradient's path)
                    if type(grad) is not Tensor or grad._data.shape != meta[0] or grad._data.dtype is not meta[1]:
                        grad = conform_gradient(node, input_grads, grad, meta)    # cast like torch, or raise
                if type(target) is Tensor:
                    if grad is not None:
                        to_leaf(target, grad)
                    continue
                target_buffer = buffers.get(target)
                if target_buffer is None:       # first edge into target: it becomes pending
                    if not pending and follow is None:
                        follow = target
                    else:
                        if follow is not None:
                            heappush(pending, (-follow.seq, follow))
                            follow = None
                        heappush(pending, (-target.seq, target))
                    if target.num_outputs == 1:
                        buffers[target] = [grad]
                        continue
                    target_buffer = buffers[target] = [None] * target.num_outputs
                if grad is not None:
                    nr = node.edge_output_nrs[i]
                    previous = target_buffer[nr]
                    target_buffer[nr] = grad if previous is None else previous + grad
            if follow is not None:
                node, follow = follow, None
            else:
                node = heappop(pending)[1] if pending else None
        for leaf, grad in leaf_grads.values():
            _accumulate_leaf(leaf, grad, create_graph)
    finally:
        grad_mode.enabled = previous_mode
    if not retain_graph:      # only after success: a failed backward leaves the graph usable
        # every reachable node ran through the loop above
        for node in [node for node in visited if node not in skipped] if skipped else visited:
            node.release()

    if captured is None:
        return None
    for i, grad in enumerate(captured):
        if grad is None and not allow_unused:
            raise RuntimeError(f"One of the differentiated Tensors (input {i}) appears to not have been "
                               f"used in the graph. Set allow_unused=True if this is the desired behavior.")
    return captured


def backward(tensors: Tensor | Sequence[Tensor], grad_tensors: Tensor | Sequence | None = None,
             retain_graph: bool | None = None, create_graph: bool = False) -> None:
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the leaves."""
    run_backward(tensors, grad_tensors, retain_graph, create_graph)


def grad(outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
         grad_outputs: Tensor | Sequence | None = None, retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool = False) -> tuple[Tensor | None, ...]:
    """The gradients of ``outputs`` with respect to ``inputs`` (``torch.autograd.grad``)."""
    input_list = _as_list(inputs)
    return tuple(run_backward(outputs, grad_outputs, retain_graph, create_graph, input_list, allow_unused))


def conform_gradient(node: Node, grads: Sequence[Any], grad: Any, meta: tuple) -> Tensor:
    """``grad`` (one of ``grads``; its input's ``(shape, dtype)`` is ``meta``, which it does
    not match) as the input's gradient, as torch's engine makes it: a gradient of a shape the
    input's expands to (a formula that leaves a broadcast unreduced) is summed to the input's
    shape, and a floating gradient of another floating dtype is cast to the input's (both
    recorded under ``create_graph``); anything else raises, naming the node and the input."""
    index = next(i for i, (g, m) in enumerate(zip(grads, node.input_meta)) if g is grad and m is meta)
    shape, dtype = meta
    if type(grad) is not Tensor:
        raise TypeError(f"Function {node.name()} returned an invalid gradient at index {index}: "
                        f"expected a Tensor or None, got {type(grad).__name__}")
    if grad._data.shape != shape:
        if not _expands_to(shape, grad._data.shape):
            raise RuntimeError(
                f"Function {node.name()} returned an invalid gradient at index {index} - got "
                f"{list(grad._data.shape)} but expected shape compatible with {list(shape)}")
        grad = _summed_to(grad, shape)
    if grad._data.dtype == dtype:
        return grad
    if grad._data.dtype.kind != "f" or dtype.kind != "f":
        raise RuntimeError(
            f"Function {node.name()} returned an invalid gradient at index {index} - expected "
            f"dtype {dtype} but got {grad._data.dtype}")
    return dispatcher.call("_to_copy", (grad,), {"dtype": from_numpy(dtype)})


def _expands_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether a tensor of ``shape`` broadcasts to ``target`` (torch's ``is_expandable_to``)."""
    if len(shape) > len(target):
        return False
    return all(n == m or n == 1 for n, m in zip(reversed(shape), reversed(target)))


def _summed_to(grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``grad`` summed over the dims a tensor of ``shape`` was broadcast along (torch's ``sum_to``)."""
    leading = grad._data.ndim - len(shape)
    dims = [*range(leading), *(leading + i for i, n in enumerate(shape) if n == 1 and grad._data.shape[leading + i] != 1)]
    if dims:
        grad = dispatcher.call("sum", (grad, dims), {"keepdim": True})
    return dispatcher.call("reshape", (grad, list(shape)), {})
