"""Sparse Jacobians and Hessians: the pattern read off the recorded program, a colouring of it,
and one batched product per colour, decompressed into a ``scipy.sparse.csr_array``.

**Patterns.** ``jacobian_sparsity(f)(x)`` records ``f`` at ``x`` (its first argument; the others
are constants), takes the program from ``x`` to the output and propagates, entry by entry, the
boolean matrix of which input entries each of its entries depends on: an entry's is the union
over its inputs of the local pattern its primitive's rule gives (primitives/sparsity_rules.py)
times that input's. A comparison, a mask, an index carries no dependence (its derivative is
zero), and ``where`` unions both branches, so the pattern holds at every input, not only at
``x``. ``hessian_sparsity`` propagates the same through the recorded gradient program: the
Hessian is the gradient's Jacobian. Inputs and outputs are flattened in C order.

**Colouring.** ``color(pattern, method)``: one colour per column (``"column"``, ``"star"``,
``"acyclic"``) or per row (``"row"``), an int array from 0, such that the columns of a colour
can share one product. Column and row colourings are greedy distance-2 colourings (two columns
sharing a row differ); star and acyclic colourings take a symmetric pattern: star colouring
(every path on four vertices has three colours) recovers each entry directly, acyclic
colouring (every two-coloured subgraph a forest) needs fewer colours and recovers by
substitution along those trees. Each is greedy over three orders (natural, largest degree first,
smallest degree last) and keeps the fewest colours.

**Products.** ``sparse_jacobian(f, mode)`` pushes one seed per colour through one forward
sweep with the seeds batched (mode ``"fwd"``: J S, column colours; the primal runs once) or
through ``sg.vmap`` of ``sg.vjp`` (``"rev"``: W^T J, row colours; ``"auto"`` takes fewer
products), ``sparse_hessian(f, method)`` through the same batched forward sweep over the
recorded gradient (forward over reverse: H S); the pattern, colouring, seeds and
decompression are computed once per input shape and dtype (and values of the other
arguments), and the batched product is an ``sg.jit`` of its own, so a later call replays only
the compressed products and one gather. A function that makes Python decisions on values
(``if x[0] > 0:``) is planned again where a decision goes the other way (the pattern's program
keeps them as guards); where vmap refuses such decisions (``"rev"``) it takes its products one
after another.
``spy(pattern, colors)`` draws a pattern (text, or ``format="svg"``).
"""

from __future__ import annotations

import functools
import html
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Literal

import numpy as np

from ..engine.batched import batched_jvp
from ..engine.ops import Ops
from ..engine.variable import Variable
from ..errors import ArgumentError, ReplayError, ShapeError
from ..program.body import scipy_sparse as _scipy
from ..program.body import walk_dependence
from ..program.core import extract
from .arguments import (
    check_callable,
    context,
    flat,
    output,
    own,
    primals,
    results,
    run_paused,
    running,
    scalar,
)
from .forward import jvp
from .jacobians import hvp
from .jit import jit
from .reverse import vjp
from .vmap import vmap


def _point(fname: str, x: Any) -> np.ndarray:
    if isinstance(x, Variable):
        raise ArgumentError(f"{fname}: x is a Variable; call it on arrays (it returns a scipy "
                            "array, and compiles its own products)")
    x = np.asarray(x)
    return x if x.dtype.kind == "f" else x.astype(np.float64)


# ---------------------------------------------------------------- patterns


def _program(fname: str, f: Callable, x: np.ndarray, args: tuple, kwargs: dict,
             order: int) -> Any:
    """The program from x to f's output (order 1) or to its gradient (order 2), or None when
    the output is not computed from x."""
    ops = Ops(keep_values=True)
    try:
        xv = ops.var(x, name="x")
        with running(ops):
            y = f(xv, *args, **kwargs)
            if not (isinstance(y, Variable) and y.rec is ops.recorder):
                return None, np.shape(getattr(y, "raw", y))
            if order == 2:
                if y.size != 1:
                    raise ShapeError(f"{fname}: f returns shape {y.shape}; the "
                                     "Hessian needs a scalar")
                y = ops.grad(y.reshape(()) if y.ndim else y, xv)
        return extract([xv], [y], ops), y.shape
    finally:
        ops.release()


