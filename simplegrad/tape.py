"""Ops: the tape, the v-counter, leaves, recording on and off (the sweeps are in sweeps.py)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from . import render
from .errors import (
    ArgumentError,
    AxisError,
    DTypeError,
    GraphError,
    LinAlgError,
    OutOfBoundsError,
    ShapeError,
    SimplegradError,
)
from .primitives import PrimitiveMethods
from .primitives.core import Primitive
from .sweeps import Sweeps
from .variable import Variable

_new = object.__new__
_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


class Tape(Sequence):
    """Read-only view of an Ops' recorded entries; each entry is the Variable it produced."""

    __slots__ = ("_entries",)

    def __init__(self, entries: list[Variable]):
        self._entries = entries

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, i):
        return self._entries[i]


class Ops(Sweeps, PrimitiveMethods):
    """One tape and one v-counter: every primitive called on it records one entry."""

    def __init__(self, echo: bool = False):
        self._tape: list[Variable] = []
        self._marks: list[tuple[int, str, Any]] = []   # (tape position, kind, payload)
        self._next = 0          # the next v-number
        self._recording = True
        self._accumulations: set[int] = set()     # positions of gradient accumulations
        self._ancestry: tuple | None = None       # jvp's last (y, start, entry positions)
        self.echo = echo

    def __repr__(self) -> str:
        state = "" if self._recording else ", not recording"
        return f"<Ops: {len(self._tape)} entries, next v{self._next}{state}>"

    # ------------------------------------------------------------ the tape

    @property
    def tape(self) -> Tape:
        """The recorded entries, oldest first."""
        return Tape(self._tape)

    def format_trace(self) -> str:
        """The whole trace as text, in the seed's format."""
        return "\n".join(render.lines(self))

    def print_trace(self, console: Any = None) -> None:
        """Print the trace with rich colours (forward, gradient blocks, accumulations)."""
        render.print_rich(self, console)

    def release(self) -> None:
        """Forget the recorded history so its memory returns now; Variables keep their values.

        An Ops and its Variables refer to each other, so a dropped tape is otherwise freed only
        by Python's cyclic garbage collector, which counts objects, not bytes. Afterwards every
        Variable of this Ops is a leaf (no history) and the trace is empty.
        """
        for v in self._tape:
            v.prim, v.inputs, v.attrs, v.position = None, (), None, 0
        for _, kind, payload in self._marks:
            if kind in ("leaf", "seed", "zeros", "detach"):
                (payload[0] if kind == "detach" else payload).position = 0
        self._tape.clear()
        self._marks.clear()
        self._accumulations.clear()
        self._ancestry = None

    def __enter__(self) -> Ops:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    @contextmanager
    def no_grad(self) -> Iterator[None]:
        """Within the block, primitives compute values and record nothing."""
        before = self._recording
        self._recording = False
        try:
            yield
        finally:
            self._recording = before

    # ------------------------------------------------------------ leaves

    def var(self, value: Any, name: str | None = None, requires_grad: bool = True) -> Variable:
        """A leaf holding a float copy of ``value`` (float64 unless it is float16/32/64)."""
        arr = _float_array(value, name)
        return self._leaf(arr, _check_name(name), bool(requires_grad), "leaf")

    def named_var(self, value: Any, name: str) -> Variable:
        """A named leaf; its name prints in the trace and consumes no v-number."""
        if name is None:
            raise ArgumentError("named_var needs a name")
        return self.var(value, name=name)

    def _leaf(self, arr: np.ndarray, name: str | None, requires_grad: bool, kind: str,
              source: Variable | None = None) -> Variable:
        if type(arr) is not np.ndarray:
            arr = np.asarray(arr)
        arr.flags.writeable = False
        if name is None:
            name = self._next
            self._next += 1
        v = self._bare(arr, name, requires_grad)
        mark = (v.position, kind, v if source is None else (v, source))
        self._marks.append(mark)
        if self.echo:
            render.echo(self, mark)
        return v

    def _unrecorded(self, value: Any, name: str | None = None) -> Variable:
        """A Variable of this Ops that is on no tape and takes no v-number."""
        if type(value) is not np.ndarray and isinstance(value, np.generic):
            value = np.asarray(value)
        return self._bare(value, name, False)

    def _bare(self, value: Any, name: str | int | None, requires_grad: bool) -> Variable:
        """A Variable computed by no primitive; ``_pos`` is where its dependents can start."""
        v = _new(Variable)
        v.raw = value
        v.ops = self
        v.label = name
        v.grad = None
        v.requires_grad = requires_grad
        v.prim = None
        v.inputs = ()
        v.attrs = None
        v.position = len(self._tape)
        return v

    def _detach(self, x: Variable) -> Variable:
        if not self._recording:
            return self._unrecorded(x.raw)
        return self._leaf(x.raw, None, False, "detach", source=x)

    # ------------------------------------------------------------ recording

    def _apply(self, prim: Primitive, inputs: tuple, attrs: dict | None, name: str | None):
        values = []
        ref = None
        requires = False
        convert = False
        for x in inputs:
            tx = type(x)
            if tx is Variable:
                if x.ops is not self:
                    raise self._error(prim.name, inputs, "its inputs belong to different Ops",
                                      GraphError)
                if ref is None:
                    ref = x
                requires = requires or x.requires_grad
                values.append(x.raw)
            elif tx is float or tx is int:
                values.append(x)
            else:
                convert = True
                values.append(x)
        if ref is None:         # constants only: fold, record nothing
            return prim.forward(*values, **attrs) if attrs else prim.forward(*values)
        if convert:
            inputs, values = self._constants(prim, inputs, values, ref)
        try:
            value = prim.forward(*values, **attrs) if attrs else prim.forward(*values)
        except Exception as e:  # numpy's message, with our names and shapes
            err = self._translate(prim, inputs, e)
            if err is e:
                raise
            raise err from e
        if type(value) is not np.ndarray and isinstance(value, np.generic):
            value = np.asarray(value)
        if not self._recording:
            return self._unrecorded(value)
        out = _new(Variable)        # _bare's work inlined: this is the hot path
        out.raw = value
        out.ops = self
        if name is None:
            name = self._next
            self._next = name + 1
        elif type(name) is not str:
            name = _check_name(name)
        out.label = name
        out.grad = None
        out.requires_grad = requires and prim.differentiable
        out.prim = prim
        out.inputs = inputs
        out.attrs = attrs
        tape = self._tape
        out.position = len(tape)
        tape.append(out)
        if self.echo:
            render.echo(self, out)
        return out

    def _constants(self, prim: Primitive, inputs: tuple, values: list, ref: Variable):
        """Convert non-Python-number constants: 0-d become numbers, arrays read-only copies
        (a read-only array of the right dtype is kept as it is)."""
        dtype = next((x.raw.dtype for x in inputs if type(x) is Variable
                      and x.raw.dtype.kind == "f"), ref.raw.dtype)
        inputs = list(inputs)
        for i, x in enumerate(inputs):
            if type(x) is Variable or type(x) is float or type(x) is int:
                continue
            if isinstance(x, (bool, np.bool_)):
                x = float(x)
            elif isinstance(x, (np.ndarray, np.generic, list, tuple, float, int)):
                arr = np.asarray(x)
                if arr.dtype.kind not in "biuf":
                    raise self._error(prim.name, tuple(inputs),
                                      f"constant of dtype {arr.dtype} is not supported", DTypeError)
                if arr.ndim == 0:
                    x = int(arr) if arr.dtype.kind in "iu" else float(arr)
                elif arr.dtype.kind == "b":         # masks and conditions stay bool
                    x = arr if _frozen(arr) else arr.copy()
                    x.flags.writeable = False
                elif arr.dtype == dtype and _frozen(arr):
                    x = arr         # read-only all the way down (a Variable's value): no copy
                else:
                    x = np.array(arr, dtype=dtype)      # the caller may mutate theirs later
                    x.flags.writeable = False
            else:
                raise self._error(prim.name, tuple(inputs),
                                  f"cannot take a {type(x).__name__} as an operand", ArgumentError)
            inputs[i] = x
            values[i] = x
        return tuple(inputs), values

    def _error(self, op: str, inputs: tuple, reason: str, kind: type) -> Exception:
        return kind(f"{op}: {reason} ({_describe(inputs)})")

    def _translate(self, prim: Primitive, inputs: tuple, e: Exception) -> Exception:
        if isinstance(e, SimplegradError):     # ours already (from a custom forward, say)
            return e
        if isinstance(e, np.linalg.LinAlgError):
            kind = LinAlgError
        elif isinstance(e, np.exceptions.AxisError):
            kind = AxisError
        elif isinstance(e, IndexError):
            kind = OutOfBoundsError
        elif isinstance(e, ValueError):
            kind = ShapeError
        elif isinstance(e, TypeError):
            kind = ArgumentError
        else:
            return e
        reason = str(e).strip()     # numpy's message may already name the function
        if reason.startswith(prim.name + ": "):
            reason = reason[len(prim.name) + 2:]
        return self._error(prim.name, inputs, reason, kind)

