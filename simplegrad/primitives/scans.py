"""Scans and products: cumsum, cumprod, prod, and argmax / argmin (variance, std: moments.py).

No rule here divides by x, so entries equal to zero are right at every order. The product of
every entry but one is ``exclusive cumprod from the left * exclusive cumprod from the right``,
and cumprod's own vjp and jvp are linear recurrences ``c_i = b_i + a_i * c_(i-1)``, computed by a
log-depth scan of shifted products and sums (``_affine_scan``): ceil(log2 n) rounds, each a few
recorded getitem / concatenate / mul / add entries. Everything is built from multiplications,
additions and shifts, whose rules are exact, so prod and cumprod with zeros (one, two, any
number) are right at order 1, order 2 and beyond.

``argmax`` and ``argmin`` return int64 entries with no gradient (``differentiable=False``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, AxisError
from .core import (
    JOINTLY,
    REDUCE,
    Case,
    Primitive,
    along,
    broadcast_to,
    dtype_of,
    error,
    keepdims_shape,
    method_fmt,
    normalize_axes,
    register,
    shape_of,
)
from .schema import AXIS_OR_NONE, BOOL, attrs
from .series import Series, exp_series, quotient_series
from .shape_rules import ACCUMULATING, INDEX_OUT, reducing, reduction, scan
from .taylor import linear

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

ALONG = [Case(((3,),), {"axis": 0}), Case(((3, 4),), {"axis": 1}),
         Case(((3, 4),), {"axis": 0}), Case(((2, 3, 4),), {"axis": -1}), Case(((2, 3),))]

# ---------------------------------------------------------------- shifts and scans


def _slab(shape: tuple, ax: int, width: int, fill: float, like: Any) -> np.ndarray:
    """A constant block of ``fill`` with ``width`` entries along ``ax``."""
    shape = shape[:ax] + (width,) + shape[ax + 1:]
    return np.full(shape, fill, dtype=dtype_of(like) or np.float64)


def _shift(o: PrimitiveMethods, y, ax: int, s: int, fill: float, reverse: bool = False):
    """y moved s places along ax, towards the end (or the start when reverse); fill enters."""
    shape = shape_of(y)
    n = shape[ax]
    if s >= n:
        return _slab(shape, ax, n, fill, y)
    pad = _slab(shape, ax, s, fill, y)
    keep = (slice(None),) * ax + ((slice(s, n),) if reverse else (slice(0, n - s),))
    parts = [o.getitem(y, keep), pad] if reverse else [pad, o.getitem(y, keep)]
    return o.concatenate(parts, axis=ax)


def _flip(o: PrimitiveMethods, y, ax: int):
    """y reversed along ax."""
    return o.getitem(y, (slice(None),) * ax + (slice(None, None, -1),))


def _affine_scan(o: PrimitiveMethods, a, b, ax: int, reverse: bool = False):
    """c with c_i = b_i + a_i * c_(i-1) along ax (c_(i+1) when reverse); c is 0 past the edge.

    Hillis-Steele: after the round with shift s, (a_i, b_i) is the composition of the 2s maps
    ending at i; a and b have the same shape.
    """
    n = shape_of(b)[ax]
    s = 1
    while s < n:
        b = o.add(b, o.mul(a, _shift(o, b, ax, s, 0.0, reverse)))
        if 2 * s < n:
            a = o.mul(a, _shift(o, a, ax, s, 0.0, reverse))
        s *= 2
    return b


def _flat(o: PrimitiveMethods, x, axis):
    """x and the axis its scan runs along: numpy's axis=None scans the flattened array."""
    if axis is None:
        return (x if len(shape_of(x)) == 1 else o.reshape(x, (-1,))), 0
    return x, axis % len(shape_of(x))


def _unflat(o: PrimitiveMethods, c, x):
    """A scan's cotangent back in x's shape (after numpy's axis=None flattened x)."""
    return c if shape_of(c) == shape_of(x) else o.reshape(c, shape_of(x))


# ---------------------------------------------------------------- cumsum, cumprod


