"""Truncated Taylor series arithmetic for Taylor mode (engine/taylor.py walks the tape with it).

A series is the list ``[c0, c1, ..., cK]`` of coefficients in t (not derivatives: ck is the
k-th derivative over k!); ``None`` is an exact zero and keeps zero terms off the tape. Every
function here computes with primitives called on ``o`` (an Ops, or ``VALUES`` for plain
arrays), so the coefficients it returns are recorded like any other program. On ``VALUES``
(``o.plain_values``: nothing is recorded) the same arithmetic runs with numpy's operators in the
same order, without a method call per term: the values are bit for bit those of the recorded
rule, and at a point (numpy scalars) each term costs a scalar operation, not a ufunc call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from . import PrimitiveMethods

Series = list       # [c0, c1, ..., cK]; None is an exact zero

# ---------------------------------------------------------------- coefficients


def new(c0: Any, order: int) -> Series:
    """A series with c0 and every higher coefficient zero."""
    return [c0] + [None] * order


def plus(o: PrimitiveMethods, a: Any, b: Any) -> Any:
    """a + b where None is zero."""
    if a is None:
        return b
    if b is None:
        return a
    return a + b if o.plain_values else o.add(a, b)


def minus(o: PrimitiveMethods, a: Any, b: Any) -> Any:
    """a - b where None is zero."""
    if b is None:
        return a
    if o.plain_values:
        return -b if a is None else a - b
    return o.neg(b) if a is None else o.sub(a, b)


def times(o: PrimitiveMethods, a: Any, c: float) -> Any:
    """a * c for a number c, where None is zero (and c == 1 records nothing)."""
    if a is None or c == 1:
        return a
    return a * float(c) if o.plain_values else o.mul(a, float(c))


def cauchy(o: PrimitiveMethods, op: Callable, a: Series, b: Series, k: int, lo: int = 0) -> Any:
    """sum over lo <= j <= k - lo of op(a[j], b[k - j]), skipping zero terms (None if none)."""
    if o.plain_values and op is o.mul:
        return cauchy_values(a, b, k, lo)
    acc = None
    for j in range(lo, k - lo + 1):
        if a[j] is not None and b[k - j] is not None:
            acc = plus(o, acc, op(a[j], b[k - j]))
    return acc


def square_coef(o: PrimitiveMethods, z: Series, k: int) -> Any:
    """The k-th coefficient of z^2 (symmetric Cauchy product: about k/2 products)."""
    if o.plain_values:
        return _square_values(z, k)
    acc = None
    for j in range((k + 1) // 2):
        if z[j] is not None and z[k - j] is not None:
            acc = plus(o, acc, o.mul(z[j], z[k - j]))
    acc = times(o, acc, 2.0)
    if k % 2 == 0 and z[k // 2] is not None:
        acc = plus(o, acc, o.mul(z[k // 2], z[k // 2]))
    return acc


def ode(o: PrimitiveMethods, x: Series, a: Series, k: int) -> Any:
    """z_k of z' = a x': (1/k) sum_{j=1..k} j x_j a_{k-j}."""
    if o.plain_values:
        return _ode_values(x, a, k)
    acc = None
    for j in range(1, k + 1):
        if x[j] is not None and a[k - j] is not None:
            acc = plus(o, acc, times(o, o.mul(x[j], a[k - j]), j))
    return times(o, acc, 1.0 / k) if acc is not None and k > 1 else acc


# ---------------------------------------------------------------- the same on plain values
# (numpy's operators, term by term in the order of the recorded rules above)


def _square_values(z: Series, k: int) -> Any:
    """``square_coef`` on plain values."""
    acc = None
    for j in range((k + 1) // 2):
        a, b = z[j], z[k - j]
        if a is not None and b is not None:
            acc = a * b if acc is None else acc + a * b
    if acc is not None:
        acc = acc * 2.0
    if k % 2 == 0:
        m = z[k // 2]
        if m is not None:
            acc = m * m if acc is None else acc + m * m
    return acc


def _ode_values(x: Series, a: Series, k: int) -> Any:
    """``ode`` on plain values."""
    acc = None
    for j in range(1, k + 1):
        xj, ak = x[j], a[k - j]
        if xj is not None and ak is not None:
            t = xj * ak if j == 1 else xj * ak * float(j)
            acc = t if acc is None else acc + t
    return acc * float(1.0 / k) if acc is not None and k > 1 else acc


def cauchy_values(a: Series, b: Series, k: int, lo: int = 0, hi: int | None = None) -> Any:
    """sum over lo <= j <= hi (k - lo by default) of a_j b_{k-j} on plain values."""
    acc = None
    for j in range(lo, k - lo + 1 if hi is None else hi + 1):
        aj, bk = a[j], b[k - j]
        if aj is not None and bk is not None:
            acc = aj * bk if acc is None else acc + aj * bk
    return acc



def product(o: PrimitiveMethods, a: Series, b: Series) -> Series:
    """The series of a b (Cauchy products; both primals given)."""
    return [o.mul(a[0], b[0])] + [cauchy(o, o.mul, a, b, k) for k in range(1, len(a))]


def whole_power(o: PrimitiveMethods, xs: Series, p: int) -> Series:
    """The series of x ** p for a whole number p >= 1, by squaring and multiplying: exact
    where x = 0, where a recurrence would divide by x."""
    result, base = None, xs
    while True:
        if p & 1:
            result = base if result is None else product(o, result, base)
        p >>= 1
        if not p:
            return result
        base = [o.mul(base[0], base[0])] + [square_coef(o, base, k) for k in range(1, len(base))]


def affine_square(o: PrimitiveMethods, xs: Series, a: float, b: float) -> Series:
    """The series of a + b x^2."""
    x = xs[0]
    return [o.add(o.mul(o.mul(x, x), b), a)] + [times(o, square_coef(o, xs, k), b)
                                                for k in range(1, len(xs))]

# ---------------------------------------------------------------- functions of a series


def exp_series(o: PrimitiveMethods, xs: Series, z0: Any) -> Series:
    """z = exp x (z0 given): z' = z x'."""
    z = new(z0, len(xs) - 1)
    for k in range(1, len(z)):
        z[k] = ode(o, xs, z, k)
    return z


def quotient_series(o: PrimitiveMethods, ns: Series, us: Series, z0: Any) -> Series:
    """z with z' = n' / u: z_k = (n_k - (1/k) sum_{j=1..k-1} (k - j) z_{k-j} u_j) / u_0.

    log is n = u = x; arctan is n = x, u = 1 + x^2; and so on.
    """
    z = new(z0, len(ns) - 1)
    values = o.plain_values
    for k in range(1, len(z)):
        rest = None
        for j in range(1, k):
            if us[j] is not None and z[k - j] is not None:
                t = us[j] * z[k - j] if values else o.mul(us[j], z[k - j])
                rest = plus(o, rest, times(o, t, k - j))
        num = minus(o, ns[k], times(o, rest, 1.0 / k))
        z[k] = None if num is None else num / us[0] if values else o.div(num, us[0])
    return z


def div_series(o: PrimitiveMethods, xs: Series, ys: Series, z0: Any) -> Series:
    """z = x / y: z_k = (x_k - sum_{j=1..k} y_j z_{k-j}) / y_0."""
    z = new(z0, len(xs) - 1)
    values = o.plain_values
    for k in range(1, len(z)):
        num = minus(o, xs[k], _tail(o, ys, z, k))
        z[k] = None if num is None else num / ys[0] if values else o.div(num, ys[0])
    return z


def _tail(o: PrimitiveMethods, ys: Series, z: Series, k: int) -> Any:
    """sum_{j=1..k} y_j z_{k-j}."""
    if o.plain_values:
        return cauchy_values(ys, z, k, 1, k)
    acc = None
    for j in range(1, k + 1):
        if ys[j] is not None and z[k - j] is not None:
            acc = plus(o, acc, o.mul(ys[j], z[k - j]))
    return acc


def sqrt_series(o: PrimitiveMethods, xs: Series, z0: Any) -> Series:
    """z^2 = x: z_k = (x_k - sum_{j=1..k-1} z_j z_{k-j}) / (2 z_0)."""
    z = new(z0, len(xs) - 1)
    twice = o.mul(z0, 2.0)
    values = o.plain_values
    for k in range(1, len(z)):
        num = minus(o, xs[k], cauchy(o, o.mul, z, z, k, 1))
        z[k] = None if num is None else num / twice if values else o.div(num, twice)
    return z


def sin_cos_series(o: PrimitiveMethods, xs: Series, s0: Any, c0: Any,
                   sign: float) -> tuple[Series, Series]:
    """sin and cos (sign -1: s' = c x', c' = -s x') or sinh and cosh (sign 1) together."""
    s, c = new(s0, len(xs) - 1), new(c0, len(xs) - 1)
    for k in range(1, len(s)):
        s[k] = ode(o, xs, c, k)
        c[k] = times(o, ode(o, xs, s, k), sign)
    return s, c


def riccati_series(o: PrimitiveMethods, xs: Series, z0: Any, w0: Any, b: float) -> Series:
    """z' = w x' with w = a + b z^2 (tanh: 1 - z^2, tan: 1 + z^2), given w0 = a + b z0^2."""
    if o.plain_values:
        return _riccati_values(xs, z0, w0, b)
    z = new(z0, len(xs) - 1)
    w = new(w0, len(xs) - 1)
    for k in range(1, len(z)):
        z[k] = ode(o, xs, w, k)
        w[k] = times(o, square_coef(o, z, k), b)
    return z


def _riccati_values(xs: Series, z0: Any, w0: Any, b: float) -> Series:
    """``riccati_series`` on plain values. At a point in float64 (numpy float64 scalars) the
    loop runs on Python floats, the same IEEE double operations without numpy's scalar
    dispatch, and the coefficients past z0 come back as those floats (float64 values, which the
    value-only walk holds as they are: engine/taylor.py); should one come out inf or nan it
    runs again on the numpy scalars, which warn as numpy does."""
    order = len(xs) - 1
    if type(z0) is np.float64 and type(w0) is np.float64 and order:
        if type(xs[1]) is np.float64 and xs.count(None) == order - 1 and xs[0] is not None:
            z = _riccati_line(float(xs[1]), float(z0), float(w0), float(b), order)  # x + t v
            if math.isfinite(sum(z)):
                z[0] = z0
                return z
        elif set(map(type, xs)) <= _FLOAT64_OR_NONE:
            moving = [j for j in range(1, len(xs)) if xs[j] is not None]
            floats = [c if c is None else float(c) for c in xs]
            z = _riccati_loop(floats, moving, float(z0), float(w0), b) if moving[:1] != [1] \
                else _riccati_floats(floats, moving, float(z0), float(w0), float(b))
            if None not in z and math.isfinite(sum(z)):
                z[0] = z0
                return z
    moving = [j for j in range(1, len(xs)) if xs[j] is not None]
    return _riccati_loop(xs, moving, z0, w0, b)


_FLOAT64_OR_NONE = {np.float64, type(None)}


def _riccati_floats(xs: list, moving: list[int], z0: float, w0: float, b: float) -> list:
    """``_riccati_loop`` on Python floats when x1 moves (with others, on a curve): every
    coefficient is then a number, so the loop reads them with no zero test; the same
    operations in the same order."""
    order = len(xs) - 1
    z, w = [z0], [w0]
    x1, rest = xs[1], moving[1:]
    for k in range(1, order + 1):
        acc = x1 * w[k - 1]                 # ode(xs, w, k)
        for j in rest:
            if j > k:
                break
            acc = acc + xs[j] * w[k - j] * float(j)
        if k > 1:
            acc = acc * (1.0 / k)
        z.append(acc)
        acc = z0 * acc                      # square_coef(z, k)
        j, i = 1, k - 1
        while j < i:
            acc = acc + z[j] * z[i]
            j += 1
            i -= 1
        acc = acc * 2.0
        if j == i:
            acc = acc + z[j] * z[j]
        w.append(acc if b == 1 else acc * b)
    return z


def _riccati_line(x1: float, z0: float, w0: float, b: float, order: int) -> list:
    """``_riccati_floats`` along a line x + t v (x1 its only moving coefficient): the same
    values, without the loop over the others; only the last w kept, and no test for the
    factors 1 / k at k = 1 and b = 1 (a double times 1 is that double)."""
    z = [z0] * (order + 1)
    wk = w0
    inv = _INVERSES if order < len(_INVERSES) else [1.0 / max(k, 1) for k in range(order + 1)]
    for k in range(1, order + 1):
        acc = x1 * wk * inv[k]              # ode(xs, w, k)
        z[k] = acc
        acc = z0 * acc                      # square_coef(z, k): z[j] z[i] for j < i = k - j
        j, i = 1, k - 1
        while j < i:
            acc = acc + z[j] * z[i]
            j += 1
            i -= 1
        acc = acc * 2.0
        if j == i:
            acc = acc + z[j] * z[j]
        wk = acc * b
    return z


_INVERSES = tuple(1.0 / max(k, 1) for k in range(65))     # 1 / k as ``ode`` rounds it


def _riccati_loop(xs: Series, moving: list[int], z0: Any, w0: Any, b: float) -> Series:
    """The loop of ``_riccati_values``: ``ode`` inlined, over the nonzero coefficients of x
    only (``moving``: a line x + t v has one)."""
    order = len(xs) - 1
    z, w = new(z0, order), new(w0, order)
    b = float(b)
    for k in range(1, order + 1):
        acc = None                          # ode(xs, w, k)
        for j in moving:
            if j > k:
                break
            wk = w[k - j]
            if wk is not None:
                t = xs[j] * wk if j == 1 else xs[j] * wk * float(j)
                acc = t if acc is None else acc + t
        if acc is not None and k > 1:
            acc = acc * float(1.0 / k)
        z[k] = acc
        acc = _square_values(z, k)
        w[k] = acc if acc is None or b == 1 else acc * b      # times(acc, b)
    return z
