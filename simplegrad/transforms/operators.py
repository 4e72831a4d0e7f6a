"""Differential operators: ``laplacian``, the sum of second derivatives (or a weighted sum
sum_ij W_ij d2f/dx_i dx_j). (The divergence, the trace of a Jacobian, is estimators.py's.)

The exact Laplacian is computed by collapsed Taylor mode (the forward Laplacian): one forward
walk from x to f(x) in which every entry carries its value, its first-order tangents along the
d directions (a batch, as ``batched_jvp`` carries them) and ONE second-order coefficient, the
sum over the directions of its second-order Taylor coefficients. The sum can be carried
instead of the d coefficients because an entry's second-order coefficient is linear in its
inputs' second-order coefficients plus a quadratic form of their first-order ones,
    c2 = f'(x) x2 + 1/2 f''(x)[x1, x1],
so the sum over directions is f'(x) (sum x2) + 1/2 sum_k f''(x)[x1_k, x1_k]: each primitive's
Taylor rule is run once on the summed coefficient (unbatched) and once on the batched
first-order tangents, whose second-order results are summed at once. Every coefficient is
computed by calling primitives on the Ops, so the Laplacian is recorded and differentiates
again (a PINN's loss in the network's weights). Hutchinson's estimator runs the same walk
along random Rademacher directions.

Under vmap every point moves along the same directions, so the walk does the per-point work
only where it must (``_plan`` reads the program once before it): the directions stay one
broadcast copy until they meet a value that differs between points (the first layer's
product is taken once, and past a constant one only m rows with the same sum of outer
products travel, m its width); a tangent through elementwise primitives is carried as a scale
times its batch, whose sum of squares is taken once; and a first-order tangent no consumer
reads (the output's, the last layer's) is not computed. All of it is exact.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from ..engine.batching import (
    Batched,
    innermost,
    levels_of,
    new_level,
    stacked,
    union,
    unstack,
    wrap,
)
from ..engine.forward import forward_sweep
from ..engine.ops import Ops
from ..engine.tape import ancestors
from ..engine.variable import Entry, Variable, value_of
from ..errors import ArgumentError, NotDifferentiableError, ShapeError
from ..primitives.core import JOINT, dtype_of, shape_of
from .arguments import (
    check_callable,
    context,
    disconnected,
    everything,
    output,
    own,
    paused,
    primals,
    result,
)
from .jacobians import hessian

Method = Literal["taylor", "hessian", "hutchinson"]


def laplacian(f: Callable, method: Method = "taylor", weights: Any = None,
              samples: int | None = None, rng: np.random.Generator | None = None) -> Callable:
    """The function computing the Laplacian of ``f`` in its first argument (of each entry of
    its output): sum_i d2f/dx_i2, or with ``weights=W`` (symmetric PSD, x.size x x.size)
    sum_ij W_ij d2f/dx_i dx_j.

    ``taylor`` (exact) is one collapsed Taylor pass, ``hessian`` the trace of ``sg.hessian``,
    ``hutchinson`` an unbiased estimate from ``samples`` Rademacher directions drawn from
    ``rng`` (a numpy Generator).
    """
    check_callable("laplacian", f)
    method = _check_method("laplacian", method, ("taylor", "hessian", "hutchinson"))
    samples = _check_samples("laplacian", method, samples)

    @functools.wraps(f)
    def laplacian_f(*args: Any, **kwargs: Any) -> Any:
        if not args:
            raise ArgumentError("laplacian: call the function with the point x")
        if method == "hessian":
            return _by_hessian(f, args, kwargs, weights)
        ops, nested = context("laplacian", everything(args, kwargs))
        if nested is None:
            return paused(ops, laplacian(f, method, weights, samples, rng), args, kwargs)
        with own(ops, nested):
            call, trees = primals(ops, args, (0,))
            x = _one_leaf("laplacian", trees)
            y = output("laplacian", ops, f(*call, **kwargs))
            disconnected("laplacian", f, None, [y])
            dirs = _directions("laplacian", x, method, weights, samples, rng)
            lap = collapsed(ops, y, x, dirs)
            if method == "hutchinson":
                lap = ops.mul(lap, 1.0 / samples)
            return result(nested, lap)
    return laplacian_f


# ---------------------------------------------------------------- collapsed Taylor sweep


def collapsed(ops: Ops, y: Variable, x: Variable, dirs: np.ndarray) -> Variable:
    """sum_k D2_k: the second derivatives of y along the directions ``dirs`` (K,) + x.shape,
    summed, from one collapsed Taylor walk (recorded on ``ops``). Values batched by vmap are
    walked on their stacks, every example along the same directions."""
    if type(y) is Batched or type(x) is Batched:
        levels = levels_of(x)
        full = union(levels, levels_of(y))
        k = dirs.shape[0]
        per = tuple(x.shape)
        seed = np.broadcast_to(dirs.reshape((k,) + (1,) * len(levels) + per),
                               (k,) + tuple(n for _, n in levels) + per)
        out = collapsed(ops, stacked(ops, y, full, "the output"), innermost(x), seed)
        return unstack(out, full)
    return ops.mul(_second(ops, y, x, dirs), 2.0)


def _second(ops: Ops, y: Variable, x: Variable, dirs: np.ndarray) -> Variable:
    """The summed second-order Taylor coefficient of y (recorded), x moving along each of the
    directions ``dirs`` with no second-order coefficient of its own."""
    level = new_level()
    k = dirs.shape[0]
    # (a broadcast seed stays a view: _shared reads the directions from it once)
    seed = wrap(ops.leaf(dirs if dirs.dtype == x.dtype else dirs.astype(x.dtype), None,
                         False), level)

    def total(c: Any) -> Any:
        """The sum over the directions of a batched coefficient."""
        if type(c) is Batched and c.level == level:
            return ops.sum(c.inner, axis=0)
        return ops.mul(c, float(k))     # the same for every direction

    needed, products, squeeze, gram = _plan(ops, y, x)
    seen: dict[int, tuple] = {}     # id of a batched tangent -> (it, its sum of squares)

    def squares(t: Batched) -> Any:
        """sum_k t_k**2 of a tangent batched at this walk's level, once per tangent."""
        if type(t) is _Squares:
            return t.sq
        got = seen.get(id(t))
        if got is None:
            c = _shared(t, level)
            if c is not None:       # the same at every point: summed once, then broadcast
                sq = ops.expand(ops.leaf(np.einsum("k...,k...->...", c, c), None, False),
                                tuple(t.shape))
            else:
                sq = _squares(ops, t.inner)
            got = seen[id(t)] = (t, sq)
        return got[1]

    def step(out: Entry, ts: list) -> tuple | None:
        if not out.prim.differentiable:
            return None
        rule = out.prim.taylor
        if rule is None:
            raise NotDifferentiableError(
                f"laplacian: primitive {out.prim.name!r} (entry {out.name}) has no Taylor "
                "rule; use method='hessian' for this function")
        xs = out.inputs
        attrs = out.attrs or {}
        t1 = [None if t is None else t[0] for t in ts]
        s2 = [None if t is None else t[1] for t in ts]
        moving = [i for i, t in enumerate(ts) if t is not None]
        lazy = out.prim.elementwise and len(moving) == 1 and t1[moving[0]] is not None
        keep = out in needed
        if out.prim.alias and moving == [0] and type(t1[0]) in (_Scaled, _Squares):
            # a reshape moves every direction's values alike: the scale and its batch (or the
            # sums of squares) are reshaped instead of their product
            y2 = None if s2[0] is None else ops.reshape(s2[0], out.shape)
            if not keep:
                return None if y2 is None else (None, y2)
            t = t1[0]
            if type(t) is _Squares:
                return (_Squares(ops.reshape(t.sq, out.shape)), y2)
            return (_Scaled(ops.reshape(t.scale, out.shape), ops.reshape(t.base, out.shape)), y2)
        if out in gram and type(t1[0]) is _Scaled:
            sq = _gram_squares(ops, t1[0], xs[1], out, level)
            if sq is not None:      # only the sums of squares of y's tangents are read
                y2 = None
                if s2[0] is not None:
                    res = rule(ops, [[xi, None, s] for xi, s in zip(xs, s2)], out, *xs, **attrs)
                    y2 = _fit(ops, res[2], out)
                return (_Squares(sq), y2)
        if not lazy:
            t1 = [_full(ops, t) for t in t1]
        if out in products and s2[0] is None:
            c = _shared(t1[0], level)
            if c is not None:       # the directions, the same at every point, times y
                r = _fewer(c, xs[1]) if out is squeeze else None
                if r is not None:   # the products themselves, fewer of them
                    y1 = ops.leaf(r.reshape((r.shape[0],) + (1,) * (len(out.shape) - 1) +
                                            r.shape[1:]), None, False)
                else:
                    y1 = ops.matmul(ops.leaf(c, None, False), xs[1])
                return (wrap(ops.expand(y1, (shape_of(y1)[0],) + out.shape), level), None)
        if lazy:
            return _elementwise(ops, rule, out, xs, attrs, moving[0], t1[moving[0]],
                                s2[moving[0]], level, k, keep, squares)
        y1 = y2 = None
        if any(t is not None for t in t1) and (keep or not _linear(out, moving)):
            res = rule(ops, [[xi, t, None] for xi, t in zip(xs, t1)], out, *xs, **attrs)
            y1 = _fit(ops, res[1], out) if keep else None
            if res[2] is not None:
                y2 = total(_fit(ops, res[2], out))
        if any(s is not None for s in s2):
            res = rule(ops, [[xi, None, s] for xi, s in zip(xs, s2)], out, *xs, **attrs)
            if res[2] is not None:
                lin = _fit(ops, res[2], out)
                y2 = lin if y2 is None else ops.add(y2, lin)
        if y1 is None and y2 is None:
            return None
        return (y1, y2)

    got = forward_sweep(ops.tape, y, (x,), {x.node: (seed, None)}, step,
                        what="collapsed Taylor coefficient").get(y.node)
    s = None if got is None else got[1]
    if s is None:
        return ops.var(np.zeros(y.shape, dtype=y.dtype), requires_grad=False)
    return s


