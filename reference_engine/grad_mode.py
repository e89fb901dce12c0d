"""Grad mode: whether operators record the graph (``no_grad``, ``enable_grad``), per thread.

Every operator call reads ``grad_mode.enabled``, and every recorded formula
sets it off and on around its forward (which runs below autograd). As in
torch, the mode belongs to a thread: a new thread starts with grad mode on,
and one thread's ``no_grad()`` or backward never changes another's.

This is only an optimization: while the process runs a single Python thread,
``enabled`` is a plain slot (about 25 ns a read; a per-thread read costs
about four times that, some 10% of the chain benchmark). Before a second
thread can run engine code, :func:`per_thread` makes ``enabled`` a property
over per-thread storage: when the engine is imported with other threads
alive, and otherwise from a ``threading.setprofile`` hook, which runs in every
new ``threading.Thread`` before its target. The thread that ran alone keeps
its value; the change is never undone. (A thread started with
``_thread.start_new_thread`` bypasses the hook; it is caught when it enters
``no_grad``/``set_grad_enabled`` or runs a backward.)
"""
from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any, Iterator


class _GradMode:
    __slots__ = ("enabled",)

    def __init__(self) -> None:
        self.enabled = True


grad_mode = _GradMode()
_slot = _GradMode.enabled           # the slot's descriptor, kept when ``enabled`` becomes a property
_alone = threading.get_ident()      # the thread that runs alone while ``enabled`` is the slot
_per_thread = False
_switching = threading.Lock()


def per_thread() -> None:
    """Make grad mode thread-local from now on (idempotent)."""
    global _per_thread
    with _switching:
        if _per_thread:
            return
        storage = threading.local()
        get_ident = threading.get_ident

        def get(mode: _GradMode) -> bool:
            try:
                return storage.enabled
            except AttributeError:      # this thread's first read: the alone thread keeps its value
                value = storage.enabled = _slot.__get__(mode) if get_ident() == _alone else True
                return value

        def set_(mode: _GradMode, value: bool) -> None:
            storage.enabled = value

        _GradMode.enabled = property(get, set_)
        _per_thread = True


def check_thread() -> None:
    """Go per thread if this is not the thread that ran alone (for a thread the hook missed)."""
    if not _per_thread and threading.get_ident() != _alone:
        per_thread()


def _on_thread_start(frame: Any, event: str, arg: Any) -> None:
    """``threading.setprofile`` hook: runs once in each new thread, before its target."""
    sys.setprofile(_previous_profile)
    threading.setprofile(_previous_profile)
    per_thread()


_previous_profile = threading.getprofile()
if threading.active_count() > 1:
    per_thread()
else:
    threading.setprofile(_on_thread_start)


def is_grad_enabled() -> bool:
    """True when operators on tensors that require grad record a graph."""
    return grad_mode.enabled


@contextlib.contextmanager
def set_grad_enabled(enabled: bool) -> Iterator[None]:
    """Run the block with grad mode set to ``enabled``, restoring it afterwards."""
    check_thread()
    previous = grad_mode.enabled
    grad_mode.enabled = enabled
    try:
        yield
    finally:
        grad_mode.enabled = previous


def no_grad() -> contextlib.AbstractContextManager[None]:
    """Run the block without recording a graph."""
    return set_grad_enabled(False)


def enable_grad() -> contextlib.AbstractContextManager[None]:
    """Record a graph inside the block (e.g. within ``no_grad``)."""
    return set_grad_enabled(True)
