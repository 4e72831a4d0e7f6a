"""Loops and branches: ``sg.scan``, ``sg.fori_loop``, ``sg.while_loop``, ``sg.cond``,
``sg.switch``, with JAX's signatures and semantics (``jax.lax``).

Each call traces its functions once, on a scratch Ops, into sub-programs (a ``Body``) and
records ONE entry of a loop primitive (primitives/loops.py) holding them; the carries,
operands and results are pytrees. A Variable the functions read through a closure (a
``sg.Parameter``, a Variable of the Ops around, a batched value of a vmap around) becomes an
input of the sub-program and of the entry, so derivatives flow to it as to an operand. The
rules derive the bodies they need (vjp, jvp, the carries' history) from a body by tracing it
again, once; a derived body is kept on the body it came from.

Called on arrays outside any transform, the functions return arrays (the loop runs on
values); given Variables, or inside a transform, they record.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from ..engine.batching import Batched, innermost
from ..engine.ops import Ops
from ..engine.params import FREE
from ..engine.variable import Variable
from ..errors import ArgumentError, ShapeError
from ..primitives.loops import (
    COND,
    SCAN,
    WHILE,
    Aval,
    cond_attrs,
    keeping_history,
    noting_trips,
    scan_attrs,
    unpack,
    while_attrs,
)
from ..primitives.methods import VALUES
from ..primitives.rewrites import attrs_key, constant_key
from ..program.body import Body, settled, trace_body
from ..program.core import Program, extract
from ..pytree import tree_flatten, tree_unflatten
from .arguments import around, recording_ops, running
from .checkpoint import _BlockOps

__all__ = ["scan", "fori_loop", "while_loop", "cond", "switch"]

class _LoopOps(_BlockOps):
    """The scratch Ops a body records on: another Ops' Variable, or a batched value of a
    vmap around the loop, read through a closure, becomes a leaf here (kept in ``reads``)."""

    def join(self, prim: Any, inputs: tuple, x: Variable) -> Any:
        """The leaf entry standing for ``x`` here (made on first use)."""
        if type(x) is not Batched:
            return super().join(prim, inputs, x)
        got = self.reads.get(id(x))
        if got is None:
            leaf = self.leaf(_leaf_value(x), None, True).node
            got = self.reads[id(x)] = (x, leaf)
        return got[1]

    def apply(self, prim: Any, inputs: Any, attrs: dict | None = None,
              name: str | None = None) -> Any:
        """As ``Ops.apply``, a batched value of another Ops read as a leaf of this one."""
        inputs = tuple(self.join(prim, (), x) if type(x) is Batched and
                       innermost(x).rec is not self else x for x in inputs)
        return Ops.apply(self, prim, inputs, attrs, name)


def _trace_user(fname: str, fn: Callable, treedefs: Sequence[Any],
                examples: Sequence[Sequence[Any]]) -> tuple:
    """``fn`` traced on a scratch Ops at leaves of these structures (one example value each):
    the program (inputs: the Variables read through closures, then every leaf), the output's
    pytree structure and leaves' avals, and the Variables read."""
    s = _LoopOps()
    args, leaves = [], []
    for treedef, values in zip(treedefs, examples):
        made = [s.leaf(np.array(v), None, np.asarray(v).dtype.kind in "fc") for v in values]
        leaves += made
        args.append(tree_unflatten(treedef, made))
    try:
        with running(s):
            out = fn(*args)
        flat, outdef = tree_flatten(out)
        outs = []
        for y in flat:
            if isinstance(y, Variable) and y.rec is not s:
                y = s.reshape(y, y.shape)     # a Variable read: recorded here
            outs.append(settled(s, y))
        reads = list(s.reads.values())
        program = extract([leaf for _, leaf in reads] + leaves, outs)
        avals = [(y.shape, y.dtype) for y in outs]
        return program, outdef, avals, [x for x, _ in reads], [leaf.raw for _, leaf in reads]
    finally:
        s.release()


