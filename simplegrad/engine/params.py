"""Parameters: leaves that live across steps, bound to no Ops.

A ``Parameter`` (and any other free Variable, such as a parameter's ``.grad``) belongs to no
tape. Used in a primitive together with Variables of an Ops, it joins that Ops as a leaf
holding its current value (``W = [...]`` in the trace). Used with constants and other free
Variables only, it records on an implicit Ops that keeps no trace, held weakly here: the step's
Variables hold it, so its graph is freed by reference counting as soon as its last Variable
goes (flat memory in a training loop, no ``release()``). How an Ops takes a Parameter in (the
leaf standing for it there) is in ops.py. Free computations share one implicit Ops
until a backward pass through it or a parameter update ends the step; the next step starts a
new one. Each thread has its own implicit Ops, so threads training side by side (on their own
parameters) never record on each other's.

``loss.backward()`` accumulates each parameter's gradient into ``p.grad`` (a free Variable
holding the array); ``p.assign(array)`` replaces the value (tapes recorded before keep the
value they used, and ``op.grad(L, p)`` and ``backward`` count every use of p in L, each at the
value it had when it was used); ``p.grad = None`` resets it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import GraphError, ShapeError
from ..primitives import PrimitiveMethods
from ..primitives.core import Primitive
from .variable import Variable, float_array, leaf_variable

if TYPE_CHECKING:
    pass


class FreeOps(PrimitiveMethods):
    """The ``ops`` of free Variables: records each primitive on the Ops it belongs on."""

    absorbs = False     # (as Ops.absorbs)
    made_in = None

    recording = True
    simplify = False

    recorder: Callable[..., Any]    # the Ops class; ops.py, which defines it, sets it here

    def __init__(self) -> None:
        self._local = threading.local()     # per thread, .implicit: its implicit Ops (weak)

    def __repr__(self) -> str:
        return "<FreeOps: parameters and values bound to no tape>"

    def apply(self, prim: Primitive, inputs: Any, attrs: dict | None = None,
              name: str | None = None) -> Any:
        """Record ``prim`` on the Ops of a bound input, else on the implicit Ops."""
        for x in inputs:
            if isinstance(x, Variable) and x.rec is not self:
                return x.rec.apply(prim, inputs, attrs, name)
        return self.implicit().apply(prim, inputs, attrs, name)

    def implicit(self) -> Any:
        """The Ops that free computations record on: the one alive, or a new one."""
        ref = getattr(self._local, "implicit", None)
        ops = ref() if ref is not None else None
        if ops is None:
            ops = self.recorder(keep_trace=False)
            self._local.implicit = weakref.ref(ops)
        return ops

    def finish(self) -> None:
        """Start the next free computation on a new implicit Ops (after a backward pass or a
        parameter update: a new training step)."""
        self._local.implicit = None

    def unrecorded(self, value: Any, name: str | None = None) -> Variable:
        """A free Variable holding ``value`` (no history)."""
        return free(value, name, False)

    def detach(self, x: Variable) -> Variable:
        """A free copy of x's value through which no gradient flows."""
        return free(x.raw, None, False)

    def grad(self, L: Variable, *args: Any, **kwargs: Any) -> Any:
        """Refused: a free Variable has no history to differentiate."""
        raise GraphError(f"grad: {L.name} is bound to no Ops (a parameter or a value), so it "
                         "has no history; differentiate a result computed from it")

    backward = grad
    jvp = grad


FREE = FreeOps()


def free(value: Any, name: str | None, requires_grad: bool, cls: type | None = None) -> Variable:
    """A Variable bound to no Ops (its array made read-only)."""
    if type(value) is np.ndarray:
        value.setflags(write=False)
    return leaf_variable(value, FREE, name, requires_grad, 0, cls)


class Parameter(Variable):
    """A leaf that lives across steps, bound to no Ops (see the module docstring)."""

    __slots__ = ()

    def __new__(cls, value: Any, name: str | None = None,
                requires_grad: bool = True) -> Parameter:
        return free(float_array(value, name).copy(), name, bool(requires_grad), cls)

    def __init__(self, value: Any, name: str | None = None, requires_grad: bool = True):
        """A float copy of ``value`` (float64 unless it is float16/32/64)."""

    def __repr__(self) -> str:
        body = np.array2string(np.asarray(self.raw), precision=4, separator=", ")
        return f"Parameter({self.label or ''} = {body})".replace("( = ", "(")

    def __reduce__(self) -> tuple:
        return (Parameter, (np.array(self.raw), self.label, self.requires_grad))

    def assign(self, value: Any) -> None:
        """Replace the value by a float copy of ``value`` of the same shape."""
        arr = np.array(float_array(value, self.label), dtype=self.raw.dtype)
        if arr.shape != self.raw.shape:
            raise ShapeError(f"assign: {self.name} has shape {self.raw.shape}, the new value "
                             f"{arr.shape}")
        arr.setflags(write=False)
        self.raw = self.node.raw = arr
        FREE.finish()