def propagate(prog: Any, x: np.ndarray) -> Any:
    """The dependence pattern (outputs x inputs, a csr_array) of a program's one output on its
    one input, run at ``x``.

    Beside each entry's pattern (None: no derivative depends on x) goes whether its value
    varies with x at all: a mask does, a constant and what is computed from constants alone
    (a seed spread to a shape) do not, and a product leaves out what their zeros multiply."""
    sp = _scipy()
    n = x.size
    values: list = [x, *(c.value for c in prog.constants)]
    patterns: list = [sp.identity(n, dtype=np.float32, format="csr"),
                      *[None] * len(prog.constants)]
    varies: list = [True, *[False] * len(prog.constants)]
    at = walk_dependence(prog, values, patterns, varies)
    out = patterns[at(prog.outputs[0])]
    size = int(np.size(values[at(prog.outputs[0])]))
    if out is None:
        return sp.csr_array((size, n), dtype=bool)
    return sp.csr_array(out, dtype=bool)


def _pattern(fname: str, f: Callable, x: np.ndarray, args: tuple, kwargs: dict,
             order: int) -> tuple[Any, Any, tuple]:
    """The pattern of f's Jacobian (order 1) or Hessian (order 2, symmetric) at x, the
    program it was read from (None when the output is a constant) and f's output shape."""
    sp = _scipy()
    prog, shape = _program(fname, f, x, args, kwargs, order)
    if prog is None:
        size = x.size if order == 2 else int(np.prod(shape))
        return sp.csr_array((size, x.size), dtype=bool), None, shape
    p = propagate(prog, x)
    return (sp.csr_array(p + p.T, dtype=bool) if order == 2 else p), prog, shape


def jacobian_sparsity(f: Callable) -> Callable:
    """The function giving the Jacobian's pattern of ``f`` in its first argument at ``x``, a
    boolean ``scipy.sparse.csr_array`` (outputs x inputs, C order) that holds at every input."""
    check_callable("jacobian_sparsity", f)

    @functools.wraps(f)
    def pattern(x: Any, *args: Any, **kwargs: Any) -> Any:
        return _pattern("jacobian_sparsity", f, _point("jacobian_sparsity", x), args, kwargs,
                        1)[0]
    return pattern


def hessian_sparsity(f: Callable) -> Callable:
    """The function giving the Hessian's pattern of scalar ``f`` in its first argument at
    ``x``, a symmetric boolean ``scipy.sparse.csr_array`` that holds at every input."""
    check_callable("hessian_sparsity", f)

    @functools.wraps(f)
    def pattern(x: Any, *args: Any, **kwargs: Any) -> Any:
        return _pattern("hessian_sparsity", f, _point("hessian_sparsity", x), args, kwargs,
                        2)[0]
    return pattern


# ---------------------------------------------------------------- colouring


Method = Literal["column", "row", "star", "acyclic"]


def _neighbours(pattern: Any, method: str) -> tuple[list[tuple[int, ...]], int]:
    """Per vertex, its neighbours in the graph the method colours (itself excluded), and a
    lower bound on the colours any colouring takes (the most entries in one row: a clique)."""
    sp = _scipy()
    p = sp.csr_array(pattern, dtype=np.float32)
    if method == "row":
        p = sp.csr_array(p.T)
    if method in ("column", "row"):
        g = sp.csr_array(p.T @ p)       # columns sharing a row
        bound = int(np.diff(p.indptr).max(initial=0))
    else:
        if p.shape[0] != p.shape[1]:
            raise ShapeError(f"color: {method} colouring takes a square (Hessian) pattern, "
                             f"got shape {p.shape}")
        g = sp.csr_array(p + p.T)
        bound = 0
    g.setdiag(0)
    g.eliminate_zeros()
    if method in ("star", "acyclic"):
        bound = 2 if g.nnz else int(p.shape[0] > 0)
    ends, flat = g.indptr.tolist(), g.indices.tolist()
    # tuples of ints: the cycle collector stops tracking them, so the lists of a 10^5-vertex
    # graph cost it nothing (lists of lists it would scan again at every collection)
    return [tuple(flat[a:b]) for a, b in zip(ends, ends[1:])], bound


