"""svd: the thin singular value decomposition a = U @ (S[..., None] * Vh).

One primitive with three parts (``U``, ``S``, ``Vh``); its conventions (fixed signs, distinct
nonzero values for the vectors' derivative) are in ``decomposition.py``. ``np.linalg.svd`` on
a Variable (``numpy_svd``) records the same parts with ``signs="numpy"``: numpy's own U and
Vh, whose signs are numpy's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ...errors import ArgumentError, DTypeError, LinAlgError
from ..complex import is_complex
from ..core import Case, Primitive, error, mapped, register, shape_of, value_of
from ..lazy import per_block
from ..schema import attrs, need, one_of
from ..shape_rules import svd
from ..taylor import nested_jvps
from .decomposition import (
    NUMPY_SIGNS,
    column_signs,
    decompose,
    decomposition_text,
    inverse_gaps,
    record_parts,
    shared_decompositions,
    with_numpy_signs,
)
from .matrices import as_column, as_row, check_matrices, swap_last
from .samplers import spread_singular

if TYPE_CHECKING:
    from ...engine.variable import Variable
    from .. import PrimitiveMethods

# ---------------------------------------------------------------- svd


def _svd_numpy(a: np.ndarray) -> tuple:
    # full_matrices=False gives numpy's default's bits on square matrices, the only shape
    # where the default is taken
    return tuple(np.linalg.svd(a, full_matrices=False))


def _svd_fixed(a: np.ndarray) -> tuple:
    u, s, vh = decompose("np.linalg.svd", _svd_numpy, a)
    signs = column_signs(u)
    return u * signs, s, vh * np.conj(np.swapaxes(signs, -1, -2))


def _svd(a, part, signs=None):
    compute = _svd_fixed if signs is None else _svd_numpy
    k = min(shape_of(a)[-2:])
    u, s, vh = decompose("svd" if signs is None else "np.linalg.svd", lambda x: per_block(
        compute, "(m,n)->(m,k),(k),(k,n)", x, sizes={"k": k}), a)
    return {"U": u, "S": s, "Vh": vh}[part]


def _check_nonzero(s: Any, a: Any) -> None:
    """Raise LinAlgError when a singular value is zero to working precision."""
    values = np.asarray(value_of(s))
    if values.size == 0:
        return
    tol = 10 * values.shape[-1] * np.finfo(values.dtype).eps * np.max(values, axis=-1)
    if np.any(np.min(values, axis=-1) <= tol):
        name = getattr(a, "name", "the matrix")
        raise LinAlgError(f"svd: the derivative of the singular vectors needs nonzero singular "
                          f"values, but {name} has a zero one ({np.round(values, 6).tolist()}); "
                          "functions of the singular values alone differentiate at any matrix")


def _refuse_complex_vectors(a: Any) -> None:
    """Raise DTypeError: complex singular vectors are fixed only up to a phase per pair, so
    their derivatives depend on the gauge that fixes it."""
    if is_complex(a):
        raise DTypeError("svd: the singular vectors of a complex matrix are fixed only up to a "
                         "unit phase per pair (the phase gauge), so their derivatives are not "
                         "defined; differentiate the singular values, or a function of U and "
                         "Vh that the phase leaves unchanged")


def _svd_factors(o: PrimitiveMethods, out, a, part):
    """(U, S, Vh): ``out`` for the entry's own part, the others recorded from one svd."""
    with shared_decompositions():
        return tuple(out if p == part else o.apply(SVD, (a,), {"part": p})
                     for p in ("U", "S", "Vh"))


def _svd_vjp(o: PrimitiveMethods, g, out, a, part):
    u, s, vh = _svd_factors(o, out, a, part)
    if part == "S":                 # conj(U diag(g) Vh) (U diag(g) Vh on reals)
        return o.conj(o.matmul(o.mul(u, as_row(o, g)), vh))
    _refuse_complex_vectors(a)
    _check_nonzero(s, a)
    f = inverse_gaps(o, o.mul(s, s), a, "svd", "singular vectors")
    if part == "U":                 # (U (F o (Y - Y^T)) S - U U^T G S^-1 + G S^-1) Vh, Y = U^T G
        ut, srow = swap_last(o, u), as_row(o, s)
        y = o.matmul(ut, g)
        gs = o.div(g, srow)
        inner = o.sub(o.mul(o.mul(f, o.sub(y, swap_last(o, y))), srow), o.matmul(ut, gs))
        return o.matmul(o.add(o.matmul(u, inner), gs), vh)
    x = o.matmul(vh, swap_last(o, g))   # U (S (F o (X - X^T)) Vh + S^-1 G (I - V Vh)), X = Vh G^T
    ht = o.div(g, as_column(o, s))
    inner = o.sub(o.mul(as_column(o, s), o.mul(f, o.sub(x, swap_last(o, x)))),
                  o.matmul(ht, swap_last(o, vh)))
    return o.matmul(u, o.add(o.matmul(inner, vh), ht))


