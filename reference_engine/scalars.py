"""``Scalar`` arguments with the methods formulas call on them (``alpha.conj()``, ``other.toDouble()``).

derivatives.yaml calls ``c10::Scalar``'s own methods on a ``Scalar`` argument, and the imported
formulas keep them (the C++ emitter writes them as they are). In Python a Scalar is a number,
which has none of them: an overload whose formula calls one on a Scalar parameter
(a fact of the front-end's, :attr:`transpiler.formula_facts.FormulaFacts.scalar_method_receivers`,
read when the formula first runs) gets those Scalar arguments as
:class:`ScalarInt`, :class:`ScalarFloat` or :class:`ScalarComplex` (:func:`scalar_value`): the
number itself (a subclass, so every operator takes it as that number, and arithmetic gives plain
numbers), with torch's meaning of each method
(:data:`transpiler.formula_facts.SCALAR_METHODS`, the ones the facts look for):

* ``conj()``: the complex conjugate; a real number is its own;
* ``toDouble()``, ``toLong()``: the number as a double (``float``) and an ``int64`` (truncated,
  as C++'s conversion); a complex one raises, as torch's does;
* ``toFloat()``: rounded to single precision, as torch's formula rounds it (a Python ``float``);
* ``isComplex()``, ``isFloatingPoint()``: the number's kind.

A ``bool`` Scalar stays a ``bool`` (Python cannot subclass it; no formula calls a method on one).
"""
from __future__ import annotations

from typing import Any

import numpy as np


def _not_real(value: complex, target: str) -> RuntimeError:
    return RuntimeError(f"value cannot be converted to type {target} without overflow: {value}")


class _RealScalar:
    """The methods a real ``Scalar`` shares (mixed into :class:`ScalarInt` and :class:`ScalarFloat`)."""

    __slots__ = ()

    def conj(self):
        return self

    def toDouble(self) -> float:  # noqa: N802 - c10::Scalar's name
        return float(self)

    def toFloat(self) -> float:  # noqa: N802
        return float(np.float32(self))

    def toLong(self) -> int:  # noqa: N802
        return int(self)

    def isComplex(self) -> bool:  # noqa: N802
        return False


class ScalarInt(_RealScalar, int):
    """An integer ``Scalar`` argument."""

    __slots__ = ()

    def isFloatingPoint(self) -> bool:  # noqa: N802
        """False: an integer Scalar is not floating point."""
        return False


class ScalarFloat(_RealScalar, float):
    """A floating ``Scalar`` argument."""

    __slots__ = ()

    def isFloatingPoint(self) -> bool:  # noqa: N802
        """True: a floating Scalar is floating point."""
        return True


class ScalarComplex(complex):
    """A complex ``Scalar`` argument."""

    __slots__ = ()

    def conj(self) -> ScalarComplex:
        """The complex conjugate, still a ``ScalarComplex``."""
        return ScalarComplex(self.conjugate())

    def toDouble(self) -> float:  # noqa: N802
        """Refused: a complex Scalar has no ``double`` value (the error torch raises)."""
        raise _not_real(self, "double")

    def toFloat(self) -> float:  # noqa: N802
        """Refused: a complex Scalar has no ``float`` value (the error torch raises)."""
        raise _not_real(self, "float")

    def toLong(self) -> int:  # noqa: N802
        """Refused: a complex Scalar has no ``int64_t`` value (the error torch raises)."""
        raise _not_real(self, "int64_t")

    def isComplex(self) -> bool:  # noqa: N802
        """True: a complex Scalar is complex."""
        return True

    def isFloatingPoint(self) -> bool:  # noqa: N802
        """False: a complex Scalar is not floating point."""
        return False


#: the number types a Scalar argument becomes, which the engine takes as those numbers
SCALAR_TYPES = (ScalarInt, ScalarFloat, ScalarComplex)
_BY_TYPE = {int: ScalarInt, float: ScalarFloat, complex: ScalarComplex}


def scalar_value(value: Any) -> Any:
    """``value`` with ``c10::Scalar``'s methods (a bool, None or a value of another type: as it is)."""
    kind = _BY_TYPE.get(type(value))
    if kind is None:
        if isinstance(value, np.number) and not isinstance(value, np.bool_):
            kind = ScalarComplex if np.iscomplexobj(value) else ScalarFloat if np.issubdtype(
                type(value), np.floating) else ScalarInt
            return kind(value.item())
        return value
    return kind(value)