def _orders(adj: list[list[int]]) -> Iterator[list[int]]:
    """Natural, largest-first and smallest-last vertex orders (the last: take a vertex of
    least degree among those left, and colour in the reverse of taking), each made when
    asked for."""
    n = len(adj)
    yield list(range(n))
    left = [len(a) for a in adj]
    yield sorted(range(n), key=lambda v: -left[v])
    buckets: list[list[int]] = [[] for _ in range(max(left, default=0) + 1)]
    for v, d in enumerate(left):
        buckets[d].append(v)
    gone, taken, low = [False] * n, [], 0
    while len(taken) < n:
        bucket = buckets[low]
        if not bucket:
            low += 1
            continue
        v = bucket.pop()
        if gone[v] or left[v] != low:   # moved to a lower bucket since
            continue
        gone[v] = True
        taken.append(v)
        for w in adj[v]:
            if not gone[w]:
                left[w] -= 1
                buckets[left[w]].append(w)
        low = max(low - 1, 0)
    yield taken[::-1]


def _first_free(banned: set[int]) -> int:
    c = 0
    while c in banned:
        c += 1
    return c


def _distance1(adj: list[list[int]], order: list[int]) -> list[int]:
    """A greedy colouring: each vertex in turn takes the least colour none of its neighbours
    has (marked with the vertex's number, so no set is built per vertex)."""
    n = len(adj)
    color, mark = [-1] * n, [-1] * (n + 2)     # mark[-1]: where the uncoloured ones mark
    for v in order:
        for w in adj[v]:
            mark[color[w]] = v
        c = 0
        while mark[c] == v:
            c += 1
        color[v] = c
    return color


def _star(adj: list[list[int]], order: list[int]) -> list[int]:
    """A greedy star colouring: no two neighbours alike, and no path on four vertices in two
    colours (checked for the paths through each vertex as it is coloured)."""
    color = [-1] * len(adj)
    seen: list[dict[int, int]] = [{} for _ in adj]     # per vertex: its neighbours per colour
    for v in order:
        banned: set[int] = set()
        by_color: dict[int, list[int]] = {}
        for w in adj[v]:
            cw = color[w]
            if cw < 0:
                continue
            banned.add(cw)
            by_color.setdefault(cw, []).append(w)
            for x in adj[w]:        # v - w - x - y: x's colour is v's, y's is w's
                cx = color[x]
                if x != v and cx >= 0 and cx not in banned and seen[x].get(cw, 0) > 1:
                    banned.add(cx)  # x has a neighbour of w's colour besides w
        for ws in by_color.values():    # w - v - x - y, w and x alike: y's colour is v's
            if len(ws) > 1:
                for x in ws:
                    banned.update(color[y] for y in adj[x] if y != v)
        banned.discard(-1)
        c = color[v] = _first_free(banned)
        for w in adj[v]:
            seen[w][c] = seen[w].get(c, 0) + 1
    return color


class _Forests:
    """Union-find over each pair of colours: the two-coloured trees of an acyclic colouring."""

    def __init__(self) -> None:
        self.parent: dict[tuple, int] = {}

    def find(self, pair: tuple, v: int) -> int:
        key = (pair, v)
        root = v
        while self.parent.get((pair, root), root) != root:
            root = self.parent[(pair, root)]
        while self.parent.get(key, v) != root:      # path compression
            nxt = self.parent[key]
            self.parent[key] = root
            key = (pair, nxt)
        return root

    def join(self, pair: tuple, a: int, b: int) -> None:
        ra, rb = self.find(pair, a), self.find(pair, b)
        if ra != rb:
            self.parent[(pair, ra)] = rb


