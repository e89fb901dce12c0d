"""The autograd node of a formula: its backward closure and what that closure saved.

After a formula's forward ran, :func:`record_formula` makes a
:class:`FormulaNode`, sets it as ``grad_fn`` of the differentiable outputs and
replaces every closure cell that holds a tensor by a
:class:`~reference_engine.graph.SavedTensor` record (outputs as data only, so
there is no tensor -> node -> closure -> tensor cycle). When the backward
runs, the cells get the unpacked tensors and, afterwards, the records back.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from reference_engine.grad_mode import grad_mode
from reference_engine.graph import RELEASED_MESSAGE, Node, SavedTensor, check_gradients
from reference_engine.tensor import Tensor

if TYPE_CHECKING:
    from reference_engine.dispatch import Overload


class SavedSequence:
    """A captured list/tuple holding tensors: each tensor saved on its own."""

    __slots__ = ("kind", "items")

    def __init__(self, kind: type, items: list) -> None:
        self.kind = kind
        self.items = items

    def unpack(self, node: Node, create_graph: bool) -> Any:
        return self.kind(i.unpack(node, create_graph) if type(i) is SavedTensor else i for i in self.items)


class FormulaNode(Node):
    """``grad_fn`` of a formula's outputs."""

    __slots__ = ("overload", "backward_fn", "takes_mask", "saved", "needs_input_grad", "list_lengths")

    def __init__(self, overload: Overload, backward_fn: Callable[..., Any], next_edges: list,
                 input_meta: list, num_outputs: int, needs_input_grad: tuple[bool, ...],
                 list_lengths: tuple[int | None, ...] | None, takes_mask: bool) -> None:
        self.next_edges = next_edges
        self.input_meta = input_meta
        self.num_outputs = num_outputs
        self.overload = overload
        self.backward_fn = backward_fn
        self.takes_mask = takes_mask
        self.saved: list = []
        self.needs_input_grad = needs_input_grad
        self.list_lengths = list_lengths

    def name(self) -> str:
        return self.overload.node_name

    def apply(self, grads: list, create_graph: bool) -> Sequence[Tensor | None]:
        fn = self.backward_fn
        if fn is None:
            raise RuntimeError(RELEASED_MESSAGE.format(node=self.name()))
        saved = self.saved
        for cell, record in saved:
            if record.role == "input" and record.counter[0] == record.version:
                cell.cell_contents = record.tensor      # SavedTensor.unpack's common case, inlined
            else:
                cell.cell_contents = record.unpack(self, create_graph)
        try:
            if self.takes_mask:
                result = fn(*grads, needs_input_grad=self.needs_input_grad)
            else:
                result = fn(*grads)
        finally:
            for cell, record in saved:
                cell.cell_contents = record
        if self.list_lengths is None and len(self.needs_input_grad) == 1:
            flat = [result]
        elif self.list_lengths is None and type(result) is tuple and len(result) == len(self.needs_input_grad):
            flat = list(result)
        else:
            flat = self._flatten(result)
        for grad, meta in zip(flat, self.input_meta):     # check_gradients' test, inlined
            if grad is not None and meta is not None and (
                    type(grad) is not Tensor or grad._data.shape != meta[0] or grad._data.dtype != meta[1]):
                check_gradients(self, flat)     # raises, naming the input
        return flat

    def _flatten(self, result: Any) -> list:
        """One gradient per edge from one gradient (or list, for Tensor[]) per tensor argument."""
        expected = len(self.needs_input_grad)
        per_argument = [result] if expected == 1 else result
        if expected != 1 and (not isinstance(result, (tuple, list)) or len(result) != expected):
            got = len(result) if isinstance(result, (tuple, list)) else 1
            raise RuntimeError(f"Function {self.name()} returned {got} gradients, but the operator has "
                               f"{expected} differentiable inputs (one gradient each, None for zero)")
        if self.list_lengths is None:
            return list(per_argument)
        flat: list = []
        for grad, length in zip(per_argument, self.list_lengths):
            if length is None:
                flat.append(grad)
            elif grad is None:
                flat.extend([None] * length)
            elif not isinstance(grad, (list, tuple)) or len(grad) != length:
                raise RuntimeError(f"Function {self.name()} must return a list of {length} gradients "
                                   f"for its Tensor[] argument")
            else:
                flat.extend(grad)
        return flat

    def release(self) -> None:
        self.backward_fn = None
        self.saved = ()


def _backward_info(overload: Overload, backward: Callable[..., Any]) -> tuple[tuple[str, ...], bool]:
    """The closure's cell names and whether it takes ``needs_input_grad`` (cached per code object)."""
    code = backward.__code__
    info = overload.backward_info.get(code)
    if info is None:
        kwonly = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
        info = overload.backward_info[code] = (code.co_freevars, "needs_input_grad" in kwonly)
    return info