def _cumsum(x, axis=None):
    return np.cumsum(x, axis=axis)


def _cumsum_vjp(o: PrimitiveMethods, g, out, x, axis=None):
    ax = 0 if axis is None else axis % len(shape_of(x))
    return _unflat(o, _flip(o, o.cumsum(_flip(o, g, ax), axis=ax), ax), x)


CUMSUM = register(Primitive(
    "cumsum", _cumsum, [_cumsum_vjp],
    lambda o, ts, out, x, axis=None: o.cumsum(ts[0], axis=axis),
    method_fmt("cumsum", "axis"), ALONG, linear=JOINTLY, batch=along("cumsum", flat=True),
    taylor=linear("cumsum"),
    schema=attrs(shape_rule=scan(ACCUMULATING), axis=AXIS_OR_NONE), saves=()))


def _cumprod(x, axis=None):
    return np.cumprod(x, axis=axis)


def _cumprod_vjp(o: PrimitiveMethods, g, out, x, axis=None):
    # d out_i / d x_j = prod_{k <= i, k != j} x_k, so the cotangent of x_j is
    # prod_{k < j} x_k * c_j with c_j = g_j + x_(j+1) * c_(j+1): a reverse affine scan
    flat, ax = _flat(o, x, axis)
    before = _shift(o, out, ax, 1, 1.0)
    c = _affine_scan(o, _shift(o, flat, ax, 1, 0.0, reverse=True), g, ax, reverse=True)
    return _unflat(o, o.mul(before, c), x)


def _cumprod_jvp(o: PrimitiveMethods, ts, out, x, axis=None):
    # t_out_i = t_i * out_(i-1) + x_i * t_out_(i-1): a forward affine scan
    t, _ = _flat(o, ts[0], axis)
    x, ax = _flat(o, x, axis)
    return _affine_scan(o, x, o.mul(t, _shift(o, out, ax, 1, 1.0)), ax)


def _cumprod_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any,
                    axis: Any = None) -> Series:
    """exp of the cumulative sum of logs (entries equal to 0 are not supported)."""
    logs = quotient_series(o, ss[0], ss[0], None)
    return exp_series(o, [None if c is None else o.cumsum(c, axis=axis) for c in logs], out)


CUMPROD = register(Primitive(
    "cumprod", _cumprod, [_cumprod_vjp], _cumprod_jvp, method_fmt("cumprod", "axis"),
    [*ALONG, Case(((5,),), {"axis": 0}), Case(((3, 6),), {"axis": -1})],
    batch=along("cumprod", flat=True), taylor=_cumprod_taylor,
    schema=attrs(shape_rule=scan(ACCUMULATING), axis=AXIS_OR_NONE), saves=("inputs", "out")))

# ---------------------------------------------------------------- prod


def _prod(x, axis=None, keepdims=False):
    return np.prod(x, axis=axis, keepdims=keepdims)


def _others(o: PrimitiveMethods, x, axis):
    """For each entry, the product of the other entries of its slice (no division)."""
    shape = shape_of(x)
    axes = normalize_axes(axis, len(shape))
    if not axes:
        return np.ones(shape, dtype=dtype_of(x))
    if len(axes) == 1:
        y, ax, undo = x, axes[0], None
    else:   # the reduced axes moved last and merged into one
        kept = [i for i in range(len(shape)) if i not in axes]
        perm = (*kept, *axes)
        y = x if perm == tuple(range(len(shape))) else o.transpose(x, perm)
        moved = shape_of(y)
        y = o.reshape(y, tuple(shape[i] for i in kept) + (-1,))
        ax, undo = len(kept), (perm, moved)
    left = _shift(o, o.cumprod(y, axis=ax), ax, 1, 1.0)
    right = _flip(o, _shift(o, o.cumprod(_flip(o, y, ax), axis=ax), ax, 1, 1.0), ax)
    p = o.mul(left, right)
    if undo is not None:
        perm, moved = undo
        p = o.reshape(p, moved)
        if perm != tuple(range(len(shape))):
            p = o.transpose(p, tuple(int(i) for i in np.argsort(perm)))
    return p


