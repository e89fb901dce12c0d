"""The autograd node of a formula: its backward closure and what that closure captured.

After a formula's forward ran, the recorder makes a :class:`FormulaNode`, sets
it as ``grad_fn`` of the differentiable outputs and looks at the closure
cells that can hold something other than an argument (see
:func:`backward_plan`):

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
import gc
import os
from types import CodeType, FunctionType
from typing import TYPE_CHECKING, Any, Callable, Sequence

from reference_engine.grad_mode import grad_mode
from reference_engine.graph import RELEASED_MESSAGE, Node, SavedTensor, poisoned_alias
from reference_engine.tensor import Tensor, last_write, ticks

if TYPE_CHECKING:
    from reference_engine.dispatch import Overload

#: Roles of a captured value (the second field of a :data:`Saved` entry).
OUTPUT, INTERMEDIATE, SEQUENCE = "output", "intermediate", "sequence"

#: ``(cell, role, extra)``; ``extra`` is the output number of an OUTPUT, the capture name of an
#: INTERMEDIATE (None: the backward's own cell of that name), the
#: :class:`SavedSequence` of a SEQUENCE, else None.
Saved = tuple


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


class FormulaNode(Node):
    """``grad_fn`` of a formula's outputs."""

    __slots__ = ("overload", "backward_fn", "takes_mask", "saved", "needs_input_grad", "list_lengths",
                 "swaps")

    def __init__(self, overload: Overload, backward_fn: Callable[..., Any], next_edges: list,
                 input_meta: list, num_outputs: int, needs_input_grad: tuple[bool, ...],
                 list_lengths: tuple[int | None, ...] | None, takes_mask: bool) -> None:
        super().__init__(next_edges, input_meta, num_outputs)
        self.overload = overload
        self.backward_fn = backward_fn
        self.takes_mask = takes_mask
        self.saved: list[Saved] = []
        self.swaps = False      # whether a first-order backward must swap cells (a SEQUENCE)
        self.needs_input_grad = needs_input_grad
        self.list_lengths = list_lengths

    def name(self) -> str:
        return self.overload.node_name

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
                unpacked = Tensor._wrap(value._data)     # the output, grad_fn = this node
                unpacked._value = value._value
                unpacked._version = value._version
                unpacked._grad_fn = self
                unpacked._output_nr = extra
                unpacked._requires_grad = True
            elif value.is_floating_point():
                unpacked = poisoned_alias(value, self, extra or self._capture_name(cell))
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

    def _capture_name(self, cell: Any) -> str:
        fn = self.backward_fn
        for name, candidate in zip(fn.__code__.co_freevars, fn.__closure__):
            if candidate is cell:
                return name
        return "?"

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


def backward_plan(overload: Overload, backward: Callable[..., Any]) -> tuple[bool, tuple[int, ...]]:
    """``(takes needs_input_grad, cells to inspect)`` for a backward closure, cached per code.

    When the backward is the ``def backward`` of the formula's body, the cells the
    front-end settles statically (:func:`transpiler.frontend.settled_captures`: inputs the
    forward never rebinds, metadata) need no look at record time; every other cell
    (``result``, anything computed) is inspected. A formula the front-end cannot match to
    its file (defined in a function, edited since it was imported) has every cell inspected.
    """
    code = backward.__code__
    info = overload.backward_info.get(code)
    if info is None:
        kwonly = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
        formula_code = overload.formula.__code__
        _refuse_written_globals(overload, formula_code, code)
        settled = _settled_captures(overload.name, formula_code, code) if code in formula_code.co_consts \
            else frozenset()
        inspected = tuple(i for i, name in enumerate(code.co_freevars) if name not in settled)
        if backward.__defaults__ or backward.__kwdefaults__:     # the def statement has defaults
            inspected += (DEFAULTS,)
        info = overload.backward_info[code] = ("needs_input_grad" in kwonly, inspected)
    return info


#: formula code object -> the names :func:`_settled_captures` found (one read of its file per formula).
_SETTLED: dict[CodeType, frozenset[str]] = {}


