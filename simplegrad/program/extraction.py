"""Extraction: the entries between some Variables of a tape and its outputs, as the parts of a
Program (``extract`` in core.py builds it; ``op.program`` calls that).

Entries not computed from the inputs become constants holding their recorded values, except
what a reverse sweep spreads from its seed (the seed over the batch, the mean's 1/N) and the
zeros of an unreached gradient: those stay entries, so that they follow the inputs' sizes
(sizes.py). From the tape's events it also reads which constants are a reduction's count
(``Count``: the mean's 1/N) and which values have one shape by construction (a gradient and
its variable). A count is known by where it was recorded, not by its value: a number that
an entry of a counted reduction's pullback scales by (the tape's ``pullbacks``) is that
reduction's count, its multiple and ddof read from the reduction's record and attributes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..engine import explain
from ..engine.derivation import output_labels
from ..engine.guards import decision_text
from ..engine.tape import Asked, BlockEnd, Leaf, ancestors
from ..engine.variable import Entry, Variable, entry_of
from ..errors import ArgumentError, GraphError
from ..primitives.core import normalize_axes
from ..primitives.shape import EXPAND
from .builder import Builder
from .nodes import CONST, INPUT, Guard, Input, Ref
from .sizes import Count


def collect(inputs: Any, outputs: Any, ops: Any = None) -> tuple:
    """The parts of the program between ``inputs`` and ``outputs`` (Variables or entries) of
    one tape (that of ``ops``, or of the Variables given): a Builder holding its inputs,
    constants and nodes, the output refs, whether one output was given, the counts, the
    pairs of one shape, the guards (the tape's decisions on values computed from the
    inputs) and the names a transform gave the outputs' entries (``H[x, y]``)."""
    ins = _variables("inputs", inputs)
    single = isinstance(outputs, (Variable, Entry))
    outs = _variables("outputs", outputs)
    if not outs:
        raise ArgumentError("program: needs at least one output")
    if ops is None:
        ops = next((v.rec for v in outs + ins if isinstance(v, Variable)), None)
        if ops is None:
            raise ArgumentError("program: name the Ops (op.program) when given entries only")
    for v in ins + outs:
        if isinstance(v, Variable) and v.rec is not ops:
            raise GraphError(f"program: {v.name} belongs to another Ops than {outs[0].name}")
    ins = [entry_of(v) for v in ins]
    outs = [entry_of(v) for v in outs]
    slots = {}
    for i, v in enumerate(ins):
        if id(v) in slots:
            raise ArgumentError(f"program: {v.name} is given twice as an input")
        slots[id(v)] = i
    builder = Builder([Input(v.name, v.shape, v.dtype) for v in ins])
    order = explain.orders(ops.tape)
    tape = ops.tape
    # what a reverse sweep spreads from its seed (the seed over the batch, the mean's 1/N)
    # stays entries, so that it follows the inputs' sizes (sizes.py)
    seeded = {id(e.var) for e in tape.events if type(e) is Leaf and e.kind == "seed"}
    zeros = {id(e.var) for e in tape.events if type(e) is Leaf and e.kind == "zeros"}
    origins = explain.origins(tape) if tape.keep else None
    counts: list | None = [] if tape.keep else None
    counted: dict[int, tuple] = {}      # entries that divide by a count -> how
    reached: dict[int, tuple] = {}      # counted reductions pulled back through -> inputs
    positions: list[int] = []       # per node, its tape position
    refs: dict[int, Ref] = {k: Ref(INPUT, i) for k, i in slots.items()}
    def visit(v: Entry) -> None:
        args = []
        computed = False
        for x in v.inputs:
            if type(x) is Entry and id(x) in zeros and id(x) not in refs:
                refs[id(x)] = _zeros(builder, x)
                positions.append(x.position)
            r = refs.get(id(x)) if type(x) is Entry else None
            if r is not None and r[0] is not CONST:
                computed = True
            if type(x) is Entry and id(x) in seeded:
                seeded.add(id(v))
            args.append(r)
        if not computed and id(v) not in seeded:
            refs[id(v)] = builder.capture(v)      # not computed from the inputs: a constant
            return
        origin = None if origins is None else origins.get(v.position)
        if origin is not None and origin[0].prim.counted:
            reached.setdefault(id(origin[0]), (origin[0], set()))[1].add(origin[1])
        count = None if origin is None else _count(v, origin, counted)
        for i, r in enumerate(args):
            if r is None:
                x = v.inputs[i]
                if count is not None and i == 1:
                    args[i] = builder.constant(x, key=("count", id(v)))
                    counts.append((args[i].index, *count))
                else:
                    args[i] = builder.capture(x) if type(x) is Entry else \
                        builder.constant(x)
        refs[id(v)] = builder.node(v.prim, args, v.attrs, v.name, v.shape, v.dtype,
                                   order.get(v, 0))
        positions.append(v.position)

    stop = set(ins)
    for v in ancestors(outs, stop=stop):
        visit(v)
    for v in outs:
        if id(v) not in refs:
            if id(v) in zeros:
                refs[id(v)] = _zeros(builder, v)
                positions.append(v.position)
            else:
                refs[id(v)] = builder.capture(v)
    out_refs = [refs[id(v)] for v in outs]
    pairs = [p for e in tape.events if type(e) in (BlockEnd, Asked)
             for p in (e.pairs if type(e) is BlockEnd else zip(e.wrt, e.grads))]
    alike = [(refs[id(d)], refs[id(x)]) for x, d in pairs
             if type(d) is Entry and type(x) is Entry and id(d) in refs and
             id(x) in refs and d.shape == x.shape and refs[id(d)] != refs[id(x)]]
    guards = _guards(tape, refs, visit, stop) if tape.guards else []
    if counts is not None:
        counts += _uncounted(reached, counted)
    return (builder, out_refs, single, _counted(counts, builder.nodes, positions, origins),
            alike, guards, output_labels(tape, outs))


