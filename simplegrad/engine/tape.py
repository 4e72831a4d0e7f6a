"""The Tape (entries, the typed events between them, v-counter) and the walks over recorded
entries.

``ancestors`` is the one walk back from Variables or entries to the entries they are computed
from (the forward sweeps, programs, graphs, custom rules and nan provenance use it);
``descendants`` is its forward-direction sibling; ``value_of`` replays a value an entry no
longer keeps. The sweeps that differentiate a tape are in reverse.py and forward.py, the text
made from it in render.py.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from .variable import RELEASED, Entry, Variable, value_of

# ---------------------------------------------------------------- events
#
# What happens between entries (leaves, derivative blocks), each at the position of the entry
# that follows it, so a renderer can interleave them with the entries. They name entries,
# never Variables (an event holding a Variable would hold its Ops: a cycle). Nothing changes an
# event once made; they are not frozen dataclasses only because a frozen one's ``__init__`` sets
# each field through ``object.__setattr__`` (3.5x the cost, and every transform call makes some).


@dataclass(slots=True, unsafe_hash=True)
class Leaf:
    """An entry computed by no primitive: a user's leaf, a seed or zeros."""

    position: int
    var: Entry
    kind: str                       # "leaf" | "seed" | "zeros"
    source: Any = None              # the Parameter a leaf stands for


@dataclass(slots=True, unsafe_hash=True)
class BlockBegin:
    """The start of a derivative block: a reverse sweep of ``target`` or a jvp of it."""

    position: int
    kind: str                       # "grad" | "jvp"
    target: Entry
    inputs: tuple = ()              # a jvp's inputs


@dataclass(slots=True, unsafe_hash=True)
class BlockEnd:
    """The end of a derivative block, with the derivative found for each variable."""

    position: int
    kind: str                       # "grad" | "jvp"
    target: Entry
    derivatives: dict               # variable -> its derivative, in the order found

    @property
    def pairs(self) -> tuple:
        """((variable, its derivative), ...) in the order found."""
        return tuple(self.derivatives.items())


@dataclass(slots=True, eq=False)
class Asked:
    """What a recorded ``grad`` call asked for: the gradients of ``target`` for ``wrt``, in
    order (pruned traces print these and what they need; names are in the alias entries)."""

    position: int
    target: Entry
    wrt: tuple
    grads: tuple


@dataclass(slots=True, eq=False)
class Labels:
    """Names for the entries of ``entry``, in C order, that a pruned trace prints instead of
    its line when each is a printed value (``H[x, y] = v18``: a transform's result), and the
    name of the whole, printed otherwise (``H[a, a] = v39``)."""

    position: int
    entry: Entry
    names: tuple
    whole: str


Event = Leaf | BlockBegin | BlockEnd | Asked | Labels


class Pullback(NamedTuple):
    """The entries ``start <= position < stop`` pull the cotangent of ``entry`` back to its
    input number ``input`` (recorded by the reverse sweep, read by explained traces)."""

    start: int
    stop: int
    entry: Entry
    input: int


class Pullbacks:
    """A tape's pullback ranges, kept column-wise: recording one adds three ints to one list
    and the entry to another, and no object for the cyclic garbage collector to walk."""

    __slots__ = ("spans", "entries")

    def __init__(self) -> None:
        self.spans: list[int] = []          # start, stop, input of each, in turn
        self.entries: list[Entry] = []

    def add(self, start: int, stop: int, entry: Entry, i: int) -> None:
        """Note that entries ``start <= p < stop`` pull back (or push forward, i = -1) through
        ``entry``'s input ``i``."""
        self.spans += (start, stop, i)
        self.entries.append(entry)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self):
        spans = self.spans
        for k, entry in enumerate(self.entries):
            yield Pullback(spans[3 * k], spans[3 * k + 1], entry, spans[3 * k + 2])

    def truncate(self, n: int) -> None:
        """Keep the first n."""
        del self.spans[3 * n:]
        del self.entries[n:]

    def clear(self) -> None:
        """Forget all."""
        self.spans.clear()
        self.entries.clear()


# ---------------------------------------------------------------- the tape


