"""Parameters: leaves that live across steps, bound to no Ops.

A ``Parameter`` (and any other free Variable, such as a parameter's ``.grad``) belongs to no
tape. Used in a primitive together with Variables of an Ops, it joins that Ops as a leaf
holding its current value (``W = [...]`` in the trace). Used with constants and other free
Variables only, it records on an implicit Ops that keeps no trace: that Ops holds its entries
weakly, so a step's graph is freed by reference counting as soon as its last Variable goes
(flat memory in a training loop, no ``release()``). Free computations share one implicit Ops
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
from .operands import error, float_array
from .variable import Entry, Variable, handle, leaf_variable

if TYPE_CHECKING:
    from .ops import Ops


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


class Adoptions:
    """Which leaf entry stands for each free Variable (a Parameter) on one Ops, and back.

    The Ops holds its leaf entries (entries point at no Variable, so nothing here makes a
    cycle) and the Parameters weakly, in plain dicts: each step of a training loop adopts
    every parameter anew. A leaf replaced while its tape still reads it (after ``p.assign``)
    still routes its gradient to p; entries whose Parameter is gone are pruned when the Ops is
    released.
    """

    __slots__ = ("leaves", "sources", "replaced")

    def __init__(self) -> None:
        self.leaves: dict[int, tuple] = {}     # id(p) -> (p weakly, its leaf entry)
        self.sources: dict[Entry, weakref.ref] = {}    # leaf entry -> its p, weakly
        self.replaced: dict[int, list] = {}    # id(p) -> p's earlier leaf entries

    def leaf(self, ops: Ops, p: Variable) -> Entry:
        """The leaf entry standing for p on ``ops``: made on first use, and again after p's
        value was replaced."""
        got = self.leaves.get(id(p))
        if got is not None and got[0]() is p:
            leaf = got[1]
            if leaf.raw is p.raw:
                return leaf
            self.replaced.setdefault(id(p), []).append(leaf)    # p.assign: kept for grad
        leaf = ops.leaf(p.raw, p.label if type(p.label) is str else None, p.requires_grad,
                        "leaf", source=p).node
        self.leaves[id(p)] = (weakref.ref(p), leaf)
        self.sources[leaf] = weakref.ref(p)
        return leaf

    def earlier(self, p: Variable) -> list[Entry]:
        """p's leaf entries on this Ops from before its value was replaced (``p.assign``)."""
        return [leaf for leaf in self.replaced.get(id(p), ()) if self.source(leaf) is p]

    def source(self, leaf: Entry) -> Variable | None:
        """The free Variable ``leaf`` stands for, if any."""
        ref = self.sources.get(leaf)
        return None if ref is None else ref()

    def prune(self) -> None:
        """After a release: forget the leaves no later sweep can reach (those of Parameters
        that are gone, and those replaced by ``p.assign``, which only the released history
        read); each live Parameter keeps its current leaf."""
        self.leaves = {k: e for k, e in self.leaves.items() if e[0]() is not None}
        current = {e[1] for e in self.leaves.values()}
        self.sources = {k: r for k, r in self.sources.items() if k in current}
        self.replaced = {}


class JoinsParameters:
    """What a Recorder does with a Variable of another Ops: a free one (a Parameter) joins as
    a leaf standing for it (``Adoptions``); any other is refused, naming the operation."""

    _adoptions: Adoptions | None

    def join(self, prim: Primitive, inputs: tuple, x: Variable) -> Entry:
        """The entry standing for x, a Variable of another Ops, here: a free Variable's leaf,
        or an error naming the operation for any other."""
        if x.rec is not FREE:
            raise error(prim.name, inputs, _foreign(x), GraphError)
        return self._adopt(x)

    def _adopt(self, p: Variable) -> Entry:
        """The leaf entry standing for the free Variable p on this Ops (``params.Adoptions``)."""
        adoptions = self._adoptions
        if adoptions is None:
            adoptions = self._adoptions = Adoptions()
        return adoptions.leaf(self, p)

    def leaf_for(self, w: Variable) -> Variable:
        """w itself, or for a free Variable (a Parameter) a Variable of the leaf standing for
        it here."""
        if isinstance(w, Variable) and w.rec is FREE:
            leaf = self._adopt(w)
            return handle(leaf.raw, leaf, self)
        return w

    def earlier_leaves(self, w: Variable) -> list[Entry]:
        """For a free Variable (a Parameter), its leaf entries here from before ``w.assign``."""
        adoptions = self._adoptions
        if adoptions is None or not isinstance(w, Variable) or w.rec is not FREE:
            return []
        return adoptions.earlier(w)

    def source_of(self, leaf: Entry | Variable) -> Variable | None:
        """The free Variable (a Parameter) a leaf of this Ops stands for, if any."""
        adoptions = self._adoptions
        if adoptions is None:
            return None
        return adoptions.source(leaf.node if isinstance(leaf, Variable) else leaf)


def _foreign(x: Variable) -> str:
    """What to do with a Variable of another Ops: its history is gone (released) or it
    belongs to another live computation."""
    tape = getattr(x.rec, "tape", None)
    if tape is not None and x.position < tape.base:
        return (f"{x.name} belongs to an Ops released since it was recorded, so it has no "
                f"history left: use {x.name}.value here as a constant, make it a leaf of this "
                f"Ops to differentiate with respect to it (op.var({x.name}.value)), or keep "
                "values that live across steps as sg.Parameter")
    return (f"{x.name} belongs to another Ops, still live: record the whole computation on "
            f"one Ops (create {x.name} there, or pass it to the transform as an argument, "
            "so that the transform records on its Ops), or keep values that live across "
            "steps as sg.Parameter")


def free(value: Any, name: str | None, requires_grad: bool, cls: type | None = None) -> Variable:
    """A Variable bound to no Ops (its array made read-only)."""
    if type(value) is np.ndarray:
        value.flags.writeable = False
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
        arr.flags.writeable = False
        self.raw = self.node.raw = arr
        FREE.finish()