def _acyclic(adj: list[list[int]], order: list[int]) -> list[int]:
    """A greedy acyclic colouring: no two neighbours alike, and a colour refused when v would
    close a cycle in two colours (two of its neighbours of one colour in one tree)."""
    color = [-1] * len(adj)
    forests = _Forests()
    for v in order:
        near = [(w, color[w]) for w in adj[v] if color[w] >= 0]
        banned = {cw for _, cw in near}
        c = _first_free(banned)
        while True:
            pair_roots: dict[tuple, set] = {}
            closes = False
            for w, cw in near:
                pair = (min(c, cw), max(c, cw))
                root = forests.find(pair, w)
                seen = pair_roots.setdefault(pair, set())
                if root in seen:
                    closes = True
                    break
                seen.add(root)
            if not closes:
                break
            banned.add(c)
            c = _first_free(banned)
        color[v] = c
        for w, cw in near:
            forests.join((min(c, cw), max(c, cw)), v, w)
    return color


def color(pattern: Any, method: Method = "column") -> np.ndarray:
    """One colour per column (per row for ``"row"``) of a sparsity pattern, an int array from
    0: columns of one colour share a product (``"star"`` and ``"acyclic"``: of a symmetric
    pattern, recovered directly or by substitution)."""
    if method not in ("column", "row", "star", "acyclic"):
        raise ArgumentError(f"color: method must be 'column', 'row', 'star' or 'acyclic', not "
                            f"{method!r}")
    paint = {"column": _distance1, "row": _distance1, "star": _star, "acyclic": _acyclic}[method]
    best = None
    adj, bound = _neighbours(pattern, method)
    for order in _orders(adj):
        c = np.array(paint(adj, order), dtype=np.intp)
        if best is None or c.max(initial=-1) < best.max(initial=-1):
            best = c
        if best.max(initial=-1) + 1 <= bound:  # no order can do better
            break
    return best


# ---------------------------------------------------------------- compressed products


def _seeds(colors: np.ndarray, n: int, nnz: int) -> np.ndarray:
    """One seed per colour: row c holds ones at the columns of colour c; none for a pattern
    without entries."""
    k = int(colors.max(initial=-1)) + 1 if nnz else 0
    seeds = np.zeros((k, n))
    if k:
        seeds[colors, np.arange(n)] = 1.0
    return seeds


def _static(a: Any) -> Hashable:
    """A hashable stand-in for an argument's value (the cache key of a signature)."""
    if isinstance(a, np.ndarray):
        return ("array", a.shape, a.dtype.str, a.tobytes())
    if isinstance(a, (tuple, list)):
        return (type(a).__name__, *map(_static, a))
    if isinstance(a, dict):
        return ("dict", *((k, _static(v)) for k, v in sorted(a.items())))
    try:
        hash(a)
    except TypeError:
        return ("id", id(a))
    return a


class _Plan:
    """What one signature computes once: the pattern, its colours, the seeds, the compiled
    batched product and where each stored entry comes from in the compressed result; and the
    program the pattern was read from when Python decisions on values recorded it (its guards
    say whether another point takes the same branches)."""

    __slots__ = ("pattern", "colors", "seeds", "one", "product", "batched", "source", "steps",
                 "guarded")

    def __init__(self, pattern: Any, colors: np.ndarray, seeds: np.ndarray, one: Callable,
                 source: np.ndarray | None, steps: tuple | None = None, prog: Any = None,
                 every: Callable | None = None):
        self.pattern, self.colors, self.seeds, self.one = pattern, colors, seeds, one
        # every seed at once: ``every`` (one sweep with the seeds batched), else vmap of one
        self.product, self.batched = jit(every or self._batched), True
        self.guarded = prog if prog is not None and prog.guards else None
        self.source = source        # flat positions into the compressed result (direct)
        self.steps = steps          # acyclic: the substitution order (v, c, w, at_vw, at_wv)

    def _batched(self, x: Any, seeds: Any, *args: Any, **kwargs: Any) -> Any:
        return vmap(lambda s: self.one(x, s, *args, **kwargs))(seeds)

    def _looped(self, x: Any, seeds: Any, *args: Any, **kwargs: Any) -> Any:
        return np.stack([self.one(x, seeds[i], *args, **kwargs) for i in range(len(seeds))])

    def compressed(self, x: np.ndarray, args: tuple, kwargs: dict) -> np.ndarray:
        """The products of every seed at x: batched, or one after another where f makes a
        Python decision that vmap refuses."""
        try:
            return np.asarray(self.product(x, self.seeds, *args, **kwargs))
        except ArgumentError:
            if not self.batched:
                raise
            self.product, self.batched = jit(self._looped), False
            return np.asarray(self.product(x, self.seeds, *args, **kwargs))

    def values(self, compressed: np.ndarray) -> np.ndarray:
        """The stored entries of the pattern from the compressed product."""
        if self.steps is None:
            return compressed.reshape(-1)[self.source]
        v, c, w, at_vw, at_wv, diag, diag_at = self.steps
        left = np.array(compressed.reshape(len(compressed), -1).T, dtype=float)    # n x k
        out = np.zeros(self.pattern.nnz, dtype=float)
        out[diag_at] = left[diag, self.colors[diag]]
        cv = self.colors
        for a, b, d, p, q in zip(v.tolist(), c.tolist(), w.tolist(), at_vw.tolist(),
                                 at_wv.tolist()):
            h = left[a, b]
            left[d, cv[a]] -= h
            out[p] = out[q] = h
        return out

    def matrix(self, compressed: np.ndarray) -> Any:
        p = self.pattern
        return _scipy().csr_array((self.values(compressed), p.indices.copy(), p.indptr.copy()),
                                  shape=p.shape)


