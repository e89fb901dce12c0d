"""The autograd node of a formula: its backward closure and what that closure captured.

After a formula's forward ran, :func:`record` (the one recorder; the
dispatcher's per-call-shape recorders, :func:`formula_recorder`, run the same
steps) makes a :class:`FormulaNode`, sets it as ``grad_fn`` of the
differentiable outputs and looks at the closure cells that can hold something
other than an argument (see :func:`backward_plan`, which reads the formula's
facts, :mod:`reference_engine.facts`):

* an **input** stays in its cell (it points to earlier nodes only: no cycle);
* an **output** is replaced in its cell by a *shadow*: a tensor over the same
  array and version counter without ``grad_fn``, so there is no tensor -> node
  -> closure -> tensor cycle. A first-order backward reads the shadow as it
  is; with ``create_graph`` the cell gets, for the duration of the call, a
  tensor whose ``grad_fn`` is this node (torch's ``SavedVariable`` unpack);
* an **intermediate** (neither) works for first order; with ``create_graph``
  its cell holds an alias whose gradient source raises (the runtime guard);
* a list/tuple holding tensors becomes a :class:`SavedSequence` of
  :class:`~reference_engine.graph.SavedTensor` records while idle.

Outputs, intermediates and sequences are listed in ``node.saved``; inputs need
no entry. In-place writes are caught without recording versions: a write
takes a tick from the engine's sequence (:mod:`reference_engine.tensor`), so
a captured tensor whose last write tick is above the node's ``seq`` changed
after it was saved. The backward looks only when some write happened since
the node was made.
"""
from __future__ import annotations

import dis
from types import CodeType, FunctionType
from typing import Any, Callable, NamedTuple, Sequence

from reference_engine.grad_mode import grad_mode
from reference_engine.graph import RELEASED_MESSAGE, Node, SavedTensor, poisoned_alias
from reference_engine.tensor import Tensor, last_write, ticks

# ``overload`` below is a :class:`reference_engine.overload.Overload` (a module above this one).

#: Roles of a captured value (:attr:`Saved.role`).
OUTPUT, INTERMEDIATE, SEQUENCE = "output", "intermediate", "sequence"


class Saved(NamedTuple):
    """A captured cell the backward call may need swapped (see the module docstring)."""

    cell: Any
    role: str       # OUTPUT, INTERMEDIATE or SEQUENCE
    #: the output number of an OUTPUT, the capture name of an INTERMEDIATE, the
    #: :class:`SavedSequence` / :class:`SavedMapping` of a SEQUENCE
    extra: Any


class BackwardPlan(NamedTuple):
    """What recording needs to know about one backward closure (one per code object)."""

    takes_mask: bool                 # it takes ``needs_input_grad``
    inspected: tuple[int, ...]       # indices of the cells to look at (the others are settled)
    has_defaults: bool               # its def statement has default arguments (checked for tensors)


class SavedSequence:
    """A captured list/tuple holding tensors: each tensor saved on its own."""

    __slots__ = ("kind", "items")

    def __init__(self, kind: type, items: list) -> None:
        self.kind = kind
        self.items = items

    def unpack(self, node: Node, create_graph: bool) -> Any:
        return self.kind(i.unpack(node, create_graph) if type(i) is SavedTensor else i for i in self.items)


class SavedMapping:
    """A captured dict holding tensors: each tensor value saved on its own."""

    __slots__ = ("items",)

    def __init__(self, items: list) -> None:
        self.items = items      # (key, value or SavedTensor)

    def unpack(self, node: Node, create_graph: bool) -> dict:
        return {k: v.unpack(node, create_graph) if type(v) is SavedTensor else v for k, v in self.items}


#: Scalar overloads that torch's Python operators reach as the Tensor overload, the number wrapped
NUMBER_AS_TENSOR = frozenset({"add.Scalar", "sub.Scalar", "mul.Scalar", "div.Scalar"})


