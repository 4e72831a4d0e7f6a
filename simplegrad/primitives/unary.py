"""More elementwise functions of one input: trigonometric and hyperbolic, logs, exponentials
and powers, and rounding, with numpy's names (functions of two operands are in binary.py).

Each is registered with ``elementwise`` from its derivative rule ``d(o, g, out, x)``, linear in
``g`` (broadcasting, masked vjps and the jvp come with it), and prints as a method, ``v3.tan()``,
which Variables have too. Inverse functions near their singular points use factored forms
(``sqrt((1 - x)(1 + x))``) to keep precision; each check case samples away from them.

floor, ceil, trunc and round have derivative 0 wherever it exists: their rule is None, so no
gradient flows through them and nothing is recorded for them in a gradient, also at their jumps.

``stop_gradient`` (``x.detach()``) is the identity with no derivative at all: recorded like any
entry, so it follows its input under vmap (per example), in a replayed or compiled program and in
Taylor mode (a constant series), while no gradient or tangent passes through it at any order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError
from ..pytree import tree_map
from .core import (
    ANY,
    NONZERO,
    PASSES_ON,
    POSITIVE,
    UNARY,
    Case,
    Sampler,
    SymPyForm,
    TaylorRule,
    sympy_call,
    uniform,
)
from .elementwise import FINITE, elementwise, ufunc_on_floats
from .schema import attrs, integer
from .series import (
    Series,
    affine_square,
    div_series,
    exp_series,
    new,
    ode,
    quotient_series,
    riccati_series,
    sin_cos_series,
    sqrt_series,
    square_coef,
    times,
)
from .shape_rules import SAME, rounded, same_shape
from .taylor import linear, order_of

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

LN2 = float(np.log(2.0))
LN10 = float(np.log(10.0))


def _unary(name: str, forward: Any, rule: Any, domain: Sampler = ANY, cases=None,
           taylor: TaylorRule | None = None, saves: tuple = ("inputs", "out"),
           **facts: Any) -> Any:
    """Register a one-input function printed as a method, ``v3.tan()`` (``facts``: other
    record fields)."""
    return elementwise(name, forward, "{0}." + name + "()", (rule,), **facts, domain=domain,
                       cases=cases, taylor=taylor, saves=saves)


def _sqrt_one_minus_square(o: PrimitiveMethods, x):
    """sqrt(1 - x^2), as sqrt((1 - x)(1 + x)) to keep precision near |x| = 1."""
    return o.sqrt(o.mul(o.sub(1, x), o.add(x, 1)))

# ---------------------------------------------------------------- trigonometric, hyperbolic


def _tan_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """tan x: z' = (1 + z^2) x'."""
    w0 = out * out + 1.0 if o.plain_values else o.add(o.mul(out, out), 1.0)
    return riccati_series(o, ss[0], out, w0, 1.0)


def _inverse(u: Callable, sign: float = 1.0) -> TaylorRule:
    """Taylor rule of z' = sign x' / u(x): arcsin, arccos, arctan, arcsinh, arccosh, arctanh."""
    def rule(o: PrimitiveMethods, ss, out, x):
        ns = [out] + [times(o, c, sign) for c in ss[0][1:]]
        return quotient_series(o, ns, u(o, ss[0]), out)
    return rule


def _root(a: float, b: float) -> Callable:
    """The series of sqrt(a + b x^2)."""
    def u(o: PrimitiveMethods, xs):
        inner = affine_square(o, xs, a, b)
        return sqrt_series(o, inner, o.sqrt(inner[0]))
    return u


def _poly(a: float, b: float) -> Callable:
    """The series of a + b x^2."""
    return lambda o, xs: affine_square(o, xs, a, b)


def _sinh_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """sinh x, with cosh x alongside."""
    return sin_cos_series(o, ss[0], out, o.cosh(x), 1.0)[0]


def _cosh_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """cosh x, with sinh x alongside."""
    return sin_cos_series(o, ss[0], o.sinh(x), out, 1.0)[1]



TAN = _unary("tan", np.tan, lambda o, g, out, x: o.mul(g, o.add(o.mul(out, out), 1)),
             uniform(-1.2, 1.2), sympy=sympy_call("tan"), taylor=_tan_taylor, saves=("out",),
             **ufunc_on_floats(np.tan))
ARCSIN = _unary("arcsin", np.arcsin, lambda o, g, out, x: o.div(g, _sqrt_one_minus_square(o, x)),
                uniform(-0.9, 0.9), sympy=sympy_call("asin"), taylor=_inverse(_root(1.0, -1.0)),
                saves=("inputs",), **ufunc_on_floats(np.arcsin, "-1.0 <= {0} <= 1.0"))
ARCCOS = _unary("arccos", np.arccos,
                lambda o, g, out, x: o.neg(o.div(g, _sqrt_one_minus_square(o, x))),
                uniform(-0.9, 0.9),
                sympy=sympy_call("acos"), taylor=_inverse(_root(1.0, -1.0), -1.0),
                saves=("inputs",), **ufunc_on_floats(np.arccos, "-1.0 <= {0} <= 1.0"))
ARCTAN = _unary("arctan", np.arctan, lambda o, g, out, x: o.div(g, o.add(o.mul(x, x), 1)),
    sympy=sympy_call("atan"),
                taylor=_inverse(_poly(1.0, 1.0)), saves=("inputs",),
                **ufunc_on_floats(np.arctan))
SINH = _unary("sinh", np.sinh, lambda o, g, out, x: o.mul(g, o.cosh(x)),
    sympy=sympy_call("sinh"), taylor=_sinh_taylor, saves=("inputs",),
    **ufunc_on_floats(np.sinh, "-709.0 < {0} < 709.0"))
COSH = _unary("cosh", np.cosh, lambda o, g, out, x: o.mul(g, o.sinh(x)),
    sympy=sympy_call("cosh"), taylor=_cosh_taylor, saves=("inputs",),
    **ufunc_on_floats(np.cosh, "-709.0 < {0} < 709.0"))
ARCSINH = _unary("arcsinh", np.arcsinh,
                 lambda o, g, out, x: o.div(g, o.sqrt(o.add(o.mul(x, x), 1))),
                 sympy=sympy_call("asinh"),
                 taylor=_inverse(_root(1.0, 1.0)), saves=("inputs",),
                 **ufunc_on_floats(np.arcsinh))
ARCCOSH = _unary("arccosh", np.arccosh,       # sqrt((x - 1)(x + 1)): exact near x = 1
                 lambda o, g, out, x: o.div(g, o.sqrt(o.mul(o.sub(x, 1), o.add(x, 1)))),
                 uniform(1.1, 3.0), sympy=sympy_call("acosh"), taylor=_inverse(_root(-1.0, 1.0)),
                 saves=("inputs",),
                 **ufunc_on_floats(np.arccosh, "1.0 <= {0} <= 1.7976931348623157e308"))
ARCTANH = _unary("arctanh", np.arctanh,
                 lambda o, g, out, x: o.div(g, o.mul(o.sub(1, x), o.add(x, 1))),
                 uniform(-0.9, 0.9), sympy=sympy_call("atanh"), taylor=_inverse(_poly(1.0, -1.0)),
                 saves=("inputs",), **ufunc_on_floats(np.arctanh, "-1.0 < {0} < 1.0"))

# ---------------------------------------------------------------- logs, exponentials, powers


def _log1p_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """log(1 + x): z' = x' / (1 + x)."""
    return quotient_series(o, ss[0], [o.add(x, 1.0)] + ss[0][1:], out)


def _expm1_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """z' = (z + 1) x'."""
    z = new(out, order_of(ss))
    a = new(o.add(out, 1.0), order_of(ss))
    for k in range(1, len(z)):
        z[k] = a[k] = ode(o, ss[0], a, k)
    return z


def _log_base(scale: float) -> TaylorRule:
    """Taylor rule of log2, log10: the natural log's series times 1 / ln(base)."""
    def rule(o: PrimitiveMethods, ss, out, x):
        z = quotient_series(o, ss[0], ss[0], out)
        return [out] + [times(o, c, scale) for c in z[1:]]
    return rule


