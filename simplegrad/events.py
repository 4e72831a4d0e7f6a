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
    pairs: tuple                    # ((variable, its derivative), ...)


Event = Leaf | BlockBegin | BlockEnd


class Pullback(NamedTuple):
    """The entries ``start <= position < stop`` pull the cotangent of ``entry`` back to its
    input number ``input`` (recorded by the reverse sweep, read by explained traces)."""

    start: int
    stop: int
    entry: Variable
    input: int
