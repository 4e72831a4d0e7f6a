"""Taylor mode: ``sg.taylor`` and ``sg.taylor_derivative``, the derivatives of
t -> f(x + t v) at t = 0 up to any order, from one forward walk of truncated series
(``engine.taylor.propagate``; the rules are on the primitives' records). Cost: O(K^2)
primitive calls per nonlinear entry, against the exponential growth of nested first-order
sweeps. The transforms here follow the nesting rule of every transform (arguments.py): on
Variables the coefficients are recorded and can be differentiated again.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine.ops import Ops
from ..engine.taylor import missing_rule, propagate
from ..engine.variable import Variable
from ..errors import ArgumentError, ShapeError
from ..primitives import VALUES
from ..pytree import is_node, tree_flatten, tree_unflatten
from .arguments import (
    check_callable,
    context,
    disconnected,
    leaf_shape,
    leaves_like,
    output,
    outputs,
    own,
    primals,
    run_paused,
)
from .ravel import ravel_pytree

if TYPE_CHECKING:
    from ..primitives import PrimitiveMethods

# ---------------------------------------------------------------- public functions


def taylor(f: Callable, x: Any, v: Any, order: int) -> list:
    """``[f(x), D1, ..., D_order]``: Dk is the k-th derivative of t -> f(x + t v) at t = 0.

    ``x`` and ``v`` are one argument's array, or a tuple or list with one entry per argument
    of ``f`` (each a pytree, its direction of the same structure), as in ``sg.jvp``; each Dk
    has the structure and shapes of f's output.
    """
    check_callable("taylor", f)
    order = check_order("taylor", order)
    if not isinstance(x, (tuple, list)):
        xshape, vshape = (a.shape if isinstance(a, Variable) else np.shape(a) for a in (x, v))
        if xshape != vshape:
            raise ShapeError(f"taylor: v has shape {vshape} but x has shape {xshape}")
    return _taylor(f, x, v, order, None)


def _taylor(f: Callable, x: Any, v: Any, order: int, only: int | None) -> list:
    """``taylor`` (arguments checked); with ``only`` = k, ``[Dk]`` alone (no other coefficient
    is converted)."""
    if isinstance(x, (tuple, list)):
        return _taylor_many(f, x, v, order, only)
    ops, nested = context("taylor", (x, v))     # our own Ops borrows the caller's arrays
    if nested is None:
        return run_paused(ops, lambda a, b: _taylor(f, a, b, order, only), (x, v))
    with own(ops, nested):
        # an Ops of our own runs in no vmap (its levels are empty): x is one plain leaf
        xv = ops.var(x) if not nested and type(x) is np.ndarray else \
            primals(ops, (x,), (0,))[0][0]
        out = f(xv)
        if type(out) is not Variable and is_node(out):
            return _series(ops, nested, f, xv, v, out, order, only)
        y = output("taylor", ops, out)
        if not y.requires_grad:
            disconnected("taylor", f, None, [y])
        return _coefficients(ops, nested, xv, y, v, order, only)


def _taylor_many(f: Callable, xs: Any, vs: Any, order: int, only: int | None) -> list:
    """``taylor`` of f of several (pytree) arguments: one flat primal standing for them all."""
    if not isinstance(vs, (tuple, list)) or len(vs) != len(xs):
        got = f"{len(vs)} directions" if isinstance(vs, (tuple, list)) else type(vs).__name__
        raise ArgumentError(f"taylor: x is a {type(xs).__name__} of {len(xs)} arguments, so v "
                            f"must be a tuple or list of {len(xs)} directions, got {got}")
    for i, (a, b) in enumerate(zip(xs, vs)):
        a_leaves, a_def = tree_flatten(a)
        for al, bl in zip(a_leaves, leaves_like("taylor", f"direction {i}", "its argument",
                                                a_def, b)):
            if leaf_shape(al) != leaf_shape(bl):
                raise ShapeError(f"taylor: direction {i} has shape {leaf_shape(bl)} but its "
                                 f"argument has shape {leaf_shape(al)}")
    ops, nested = context("taylor", (*xs, *vs))
    if nested is None:
        n = len(xs)
        return run_paused(ops, lambda *a: _taylor(f, list(a[:n]), list(a[n:]), order, only),
                          (*xs, *vs))
    with own(ops, nested):
        x_flat, unravel = ravel_pytree(list(xs))
        v_flat = ravel_pytree(list(vs))[0]
        xv = primals(ops, (x_flat,), (0,))[0][0]
        return _series(ops, nested, lambda z: f(*unravel(z)), xv, v_flat, None, order, only, f)


def _series(ops: Ops, nested: bool, g: Callable, xv: Variable, v: Any, out: Any, order: int,
            only: int | None, f: Callable | None = None) -> list:
    """The coefficients of a pytree output ``out`` of ``g(xv)`` (run now when None), through
    its leaves raveled into one vector."""
    out = g(xv) if out is None else out
    ys, out_def = outputs("taylor", ops, out)
    disconnected("taylor", f or g, None, ys)
    y_flat, unravel = ravel_pytree(tree_unflatten(out_def, ys))
    coefs = _coefficients(ops, nested, xv, y_flat, v, order, only)
    return [unravel(c) for c in coefs]


def _coefficients(ops: Ops, nested: bool, xv: Variable, y: Variable, v: Any,
                  order: int, only: int | None = None) -> list:
    """``[y, D1, ..., D_order]`` of y along x + t v (``[D_only]`` when ``only`` is given)."""
    if nested:
        o, tangent = ops, v if isinstance(v, Variable) else ops.var(v, requires_grad=False)
    else:
        v = getattr(v, "raw", v)
        o, tangent = VALUES, v if type(v) is np.ndarray and v.dtype == xv.dtype else \
            np.asarray(v, dtype=xv.dtype)
    scale = _scale((xv.dtype, y.dtype), order)
    coefs = propagate(o, y, xv, tangent if scale == 1 else o.mul(tangent, scale), order,
                      nested)
    out = []
    for k in range(len(coefs)) if only is None else (only,):
        c = coefs[k]
        if c is None:
            c = np.zeros(y.shape, dtype=y.dtype)
            c = ops.var(c, requires_grad=False) if nested else c
        elif k > 1 or k == 1 and scale != 1:
            c = _derivative(o, c, k, scale)
        out.append(c if nested else np.array(getattr(c, "raw", c), dtype=y.dtype))
    return out


def taylor_derivative(f: Callable, order: int = 1) -> Callable:
    """The ``order``-th derivative of ``f`` of one argument by Taylor mode along ones
    (elementwise for an elementwise ``f``), as ``sg.derivative`` gives it by nesting."""
    check_callable("taylor_derivative", f)
    order = check_order("taylor_derivative", order)

    @functools.wraps(f)
    def derivative_f(x: Any, **kwargs: Any) -> Any:
        if type(x) is float or type(x) is int:
            x = np.asarray(x)       # (a number: the arrays' path, with no tree to walk)
        shape = x.shape if type(x) is np.ndarray else leaf_shape(x)
        ones = _ONE if shape == () else np.ones(shape)
        g = functools.partial(f, **kwargs) if kwargs else f
        return _taylor(g, x, ones, order, order)[0]
    return derivative_f


def derivative_entry(ops: Ops, y: Variable, x: Variable, order: int,
                     nested: bool) -> Variable | None:
    """The ``order``-th derivative of y along ones in x by Taylor mode, as an entry of ``ops``
    (recorded when nested); None when an entry between x and y that carries a tangent has no
    Taylor rule, for sg.derivative to nest jvps instead."""
    if y.dtype.kind != "f" or missing_rule(y, x) is not None:
        return None     # a bool or integer y carries no tangent: the jvps give its zeros
    scale = _scale((x.dtype, y.dtype), order)
    ones = np.full(x.shape, scale, dtype=x.dtype)
    o, v = (ops, ops.var(ones, requires_grad=False)) if nested else (VALUES, ones)
    c = propagate(o, y, x, v, order, nested)[order]
    if c is not None and (order > 1 or scale != 1):
        c = _derivative(o, c, order, scale)
    if isinstance(c, Variable):
        return c
    c = np.zeros(y.shape, dtype=y.dtype) if c is None else np.asarray(c, dtype=y.dtype)
    return ops.var(c, requires_grad=False)


# ---------------------------------------------------------------- coefficients to derivatives
# The k-th coefficient along s v is Dk s ** k / k!: with s = 1, 1 / k! underflows float16 from
# k = 8 and float32 from k = 34 (and k! overflows them from 9 and 35), so past those orders the
# tangent is scaled by a power of two s (exact) near order! ** (1 / order), the one of the two
# around it that keeps s ** k / k! (k <= order) nearer 1: for float16 at order 12, s = 4 and
# the factors lie in [0.035, 11]; for float32 at order 40, s = 16 and [1, 9e5]. Then
# Dk = ck k! / s ** k is formed in float64 and rounded once.


_UNSCALED = {np.dtype(d): max(k for k in range(2, 200)       # the last order whose 1 / k!
                               if math.lgamma(k + 1) <= -math.log(np.finfo(d).tiny))
             for d in (np.float16, np.float32, np.float64)}    # is normal: 7, 33, 170
_UNSCALED_ANY = min(_UNSCALED.values())     # unscaled in every float dtype up to this order


_ONE = np.ones(())      # the direction at a point (read, never written)
_ONE.setflags(write=False)


@functools.lru_cache(maxsize=256)
def _scale(dtypes: tuple, order: int) -> float:
    """1 while 1 / order! is a normal number of each float dtype, else a power of two near
    order! ** (1 / order)."""
    if order <= _UNSCALED_ANY or order <= min(_UNSCALED.get(d, 170) for d in dtypes):
        return 1.0
    log_factorial = math.lgamma(order + 1)

    def reach(m: int) -> float:     # the largest |log2(s ** k / k!)| for s = 2 ** m
        return max(abs(k * m - math.lgamma(k + 1) / math.log(2)) for k in range(order + 1))

    m = math.floor(log_factorial / order / math.log(2))
    return 2.0 ** min((m, m + 1), key=reach)


def _derivative(o: PrimitiveMethods, c: Any, k: int, scale: float) -> Any:
    """Dk from the k-th coefficient c along scale * v: c k! / scale ** k, with k! in c's
    dtype when unscaled (it is finite there), else formed in float64 and rounded once."""
    if type(c) is float:
        c = np.float64(c)       # (a float64 coefficient held as a Python float: numpy's warnings)
    if scale == 1:
        f = float(math.factorial(k))
        return o.mul(c, f) if isinstance(c, Variable) else c * f
    factor = math.factorial(k) / int(scale) ** k
    if not isinstance(c, Variable):
        return c * np.float64(factor)       # float64 here; the caller rounds to y's dtype
    if c.dtype == np.float64:
        return o.mul(c, factor)
    return o.cast(o.mul(o.cast(c, np.float64), factor), c.dtype)


MAX_ORDER = 1000    # Taylor mode costs order^2 primitive calls: order 1000 takes about a second


def check_order(fname: str, order: Any) -> int:
    """``order`` as an int in [0, MAX_ORDER], else ArgumentError naming ``fname``."""
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 0:
        raise ArgumentError(f"{fname}: order must be an int >= 0, not {order!r}")
    if order > MAX_ORDER:
        raise ArgumentError(f"{fname}: order {order} is above the limit of {MAX_ORDER} (the "
                            "work grows as its square; float derivatives that high are noise)")
    return int(order)
