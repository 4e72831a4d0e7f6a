"""Jacobian accumulation: what forward, reverse and Markowitz vertex elimination cost.

The linearised graph of a program at a point has one vertex per real scalar: every entry of
every input and of every differentiable float entry of the program, two for a complex entry
(its real and imaginary parts, in that order); an edge ``u -> v`` carries the
local partial derivative dv/du, and only nonzero partials are edges (the jvp rules give them,
one input at a time). Constants have no vertices. With n input scalars and m output scalars,
the Jacobian is the sum over paths of the products of edge labels.

Eliminating an intermediate vertex v connects each predecessor u to each successor w
(``c_uw += c_uv * c_vw``) at a cost of ``|pred(v)| * |succ(v)|`` multiplications. Eliminating
every intermediate leaves exactly the Jacobian on the edges from inputs to outputs (Griewank and
Walther, *Evaluating Derivatives*, ch. 9; seed 003 names the general problem, optimal Jacobian
accumulation, NP-complete). Three orders are counted:

- forward: intermediates in tape order (forward-mode accumulation);
- reverse: in reverse tape order (reverse-mode accumulation);
- markowitz: greedily the vertex with the smallest ``|pred| * |succ|`` now, ties broken by
  tape order.

An output vertex that other vertices also read (or an output that is an input) gets its own
sink vertex behind an edge of 1, so that it is not eliminated with the intermediates.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..engine.ops import Ops
from ..engine.variable import Variable
from ..errors import ArgumentError, SimplegradError
from ..primitives import VALUES
from .core import Program
from .nodes import CONST, INPUT, NODE, refs_of

# jacobian(mode="auto") counts only graphs of at most LIMIT vertices and jvp columns and
# 4 * LIMIT edges (a few milliseconds of counting); beyond that the sizes decide
LIMIT = 5_000


class JacobianCost(NamedTuple):
    """Multiplications to accumulate a Jacobian by vertex elimination, in three orders."""

    forward: int
    reverse: int
    markowitz: int
    inputs: int         # n: input scalars
    outputs: int        # m: output scalars
    intermediates: int  # vertices eliminated
    edges: int          # edges of the linearised graph


class Linearised(NamedTuple):
    """The linearised graph: ``pred[v] = {u: dv/du}`` (vertex ids in tape order)."""

    pred: dict
    inputs: list        # input vertex ids, inputs in order, each flattened
    outputs: list       # output vertex ids, outputs in order, each flattened


class _TooBigError(Exception):
    """The graph has more vertices or jvp columns than the limit asked."""


def jacobian_cost(f: Callable, *args: Any) -> JacobianCost:
    """The multiplications forward, reverse and Markowitz vertex elimination need to
    accumulate the Jacobian of ``f`` at ``args`` (arrays; f gets Variables)."""
    if not callable(f):
        raise ArgumentError(f"jacobian_cost: f must be callable, got {type(f).__name__}")
    if not args:
        raise ArgumentError("jacobian_cost: needs at least one argument")
    op = Ops()
    xs = [op.var(getattr(a, "raw", a)) for a in args]
    y = f(*xs)
    outs = [y] if isinstance(y, Variable) else list(y) if isinstance(y, (tuple, list)) else None
    if not outs or not all(isinstance(v, Variable) and v.rec is op.recorder for v in outs):
        raise ArgumentError("jacobian_cost: f must return a Variable (or a tuple of them) "
                            "computed from its arguments")
    return program_cost(op.program(xs, outs), *[x.value for x in xs])


def program_cost(prog: Program, *values: Any) -> JacobianCost:
    """The three elimination counts for a Program linearised at ``values`` of its inputs."""
    g = linearise(prog, *values)
    return _cost(g)


def _cost(g: Linearised) -> JacobianCost:
    middle = sorted(set(g.pred) - set(g.inputs) - set(g.outputs))
    edges = sum(len(p) for p in g.pred.values())
    return JacobianCost(eliminate(g, middle)[0], eliminate(g, middle[::-1])[0],
                        eliminate(g, None)[0], len(g.inputs), len(g.outputs), len(middle),
                        edges)


def prefers_forward(xs: Sequence[Variable], ys: Variable | Sequence[Variable]) -> bool:
    """For ``jacobian(mode="auto")``: True when forward elimination costs fewer multiplications
    than reverse; the sizes decide (fewer inputs than outputs) on a tie, a graph too large to
    count (see LIMIT) or one the jvp rules cannot linearise."""
    ys = [ys] if isinstance(ys, Variable) else list(ys)
    by_size = sum(x.size for x in xs) < sum(y.size for y in ys)
    try:
        prog = xs[0].rec.program(list(xs), ys)
        g = linearise(prog, *[x.value for x in xs], limit=LIMIT)
    except (_TooBigError, SimplegradError, NotImplementedError, ArithmeticError, ValueError,
            TypeError, IndexError):     # a custom rule the counting cannot run: sizes decide
        return by_size
    middle = sorted(set(g.pred) - set(g.inputs) - set(g.outputs))
    forward, reverse = eliminate(g, middle)[0], eliminate(g, middle[::-1])[0]
    return by_size if forward == reverse else forward < reverse


# ---------------------------------------------------------------- the linearised graph


def linearise(prog: Program, *values: Any, limit: int | None = None) -> Linearised:
    """The program's linearised graph at ``values`` of its inputs."""
    if len(values) != len(prog.inputs):
        raise ArgumentError(f"linearise: the program takes {len(prog.inputs)} input(s), got "
                            f"{len(values)}")
    env = {(INPUT, i): np.asarray(v, dtype=s.dtype) for i, (v, s) in
           enumerate(zip(values, prog.inputs))}
    env.update({(CONST, i): c.value for i, c in enumerate(prog.constants)})
    first: dict[tuple, int] = {}     # (kind, index) -> id of its first scalar
    count = 0
    for i, spec in enumerate(prog.inputs):
        first[(INPUT, i)] = count
        count += int(np.prod(spec.shape, dtype=np.int64)) * _parts(spec.dtype)
    inputs = list(range(count))
    pred: dict[int, dict[int, float]] = {v: {} for v in inputs}
    columns = edges = 0
    for j, node in enumerate(prog.entries):
        refs = refs_of(node)
        args = [env[r] for r in refs]
        out = node.prim.forward(*args, **(node.attrs or {}))
        out = np.asarray(out)
        env[(NODE, j)] = out
        if not node.prim.differentiable or out.dtype.kind not in "fc":
            continue
        first[(NODE, j)] = base = count
        count += out.size * _parts(out.dtype)
        if limit is not None and count > limit:
            raise _TooBigError
        for v in range(base, count):
            pred[v] = {}
        for p, r in enumerate(refs):
            if r.kind == CONST or r not in first:
                continue
            src = first[r]
            rows, cols, vals = _local(node, args, out, p)
            columns += 1 if node.prim.elementwise else np.size(args[p])
            if limit is not None and columns > limit:
                raise _TooBigError
            edges += len(rows)
            if limit is not None and edges > 4 * limit:
                raise _TooBigError
            for k, i, c in zip(rows.tolist(), cols.tolist(), vals.tolist()):
                row = pred[base + k]
                row[src + i] = row.get(src + i, 0.0) + c
    outputs: list[int] = []
    readers = {u for p in pred.values() for u in p}
    for r in prog.outputs:
        value = env[(r.kind, r.index)]
        size = int(np.size(value)) * _parts(np.asarray(value).dtype)
        start = first.get((r.kind, r.index))
        for k in range(size):
            v = None if start is None else start + k
            if v is None or v in readers or r.kind == INPUT or v in outputs:
                sink = count        # a sink of its own (constants: no edges at all)
                count += 1
                pred[sink] = {} if v is None else {v: 1.0}
                v = sink
            outputs.append(v)
    return Linearised(_pruned(pred, set(inputs), outputs), inputs, outputs)


