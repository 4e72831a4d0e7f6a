"""The Tape (entries, events, v-counter) and Ops (holds a Tape; the recording policy).

The sweeps that differentiate a tape are in sweeps.py, the text made from it in render.py.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

from .events import Event, Pullbacks
from .variable import Variable, set_inputs

# ---------------------------------------------------------------- the tape


class Tape(Sequence):
    """The recorded entries of one Ops, oldest first, the events between them, the v-counter.

    Positions grow forever: an entry's ``position`` is ``base + its index``, and ``clear()``
    moves ``base`` past everything recorded so far, so Variables from before a clear never
    look like entries of the new history.
    """

    __slots__ = ("entries", "events", "base", "counter", "accumulations", "pullbacks",
                 "listeners", "jvp_cache", "keep", "passes", "last_pass_end")

    def __init__(self, keep: bool = True) -> None:
        # keep=False: the entries are held weakly (a dead one reads as None) and no events are
        # kept, so the graph is freed by reference counting when its last Variable goes
        self.keep = keep
        self.passes = 0                 # value-only backward passes since the last clear
        self.last_pass_end = -1         # the tape's end at the last counted pass
        self.entries: list[Variable] = [] if keep else _WeakEntries()
        self.events: list[Event] = []
        self.base = 0                   # the position of entries[0]
        self.counter = 0                # the next v-number
        # position of each gradient accumulation -> the variable whose cotangent it sums
        self.accumulations: dict[int, Variable] = {}
        # (start, stop, entry, input): the entries start <= p < stop were recorded pulling the
        # cotangent of ``entry`` back to its input ``input`` (-1: pushing a tangent through it)
        self.pullbacks = Pullbacks()
        self.listeners: list[Callable[[Any], None]] = []    # told of each entry and event
        self.jvp_cache: tuple | None = None     # the last jvp's (y, start, positions)

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, i):
        return self.entries[i]

    def __repr__(self) -> str:
        return f"<Tape: {len(self.entries)} entries, {len(self.events)} events>"

    @property
    def end(self) -> int:
        """The position the next entry will take."""
        return self.base + len(self.entries)

    def at(self, position: int) -> Variable:
        """The entry at ``position``."""
        return self.entries[position - self.base]

    def number(self) -> int:
        """Take the next v-number."""
        n = self.counter
        self.counter = n + 1
        return n

    def add(self, event: Event) -> None:
        """Record an event (on a tape that keeps its trace) and tell the listeners."""
        if self.keep:
            self.events.append(event)
        for listen in self.listeners:
            listen(event)

    def snapshot(self) -> tuple:
        """A mark to ``restore`` to: entries, events, counter and derived state as they are."""
        return (len(self.entries), len(self.events), self.counter, len(self.pullbacks))

    def restore(self, snap: tuple) -> None:
        """Forget everything recorded since ``snap`` was taken."""
        entries, events, counter, pullbacks = snap
        end = self.base + entries
        del self.entries[entries:]
        del self.events[events:]
        self.pullbacks.truncate(pullbacks)
        self.counter = counter
        self.accumulations = {p: x for p, x in self.accumulations.items() if p < end}
        self.jvp_cache = None

    def clear(self) -> None:
        """Forget the whole history; the entries become leaves (their values are kept)."""
        for v in self.entries:
            if v is not None:
                v.prim, v.attrs = None, None
                set_inputs(v, ())
        self.base = self.end
        self.passes = 0
        self.entries.clear()
        self.events.clear()
        self.pullbacks.clear()
        self.accumulations.clear()
        self.jvp_cache = None

class _WeakEntries(list):
    """The entries of a tape that keeps no trace: weak references; a dead one reads as None."""

    __slots__ = ()

    def append(self, v: Variable) -> None:
        list.append(self, weakref.ref(v))

    def __getitem__(self, i):
        item = list.__getitem__(self, i)
        return [r() for r in item] if type(i) is slice else item()

    def __iter__(self):
        return (r() for r in list.__iter__(self))


