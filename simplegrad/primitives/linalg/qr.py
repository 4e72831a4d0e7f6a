"""qr: a = Q @ R with Q's columns orthonormal and R upper triangular, diag(R) >= 0.

One primitive with two parts (``Q``, ``R``); its conventions (fixed signs, the first
min(m, n) columns independent, wide matrices through the QR of their left block) are in
``decomposition.py``. ``np.linalg.qr`` on a Variable (``numpy_qr``) records the same parts
with ``signs="numpy"``: numpy's own Q and R, whose signs are numpy's (often diag(R) < 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ...errors import ArgumentError
from ..core import Case, Primitive, error, mapped, register, shape_of
from ..lazy import per_block
from ..schema import attrs, need, one_of
from ..shape_rules import qr
from ..taylor import nested_jvps
from .decomposition import (
    NUMPY_SIGNS,
    decompose,
    decomposition_text,
    record_parts,
    shared_decompositions,
    with_numpy_signs,
)
from .matrices import check_matrices, swap_last
from .samplers import spread_singular

if TYPE_CHECKING:
    from .. import PrimitiveMethods

# ---------------------------------------------------------------- rule pieces


def _right_solve(o: PrimitiveMethods, x, r):
    """x R^-1."""
    return swap_last(o, o.solve(swap_last(o, r), swap_last(o, x)))


def _right_solve_t(o: PrimitiveMethods, x, r):
    """x R^-T."""
    return swap_last(o, o.solve(r, swap_last(o, x)))


def _lower(k: int) -> np.ndarray:
    return np.tril(np.ones((k, k)), -1)


def _qr_square_jvp(o: PrimitiveMethods, q, r, t):
    """(dQ, dR) of a = QR with a's columns independent and m >= n."""
    c = o.matmul(swap_last(o, q), _right_solve(o, t, r))
    low = o.mul(c, _lower(shape_of(r)[-1]))
    omega = o.sub(low, swap_last(o, low))
    dr = o.matmul(o.sub(c, omega), r)
    dq = o.add(o.matmul(q, o.sub(omega, c)), _right_solve(o, t, r))
    return dq, dr


def _qr_square_vjp(o: PrimitiveMethods, q, r, gq, gr):
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


def _split(o: PrimitiveMethods, a, k):
    n = shape_of(a)[-1]
    return (o.getitem(a, (Ellipsis, slice(0, k))), o.getitem(a, (Ellipsis, slice(k, n))))

# ---------------------------------------------------------------- qr


def _qr_numpy(a: np.ndarray) -> tuple:
    return tuple(np.linalg.qr(a))


def _qr_fixed(a: np.ndarray) -> tuple:
    q, r = decompose("np.linalg.qr", _qr_numpy, a)
    d = np.sign(np.diagonal(r, axis1=-2, axis2=-1))
    d = np.where(d == 0, 1.0, d).astype(r.dtype)
    return q * d[..., None, :], r * d[..., :, None]


def _qr(a, part, signs=None):
    compute = _qr_fixed if signs is None else _qr_numpy
    k = min(shape_of(a)[-2:])
    q, r = decompose("qr" if signs is None else "np.linalg.qr", lambda x: per_block(
        compute, "(m,n)->(m,k),(k,n)", x, sizes={"k": k}), a)
    return q if part == "Q" else r


def _qr_factors(o: PrimitiveMethods, out, a, part):
    """(Q, R): ``out`` for the entry's own part, the other recorded (one qr)."""
    with shared_decompositions():
        return tuple(out if p == part else o.apply(QR, (a,), {"part": p}) for p in ("Q", "R"))


def _qr_vjp(o: PrimitiveMethods, g, out, a, part):
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


def _qr_jvp(o: PrimitiveMethods, ts, out, a, part):
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


_signed_vjp, _signed_jvp = with_numpy_signs("qr", _qr_vjp, _qr_jvp)

QR = register(Primitive(
    "qr", _qr, [_signed_vjp], _signed_jvp, decomposition_text("qr"),
    [Case(((3, 3),), {"part": "Q"}), Case(((3, 3),), {"part": "R"}),
     Case(((4, 2),), {"part": "Q"}), Case(((4, 2),), {"part": "R"}),
     Case(((2, 4),), {"part": "Q"}), Case(((2, 4),), {"part": "R"}),
     Case(((2, 3, 2),), {"part": "R"}),
     Case(((3, 3),), {"part": "Q", **NUMPY_SIGNS}), Case(((4, 2),), {"part": "R", **NUMPY_SIGNS}),
     Case(((2, 4),), {"part": "Q", **NUMPY_SIGNS}),
     Case(((2, 3, 2),), {"part": "R", **NUMPY_SIGNS})],
    domain=(spread_singular,), plain=False, batch=mapped("qr"), taylor=nested_jvps("qr"),
    schema=attrs(shape_rule=qr, part=need(one_of("Q", "R")), signs=one_of("numpy")),
    saves=("inputs", "out")))

# ---------------------------------------------------------------- Ops methods


class QRResult(NamedTuple):
    """a = Q @ R, Q with orthonormal columns, R upper triangular with a non-negative diagonal."""

    Q: Any
    R: Any


class QROps:
    """qr as a method of an Ops."""

    def qr(self, a: Any, mode: str = "reduced", name: Any = None) -> Any:
        """Q and R with a = Q @ R and diag(R) >= 0 (mode 'reduced'); only R for mode 'r'."""
        return _record_qr(self, a, mode, name, {})


def numpy_qr(ops: PrimitiveMethods, a: Any, mode: str = "reduced") -> Any:
    """``np.linalg.qr`` on a Variable: numpy's Q and R, signs included, recorded."""
    return _record_qr(ops, a, mode, None, NUMPY_SIGNS)


def _record_qr(ops: PrimitiveMethods, a: Any, mode: str, name: Any, attrs: dict) -> Any:
    check_matrices(ops, "qr", a)
    m, n = shape_of(a)[-2:]
    if mode == "r":
        return ops.apply(QR, (a,), {"part": "R", **attrs}, name)
    if mode not in ("reduced", "complete") or mode == "complete" and m > n:
        raise error("qr", (a,), f"mode={mode!r} is not supported; use 'reduced' or "
                          "'r' ('complete' only when m <= n)", ArgumentError)
    return QRResult(*record_parts(ops, QR, a, ("Q", "R"), name, attrs))