class Tape(Sequence):
    """The recorded entries of one Ops, oldest first, the events between them, the v-counter.

    Positions grow forever: an entry's ``position`` is ``base + its index``, and ``clear()``
    moves ``base`` past everything recorded so far, so Variables from before a clear never
    look like entries of the new history.
    """

    __slots__ = ("entries", "events", "base", "counter", "accumulations", "pullbacks",
                 "listeners", "jvp_cache", "keep", "passes", "last_pass_end", "reached",
                 "guards")

    def __init__(self, keep: bool = True) -> None:
        self.keep = keep                # False: no events are kept (the entries are)
        self.passes = 0                 # backward passes of new steps since the last clear
        self.last_pass_end = -1         # the tape's end after the last backward pass
        self.reached = True             # whether the last grad or jvp reached any of its wrt
        self.entries: list[Entry] = []
        self.events: list[Event] = []
        self.base = 0                   # the position of entries[0]
        self.counter = 0                # the next v-number
        # position of each gradient accumulation -> the entry whose cotangent it sums
        self.accumulations: dict[int, Entry] = {}
        # (start, stop, entry, input): the entries start <= p < stop were recorded pulling the
        # cotangent of ``entry`` back to its input ``input`` (-1: pushing a tangent through it)
        self.pullbacks = Pullbacks()
        self.listeners: list[Callable[[Any], None]] = []    # told of each entry and event
        self.jvp_cache: tuple | None = None     # the last forward sweep's (y, start, entries)
        self.guards: list = []          # Python decisions on recorded values (guards.py)

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

    def at(self, position: int) -> Entry:
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
        """A mark to ``restore`` to: entries, events, counter and derived state as they are.

        While other threads run, the tape also notes what this thread records from now on
        (``Watch``), so that ``restore`` removes only that; ``settle`` ends the watch when
        nothing needs undoing. (A thread started after the mark is not told apart.)
        """
        watch = None
        if threading.active_count() > 1:
            watch = Watch()     # (a new list: another thread may be iterating over the old)
            self.listeners = [*self.listeners, watch]
        return (len(self.entries), len(self.events), self.counter, len(self.pullbacks), watch)

    def settle(self, snap: tuple) -> None:
        """What was recorded since ``snap`` stays: stop watching for it."""
        watch = snap[4]
        if watch is not None:
            self.listeners = [x for x in self.listeners if x is not watch]

    def restore(self, snap: tuple) -> None:
        """Forget everything this thread recorded since ``snap`` was taken (what other threads
        recorded meanwhile stays, moved down to fill the gap)."""
        self.settle(snap)
        entries, events, counter, pullbacks, watch = snap
        if watch is not None and watch.others:
            self._remove(watch)
            return
        end = self.base + entries
        del self.entries[entries:]
        del self.events[events:]
        self.pullbacks.truncate(pullbacks)
        self.counter = counter
        self.accumulations = {p: x for p, x in self.accumulations.items() if p < end}
        self.jvp_cache = None
        if self.guards:
            self.guards = [g for g in self.guards if g.at <= end]

    def _remove(self, watch: Watch) -> None:
        """``restore`` when other threads recorded too: remove the entries and events ``watch``
        saw this thread record; every later position moves down past them (the v-numbers
        the others took stay theirs)."""
        mine, base = watch.entries, self.base
        self.jvp_cache = None
        ours = [e for e in mine if e.prim is not None]
        lo = min((e.position for e in ours), default=self.end) - base
        start = base + lo
        tail = self.entries[lo:]
        kept = [e for e in tail if e not in mine]
        old = [e.position for e in kept]

        def moved(p: int) -> int:       # where what sat at position p sits now
            return p if p < start else start + bisect_left(old, p)

        def stays(p: int) -> bool:      # whether the entry at position p is another thread's
            return p < start or p - start >= len(tail) or tail[p - start] not in mine

        self.entries[lo:] = kept
        for i, e in enumerate(kept):
            e.position = start + i
        for leaf in watch.leaves:
            leaf.position = moved(leaf.position)
        gone = {id(x) for x in watch.events}
        self.events[:] = [x if x.position < start else replace(x, position=moved(x.position))
                          for x in self.events if id(x) not in gone]
        spans = [b for b in self.pullbacks if b.start >= start]
        if spans:
            self.pullbacks.truncate(len(self.pullbacks) - len(spans))   # (newest last)
            for b in spans:
                if stays(b.start):
                    self.pullbacks.add(moved(b.start), moved(b.stop), b.entry, b.input)
        self.accumulations = {moved(p): x for p, x in self.accumulations.items() if stays(p)}

    def clear(self) -> None:
        """Forget the whole history; the entries become leaves that know why they have none
        (``RELEASED``)."""
        for v in self.entries:      # (set_inputs(v, ()), inlined: one call fewer per entry)
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
        self.jvp_cache = None
        self.guards.clear()


