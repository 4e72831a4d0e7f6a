"""Whole derivatives: jacobian (rows by one batched reverse sweep, or columns by one batched forward
sweep), hessian (forward over reverse) and hvp (reverse over forward); and
``jacobian_fwd_batched`` and ``hessian_batched`` of an output already recorded.

How a transform picks its Ops, stands for its arguments and returns its results (the nesting
rule) is told in arguments.py.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from ..engine.batched import STACKS, Stack, batched_jvp, batched_jvp_values
from ..engine.batching import Batched, innermost, new_level, wrap
from ..engine.derivation import label_entries
from ..engine.ops import Ops
from ..engine.reverse import sweep
from ..engine.tape import ancestors
from ..engine.variable import UNARY, Entry, Variable
from ..errors import ArgumentError, NotDifferentiableError, ShapeError
from ..primitives.core import JOINT, REGISTRY
from ..pytree import tree_flatten, tree_unflatten
from .arguments import (
    ArgNums,
    Result,
    argnums_kind,
    aux_result,
    check_callable,
    check_has_aux,
    context,
    disconnected,
    everything,
    flat,
    leaf_shape,
    leaves_like,
    output,
    outputs,
    own,
    paused,
    primals,
    regroup,
    resolve,
    result,
    results,
    run_paused,
    scalar,
    split_aux,
)
from .conventions import check_forward_inputs, check_inputs, check_output, is_complex


def jacobian(f: Callable, argnums: ArgNums = 0,
             mode: Literal["auto", "rev", "fwd"] = "auto", has_aux: bool = False,
             holomorphic: bool = False) -> Callable:
    """The function computing the Jacobian of ``f``, shaped ``out.shape + in.shape`` per input
    (with ``has_aux``: ``(jacobian, aux)``).

    ``rev`` builds every row in one reverse sweep of a batch of cotangents, ``fwd`` every
    column in one batched forward sweep; ``auto`` takes the one its cost model
    (``prefers_forward``) says is faster. With pytrees the result is the output's structure
    holding, for each output leaf, the input's structure (as ``jax.jacobian``). Complex
    inputs: with ``holomorphic=True`` (complex inputs and outputs) ``df/dz``; without, real
    outputs only, rows in JAX's convention (conventions.py).
    """
    check_callable("jacobian", f)
    holomorphic = bool(holomorphic)
    single = argnums_kind("jacobian", argnums)
    has_aux = check_has_aux("jacobian", has_aux)
    if mode not in ("auto", "rev", "fwd"):
        raise ArgumentError(f"jacobian: mode must be 'auto', 'rev' or 'fwd', not {mode!r}")

    @functools.wraps(f)
    def jacobian_f(*args: Any, **kwargs: Any) -> Any:
        ops, nested = context("jacobian", everything(args, kwargs))
        if nested is None:
            return paused(ops, jacobian(f, argnums, mode, has_aux, holomorphic), args, kwargs)
        with own(ops, nested):
            nums = resolve("jacobian", argnums, len(args))
            call, trees = primals(ops, args, nums)
            xs = flat(trees)
            out, aux = split_aux("jacobian", f(*call, **kwargs), has_aux)
            ys, out_def = outputs("jacobian", ops, out)
            check_inputs("jacobian", xs, holomorphic)
            for y in ys:
                check_output("jacobian", y, holomorphic)
            if mode == "fwd":
                check_forward_inputs("jacobian", xs, holomorphic)
            disconnected("jacobian", f, None, ys)
            complex_rev = not holomorphic and any(is_complex(x) for x in xs)
            forward = mode == "fwd" or (mode == "auto" and not complex_rev and prefers_forward(
                [innermost(x) for x in xs], [innermost(y) for y in ys]))
            per_output = []
            for y in ys:
                if not forward:
                    jacs = _jac_rev(ops, y, xs, nested)
                elif mode == "fwd":
                    jacs = _jac_fwd(ops, y, xs, nested)
                else:       # auto: reverse mode where forward mode cannot go (a custom rule)
                    try:
                        jacs = _jac_fwd(ops, y, xs, nested)
                    except NotDifferentiableError:
                        jacs = _jac_rev(ops, y, xs, nested)
                if len(ys) == 1:
                    _name_entries(ops, "J", [y.shape], [args[i] for i in nums], jacs)
                jacs = regroup(trees, jacs)
                per_output.append(jacs[0] if single else jacs)
            jac = tree_unflatten(out_def, per_output)
            return (jac, aux_result(nested, aux)) if has_aux else jac
    return jacobian_f


def jacfwd(f: Callable, argnums: ArgNums = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """The Jacobian of ``f`` by forward mode (``jax.jacfwd``): ``jacobian(mode="fwd")``."""
    return jacobian(f, argnums, "fwd", has_aux, holomorphic)


def jacrev(f: Callable, argnums: ArgNums = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """The Jacobian of ``f`` by reverse mode (``jax.jacrev``): ``jacobian(mode="rev")``."""
    return jacobian(f, argnums, "rev", has_aux, holomorphic)


def hessian(f: Callable, argnums: ArgNums = 0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable:
    """The function computing the Hessian of ``f``, shaped ``out.shape + x.shape + x.shape``
    per output leaf (with ``has_aux``: ``(hessian, aux)``).

    Forward-over-reverse: every basis tangent pushed through the recorded gradient (or
    Jacobian, for an output that is not a scalar) in one batched jvp sweep. For pytree
    arguments block ``[i][j]`` has shape ``out.shape + x_i.shape + x_j.shape``, nested as
    ``jax.hessian``; a pytree output holds one such structure per leaf. Complex inputs need
    ``holomorphic=True`` (complex outputs too; the result is ``d2f/dz2``), as for
    ``jax.hessian``.
    """
    check_callable("hessian", f)
    holomorphic = bool(holomorphic)
    single = argnums_kind("hessian", argnums)
    has_aux = check_has_aux("hessian", has_aux)

    @functools.wraps(f)
    def hessian_f(*args: Any, **kwargs: Any) -> Any:
        ops, nested = context("hessian", everything(args, kwargs))
        if nested is None:
            return paused(ops, hessian(f, argnums, has_aux, holomorphic), args, kwargs)
        with own(ops, nested):
            nums = resolve("hessian", argnums, len(args))
            call, trees = primals(ops, args, nums)
            xs = flat(trees)
            out, aux = split_aux("hessian", f(*call, **kwargs), has_aux)
            ys, out_def = outputs("hessian", ops, out)
            check_inputs("hessian", xs, holomorphic)
            check_forward_inputs("hessian", xs, holomorphic)
            for y in ys:
                check_output("hessian", y, holomorphic)
            if len(ys) > 1 or ys[0].ndim:
                disconnected("hessian", f, None, ys)
            per_output = []
            for y in ys:
                blocks = _hessian_blocks(ops, y, xs, nested, f if len(ys) == 1 else None)
                if len(ys) == 1 and not y.ndim:
                    _name_entries(ops, "H", [], [args[i] for i in nums], blocks)
                rows = [regroup(trees, row) for row in blocks]
                rows = regroup(trees, [r[0] if single else r for r in rows])
                per_output.append(rows[0] if single else rows)
            h = tree_unflatten(out_def, per_output)
            return (h, aux_result(nested, aux)) if has_aux else h
    return hessian_f


def _name_entries(ops: Ops, head: str, outer: list, args: list, blocks: list) -> None:
    """Name the entries of each block of a Jacobian (``J[0, x]``) or Hessian (``H[x, y]``) in
    the differentiated arguments' names, where each argument is one named Variable and each
    block a recorded Variable (``label_entries``; a pruned trace prints them so)."""
    if not all(type(a) is Variable for a in args):
        return
    names = [[a.name if not k else f"{a.name}[{', '.join(map(str, k))}]"
              for k in np.ndindex(*a.shape)] for a in args]
    indices = [[", ".join(map(str, k)) for k in np.ndindex(*shape)] for shape in outer]
    rows = blocks if head == "H" else [blocks]
    for i, row in enumerate(rows):
        for j, block in enumerate(row):
            parts = [names[i], names[j]] if head == "H" else [*indices, names[j]]
            labels = [f"{head}[{', '.join(p for p in combo if p)}]"
                      for combo in _product(parts)]
            whole = [args[i].name, args[j].name] if head == "H" else \
                [":"] * len(outer[0]) + [args[j].name]
            label_entries(ops, block, labels, f"{head}[{', '.join(whole)}]")


def _product(parts: list) -> list:
    """Every combination of one item of each list, the last varying fastest (C order)."""
    out: list = [()]
    for items in parts:
        out = [(*o, x) for o in out for x in items]
    return out


def _hessian_blocks(ops: Ops, y: Variable, xs: list[Variable], nested: bool,
                    f: Callable | None) -> list[list[Result]]:
    """Block [i][j] of the Hessian of one output leaf y: y.shape + x_i.shape + x_j.shape (a
    scalar y, the only output of ``f``, warns when it is disconnected)."""
    if y.ndim:      # the recorded Jacobian rows, then a batched forward sweep per block
        jacs = _jac_rev(ops, y, xs, True)
        return [[_fwd(ops, jac, xj, nested) for xj in xs] for jac in jacs]
    gs = ops.grad(y, xs, create_graph=True)
    if f is not None:
        disconnected("hessian", f, ops, [y])
    if len(xs) == 1:
        return [[_jac_fwd(ops, gs[0], xs, nested)[0]]]
    g = concat_flat(ops, gs)
    cols = [_jac_fwd(ops, g, [x], nested)[0] for x in xs]
    return [[split_rows(ops, nested, c, xs, i, xj.shape) for c, xj in zip(cols, xs)]
            for i in range(len(xs))]


def hvp(f: Callable, *xv: Any) -> Any:
    """The Hessian-vector product H(x) v of scalar ``f``, without forming H.

    ``hvp(f, x, v)`` computes it; ``hvp(f)`` is the function ``(x, v) -> H(x) v``. ``x``
    may be a pytree (a dict of parameters, say) and ``v`` then has the same structure.
    """
    check_callable("hvp", f)
    if not xv:
        @functools.wraps(f)
        def hvp_f(x: Any, v: Any, **kwargs: Any) -> Any:
            return _hvp(functools.partial(f, **kwargs) if kwargs else f, x, v)
        return hvp_f
    if len(xv) != 2:
        raise ArgumentError(f"hvp: call it as hvp(f, x, v) or hvp(f)(x, v), not with "
                            f"{len(xv)} argument(s) after f")
    return _hvp(f, *xv)


def _hvp(f: Callable, x: Any, v: Any) -> Any:
    x_leaves, x_def = tree_flatten(x)
    vs = leaves_like("hvp", "v", "x", x_def, v)
    for xl, vl in zip(x_leaves, vs):
        if leaf_shape(xl) != leaf_shape(vl):
            raise ShapeError(f"hvp: v has shape {leaf_shape(vl)} but x has shape {leaf_shape(xl)}")
    ops, nested = context("hvp", (x, v))
    if nested is None:
        return run_paused(ops, lambda a, b: _hvp(f, a, b), (x, v))
    with own(ops, nested):
        call, trees = primals(ops, (x,), (0,))
        xs = flat(trees)
        y = scalar("hvp", output("hvp", ops, f(*call)))
        disconnected("hvp", f, None, [y])
        # reverse over forward: H v is the gradient of the directional derivative <grad f, v>;
        # tangents given as arrays are leaves that need no gradient of their own
        ts = [t if isinstance(t, Variable) else ops.var(getattr(t, "raw", t),
                                                        requires_grad=False) for t in vs]
        d = ops.jvp(y, xs, ts, create_graph=True)
        hs = ops.grad(d, xs, create_graph=nested)
        return tree_unflatten(x_def, results(nested, hs))

# ---------------------------------------------------------------- Jacobians

# jacobian(mode="auto")'s cost model, measured on one core in CPU time
# (benchmarks/jacobian_modes.py): both modes run one sweep of stacked seeds (the m rows of the
# identity as cotangents, or the n columns as tangents) and cost about the same Python per
# recorded entry, so what tells them apart is their work on the stacks, per seed a unit for
# each entry of a value a rule computes. An entry whose rule runs on a dense stack does the
# larger of its output's size and its inputs' (a matmul's m * n); the identity seed of a 1-D
# input (forward) or output (reverse) stays a diagonal stack (engine/batched.py) through the
# elementwise entries next to it, one unit each, and the first matrix product it meets makes
# it dense at the cost of one pass over the product (none at all on the identity itself). The
# walk that follows the stacks costs WALK per entry, a unit of work WORK: where a pass over the
# whole Jacobian (n * m units) costs less than the walk, the sweep of fewer seeds is taken
WORK, WALK = 1e-9, 4e-6


def prefers_forward(xs: Sequence[Variable], ys: Sequence[Variable]) -> bool:
    """For ``jacobian(mode="auto")``: whether one batched forward sweep of every input
    direction is expected to be faster than one batched reverse sweep of every output row."""
    n = sum(x.size for x in xs)
    m = sum(y.size for y in ys)
    start = min(x.position for x in xs)
    if n * m * WORK < (xs[0].rec.tape.end - start) * WALK:
        return n <= m       # (the entries recorded since x bound those the walk would visit)
    entries = ancestors(list(ys), start=start, stop={x.node for x in xs})
    fwd, rev = _stacked_work(entries, xs, ys, start)
    return n * fwd < m * rev or n * fwd == m * rev and n <= m


EYE, DIAGONAL, DENSE = 0, 1, 2      # the structure of an entry's stack of seeds


def _stacked_work(entries: list[Entry], xs: Sequence[Variable], ys: Sequence[Variable],
                  start: int) -> tuple[int, int]:
    """The work per seed of the forward sweep from ``xs`` and of the reverse sweep from ``ys``
    over ``entries`` (oldest first), following where each sweep's stacks stay diagonal."""
    shape = xs[0].shape if len(xs) == 1 and len(xs[0].shape) == 1 else None
    state = {x.node: DENSE if shape is None else EYE for x in xs}
    get = state.get
    facts = []
    fwd = 0
    for v in entries:       # forward, oldest first: the tangent of each entry
        ins = v.more        # (Entry.inputs, inlined)
        if ins is None:
            ins = (v.in0,) if v.in1 is UNARY else (v.in0, v.in1)
        size = 1
        for d in v.shape:
            size *= d
        s = k = 0
        t = EYE             # the structure of the k tangents reaching v: the densest
        for a in ins:
            if type(a) is Entry:
                s += a.size
                u = get(a)
                if u is not None:
                    k += 1
                    if u > t:
                        t = u
            else:
                s += a.size if type(a) is np.ndarray else getattr(a, "size", 1)
        work = s if s > size else size
        facts.append((v, ins, work))
        if not k:
            continue        # no tangent reaches it
        prim = v.prim
        if t != DENSE and v.shape == shape and (prim.elementwise or prim.alias):
            state[v] = t if prim.alias and k == 1 else DIAGONAL
            fwd += 1
            continue
        if t != DENSE and k == 1 and prim.on_diagonal is not None:
            fwd += 0 if t == EYE else size
        else:
            fwd += work
        state[v] = DENSE
    shape = ys[0].shape if len(ys) == 1 and len(ys[0].shape) == 1 else None
    state = {y.node: DENSE if shape is None else EYE for y in ys}
    get = state.get
    rev = 0
    for v, ins, work in reversed(facts):    # reverse, newest first: each cotangent
        g = get(v)
        if g is None:
            continue
        prim = v.prim
        if g == DENSE:
            rev += work
        else:
            rev += 1
            keeps = prim.elementwise or prim.alias
            passes = _passes(prim)
            materialised = False
        i = -1
        for a in ins:
            i += 1
            if type(a) is not Entry or not a.requires_grad or a.position < start:
                continue
            if g == DENSE:
                t = DENSE
            elif keeps and a.shape == shape:
                t = g if prim.alias or g == EYE and i in passes else DIAGONAL
            else:
                t = DENSE
                if prim.on_diagonal is not None:
                    rev += 0 if g == EYE else a.size
                elif not materialised:
                    rev += work
                    materialised = True
            old = get(a)
            if old is not None:
                t = DENSE if old == DENSE or t == DENSE else DIAGONAL
                if t == DENSE:
                    rev += a.size
            state[a] = t
    return fwd, rev


