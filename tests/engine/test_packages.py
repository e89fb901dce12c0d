"""Formula packages beside the library: per-package registries and their own operator table.

The derivatives.yaml corpus (``transpile import-yaml``, from the installed torch)
declares ``sin``, ``pow``... like the library. Importing it must leave the
library's entries, the Tensor methods and ``engine.<op>`` as they were, and
:func:`reference_engine.packages.package_dispatcher` runs its formulas on purpose.
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import formulas
import reference_engine as engine
from reference_engine.packages import package_dispatcher
from reference_engine.scalars import scalar_value
from transpiler.cpp.expressions import SCALAR_METHODS as EMITTED_SCALAR_METHODS
from transpiler.formula_facts import SCALAR_METHODS
from transpiler.yaml_import.importer import import_yaml

PACKAGE = "engine_test_corpus"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The corpus imported into a package on ``sys.path`` (removed afterwards)."""
    import torchgen

    yaml_path = Path(torchgen.__file__).parent / "packaged" / "autograd" / "derivatives.yaml"
    root = tmp_path_factory.mktemp("corpus")
    package = root / PACKAGE
    package.mkdir()
    for name, text in import_yaml(yaml_path.read_text(encoding="utf-8"), str(yaml_path)).files.items():
        (package / name).write_text(text, encoding="utf-8")
    sys.path.insert(0, str(root))
    try:
        yield PACKAGE
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


@pytest.fixture(scope="module")
def table(corpus: str):
    """The corpus's operator table, built once (its formulas' front-end models are read on first use)."""
    return package_dispatcher(corpus)


def _torch_sin_gradients(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = torch.tensor(values, requires_grad=True)
    (first,) = torch.autograd.grad(x.sin().sum(), [x], create_graph=True)
    (second,) = torch.autograd.grad(first.sum(), [x])
    return first.detach().numpy(), second.numpy()


def _engine_sin_gradients(values: np.ndarray, sin) -> tuple[np.ndarray, np.ndarray]:
    x = engine.tensor(values, dtype=engine.float64, requires_grad=True)
    (first,) = engine.grad(sin(x).sum(), [x], create_graph=True)
    (second,) = engine.grad(first.sum(), [x])
    return first.detach().numpy(), second.numpy()


VALUES = np.array([0.3, -1.2, 2.5])


def test_importing_a_corpus_leaves_the_library_as_it_was(corpus: str):
    library_sin = formulas.FORMULAS["sin"]
    package = importlib.import_module(corpus)
    for module in ("derivatives_000", "derivatives_009"):       # abs ... and sin
        importlib.import_module(f"{package.__name__}.{module}")
    assert "sin" in formulas.registry(corpus).formulas          # the corpus's own entry
    assert formulas.FORMULAS["sin"] is library_sin
    assert library_sin.fn.__module__.startswith("formulas.")
    first, second = _torch_sin_gradients(VALUES)
    for sin in (lambda x: x.sin(), engine.sin, engine.op("sin")):
        got_first, got_second = _engine_sin_gradients(VALUES, sin)
        np.testing.assert_allclose(got_first, first, rtol=1e-12)
        np.testing.assert_allclose(got_second, second, rtol=1e-12)
    assert engine.tensor(VALUES, requires_grad=True).sin().grad_fn.overload.formula.__module__.startswith("formulas.")


def test_a_package_table_runs_the_corpus_formulas(corpus: str, table):
    sin = table.overload("sin")
    x = engine.tensor(VALUES, dtype=engine.float64, requires_grad=True)
    assert sin(x).grad_fn.overload.formula.__module__ == f"{corpus}.derivatives_009"
    first, second = _torch_sin_gradients(VALUES)
    got_first, got_second = _engine_sin_gradients(VALUES, sin)
    np.testing.assert_allclose(got_first, first, rtol=1e-12)
    np.testing.assert_allclose(got_second, second, rtol=1e-12)
    assert engine.gradcheck(sin, (x,)) and engine.gradgradcheck(sin, (x,))


def test_a_functions_manual_name_runs_the_librarys_helper(table):
    """The corpus's pow.Tensor_Scalar calls FunctionsManual's pow_backward: the library's @helper."""
    pow_ = table.overload("pow.Tensor_Scalar")
    x = engine.tensor(VALUES + 3.0, dtype=engine.float64, requires_grad=True)
    (got,) = engine.grad(pow_(x, 2.5).sum(), [x])
    t = torch.tensor(VALUES + 3.0, requires_grad=True)
    (expected,) = torch.autograd.grad(t.pow(2.5).sum(), [t])
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12)
    assert engine.gradcheck(lambda a: pow_(a, 2.5), (x,))