class FormulaNode(Node):
    """``grad_fn`` of a formula's outputs."""

    __slots__ = ("overload", "backward_fn", "takes_mask", "saved", "needs_input_grad", "list_lengths",
                 "swaps")

    def __init__(self, overload: Any, backward_fn: Callable[..., Any], next_edges: tuple,
                 input_meta: tuple, needs_input_grad: tuple[bool, ...], takes_mask: bool,
                 num_outputs: int = 1, list_lengths: tuple[int | None, ...] | None = None) -> None:
        self.next_edges = next_edges        # Node's fields, set here: this runs once per recorded op
        self.input_meta = input_meta
        self.num_outputs = num_outputs
        self.seq = next(ticks)
        self.overload = overload
        self.backward_fn = backward_fn
        self.takes_mask = takes_mask
        self.saved: list[Saved] | tuple = ()    # a list once something is saved
        self.swaps = False      # whether a first-order backward must swap cells (a SEQUENCE)
        self.needs_input_grad = needs_input_grad
        self.list_lengths = list_lengths

    def name(self) -> str:
        return self.overload.node_name

    @property
    def next_functions(self) -> tuple:
        """:attr:`Node.next_functions`, and ``(None, 0)`` for the number where torch's Python
        operators wrap it as a tensor and record the Tensor overload (``x * 2``)."""
        shown = Node.next_functions.fget(self)
        return (*shown[:1], (None, 0), *shown[1:]) if self.overload.name in NUMBER_AS_TENSOR else shown

    def apply(self, grads: list, create_graph: bool) -> Sequence[Tensor | None]:
        fn = self.backward_fn
        if fn is None:
            raise RuntimeError(RELEASED_MESSAGE.format(node=self.name()))
        if last_write[0] > self.seq:        # something was written in place since this node was made
            self._check_versions()
        if self.swaps or create_graph and self.saved:
            result = self._call_swapped(grads, create_graph)
        elif self.takes_mask:
            result = fn(*grads, needs_input_grad=self.needs_input_grad)
        else:
            result = fn(*grads)
        if self.list_lengths is None:
            if len(self.input_meta) == 1:
                return (result,)
            if type(result) is tuple and len(result) == len(self.input_meta):
                return result
        return self._flatten(result)

    def _call_swapped(self, grads: list, create_graph: bool) -> Any:
        """Run the backward with each saved output / intermediate / sequence cell holding
        what this kind of backward needs (see the module docstring), then restore them."""
        idle = []
        for cell, role, extra in self.saved:
            value = cell.cell_contents
            if role is SEQUENCE:
                unpacked = extra.unpack(self, create_graph)
            elif not create_graph:
                continue
            elif role is OUTPUT:
                unpacked = value.detach()       # the output (same counter), grad_fn = this node
                unpacked._grad_fn = self
                unpacked._output_nr = extra
                unpacked._requires_grad = True
            elif value.is_floating_point():
                unpacked = poisoned_alias(value, self, extra)
            else:
                continue
            idle.append((cell, value))
            cell.cell_contents = unpacked
        try:
            if self.takes_mask:
                return self.backward_fn(*grads, needs_input_grad=self.needs_input_grad)
            return self.backward_fn(*grads)
        finally:
            for cell, value in idle:
                cell.cell_contents = value

    def _check_versions(self) -> None:
        """Raise, naming the capture, if a captured tensor was written in place after this
        node was made (its counter's write tick is above ``seq``). Captured sequences check
        their tensors as they are unpacked."""
        fn = self.backward_fn
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if isinstance(value, Tensor):
                counter = value._version
                if counter is not None and counter[1] > self.seq:
                    raise RuntimeError(
                        f"one of the variables needed for gradient computation has been modified by an "
                        f"inplace operation: the tensor of shape {list(value._data.shape)} saved as "
                        f"'{name}' by {self.name()} was written in place after it was saved (it is now "
                        f"at version {counter[0]}); clone it before the write, or write out of place")

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