def _passes(prim: Any) -> tuple:
    """The inputs whose cotangent is the output's as it is (x + y, x - y in x): linear jointly
    in every input, with 0 a unit at them (x + 0 is x, so the derivative in x is 1)."""
    unit, linear = prim.unit, prim.linear
    if unit is None or unit.value != 0 or linear is None or linear.kind != JOINT or \
            linear.positions is not None:
        return ()
    return unit.kept


def concat_flat(ops: Ops, gs: Sequence[Variable]) -> Variable:
    """The gradients of several leaves as one flat recorded vector."""
    return ops.concatenate([ops.reshape(g, (g.size,)) for g in gs])


def split_rows(ops: Ops, nested: bool, m: Any, xs: list[Variable], i: int, tail: tuple) -> Result:
    """The rows of ``m`` (first axis: the flattened leaves ``xs``) belonging to leaf ``i``."""
    lo = sum(x.size for x in xs[:i])
    rows = slice(lo, lo + xs[i].size)
    shape = xs[i].shape + tuple(tail)
    if nested:
        return ops.reshape(ops.getitem(m, rows), shape)
    return np.array(np.asarray(getattr(m, "raw", m))[rows].reshape(shape))


def _jac_rev(ops: Ops, y: Variable, xs: list[Variable], nested: bool) -> list[Result]:
    """Every row in one reverse sweep of a batch of cotangents (the identity, row k the
    gradient of y[k]); under vmap, one sweep per output entry."""
    if y.size == 0 or any(x.size == 0 for x in xs):
        return [_zeros(ops, nested, y.shape + x.shape, y.dtype) for x in xs]
    if _stackable(y, xs):
        m = y.size
        if not nested:
            return _rev_values(ops, y, xs)
        basis = ops.var(identity(m, y.dtype).reshape((m,) + y.shape), requires_grad=False)
        gs = ops.grad(y, xs, seed=wrap(basis, new_level()), create_graph=nested)
        return [_rows(ops, nested, g, m, y.shape + x.shape) for g, x in zip(gs, xs)]
    rows: list[list[Variable]] = [[] for _ in xs]
    for k in range(y.size):
        seed = _unit(k, y.shape, y.dtype)
        for row, g in zip(rows, ops.grad(y, xs, seed=seed, create_graph=nested)):
            row.append(g)
    return [_assemble(ops, nested, row, 0, y.shape + x.shape) for row, x in zip(rows, xs)]


