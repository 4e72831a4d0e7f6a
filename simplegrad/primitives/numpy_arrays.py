"""numpy's array builders and a few elementwise functions on Variables, recorded as
compositions of primitives: ``np.copy``, ``np.real`` and ``np.imag``,
``np.atleast_1d/2d/3d``, ``np.block``, ``np.append``, ``np.meshgrid`` (reshapes, expands
and concatenations), ``np.nan_to_num`` (``where`` on recorded ``isnan``/``isfinite`` tests:
the gradient flows where x is finite), ``np.sinc``, and ``np.sum`` / ``np.max`` / ``np.min``
with numpy's ``dtype``, ``initial`` and ``where``.

``np.sinc`` is ``sin(pi x) / (pi x)`` away from 0 and its Taylor polynomial (degree 16) for
|x| < 0.1, chosen by a recorded ``where``: so values keep full precision near 0 and every
derivative at 0 is exact up to order 15 (the quotient alone would give 0 / 0 there).

Each handler has numpy's signature after a leading ``ops`` (numpy_api.py's explicit table).
``Variable.copy()`` and ``Variable.tolist()`` are in ``ArrayVariable``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, ShapeError
from .core import dtype_of, error, is_constant, shape_of, value_of

if TYPE_CHECKING:
    from ..engine.variable import Variable

_NOVALUE = np._NoValue
# sinc's Taylor coefficients in u = (pi x)^2: (-1)^k / (2k + 1)!
_SINC = [(-1) ** k / math.factorial(2 * k + 1) for k in range(9)]


def _ndmin(ops: Any, x: Any, shape: tuple) -> Any:
    return x if shape_of(x) == shape else ops.reshape(x, shape)


def copy(ops: Any, a, order="K", subok=False):
    """np.copy of a Variable: the Variable itself (Variables are never written into)."""
    return a


def real(ops: Any, val):
    """np.real of a Variable: its real part (a real Variable itself)."""
    return ops.real(val)


def imag(ops: Any, val):
    """np.imag of a Variable: its imaginary part; for a real Variable zeros of its shape and
    dtype, recorded from it (so the shape follows under vmap and at a replay) and through
    which no gradient flows."""
    return ops.imag(val)


def _atleast(fn: Callable[[tuple], tuple]) -> Callable:
    def handler(ops: Any, *arys):
        outs = [np.reshape(np.asarray(a), fn(np.shape(a))) if is_constant(a) else
                _ndmin(ops, a, fn(shape_of(a))) for a in arys]
        return outs[0] if len(outs) == 1 else tuple(outs)
    return handler


atleast_1d = _atleast(lambda s: s or (1,))
atleast_2d = _atleast(lambda s: (1,) * (2 - len(s)) + s if len(s) < 2 else s)
atleast_3d = _atleast(lambda s: (1, 1, 1) if not s else (1,) + s + (1,) if len(s) == 1 else
                      s + (1,) if len(s) == 2 else s)


def _depth(arrays: Any, where: str) -> int:
    """How deep the lists nest (numpy's block: every leaf at the same depth)."""
    if not isinstance(arrays, list):
        return 0
    if not arrays:
        raise error("np.block", (), f"{where} is an empty list", ShapeError)
    depths = {_depth(a, f"{where}[{i}]") for i, a in enumerate(arrays)}
    if len(depths) != 1:
        raise error("np.block", (), f"list depths are mismatched at {where}", ShapeError)
    return depths.pop() + 1


def _leaves(arrays: Any) -> list:
    return [leaf for a in arrays for leaf in _leaves(a)] if isinstance(arrays, list) else [arrays]


def block(ops: Any, arrays):
    """np.block on Variables: nested lists joined along the last axes, innermost last."""
    depth = _depth(arrays, "arrays")
    rank = max([depth] + [len(shape_of(x)) for x in _leaves(arrays)])

    def join(part: Any, level: int) -> Any:
        if not isinstance(part, list):
            s = shape_of(part)
            full = (1,) * (rank - len(s)) + s
            return np.reshape(np.asarray(part, dtype=float), full) if is_constant(part) else \
                _ndmin(ops, part, full)
        pieces = [join(p, level + 1) for p in part]
        if len(pieces) == 1:
            return pieces[0]
        axis = rank - depth + level
        try:
            return ops.concatenate(pieces, axis=axis)
        except ValueError as e:
            raise error("np.block", tuple(p for p in _leaves(part) if not is_constant(p)),
                        str(e), ShapeError) from None
    return join(arrays, 0)


def append(ops: Any, arr, values, axis=None):
    """np.append on Variables: values joined after arr (both flattened when axis is None)."""
    if axis is None:
        arr, values = (np.ravel(v) if is_constant(v) else ops.reshape(v, (-1,))
                       for v in (arr, values))
        axis = 0
    return ops.concatenate([arr, values], axis=axis)


def meshgrid(ops: Any, *xi, copy=True, sparse=False, indexing="xy"):
    """np.meshgrid on Variables: each vector reshaped along its axis, expanded unless sparse."""
    if indexing not in ("xy", "ij"):
        raise error("np.meshgrid", tuple(xi), f"indexing must be 'xy' or 'ij', not "
                    f"{indexing!r}", ArgumentError)
    flat = [np.ravel(x) if is_constant(x) else ops.reshape(x, (-1,)) for x in xi]
    n = len(flat)
    sizes = [shape_of(x)[0] for x in flat]
    if indexing == "xy" and n > 1:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, x in enumerate(flat):
        at = (1 - i if i < 2 else i) if indexing == "xy" and n > 1 else i
        shape = tuple(shape_of(x)[0] if k == at else 1 for k in range(n))
        y = np.reshape(x, shape) if is_constant(x) else ops.reshape(x, shape)
        if not sparse:
            y = np.broadcast_to(y, tuple(sizes)).copy() if is_constant(y) else \
                ops.expand(y, tuple(sizes))
        out.append(y)
    return tuple(out)


def nan_to_num(ops: Any, x, copy=True, nan=0.0, posinf=None, neginf=None):
    """np.nan_to_num on a Variable: nan, +inf and -inf replaced; the gradient flows where x is
    finite."""
    info = np.finfo(dtype_of(x) or np.float64)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    inf = ops.where(ops.greater(x, 0), hi, lo)
    return ops.where(ops.isfinite(x), x, ops.where(ops.isnan(x), nan, inf))


def sinc(ops: Any, x):
    """np.sinc on a Variable: sin(pi x) / (pi x), its Taylor polynomial near 0."""
    px = ops.mul(x, np.pi)
    u = ops.mul(px, px)
    poly = _SINC[-1]
    for c in reversed(_SINC[:-1]):
        poly = ops.add(ops.mul(u, poly), c)
    near = ops.less(ops.abs(x), 0.1)
    safe = ops.where(near, 1.0, px)       # the quotient's untaken side never divides by 0
    return ops.where(near, poly, ops.div(ops.sin(safe), safe))

# ---------------------------------------------------------------- sum, max, min: numpy's options


def _masked(ops: Any, fname: str, a: Any, where: Any, fill: float) -> Any:
    if where is True or where is _NOVALUE:
        return a
    if not is_constant(where) and where.dtype != bool:
        raise error(f"np.{fname}", (a,), "where= must be bool", ArgumentError)
    return ops.where(where if not is_constant(where) else np.asarray(where, dtype=bool), a, fill)


def _no_out(fname: str, a: Any, out: Any) -> None:
    if out is not None:
        raise error(f"np.{fname}", (a,), "out= is not supported on Variables (a Variable is never "
                    "written into); use the result", ArgumentError)


def sum_(ops: Any, a, axis=None, dtype=None, out=None, keepdims=False, initial=_NOVALUE,
         where=True):
    """np.sum on a Variable, with numpy's dtype (a float dtype: a recorded cast), initial and
    where (a mask of the entries summed)."""
    _no_out("sum", a, out)
    if dtype is not None and np.dtype(dtype) != dtype_of(a):
        if np.dtype(dtype).kind != "f":
            raise error("np.sum", (a,), f"dtype={np.dtype(dtype)} would drop the gradient; "
                        "float dtypes record (sum the value for an integer total)",
                        ArgumentError)
        a = ops.cast(a, dtype)
    total = ops.sum(_masked(ops, "sum", a, where, 0.0), axis=axis, keepdims=bool(keepdims))
    return total if initial is _NOVALUE else ops.add(total, initial)


def _extreme(fname: str, method: str, fill: float) -> Callable:
    def handler(ops: Any, a, axis=None, out=None, keepdims=False, initial=_NOVALUE,
                where=True):
        _no_out(fname, a, out)
        if where is not True and initial is _NOVALUE:
            raise error(f"np.{fname}", (a,), "where= needs initial= (as numpy requires)",
                        ArgumentError)
        x = _masked(ops, fname, a, where, fill)
        result = getattr(ops, method)(x, axis=axis, keepdims=bool(keepdims))
        if initial is _NOVALUE:
            return result
        return getattr(ops, "maximum" if method == "max" else "minimum")(result, initial)
    handler.__doc__ = f"np.{fname} on a Variable, with numpy's initial and where."
    return handler


ENTRIES: dict[Callable, Callable] = {
    np.copy: copy, np.atleast_1d: atleast_1d, np.atleast_2d: atleast_2d,
    np.atleast_3d: atleast_3d, np.block: block, np.append: append, np.meshgrid: meshgrid,
    np.nan_to_num: nan_to_num, np.sinc: sinc, np.sum: sum_, np.real: real, np.imag: imag,
    np.max: _extreme("max", "max", -np.inf), np.amax: _extreme("amax", "max", -np.inf),
    np.min: _extreme("min", "min", np.inf), np.amin: _extreme("amin", "min", np.inf),
}

# ---------------------------------------------------------------- Variable methods


class ArrayVariable:
    """numpy's ndarray methods ``copy`` and ``tolist`` on Variables."""

    __slots__ = ()

    def copy(self, order: str = "C") -> Variable:
        """The Variable itself: Variables are never written into, so a copy is the same value."""
        return self

    def tolist(self) -> Any:
        """The value as nested Python lists (numpy's tolist; not recorded)."""
        return value_of(self).tolist()