def _positions(p: Any) -> tuple[np.ndarray, np.ndarray]:
    """The row and column of each stored entry of csr ``p``, in storage order."""
    rows = np.repeat(np.arange(p.shape[0]), np.diff(p.indptr))
    return rows, p.indices.astype(np.intp)


def _star_source(p: Any, colors: np.ndarray) -> np.ndarray:
    """Direct recovery of a star-coloured symmetric pattern from H S (k x n): H_ij is
    (H S)[c_j, i] when j's colour is alone among row i's entries, else (H S)[c_i, j]."""
    n = p.shape[0]
    rows, cols = _positions(p)
    k = int(colors.max(initial=-1)) + 1
    key = rows * k + colors[cols]
    alone = np.bincount(key, minlength=n * k)[key] == 1
    if not np.all(alone | (np.bincount(cols * k + colors[rows], minlength=n * k)
                           [cols * k + colors[rows]] == 1)):
        raise ArgumentError("sparse_hessian: the colouring is not a star colouring of the "
                            "pattern")
    return np.where(alone, colors[cols] * n + rows, colors[rows] * n + cols)


def _substitution(p: Any, colors: np.ndarray) -> tuple:
    """The order in which an acyclic colouring's entries come out of H S by substitution:
    peel the leaves of each two-coloured tree (each step an entry and its mirror)."""
    rows, cols = _positions(p)
    at = {(int(r), int(c)): i for i, (r, c) in enumerate(zip(rows, cols))}
    near: dict[tuple, set] = {}
    for r, c in zip(rows.tolist(), cols.tolist()):
        if r != c:
            near.setdefault((r, int(colors[c])), set()).add(c)
    queue = [key for key, ws in near.items() if len(ws) == 1]
    steps = []
    while queue:
        v, c = queue.pop()
        ws = near.get((v, c))
        if not ws or len(ws) != 1:
            continue
        w = ws.pop()
        steps.append((v, c, w, at[(v, w)], at[(w, v)]))
        back = near[(w, int(colors[v]))]
        back.discard(v)
        if len(back) == 1:
            queue.append((w, int(colors[v])))
    if any(near.values()):
        raise ArgumentError("sparse_hessian: the colouring is not an acyclic colouring of the "
                            "pattern")
    diag = np.nonzero(rows == cols)[0]
    cols_ = (np.array(steps, dtype=np.intp).reshape(-1, 5).T if steps
             else np.zeros((5, 0), dtype=np.intp))
    return (*cols_, rows[diag], diag)


