"""numpy's order statistics and covariances on Variables, recorded as compositions of
primitives: ``np.quantile``, ``np.percentile``, ``np.median`` (a recorded sort, then the two
neighbouring order statistics mixed with constant weights, so the gradient goes to the entries
at those ranks) and ``np.cov``, ``np.corrcoef`` (centering, a matmul and a scale).

Each handler has numpy's signature after a leading ``ops`` (numpy_api.py's explicit table);
an argument value numpy offers but these do not support raises ``sg.ArgumentError`` naming the
function and what records.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ArgumentError, ShapeError
from .core import error, is_constant, shape_of
from .rearrange import axes_of

# numpy's methods of interpolating between order statistics that record (index -> weights)
METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _refuse(fname: str, x: Any, what: str, supported: str) -> ArgumentError:
    return error(f"np.{fname}", (x,), f"{what} is not supported on Variables; {supported}",
                 ArgumentError)


def _ranks(q: np.ndarray, n: int, method: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lower and upper ranks of the q-quantiles of n sorted entries and the upper one's weight."""
    virtual = q * (n - 1)
    lo = np.floor(virtual).astype(np.int64)
    lo = np.clip(lo, 0, n - 1)
    hi = np.minimum(lo + 1, n - 1)
    frac = virtual - lo
    if method == "lower":
        frac = np.zeros_like(frac)
    elif method == "higher":
        frac = (frac > 0).astype(float)
    elif method == "nearest":        # numpy rounds half to even: the even rank
        frac = np.where(frac == 0.5, lo % 2, np.round(frac))
    elif method == "midpoint":
        frac = np.where(frac > 0, 0.5, 0.0)
    return lo, hi, frac


def quantile(ops: Any, a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None):
    """np.quantile on a Variable: a sort, then the order statistics at q's ranks, mixed."""
    return _quantile(ops, "quantile", a, q, axis, out, method, keepdims, weights)


def _quantile(ops: Any, fname: str, a, q, axis, out, method, keepdims, weights):
    if out is not None or weights is not None or method not in METHODS:
        bad = "out=" if out is not None else "weights=" if weights is not None else \
            f"method={method!r}"
        raise _refuse(fname, a, bad, f"methods {', '.join(METHODS)} without out= or weights= "
                      "record")
    if not is_constant(q):
        raise _refuse(fname, a, "a Variable q", "q must be a constant (its ranks are fixed)")
    qs = np.asarray(q, dtype=np.float64)
    if np.any((qs < 0) | (qs > 1)) or np.isnan(qs).any():
        raise error(f"np.{fname}", (a,), "quantiles must be in [0, 1] (percentiles in [0, "
                    "100])", ArgumentError)
    shape = shape_of(a)
    axes = axes_of(ops, fname, a, axis)
    kept = [i for i in range(len(shape)) if i not in axes]
    n = int(np.prod([shape[i] for i in axes]))
    if n == 0:
        raise error(f"np.{fname}", (a,), "the reduced axes are empty", ShapeError)
    x = a
    order = kept + list(axes)
    if order != list(range(len(shape))):
        x = ops.transpose(x, tuple(order))
    rest = tuple(shape[i] for i in kept)
    x = ops.sort(ops.reshape(x, rest + (n,)), axis=-1)
    lo, hi, frac = _ranks(qs, n, method)
    low = ops.getitem(x, (Ellipsis, lo.ravel()))
    res = low
    if np.any(frac):
        high = ops.getitem(x, (Ellipsis, hi.ravel()))
        w = frac.ravel()
        res = ops.add(low, ops.mul(ops.sub(high, low), w))     # rest + (q.size,)
    res = ops.reshape(res, rest + qs.shape)
    if qs.ndim:      # q's axes first, as numpy puts them
        k = len(rest)
        res = ops.transpose(res, tuple(range(k, k + qs.ndim)) + tuple(range(k)))
    if keepdims:
        full = tuple(1 if i in axes else shape[i] for i in range(len(shape)))
        res = ops.reshape(res, qs.shape + full)
    return res


