"""The Tape (entries, events, v-counter) and the walks over recorded entries.

``ancestors`` is the one walk back from Variables to the entries they are computed from (the
forward sweeps, programs, graphs, custom rules and nan provenance use it); ``descendants`` is
its forward-direction sibling. The sweeps that differentiate a tape are in reverse.py and
forward.py, the text made from it in render.py.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from .events import Event, Pullbacks
from .variable import RELEASED, Variable

# ---------------------------------------------------------------- the tape


class Tape(Sequence):
    """The recorded entries of one Ops, oldest first, the events between them, the v-counter.

    Positions grow forever: an entry's ``position`` is ``base + its index``, and ``clear()``
    moves ``base`` past everything recorded so far, so Variables from before a clear never
    look like entries of the new history.
    """

    __slots__ = ("entries", "events", "base", "counter", "accumulations", "pullbacks",
                 "listeners", "jvp_cache", "keep", "passes", "last_pass_end",
                 "reached", "dropped", "graded")

    def __init__(self, keep: bool = True) -> None:
        # keep=False: the entries are held weakly (a dead one reads as None) and no events are
        # kept, so the graph is freed by reference counting when its last Variable goes
        self.keep = keep
        self.passes = 0                 # backward passes of new steps since the last clear
        self.last_pass_end = -1         # the tape's end after the last backward pass
        self.reached = True             # whether the last grad or jvp reached any of its wrt
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
        self.jvp_cache: tuple | None = None     # the last forward sweep's (y, start, entries)
        # positions below ``dropped`` are no longer listed (``forget_trace``): those entries
        # still alive are reached through the graph (``ancestors``), not by position
        self.dropped = 0
        self.graded: list[Variable] = []   # Variables whose .grad holds a recorded gradient

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
        """Forget the whole history; the entries become leaves (their values are kept) that
        know why they have none (``RELEASED``)."""
        for v in self.entries:
            if v is not None:       # (set_inputs(v, ()), inlined: one call fewer per entry)
                v.prim, v.attrs = None, RELEASED
                v.in0 = v.in1 = None
                v.more = ()
        self.base = self.end + 1     # (+1: a leaf made before the release is older than all after)
        self.passes = 0
        self.last_pass_end = -1
        self.entries.clear()
        self.events.clear()
        self.pullbacks.clear()
        self.accumulations.clear()
        self.graded.clear()
        self.jvp_cache = None

    def forget_trace(self) -> None:
        """Stop listing the entries recorded so far and hold later ones weakly, keeping no
        events (as ``keep=False``): what is left is what live Variables reach, freed by
        reference counting with them. Positions go on; the sweeps reach the unlisted entries
        through the graph (``dropped``)."""
        if not self.keep:
            return
        unlisted = _WeakEntries()
        list.extend(unlisted, [None] * len(self.entries))
        self.keep = False
        self.entries = unlisted
        self.dropped = self.end
        self.events.clear()
        self.pullbacks.clear()
        self.accumulations.clear()
        self.graded.clear()
        self.jvp_cache = None


class _WeakEntries(list):
    """The entries of a tape that keeps no trace: weak references; a dead one reads as None."""

    __slots__ = ()

    def append(self, v: Variable) -> None:
        list.append(self, weakref.ref(v))

    def __getitem__(self, i):
        item = list.__getitem__(self, i)
        if type(i) is slice:
            return [None if r is None else r() for r in item]
        return None if item is None else item()

    def __iter__(self):
        return (None if r is None else r() for r in list.__iter__(self))

# ---------------------------------------------------------------- walks


def ancestors(roots: Variable | Iterable[Variable], start: int = 0,
              stop: Collection[Variable] = (), leaves: bool = False) -> list[Variable]:
    """The entries at positions >= ``start`` that ``roots`` are computed from, roots included,
    oldest first.

    The walk does not pass the Variables in ``stop`` (nor list them). ``leaves=True`` lists the
    leaves reached too, each before the entry that shares its position (leaves at one position
    in the order the walk reached them).
    """
    found: dict[int, Variable] = {}        # position -> entry
    reached: dict[Variable, None] = {}     # the leaves, in the order reached
    stack = [roots] if isinstance(roots, Variable) else list(roots)
    pop, push = stack.pop, stack.append
    while stack:        # iterative: a tape may hold millions of entries
        v = pop()
        if v.prim is None:
            if leaves and v.position >= start and not (stop and v in stop):
                reached[v] = None
            continue
        p = v.position
        if p < start or p in found or stop and v in stop:
            continue
        found[p] = v
        more = v.more               # Variable.inputs, inlined (UNARY is no Variable)
        if more is None:
            if type(v.in0) is Variable:
                push(v.in0)
            if type(v.in1) is Variable:
                push(v.in1)
        else:
            for x in more:
                if type(x) is Variable:
                    push(x)
    if leaves:
        return sorted([*found.values(), *reached], key=_when)
    return [found[p] for p in sorted(found)]


def descendants(tape: Tape, sources: Iterable[Variable], start: int, end: int,
                root: Variable | None = None) -> set:
    """``sources`` and the entries at positions ``start <= p < end`` computed from any of them
    (of those ``root`` is computed from, when given: found through the graph where the tape no
    longer lists its entries)."""
    reached = set(sources)
    entries, base = tape.entries, tape.base
    if root is not None and start < tape.dropped:
        candidates: Iterable = ancestors(root, start)
    else:
        candidates = (entries[p - base] for p in range(max(start, base), min(end, tape.end)))
    for v in candidates:
        for x in () if v is None else v.inputs:
            if type(x) is Variable and x in reached:
                reached.add(v)
                break
    return reached


def _when(v: Variable) -> tuple[int, bool]:
    """Recording order: a leaf comes before the entry that shares its position."""
    return (v.position, v.prim is not None)