def _cached(fname: str, f: Callable, make: Callable) -> Callable:
    check_callable(fname, f)
    plans: dict = {}

    @functools.wraps(f)
    def run(x: Any, *args: Any, **kwargs: Any) -> Any:
        x = _point(fname, x)
        key = (x.shape, x.dtype.str, _static(args), _static(kwargs))
        plan = plans.get(key)
        if plan is not None and plan.guarded is not None:
            try:
                plan.guarded(x)
            except ReplayError:     # another branch: another pattern
                plan = None
        if plan is None:
            plan = plans[key] = make(x, args, kwargs)
        if plan.seeds.shape[0] == 0:
            return plan.matrix(np.zeros(0))
        return plan.matrix(plan.compressed(x, args, kwargs))
    run.plans = plans       # type: ignore[attr-defined]
    run.compiles_itself = True  # type: ignore[attr-defined]  (so sg.jit(run) is run)
    return run


def sparse_jacobian(f: Callable, mode: Literal["fwd", "rev", "auto"] = "auto") -> Callable:
    """The function giving the Jacobian of ``f`` in its first argument at ``x`` as a
    ``scipy.sparse.csr_array`` (outputs x inputs, C order), one batched jvp (``"fwd"``) or vjp
    (``"rev"``) per colour; ``"auto"`` takes the mode of fewer colours."""
    if mode not in ("fwd", "rev", "auto"):
        raise ArgumentError(f"sparse_jacobian: mode must be 'fwd', 'rev' or 'auto', not "
                            f"{mode!r}")

    def make(x: np.ndarray, args: tuple, kwargs: dict) -> _Plan:
        pattern, prog, out_shape = _pattern("sparse_jacobian", f, x, args, kwargs, 1)
        m, n = pattern.shape
        by_column = color(pattern, "column") if mode != "rev" else None
        by_row = color(pattern, "row") if mode != "fwd" else None
        forward = by_row is None or (by_column is not None and
                                     by_column.max(initial=-1) <= by_row.max(initial=-1))
        rows, cols = _positions(pattern)
        if forward:
            seeds = _seeds(by_column, n, pattern.nnz).reshape(-1, *x.shape)

            def column(x: Any, s: Any, *args: Any, **kwargs: Any) -> Any:
                return jvp(lambda z: f(z, *args, **kwargs), (x,), (s,))[1]

            def every(x: Any, s: Any, *args: Any, **kwargs: Any) -> Any:
                return _compressed_jacobian(lambda z: f(z, *args, **kwargs), x, s)
            return _Plan(pattern, by_column, seeds, column, by_column[cols] * m + rows,
                         prog=prog, every=every)
        seeds = _seeds(by_row, m, pattern.nnz).reshape(-1, *out_shape)

        def row(x: Any, w: Any, *args: Any, **kwargs: Any) -> Any:
            return vjp(lambda z: f(z, *args, **kwargs), x)[1](w)[0]
        return _Plan(pattern, by_row, seeds, row, by_row[rows] * n + cols, prog=prog)
    return _cached("sparse_jacobian", f, make)


def _compressed_jacobian(f: Callable, x: Any, seeds: Any) -> Any:
    """J(x) times each seed, stacked (K,) + f's output shape: one forward sweep with the
    seeds batched (the primal runs once, not once per seed)."""
    ops, nested = context("sparse_jacobian", (x, seeds))
    if nested is None:
        return run_paused(ops, lambda a, b: _compressed_jacobian(f, a, b), (x, seeds))
    with own(ops, nested):
        call, trees = primals(ops, (x,), (0,))
        (xv,) = flat(trees)
        y = output("sparse_jacobian", ops, f(*call))
        s = seeds if isinstance(seeds, Variable) else ops.var(np.asarray(seeds),
                                                                requires_grad=False)
        return results(nested, [batched_jvp(ops, y, xv, s)])[0]


def _compressed_hessian(f: Callable, x: Any, seeds: Any) -> Any:
    """H(x) times each seed, stacked (K,) + x.shape: forward over reverse, the gradient
    recorded once and every seed pushed through it in one batched-tangent sweep (so the
    primal and the gradient run once, not once per seed)."""
    ops, nested = context("sparse_hessian", (x, seeds))
    if nested is None:
        return run_paused(ops, lambda a, b: _compressed_hessian(f, a, b), (x, seeds))
    with own(ops, nested):
        call, trees = primals(ops, (x,), (0,))
        (xv,) = flat(trees)
        y = scalar("sparse_hessian", output("sparse_hessian", ops, f(*call)))
        g = ops.grad(y.reshape(()) if y.ndim else y, xv, create_graph=True)
        s = seeds if isinstance(seeds, Variable) else ops.var(np.asarray(seeds),
                                                                requires_grad=False)
        return results(nested, [batched_jvp(ops, g, xv, s)])[0]


