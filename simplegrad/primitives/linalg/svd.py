"""svd: the thin singular value decomposition a = U @ (S[..., None] * Vh).

One primitive with three parts (``U``, ``S``, ``Vh``); its conventions (fixed signs, distinct
nonzero values for the vectors' derivative) are in ``decomposition.py``. ``np.linalg.svd`` on
a Variable (``numpy_svd``) records the same parts with ``signs="numpy"``: numpy's own U and
Vh, whose signs are numpy's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ...errors import ArgumentError, LinAlgError
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


def _adjoint(o: PrimitiveMethods, x: Any) -> Any:
    """x^H: the conjugate transpose of each matrix (x^T for real x: no conj is recorded)."""
    return o.conj(swap_last(o, x))


def _phase(o: PrimitiveMethods, d: Any, s: Any) -> Any:
    """i Im(d) / s, the diagonal of U^H dU in JAX's gauge (complex d: (d - conj(d)) / 2s)."""
    return o.div(o.mul(o.sub(d, o.conj(d)), 0.5), s)


def _diag(o: PrimitiveMethods, x: Any) -> Any:
    """The diagonal of each (k, k) matrix of x, a (..., k) stack."""
    return o.sum(o.mul(x, np.eye(shape_of(x)[-1])), axis=-2)


def _svd_factors(o: PrimitiveMethods, out, a, part):
    """(U, S, Vh): ``out`` for the entry's own part, the others recorded from one svd."""
    with shared_decompositions():
        return tuple(out if p == part else o.apply(SVD, (a,), {"part": p})
                     for p in ("U", "S", "Vh"))


# The rules of a complex matrix are the real ones with each transpose a conjugate transpose
# (U^H, V^H), in JAX's gauge: a pair u_i, v_i is fixed only up to a common unit phase, and the
# derivatives take v_i^H dv_i = 0 and u_i^H du_i = i Im(u_i^H dA v_i) / s_i, so they are exact
# for every function the phases leave unchanged (u_i v_i^H, |U|, the singular values' own
# gradient conj(U diag(g) Vh), and so their second derivatives), not for the phase-fixed
# columns themselves (as eigh's eigenvectors). The vjps are the jvps' adjoints in the pairing
# Re(sum(g * t)).


def _svd_vjp(o: PrimitiveMethods, g, out, a, part):
    u, s, vh = _svd_factors(o, out, a, part)
    if part == "S":                 # conj(U diag(g) Vh) (U diag(g) Vh on reals)
        return o.conj(o.matmul(o.mul(u, as_row(o, g)), vh))
    _check_nonzero(s, a)
    f = inverse_gaps(o, o.mul(s, s), a, "svd", "singular vectors")
    ubar, vbar = o.conj(u), o.conj(vh)
    if part == "U":     # conj(U) ((F o (Y - Y^H)) S + i Im(diag Y) / S - Y S^-1) conj(Vh)
        srow = as_row(o, s)         # ... + G S^-1 conj(Vh), Y = U^T G
        y = o.matmul(swap_last(o, u), g)
        gs = o.div(g, srow)
        inner = o.sub(o.mul(o.mul(f, o.sub(y, _adjoint(o, y))), srow), o.div(y, srow))
        if is_complex(a):
            phase = _phase(o, _diag(o, y), s)
            inner = o.add(inner, o.mul(as_row(o, phase), np.eye(shape_of(s)[-1])))
        return o.matmul(o.add(o.matmul(ubar, inner), gs), vbar)
    # conj(U) (S (F o (conj(X) - X^T)) conj(Vh) + S^-1 G (I - V^T conj(Vh))), X = Vh G^T
    x = o.matmul(vh, swap_last(o, g))
    ht = o.div(g, as_column(o, s))
    inner = o.sub(o.mul(as_column(o, s), o.mul(f, o.sub(o.conj(x), swap_last(o, x)))),
                  o.matmul(ht, swap_last(o, vh)))
    return o.matmul(ubar, o.add(o.matmul(inner, vbar), ht))


def _svd_jvp(o: PrimitiveMethods, ts, out, a, part):
    t = ts[0]
    u, s, vh = _svd_factors(o, out, a, part)
    if part == "S" and is_complex(a):   # ds_i = Re(u_i^H dA v_i)
        ds = o.sum(o.mul(o.conj(u), o.matmul(t, o.conj(swap_last(o, vh)))), axis=-2)
        return o.cast(ds, out.dtype)
    v = _adjoint(o, vh)
    tv = o.matmul(t, v)
    if part == "S":                 # ds_i = u_i^T dA v_i
        return o.sum(o.mul(u, tv), axis=-2)
    _check_nonzero(s, a)
    f = inverse_gaps(o, o.mul(s, s), a, "svd", "singular vectors")
    srow, scol = as_row(o, s), as_column(o, s)
    p = o.matmul(_adjoint(o, u), tv)    # P = U^H dA V
    pt = _adjoint(o, p)
    if part == "U":     # dU = U (F o (P S + S P^H) + i Im(diag P) / S) + (dA V - U P) S^-1
        d = o.mul(f, o.add(o.mul(p, srow), o.mul(scol, pt)))
        du = o.add(o.matmul(u, d), o.div(o.sub(tv, o.matmul(u, p)), srow))
        if is_complex(a):
            du = o.add(du, o.mul(u, as_row(o, _phase(o, _diag(o, p), s))))
        return du
    d = o.mul(f, o.add(o.mul(scol, p), o.mul(pt, srow)))   # dV = V (F o (S P + P^H S)) + ...
    tu = o.matmul(_adjoint(o, t), u)
    rest = o.div(o.sub(tu, o.matmul(v, pt)), srow)          # ... (dA^H U - V P^H) S^-1
    return _adjoint(o, o.add(o.matmul(v, d), rest))


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
