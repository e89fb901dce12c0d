"""The custom ``Function`` API (``torch.autograd.Function`` style).

``forward(ctx, *args)`` runs without recording; ``backward(ctx, *grads)``
returns one gradient per forward argument (None for non-tensors). Tensors
saved with ``ctx.save_for_backward`` and tensor attributes of ``ctx`` are
kept as :class:`~reference_engine.graph.SavedTensor` records: outputs as data
(no ctx -> output -> node -> ctx cycle), everything with its version, and a
tensor that is neither an input nor an output is poisoned for double backward.
"""
from __future__ import annotations

import functools
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from reference_engine.formula_node import save_captured, save_tensor
from reference_engine.graph import RELEASED_MESSAGE, Node
from reference_engine.grad_mode import grad_mode, no_grad
from reference_engine.tensor import Tensor


class FunctionCtx:
    """The ``ctx`` passed to ``forward`` and ``backward``."""

    def __init__(self) -> None:
        self._to_save: tuple = ()
        self._saved: list | None = None
        self._node: weakref.ref | None = None
        self._create_graph = False
        self._materialize_grads = True
        self._non_differentiable: set[int] = set()
        self.needs_input_grad: tuple[bool, ...] = ()

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Keep ``tensors`` (inputs or outputs of forward, or None) for the backward."""
        self._to_save = tensors

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        """The saved tensors, checked against in-place changes since they were saved."""
        node = self._node() if self._node is not None else None
        if self._saved is None or node is None:
            raise RuntimeError(RELEASED_MESSAGE.format(node="this Function's backward node"))
        return tuple(None if record is None else record.unpack(node, self._create_graph)
                     for record in self._saved)

    def set_materialize_grads(self, value: bool) -> None:
        """Whether None gradients reach backward as zeros (True, the default) or as None."""
        self._materialize_grads = value

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        """Outputs that get no gradient (like indices)."""
        self._non_differentiable.update(id(t) for t in tensors)


class FunctionBackward(Node):
    """The node of one ``Function.apply`` call."""

    __slots__ = ("function", "ctx", "tensor_positions", "n_args", "output_meta", "attributes")

    def __init__(self, function: type, ctx: FunctionCtx, next_edges: list, input_meta: list,
                 tensor_positions: tuple[int, ...], n_args: int, output_meta: list) -> None:
        super().__init__(next_edges, input_meta, len(output_meta))
        self.function = function
        self.ctx = ctx
        self.tensor_positions = tensor_positions
        self.n_args = n_args
        self.output_meta = output_meta
        self.attributes: list[tuple[str, Any]] = []

    def name(self) -> str:
        return f"{self.function.__name__}Backward"

    def apply(self, grads: list, create_graph: bool) -> Sequence[Tensor | None]:
        ctx = self.ctx
        if ctx is None:
            raise RuntimeError(RELEASED_MESSAGE.format(node=self.name()))
        if ctx._materialize_grads:
            grads = [Tensor._wrap(np.zeros(shape, dtype)) if g is None else g
                     for g, (shape, dtype) in zip(grads, self.output_meta)]
        ctx._create_graph = create_graph
        for key, record in self.attributes:
            setattr(ctx, key, record.unpack(self, create_graph))
        try:
            result = self.function.backward(ctx, *grads)
        finally:
            for key, record in self.attributes:
                setattr(ctx, key, record)
        result = result if isinstance(result, tuple) else (result,)
        if len(result) != self.n_args:
            raise RuntimeError(f"function {self.name()} returned an incorrect number of gradients "
                               f"(expected {self.n_args}, got {len(result)})")
        return [result[i] for i in self.tensor_positions]

    def release(self) -> None:
        if self.ctx is not None:
            self.ctx._saved = None
        self.ctx = None
        self.attributes = []


class Function:
    """Subclass with static ``forward(ctx, ...)`` and ``backward(ctx, ...)``; call ``apply``."""

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        """The forward computation a subclass defines; it saves what ``backward`` needs on ``ctx``."""
        raise NotImplementedError("a Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        """The gradients of the inputs of ``forward``, given those of its outputs; a subclass defines it."""
        raise NotImplementedError("a Function subclass must define backward(ctx, ...)")

    @classmethod
    def apply(cls, *args: Any) -> Any:
        """Run ``forward`` and, when an input requires grad, record a node for ``backward``."""
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        with no_grad():
            outputs = cls.forward(ctx, *args)
        if not (grad_mode.enabled and any(ctx.needs_input_grad)):
            return outputs
        single = isinstance(outputs, Tensor)
        outs = [outputs] if single else list(outputs)
        tensor_positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
        edges, meta, held = [], [], set()
        for i in tensor_positions:
            t = args[i]
            held.add(id(t))
            if t._requires_grad:
                fn = t._grad_fn
                edges.append((t, 0) if fn is None else (fn, t._output_nr))
                meta.append((t._data.shape, t._data.dtype))
            else:
                edges.append(None)
                meta.append(None)
        output_meta = [(o._data.shape, o._data.dtype) for o in outs if isinstance(o, Tensor)]
        node = FunctionBackward(cls, ctx, edges, meta, tensor_positions, len(args), output_meta)
        output_nr: dict[int, int] = {}
        nr = 0
        for i, out in enumerate(outs):
            if not isinstance(out, Tensor):
                continue
            non_differentiable = id(out) in ctx._non_differentiable
            if id(out) in held or out._requires_grad:
                out = outs[i] = out.detach()      # an input returned as is: a new tensor object
            if non_differentiable:
                held.add(id(out))
            elif out.is_floating_point():
                out._grad_fn, out._output_nr, out._requires_grad = node, nr, True
                output_nr[id(out)] = nr
            nr += 1
        ctx._saved = [None if t is None else save_tensor(t, f"saved_tensors[{k}]", held, output_nr)
                      for k, t in enumerate(ctx._to_save)]
        ctx._to_save = ()
        ctx._node = weakref.ref(node)
        for key, value in list(vars(ctx).items()):
            if key.startswith("_"):
                continue
            record = save_captured(value, f"ctx.{key}", held, output_nr)
            if record is not None:
                setattr(ctx, key, record)
                node.attributes.append((key, record))
        return outs[0] if single else type(outputs)(outs)


class DelayedErrorBackward(Node):
    """Source of the outputs of a ``once_differentiable`` backward run with create_graph."""

    __slots__ = ("message",)
    always_needed = True

    def __init__(self, message: str, next_edges: list, input_meta: list) -> None:
        super().__init__(next_edges, input_meta, 1)
        self.message = message

    def apply(self, grads: list, create_graph: bool) -> Sequence[Tensor | None]:
        raise RuntimeError(self.message)


def once_differentiable(backward: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a ``backward`` that supports only first-order differentiation.

    It runs without recording; when a graph is being built (create_graph), its
    gradients get a node that raises if a higher-order backward reaches it.
    """

    @functools.wraps(backward)
    def wrapper(ctx: FunctionCtx, *grads: Any) -> Any:
        with no_grad():
            result = backward(ctx, *grads)
        if not grad_mode.enabled:
            return result
        sources = [g for g in grads if isinstance(g, Tensor) and g._requires_grad]
        sources += [t for t in (ctx.saved_tensors if ctx._saved else ()) if t is not None and t._requires_grad]
        if not sources:
            return result
        edges, meta = [], []
        for t in sources:
            fn = t._grad_fn
            edges.append((t, 0) if fn is None else (fn, t._output_nr))
            meta.append((t._data.shape, t._data.dtype))
        message = (f"trying to differentiate twice a function that was marked with "
                   f"@once_differentiable ({backward.__qualname__})")
        single = not isinstance(result, tuple)
        wrapped = []
        for g in (result,) if single else result:
            if isinstance(g, Tensor) and g.is_floating_point():
                g = g.detach()
                g._grad_fn, g._requires_grad = DelayedErrorBackward(message, edges, meta), True
            wrapped.append(g)
        return wrapped[0] if single else tuple(wrapped)

    return wrapper
