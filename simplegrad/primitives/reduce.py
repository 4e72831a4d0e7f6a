"""Reductions: sum, mean, max, min, logsumexp, and the softmax pair; and scipy's logsumexp
(weights, signs) on arrays and Variables alike.

A reduction's vjp spreads the cotangent back over the reduced axes with a
recorded reshape and expand; its jvp is the same reduction of the tangent.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DTypeError
from .core import (
    JOINTLY,
    PASSES_ON,
    REDUCE,
    Case,
    Primitive,
    SymPyForm,
    along,
    broadcast_to,
    dtype_of,
    full_mask,
    is_constant,
    keepdims_shape,
    method_fmt,
    register,
    shape_of,
)
from .lazy import is_lazy
from .schema import AXIS, attrs
from .series import Series, exp_series, minus, quotient_series
from .shape_rules import ACCUMULATING, EXP_SHIFTED, FLOATING, SAME, reducing, same_shape
from .taylor import linear

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

ALONG = [Case(((3,),), {"axis": -1}), Case(((3, 4),), {"axis": 1}),
         Case(((3, 4),), {"axis": 0}), Case(((2, 3, 4),), {"axis": -1})]


def _spread(o: PrimitiveMethods, g, x, axis, keepdims):
    """Cotangent of a reduction, reshaped to keep its dims and expanded to x's shape."""
    shape = shape_of(x)
    if axis is None and shape_of(g) == ():     # a total: the scalar spread over x
        return broadcast_to(o, g, shape)
    if not keepdims:
        kd = keepdims_shape(shape, axis)
        if shape_of(g) != kd and axis is not None:
            g = o.reshape(g, kd)
    return broadcast_to(o, g, shape)


def _keep(o: PrimitiveMethods, out, x, axis, keepdims):
    """The output of a reduction with its reduced dims kept, ready to broadcast against x."""
    kd = keepdims_shape(shape_of(x), axis)
    return out if keepdims or shape_of(out) == kd else o.reshape(out, kd)


def _spread_mask(o: PrimitiveMethods, m, i, out, x, axis=None, keepdims=False):
    """Where a reduction's cotangent is zero, so is the cotangent it spreads over x."""
    return None if m is None else _spread(o, full_mask(o, m, shape_of(out)), x, axis, keepdims)


# ---------------------------------------------------------------- sum and mean

def _sum(x, axis=None, keepdims=False):
    if type(x) is np.ndarray:   # what np.sum runs for an array, without its dispatch layers
        return np.add.reduce(x, axis=axis, keepdims=keepdims)
    return np.sum(x, axis=axis, keepdims=keepdims)


SUM = register(Primitive(
    "sum", _sum,
    [lambda o, g, out, x, axis=None, keepdims=False: _spread(o, g, x, axis, keepdims)],
    lambda o, ts, out, x, axis=None, keepdims=False: o.sum(ts[0], axis=axis, keepdims=keepdims),
    method_fmt("sum", "axis", "keepdims"), REDUCE,
    sympy=SymPyForm(PASSES_ON.entry, single=True, array=True),
    linear=JOINTLY, numba="+=", batch=along("sum"), mask=_spread_mask,
    python="({0} + 0.0)",       # (numpy's sum of one number starts from 0.0: -0.0 gives 0.0)
    taylor=linear("sum"), numpy="np.add.reduce({0}{reduce_axis}{keepdims})",
    schema=reducing(ACCUMULATING), saves=()))


