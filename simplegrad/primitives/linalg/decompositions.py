"""Decompositions: eigh, svd and qr (pinv, lstsq, matrix_power and the methods: matfuncs.py).

A decomposition with several outputs is ONE primitive whose ``part`` attribute picks the
output an entry holds, so each output is an ordinary array entry that prints as the Python a
reader would write (``v2 = eigh(v1).eigenvalues``, ``v3 = eigh(v1).eigenvectors``) and has its
own vjp and jvp. ``op.eigh(a)`` records both entries from one decomposition (the forwards share
it while the call lasts). Rules are written with primitives only (matmul, solve, ``swap_last``,
constant masks), so every order works; matrices are the last two axes, leading axes a batch.

Conventions (documented in the README):
- ``eigh`` works on (a + a^T) / 2, as ``cholesky`` does; eigenvalues ascend.
- Signs are fixed in the forward: each eigenvector (column of V), each left singular vector
  (column of U, with the matching row of Vh) has its largest-magnitude entry positive, and
  ``qr``'s R has a non-negative diagonal. So the outputs are smooth functions of the input
  wherever the decomposition is (finite differences agree), not numpy's arbitrary signs.
- Derivatives of eigenvectors need distinct eigenvalues, of singular vectors distinct nonzero
  singular values: a rule that meets (numerically) repeated ones raises ``sg.LinAlgError`` when
  the derivative is taken. This check refuses; it never changes the recorded program, which
  replayed at such an input gives inf or nan. Eigenvalues and singular values alone
  differentiate anywhere (at a repeated value the result is one valid choice).
- ``qr`` (tall or wide) needs the first min(m, n) columns independent; a wide matrix [X | Y]
  is differentiated through the square QR of X and R's right block Q^T Y.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ...errors import LinAlgError
from ..core import Case, Primitive, mapped, register, shape_of, value_of
from .functions import swap_last

# ---------------------------------------------------------------- shared decompositions

_SHARED = threading.local()


@contextmanager
def shared_decompositions() -> Iterator[None]:
    """Within the block, forwards of one decomposition on the same array compute it once."""
    outer = getattr(_SHARED, "memo", None)
    if outer is None:
        _SHARED.memo = {}
    try:
        yield
    finally:
        if outer is None:
            _SHARED.memo = None


def _decompose(kind: str, compute: Any, a: np.ndarray) -> tuple:
    memo = getattr(_SHARED, "memo", None)
    if memo is None:
        return compute(a)
    hit = memo.get((kind, id(a)))
    if hit is not None and hit[0] is a:     # the memo holds a, so its id is not reused
        return hit[1]
    result = compute(a)
    memo[(kind, id(a))] = (a, result)
    return result


def _column_signs(u: np.ndarray) -> np.ndarray:
    """Per column of u, the sign (+1 or -1) that makes its largest-magnitude entry positive."""
    i = np.argmax(np.abs(u), axis=-2)[..., None, :]
    s = np.sign(np.take_along_axis(u, i, axis=-2))
    return np.where(s == 0, 1.0, s).astype(u.dtype)

# ---------------------------------------------------------------- rule helpers


def _row(o: Any, x: Any) -> Any:
    """(..., k) as (..., 1, k): scales the columns of a matrix."""
    s = shape_of(x)
    return o.reshape(x, s[:-1] + (1, s[-1]))


def as_column(o: Any, x: Any) -> Any:
    """(..., k) as (..., k, 1): scales the rows of a matrix."""
    return o.reshape(x, shape_of(x) + (1,))


def _sym(o: Any, x: Any) -> Any:
    return o.mul(o.add(x, swap_last(o, x)), 0.5)


def matmuls(o: Any, *ms: Any) -> Any:
    """The product of the matrices ms, left to right."""
    out = ms[0]
    for m in ms[1:]:
        out = o.matmul(out, m)
    return out


def _inverse_gaps(o: Any, lam: Any, a: Any, fn: str, what: str) -> Any:
    """F with F[i, j] = 1 / (lam[j] - lam[i]) off the diagonal and 0 on it (recorded).

    Raises LinAlgError when two values of ``lam`` coincide to working precision.
    """
    shape = shape_of(lam)
    n = shape[-1]
    diff = o.sub(_row(o, lam), as_column(o, lam))
    values = np.asarray(value_of(lam))
    gaps = np.abs(np.asarray(value_of(diff)))[..., ~np.eye(n, dtype=bool)]
    scale = np.max(np.abs(values), axis=-1, keepdims=True) if n else 0.0
    tol = 10 * n * np.finfo(values.dtype).eps * scale
    if gaps.size and np.any(gaps <= tol):
        name = getattr(a, "name", "the matrix")
        raise LinAlgError(f"{fn}: the derivative of the {what} needs distinct values, but "
                          f"{name} has repeated ones ({np.round(values, 6).tolist()}); "
                          "functions of the values alone differentiate at any matrix")
    eye = np.eye(n, dtype=values.dtype)
    return o.mul(o.div(1.0, o.add(diff, eye)), 1.0 - eye)


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


# ---------------------------------------------------------------- eigh


def _eigh_numpy(a: np.ndarray) -> tuple:
    w, v = np.linalg.eigh((a + np.swapaxes(a, -1, -2)) / 2)
    return w, v * _column_signs(v)


def _eigh(a, part):
    w, v = _decompose("eigh", _eigh_numpy, a)
    return w if part == "eigenvalues" else v


def _eig_values(o, a):
    return o.apply(EIGH, (a,), {"part": "eigenvalues"})


def _eig_vectors(o, a):
    return o.apply(EIGH, (a,), {"part": "eigenvectors"})


def _eigh_vjp(o, g, out, a, part):
    if part == "eigenvalues":       # V diag(g) V^T
        v = _eig_vectors(o, a)
        return o.matmul(o.mul(v, _row(o, g)), swap_last(o, v))
    f = _inverse_gaps(o, _eig_values(o, a), a, "eigh", "eigenvectors")
    return _sym(o, matmuls(o, out, o.mul(f, o.matmul(swap_last(o, out), g)), swap_last(o, out)))


def _eigh_jvp(o, ts, out, a, part):
    ds = _sym(o, ts[0])
    if part == "eigenvalues":       # dw_i = v_i^T dS v_i
        v = _eig_vectors(o, a)
        return o.sum(o.mul(v, o.matmul(ds, v)), axis=-2)
    f = _inverse_gaps(o, _eig_values(o, a), a, "eigh", "eigenvectors")
    return o.matmul(out, o.mul(f, matmuls(o, swap_last(o, out), ds, out)))


def symmetric_spread(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Matrices whose symmetric part has eigenvalues near 1, 2, ..., n (gaps >= 0.5), plus an
    antisymmetric part that the symmetrisation removes."""
    n = shape[-1]
    q, _ = np.linalg.qr(rng.normal(size=shape))
    lam = np.arange(1.0, n + 1) + rng.uniform(-0.25, 0.25, shape[:-1])
    k = rng.uniform(-0.5, 0.5, shape)
    return (q * lam[..., None, :]) @ np.swapaxes(q, -1, -2) + k - np.swapaxes(k, -1, -2)


