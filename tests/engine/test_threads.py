"""Grad mode is per thread, as in torch: threads doing their own forward/backward and no_grad
blocks never change each other's recording."""
from __future__ import annotations

import threading

import numpy as np
import torch

import reference_engine as engine


def _run_in_threads(*targets):
    errors = []

    def guarded(target):
        def run():
            try:
                target()
            except BaseException as error:      # reported by the test, not lost in the thread
                errors.append(error)
        return run

    threads = [threading.Thread(target=guarded(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


def test_overlapping_no_grad_blocks_in_two_threads_leave_grad_mode_on():
    inside_a, inside_b, a_left = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def thread_a():
        with engine.no_grad():
            inside_a.set()
            inside_b.wait(10)
        a_left.set()
        seen["a after"] = engine.is_grad_enabled()

    def thread_b():
        inside_a.wait(10)
        seen["b before"] = engine.is_grad_enabled()        # A's no_grad is A's
        with engine.no_grad():
            inside_b.set()
            a_left.wait(10)
        seen["b after"] = engine.is_grad_enabled()

    _run_in_threads(thread_a, thread_b)
    assert seen == {"a after": True, "b before": True, "b after": True}
    assert engine.is_grad_enabled()


class _Rendezvous(engine.Function):
    """Identity whose backward waits until the other thread has run its forward."""

    arrived = threading.Event()
    proceed = threading.Event()

    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, grad):
        _Rendezvous.arrived.set()
        _Rendezvous.proceed.wait(10)
        return grad


def test_a_backward_in_one_thread_does_not_switch_recording_off_in_another():
    values = np.array([0.5, -1.0, 2.0])
    results = {}

    def thread_a():     # backward (grad mode off while it runs) paused in the middle
        x = engine.tensor(values, requires_grad=True)
        (_Rendezvous.apply(x.sin()) * 3.0).sum().backward()
        results["a"] = x.grad.numpy()

    def thread_b():     # forward and backward while A's backward is paused
        _Rendezvous.arrived.wait(10)
        x = engine.tensor(values, requires_grad=True)
        y = (x.exp() * x).sum()
        _Rendezvous.proceed.set()
        (g,) = engine.grad(y, [x])
        results["b"] = g.numpy()

    _run_in_threads(thread_a, thread_b)
    xt = torch.tensor(values, requires_grad=True)
    (ga,) = torch.autograd.grad((xt.sin() * 3.0).sum(), [xt])
    (gb,) = torch.autograd.grad((xt.exp() * xt).sum(), [xt])
    np.testing.assert_allclose(results["a"], ga.numpy(), rtol=1e-12)
    np.testing.assert_allclose(results["b"], gb.numpy(), rtol=1e-12)


def test_many_threads_get_their_own_gradients():
    results = {}

    def worker(k):
        def run():
            for _ in range(50):
                x = engine.tensor(np.linspace(-1.0, 1.0, 5) * k, requires_grad=True)
                with engine.no_grad():
                    c = x * 2.0
                (g,) = engine.grad((x.tanh() * c).sum(), [x])
            results[k] = g.numpy()
        return run

    _run_in_threads(*(worker(k) for k in range(1, 5)))
    for k, g in results.items():
        xt = torch.tensor(np.linspace(-1.0, 1.0, 5) * k, requires_grad=True)
        (gt,) = torch.autograd.grad((xt.tanh() * (xt.detach() * 2.0)).sum(), [xt])
        np.testing.assert_allclose(g, gt.numpy(), rtol=1e-12)
