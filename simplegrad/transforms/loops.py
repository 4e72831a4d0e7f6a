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
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..engine.batching import Batched, innermost, new_level, wrap
from ..engine.explain import origins
from ..engine.ops import Ops
from ..engine.params import FREE
from ..engine.render import head
from ..engine.taylor import carry
from ..engine.variable import Variable
from ..errors import ArgumentError, ShapeError
from ..primitives.core import value_of
from ..primitives.lazy import is_lazy
from ..primitives.loops import (
    COND,
    SCAN,
    WHILE,
    Aval,
    is_float,
    keeping_history,
    layout_of,
    ones,
    unpack,
)
from ..primitives.methods import VALUES
from ..program.compile import compile as compile_program
from ..program.core import Program, extract
from ..pytree import tree_flatten, tree_unflatten
from .arguments import around, recording_ops, running
from .checkpoint import _BlockOps

__all__ = ["scan", "fori_loop", "while_loop", "cond", "switch"]

COMPILE_AFTER = 16      # runs of a body after which it runs compiled


# ---------------------------------------------------------------- bodies


class Body:
    """A sub-program with flat inputs and outputs, and the bodies derived from it."""

    def __init__(self, program: Program, ins: Sequence[Aval], outs: Sequence[Aval],
                 example: Sequence[Any], name: str):
        self.program = program
        self.ins = tuple((tuple(s), np.dtype(d)) for s, d in ins)
        self.outs = tuple((tuple(s), np.dtype(d)) for s, d in outs)
        self.example = tuple(example)
        self.name = name
        self._derived: dict = {}
        self._build: Callable | None = None     # how a derived body was traced (notes)
        # each step runs the program on values of the inputs' shapes and dtypes (the loop
        # keeps them so): the run without the checks of a call on new arrays, where the
        # program offers one; a body run many times, compiled to numpy code (no per-entry
        # dispatch) once it has run COMPILE_AFTER times
        self._run = getattr(program, "_run", None)
        self._calls = 0
        self._compiled: Any = None

    def __repr__(self) -> str:
        return self.name

    def __call__(self, *values: Any) -> list:
        """The outputs' values at these inputs (lazy ones: the program run on them, lazily
        where its entries are)."""
        for v in values:
            if type(v) is not np.ndarray and is_lazy(v):
                got = self.program(*values)
                return [got] if self.program.single else got
        fast = self._compiled
        if fast is not None:
            return fast(*values)
        self._calls += 1
        if self._calls == COMPILE_AFTER:
            self._compile()
        if self._run is not None:
            return self._run([v if type(v) is np.ndarray else np.asarray(v) for v in values])
        return self.program(*values)

    def _compile(self) -> None:
        """Run the body as compiled numpy code from now on (where it compiles)."""
        try:
            fn = compile_program(self.program, name="body")
        except Exception:       # (a program the compiler does not take runs as it did)
            return
        self._compiled = (lambda *v: [fn(*v)]) if self.program.single else fn

    def lines(self, explain: bool = False) -> list[str]:
        """The body as text, one line per entry (as a program prints); ``explain``: each line
        of a derived body with what it differentiates (``notes``), its loops explained."""
        notes = self.notes() if explain else None
        return self.program.format(raw=True, explain=explain, notes=notes).splitlines()

    def notes(self) -> dict[str, str]:
        """Entry name -> what it differentiates, for a body derived by differentiating one
        (a vjp or jvp body): read off a second trace of it, made when first asked."""
        got = self._derived.get(("notes",))
        if got is None:
            build = self._build
            got = {} if build is None else _notes(build, self.ins, self.example,
                                                   {e.label for e in self.program.entries})
            self._derived[("notes",)] = got
        return got

    def work(self) -> int:
        """The entries one run of the body computes (a loop inside: by its trips)."""
        return self.program.stats().work

    def dependence(self, *values: Any) -> Any:
        """The body's Jacobian pattern at these input values: a boolean csr_array, its
        outputs' entries (concatenated) by its float inputs' (concatenated, C order)."""
        return dependence(self.program, values)

    def reads_integers(self) -> bool:
        """Whether the body's pattern may depend on its integer inputs' values (one reaches
        a rule that reads values: an index, a loop)."""
        got = self._derived.get(("reads_integers",))
        if got is None:
            got = self._derived[("reads_integers",)] = reads_integers(self.program)
        return got

    def record(self, o: Any, *inputs: Any) -> list:
        """The outputs recorded on ``o`` (the Ops, or VALUES for values)."""
        if o is VALUES or not isinstance(o, Ops):
            return self.program(*[value_of(x) for x in inputs])
        stack = getattr(_SEEN, "stack", None)
        if not stack:
            return self.program.record(o, *inputs)
        seen, recorded = stack[-1], {}      # (traced again for notes: who recorded what)
        for x, spec in zip(inputs, self.program.inputs):
            if isinstance(x, Variable):
                seen.setdefault(id(x.node), (self, spec.name))
        outs = self.program.record(o, *inputs, seen=recorded)
        for k, line in recorded.items():
            seen.setdefault(k, (self, line))
        return outs

    def derive(self, key: tuple, ins: Sequence[Aval], example: Sequence[Any],
               build: Callable) -> Body:
        """The body traced from ``build(o, *leaves)`` at ``ins``, once per key."""
        got = self._derived.get(key)
        if got is None:
            got = self._derived[key] = _trace(build, ins, example, f"{self.name}.{key[0]}")
        return got

    def vjp(self, wrt: tuple[int, ...]) -> Body:
        """(ins, one cotangent per float output) -> the cotangents of the inputs at ``wrt``."""
        floats = [j for j, a in enumerate(self.outs) if is_float(a)]
        n = len(self.ins)

        def build(o: Ops, *a: Any) -> list:
            outs = self.record(o, *a[:n])
            total = None
            for j, g in zip(floats, a[n:]):
                if isinstance(outs[j], Variable):
                    term = o.sum(o.mul(outs[j], g))
                    total = term if total is None else o.add(total, term)
            targets = [a[i] for i in wrt]
            if total is None:
                return [np.zeros(self.ins[i][0], self.ins[i][1]) for i in wrt]
            grads = o.grad(total, targets, create_graph=True)
            return list(grads)

        example = [*self.example, *(ones(self.outs[j][0], self.outs[j][1]) for j in floats)]
        return self.derive(("vjp", wrt), [*self.ins, *(self.outs[j] for j in floats)],
                           example, build)

    def jvp(self, moving: tuple[int, ...]) -> Body:
        """(ins, one tangent per input at ``moving``) -> (outs, one tangent per float output)."""
        n = len(self.ins)

        def build(o: Ops, *a: Any) -> list:
            outs = self.record(o, *a[:n])
            tangents = []
            for (shape, dtype), y in zip(self.outs, outs):
                if np.dtype(dtype).kind not in "fc":
                    continue
                t = None
                if isinstance(y, Variable) and y.requires_grad:
                    t = o.jvp(y, [a[i] for i in moving], list(a[n:]), create_graph=True)
                tangents.append(np.zeros(shape, dtype) if t is None else t)
            return [*outs, *tangents]

        example = [*self.example, *(ones(self.ins[i][0], self.ins[i][1]) for i in moving)]
        return self.derive(("jvp", moving), [*self.ins, *(self.ins[i] for i in moving)],
                           example, build)

    def taylor(self, moving: tuple[int, ...], order: int) -> Body:
        """(ins, coefficients 1..order of each input at ``moving``) -> (outs, coefficients
        1..order of each float output): the body's truncated Taylor series."""
        n = len(self.ins)

        def build(o: Ops, *a: Any) -> list:
            leaves = a[:n]
            outs = self.record(o, *leaves)
            known = {leaves[i]: [leaves[i], *a[n + j * order:n + (j + 1) * order]]
                     for j, i in enumerate(moving)}
            coefs = []
            for (shape, dtype), y in zip(self.outs, outs):
                if np.dtype(dtype).kind not in "fc":
                    continue
                series = [y] + [None] * order
                if isinstance(y, Variable) and y.rec is o:
                    given = [c for x, c in known.items() if x is y]
                    series = given[0] if given else carry(o, y, known, order, True)
                coefs += [np.zeros(shape, dtype) if c is None else c for c in series[1:]]
            return [*outs, *coefs]

        ins = [*self.ins, *(self.ins[i] for i in moving for _ in range(order))]
        example = [*self.example, *(ones(self.ins[i][0], self.ins[i][1]) for i in moving
                                    for _ in range(order))]
        return self.derive(("taylor", moving, order), ins, example, build)

    def batched(self, flags: tuple[bool, ...], size: int) -> Body:
        """The body on ``size`` examples at once: inputs at ``flags`` carry them along a
        leading axis, every output does."""
        ins = [((size, *s), d) if f else (s, d) for (s, d), f in zip(self.ins, flags)]
        example = [np.broadcast_to(v, (size, *np.shape(v))).copy() if f else v
                   for v, f in zip(self.example, flags)]

        def build(o: Ops, *a: Any) -> list:
            level = new_level()
            outs = self.record(o, *[wrap(x, level) if f else x for x, f in zip(a, flags)])
            stacks = []
            for (shape, _), y in zip(self.outs, outs):
                if type(y) is Batched and y.level == level:
                    stacks.append(y.inner)
                else:           # the same for every example
                    y = o.reshape(y, (1, *shape)) if isinstance(y, Variable) else \
                        np.reshape(y, (1, *shape))
                    stacks.append(o.expand(y, (size, *shape)) if isinstance(y, Variable)
                                  else np.broadcast_to(y, (size, *shape)).copy())
            return stacks
        return self.derive(("batched", flags, size), ins, example, build)


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