def percentile(ops: Any, a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None):
    """np.percentile on a Variable: the quantiles at q / 100."""
    if not is_constant(q):
        raise _refuse("percentile", a, "a Variable q", "q must be a constant")
    return _quantile(ops, "percentile", a, np.true_divide(q, 100.0), axis, out, method,
                     keepdims, weights)


def median(ops: Any, a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """np.median on a Variable: the 0.5 quantile (the mean of the two middle entries)."""
    return _quantile(ops, "median", a, 0.5, axis, out, "linear", keepdims, None)

# ---------------------------------------------------------------- cov, corrcoef


def _rows(ops: Any, m, rowvar: bool, others: tuple):
    """m as a 2-D array of variables in rows (numpy's ndmin=2, transposed when not rowvar)."""
    s = shape_of(m)
    if len(s) > 2:
        raise error("np.cov", others, f"an input has {len(s)} dimensions; 1-D or 2-D arrays "
                    "record", ShapeError)
    if is_constant(m):
        x = np.array(m, dtype=np.float64, ndmin=2)
        return x.T if not rowvar and x.shape[0] != 1 else x
    x = m if len(s) == 2 else ops.reshape(m, (1,) + (s or (1,)))
    return ops.transpose(x, (1, 0)) if not rowvar and shape_of(x)[0] != 1 else x


def cov(ops: Any, m, y=None, rowvar=True, bias=False, ddof=None, fweights=None,
        aweights=None, *, dtype=None):
    """np.cov on Variables (m and y may be Variables; weights are constants)."""
    everything = (m,) if y is None else (m, y)
    if dtype not in (None, np.float64, float, "float64"):
        raise error("np.cov", everything, f"dtype={dtype!r} is not supported on Variables; "
                    "float64 records", ArgumentError)
    for label, w in (("fweights", fweights), ("aweights", aweights)):
        if w is not None and not is_constant(w):
            raise error("np.cov", everything, f"{label} must be a constant", ArgumentError)
    x = _rows(ops, m, rowvar, everything)
    if y is not None:
        x = ops.concatenate([x, _rows(ops, y, rowvar, everything)], axis=0)
    n = shape_of(x)[1]
    if ddof is None:
        ddof = 0 if bias else 1
    w = None
    if fweights is not None:
        w = np.asarray(fweights, dtype=float)
    if aweights is not None:
        a = np.asarray(aweights, dtype=float)
        w = a if w is None else w * a
    if w is not None and (w.shape != (n,) or np.any(w < 0)):
        raise error("np.cov", everything, f"weights must be {n} non-negative numbers",
                    ArgumentError)
    if w is None:
        avg, fact = ops.mean(x, axis=1, keepdims=True), n - ddof
    else:
        total = float(w.sum())
        avg = ops.mul(ops.sum(ops.mul(x, w), axis=1, keepdims=True), 1.0 / total)
        fact = total if ddof == 0 else total - ddof if aweights is None else \
            total - ddof * float(np.sum(w * np.asarray(aweights, dtype=float))) / total
    if fact <= 0:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=3)
        fact = 0.0
    xc = ops.sub(x, avg)
    c = ops.matmul(xc, ops.transpose(xc if w is None else ops.mul(xc, w), (1, 0)))
    c = ops.mul(c, np.inf if fact == 0 else 1.0 / fact)
    s = shape_of(c)
    squeezed = tuple(k for k in s if k != 1)
    return c if squeezed == s else ops.reshape(c, squeezed)


def corrcoef(ops: Any, x, y=None, rowvar=True, *, dtype=None):
    """np.corrcoef on Variables: the covariance scaled by the standard deviations."""
    c = cov(ops, x, y, rowvar, dtype=dtype)
    if not shape_of(c):
        return ops.div(c, c)
    sd = ops.sqrt(ops.diagonal(c))
    n = shape_of(sd)[0]
    c = ops.div(ops.div(c, ops.reshape(sd, (n, 1))), ops.reshape(sd, (1, n)))
    return ops.clip(c, -1.0, 1.0)


ENTRIES: dict[Callable, Callable] = {
    np.quantile: quantile, np.percentile: percentile, np.median: median, np.cov: cov,
    np.corrcoef: corrcoef,
}
