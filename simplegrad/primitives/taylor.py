"""Taylor rules shared by the primitive families: the common shapes of rule, the elementwise
recurrences, and the scans' rules through logs (prod, cumprod; variance, std), kept here as
scans.py is at its size limit. Other families keep their own rules beside their records
(reduce: logsumexp, softmax; decomp: solve, inv, det, cholesky, norm; matfuncs: matrix_power).

A primitive's Taylor rule, its record's ``taylor=`` field, maps the truncated Taylor series of
its inputs to its output's: ``rule(o, ss, out, *xs, **attrs) -> series``. ``ss`` holds one
series per input (an input that does not depend on t has ``[x, None, ..., None]``), ``out``
and ``xs`` are the primal output and inputs, ``attrs`` the entry's attributes; the series
arithmetic is series.py's. Linear and piecewise-linear primitives reuse their jvp per
coefficient (``linear``); products are Cauchy products (``multilinear``); the rest use
recurrences. Rules name their primitive by its registered name, as batching rules do: a record
is built before its rule can refer to it. taylor_mode.py walks the tape calling them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .core import REGISTRY, is_constant, normalize_axes, shape_of
from .series import (
    Series,
    affine_square,
    cauchy,
    div_series,
    exp_series,
    minus,
    new,
    ode,
    plus,
    quotient_series,
    riccati_series,
    sin_cos_series,
    sqrt_series,
    square_coef,
    times,
)

Rule = Callable[..., Series]
LN2, LN10 = math.log(2.0), math.log(10.0)
SMALL_POWERS = 8        # x ** p for a constant integer 2 <= p <= this: Cauchy products


def order_of(ss: list[Series]) -> int:
    """K, the highest coefficient of the series."""
    return len(ss[0]) - 1

# ---------------------------------------------------------------- linear and multilinear


def linear(name: str) -> Rule:
    """A primitive linear in its inputs jointly, or piecewise linear: its jvp, per coefficient."""
    def rule(o, ss, out, *xs, **attrs):
        jvp = REGISTRY[name].jvp
        z = new(out, order_of(ss))
        for k in range(1, len(z)):
            ts = [s[k] for s in ss]
            if any(t is not None for t in ts):
                z[k] = jvp(o, ts, out, *xs, **attrs)
        return z
    return rule


def _compositions(k: int, n: int) -> list[tuple[int, ...]]:
    """Every n-tuple of non-negative ints summing to k."""
    if n == 1:
        return [(k,)]
    return [(j, *rest) for j in range(k + 1) for rest in _compositions(k - j, n - 1)]


def multilinear(name: str) -> Rule:
    """A primitive linear in each input (mul, matmul, einsum, cross): the Cauchy product."""
    def rule(o, ss, out, *xs, **attrs):
        prim = REGISTRY[name]
        z = new(out, order_of(ss))
        for k in range(1, len(z)):
            for js in _compositions(k, len(ss)):
                parts = [s[j] for s, j in zip(ss, js)]
                if all(p is not None for p in parts):
                    z[k] = plus(o, z[k], o.apply(prim, parts, attrs))
        return z
    return rule

# ---------------------------------------------------------------- arithmetic and powers


def div(o: Any, ss: list[Series], out: Any, x: Any, y: Any) -> Series:
    """x / y by the quotient recurrence."""
    return div_series(o, ss[0], ss[1], out)


def reciprocal(o: Any, ss: list[Series], out: Any, x: Any) -> Series:
    """1 / x by the quotient recurrence."""
    return div_series(o, new(1.0, order_of(ss)), ss[0], out)


def square(o: Any, ss: list[Series], out: Any, x: Any) -> Series:
    """x^2 by the symmetric Cauchy product."""
    return [out] + [square_coef(o, ss[0], k) for k in range(1, order_of(ss) + 1)]


def power(o: Any, ss: list[Series], out: Any, x: Any, y: Any) -> Series:
    """x ** a for a constant a: z_k = sum_j ((a + 1) j - k) x_j z_{k-j} / (k x_0); a small
    integer a by Cauchy products (exact at x = 0); a varying exponent as exp(y log x)."""
    xs, ys = ss
    order = order_of(ss)
    if all(c is None for c in ys[1:]):
        if is_constant(y) and np.ndim(y) == 0 and float(y) in range(2, SMALL_POWERS + 1):
            return _integer_power(o, xs, int(y), out)
        z = new(out, order)
        for k in range(1, order + 1):
            acc = None
            for j in range(1, k + 1):
                if xs[j] is not None and z[k - j] is not None:
                    w = ((np.asarray(y) + 1.0) * j - k if is_constant(y)
                         else o.sub(o.mul(o.add(y, 1.0), float(j)), float(k)))
                    acc = plus(o, acc, o.mul(o.mul(xs[j], z[k - j]), w))
            z[k] = None if acc is None else o.div(acc, o.mul(x, float(k)))
        return z
    logs = quotient_series(o, xs, xs, o.log(x))
    prod = multilinear("mul")(o, [ys, logs], o.mul(y, logs[0]), y, logs[0])
    return exp_series(o, prod, out)


def _integer_power(o: Any, xs: Series, p: int, out: Any) -> Series:
    """x ** p for a small integer p by repeated Cauchy products: exact at x = 0, where the
    recurrence divides by x."""
    z = xs
    for _ in range(p - 1):
        z = [o.mul(z[0], xs[0])] + [cauchy(o, o.mul, z, xs, k) for k in range(1, len(xs))]
    return [out] + z[1:]


def exp2(o: Any, ss: list[Series], out: Any, x: Any) -> Series:
    """2^x = exp(x ln 2)."""
    return exp_series(o, [times(o, c, LN2) for c in ss[0]], out)


def expm1(o: Any, ss: list[Series], out: Any, x: Any) -> Series:
    """z' = (z + 1) x'."""
    z = new(out, order_of(ss))
    a = new(o.add(out, 1.0), order_of(ss))
    for k in range(1, len(z)):
        z[k] = a[k] = ode(o, ss[0], a, k)
    return z

# ---------------------------------------------------------------- logs and inverse functions


def log(o: Any, ss: list[Series], out: Any, x: Any) -> Series:
    """log x: z' = x' / x."""
    return quotient_series(o, ss[0], ss[0], out)


def log_base(scale: float) -> Rule:
    """log2, log10: the natural log's series times 1 / ln(base)."""
    def rule(o, ss, out, x):
        z = quotient_series(o, ss[0], ss[0], out)
        return [out] + [times(o, c, scale) for c in z[1:]]
    return rule


