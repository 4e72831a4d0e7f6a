"""The forward sweep: ``forward_sweep`` carries something from some Variables to the entries
computed from them, oldest first, one step per entry; jvp (here), the batched jvp (batched.py)
and Taylor propagation (taylor.py) are its users.

``jvp`` is a function of an ``Ops`` that uses its public interface only, as reverse.py's
are; ``Ops.jvp`` delegates here. Its tangents are computed by calling primitives on ``o``: the
Ops itself when the result is to be recorded (so it can be printed and differentiated again),
or a ``ValueOps`` when only values are wanted (``create_graph=False``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError
from ..primitives import VALUES
from ..primitives.core import dtype_of
from .batching import Batched, innermost, levels_of, stacked, union, unstack
from .reverse import (
    as_variable,
    check_history,
    check_target,
    check_wrt,
    note_entry,
    seed_value,
)
from .tape import BlockBegin, BlockEnd, ancestors, materialize
from .variable import UNARY, Entry, Variable, entry_of

if TYPE_CHECKING:
    from .ops import Ops
    from .tape import Tape

# ---------------------------------------------------------------- forward mode


def jvp(ops: Ops, y: Variable, xs: Variable | Sequence[Variable], tangents: Any,
        create_graph: bool = True) -> Variable:
    """The tangent of y along ``tangents`` of ``xs`` (see ``Ops.jvp``).

    A Variable given twice among ``xs`` moves along the sum of its tangents.
    """
    single = isinstance(xs, (Variable, Entry)) or not isinstance(xs, Iterable)
    xs = [xs] if single else list(xs)
    tangents = [tangents] if single else list(tangents)
    if type(y) is Entry or any(type(x) is Entry for x in xs):      # (entries of its tape)
        y = as_variable(ops, y) if type(y) is Entry else y
        xs = [as_variable(ops, x) if type(x) is Entry else x for x in xs]
    if type(y) is Batched or any(type(x) is Batched for x in xs):
        return _on_stacks(ops, y, xs, tangents, create_graph)
    check_target(ops, "jvp", y)
    if len(xs) != len(tangents):
        raise ArgumentError(f"jvp: {len(xs)} inputs but {len(tangents)} tangents")
    recording = bool(create_graph or any(type(t) is Batched for t in tangents)) and \
        ops.recording       # (a tangent batched by a vmap x is not: its batch rules record)
    for x in xs:
        check_wrt(ops, "jvp", x)
    check_history("jvp", y, xs)
    # (a tangent batched by a vmap that batches neither x nor y is carried as it is: each
    # rule runs on it, and its batching rule does the rest)
    values = [t if type(t) is Batched and t.shape == x.shape else seed_value(ops, "jvp", x, t)
              for x, t in zip(xs, tangents)]
    tape = ops.tape
    snap = tape.snapshot()          # (a sweep that fails is undone)
    # while a recording forward sweep runs, every entry it records keeps its value: a forward
    # sweep reads the values of the entries on its path, so the next one (nested jvps,
    # ``sg.derivative`` by nesting) would otherwise replay each of them
    kept = ops.keep_values
    if recording:
        ops.keep_values = True
    try:
        t = _sweep(ops, y, xs, tangents, values, recording)
    except BaseException:
        tape.restore(snap)
        raise
    finally:
        ops.keep_values = kept
    tape.settle(snap)
    return t


def _sweep(ops: Ops, y: Variable, xs: list, tangents: list, values: list,
           recording: bool) -> Variable:
    """The forward sweep of ``jvp`` from the tangents' values, its result a Variable."""
    tape = ops.tape
    if recording:
        o = ops
        if tape.keep or tape.listeners:
            tape.add(BlockBegin(tape.end, "jvp", y.node, tuple(x.node for x in xs)))
        given = [t if isinstance(t, Variable) else ops.leaf(v, None, True, "seed")
                 for t, v in zip(tangents, values)]
    else:
        o = VALUES
        given = values
    known: dict[Entry, Any] = {}
    for x, t in zip(xs, given):
        x = x.node
        known[x] = t if x not in known else o.add(known[x], t)

    def step(out: Entry, ts: list) -> Any:
        if recording:
            t = out.prim.jvp(o, ts, out, *out.inputs, **(out.attrs or {}))
        else:
            args = [x.raw if type(x) is Entry else x for x in out.inputs]
            t = out.prim.jvp(o, ts, out.raw, *args, **(out.attrs or {}))
        if t is not None and dtype_of(t) != out.dtype:
            t = o.cast(t, out.dtype)
        return t

    t = forward_sweep(tape, y, xs, known, step, recording).get(y.node)
    tape.reached = t is not None or y.node in known     # (a transform warns when not)
    if t is None:
        return ops.zeros_like(y, recording)
    if recording:
        if tape.keep or tape.listeners:
            tape.add(BlockEnd(tape.end, "jvp", y.node, {y.node: entry_of(innermost(t))}))
        return as_variable(ops, t)
    return ops.unrecorded(np.asarray(t), f"t{y.name}")