def test_a_name_with_no_library_helper_still_refuses_to_run(table):
    """_to_copy's corpus backward calls FunctionsManual's _to_copy_backward, which the library lacks."""
    to_copy = table.overload("_to_copy")
    x = engine.tensor(VALUES, dtype=engine.float64, requires_grad=True)
    with pytest.raises(NotImplementedError, match="_to_copy_backward is a C\\+\\+ function of libtorch"):
        engine.grad(to_copy(x).sum(), [x])


def _first_and_second(op, engine_fn, torch_fn, values):
    """First and second derivatives of ``sum(fn(x) ** 3)``: the engine's through ``op``, torch's."""
    x = engine.tensor(values, dtype=engine.float64, requires_grad=True)
    (first,) = engine.grad((engine_fn(op, x) ** 3).sum(), [x], create_graph=True)
    (second,) = engine.grad(first.sum(), [x])
    t = torch.tensor(values, requires_grad=True)
    (expected,) = torch.autograd.grad((torch_fn(t) ** 3).sum(), [t], create_graph=True)
    (expected_second,) = torch.autograd.grad(expected.sum(), [t])
    return (first.detach().numpy(), second.numpy()), (expected.detach().numpy(), expected_second.numpy())


@pytest.mark.parametrize(("name", "engine_fn", "torch_fn"), [
    # GradMode::is_enabled() (whether the backward records a graph) is the engine's grad mode
    ("logit", lambda op, a: op(a), torch.logit),
    ("silu", lambda op, a: op(a), torch.nn.functional.silu),
    # FunctionsManual's unsqueeze_to(grad, sizes) and unsqueeze_to(grad, dim, sizes): the
    # library's unsqueeze_to and unsqueeze_to__dim, chosen by the call's arguments as in C++
    ("squeeze", lambda op, a: op(a), torch.squeeze),
    ("squeeze.dim", lambda op, a: op(a, 1), lambda a: torch.squeeze(a, 1)),
    ("squeeze.dims", lambda op, a: op(a, [1, 2]), lambda a: torch.squeeze(a, [1, 2])),
])
def test_cpp_names_with_an_engine_meaning_run_as_torchs(table, name, engine_fn, torch_fn):
    values = np.linspace(0.2, 0.7, 6).reshape(3, 1, 1, 2)
    got, expected = _first_and_second(table.overload(name), engine_fn, torch_fn, values)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-12, err_msg=name)


