"""Testing your formulas: ``check_formula`` (``docs/testing.md``).

``from formulas.testing import check_formula`` costs nothing: torch and the checks load
when it is first called, and without torch it raises ``ImportError`` saying what to install.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable


def check_formula(formula: Callable[..., Any] | str, *inputs: Any, tiers: Iterable[str] | None = None,
                  package: str | None = None) -> list[Any]:
    """Run every applicable proof tier on ``formula`` (a ``@derivative`` function or an
    operator name of ``package``, default the shipped library) at ``inputs`` (the operator's
    arguments in schema order; none: inputs made from its schema). Raises one
    ``AssertionError`` naming the formula, tier, input, worst element with both values, the
    wrong term of the backward where one explains it, and a call that reproduces it."""
    from transpiler.prove.check import check_formula as run

    return run(formula, *inputs, tiers=tiers, package=package)


def prove_package(package: str, tiers: Iterable[str] | None = None) -> Callable[[str], None]:
    """A pytest test with one item per formula of ``package``, each running :func:`check_formula`
    on the package's own cases (``PROVE_CASES``) or inputs made from the schema:
    ``test_myops = prove_package("myops")`` in a test module."""
    import pytest

    from transpiler.prove.check import formula_names

    def test_formula(op: str) -> None:
        check_formula(op, package=package, tiers=tiers)

    test_formula.__name__ = f"test_{package}"
    return pytest.mark.parametrize("op", formula_names(package))(test_formula)