def _collect_inputs(overload: Overload, bound: Sequence[Any]) -> tuple[list, list, list, tuple | None, set[int]]:
    """Edges, (shape, dtype) metadata, the needs_input_grad mask, Tensor[] lengths and input ids."""
    if overload.signature.tensor_list_positions:
        return _collect_inputs_with_lists(overload, bound)
    edges: list = []
    meta: list = []
    needs: list[bool] = []
    held: set[int] = set()
    for position in overload.differentiable_positions:
        t = bound[position]
        if t is not None:
            held.add(id(t))
            if t._requires_grad:
                fn = t._grad_fn
                edges.append((t, 0) if fn is None else (fn, t._output_nr))
                meta.append((t._data.shape, t._data.dtype))
                needs.append(True)
                continue
        edges.append(None)
        meta.append(None)
        needs.append(False)
    return edges, meta, needs, None, held


def _collect_inputs_with_lists(overload: Overload, bound: Sequence[Any]) -> tuple[list, list, list, tuple, set[int]]:
    """:func:`_collect_inputs` for schemas with ``Tensor[]`` arguments (one edge per element)."""
    edges: list = []
    meta: list = []
    needs: list[bool] = []
    held: set[int] = set()
    lengths: list[int | None] = []
    for position in overload.differentiable_positions:
        value = bound[position]
        if type(value) is list:
            group = value
            lengths.append(len(value))
            needs.append(any(t is not None and t._requires_grad for t in value))
        else:
            group = (value,)
            lengths.append(None)
            needs.append(value is not None and value._requires_grad)
        for t in group:
            if t is not None:
                held.add(id(t))
                if t._requires_grad:
                    fn = t._grad_fn
                    edges.append((t, 0) if fn is None else (fn, t._output_nr))
                    meta.append((t._data.shape, t._data.dtype))
                    continue
            edges.append(None)
            meta.append(None)
    return edges, meta, needs, tuple(lengths), held


def _attach(out: Tensor, node: FormulaNode, nr: int, held: set[int], output_nr: dict[int, int]) -> Tensor:
    if out._requires_grad or id(out) in held:
        out = out.detach()      # an input returned as is: a new tensor object
    if out._data.dtype.kind == "f":
        out._grad_fn = node
        out._output_nr = nr
        out._requires_grad = True
        output_nr[id(out)] = nr
    return out


def record_formula(overload: Overload, bound: Sequence[Any], outputs: Any, backward: Callable[..., Any]) -> Any:
    """Attach a node for ``backward`` to the formula's ``outputs``; return them."""
    edges, meta, needs, lengths, held = _collect_inputs(overload, bound)
    info = overload.backward_info.get(backward.__code__) or _backward_info(overload, backward)
    node = FormulaNode(overload, backward, edges, meta, overload.num_differentiable_outputs, tuple(needs),
                       lengths, info[1])
    output_nr: dict[int, int] = {}
    if overload.returns_kind == "tensor":
        result = _attach(outputs, node, 0, held, output_nr)
    else:
        differentiability = overload.output_differentiability
        outs = list(outputs)
        nr = 0
        for i, out in enumerate(outs):
            if i < len(differentiability) and not differentiability[i]:
                held.add(id(out))      # held as is, like an input: it has no grad_fn, so no cycle
                continue
            outs[i] = _attach(out, node, nr, held, output_nr)
            nr += 1
        result = tuple(outs) if type(outputs) is tuple else outs
    cells = backward.__closure__
    if cells:
        _save_cells(node, zip(info[0], cells), held, output_nr)
    return result


