"""scipy.special's error functions and regularized incomplete beta, computed with numpy alone:
erf, erfc, erfinv (elementwise) and betainc(a, b, x) (differentiable in x; a and b are
attributes of the entry when constant, inputs held fixed when recorded).

Values: erf and erfc are the C library's (``math.erf``, ``math.erfc``) applied entrywise;
erfinv starts from Giles' polynomial approximation and takes Halley steps on erf (erfc in the
tails, so 1 - x keeps its digits); betainc sums its continued fraction (modified Lentz) on
the side of ``(a + 1) / (a + b + 2)`` where it converges fast. Each is within a few ulps of
scipy's over its domain; SciPy is never needed. When SciPy is installed its ufuncs of the same
names, called on a Variable, record these primitives (numpy_api.ufuncs()).

Derivatives: erf' = 2/sqrt(pi) exp(-x^2), erfc' = -erf', erfinv' = sqrt(pi)/2 exp(out^2),
d betainc / dx = x^(a-1) (1-x)^(b-1) / B(a, b). Each Taylor rule solves z' = w x' with w's own
series (exp of a series; for erfinv, w depends on z and both grow together).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import NotDifferentiableError, ShapeError
from .core import (
    HELD,
    Case,
    Primitive,
    align,
    broadcast_to,
    error,
    is_constant,
    register,
    run,
    shape_of,
    sympy_call,
    unbroadcast,
    uniform,
)
from .elementwise import FINITE, elementwise
from .lazy import blockwise, refuse
from .schema import MAX_RANK, ShapeRule, ShapeRuleError, attrs, is_real
from .series import Series, affine_square, exp_series, new, ode, plus, quotient_series, square_coef
from .shape_rules import FLOAT_OUT, FLOATING, broadcast_shapes, broadcasting
from .taylor import order_of

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
SQRT_PI_OVER_TWO = math.sqrt(math.pi) / 2.0

# ---------------------------------------------------------------- values


def _entrywise(fn: Any) -> Any:
    """A float function of one number applied to every entry, in x's float dtype."""
    vec = np.vectorize(fn, otypes=[np.float64])

    def forward(x):
        dt = getattr(x, "dtype", None)
        out = vec(x)
        return out.astype(dt) if dt is not None and dt.kind == "f" and dt != out.dtype else out
    return forward


_erf = _entrywise(math.erf)
_erfc = _entrywise(math.erfc)
_erfc64 = np.vectorize(math.erfc, otypes=[np.float64])
_erf64 = np.vectorize(math.erf, otypes=[np.float64])
_lgamma = np.vectorize(lambda v: math.lgamma(v) if v > 0 else math.nan, otypes=[np.float64])


def _giles(x: np.ndarray) -> np.ndarray:
    """Giles' single-precision approximation of erfinv on |x| < 1 (relative error ~1e-7)."""
    w = -np.log((1.0 - x) * (1.0 + x))
    central = w < 5.0
    u = np.where(central, w - 2.5, np.sqrt(np.maximum(w, 5.0)) - 3.0)
    lo = [2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
          -0.00125372503, -0.00417768164, 0.246640727, 1.50140941]
    hi = [-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
          -0.0076224613, 0.00943887047, 1.00167406, 2.83297682]
    p_lo, p_hi = np.zeros_like(u), np.zeros_like(u)
    for c_lo, c_hi in zip(lo, hi):
        p_lo, p_hi = p_lo * u + c_lo, p_hi * u + c_hi
    return np.where(central, p_lo, p_hi) * x


def _erfinv(x):
    dt = getattr(x, "dtype", None)
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    inside = ax < 1.0                     # nan and |x| >= 1 are set at the end
    a = np.where(inside, ax, 0.5)
    y = _giles(a)
    tail = a > 0.5
    rest = 1.0 - a                        # exact for a in [0.5, 1]
    for _ in range(3):                    # Halley on erf: cubic convergence from ~1e-7
        step = (_erf64(y) - a) / (TWO_OVER_SQRT_PI * np.exp(-y * y))
        y = np.where(tail, y, y - step / (1.0 + y * step))
    rest = np.where(tail, rest, 0.5)
    for _ in range(8):                    # Newton on log erfc(y) = log(1 - a): nearly linear
        c = _erfc64(y)
        y = np.where(tail, y + (np.log(c) - np.log(rest)) * c / (TWO_OVER_SQRT_PI *
                                                                  np.exp(-y * y)), y)
    out = np.where(inside, np.copysign(y, x), np.where(ax == 1.0, np.copysign(np.inf, x), np.nan))
    out = np.where(x == 0, x, out)        # keeps the sign of -0.0
    return out.astype(dt) if dt is not None and dt.kind == "f" and dt != out.dtype else out