def _exp2_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """2^x = exp(x ln 2)."""
    return exp_series(o, [times(o, c, LN2) for c in ss[0]], out)


def _square_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """x^2 by the symmetric Cauchy product."""
    return [out] + [square_coef(o, ss[0], k) for k in range(1, order_of(ss) + 1)]


def _reciprocal_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """1 / x by the quotient recurrence."""
    return div_series(o, new(1.0, order_of(ss)), ss[0], out)


LOG1P = _unary("log1p", np.log1p, lambda o, g, out, x: o.div(g, o.add(x, 1)), uniform(-0.5, 2.0),
    sympy=SymPyForm(lambda sp, x: sp.log(1 + x)),
               taylor=_log1p_taylor, saves=("inputs",),
               **ufunc_on_floats(np.log1p, "-1.0 < {0} <= 1.7976931348623157e308"))
EXPM1 = _unary("expm1", np.expm1, lambda o, g, out, x: o.mul(g, o.add(out, 1)),
    sympy=SymPyForm(lambda sp, x: sp.exp(x) - 1),
               taylor=_expm1_taylor, saves=("out",),
               **ufunc_on_floats(np.expm1, "-700.0 < {0} < 709.0"))
LOG2 = _unary("log2", np.log2, lambda o, g, out, x: o.div(g, o.mul(x, LN2)), POSITIVE,
    sympy=SymPyForm(lambda sp, x: sp.log(x, 2)),
              taylor=_log_base(1 / LN2), saves=("inputs",),
              **ufunc_on_floats(np.log2, "0.0 < {0} <= 1.7976931348623157e308"))
