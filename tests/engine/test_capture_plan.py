"""The engine's capture plan comes from the front-end's model of the formula file.

``formula_node.backward_plan`` skips, at record time, the cells the front-end
settles (``transpiler.frontend.settled_captures``: inputs never rebound,
metadata); every other cell is inspected, so an intermediate is guarded. The
formulas below are written to a file, imported and declared as engine operators.
"""
from __future__ import annotations

import gc
import importlib.util
import linecache
import re
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import reference_engine as engine
from transpiler import formula_facts as facts_store
from transpiler.formula_facts import StaleFormulaError

SOURCE = textwrap.dedent('''\
    from formulas import at, derivative


    @derivative("engine_plan_metadata(Tensor self) -> Tensor")
    def metadata(self):
        result = at.sin(self)
        count = self.numel() * 2          # metadata computed from metadata: settled
        dims = len(self.sizes())

        def backward(grad):
            return grad * at.cos(self) * (count // 2) / (dims * self.numel())
        return result, backward


    @derivative("engine_plan_rebound(Tensor self) -> Tensor")
    def rebound(self):
        result = at.sin(self)
        self = at.cos(self)               # the parameter now holds an intermediate

        def backward(grad):
            return grad * self
        return result, backward


    @derivative("engine_plan_nonlocal(Tensor self) -> Tensor")
    def rebound_by_a_nested_function(self):
        result = at.sin(self)

        def swap():
            nonlocal self
            self = at.cos(self)
        swap()

        def backward(grad):
            return grad * self
        return result, backward


    @derivative("engine_plan_output(Tensor self) -> Tensor")
    def output(self):
        result = at.exp(self)

        def backward(grad):
            return grad * result
        return result, backward


    @derivative("engine_plan_returned_input(Tensor self) -> Tensor")
    def returned_input(self):
        result = self                     # the output is the input, returned as is

        def backward(grad):
            return grad * result / result
        return result, backward


    LAST = None
    CACHE = {}
    LOG = []


    @derivative("engine_plan_global(Tensor self) -> Tensor")
    def in_a_global(self):
        global LAST
        result = at.sin(self)
        LAST = at.cos(self)

        def backward(grad):
            return grad * LAST
        return result, backward


    @derivative("engine_plan_cache(Tensor self) -> Tensor")
    def in_a_module_dict(self):
        result = at.sin(self)
        CACHE.update(cosine=at.cos(self))

        def backward(grad):
            return grad * CACHE["cosine"]
        return result, backward


    @derivative("engine_plan_scaled(Tensor self, Scalar alpha) -> Tensor")
    def scaled(self, alpha):
        result = at.mul(self, alpha)

        def backward(grad):
            return grad * alpha.conj()    # c10::Scalar's method: alpha is given it
        return result, backward


    @derivative("engine_plan_log(Tensor self) -> Tensor")
    def logged(self):
        result = at.sin(self)
        LOG.append(self.numel())          # a module list written, never read by the backward

        def backward(grad):
            return grad * at.cos(self)
        return result, backward
''')


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("plan") / "engine_plan_formulas.py"
    path.write_text(SOURCE, encoding="utf-8")
    module = _load(path, "engine_plan_formulas")
    kernels = {"metadata": np.sin, "rebound": np.sin, "rebound_by_a_nested_function": np.sin, "output": np.exp,
               "returned_input": np.positive, "in_a_global": np.sin, "in_a_module_dict": np.sin, "logged": np.sin}
    ops = {}
    for function, kernel in kernels.items():
        formula = getattr(module, function)
        schema = next(s for s in SOURCE.split('@derivative("')[1:] if f"def {function}(" in s).split('")')[0]
        ops[function] = engine.define(schema, kernel, formula)
    yield ops
    del sys.modules["engine_plan_formulas"]


def _inspected(out: engine.Tensor) -> tuple[str, ...]:
    backward = out.grad_fn.backward_fn
    [plan] = out.grad_fn.overload.backward_plans.values()
    return tuple(backward.__code__.co_freevars[i] for i in plan.inspected)


def test_inputs_and_metadata_computed_from_metadata_are_settled(plans):
    x = engine.tensor([0.2, 0.9], dtype=engine.float64, requires_grad=True)
    out = plans["metadata"](x)
    assert _inspected(out) == ()
    (g,) = engine.grad(out.sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), np.cos([0.2, 0.9]))     # (4 // 2) / (1 * 2) = 1
    (h,) = engine.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), -np.sin([0.2, 0.9]))


def test_an_output_is_inspected(plans):
    x = engine.tensor([0.2, 0.9], dtype=engine.float64, requires_grad=True)
    assert _inspected(plans["output"](x)) == ("result",)


