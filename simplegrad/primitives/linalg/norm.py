"""norm: the 2-norm of vectors, of matrices (Frobenius) or of a whole array.

Its rules are written with primitives only; at a zero norm the gradient is 0 at every order
(the subgradient chosen).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import Case, Primitive, along, keepdims_shape, register, shape_of
from ..schema import AXES_OR_NONE, BOOL, attrs
from ..series import Series, sqrt_series, square_coef
from ..shape_rules import FLOATING, reduction
from ..taylor import order_of

if TYPE_CHECKING:
    from ...engine.variable import Variable
    from .. import PrimitiveMethods

# ---------------------------------------------------------------- norm


def _call_fmt(fn: str, *params: str):
    """Print rule ``fn(x, k=v, ...)`` naming only attributes set away from None/False."""
    def fmt(args: list[str], attrs: dict, render) -> str:
        shown = [f"{k}={render(attrs[k], k)}" for k in params
                 if attrs.get(k) is not None and attrs.get(k) is not False]
        return f"{fn}({', '.join(list(args) + shown)})"
    return fmt


def _norm(x, axis=None, keepdims=False):
    return np.linalg.norm(x, axis=axis, keepdims=keepdims)


def _unit(o: PrimitiveMethods, x, out, axis, keepdims):
    """x / norm, exactly 0 (at every order) where the norm is 0 (the subgradient chosen)."""
    kd = keepdims_shape(shape_of(x), axis)
    n = out if keepdims or axis is None or shape_of(out) == kd else o.reshape(out, kd)
    zero = o.equal(n, 0)
    return o.where(zero, 0, o.div(x, o.where(zero, 1, n)))


def _norm_vjp(o: PrimitiveMethods, g, out, x, axis=None, keepdims=False):
    kd = keepdims_shape(shape_of(x), axis)
    g = g if shape_of(g) == kd or axis is None else o.reshape(g, kd)
    return o.mul(g, _unit(o, x, out, axis, keepdims))


def _norm_jvp(o: PrimitiveMethods, ts, out, x, axis=None, keepdims=False):
    return o.sum(o.mul(ts[0], _unit(o, x, out, axis, keepdims)), axis=axis, keepdims=keepdims)


def _norm_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any,
        axis: Any = None, keepdims: Any = False) -> Series:
    """The 2-norm: sqrt of the reduced sum of squares."""
    sums = [None] + [None if c is None else o.sum(c, axis=axis, keepdims=keepdims)
                     for c in (square_coef(o, ss[0], k) for k in range(1, order_of(ss) + 1))]
    return sqrt_series(o, sums, out)


NORM = register(Primitive(
    "norm", _norm, [_norm_vjp], _norm_jvp, _call_fmt("norm", "axis", "keepdims"),
    [Case(((4,),)), Case(((3, 4),)), Case(((3, 4),), {"axis": 1}),
     Case(((3, 4),), {"axis": 0, "keepdims": True}), Case(((2, 3, 4),), {"axis": (1, 2)}),
     Case(((2, 3, 4),), {"axis": (0, -1), "keepdims": True}),
     Case(((2, 3),), {"axis": None, "keepdims": True})],
    domain=(lambda rng, shape: rng.uniform(-2.0, 2.0, shape),), batch=along("norm", flat=True),
    taylor=_norm_taylor, schema=attrs(shape_rule=reduction(FLOATING, most=2),
                                      axis=AXES_OR_NONE, keepdims=BOOL), saves=("inputs", "out")))

# ---------------------------------------------------------------- Ops methods


class NormOps:
    """norm as a method of an Ops."""

    def norm(self, x: Any, axis: Any = None, keepdims: bool = False,
             name: str | None = None) -> Variable:
        """2-norm over ``axis`` (None: all entries; int: vectors; 2-tuple: Frobenius)."""
        if axis is not None and not isinstance(axis, (int, np.integer)):
            axis = tuple(int(i) for i in axis)
        elif axis is not None:
            axis = int(axis)
        return self.apply(NORM, (x,), {"axis": axis, "keepdims": bool(keepdims)}, name)
