"""Gradient checkpointing: ``checkpoint(fn)``, a block recorded as one entry.

Calling ``checkpoint(fn)`` runs the block once on a scratch Ops (with that Ops around it, so
transforms inside it record there and may close over its arguments) and keeps the recorded
block as a ``Program``: its structure and its constants, not its intermediates. The entry
holds that program; its forward runs it, and its vjp and jvp replay it on the entry's inputs
(recorded, for a derivative that can be differentiated again, or on a throwaway Ops for a
value-only sweep). Replaying the program, rather than calling ``fn`` again, makes the
recomputation see the forward's random draws (a Dropout mask is a constant of the program,
whatever generator drew it) and the forward's branches.

Reads through a closure. A Variable the block reads that is not one of its arguments (a
``sg.Parameter``, or a Variable of the recording Ops or of a transform around the call) joins
the scratch Ops as a leaf standing for it, becomes an input of the program and an extra input
of the entry (printed as ``closure=[W]``), so its gradient flows as an argument's would. The
arguments and the Variables read must belong to one Ops (Parameters join it).

Under vmap (a batched argument, or a batched value read through a closure) the block runs
as it is, unwrapped: its values and derivatives are those of the block, and nothing is saved.

Memory is saved by value-only backward passes (``create_graph=False``, ``backward()``): they
hold one block's intermediates at a time. A recorded backward keeps the recomputed
intermediates, since the gradient program refers to them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import numpy as np

from ..engine.batching import Batched
from ..engine.ops import Ops
from ..engine.params import FREE
from ..engine.taylor import carry
from ..engine.variable import Entry, Variable
from ..errors import GraphError
from ..primitives import PrimitiveMethods
from ..primitives.core import Primitive
from ..program.core import Program, extract
from .arguments import around, recording_ops, running
from .custom import CustomFunction, _is_number, _undone_on_failure


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
    lambda o, ts, out, x, gate: ts[0], "{0}", [],
    taylor=lambda o, ss, out, x, gate: [out, *ss[0][1:]])     # (Taylor mode passes through)


class _BlockOps(Ops):
    """The scratch Ops a block records on: a Variable of another Ops (a Parameter included)
    becomes a leaf here, kept in ``reads`` so that the entry takes it as an input."""

    absorbs = True      # an operator on an outer Variable records here (Ops.apply)

    def __init__(self) -> None:
        super().__init__()      # (no borrowing: the program keeps its constants)
        self.made_in = around()
        self.reads: dict[int, tuple[Variable, Entry]] = {}   # id(x) -> (x, its leaf entry)

    def join(self, prim: Primitive, inputs: tuple, x: Variable) -> Entry:
        """The leaf entry standing for ``x`` here (made on first use)."""
        got = self.reads.get(id(x))
        if got is None:
            leaf = (super()._adopt(x) if x.rec is FREE else
                    self.leaf(x.raw, None, x.requires_grad).node)
            got = self.reads[id(x)] = (x, leaf)
        return got[1]

    def _adopt(self, p: Variable) -> Entry:
        return self.join(None, (), p)       # type: ignore[arg-type]

    def apply(self, prim: Primitive, inputs: Any, attrs: dict | None = None,
              name: str | None = None) -> Any:
        """As ``Ops.apply``; a batched value of a vmap around the block (read through a
        closure) stops the trace."""
        for x in inputs:
            if type(x) is Batched:
                while type(x) is Batched:
                    x = x.inner
                if not isinstance(x, Variable) or x.rec is not self:
                    raise _ReadsBatchedError
        return Ops.apply(self, prim, inputs, attrs, name)


class _ReadsBatchedError(Exception):
    """The block read a batched value through a closure: it runs unwrapped instead."""


class Checkpoint(CustomFunction):
    """A block recorded as one entry; its intermediates are recomputed by the backward sweep."""

    saves = ("inputs",)     # (the sweeps replay the block from its inputs; the output goes)

    def __init__(self, fn: Callable):
        super().__init__(fn, f"checkpoint({getattr(fn, '__name__', 'block')})")
        self.primitive.taylor = self._taylor
        self._ready: tuple | None = None    # (program, value) of the call being recorded

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Record one entry on the Ops of the Variables the block reads (arrays in, arrays
        out)."""
        self._check_keywords(kwargs)
        outer = self._ops(args)
        if any(type(x) is Batched for x in args):
            return self._fn(*args, **kwargs)        # under vmap: the block as it is
        with _undone_on_failure(outer) if outer is not None else nullcontext():
            traced = self._trace(args, kwargs)
        if not isinstance(traced, tuple):
            return traced                   # it read a batched value: the block as it is
        positions, program, value, sources = traced
        ops = self._entry_ops(args, sources)
        if ops is None:         # no Variable anywhere: the value
            return np.array(value)
        n = len(args)
        attrs = dict(kwargs, _program=program, _n=n,
                     _vars=positions + tuple(range(n, n + len(sources))))
        attrs["_wrt"] = tuple(i for i in attrs["_vars"]
                              if getattr(args[i] if i < n else sources[i - n], "requires_grad",
                                         False))
        self._ready = (program, value)
        try:
            with _undone_on_failure(ops):
                return ops.apply(self.primitive, (*args, *sources), attrs, None)
        finally:
            self._ready = None

    def _trace(self, args: tuple, kwargs: dict) -> Any:
        """The block run once on a scratch Ops: the argument positions that are inputs of its
        program, the program, the value, and the Variables read through closures."""
        scratch = _BlockOps()
        positions = tuple(i for i, x in enumerate(args) if isinstance(x, Variable))
        if not positions:       # arrays in: the block sees them as Variables (constants)
            positions = tuple(i for i, x in enumerate(args) if not _is_number(x))
        call = list(args)
        for i in positions:
            x = args[i]
            call[i] = (scratch.leaf(x.raw, None, x.requires_grad) if isinstance(x, Variable)
                       else scratch.var(x, requires_grad=False))
        try:
            try:
                with running(scratch):
                    y = self._fn(*call, **kwargs)
            except _ReadsBatchedError:
                scratch.release()
                return self._fn(*args, **kwargs)
            if not isinstance(y, Variable):
                self._as_array(y)
                y = scratch.var(y, requires_grad=False)
            elif y.rec is not scratch:      # the block returned a Variable it read
                y = scratch.reshape(y, y.shape)
            reads = list(scratch.reads.values())
            program = extract([call[i] for i in positions] + [leaf for _, leaf in reads], y)
            return positions, program, y.raw, [x for x, _ in reads]
        finally:
            scratch.release()

    def _entry_ops(self, args: tuple, sources: list) -> Ops | None:
        """The Ops that records the entry: the arguments', else the transform's around the
        call, else that of the Variables read (Parameters join it). Inside an enclosing
        checkpoint's block, Variables of any other Ops are read as closures of that block."""
        ops = recording_ops(self._label, args)
        if ops is None or ops is FREE:
            ops = around() or recording_ops(self._label, sources) or ops
            if ops is FREE:
                ops = FREE.implicit()
        for x in sources:
            if x.rec is not FREE and x.rec is not ops and not isinstance(ops, _BlockOps):
                raise GraphError(f"{self._label}: the block reads {x.name} through a closure, "
                                 "a Variable of another Ops than its arguments' (a released "
                                 "tape, or another computation); compute it on their Ops, or "
                                 "keep values that live across steps as sg.Parameter")
        return ops

    # ------------------------------------------------------------ the primitive's rules

    def _forward(self, *values: Any, **attrs: Any) -> Any:
        program = attrs["_program"]
        ready = self._ready
        if ready is not None and ready[0] is program:   # the call that recorded it: its value
            return ready[1]
        return program(*[values[i] for i in attrs["_vars"]])

    def _fmt(self, args: list[str], attrs: dict, render: Callable) -> str:
        n = attrs.get("_n", len(args))
        shown = args[:n] + [f"{k}={render(v, k)}" for k, v in attrs.items()
                            if not k.startswith("_")]
        if len(args) > n:
            shown.append(f"closure=[{', '.join(args[n:])}]")
        return f"{self._label}({', '.join(shown)})"

    def _cotangents(self, o: PrimitiveMethods, g: Any, out: Any, inputs: tuple,
                    attrs: dict) -> list:
        wrt = attrs["_wrt"]
        gate = _Gate()
        r, args = self._enter(o, inputs, attrs, wrt, gate)
        recording = r is o
        try:
            y = _replay(r, attrs, args)
            cts: list = [None] * len(inputs)
            if not isinstance(y, Variable) or not y.requires_grad:
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
            y = _replay(r, attrs, args)
            if not isinstance(y, Variable) or not y.requires_grad:
                return None
            ty = r.jvp(y, [args[i] for i in moving], [ts[i] for i in moving],
                       create_graph=recording)
            return ty if recording else ty.raw
        finally:
            if not recording:
                r.release()

    def _taylor(self, o: PrimitiveMethods, ss: list, out: Any, *inputs: Any,
                **attrs: Any) -> list:
        """The output's Taylor series: the block replayed, its entries' Taylor rules carried
        from the inputs' series (a block is transparent to Taylor mode as to the sweeps)."""
        order = len(ss[0]) - 1
        moving = tuple(i for i, s in enumerate(ss) if any(c is not None for c in s[1:]))
        if not moving:
            return [out] + [None] * order
        r, args = self._enter(o, inputs, attrs, moving, _OPEN)
        recording = r is o
        try:
            y = _replay(r, attrs, args)
            if not isinstance(y, Variable) or not y.requires_grad:
                return [out] + [None] * order
            known = {args[i]: [args[i] if recording else args[i].raw, *ss[i][1:]]
                     for i in moving}
            res = carry(o, y, known, order, recording)
            return [out, *res[1:]]
        finally:
            if not recording:
                r.release()

    def _enter(self, o: PrimitiveMethods, inputs: tuple, attrs: dict, positions: tuple,
               gate: _Gate) -> tuple[Ops, list]:
        """The Ops to recompute on and the block's inputs, fresh entries at ``positions``."""
        if isinstance(o, Ops):
            args = list(inputs)
            for i in positions:
                args[i] = o.apply(_ENTER, (inputs[i],), {"gate": gate}, None)
            return o, args
        r = Ops()
        args = list(inputs)
        for i in attrs["_vars"]:
            args[i] = (r.leaf(inputs[i], None, True, "seed") if i in positions else
                       r.unrecorded(inputs[i]))
        return r, args


def _replay(r: Ops, attrs: dict, args: list) -> Any:
    """The block's program recorded again on ``r``, on the entry's inputs ``args``."""
    program: Program = attrs["_program"]
    with running(r):
        return program.record(r, *[args[i] for i in attrs["_vars"]])


def checkpoint(fn: Callable) -> Checkpoint:
    """``fn`` recorded as one entry whose intermediates are recomputed when differentiated."""
    return Checkpoint(fn)