def _on_stacks(ops: Ops, y: Variable, xs: list, tangents: list, create_graph: bool) -> Variable:
    """``jvp`` of values batched by vmap (every x at the same levels, each tangent at some of
    them): one forward sweep of the stacked program, the tangent wrapped back at y's levels."""
    levels = levels_of(xs[0])
    for x in xs[1:]:
        if levels_of(x) != levels:
            raise ArgumentError(f"jvp: {xs[0].name} and {x.name} are batched by different "
                                "vmaps; push tangents of values of the same ones")
    full = union(levels, levels_of(y))
    ts = [stacked(ops, t, levels, "the tangent", carried=True) for t in tangents]
    t = jvp(ops, stacked(ops, y, full, y.name), [innermost(x) for x in xs], ts, create_graph)
    return unstack(t, full)

# ---------------------------------------------------------------- the sweep


def forward_sweep(tape: Tape, y: Any, xs: Sequence[Any], known: dict,
                  step: Callable[[Entry, list], Any], note: bool = False,
                  what: str = "tangent") -> dict:
    """Carry what ``known`` holds for ``xs`` forward to y (Variables or entries; ``known`` is
    keyed by entry, and so is the result), entry by entry, oldest first.

    ``step(out, ts)`` gives an entry's item from those of its inputs (``ts``, None where an
    input carries nothing); an entry none of whose inputs carries anything is skipped, and a
    None from ``step`` is not kept. ``note``: tell the tape's ``pullbacks`` which entry the
    entries each step records push a tangent through (explain.py reads them). ``what`` the
    step computes: an error not of simplegrad's is noted with the entry it failed at.
    """
    y = entry_of(y)
    if len(xs) == 1:        # (one x: the common case, no generator)
        x = xs[0]
        start = x.position if x.prim is None else x.position + 1
    else:
        start = min(x.position if x.prim is None else x.position + 1 for x in xs)
    if start < tape.base:
        start = tape.base
    cached = tape.jvp_cache     # a Jacobian asks the same y once per column
    if cached is not None and cached[0] is y and cached[1] == start:
        path = cached[2]
    else:
        path = ancestors(y, start)
        materialize(path)       # (the rules read values a tape may have freed)
        tape.jvp_cache = (y, start, path)
    get = known.get
    pullbacks = tape.pullbacks if note and tape.keep else None
    entries, base = tape.entries, tape.base
    out = None
    try:
        for out in path:
            more = out.more         # Entry.inputs, inlined: the sweep's hot path
            if more is None:
                a, b = out.in0, out.in1
                ta = get(a) if type(a) is Entry else None
                if b is UNARY:
                    if ta is None:
                        continue
                    ts = [ta]
                else:
                    tb = get(b) if type(b) is Entry else None
                    if ta is None and tb is None:
                        continue
                    ts = [ta, tb]
            else:
                ts = [get(x) if type(x) is Entry else None for x in more]
                for t in ts:
                    if t is not None:
                        break
                else:
                    continue
            if pullbacks is None:
                t = step(out, ts)
            else:
                n = len(entries)
                t = step(out, ts)
                if len(entries) > n:
                    pullbacks.add(base + n, base + len(entries), out, -1)
            if t is not None:
                known[out] = t
    except Exception as e:
        note_entry(e, out, None, what)
        raise
    return known
