"""Elementwise functions of two operands (and clip, of three): clip, fmax, fmin, mod, arctan2,
hypot, logaddexp, logaddexp2, with numpy's names.

Each is registered with ``elementwise`` from one derivative rule per input (broadcasting, masked
vjps and the jvp come with it). Conventions, where finite differences cannot decide:

- clip(x, a_min, a_max) is minimum(maximum(x, a_min), a_max), as numpy computes it. The gradient
  goes to x where a_min <= x <= a_max (bounds inclusive), to a_min where x < a_min, to a_max
  where x > a_max; where a_min > a_max the output is a_max and so is the gradient's target.
  A missing bound (None) is recorded as the constant -inf or inf and tests nothing.
- fmax and fmin give each side of a tie half the gradient (as maximum and minimum); where one
  operand is nan the other one (the result) gets all of it; where both are nan, x does.
- mod (numpy's remainder, Python's %) is x - floor(x / y) * y: d/dx = 1, d/dy = -floor(x / y).
- logaddexp and logaddexp2 never overflow, nor do their derivatives, sigmoid(x - y) and
  sigmoid(ln 2 (x - y)): an infinite operand gets 1 (+inf) or 0 (-inf), and where both are the
  same infinity each gets 0.5. A nan operand gives nan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError
from .core import ANY, NONZERO, Case, SymPyForm, dtype_of, is_constant, uniform
from .elementwise import BOTH_FINITE, elementwise, ufunc_on_floats
from .schema import attrs
from .series import (
    Series,
    cauchy,
    div_series,
    exp_series,
    minus,
    plus,
    quotient_series,
    sqrt_series,
    square_coef,
    times,
)
from .shape_rules import CLIPPED, broadcasting
from .taylor import linear, order_of

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

LN2 = float(np.log(2.0))

# ---------------------------------------------------------------- clip


def _clip_fmt(args, attrs, render):
    lo = "None" if args[1] == "-inf" else args[1]
    hi = "None" if args[2] == "inf" else args[2]
    return f"{args[0]}.clip({lo}, {hi})"


def _bound(c: Any, sign: float) -> bool:
    """True when c is the constant sign * inf (an absent bound): its test is skipped."""
    return is_constant(c) and np.ndim(c) == 0 and float(c) == sign * np.inf


def _inside(o: PrimitiveMethods, x, lo, hi):
    if _bound(lo, -1):
        return o.less_equal(x, hi)
    if _bound(hi, 1):
        return o.greater_equal(x, lo)
    return o.logical_and(o.greater_equal(x, lo), o.less_equal(x, hi))


def _below(o: PrimitiveMethods, x, lo, hi):
    if _bound(hi, 1):
        return o.less(x, lo)
    return o.logical_and(o.less(x, lo), o.less_equal(lo, hi))


def _above(o: PrimitiveMethods, x, lo, hi):
    if _bound(lo, -1):
        return o.greater(x, hi)
    return o.logical_or(o.greater(x, hi), o.greater(lo, hi))


CLIP = elementwise("clip", np.clip, _clip_fmt, (
    lambda o, g, out, x, lo, hi: o.where(_inside(o, x, lo, hi), g, 0),
    lambda o, g, out, x, lo, hi: o.where(_below(o, x, lo, hi), g, 0),
    lambda o, g, out, x, lo, hi: o.where(_above(o, x, lo, hi), g, 0)),
    sympy=SymPyForm(lambda sp, x, lo, hi: sp.Min(sp.Max(x, lo), hi)),
    python="float(np.clip({0}, {1}, {2}))",
    python_check="finite({0}) and finite({1}) and finite({2})",
    domain=(ANY, uniform(-1.2, -0.2), uniform(0.2, 1.2)),
    cases=[Case(((3,), (3,), (3,))), Case(((2, 3), (), ())), Case(((3, 4), (3, 1), (1, 4))),
           Case(((3,), (), (3,))),
           Case(((4,), (4,), (4,)), label="crossed", domain=(ANY, uniform(0.2, 1.0),
                                                             uniform(-1.0, -0.2)))],
    taylor=linear("clip"), schema=attrs(shape_rule=broadcasting(CLIPPED)), saves=("inputs",))

# ---------------------------------------------------------------- fmax, fmin


def _if_nan(o: PrimitiveMethods, v, then, other):
    """``then`` where v is nan, else ``other``; a constant without nan records nothing."""
    if is_constant(v) and not np.isnan(v).any():
        return other
    return o.where(o.not_equal(v, v), then, other)


def _half_share(o: PrimitiveMethods, x, y, sense):
    """(sign(x - y) * sense + 1) / 2: 1 where x wins, 0.5 on a tie, 0 where it loses."""
    s = o.sign(o.sub(x, y))
    return o.mul(o.add(s if sense > 0 else o.neg(s), 1), 0.5)


def _nan_share(o: PrimitiveMethods, x, y, sense):
    """Weight of x in fmax (sense 1) or fmin (sense -1): 1 where it wins or y is nan, 0.5 on a
    tie, 0 where it loses or x alone is nan; recorded."""
    return _if_nan(o, y, 1.0, _if_nan(o, x, 0.0, _half_share(o, x, y, sense)))


def _nan_other(o: PrimitiveMethods, x, y, sense):
    """Weight of y: one minus x's (so both nan sends everything to x)."""
    return _if_nan(o, y, 0.0, _if_nan(o, x, 1.0, _half_share(o, y, x, sense)))