def _rev_values(ops: Ops, y: Variable, xs: list[Variable]) -> list[np.ndarray]:
    """dy/dxs as new arrays from one value-only reverse sweep of the identity's stacked rows
    (each vjp rule run once on the stacks, nothing recorded)."""
    m = y.size
    seed = Stack.identity(m, y.dtype) if y.ndim == 1 else \
        Stack(identity(m, y.dtype).reshape((m,) + y.shape))
    stop = min(x.position for x in xs)
    grads = sweep(STACKS, ops.tape, y.node, seed, stop, None, {x.node for x in xs}, False)
    out = []
    for x in xs:
        g, shape = grads.get(x.node), y.shape + x.shape
        if type(g) is Stack:
            out.append(g.inner.reshape(shape) if g.fresh else g.inner.reshape(shape).copy())
        else:   # no path from x (None), or the same for every row
            out.append(np.zeros(shape, y.dtype) if g is None else
                       np.broadcast_to(g, (m,) + x.shape).reshape(shape).copy())
    return out


def _stackable(y: Variable, xs: list[Variable]) -> bool:
    """Whether one sweep of stacked cotangents gives dy/dxs: no value is batched by a vmap and
    every entry between them is a registered primitive (a custom rule may sweep on its own)."""
    if type(y) is Batched or any(type(x) is Batched for x in xs):
        return False
    entries = ancestors([y], start=min(x.position for x in xs), stop={x.node for x in xs})
    return all(e.prim is None or REGISTRY.get(e.prim.name) is e.prim for e in entries)