def spread(o: PrimitiveMethods, g: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    """A reduction's cotangent with its reduced dims restored, expanded to x's shape."""
    kd = keepdims_shape(shape_of(x), axis)
    if not keepdims and shape_of(g) != kd and axis is not None:
        g = o.reshape(g, kd)
    return broadcast_to(o, g, shape_of(x))


def _prod_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any, axis: Any = None,
                 keepdims: Any = False) -> Series:
    """exp of the sum of logs: only the logs' derivatives enter, so negative entries are fine
    (an entry equal to 0 is not)."""
    logs = quotient_series(o, ss[0], ss[0], None)
    sums = [None if c is None else o.sum(c, axis=axis, keepdims=keepdims) for c in logs]
    return exp_series(o, sums, out)


PROD = register(Primitive(
    "prod", _prod,
    [lambda o, g, out, x, axis=None, keepdims=False:
        o.mul(spread(o, g, x, axis, keepdims), _others(o, x, axis))],
    lambda o, ts, out, x, axis=None, keepdims=False:
        o.sum(o.mul(ts[0], _others(o, x, axis)), axis=axis, keepdims=keepdims),
    method_fmt("prod", "axis", "keepdims"),
    [*REDUCE, Case(((2, 3, 4),), {"axis": (0, 2), "keepdims": True}),
     Case(((3, 4),), {"axis": (1, 0)})], batch=along("prod"), taylor=_prod_taylor,
    schema=reducing(ACCUMULATING), saves=("inputs",)))

# ---------------------------------------------------------------- argmax, argmin


def _argmax(x, axis=None, keepdims=False):
    return np.argmax(x, axis=axis, keepdims=keepdims)


def _argmin(x, axis=None, keepdims=False):
    return np.argmin(x, axis=axis, keepdims=keepdims)


def _no_tangent(o: PrimitiveMethods, ts, out, *xs, **attrs):
    return None


_ARG_CASES = [Case(((3,),)), Case(((3, 4),), {"axis": 1}),
              Case(((3, 4),), {"axis": 0, "keepdims": True}), Case(((2, 3, 4),), {"axis": -1}),
              Case(((2, 3),), {"keepdims": True})]
ARGMAX = register(Primitive("argmax", _argmax, [None], _no_tangent,
                            method_fmt("argmax", "axis", "keepdims"), _ARG_CASES,
                            differentiable=False, batch=along("argmax", flat=True),
                            schema=attrs(shape_rule=reduction(INDEX_OUT, identity=False),
                                         axis=AXIS_OR_NONE,
                                         keepdims=BOOL), saves=()))
ARGMIN = register(Primitive("argmin", _argmin, [None], _no_tangent,
                            method_fmt("argmin", "axis", "keepdims"), _ARG_CASES,
                            differentiable=False, batch=along("argmin", flat=True),
                            schema=attrs(shape_rule=reduction(INDEX_OUT, identity=False),
                                         axis=AXIS_OR_NONE,
                                         keepdims=BOOL), saves=()))


# ---------------------------------------------------------------- Ops methods