class ListOutputNode(FormulaNode):
    """``grad_fn`` of a formula whose output is a ``Tensor[]``: its backward takes the list of
    the outputs' gradients as one argument (``def backward(grads)``), None where an output
    received none."""

    __slots__ = ()

    def apply(self, grads: list, create_graph: bool) -> Sequence[Tensor | None]:
        return super().apply([list(grads)], create_graph)


def backward_plan(overload: Any, backward: Callable[..., Any]) -> BackwardPlan:
    """The :class:`BackwardPlan` of a backward closure, made once per code object.

    When the backward is the ``def backward`` of the formula's body that the front-end
    modelled, the mask parameter and the settled captures (inputs the forward never
    rebinds, metadata) are its facts, and only the other cells (``result``, anything
    computed) are inspected. Any other closure (one the formula did not define in its body,
    or a formula the front-end has no model of) has every cell inspected and takes the mask
    when its signature names it.
    """
    code = backward.__code__
    plan = overload.backward_plans.get(code)
    if plan is None:
        facts = overload.facts
        if (facts.model is not None and code.co_name == facts.backward_name
                and code in overload.formula.__code__.co_consts):
            takes_mask, settled = facts.mask_parameter is not None, facts.settled
        else:
            keyword_only = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
            takes_mask, settled = "needs_input_grad" in keyword_only, frozenset()
        _refuse_written_globals(overload, overload.formula.__code__, code)
        plan = overload.backward_plans[code] = BackwardPlan(
            takes_mask, tuple(i for i, name in enumerate(code.co_freevars) if name not in settled),
            bool(backward.__defaults__ or backward.__kwdefaults__))
    return plan


#: Methods that change a container in place (``CACHE.append(e)``).
_MUTATING_METHODS = frozenset({"append", "extend", "insert", "update", "setdefault", "add", "__setitem__"})


def _refuse_written_globals(overload: Any, formula_code: CodeType, backward_code: CodeType) -> None:
    """Raise when the backward reads a module global that the formula assigns (``global E``)
    or changes in place (a dict, list or set: ``CACHE[k] = e``, ``CACHE.append(e)``): it would
    hold a forward intermediate the recorder cannot see, so a double backward would be
    silently wrong. Read from the bytecode once per backward code object."""
    read = _global_loads(backward_code)
    if not read:
        return
    assigned, changed = _global_writes(formula_code)
    namespace = overload.formula.__globals__
    changed = {name for name in changed if type(namespace.get(name)) in (dict, list, set)}
    for name in sorted(read & (assigned | changed)):
        raise RuntimeError(
            f"the formula of {overload.name} writes the module global '{name}', which its backward "
            f"reads: a tensor kept there is a forward intermediate the engine cannot track, so a "
            f"double backward through it would be silently wrong. Capture it in the closure "
            f"(only inputs and outputs), or recompute it inside the backward (lint code DB100)")


