"""Matrix products: ``mm``, ``bmm``, ``matmul``, ``addmm`` and their relatives; the triangular solve; the
matrix exponential."""
from __future__ import annotations

from typing import Any

import numpy as np

from reference_engine.kernels.registry import kernel
from reference_engine.kernels.common import _BOOL, _scale


# ----------------------------------------------------------------------------- linear algebra
#: C++'s names of the element types, as torch's matrix products print them.
_CPP_TYPE_NAMES = {"float64": "double", "float32": "float", "int64": "long int", "bool": "bool"}


@kernel("mm")
def mm(x, other):
    if x.dtype is not other.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_CPP_TYPE_NAMES[x.dtype.name]} "
                           f"!= {_CPP_TYPE_NAMES[other.dtype.name]}")
    if x.dtype == _BOOL:
        raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
    return np.matmul(x, other)


def _add_product(bias, product, beta, alpha):
    """``beta * bias + alpha * product``; torch ignores the bias values (even NaN) when beta is 0."""
    product = _scale(product, alpha)
    if beta == 0:
        return np.broadcast_to(product, np.broadcast_shapes(np.shape(bias), product.shape)).copy()
    return product + _scale(bias, beta)


@kernel("addmm")
def addmm(bias, mat1, mat2, beta=1, alpha=1):
    return _add_product(bias, np.matmul(mat1, mat2), beta, alpha)


# ----------------------------------------------------------------------------- more matrix products
def _require_dims(name: str, **arrays: Any) -> None:
    """torch's dimension checks of the fixed-rank products (``bmm`` wants 3-D, ``mv`` 2-D and 1-D...)."""
    for label, (array, ndim) in arrays.items():
        if np.ndim(array) != ndim:
            raise RuntimeError(f"{name}: {label} must be a {ndim}D tensor, got {np.ndim(array)}D")


@kernel("bmm")
def bmm(x, mat2):
    _require_dims("bmm", self=(x, 3), mat2=(mat2, 3))
    return np.matmul(x, mat2)


@kernel("dot")
def dot(x, tensor):
    _require_dims("dot", self=(x, 1), tensor=(tensor, 1))
    return np.asarray(np.dot(x, tensor))


@kernel("mv")
def mv(x, vec):
    _require_dims("mv", self=(x, 2), vec=(vec, 1))
    return np.matmul(x, vec)


@kernel("outer", "ger")
def outer(x, vec2):
    _require_dims("outer", self=(x, 1), vec2=(vec2, 1))
    return np.multiply.outer(x, vec2)


@kernel("matmul")
def matmul(x, other):
    if np.ndim(x) == 0 or np.ndim(other) == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{np.ndim(x)}D and {np.ndim(other)}D")
    return np.asarray(np.matmul(x, other))


@kernel("addmv")
def addmv(x, mat, vec, beta=1, alpha=1):
    return _add_product(x, mv(mat, vec), beta, alpha)


@kernel("addr")
def addr(x, vec1, vec2, beta=1, alpha=1):
    return _add_product(x, outer(vec1, vec2), beta, alpha)


@kernel("baddbmm")
def baddbmm(x, batch1, batch2, beta=1, alpha=1):
    return _add_product(x, bmm(batch1, batch2), beta, alpha)


@kernel("addbmm")
def addbmm(x, batch1, batch2, beta=1, alpha=1):
    return _add_product(x, np.sum(bmm(batch1, batch2), axis=0), beta, alpha)


# ----------------------------------------------------------------------------- triangular solve
@kernel("linalg_solve_triangular")
def linalg_solve_triangular(a, b, upper, left=True, unitriangular=False):
    """``A X = B`` (``left``) or ``X A = B`` for the triangle of ``a`` that ``upper`` names (its diagonal
    taken as ones when ``unitriangular``); the other triangle is never read. Batch dims broadcast."""
    if unitriangular:
        triangle = (np.triu(a, 1) if upper else np.tril(a, -1)) + np.eye(a.shape[-1], dtype=a.dtype)
    else:
        triangle = np.triu(a) if upper else np.tril(a)
    if left:
        return _substitute(triangle, b, upper)
    return np.swapaxes(_substitute(np.swapaxes(triangle, -1, -2), np.swapaxes(b, -1, -2), not upper), -1, -2)


def _substitute(triangle, b, upper):
    """``triangle @ x = b`` by back (``upper``) or forward substitution, row by row, as BLAS's
    triangular solve does: no singularity check, so a zero on the diagonal gives torch's inf and
    NaN (``np.linalg.solve`` would raise). Batch dims broadcast."""
    batch = np.broadcast_shapes(triangle.shape[:-2], b.shape[:-2])
    t = np.broadcast_to(triangle, batch + triangle.shape[-2:])
    x = np.array(np.broadcast_to(b, batch + b.shape[-2:]), dtype=np.result_type(triangle, b))
    n = t.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in (range(n - 1, -1, -1) if upper else range(n)):
            solved = slice(i + 1, n) if upper else slice(0, i)
            known = np.einsum("...k,...kj->...j", t[..., i, solved], x[..., solved, :])
            x[..., i, :] = (x[..., i, :] - known) / t[..., i, i, None]
    return x


# ----------------------------------------------------------------------------- matrix exponential
#: Terms of the Taylor series of ``exp`` on a matrix scaled to norm <= 1/2: the remainder is below
#: ``0.5**19 / 19!``, far under float64's resolution.
_EXP_TERMS = 18


@kernel("linalg_matrix_exp")
def linalg_matrix_exp(a):
    """``exp(a)`` of each square matrix: scaling and squaring, ``exp(a) = exp(a / 2^s)^(2^s)``, with ``s``
    chosen so that the largest 1-norm of the batch is at most 1/2, and the Taylor series there."""
    if a.size == 0:
        return a.copy()
    norm = float(np.max(np.sum(np.abs(a), axis=-2)))
    squarings = max(0, int(np.ceil(np.log2(norm / 0.5)))) if norm > 0.5 else 0
    scaled = a / 2.0 ** squarings
    term = np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)
    result = term.copy()
    for k in range(1, _EXP_TERMS + 1):
        term = np.matmul(term, scaled) / k
        result = result + term
    for _ in range(squarings):
        result = np.matmul(result, result)
    return result
