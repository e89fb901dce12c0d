"""gradcheck / gradgradcheck catch wrong derivatives and say where."""
from __future__ import annotations

import numpy as np
import pytest

import reference_engine as engine
from formulas import at
from reference_engine import Function, GradcheckError


def f64(values, requires_grad=False):
    return engine.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


def _sin_with_doubled_gradient(self):
    result = at.sin(self)

    def backward(grad):
        return grad * at.cos(self) * 2.0
    return result, backward


def test_gradcheck_reports_the_worst_element_and_errors():
    op = engine.define("engine_test_wrong_sin(Tensor self) -> Tensor", kernel=np.sin,
                       formula=_sin_with_doubled_gradient)
    x = f64([[0.1, 0.2], [0.3, 1.4]], requires_grad=True)
    with pytest.raises(GradcheckError) as info:
        engine.gradcheck(op, (x,))
    message = str(info.value)
    assert "Jacobian mismatch for output 0 with respect to input 0" in message
    assert "worst at output element (0, 0), input element (0, 0)" in message   # cos(0.1) is the largest error
    assert "numerical 0.99500416" in message
    assert "analytical 1.99000833" in message and "4 of 16 entries differ" in message
    assert "max abs error 0.995" in message and "max rel error 1" in message
    assert engine.gradcheck(op, (x,), raise_exception=False) is False


class DetachedCos(Function):
    """First derivative right, second derivative dropped (cos computed off the graph)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.detach().cos()


def test_gradgradcheck_catches_a_missing_second_derivative():
    x = f64([0.4, -0.9], requires_grad=True)
    assert engine.gradcheck(DetachedCos.apply, (x,))
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        engine.gradgradcheck(DetachedCos.apply, (x,))


def test_gradcheck_needs_float64_inputs_that_require_grad():
    with pytest.raises(GradcheckError, match="needs float64 inputs; differentiable input 0 is float32"):
        engine.gradcheck(lambda t: t.sin(), (engine.tensor([1.0], requires_grad=True),))
    with pytest.raises(GradcheckError, match="no input requires grad"):
        engine.gradcheck(lambda t: t.sin(), (f64([1.0]),))


def test_gradcheck_handles_several_outputs_and_non_tensor_arguments():
    x = f64(np.array([[0.3, -1.2, 0.7], [2.0, 0.1, -0.4]]), requires_grad=True)
    assert engine.gradcheck(lambda t, dim: t.max(dim), (x, 1))        # values checked, indices skipped
    assert engine.gradgradcheck(lambda t, dim: (t.sin(), t * t), (x, 0))


def test_gradcheck_leaves_out_outputs_that_do_not_require_grad_as_torch():
    """An output that carries no gradient (native_layer_norm's mean and rstd) is not checked while
    another one does; when none does, every output's numerical Jacobian must be zero."""
    x = f64([[0.3, -1.2, 0.7], [2.0, 0.1, -0.4]], requires_grad=True)
    assert engine.gradcheck(lambda t: engine.native_layer_norm(t, [3], None, None, 1e-5), (x,))
    assert engine.gradcheck(lambda t: (t.sin(), t.detach() * 2.0), (x,))
    with pytest.raises(engine.GradcheckError, match="Jacobian mismatch for output 0"):
        engine.gradcheck(lambda t: t.detach() * 2.0, (x,))