def _leaf_value(x: Any) -> Any:
    """One example's value of a leaf (a batched value's first example)."""
    if type(x) is Batched:
        value = innermost(x).raw
        while type(x) is Batched:
            value, x = value[0], x.inner
        return np.asarray(value)
    if isinstance(x, Variable):
        return x.raw
    return np.asarray(x)


def _aval(x: Any) -> Aval:
    v = _leaf_value(x)
    return tuple(np.shape(v)), np.asarray(v).dtype


def _record(fname: str, prim: Any, inputs: Sequence[Any], attrs: dict) -> tuple[Any, bool]:
    """The packed output: recorded on the Ops of the Variables among ``inputs`` (or of the
    transform around), or computed on values; and whether it was recorded."""
    recs = []
    for x in inputs:
        if isinstance(x, Variable) and x.rec is not FREE and not any(x.rec is r for r in recs):
            recs.append(x.rec)
    # a loop inside a loop's body: the inner body's scratch Ops, which reads the others'
    inner = [r for r in recs if r.absorbs and all(r is q or r.within(q) for q in recs)]
    ops = inner[-1] if len(recs) > 1 and inner else recording_ops(fname, inputs)
    if ops is None or ops is FREE:
        ops = around() or ops
        if ops is FREE:
            ops = FREE.implicit()
    if ops is None:
        return prim.forward(*[np.asarray(x) for x in inputs], **attrs), False
    # arrays as leaves that take no gradient: an entry's constants would take its dtype
    inputs = [x if isinstance(x, Variable) else ops.leaf(np.asarray(x), None, False)
              for x in inputs]
    if ops.recording and any(x.requires_grad for x in inputs):
        # (a gradient may follow: the forward keeps the carries)
        with keeping_history([x.requires_grad for x in inputs]):
            return ops.apply(prim, tuple(inputs), attrs, None), True
    return ops.apply(prim, tuple(inputs), attrs, None), True


# ---------------------------------------------------------------- bodies traced before
#
# A function given to ``sg.scan`` is often a new closure at every call (a lambda in the
# function being differentiated) whose trace is the same program: the body traced before for
# that program is the one used (its derived bodies, the vjp and the history, and its compiled
# runs with it), so a gradient taken again traces and compiles nothing again. A program
# matches by its structure (entries, attributes, names, shapes and dtypes) and its constants'
# values (a large one by identity: the kept body holds it, so its id is not reused).

KEPT_BODIES = 32        # the bodies kept for their programs, the least recently used dropped
KEPT_BYTES = 1 << 20    # a body holding more (its example values, its constants) is not kept
_BODIES: OrderedDict = OrderedDict()
_BODIES_LOCK = threading.Lock()


def _structure(body: Body) -> Hashable | None:
    """A key equal for two bodies exactly when their programs compute alike (None: one that
    cannot be keyed, a lazy constant's, or one too large to keep)."""
    prog = body.program
    held = sum(int(getattr(v, "nbytes", 0)) for v in body.example) + \
        sum(int(getattr(c.value, "nbytes", 0)) for c in prog.constants)
    if held > KEPT_BYTES:
        return None
    consts = []
    for c in prog.constants:
        v = c.value
        if not isinstance(v, (np.ndarray, np.generic, bool, int, float, complex)):
            return None
        consts.append((c.name, constant_key(v)))
    try:
        key = (body.name, body.ins, body.outs, tuple(prog.inputs), tuple(consts),
               tuple((n.prim, n.args, attrs_key(n.attrs), n.name, n.shape, n.dtype.str,
                      n.order) for n in prog.nodes),
               prog.outputs, prog.single, prog.counts, prog.alike, prog.guards)
        hash(key)
    except TypeError:
        return None
    return key


def _traced_before(body: Body) -> Body:
    """The body kept for a program like ``body``'s, or ``body`` (kept from now on)."""
    key = _structure(body)
    if key is None:
        return body
    with _BODIES_LOCK:
        got = _BODIES.get(key)
        if got is not None:
            _BODIES.move_to_end(key)
            return got
        _BODIES[key] = body
        if len(_BODIES) > KEPT_BODIES:
            _BODIES.popitem(last=False)
    return body