def _parts(dtype: Any) -> int:
    """Vertices per scalar: 2 for a complex dtype (real and imaginary parts), else 1."""
    return 2 if np.dtype(dtype).kind == "c" else 1


def _local(node: Any, args: list, out: np.ndarray, p: int) -> tuple:
    """(rows, cols, values) of the nonzero partials of the output in input p, by jvps, over
    real vertices (a complex input is moved along 1 and 1j, a complex output read as its real
    and imaginary parts)."""
    x = np.asarray(args[p])
    ts: list = [None] * len(args)
    attrs = node.attrs or {}
    p_in, p_out = _parts(x.dtype), _parts(out.dtype)
    directions = (1, 1j)[:p_in]
    if node.prim.elementwise:       # each output entry reads one entry of each input
        rows_, cols_, vals_ = [], [], []
        src = np.broadcast_to(np.arange(x.size).reshape(x.shape), out.shape).reshape(-1)
        for dk, direction in enumerate(directions):
            ts[p] = np.full(x.shape, direction, x.dtype)
            d = node.prim.jvp(VALUES, ts, out, *args, **attrs)
            if d is None:
                continue
            d = np.broadcast_to(np.asarray(d), out.shape).reshape(-1)
            for q, part in enumerate((d.real, d.imag)[:p_out]):
                rows = np.flatnonzero(part)
                rows_.append(rows * p_out + q)
                cols_.append(src[rows] * p_in + dk)
                vals_.append(part[rows])
        if not rows_:
            return np.zeros(0, int), np.zeros(0, int), np.zeros(0)
        return np.concatenate(rows_), np.concatenate(cols_), np.concatenate(vals_)
    jac = np.zeros((out.size * p_out, x.size * p_in))
    for k in range(x.size):
        for dk, direction in enumerate(directions):
            e = np.zeros(x.size, x.dtype)
            e[k] = direction
            ts[p] = e.reshape(x.shape)
            col = node.prim.jvp(VALUES, ts, out, *args, **attrs)
            if col is not None:
                col = np.broadcast_to(np.asarray(col), out.shape).reshape(-1)
                for q, part in enumerate((col.real, col.imag)[:p_out]):
                    jac[q::p_out, k * p_in + dk] = part
    rows, cols = np.nonzero(jac)
    return rows, cols, jac[rows, cols]


