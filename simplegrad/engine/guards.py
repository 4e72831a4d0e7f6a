"""What the sweeps check before they run: the output and inputs they are given, whether the
output still has a history to differentiate, and whether a reused tape keeps growing.

Gradients never come back silently zero for a reason the caller can fix: an output whose Ops
was released, or that was computed under ``no_grad``, is refused (``check_history``); a tape
that serves pass after pass of new computations warns (``count_pass``). A rule that fails
during a sweep with an error not of simplegrad's own (numpy's, a MemoryError, a user's rule)
keeps its type and gains a note naming the entry it was at (``note_entry``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import (
    ArgumentError,
    DTypeError,
    GraphError,
    ShapeError,
    SimplegradError,
    TapeGrowthWarning,
    warn,
)
from ..primitives.core import describe, value_of
from .render import format_entry
from .tape import ancestors
from .variable import RELEASED, Entry, NoHistory, Variable

if TYPE_CHECKING:
    from .ops import Ops
    from .tape import Tape

# ---------------------------------------------------------------- arguments


def check_target(ops: Ops, op: str, L: Any) -> None:
    """Refuse an L that is not a Variable of ``ops``."""
    if not isinstance(L, Variable):
        raise ArgumentError(f"{op}: expected a Variable to differentiate, got "
                            f"{type(L).__name__}")
    if L.rec is not ops:
        raise GraphError(f"{op}: {L.name} belongs to another Ops")


def check_wrt(ops: Ops, op: str, w: Any) -> None:
    """Refuse a ``wrt`` that is not a Variable of ``ops`` requiring grad."""
    if not isinstance(w, Variable):
        raise ArgumentError(f"{op}: wrt must be Variables, got {type(w).__name__}")
    if w.rec is not ops:
        raise GraphError(f"{op}: {w.name} belongs to another Ops")
    if not w.requires_grad:
        raise GraphError(f"{op}: {w.name} does not require grad (created with "
                         "requires_grad=False, detached, or computed without recording)")


def check_history(op: str, L: Variable, wrt: Sequence[Variable]) -> None:
    """Refuse a derivative of L that would be zero only because L's history is gone: L's Ops
    was released after L was recorded, or L (or all that L requires grad through) was computed
    under no_grad. An L that does not depend on ``wrt`` through its recorded history keeps its
    zeros (JAX's semantics)."""
    if L.prim is not None and L.requires_grad or L.attrs is None and L.requires_grad:
        return          # (the common case, first)
    if any(L.node is w.node for w in wrt):
        return          # dL/dL is the seed
    cause = L if L.prim is None and type(L.attrs) is NoHistory else None
    if cause is None and not L.requires_grad:   # nothing it depends on requires grad: why?
        for v in ancestors(L, leaves=True):
            if v.prim is None and type(v.attrs) is NoHistory:
                cause = v
                break
    if cause is None:
        return
    what = f"{L.name}" if cause is L else f"{L.name} is computed from a value that"
    if cause.attrs is RELEASED:
        raise GraphError(f"{op}: {what} has no history: its Ops was released (op.release(), "
                         "the end of `with sg.Ops() as op:`, or a backward() that ended a step "
                         "on sg.Parameter values) after it was recorded, so no gradient can "
                         "reach what it was computed from; compute the gradient before the "
                         "release (inside the with block; for several losses of one step, "
                         "backward() their sum, or keep the step with backward(retain_graph="
                         "True) as in PyTorch), or record it again")
    raise GraphError(f"{op}: {what} was computed under op.no_grad(), which records nothing, so "
                     "it has no history to differentiate; compute it outside the no_grad block")


def check_unreached(op: str, L: Variable, wrt: Sequence[Variable]) -> None:
    """Refuse zeros that come from a release between ``wrt`` and L: L is computed from a
    value whose history was released after some ``wrt`` was made, so a path from it may have
    been cut (called only when the sweep reached no ``wrt``)."""
    oldest = min((w.position for w in wrt), default=None)
    if oldest is None:
        return
    for v in ancestors(L, leaves=True):
        if v.prim is None and v.attrs is RELEASED and v.position > oldest:
            raise GraphError(f"{op}: {L.name} is computed from {v.name}, whose history was "
                             "released (op.release(), the end of `with sg.Ops() as op:`, or a "
                             "backward() that ended a step on sg.Parameter values), so no "
                             "gradient can reach what it was computed from; compute the "
                             "gradient before the release, or record it again")


def seed_value(ops: Ops, op: str, L: Variable, seed: Any) -> np.ndarray:
    """The seed of a sweep from L as an array of L's shape and dtype (ones for a scalar L)."""
    if seed is None:
        if L.raw.size != 1:
            raise ShapeError(f"{op}: {L.name} has shape {L.shape}, not a scalar: pass "
                             f"seed= of that shape or reduce it with .sum()")
        return np.ones(L.shape, dtype=L.dtype)
    if isinstance(seed, Variable) and seed.rec is not ops:
        raise GraphError(f"{op}: the seed {seed.name} belongs to another Ops")
    arr = np.asarray(value_of(seed))
    if arr.shape != L.shape:
        raise ShapeError(f"{op}: seed has shape {arr.shape} but {L.name} has shape {L.shape}")
    if arr.dtype.kind not in "biuf":
        raise DTypeError(f"{op}: seed of dtype {arr.dtype} is not supported")
    return np.array(arr, dtype=L.dtype)


# ---------------------------------------------------------------- a growing tape


GROWTH_PASSES = 100     # backward passes of new steps on one tape before it warns
GROWTH_MESSAGE = (
    f"this Ops has served {GROWTH_PASSES} backward passes of new computations and still holds "
    "every entry and array recorded since it was made or released; in a training loop record "
    "each step on its own Ops (`with sg.Ops() as op:`), call op.release() after each step, or "
    "keep the weights as sg.Parameter (freed automatically)")


def count_pass(tape: Tape, L: Variable) -> None:
    """Count a backward pass that starts a new step on a tape that keeps growing, and warn at
    each one from the ``GROWTH_PASSES``-th on (Python's filters decide repeats).

    Not counted: a pass with nothing recorded since the last one (a Jacobian's rows swept over
    one graph), and one whose L is computed from entries recorded before the last pass (a
    derivative of a derivative, a Hessian's rows: one step's nested passes). What a training
    loop on one Ops records between its passes is a new forward from the leaves.
    """
    end, last = tape.end, tape.last_pass_end
    if end == last or not tape.keep:
        return
    if last >= tape.base and builds_on(L, last):
        return
    tape.passes += 1
    if tape.passes >= GROWTH_PASSES:
        warn(GROWTH_MESSAGE, TapeGrowthWarning)


def builds_on(L: Variable, mark: int) -> bool:
    """True when L, through the entries recorded at ``mark`` or later, reaches an older entry
    that requires grad (a walk over the new entries only)."""
    stack, seen = [L.node if isinstance(L, Variable) else L], set()
    while stack:
        v = stack.pop()
        if v.prim is None or not v.requires_grad:
            continue
        if v.position < mark:
            return True
        if v.position in seen:
            continue
        seen.add(v.position)
        stack.extend(x for x in v.inputs if type(x) is Entry)
    return False


# ---------------------------------------------------------------- failures during a sweep


def note_entry(e: BaseException, out: Any, x: Any, what: str) -> None:
    """Add to ``e`` (an error not of simplegrad's) a note naming the entry ``out`` whose
    ``what`` rule failed (and its input ``x``), once: an outer sweep does not add another."""
    if isinstance(e, SimplegradError) or not isinstance(e, Exception) or \
            not isinstance(out, (Variable, Entry)) or out.prim is None:
        return
    notes = getattr(e, "__notes__", None)
    if notes and any(n.startswith("simplegrad: ") for n in notes):
        return
    to = ""
    if isinstance(x, (Variable, Entry)):
        to = f" to its input {format_entry(x) if x.prim is not None else x.name}"
    note = f"simplegrad: in the {what} of {format_entry(out)} ({describe(out.inputs)}){to}"
    if hasattr(e, "add_note"):
        e.add_note(note)
    else:                           # (Python 3.10: the attribute PEP 678 reads)
        e.__notes__ = [*(notes or []), note]