def _leaves_of(o: Any, out: Any, avals: Sequence[Aval], offsets: Sequence[int],
               stacked: bool = False) -> list:
    return unpack(o, out, avals, offsets, stacked)


def _ops_for(recorded: bool, out: Any) -> Any:
    return out.rec if recorded else VALUES


def _as_leaf(x: Any) -> Any:
    """A leaf as an entry takes it: Variables as they are, anything else as an array."""
    return x if isinstance(x, Variable) else np.asarray(x)


# ---------------------------------------------------------------- cond and switch


def switch(index: Any, branches: Sequence[Callable], *operands: Any) -> Any:
    """The branch ``branches[index]`` applied to ``operands`` (index clamped), as one entry."""
    branches = list(branches)
    if not branches or not all(callable(b) for b in branches):
        raise ArgumentError("switch: branches must be a non-empty sequence of functions")
    flat, treedef = tree_flatten(list(operands))
    flat = [_as_leaf(x) for x in flat]
    examples = [_leaf_value(x) for x in flat]
    traced = [_trace_user("switch", lambda ops, b=b: b(*ops), [treedef], [examples])
              for b in branches]
    outdef, avals = traced[0][1], traced[0][2]
    for k, (_, d, a, _, _) in enumerate(traced[1:], 1):
        if d != outdef or [s for s, _ in a] != [s for s, _ in avals]:
            raise ShapeError(f"switch: branch {k} returns {d} with shapes {[s for s, _ in a]}, "
                             f"branch 0 {outdef} with shapes {[s for s, _ in avals]}; every "
                             "branch must return the same structure and shapes")
        if [t for _, t in a] != [t for _, t in avals]:
            raise ShapeError(f"switch: branch {k} returns dtypes {[str(t) for _, t in a]}, "
                             f"branch 0 {[str(t) for _, t in avals]}")
    # every branch reads every branch's closures (in one order), then the operands
    reads: list = []
    for _, _, _, r, _ in traced:
        for x in r:
            if not any(x is y for y in reads):
                reads.append(x)
    bodies = []
    ins = [_aval(x) for x in reads] + [_aval(x) for x in flat]
    example = [_leaf_value(x) for x in reads] + examples
    nr = len(reads)
    for k, (prog, _, _, r, _) in enumerate(traced):
        picks = [next(j for j, y in enumerate(reads) if y is x) for x in r]

        def build(o: Ops, *a: Any, prog: Program = prog, picks: list = picks) -> list:
            return prog.record(o, *[a[j] for j in picks], *a[nr:])
        bodies.append(trace_body(build, ins, example, f"branch{k}"))
    attrs = cond_attrs(bodies)
    offsets = attrs["layout"]
    idx = index if isinstance(index, Variable) else np.asarray(index)
    if np.dtype(getattr(idx, "dtype", np.int64)).kind not in "biu":
        raise ArgumentError(f"switch: index must be an integer or bool, got dtype {idx.dtype}")
    out, recorded = _record("switch", COND, [idx, *reads, *flat], attrs)
    leaves = _leaves_of(_ops_for(recorded, out), out, avals, offsets)
    if not recorded:
        leaves = [np.asarray(v) for v in leaves]
    return tree_unflatten(outdef, leaves)


def cond(pred: Any, true_fn: Callable, false_fn: Callable, *operands: Any) -> Any:
    """``true_fn(*operands)`` where ``pred`` holds, else ``false_fn(*operands)``, as one entry."""
    if isinstance(pred, Variable):
        if np.dtype(pred.dtype).kind not in "biu":
            raise ArgumentError(f"cond: pred must be a bool scalar, got dtype {pred.dtype}")
        if pred.shape != ():
            raise ShapeError(f"cond: pred must be a scalar, got shape {pred.shape}")
    elif np.shape(pred) != ():
        raise ShapeError(f"cond: pred must be a scalar, got shape {np.shape(pred)}")
    index = pred if isinstance(pred, Variable) else np.asarray(bool(np.asarray(pred)))
    return switch(index, [false_fn, true_fn], *operands)