def _global_loads(code: CodeType) -> set[str]:
    names = {i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_GLOBAL"}
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _global_loads(const)
    return names


def _global_writes(code: CodeType) -> tuple[set[str], set[str]]:
    """Globals ``code`` (or code nested in it) assigns or deletes, and globals it may change in
    place: an item assignment or a mutating method call (``append``...) right after loading it."""
    ops = [i for i in dis.get_instructions(code) if i.opname not in _SKIPPED_OPCODES]
    assigned = {i.argval for i in ops if i.opname in ("STORE_GLOBAL", "DELETE_GLOBAL")}
    changed = set()
    for load, after, then in zip(ops, ops[1:] + [None], ops[2:] + [None, None]):
        if load.opname != "LOAD_GLOBAL" or after is None:
            continue
        if ((after.opname in ("LOAD_METHOD", "LOAD_ATTR") and after.argval in _MUTATING_METHODS)
                or (then is not None and then.opname in ("STORE_SUBSCR", "DELETE_SUBSCR")
                    and after.opname.startswith("LOAD_"))):
            changed.add(load.argval)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            more_assigned, more_changed = _global_writes(const)
            assigned |= more_assigned
            changed |= more_changed
    return assigned, changed


_SKIPPED_OPCODES = frozenset({"PRECALL", "PUSH_NULL", "CACHE", "NOP", "EXTENDED_ARG"})


# Every node of a graph holds the (shape, dtype) of its inputs and its needs_input_grad mask;


# Every node of a graph holds the (shape, dtype) of its inputs and its needs_input_grad mask;
# equal ones are shared, so a recorded operation adds no objects for them (fewer objects for
# the cycle collector to track while a large graph is alive). The table is cleared when it
# reaches _SHARED_LIMIT entries (programs with ever-changing shapes).
_SHARED_INPUTS: dict[tuple, tuple] = {}     # a node's input_meta -> (itself, its needs_input_grad)
_SHARED_LIMIT = 4096


def _share_inputs(input_meta: tuple) -> tuple:
    if len(_SHARED_INPUTS) >= _SHARED_LIMIT:
        _SHARED_INPUTS.clear()
    shared = (input_meta, tuple(m is not None for m in input_meta))
    _SHARED_INPUTS[input_meta] = shared
    return shared


def _edge(t: Tensor) -> tuple:
    """The edge to an input that requires grad: its node and output number, or the leaf itself."""
    fn = t._grad_fn
    return (t, 0) if fn is None else (fn, t._output_nr)


def _collect_inputs(overload: Any, bound: Sequence[Any]) -> tuple[tuple, tuple, tuple, tuple | None, set[int]]:
    """Edges, (shape, dtype) metadata, the needs_input_grad mask, Tensor[] lengths (None
    without Tensor[] arguments) and the ids of the input tensors."""
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
                    edges.append(_edge(t))
                    meta.append((t._data.shape, t._data.dtype))
                    continue
            edges.append(None)
            meta.append(None)
    if not any(length is not None for length in lengths):
        input_meta, mask = _SHARED_INPUTS.get(tuple(meta)) or _share_inputs(tuple(meta))
        return tuple(edges), input_meta, mask, None, held
    return tuple(edges), tuple(meta), tuple(needs), tuple(lengths), held


def _attach(out: Tensor, node: FormulaNode, nr: int, inputs: set[int], output_nr: dict[int, int]) -> Tensor:
    """Make ``out`` the ``nr``-th output of ``node`` (a floating tensor; others stay as they are);
    an input returned as is becomes a new tensor object first."""
    if out._requires_grad or id(out) in inputs:
        out = out.detach()
    if out._data.dtype.kind == "f":
        out._grad_fn = node
        out._output_nr = nr
        out._requires_grad = True
        output_nr[id(out)] = nr
    return out


def record(overload: Any, bound: Sequence[Any], outputs: Any, backward: Callable[..., Any]) -> Any:
    """Attach a node for ``backward`` to the formula's ``outputs`` (what it returned for the
    bound arguments ``bound``) and return them: the one recorder, for any call shape."""
    edges, meta, needs, lengths, held = _collect_inputs(overload, bound)
    plan = backward_plan(overload, backward)
    output_nr: dict[int, int] = {}
    if overload.returns_kind == "tensor":
        node = FormulaNode(overload, backward, edges, meta, needs, plan.takes_mask, 1, lengths)
        result = _attach(outputs, node, 0, held, output_nr)
    else:
        if overload.returns_kind == "list":
            node = ListOutputNode(overload, backward, edges, meta, needs, plan.takes_mask, len(outputs), lengths)
        else:
            node = FormulaNode(overload, backward, edges, meta, needs, plan.takes_mask,
                               overload.num_differentiable_outputs, lengths)
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
    _save(node, backward, plan, held, output_nr)
    return result


def _save(node: FormulaNode, backward: Callable[..., Any], plan: BackwardPlan, held: set[int],
          output_nr: dict[int, int]) -> None:
    """Save the cells of ``backward`` the plan inspects (:func:`_save_cell`) and refuse a tensor
    kept in a default argument. ``held``: ids of the tensors referenced as they are (inputs,
    non-differentiable outputs); ``output_nr``: the differentiable outputs' numbers by id."""
    if plan.inspected:
        cells, names = backward.__closure__, backward.__code__.co_freevars
        for index in plan.inspected:
            _save_cell(node, cells[index], names[index], held, output_nr)
    if plan.has_defaults:
        refuse_tensor_defaults(node, backward, held, output_nr)


def _save_cell(node: FormulaNode, cell: Any, name: str, held: set[int], output_nr: dict[int, int]) -> None:
    """Save one cell: an output (replaced by its shadow), an intermediate (guarded), a list,
    tuple or dict holding tensors (a saved record), a captured function (its own cells and
    defaults); sizes, dims and scalars need nothing."""
    try:
        value = cell.cell_contents
    except ValueError:      # an empty cell: a name the backward reads that was never bound
        return
    kind = type(value)
    if kind is Tensor:
        nr = output_nr.get(id(value))
        if nr is not None:
            cell.cell_contents = value.detach()     # the shadow: same data and version counter
            saved = Saved(cell, OUTPUT, nr)
        elif id(value) not in held and not value._requires_grad:
            saved = Saved(cell, INTERMEDIATE, name)
        else:
            return
        if type(node.saved) is list:
            node.saved.append(saved)
        else:
            node.saved = [saved]
    elif kind is list or kind is tuple or kind is dict:
        if not value or (kind is not dict and type(value[0]) is int):      # sizes, dims: nothing to save
            return
        record = save_captured(value, name, held, output_nr)
        if record is not None:
            cell.cell_contents = record
            node.saved = [*node.saved, Saved(cell, SEQUENCE, record)]
            node.swaps = True
    elif kind is FunctionType:
        _save_function(node, value, held, output_nr)


def _save_function(node: FormulaNode, fn: FunctionType, held: set[int], output_nr: dict[int, int]) -> None:
    """A function the backward captured (``def derivative(): return cosine``): the cells it
    reads are saved like the backward's own, so a tensor it hides is still guarded."""
    refuse_tensor_defaults(node, fn, held, output_nr)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        if any(saved.cell is cell for saved in node.saved):      # shared with the backward: saved once
            continue
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if value is fn:     # a recursive function
            continue
        _save_cell(node, cell, name, held, output_nr)


def refuse_tensor_defaults(node: Node, fn: Callable[..., Any], held: set[int], output_nr: dict[int, int]) -> None:
    """Raise if a default argument of ``fn`` holds a tensor that is neither an input nor an
    output (``def backward(grad, e=e)``): it cannot be swapped for a guarded alias."""
    code = fn.__code__
    positional = code.co_varnames[:code.co_argcount]
    defaults = list(zip(positional[len(positional) - len(fn.__defaults__ or ()):], fn.__defaults__ or ()))
    defaults += list((fn.__kwdefaults__ or {}).items())
    for name, value in defaults:
        for t in _tensors_in(value):
            if id(t) not in held and id(t) not in output_nr and not t._requires_grad:
                raise RuntimeError(
                    f"{fn.__qualname__} of {node.name()} keeps a tensor computed in the forward in its "
                    f"default argument '{name}': it is neither an input nor an output, so a double "
                    f"backward through it would be silently wrong. Recompute it inside the backward "
                    f"from inputs and outputs (lint code DB100)")


def _tensors_in(value: Any) -> list[Tensor]:
    if isinstance(value, Tensor):
        return [value]
    if type(value) in (list, tuple):
        return [v for v in value if isinstance(v, Tensor)]
    if type(value) is dict:
        return [v for v in value.values() if isinstance(v, Tensor)]
    return []


def formula_recorder(overload: Any, kernel_runner: Callable[..., Any], arity: int,
                     keywords: dict[str, Any]) -> Callable[..., Any]:
    """The runner of a formula called with ``arity`` positional arguments, its tensor
    arguments as Tensors (keyword-only arguments at ``keywords``): it runs the kernel when
    no input requires grad, else the formula below autograd and :func:`record`.

    These are just optimizations of calling :func:`record` (tests/engine/test_fast_paths.py
    holds them to it): for one tensor output and no ``Tensor[]`` argument (nearly every
    operator) the edges are collected per call shape (one tensor, two tensors, any) without
    binding, and :func:`_record_one_output` does the rest of what :func:`record` does.
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
                out, backward = formula(*args, **keywords)
            finally:
                mode.enabled = True
            return record(overload, args + tuple(keywords.values()), out, backward)
        return record_general

    if positions == (0,):
        def record_unary(a, *more):       # more: non-tensor arguments (``x * 2.0``)
            if not a._requires_grad:
                return kernel_runner(a, *more)
            mode.enabled = False
            try:
                out, backward = formula(a, *more, **keywords)
            finally:
                mode.enabled = True
            fn, data = a._grad_fn, a._data      # the edge: _edge, inlined
            edge = (a, 0) if fn is None else (fn, a._output_nr)
            return _record_one_output(overload, backward, out, (a, *more), (edge,), ((data.shape, data.dtype),))
        return record_unary

    if positions == (0, 1) and arity == 2:
        def record_binary(a, b):
            if a._requires_grad:       # the edges: _edge, inlined
                fn = a._grad_fn
                edge_a, meta_a = (a, 0) if fn is None else (fn, a._output_nr), (a._data.shape, a._data.dtype)
            elif b._requires_grad:
                edge_a = meta_a = None
            else:
                return kernel_runner(a, b)
            if b._requires_grad:
                fn = b._grad_fn
                edge_b, meta_b = (b, 0) if fn is None else (fn, b._output_nr), (b._data.shape, b._data.dtype)
            else:
                edge_b = meta_b = None
            mode.enabled = False
            try:
                out, backward = formula(a, b, **keywords)
            finally:
                mode.enabled = True
            return _record_one_output(overload, backward, out, (a, b), (edge_a, edge_b), (meta_a, meta_b))
        return record_binary

    def record_positional(*args):
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
        edges, meta = [], []
        for i in positions:
            t = args[i]
            if t._requires_grad:
                edges.append(_edge(t))
                meta.append((t._data.shape, t._data.dtype))
            else:
                edges.append(None)
                meta.append(None)
        return _record_one_output(overload, backward, out, args, tuple(edges), tuple(meta))
    return record_positional


def _record_one_output(overload: Any, backward: Callable[..., Any], out: Tensor, args: tuple,
                       edges: tuple, meta_key: tuple) -> Tensor:
    """:func:`record` for one tensor output and no ``Tensor[]`` argument, the edges and input
    metadata already collected (the shared tail of :func:`formula_recorder`'s runners)."""
    plan = overload.backward_plans.get(backward.__code__) or backward_plan(overload, backward)
    input_meta, needs_input_grad = _SHARED_INPUTS.get(meta_key) or _share_inputs(meta_key)
    node = FormulaNode(overload, backward, edges, input_meta, needs_input_grad, plan.takes_mask)
    returns_an_input = out._requires_grad
    for a in args:
        if a is out:
            returns_an_input = True
    if returns_an_input:
        out = out.detach()
    is_output = out._data.dtype.kind == "f"
    if is_output:        # _attach, inlined
        out._grad_fn = node
        out._output_nr = 0
        out._requires_grad = True
    if plan.inspected or plan.has_defaults:
        # held: the arguments' ids (a number's id is never a live tensor's)
        _save(node, backward, plan, set(map(id, args)), {id(out): 0} if is_output else {})
    return out


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
    if type(value) is dict and any(isinstance(v, Tensor) for v in value.values()):
        return SavedMapping([(k, save_tensor(v, f"{name}[{k!r}]", held, output_nr) if isinstance(v, Tensor) else v)
                             for k, v in value.items()])
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