@pytest.mark.parametrize("function, saved", [("output", (("output", 0),)), ("returned_input", ())])
def test_the_models_output_cell_is_saved_as_the_general_recorder_saves_it(plans, function, saved):
    """The one-output recorder shadows the model's output cell (``result``) directly when it
    holds the output; an input returned as is is a new tensor object, so the cell holds the
    input, and the general look keeps it as it is."""
    x = engine.tensor([0.2, 0.9], dtype=engine.float64, requires_grad=True).exp()   # a non-leaf
    packet = engine.dispatcher.packet(plans[function].name)
    out = packet.op(x)
    assert packet.cache[engine.Tensor].recording is not None        # the one-output recorder ran
    [plan] = out.grad_fn.overload.backward_plans.values()
    assert plan.output_cell == 0
    node = out.grad_fn
    assert tuple((s.role, s.extra) for s in node.saved) == saved
    assert node.backward_fn.__closure__[0].cell_contents is not out     # no tensor -> node -> tensor cycle
    general = plans[function](x)                # Overload.__call__: bound, then record()
    assert tuple((s.role, s.extra) for s in general.grad_fn.saved) == saved
    (g,) = engine.grad(out.sum(), x)
    np.testing.assert_allclose(g.numpy(), out.detach().numpy() if function == "output" else np.ones(2))


@pytest.mark.parametrize("function", ["rebound", "rebound_by_a_nested_function"])
def test_a_rebound_input_is_inspected_and_guarded(plans, function):
    x = engine.tensor([0.2, 0.9], dtype=engine.float64, requires_grad=True)
    out = plans[function](x)
    assert _inspected(out) == ("self",)
    (g,) = engine.grad(out.sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), np.cos([0.2, 0.9]))
    with pytest.raises(RuntimeError, match="needs the gradient of 'self'"):
        engine.grad(g.sum(), x)


#: the formulas above whose backward reads a module global the forward writes: not recorded
REFUSED = {"in_a_global": "LAST", "in_a_module_dict": "CACHE"}


@pytest.mark.parametrize("function, name", REFUSED.items())
def test_a_module_global_the_forward_writes_and_the_backward_reads_is_refused(plans, function, name):
    """Which module globals a formula writes (``global LAST``, ``CACHE.update(...)``) and which
    its backward reads are facts of the front-end's model, not read from bytecode."""
    facts = plans[function].facts
    assert facts.modelled and facts.globals_read["backward"] == {name}
    x = engine.tensor([0.2, 0.9], dtype=engine.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match=f"writes the module global '{name}', which its backward reads"):
        plans[function](x)
    facts = plans["logged"].facts         # written, not read: recorded
    assert facts.globals_written.changed == {"LOG"} and facts.globals_read["backward"] == frozenset()
    (g,) = engine.grad(plans["logged"](x).sum(), x)
    np.testing.assert_allclose(g.numpy(), np.cos([0.2, 0.9]))


def test_a_formula_without_a_file_is_not_recorded():
    """No file, no model: what it keeps in module globals is unknown, so recording refuses
    (forward mode already does); without grad it runs."""
    namespace = {"__name__": "engine_plan_no_file"}
    exec(compile(SOURCE, "<no file>", "exec"), namespace)
    op = engine.define("engine_plan_no_file(Tensor self) -> Tensor", np.sin, namespace["metadata"])
    x = engine.tensor([0.2, 0.9], dtype=engine.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="the front-end has no model of its formula .*Define the formula "
                                           "with `def` in a module file"):
        op(x)
    with engine.no_grad():
        np.testing.assert_allclose(op(x).numpy(), np.sin([0.2, 0.9]))


@pytest.mark.parametrize("function, refused", [("metadata", None), ("in_a_global", "LAST")])
def test_a_formula_in_a_notebook_cell_is_read_from_linecache(function, refused):
    """IPython and Jupyter compile each cell under a name that is no file and keep its source in
    ``linecache``: the front-end reads the formula's ``def`` there, so it records (or refuses a
    module global the backward reads, as for a file)."""
    filename = f"<ipython-input-{function}>"
    linecache.cache[filename] = (len(SOURCE), None, SOURCE.splitlines(True), filename)
    try:
        namespace = {"__name__": f"engine_plan_cell_{function}"}
        exec(compile(SOURCE, filename, "exec"), namespace)
        op = engine.define(f"engine_plan_cell_{function}(Tensor self) -> Tensor", np.sin, namespace[function])
        x = engine.tensor([0.2, 0.9], dtype=engine.float64, requires_grad=True)
        if refused:
            with pytest.raises(RuntimeError, match=f"writes the module global '{refused}', which its backward reads"):
                op(x)
        else:
            (g,) = engine.grad(op(x).sum(), x)
            np.testing.assert_allclose(g.numpy(), np.cos([0.2, 0.9]))
    finally:
        del linecache.cache[filename]