def _rows(ops: Ops, nested: bool, g: Variable, m: int, shape: tuple) -> Result:
    """The batched sweep's gradient (m rows first) shaped as the Jacobian; one that is no
    batch (the zeros of an input the output does not reach) is the same in every row."""
    if type(g) is Batched:
        g = g.inner
    elif nested:
        g = ops.broadcast_to(g, (m,) + g.shape)
    else:
        return np.broadcast_to(g.raw, (m,) + g.shape).reshape(shape).copy()
    return ops.reshape(g, shape) if nested else np.array(g.raw).reshape(shape)


def _jac_fwd(ops: Ops, y: Variable, xs: list[Variable], nested: bool) -> list[Result]:
    """Per input, every basis tangent pushed through one batched forward sweep (batched_jvp)."""
    jacs = []
    for x in xs:
        if y.size == 0 or x.size == 0:
            jacs.append(_zeros(ops, nested, y.shape + x.shape, y.dtype))
            continue
        jacs.append(_fwd(ops, y, x, nested))
    return jacs


def _fwd(ops: Ops, y: Variable, x: Variable, nested: bool) -> Result:
    """dy/dx by one batched forward sweep: recorded when nested, else on values (recorded
    only where a custom primitive needs it)."""
    jac = None if nested else jacobian_fwd_values(ops, y, x)
    return result(nested, jacobian_fwd_batched(ops, y, x)) if jac is None else jac