def _float_array(value: Any, name: str | None) -> np.ndarray:
    """A fresh float array from user data; bool and int become float64."""
    if isinstance(value, Variable):
        value = value.raw
    try:
        arr = np.array(value)
    except Exception as e:
        raise DTypeError(f"var {name or ''}: cannot make an array of {type(value).__name__}: "
                         f"{e}") from None
    if arr.dtype in _FLOATS:
        return arr
    if arr.dtype.kind in "biu":
        return arr.astype(np.float64)
    raise DTypeError(f"var {name or ''}: values of dtype {arr.dtype} cannot be differentiated; "
                     "use real floats (float16, float32 or float64)")


def _frozen(arr: np.ndarray) -> bool:
    """True when neither the array nor any array it views can be written through."""
    while isinstance(arr, np.ndarray):
        if arr.flags.writeable:
            return False
        arr = arr.base
    return True


def _check_name(name: Any) -> str | None:
    if name is not None and not isinstance(name, str):
        raise ArgumentError(f"a name must be a str, got {type(name).__name__}")
    return name


def _describe(inputs: tuple) -> str:
    parts = []
    for x in inputs:
        if isinstance(x, Variable):
            parts.append(f"{x.name} with shape {x.shape}")
        else:
            parts.append(f"constant with shape {np.shape(x)}")
    return ", ".join(parts)