# ---------------------------------------------------------------- scan and fori_loop


def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None,
         reverse: bool = False, unroll: int = 1) -> tuple[Any, Any]:
    """``f(carry, x) -> (carry, y)`` over the leading axis of ``xs``: the final carry and the
    stacked ys, as one entry (``jax.lax.scan``)."""
    if not callable(f):
        raise ArgumentError("scan: f must be a function f(carry, x) -> (carry, y)")
    cflat, cdef = tree_flatten(init)
    cflat = [_as_leaf(x) for x in cflat]
    xflat, xdef = tree_flatten(xs)
    xflat = [_as_leaf(x) for x in xflat]
    lengths = {np.shape(_leaf_value(x))[0] if np.ndim(_leaf_value(x)) else None for x in xflat}
    if None in lengths:
        raise ShapeError("scan: every leaf of xs needs a leading axis to scan over")
    if length is not None:
        lengths.add(int(length))
    if not lengths:
        raise ArgumentError("scan: give xs or length= (the number of steps)")
    if len(lengths) > 1:
        raise ShapeError(f"scan: xs' leading axes and length disagree: {sorted(lengths)}")
    n = lengths.pop()
    cvals = [_leaf_value(x) for x in cflat]
    xvals = [_leaf_value(x)[0] if n else np.zeros(_leaf_value(x).shape[1:],
                                                  _leaf_value(x).dtype) for x in xflat]

    def step(carry: Any, x: Any) -> Any:
        out = f(carry, None if xs is None else x)
        if not isinstance(out, tuple) or len(out) != 2:
            raise ArgumentError("scan: f must return a pair (carry, y)")
        return out

    prog, outdef, avals, reads, rvals = _trace_user("scan", step, [cdef, xdef], [cvals, xvals])
    nk = len(cflat)
    carry_def = outdef.children[0] if outdef.kind is tuple else None
    if carry_def is None or carry_def != cdef:
        raise ArgumentError(f"scan: f's carry must keep the structure of init ({cdef}), got "
                            f"{carry_def}")
    for (shape, dtype), v in zip(avals[:nk], cvals):
        if tuple(shape) != np.shape(v) or np.dtype(dtype) != np.asarray(v).dtype:
            raise ShapeError(f"scan: f's carry must keep init's shapes and dtypes: "
                             f"{np.shape(v)} {np.asarray(v).dtype} became {shape} {dtype}")
    ins = [_aval(x) for x in reads] + [(np.shape(v), np.asarray(v).dtype) for v in cvals] + \
        [(np.shape(v), np.asarray(v).dtype) for v in xvals]
    body = _traced_before(Body(prog, ins, avals, [*rvals, *cvals, *xvals],
                               getattr(f, "__name__", "body")))
    attrs = scan_attrs(body, len(reads), nk, n, reverse)
    offsets = attrs["layout"]
    out, recorded = _record("scan", SCAN, [*reads, *cflat, *xflat], attrs)
    o = _ops_for(recorded, out)
    carry = _leaves_of(o, out, avals[:nk], offsets[:nk])
    ys = _leaves_of(o, out, avals[nk:], offsets[nk:], stacked=True) if n else \
        [np.zeros((0, *s), d) for s, d in avals[nk:]]
    if not recorded:
        carry, ys = [np.asarray(v) for v in carry], [np.asarray(v) for v in ys]
    return tree_unflatten(cdef, carry), tree_unflatten(outdef.children[1], ys)


