"""``sg.step(L, wrt)``: a reverse sweep one backward entry at a time, on a copy.

The entries L is computed from are copied to an Ops of their own, with their names (and the
next v-number of L's Ops, so the copy numbers its entries as ``op.grad`` would); the sweep runs
there, and each step is one entry it recorded: the entry, which forward entry and input it
differentiates (or whose cotangent it adds up), and the cotangents known once it is recorded,
by the name of the value they belong to. The user's tape is never touched, so an iterator
abandoned halfway leaves nothing behind.

A step that records a loop (a record with ``trips``: scan, while_loop, cond) is followed by
the steps inside it: each run of its body, in the order the loop runs them, one step per
line of the body with that run's values, named as the body prints (``loop``, ``trip``; the
rule says what the line differentiates, the body's ``notes``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ArgumentError
from .render import comments, format_entry, head, noted
from .tape import BlockBegin, BlockEnd, ancestors, value_of
from .variable import Entry, Variable


@dataclass(frozen=True)
class Step:
    """One backward entry of a sweep: the entry, what it differentiates, the cotangents so far."""

    entry: Variable             # the entry recorded (on the copy)
    rule: str                   # "d(v1 = v0 * b)/dv0", or "accumulation of dL0/db"
    cotangents: dict            # name of a value -> its cotangent so far (a Variable)
    loop: str = ""              # inside a loop's body: the loop entry's name
    trip: int | None = None     # and which run of its body (in the order the loop runs)

    def __str__(self) -> str:
        if self.loop:
            where = f"{self.loop} trip {self.trip}" + (f": {self.rule}" if self.rule else "")
            return f"    {head(format_entry(self.entry))}    # {where}"
        return noted(format_entry(self.entry), self.rule)


def step(L: Variable, wrt: Variable | Sequence[Variable], into: bool = True
         ) -> Iterator[Step]:
    """The reverse sweep of ``L`` in ``wrt`` one backward entry at a time, recorded on a copy
    (``into``: with the steps inside each loop it records, trip by trip)."""
    from .ops import Ops  # (ops.py does not import this module)

    wanted = [wrt] if isinstance(wrt, Variable) else list(wrt)
    if not isinstance(L, Variable) or not hasattr(L.rec, "tape"):
        raise ArgumentError(f"step: L must be a recorded Variable, got {type(L).__name__}")
    for w in wanted:
        if not isinstance(w, Variable) or w.rec is not L.rec:
            raise ArgumentError(f"step: wrt must be Variables of {L.name}'s Ops, got "
                                f"{getattr(w, 'name', type(w).__name__)}")
    copy = Ops(keep_values=True)
    copies: dict[int, Variable] = {}        # id of an entry -> its Variable on the copy

    def copied(x):
        return copies.get(id(x), x) if type(x) is Entry else x

    for v in ancestors([L, *wanted], leaves=True):
        if v.prim is None:
            new = copy.leaf(value_of(v), None, v.requires_grad)
        else:
            new = copy.apply(v.prim, [copied(x) for x in v.inputs], v.attrs)
        new.label = v.label
        copies[id(v)] = new
    for w in wanted:            # a wrt L does not read: a leaf of its own on the copy
        if id(w.node) not in copies:
            copies[id(w.node)] = new = copy.leaf(w.raw, None, w.requires_grad)
            new.label = w.label
    copy.tape.counter = L.rec.tape.counter
    L2 = copies[id(L.node)]
    copy.grad(L2, [copies[id(w.node)] for w in wanted])
    return _steps(copy, into)


def _inside(loop: Entry, cotangents: dict) -> Iterator[Step]:
    """The steps inside a loop entry: each run of its body recorded on an Ops of its own, at
    that run's values, its entries named as the body prints them."""
    from .ops import Ops
    runs = loop.prim.trips([value_of(x) for x in loop.inputs], value_of(loop), loop.attrs)
    sent = None
    while True:
        try:
            t, body, inputs = runs.send(sent)
        except StopIteration:
            return
        o = Ops(keep_values=True)
        program = body.program
        leaves = [o.leaf(v, spec.name, False) for v, spec in zip(inputs, program.inputs)]
        seen: dict = {}
        outs = program.record(o, *leaves, seen=seen)
        outs = [outs] if program.single else outs
        notes = body.notes()
        for v in o.tape.entries:
            line = seen.get(id(v))
            if line is None:
                continue
            v.label = line.label
            yield Step(v, notes.get(line.label, ""), cotangents, loop.name, t)
        sent = [value_of(y) for y in outs]


def _steps(copy: Any, into: bool = True) -> Iterator[Step]:
    tape = copy.tape
    begin = next(e for e in tape.events if type(e) is BlockBegin)
    end = next(e for e in tape.events if type(e) is BlockEnd)
    rules = comments(tape)
    ends: dict[int, Variable] = {}          # the last entry of a pullback -> whose cotangent
    for _, stop, entry, i in tape.pullbacks:
        ends.setdefault(stop - 1, entry.inputs[i])
    final: dict[int, list[Variable]] = {}   # an entry -> the values it is the cotangent of
    for x, g in end.pairs:
        final.setdefault(id(g), []).append(x)
    known = {x.name: g for x, g in end.pairs if g.prim is None}     # the seed
    for v in tape.entries[begin.position - tape.base:end.position - tape.base]:
        p = v.position
        x = tape.accumulations.get(p)
        if x is None:
            x = ends.get(p)
            if x is not None and x.name in known:   # added to the cotangent next
                x = None
        if x is not None:
            known[x.name] = v
        for y in final.get(id(v), ()):              # cotangents passed on unchanged
            known[y.name] = v
        yield Step(v, rules.get(p, ""), dict(known))
        if into and v.prim.trips is not None:
            yield from _inside(v, dict(known))
