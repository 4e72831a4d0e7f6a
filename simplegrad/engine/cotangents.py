"""Cotangents of a reverse sweep (reverse.py's ``sweep``): indexing reads kept sparse and
added once, cotangents added up, and the check that a requested gradient passes no input its
primitive has no derivative in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import NotDifferentiableError
from ..primitives.core import FUSED_SIZE
from .tape import ancestors
from .variable import Entry, Variable

if TYPE_CHECKING:
    from ..primitives import PrimitiveMethods
    from .tape import Tape


class Sparse:
    """Pending cotangent contributions of indexing reads: added into one dense array once."""

    __slots__ = ("dense", "grads", "indices", "shape")

    def __init__(self, g: Any, index: tuple, shape: tuple):
        self.dense = None
        self.grads = [g]
        self.indices = [index]
        self.shape = shape


def check_held(out: Entry, x: Entry, wanted: set | None, stop: int) -> None:
    """Raise when a requested gradient passes through input ``x`` of ``out``, an input its
    primitive has no derivative in (zeros would be a silently wrong answer)."""
    if wanted is None:
        reached = x
    else:
        reached = next((v for v in [x, *ancestors(x, stop, leaves=True)] if v in wanted), None)
        if reached is None:
            return
    via = "" if reached is x else f", which {reached.name} reaches"
    raise NotDifferentiableError(
        f"grad: {out.name} = {out.prim.name}(...) has no derivative in its input {x.name} "
        f"(shape {x.shape}){via}; hold {x.name} fixed with .detach() or differentiate in other "
        "variables")


def accumulate(o: PrimitiveMethods, tape: Tape, x: Entry, old: Any, new: Any) -> Any:
    """existing + new cotangent of x, keeping indexing reads sparse until they are needed."""
    if type(new) is Sparse:
        if type(old) is Sparse:
            old.grads.extend(new.grads)
            old.indices.extend(new.indices)
            if new.dense is not None:
                old.dense = (new.dense if old.dense is None
                             else _add_existing(o, tape, x, old.dense, new.dense))
            return old
        new.dense = old
        return new
    if type(old) is Sparse:
        old.dense = new if old.dense is None else _add_existing(o, tape, x, old.dense, new)
        return old
    return _add_existing(o, tape, x, old, new)


def add_values(o: PrimitiveMethods, tape: Tape, x: Entry, old: Any, new: Any, owned: set,
               fresh: bool) -> Any:
    """old + new cotangent of x in a value-only sweep, in place where that writes only the
    sweep's own buffers: into ``old`` when x is in ``owned`` (its total is a buffer the sweep
    made), else into ``new`` when ``fresh`` (a fused rule's new buffer); else a new array,
    owned from then on. Never into a user's array, a value kept on the tape, a broadcast view
    or an array a rule handed on; below ``FUSED_SIZE`` entries, a new array (a buffer saves
    less than its checks cost). The same value as ``old + new`` (the same operation)."""
    if type(old) is np.ndarray and type(new) is np.ndarray:
        if old.size < FUSED_SIZE or old.shape != new.shape or old.dtype != new.dtype:
            return o.add(old, new)      # (values: nothing recorded, no accumulation to note)
        if x in owned:
            return np.add(old, new, out=old)
        if fresh:
            owned.add(x)
            return np.add(old, new, out=new)
        total = o.add(old, new)
        if type(total) is np.ndarray:
            owned.add(x)
        return total
    if type(old) is not Sparse and type(new) is not Sparse:
        return _add_existing(o, tape, x, old, new)      # (numbers, stacks: accumulate's end)
    return accumulate(o, tape, x, old, new)


def _add_existing(o: PrimitiveMethods, tape: Tape, x: Entry, old: Any, new: Any) -> Any:
    total = o.add(old, new)
    if type(total) is Variable and tape.keep:
        tape.accumulations[total.node.position] = x
    return total


def densify(o: PrimitiveMethods, tape: Tape, x: Entry, s: Sparse) -> Any:
    dense = o.scatter_add(s.grads, s.indices, s.shape)
    if type(dense) is Variable and tape.keep:
        tape.accumulations[dense.node.position] = x
    return dense if s.dense is None else _add_existing(o, tape, x, s.dense, dense)