def _elementwise(ops: Ops, rule: Any, out: Entry, xs: list, attrs: dict, i: int, t1: Any,
                 s2: Any, level: int, k: int, keep: bool, squares: Callable) -> tuple | None:
    """An elementwise primitive moving in one input: its first and half second derivatives from
    one unbatched Taylor rule call (along ones), then y1 = f' x1 and
    y2 = f' s2 + f''/2 sum_k x1_k^2, where the sum of squares is the only batched work. A
    batched x1 of y's shape is kept as f' times it (``_Scaled``, made when a consumer reads it):
    its sum of squares is then f'^2 times that of the batch, which a chain of elementwise
    primitives computes once."""
    x = xs[i]
    ones = np.ones(x.shape, dtype=out.dtype)
    res = rule(ops, [[xj, ones, None] if j == i else [xj, None, None]
                     for j, xj in enumerate(xs)], out, *xs, **attrs)
    d1, c2 = res[1], res[2]
    if d1 is None:
        return None
    scaled = type(t1) is _Scaled
    base = t1.base if scaled else t1
    y1 = None
    if keep:
        if type(base) is _Squares or type(base) is Batched and base.level == level and \
                tuple(base.shape) == out.shape and base.dtype == out.dtype:
            d = _fit(ops, d1, out)
            y1 = _Scaled(ops.mul(d, t1.scale) if scaled else d, base)
        else:
            y1 = _fit(ops, ops.mul(d1, _full(ops, t1)), out)
    y2 = None if s2 is None else ops.mul(d1, s2)
    if c2 is not None:
        if type(base) is _Squares or type(base) is Batched and base.level == level:
            sq = squares(base)
            if scaled:
                sq = ops.mul(ops.mul(t1.scale, t1.scale), sq)
        else:
            sq = ops.mul(ops.mul(t1, t1), float(k))      # the same for every direction
        q = ops.mul(c2, sq)
        y2 = q if y2 is None else ops.add(y2, q)
    return (y1, None if y2 is None else _fit(ops, y2, out))


