"""Gradient checkpointing: ``checkpoint(fn)``, a block recorded as one entry.

``checkpoint(fn)`` records the block as one entry on its inputs and keeps none
of its intermediates; its vjp re-runs ``fn`` and takes the gradient of the
recomputed output with ``Ops.grad``. Every Variable the block reads must be one
of its arguments, and the block must be deterministic (both are checked). Memory
is saved by value-only backward passes (``create_graph=False``, ``backward()``):
they hold one block's intermediates at a time. A recorded backward keeps the
recomputed intermediates, since the gradient program refers to them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine.ops import Ops
from ..engine.variable import Variable
from ..errors import GraphError
from ..primitives import PrimitiveMethods
from ..primitives.core import Primitive, value_of
from .custom import CustomFunction, user_attrs, wrap_values


class _Gate:
    """Closed while a checkpoint's own gradient is taken: its input entries stop the sweep."""

    __slots__ = ("closed",)

    def __init__(self) -> None:
        self.closed = False


_OPEN = _Gate()

# The identity entry through which a recomputed block reads an input: the inner sweep
# stops there (gate closed) instead of running on into the caller's graph, while later
# sweeps pass through it (gate open), so the cotangents stay functions of the true inputs.
_ENTER = Primitive(
    "checkpoint_input", lambda x, gate: x,
    [lambda o, g, out, x, gate: None if gate.closed else g],
    lambda o, ts, out, x, gate: ts[0], "{0}", [])


class Checkpoint(CustomFunction):
    """A block recorded as one entry; its intermediates are recomputed by the backward sweep."""

    def __init__(self, fn: Callable):
        super().__init__(fn, f"checkpoint({getattr(fn, '__name__', 'block')})")

    def _cotangents(self, o: PrimitiveMethods, g: Any, out: Any, inputs: tuple,
                    attrs: dict) -> list:
        wrt = attrs["_wrt"]
        gate = _Gate()
        r, args = self._enter(o, inputs, attrs, wrt, gate)
        recording = r is o
        try:
            y = self._recomputed(r, args, attrs, out)
            cts: list = [None] * len(inputs)
            if y is None:
                return cts
            targets = [args[i] for i in wrt]
            gate.closed = True
            try:
                gs = r.grad(y, targets, seed=g, create_graph=recording)
            finally:
                gate.closed = False
            for i, x, gx in zip(wrt, targets, gs):
                x.grad = None
                cts[i] = gx if recording else gx.raw
            return cts
        finally:
            if not recording:
                r.release()

    def _jvp(self, o: PrimitiveMethods, ts: list, out: Any, *inputs: Any, **attrs: Any) -> Any:
        moving = tuple(i for i, t in enumerate(ts) if t is not None)
        if not moving:
            return None
        r, args = self._enter(o, inputs, attrs, moving, _OPEN)
        recording = r is o
        try:
            y = self._recomputed(r, args, attrs, out)
            if y is None:
                return None
            ty = r.jvp(y, [args[i] for i in moving], [ts[i] for i in moving],
                       create_graph=recording)
            return ty if recording else ty.raw
        finally:
            if not recording:
                r.release()

    def _enter(self, o: PrimitiveMethods, inputs: tuple, attrs: dict, positions: tuple,
               gate: _Gate) -> tuple[Ops, list]:
        """The Ops to recompute on and the block's arguments, fresh entries at ``positions``."""
        if isinstance(o, Ops):
            args = list(inputs)
            for i in positions:
                args[i] = o.apply(_ENTER, (inputs[i],), {"gate": gate})
            return o, args
        r = Ops()
        args = wrap_values(r, inputs, attrs["_vars"])
        for i in positions:
            args[i] = r.leaf(inputs[i], None, True, "seed")
        return r, args

    def _recomputed(self, r: Ops, args: list, attrs: dict, out: Any) -> Variable | None:
        """The block re-run on ``args``; None when it does not depend on them."""
        y = self._fn(*args, **user_attrs(attrs))
        if not isinstance(y, Variable):
            self._as_array(y)
            return None
        if y.ops is not r:
            raise GraphError(f"{self._label}: the block returned {y.name}, a Variable of "
                             "another Ops")
        if not np.allclose(y.raw, value_of(out), rtol=1e-6, atol=1e-12, equal_nan=True):
            raise GraphError(f"{self._label}: recomputing the block gave a different value than "
                             "the forward pass; a checkpointed block must be deterministic")
        return y if y.requires_grad else None


def checkpoint(fn: Callable) -> Checkpoint:
    """``fn`` recorded as one entry whose intermediates are recomputed when differentiated."""
    return Checkpoint(fn)
