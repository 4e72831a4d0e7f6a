"""The log-gamma function and its derivatives, scipy.special's names: gammaln, digamma and
polygamma(n, x), computed with numpy alone.

gammaln is the C library's ``math.lgamma`` (log |Gamma(x)|) entrywise; polygamma(n, x) shifts x
up by the recurrence psi^(n)(x + 1) = psi^(n)(x) + (-1)^n n! / x^(n+1) until x >= 20 + 2n and
sums the asymptotic series there (ten Bernoulli terms): within a few ulps of scipy for x > 0,
and right for negative x that is not an integer (a pole, where it gives nan, as does scipy for
n >= 1). digamma is polygamma with n = 0.

Derivatives: gammaln' = digamma, polygamma(n)' = polygamma(n + 1), so every order records. The
Taylor rule of both is the same: the composition of a function whose derivatives of every
order are known at x0 with x's series (``known_derivatives``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError
from .core import POSITIVE, UNARY, Case, SymPyForm, sympy_call
from .elementwise import elementwise
from .lazy import blockwise, dask_array
from .schema import attrs, integer
from .series import Series, cauchy, new, plus, times
from .shape_rules import FLOAT_OUT, broadcasting
from .taylor import order_of

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

# B_2, B_4, ..., B_20
_BERNOULLI = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
              43867 / 798, -174611 / 330]
_SERIES_LARGEST_N = 90   # the series forms (n + 19)! w^-(n + 20) in floats: overflow from n = 98


def _lgamma_number(v: float) -> float:
    """log |Gamma(v)|: inf at the poles (0, -1, -2, ...) and past 2.5e305, where it overflows
    (math.lgamma raises there; scipy's gammaln gives inf)."""
    if not math.isfinite(v):
        return abs(v)       # (inf at +-inf, nan at nan, as math.lgamma gives, with no flag)
    if v <= 0 and v == math.floor(v):
        return math.inf
    try:
        return math.lgamma(v)
    except OverflowError:
        return math.inf


_lgamma = np.vectorize(_lgamma_number, otypes=[np.float64])


def _gammaln(x):
    return _lgamma(x)


def _polygamma(x, n=0):
    if dask_array(x) is not None:       # block by block on a dask array (lazy)
        return blockwise(lambda b: _polygamma(b, n))(x)
    x = np.asarray(x, dtype=np.float64)
    pole = (x <= 0) & (x == np.floor(x))
    z = np.where(pole | ~np.isfinite(x), 1.0, x)
    out = _polygamma_scaled(z, n) if n > _SERIES_LARGEST_N else _polygamma_series(z, n)
    edge = np.where(x == np.inf, np.inf if n == 0 else 0.0,
                    np.where((x == 0) & (n == 0), -np.inf, np.nan))     # as scipy
    return np.where(pole | ~np.isfinite(x), edge, out)


def _polygamma_series(z, n):
    """polygamma(n, z) at finite z off the poles, for n whose factorials fit in a float."""
    shift = np.ceil(np.maximum(0.0, 20.0 + 2 * n - z)).astype(np.int64)
    steps = int(shift.max()) if shift.size else 0
    acc = np.zeros_like(z)
    for k in range(steps):            # psi^(n)(x) = psi^(n)(x + N) - (-1)^n n! sum 1/(x+k)^(n+1)
        acc = acc + np.where(k < shift, 1.0 / (z + k) ** (n + 1), 0.0)
    w = z + shift
    if n == 0:
        series = np.log(w) - 0.5 / w
        for k, b in enumerate(_BERNOULLI, start=1):
            series = series - b / (2 * k * w ** (2 * k))
    else:
        series = math.factorial(n - 1) / w ** n + math.factorial(n) / (2 * w ** (n + 1))
        for k, b in enumerate(_BERNOULLI, start=1):
            series = series + b * math.factorial(2 * k + n - 1) / (math.factorial(2 * k) *
                                                                   w ** (2 * k + n))
        series = (-1) ** (n + 1) * series
    return series - (-1) ** n * math.factorial(n) * acc


def _polygamma_scaled(z, n):
    """polygamma(n, z) = (-1)^(n+1) n! zeta(n + 1, z) for large n, with the zeta sum scaled by
    its largest term r^-(n+1) (r the least |z + k|) and n! r^-(n+1) formed as one exp of logs:
    no factorial overflows, and a result beyond the float range is a signed inf (as scipy's).
    The sum stops once its remaining terms are below 1e-18 of the largest (a few dozen terms
    however large n is). At a negative half-integer z and even n the terms of z + k < 0 cancel
    those of z + k <= -z exactly, leaving zeta(n + 1, 1 - z)."""
    if n % 2 == 0:
        z = np.where((z < 0) & (z - np.floor(z) == 0.5), 1.0 - z, z)
    frac = z - np.floor(z)
    r = np.where(z > 0, z, np.minimum(frac, 1.0 - frac))
    shift = np.ceil(np.maximum(0.0, 20.0 + 2 * n - z)).astype(np.int64)
    rel = np.zeros_like(z)
    done = np.zeros(z.shape, dtype=bool)
    for k in range(int(shift.max()) if shift.size else 0):
        zk = z + k
        live = (k < shift) & ~done
        term = np.sign(zk) ** (n + 1) * (r / np.abs(zk)) ** (n + 1)
        rel = rel + np.where(live, term, 0.0)
        # what is left (terms past k and the tail) is below (r/zk)^(n+1) (zk/n + 1)
        done |= live & (zk > 0) & ((r / zk) ** (n + 1) * (zk / n + 1.0) < 1e-18)
        if done.all():
            break
    w = z + shift
    tail = w / n + 0.5
    rising, inv_w = 1.0, 1.0 / w
    for k, b in enumerate(_BERNOULLI, start=1):     # Euler-Maclaurin, over w^-(n+1)
        rising *= (n + 2 * k - 2) * (n + 2 * k - 1) if k > 1 else n + 1
        tail = tail + b * rising / math.factorial(2 * k) * inv_w ** (2 * k - 1)
    rel = rel + np.where(done, 0.0, (r / w) ** (n + 1) * tail)
    log_size = math.lgamma(n + 1) - (n + 1) * np.log(r) + np.log(np.abs(rel))
    with np.errstate(over="ignore", divide="ignore"):
        return (-1.0) ** (n + 1) * np.sign(rel) * np.exp(log_size)


def known_derivatives(derivative: Callable) -> Callable:
    """The Taylor rule of f(x) whose j-th derivative at x0 is ``derivative(o, x, j, **attrs)``:
    z_k = sum_j f^(j)(x0) / j! [t^k] (x(t) - x0)^j."""
    def rule(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any, **attrs: Any) -> Series:
        order = order_of(ss)
        delta = [None] + list(ss[0][1:])
        z, power = new(out, order), delta
        for j in range(1, order + 1):
            if j > 1:
                power = [None] + [cauchy(o, o.mul, power, delta, k, 1) for k in range(1, order + 1)]
            if all(c is None for c in power[j:]):
                continue
            d = times(o, derivative(o, x, j, **attrs), 1.0 / math.factorial(j))
            for k in range(j, order + 1):
                if power[k] is not None:
                    z[k] = plus(o, z[k], o.mul(power[k], d))
        return z
    return rule


def _polygamma_fmt(args, attrs, render):
    n = attrs.get("n", 0)
    return f"digamma({args[0]})" if n == 0 else f"polygamma({n}, {args[0]})"


GAMMALN = elementwise("gammaln", blockwise(_gammaln), "gammaln({0})",
                      (lambda o, g, out, x: o.mul(g, o.polygamma(0, x)),),
                      sympy=sympy_call("loggamma"), domain=POSITIVE,
                      taylor=known_derivatives(lambda o, x, j: o.polygamma(j - 1, x)),
                      schema=attrs(shape_rule=broadcasting(FLOAT_OUT)), saves=("inputs",),
                      python="float({f}({0}))",
                      python_check="0.0 < {0} < 2.5e305")      # (lgamma overflows past it)
POLYGAMMA = elementwise(
    "polygamma", _polygamma, _polygamma_fmt,
    (lambda o, g, out, x, n=0: o.mul(g, o.polygamma(n + 1, x)),),
    sympy=SymPyForm(lambda sp, x, n=0: sp.polygamma(n, x)), domain=POSITIVE,
    cases=[*UNARY, Case(((3,),), {"n": 1}), Case(((2, 3),), {"n": 3})],
    schema=attrs(shape_rule=broadcasting(FLOAT_OUT), n=integer(0, 64)),
    taylor=known_derivatives(lambda o, x, j, n=0: o.polygamma(n + j, x)), saves=("inputs",))
POLYGAMMA.plain = False     # op.polygamma(n, x) puts n first: value sweeps go through apply


# ---------------------------------------------------------------- Ops methods

class GammaOps:
    """log-gamma and its derivatives as methods of an Ops (scipy.special's names)."""

    def gammaln(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise log |Gamma(x)|."""
        return self.apply(GAMMALN, (x,), None, name)

    def digamma(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise psi(x), the derivative of gammaln (polygamma with n = 0)."""
        return self.apply(POLYGAMMA, (x,), None, name)

    def polygamma(self, n: int, x: Any, name: str | None = None) -> Variable:
        """Elementwise n-th derivative of digamma (scipy's argument order)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ArgumentError(f"polygamma: n must be a non-negative int, got {n!r}")
        return self.apply(POLYGAMMA, (x,), {"n": int(n)} if n else None, name)


class GammaVariable:
    """Variable methods ``x.gammaln()`` and ``x.digamma()``."""

    __slots__ = ()

    def gammaln(self) -> Variable:
        """Elementwise log |Gamma|."""
        return self.rec.gammaln(self)

    def digamma(self) -> Variable:
        """Elementwise digamma."""
        return self.rec.digamma(self)