EIGH = register(Primitive(
    "eigh", _eigh, [_eigh_vjp], _eigh_jvp,
    lambda args, attrs, render: f"eigh({args[0]}).{attrs['part']}",
    [Case(((3, 3),), {"part": "eigenvalues"}), Case(((3, 3),), {"part": "eigenvectors"}),
     Case(((2, 3, 3),), {"part": "eigenvalues"}), Case(((2, 2, 2),), {"part": "eigenvectors"}),
     Case(((1, 1),), {"part": "eigenvectors"})],
    domain=(symmetric_spread,), plain=False, batch=mapped("eigh")))

# ---------------------------------------------------------------- svd


def _svd_numpy(a: np.ndarray) -> tuple:
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    signs = _column_signs(u)
    return u * signs, s, vh * np.swapaxes(signs, -1, -2)


def _svd(a, part):
    u, s, vh = _decompose("svd", _svd_numpy, a)
    return {"U": u, "S": s, "Vh": vh}[part]


def _svd_factors(o, out, a, part):
    """(U, S, Vh): ``out`` for the entry's own part, the others recorded from one svd."""
    with shared_decompositions():
        return tuple(out if p == part else o.apply(SVD, (a,), {"part": p})
                     for p in ("U", "S", "Vh"))


def _svd_vjp(o, g, out, a, part):
    u, s, vh = _svd_factors(o, out, a, part)
    if part == "S":                 # U diag(g) Vh
        return o.matmul(o.mul(u, _row(o, g)), vh)
    _check_nonzero(s, a)
    f = _inverse_gaps(o, o.mul(s, s), a, "svd", "singular vectors")
    if part == "U":                 # (U (F o (Y - Y^T)) S - U U^T G S^-1 + G S^-1) Vh, Y = U^T G
        ut, srow = swap_last(o, u), _row(o, s)
        y = o.matmul(ut, g)
        gs = o.div(g, srow)
        inner = o.sub(o.mul(o.mul(f, o.sub(y, swap_last(o, y))), srow), o.matmul(ut, gs))
        return o.matmul(o.add(o.matmul(u, inner), gs), vh)
    x = o.matmul(vh, swap_last(o, g))   # U (S (F o (X - X^T)) Vh + S^-1 G (I - V Vh)), X = Vh G^T
    ht = o.div(g, as_column(o, s))
    inner = o.sub(o.mul(as_column(o, s), o.mul(f, o.sub(x, swap_last(o, x)))),
                  o.matmul(ht, swap_last(o, vh)))
    return o.matmul(u, o.add(o.matmul(inner, vh), ht))