def _pruned(pred: dict, inputs: set, outputs: list) -> dict:
    """Only the vertices on some path from an input to an output."""
    succ: dict[int, list[int]] = {}
    for v, p in pred.items():
        for u in p:
            succ.setdefault(u, []).append(v)
    ahead, stack = set(inputs), list(inputs)
    while stack:
        for w in succ.get(stack.pop(), ()):
            if w not in ahead:
                ahead.add(w)
                stack.append(w)
    behind, stack = set(outputs), list(outputs)
    while stack:
        for u in pred[stack.pop()]:
            if u not in behind:
                behind.add(u)
                stack.append(u)
    keep = (ahead & behind) | inputs | set(outputs)
    return {v: {u: c for u, c in pred[v].items() if u in keep} for v in sorted(keep)}


# ---------------------------------------------------------------- elimination


def eliminate(g: Linearised, order: Sequence[int] | None) -> tuple[int, dict]:
    """Eliminate the intermediates in ``order`` (None: Markowitz); returns the multiplications
    and the remaining graph, whose edges into the outputs are the Jacobian's entries."""
    pred = {v: dict(p) for v, p in g.pred.items()}
    succ: dict[int, dict[int, float]] = {v: {} for v in pred}
    for v, p in pred.items():
        for u, c in p.items():
            succ[u][v] = c
    ends = set(g.inputs) | set(g.outputs)
    middle = [v for v in pred if v not in ends]
    mults = 0

    def drop(v: int) -> None:
        nonlocal mults
        ins, outs = pred.pop(v), succ.pop(v)
        mults += len(ins) * len(outs)
        for u, a in ins.items():
            del succ[u][v]
            for w, b in outs.items():
                c = pred[w].get(u, 0.0) + a * b
                pred[w][u] = c
                succ[u][w] = c
        for w in outs:
            del pred[w][v]

    if order is not None:
        for v in order:
            drop(v)
        return mults, pred
    heap = [(len(pred[v]) * len(succ[v]), v) for v in middle]
    heapq.heapify(heap)
    while heap:
        degree, v = heapq.heappop(heap)
        if v not in pred or degree != len(pred[v]) * len(succ[v]):
            continue        # eliminated already, or its degree changed (a newer entry waits)
        near = set(pred[v]) | set(succ[v])
        drop(v)
        for u in near - ends:
            heapq.heappush(heap, (len(pred[u]) * len(succ[u]), u))
    return mults, pred


def jacobian_from(g: Linearised, pred: dict) -> np.ndarray:
    """The (m, n) Jacobian left on the edges after every intermediate is eliminated."""
    col = {v: k for k, v in enumerate(g.inputs)}
    jac = np.zeros((len(g.outputs), len(g.inputs)))
    for i, v in enumerate(g.outputs):
        for u, c in pred.get(v, {}).items():
            jac[i, col[u]] += c
    return jac
