"""eigh: eigenvalues and eigenvectors of the symmetric part (a + a^T) / 2.

One primitive with two parts (``eigenvalues``, ``eigenvectors``); its conventions (ascending
values, fixed signs, distinct values for the vectors' derivative) are in ``decomposition.py``.
``np.linalg.eigh`` and ``np.linalg.eigvalsh`` on a Variable (``numpy_eigh``,
``numpy_eigvalsh``) decompose what numpy decomposes: the symmetric matrix mirrored from the
one triangle numpy reads (the lower for ``UPLO="L"``, the upper for ``"U"``), recorded as
``tril(a) + tril(a, k=-1).T`` (or with ``triu``), then the same parts with ``signs="numpy"``
(and ``UPLO="U"`` when given): numpy's own eigenvectors, with numpy's signs, bit for bit
(eigvalsh's values are eigh's, equal to numpy's eigvalsh to rounding). So the other triangle
gets a gradient of exactly 0, and each strict entry of the triangle read gets the sum of the
two mirrored entries of the (symmetric) gradient on the mirrored matrix: twice its own.

A complex matrix decomposes as its Hermitian part (a + a^H) / 2, mirrored with conjugates from
numpy's triangle; its eigenvalues are real, dw_i = v_i^H dS v_i. Its eigenvectors are fixed
only up to a unit phase each (the forward makes each column's largest entry real and
positive); their derivatives take JAX's gauge, v_i^H dv_i = 0, so they are the derivatives of
every function the phases leave unchanged (|V|, V diag(w) V^H, the eigenvalues' own second
derivatives), not of the phase-fixed columns themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ...errors import ArgumentError
from ..complex import is_complex
from ..core import Case, Primitive, error, mapped, register
from ..lazy import per_block
from ..schema import attrs, need, one_of
from ..shape_rules import eigh
from ..taylor import nested_jvps
from .decomposition import (
    NUMPY_SIGNS,
    column_signs,
    decompose,
    decomposition_text,
    inverse_gaps,
    record_parts,
    with_numpy_signs,
)
from .matrices import as_row, check_square, hermitian, matmuls, swap_last, sym
from .samplers import symmetric_spread

if TYPE_CHECKING:
    from ...engine.variable import Variable
    from .. import PrimitiveMethods

# ---------------------------------------------------------------- eigh


def _eigh_numpy(a: np.ndarray, uplo: str = "L") -> tuple:
    mirror = np.swapaxes(a, -1, -2)
    s = (a + (np.conj(mirror) if a.dtype.kind == "c" else mirror)) / 2   # a itself when it is
    return tuple(np.linalg.eigh(s) if uplo == "L" else np.linalg.eigh(s, UPLO=uplo))


def _eigh_fixed(a: np.ndarray) -> tuple:
    w, v = decompose("np.linalg.eigh", _eigh_numpy, a)
    return w, v * column_signs(v)


def _eigh(a, part, signs=None, UPLO="L"):  # noqa: N803 - numpy's name
    if signs is None:
        w, v = decompose("eigh", lambda x: per_block(_eigh_fixed, _EIGH, x), a)
    elif UPLO == "L":
        w, v = decompose("np.linalg.eigh", lambda x: per_block(_eigh_numpy, _EIGH, x), a)
    else:
        w, v = decompose("np.linalg.eigh-U", lambda x: per_block(_eigh_numpy, _EIGH, x,
                                                                 uplo=UPLO), a)
    return w if part == "eigenvalues" else v


_EIGH = "(n,n)->(n),(n,n)"      # per_block's signature of the decomposition


def _eig_values(o: PrimitiveMethods, a):
    return o.apply(EIGH, (a,), {"part": "eigenvalues"})


def _eig_vectors(o: PrimitiveMethods, a):
    return o.apply(EIGH, (a,), {"part": "eigenvectors"})


def _eigh_vjp(o: PrimitiveMethods, g, out, a, part):
    if part == "eigenvalues":       # conj(V) diag(g) V^T (V diag(g) V^T on reals)
        v = _eig_vectors(o, a)
        return o.matmul(o.mul(o.conj(v), as_row(o, g)), swap_last(o, v))
    f = inverse_gaps(o, _eig_values(o, a), a, "eigh", "eigenvectors")
    if is_complex(a):               # the adjoint of the jvp's JAX gauge
        vt = swap_last(o, out)
        return hermitian(o, matmuls(o, o.conj(out), o.mul(f, o.matmul(vt, g)), vt))
    return sym(o, matmuls(o, out, o.mul(f, o.matmul(swap_last(o, out), g)), swap_last(o, out)))


def _eigh_jvp(o: PrimitiveMethods, ts, out, a, part):
    if part == "eigenvalues":       # dw_i = v_i^H dS v_i, real
        v = _eig_vectors(o, a)
        if is_complex(a):
            dw = o.sum(o.mul(o.conj(v), o.matmul(hermitian(o, ts[0]), v)), axis=-2)
            return o.cast(dw, out.dtype)
        return o.sum(o.mul(v, o.matmul(sym(o, ts[0]), v)), axis=-2)
    f = inverse_gaps(o, _eig_values(o, a), a, "eigh", "eigenvectors")
    if is_complex(a):   # dV = V (F o (V^H dS V)): JAX's gauge, v_i^H dv_i = 0 (see docstring)
        ds = hermitian(o, ts[0])
        return o.matmul(out, o.mul(f, matmuls(o, o.conj(swap_last(o, out)), ds, out)))
    ds = sym(o, ts[0])
    return o.matmul(out, o.mul(f, matmuls(o, swap_last(o, out), ds, out)))


_signed_vjp, _signed_jvp = with_numpy_signs("eigh", _eigh_vjp, _eigh_jvp)

EIGH = register(Primitive(
    "eigh", _eigh, [_signed_vjp], _signed_jvp, decomposition_text("eigh"),
    [Case(((3, 3),), {"part": "eigenvalues"}), Case(((3, 3),), {"part": "eigenvectors"}),
     Case(((2, 3, 3),), {"part": "eigenvalues"}), Case(((2, 2, 2),), {"part": "eigenvectors"}),
     Case(((1, 1),), {"part": "eigenvectors"}),
     Case(((3, 3),), {"part": "eigenvectors", **NUMPY_SIGNS}),
     Case(((2, 3, 3),), {"part": "eigenvectors", **NUMPY_SIGNS, "UPLO": "U"}),
     Case(((3, 3),), {"part": "eigenvalues", **NUMPY_SIGNS, "UPLO": "U"})],
    domain=(symmetric_spread,), plain=False, batch=mapped("eigh"), taylor=nested_jvps("eigh"),
    schema=attrs(shape_rule=eigh, part=need(one_of("eigenvalues", "eigenvectors")),
                 signs=one_of("numpy"), UPLO=one_of("L", "U")), saves=("inputs", "out")))

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


def _triangle_read(ops: PrimitiveMethods, a: Any, uplo: str) -> Any:
    """The symmetric (Hermitian) matrix numpy's eigh decomposes: a's lower (or upper)
    triangle, mirrored (and conjugated)."""
    if uplo == "L":
        return ops.add(ops.tril(a), ops.conj(swap_last(ops, ops.tril(a, -1))))
    return ops.add(ops.triu(a), ops.conj(swap_last(ops, ops.triu(a, 1))))


def _numpy_attrs(uplo: str) -> dict:
    return {**NUMPY_SIGNS, **({"UPLO": uplo} if uplo != "L" else {})}


def numpy_eigh(ops: PrimitiveMethods, a: Any, UPLO: str = "L") -> EighResult:  # noqa: N803
    """``np.linalg.eigh`` on a Variable: numpy's eigenvalues and eigenvectors, signs included."""
    check_square(ops, "eigh", a)
    _uplo(ops, "eigh", a, UPLO)
    s = _triangle_read(ops, a, UPLO)
    parts = ("eigenvalues", "eigenvectors")
    return EighResult(*record_parts(ops, EIGH, s, parts, None, _numpy_attrs(UPLO)))


def numpy_eigvalsh(ops: PrimitiveMethods, a: Any, UPLO: str = "L") -> Variable:  # noqa: N803
    """``np.linalg.eigvalsh`` on a Variable: the eigenvalues of the triangle numpy reads."""
    check_square(ops, "eigvalsh", a)
    _uplo(ops, "eigvalsh", a, UPLO)
    s = _triangle_read(ops, a, UPLO)
    return ops.apply(EIGH, (s,), {"part": "eigenvalues", **_numpy_attrs(UPLO)})