FMAX = elementwise("fmax", np.fmax, "fmax({0}, {1})", (
    lambda o, g, out, x, y: o.mul(g, _nan_share(o, x, y, 1.0)),
    lambda o, g, out, x, y: o.mul(g, _nan_other(o, x, y, 1.0))),
    sympy=SymPyForm(lambda sp, x, y: sp.Max(x, y)), taylor=linear("fmax"), saves=("inputs",),
    **ufunc_on_floats(np.fmax, BOTH_FINITE))

FMIN = elementwise("fmin", np.fmin, "fmin({0}, {1})", (
    lambda o, g, out, x, y: o.mul(g, _nan_share(o, x, y, -1.0)),
    lambda o, g, out, x, y: o.mul(g, _nan_other(o, x, y, -1.0))),
    sympy=SymPyForm(lambda sp, x, y: sp.Min(x, y)), taylor=linear("fmin"), saves=("inputs",),
    **ufunc_on_floats(np.fmin, BOTH_FINITE))

# ---------------------------------------------------------------- mod, arctan2, hypot

MOD = elementwise("mod", np.remainder, "{0} % {1}", (
    lambda o, g, out, x, y: g,
    lambda o, g, out, x, y: o.neg(o.mul(g, o.floor(o.div(x, y))))),
    domain=(ANY, NONZERO), taylor=linear("mod"), saves=("inputs",),
    **ufunc_on_floats(np.remainder, "finite({0}) and finite({1}) and {1} != 0.0"))


def _radius2(o: PrimitiveMethods, x, y):
    return o.add(o.mul(x, x), o.mul(y, y))


def _arctan2_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, y: Any, x: Any) -> Series:
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


ARCTAN2 = elementwise("arctan2", np.arctan2, "arctan2({0}, {1})", (
    lambda o, g, out, y, x: o.div(o.mul(g, x), _radius2(o, x, y)),
    lambda o, g, out, y, x: o.neg(o.div(o.mul(g, y), _radius2(o, x, y)))),
    sympy=SymPyForm(lambda sp, y, x: sp.atan2(y, x)),
    domain=(NONZERO, NONZERO), taylor=_arctan2_taylor, saves=("inputs",),
    **ufunc_on_floats(np.arctan2, BOTH_FINITE))



def _hypot_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any, y: Any) -> Series:
    """sqrt(x^2 + y^2)."""
    sq = [None] + [plus(o, square_coef(o, ss[0], k), square_coef(o, ss[1], k))
                   for k in range(1, order_of(ss) + 1)]
    return sqrt_series(o, sq, out)


HYPOT = elementwise("hypot", np.hypot, "hypot({0}, {1})", (
    lambda o, g, out, x, y: o.mul(g, o.div(x, out)),
    lambda o, g, out, x, y: o.mul(g, o.div(y, out))),
    sympy=SymPyForm(lambda sp, x, y: sp.sqrt(x**2 + y**2)),
    domain=(NONZERO, NONZERO), taylor=_hypot_taylor, saves=("inputs", "out"),
    **ufunc_on_floats(np.hypot, "abs({0}) <= 1e300 and abs({1}) <= 1e300"))

# ---------------------------------------------------------------- logaddexp, logaddexp2


def _share_of(o: PrimitiveMethods, x, y, scale=1.0):
    """d/dx of logaddexp (scale 1) or logaddexp2 (scale ln 2): sigmoid(scale (x - y)), which
    never overflows. Infinities are first clipped to +-M (a quarter of the dtype's largest
    value, so x - y is finite): the same infinity twice gives 0.5, never inf - inf."""
    floats = [d for d in (dtype_of(x), dtype_of(y)) if d is not None and d.kind == "f"]
    big = float(np.finfo(min(floats, key=lambda d: d.itemsize) if floats else np.float64).max) / 4
    d = o.sub(o.clip(x, -big, big), o.clip(y, -big, big))
    return o.sigmoid(d if scale == 1.0 else o.mul(d, scale))


