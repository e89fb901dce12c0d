"""Ctx-style rules for ``torch.autograd.Function`` subclasses in any Python file.

DB100/DB101 (an intermediate kept on ctx), DB102 (backward writes a saved
tensor in place), DB104 (``nonlocal``/``global`` in backward). These rules read
Python's own ``ast``: the driver already needs that tree for the syntax check,
and it is two orders of magnitude faster than libcst on a tree the size of
torch's (the ctx rules offer no rewrite, so they need no lossless tree).
"""
from transpiler.lint.ctx.tree import derive_from_tree, use_tree

__all__ = ["CtxReport", "Finding", "check_module", "derive_from_tree", "use_tree"]
_RULES = ("CtxReport", "Finding", "check_module")


def __getattr__(name: str) -> object:
    """The rules (:mod:`transpiler.lint.ctx.classes`), imported when a file is first checked: a run
    whose files' findings are all cached (``transpile`` after an edit of one formula file) never
    loads them (a tenth of its imports)."""
    if name not in _RULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from transpiler.lint.ctx import classes

    return getattr(classes, name)
