"""Index-dependency rules: which input entries each output entry of a primitive depends on
(the pattern of its local Jacobian), from its inputs' values, its output's shape and its
attributes, holding at every input (transforms/sparse.py propagates them over a program).
Each registered record carries its rule as ``prim.sparsity`` (set from ``RULES`` by
``attach_rules`` once the package's records exist); ``rule_for(prim)`` reads it, else its
kind says it.

A rule is ``rule(prim, xs, out_shape, attrs) -> [dep or None per input]`` (``Sparsity``): a
``dep`` is a pair ``(rows, cols)`` of int arrays, the flat (C order) output and input positions
of the pairs that may have a nonzero derivative; None: no derivative flows to that input (a
comparison, a mask, an index, ``round``). ``exact`` on a rule says its pattern is the
derivative's own at a generic point (a smooth primitive), not a superset of it (a piecewise
one, or the dense-block rule of the decompositions). The families:

- ``pointwise``: elementwise and broadcasting, each output on its own entry of each input.
- ``folding``: reductions over ``axis``, each output on the entries it folds.
- ``along("all" | "prefix")``: softmax-like (every entry along the axis) and scans (the
  entries up to it); ``transform``: the Fourier transforms (every entry of the line or block).
- ``moving``: data movement (reshape, transpose, getitem, expand, pad, concatenate, the
  scatters, ...): the forward run on entry numbers says where each entry goes; where several
  go to one place (a scatter's repeated index), the vjp run on output numbers says it.
- ``matmul`` and ``einsum``: row times column, and shared subscripts (a product leaves out
  what a constant factor's zeros multiply: ``A @ x`` with a banded constant ``A`` is banded).
- ``blocked``: the decompositions and solves: dense within each matrix, the batch axes
  broadcast (a conservative rule: ``DENSE_BLOCK`` names them).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .core import HELD, REGISTRY, Primitive
from .methods import VALUES
from .shape_rules import axes_of

Sparsity = Callable[[Primitive, Sequence[Any], tuple, dict], list]


class Rule:
    """A sparsity rule and whether its pattern is exact (not only a superset); ``constants``:
    it also takes ``fixed``, per input whether it is a constant of the program, and leaves out
    what a constant's zeros multiply (a product with a constant matrix holding zeros);
    ``reads``: its pattern may change with its inputs' values, not only their shapes (an
    index, a loop's trips), so a loop whose integer input reaches it reads it every trip."""

    __slots__ = ("fn", "exact", "name", "constants", "reads")

    def __init__(self, fn: Sparsity, exact: bool, name: str, constants: bool = False,
                 reads: bool = False):
        self.fn, self.exact, self.name, self.constants = fn, exact, name, constants
        self.reads = reads

    def __call__(self, prim: Primitive, xs: Sequence[Any], out_shape: tuple, attrs: dict,
                 fixed: Sequence[bool] | None = None) -> list:
        if self.constants and fixed is not None:
            return self.fn(prim, xs, out_shape, attrs or {}, fixed)
        return self.fn(prim, xs, out_shape, attrs or {})

    def __repr__(self) -> str:
        return f"<sparsity rule {self.name}>"


def _size(shape: tuple) -> int:
    return math.prod(shape)


def _numbers(shape: tuple) -> np.ndarray:
    return np.arange(_size(shape)).reshape(shape)


def flows(prim: Primitive, i: int, x: Any) -> bool:
    """Whether a derivative can flow to input ``i`` (value ``x``) of ``prim``."""
    if not prim.differentiable or np.asarray(x).dtype.kind not in "fc":
        return False
    return prim.variadic or i < len(prim.vjp) and prim.vjp[i] is not None


