"""Where a nan or inf first appears among a Variable's ancestors, and what that entry computes.

Read from the tape's data after the fact (explain.py's orders, blocks and origins); nothing
here is computed while recording.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .explain import block_target, orders, origins
from .render import format_entry, format_value
from .tape import ancestors, materialize
from .variable import Entry

if TYPE_CHECKING:
    from .tape import Tape


@dataclass(frozen=True)
class NonFinite:
    """Where a nan or inf first appears among a variable's ancestors."""

    entry: Entry         # the first entry (or leaf) whose value is not finite
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


def find_nonfinite(tape: Tape, v: Entry) -> NonFinite | None:
    """The first entry among v's ancestors whose value is not finite while its inputs are."""
    path = ancestors(v, leaves=True)
    materialize(path)       # (a freed value is recomputed by replay)
    first = next((x for x in path if not _finite(x.raw) and
                  all(_finite(getattr(i, "raw", i)) for i in x.inputs)), None)
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


def _finite(x: Any) -> bool:
    arr = np.asarray(x)
    return arr.dtype.kind not in "fc" or bool(np.isfinite(arr).all())