def _svd_jvp(o, ts, out, a, part):
    t = ts[0]
    u, s, vh = _svd_factors(o, out, a, part)
    v = swap_last(o, vh)
    tv = o.matmul(t, v)
    if part == "S":                 # ds_i = u_i^T dA v_i
        return o.sum(o.mul(u, tv), axis=-2)
    _check_nonzero(s, a)
    f = _inverse_gaps(o, o.mul(s, s), a, "svd", "singular vectors")
    srow, scol = _row(o, s), as_column(o, s)
    p = o.matmul(swap_last(o, u), tv)   # P = U^T dA V
    pt = swap_last(o, p)
    if part == "U":                 # dU = U (F o (P S + S P^T)) + (dA V - U P) S^-1
        d = o.mul(f, o.add(o.mul(p, srow), o.mul(scol, pt)))
        return o.add(o.matmul(u, d), o.div(o.sub(tv, o.matmul(u, p)), srow))
    d = o.mul(f, o.add(o.mul(scol, p), o.mul(pt, srow)))   # dV = V (F o (S P + P^T S)) + ...
    tu = o.matmul(swap_last(o, t), u)
    rest = o.div(o.sub(tu, o.matmul(v, pt)), srow)          # ... (dA^T U - V P^T) S^-1
    return swap_last(o, o.add(o.matmul(v, d), rest))