def _settled_captures(op_name: str, formula_code: CodeType, backward_code: CodeType) -> frozenset[str]:
    """The backward's captures the front-end's model of the formula's file settles (read from
    the source, never imported), or none when the model is not this code's: no such file, no
    single formula of that function and operator there, or one whose decorator line or captured
    names differ from the code's (the file was edited after it was imported)."""
    found = _SETTLED.get(formula_code)
    if found is None:
        found = _SETTLED[formula_code] = _read_settled_captures(op_name, formula_code, backward_code)
    return found


def _read_settled_captures(op_name: str, formula_code: CodeType, backward_code: CodeType) -> frozenset[str]:
    from transpiler.frontend import parse_module, read_module, settled_captures    # libcst: on first use

    path = formula_code.co_filename
    if not os.path.isfile(path):
        return frozenset()
    parsed = parse_module.cache_info().misses
    module = read_module(path)
    if parse_module.cache_info().misses != parsed:
        # libcst's parser leaves reference cycles behind: free them now, once per file, rather
        # than leave them to the program's cycle collector (or to none, with gc disabled)
        gc.collect()
    matches = [f for f in module.formulas if f.function == formula_code.co_name and f.op_name == op_name]
    if len(matches) != 1:
        return frozenset()
    formula = matches[0]
    first_line = module.span(formula.node.decorators[0]).line if formula.node.decorators else formula.span.line
    if first_line != formula_code.co_firstlineno or not set(backward_code.co_freevars) <= {
            c.name for c in formula.captures}:
        return frozenset()
    return settled_captures(formula)


#: In a backward plan's inspected cells: look at the backward's default arguments too.
DEFAULTS = -1
#: Methods that change a container in place (``CACHE.append(e)``).
_MUTATING_METHODS = frozenset({"append", "extend", "insert", "update", "setdefault", "add", "__setitem__"})


def _refuse_written_globals(overload: Overload, formula_code: CodeType, backward_code: CodeType) -> None:
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


def _collect_inputs(overload: Overload, bound: Sequence[Any]) -> tuple[list, tuple, tuple, tuple | None, set[int]]:
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
                    fn = t._grad_fn
                    edges.append((t, 0) if fn is None else (fn, t._output_nr))
                    meta.append((t._data.shape, t._data.dtype))
                    continue
            edges.append(None)
            meta.append(None)
    has_lists = any(length is not None for length in lengths)
    if not has_lists:
        input_meta, mask = _SHARED_INPUTS.get(tuple(meta)) or _share_inputs(tuple(meta))
        return edges, input_meta, mask, None, held
    return edges, tuple(meta), tuple(needs), tuple(lengths), held


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
    """Attach a node for ``backward`` to the formula's ``outputs``; return them (the general
    recorder: any number of outputs, ``Tensor[]`` arguments, bound arguments)."""
    edges, meta, needs, lengths, held = _collect_inputs(overload, bound)
    takes_mask, inspected = backward_plan(overload, backward)
    if overload.returns_kind == "list":
        node = ListOutputNode(overload, backward, edges, meta, len(outputs), needs, lengths, takes_mask)
    else:
        node = FormulaNode(overload, backward, edges, meta, overload.num_differentiable_outputs, needs,
                           lengths, takes_mask)
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
    if backward.__closure__:
        _save_cells(node, backward, held, output_nr)
    if DEFAULTS in inspected:
        refuse_tensor_defaults(node, backward, held, output_nr)
    return result


def _save_cells(node: FormulaNode, backward: Callable[..., Any], held: set[int],
                output_nr: dict[int, int]) -> None:
    """List every cell of ``backward`` holding an output, intermediate or container of them in
    ``node.saved`` (outputs replaced by their shadows); the cells of functions it captured too."""
    for name, cell in zip(backward.__code__.co_freevars, backward.__closure__):
        _save_cell(node, cell, name, held, output_nr)


def _saved_list(node: FormulaNode) -> list:
    if type(node.saved) is not list:
        node.saved = list(node.saved)
    return node.saved