class _Scaled:
    """A batched first-order tangent held as ``scale * base`` (scale unbatched, of the entry's
    shape; base batched): the product is taken once, when a consumer other than an elementwise
    primitive reads it."""

    __slots__ = ("scale", "base", "full")

    def __init__(self, scale: Any, base: Batched):
        self.scale, self.base, self.full = scale, base, None


class _Squares:
    """A batched first-order tangent of which only the sum over the directions of its squares
    is read (every consumer elementwise, ``_plan``'s ``gram`` entries): that sum alone."""

    __slots__ = ("sq",)

    def __init__(self, sq: Any):
        self.sq = sq


def _gram_squares(ops: Ops, t: _Scaled, w: Any, out: Entry, level: int) -> Any:
    """sum_k (t_k @ w)**2 for t = scale * c (c: directions the same at every point, w constant
    (n, m)) without the products: with G = sum_k c_k c_k^T, it is sum_ii' d_i d_i' G_ii' w_ij
    w_i'j, one matrix product of the outer products d d^T (P, n n) with the constant
    T[(i, i'), j] = G_ii' w_ij w_i'j. None where t or w is not of that form."""
    c = _shared(t.base, level)
    if c is None or type(w) is Entry and w.requires_grad or len(shape_of(w)) != 2 or \
            any(n != 1 for n in c.shape[1:-1]):
        return None
    wv = np.asarray(value_of(w))
    n, m = wv.shape
    if c.shape[-1] != n or tuple(t.scale.shape) != tuple(t.base.shape):
        return None
    cm = c.reshape(c.shape[0], n)
    g = cm.T @ cm
    table = (g[:, :, None] * wv[:, None, :] * wv[None, :, :]).reshape(n * n, m)
    lead = tuple(t.scale.shape[:-1])
    p = int(np.prod(lead, dtype=np.int64))
    d = ops.reshape(t.scale, (p, n))
    outer = ops.reshape(ops.mul(ops.reshape(d, (p, n, 1)), ops.reshape(d, (p, 1, n))),
                        (p, n * n))
    sq = ops.matmul(outer, ops.leaf(table.astype(out.dtype, copy=False), None, False))
    return ops.reshape(sq, out.shape)


