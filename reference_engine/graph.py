"""Graph nodes and saved tensors.

A :class:`Node` is one recorded operation. ``next_edges`` has one entry per
differentiable input: ``None`` (no gradient wanted), ``(node, output_nr)``
for a non-leaf input, or ``(tensor, 0)`` for a leaf that requires grad (its
gradient is accumulated into ``tensor.grad``; there is no separate
AccumulateGrad node, so a leaf never points back into the graph). A node
stores its edges as two tuples, ``edge_targets`` (``None``, the node or the
leaf) and ``edge_output_nrs`` (shared between nodes with the same numbers):
no object per edge for the cycle collector to track while the graph is alive.

Saved tensors follow torch's ``SavedVariable``: an output captured by its own
node's backward is stored as data plus output number, never as the tensor
(tensor -> node -> closure -> tensor would be a reference cycle), and is
materialised with ``grad_fn`` = that node when the backward runs. An in-place
change after the save is reported: :class:`SavedTensor` records the version;
formula nodes compare write ticks with their ``seq`` (see formula_node).
"""
from __future__ import annotations

from typing import Sequence

from reference_engine.tensor import Tensor, ticks

RELEASED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed): {node} has released its saved values. Saved intermediate "
    "values of the graph are freed when you call .backward() or grad(). Specify retain_graph=True "
    "if you need to backward through the graph a second time or access saved tensors after "
    "calling backward.")


class Node:
    """A recorded operation: maps gradients of its outputs to gradients of its inputs."""

    __slots__ = ("edge_targets", "edge_output_nrs", "input_meta", "num_outputs", "seq", "__weakref__")

    #: Always executed by ``grad(...)`` even when it leads to no requested input
    #: (the guard nodes must raise rather than be pruned away).
    always_needed = False

    def __init__(self, next_edges: list, input_meta: list, num_outputs: int) -> None:
        self.edge_targets = tuple(None if edge is None else edge[0] for edge in next_edges)
        self.edge_output_nrs = tuple(0 if edge is None else edge[1] for edge in next_edges)
        self.input_meta = input_meta
        self.num_outputs = num_outputs
        self.seq = next(ticks)      # creation order: the engine runs nodes by decreasing seq

    def name(self) -> str:
        """The node's name as torch prints it (``grad_fn.name()``)."""
        return type(self).__name__

    def apply(self, grads: list, create_graph: bool) -> Sequence[Tensor | None]:
        """One gradient (or None) per entry of ``next_edges``; the engine checks each
        against ``input_meta`` (:func:`reference_engine.engine.conform_gradient`)."""
        raise NotImplementedError

    def release(self) -> None:
        """Free saved values after a backward without ``retain_graph``."""

    @property
    def next_edges(self) -> tuple:
        """One entry per differentiable input: ``(node or leaf tensor, output_nr)``, or None."""
        return tuple(None if target is None else (target, nr)
                     for target, nr in zip(self.edge_targets, self.edge_output_nrs))

    @property
    def next_functions(self) -> tuple:
        """torch's view of ``next_edges``: ``(node, output_nr)`` per differentiable input, an
        :class:`AccumulateGrad` for a leaf that requires grad, ``(None, 0)`` for an input
        that gets no gradient."""
        return tuple((None, 0) if edge is None else (AccumulateGrad(edge[0]), 0) if type(edge[0]) is Tensor
                     else edge for edge in self.next_edges)

    def __repr__(self) -> str:
        return f"<{self.name()}>"


class AccumulateGrad:
    """What ``next_functions`` shows for a leaf: ``variable`` is the leaf tensor (the engine
    accumulates into ``.grad`` without such a node; two of the same leaf compare equal)."""

    __slots__ = ("variable",)
    next_functions: tuple = ()

    def __init__(self, variable: Tensor) -> None:
        self.variable = variable

    def name(self) -> str:
        """"torch::autograd::AccumulateGrad", the name torch gives a leaf's gradient sink."""
        return "torch::autograd::AccumulateGrad"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AccumulateGrad) and other.variable is self.variable

    def __hash__(self) -> int:
        return id(self.variable)

    def __repr__(self) -> str:
        return "<AccumulateGrad>"


