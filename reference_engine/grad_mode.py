"""Grad mode: whether operators record the graph (``no_grad``, ``enable_grad``).

One process-wide flag read on every operator call; the engine is single
threaded like the formulas it runs.
"""
from __future__ import annotations

import contextlib
from typing import Iterator


class _GradMode:
    __slots__ = ("enabled",)

    def __init__(self) -> None:
        self.enabled = True


grad_mode = _GradMode()


def is_grad_enabled() -> bool:
    """True when operators on tensors that require grad record a graph."""
    return grad_mode.enabled


@contextlib.contextmanager
def set_grad_enabled(enabled: bool) -> Iterator[None]:
    """Run the block with grad mode set to ``enabled``, restoring it afterwards."""
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
