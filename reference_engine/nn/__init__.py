"""``engine.nn``: the functional interface only (``engine.nn.functional``); the engine has no
modules (``torch.nn.Linear``...)."""
from __future__ import annotations

from reference_engine.missing import missing_attribute
from reference_engine.nn import functional

__all__ = ["functional"]


def __getattr__(name: str) -> object:
    raise missing_attribute(__name__, "torch.nn", name)