class NotImplementedBackward(Node):
    """``grad_fn`` of an operator torch declares no derivative for (``floor_divide``): reached
    by a backward, it raises torch's error; a backward that does not need it runs."""

    __slots__ = ("operator",)

    def __init__(self, operator: str, inputs: list[Tensor]) -> None:
        super().__init__([(t, 0) if t._grad_fn is None else (t._grad_fn, t._output_nr) for t in inputs],
                         [(t._data.shape, t._data.dtype) for t in inputs], 1)
        self.operator = operator

    def name(self) -> str:
        return "NotImplemented"

    def apply(self, grads: list, create_graph: bool) -> Sequence[Tensor | None]:
        raise RuntimeError(f"derivative for aten::{self.operator} is not implemented")


class SavedTensor:
    """A tensor captured by a backward, with the version it had when saved.

    ``role`` is ``"input"``, ``"output"`` (stored as data, no reference to the
    tensor) or ``"intermediate"`` (neither: first-order backward works, a
    double backward that needs a gradient through it raises).
    """

    __slots__ = ("role", "name", "tensor", "data", "counter", "version", "output_nr")

    def __init__(self, role: str, name: str, tensor: Tensor, output_nr: int = 0) -> None:
        self.role = role
        self.name = name
        self.counter = tensor._counter()
        self.version = self.counter[0]
        self.output_nr = output_nr
        if role == "output":
            self.tensor = None
            self.data = tensor._data
        else:
            self.tensor = tensor
            self.data = None

    def unpack(self, node: Node, create_graph: bool) -> Tensor:
        """The tensor for the backward to use; checks the version first."""
        if self.counter[0] != self.version:
            shape = list(self.data.shape if self.tensor is None else self.tensor.shape)
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: the tensor of shape {shape} saved as '{self.name}' by "
                f"{node.name()} is at version {self.counter[0]}; expected version "
                f"{self.version} instead.")
        if self.role == "input":
            return self.tensor
        if self.role == "output":
            t = Tensor._wrap(self.data)       # a fresh tensor for the output, grad_fn = its node
            t._version = self.counter
            t._grad_fn = node
            t._output_nr = self.output_nr
            t._requires_grad = True
            return t
        if create_graph and self.tensor.is_floating_point():
            return poisoned_alias(self.tensor, node, self.name)
        return self.tensor


class CapturedIntermediateBackward(Node):
    """Source node of a captured intermediate during double backward: raises when reached.

    The intermediate was computed below autograd, so it has no path to the
    inputs; a gradient reaching it would be silently dropped. This node turns
    that into an error (the runtime guard of pytorch/pytorch#76185).
    """

    __slots__ = ("owner", "capture_name")
    always_needed = True

    def __init__(self, owner: str, capture_name: str) -> None:
        super().__init__([], [], 1)
        self.owner = owner
        self.capture_name = capture_name

    def apply(self, grads: list, create_graph: bool) -> Sequence[Tensor | None]:
        raise RuntimeError(
            f"double backward through {self.owner} needs the gradient of '{self.capture_name}', "
            f"a tensor its backward captured that is neither an input nor an output of the "
            f"forward; it has no path to the inputs, so the result would be silently wrong. "
            f"Capture inputs/outputs only and recompute '{self.capture_name}' inside the backward "
            f"(lint code DB100), or mark the backward once_differentiable.")


def poisoned_alias(tensor: Tensor, node: Node, capture_name: str) -> Tensor:
    """``tensor``'s data as a graph tensor whose gradient source raises (see above)."""
    t = Tensor._wrap(tensor._data)
    t._version = tensor._counter()
    t._grad_fn = CapturedIntermediateBackward(node.name(), capture_name)
    t._requires_grad = True
    return t
