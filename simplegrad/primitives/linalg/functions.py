"""Matrix functions: solve, inv, det, slogdet, cholesky and the 2-norm.

Their rules are written with primitives only (matmul, transpose, solve, inv,
...), so every gradient is itself differentiable. Matrices are the last two
axes; leading axes are a batch, broadcast the way numpy.linalg does it.
The matrix input of each primitive is ``a``, as in numpy.linalg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..broadcasting import unbroadcast
from ..core import (
    Case,
    Primitive,
    along,
    keepdims_shape,
    mapped,
    matrix,
    register,
    shape_of,
)
from ..series import Series, exp_series, minus, new, plus, sqrt_series, square_coef, times
from ..taylor import order_of

if TYPE_CHECKING:
    from ...engine.variable import Variable

# ---------------------------------------------------------------- helpers


def swap_last(o: Any, x: Any) -> Any:
    """x with its last two axes exchanged (``.T`` for a matrix)."""
    nd = len(shape_of(x))
    return o.transpose(x) if nd == 2 else o.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _per_matrix(o: Any, s: Any) -> Any:
    """A per-matrix scalar (shape = batch) reshaped to (batch, 1, 1) to scale its matrix."""
    shape = shape_of(s)
    return s if shape == () else o.reshape(s, shape + (1, 1))


def _trace_of_product(o: Any, m: Any, t: Any) -> Any:
    """trace(m^T @ t) for each matrix of the batch."""
    return o.sum(o.mul(m, t), axis=(-2, -1))


def _call_fmt(fn: str, *params: str):
    """Print rule ``fn(x, k=v, ...)`` naming only attributes set away from None/False."""
    def fmt(args: list[str], attrs: dict, render) -> str:
        shown = [f"{k}={render(attrs[k], k)}" for k in params
                 if attrs.get(k) is not None and attrs.get(k) is not False]
        return f"{fn}({', '.join(list(args) + shown)})"
    return fmt

# ---------------------------------------------------------------- samplers


def diagonally_dominant(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Square matrices with entries in [-1, 1) plus n on the diagonal: well conditioned."""
    n = shape[-1]
    return rng.uniform(-1.0, 1.0, shape) + n * np.eye(n)