def formula_recorder(overload: Overload, kernel_runner: Callable[..., Any],
                     keywords: dict[str, Any]) -> Callable[..., Any]:
    """The runner of a formula called with its tensor arguments as Tensors (positionally,
    keyword-only arguments at ``keywords``): it runs the kernel when no input requires grad,
    else the formula below autograd and records its node.

    For one tensor output and no ``Tensor[]`` argument (nearly every operator) everything
    :func:`record_formula` does is inlined here: this is the per-operator cost of recording.
    """
    formula = overload.formula
    positions = overload.signature.tensor_positions
    mode = grad_mode
    if (overload.signature.tensor_list_positions or overload.num_differentiable_outputs != 1
            or overload.returns_kind != "tensor"):
        def record_general(*args):
            for i in positions:
                if args[i]._requires_grad:
                    break
            else:
                return kernel_runner(*args)
            mode.enabled = False
            try:
                outputs, backward = formula(*args, **keywords)
            finally:
                mode.enabled = True
            return record_formula(overload, args + tuple(keywords.values()), outputs, backward)
        return record_general

    backward_info = overload.backward_info
    new = object.__new__

    def record(*args):
        for i in positions:
            if args[i]._requires_grad:
                break
        else:
            return kernel_runner(*args)
        mode.enabled = False
        try:
            out, backward = formula(*args, **keywords)
        finally:
            mode.enabled = True
        edges: list = []
        meta: list = []
        for i in positions:
            t = args[i]
            if t._requires_grad:
                fn = t._grad_fn
                edges.append((t, 0) if fn is None else (fn, t._output_nr))
                data = t._data
                key = (data.shape, data.dtype)
                meta.append(_SHARED_META.get(key) or _share_meta(key))
            else:
                edges.append(None)
                meta.append(None)
            if t is out:
                out = out.detach()      # an input returned as is: a new tensor object
        meta_key = tuple(meta)
        shared = _SHARED_INPUTS.get(meta_key) or _share_inputs(meta_key)
        info = backward_info.get(backward.__code__) or _backward_info(overload, backward)
        node = new(FormulaNode)         # FormulaNode.__init__, inlined
        node.next_edges = edges
        node.input_meta = shared[0]
        node.num_outputs = 1
        node.overload = overload
        node.backward_fn = backward
        node.takes_mask = info[1]
        node.saved = ()                 # a list once a cell holds a tensor
        node.needs_input_grad = shared[1]
        node.list_lengths = None
        if out._requires_grad:
            out = out.detach()
        is_output = out._data.dtype.kind == "f"
        if is_output:
            out._grad_fn = node
            out._output_nr = 0
            out._requires_grad = True
        cells = backward.__closure__
        if cells:
            for name, cell in zip(info[0], cells):
                try:
                    value = cell.cell_contents
                except ValueError:      # an empty cell: a name the backward reads that was never bound
                    continue
                kind = type(value)
                if kind is Tensor:
                    if value is out and is_output:
                        record = SavedTensor("output", name, value, 0)
                    elif value._requires_grad or any(value is args[i] for i in positions):
                        record = SavedTensor("input", name, value)
                    else:
                        record = SavedTensor("intermediate", name, value)
                elif (kind is list or kind is tuple) and value and (
                        type(value[0]) is Tensor or (value[0] is None and _holds_tensors(value))):
                    held = {id(args[i]) for i in positions}
                    record = save_captured(value, name, held, {id(out): 0} if is_output else {})
                else:
                    continue
                cell.cell_contents = record
                if node.saved:
                    node.saved.append((cell, record))
                else:
                    node.saved = [(cell, record)]
        return out
    return record


# Every node of a graph holds the (shape, dtype) of its inputs and its needs_input_grad mask;
# sharing equal ones keeps a recorded operation from adding objects for the cycle collector to
# track (fewer, shorter collections while a large graph is alive). The tables are cleared when
# they reach _SHARED_LIMIT entries (programs with ever-changing shapes).
_SHARED_META: dict[tuple, tuple] = {}       # (shape, dtype) -> itself
_SHARED_INPUTS: dict[tuple, tuple] = {}     # a node's input_meta -> (itself, its needs_input_grad)
_SHARED_LIMIT = 4096


def _share_meta(key: tuple) -> tuple:
    if len(_SHARED_META) >= _SHARED_LIMIT:
        _SHARED_META.clear()
    _SHARED_META[key] = key
    return key


def _share_inputs(input_meta: tuple) -> tuple:
    if len(_SHARED_INPUTS) >= _SHARED_LIMIT:
        _SHARED_INPUTS.clear()
    shared = (input_meta, tuple(m is not None for m in input_meta))
    _SHARED_INPUTS[input_meta] = shared
    return shared


def _save_cells(node: FormulaNode, named_cells: Any, held: set[int], output_nr: dict[int, int]) -> None:
    """Replace every cell holding tensors by a record (outputs as data: no cycle)."""
    saved = node.saved
    for name, cell in named_cells:
        try:
            value = cell.cell_contents
        except ValueError:      # an empty cell: a name the backward reads that was never bound
            continue
        kind = type(value)
        if kind is Tensor:
            record = save_tensor(value, name, held, output_nr)
        elif (kind is list or kind is tuple) and value and _holds_tensors(value):
            record = save_captured(value, name, held, output_nr)
        else:
            continue
        cell.cell_contents = record
        saved.append((cell, record))


def _holds_tensors(values: list | tuple) -> bool:
    """Formula lists are homogeneous (``list[int]`` or ``list[Tensor]``, ``None`` allowed)."""
    first = values[0]
    return type(first) is Tensor or (first is None and any(isinstance(v, Tensor) for v in values))


def save_captured(value: Any, name: str, held: set[int], output_nr: dict[int, int]) -> Any:
    """The record replacing a captured value that holds tensors (None when it holds none).

    ``held``: ids of the tensors referenced as they are (the inputs, non-differentiable
    outputs); ``output_nr``: ids of the differentiable outputs and their output numbers.
    """
    if isinstance(value, Tensor):
        return save_tensor(value, name, held, output_nr)
    if type(value) in (list, tuple) and any(isinstance(v, Tensor) for v in value):
        return SavedSequence(type(value), [
            save_tensor(v, f"{name}[{i}]", held, output_nr) if isinstance(v, Tensor) else v
            for i, v in enumerate(value)])
    return None


def save_tensor(value: Tensor, name: str, held: set[int], output_nr: dict[int, int]) -> SavedTensor:
    """Classify a captured tensor: an output of this node, held as is (inputs), or an intermediate."""
    key = id(value)
    nr = output_nr.get(key)
    if nr is not None:
        return SavedTensor("output", name, value, nr)
    if key in held or value._requires_grad:
        return SavedTensor("input", name, value)
    return SavedTensor("intermediate", name, value)