def _mean(x, axis=None, keepdims=False):
    if type(x) is np.ndarray and x.dtype == np.float64 and x.size:
        # what np.mean runs for a non-empty float64 array (its sum, then one division by the
        # count), without its dispatch layers: a third of its time on small arrays
        total = np.add.reduce(x, axis=axis, keepdims=keepdims)
        return total / (x.size // max(np.size(total), 1))
    return np.mean(x, axis=axis, keepdims=keepdims)


def _mean_vjp(o: PrimitiveMethods, g, out, x, axis=None, keepdims=False):
    count = math.prod(shape_of(x)) // max(math.prod(shape_of(out)), 1)
    return _spread(o, per_count(o, g, count), x, axis, keepdims)


F16_LARGEST = 65504.0       # float16's largest finite number


def per_count(o: PrimitiveMethods, g: Any, count: float, times: float = 1.0) -> Any:
    """g * times / count for a count of entries (less ddof): a float16 count above 65,504 is
    inf, so there the product is formed in float32 and rounded back once."""
    if count > F16_LARGEST and dtype_of(g) == np.float16:
        return o.cast(o.mul(o.cast(g, np.float32), times / count), np.float16)
    if times == 1.0:
        return g if count == 1 else o.div(g, count)
    return o.mul(g, times / count)


MEAN = register(Primitive(
    "mean", _mean, [_mean_vjp],
    lambda o, ts, out, x, axis=None, keepdims=False: o.mean(ts[0], axis=axis, keepdims=keepdims),
    method_fmt("mean", "axis", "keepdims"), REDUCE,
    sympy=SymPyForm(PASSES_ON.entry, single=True, array=True),
    linear=JOINTLY, counted=True, batch=along("mean"), mask=_spread_mask,
    taylor=linear("mean"), numpy="np.mean({0}{axis}{keepdims})",
    schema=reducing(FLOATING), saves=()))

# ---------------------------------------------------------------- max and min


def _tie_weights(o: PrimitiveMethods, x, out, axis, keepdims):
    """Weights that split the gradient evenly among the entries equal to the extreme,
    recorded (so valid at any input)."""
    hit = o.cast(o.equal(x, _keep(o, out, x, axis, keepdims)), x.dtype)
    return o.div(hit, o.sum(hit, axis=axis, keepdims=True))


def _extreme(name: str, forward) -> Primitive:
    def vjp(o: PrimitiveMethods, g, out, x, axis=None, keepdims=False):
        return o.mul(_spread(o, g, x, axis, keepdims), _tie_weights(o, x, out, axis, keepdims))

    def jvp(o: PrimitiveMethods, ts, out, x, axis=None, keepdims=False):
        w = _tie_weights(o, x, out, axis, keepdims)
        return o.sum(o.mul(ts[0], w), axis=axis, keepdims=keepdims)

    return register(Primitive(name, forward, [vjp], jvp,
                              method_fmt(name, "axis", "keepdims"), REDUCE, batch=along(name),
                              taylor=linear(name), numpy=f"np.{name}({{0}}{{axis}}{{keepdims}})",
                              schema=reducing(SAME, identity=False), saves=("inputs", "out")))


def _max(x, axis=None, keepdims=False):
    if type(x) is np.ndarray:   # what np.max runs for an array, without its dispatch layers
        return np.maximum.reduce(x, axis=axis, keepdims=keepdims)
    return np.max(x, axis=axis, keepdims=keepdims)


def _min(x, axis=None, keepdims=False):
    if type(x) is np.ndarray:
        return np.minimum.reduce(x, axis=axis, keepdims=keepdims)
    return np.min(x, axis=axis, keepdims=keepdims)


MAX = _extreme("max", _max)
MIN = _extreme("min", _min)

# ---------------------------------------------------------------- logsumexp and softmax


def _shift(x, axis):
    """The maximum over ``axis`` (kept) that logsumexp and softmax shift by; 0 for an empty
    array, whose slices along an empty axis have none (their sums of exp are 0)."""
    if math.prod(np.shape(x)) == 0:
        return np.zeros(np.shape(np.sum(x, axis=axis, keepdims=True)), dtype=x.dtype)
    return _max(x, axis=axis, keepdims=True)


def _logsumexp(x, axis=None, keepdims=False):
    m = _shift(x, axis)
    if is_lazy(m) or math.prod(np.shape(x)) == 0:   # a dask array (values untested), or sums of 0
        return _logsumexp_guarded(x, m, axis, keepdims)
    if _all_finite(m):          # each sum of exp(x - m) is >= 1: its log needs no guard
        total = np.add.reduce(np.exp(x - m), axis=axis, keepdims=keepdims)
        return np.log(total) + (m if keepdims else np.reshape(m, np.shape(total)))
    return _logsumexp_guarded(x, m, axis, keepdims)


def _all_finite(m) -> bool:
    """Whether every maximum is finite (the ufunc reduce itself: ``.all()`` adds a Python
    layer, a microsecond on the small arrays a loss reduces)."""
    return bool(np.logical_and.reduce(np.isfinite(m), axis=None))


def _logsumexp_guarded(x, m, axis, keepdims):
    """logsumexp where some maximum is inf, -inf or nan: shift those slices by 0 instead
    (an all -inf slice gives -inf, one holding inf gives inf, nan stays nan)."""
    # (the 0 in m's dtype: an empty bool x is refused as a non-empty one is)
    m = np.where(np.isfinite(m), m, np.zeros((), m.dtype))
    total = np.sum(np.exp(x - m), axis=axis, keepdims=keepdims)
    with np.errstate(divide="ignore"):
        return np.log(total) + np.reshape(m, np.shape(total))


def _softmax_of(o: PrimitiveMethods, out, x, axis, keepdims):
    """exp(x - logsumexp(x)), with an all -inf slice giving zeros instead of nan."""
    out = o.where(o.isfinite(out), out, 0)
    return o.exp(o.sub(x, _keep(o, out, x, axis, keepdims)))


def _lse_vjp(o: PrimitiveMethods, g, out, x, axis=None, keepdims=False):
    return o.mul(_spread(o, g, x, axis, keepdims), _softmax_of(o, out, x, axis, keepdims))


def _lse_jvp(o: PrimitiveMethods, ts, out, x, axis=None, keepdims=False):
    p = _softmax_of(o, out, x, axis, keepdims)
    return o.sum(o.mul(ts[0], p), axis=axis, keepdims=keepdims)


def _lse_series(o: PrimitiveMethods, xs: Series, x: Any, axis: Any) -> Series:
    """logsumexp(x, axis, keepdims=True): the log of the sum of exp(x - its primal)."""
    lse0 = o.logsumexp(x, axis=axis, keepdims=True)
    e = exp_series(o, xs, o.exp(o.sub(x, lse0)))
    sums = [None if c is None else o.sum(c, axis=axis, keepdims=True) for c in e]
    return quotient_series(o, sums, sums, lse0)


def _lse_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any,
        axis: Any = None, keepdims: Any = False) -> Series:
    """logsumexp over axis: log of the sum of exp(x - its primal)."""
    shape = shape_of(out)
    return [out] + [c if c is None or shape_of(c) == shape else o.reshape(c, shape)
                    for c in _lse_series(o, ss[0], x, axis)[1:]]