def _full(ops: Ops, t: Any) -> Any:
    """The tangent itself (a ``_Scaled``'s product, taken once)."""
    if type(t) is not _Scaled:
        return t
    if t.full is None:
        t.full = ops.mul(t.scale, t.base)
    return t.full


def _plan(ops: Ops, y: Variable, x: Variable) -> tuple[set, set, Entry | None, set]:
    """What the walk from x to y needs: the entries whose first-order tangents are read (by a
    consumer nonlinear in them, or needed itself: y's are not), the products of a moving value
    with a matrix, the one of those with a constant matrix that every tangent passes through
    (x viewed into it and into nothing else), where the directions may be replaced by fewer
    with the same sum of outer products, and the products whose tangents are read only through
    their sums of squares (``gram``: every consumer downstream elementwise, or a reshape)."""
    xn = x.node
    start = max(xn.position if xn.prim is None else xn.position + 1, ops.tape.base)
    path = ancestors(y, start)
    moving, users, products = {xn}, {}, set()
    for e in path:
        ins = [i for i, a in enumerate(e.inputs) if type(a) is Entry and a in moving]
        if ins:
            moving.add(e)
            for i in ins:
                users.setdefault(e.inputs[i], []).append((e, i))
            if e.prim.maps_rows and ins == [0] and len(shape_of(e.inputs[1])) == 2:
                products.add(e)     # a product with a matrix, mapping over leading axes
    needed: set = set()
    for e in reversed(path):
        if e not in moving:
            continue
        ins = [i for i, a in enumerate(e.inputs) if type(a) is Entry and a in moving]
        if e in needed or not _linear(e, ins):
            needed.update(e.inputs[i] for i in ins)
    squares: set = set()        # tangents read only through their sums of squares
    for e in reversed(path):
        if e not in needed:
            continue
        if all(c in squares if c.prim.alias else
               c.prim.elementwise and c.shape == e.shape and c.dtype == e.dtype and
               sum(type(a) is Entry and a in moving for a in c.inputs) == 1 and
               (c not in needed or c in squares) for c, _ in users.get(e, ())):
            squares.add(e)
    gram = squares & products
    squeeze, at = None, xn
    while len(users.get(at, ())) == 1:
        e, i = users[at][0]
        if e.prim.alias and _linear(e, [i]):       # a view of it (a reshape)
            at = e
            continue
        w = e.inputs[1]
        if e in products and not (type(w) is Entry and w.requires_grad):
            squeeze = e
        break
    return needed, products, squeeze, gram


def _linear(e: Entry, ins: list) -> bool:
    """Whether entry e is linear in its inputs at positions ``ins`` together (its second-order
    coefficient then reads no first-order tangent)."""
    lin = e.prim.linear.at(len(e.inputs), e.attrs) if e.prim.linear is not None else None
    if lin is None:
        return False
    kind, positions = lin
    return set(ins) <= positions and (kind == JOINT or len(ins) == 1)


def _fewer(c: np.ndarray, w: Any) -> np.ndarray | None:
    """The products c_k w of K directions c (K, 1, ..., n), the same at every point, with a
    constant w (n, m), replaced by m < K rows of the same sum of outer products: only
    sum_k (c_k w)(c_k w)^T reaches a summed second-order coefficient, and the R of a QR of the
    (K, m) products has it (R^T R). None when K <= m (nothing to gain)."""
    wv = np.asarray(value_of(w))
    k, n, m = c.shape[0], c.shape[-1], wv.shape[1]
    if k <= m or any(a != 1 for a in c.shape[1:-1]) or wv.shape[0] != n:
        return None
    return np.linalg.qr(c.reshape(k, n) @ wv, mode="r")


def _squares(ops: Ops, t: Any) -> Any:
    """sum_k t[k]**2 over the leading axis, in one pass (an einsum: no stack of squares)."""
    letters = "abcdefghijklmnopqrstuvwxyz"[:len(t.shape) - 1]
    return ops.einsum(f"z{letters},z{letters}->{letters}", t, t)


