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
import linecache
import textwrap
from keyword import iskeyword
from types import CodeType, FunctionType
from typing import Any, Callable, Iterable, NamedTuple, Sequence

from reference_engine.grad_mode import grad_mode
from reference_engine.graph import RELEASED_MESSAGE, Node, SavedTensor, poisoned_alias
from reference_engine.tensor import Tensor, last_write, ticks
from reference_engine.views import mark_recorded

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


class FormulaNode(Node):
    """``grad_fn`` of a formula's outputs."""

    __slots__ = ("overload", "backward_fn", "takes_mask", "saved", "needs_input_grad", "list_lengths",
                 "swaps")

    #: Each field of a new node and what a recorder sets it to, in the recorder's names (its
    #: backward, the :class:`BackwardPlan`...): ``__init__`` and the generated recorders
    #: (:func:`formula_recorder`) are made from this one table, as dataclasses make ``__init__``.
    FIELDS = {
        "next_edges": "edges",                  # Node's fields
        "input_meta": "input_meta",
        "num_outputs": "num_outputs",
        "seq": "tick()",
        "overload": "overload",
        "backward_fn": "backward",
        "takes_mask": "plan.takes_mask",
        "saved": "()",                          # a list of Saved once something is saved
        "swaps": "False",                       # whether a first-order backward must swap cells (a SEQUENCE)
        "needs_input_grad": "needs_input_grad",
        "list_lengths": "list_lengths",         # None without Tensor[] arguments
    }

    # __init__(overload, backward, edges, input_meta, needs_input_grad, plan, num_outputs=1,
    # list_lengths=None) is made from FIELDS below the class.

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


# ----------------------------------------------------------------------------- generated code
_COMPILED: dict[str, CodeType] = {}     # generated source -> its code, compiled once


def generated_function(source: str, namespace: dict[str, Any]) -> Callable[..., Any]:
    """The function that ``source`` defines, with ``namespace`` as its globals. Each distinct
    source is compiled once, its lines kept in :mod:`linecache` so that tracebacks and
    debuggers show them."""
    code = _COMPILED.get(source)
    if code is None:
        filename = f"<generated {len(_COMPILED)}: {source.split('(', 1)[0].removeprefix('def ')}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        code = _COMPILED[source] = compile(source, filename, "exec")
    defined: dict[str, Any] = {}
    exec(code, namespace, defined)
    (fn,) = defined.values()
    return fn


def _node_fields(indent: str) -> str:
    return "".join(f"{indent}node.{field} = {value}\n" for field, value in FormulaNode.FIELDS.items())


FormulaNode.__init__ = generated_function(     # type: ignore[method-assign]
    "def __init__(node, overload, backward, edges, input_meta, needs_input_grad, plan, num_outputs=1,\n"
    "             list_lengths=None):\n" + _node_fields("    "), {"tick": ticks.__next__})


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
        node = FormulaNode(overload, backward, edges, meta, needs, plan, 1, lengths)
        result = _attach(outputs, node, 0, held, output_nr)
    else:
        if overload.returns_kind == "list":
            node = ListOutputNode(overload, backward, edges, meta, needs, plan, len(outputs), lengths)
        else:
            node = FormulaNode(overload, backward, edges, meta, needs, plan, overload.num_differentiable_outputs,
                               lengths)
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


# ----------------------------------------------------------------------------- fast paths
# These are just optimizations of record() (tests/engine/test_fast_paths.py holds them to it).
# For one tensor output and no Tensor[] argument (nearly every operator) the runner of a call
# shape is generated from one template, with nothing left to look up at run time that the
# shape settles: recording costs one Python call besides the formula (benchmarks/engine.py
# --count: 7.8 calls per chain operator, 9.8 with hand-written runners sharing a tail function).