def _continued_fraction(a, b, x):
    """The continued fraction of I_x(a, b) (Numerical Recipes' betacf, modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = np.ones_like(x)
    d = 1.0 - qab * x / qap
    d = 1.0 / np.where(np.abs(d) < tiny, tiny, d)
    h = d
    for m in range(1, 2000):
        for aa in (m * (b - m) * x / ((qam + 2 * m) * (a + 2 * m)),
                   -(a + m) * (qab + m) * x / ((a + 2 * m) * (qap + 2 * m))):
            d = 1.0 + aa * d
            d = 1.0 / np.where(np.abs(d) < tiny, tiny, d)
            c = 1.0 + aa / c
            c = np.where(np.abs(c) < tiny, tiny, c)
            h = h * d * c
        if np.all(np.abs(d * c - 1.0) < 1e-16):
            break
    return h


def _betainc(x, a, b):
    refuse("betainc", x, reason="its continued fraction runs until every entry converges")
    a, b, x = np.broadcast_arrays(np.asarray(a, dtype=np.float64),
                                  np.asarray(b, dtype=np.float64), np.asarray(x, dtype=np.float64))
    valid = (a > 0) & (b > 0) & (x > 0) & (x < 1)
    swap = x > (a + 1.0) / (a + b + 2.0)
    p, q = np.where(swap, b, a), np.where(swap, a, b)
    s = np.where(valid, np.where(swap, 1.0 - x, x), 0.5)
    p, q = np.where(valid, p, 1.0), np.where(valid, q, 1.0)
    front = np.exp(p * np.log(s) + q * np.log1p(-s) - (_lgamma(p) + _lgamma(q) - _lgamma(p + q)))
    part = front * _continued_fraction(p, q, s) / p
    inside = np.where(swap, 1.0 - part, part)
    edge = np.where(x <= 0, 0.0, 1.0)
    ok = (a > 0) & (b > 0) & (x >= 0) & (x <= 1)
    return np.where(valid, inside, np.where(ok, edge, np.nan))


def log_beta(a: Any, b: Any) -> np.ndarray:
    """log B(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b), entrywise (nan where a or b <= 0)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return _lgamma(a) + _lgamma(b) - _lgamma(a + b)

# ---------------------------------------------------------------- erf, erfc, erfinv


def _gauss(o: PrimitiveMethods, x):
    """2/sqrt(pi) exp(-x^2), erf's derivative."""
    return o.mul(o.exp(o.neg(o.mul(x, x))), TWO_OVER_SQRT_PI)


