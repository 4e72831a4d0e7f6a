"""Running extremes: cummax and cummin along an axis (JAX's lax.cummax, torch.cummax; numpy's
``np.maximum.accumulate``), and the integer entries that say where each running extreme sits.

``cumargmax(x, axis)`` is, at each position i, the index of the first entry of x[..:i+1]
equal to the running maximum (an int64 entry, no gradient, like argmax). cummax's cotangent
goes to that entry (``scatter_add_along_axis`` by the recorded index), its tangent is read
from it (``take_along_axis``): so at a tie the first of the tied entries gets the gradient, as
argmax picks the first, and the recorded gradient is the same program at any input. cummin
mirrors it. ``axis=None`` scans the flattened array, as cumsum.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .core import Case, Primitive, along, method_fmt, register, shape_of
from .lazy import scan_along
from .rearrange import flat
from .scans import _one_axis
from .schema import AXIS, AXIS_OR_NONE, attrs
from .shape_rules import INDEX_OUT, SAME, scan
from .taylor import linear

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

CASES = [Case(((4,),), {"axis": 0}), Case(((3, 4),), {"axis": 1}), Case(((3, 4),), {"axis": 0}),
         Case(((2, 3, 4),), {"axis": -1}), Case(((6,),), {"axis": 0})]

# ---------------------------------------------------------------- values


def _cumargext(x, axis, ufunc):
    """Index of the first entry equal to the running extreme (``ufunc`` maximum / minimum)."""
    ext = ufunc.accumulate(x, axis=axis)
    n = np.shape(x)[axis]
    shape = [1] * np.ndim(x)
    shape[axis] = n
    pos = np.arange(n).reshape(shape)
    prev = np.concatenate([np.take(ext, [0], axis=axis), np.take(ext, np.arange(n - 1), axis=axis)],
                          axis=axis) if n else ext
    new = np.not_equal(ext, prev) | (pos == 0)      # where the running extreme changes
    return np.maximum.accumulate(np.where(new, pos, 0), axis=axis).astype(np.int64)


def _cummax(x, axis=0):
    return scan_along(lambda b, k: np.maximum.accumulate(b, axis=k), x, axis, x.dtype)


def _cummin(x, axis=0):
    return scan_along(lambda b, k: np.minimum.accumulate(b, axis=k), x, axis, x.dtype)


def _cumargmax(x, axis=0):
    return scan_along(lambda b, k: _cumargext(b, k, np.maximum), x, axis, np.int64)


def _cumargmin(x, axis=0):
    return scan_along(lambda b, k: _cumargext(b, k, np.minimum), x, axis, np.int64)


def _no_tangent(o: PrimitiveMethods, ts, out, *xs, **attrs):
    return None

# ---------------------------------------------------------------- the records


CUMARGMAX = register(Primitive("cumargmax", _cumargmax, [None], _no_tangent,
                               method_fmt("cumargmax", "axis"), CASES, differentiable=False,
                               batch=along("cumargmax"),
                               schema=attrs(shape_rule=scan(INDEX_OUT, 0, flat=False),
                                            axis=AXIS), saves=()))
CUMARGMIN = register(Primitive("cumargmin", _cumargmin, [None], _no_tangent,
                               method_fmt("cumargmin", "axis"), CASES, differentiable=False,
                               batch=along("cumargmin"),
                               schema=attrs(shape_rule=scan(INDEX_OUT, 0, flat=False),
                                            axis=AXIS), saves=()))


def _running(name: str, forward: Any, where: str) -> Primitive:
    """cummax / cummin: the gradient flows to the entry ``where`` (cumargmax / cumargmin)."""
    def index(o: PrimitiveMethods, x, axis):
        return getattr(o, where)(x, axis=axis)

    return register(Primitive(
        name, forward,
        [lambda o, g, out, x, axis=0:
            o.scatter_add_along_axis(g, index(o, x, axis), axis, shape_of(x))],
        lambda o, ts, out, x, axis=0: None if ts[0] is None else
            o.take_along_axis(ts[0], index(o, x, axis), axis),
        method_fmt(name, "axis"), CASES, batch=along(name), taylor=linear(name),
        schema=attrs(shape_rule=scan(SAME, 0, flat=False), axis=AXIS_OR_NONE), saves=("inputs",)))


CUMMAX = _running("cummax", _cummax, "cumargmax")
CUMMIN = _running("cummin", _cummin, "cumargmin")

# ---------------------------------------------------------------- Ops methods


class RunningOps:
    """Running extremes as methods of an Ops."""

    def cummax(self, x: Any, axis: int | None = None, reverse: bool = False,
               name: str | None = None) -> Variable:
        """Running maximum along ``axis`` (None: of the flattened array); ``reverse`` runs
        from the end, as JAX's lax.cummax."""
        return self._running(CUMMAX, x, axis, reverse, name)

    def cummin(self, x: Any, axis: int | None = None, reverse: bool = False,
               name: str | None = None) -> Variable:
        """Running minimum along ``axis`` (None: of the flattened array); ``reverse`` runs
        from the end, as JAX's lax.cummin."""
        return self._running(CUMMIN, x, axis, reverse, name)

    def _running(self, prim: Primitive, x: Any, axis: int | None, reverse: bool,
                 name: str | None) -> Variable:
        x, axis = _scan_axis(self, prim.name, x, axis)
        if reverse:     # the scan of the flipped array, flipped back
            out = self.apply(prim, (self.flip(x, axis),), {"axis": axis})
            return self.flip(out, axis, name=name)
        return self.apply(prim, (x,), {"axis": axis}, name)

    def cumargmax(self, x: Any, axis: int | None = None, name: str | None = None) -> Variable:
        """Index of the running maximum's first occurrence along ``axis`` (int64, no gradient)."""
        x, axis = _scan_axis(self, "cumargmax", x, axis)
        return self.apply(CUMARGMAX, (x,), {"axis": axis}, name)

    def cumargmin(self, x: Any, axis: int | None = None, name: str | None = None) -> Variable:
        """Index of the running minimum's first occurrence along ``axis`` (int64, no gradient)."""
        x, axis = _scan_axis(self, "cumargmin", x, axis)
        return self.apply(CUMARGMIN, (x,), {"axis": axis}, name)


def _scan_axis(ops: PrimitiveMethods, fname: str, x: Any, axis: Any) -> tuple[Any, int]:
    """x and the one axis a running extreme scans (the flattened x when axis is None)."""
    axis = _one_axis(ops, fname, x, axis)
    if axis is None:
        return flat(ops, x), 0
    return x, axis % len(shape_of(x))


# ---------------------------------------------------------------- Variable methods

class RunningVariable:
    """Variable methods ``x.cummax(axis)`` and ``x.cummin(axis)``."""

    __slots__ = ()

    def cummax(self, axis: int | None = None, reverse: bool = False) -> Variable:
        """Running maximum along ``axis`` (from the end when ``reverse``)."""
        return self.rec.cummax(self, axis=axis, reverse=reverse)

    def cummin(self, axis: int | None = None, reverse: bool = False) -> Variable:
        """Running minimum along ``axis`` (from the end when ``reverse``)."""
        return self.rec.cummin(self, axis=axis, reverse=reverse)