LOG10 = _unary("log10", np.log10, lambda o, g, out, x: o.div(g, o.mul(x, LN10)), POSITIVE,
    sympy=SymPyForm(lambda sp, x: sp.log(x, 10)),
               taylor=_log_base(1 / LN10), saves=("inputs",),
               **ufunc_on_floats(np.log10, "0.0 < {0} <= 1.7976931348623157e308"))
EXP2 = _unary("exp2", np.exp2, lambda o, g, out, x: o.mul(g, o.mul(out, LN2)),
    sympy=SymPyForm(lambda sp, x: 2 ** x), taylor=_exp2_taylor, saves=("out",),
    **ufunc_on_floats(np.exp2, "-1022.0 < {0} < 1024.0"))
SQUARE = _unary("square", np.square, lambda o, g, out, x: o.mul(g, o.mul(x, 2)),
    sympy=SymPyForm(lambda sp, x: x ** 2),
                taylor=_square_taylor, saves=("inputs",), python="({0} * {0})")
RECIPROCAL = _unary("reciprocal", np.reciprocal,
                    lambda o, g, out, x: o.neg(o.mul(g, o.mul(out, out))), NONZERO,
                    sympy=SymPyForm(lambda sp, x: 1 / x),
                    taylor=_reciprocal_taylor, saves=("out",), python="(1.0 / {0})",
                    python_check=FINITE)

# ---------------------------------------------------------------- rounding (no gradient)

FLOOR = _unary("floor", np.floor, None, sympy=sympy_call("floor"), taylor=linear("floor"), saves=(),
               **ufunc_on_floats(np.floor))
CEIL = _unary("ceil", np.ceil, None, sympy=sympy_call("ceiling"), taylor=linear("ceil"), saves=(),
              **ufunc_on_floats(np.ceil))
TRUNC = _unary("trunc", np.trunc, None,
    sympy=SymPyForm(lambda sp, x: sp.sign(x) * sp.floor(sp.Abs(x))), taylor=linear("trunc"),
    saves=(), **ufunc_on_floats(np.trunc))