def _logaddexp_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any, y: Any,
                      scale: float = 1.0) -> Series:
    """log(e^x + e^y) = out + log of the sum of exp(x - out) and exp(y - out)."""
    ex = exp_series(o, [times(o, c, scale) for c in ss[0]], o.exp(o.mul(o.sub(x, out), scale)))
    ey = exp_series(o, [times(o, c, scale) for c in ss[1]], o.exp(o.mul(o.sub(y, out), scale)))
    total = [plus(o, a, b) for a, b in zip(ex, ey)]
    z = quotient_series(o, total, total, out)
    return [out] + [times(o, c, 1.0 / scale) for c in z[1:]]


def _logaddexp2_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any,
                       y: Any) -> Series:
    """log2(2^x + 2^y) = logaddexp(x ln 2, y ln 2) / ln 2."""
    return _logaddexp_taylor(o, ss, out, x, y, scale=LN2)


LOGADDEXP = elementwise("logaddexp", np.logaddexp, "logaddexp({0}, {1})", (
    lambda o, g, out, x, y: o.mul(g, _share_of(o, x, y)),
    lambda o, g, out, x, y: o.mul(g, _share_of(o, y, x))),
    sympy=SymPyForm(lambda sp, x, y: sp.log(sp.exp(x) + sp.exp(y))), taylor=_logaddexp_taylor,
    saves=("inputs",), **ufunc_on_floats(np.logaddexp, BOTH_FINITE))

LOGADDEXP2 = elementwise("logaddexp2", np.logaddexp2, "logaddexp2({0}, {1})", (
    lambda o, g, out, x, y: o.mul(g, _share_of(o, x, y, LN2)),
    lambda o, g, out, x, y: o.mul(g, _share_of(o, y, x, LN2))), taylor=_logaddexp2_taylor,
    saves=("inputs",), **ufunc_on_floats(np.logaddexp2, BOTH_FINITE))


# ---------------------------------------------------------------- Ops methods

class BinaryOps:
    """The functions of this module as methods of an Ops."""

    def clip(self, x: Any, a_min: Any = None, a_max: Any = None,
             name: str | None = None) -> Variable:
        """x limited to [a_min, a_max] (None: no bound); the gradient goes to the active side."""
        lo = -np.inf if a_min is None else a_min
        hi = np.inf if a_max is None else a_max
        return self.apply(CLIP, (x, lo, hi), None, name)

    def fmax(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Elementwise maximum ignoring nan; a tie sends half the gradient to each side."""
        return self.apply(FMAX, (x, y), None, name)

    def fmin(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Elementwise minimum ignoring nan; a tie sends half the gradient to each side."""
        return self.apply(FMIN, (x, y), None, name)

    def mod(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Elementwise remainder of x / y with the sign of y (numpy's mod, Python's %)."""
        return self.apply(MOD, (x, y), None, name)

    remainder = mod     # numpy's other name for the same function

    def arctan2(self, y: Any, x: Any, name: str | None = None) -> Variable:
        """Elementwise angle of the point (x, y), in (-pi, pi]."""
        return self.apply(ARCTAN2, (y, x), None, name)

    def hypot(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Elementwise sqrt(x ** 2 + y ** 2), without overflow."""
        return self.apply(HYPOT, (x, y), None, name)

    def logaddexp(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Elementwise log(exp(x) + exp(y)), without overflow."""
        return self.apply(LOGADDEXP, (x, y), None, name)

    def logaddexp2(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Elementwise log2(2 ** x + 2 ** y), without overflow."""
        return self.apply(LOGADDEXP2, (x, y), None, name)


# ---------------------------------------------------------------- Variable methods

class BinaryVariable:
    """Variable methods: ``x.clip(min, max)`` (numpy's ndarray.clip) and ``x % y``."""

    __slots__ = ()

    def clip(self, min: Any = None, max: Any = None, out: None = None,  # noqa: A002
             **kwargs: Any) -> Variable:
        """Limited to [min, max] (numpy's ndarray.clip; np.clip(x, lo, hi) calls it)."""
        if out is not None:
            raise ArgumentError(f"clip of {self.name}: out= is not supported on Variables")
        lo, hi = kwargs.pop("a_min", min), kwargs.pop("a_max", max)
        if kwargs:
            raise ArgumentError(f"clip of {self.name}: {', '.join(kwargs)} not supported")
        return self.rec.clip(self, lo, hi)

    def __mod__(self, other: Any) -> Variable:
        return self.rec.mod(self, other)

    def __rmod__(self, other: Any) -> Variable:
        return self.rec.mod(other, self)