def _save_cell(node: FormulaNode, cell: Any, name: str, held: set[int], output_nr: dict[int, int]) -> None:
    """Save one cell: an output (shadowed), an intermediate (guarded), a list, tuple or dict
    holding tensors (a saved record), a captured function (its own cells and defaults)."""
    try:
        value = cell.cell_contents
    except ValueError:      # an empty cell: a name the backward reads that was never bound
        return
    kind = type(value)
    if kind is Tensor:
        nr = output_nr.get(id(value))
        if nr is not None:
            cell.cell_contents = value.detach()     # the shadow: same data and version counter
            _saved_list(node).append((cell, OUTPUT, nr))
        elif id(value) not in held and not value._requires_grad:
            _saved_list(node).append((cell, INTERMEDIATE, name))
    elif kind is list or kind is tuple or kind is dict:
        record = save_captured(value, name, held, output_nr) if value else None
        if record is not None:
            cell.cell_contents = record
            _saved_list(node).append((cell, SEQUENCE, record))
            node.swaps = True
    elif kind is FunctionType:
        _save_function(node, value, held, output_nr)


def _save_function(node: FormulaNode, fn: FunctionType, held: set[int], output_nr: dict[int, int]) -> None:
    """A function the backward captured (``def derivative(): return cosine``): the cells it
    reads are saved like the backward's own, so a tensor it hides is still guarded."""
    refuse_tensor_defaults(node, fn, held, output_nr)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        if any(entry[0] is cell for entry in node.saved):      # shared with the backward: saved once
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


def _save_inspected(node: FormulaNode, backward: Callable[..., Any], inspected: tuple[int, ...],
                    out: Tensor, is_output: bool, args: tuple) -> None:
    """:func:`_save_cells` for one output, over the cells :func:`backward_plan` could not
    rule out (an input is the same object as one of ``args``, or requires grad)."""
    cells = backward.__closure__
    saved = None
    for index in inspected:
        if index == DEFAULTS:
            refuse_tensor_defaults(node, backward, {id(a) for a in args if type(a) is Tensor},
                                   {id(out): 0} if is_output else {})
            continue
        cell = cells[index]
        try:
            value = cell.cell_contents
        except ValueError:      # an empty cell: a name the backward reads that was never bound
            continue
        kind = type(value)
        if kind is Tensor:
            if value is out:
                if not is_output:
                    continue
                counter = value._version
                if counter is None:
                    counter = value._version = [0, 0]       # shared with the shadow
                shadow = _new(Tensor)       # out.detach(), inlined: same data and counter
                shadow._data = value._data
                shadow._value = value._value
                shadow._requires_grad = False
                shadow._grad_fn = shadow.grad = None
                shadow._output_nr = 0
                shadow._version = counter
                cell.cell_contents = shadow
                entry = (cell, OUTPUT, 0)
            elif value._requires_grad or any(value is a for a in args):
                continue
            else:
                entry = (cell, INTERMEDIATE, None)
        elif (kind is list or kind is tuple) and value and type(value[0]) is not int and (
                type(value[0]) is Tensor or (value[0] is None and _holds_tensors(value))):
            held = {id(a) for a in args if type(a) is Tensor}
            name = backward.__code__.co_freevars[index]
            record = save_captured(value, name, held, {id(out): 0} if is_output else {})
            cell.cell_contents = record
            entry = (cell, SEQUENCE, record)
            node.swaps = True
        elif kind is dict or kind is FunctionType:      # rare: the general cell saver
            if saved is not None:
                node.saved = saved
            _save_cell(node, cell, backward.__code__.co_freevars[index], {id(a) for a in args if type(a) is Tensor},
                       {id(out): 0} if is_output else {})
            saved = node.saved if node.saved else None
            continue
        else:       # sizes, dims, scalars: nothing to save
            continue
        if saved is None:
            saved = node.saved = []
        saved.append(entry)


_new = object.__new__