def _assemble(ops: Ops, nested: bool, parts: list[Variable], axis: int, shape: tuple) -> Result:
    """Stack rows (axis 0) or columns (last axis) and give the Jacobian its full shape."""
    if nested:
        return ops.reshape(ops.stack(parts, axis=axis), shape)
    return np.stack([p.raw for p in parts], axis=axis).reshape(shape)


def _unit(k: int, shape: tuple, dtype: np.dtype) -> np.ndarray:
    e = np.zeros(int(np.prod(shape)), dtype=dtype)
    e[k] = 1
    return e.reshape(shape)


def _zeros(ops: Ops, nested: bool, shape: tuple, dtype: np.dtype) -> Result:
    z = np.zeros(shape, dtype=dtype)
    return ops.var(z, requires_grad=False) if nested else z


def jacobian_fwd_batched(ops: Ops, y: Variable, x: Variable) -> Variable:
    """dy/dx shaped y.shape + x.shape: every basis tangent of x in one batched forward sweep."""
    ops = ops
    n = x.size
    if n == 0 or y.size == 0:
        return ops.var(np.zeros(y.shape + x.shape, dtype=y.dtype), requires_grad=False)
    basis = np.eye(n, dtype=x.dtype).reshape((n,) + x.shape)
    cols = batched_jvp(ops, y, x, basis)
    moved = cols if y.ndim == 0 else ops.transpose(cols, tuple(range(1, y.ndim + 1)) + (0,))
    return ops.reshape(moved, y.shape + x.shape)