def _svd_jvp(o: PrimitiveMethods, ts, out, a, part):
    t = ts[0]
    u, s, vh = _svd_factors(o, out, a, part)
    if part == "S" and is_complex(a):   # ds_i = Re(u_i^H dA v_i)
        ds = o.sum(o.mul(o.conj(u), o.matmul(t, o.conj(swap_last(o, vh)))), axis=-2)
        return o.cast(ds, out.dtype)
    v = swap_last(o, vh)
    tv = o.matmul(t, v)
    if part == "S":                 # ds_i = u_i^T dA v_i
        return o.sum(o.mul(u, tv), axis=-2)
    _refuse_complex_vectors(a)
    _check_nonzero(s, a)
    f = inverse_gaps(o, o.mul(s, s), a, "svd", "singular vectors")
    srow, scol = as_row(o, s), as_column(o, s)
    p = o.matmul(swap_last(o, u), tv)   # P = U^T dA V
    pt = swap_last(o, p)
    if part == "U":                 # dU = U (F o (P S + S P^T)) + (dA V - U P) S^-1
        d = o.mul(f, o.add(o.mul(p, srow), o.mul(scol, pt)))
        return o.add(o.matmul(u, d), o.div(o.sub(tv, o.matmul(u, p)), srow))
    d = o.mul(f, o.add(o.mul(scol, p), o.mul(pt, srow)))   # dV = V (F o (S P + P^T S)) + ...
    tu = o.matmul(swap_last(o, t), u)
    rest = o.div(o.sub(tu, o.matmul(v, pt)), srow)          # ... (dA^T U - V P^T) S^-1
    return swap_last(o, o.add(o.matmul(v, d), rest))


_signed_vjp, _signed_jvp = with_numpy_signs("svd", _svd_vjp, _svd_jvp)

SVD = register(Primitive(
    "svd", _svd, [_signed_vjp], _signed_jvp, decomposition_text("svd"),
    [Case(((3, 3),), {"part": "S"}), Case(((3, 2),), {"part": "U"}),
     Case(((2, 3),), {"part": "Vh"}), Case(((3, 2),), {"part": "Vh"}),
     Case(((2, 3),), {"part": "U"}), Case(((2, 3, 3),), {"part": "U"}),
     Case(((2, 2, 3),), {"part": "S"}),
     Case(((3, 2),), {"part": "U", **NUMPY_SIGNS}), Case(((2, 3),), {"part": "Vh", **NUMPY_SIGNS}),
     Case(((2, 3, 3),), {"part": "Vh", **NUMPY_SIGNS}),
     Case(((2, 3),), {"part": "S", **NUMPY_SIGNS})],
    domain=(spread_singular,), plain=False, batch=mapped("svd"), taylor=nested_jvps("svd"),
    schema=attrs(shape_rule=svd, part=need(one_of("U", "S", "Vh")),
                 signs=one_of("numpy")), saves=("inputs", "out")))

# ---------------------------------------------------------------- Ops methods


class SVDResult(NamedTuple):
    """a = U @ (S[..., None] * Vh), with full_matrices=False shapes."""

    U: Any
    S: Any
    Vh: Any


class SVDOps:
    """svd and svdvals as methods of an Ops."""

    def svd(self, a: Any, full_matrices: bool = True, compute_uv: bool = True,
            name: Any = None) -> Any:
        """U, S, Vh with a = U @ (S[..., None] * Vh); only S when compute_uv=False."""
        return _record_svd(self, a, full_matrices, compute_uv, name, {})

    def svdvals(self, x: Any, name: str | None = None) -> Variable:
        """The singular values of each matrix, descending."""
        check_matrices(self, "svdvals", x)
        return self.apply(SVD, (x,), {"part": "S"}, name)


def numpy_svd(ops: PrimitiveMethods, a: Any, full_matrices: bool = True,
              compute_uv: bool = True, hermitian: bool = False) -> Any:
    """``np.linalg.svd`` on a Variable: numpy's U, S and Vh, signs included, recorded."""
    if hermitian:
        raise error("np.linalg.svd", (a,), "hermitian=True is not supported on Variables; "
                    "it records as op.svd(a, full_matrices, compute_uv)", ArgumentError)
    return _record_svd(ops, a, full_matrices, compute_uv, None, NUMPY_SIGNS)


def _record_svd(ops: PrimitiveMethods, a: Any, full_matrices: bool, compute_uv: bool,
                name: Any, attrs: dict) -> Any:
    check_matrices(ops, "svd", a)
    if not compute_uv:                  # the values have no signs: the sign-fixed entry
        return ops.apply(SVD, (a,), {"part": "S"}, name)
    m, n = shape_of(a)[-2:]
    if full_matrices and m != n:
        raise error("svd", (a,), "full_matrices=True adds singular vectors that are "
                          "not determined by a (no derivative); pass full_matrices=False",
                          ArgumentError)
    return SVDResult(*record_parts(ops, SVD, a, ("U", "S", "Vh"), name, attrs))
