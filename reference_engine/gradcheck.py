"""``gradcheck`` and ``gradgradcheck``: analytic Jacobians against central differences.

The analytic Jacobian is built row by row with ``grad`` (one-hot
``grad_outputs``); the numerical one by perturbing each input element by
``±eps`` (float64 only). A mismatch raises :class:`GradcheckError` naming the
output, the input, the worst element and both values.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from reference_engine.engine import grad
from reference_engine.tensor import Tensor


class GradcheckError(RuntimeError):
    """Analytic and numerical gradients disagree (or the check cannot run)."""


def _as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _differentiable_inputs(inputs: tuple) -> list[Tensor]:
    found = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
    for i, t in enumerate(found):
        if t._data.dtype != np.float64:
            raise GradcheckError(f"gradcheck needs float64 inputs; differentiable input {i} is "
                                 f"{t._data.dtype} (finite differences are too coarse otherwise)")
    if not found:
        raise GradcheckError("gradcheck: no input requires grad")
    return found


def _float_outputs(outputs: Any) -> list[Tensor]:
    return [o for o in _as_tuple(outputs) if isinstance(o, Tensor) and o.is_floating_point()]


def _checked_positions(outputs: list[Tensor]) -> list[int]:
    """The floating outputs checked, as torch's gradcheck does: those that require grad (an output
    the op declares non-differentiable, such as ``native_layer_norm``'s ``mean``, is left out), or
    every one when none does (its numerical Jacobian must then be zero)."""
    differentiable = [i for i, o in enumerate(outputs) if o.requires_grad]
    return differentiable or list(range(len(outputs)))


def _numerical_jacobians(fn: Callable[..., Any], inputs: tuple, diff_inputs: list[Tensor],
                         outputs: list[Tensor], positions: list[int], eps: float) -> list[list[np.ndarray]]:
    """``[output][input]`` matrices of shape (output numel, input numel); ``outputs`` are the
    floating outputs at ``positions`` among ``fn``'s."""
    jacobians = [[np.zeros((o._data.size, t._data.size)) for t in diff_inputs] for o in outputs]
    for j, t in enumerate(diff_inputs):
        data = t._data
        for k in range(data.size):
            where = np.unravel_index(k, data.shape)
            original = data[where]
            data[where] = original + eps
            plus = [_float_outputs(fn(*inputs))[i]._data.copy() for i in positions]
            data[where] = original - eps
            minus = [_float_outputs(fn(*inputs))[i]._data.copy() for i in positions]
            data[where] = original
            for i, (p, m) in enumerate(zip(plus, minus)):
                jacobians[i][j][:, k] = ((p - m) / (2 * eps)).reshape(-1)
    return jacobians


def _analytical_jacobians(diff_inputs: list[Tensor], outputs: list[Tensor]) -> list[list[np.ndarray]]:
    jacobians = [[np.zeros((o._data.size, t._data.size)) for t in diff_inputs] for o in outputs]
    for i, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        for row in range(out._data.size):
            seed = np.zeros(out._data.size, out._data.dtype)
            seed[row] = 1
            grads = grad(out, diff_inputs, Tensor(seed.reshape(out._data.shape)), retain_graph=True,
                         allow_unused=True)
            for j, g in enumerate(grads):
                if g is not None:
                    jacobians[i][j][row, :] = g._data.reshape(-1)
    return jacobians


def _unravel(index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(index, shape)) if shape else ()


def gradcheck(fn: Callable[..., Any], inputs: Any, *, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, raise_exception: bool = True) -> bool:
    """Check the gradients of ``fn`` at ``inputs`` against central finite differences."""
    inputs = _as_tuple(inputs)
    diff_inputs = _differentiable_inputs(inputs)
    all_outputs = _float_outputs(fn(*inputs))
    positions = _checked_positions(all_outputs)
    outputs = [all_outputs[i] for i in positions]
    analytical = _analytical_jacobians(diff_inputs, outputs)
    numerical = _numerical_jacobians(fn, inputs, diff_inputs, outputs, positions, eps)
    for i, out in enumerate(outputs):
        for j, t in enumerate(diff_inputs):
            a, n = analytical[i][j], numerical[i][j]
            bad = ~np.isclose(a, n, rtol=rtol, atol=atol, equal_nan=False)
            if not bad.any():
                continue
            error = np.abs(a - n)
            worst = int(np.argmax(np.where(bad, error, -1)))
            row, col = divmod(worst, a.shape[1])
            relative = error / np.maximum(np.abs(n), np.finfo(np.float64).tiny)
            message = (
                f"Jacobian mismatch for output {i} with respect to input {j}: max abs error "
                f"{error[bad].max():.3g}, max rel error {relative[bad].max():.3g} "
                f"(atol={atol}, rtol={rtol}); worst at output element {_unravel(row, out.shape)}, "
                f"input element {_unravel(col, t.shape)}: numerical {float(n[row, col])!r}, "
                f"analytical {float(a[row, col])!r}; {int(bad.sum())} of {bad.size} entries differ")
            if raise_exception:
                raise GradcheckError(message)
            return False
    return True


def gradgradcheck(fn: Callable[..., Any], inputs: Any, grad_outputs: Sequence[Tensor] | None = None, *,
                  eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3, seed: int = 0,
                  raise_exception: bool = True) -> bool:
    """Check second derivatives: ``gradcheck`` of the map (inputs, grad_outputs) -> input gradients."""
    inputs = _as_tuple(inputs)
    _differentiable_inputs(inputs)     # validates: float64, at least one requires grad
    outputs = [o for o in _float_outputs(fn(*inputs)) if o.requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(seed)
        grad_outputs = [Tensor(rng.standard_normal(o.shape), requires_grad=True) for o in outputs]
    grad_outputs = list(grad_outputs)
    n_inputs = len(inputs)

    def first_derivative(*args: Any) -> tuple:
        outs = [o for o in _float_outputs(fn(*args[:n_inputs])) if o.requires_grad]
        wrt = [t for t in args[:n_inputs] if isinstance(t, Tensor) and t.requires_grad]
        grads = grad(outs, wrt, args[n_inputs:], create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_derivative, (*inputs, *grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