class ScanOps:
    """prod, the scans and argmax / argmin as methods of an Ops."""

    def prod(self, x: Any, axis: Any = None, keepdims: bool = False,
             name: str | None = None) -> Variable:
        """Product over ``axis`` (None, an int or a tuple); right with zeros at every order."""
        axis = checked_axes(self, "prod", x, axis)
        return self.apply(PROD, (x,), {"axis": axis, "keepdims": bool(keepdims)}, name)

    def cumsum(self, x: Any, axis: int | None = None, name: str | None = None) -> Variable:
        """Cumulative sum along ``axis`` (None: of the flattened array)."""
        axis = _one_axis(self, "cumsum", x, axis)
        return self.apply(CUMSUM, (x,), {"axis": axis} if axis is not None else None, name)

    def cumprod(self, x: Any, axis: int | None = None, name: str | None = None) -> Variable:
        """Cumulative product along ``axis`` (None: flattened); right with zeros at every order."""
        axis = _one_axis(self, "cumprod", x, axis)
        return self.apply(CUMPROD, (x,), {"axis": axis} if axis is not None else None, name)

    def argmax(self, x: Any, axis: int | None = None, keepdims: bool = False,
               name: str | None = None) -> Variable:
        """Index of the first maximum along ``axis`` (None: flat index); int64, no gradient."""
        axis = _one_axis(self, "argmax", x, axis)
        return self.apply(ARGMAX, (x,), {"axis": axis, "keepdims": bool(keepdims)}, name)

    def argmin(self, x: Any, axis: int | None = None, keepdims: bool = False,
               name: str | None = None) -> Variable:
        """Index of the first minimum along ``axis`` (None: flat index); int64, no gradient."""
        axis = _one_axis(self, "argmin", x, axis)
        return self.apply(ARGMIN, (x,), {"axis": axis, "keepdims": bool(keepdims)}, name)


def checked_axes(ops: PrimitiveMethods, fname: str, x: Any, axis: Any) -> Any:
    """axis checked against x (None, an int or a tuple of ints), in numpy's spelling."""
    try:
        normalize_axes(axis, len(shape_of(x)))
    except IndexError as e:
        raise error(fname, (x,), str(e), AxisError) from None
    if axis is None or isinstance(axis, (int, np.integer)):
        return None if axis is None else int(axis)
    return tuple(int(a) for a in axis)


def _one_axis(ops: PrimitiveMethods, fname: str, x: Any, axis: Any) -> int | None:
    """axis checked to be None or one int in range for x."""
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, (int, np.integer))):
        raise error(fname, (x,), f"axis must be None or an int, got {axis!r}", ArgumentError)
    return checked_axes(ops, fname, x, axis)


# ---------------------------------------------------------------- Variable methods

class ScanVariable:
    """numpy's ndarray methods prod, cumsum, cumprod, argmax, argmin on Variables."""

    __slots__ = ()

    def prod(self, axis: Any = None, dtype: None = None, out: None = None,
             keepdims: bool = False, **numpy_args: Any) -> Variable:
        """Product over ``axis`` (np.prod(x) calls this)."""
        numpy_defaults("prod", self, dtype=dtype, out=out, **numpy_args)
        return self.rec.prod(self, axis=axis, keepdims=keepdims)

    def cumsum(self, axis: int | None = None, dtype: None = None, out: None = None) -> Variable:
        """Cumulative sum along ``axis`` (None: flattened)."""
        numpy_defaults("cumsum", self, dtype=dtype, out=out)
        return self.rec.cumsum(self, axis=axis)

    def cumprod(self, axis: int | None = None, dtype: None = None, out: None = None) -> Variable:
        """Cumulative product along ``axis`` (None: flattened)."""
        numpy_defaults("cumprod", self, dtype=dtype, out=out)
        return self.rec.cumprod(self, axis=axis)

    def argmax(self, axis: int | None = None, out: None = None, *,
               keepdims: bool = False) -> Variable:
        """Index of the first maximum along ``axis`` (an int64 entry, no gradient)."""
        numpy_defaults("argmax", self, out=out)
        return self.rec.argmax(self, axis=axis, keepdims=keepdims)

    def argmin(self, axis: int | None = None, out: None = None, *,
               keepdims: bool = False) -> Variable:
        """Index of the first minimum along ``axis`` (an int64 entry, no gradient)."""
        numpy_defaults("argmin", self, out=out)
        return self.rec.argmin(self, axis=axis, keepdims=keepdims)


def numpy_defaults(method: str, x: Any, **numpy_args: Any) -> None:
    """numpy passes dtype=None, out=None (and where=True, initial) along: refuse anything else."""
    for key, value in numpy_args.items():
        if key in ("dtype", "out") and value is None or key == "where" and value is True:
            continue
        raise ArgumentError(f"{method} of {x.name}: {key}={value!r} is not supported on "
                            "Variables")