class Watch:
    """A tape listener for one thread's undoable block while other threads run: the entries
    and events that thread records, the leaves the others make (their positions move when
    ``Tape.restore`` removes the block's), and whether the others recorded anything."""

    __slots__ = ("thread", "entries", "events", "leaves", "others")

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.entries: set[Entry] = set()    # this thread's entries
        self.events: list = []              # this thread's events
        self.leaves: list[Entry] = []       # the other threads' leaves
        self.others = False

    def __call__(self, x: Any) -> None:
        mine = threading.get_ident() == self.thread
        if type(x) is Entry:
            if mine:
                self.entries.add(x)
            else:
                self.others = True
        elif mine:
            self.events.append(x)
        else:
            self.others = True
            if type(x) is Leaf:
                self.leaves.append(x.var)


# ---------------------------------------------------------------- walks


def ancestors(roots: Any, start: int = 0, stop: Collection[Entry] = (),
              leaves: bool = False) -> list[Entry]:
    """The entries at positions >= ``start`` that ``roots`` (Variables or entries) are computed
    from, roots included, oldest first.

    The walk does not pass the entries in ``stop`` (nor list them). ``leaves=True`` lists the
    leaves reached too, each before the entry that shares its position (leaves at one position
    in the order the walk reached them).
    """
    found: dict[int, Entry] = {}        # position -> entry
    reached: dict[Entry, None] = {}     # the leaves, in the order reached
    if type(roots) is Entry:
        stack = [roots]
    elif isinstance(roots, (Variable, Entry)):
        stack = [roots.node if isinstance(roots, Variable) else roots]
    else:
        stack = [r.node if isinstance(r, Variable) else r for r in roots]
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
        more = v.more               # Entry.inputs, inlined (UNARY is no Entry)
        if more is None:
            if type(v.in0) is Entry:
                push(v.in0)
            if type(v.in1) is Entry:
                push(v.in1)
        else:
            for x in more:
                if type(x) is Entry:
                    push(x)
    if leaves:
        return sorted([*found.values(), *reached], key=_when)
    return [found[p] for p in sorted(found)] if len(found) > 1 else list(found.values())


def descendants(tape: Tape, sources: Iterable[Any], start: int, end: int) -> set:
    """``sources`` (Variables or entries, as entries) and the entries at positions
    ``start <= p < end`` computed from any of them."""
    reached = {s.node if isinstance(s, Variable) else s for s in sources}
    entries, base = tape.entries, tape.base
    for p in range(max(start, base), min(end, tape.end)):
        v = entries[p - base]
        more = v.more           # Entry.inputs, inlined (UNARY is no Entry)
        if more is None:
            a, b = v.in0, v.in1
            if type(a) is Entry and a in reached or type(b) is Entry and b in reached:
                reached.add(v)
            continue
        for x in more:
            if type(x) is Entry and x in reached:
                reached.add(v)
                break
    return reached


def _when(v: Entry) -> tuple[int, bool]:
    """Recording order: a leaf comes before the entry that shares its position."""
    return (v.position, v.prim is not None)


def materialize(entries: Iterable[Entry]) -> None:
    """Give every one of ``entries`` and their input entries a value (``value_of``): what a
    forward sweep's rules read."""
    for v in entries:
        if v.raw is None:
            value_of(v)
        more = v.more
        if more is None:        # (the input slots read as they are: no tuple per entry)
            x = v.in0
            if type(x) is Entry and x.raw is None:
                value_of(x)
            x = v.in1
            if type(x) is Entry and x.raw is None:
                value_of(x)
            continue
        for x in more:
            if type(x) is Entry and x.raw is None:
                value_of(x)
