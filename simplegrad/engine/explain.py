"""What a trace means: derivative blocks and orders, and what each gradient entry
differentiates.

All of it is read from the tape's data: its events (where blocks begin and end) and its
``pullbacks`` (which entries the reverse sweep recorded while pulling back through which
forward entry and input, and the jvp sweep while pushing a tangent through which entry).
Nothing here is computed while recording, and nothing here makes text: render.py turns it
into the explained trace, nonfinite.py into the report on a nan.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .tape import BlockBegin, BlockEnd, Leaf
from .variable import Entry

if TYPE_CHECKING:
    from .tape import Tape


@dataclass(frozen=True)
class Block:
    """One derivative block: the entries a grad or jvp call recorded, and its order."""

    kind: str           # "grad" | "jvp"
    target: Entry    # what was differentiated
    start: int          # positions start <= p < stop
    stop: int
    order: int          # 1 for a derivative of forward values, 2 for one of those, ...
    size: int           # number of entries recorded in the block itself (nested ones excluded)

    @property
    def title(self) -> str:
        """The block's header text: ``dL0`` or ``jvp v3``."""
        return f"d{self.target.name}" if self.kind == "grad" else f"jvp {self.target.name}"


def walk(tape: Tape) -> Iterator[tuple[Any, Block | None, int]]:
    """Entries and events in recording order, each with its innermost block and order."""
    events = tape.events
    order_of: dict[Entry, int] = {}
    stack: list[list] = []      # open blocks: [begin event, start position, order, size]
    m = 0

    def order(v: Any) -> int:
        return order_of.get(v, 0) if type(v) is Entry else 0

    def step(event):
        if type(event) is BlockBegin:
            stack.append([event, event.position, order(event.target) + 1, 0])
            return None
        if type(event) is BlockEnd and stack:
            begin, start, k, size = stack.pop()
            return Block(begin.kind, begin.target, start, event.position, k, size)
        if type(event) is Leaf:
            order_of[event.var] = stack[-1][2] if stack else 0
        return None

    for v in tape.entries:
        if v is None:
            continue
        while m < len(events) and events[m].position <= v.position:
            block = step(events[m])
            yield events[m], block, block.order if block else (stack[-1][2] if stack else 0)
            m += 1
        if stack:
            k = stack[-1][2]
            stack[-1][3] += 1
        else:
            k = max((order(x) for x in v.inputs), default=0)
        order_of[v] = k
        yield v, None, k
    for event in events[m:]:
        block = step(event)
        yield event, block, block.order if block else (stack[-1][2] if stack else 0)


def blocks(tape: Tape) -> list[Block]:
    """Every finished derivative block, in the order they ended."""
    return [block for _, block, _ in walk(tape) if block is not None]


def orders(tape: Tape) -> dict[Entry, int]:
    """The derivative order of every entry and leaf: 0 forward, k inside an order-k block."""
    return {item.var if type(item) is Leaf else item: k for item, _, k in walk(tape)
            if type(item) in (Entry, Leaf)}


def origins(tape: Tape) -> dict[int, tuple[Entry, int]]:
    """position -> (forward entry, input) that the entry at position pulls back through
    (input -1: the entry pushes a tangent through the forward entry)."""
    found: dict[int, tuple[Entry, int]] = {}
    for start, stop, entry, i in tape.pullbacks:     # nested sweeps first: innermost wins
        for p in range(start, stop):
            found.setdefault(p, (entry, i))
    return found


def block_target(tape: Tape, position: int) -> str | None:
    """The name of what the innermost block open at ``position`` differentiates."""
    target = block_target_entry(tape, position)
    return None if target is None else target.name


def block_target_entry(tape: Tape, position: int) -> Entry | None:
    """What the innermost block open at ``position`` differentiates, as its entry."""
    stack = []
    for event in tape.events:
        if event.position > position:
            break
        if type(event) is BlockBegin:
            stack.append(event.target)
        elif type(event) is BlockEnd and stack:
            stack.pop()
    return stack[-1] if stack else None