def _traced(build: Callable, ins: Sequence[Aval], example: Sequence[Any]) -> tuple:
    """``build(o, *leaves)`` recorded on a scratch Ops: the Ops, the leaves, the outputs."""
    s = Ops(simplify=True)
    leaves = [s.leaf(np.array(v, dtype=d).reshape(shape), None, is_float((shape, d)))
              for (shape, d), v in zip(ins, example)]
    with np.errstate(all="ignore"):
        outs = build(s, *leaves)
    return s, leaves, [_settled(s, y) for y in outs]


def _trace(build: Callable, ins: Sequence[Aval], example: Sequence[Any], name: str) -> Body:
    """A derived body: ``build(o, *leaves)`` recorded once on a scratch Ops."""
    s, leaves, outs = _traced(build, ins, example)
    program = extract(leaves, outs, s)
    body = Body(program, ins, [(y.shape, y.dtype) for y in outs], example, name)
    body._build = build
    return body


_SEEN = threading.local()     # while a derived body is traced again for its notes


def _notes(build: Callable, ins: Sequence[Aval], example: Sequence[Any],
           kept: set[str]) -> dict[str, str]:
    """What each entry of a derived body differentiates, by name: the same trace made again
    (it names its entries as the first did), noting which body recorded each entry. An entry
    the sweep recorded pulling back through a body's line says which line and input
    (``d(v2 = v0 * v0)/dv0 in square``); one recorded by running a derived body keeps that
    body's note."""
    seen: dict[int, tuple] = {}     # id of an entry -> (the body, its entry or input name)
    stack = getattr(_SEEN, "stack", None)
    if stack is None:
        stack = _SEEN.stack = []
    stack.append(seen)
    try:
        s, _, _ = _traced(build, ins, example)
    finally:
        stack.pop()
    tape = s.tape
    notes: dict[str, str] = {}
    for p, (entry, i) in origins(tape).items():
        name = tape.at(p).name
        body, line = seen.get(id(entry), (None, None))
        if name not in kept or body is None or type(line) is str:
            continue
        if i < 0:       # a tangent pushed through the line
            notes[name] = f"jvp of ({head(body.program.format_entry(line))}) in {body!r}"
            continue
        wrt = seen.get(id(entry.inputs[i]), (None, None))[1]
        if wrt is None:
            continue
        wrt = wrt if type(wrt) is str else wrt.label
        notes[name] = f"d({head(body.program.format_entry(line))})/d{wrt} in {body!r}"
    for p, x in tape.accumulations.items():
        name = tape.at(p).name
        body, line = seen.get(id(x), (None, None))
        if name in kept and body is not None and name not in notes:
            what = tape.at(p).prim.accumulation or "accumulation of"
            of = line if type(line) is str else line.label
            notes[name] = f"{what} the cotangents of {of} in {body!r}"
    for v in tape.entries:
        body, line = seen.get(id(v), (None, None))
        if body is not None and type(line) is not str and v.name in kept and \
                v.name not in notes:
            note = body.notes().get(line.label)
            if note is not None:
                notes[v.name] = note
    return notes