def _pairs(rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = np.broadcast_arrays(rows, cols)
    return rows.ravel().astype(np.intp), cols.ravel().astype(np.intp)


# ---------------------------------------------------------------- elementwise, reductions, scans


def _pointwise(prim: Primitive, xs: Sequence[Any], out_shape: tuple, attrs: dict) -> list:
    rows = np.arange(_size(out_shape))
    return [_pairs(rows, np.broadcast_to(_numbers(np.shape(x)), out_shape).ravel())
            if flows(prim, i, x) else None for i, x in enumerate(xs)]


def _product(prim: Primitive, xs: Sequence[Any], out_shape: tuple, attrs: dict,
             fixed: Sequence[bool] = (False, False)) -> list:
    """x * y: pointwise, without the entries a constant factor's zeros multiply."""
    deps = _pointwise(prim, xs, out_shape, attrs)
    for i, j in ((0, 1), (1, 0)):
        if deps[i] is not None and fixed[j]:
            rows, cols = deps[i]
            keep = np.broadcast_to(np.asarray(xs[j]) != 0, out_shape).ravel()[rows]
            deps[i] = rows[keep], cols[keep]
    return deps


def _folding(default: Any = None) -> Sparsity:
    def rule(prim: Primitive, xs: Sequence[Any], out_shape: tuple, attrs: dict) -> list:
        shape = np.shape(xs[0])
        axes = axes_of(attrs.get("axis", default), len(shape))
        kept = tuple(1 if k in axes else n for k, n in enumerate(shape))
        rows = np.broadcast_to(_numbers(kept), shape).ravel()
        return [_pairs(rows, np.arange(_size(shape))) if flows(prim, 0, xs[0]) else None,
                *[None] * (len(xs) - 1)]
    return rule


def _along(kind: str, default: Any = -1) -> Sparsity:
    def rule(prim: Primitive, xs: Sequence[Any], out_shape: tuple, attrs: dict) -> list:
        shape, axis = np.shape(xs[0]), attrs.get("axis", default)
        if axis is None or not shape:
            shape, axis = (_size(shape),), 0
        lines = np.moveaxis(_numbers(shape), axis, -1).reshape(-1, shape[axis])
        n = lines.shape[1]
        keep = np.ones((n, n), bool) if kind == "all" else np.tri(n, dtype=bool)
        p, q = np.nonzero(keep)
        return [_pairs(lines[:, p], lines[:, q]) if flows(prim, 0, xs[0]) else None,
                *[None] * (len(xs) - 1)]
    return rule


def _transform(prim: Primitive, xs: Sequence[Any], out_shape: tuple, attrs: dict) -> list:
    """The Fourier transforms: each output entry on every input entry of its line along
    ``axis`` (its block over ``axes``); an ``n`` (irfft's output length) reads the first
    ``n // 2 + 1`` entries of each input line only."""
    shape = np.shape(xs[0])
    axes = [a % len(shape) for a in attrs.get("axes", (attrs.get("axis"),))]
    last = list(range(len(shape) - len(axes), len(shape)))
    ins = np.moveaxis(_numbers(shape), axes, last).reshape(
        -1, _size(tuple(shape[a] for a in axes)))
    outs = np.moveaxis(_numbers(out_shape), axes, last).reshape(ins.shape[0], -1)
    if "n" in attrs:
        ins = ins[:, :attrs["n"] // 2 + 1]
    return [_pairs(outs[:, :, None], ins[:, None, :]) if flows(prim, 0, xs[0]) else None]


def _cross(prim: Primitive, xs: Sequence[Any], out_shape: tuple, attrs: dict) -> list:
    axis = attrs.get("axis", -1)
    rows = np.moveaxis(_numbers(out_shape), axis, -1).reshape(-1, 3)
    p, q = np.nonzero(~np.eye(3, dtype=bool))      # component k: the two others' product
    deps = []
    for i, x in enumerate(xs):
        cols = np.moveaxis(np.broadcast_to(_numbers(np.shape(x)), out_shape), axis, -1)
        deps.append(_pairs(rows[:, p], cols.reshape(-1, 3)[:, q]) if flows(prim, i, x)
                    else None)
    return deps


# ---------------------------------------------------------------- data movement


def _forward(prim: Primitive, xs: Sequence[Any], attrs: dict, i: int, fill: Any) -> np.ndarray:
    """The forward with input ``i`` replaced by ``fill`` and the other float inputs by zeros."""
    args = [fill if j == i else (np.zeros_like(x, dtype=float) if flows(prim, j, x) else x)
            for j, x in enumerate(xs)]
    return np.asarray(prim.forward(*args, **attrs), dtype=float)


def _cotangent(prim: Primitive, xs: Sequence[Any], out: np.ndarray, attrs: dict, i: int,
               g: np.ndarray) -> np.ndarray | None:
    """The vjp's cotangent of input ``i`` for ``g`` (None where it has none)."""
    if prim.variadic:
        ct = prim.vjp[0](VALUES, g, out, i, *xs, **attrs)
    else:
        ct = prim.vjp[i](VALUES, g, out, *xs, **attrs)
    if ct is None or ct is HELD:
        return None
    return np.broadcast_to(np.asarray(ct, dtype=float), np.shape(xs[i])).ravel()


def landing(prim: Primitive, xs: Sequence[Any], attrs: dict, i: int
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where the entries of input ``i`` of a data-moving primitive land: (the output with
    every float input zero, the flat position + 1 of the entry of input i each output entry
    holds (0: none), how many of its entries land on each), the last two flat."""
    shape = np.shape(xs[i])
    base = _forward(prim, xs, attrs, i, np.zeros(shape))
    code = (_forward(prim, xs, attrs, i, _numbers(shape) + 1.0) - base).ravel()
    count = (_forward(prim, xs, attrs, i, np.ones(shape)) - base).ravel()
    return base, code, count


def _moving(prim: Primitive, xs: Sequence[Any], out_shape: tuple, attrs: dict) -> list:
    deps: list = []
    for i, x in enumerate(xs):
        if not flows(prim, i, x):
            deps.append(None)
            continue
        base, code, count = landing(prim, xs, attrs, i)
        single = count == 1
        rows = [np.nonzero(single)[0]]
        cols = [code[single].astype(np.intp) - 1]
        many = np.nonzero(count > 1)[0]
        if many.size:   # several entries land on one: the vjp of output numbers places them
            out = base.reshape(out_shape)
            to = _cotangent(prim, xs, out, attrs, i, _numbers(out_shape) + 1.0)
            reach = _cotangent(prim, xs, out, attrs, i, np.ones(out_shape))
            alone = np.nonzero(reach == 1)[0]
            lands = to[alone].astype(np.intp) - 1
            hit = np.isin(lands, many)
            rows.append(lands[hit])
            cols.append(alone[hit])
            spread = np.nonzero(reach > 1)[0]       # neither way single: the block of both
            if spread.size:
                r, c = np.meshgrid(many, spread, indexing="ij")
                rows.append(r.ravel())
                cols.append(c.ravel())
        deps.append(_pairs(np.concatenate(rows), np.concatenate(cols)))
    return deps


# ---------------------------------------------------------------- products


def _matmul(prim: Primitive, xs: Sequence[Any], out_shape: tuple, attrs: dict,
            fixed: Sequence[bool] = (False, False)) -> list:
    a, b = np.shape(xs[0]), np.shape(xs[1])
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    i, k, j = a2[-2], a2[-1], b2[-1]
    full = batch + (i, j, k)

    def spread(x: np.ndarray, shape: tuple, left: bool) -> np.ndarray:
        """x's entry at each (batch, i, j, k): x[..., i, k] (left) or x[..., k, j]."""
        x = x.reshape(shape)
        return np.broadcast_to(x[..., :, None, :] if left else
                               np.swapaxes(x, -1, -2)[..., None, :, :], full)
    rows = np.broadcast_to(_numbers(batch + (i, j))[..., None], full)
    deps = []
    for n, (x, other, left) in enumerate(((xs[0], xs[1], True), (xs[1], xs[0], False))):
        if not flows(prim, n, x):
            deps.append(None)
            continue
        cols = spread(_numbers(np.shape(x)), a2 if left else b2, left)
        if fixed[1 - n]:        # what a constant's zeros multiply does not depend on x
            keep = spread(np.asarray(other) != 0, b2 if left else a2, not left)
            deps.append(_pairs(rows[keep], cols[keep]))
        else:
            deps.append(_pairs(rows, cols))
    return deps


def _einsum(prim: Primitive, xs: Sequence[Any], out_shape: tuple, attrs: dict) -> list:
    spec = attrs["subscripts"].replace(" ", "")
    if "..." in spec or "->" not in spec:
        return _dense(prim, xs, out_shape, attrs)
    ins, out = spec.split("->")
    terms = ins.split(",")
    labels = sorted(set("".join(terms)))
    size = {}
    for t, x in zip(terms, xs):
        for c, n in zip(t, np.shape(x)):
            size[c] = max(size.get(c, 1), n)    # a 1 broadcasts against the other sizes
    grid = np.indices([size[c] for c in labels], sparse=True)
    at = dict(zip(labels, grid))

    def position(term: str, shape: tuple) -> np.ndarray:
        flat = np.zeros((1,) * len(labels), dtype=np.intp)
        for c, n in zip(term, shape):
            flat = flat * n + (at[c] if n > 1 else 0)
        return flat
    rows = position(out, out_shape)
    deps = []
    for i, (t, x) in enumerate(zip(terms, xs)):
        if not flows(prim, i, x):
            deps.append(None)
            continue
        ok = np.ones((1,) * len(labels), bool)     # a repeated subscript: its diagonal only
        for c in set(t):
            first = [k for k, d in enumerate(t) if d == c]
            for k in first[1:]:
                ok = ok & (at[t[first[0]]] == at[t[k]])
        r, c, keep = np.broadcast_arrays(rows, position(t, np.shape(x)), ok)
        deps.append(_unique(r[keep], c[keep]))
    return deps


def _unique(rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pairs = np.unique(np.stack([rows.ravel(), cols.ravel()]), axis=1)
    return pairs[0].astype(np.intp), pairs[1].astype(np.intp)


# ---------------------------------------------------------------- conservative rules


def _dense(prim: Primitive, xs: Sequence[Any], out_shape: tuple, attrs: dict) -> list:
    """Every output on every entry of every input a derivative flows to."""
    rows = np.arange(_size(out_shape))[:, None]
    return [_pairs(rows, np.arange(np.size(x))[None, :]) if flows(prim, i, x) else None
            for i, x in enumerate(xs)]


def _blocked(core: Callable[[Sequence[Any], tuple, dict], tuple]) -> Sparsity:
    """Dense within each matrix, the leading (batch) axes broadcast: ``core(xs, out_shape,
    attrs)`` gives the number of core axes of each input and then of the output."""
    def rule(prim: Primitive, xs: Sequence[Any], out_shape: tuple, attrs: dict) -> list:
        *cores, out_core = core(xs, out_shape, attrs)
        batch = out_shape[:len(out_shape) - out_core]
        outs = _numbers(out_shape).reshape(batch + (-1,))
        deps = []
        for i, (x, c) in enumerate(zip(xs, cores)):
            shape = np.shape(x)
            if not flows(prim, i, x) or len(shape) - c > len(batch):
                deps.append(None if not flows(prim, i, x) else
                            _dense(prim, [x], out_shape, attrs)[0])
                continue
            ins = _numbers(shape).reshape(shape[:len(shape) - c] + (-1,))
            ins = np.broadcast_to(ins, batch + ins.shape[-1:])
            deps.append(_pairs(outs[..., :, None], ins[..., None, :]))
        return deps
    return rule


def _square(xs: Sequence[Any], out_shape: tuple, attrs: dict) -> tuple:
    part = attrs.get("part")
    out = 1 if part in ("eigenvalues", "S") else 2
    return 2, min(out, len(out_shape))


def _to_number(xs: Sequence[Any], out_shape: tuple, attrs: dict) -> tuple:
    return 2, 0


def _solving(xs: Sequence[Any], out_shape: tuple, attrs: dict) -> tuple:
    b = 1 if np.ndim(xs[1]) == 1 else 2
    return 2, b, b


# ---------------------------------------------------------------- the table


POINTWISE = Rule(_pointwise, True, "pointwise")
FOLDING = Rule(_folding(), True, "folding")
MOVING = Rule(_moving, True, "moving", reads=True)
NONE = Rule(lambda prim, xs, out_shape, attrs: [None] * len(xs), True, "none")
DENSE = Rule(_dense, False, "dense")

# the primitives whose rule is conservative: dense within each matrix (batch axes kept apart)
DENSE_BLOCK = ("cholesky", "solve", "inv", "det", "slogdet", "eigh", "matrix_power", "pinv",
               "lstsq", "qr", "svd")

RULES: dict[str, Rule] = {
    **{name: FOLDING for name in ("sum", "mean", "logsumexp", "prod", "variance", "std",
                                  "norm")},
    **{name: Rule(_folding(), False, "folding a selection") for name in ("max", "min")},
    **{name: Rule(_along("all"), True, "along all") for name in ("softmax", "log_softmax")},
    "cross": Rule(_cross, True, "cross"),
    **{name: Rule(_transform, True, "transform")
       for name in ("fft", "ifft", "rfft", "irfft", "fftn", "ifftn")},
    **{name: Rule(_along("prefix", None), True, "along prefix") for name in ("cumsum", "cumprod")},
    **{name: Rule(_along("prefix", None), False, "along prefix, a selection")
       for name in ("cummax", "cummin")},
    **{name: MOVING for name in ("take_along_axis", "scatter_add_along_axis", "flip", "roll",
                                 "pad", "repeat", "tile", "expand", "reshape", "transpose",
                                 "concatenate", "stack", "getitem", "scatter_add", "diagonal",
                                 "tril", "triu", "at_set", "at_add")},
    "cast": POINTWISE,
    "betainc": POINTWISE,
    "matmul": Rule(_matmul, True, "matmul", constants=True),
    "mul": Rule(_product, True, "product", constants=True),
    "einsum": Rule(_einsum, True, "einsum"),
    **{name: Rule(_blocked(_square), False, "dense block")
       for name in ("cholesky", "inv", "eigh", "matrix_power", "pinv", "qr", "svd")},
    **{name: Rule(_blocked(_to_number), False, "dense block") for name in ("det", "slogdet")},
    "solve": Rule(_blocked(_solving), False, "dense block"),
    "lstsq": DENSE,
    "conv": DENSE,      # (conservative: every output on every input entry)
}


# ---------------------------------------------------------------- loops and branches
#
# A loop's rule propagates its body's pattern (``Body.dependence``: the body's own rules over
# its sub-program) through the trips: the carry's pattern on the loop's inputs, step after
# step. The body's pattern is read at its inputs' values; where an integer input reaches a
# rule that reads values (an index, a nested loop), at each step's (the forward run beside),
# else once for every step, and then a scan stops where the carry's pattern stops changing.


def _sparse() -> Any:
    import scipy.sparse
    return scipy.sparse


def _binary(m: Any) -> Any:
    m = _sparse().csr_array(m, dtype=np.float32)
    m.sum_duplicates()
    m.eliminate_zeros()
    m.data[:] = 1
    return m


class _Columns:
    """The loop's inputs as the columns of a pattern (concatenated, C order)."""

    def __init__(self, prim: Primitive, xs: Sequence[Any]):
        self.prim, self.xs = prim, xs
        self.start = np.concatenate([[0], np.cumsum([np.size(x) for x in xs])]).astype(int)
        self.total = int(self.start[-1])

    def eye(self, i: int, first: int = 0, size: int | None = None) -> Any:
        """Rows for entries first.. of input i, each on itself (none where nothing flows)."""
        sp = _sparse()
        size = int(np.size(self.xs[i])) if size is None else size
        if not flows(self.prim, i, self.xs[i]):
            return sp.csr_array((size, self.total), dtype=np.float32)
        k = np.arange(size)
        return sp.csr_array((np.ones(size, np.float32), (k, self.start[i] + first + k)),
                            shape=(size, self.total))

    def stack(self, blocks: Sequence[Any]) -> Any:
        sp = _sparse()
        blocks = [b for b in blocks if b.shape[0]]
        return sp.csr_array(sp.vstack(blocks, format="csr")) if blocks else \
            sp.csr_array((0, self.total), dtype=np.float32)

    def split(self, positions: list, patterns: list) -> list:
        """The deps per input of an output whose flat ``positions`` have these patterns."""
        rows, cols = [], []
        for where, pat in zip(positions, patterns):
            coo = pat.tocoo()
            rows.append(np.asarray(where)[coo.row])
            cols.append(coo.col)
        rows = np.concatenate(rows) if rows else np.zeros(0, np.intp)
        cols = np.concatenate(cols) if cols else np.zeros(0, np.intp)
        deps = []
        for i, x in enumerate(self.xs):
            if not flows(self.prim, i, x):
                deps.append(None)
                continue
            keep = (cols >= self.start[i]) & (cols < self.start[i + 1])
            deps.append(_pairs(rows[keep], cols[keep] - self.start[i]))
        return deps


def _at(row: int, width: int, offset: int, size: int) -> np.ndarray:
    return row * width + offset + np.arange(size)


def _key(body: Any, values: Sequence[Any]) -> tuple:
    """What the body's pattern depends on among these values: its integer inputs' where one
    reaches a rule that reads values, else nothing."""
    if not body.reads_integers():
        return ()
    return tuple((np.asarray(v).dtype.str, np.asarray(v).tobytes()) for v in values
                 if np.asarray(v).dtype.kind not in "fc")


def _local(body: Any, values: Sequence[Any], memo: dict) -> Any:
    key = _key(body, values)
    got = memo.get(key)
    if got is None:
        got = memo[key] = _binary(body.dependence(*values))
    return got


def _rows(pattern: Any, sizes: Sequence[int]) -> list:
    edges = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    return [pattern[edges[j]:edges[j + 1]] for j in range(len(sizes))]


def _scan_rule(prim: Primitive, xs: Sequence[Any], out_shape: tuple, attrs: dict) -> list:
    from .loops import size_of, trips
    body, nc, nk, counted = attrs["body"], attrs["nc"], attrs["nk"], attrs["counted"]
    layout, width = attrs["layout"], out_shape[-1]
    xs = [np.asarray(x) for x in xs]
    n = trips(xs, nc, nk, counted, attrs["length"])
    cols = _Columns(prim, xs)
    seqs = range(nc + nk, len(xs) - counted)
    consts = cols.stack([cols.eye(i) for i in range(nc)])
    carry = cols.stack([cols.eye(nc + j) for j in range(nk)])
    values = list(xs[nc:nc + nk])
    sizes = [size_of(a) for a in body.outs]
    steady = body.reads_integers() is False and not any(flows(prim, i, xs[i]) for i in seqs)
    memo: dict = {}
    positions, patterns = [], []
    order = list(range(n - 1, -1, -1) if attrs["reverse"] else range(n))
    for step, t in enumerate(order):
        step_x = [xs[i][t] for i in seqs]
        local = _local(body, [*xs[:nc], *values, *step_x], memo)
        ins = cols.stack([consts, carry, *(cols.eye(i, t * (xs[i].size // n),
                                                    xs[i].size // n) for i in seqs)])
        outs = _rows(_binary(local @ ins), sizes)
        ys = [(j, y) for j, y in enumerate(outs[nk:])]
        new = cols.stack(outs[:nk])
        done = steady and step > 0 and (new != carry).nnz == 0
        rest = order[step:] if done else [t]
        for j, y in ys:
            for u in rest:
                positions.append(_at(1 + u, width, layout[nk + j], sizes[nk + j]))
                patterns.append(y)
        carry = new
        if done:
            break
        if body.reads_integers():
            values = list(body(*xs[:nc], *values, *step_x)[:nk])
    for j, c in enumerate(_rows(carry, sizes[:nk])):
        positions.append(_at(0, width, layout[j], sizes[j]))
        patterns.append(c)
    return cols.split(positions, patterns)


def _while_rule(prim: Primitive, xs: Sequence[Any], out_shape: tuple, attrs: dict) -> list:
    """Every trip count's pattern at once: the carry's, grown by the body's until it stops."""
    from .loops import size_of
    body, test, nc = attrs["body"], attrs["test"], attrs["nc"]
    layout, width = attrs["layout"], out_shape[-1]
    xs = [np.asarray(x) for x in xs]
    nk = len(xs) - nc
    cols = _Columns(prim, xs)
    memo: dict = {}
    values = list(xs[nc:])
    _local(body, [*xs[:nc], *values], memo)
    if body.reads_integers():       # each trip's, as the forward runs
        steps, limit = 0, attrs.get("max_steps")
        while (limit is None or steps < limit) and bool(np.asarray(test(*xs[:nc], *values)[0])):
            _local(body, [*xs[:nc], *values], memo)
            values = list(body(*xs[:nc], *values))
            steps += 1
    local = _binary(sum(memo.values()))
    consts = cols.stack([cols.eye(i) for i in range(nc)])
    carry = cols.stack([cols.eye(nc + j) for j in range(nk)])
    while True:
        grown = _binary(carry + local @ cols.stack([consts, carry]))
        if (grown != carry).nnz == 0:
            break
        carry = grown
    sizes = [size_of(a) for a in body.outs]
    return cols.split([_at(0, width, layout[j], sizes[j]) for j in range(nk)],
                      _rows(carry, sizes))


def _cond_rule(prim: Primitive, xs: Sequence[Any], out_shape: tuple, attrs: dict) -> list:
    """The union of the branches' patterns (the index carries no derivative)."""
    from .loops import size_of
    branches, layout, width = attrs["branches"], attrs["layout"], out_shape[-1]
    xs = [np.asarray(x) for x in xs]
    cols = _Columns(prim, xs)
    local = _binary(sum(_binary(b.dependence(*xs[1:])) for b in branches))
    outs = _binary(local @ cols.stack([cols.eye(i) for i in range(1, len(xs))]))
    sizes = [size_of(a) for a in branches[0].outs]
    return cols.split([_at(0, width, layout[j], sizes[j]) for j in range(len(sizes))],
                      _rows(outs, sizes))


RULES.update({"scan": Rule(_scan_rule, False, "a scan of its body's", reads=True),
              "while_loop": Rule(_while_rule, False, "a while loop of its body's", reads=True),
              "cond": Rule(_cond_rule, False, "the union of the branches'", reads=True),
              "loop_part": MOVING, "loop_placed": MOVING,
              "while_vjp": DENSE})      # (a while loop's cotangents: on every input)


def rule_for(prim: Primitive) -> Rule:
    """The sparsity rule of ``prim``: the one on its record, else by its kind (not
    differentiable: none; elementwise: pointwise), else the dense rule."""
    rule = prim.sparsity
    if rule is not None:
        return rule
    if not prim.differentiable:
        return NONE
    return POINTWISE if prim.elementwise else DENSE


def attach_rules() -> None:
    """Put each rule of ``RULES`` on the record it describes (once every record exists)."""
    for name, rule in RULES.items():
        REGISTRY[name].sparsity = rule