def spread_singular(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Matrices with singular values near 1, 2, ..., min(m, n) (gaps >= 0.5)."""
    m, n = shape[-2:]
    k = min(m, n)
    u, _ = np.linalg.qr(rng.normal(size=shape[:-2] + (m, k)))
    v, _ = np.linalg.qr(rng.normal(size=shape[:-2] + (n, k)))
    s = np.arange(1.0, k + 1) + rng.uniform(-0.25, 0.25, shape[:-2] + (k,))
    return (u * s[..., None, :]) @ np.swapaxes(v, -1, -2)


SVD = register(Primitive(
    "svd", _svd, [_svd_vjp], _svd_jvp,
    lambda args, attrs, render: f"svd({args[0]}).{attrs['part']}",
    [Case(((3, 3),), {"part": "S"}), Case(((3, 2),), {"part": "U"}),
     Case(((2, 3),), {"part": "Vh"}), Case(((3, 2),), {"part": "Vh"}),
     Case(((2, 3),), {"part": "U"}), Case(((2, 3, 3),), {"part": "U"}),
     Case(((2, 2, 3),), {"part": "S"})],
    domain=(spread_singular,), plain=False, batch=mapped("svd")))

# ---------------------------------------------------------------- qr


def _qr_numpy(a: np.ndarray) -> tuple:
    q, r = np.linalg.qr(a)
    d = np.sign(np.diagonal(r, axis1=-2, axis2=-1))
    d = np.where(d == 0, 1.0, d).astype(r.dtype)
    return q * d[..., None, :], r * d[..., :, None]


def _qr(a, part):
    q, r = _decompose("qr", _qr_numpy, a)
    return q if part == "Q" else r


def _right_solve(o, x, r):
    """x R^-1."""
    return swap_last(o, o.solve(swap_last(o, r), swap_last(o, x)))


def _right_solve_t(o, x, r):
    """x R^-T."""
    return swap_last(o, o.solve(r, swap_last(o, x)))


def _lower(k: int) -> np.ndarray:
    return np.tril(np.ones((k, k)), -1)


def _qr_square_jvp(o, q, r, t):
    """(dQ, dR) of a = QR with a's columns independent and m >= n."""
    c = o.matmul(swap_last(o, q), _right_solve(o, t, r))
    low = o.mul(c, _lower(shape_of(r)[-1]))
    omega = o.sub(low, swap_last(o, low))
    dr = o.matmul(o.sub(c, omega), r)
    dq = o.add(o.matmul(q, o.sub(omega, c)), _right_solve(o, t, r))
    return dq, dr


def _qr_square_vjp(o, q, r, gq, gr):
    """The cotangent of a (m >= n) from cotangents of Q and R (either may be None)."""
    low = _lower(shape_of(r)[-1])
    inner = None
    if gr is not None:
        m = o.matmul(gr, swap_last(o, r))
        inner = o.sub(m, o.mul(o.sub(m, swap_last(o, m)), low))
    if gq is not None:
        b = o.matmul(swap_last(o, q), gq)
        extra = o.sub(o.mul(o.sub(b, swap_last(o, b)), low), b)
        inner = extra if inner is None else o.add(inner, extra)
    total = o.matmul(q, inner)
    if gq is not None:
        total = o.add(total, gq)
    return _right_solve_t(o, total, r)


def _split(o, a, k):
    n = shape_of(a)[-1]
    return (o.getitem(a, (Ellipsis, slice(0, k))), o.getitem(a, (Ellipsis, slice(k, n))))


def _qr_factors(o, out, a, part):
    """(Q, R): ``out`` for the entry's own part, the other recorded (one qr)."""
    with shared_decompositions():
        return tuple(out if p == part else o.apply(QR, (a,), {"part": p}) for p in ("Q", "R"))


def _qr_vjp(o, g, out, a, part):
    m, n = shape_of(a)[-2:]
    q, r = _qr_factors(o, out, a, part)
    if m >= n:
        return _qr_square_vjp(o, q, r, g if part == "Q" else None, g if part == "R" else None)
    x, y = _split(o, a, m)
    r1 = o.getitem(r, (Ellipsis, slice(0, m)))
    if part == "Q":
        gx = _qr_square_vjp(o, q, r1, g, None)
        return o.concatenate([gx, np.zeros(shape_of(gx)[:-1] + (n - m,))], axis=-1)
    g1, g2 = _split(o, g, m)
    gx = _qr_square_vjp(o, q, r1, o.matmul(y, swap_last(o, g2)), g1)
    return o.concatenate([gx, o.matmul(q, g2)], axis=-1)


def _qr_jvp(o, ts, out, a, part):
    m, n = shape_of(a)[-2:]
    q, r = _qr_factors(o, out, a, part)
    if m >= n:
        dq, dr = _qr_square_jvp(o, q, r, ts[0])
        return dq if part == "Q" else dr
    x, y = _split(o, a, m)
    tx, ty = _split(o, ts[0], m)
    dq, dr1 = _qr_square_jvp(o, q, o.getitem(r, (Ellipsis, slice(0, m))), tx)
    if part == "Q":
        return dq
    dr2 = o.add(o.matmul(swap_last(o, dq), y), o.matmul(swap_last(o, q), ty))
    return o.concatenate([dr1, dr2], axis=-1)


QR = register(Primitive(
    "qr", _qr, [_qr_vjp], _qr_jvp, lambda args, attrs, render: f"qr({args[0]}).{attrs['part']}",
    [Case(((3, 3),), {"part": "Q"}), Case(((3, 3),), {"part": "R"}),
     Case(((4, 2),), {"part": "Q"}), Case(((4, 2),), {"part": "R"}),
     Case(((2, 4),), {"part": "Q"}), Case(((2, 4),), {"part": "R"}),
     Case(((2, 3, 2),), {"part": "R"})],
    domain=(spread_singular,), plain=False, batch=mapped("qr")))