def _settled(s: Ops, y: Any) -> Variable:
    """An output as a Variable of ``s`` (a constant becomes a leaf, so a program keeps it)."""
    if isinstance(y, Variable) and y.rec is s:
        return y
    return s.leaf(np.array(value_of(y)), None, False)


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
            outs.append(_settled(s, y))
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
        with keeping_history():     # (a gradient may follow: the forward keeps the carries)
            return ops.apply(prim, tuple(inputs), attrs, None), True
    return ops.apply(prim, tuple(inputs), attrs, None), True


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
        bodies.append(_trace(build, ins, example, f"branch{k}"))
    offsets, width = layout_of(avals)
    idx = index if isinstance(index, Variable) else np.asarray(index)
    if np.dtype(getattr(idx, "dtype", np.int64)).kind not in "biu":
        raise ArgumentError(f"switch: index must be an integer or bool, got dtype {idx.dtype}")
    out, recorded = _record("switch", COND, [idx, *reads, *flat],
                            {"branches": tuple(bodies), "layout": offsets, "width": width})
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
    body = Body(prog, ins, avals, [*rvals, *cvals, *xvals], getattr(f, "__name__", "body"))
    offsets, width = layout_of(avals[:nk], avals[nk:])
    attrs = {"body": body, "nc": len(reads), "nk": nk, "length": n, "reverse": bool(reverse),
             "counted": False, "layout": offsets, "width": width}
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

    ``checkpoints``: what a reverse sweep on values keeps, "all" carries or that many
    (binomial checkpointing, recomputing the others); a recorded gradient keeps them all."""
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

    body = _trace(rebased(bprog, breads), ins, example, getattr(body_fun, "__name__", "body"))
    test = _trace(rebased(tprog, treads), ins, example, getattr(cond_fun, "__name__", "cond"))
    offsets, width = layout_of([*bavals, ((), np.dtype(np.int64))])
    attrs = {"body": body, "test": test, "nc": nr, "checkpoints": checkpoints,
             "max_steps": None if max_steps is None else int(max_steps),
             "layout": offsets, "width": width}
    out, recorded = _record("while_loop", WHILE, [*reads, *cflat], attrs)
    o = _ops_for(recorded, out)
    carry = _leaves_of(o, out, bavals, offsets[:len(bavals)])
    if not recorded:
        carry = [np.asarray(v) for v in carry]
    return tree_unflatten(cdef, carry)


# ---------------------------------------------------------------- sparsity (the loops' rules)


def reads_integers(program: Program) -> bool:
    """Whether a value computed from an integer input of ``program`` reaches a sparsity rule
    that reads values (not only shapes)."""
    from ..primitives.sparsity_rules import rule_for
    from ..program.nodes import INPUT, NODE, refs_of
    tainted = {(INPUT, k) for k, i in enumerate(program.inputs)
               if np.dtype(i.dtype).kind not in "fc"}
    for k, node in enumerate(program.entries):
        refs = [(r.kind, r.index) for r in refs_of(node)]
        if any(r in tainted for r in refs):
            if rule_for(node.prim).reads:
                return True
            tainted.add((NODE, k))
    return False


def dependence(program: Program, values: Sequence[Any]) -> Any:
    """Which entries of the inputs (float ones, concatenated in C order) each entry of the
    outputs (concatenated) may depend on, at these input values: a boolean csr_array, the
    program's Jacobian pattern (the inputs taken as varying; the rules of
    primitives/sparsity_rules.py propagated over its entries)."""
    from .sparse import _scipy, walk_dependence
    sp = _scipy()
    values = [np.asarray(v) for v in values]
    total = sum(v.size for v in values)
    vals: list = [*values, *(c.value for c in program.constants)]
    pats: list = []
    col = 0
    for v in values:
        if v.dtype.kind in "fc":
            pats.append(sp.csr_array((np.ones(v.size, np.float32),
                                      (np.arange(v.size), col + np.arange(v.size))),
                                     shape=(v.size, total)))
        else:
            pats.append(None)
        col += v.size
    pats += [None] * len(program.constants)
    varies = [True] * len(values) + [False] * len(program.constants)
    at = walk_dependence(program, vals, pats, varies)
    blocks = []
    for r in program.outputs:
        p = pats[at(r)]
        n = int(np.size(vals[at(r)]))
        blocks.append(sp.csr_array((n, total), dtype=np.float32) if p is None else p)
    return sp.csr_array(sp.vstack(blocks, format="csr"), dtype=bool)
