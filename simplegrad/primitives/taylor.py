"""The shapes of Taylor rule that several families share: a primitive linear in its inputs
(``linear``) and one linear in each input (``multilinear``). Every other Taylor rule sits beside
its record in its family module (elementwise: exp, log, pow, ...; reduce: logsumexp, softmax;
linalg: solve, inv, det, ...).

A primitive's Taylor rule, its record's ``taylor=`` field (``core.TaylorRule``), maps the
truncated Taylor series of its inputs to its output's: ``rule(o, ss, out, *xs, **attrs) ->
series``. ``ss`` holds one series per input (an input that does not depend on t has
``[x, None, ..., None]``), ``out`` and ``xs`` are the primal output and inputs, ``attrs`` the
entry's attributes; the series arithmetic is series.py's. Linear and piecewise-linear
primitives reuse their jvp per coefficient (``linear``); products are Cauchy products
(``multilinear``); the rest use recurrences. Rules name their primitive by its registered
name, as batching rules do: a record is built before its rule can refer to it.
engine/taylor.py walks the tape calling them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .core import REGISTRY, TaylorRule
from .series import Series, cauchy_values, new, plus

if TYPE_CHECKING:
    from . import PrimitiveMethods


def order_of(ss: list[Series]) -> int:
    """K, the highest coefficient of the series."""
    return len(ss[0]) - 1

# ---------------------------------------------------------------- linear and multilinear


def linear(name: str, table: dict | None = None) -> TaylorRule:
    """A primitive linear in its inputs jointly, or piecewise linear: its jvp, per coefficient
    (the record named ``name`` in ``table``, the registry by default)."""
    def rule(o: PrimitiveMethods, ss, out, *xs, **attrs):
        jvp = (REGISTRY if table is None else table)[name].jvp
        z = new(out, order_of(ss))
        for k in range(1, len(z)):
            ts = [s[k] for s in ss]
            if any(t is not None for t in ts):
                z[k] = jvp(o, ts, out, *xs, **attrs)
        return z
    return rule


def _compositions(k: int, n: int) -> list[tuple[int, ...]]:
    """Every n-tuple of non-negative ints summing to k."""
    if n == 1:
        return [(k,)]
    return [(j, *rest) for j in range(k + 1) for rest in _compositions(k - j, n - 1)]


def multilinear(name: str, elementwise: bool = False) -> TaylorRule:
    """A primitive linear in each input (mul, matmul, einsum, cross): the Cauchy product.
    ``elementwise``: the primitive is numpy's ``*`` (mul), which a value-only walk applies
    term by term itself."""
    def rule(o: PrimitiveMethods, ss, out, *xs, **attrs):
        prim = REGISTRY[name]
        z = new(out, order_of(ss))
        if elementwise and o.plain_values:
            a, b = ss
            for k in range(1, len(z)):
                z[k] = cauchy_values(a, b, k)
            return z
        for k in range(1, len(z)):
            for js in _compositions(k, len(ss)):
                parts = [s[j] for s, j in zip(ss, js)]
                if all(p is not None for p in parts):
                    z[k] = plus(o, z[k], o.apply(prim, parts, attrs))
        return z
    return rule

# ---------------------------------------------------------------- by nested jvps


def nested_jvps(name: str) -> TaylorRule:
    """A primitive with no series recurrence but a jvp written with primitives (the
    decompositions: eigh, svd, qr, pinv, lstsq): ``series_by_jvps`` of its record."""
    def rule(o, ss, out, *xs, **attrs):
        return series_by_jvps(REGISTRY[name], o, ss, out, *xs, **attrs)
    rule.recorded = True
    return rule


def series_by_jvps(prim, o, ss, out, *xs, **attrs):
    """The output series of ``prim``: the derivatives of t -> prim(sum_k c_k t^k) at t = 0 by
    nested jvps in a scalar t, divided by k!. It records (``o`` must be an Ops: engine/taylor.py
    hands a value-only walk a scratch one), so where the jvp raises (eigenvectors at repeated
    eigenvalues) the series raises too."""
    order = order_of(ss)
    dtype = out.dtype
    t = o.var(np.zeros((), dtype=dtype))
    moved = []
    for s in ss:        # Horner: c0 + t (c1 + t (c2 + ...))
        acc = None
        for k in range(order, 0, -1):
            acc = plus(o, s[k], None if acc is None else o.mul(t, acc))
        moved.append(s[0] if acc is None else o.add(s[0], o.mul(t, acc)))
    d = o.apply(prim, moved, attrs or None)
    z = new(out, order)
    one = np.ones((), dtype=dtype)
    for k in range(1, order + 1):
        d = o.jvp(d, t, one, create_graph=True)
        z[k] = o.mul(d, 1.0 / math.factorial(k))
    return z