def test_formulas_calling_scalar_methods_run_as_torchs(table):
    """The corpus's sub.Tensor and rsub.Scalar call ``alpha.conj()`` (c10::Scalar's method; every
    method's value: below) and sub.Tensor leaves a broadcast gradient unreduced, as torch's
    engine allows: first and second derivatives equal torch's."""
    x, y = np.linspace(0.5, 1.5, 3).reshape(3, 1), np.linspace(-1, 1, 4).reshape(1, 4)
    for name, engine_fn, torch_fn, values in (
            ("sub.Tensor", lambda op, a, b: op(a, b, alpha=2), lambda a, b: torch.sub(a, b, alpha=2), (x, y)),
            ("rsub.Scalar", lambda op, a: op(a, 0.7, 3), lambda a: torch.rsub(a, 0.7, alpha=3), (x - 1.0,))):
        op = table.overload(name)
        inputs = [engine.tensor(v, dtype=engine.float64, requires_grad=True) for v in values]
        firsts = engine.grad((engine_fn(op, *inputs) ** 3).sum(), inputs, create_graph=True)
        seconds = engine.grad(sum(g.sum() for g in firsts), inputs, allow_unused=True)
        tensors = [torch.tensor(v, requires_grad=True) for v in values]
        expected = torch.autograd.grad((torch_fn(*tensors) ** 3).sum(), tensors, create_graph=True)
        expected_seconds = torch.autograd.grad(sum(g.sum() for g in expected), tensors, allow_unused=True)
        for got, want in zip([*firsts, *seconds], [*expected, *expected_seconds]):
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, err_msg=name)


# Scalar arguments carry c10::Scalar's methods in a formula that calls them (reference_engine.scalars):
# each method's value is torch's.

def test_the_engine_gives_the_methods_the_emitter_writes():
    assert SCALAR_METHODS == set(EMITTED_SCALAR_METHODS)


@pytest.mark.parametrize("number", [3, -2.7, 0.1, 1e40, 2 - 3j])
def test_scalar_methods_equal_torchs(number):
    """torch's value of each method, read from a 0-dim tensor of the number (c10::Scalar's own
    are not exposed to Python): conjugate, single precision (overflowing to inf), truncation."""
    dtype = {int: torch.int64, float: torch.float64, complex: torch.complex128}[type(number)]
    value, t = scalar_value(number), torch.tensor(number, dtype=dtype)
    assert value == number and isinstance(value, type(number))
    assert value.conj() == t.conj().item() and type(value.conj()) is type(value)
    assert value.isComplex() == t.is_complex() and value.isFloatingPoint() == t.is_floating_point()
    if t.is_complex():
        for method in ("toDouble", "toFloat", "toLong"):
            with pytest.raises(RuntimeError, match="cannot be converted"):
                getattr(value, method)()
        return
    assert value.toDouble() == t.double().item()
    assert value.toFloat() == t.to(torch.float32).item()
    if abs(number) < 2 ** 63:
        assert value.toLong() == t.long().item()
    assert scalar_value(True) is True and scalar_value(None) is None


def test_only_parameters_whose_methods_are_called_are_found():
    """A fact of the front-end's, read from the formula's ``def`` (here one without a model: its
    ``def`` in this file): a Scalar method called on ``alpha``; ``beta`` used as a number, and a
    Tensor's ``conj()``, give none."""
    def formula(self, other, alpha, beta):
        result = self
        def backward(grad):
            return grad * alpha.conj(), self.conj() * beta
        return result, backward
    op = engine.define("engine_test_scalar_methods(Tensor self, Tensor other, Scalar alpha, Scalar beta) -> Tensor",
                       lambda self, other, alpha, beta: self, formula)
    assert not op.facts.modelled and {"alpha", "self"} <= op.facts.scalar_method_receivers
    assert [op.signature.names[i] for i in op.scalar_methods] == ["alpha"]


def test_the_corpus_formulas_calling_scalar_methods_are_found(corpus, table):
    """The Scalar parameters of the corpus's formulas in one file (sub, rsub and the others of
    derivatives_010.py) given c10::Scalar's methods: those derivatives.yaml calls ``.conj()`` on."""
    module = f"{corpus}.derivatives_010"
    found = {}
    for name, declared in formulas.registry(corpus).formulas.items():
        overload = table.overload(name)
        if declared.fn.__module__ == module and overload.scalar_parameters:
            found[name] = {overload.signature.names[i] for i in overload.scalar_methods}
    assert {name: called for name, called in found.items() if called} == {
        "sub.Tensor": {"alpha"}, "rsub.Tensor": {"alpha"}, "rsub.Scalar": {"alpha"}}
    assert len(found) > 3       # others with a Scalar parameter, no method called on it
