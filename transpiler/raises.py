"""The ``raise`` statement of the formula language: a formula refuses a derivative as torch does.

A backward, jvp or helper may say ``raise NotImplementedError("...")`` (or one of the other
error types below) with one plain string literal: the reference engine runs it as Python, the
C++ emits the ``TORCH_CHECK`` macro that throws the same Python error type with the same text
(``TORCH_CHECK_NOT_IMPLEMENTED`` is torch's ``NotImplementedError``), and lint (DB108) reports
any other form, which neither back end could reproduce. derivatives.yaml's
``not_implemented("name")`` is ``raise NotImplementedError(not_implemented_message("name"))``'s
text: "the derivative for 'name' is not implemented."
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

#: Python error type -> the c10 macro whose exception torch turns into that type in Python.
TORCH_CHECKS = {
    "NotImplementedError": "TORCH_CHECK_NOT_IMPLEMENTED",
    "RuntimeError": "TORCH_CHECK",
    "ValueError": "TORCH_CHECK_VALUE",
    "TypeError": "TORCH_CHECK_TYPE",
    "IndexError": "TORCH_CHECK_INDEX",
}


@dataclass(frozen=True)
class RaisedError:
    """What a ``raise`` statement of the formula language raises."""

    error_type: str      # a key of TORCH_CHECKS
    message: str         # the literal's value

    @property
    def torch_check(self) -> str:
        """The C++ macro that throws it."""
        return TORCH_CHECKS[self.error_type]


def raised_error(node: cst.Raise) -> RaisedError | None:
    """The error ``node`` raises, or ``None`` when it is not the language's form:
    ``raise <one of TORCH_CHECKS>("<a plain string literal>")``, no ``from``."""
    if node.cause is not None or not isinstance(node.exc, cst.Call):
        return None
    return called_error(node.exc)


def called_error(call: cst.Call) -> RaisedError | None:
    """The error ``call`` makes (``NotImplementedError("...")``), or ``None`` when it is not the
    language's form (:func:`raised_error`)."""
    if not isinstance(call.func, cst.Name):
        return None
    if call.func.value not in TORCH_CHECKS or len(call.args) != 1 or call.args[0].keyword is not None \
            or call.args[0].star:
        return None
    literal = call.args[0].value
    if not isinstance(literal, (cst.SimpleString, cst.ConcatenatedString)):
        return None
    message = literal.evaluated_value
    if not isinstance(message, str):      # a bytes literal
        return None
    return RaisedError(call.func.value, message)


def not_implemented_message(name: str) -> str:
    """torch's text for derivatives.yaml's ``not_implemented("name")``."""
    return f"the derivative for '{name}' is not implemented."


#: :func:`not_implemented_message`'s texts, whatever the name.
NOT_IMPLEMENTED = re.compile(re.escape(not_implemented_message("\0")).replace(re.escape("\0"), "[^']+"))
