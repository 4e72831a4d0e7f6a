"""The sweeps: reverse (grad, backward) and forward (jvp) over an Ops' recorded entries.

Functions of an ``Ops`` that use its public interface only (its ``tape``, ``recording``,
``leaf``, ``unrecorded``, ``zeros_like`` and primitive methods); ``Ops.grad``, ``Ops.backward``
and ``Ops.jvp`` delegate here. Every derivative is computed by calling primitives on ``o``: the
Ops itself when the result is to be recorded (so it can be printed and differentiated again),
or a ``ValueOps`` when only values are wanted (``create_graph=False``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError
from ..primitives import VALUES
from ..primitives.core import dtype_of
from .events import BlockBegin, BlockEnd
from .reverse import _check_target, _check_wrt, _seed_value, _sweeping
from .variable import Variable

if TYPE_CHECKING:
    from .ops import Ops
    from .tape import Tape

# ---------------------------------------------------------------- forward mode


def jvp(ops: Ops, y: Variable, xs: Variable | Sequence[Variable], tangents: Any,
        create_graph: bool = True) -> Variable:
    """The tangent of y along ``tangents`` of ``xs`` (see ``Ops.jvp``).

    A Variable given twice among ``xs`` moves along the sum of its tangents.
    """
    single = isinstance(xs, Variable) or not isinstance(xs, Iterable)
    xs = [xs] if single else list(xs)
    tangents = [tangents] if single else list(tangents)
    _check_target(ops, "jvp", y)
    if len(xs) != len(tangents):
        raise ArgumentError(f"jvp: {len(xs)} inputs but {len(tangents)} tangents")
    recording = bool(create_graph) and ops.recording
    for x in xs:
        _check_wrt(ops, "jvp", x)
    values = [_seed_value(ops, "jvp", x, t) for x, t in zip(xs, tangents)]
    start = min(x.position if x.prim is None else x.position + 1 for x in xs)
    tape = ops.tape
    with _sweeping(tape):
        if recording:
            o = ops
            tape.add(BlockBegin(tape.end, "jvp", y, tuple(xs)))
            given = [t if isinstance(t, Variable) else ops.leaf(v, None, True, "seed")
                     for t, v in zip(tangents, values)]
        else:
            o = VALUES
            given = values
        known: dict[Variable, Any] = {}
        for x, t in zip(xs, given):
            known[x] = t if x not in known else o.add(known[x], t)
        entries, base = tape.entries, tape.base
        cached = tape.jvp_cache     # a Jacobian asks the same y once per column
        if cached is not None and cached[0] is y and cached[1] == start:
            positions = cached[2]
        else:
            positions = _ancestors(tape, y, start)
            if tape.keep:           # (a tape that keeps no trace holds no Variable)
                tape.jvp_cache = (y, start, positions)
        for pos in positions:
            out = entries[pos - base]
            inputs = out.inputs
            ts = [known.get(x) if type(x) is Variable else None for x in inputs]
            if all(t is None for t in ts):
                continue
            attrs = out.attrs or {}
            if recording:
                start = len(entries)
                t = out.prim.jvp(o, ts, out, *inputs, **attrs)
                if len(entries) > start and tape.keep:
                    tape.pullbacks.add(base + start, base + len(entries), out, -1)
            else:
                t = out.prim.jvp(o, ts, out.raw, *[getattr(x, "raw", x) for x in inputs],
                                 **attrs)
            if t is not None:
                if dtype_of(t) != out.raw.dtype:
                    t = o.cast(t, out.raw.dtype)
                known[out] = t
        t = known.get(y)
        if t is None:
            return ops.zeros_like(y, recording)
        if recording:
            tape.add(BlockEnd(tape.end, "jvp", y, {y: t}))
            return t
    return ops.unrecorded(np.asarray(t), f"t{y.name}")


def _ancestors(tape: Tape, y: Variable, start: int) -> list[int]:
    """Positions, oldest first, of the entries at or after ``start`` that lead to y."""
    start = max(start, tape.base)
    seen: set[int] = set()
    stack = [y]
    while stack:
        v = stack.pop()
        if v.prim is None or v.position < start or v.position in seen:
            continue
        seen.add(v.position)
        stack.extend(x for x in v.inputs if type(x) is Variable)
    return sorted(seen)
