"""The dispatcher: overload resolution by schema binding, kernels for every declared op, errors."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import formulas
import reference_engine as engine
from formulas import FORMULAS, NONDIFFERENTIABLE, at
from reference_engine.dispatch import TENSOR_API_OPERATORS, dispatcher
from reference_engine.kernels import KERNELS


def f64(values, requires_grad=False):
    return engine.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


DECLARED = sorted(set(FORMULAS) | set(NONDIFFERENTIABLE) | {s.split("(")[0] for s in TENSOR_API_OPERATORS})


@pytest.mark.parametrize("op", DECLARED)
def test_every_declared_operator_has_a_kernel_taking_its_arguments(op):
    kernel = KERNELS.get(op)
    assert kernel is not None, f"no NumPy kernel for declared operator {op}"
    n_args = engine.op(op).signature.n_args
    if isinstance(kernel, np.ufunc):
        assert kernel.nin == n_args
    else:
        inspect.signature(kernel).bind(*([None] * n_args))     # raises TypeError on an arity mismatch


def test_overload_resolution_by_binding():
    x = f64([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    assert at.sum(x).grad_fn.name() == "SumBackward0"
    assert at.sum(x, [0]).grad_fn.name() == "SumDimIntListBackward0"
    assert at.sum(x, dim=[1], keepdim=True).shape == (2, 1)
    assert at.sum(x, 1).shape == (2,)                        # int[1] takes a bare int
    assert at.mul(x, x).grad_fn.name() == "MulTensorBackward0"
    assert at.mul(x, 2.0).grad_fn.name() == "MulScalarBackward0"  # exact match beats wrapping 2.0
    assert (x * 2.0).grad_fn.name() == "MulScalarBackward0"
    assert at.add(x, 1.0).grad_fn.name() == "AddScalarBackward0"  # exact match beats wrapping 1.0
    assert at.atan2(x, 1.0).grad_fn.name() == "Atan2Backward0"     # no atan2 with a Scalar: 1.0 is wrapped


def test_resolution_is_cached_per_argument_types():
    packet = dispatcher.packet("sum")
    packet.cache.clear()
    x = f64([1.0, 2.0])
    at.sum(x)
    at.sum(x, [0])
    at.sum(f64([3.0]))
    assert len(packet.cache) == 2


def test_scalar_type_accepts_engine_and_numpy_dtypes():
    x = f64([1.5, 2.5])
    assert at._to_copy(x, dtype=engine.float32).dtype is engine.float32
    assert at._to_copy(x, dtype=np.float32).dtype is engine.float32


def test_calls_that_match_no_overload_list_the_schemas():
    x = f64([1.0])
    with pytest.raises(TypeError, match=r"(?s)at.sum\(Tensor, str\) matches no declared overload:\n.*sum.dim_IntList"):
        at.sum(x, "0")
    with pytest.raises(TypeError, match="unexpected keyword argument 'axis'"):
        at.sum(x, axis=0)
    with pytest.raises(TypeError, match="missing required argument 'dim'"):
        engine.op("sum.dim_IntList")(x)
    # an operator that takes one tensor and nothing else: Python's own refusal, naming it
    with pytest.raises(TypeError, match=r"sin\(\) takes 1 positional argument but 2 were given"):
        x.sin(2)
    with pytest.raises(TypeError, match=r"sin\(\) got an unexpected keyword argument 'out'"):
        at.sin(x, out=x)


def test_an_undeclared_operator_is_a_clear_error():
    with pytest.raises(AttributeError, match="operator 'frobnicate' is not declared: add a formula"):
        at.frobnicate(f64([1.0]))


def test_declared_operators_become_tensor_methods():
    x = f64([0.5, 1.0])
    np.testing.assert_allclose(x.exp().numpy(), np.exp([0.5, 1.0]))
    np.testing.assert_allclose(x.sum().numpy(), 1.5)
    assert x.sizes() == [2]          # metadata methods are not replaced by operators


def test_another_backend_can_take_over_at_for_a_block():
    class Recorder:
        def __init__(self):
            self.calls = []

        def call(self, name, args, kwargs):
            self.calls.append(name)
            return "recorded"

    recorder = Recorder()
    with formulas.use_backend(recorder):
        assert at.sin(1.0) == "recorded"
    assert recorder.calls == ["sin"]
    assert isinstance(at.sin(f64([0.0])), engine.Tensor)      # back to the engine


def test_view_kernels_share_the_version_counter_only_when_they_alias():
    x = f64(np.arange(6.0))
    view = x.view([2, 3])
    assert view._version is x._version
    copy = x * 1.0
    assert copy._version is not x._version


def test_specialised_runners_agree_with_the_generic_path():
    rng = np.random.default_rng(4)
    x, c = f64(rng.standard_normal(5), requires_grad=True), f64(rng.standard_normal(5))
    fast = x + c                                  # packet path: cached recording runner
    generic = engine.op("add.Tensor")(x, c)       # bind + Overload.run
    assert fast.grad_fn.name() == generic.grad_fn.name() == "AddTensorBackward0"
    np.testing.assert_array_equal(fast.detach().numpy(), generic.detach().numpy())
    (g_fast,) = engine.grad((fast * c).sum(), x)
    (g_generic,) = engine.grad((generic * c).sum(), x)
    np.testing.assert_array_equal(g_fast.numpy(), g_generic.numpy())
    plain = c + c                                 # same types, nothing requires grad: kernel only
    assert plain.grad_fn is None and not plain.requires_grad
    with engine.no_grad():
        assert (x + c).grad_fn is None            # grad mode off: kernel only