def log1p(o: Any, ss: list[Series], out: Any, x: Any) -> Series:
    """log(1 + x): z' = x' / (1 + x)."""
    return quotient_series(o, ss[0], [o.add(x, 1.0)] + ss[0][1:], out)


def inverse(u: Callable, sign: float = 1.0) -> Rule:
    """z' = sign x' / u(x): arcsin, arccos, arctan, arcsinh, arccosh, arctanh."""
    def rule(o, ss, out, x):
        ns = [out] + [times(o, c, sign) for c in ss[0][1:]]
        return quotient_series(o, ns, u(o, ss[0]), out)
    return rule


def root(a: float, b: float) -> Callable:
    """The series of sqrt(a + b x^2)."""
    def u(o, xs):
        inner = affine_square(o, xs, a, b)
        return sqrt_series(o, inner, o.sqrt(inner[0]))
    return u


def poly(a: float, b: float) -> Callable:
    return lambda o, xs: affine_square(o, xs, a, b)

# ---------------------------------------------------------------- trigonometric and hyperbolic


def sin(o: Any, ss: list[Series], out: Any, x: Any) -> Series:
    """sin x, with cos x alongside."""
    return sin_cos_series(o, ss[0], out, o.cos(x), -1.0)[0]


def cos(o: Any, ss: list[Series], out: Any, x: Any) -> Series:
    """cos x, with sin x alongside."""
    return sin_cos_series(o, ss[0], o.sin(x), out, -1.0)[1]


def sinh(o: Any, ss: list[Series], out: Any, x: Any) -> Series:
    """sinh x, with cosh x alongside."""
    return sin_cos_series(o, ss[0], out, o.cosh(x), 1.0)[0]


def cosh(o: Any, ss: list[Series], out: Any, x: Any) -> Series:
    """cosh x, with sinh x alongside."""
    return sin_cos_series(o, ss[0], o.sinh(x), out, 1.0)[1]


def tanh(o: Any, ss: list[Series], out: Any, x: Any) -> Series:
    """tanh x: z' = (1 - z^2) x'."""
    return riccati_series(o, ss[0], out, o.sub(1.0, o.mul(out, out)), -1.0)


def tan(o: Any, ss: list[Series], out: Any, x: Any) -> Series:
    """tan x: z' = (1 + z^2) x'."""
    return riccati_series(o, ss[0], out, o.add(o.mul(out, out), 1.0), 1.0)


def sigmoid(o: Any, ss: list[Series], out: Any, x: Any) -> Series:
    """z' = w x' with w = z - z^2."""
    z = new(out, order_of(ss))
    w = new(o.mul(out, o.sub(1.0, out)), order_of(ss))
    for k in range(1, len(z)):
        z[k] = ode(o, ss[0], w, k)
        w[k] = minus(o, z[k], square_coef(o, z, k))
    return z


