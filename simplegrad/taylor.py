"""Taylor mode: the derivatives of t -> f(x + t v) at t = 0 up to any order, in one forward walk.

Each entry between x and f's output carries a truncated Taylor series, its coefficient list
``[c0, c1, ..., cK]`` in t (``c0`` is the entry itself; ``None`` is an exact zero). A rule per
primitive, keyed by name in ``RULES``, maps the series of the inputs to the series of the
output: products by the Cauchy product, exp, log, sin/cos, tanh, sigmoid, sqrt, pow and div by
their recurrences, linear (and piecewise linear) primitives coefficient-wise through their
own jvp. Every coefficient is computed by calling primitives on ``o``, the Ops when the
arguments are Variables (so the derivatives are recorded and can be differentiated again) or
``VALUES`` when they are arrays, as in transforms.py, whose nesting rule this module follows.
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

from .errors import ArgumentError, NotDifferentiableError, ShapeError
from .primitives import REGISTRY, VALUES
from .primitives.core import dtype_of, is_constant, shape_of
from .primitives.decomp import swap_last
from .transforms import _check_callable, _context, _output, _own, _primals
from .variable import Variable

Series = list       # [c0, c1, ..., cK]; None is an exact zero
Rule = Callable[..., Series]

# ---------------------------------------------------------------- public functions


def taylor(f: Callable, x: Any, v: Any, order: int) -> list:
    """``[f(x), D1, ..., D_order]``: Dk is the k-th derivative of t -> f(x + t v) at t = 0."""
    _check_callable("taylor", f)
    order = _check_order("taylor", order)
    xshape, vshape = np.shape(getattr(x, "raw", x)), np.shape(getattr(v, "raw", v))
    if xshape != vshape:
        raise ShapeError(f"taylor: v has shape {vshape} but x has shape {xshape}")
    ops, nested = _context("taylor", (x, v))
    with _own(ops, nested):
        call, (xv,) = _primals(ops, (x,), (0,))
        y = _output("taylor", ops, f(*call))
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
    _check_callable("taylor_derivative", f)
    order = _check_order("taylor_derivative", order)

    @functools.wraps(f)
    def derivative_f(x: Any) -> Any:
        ones = np.ones(np.shape(getattr(x, "raw", x)))
        return taylor(f, x, ones, order)[order]
    return derivative_f


def propagate(o: Any, y: Variable, x: Variable, v: Any, order: int, recording: bool) -> Series:
    """The Taylor series of y when x moves along x + t v (coefficients, not derivatives)."""
    series: dict[Variable, Series] = {x: [x if recording else x.raw, v] + [None] * (order - 1)}
    if order == 0:
        return [y if recording else y.raw]
    start = x.position if x.prim is None else x.position + 1
    for out in _between(y, start):
        inputs = out.inputs
        ss = [series.get(i) if type(i) is Variable else None for i in inputs]
        if all(s is None for s in ss) or not out.prim.differentiable:
            continue
        rule = RULES.get(out.prim.name)
        if rule is None or REGISTRY.get(out.prim.name) is not out.prim:
            raise NotDifferentiableError(
                f"taylor: primitive {out.prim.name!r} (entry {out.name}) has no Taylor rule; "
                "use sg.derivative (nested jvps) for this function")
        xs = [i if recording or type(i) is not Variable else i.raw for i in inputs]
        ss = [s if s is not None else [xi] + [None] * order for s, xi in zip(ss, xs)]
        res = rule(o, ss, out if recording else out.raw, *xs, **(out.attrs or {}))
        shape, dtype = out.shape, out.raw.dtype
        for k in range(1, order + 1):
            c = res[k]
            if c is None:
                continue
            if shape_of(c) != shape:
                c = o.expand(c, shape)
            if dtype_of(c) != dtype:
                c = o.cast(c, dtype)
            res[k] = c
        res[0] = out if recording else out.raw
        series[out] = res
    s = series.get(y)
    return [y if recording else y.raw] + [None] * order if s is None else s


def _between(y: Variable, start: int) -> list[Variable]:
    """The entries at positions >= start that y depends on, oldest first (iterative walk)."""
    seen: dict[int, Variable] = {}
    stack = [y]
    while stack:
        v = stack.pop()
        if v.position < start or v.prim is None or v.position in seen:
            continue
        seen[v.position] = v
        stack.extend(i for i in v.inputs if type(i) is Variable)
    return [seen[p] for p in sorted(seen)]


def _check_order(fname: str, order: Any) -> int:
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 0:
        raise ArgumentError(f"{fname}: order must be an int >= 0, not {order!r}")
    return int(order)

# ---------------------------------------------------------------- series arithmetic


def _plus(o: Any, a: Any, b: Any) -> Any:
    """a + b where None is zero."""
    return b if a is None else a if b is None else o.add(a, b)


def _cauchy(o: Any, op: Callable, a: Series, b: Series, k: int, lo: int = 0) -> Any:
    """sum over lo <= j <= k - lo of op(a[j], b[k - j]), skipping zero terms (None if none)."""
    acc = None
    for j in range(lo, k - lo + 1):
        if a[j] is not None and b[k - j] is not None:
            acc = _plus(o, acc, op(a[j], b[k - j]))
    return acc


def _ode(o: Any, x: Series, a: Series, k: int) -> Any:
    """z_k of z' = a x': (1/k) sum_{j=1..k} j x_j a_{k-j} (None when every term is zero)."""
    acc = None
    for j in range(1, k + 1):
        if x[j] is not None and a[k - j] is not None:
            term = o.mul(x[j], a[k - j])
            acc = _plus(o, acc, term if j == 1 else o.mul(term, float(j)))
    return acc if acc is None or k == 1 else o.div(acc, float(k))


def _order(ss: list[Series]) -> int:
    return len(ss[0]) - 1


def _new(out: Any, order: int) -> Series:
    return [out] + [None] * order

# ---------------------------------------------------------------- rules: linear and bilinear


def _linear(name: str) -> Rule:
    """A primitive linear in its inputs jointly (or piecewise linear): its jvp, per coefficient."""
    def rule(o, ss, out, *xs, **attrs):
        jvp = REGISTRY[name].jvp
        z = _new(out, _order(ss))
        for k in range(1, len(z)):
            ts = [s[k] for s in ss]
            if any(t is not None for t in ts):
                z[k] = jvp(o, ts, out, *xs, **attrs)
        return z
    return rule


def _bilinear(method: str) -> Rule:
    """A primitive linear in each input (mul, matmul): the Cauchy product of the two series."""
    def rule(o, ss, out, x, y):
        op = getattr(o, method)
        return [out] + [_cauchy(o, op, ss[0], ss[1], k) for k in range(1, _order(ss) + 1)]
    return rule

# ---------------------------------------------------------------- rules: recurrences


def _div(o, ss, out, x, y):
    """z = x / y: z_k = (x_k - sum_{j=1..k} y_j z_{k-j}) / y_0."""
    (xs, ys), z = ss, _new(out, _order(ss))
    for k in range(1, len(z)):
        rest = None
        for j in range(1, k + 1):
            if ys[j] is not None and z[k - j] is not None:
                rest = _plus(o, rest, o.mul(ys[j], z[k - j]))
        num = _minus(o, xs[k], rest)
        z[k] = None if num is None else o.div(num, y)
    return z


def _exp(o, ss, out, x):
    z = _new(out, _order(ss))
    for k in range(1, len(z)):
        z[k] = _ode(o, ss[0], z, k)
    return z


def _log_series(o: Any, xs: Series, z0: Any) -> Series:
    """z = log x: z_k = (x_k - (1/k) sum_{j=1..k-1} (k - j) z_{k-j} x_j) / x_0."""
    z = _new(z0, len(xs) - 1)
    for k in range(1, len(z)):
        rest = None
        for j in range(1, k):
            if xs[j] is not None and z[k - j] is not None:
                term = o.mul(xs[j], z[k - j])
                rest = _plus(o, rest, term if k - j == 1 else o.mul(term, float(k - j)))
        if rest is not None:
            rest = o.div(rest, float(k))
        num = xs[k] if rest is None else o.neg(rest) if xs[k] is None else o.sub(xs[k], rest)
        z[k] = None if num is None else o.div(num, xs[0])
    return z


def _log(o, ss, out, x):
    return _log_series(o, ss[0], out)


def _sin_cos(o: Any, xs: Series, s0: Any, c0: Any) -> tuple[Series, Series]:
    """The series of sin x and cos x together: s' = c x', c' = -s x'."""
    s, c = _new(s0, len(xs) - 1), _new(c0, len(xs) - 1)
    for k in range(1, len(s)):
        s[k] = _ode(o, xs, c, k)
        m = _ode(o, xs, s, k)
        c[k] = None if m is None else o.neg(m)
    return s, c


def _sin(o, ss, out, x):
    return _sin_cos(o, ss[0], out, o.cos(x))[0]


def _cos(o, ss, out, x):
    return _sin_cos(o, ss[0], o.sin(x), out)[1]


def _square_coef(o: Any, z: Series, k: int) -> Any:
    """The k-th coefficient of z^2 from z_0..z_k (symmetric Cauchy product)."""
    acc = None
    for j in range((k + 1) // 2):
        if z[j] is not None and z[k - j] is not None:
            acc = _plus(o, acc, o.mul(z[j], z[k - j]))
    if acc is not None:
        acc = o.mul(acc, 2.0)
    if k % 2 == 0 and z[k // 2] is not None:
        acc = _plus(o, acc, o.mul(z[k // 2], z[k // 2]))
    return acc


def _tanh(o, ss, out, x):
    """z' = (1 - z^2) x'; w = 1 - z^2 grows with z."""
    z = _new(out, _order(ss))
    w = [o.sub(1.0, o.mul(out, out))] + [None] * _order(ss)
    for k in range(1, len(z)):
        z[k] = _ode(o, ss[0], w, k)
        sq = _square_coef(o, z, k)
        w[k] = None if sq is None else o.neg(sq)
    return z


def _sigmoid(o, ss, out, x):
    """z' = z (1 - z) x'; w = z - z^2 grows with z."""
    z = _new(out, _order(ss))
    w = [o.mul(out, o.sub(1.0, out))] + [None] * _order(ss)
    for k in range(1, len(z)):
        z[k] = _ode(o, ss[0], w, k)
        sq = _square_coef(o, z, k)
        w[k] = z[k] if sq is None else o.neg(sq) if z[k] is None else o.sub(z[k], sq)
    return z


def _sqrt_series(o: Any, xs: Series, z0: Any) -> Series:
    """z^2 = x: z_k = (x_k - sum_{j=1..k-1} z_j z_{k-j}) / (2 z_0)."""
    z = _new(z0, len(xs) - 1)
    twice = o.mul(z0, 2.0)
    for k in range(1, len(z)):
        inner = _cauchy(o, o.mul, z, z, k, 1)
        num = xs[k] if inner is None else o.neg(inner) if xs[k] is None else o.sub(xs[k], inner)
        z[k] = None if num is None else o.div(num, twice)
    return z


def _sqrt(o, ss, out, x):
    return _sqrt_series(o, ss[0], out)


def _pow(o, ss, out, x, y):
    """x ** a for a constant a by z_k = sum_j ((a + 1) j - k) x_j z_{k-j} / (k x_0), squares
    by the Cauchy product (exact at x = 0), a varying exponent as exp(y log x)."""
    xs, ys = ss
    order = _order(ss)
    if all(c is None for c in ys[1:]):
        if is_constant(y) and np.all(np.equal(y, 2)):
            return [out] + [_square_coef(o, xs, k) for k in range(1, order + 1)]
        z = _new(out, order)
        for k in range(1, order + 1):
            acc = None
            for j in range(1, k + 1):
                if xs[j] is not None and z[k - j] is not None:
                    w = ((np.asarray(y) + 1.0) * j - k if is_constant(y)
                         else o.sub(o.mul(o.add(y, 1.0), float(j)), float(k)))
                    acc = _plus(o, acc, o.mul(o.mul(xs[j], z[k - j]), w))
            z[k] = None if acc is None else o.div(acc, o.mul(x, float(k)))
        return z
    logs = _log_series(o, xs, o.log(x))
    prod = _bilinear("mul")(o, [ys, logs], o.mul(y, logs[0]), y, logs[0])
    return _exp(o, [prod], out, prod[0])

# ---------------------------------------------------------------- rules: reductions, linalg


def _lse_series(o: Any, xs: Series, x: Any, axis: Any) -> Series:
    """The series of logsumexp(x, axis, keepdims=True): log of the sum of exp(x - L_0)."""
    lse0 = o.logsumexp(x, axis=axis, keepdims=True)
    e = _exp(o, [xs], o.exp(o.sub(x, lse0)), None)
    sums = [None if c is None else o.sum(c, axis=axis, keepdims=True) for c in e]
    logs = _log_series(o, sums, None)
    logs[0] = lse0
    return logs


def _logsumexp(o, ss, out, x, axis=None, keepdims=False):
    lse = _lse_series(o, ss[0], x, axis)
    shape = shape_of(out)
    return [out] + [c if c is None or shape_of(c) == shape else o.reshape(c, shape)
                    for c in lse[1:]]


def _softmax(o, ss, out, x, axis=-1):
    lse = _lse_series(o, ss[0], x, axis)
    shifted = [None] + [_minus(o, a, b) for a, b in zip(ss[0][1:], lse[1:])]
    return _exp(o, [shifted], out, None)


def _log_softmax(o, ss, out, x, axis=-1):
    lse = _lse_series(o, ss[0], x, axis)
    return [out] + [_minus(o, a, b) for a, b in zip(ss[0][1:], lse[1:])]


def _minus(o: Any, a: Any, b: Any) -> Any:
    return a if b is None else o.neg(b) if a is None else o.sub(a, b)


def _norm(o, ss, out, x, axis=None, keepdims=False):
    """sqrt of the sum of squares, each coefficient reduced like the norm."""
    sq = [None] + [_square_coef(o, ss[0], k) for k in range(1, _order(ss) + 1)]
    sums = [None if c is None else o.sum(c, axis=axis, keepdims=keepdims) for c in sq]
    return _sqrt_series(o, sums, out)


def _inv(o, ss, out, a):
    """A Z = I: Z_k = -Z_0 sum_{j=1..k} A_j Z_{k-j}."""
    z = _new(out, _order(ss))
    for k in range(1, len(z)):
        rest = None
        for j in range(1, k + 1):
            if ss[0][j] is not None and z[k - j] is not None:
                rest = _plus(o, rest, o.matmul(ss[0][j], z[k - j]))
        z[k] = None if rest is None else o.neg(o.matmul(out, rest))
    return z


def _solve(o, ss, out, a, b):
    """A X = B: X_k = solve(A_0, B_k - sum_{j=1..k} A_j X_{k-j}); a vector b as a column."""
    vector = len(shape_of(b)) == 1
    col = (lambda c: o.reshape(c, shape_of(c) + (1,))) if vector else (lambda c: c)
    x = [col(out)] + [None] * _order(ss)
    for k in range(1, len(x)):
        rest = None
        for j in range(1, k + 1):
            if ss[0][j] is not None and x[k - j] is not None:
                rest = _plus(o, rest, o.matmul(ss[0][j], x[k - j]))
        bk = None if ss[1][k] is None else col(ss[1][k])
        rhs = _minus(o, bk, rest)
        x[k] = None if rhs is None else o.solve(a, rhs)
    if vector:
        return [out] + [None if c is None else o.reshape(c, shape_of(out)) for c in x[1:]]
    return [out] + x[1:]


def _slogdet_series(o: Any, s: Series, a: Any, l0: Any) -> Series:
    """log|det A|: lg' = tr(A^-1 A'), with the series of A^-1 from ``_inv``."""
    w = _inv(o, [s], o.inv(a), a)
    lg = _new(l0, len(s) - 1)
    for k in range(1, len(lg)):
        acc = None
        for j in range(1, k + 1):
            if s[j] is not None and w[k - j] is not None:
                t = o.sum(o.mul(swap_last(o, w[k - j]), s[j]), axis=(-2, -1))
                acc = _plus(o, acc, t if j == 1 else o.mul(t, float(j)))
        lg[k] = acc if acc is None or k == 1 else o.div(acc, float(k))
    return lg


def _slogdet(o, ss, out, a):
    return _slogdet_series(o, ss[0], a, out)


def _det(o, ss, out, a):
    """det A = sign exp(log|det A|): z' = z l'."""
    logs = _slogdet_series(o, ss[0], a, None)
    z = _new(out, _order(ss))
    for k in range(1, len(z)):
        z[k] = _ode(o, logs, z, k)
    return z


def _cholesky(o, ss, out, a):
    """L L^T = A: L_k is cholesky's jvp at A_k - sum_{j=1..k-1} L_j L_{k-j}^T."""
    z = _new(out, _order(ss))
    for k in range(1, len(z)):
        rest = None
        for j in range(1, k):
            if z[j] is not None and z[k - j] is not None:
                rest = _plus(o, rest, o.matmul(z[j], swap_last(o, z[k - j])))
        rhs = _minus(o, ss[0][k], rest)
        z[k] = None if rhs is None else REGISTRY["cholesky"].jvp(o, [rhs], out, a)
    return z

# ---------------------------------------------------------------- the table


RULES: dict[str, Rule] = {
    **{name: _linear(name) for name in (
        "add", "sub", "neg", "sum", "mean", "expand", "reshape", "transpose", "getitem",
        "scatter_add", "concatenate", "stack", "cast", "where", "relu", "abs", "sign",
        "maximum", "minimum", "max", "min")},
    "mul": _bilinear("mul"), "matmul": _bilinear("matmul"),
    "div": _div, "pow": _pow, "exp": _exp, "log": _log, "sqrt": _sqrt, "sin": _sin,
    "cos": _cos, "tanh": _tanh, "sigmoid": _sigmoid,
    "logsumexp": _logsumexp, "softmax": _softmax, "log_softmax": _log_softmax, "norm": _norm,
    "inv": _inv, "solve": _solve, "det": _det, "slogdet": _slogdet, "cholesky": _cholesky,
}