def _guards(tape: Any, refs: dict, visit: Any, stop: set) -> list[Guard]:
    """The tape's guards on entries computed from the inputs, as the program's: each entry
    they read (and the entries it needs) visited into the program."""
    taken = tape.guards
    walk = ancestors([g.entry for g in taken if id(g.entry) not in refs], stop=stop)
    computed = {k for k, r in refs.items() if r.kind is not CONST}
    for v in walk:
        if id(v) not in refs and any(type(x) is Entry and id(x) in computed
                                     for x in v.inputs):
            computed.add(id(v))
            visit(v)
    out: dict[tuple, Guard] = {}
    for g in taken:
        r = refs.get(id(g.entry))
        if r is not None and r.kind is not CONST and id(g.entry) in computed:
            key = (r, g.kind, g.seen)
            if key not in out:
                out[key] = Guard(r, g.kind, g.seen, g.file, g.line,
                                 decision_text(g.file, g.line))
    return list(out.values())


def _zeros(builder: Builder, z: Variable) -> Ref:
    """A zero gradient (or tangent) as an entry spreading 0 over its shape, so that the
    shape follows its variable's."""
    zero = builder.constant(np.zeros((), z.dtype))
    return builder.node(EXPAND, (zero,), {"shape": tuple(z.shape)}, z.name, z.shape, z.dtype)


def _count(v: Entry, origin: tuple | None, counted: dict) -> tuple | None:
    """For an entry of a counted reduction's pullback (or tangent) that scales by a number,
    how that number is its count: (x's shape, axes, ddof, times, the reduction), read from the
    reduction's record and attributes (its vjp scales by no other number); also for the entry
    that pulls back through such an entry (a second order: through what it scales, it scales
    by the same number). Noted in ``counted``."""
    if origin is None or v.prim.scales is None or len(v.inputs) != 2 or \
            type(v.inputs[1]) not in (int, float):
        return None
    m, _ = origin
    if id(m) in counted:
        if m.prim is not v.prim:
            return None
        counted[id(v)] = counted[id(m)]
        return counted[id(v)]
    if not m.prim.counted:
        return None
    src, axes, ddof, times = _reduced(m)
    how = (src.shape, axes, ddof, None if v.prim.scales == "over" else times, m)
    counted[id(v)] = how
    return how


def _reduced(m: Entry) -> tuple:
    """A counted reduction's input, axes (None: all), ddof and times (its record's)."""
    src = m.inputs[0]
    attrs = m.attrs or {}
    axis = attrs.get("axis")
    axes = None if axis is None else normalize_axes(axis, len(src.shape))
    times = 1.0 if m.prim.counted is True else float(m.prim.counted)
    return src, axes, attrs.get("ddof", 0), times


def _uncounted(reached: dict, counted: dict) -> list:
    """The counted reductions whose pullback is in the program without its count: the count
    (less ddof) was 1, so the rule recorded no division (or the division is an entry recorded
    before the sweep, shared): their sizes are pinned, as ``Count``s with no constant."""
    have = {id(how[-1]) for how in counted.values()}
    out = []
    for m, through in reached.values():
        if id(m) in have:
            continue
        src, axes, ddof, times = _reduced(m)
        n = math.prod(src.shape[a] for a in (range(len(src.shape)) if axes is None else axes))
        # a vjp divides by the count (per_count records none for 1); a jvp may not (mean's
        # is a mean)
        if n - ddof == 1 and times == 1.0 or 0 in through:
            out.append((None, src.shape, axes, ddof, times, m))
    return out


def _counted(counts: list | None, nodes: list, positions: list, origins: dict | None
             ) -> list | None:
    """The counts as ``Count``s of the last node of the mean's pullback shaped like its
    input (None, sizes fixed, when a count has no such node)."""
    if counts is None or origins is None:
        return None
    out = []
    for const, shape, axes, ddof, times, m in counts:
        k = next((k for k in range(len(nodes) - 1, -1, -1)
                  if origins.get(positions[k], (None,))[0] is m and
                  tuple(nodes[k].shape) == tuple(shape)), None)
        if k is None:
            return None
        out.append(Count(const, k, None if axes is None else tuple(sorted(axes)), ddof, times))
    return out


def _variables(what: str, xs: Any) -> list[Any]:
    items = [xs] if isinstance(xs, (Variable, Entry)) else list(xs) \
        if isinstance(xs, Sequence) else None
    if items is None:
        raise ArgumentError(f"program: {what} must be a Variable or a sequence of Variables, "
                            f"got {type(xs).__name__}")
    for x in items:
        if not isinstance(x, (Variable, Entry)):
            raise ArgumentError(f"program: {what} must be Variables, got {type(x).__name__}")
    return items
