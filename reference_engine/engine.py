"""Executing the graph: ``backward()`` and ``grad()``.

The graph reachable from the roots is ordered topologically without
recursion (Kahn's algorithm over dependency counts), so a chain of 100,000
nodes needs no deep Python stack. Each node runs once, after every node that
feeds it a gradient; gradients arriving at the same input are summed. With
``inputs`` given (``grad``), nodes that lead to none of them are skipped and
the gradients of the inputs are returned instead of accumulated in ``.grad``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from reference_engine.graph import Node
from reference_engine.grad_mode import grad_mode
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


def _count_dependencies(roots: list[Node]) -> dict[Node, int]:
    """Every node reachable from ``roots`` with the number of edges into it."""
    dependencies: dict[Node, int] = dict.fromkeys(roots, 0)
    stack = list(dependencies)
    while stack:                         # depth first, no recursion
        for edge in stack.pop().next_edges:
            if edge is None or type(edge[0]) is Tensor:
                continue
            target = edge[0]
            count = dependencies.get(target)
            if count is None:
                dependencies[target] = 1
                stack.append(target)
            else:
                dependencies[target] = count + 1
    return dependencies


def _topological_order(roots: list[Node], dependencies: dict[Node, int]) -> list[Node]:
    """The nodes in the order the engine runs them (Kahn's algorithm; ``dependencies`` is
    consumed). Only ``grad(inputs=...)`` needs it ahead of time, to prune nodes."""
    ready = [n for n in roots if dependencies[n] == 0]
    order = []
    while ready:
        node = ready.pop()
        order.append(node)
        for edge in node.next_edges:
            if edge is None or type(edge[0]) is Tensor:
                continue
            target = edge[0]
            remaining = dependencies[target] - 1
            dependencies[target] = remaining
            if remaining == 0:
                ready.append(target)
    return order


def _needed(order: list[Node], leaf_inputs: set[int], node_inputs: set[Node]) -> set[Node]:
    """The nodes whose backward can send a gradient to one of the requested inputs."""
    needed: set[Node] = set()
    for node in reversed(order):
        if node.always_needed:
            needed.add(node)
            continue
        for edge in node.next_edges:
            if edge is None:
                continue
            target = edge[0]
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
    capture = inputs is not None
    captured: list = []
    leaf_slot: dict[int, int] = {}
    node_slot: dict[tuple[Node, int], int] = {}
    if capture:
        for i, t in enumerate(inputs):
            if not isinstance(t, Tensor) or not t._requires_grad:
                raise RuntimeError(f"input {i} of grad() does not require grad")
            if t._grad_fn is None:
                leaf_slot[id(t)] = i
            else:
                node_slot[(t._grad_fn, t._output_nr)] = i
        captured = [None] * len(inputs)

    buffers: dict[Node, list] = {}
    root_nodes = []
    for root, grad in zip(roots, root_grads):
        fn = root._grad_fn
        if fn is None:
            if capture:
                slot = leaf_slot.get(id(root))
                if slot is not None:
                    captured[slot] = grad if captured[slot] is None else captured[slot] + grad
            else:
                _accumulate_leaf(root, grad, create_graph)
            continue
        buffer = buffers.get(fn)
        if buffer is None:
            buffer = buffers[fn] = [None] * fn.num_outputs
            root_nodes.append(fn)
        nr = root._output_nr
        buffer[nr] = grad if buffer[nr] is None else buffer[nr] + grad

    dependencies = _count_dependencies(root_nodes)
    capture_nodes = {n for n, _ in node_slot}
    needed = None
    if capture:
        needed = _needed(_topological_order(root_nodes, dict(dependencies)), set(leaf_slot), capture_nodes)

    previous_mode = grad_mode.enabled
    grad_mode.enabled = create_graph
    ready = [n for n in root_nodes if dependencies[n] == 0]
    try:
        while ready:    # Kahn's algorithm, run as it goes: a node is ready once all its senders ran
            node = ready.pop()
            buffer = buffers.pop(node, None)
            input_grads: Sequence | None = None
            if buffer is not None:
                if capture and node in capture_nodes:
                    for nr, grad in enumerate(buffer):
                        slot = node_slot.get((node, nr))
                        if slot is not None and grad is not None:
                            captured[slot] = grad if captured[slot] is None else captured[slot] + grad
                if needed is None or node in needed:
                    if len(buffer) == 1:
                        if buffer[0] is not None:
                            input_grads = node.apply(buffer, create_graph)
                    else:
                        for grad in buffer:
                            if grad is not None:    # else no gradient arrived: backward not called
                                input_grads = node.apply(buffer, create_graph)
                                break
            edges = node.next_edges
            if input_grads is None:
                input_grads = [None] * len(edges)
            for edge, grad in zip(edges, input_grads, strict=True):     # apply: one per edge
                if edge is None:
                    continue
                target, nr = edge
                if type(target) is Tensor:
                    if grad is None:
                        continue
                    if capture:
                        slot = leaf_slot.get(id(target))
                        if slot is not None:
                            captured[slot] = grad if captured[slot] is None else captured[slot] + grad
                    else:
                        _accumulate_leaf(target, grad, create_graph)
                    continue
                if grad is not None:
                    target_buffer = buffers.get(target)
                    if target_buffer is None:
                        if target.num_outputs == 1:
                            buffers[target] = [grad]
                        else:
                            target_buffer = buffers[target] = [None] * target.num_outputs
                            target_buffer[nr] = grad
                    else:
                        previous = target_buffer[nr]
                        target_buffer[nr] = grad if previous is None else previous + grad
                remaining = dependencies[target] - 1
                dependencies[target] = remaining
                if remaining == 0:
                    ready.append(target)
    finally:
        grad_mode.enabled = previous_mode
    if not retain_graph:      # only after success: a failed backward leaves the graph usable
        for node in dependencies:       # the reachable nodes, all visited by the loop above
            if needed is None or node in needed:
                node.release()

    if not capture:
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