def jacobian_fwd_values(ops: Ops, y: Variable, x: Variable) -> np.ndarray | None:
    """dy/dx as a new array, y.shape + x.shape: ``jacobian_fwd_batched`` recording nothing
    (None where the sweep meets a custom primitive, which needs the recorded sweep)."""
    n = x.size
    cols = batched_jvp_values(ops, y, x, Stack.identity(n, x.dtype) if x.ndim == 1 else
                              identity(n, x.dtype).reshape((n,) + x.shape))
    if cols is None:
        return None
    # the tangent axis last: a view of the sweep's new array (never of an argument such as W)
    moved = cols.transpose(tuple(range(1, cols.ndim)) + (0,)) if y.ndim else cols
    return moved.reshape(y.shape + x.shape)


@functools.lru_cache(maxsize=8)
def _identity(n: int, dtype: np.dtype) -> np.ndarray:
    eye = np.eye(n, dtype=dtype)
    eye.setflags(write=False)
    return eye


def identity(n: int, dtype: np.dtype) -> np.ndarray:
    """The n x n identity, read-only: the basis of a forward-mode Jacobian, kept for the next
    Jacobian of its size up to 1 MB (making it costs a pass over n^2 zeros)."""
    return _identity(n, dtype) if n * n * dtype.itemsize <= 1 << 20 else np.eye(n, dtype=dtype)


def hessian_batched(ops: Ops, y: Variable, x: Variable) -> Variable:
    """The Hessian of scalar y in x (x.shape + x.shape): forward over reverse, one sweep."""
    return jacobian_fwd_batched(ops, ops.grad(y, x, create_graph=True), x)
