"""What a trace means: derivative blocks and orders, what each gradient entry differentiates,
and where a nan or inf first appears.

All of it is read from the tape's data: its events (where blocks begin and end), its
``pullbacks`` (which entries the reverse sweep recorded while pulling back through which
forward entry and input, and the jvp sweep while pushing a tangent through which entry) and
its ``accumulations``. Nothing here is computed while recording.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .events import BlockBegin, BlockEnd, Leaf
from .variable import Variable

if TYPE_CHECKING:
    from .tape import Tape


@dataclass(frozen=True)
class Block:
    """One derivative block: the entries a grad or jvp call recorded, and its order."""

    kind: str           # "grad" | "jvp"
    target: Variable    # what was differentiated
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
    order_of: dict[Variable, int] = {}
    stack: list[list] = []      # open blocks: [begin event, start position, order, size]
    m = 0

    def order(v: Any) -> int:
        return order_of.get(v, 0) if type(v) is Variable else 0

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


def orders(tape: Tape) -> dict[Variable, int]:
    """The derivative order of every entry and leaf: 0 forward, k inside an order-k block."""
    return {item.var if type(item) is Leaf else item: k for item, _, k in walk(tape)
            if type(item) in (Variable, Leaf)}


def origins(tape: Tape) -> dict[int, tuple[Variable, int]]:
    """position -> (forward entry, input) that the entry at position pulls back through
    (input -1: the entry pushes a tangent through the forward entry)."""
    found: dict[int, tuple[Variable, int]] = {}
    for start, stop, entry, i in tape.pullbacks:     # nested sweeps first: innermost wins
        for p in range(start, stop):
            found.setdefault(p, (entry, i))
    return found


def comments(tape: Tape) -> dict[int, str]:
    """position -> the explanation appended to that entry's line by explained traces."""
    from .render import format_entry

    out = {}
    for p, (entry, i) in origins(tape).items():
        if i < 0:
            out[p] = f"jvp of ({format_entry(entry)})"
        else:
            out[p] = f"d({format_entry(entry)})/d{entry.inputs[i].name}"
    for p, x in tape.accumulations.items():
        entry = tape.at(p) if tape.base <= p < tape.end else None
        if entry is None:
            continue
        target = f"d{block_target(tape, p)}/d{x.name}"
        what = "indexing reads added into" if entry.prim.name == "scatter_add" else \
            "accumulation of"
        out[p] = f"{what} {target}"
    return out


def block_target(tape: Tape, position: int) -> str | None:
    """The name of what the innermost block open at ``position`` differentiates."""
    stack = []
    for event in tape.events:
        if event.position > position:
            break
        if type(event) is BlockBegin:
            stack.append(event.target.name)
        elif type(event) is BlockEnd and stack:
            stack.pop()
    return stack[-1] if stack else None

# ---------------------------------------------------------------- nan provenance


@dataclass(frozen=True)
class NonFinite:
    """Where a nan or inf first appears among a variable's ancestors."""

    entry: Variable         # the first entry (or leaf) whose value is not finite
    line: str               # its trace line
    kind: str               # "nan", "inf" or "nan and inf"
    order: int              # its derivative order (0: forward)
    block: str | None       # the derivative block it belongs to (``dL1``), if any
    differentiates: str | None  # for a gradient entry: the forward entry and input

    def __str__(self) -> str:
        where = "in the forward pass" if self.block is None else \
            f"in gradient block {self.block} (order {self.order})"
        text = f"first {self.kind}: {self.line}, {where}"
        if self.differentiates:
            text += f"; it computes {self.differentiates}"
        return text


def find_nonfinite(tape: Tape, v: Variable) -> NonFinite | None:
    """The first entry among v's ancestors whose value is not finite while its inputs are."""
    from .render import format_entry, format_value

    first = None
    seen: set[int] = set()
    stack = [v]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        bad = not _finite(x.raw) and all(_finite(getattr(i, "raw", i)) for i in x.inputs)
        if bad and (first is None or _when(x) < _when(first)):
            first = x
        stack.extend(i for i in x.inputs if type(i) is Variable)
    if first is None:
        return None
    arr = np.asarray(first.raw)
    kind = " and ".join(k for k, hit in (("nan", np.isnan(arr).any()),
                                         ("inf", np.isinf(arr).any())) if hit)
    line = format_entry(first) if first.prim is not None else \
        f"{first.name} = {format_value(first.raw)}"
    order = orders(tape).get(first, 0)
    target = block_target(tape, first.position) if order else None
    block = None if target is None else f"d{target}"
    origin = origins(tape).get(first.position) if first.prim is not None else None
    differentiates = None
    if origin is not None:
        entry, i = origin
        differentiates = (f"the tangent of {format_entry(entry)}" if i < 0 else
                          f"d({format_entry(entry)})/d{entry.inputs[i].name}")
    return NonFinite(first, line, kind, order, block, differentiates)


def _when(v: Variable) -> tuple[int, int]:
    """Recording order: a leaf comes before the entry that shares its position."""
    return (v.position, v.prim is not None)


def _finite(x: Any) -> bool:
    arr = np.asarray(x)
    return arr.dtype.kind not in "fc" or bool(np.isfinite(arr).all())