def sparse_hessian(f: Callable, method: Literal["star", "acyclic"] = "star") -> Callable:
    """The function giving the Hessian of scalar ``f`` in its first argument at ``x`` as a
    ``scipy.sparse.csr_array``, one batched Hessian-vector product per colour of a star
    (direct recovery) or acyclic (recovery by substitution) colouring."""
    if method not in ("star", "acyclic"):
        raise ArgumentError(f"sparse_hessian: method must be 'star' or 'acyclic', not "
                            f"{method!r}")

    def make(x: np.ndarray, args: tuple, kwargs: dict) -> _Plan:
        pattern, prog, _ = _pattern("sparse_hessian", f, x, args, kwargs, 2)
        colors = color(pattern, method)
        seeds = _seeds(colors, x.size, pattern.nnz).reshape(-1, *x.shape)

        def column(x: Any, s: Any, *args: Any, **kwargs: Any) -> Any:
            return hvp(lambda z: f(z, *args, **kwargs), x, s)

        def every(x: Any, s: Any, *args: Any, **kwargs: Any) -> Any:
            return _compressed_hessian(lambda z: f(z, *args, **kwargs), x, s)
        if method == "star":
            return _Plan(pattern, colors, seeds, column, _star_source(pattern, colors),
                         prog=prog, every=every)
        return _Plan(pattern, colors, seeds, column, None, _substitution(pattern, colors), prog,
                     every=every)
    return _cached("sparse_hessian", f, make)


# ---------------------------------------------------------------- pictures

PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac")
SYMBOLS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def spy(pattern: Any, colors: Any = None, format: Literal["text", "svg"] = "text",
        limit: int = 120) -> str:
    """A picture of a sparsity pattern: text (``.`` for a zero, ``#`` or the entry's column
    colour for a nonzero), or an SVG with one square per nonzero; a pattern wider or taller
    than ``limit`` is drawn in blocks, one mark per block holding a nonzero (``#``)."""
    if format not in ("text", "svg"):
        raise ArgumentError(f"spy: format must be 'text' or 'svg', not {format!r}")
    p = _scipy().csr_array(pattern, dtype=bool)
    m, n = p.shape
    if colors is not None:
        colors = np.asarray(colors, dtype=np.intp)
        if colors.shape not in ((n,), (m,)):
            raise ShapeError(f"spy: {colors.shape[0]} colours for a pattern of shape {p.shape}")
    rows, cols = _positions(p)
    by_row = colors is not None and colors.shape == (m,) and m != n
    marks = None if colors is None else colors[rows] if by_row else colors[cols]
    step = -(-max(m, n, 1) // max(limit, 1))
    if step > 1:        # blocks of step x step entries
        m, n = -(-m // step), -(-n // step)
        rows, cols = np.unique(np.stack([rows // step, cols // step]), axis=1)
        marks = None
    if format == "text":
        grid = np.full((m, n), ".", dtype="<U1")
        grid[rows, cols] = "#" if marks is None else \
            np.array(list(SYMBOLS))[marks % len(SYMBOLS)]
        return "\n".join("".join(r) for r in grid)
    size = 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{n * size}" '
             f'height="{m * size}" viewBox="0 0 {n * size} {m * size}">',
             f'<rect width="{n * size}" height="{m * size}" fill="white" stroke="#999"/>']
    for k, (r, c) in enumerate(zip(rows.tolist(), cols.tolist())):
        fill = "#333" if marks is None else PALETTE[int(marks[k]) % len(PALETTE)]
        parts.append(f'<rect x="{c * size}" y="{r * size}" width="{size}" height="{size}" '
                     f'fill="{html.escape(fill)}"/>')
    parts.append("</svg>")
    return "\n".join(parts)
