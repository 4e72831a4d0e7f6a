"""Moments: variance and std over axes, with numpy's ``ddof``.

float16 input is reduced in float32 and rounded back once, as numpy's ``mean`` does (numpy's own
``var`` sums float16 squares, which overflow past 65,504).

Conventions: ``std`` of a slice whose std is exactly 0 has gradient 0 (as ``norm`` of a zero
vector). ``variance`` (``x.var()``; ``op.var`` makes a leaf) and ``std`` refuse a ``ddof`` that
leaves no degrees of freedom. Their vjp spreads the cotangent over the reduced axes (as prod's
does, scans.py) times the derivative, and their jvp sums the tangent times it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError
from .core import (
    REDUCE,
    Case,
    Primitive,
    TaylorRule,
    along,
    error,
    keepdims_shape,
    method_fmt,
    normalize_axes,
    register,
    shape_of,
)
from .reduce import per_count
from .scans import checked_axes, numpy_defaults, spread
from .schema import AXES_OR_NONE, BOOL, REAL, attrs
from .series import Series, sqrt_series, square_coef, times
from .shape_rules import FLOATING, reduction
from .taylor import order_of

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

# ---------------------------------------------------------------- variance, std


def _var(x, axis=None, ddof=0, keepdims=False):
    if getattr(x, "dtype", None) == np.float16:  # summed in float32 (float16 overflows)
        return np.var(x, axis=axis, ddof=ddof, keepdims=keepdims, dtype=np.float32).astype(
            np.float16)
    return np.var(x, axis=axis, ddof=ddof, keepdims=keepdims)


def _std(x, axis=None, ddof=0, keepdims=False):
    if getattr(x, "dtype", None) == np.float16:
        return np.std(x, axis=axis, ddof=ddof, keepdims=keepdims, dtype=np.float32).astype(
            np.float16)
    return np.std(x, axis=axis, ddof=ddof, keepdims=keepdims)


def _dof(x, axis, ddof) -> float:
    """Entries per slice minus ddof."""
    shape = shape_of(x)
    return int(np.prod([shape[i] for i in normalize_axes(axis, len(shape))])) - ddof


def _centered(o: PrimitiveMethods, x, axis):
    return o.sub(x, o.mean(x, axis=axis, keepdims=True))


def _var_dir(o: PrimitiveMethods, out, x, axis, ddof, keepdims):
    """d var / d x = 2 (x - mean) / (n - ddof)."""
    return per_count(o, _centered(o, x, axis), _dof(x, axis, ddof), 2.0)


def _std_dir(o: PrimitiveMethods, out, x, axis, ddof, keepdims):
    """d std / d x = (x - mean) / ((n - ddof) std), and 0 where std is 0."""
    kd = keepdims_shape(shape_of(x), axis)
    s = out if shape_of(out) == kd else o.reshape(out, kd)
    zero = o.equal(s, 0)
    # divided by std first: (n - ddof) std can overflow float16 where the result does not
    unit = o.div(_centered(o, x, axis), o.where(zero, 1.0, s))
    return o.where(zero, 0.0, per_count(o, unit, _dof(x, axis, ddof)))


def _variance_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any, axis: Any = None,
                     ddof: Any = 0, keepdims: Any = False) -> Series:
    """The mean of squared deviations times count / (count - ddof) (a mean: the sum of
    float16 squares can overflow where their mean does not)."""
    count, dof = _dof(x, axis, 0), _dof(x, axis, ddof)
    d = [None] + [None if c is None else o.sub(c, o.mean(c, axis=axis, keepdims=True))
                  for c in ss[0][1:]]
    d[0] = o.sub(x, o.mean(x, axis=axis, keepdims=True))
    return [out] + [None if c is None else times(o, o.mean(c, axis=axis, keepdims=keepdims),
                                                 count / dof)
                    for c in (square_coef(o, d, k) for k in range(1, order_of(ss) + 1))]


def _std_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any, axis: Any = None,
                ddof: Any = 0, keepdims: Any = False) -> Series:
    """sqrt of the variance."""
    var = _variance_taylor(o, ss, None, x, axis, ddof, keepdims)
    return sqrt_series(o, var, out)


def _moment(name: str, method: str, forward: Callable, direction: Callable,
            taylor: TaylorRule, saves: tuple, **facts: Any) -> Primitive:
    def vjp(o: PrimitiveMethods, g, out, x, axis=None, ddof=0, keepdims=False):
        return o.mul(spread(o, g, x, axis, keepdims), direction(o, out, x, axis, ddof, keepdims))

    def jvp(o: PrimitiveMethods, ts, out, x, axis=None, ddof=0, keepdims=False):
        w = direction(o, out, x, axis, ddof, keepdims)
        return o.sum(o.mul(ts[0], w), axis=axis, keepdims=keepdims)

    cases = [c for c in REDUCE if c.shapes != ((),)] + [
        Case(((3, 4),), {"axis": 1, "ddof": 1}), Case(((4,),), {"ddof": 1.5}),
        Case(((2, 3, 4),), {"axis": (0, 2), "ddof": 1, "keepdims": True})]
    return register(Primitive(name, forward, [vjp], jvp,
                              method_fmt(method, "axis", "ddof", "keepdims"), cases, **facts,
                              batch=along(name), taylor=taylor,
                              schema=attrs(shape_rule=reduction(FLOATING), axis=AXES_OR_NONE,
                                           ddof=REAL, keepdims=BOOL), saves=saves))


# op.var makes a leaf, so the variance is op.variance (and x.var(), np.var(x) as in numpy)
VAR = _moment("variance", "var", _var, _var_dir, _variance_taylor, counted=2.0, saves=("inputs",))
STD = _moment("std", "std", _std, _std_dir, _std_taylor, counted=True, saves=("inputs", "out"))


# ---------------------------------------------------------------- Ops methods

class MomentOps:
    """The moments as methods of an Ops.

    The variance is ``op.variance`` (``op.var`` makes a leaf); on Variables it is ``x.var()``.
    """

    def variance(self, x: Any, axis: Any = None, ddof: float = 0, keepdims: bool = False,
                 name: str | None = None) -> Variable:
        """Variance over ``axis``, dividing by (entries - ddof); ``x.var()`` and ``np.var(x)``."""
        attrs = _moment_attrs(self, "variance", x, axis, ddof, keepdims)
        return self.apply(VAR, (x,), attrs, name)

    def std(self, x: Any, axis: Any = None, ddof: float = 0, keepdims: bool = False,
            name: str | None = None) -> Variable:
        """Standard deviation over ``axis``; gradient 0 where it is 0."""
        return self.apply(STD, (x,), _moment_attrs(self, "std", x, axis, ddof, keepdims), name)


def _moment_attrs(ops: PrimitiveMethods, fname: str, x: Any, axis: Any, ddof: Any,
                  keepdims: bool) -> dict:
    axis = checked_axes(ops, fname, x, axis)
    if isinstance(ddof, bool) or not isinstance(ddof, (int, float, np.integer, np.floating)):
        raise error(fname, (x,), f"ddof must be a number, got {ddof!r}", ArgumentError)
    ddof = int(ddof) if float(ddof).is_integer() else float(ddof)
    if _dof(x, axis, ddof) <= 0:
        raise error(fname, (x,), f"ddof={ddof} leaves no degrees of freedom over axis "
                         f"{axis}", ArgumentError)
    return {"axis": axis, "ddof": ddof, "keepdims": bool(keepdims)}


# ---------------------------------------------------------------- Variable methods

class MomentVariable:
    """numpy's ndarray methods var and std on Variables."""

    __slots__ = ()

    def var(self, axis: Any = None, dtype: None = None, out: None = None, ddof: float = 0,
            keepdims: bool = False, **numpy_args: Any) -> Variable:
        """Variance over ``axis`` with ``ddof`` (numpy's ``correction=`` is the same)."""
        ddof = numpy_args.pop("correction", ddof)
        numpy_defaults("var", self, dtype=dtype, out=out, **numpy_args)
        return self.rec.variance(self, axis=axis, ddof=ddof, keepdims=keepdims)

    def std(self, axis: Any = None, dtype: None = None, out: None = None, ddof: float = 0,
            keepdims: bool = False, **numpy_args: Any) -> Variable:
        """Standard deviation over ``axis`` with ``ddof`` (or ``correction=``)."""
        ddof = numpy_args.pop("correction", ddof)
        numpy_defaults("std", self, dtype=dtype, out=out, **numpy_args)
        return self.rec.std(self, axis=axis, ddof=ddof, keepdims=keepdims)