def sqrt(o: Any, ss: list[Series], out: Any, x: Any) -> Series:
    """sqrt x: z^2 = x."""
    return sqrt_series(o, ss[0], out)


def exp(o: Any, ss: list[Series], out: Any, x: Any) -> Series:
    """exp x: z' = z x'."""
    return exp_series(o, ss[0], out)

# ---------------------------------------------------------------- functions of two inputs


def hypot(o: Any, ss: list[Series], out: Any, x: Any, y: Any) -> Series:
    """sqrt(x^2 + y^2)."""
    sq = [None] + [plus(o, square_coef(o, ss[0], k), square_coef(o, ss[1], k))
                   for k in range(1, order_of(ss) + 1)]
    return sqrt_series(o, sq, out)


def arctan2(o: Any, ss: list[Series], out: Any, y: Any, x: Any) -> Series:
    """z' = (x y' - y x') / (x^2 + y^2): with r that quotient's series, z_k = r_{k-1} / k."""
    ys, xs = ss
    order = order_of(ss)

    def d(s):   # the series of ds/dt, one order shorter
        return [times(o, s[m + 1], m + 1) for m in range(order)]
    dy, dx = d(ys), d(xs)
    num = [minus(o, cauchy(o, o.mul, xs, dy, m), cauchy(o, o.mul, ys, dx, m))
           for m in range(order)]
    den = [plus(o, square_coef(o, ys, m), square_coef(o, xs, m)) for m in range(order)]
    r = div_series(o, num, den, None if num[0] is None else o.div(num[0], den[0]))
    return [out] + [times(o, c, 1.0 / (k + 1)) for k, c in enumerate(r)]


def logaddexp(o: Any, ss: list[Series], out: Any, x: Any, y: Any, scale: float = 1.0) -> Series:
    """log(e^x + e^y) = out + log of the sum of exp(x - out) and exp(y - out)."""
    ex = exp_series(o, [times(o, c, scale) for c in ss[0]], o.exp(o.mul(o.sub(x, out), scale)))
    ey = exp_series(o, [times(o, c, scale) for c in ss[1]], o.exp(o.mul(o.sub(y, out), scale)))
    total = [plus(o, a, b) for a, b in zip(ex, ey)]
    z = quotient_series(o, total, total, out)
    return [out] + [times(o, c, 1.0 / scale) for c in z[1:]]


def logaddexp2(o: Any, ss: list[Series], out: Any, x: Any, y: Any) -> Series:
    """log2(2^x + 2^y) = logaddexp(x ln 2, y ln 2) / ln 2."""
    return logaddexp(o, ss, out, x, y, scale=LN2)

# ---------------------------------------------------------------- reductions through logs


def prod(o: Any, ss: list[Series], out: Any, x: Any,
        axis: Any = None, keepdims: Any = False) -> Series:
    """exp of the sum of logs: only the logs' derivatives enter, so negative entries are fine
    (an entry equal to 0 is not)."""
    logs = quotient_series(o, ss[0], ss[0], None)
    sums = [None if c is None else o.sum(c, axis=axis, keepdims=keepdims) for c in logs]
    return exp_series(o, sums, out)


def cumprod(o: Any, ss: list[Series], out: Any, x: Any, axis: Any = None) -> Series:
    """exp of the cumulative sum of logs (entries equal to 0 are not supported)."""
    logs = quotient_series(o, ss[0], ss[0], None)
    return exp_series(o, [None if c is None else o.cumsum(c, axis=axis) for c in logs], out)


def variance(o: Any, ss: list[Series], out: Any, x: Any,
        axis: Any = None, ddof: Any = 0, keepdims: Any = False) -> Series:
    """The reduced sum of squared deviations over (count - ddof)."""
    shape = shape_of(x)
    count = int(np.prod([shape[i] for i in normalize_axes(axis, len(shape))])) - ddof
    d = [None] + [None if c is None else o.sub(c, o.mean(c, axis=axis, keepdims=True))
                  for c in ss[0][1:]]
    d[0] = o.sub(x, o.mean(x, axis=axis, keepdims=True))
    return [out] + [None if c is None else o.div(o.sum(c, axis=axis, keepdims=keepdims), count)
                    for c in (square_coef(o, d, k) for k in range(1, order_of(ss) + 1))]


def std(o: Any, ss: list[Series], out: Any, x: Any,
        axis: Any = None, ddof: Any = 0, keepdims: Any = False) -> Series:
    """sqrt of the variance."""
    var = variance(o, ss, None, x, axis, ddof, keepdims)
    return sqrt_series(o, var, out)

