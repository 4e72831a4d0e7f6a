"""Shape rules, part three: matmul, einsum and numpy.linalg's functions (abstract.py says what
a shape rule is). numpy.linalg computes in float32 when every input is float32, in float64
otherwise, and refuses float16 (``LINALG``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .abstract import FLOAT64, SAME, broadcast_shapes, promote, resolve, strong
from .schema import ShapeRuleError


def LINALG(ds: Sequence[Any]) -> np.dtype:  # noqa: N802 (read as a word)
    """numpy.linalg's dtype: float32 when every input is, float64 otherwise; float16
    refused."""
    out = np.dtype(np.float32)
    for d in map(strong, ds):
        if d == np.float16:
            raise ShapeRuleError("array type float16 is unsupported in linalg")
        out = out if d == np.float32 else FLOAT64
    return out


def _matrices(x: tuple, square: bool = False) -> tuple:
    """A stack of matrices (square ones when ``square``), or ShapeRuleError."""
    x = tuple(x)
    if len(x) < 2 or square and x[-1] != x[-2]:
        kind = "square matrices" if square else "matrices"
        raise ShapeRuleError(f"needs {kind} (at least two dimensions), got shape {x}")
    return x


def square(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """cholesky, inv: square matrices in, the same shape out."""
    return _matrices(shapes[0], square=True), LINALG(dtypes)


def powered(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """matrix_power: square matrices; the input's dtype, numpy.linalg's for n < 0 (inv)."""
    shape = _matrices(shapes[0], square=True)
    if attrs["n"] < 0:
        return shape, LINALG(dtypes)
    d = SAME(dtypes)
    return shape, d if attrs["n"] < 2 else resolve(np.matmul, d, d)


def determinant(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """det, slogdet: one number per square matrix."""
    return _matrices(shapes[0], square=True)[:-2], LINALG(dtypes)


def eigh(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """eigh: n eigenvalues or (n, n) eigenvectors per square matrix."""
    x = _matrices(shapes[0], square=True)
    return (x[:-1] if attrs["part"] == "eigenvalues" else x), LINALG(dtypes)


def pinv(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """pinv: (..., m, n) -> (..., n, m); numpy answers empty matrices in their own dtype."""
    x = _matrices(shapes[0])
    return x[:-2] + (x[-1], x[-2]), SAME(dtypes) if 0 in x[-2:] else LINALG(dtypes)


def qr(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """qr (reduced): Q (..., m, k), R (..., k, n) with k = min(m, n)."""
    x = _matrices(shapes[0])
    m, n = x[-2:]
    k = min(m, n)
    return x[:-2] + ((m, k) if attrs["part"] == "Q" else (k, n)), LINALG(dtypes)


def svd(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """svd (reduced): U (..., m, k), S (..., k), Vh (..., k, n) with k = min(m, n)."""
    x = _matrices(shapes[0])
    m, n = x[-2:]
    k = min(m, n)
    part = {"U": (m, k), "S": (k,), "Vh": (k, n)}[attrs["part"]]
    return x[:-2] + part, LINALG(dtypes)


def solve(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """numpy 2's solve: b is one vector when 1-D, otherwise stacked columns."""
    a, b = _matrices(shapes[0], square=True), tuple(shapes[1])
    if not b or b[-1 if len(b) == 1 else -2] != a[-1]:
        raise ShapeRuleError(f"a right-hand side of shape {b} for matrices of shape {a}")
    if len(b) == 1:
        return a[:-1], LINALG(dtypes)
    return broadcast_shapes(a[:-2], b[:-2]) + b[-2:], LINALG(dtypes)


def lstsq(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """lstsq of one (m, n) matrix and b of shape (m,) or (m, k): (n,) or (n, k)."""
    a, b = tuple(shapes[0]), tuple(shapes[1])
    if len(a) != 2 or len(b) not in (1, 2) or a[0] != b[0]:
        raise ShapeRuleError(f"lstsq needs a (m, n) matrix and b of (m,) or (m, k), got {a}, {b}")
    return (a[1],) + b[1:], LINALG(dtypes)


def matmul(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """numpy's matmul: stacked matrices, a 1-D operand read as a vector."""
    a, b = tuple(shapes[0]), tuple(shapes[1])
    if not a or not b:
        raise ShapeRuleError("matmul needs inputs of at least one dimension")
    a2, b2 = (1,) + a if len(a) == 1 else a, b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ShapeRuleError(f"shapes {a} and {b} do not multiply")
    out = broadcast_shapes(a2[:-2], b2[:-2]) + (a2[-2:-1] if len(a) > 1 else ()) + \
        (b2[-1:] if len(b) > 1 else ())
    return out, resolve(np.matmul, *(strong(d) for d in dtypes))


def einsum(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """einsum with explicit subscripts: the output letters' sizes (a size 1 broadcasts
    across operands; a letter repeated in one term needs one size)."""
    lhs, out = attrs["subscripts"].split("->")
    sizes: dict = {}
    for term, shape in zip(lhs.split(","), shapes):
        own: dict = {}
        for c, n in zip(term, shape):
            if own.setdefault(c, n) != n:
                raise ShapeRuleError(f"the letter {c!r} has sizes {own[c]} and {n} in one operand")
            sizes[c] = max(sizes.get(c, n), n)
    return tuple(sizes[c] for c in out), promote(*(strong(d) for d in dtypes))
