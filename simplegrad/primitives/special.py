"""More elementwise functions: trigonometric and hyperbolic, logs and exponentials, rounding,
clip, and the nan-ignoring, modular and two-argument functions of numpy.

Each is registered with ``elementwise`` (so broadcasting, masked vjps and the jvp come from its
per-input derivative rules ``d(o, g, out, x, ...)``, linear in ``g``). Conventions:

- floor, ceil and round have derivative 0 almost everywhere: their rule is None (no gradient
  flows, nothing is recorded), also at the jumps.
- clip(x, a_min, a_max) is minimum(maximum(x, a_min), a_max), as numpy computes it. The gradient
  goes to x where a_min <= x <= a_max (bounds inclusive), to a_min where x < a_min, to a_max
  where x > a_max; where a_min > a_max the output is a_max and so is the gradient's target.
- fmax and fmin give each side of a tie half the gradient (as maximum and minimum); where one
  operand is nan the other one (the result) gets all of it; where both are nan, x does.
- mod (numpy's remainder, Python's %) is x - floor(x / y) * y: d/dx = 1, d/dy = -floor(x / y).
- logaddexp and logaddexp2 never overflow, nor do their derivatives exp(x - out) and
  2 ** (x - out); where both operands are -inf the gradient is 0 (as logsumexp's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError
from .core import ANY, NONZERO, POSITIVE, UNARY, Case, Sampler, is_constant, uniform
from .elementwise import elementwise

if TYPE_CHECKING:
    from ..variable import Variable

LN2 = float(np.log(2.0))
LN10 = float(np.log(10.0))


def _unary(name: str, forward: Any, rule: Any, domain: Sampler = ANY, cases=None) -> Any:
    """Register a one-input function printed as a method, ``v3.tan()``."""
    return elementwise(name, forward, "{0}." + name + "()", (rule,), domain=domain, cases=cases)


def _sqrt_one_minus_square(o, x):
    """sqrt(1 - x^2), as sqrt((1 - x)(1 + x)) to keep precision near |x| = 1."""
    return o.sqrt(o.mul(o.sub(1, x), o.add(x, 1)))

# ---------------------------------------------------------------- trigonometric, hyperbolic


TAN = _unary("tan", np.tan, lambda o, g, out, x: o.mul(g, o.add(o.mul(out, out), 1)),
             uniform(-1.2, 1.2))
ARCSIN = _unary("arcsin", np.arcsin, lambda o, g, out, x: o.div(g, _sqrt_one_minus_square(o, x)),
                uniform(-0.9, 0.9))
ARCCOS = _unary("arccos", np.arccos,
                lambda o, g, out, x: o.neg(o.div(g, _sqrt_one_minus_square(o, x))),
                uniform(-0.9, 0.9))
ARCTAN = _unary("arctan", np.arctan, lambda o, g, out, x: o.div(g, o.add(o.mul(x, x), 1)))
SINH = _unary("sinh", np.sinh, lambda o, g, out, x: o.mul(g, o.cosh(x)))
COSH = _unary("cosh", np.cosh, lambda o, g, out, x: o.mul(g, o.sinh(x)))
ARCSINH = _unary("arcsinh", np.arcsinh,
                 lambda o, g, out, x: o.div(g, o.sqrt(o.add(o.mul(x, x), 1))))
ARCCOSH = _unary("arccosh", np.arccosh,       # sqrt((x - 1)(x + 1)): exact near x = 1
                 lambda o, g, out, x: o.div(g, o.sqrt(o.mul(o.sub(x, 1), o.add(x, 1)))),
                 uniform(1.1, 3.0))
ARCTANH = _unary("arctanh", np.arctanh,
                 lambda o, g, out, x: o.div(g, o.mul(o.sub(1, x), o.add(x, 1))),
                 uniform(-0.9, 0.9))

# ---------------------------------------------------------------- logs, exponentials, powers

LOG1P = _unary("log1p", np.log1p, lambda o, g, out, x: o.div(g, o.add(x, 1)), uniform(-0.5, 2.0))
EXPM1 = _unary("expm1", np.expm1, lambda o, g, out, x: o.mul(g, o.add(out, 1)))
LOG2 = _unary("log2", np.log2, lambda o, g, out, x: o.div(g, o.mul(x, LN2)), POSITIVE)
LOG10 = _unary("log10", np.log10, lambda o, g, out, x: o.div(g, o.mul(x, LN10)), POSITIVE)
EXP2 = _unary("exp2", np.exp2, lambda o, g, out, x: o.mul(g, o.mul(out, LN2)))
SQUARE = _unary("square", np.square, lambda o, g, out, x: o.mul(g, o.mul(x, 2)))
RECIPROCAL = _unary("reciprocal", np.reciprocal,
                    lambda o, g, out, x: o.neg(o.mul(g, o.mul(out, out))), NONZERO)

# ---------------------------------------------------------------- rounding (no gradient)

FLOOR = _unary("floor", np.floor, None)
CEIL = _unary("ceil", np.ceil, None)


def _round(x, decimals=0):
    return np.round(x, decimals)


def _round_fmt(args, attrs, render):
    decimals = attrs.get("decimals", 0)
    return f"{args[0]}.round({decimals})" if decimals else f"{args[0]}.round()"


ROUND = elementwise("round", _round, _round_fmt, (None,),
                    cases=[*UNARY, Case(((3, 4),), {"decimals": 1}),
                           Case(((3,),), {"decimals": -1}, domain=(uniform(-20.0, 20.0),))])

# ---------------------------------------------------------------- clip


def _clip_fmt(args, attrs, render):
    lo = "None" if args[1] == "-inf" else args[1]
    hi = "None" if args[2] == "inf" else args[2]
    return f"{args[0]}.clip({lo}, {hi})"


def _bound(c: Any, sign: float) -> bool:
    """True when c is the constant sign * inf (an absent bound): its test is skipped."""
    return is_constant(c) and np.ndim(c) == 0 and float(c) == sign * np.inf


def _inside(o, x, lo, hi):
    if _bound(lo, -1):
        return o.less_equal(x, hi)
    if _bound(hi, 1):
        return o.greater_equal(x, lo)
    return o.logical_and(o.greater_equal(x, lo), o.less_equal(x, hi))


def _below(o, x, lo, hi):
    if _bound(hi, 1):
        return o.less(x, lo)
    return o.logical_and(o.less(x, lo), o.less_equal(lo, hi))


def _above(o, x, lo, hi):
    if _bound(lo, -1):
        return o.greater(x, hi)
    return o.logical_or(o.greater(x, hi), o.greater(lo, hi))


CLIP = elementwise("clip", np.clip, _clip_fmt, (
    lambda o, g, out, x, lo, hi: o.where(_inside(o, x, lo, hi), g, 0),
    lambda o, g, out, x, lo, hi: o.where(_below(o, x, lo, hi), g, 0),
    lambda o, g, out, x, lo, hi: o.where(_above(o, x, lo, hi), g, 0)),
    domain=(ANY, uniform(-1.2, -0.2), uniform(0.2, 1.2)),
    cases=[Case(((3,), (3,), (3,))), Case(((2, 3), (), ())), Case(((3, 4), (3, 1), (1, 4))),
           Case(((3,), (), (3,))),
           Case(((4,), (4,), (4,)), label="crossed", domain=(ANY, uniform(0.2, 1.0),
                                                             uniform(-1.0, -0.2)))])

# ---------------------------------------------------------------- fmax, fmin


def _nan_share(o, x, y, sense):
    """Weight of x in fmax (sense 1) or fmin (sense -1): 1 where it wins or y is nan, 0.5 on a
    tie, 0 where it loses or x alone is nan; recorded."""
    share = o.mul(o.add(o.mul(o.sign(o.sub(x, y)), sense), 1), 0.5)
    return o.where(o.not_equal(y, y), 1.0, o.where(o.not_equal(x, x), 0.0, share))


def _nan_other(o, x, y, sense):
    """Weight of y: one minus x's (so both nan sends everything to x)."""
    share = o.mul(o.add(o.mul(o.sign(o.sub(y, x)), sense), 1), 0.5)
    return o.where(o.not_equal(y, y), 0.0, o.where(o.not_equal(x, x), 1.0, share))