LOGSUMEXP = register(Primitive(
    "logsumexp", _logsumexp, [_lse_vjp], _lse_jvp,
    method_fmt("logsumexp", "axis", "keepdims"), REDUCE, batch=along("logsumexp"),
    taylor=_lse_taylor, schema=reducing(EXP_SHIFTED), saves=("inputs", "out")))


def _softmax(x, axis=-1):
    e = np.exp(x - _shift(x, axis))
    return e / np.sum(e, axis=axis, keepdims=True)


def _softmax_rule(o: PrimitiveMethods, g, out, x, axis=-1):
    # the Jacobian is symmetric, so one rule serves as vjp and jvp
    return o.mul(out, o.sub(g, o.sum(o.mul(g, out), axis=axis, keepdims=True)))


def _softmax_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any,
                    axis: Any = -1) -> Series:
    """exp(x - logsumexp(x))."""
    lse = _lse_series(o, ss[0], x, axis)
    return exp_series(o, [None] + [minus(o, a, b) for a, b in zip(ss[0][1:], lse[1:])], out)


SOFTMAX = register(Primitive(
    "softmax", _softmax, [_softmax_rule],
    lambda o, ts, out, x, axis=-1: _softmax_rule(o, ts[0], out, x, axis),
    method_fmt("softmax", "axis"), ALONG, batch=along("softmax", default=-1),
    taylor=_softmax_taylor, schema=attrs(shape_rule=same_shape(EXP_SHIFTED),
                                                axis=AXIS), saves=("out",)))


def _log_softmax(x, axis=-1):
    m = _shift(x, axis)
    if math.prod(np.shape(x)) == 0:     # (empty: exp's result type, as softmax's)
        return (x - m).astype(np.result_type(np.exp(np.zeros(0, np.result_type(x)))))
    if not is_lazy(m) and _all_finite(m):   # (x - m) - log(sum(exp(x - m))): no guard
        shifted = x - m
        return shifted - np.log(np.add.reduce(np.exp(shifted), axis=axis, keepdims=True))
    return x - _logsumexp_guarded(x, m, axis, True)


def _log_softmax_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any,
                        axis: Any = -1) -> Series:
    """x - logsumexp(x)."""
    lse = _lse_series(o, ss[0], x, axis)
    return [out] + [minus(o, a, b) for a, b in zip(ss[0][1:], lse[1:])]


LOG_SOFTMAX = register(Primitive(
    "log_softmax", _log_softmax,
    [lambda o, g, out, x, axis=-1:
        o.sub(g, o.mul(o.exp(out), o.sum(g, axis=axis, keepdims=True)))],
    lambda o, ts, out, x, axis=-1:
        o.sub(ts[0], o.sum(o.mul(o.exp(out), ts[0]), axis=axis, keepdims=True)),
    method_fmt("log_softmax", "axis"), ALONG, batch=along("log_softmax", default=-1),
    taylor=_log_softmax_taylor, schema=attrs(shape_rule=same_shape(EXP_SHIFTED),
                                                axis=AXIS), saves=("out",)))


