"""Taylor mode: the derivatives of t -> f(x + t v) at t = 0 up to any order, in one forward walk.

Each entry between x and f's output carries a truncated Taylor series, its coefficient list
``[c0, c1, ..., cK]`` in t (``c0`` is the entry itself; ``None`` is an exact zero). Each
primitive's Taylor rule, the ``taylor`` field of its record (beside its jvp, in its family
module; the shared ones in primitives/taylor.py), maps the series of the inputs to the series of
the output: products by the Cauchy product, exp, log, sin/cos, tanh, sigmoid, sqrt, pow and div by
their recurrences, linear (and piecewise linear) primitives coefficient-wise through their
own jvp. Every coefficient is computed by calling primitives on ``o``, the Ops when the
arguments are Variables (so the derivatives are recorded and can be differentiated again) or
``VALUES`` when they are arrays, by the nesting rule every transform follows (see
arguments.py, whose helpers this module uses).
Cost: O(K^2) primitive calls per nonlinear entry, against the exponential growth of nested
first-order sweeps.

A rule has the signature ``rule(o, ss, out, *xs, **attrs) -> series``: ``ss`` holds one
series per input (an input that does not depend on t has ``[x, None, ..., None]``), ``out``
and ``xs`` are the primal output and inputs, and the result is the output's series.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine.ops import Ops
from ..engine.taylor import missing_rule, propagate
from ..engine.variable import Variable
from ..errors import ArgumentError, ShapeError
from ..primitives import VALUES
from .arguments import check_callable, context, disconnected, output, own, primal, run_paused

# ---------------------------------------------------------------- public functions


def taylor(f: Callable, x: Any, v: Any, order: int) -> list:
    """``[f(x), D1, ..., D_order]``: Dk is the k-th derivative of t -> f(x + t v) at t = 0."""
    check_callable("taylor", f)
    order = _check_order("taylor", order)
    xshape, vshape = np.shape(getattr(x, "raw", x)), np.shape(getattr(v, "raw", v))
    if xshape != vshape:
        raise ShapeError(f"taylor: v has shape {vshape} but x has shape {xshape}")
    ops, nested = context("taylor", (x, v))     # our own Ops borrows the caller's arrays
    if nested is None:
        return run_paused(ops, lambda a, b: taylor(f, a, b, order), (x, v))
    with own(ops, nested):
        xv = primal(ops, x)
        y = output("taylor", ops, f(xv))
        disconnected("taylor", f, None, [y])
        if nested:
            o, tangent = ops, v if isinstance(v, Variable) else ops.var(v, requires_grad=False)
        else:
            o, tangent = VALUES, np.asarray(getattr(v, "raw", v), dtype=xv.raw.dtype)
        coefs = propagate(o, y, xv, tangent, order, nested)
        out = []
        for k, c in enumerate(coefs):
            if c is None:
                c = np.zeros(y.shape, dtype=y.dtype)
                c = ops.var(c, requires_grad=False) if nested else c
            elif k > 1:
                c = o.mul(c, float(math.factorial(k)))
            out.append(c if nested else np.array(getattr(c, "raw", c), dtype=y.dtype))
        return out


def taylor_derivative(f: Callable, order: int = 1) -> Callable:
    """The ``order``-th derivative of ``f`` of one argument by Taylor mode along ones
    (elementwise for an elementwise ``f``), as ``sg.derivative`` gives it by nesting."""
    check_callable("taylor_derivative", f)
    order = _check_order("taylor_derivative", order)

    @functools.wraps(f)
    def derivative_f(x: Any) -> Any:
        ones = np.ones(np.shape(getattr(x, "raw", x)))
        return taylor(f, x, ones, order)[order]
    return derivative_f


def derivative_entry(ops: Ops, y: Variable, x: Variable, order: int,
                     nested: bool) -> Variable | None:
    """The ``order``-th derivative of y along ones in x by Taylor mode, as an entry of ``ops``
    (recorded when nested); None when an entry between x and y that carries a tangent has no
    Taylor rule, for sg.derivative to nest jvps instead."""
    if y.dtype.kind != "f" or missing_rule(y, x) is not None:
        return None     # a bool or integer y carries no tangent: the jvps give its zeros
    ones = np.ones(x.shape, dtype=x.dtype)
    o, v = (ops, ops.var(ones, requires_grad=False)) if nested else (VALUES, ones)
    c = propagate(o, y, x, v, order, nested)[order]
    if c is not None and order > 1:
        c = o.mul(c, float(math.factorial(order)))
    if isinstance(c, Variable):
        return c
    c = np.zeros(y.shape, dtype=y.dtype) if c is None else np.asarray(c, dtype=y.dtype)
    return ops.var(c, requires_grad=False)


def _check_order(fname: str, order: Any) -> int:
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 0:
        raise ArgumentError(f"{fname}: order must be an int >= 0, not {order!r}")
    return int(order)
