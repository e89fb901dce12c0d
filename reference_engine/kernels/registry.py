"""The kernel table: ``KERNELS``, ``VIEW_OPS``, ``DEFAULT_KEYWORD_KERNELS`` and the ``@kernel`` decorator."""
from __future__ import annotations

from typing import Any, Callable


KERNELS: dict[str, Callable[..., Any]] = {}

# Kernels whose output may share memory with their first argument (torch view ops).
VIEW_OPS: set[str] = set()

# Kernels for calls that leave every keyword-only argument at its default (``a + b``, where
# ``alpha`` is 1): the same result as KERNELS' with those defaults, without the Python frame.
DEFAULT_KEYWORD_KERNELS: dict[str, Callable[..., Any]] = {}      # filled below


def kernel(*names: str, view: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn`` as the kernel of the operators ``names``."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for name in names:
            KERNELS[name] = fn
            if view:
                VIEW_OPS.add(name)
        return fn

    return register