FMAX = elementwise("fmax", np.fmax, "fmax({0}, {1})", (
    lambda o, g, out, x, y: o.mul(g, _nan_share(o, x, y, 1.0)),
    lambda o, g, out, x, y: o.mul(g, _nan_other(o, x, y, 1.0))))

FMIN = elementwise("fmin", np.fmin, "fmin({0}, {1})", (
    lambda o, g, out, x, y: o.mul(g, _nan_share(o, x, y, -1.0)),
    lambda o, g, out, x, y: o.mul(g, _nan_other(o, x, y, -1.0))))

# ---------------------------------------------------------------- mod, arctan2, hypot

MOD = elementwise("mod", np.remainder, "{0} % {1}", (
    lambda o, g, out, x, y: g,
    lambda o, g, out, x, y: o.neg(o.mul(g, o.floor(o.div(x, y))))),
    domain=(ANY, NONZERO))


def _radius2(o, x, y):
    return o.add(o.mul(x, x), o.mul(y, y))


ARCTAN2 = elementwise("arctan2", np.arctan2, "arctan2({0}, {1})", (
    lambda o, g, out, y, x: o.div(o.mul(g, x), _radius2(o, x, y)),
    lambda o, g, out, y, x: o.neg(o.div(o.mul(g, y), _radius2(o, x, y)))),
    domain=(NONZERO, NONZERO))