def near_identity(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """I plus entries in [-1/n, 1/n): well conditioned, with a determinant of order 1."""
    n = shape[-1]
    return np.eye(n) + rng.uniform(-1.0, 1.0, shape) / n


def negative_det(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Diagonally dominant matrices with the first row negated (negative determinant)."""
    a = diagonally_dominant(rng, shape)
    a[..., 0, :] *= -1.0
    return a


def positive_definite(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Symmetric positive definite matrices B B^T / n + I."""
    b = rng.uniform(-1.0, 1.0, shape)
    return b @ np.swapaxes(b, -1, -2) / shape[-1] + np.eye(shape[-1])


MATRIX = (diagonally_dominant,)

# ---------------------------------------------------------------- solve


def _solve(a, b):
    return np.linalg.solve(a, b)


def _column(o: Any, x: Any) -> Any:
    """A stack of vectors (..., n) as a stack of one-column matrices (..., n, 1)."""
    return o.reshape(x, shape_of(x) + (1,))


def _solve_gb(o, g, a, b):
    """solve(a^T, g), with g as columns when b is a vector: the cotangent of b before
    broadcasting is undone."""
    return o.solve(swap_last(o, a), _column(o, g) if len(shape_of(b)) == 1 else g)


def _solve_vjp_a(o, g, out, a, b):
    gb = _solve_gb(o, g, a, b)
    if len(shape_of(b)) == 1:       # x^T of a stack of vectors: (..., 1, n)
        xs = shape_of(out)
        xt = o.reshape(out, xs[:-1] + (1, xs[-1]))
    else:
        xt = swap_last(o, out)
    return unbroadcast(o, o.neg(o.matmul(gb, xt)), shape_of(a))


def _solve_vjp_b(o, g, out, a, b):
    gb = _solve_gb(o, g, a, b)
    bs = shape_of(b)
    if len(bs) > 1:
        return unbroadcast(o, gb, bs)
    gb = unbroadcast(o, gb, bs + (1,))
    return o.reshape(gb, bs)


def _solve_jvp(o, ts, out, a, b):
    ta, tb = ts
    if ta is None:
        return o.solve(a, tb)
    vector = len(shape_of(b)) == 1
    ax = o.matmul(ta, _column(o, out) if vector else out)
    rhs = o.neg(ax) if tb is None else o.sub(_column(o, tb) if vector else tb, ax)
    t = o.solve(a, rhs)
    return o.reshape(t, shape_of(out)) if vector else t


def _solve_taylor(o: Any, ss: list[Series], out: Any, a: Any, b: Any) -> Series:
    """A X = B: X_k = solve(A_0, B_k - sum_{j=1..k} A_j X_{k-j}); a vector b as a column."""
    vector = len(shape_of(b)) == 1
    col = (lambda c: o.reshape(c, shape_of(c) + (1,))) if vector else (lambda c: c)
    x = new(col(out), order_of(ss))
    for k in range(1, len(x)):
        rest = None
        for j in range(1, k + 1):
            if ss[0][j] is not None and x[k - j] is not None:
                rest = plus(o, rest, o.matmul(ss[0][j], x[k - j]))
        rhs = minus(o, None if ss[1][k] is None else col(ss[1][k]), rest)
        x[k] = None if rhs is None else o.solve(a, rhs)
    if vector:
        return [out] + [None if c is None else o.reshape(c, shape_of(out)) for c in x[1:]]
    return [out] + x[1:]


SOLVE = register(Primitive(
    "solve", _solve, [_solve_vjp_a, _solve_vjp_b], _solve_jvp, "solve({0}, {1})",
    [Case(((3, 3), (3,))), Case(((3, 3), (3, 2))), Case(((2, 3, 3), (3,))),
     Case(((2, 3, 3), (2, 3, 2))), Case(((3, 3), (2, 3, 1))), Case(((1, 3, 3), (2, 3, 2))),
     Case(((2, 3, 3), (3, 2)))],
    domain=(diagonally_dominant, lambda rng, shape: rng.uniform(-2.0, 2.0, shape)),
    batch=matrix("solve", vectors=(False, True)), taylor=_solve_taylor))

# ---------------------------------------------------------------- inv, det, slogdet


def _inv(a):
    return np.linalg.inv(a)


def _inv_vjp(o, g, out, a):
    it = swap_last(o, out)
    return o.neg(o.matmul(o.matmul(it, g), it))


def inv_taylor(o: Any, ss: list[Series], out: Any, a: Any) -> Series:
    """A Z = I: Z_k = -Z_0 sum_{j=1..k} A_j Z_{k-j}."""
    z = new(out, order_of(ss))
    for k in range(1, len(z)):
        rest = None
        for j in range(1, k + 1):
            if ss[0][j] is not None and z[k - j] is not None:
                rest = plus(o, rest, o.matmul(ss[0][j], z[k - j]))
        z[k] = None if rest is None else o.neg(o.matmul(out, rest))
    return z


INV = register(Primitive(
    "inv", _inv, [_inv_vjp],
    lambda o, ts, out, a: o.neg(o.matmul(o.matmul(out, ts[0]), out)),
    "inv({0})", [Case(((3, 3),)), Case(((2, 3, 3),)), Case(((1, 1),))], domain=MATRIX,
    batch=mapped("inv"), taylor=inv_taylor))


def _det(a):
    return np.linalg.det(a)


# Up to this size the gradient of det is the cofactor matrix built from minors: exact for
# every matrix, singular ones included, at a cost of n^2 determinants of size n - 1 (and,
# differentiated again, n^2 (n-1)^2 of size n - 2). Larger matrices use det(a) inv(a)^T,
# O(n^3), which needs a regular matrix.
COFACTORS_UP_TO = 8


def _cofactors(o: Any, a: Any, out: Any) -> Any:
    """The cofactor matrix of each matrix of a: d det(a) / da = adj(a)^T."""
    n = shape_of(a)[-1]
    if n > COFACTORS_UP_TO:
        return o.mul(_per_matrix(o, out), swap_last(o, o.inv(a)))
    if n == 1:
        return np.ones(shape_of(a))
    rest = np.array([[k for k in range(n) if k != i] for i in range(n)])    # (n, n - 1)
    minors = o.getitem(a, (Ellipsis, rest[:, None, :, None], rest[None, :, None, :]))
    signs = 1.0 - 2.0 * (np.add.outer(np.arange(n), np.arange(n)) % 2)
    return o.mul(o.det(minors), signs)          # minors: (..., n, n, n - 1, n - 1)


def _slogdet_series(o: Any, s: Series, a: Any, l0: Any) -> Series:
    """log|det A|: l' = tr(A^-1 A'), with the series of A^-1 from ``inv``."""
    w = inv_taylor(o, [s], o.inv(a), a)
    lg = new(l0, len(s) - 1)
    for k in range(1, len(lg)):
        acc = None
        for j in range(1, k + 1):
            if s[j] is not None and w[k - j] is not None:
                t = o.sum(o.mul(swap_last(o, w[k - j]), s[j]), axis=(-2, -1))
                acc = plus(o, acc, times(o, t, j))
        lg[k] = times(o, acc, 1.0 / k)
    return lg


def _det_taylor(o: Any, ss: list[Series], out: Any, a: Any) -> Series:
    """det A = sign exp(log|det A|): z' = z l'."""
    logs = _slogdet_series(o, ss[0], a, None)
    return exp_series(o, logs, out)


DET = register(Primitive(
    "det", _det,
    [lambda o, g, out, a: o.mul(_per_matrix(o, g), _cofactors(o, a, out))],
    lambda o, ts, out, a: _trace_of_product(o, _cofactors(o, a, out), ts[0]),
    "det({0})",
    [Case(((3, 3),)), Case(((2, 3, 3),)), Case(((2, 2),), domain=(negative_det,)),
     Case(((1, 1),)), Case(((2, 9, 9),), domain=(near_identity,), label="inverse-rule")],
    domain=MATRIX, tol=1e-5, batch=mapped("det"), taylor=_det_taylor))


def _logabsdet(a):
    return np.linalg.slogdet(a)[1]


def _slogdet_taylor(o: Any, ss: list[Series], out: Any, a: Any) -> Series:
    """log|det A|."""
    return _slogdet_series(o, ss[0], a, out)


SLOGDET = register(Primitive(
    "slogdet", _logabsdet,
    [lambda o, g, out, a: o.mul(_per_matrix(o, g), swap_last(o, o.inv(a)))],
    lambda o, ts, out, a: _trace_of_product(o, swap_last(o, o.inv(a)), ts[0]),
    "slogdet({0}).logabsdet",
    [Case(((3, 3),)), Case(((3, 3),), domain=(negative_det,)), Case(((2, 3, 3),)),
     Case(((2, 4, 4),), domain=(negative_det,))],
    domain=MATRIX, batch=mapped("slogdet"), taylor=_slogdet_taylor))

# ---------------------------------------------------------------- cholesky


def _cholesky(a):
    return np.linalg.cholesky((a + np.swapaxes(a, -1, -2)) / 2)


def _phi(out: Any) -> np.ndarray:
    """The constant mask of Phi: lower triangle of ones with a halved diagonal."""
    n = shape_of(out)[-1]
    return np.tril(np.ones((n, n))) - 0.5 * np.eye(n)


def _cholesky_vjp(o, g, out, a):
    # Murray (2016): abar = sym(L^-T Phi(L^T gL) L^-1); here z = (L^-T Phi L^-1)^T
    lt = swap_last(o, out)
    p = o.mul(o.matmul(lt, g), _phi(out))
    z = o.solve(lt, swap_last(o, o.solve(lt, p)))
    return o.mul(o.add(z, swap_last(o, z)), 0.5)


def _cholesky_jvp(o, ts, out, a):
    # dL = L Phi(L^-1 sym(t) L^-T); sym(t) is symmetric, so solve(L, (L^-1 sym(t))^T) is the
    # symmetric middle factor
    st = o.mul(o.add(ts[0], swap_last(o, ts[0])), 0.5)
    x = o.solve(out, swap_last(o, o.solve(out, st)))
    return o.matmul(out, o.mul(x, _phi(out)))


def _cholesky_taylor(o: Any, ss: list[Series], out: Any, a: Any) -> Series:
    """L L^T = A: L_k is cholesky's jvp at A_k - sum_{j=1..k-1} L_j L_{k-j}^T."""
    z = new(out, order_of(ss))
    for k in range(1, len(z)):
        rest = None
        for j in range(1, k):
            if z[j] is not None and z[k - j] is not None:
                rest = plus(o, rest, o.matmul(z[j], swap_last(o, z[k - j])))
        rhs = minus(o, ss[0][k], rest)
        z[k] = None if rhs is None else _cholesky_jvp(o, [rhs], out, a)
    return z


CHOLESKY = register(Primitive(
    "cholesky", _cholesky, [_cholesky_vjp], _cholesky_jvp, "cholesky({0})",
    [Case(((3, 3),)), Case(((2, 3, 3),)), Case(((1, 1),)), Case(((4, 4),))],
    domain=(positive_definite,), batch=mapped("cholesky"), taylor=_cholesky_taylor))

# ---------------------------------------------------------------- norm


def _norm(x, axis=None, keepdims=False):
    return np.linalg.norm(x, axis=axis, keepdims=keepdims)


def _unit(o, x, out, axis, keepdims):
    """x / norm, exactly 0 (at every order) where the norm is 0 (the subgradient chosen)."""
    kd = keepdims_shape(shape_of(x), axis)
    n = out if keepdims or axis is None or shape_of(out) == kd else o.reshape(out, kd)
    zero = o.equal(n, 0)
    return o.where(zero, 0, o.div(x, o.where(zero, 1, n)))


def _norm_vjp(o, g, out, x, axis=None, keepdims=False):
    kd = keepdims_shape(shape_of(x), axis)
    g = g if shape_of(g) == kd or axis is None else o.reshape(g, kd)
    return o.mul(g, _unit(o, x, out, axis, keepdims))


def _norm_jvp(o, ts, out, x, axis=None, keepdims=False):
    return o.sum(o.mul(ts[0], _unit(o, x, out, axis, keepdims)), axis=axis, keepdims=keepdims)


def _norm_taylor(o: Any, ss: list[Series], out: Any, x: Any,
        axis: Any = None, keepdims: Any = False) -> Series:
    """The 2-norm: sqrt of the reduced sum of squares."""
    sums = [None] + [None if c is None else o.sum(c, axis=axis, keepdims=keepdims)
                     for c in (square_coef(o, ss[0], k) for k in range(1, order_of(ss) + 1))]
    return sqrt_series(o, sums, out)


NORM = register(Primitive(
    "norm", _norm, [_norm_vjp], _norm_jvp, _call_fmt("norm", "axis", "keepdims"),
    [Case(((4,),)), Case(((3, 4),)), Case(((3, 4),), {"axis": 1}),
     Case(((3, 4),), {"axis": 0, "keepdims": True}), Case(((2, 3, 4),), {"axis": (1, 2)}),
     Case(((2, 3, 4),), {"axis": (0, -1), "keepdims": True}),
     Case(((2, 3),), {"axis": None, "keepdims": True})],
    domain=(lambda rng, shape: rng.uniform(-2.0, 2.0, shape),), batch=along("norm", flat=True),
    taylor=_norm_taylor))


# ---------------------------------------------------------------- Ops methods

class DecompOps:
    """The matrix functions as methods of an Ops."""

    def solve(self, a: Any, b: Any, name: str | None = None) -> Variable:
        """x with a @ x = b; b is a stack of vectors only when it is 1-D (numpy 2's rule)."""
        return self.apply(SOLVE, (a, b), None, name)

    def inv(self, a: Any, name: str | None = None) -> Variable:
        """The inverse of each square matrix in the last two axes of a."""
        return self.apply(INV, (a,), None, name)

    def det(self, a: Any, name: str | None = None) -> Variable:
        """The determinant of each square matrix in the last two axes of a."""
        return self.apply(DET, (a,), None, name)

    def slogdet(self, a: Any, name: str | None = None) -> Variable:
        """log|det a| per matrix; its sign, a constant, is ``np.linalg.slogdet(a.value).sign``."""
        return self.apply(SLOGDET, (a,), None, name)

    def cholesky(self, a: Any, name: str | None = None) -> Variable:
        """Lower Cholesky factor L of (a + a^T) / 2, which must be positive definite."""
        return self.apply(CHOLESKY, (a,), None, name)

    def norm(self, x: Any, axis: Any = None, keepdims: bool = False,
             name: str | None = None) -> Variable:
        """2-norm over ``axis`` (None: all entries; int: vectors; 2-tuple: Frobenius)."""
        if axis is not None and not isinstance(axis, (int, np.integer)):
            axis = tuple(int(i) for i in axis)
        elif axis is not None:
            axis = int(axis)
        return self.apply(NORM, (x,), {"axis": axis, "keepdims": bool(keepdims)}, name)