def _shared(t: Any, level: int) -> np.ndarray | None:
    """The constant batched tangent ``t``'s values with its zero-stride (broadcast) axes cut to
    length 1, when it has any: the directions of the seed before they meet a varying value, the
    same at every point. None when t is recorded (requires_grad) or has no broadcast axis."""
    if type(t) is not Batched or t.level != level or t.inner.requires_grad:
        return None
    v = t.inner.raw
    if type(v) is not np.ndarray or not any(s == 0 and n > 1 for s, n in
                                             zip(v.strides[1:], v.shape[1:])):
        return None
    return v[(slice(None),) + tuple(slice(0, 1) if s == 0 else slice(None)
                                    for s in v.strides[1:])]


def _fit(ops: Ops, c: Any, out: Entry) -> Any:
    """A rule's coefficient with its entry's shape and dtype (per direction when batched)."""
    if c is None:
        return None
    if shape_of(c) != out.shape:
        c = ops.expand(c, out.shape)
    if dtype_of(c) != out.dtype:
        c = ops.cast(c, out.dtype)
    return c

# ---------------------------------------------------------------- helpers


def _by_hessian(f: Callable, args: tuple, kwargs: dict, weights: Any) -> Any:
    """The (weighted) trace of ``sg.hessian`` of f in its first argument, per output entry."""
    h = hessian(f)(*args, **kwargs)
    xshape, hshape = (tuple(a.shape) if isinstance(a, Variable) else np.shape(a)
                      for a in (args[0], h))
    n = int(np.prod(xshape))
    h = np.reshape(h, hshape[:len(hshape) - 2 * len(xshape)] + (n, n))
    w = np.eye(n) if weights is None else _weights("laplacian", weights, n)
    return np.sum(h * w, axis=(-2, -1))


def _one_leaf(fname: str, trees: list) -> Variable:
    """The single array argument a differential operator differentiates in."""
    leaves = trees[0][1]
    if len(leaves) != 1:
        raise ArgumentError(f"{fname}: x must be one array, not a pytree of {len(leaves)} "
                            "leaves (ravel it with sg.ravel_pytree)")
    return leaves[0]


def _check_method(fname: str, method: Any, allowed: tuple) -> str:
    if method not in allowed:
        names = ", ".join(repr(m) for m in allowed)
        raise ArgumentError(f"{fname}: method must be one of {names}, not {method!r}")
    return method


def _check_samples(fname: str, method: str, samples: Any) -> int | None:
    if method != "hutchinson":
        return samples
    if samples is None or isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) \
            or samples < 1:
        raise ArgumentError(f"{fname}: method='hutchinson' needs samples=, a positive number "
                            f"of random directions, not {samples!r}")
    return int(samples)


def _weights(fname: str, weights: Any, n: int) -> np.ndarray:
    w = np.asarray(getattr(weights, "raw", weights), dtype=float)
    if w.shape != (n, n):
        raise ShapeError(f"{fname}: weights has shape {w.shape} but x has {n} entries; pass "
                         f"an {n} x {n} matrix")
    if not np.allclose(w, w.T, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(w).max())):
        raise ArgumentError(f"{fname}: weights must be symmetric")
    return w


def _directions(fname: str, x: Variable, method: str, weights: Any, samples: int | None,
                rng: np.random.Generator | None) -> np.ndarray:
    """The directions of the walk, (K,) + x.shape: the basis, or columns of a square root of
    the weights (W = sum_k u_k u_k^T), or Rademacher samples (times that root)."""
    n, shape = x.size, tuple(x.shape)
    dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.float64
    root = None
    if weights is not None:
        w = _weights(fname, weights, n)
        lam, vecs = np.linalg.eigh(w)
        if lam.min() < -1e-10 * max(1.0, abs(lam).max()):
            raise ArgumentError(f"{fname}: weights must be positive semidefinite (smallest "
                                f"eigenvalue {lam.min():.3g})")
        keep = lam > 1e-14 * max(1.0, abs(lam).max())
        root = vecs[:, keep] * np.sqrt(lam[keep])       # W = root @ root.T
    if method == "hutchinson":
        gen = np.random.default_rng() if rng is None else rng
        z = gen.choice(np.array([-1.0, 1.0]), size=(samples, n if root is None else
                                                    root.shape[1]))
        dirs = z if root is None else z @ root.T
    else:
        dirs = np.eye(n) if root is None else root.T
    return np.ascontiguousarray(dirs.reshape((dirs.shape[0],) + shape), dtype=dtype)