def formula_recorder(overload: Overload, kernel_runner: Callable[..., Any], arity: int,
                     keywords: dict[str, Any]) -> Callable[..., Any]:
    """The runner of a formula called with ``arity`` positional arguments, its tensor
    arguments as Tensors (keyword-only arguments at ``keywords``): it runs the kernel when
    no input requires grad, else the formula below autograd and records its node.

    For one tensor output and no ``Tensor[]`` argument (nearly every operator) everything
    :func:`record_formula` does is inlined here: this is the per-operator cost of recording.
    """
    formula = overload.formula
    positions = overload.signature.tensor_positions
    mode = grad_mode
    general = bool(overload.signature.tensor_list_positions or overload.num_differentiable_outputs != 1
                   or overload.returns_kind != "tensor")     # recorded by record_formula
    infos = overload.backward_info
    shared_inputs = _SHARED_INPUTS
    new = _new
    tick = ticks.__next__

    if not general and positions == (0,):
        def record_unary(a, *more):       # more: non-tensor arguments (``x * 2.0``)
            if not a._requires_grad:
                return kernel_runner(a, *more)
            mode.enabled = False
            try:
                if keywords:
                    out, backward = formula(a, *more, **keywords)
                else:
                    out, backward = formula(a, *more) if more else formula(a)
            finally:
                mode.enabled = True
            data = a._data
            fn = a._grad_fn
            info = infos.get(backward.__code__) or backward_plan(overload, backward)
            node = new(FormulaNode)     # FormulaNode.__init__, inlined (as in record_binary)
            node.next_edges = ((a, 0) if fn is None else (fn, a._output_nr),)
            meta_key = ((data.shape, data.dtype),)
            node.input_meta, node.needs_input_grad = shared_inputs.get(meta_key) or _share_inputs(meta_key)
            node.num_outputs = 1
            node.seq = tick()
            node.overload = overload
            node.backward_fn = backward
            node.saved = ()
            node.swaps = False
            node.list_lengths = None
            node.takes_mask = info[0]
            if out._requires_grad:      # an input returned as is: a new tensor object
                out = out.detach()
            is_output = out._data.dtype.kind == "f"
            if is_output:
                out._grad_fn = node
                out._output_nr = 0
                out._requires_grad = True
            if info[1]:
                _save_inspected(node, backward, info[1], out, is_output, (a, *more))
            return out
        return record_unary

    if not general and positions == (0, 1) and arity == 2:
        def record_binary(a, b):
            if a._requires_grad:
                fn = a._grad_fn
                edge_a = (a, 0) if fn is None else (fn, a._output_nr)
                data = a._data
                meta_a = (data.shape, data.dtype)
            elif b._requires_grad:
                edge_a = meta_a = None
            else:
                return kernel_runner(a, b)
            if b._requires_grad:
                fn = b._grad_fn
                edge_b = (b, 0) if fn is None else (fn, b._output_nr)
                data = b._data
                meta_b = (data.shape, data.dtype)
            else:
                edge_b = meta_b = None
            mode.enabled = False
            try:
                out, backward = formula(a, b, **keywords) if keywords else formula(a, b)
            finally:
                mode.enabled = True
            info = infos.get(backward.__code__) or backward_plan(overload, backward)
            node = new(FormulaNode)     # FormulaNode.__init__, inlined (as in record_unary)
            node.next_edges = (edge_a, edge_b)
            meta_key = (meta_a, meta_b)
            node.input_meta, node.needs_input_grad = shared_inputs.get(meta_key) or _share_inputs(meta_key)
            node.num_outputs = 1
            node.seq = tick()
            node.overload = overload
            node.backward_fn = backward
            node.saved = ()
            node.swaps = False
            node.list_lengths = None
            node.takes_mask = info[0]
            if out._requires_grad or out is a or out is b:
                out = out.detach()
            is_output = out._data.dtype.kind == "f"
            if is_output:
                out._grad_fn = node
                out._output_nr = 0
                out._requires_grad = True
            if info[1]:
                _save_inspected(node, backward, info[1], out, is_output, (a, b))
            return out
        return record_binary

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
        if general:
            return record_formula(overload, args + tuple(keywords.values()), out, backward)
        edges = []
        meta = []
        for i in positions:
            t = args[i]
            if t._requires_grad:
                fn = t._grad_fn
                edges.append((t, 0) if fn is None else (fn, t._output_nr))
                data = t._data
                meta.append((data.shape, data.dtype))
            else:
                edges.append(None)
                meta.append(None)
        meta_key = tuple(meta)
        input_meta, needs_input_grad = shared_inputs.get(meta_key) or _share_inputs(meta_key)
        takes_mask, inspected = infos.get(backward.__code__) or backward_plan(overload, backward)
        node = FormulaNode(overload, backward, tuple(edges), input_meta, 1, needs_input_grad, None, takes_mask)
        if out._requires_grad or any(out is args[i] for i in positions):
            out = out.detach()
        is_output = out._data.dtype.kind == "f"
        if is_output:
            out._grad_fn = node
            out._output_nr = 0
            out._requires_grad = True
        if inspected:
            _save_inspected(node, backward, inspected, out, is_output, args)
        return out
    return record


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