def fori_loop(lower: Any, upper: Any, body: Callable, init: Any) -> Any:
    """``body(i, val) -> val`` for i from lower to upper - 1: the final val, as one entry."""
    if isinstance(lower, Variable) or isinstance(upper, Variable):
        def test(c: tuple) -> Any:
            return c[0] < c[1]

        def step(c: tuple) -> tuple:
            return (c[0] + 1, c[1], body(c[0], c[2]))
        return while_loop(test, step, (lower, upper, init))[2]
    lo, hi = int(lower), int(upper)

    def step(c: Any, i: Any) -> tuple:
        return body(i, c), None
    step.__name__ = getattr(body, "__name__", "body")
    carry, _ = scan(step, init, np.arange(lo, max(lo, hi)))
    return carry


# ---------------------------------------------------------------- while_loop


def while_loop(cond_fun: Callable, body_fun: Callable, init: Any, max_steps: int | None = None,
               checkpoints: Any = "all") -> Any:
    """``body_fun`` applied to the carry while ``cond_fun(carry)`` holds (at most
    ``max_steps`` times): the final carry, as one entry differentiable in both modes.

    ``checkpoints``: what a reverse sweep keeps, "all" carries or that many (binomial
    checkpointing, recomputing the others), on values and in a recorded gradient's runs."""
    if checkpoints != "all" and (type(checkpoints) is not int or checkpoints < 1):
        raise ArgumentError(f'while_loop: checkpoints must be "all" or a number of carries '
                            f"to keep (1 or more), got {checkpoints!r}")
    if max_steps is not None and (int(max_steps) != max_steps or max_steps < 0):
        raise ArgumentError(f"while_loop: max_steps must be a non-negative integer, got "
                            f"{max_steps!r}")
    cflat, cdef = tree_flatten(init)
    cflat = [_as_leaf(x) for x in cflat]
    cvals = [_leaf_value(x) for x in cflat]
    bprog, bdef, bavals, breads, _ = _trace_user("while_loop", body_fun, [cdef], [cvals])
    if bdef != cdef:
        raise ArgumentError(f"while_loop: body_fun must keep the structure of init ({cdef}), "
                            f"got {bdef}")
    for (shape, dtype), v in zip(bavals, cvals):
        if tuple(shape) != np.shape(v) or np.dtype(dtype) != np.asarray(v).dtype:
            raise ShapeError(f"while_loop: body_fun must keep init's shapes and dtypes: "
                             f"{np.shape(v)} {np.asarray(v).dtype} became {shape} {dtype}")
    tprog, _, tavals, treads, _ = _trace_user("while_loop", cond_fun, [cdef], [cvals])
    if len(tavals) != 1 or tavals[0][0] != () or np.dtype(tavals[0][1]).kind not in "biu":
        raise ShapeError(f"while_loop: cond_fun must return a bool scalar, got "
                         f"{[(s, str(d)) for s, d in tavals]}")
    reads: list = []
    for x in (*breads, *treads):
        if not any(x is y for y in reads):
            reads.append(x)
    nr = len(reads)
    ins = [_aval(x) for x in reads] + [(np.shape(v), np.asarray(v).dtype) for v in cvals]
    example = [_leaf_value(x) for x in reads] + cvals

    def rebased(prog: Program, r: list) -> Callable:
        picks = [next(j for j, y in enumerate(reads) if y is x) for x in r]
        return lambda o, *a: prog.record(o, *[a[j] for j in picks], *a[nr:])

    body = trace_body(rebased(bprog, breads), ins, example, getattr(body_fun, "__name__", "body"))
    test = trace_body(rebased(tprog, treads), ins, example, getattr(cond_fun, "__name__", "cond"))
    attrs = while_attrs(body, test, nr, max_steps, checkpoints)
    offsets = attrs["layout"]
    out, recorded = _record("while_loop", WHILE, [*reads, *cflat], attrs)
    out = noting_trips(out) if recorded else out     # (its entry notes the trips its run took)
    o = _ops_for(recorded, out)
    carry = _leaves_of(o, out, bavals, offsets[:len(bavals)])
    if not recorded:
        carry = [np.asarray(v) for v in carry]
    return tree_unflatten(cdef, carry)
