"""What a command needs beyond the base install, said in one line (DESIGN section 4).

Lint, ``transpile``, ``rule`` and ``emit-yaml`` run on the base install. Building
and loading C++, ``import-yaml``, ``coverage`` and the proofs read or run the
installed torch; without it they stop with :func:`torch_missing`'s line, never
a traceback or an internal-error diagnostic.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

TORCH_INSTALL = "python3 -m pip install 'derivatives-transpiler[torch]'"
REPOSITORY = Path(__file__).resolve().parent.parent


class TorchMissing(ImportError):
    """Raised where torch (or torchgen, which ships with it) is needed and not installed."""

    def __init__(self, what: str):
        super().__init__(f"{what} needs torch (torch==2.13.0, not installed); install it with: {TORCH_INSTALL}")


def has_torch() -> bool:
    """Whether ``import torch`` would find torch (without importing it)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except ImportError:
        return False


def torch_missing(command: str) -> str | None:
    """The one line ``command`` prints when torch is not installed; None when it is."""
    return None if has_torch() else str(TorchMissing(command))


def repository_missing(command: str, path: str) -> str | None:
    """The one line ``command`` prints when it runs from an installed package, which lacks the
    repository's ``path`` (its tests); None in a clone."""
    if (REPOSITORY / path).exists():
        return None
    return (f"{command} runs the repository's {path}, which an installed package does not have; "
            "run it in a clone of derivatives-transpiler (`python3 -m pip install -e '.[test]'`)")