# ---------------------------------------------------------------- Ops methods

class ReduceOps:
    """The reductions as methods of an Ops."""

    def sum(self, x: Any, axis: Any = None, keepdims: bool = False,
            name: str | None = None) -> Variable:
        """Sum over ``axis`` (None for all, an int or a tuple)."""
        return self.apply(SUM, (x,), {"axis": axis, "keepdims": keepdims}, name)

    def mean(self, x: Any, axis: Any = None, keepdims: bool = False,
             name: str | None = None) -> Variable:
        """Mean over ``axis`` (None for all, an int or a tuple)."""
        return self.apply(MEAN, (x,), {"axis": axis, "keepdims": keepdims}, name)

    def max(self, x: Any, axis: Any = None, keepdims: bool = False,
            name: str | None = None) -> Variable:
        """Maximum over ``axis``; tied entries share the gradient evenly."""
        return self.apply(MAX, (x,), {"axis": axis, "keepdims": keepdims}, name)

    def min(self, x: Any, axis: Any = None, keepdims: bool = False,
            name: str | None = None) -> Variable:
        """Minimum over ``axis``; tied entries share the gradient evenly."""
        return self.apply(MIN, (x,), {"axis": axis, "keepdims": keepdims}, name)

    def logsumexp(self, x: Any, axis: Any = None, keepdims: bool = False,
                  name: str | None = None) -> Variable:
        """log(sum(exp(x))) over ``axis``, computed without overflow."""
        return self.apply(LOGSUMEXP, (x,), {"axis": axis, "keepdims": keepdims}, name)

    def softmax(self, x: Any, axis: int = -1, name: str | None = None) -> Variable:
        """exp(x) normalised to sum to 1 along ``axis``, computed without overflow."""
        return self.apply(SOFTMAX, (x,), {"axis": axis}, name)

    def log_softmax(self, x: Any, axis: int = -1, name: str | None = None) -> Variable:
        """x - logsumexp(x) along ``axis``, computed without overflow."""
        return self.apply(LOG_SOFTMAX, (x,), {"axis": axis}, name)


# ---------------------------------------------------------------- scipy's logsumexp

def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False,
              return_sign: bool = False) -> Any:
    """scipy.special.logsumexp on arrays and Variables alike: log(sum(b * exp(a))) over
    ``axis``, recorded when ``a`` or ``b`` is a Variable (``return_sign``: (log|sum|, sign))."""
    recorded = not is_constant(a) or (b is not None and not is_constant(b))
    a = a if not is_constant(a) else np.asarray(a)
    b = b if b is None or not is_constant(b) else np.asarray(b)
    for v in (a, b):
        if v is not None and dtype_of(v).kind not in "biuf":
            raise DTypeError(f"logsumexp: values of dtype {dtype_of(v)} (real values only: "
                             "complex ones have no gradient here)")
    if not recorded and a.dtype.kind != "f":
        a = a.astype(np.float64)            # (as scipy: integers sum as floats)
    if b is None and not return_sign:       # the primitive: one entry, every rule
        if recorded:
            return a.logsumexp(axis=axis, keepdims=keepdims)
        return _scalar(_logsumexp(a, axis=axis, keepdims=keepdims))
    if b is None:
        m = np.max(a, axis=axis, keepdims=True)
    else:           # (as scipy) an entry of weight 0 adds nothing, even where a is inf or nan
        keep = np.abs(b) > 0
        masked = np.where(keep, a, -np.inf)
        m = np.max(masked, axis=axis, keepdims=True)
        # a recorded weight keeps the finite a there: its gradient is exp(a) / sum, also at 0
        a = masked if is_constant(b) else \
            np.where(np.logical_or(keep, np.isfinite(a)), a, -np.inf)
    shift = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(a - shift)
    s = np.sum(e if b is None else b * e, axis=axis, keepdims=keepdims)
    mag = np.abs(s)
    nonzero = mag > 0
    fill = np.where(np.isnan(mag), np.nan, -np.inf)     # log 0 is -inf; nan stays nan
    out = np.where(nonzero, np.log(np.where(nonzero, mag, 1.0)) + np.reshape(shift, np.shape(s)),
                   fill)
    sign = np.sign(s)
    if return_sign:
        return (out, sign) if recorded else (_scalar(out), _scalar(sign))
    out = np.where(s < 0, np.nan, out)      # (as scipy: the log of a negative sum is nan)
    return out if recorded else _scalar(out)


def _scalar(x: Any) -> Any:
    """A 0-d array as numpy's scalar (what scipy returns)."""
    return x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x