HYPOT = elementwise("hypot", np.hypot, "hypot({0}, {1})", (
    lambda o, g, out, x, y: o.mul(g, o.div(x, out)),
    lambda o, g, out, x, y: o.mul(g, o.div(y, out))),
    domain=(NONZERO, NONZERO))

# ---------------------------------------------------------------- logaddexp, logaddexp2


def _finite(o, out):
    """out where it is finite, else 0: both operands -inf then weigh exp(-inf - 0) = 0."""
    return o.where(o.isfinite(out), out, 0)


LOGADDEXP = elementwise("logaddexp", np.logaddexp, "logaddexp({0}, {1})", (
    lambda o, g, out, x, y: o.mul(g, o.exp(o.sub(x, _finite(o, out)))),
    lambda o, g, out, x, y: o.mul(g, o.exp(o.sub(y, _finite(o, out))))))

LOGADDEXP2 = elementwise("logaddexp2", np.logaddexp2, "logaddexp2({0}, {1})", (
    lambda o, g, out, x, y: o.mul(g, o.exp2(o.sub(x, _finite(o, out)))),
    lambda o, g, out, x, y: o.mul(g, o.exp2(o.sub(y, _finite(o, out))))))

# numpy ufuncs these primitives answer for (for Variable.__array_ufunc__)
UFUNCS = {np.tan: "tan", np.arcsin: "arcsin", np.arccos: "arccos", np.arctan: "arctan",
          np.sinh: "sinh", np.cosh: "cosh", np.arcsinh: "arcsinh", np.arccosh: "arccosh",
          np.arctanh: "arctanh", np.log1p: "log1p", np.expm1: "expm1", np.log2: "log2",
          np.log10: "log10", np.exp2: "exp2", np.square: "square", np.reciprocal: "reciprocal",
          np.floor: "floor", np.ceil: "ceil", np.rint: "round", np.fmax: "fmax", np.fmin: "fmin",
          np.remainder: "mod", np.arctan2: "arctan2", np.hypot: "hypot",
          np.logaddexp: "logaddexp", np.logaddexp2: "logaddexp2"}


# ---------------------------------------------------------------- Ops methods