#: :func:`record` for a call shape of one tensor output, no ``Tensor[]`` argument, its tensor
#: arguments Tensors: what the shape settles (which arguments are tensors, the keywords, one
#: output) is written in, the node's fields are :attr:`FormulaNode.FIELDS`.
_ONE_OUTPUT_RECORDER = """\
def record_{shape}({arguments}):
    if not ({any_requires_grad}):
        return kernel_runner({arguments})
{collect_edges}
    mode.enabled = False
    try:
        out, backward = formula({arguments}{keywords})
    finally:
        mode.enabled = True
    plan = plans.get(backward.__code__) or backward_plan(overload, backward)
    input_meta, needs_input_grad = shared_inputs.get(meta_key) or share_inputs(meta_key)
    node = new(FormulaNode)
{node_fields}
    if out._requires_grad or {out_is_an_argument}:      # an input returned as is: a new tensor object
        out = out.detach()
    is_output = out._data.dtype.kind == "f"
    if is_output:
        out._grad_fn = node
        out._output_nr = 0
        out._requires_grad = True
    if plan.inspected or plan.has_defaults:     # held: the arguments (a number's id is never a live tensor's)
        save(node, backward, plan, {{{held}}}, {{id(out): 0}} if is_output else {{}})
    return {result}
"""

#: The edge and input metadata of the tensor argument ``{a}`` (``{i}``: its place among them).
_EDGE = """\
    fn = {a}._grad_fn
    edge{i}, meta{i} = ({a}, 0) if fn is None else (fn, {a}._output_nr), ({a}._data.shape, {a}._data.dtype)
"""
_EDGE_IF_REQUIRED = """\
    if {a}._requires_grad:
{edge}\
    else:
        edge{i} = meta{i} = None
"""


def _tuple_display(items: Iterable[str]) -> str:
    items = list(items)
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def formula_recorder(overload: Any, kernel_runner: Callable[..., Any], arity: int,
                     keywords: dict[str, Any]) -> Callable[..., Any]:
    """The runner of a formula called with ``arity`` positional arguments, its tensor
    arguments as Tensors (keyword-only arguments at ``keywords``): it runs the kernel when
    no input requires grad, else the formula below autograd and :func:`record` (for one
    tensor output and no ``Tensor[]`` argument, a recorder made from ``_ONE_OUTPUT_RECORDER``)."""
    positions = overload.signature.tensor_positions
    if (overload.signature.tensor_list_positions or overload.num_differentiable_outputs != 1
            or overload.returns_kind != "tensor"):
        formula, mode = overload.formula, grad_mode

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
            result = record(overload, args + tuple(keywords.values()), out, backward)
            return mark_recorded(result) if overload.is_view else result
        return record_general

    if not positions:       # nothing can require grad
        return kernel_runner
    arguments = [f"a{i}" for i in range(arity)]
    tensors = [arguments[i] for i in positions]
    if len(tensors) == 1:
        edges = _EDGE.format(a=tensors[0], i=0)
    else:
        edges = "".join(_EDGE_IF_REQUIRED.format(a=a, i=i, edge=textwrap.indent(_EDGE.format(a=a, i=i), "    "))
                        for i, a in enumerate(tensors))
    per_tensor = range(len(tensors))
    edges += (f"    edges, meta_key = {_tuple_display(f'edge{i}' for i in per_tensor)}, "
              f"{_tuple_display(f'meta{i}' for i in per_tensor)}\n")
    # keyword-only arguments passed by name, or as a dict where Python reserves the name
    named = all(name.isidentifier() and not iskeyword(name) for name in keywords)
    source = _ONE_OUTPUT_RECORDER.format(
        shape="_".join(["tensor" if i in positions else "value" for i in range(arity)]),
        arguments=", ".join(arguments),
        any_requires_grad=" or ".join(f"{a}._requires_grad" for a in tensors),
        collect_edges=edges.rstrip("\n"),
        keywords="".join(f", {name}=keyword_{name}" for name in keywords) if named else ", **keywords",
        node_fields=_node_fields("    ").rstrip("\n"),
        out_is_an_argument=" or ".join(f"out is {a}" for a in arguments),
        held=", ".join(f"id({a})" for a in arguments),
        result="mark_recorded(out)" if overload.is_view else "out")
    return generated_function(source, {
        "overload": overload, "formula": overload.formula, "kernel_runner": kernel_runner, "keywords": keywords,
        "mode": grad_mode, "plans": overload.backward_plans, "backward_plan": backward_plan,
        "shared_inputs": _SHARED_INPUTS, "share_inputs": _share_inputs, "new": object.__new__,
        "FormulaNode": FormulaNode, "tick": ticks.__next__, "num_outputs": 1, "list_lengths": None,
        "save": _save, "mark_recorded": mark_recorded, **{f"keyword_{name}": keywords[name] for name in keywords}})


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
