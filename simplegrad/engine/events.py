"""The typed events of a tape: what happens between entries (leaves, derivative blocks).

Entries are Variables (see variable.py); these mark everything else, each at the position of
the entry that follows it, so a renderer can interleave them with the entries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .variable import Variable

@dataclass(frozen=True, slots=True)
class Leaf:
    """A Variable computed by no primitive: a user's leaf, a seed, zeros or a detached copy."""

    position: int
    var: Variable
    kind: str                       # "leaf" | "seed" | "zeros" | "detach"
    source: Variable | None = None  # what a detached leaf was copied from


@dataclass(frozen=True, slots=True)
class BlockBegin:
    """The start of a derivative block: a reverse sweep of ``target`` or a jvp of it."""

    position: int
    kind: str                       # "grad" | "jvp"
    target: Variable
    inputs: tuple = ()              # a jvp's inputs


@dataclass(frozen=True, slots=True)
class BlockEnd:
    """The end of a derivative block, with the derivative found for each variable."""

    position: int
    kind: str                       # "grad" | "jvp"
    target: Variable
    derivatives: dict               # variable -> its derivative, in the order found

    @property
    def pairs(self) -> tuple:
        """((variable, its derivative), ...) in the order found."""
        return tuple(self.derivatives.items())


@dataclass(frozen=True, slots=True, eq=False)
class Asked:
    """What a recorded ``grad`` call asked for: the gradients of ``target`` for ``wrt``, in
    order (pruned traces print these and what they need; names are in the alias entries)."""

    position: int
    target: Variable
    wrt: tuple
    grads: tuple


Event = Leaf | BlockBegin | BlockEnd | Asked


class Pullback(NamedTuple):
    """The entries ``start <= position < stop`` pull the cotangent of ``entry`` back to its
    input number ``input`` (recorded by the reverse sweep, read by explained traces)."""

    start: int
    stop: int
    entry: Variable
    input: int


class Pullbacks:
    """A tape's pullback ranges, kept column-wise: recording one adds three ints to one list
    and the entry to another, and no object for the cyclic garbage collector to walk."""

    __slots__ = ("spans", "entries")

    def __init__(self) -> None:
        self.spans: list[int] = []          # start, stop, input of each, in turn
        self.entries: list[Variable] = []

    def add(self, start: int, stop: int, entry: Variable, i: int) -> None:
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

