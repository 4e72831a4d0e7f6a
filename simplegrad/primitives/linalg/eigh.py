"""eigh: eigenvalues and eigenvectors of the symmetric part (a + a^T) / 2.

One primitive with two parts (``eigenvalues``, ``eigenvectors``); its conventions (ascending
values, fixed signs, distinct values for the vectors' derivative) are in ``decomposition.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ...errors import ArgumentError
from ..core import Case, Primitive, error, mapped, register
from .decomposition import column_signs, decompose, inverse_gaps, record_parts
from .matrices import as_row, check_square, matmuls, swap_last, sym
from .samplers import symmetric_spread

if TYPE_CHECKING:
    from ...engine.variable import Variable
    from .. import PrimitiveMethods

# ---------------------------------------------------------------- eigh


def _eigh_numpy(a: np.ndarray) -> tuple:
    w, v = np.linalg.eigh((a + np.swapaxes(a, -1, -2)) / 2)
    return w, v * column_signs(v)


def _eigh(a, part):
    w, v = decompose("eigh", _eigh_numpy, a)
    return w if part == "eigenvalues" else v


def _eig_values(o: PrimitiveMethods, a):
    return o.apply(EIGH, (a,), {"part": "eigenvalues"})


def _eig_vectors(o: PrimitiveMethods, a):
    return o.apply(EIGH, (a,), {"part": "eigenvectors"})


def _eigh_vjp(o: PrimitiveMethods, g, out, a, part):
    if part == "eigenvalues":       # V diag(g) V^T
        v = _eig_vectors(o, a)
        return o.matmul(o.mul(v, as_row(o, g)), swap_last(o, v))
    f = inverse_gaps(o, _eig_values(o, a), a, "eigh", "eigenvectors")
    return sym(o, matmuls(o, out, o.mul(f, o.matmul(swap_last(o, out), g)), swap_last(o, out)))


def _eigh_jvp(o: PrimitiveMethods, ts, out, a, part):
    ds = sym(o, ts[0])
    if part == "eigenvalues":       # dw_i = v_i^T dS v_i
        v = _eig_vectors(o, a)
        return o.sum(o.mul(v, o.matmul(ds, v)), axis=-2)
    f = inverse_gaps(o, _eig_values(o, a), a, "eigh", "eigenvectors")
    return o.matmul(out, o.mul(f, matmuls(o, swap_last(o, out), ds, out)))


EIGH = register(Primitive(
    "eigh", _eigh, [_eigh_vjp], _eigh_jvp,
    lambda args, attrs, render: f"eigh({args[0]}).{attrs['part']}",
    [Case(((3, 3),), {"part": "eigenvalues"}), Case(((3, 3),), {"part": "eigenvectors"}),
     Case(((2, 3, 3),), {"part": "eigenvalues"}), Case(((2, 2, 2),), {"part": "eigenvectors"}),
     Case(((1, 1),), {"part": "eigenvectors"})],
    domain=(symmetric_spread,), plain=False, batch=mapped("eigh")))

# ---------------------------------------------------------------- Ops methods


class EighResult(NamedTuple):
    """The eigenvalues (ascending) and eigenvectors (columns) of a symmetric matrix."""

    eigenvalues: Any
    eigenvectors: Any


def _uplo(ops: PrimitiveMethods, fn: str, a: Any, uplo: str) -> None:
    if uplo not in ("L", "U"):
        raise error(fn, (a,), f"UPLO must be 'L' or 'U', got {uplo!r}", ArgumentError)


class EighOps:
    """eigh and eigvalsh as methods of an Ops."""

    def eigh(self, a: Any, UPLO: str = "L", name: Any = None) -> EighResult:  # noqa: N803
        """Eigenvalues (ascending) and eigenvectors of the symmetric part (a + a^T) / 2."""
        check_square(self, "eigh", a)
        _uplo(self, "eigh", a, UPLO)
        return EighResult(*record_parts(self, EIGH, a, ("eigenvalues", "eigenvectors"), name))

    def eigvalsh(self, a: Any, UPLO: str = "L", name: str | None = None) -> Variable:  # noqa: N803
        """Eigenvalues (ascending) of the symmetric part (a + a^T) / 2."""
        check_square(self, "eigvalsh", a)
        _uplo(self, "eigvalsh", a, UPLO)
        return self.apply(EIGH, (a,), {"part": "eigenvalues"}, name)