def test_the_scalar_methods_of_a_formula_in_a_notebook_cell_are_read_from_linecache():
    """The Scalar parameters a formula calls c10::Scalar methods on are read from its ``def`` in the
    cell's source too (``alpha.conj()``: ``alpha`` is given the methods, a plain float has none)."""
    filename = "<ipython-input-scaled>"
    linecache.cache[filename] = (len(SOURCE), None, SOURCE.splitlines(True), filename)
    try:
        namespace = {"__name__": "engine_plan_cell_scaled"}
        exec(compile(SOURCE, filename, "exec"), namespace)
        op = engine.define("engine_plan_cell_scaled(Tensor self, Scalar alpha) -> Tensor", np.multiply,
                           namespace["scaled"])
        x = engine.tensor([0.2, 0.9], dtype=engine.float64, requires_grad=True)
        (g,) = engine.grad(op(x, 3.0).sum(), x)
        np.testing.assert_allclose(g.numpy(), [3.0, 3.0])
        assert not op.facts.modelled and [op.signature.names[i] for i in op.scalar_methods] == ["alpha"]
    finally:
        del linecache.cache[filename]


def test_a_file_edited_after_import_is_reported_until_it_is_reloaded(tmp_path: Path):
    """The facts are the front-end's model of the file: a file changed since the formula was
    imported is not the code that runs, so recording refuses (naming the file and the way out)
    rather than use another file's facts; after a reload the facts are the new file's."""
    path = tmp_path / "engine_plan_edited.py"
    path.write_text("\n" + SOURCE, encoding="utf-8")
    module = _load(path, "engine_plan_edited")
    scaled_schema = "engine_plan_edited_scaled(Tensor self, Scalar alpha) -> Tensor"
    try:
        path.write_text("\n\n" + SOURCE, encoding="utf-8")   # edited, not reloaded
        op = engine.define("engine_plan_edited(Tensor self) -> Tensor", np.sin, module.metadata)
        scaled = engine.define(scaled_schema, np.multiply, module.scaled)   # its Scalar methods: facts too
        x = engine.tensor([0.2, 0.9], dtype=engine.float64, requires_grad=True)
        for call in (lambda: op(x), lambda: scaled(x, 2.0)):
            with pytest.raises(StaleFormulaError, match=rf"{re.escape(str(path))}: the file changed .*reload"):
                call()
        with engine.no_grad():      # nothing recorded: no facts needed
            np.testing.assert_allclose(op(x).numpy(), np.sin([0.2, 0.9]))
            np.testing.assert_allclose(scaled(x, 2.0).numpy(), [0.4, 1.8])
        module = _load(path, "engine_plan_edited")     # the reload
        op = engine.define("engine_plan_edited(Tensor self) -> Tensor", np.sin, module.metadata)
        assert _inspected(op(x)) == ()
        scaled = engine.define(scaled_schema, np.multiply, module.scaled)
        for _ in range(2):          # the first record reads the facts, the second takes the runner made after
            (g,) = engine.grad(scaled(x, 2.0).sum(), x)
            np.testing.assert_allclose(g.numpy(), [2.0, 2.0])
        assert [scaled.signature.names[i] for i in scaled.scalar_methods] == ["alpha"]
    finally:
        del sys.modules["engine_plan_edited"]


def test_facts_are_read_once_per_file_and_kept_with_the_operator(plans, monkeypatch):
    x = engine.tensor([0.2, 0.9], dtype=engine.float64, requires_grad=True)
    plans["metadata"](x)
    read = []
    monkeypatch.setattr(facts_store, "_read_file", lambda *args: read.append(args))
    for function, op in plans.items():      # the file was read for the first: the others reuse its facts
        if function not in REFUSED:
            op(x)
        assert op.facts.modelled
    assert read == []
    facts = plans["output"].facts
    assert plans["output"].facts is facts                    # kept, not recomputed
    assert facts.settled == frozenset() and facts.mask_parameter is None and facts.jvp is None   # result: inspected
    assert plans["metadata"].facts.settled == {"self", "count", "dims"}
    with pytest.raises(AttributeError):                      # frozen
        facts.settled = frozenset()


def test_the_facts_hold_no_syntax_tree():
    """The facts are plain data: once they are taken from a file's model, its libcst trees go
    (kept, tens of thousands of nodes, every full collection of the user's program scans them)."""
    import libcst

    x = engine.tensor([0.2, 0.9], dtype=engine.float64, requires_grad=True)
    (x.sin() * x).sum().backward()
    assert facts_store._FILES
    seen, objects = set(), [facts_store._FILES]
    while objects:
        held = objects.pop()
        if id(held) in seen or isinstance(held, type):      # a class leads to every module
            continue
        seen.add(id(held))
        assert not isinstance(held, libcst.CSTNode), f"the facts hold {type(held).__name__}"
        objects.extend(gc.get_referents(held))