def _erf_series(sign: float):
    """Taylor rule of erf (sign 1) and erfc (sign -1): z' = sign 2/sqrt(pi) exp(-x^2) x'."""
    def rule(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
        order = order_of(ss)
        w = exp_series(o, affine_square(o, ss[0], 0.0, -1.0), o.mul(_gauss(o, x), sign))
        z = new(out, order)
        for k in range(1, order + 1):
            z[k] = ode(o, ss[0], w, k)
        return z
    return rule


def _erfinv_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """z' = w x' with w = sqrt(pi)/2 exp(z^2): w' = (z^2)' w, grown with z."""
    order = order_of(ss)
    z, sq = new(out, order), new(None, order)
    w = new(o.mul(o.exp(o.mul(out, out)), SQRT_PI_OVER_TWO), order)
    for k in range(1, order + 1):
        z[k] = ode(o, ss[0], w, k)
        sq[k] = square_coef(o, z, k)
        w[k] = ode(o, sq, w, k)
    return z


ERF = elementwise("erf", blockwise(_erf), "{0}.erf()",
                  (lambda o, g, out, x: o.mul(g, _gauss(o, x)),),
                  sympy=sympy_call("erf"), taylor=_erf_series(1.0),
                  schema=attrs(shape_rule=broadcasting(FLOATING)), saves=("inputs",),
                  python="float({f}({0}))", python_check=FINITE)
ERFC = elementwise("erfc", blockwise(_erfc), "{0}.erfc()",
                   (lambda o, g, out, x: o.neg(o.mul(g, _gauss(o, x))),), sympy=sympy_call("erfc"),
                   taylor=_erf_series(-1.0), schema=attrs(shape_rule=broadcasting(FLOATING)),
                   saves=("inputs",), python="float({f}({0}))", python_check=FINITE)
ERFINV = elementwise("erfinv", blockwise(_erfinv), "{0}.erfinv()",
                     (lambda o, g, out, x: o.mul(g, o.mul(o.exp(o.mul(out, out)),
                                                         SQRT_PI_OVER_TWO)),),
    sympy=sympy_call("erfinv"),
                     domain=uniform(-0.95, 0.95), taylor=_erfinv_taylor,
                     schema=attrs(shape_rule=broadcasting(FLOATING)), saves=("out",),
                     python="float({f}({0}))", python_check="-1.0 < {0} < 1.0")

# ---------------------------------------------------------------- betainc
#
# a and b are attributes when constant and inputs after x when recorded, held fixed: their
# vjp answers HELD (the sweep raises when a requested gradient passes through them), and a
# tangent or Taylor series of theirs raises, as JAX refuses to differentiate in them; ``_ab``
# reads them back from either place.


def _ab(params: tuple, attrs: dict) -> tuple[Any, Any]:
    it = iter(params)
    return (attrs["a"] if "a" in attrs else next(it)), (attrs["b"] if "b" in attrs else next(it))


def _betainc_forward(x, *params, **attrs):
    a, b = _ab(params, attrs)
    return _betainc(x, a, b)


def _density(o: PrimitiveMethods, x, a, b):
    """x^(a-1) (1-x)^(b-1) / B(a, b), betainc's derivative in x."""
    if is_constant(a) and is_constant(b):
        scale = np.exp(-log_beta(a, b))
    else:
        scale = o.exp(o.neg(o.sub(o.add(o.gammaln(a), o.gammaln(b)), o.gammaln(o.add(a, b)))))
    am = np.asarray(a) - 1.0 if is_constant(a) else o.sub(a, 1.0)
    bm = np.asarray(b) - 1.0 if is_constant(b) else o.sub(b, 1.0)
    return o.mul(o.mul(o.pow(x, am), o.pow(o.sub(1.0, x), bm)), scale)


def _only_x(what: str) -> NotDifferentiableError:
    return NotDifferentiableError(f"betainc: no {what} in a or b (it is differentiable in x "
                                  "only, as JAX's); hold a and b fixed")


def _betainc_vjp(o: PrimitiveMethods, g, out, i, x, *params, **attrs):
    if i:
        return HELD
    a, b = _ab(params, attrs)
    return unbroadcast(o, o.mul(g, _density(o, x, a, b)), shape_of(x))


def _betainc_jvp(o: PrimitiveMethods, ts, out, x, *params, **attrs):
    if any(t is not None for t in ts[1:]):
        raise _only_x("tangent")
    if ts[0] is None:
        return None
    a, b = _ab(params, attrs)
    return broadcast_to(o, o.mul(ts[0], _density(o, x, a, b)), shape_of(out))


def _betainc_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any, *params: Any,
                    **attrs: Any) -> Series:
    """z' = w x', w = exp((a-1) log x + (b-1) log(1-x)) / B(a, b)."""
    if any(c is not None for s in ss[1:] for c in s[1:]):
        raise _only_x("Taylor series")
    a, b = _ab(params, attrs)
    order = order_of(ss)
    xs = ss[0]
    logx = quotient_series(o, xs, xs, None)
    onem = [o.sub(1.0, x)] + [None if c is None else o.neg(c) for c in xs[1:]]
    log1m = quotient_series(o, onem, onem, None)
    am = np.asarray(a, dtype=float) - 1.0 if is_constant(a) else o.sub(a, 1.0)
    bm = np.asarray(b, dtype=float) - 1.0 if is_constant(b) else o.sub(b, 1.0)
    u = [None] + [plus(o, None if p is None else o.mul(p, am), None if q is None else o.mul(q, bm))
                  for p, q in zip(logx[1:], log1m[1:])]
    w = exp_series(o, u, _density(o, x, a, b))
    z = new(out, order)
    for k in range(1, order + 1):
        z[k] = ode(o, xs, w, k)
    return z


def _betainc_batch(o: PrimitiveMethods, xs, batched, **attrs):
    """The inputs aligned to the largest example rank, counting constant a and b."""
    rank = max([len(shape_of(v)) - f for v, f in zip(xs, batched)] +
               [np.ndim(attrs[k]) for k in ("a", "b") if k in attrs])
    return run(o, "betainc", align(o, xs, batched, rank), attrs)


def _betainc_fmt(args, attrs, render):
    rest = iter(args[1:])
    a = render(attrs["a"], "a") if "a" in attrs else next(rest)
    b = render(attrs["b"], "b") if "b" in attrs else next(rest)
    return f"betainc({a}, {b}, {args[0]})"


# betainc's a and b, when constant: numbers or arrays broadcasting with x (the output takes
# their shape); recorded ones are inputs

