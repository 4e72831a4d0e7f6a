"""What the linalg modules share: matrix pieces of rules, and the checks that an argument
holds matrices.

The pieces are written with primitives (``o.transpose``, ``o.reshape``, ``o.matmul``), so a
rule built from them is recorded like any other. Matrices are the last two axes of an array;
leading axes are a batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import ShapeError
from ..core import error, shape_of

if TYPE_CHECKING:
    from .. import PrimitiveMethods

# ---------------------------------------------------------------- rule pieces


def swap_last(o: PrimitiveMethods, x: Any) -> Any:
    """x with its last two axes exchanged (``.T`` for a matrix)."""
    nd = len(shape_of(x))
    return o.transpose(x) if nd == 2 else o.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def as_column(o: PrimitiveMethods, x: Any) -> Any:
    """(..., k) as (..., k, 1): a stack of vectors as one-column matrices; scales rows."""
    return o.reshape(x, shape_of(x) + (1,))


def as_row(o: PrimitiveMethods, x: Any) -> Any:
    """(..., k) as (..., 1, k): scales the columns of a matrix."""
    s = shape_of(x)
    return o.reshape(x, s[:-1] + (1, s[-1]))


def sym(o: PrimitiveMethods, x: Any) -> Any:
    """The symmetric part (x + x^T) / 2 of each matrix."""
    return o.mul(o.add(x, swap_last(o, x)), 0.5)


def hermitian(o: PrimitiveMethods, x: Any) -> Any:
    """The Hermitian part (x + x^H) / 2 of each matrix (the symmetric part of a real one)."""
    return o.mul(o.add(x, o.conj(swap_last(o, x))), 0.5)


def matmuls(o: PrimitiveMethods, *ms: Any) -> Any:
    """The product of the matrices ms, left to right."""
    out = ms[0]
    for m in ms[1:]:
        out = o.matmul(out, m)
    return out

# ---------------------------------------------------------------- argument checks


def check_square(ops: PrimitiveMethods, fn: str, a: Any) -> None:
    """Raise ShapeError unless a's last two axes are a square matrix."""
    s = shape_of(a)
    if len(s) < 2 or s[-1] != s[-2]:
        raise error(fn, (a,), "needs square matrices in the last two axes", ShapeError)


def check_matrices(ops: PrimitiveMethods, fn: str, a: Any) -> None:
    """Raise ShapeError unless a has at least two axes."""
    if len(shape_of(a)) < 2:
        raise error(fn, (a,), "needs matrices (at least 2 axes)", ShapeError)