class SpecialOps:
    """The functions of this module as methods of an Ops, with numpy's names."""

    def tan(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise tangent."""
        return self._apply(TAN, (x,), None, name)

    def arcsin(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise inverse sine."""
        return self._apply(ARCSIN, (x,), None, name)

    def arccos(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise inverse cosine."""
        return self._apply(ARCCOS, (x,), None, name)

    def arctan(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise inverse tangent."""
        return self._apply(ARCTAN, (x,), None, name)

    def sinh(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise hyperbolic sine."""
        return self._apply(SINH, (x,), None, name)

    def cosh(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise hyperbolic cosine."""
        return self._apply(COSH, (x,), None, name)

    def arcsinh(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise inverse hyperbolic sine."""
        return self._apply(ARCSINH, (x,), None, name)

    def arccosh(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise inverse hyperbolic cosine (x >= 1)."""
        return self._apply(ARCCOSH, (x,), None, name)

    def arctanh(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise inverse hyperbolic tangent (|x| < 1)."""
        return self._apply(ARCTANH, (x,), None, name)

    def log1p(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise log(1 + x), accurate for small x."""
        return self._apply(LOG1P, (x,), None, name)

    def expm1(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise exp(x) - 1, accurate for small x."""
        return self._apply(EXPM1, (x,), None, name)

    def log2(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise base-2 logarithm."""
        return self._apply(LOG2, (x,), None, name)

    def log10(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise base-10 logarithm."""
        return self._apply(LOG10, (x,), None, name)

    def exp2(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise 2 ** x."""
        return self._apply(EXP2, (x,), None, name)

    def square(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise x * x."""
        return self._apply(SQUARE, (x,), None, name)

    def reciprocal(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise 1 / x."""
        return self._apply(RECIPROCAL, (x,), None, name)

    def floor(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise floor; no gradient flows (its derivative is 0 where it exists)."""
        return self._apply(FLOOR, (x,), None, name)

    def ceil(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise ceiling; no gradient flows (its derivative is 0 where it exists)."""
        return self._apply(CEIL, (x,), None, name)

    def round(self, x: Any, decimals: int = 0, name: str | None = None) -> Variable:
        """Round to ``decimals`` places, halves to even as numpy; no gradient flows."""
        if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)):
            raise ArgumentError(f"round: decimals must be an int, got {decimals!r}")
        attrs = {"decimals": int(decimals)} if decimals else None
        return self._apply(ROUND, (x,), attrs, name)

    def clip(self, x: Any, a_min: Any = None, a_max: Any = None,
             name: str | None = None) -> Variable:
        """x limited to [a_min, a_max] (None: no bound); the gradient goes to the active side."""
        lo = -np.inf if a_min is None else a_min
        hi = np.inf if a_max is None else a_max
        return self._apply(CLIP, (x, lo, hi), None, name)

    def fmax(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Elementwise maximum ignoring nan; a tie sends half the gradient to each side."""
        return self._apply(FMAX, (x, y), None, name)

    def fmin(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Elementwise minimum ignoring nan; a tie sends half the gradient to each side."""
        return self._apply(FMIN, (x, y), None, name)

    def mod(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Elementwise remainder of x / y with the sign of y (numpy's mod, Python's %)."""
        return self._apply(MOD, (x, y), None, name)

    remainder = mod     # numpy's other name for the same function

    def arctan2(self, y: Any, x: Any, name: str | None = None) -> Variable:
        """Elementwise angle of the point (x, y), in (-pi, pi]."""
        return self._apply(ARCTAN2, (y, x), None, name)

    def hypot(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Elementwise sqrt(x ** 2 + y ** 2), without overflow."""
        return self._apply(HYPOT, (x, y), None, name)

    def logaddexp(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Elementwise log(exp(x) + exp(y)), without overflow."""
        return self._apply(LOGADDEXP, (x, y), None, name)

    def logaddexp2(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Elementwise log2(2 ** x + 2 ** y), without overflow."""
        return self._apply(LOGADDEXP2, (x, y), None, name)


# ---------------------------------------------------------------- Variable methods

class SpecialVariable:
    """Variable methods for the one-input functions (``x.tan()``, ``x.round()``, ``x % y``)."""

    __slots__ = ()

    def tan(self) -> Variable:
        """Elementwise tangent."""
        return self.ops.tan(self)

    def arcsin(self) -> Variable:
        """Elementwise inverse sine."""
        return self.ops.arcsin(self)

    def arccos(self) -> Variable:
        """Elementwise inverse cosine."""
        return self.ops.arccos(self)

    def arctan(self) -> Variable:
        """Elementwise inverse tangent."""
        return self.ops.arctan(self)

    def sinh(self) -> Variable:
        """Elementwise hyperbolic sine."""
        return self.ops.sinh(self)

    def cosh(self) -> Variable:
        """Elementwise hyperbolic cosine."""
        return self.ops.cosh(self)

    def arcsinh(self) -> Variable:
        """Elementwise inverse hyperbolic sine."""
        return self.ops.arcsinh(self)

    def arccosh(self) -> Variable:
        """Elementwise inverse hyperbolic cosine."""
        return self.ops.arccosh(self)

    def arctanh(self) -> Variable:
        """Elementwise inverse hyperbolic tangent."""
        return self.ops.arctanh(self)

    def log1p(self) -> Variable:
        """Elementwise log(1 + self)."""
        return self.ops.log1p(self)

    def expm1(self) -> Variable:
        """Elementwise exp(self) - 1."""
        return self.ops.expm1(self)

    def log2(self) -> Variable:
        """Elementwise base-2 logarithm."""
        return self.ops.log2(self)

    def log10(self) -> Variable:
        """Elementwise base-10 logarithm."""
        return self.ops.log10(self)

    def exp2(self) -> Variable:
        """Elementwise 2 ** self."""
        return self.ops.exp2(self)

    def square(self) -> Variable:
        """Elementwise self * self."""
        return self.ops.square(self)

    def reciprocal(self) -> Variable:
        """Elementwise 1 / self."""
        return self.ops.reciprocal(self)

    def floor(self) -> Variable:
        """Elementwise floor (no gradient)."""
        return self.ops.floor(self)

    def ceil(self) -> Variable:
        """Elementwise ceiling (no gradient)."""
        return self.ops.ceil(self)

    def round(self, decimals: int = 0, out: None = None) -> Variable:
        """Rounded to ``decimals`` places (no gradient); numpy's ``out`` must stay None."""
        _no_out("round", self, out)
        return self.ops.round(self, decimals)

    def clip(self, min: Any = None, max: Any = None, out: None = None,  # noqa: A002
             **kwargs: Any) -> Variable:
        """Limited to [min, max] (numpy's ndarray.clip; np.clip(x, lo, hi) calls it)."""
        _no_out("clip", self, out)
        lo, hi = kwargs.pop("a_min", min), kwargs.pop("a_max", max)
        if kwargs:
            raise ArgumentError(f"clip of {self.name}: {', '.join(kwargs)} not supported")
        return self.ops.clip(self, lo, hi)

    def __mod__(self, other: Any) -> Variable:
        return self.ops.mod(self, other)

    def __rmod__(self, other: Any) -> Variable:
        return self.ops.mod(other, self)


def _no_out(method: str, x: Any, out: Any) -> None:
    if out is not None:
        raise ArgumentError(f"{method} of {x.name}: out= is not supported on Variables (a "
                            "Variable is never written into)")