def REAL_OR_ARRAY(v: Any, shapes: Sequence[tuple]) -> str | None:  # noqa: N802
    """A real number, or a float array that broadcasts with the inputs (betainc's a, b)."""
    if is_real(v):
        return None
    if not isinstance(v, np.ndarray) or v.dtype.kind != "f" or v.ndim > MAX_RANK:
        return "must be a number or an array of floats"
    try:
        np.broadcast_shapes(v.shape, *shapes)
    except ValueError:
        return f"shape {v.shape} does not broadcast with the input's {shapes[0] if shapes else ()}"
    return None


def broadcast_with(*names: str) -> ShapeRule:
    """float64, the broadcast shape of the inputs and of the attributes ``names``; each name
    is an attribute or, in order, an input after the first."""
    def rule(shapes: Sequence[tuple], dtypes: Sequence, attrs: dict) -> tuple:
        if len(shapes) - 1 + sum(n in attrs for n in names) != len(names):
            raise ShapeRuleError(f"{len(shapes)} input(s) and the attributes "
                                 f"{sorted(n for n in names if n in attrs)} do not give "
                                 f"x, {', '.join(names)}")
        return broadcast_shapes(*shapes, *(np.shape(attrs[n]) for n in names if n in attrs)), \
            FLOAT_OUT(dtypes)
    return rule


BETAINC = register(Primitive(
    "betainc", _betainc_forward, [_betainc_vjp], _betainc_jvp, _betainc_fmt,
    [Case(((3,),), {"a": 2.0, "b": 3.0}), Case(((2, 3),), {"a": 0.7, "b": 1.5}),
     Case(((3, 1),), {"a": np.array([1.5, 4.0]), "b": 2.5}),
     Case(((4,),), {"a": 1.0, "b": 1.0}), Case(((),), {"a": 5.0, "b": 0.8})],
    domain=(uniform(0.1, 0.9),), variadic=True, batch=_betainc_batch, taylor=_betainc_taylor,
    schema=attrs(shape_rule=broadcast_with("a", "b"), a=REAL_OR_ARRAY, b=REAL_OR_ARRAY),
    saves=("inputs",)))


# ---------------------------------------------------------------- Ops methods

class SpecialFunctionOps:
    """scipy.special's error functions and incomplete beta as methods of an Ops."""

    def erf(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise error function 2/sqrt(pi) int_0^x exp(-t^2) dt."""
        return self.apply(ERF, (x,), None, name)

    def erfc(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise complementary error function 1 - erf(x), accurate for large x."""
        return self.apply(ERFC, (x,), None, name)

    def erfinv(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise inverse of erf on [-1, 1] (+-inf at +-1, nan outside)."""
        return self.apply(ERFINV, (x,), None, name)

    def betainc(self, a: Any, b: Any, x: Any, name: str | None = None) -> Variable:
        """Regularized incomplete beta I_x(a, b) (scipy's order); differentiable in x only (a
        and b may be Variables, held fixed)."""
        inputs, attrs = [x], {}
        for label, v in (("a", a), ("b", b)):
            if is_constant(v):
                attrs[label] = _attr(v)
            else:
                inputs.append(v)
        try:
            np.broadcast_shapes(*(shape_of(v) for v in inputs),
                                *(np.shape(v) for v in attrs.values()))
        except ValueError:
            raise error("betainc", tuple(inputs), f"a with shape {np.shape(a)}, b with shape "
                        f"{np.shape(b)} and x do not broadcast", ShapeError) from None
        return self.apply(BETAINC, tuple(inputs), attrs, name)


def _attr(v: Any) -> Any:
    """A constant parameter as an attribute: a float, or a read-only float64 array."""
    arr = np.array(v, dtype=np.float64)
    if arr.ndim == 0:
        return float(arr)
    arr.setflags(write=False)
    return arr


# ---------------------------------------------------------------- Variable methods

class SpecialFunctionVariable:
    """Variable methods ``x.erf()``, ``x.erfc()``, ``x.erfinv()``, ``x.betainc(a, b)``."""

    __slots__ = ()

    def erf(self) -> Variable:
        """Elementwise error function."""
        return self.rec.erf(self)

    def erfc(self) -> Variable:
        """Elementwise complementary error function."""
        return self.rec.erfc(self)

    def erfinv(self) -> Variable:
        """Elementwise inverse error function."""
        return self.rec.erfinv(self)

    def betainc(self, a: Any, b: Any) -> Variable:
        """The regularized incomplete beta I_self(a, b)."""
        return self.rec.betainc(a, b, self)