def _round(x, decimals=0):
    return np.round(x, decimals)


def _round_fmt(args, attrs, render):
    decimals = attrs.get("decimals", 0)
    return f"{args[0]}.round({decimals})" if decimals else f"{args[0]}.round()"


ROUND = elementwise("round", _round, _round_fmt, (None,),
                    cases=[*UNARY, Case(((3, 4),), {"decimals": 1}),
                           Case(((3,),), {"decimals": -1}, domain=(uniform(-20.0, 20.0),))],
                    taylor=linear("round"),
                    schema=attrs(shape_rule=rounded, decimals=integer(-400, 400)), saves=())



# ---------------------------------------------------------------- stop_gradient


def _stop_gradient(x: Any) -> Any:
    """x's value as it is (a view of an array, so the entry's value is not the input's)."""
    return x.view() if type(x) is np.ndarray else x


def _no_tangent(o: PrimitiveMethods, ts, out, x):
    return None


def _constant_series(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """The series of a value held fixed: its value, every higher coefficient zero."""
    return new(out, order_of(ss))


STOP_GRADIENT = elementwise("stop_gradient", _stop_gradient, "{0}.detach()", (None,),
                            jvp=_no_tangent, taylor=_constant_series, masked=False,
                            differentiable=False, numpy="{0}", numba="{0}", python="{0}",
                            sympy=PASSES_ON,
                            schema=attrs(shape_rule=same_shape(SAME)), saves=())


def stop_gradient(x: Any) -> Any:
    """JAX's ``stop_gradient``: each Variable among the leaves of ``x`` (a pytree) with its
    value and no gradient or tangent through it (``v.detach()``); arrays and numbers as given."""
    return tree_map(lambda a: a.detach() if hasattr(a, "prim") else a, x)


# ---------------------------------------------------------------- Ops methods

class UnaryOps:
    """The functions of this module as methods of an Ops, with numpy's names."""

    def tan(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise tangent."""
        return self.apply(TAN, (x,), None, name)

    def arcsin(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise inverse sine."""
        return self.apply(ARCSIN, (x,), None, name)

    def arccos(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise inverse cosine."""
        return self.apply(ARCCOS, (x,), None, name)

    def arctan(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise inverse tangent."""
        return self.apply(ARCTAN, (x,), None, name)

    def sinh(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise hyperbolic sine."""
        return self.apply(SINH, (x,), None, name)

    def cosh(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise hyperbolic cosine."""
        return self.apply(COSH, (x,), None, name)

    def arcsinh(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise inverse hyperbolic sine."""
        return self.apply(ARCSINH, (x,), None, name)

    def arccosh(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise inverse hyperbolic cosine (x >= 1)."""
        return self.apply(ARCCOSH, (x,), None, name)

    def arctanh(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise inverse hyperbolic tangent (|x| < 1)."""
        return self.apply(ARCTANH, (x,), None, name)

    def log1p(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise log(1 + x), accurate for small x."""
        return self.apply(LOG1P, (x,), None, name)

    def expm1(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise exp(x) - 1, accurate for small x."""
        return self.apply(EXPM1, (x,), None, name)

    def log2(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise base-2 logarithm."""
        return self.apply(LOG2, (x,), None, name)

    def log10(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise base-10 logarithm."""
        return self.apply(LOG10, (x,), None, name)

    def exp2(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise 2 ** x."""
        return self.apply(EXP2, (x,), None, name)

    def square(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise x * x."""
        return self.apply(SQUARE, (x,), None, name)

    def reciprocal(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise 1 / x."""
        return self.apply(RECIPROCAL, (x,), None, name)

    def floor(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise floor; no gradient flows (its derivative is 0 where it exists)."""
        return self.apply(FLOOR, (x,), None, name)

    def ceil(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise ceiling; no gradient flows (its derivative is 0 where it exists)."""
        return self.apply(CEIL, (x,), None, name)

    def trunc(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise rounding towards zero; no gradient flows."""
        return self.apply(TRUNC, (x,), None, name)

    def round(self, x: Any, decimals: int = 0, name: str | None = None) -> Variable:
        """Round to ``decimals`` places, halves to even as numpy; no gradient flows."""
        if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)):
            raise ArgumentError(f"round: decimals must be an int, got {decimals!r}")
        attrs = {"decimals": int(decimals)} if decimals else None
        return self.apply(ROUND, (x,), attrs, name)

    def stop_gradient(self, x: Any, name: str | None = None) -> Variable:
        """x's value, through which no gradient or tangent flows (JAX's name; a recorded entry)."""
        return self.apply(STOP_GRADIENT, (x,), None, name)

    def detach(self, x: Any, name: str | None = None) -> Variable:
        """x's value, through which no gradient or tangent flows (``stop_gradient``)."""
        return self.apply(STOP_GRADIENT, (x,), None, name)


# ---------------------------------------------------------------- Variable methods

class UnaryVariable:
    """Variable methods for the one-input functions (``x.tan()``, ``x.round()``, ...)."""

    __slots__ = ()

    def tan(self) -> Variable:
        """Elementwise tangent."""
        return self.rec.tan(self)

    def arcsin(self) -> Variable:
        """Elementwise inverse sine."""
        return self.rec.arcsin(self)

    def arccos(self) -> Variable:
        """Elementwise inverse cosine."""
        return self.rec.arccos(self)

    def arctan(self) -> Variable:
        """Elementwise inverse tangent."""
        return self.rec.arctan(self)

    def sinh(self) -> Variable:
        """Elementwise hyperbolic sine."""
        return self.rec.sinh(self)

    def cosh(self) -> Variable:
        """Elementwise hyperbolic cosine."""
        return self.rec.cosh(self)

    def arcsinh(self) -> Variable:
        """Elementwise inverse hyperbolic sine."""
        return self.rec.arcsinh(self)

    def arccosh(self) -> Variable:
        """Elementwise inverse hyperbolic cosine."""
        return self.rec.arccosh(self)

    def arctanh(self) -> Variable:
        """Elementwise inverse hyperbolic tangent."""
        return self.rec.arctanh(self)

    def log1p(self) -> Variable:
        """Elementwise log(1 + self)."""
        return self.rec.log1p(self)

    def expm1(self) -> Variable:
        """Elementwise exp(self) - 1."""
        return self.rec.expm1(self)

    def log2(self) -> Variable:
        """Elementwise base-2 logarithm."""
        return self.rec.log2(self)

    def log10(self) -> Variable:
        """Elementwise base-10 logarithm."""
        return self.rec.log10(self)

    def exp2(self) -> Variable:
        """Elementwise 2 ** self."""
        return self.rec.exp2(self)

    def square(self) -> Variable:
        """Elementwise self * self."""
        return self.rec.square(self)

    def reciprocal(self) -> Variable:
        """Elementwise 1 / self."""
        return self.rec.reciprocal(self)

    def floor(self) -> Variable:
        """Elementwise floor (no gradient)."""
        return self.rec.floor(self)

    def ceil(self) -> Variable:
        """Elementwise ceiling (no gradient)."""
        return self.rec.ceil(self)

    def trunc(self) -> Variable:
        """Elementwise rounding towards zero (no gradient)."""
        return self.rec.trunc(self)

    def round(self, decimals: int = 0, out: None = None) -> Variable:
        """Rounded to ``decimals`` places (no gradient); numpy's ``out`` must stay None."""
        _no_out("round", self, out)
        return self.rec.round(self, decimals)


def _no_out(method: str, x: Any, out: Any) -> None:
    if out is not None:
        raise ArgumentError(f"{method} of {x.name}: out= is not supported on Variables (a "
                            "Variable is never written into)")
