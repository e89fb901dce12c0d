"""Formula packages other than the shipped library, run by the engine in a table of their own.

Every top-level package of formula files has its own registry
(:func:`formulas.registry`), so importing one (the derivatives.yaml corpus that
``transpile import-yaml`` writes, a user's ``myops``) never changes what the
library's operators, the Tensor methods and ``engine.<op>`` run.
:func:`package_dispatcher` gives a separate :class:`~reference_engine.dispatch.Dispatcher`
in which the package's formulas replace the library's of the same operator (the
kernels stay the engine's), for running them on purpose:
``package_dispatcher("derivatives").overload("sin")(x)``.
"""
from __future__ import annotations

import types
from typing import Any, Callable

import numpy as np

from formulas.dsl import LIBRARY, import_package_modules, registry
from reference_engine.dispatch import Dispatcher
from reference_engine.grad_mode import is_grad_enabled


def package_dispatcher(package: str) -> Dispatcher:
    """A table of the library's operators with the formulas of ``package`` (imported here,
    every module of it) in place of the library's. A name the package's formulas read that
    is not a Python function there (an imported corpus's C++ FunctionsManual helper) runs the
    library's ``@helper`` of that name when there is one, and its C++ class ``GradMode`` the
    engine's (:data:`CPP_NAMESPACES`)."""
    import_package_modules(package)
    table = Dispatcher((LIBRARY, registry(package.split(".", 1)[0])), helpers={**LIBRARY.helpers, **CPP_NAMESPACES})
    table.define(CONJ_SCHEMA, _conj, _conj_formula)
    return table


#: The C++ classes an imported formula reads as namespaces that run on the engine:
#: ``GradMode.is_enabled()`` is whether the backward records a graph (``create_graph=True``).
CPP_NAMESPACES = {"GradMode": types.SimpleNamespace(is_enabled=is_grad_enabled)}


#: derivatives.yaml's formulas conjugate everywhere (``grad * self.cos().conj()``); ``conj`` is
#: an ATen composite with no entry of its own there. The engine's dtypes are all real, where
#: it is the identity (torch returns ``self``), and so is its derivative.
CONJ_SCHEMA = "conj(Tensor(a) self) -> Tensor(a)"


def _conj(self: Any) -> Any:
    if np.iscomplexobj(self):
        raise TypeError("conj: the reference engine has no complex dtypes")
    return self


def _conj_formula(self: Any) -> tuple[Any, Callable[..., Any]]:
    result = self

    def backward(grad: Any) -> Any:
        return grad     # d conj(x) = conj(dx), and conj is the identity on real tensors
    return result, backward
