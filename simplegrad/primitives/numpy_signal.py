"""numpy's differences, integrals and 1-D convolutions on Variables, recorded as compositions
of primitives: ``np.diff`` and ``np.ediff1d`` (slices and a subtraction), ``np.trapezoid``
(the trapezoid rule: slices, a product and a sum; x may be a Variable too), ``np.convolve``
and ``np.correlate`` (a constant gather of the windows of the zero-padded longer input, then
a matmul with the shorter one: both inputs get their gradients, and the recorded program
replays at any values).

Each handler has numpy's signature after a leading ``ops`` (numpy_api.py's explicit table).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ArgumentError, ShapeError
from .core import error, is_constant, shape_of
from .rearrange import axes_of

_NOVALUE = np._NoValue


def _along(nd: int, axis: int, index: Any) -> tuple:
    return (slice(None),) * axis + (index,) + (slice(None),) * (nd - axis - 1)


def _edge(ops: Any, v: Any, shape: tuple, axis: int) -> Any:
    """prepend / append values for diff: numbers broadcast to one slice along axis."""
    if is_constant(v):
        v = np.asarray(v, dtype=np.float64)
        if v.ndim == 0:
            return np.full(shape[:axis] + (1,) + shape[axis + 1:], float(v))
    if len(shape_of(v)) == 0:
        return ops.expand(ops.reshape(v, (1,) * len(shape)), shape[:axis] + (1,) +
                          shape[axis + 1:])
    return v


def diff(ops: Any, a, n=1, axis=-1, prepend=_NOVALUE, append=_NOVALUE):
    """np.diff on Variables: n-th differences along axis (prepend / append joined first)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise error("np.diff", (a,), f"order must be a non-negative int, got {n!r}",
                    ArgumentError)
    nd = len(shape_of(a))
    if nd == 0:
        raise error("np.diff", (a,), "diff requires input that is at least one dimensional",
                    ShapeError)
    (ax,) = axes_of(ops, "np.diff", a, axis)
    parts = [a]
    if prepend is not _NOVALUE:
        parts.insert(0, _edge(ops, prepend, shape_of(a), ax))
    if append is not _NOVALUE:
        parts.append(_edge(ops, append, shape_of(a), ax))
    x = parts[0] if len(parts) == 1 else ops.concatenate(parts, axis=ax)
    for _ in range(int(n)):
        m = shape_of(x)[ax]
        x = ops.sub(ops.getitem(x, _along(nd, ax, slice(1, m))),
                    ops.getitem(x, _along(nd, ax, slice(0, max(m - 1, 0)))))
    return x


def ediff1d(ops: Any, ary, to_end=None, to_begin=None):
    """np.ediff1d on Variables: differences of the flattened array, with ends joined."""
    flat = ops.reshape(ary, (-1,))
    m = shape_of(flat)[0]
    parts = [ops.sub(ops.getitem(flat, (slice(1, m),)), ops.getitem(flat, (slice(0, max(m - 1,
                                                                                      0)),)))]
    for where, v in ((0, to_begin), (1, to_end)):
        if v is not None:
            v = np.ravel(np.asarray(v, dtype=float)) if is_constant(v) else ops.reshape(v, (-1,))
            parts.insert(0 if where == 0 else len(parts), v)
    return parts[0] if len(parts) == 1 else ops.concatenate(parts, axis=0)


def trapezoid(ops: Any, y, x=None, dx=1.0, axis=-1):
    """np.trapezoid on Variables: sum of (y[1:] + y[:-1]) / 2 times the spacing, along axis."""
    nd = len(shape_of(y))
    (ax,) = axes_of(ops, "np.trapezoid", y, axis)
    m = shape_of(y)[ax]
    if x is not None and is_constant(x):
        x = np.asarray(x, dtype=np.float64)
    if x is None:
        d = dx
    elif len(shape_of(x)) == 1:
        if shape_of(x)[0] != m:
            raise error("np.trapezoid", (y, x), f"x has {shape_of(x)[0]} points, y {m} along "
                        f"axis {axis}", ShapeError)
        d = diff(ops, x) if not is_constant(x) else np.diff(x)
        shape = [1] * nd
        shape[ax] = m - 1
        d = ops.reshape(d, tuple(shape)) if not is_constant(d) else np.reshape(d, shape)
    else:
        d = diff(ops, x, axis=axis) if not is_constant(x) else np.diff(x, axis=axis)
    mid = ops.add(ops.getitem(y, _along(nd, ax, slice(1, m))),
                  ops.getitem(y, _along(nd, ax, slice(0, max(m - 1, 0)))))
    return ops.sum(ops.mul(ops.mul(mid, d), 0.5), axis=ax)

# ---------------------------------------------------------------- convolve, correlate


def _vector(ops: Any, fname: str, v: Any, others: tuple) -> Any:
    if is_constant(v):
        v = np.asarray(v, dtype=np.float64)
    if len(shape_of(v)) != 1 or shape_of(v)[0] == 0:
        raise error(f"np.{fname}", others, "inputs must be non-empty 1-D arrays", ShapeError)
    return v


def _full(ops: Any, a: Any, v: Any) -> Any:
    """The full convolution of a (length n) and v (length k <= n): windows of the padded a,
    one matmul with v reversed."""
    n, k = shape_of(a)[0], shape_of(v)[0]
    padded = ops.pad(a, ((k - 1, k - 1),)) if not is_constant(a) else \
        np.pad(a, (k - 1, k - 1))
    windows = np.arange(n + k - 1)[:, None] + np.arange(k)[None, :]
    rows = ops.getitem(padded, (windows,)) if not is_constant(padded) else padded[windows]
    return ops.matmul(rows, ops.flip(v, 0) if not is_constant(v) else v[::-1])


def _crop(ops: Any, full: Any, n: int, k: int, mode: str, fname: str, others: tuple) -> Any:
    if mode == "full":
        return full
    if mode == "same":
        start = (k - 1) // 2 if n >= k else (n - 1) // 2
        return ops.getitem(full, (slice(start, start + max(n, k)),))
    if mode == "valid":
        return ops.getitem(full, (slice(min(n, k) - 1, max(n, k)),))
    raise error(f"np.{fname}", others, f"mode must be 'full', 'same' or 'valid', got {mode!r}",
                ArgumentError)


def convolve(ops: Any, a, v, mode="full"):
    """np.convolve on Variables: the discrete linear convolution of two 1-D arrays."""
    a, v = _vector(ops, "convolve", a, (a, v)), _vector(ops, "convolve", v, (a, v))
    n, k = shape_of(a)[0], shape_of(v)[0]
    full = _full(ops, a, v) if n >= k else _full(ops, v, a)
    return _crop(ops, full, n, k, mode, "convolve", (a, v))


def correlate(ops: Any, a, v, mode="valid"):
    """np.correlate on Variables: sum_n a[n + k] v[n], the convolution with v reversed."""
    a, v = _vector(ops, "correlate", a, (a, v)), _vector(ops, "correlate", v, (a, v))
    n, k = shape_of(a)[0], shape_of(v)[0]
    if n < k:       # as numpy: the lags of (v, a), reversed
        swapped = correlate(ops, v, a, mode)
        return swapped[::-1] if is_constant(swapped) else ops.flip(swapped, 0)
    rv = v[::-1] if is_constant(v) else ops.flip(v, 0)
    return _crop(ops, _full(ops, a, rv), n, k, mode, "correlate", (a, v))


ENTRIES: dict[Callable, Callable] = {
    np.diff: diff, np.ediff1d: ediff1d, np.trapezoid: trapezoid, np.convolve: convolve,
    np.correlate: correlate,
}
