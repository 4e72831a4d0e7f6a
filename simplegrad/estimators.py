"""Stochastic trace estimators (Hutchinson, Hutch++) and the divergence of a vector field.

A trace is read through products with the matrix only: tr(A) = E[v^T A v] for random
probes v with E[v v^T] = I. Probes are the rows of a (k, n) array; ``products`` maps it
to the rows A v, either as a numpy array or as a Variable (then the estimate is
recorded on that Variable's Ops and can be differentiated). The same estimator code
serves both, through ``*``, ``.sum()`` and ``/``.

Why a divergence is expensive and these are not: div f(x) = tr(J) needs, exactly, n
Jacobian-vector products (one per column of J), while Hutchinson's estimator needs one
per probe, and Hutch++ reaches a given accuracy with about the square root of the
probes Hutchinson needs when J has a few dominant eigenvalues.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from .engine.ops import Ops
from .engine.params import FREE
from .engine.variable import Variable
from .errors import ArgumentError, ShapeError

Dist = Literal["rademacher", "gaussian"]
Method = Literal["exact", "hutchinson", "hutch++"]
Products = Callable[[np.ndarray], Any]   # (k, n) probes -> (k, n) rows A v

_DISTS = ("rademacher", "gaussian")
_METHODS = ("exact", "hutchinson", "hutch++")

# ---------------------------------------------------------------- public API


def hutchinson_trace(matvec: Callable[[np.ndarray], np.ndarray], n: int, samples: int,
                     rng: np.random.Generator | int | None = None,
                     dist: Dist = "rademacher") -> float:
    """Unbiased estimate of tr(A) from ``samples`` products A @ v with random probes v."""
    n = _count("hutchinson_trace", "n", n, 1)
    samples = _count("hutchinson_trace", "samples", samples, 1)
    _check_dist("hutchinson_trace", dist)
    gen = np.random.default_rng(rng)
    return float(_hutchinson(_by_matvec(matvec, n), n, samples, gen, dist))


def hutchpp_trace(matvec: Callable[[np.ndarray], np.ndarray], n: int, samples: int,
                  rng: np.random.Generator | int | None = None) -> float:
    """Hutch++ estimate of tr(A) (Meyer, Musco, Musco, Woodruff 2021) from ``samples`` products."""
    n = _count("hutchpp_trace", "n", n, 1)
    samples = _count("hutchpp_trace", "samples", samples, 3)
    products = _by_matvec(matvec, n)
    return float(_hutchpp(products, products, n, samples, np.random.default_rng(rng)))


def divergence(f: Callable[[Variable], Variable], x: Any, method: Method = "exact",
               samples: int | None = None,
               rng: np.random.Generator | int | None = None) -> Any:
    """The divergence tr(df/dx) of f at x, from Jacobian-vector products.

    ``method="exact"`` uses n products (the Jacobian column by column); "hutchinson"
    and "hutch++" use ``samples`` products (ignored by "exact"). Given an array, the
    result is a float. Given a Variable, it is a 0-d Variable recorded on x's Ops, so
    it can be differentiated; Hutch++ then treats its sketch basis Q as a constant
    (the estimate is unbiased for every fixed Q, so its gradient stays unbiased too).
    """
    if method not in _METHODS:
        raise ArgumentError(f"divergence: method must be one of {', '.join(_METHODS)}, "
                            f"not {method!r}")
    if method != "exact":
        if samples is None:
            raise ArgumentError(f"divergence: method {method!r} needs samples= (its number "
                                "of Jacobian-vector products)")
        samples = _count("divergence", "samples", samples, 3 if method == "hutch++" else 1)
    recorded = isinstance(x, Variable)
    if recorded:
        op = FREE.implicit() if x.rec is FREE else x.rec
        xv = op.leaf_for(x)
        if not xv.requires_grad:    # a point that takes no gradient: the products need one
            xv = op.leaf(xv.raw, None, True)
    else:
        face = Ops()      # held for the whole computation (its tape keeps the entries)
        op = face.recorder
        xv = op.var(x)
    y = f(xv)
    if not isinstance(y, Variable) or y.rec is not op:
        raise ArgumentError(f"divergence: f must return a Variable computed from its argument, "
                            f"got {type(y).__name__}")
    if y.shape != xv.shape:
        raise ShapeError(f"divergence: f maps shape {xv.shape} to {y.shape}; a divergence "
                         "needs f(x) of the shape of x")
    n, shape = xv.size, xv.shape

    def values(V: np.ndarray) -> np.ndarray:
        rows = [op.jvp(y, xv, v.reshape(shape), create_graph=False).value.reshape(n)
                for v in V]
        return np.stack(rows) if rows else np.zeros((0, n))

    def recorded_products(V: np.ndarray) -> Variable:
        rows = op.stack([op.jvp(y, xv, v.reshape(shape)) for v in V])
        return rows if len(shape) == 1 else op.reshape(rows, (len(V), n))

    products = recorded_products if recorded else values
    if method == "exact":
        est = _form(products, np.eye(n))
    elif method == "hutchinson":
        est = _hutchinson(products, n, samples, np.random.default_rng(rng), "rademacher")
    else:
        est = _hutchpp(products, values, n, samples, np.random.default_rng(rng))
    if recorded:
        return est
    op.release()    # our own tape: free it now rather than at the next cyclic collection
    return float(est)

# ---------------------------------------------------------------- estimators


def _form(products: Products, V: np.ndarray) -> Any:
    """sum over the rows v of V of v^T A v."""
    return (products(V) * V).sum()


def _hutchinson(products: Products, n: int, samples: int, rng: np.random.Generator,
                dist: str) -> Any:
    return _form(products, _probes(rng, samples, n, dist)) / samples


def _hutchpp(products: Products, values: Products, n: int, samples: int,
             rng: np.random.Generator) -> Any:
    """Hutch++: a third of the budget sketches A S, a third takes the exact trace on the
    basis Q of its range, the rest runs Hutchinson on the remainder (I - QQ^T) A (I - QQ^T).

    ``values`` gives the sketch's products as numbers only: Q is a constant of the estimate.
    """
    k = samples // 3
    S = _probes(rng, k, n, "rademacher")
    G = _probes(rng, samples - 2 * k, n, "rademacher")
    Q = np.linalg.qr(values(S).T)[0].T          # (min(k, n), n): orthonormal rows
    top = _form(products, Q)
    if len(Q) == n:                             # Q spans everything: the trace is exact
        return top
    G = G - (G @ Q.T) @ Q
    return top + _form(products, G) / len(G)


def _probes(rng: np.random.Generator, k: int, n: int, dist: str) -> np.ndarray:
    """k probes of length n with E[v v^T] = I, as the rows of a (k, n) array."""
    if dist == "rademacher":
        return rng.integers(0, 2, size=(k, n)) * 2.0 - 1.0
    return rng.standard_normal((k, n))


def _by_matvec(matvec: Callable[[np.ndarray], np.ndarray], n: int) -> Products:
    def products(V: np.ndarray) -> np.ndarray:
        out = np.empty((len(V), n))
        for j, v in enumerate(V):
            av = np.asarray(matvec(v.copy()))
            if av.shape != (n,):
                raise ShapeError(f"matvec returned shape {av.shape} for a vector of shape "
                                 f"({n},); it must return A @ v of shape ({n},)")
            out[j] = av
        return out
    return products

# ---------------------------------------------------------------- argument checks


def _count(fn: str, what: str, k: Any, least: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ArgumentError(f"{fn}: {what} must be an int, got {type(k).__name__}")
    if k < least:
        raise ArgumentError(f"{fn}: {what} must be at least {least}, got {k}")
    return int(k)


def _check_dist(fn: str, dist: Any) -> None:
    if dist not in _DISTS:
        raise ArgumentError(f"{fn}: dist must be one of {', '.join(_DISTS)}, not {dist!r}")
