"""The AttributeError of a name the engine lacks, saying whether torch has it."""
from __future__ import annotations

import sys


def missing_attribute(module: str, torch_module: str, name: str) -> AttributeError:
    """``module 'reference_engine.nn.functional' has no attribute 'x'``, and, when torch is
    loaded and ``torch_module`` has ``name``, that torch has it and the engine does not (the
    engine never imports torch itself: it works without it)."""
    message = f"module '{module}' has no attribute '{name}'"
    torch_namespace = sys.modules.get(torch_module)
    if not name.startswith("__") and torch_namespace is not None and hasattr(torch_namespace, name):
        message += f": {torch_module}.{name} exists, but the reference engine does not provide it"
    return AttributeError(message)
