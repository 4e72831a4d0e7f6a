"""pinv, lstsq and matrix_power, and the Ops methods of every spectral primitive.

The decompositions (eigh, svd, qr) are declared in ``spectral.py``; their methods are here so
that ``SpectralOps`` is the one mixin of both modules (as ``LinalgOps`` is for ``decomp.py``).
``pinv`` and ``lstsq`` differentiate at full rank: there the rank is locally constant and the
pseudo-inverse smooth (Golub & Pereyra's formula, written with matmul).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ...errors import ArgumentError, ShapeError
from ..core import REGISTRY, Case, Primitive, error, mapped, register, shape_of, value_of
from ..series import Series, cauchy, new
from ..taylor import order_of
from .decompositions import (
    EIGH,
    QR,
    SVD,
    as_column,
    matmuls,
    shared_decompositions,
    spread_singular,
)
from .functions import diagonally_dominant, inv_taylor, swap_last

if TYPE_CHECKING:
    from ...engine.variable import Variable

# ---------------------------------------------------------------- pinv


def _pinv(a):
    return np.linalg.pinv(a)


def _pinv_vjp(o, g, out, a):
    # Golub & Pereyra: dX = -X dA X + X X^T dA^T (I - A X) + (I - X A) dA^T X^T X, transposed
    x, xt, gt = out, swap_last(o, out), swap_last(o, g)
    first = o.neg(matmuls(o, xt, g, xt))
    second = o.matmul(o.sub(gt, matmuls(o, a, x, gt)), o.matmul(x, xt))
    third = o.matmul(o.matmul(xt, x), o.sub(gt, matmuls(o, gt, x, a)))
    return o.add(o.add(first, second), third)


def _pinv_jvp(o, ts, out, a):
    x, xt, tt = out, swap_last(o, out), swap_last(o, ts[0])
    first = o.neg(matmuls(o, x, ts[0], x))
    second = o.matmul(o.matmul(x, xt), o.sub(tt, matmuls(o, tt, a, x)))
    third = o.matmul(o.sub(tt, matmuls(o, x, a, tt)), o.matmul(xt, x))
    return o.add(o.add(first, second), third)


PINV = register(Primitive(
    "pinv", _pinv, [_pinv_vjp], _pinv_jvp, "pinv({0})",
    [Case(((3, 3),)), Case(((4, 2),)), Case(((2, 4),)), Case(((2, 3, 2),))],
    domain=(spread_singular,), batch=mapped("pinv")))

# ---------------------------------------------------------------- lstsq


def _lstsq(a, b):
    return np.linalg.lstsq(a, b)[0]


def _as_columns(o, x, vector):
    return as_column(o, x) if vector else x


def _lstsq_vjp_a(o, g, out, a, b):
    # x = A^+ b, so dx = dA^+ b + A^+ db with dA^+ from pinv's rule; r = b - A x
    vector = len(shape_of(b)) == 1
    p = o.pinv(a)
    gx, xx, bb = (_as_columns(o, v, vector) for v in (g, out, b))
    r = o.sub(bb, o.matmul(a, xx))
    pg = o.matmul(swap_last(o, p), gx)
    first = o.neg(o.matmul(pg, swap_last(o, xx)))
    second = o.matmul(r, swap_last(o, o.matmul(p, pg)))
    z = o.sub(gx, o.matmul(swap_last(o, a), pg))
    third = o.matmul(o.matmul(swap_last(o, p), xx), swap_last(o, z))
    return o.add(o.add(first, second), third)


def _lstsq_vjp_b(o, g, out, a, b):
    return o.matmul(swap_last(o, o.pinv(a)), g)


def _lstsq_jvp(o, ts, out, a, b):
    ta, tb = ts
    vector = len(shape_of(b)) == 1
    p = o.pinv(a)
    parts = [] if tb is None else [o.matmul(p, tb)]
    if ta is not None:
        xx, bb = _as_columns(o, out, vector), _as_columns(o, b, vector)
        r = o.sub(bb, o.matmul(a, xx))
        tat = swap_last(o, ta)
        first = o.neg(matmuls(o, p, ta, xx))
        second = matmuls(o, p, swap_last(o, p), tat, r)
        u = matmuls(o, tat, swap_last(o, p), xx)
        third = o.sub(u, matmuls(o, p, a, u))
        da = o.add(o.add(first, second), third)
        parts.append(o.reshape(da, shape_of(out)) if vector else da)
    return parts[0] if len(parts) == 1 else o.add(parts[0], parts[1])


LSTSQ = register(Primitive(
    "lstsq", _lstsq, [_lstsq_vjp_a, _lstsq_vjp_b], _lstsq_jvp, "lstsq({0}, {1})[0]",
    [Case(((4, 2), (4,))), Case(((4, 2), (4, 3))), Case(((2, 3), (2,))), Case(((3, 3), (3, 2)))],
    domain=(spread_singular, lambda rng, shape: rng.uniform(-2.0, 2.0, shape)),
    plain=False,         # op.lstsq returns numpy's 4-tuple, the forward only x
    batch=lambda o, xs, batched: _batch_lstsq(o, xs, batched)))


def _batch_lstsq(o, xs, batched):
    """x = pinv(a) b, the same minimum-norm least-squares solution: numpy's lstsq does not map
    over leading axes, pinv and matmul do."""
    a, b = xs
    return REGISTRY["matmul"].batch(o, [o.pinv(a), b], batched)

# ---------------------------------------------------------------- matrix_power


def _chain(n: int) -> list[tuple[int, int]]:
    """Steps (i, j) of a binary addition chain: power k+1 of the list is list[i] @ list[j]."""
    steps: list[tuple[int, int]] = []
    cur = 0                             # index of the running power; list[0] is the base
    for bit in bin(n)[3:]:
        steps.append((cur, cur))
        cur = len(steps)
        if bit == "1":
            steps.append((cur, 0))
            cur = len(steps)
    return steps


def _powers(o, base, n):
    ps = [base]
    for i, j in _chain(n):
        ps.append(o.matmul(ps[i], ps[j]))
    return ps


def _base(o, a, n):
    return a if n > 0 else o.inv(a)


def _matrix_power_vjp(o, g, out, a, n):
    if n == 0:
        return None
    base = _base(o, a, n)
    ps = _powers(o, base, abs(n))[:-1] + [out]
    cts: list[Any] = [None] * len(ps)
    cts[-1] = g
    for k, (i, j) in reversed(list(enumerate(_chain(abs(n)), start=1))):
        if cts[k] is None:
            continue
        for idx, part in ((i, o.matmul(cts[k], swap_last(o, ps[j]))),
                          (j, o.matmul(swap_last(o, ps[i]), cts[k]))):
            cts[idx] = part if cts[idx] is None else o.add(cts[idx], part)
    gb = cts[0]
    if n > 0:
        return gb
    bt = swap_last(o, base)             # d inv(a) = -B dA B
    return o.neg(matmuls(o, bt, gb, bt))


def _matrix_power_jvp(o, ts, out, a, n):
    if n == 0:
        return None
    base = _base(o, a, n)
    tb = ts[0] if n > 0 else o.neg(matmuls(o, base, ts[0], base))
    ps, dps = [base], [tb]
    for i, j in _chain(abs(n)):
        ps.append(o.matmul(ps[i], ps[j]))
        dps.append(o.add(o.matmul(dps[i], ps[j]), o.matmul(ps[i], dps[j])))
    return dps[-1]


def _matrix_power(a, n):
    return np.linalg.matrix_power(a, n)


def _matrix_power_taylor(o: Any, ss: list[Series], out: Any, a: Any, n: int) -> Series:
    """A^n by |n| - 1 series matrix products of A's series (of A^-1's for n < 0)."""
    if n == 0:
        return new(out, order_of(ss))
    base = ss[0] if n > 0 else inv_taylor(o, ss, o.inv(a), a)
    z = base
    for _ in range(abs(n) - 1):
        z = [o.matmul(z[0], base[0])] + [cauchy(o, o.matmul, z, base, k)
                                         for k in range(1, len(base))]
    return [out] + z[1:]


MATRIX_POWER = register(Primitive(
    "matrix_power", _matrix_power, [_matrix_power_vjp], _matrix_power_jvp,
    lambda args, attrs, render: f"matrix_power({args[0]}, {attrs['n']})",
    [Case(((3, 3),), {"n": 3}), Case(((2, 2, 2),), {"n": 2}), Case(((3, 3),), {"n": -2}),
     Case(((2, 2),), {"n": 1}), Case(((2, 2),), {"n": 0}), Case(((2, 2),), {"n": 5})],
    domain=(lambda rng, shape: diagonally_dominant(rng, shape) / shape[-1],),
    batch=mapped("matrix_power"), taylor=_matrix_power_taylor))

# ---------------------------------------------------------------- Ops methods


class EighResult(NamedTuple):
    """The eigenvalues (ascending) and eigenvectors (columns) of a symmetric matrix."""

    eigenvalues: Any
    eigenvectors: Any


class SVDResult(NamedTuple):
    """a = U @ (S[..., None] * Vh), with full_matrices=False shapes."""

    U: Any
    S: Any
    Vh: Any


class QRResult(NamedTuple):
    """a = Q @ R, Q with orthonormal columns, R upper triangular with a non-negative diagonal."""

    Q: Any
    R: Any


def _square(ops: Any, fn: str, a: Any) -> None:
    s = shape_of(a)
    if len(s) < 2 or s[-1] != s[-2]:
        raise error(fn, (a,), "needs square matrices in the last two axes", ShapeError)


def _matrices(ops: Any, fn: str, a: Any) -> None:
    if len(shape_of(a)) < 2:
        raise error(fn, (a,), "needs matrices (at least 2 axes)", ShapeError)



def _names(name: Any, parts: Sequence[str]) -> list:
    """One name per output: None, or a sequence of names (one per output)."""
    if name is None:
        return [None] * len(parts)
    if isinstance(name, str) or len(name) != len(parts):
        raise ArgumentError(f"name= of a decomposition is one name per output "
                            f"({', '.join(parts)}), got {name!r}")
    return list(name)


def _parts(ops: Any, prim: Primitive, a: Any, parts: Sequence[str], name: Any) -> list:
    names = _names(name, parts)
    with shared_decompositions():
        return [ops.apply(prim, (a,), {"part": p}, n) for p, n in zip(parts, names)]


class SpectralOps:
    """The spectral and least-squares primitives as methods of an Ops."""

    def eigh(self, a: Any, UPLO: str = "L", name: Any = None) -> EighResult:  # noqa: N803
        """Eigenvalues (ascending) and eigenvectors of the symmetric part (a + a^T) / 2."""
        _square(self, "eigh", a)
        _uplo(self, "eigh", a, UPLO)
        return EighResult(*_parts(self, EIGH, a, ("eigenvalues", "eigenvectors"), name))

    def eigvalsh(self, a: Any, UPLO: str = "L", name: str | None = None) -> Variable:  # noqa: N803
        """Eigenvalues (ascending) of the symmetric part (a + a^T) / 2."""
        _square(self, "eigvalsh", a)
        _uplo(self, "eigvalsh", a, UPLO)
        return self.apply(EIGH, (a,), {"part": "eigenvalues"}, name)

    def svd(self, a: Any, full_matrices: bool = True, compute_uv: bool = True,
            name: Any = None) -> Any:
        """U, S, Vh with a = U @ (S[..., None] * Vh); only S when compute_uv=False."""
        _matrices(self, "svd", a)
        if not compute_uv:
            return self.apply(SVD, (a,), {"part": "S"}, name)
        m, n = shape_of(a)[-2:]
        if full_matrices and m != n:
            raise error("svd", (a,), "full_matrices=True adds singular vectors that are "
                              "not determined by a (no derivative); pass full_matrices=False",
                              ArgumentError)
        return SVDResult(*_parts(self, SVD, a, ("U", "S", "Vh"), name))

    def svdvals(self, x: Any, name: str | None = None) -> Variable:
        """The singular values of each matrix, descending."""
        _matrices(self, "svdvals", x)
        return self.apply(SVD, (x,), {"part": "S"}, name)

    def qr(self, a: Any, mode: str = "reduced", name: Any = None) -> Any:
        """Q and R with a = Q @ R and diag(R) >= 0 (mode 'reduced'); only R for mode 'r'."""
        _matrices(self, "qr", a)
        m, n = shape_of(a)[-2:]
        if mode == "r":
            return self.apply(QR, (a,), {"part": "R"}, name)
        if mode not in ("reduced", "complete") or mode == "complete" and m > n:
            raise error("qr", (a,), f"mode={mode!r} is not supported; use 'reduced' or "
                              "'r' ('complete' only when m <= n)", ArgumentError)
        return QRResult(*_parts(self, QR, a, ("Q", "R"), name))

    def pinv(self, a: Any, name: str | None = None) -> Variable:
        """The Moore-Penrose pseudo-inverse of each matrix (differentiable at full rank)."""
        _matrices(self, "pinv", a)
        return self.apply(PINV, (a,), None, name)

    def lstsq(self, a: Any, b: Any, rcond: Any = None, name: str | None = None) -> tuple:
        """numpy's (x, residuals, rank, s): x minimises |a x - b| (recorded), as do residuals
        and s; rank is a Python int."""
        sa, sb = shape_of(a), shape_of(b)
        if len(sa) != 2 or len(sb) not in (1, 2) or sb[0] != sa[0]:
            raise error("lstsq", (a, b), "needs a of shape (m, n) and b of shape (m,) or "
                              "(m, k)", ShapeError)
        if rcond is not None:
            raise error("lstsq", (a, b), "rcond= other than None is not supported",
                              ArgumentError)
        x = self.apply(LSTSQ, (a, b), None, name)
        s = self.svdvals(a)
        rank = int(np.linalg.matrix_rank(np.asarray(value_of(a))))
        if rank < sa[1] or sa[0] <= sa[1]:
            residuals = np.zeros((0,))
        else:
            r = self.sub(b, self.matmul(a, x))
            residuals = self.sum(self.mul(r, r), axis=0)
            if len(sb) == 1:
                residuals = self.reshape(residuals, (1,))
        return x, residuals, rank, s

    def matrix_power(self, a: Any, n: int, name: str | None = None) -> Variable:
        """a @ a @ ... @ a (n factors; a^-1 for negative n, the identity for n = 0)."""
        _square(self, "matrix_power", a)
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise error("matrix_power", (a,), f"n must be an int, got {n!r}",
                              ArgumentError)
        return self.apply(MATRIX_POWER, (a,), {"n": int(n)}, name)


def _uplo(ops: Any, fn: str, a: Any, uplo: str) -> None:
    if uplo not in ("L", "U"):
        raise error(fn, (a,), f"UPLO must be 'L' or 'U', got {uplo!r}", ArgumentError)
