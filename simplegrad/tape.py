"""Ops: the tape, the v-counter, recording on and off, and the reverse and forward sweeps."""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
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
from .primitives import REGISTRY, ElementwiseOps, LinalgOps, ReduceOps, ShapeOps
from .primitives.core import Primitive, dtype_of, value_of
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


class _Sparse:
    """Pending cotangent contributions of indexing reads: added into one dense array once."""

    __slots__ = ("dense", "grads", "indices", "shape")

    def __init__(self, g: Any, index: tuple, shape: tuple):
        self.dense = None
        self.grads = [g]
        self.indices = [index]
        self.shape = shape


class _Primitives(ElementwiseOps, ReduceOps, ShapeOps, LinalgOps):
    """Every primitive as a method, plus the generic form; subclasses say what _apply does."""

    # during a reverse sweep: where the cotangent being pulled back is zero by construction
    _zero_mask: np.ndarray | None = None

    def apply(self, prim: Primitive, inputs: Sequence[Any], attrs: dict | None = None,
              name: str | None = None) -> Any:
        """Run ``prim`` on ``inputs`` with ``attrs`` (the generic form of every method)."""
        return self._apply(prim, tuple(inputs), attrs or None, name)


class ValueOps(_Primitives):
    """The same primitive methods run on plain numpy values: nothing is recorded."""

    def _apply(self, prim: Primitive, inputs: tuple, attrs: dict | None, name: str | None):
        return prim.forward(*inputs, **attrs) if attrs else prim.forward(*inputs)

    def _condition(self, cond: Any) -> Any:
        return cond


for _prim in REGISTRY.values():
    if _prim.plain:     # skip the method and _apply layers when only values are wanted
        setattr(ValueOps, _prim.name, staticmethod(_prim.forward))

VALUES = ValueOps()


class Ops(_Primitives):
    """One tape and one v-counter: every primitive called on it records one entry."""

    def __init__(self, echo: bool = False):
        self._tape: list[Variable] = []
        self._marks: list[tuple[int, str, Any]] = []   # (tape position, kind, payload)
        self._next = 0          # the next v-number
        self._recording = True
        self._accumulations: set[int] = set()     # positions of gradient accumulations
        self.echo = echo

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
        mark = (v._pos, kind, v if source is None else (v, source))
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
        v._value = value
        v.ops = self
        v._name = name
        v.grad = None
        v.requires_grad = requires_grad
        v.prim = None
        v.inputs = ()
        v.attrs = None
        v._pos = len(self._tape)
        return v

    def _detach(self, x: Variable) -> Variable:
        if not self._recording:
            return self._unrecorded(x._value)
        return self._leaf(x._value, None, False, "detach", source=x)

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
                values.append(x._value)
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
        out._value = value
        out.ops = self
        if name is None:
            name = self._next
            self._next = name + 1
        elif type(name) is not str:
            name = _check_name(name)
        out._name = name
        out.grad = None
        out.requires_grad = requires
        out.prim = prim
        out.inputs = inputs
        out.attrs = attrs
        tape = self._tape
        out._pos = len(tape)
        tape.append(out)
        if self.echo:
            render.echo(self, out)
        return out

    def _constants(self, prim: Primitive, inputs: tuple, values: list, ref: Variable):
        """Convert non-Python-number constants: 0-d become numbers, arrays read-only copies."""
        dtype = ref._value.dtype
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
                else:
                    x = np.array(arr, dtype=dtype)
                    x.flags.writeable = False
            else:
                raise self._error(prim.name, tuple(inputs),
                                  f"cannot take a {type(x).__name__} as an operand", ArgumentError)
            inputs[i] = x
            values[i] = x
        return tuple(inputs), values

    def _condition(self, cond: Any) -> np.ndarray:
        """A where-condition as a read-only bool array (a constant, never a Variable)."""
        if isinstance(cond, Variable):
            raise ArgumentError(f"where: the condition {cond.name} is a Variable; pass a bool "
                                "array such as x > 0 (comparisons give constants)")
        arr = np.array(cond)
        if arr.dtype != bool:
            raise ArgumentError(f"where: the condition must be a bool array, not {arr.dtype}")
        arr.flags.writeable = False
        return arr

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

    # ------------------------------------------------------------ reverse mode

    def grad(self, L: Variable, wrt: Variable | Sequence[Variable], seed: Any = None,
             create_graph: bool = True) -> Any:
        """Gradients of L with respect to ``wrt``, computed by recorded primitives.

        Sets ``.grad`` on each of ``wrt`` (replacing it) and returns the gradients
        in order (a single Variable when ``wrt`` is one).
        """
        single = isinstance(wrt, Variable) or not isinstance(wrt, Iterable)
        targets = [wrt] if single else list(wrt)
        self._check_target("grad", L)
        for w in targets:
            self._check_wrt("grad", w)
        recording = bool(create_graph) and self._recording
        # entries older than every wrt cannot lie on a path from them: stop there
        stop = min((w._pos if w.prim is None else w._pos + 1 for w in targets),
                   default=len(self._tape))
        grads = self._reverse(L, seed, recording, stop)
        out = []
        for w in targets:
            g = grads.get(w)
            if g is None:
                g = self._zeros(w, recording)
            elif not recording:
                g = self._unrecorded(g, f"d{L.name}_d{w.name}")
            w.grad = g
            out.append(g)
        return out[0] if single else out

    def backward(self, L: Variable, seed: Any = None, create_graph: bool = False) -> None:
        """Accumulate dL/d(leaf) into ``.grad`` of every leaf that requires grad (PyTorch style)."""
        self._check_target("backward", L)
        recording = bool(create_graph) and self._recording
        grads = self._reverse(L, seed, recording, 0)
        for v, g in grads.items():
            if v.prim is not None or not v.requires_grad:
                continue
            if v.grad is None:
                v.grad = g if recording else self._unrecorded(g, f"d{L.name}_d{v.name}")
            elif recording:
                v.grad = self.add(v.grad, g)
            else:
                v.grad = self._unrecorded(v.grad._value + g, f"d{L.name}_d{v.name}")

    def _reverse(self, L: Variable, seed: Any, recording: bool, stop: int) -> dict:
        seed_value = self._seed_value("grad", L, seed)
        with self._sweeping():
            if recording:
                o = self
                self._mark("grad_begin", L)
                seed_var = seed if isinstance(seed, Variable) else self._leaf(
                    seed_value, None, True, "seed")
            else:
                o = ValueOps()      # its own, so the sweep's zero mask is nobody else's
                seed_var = seed_value
            grads = self._sweep(o, L, seed_var, recording, stop)
            if recording:
                self._mark("grad_end", (L, list(grads.items())))
        return grads

    @contextmanager
    def _sweeping(self) -> Iterator[None]:
        """Scope of a sweep: undo its entries if it fails, and no cyclic GC while it runs.

        A sweep only adds live objects (no garbage cycles), so the collector would walk the
        growing tape again and again for nothing.
        """
        state = (len(self._tape), len(self._marks), self._next)
        collecting = gc.isenabled()
        gc.disable()
        outer_mask = self._zero_mask    # a sweep nested in a rule starts with no mask
        self._zero_mask = None
        try:
            yield
        except BaseException:
            self._rollback(*state)
            raise
        finally:
            self._zero_mask = outer_mask
            if collecting:
                gc.enable()

    def _rollback(self, entries: int, marks: int, counter: int) -> None:
        del self._tape[entries:]
        del self._marks[marks:]
        self._next = counter
        self._accumulations = {p for p in self._accumulations if p < entries}

    def _mark(self, kind: str, payload: Any) -> None:
        self._marks.append((len(self._tape), kind, payload))
        if self.echo:
            render.echo(self, self._marks[-1])

    def _sweep(self, o: Any, L: Variable, seed: Any, recording: bool, stop: int) -> dict:
        """The reverse sweep: entries leading to L, newest first, each input's cotangent."""
        grads: dict[Variable, Any] = {L: seed}
        masks: dict[Variable, np.ndarray] = {}   # cotangent entries that are zero by construction
        tape = self._tape
        if L.prim is not None:
            for pos in range(L._pos, stop - 1, -1):
                out = tape[pos]
                g = grads.get(out)
                if g is None:
                    continue
                if type(g) is _Sparse:
                    g = grads[out] = self._densify(o, g)
                prim = out.prim
                inputs = out.inputs
                attrs = out.attrs
                if recording:
                    args, outv = inputs, out
                else:
                    args = [x._value if type(x) is Variable else x for x in inputs]
                    outv = out._value
                m = masks.get(out) if masks else None
                special = m is not None or prim.zero_masks is not None
                if m is not None:
                    o._zero_mask = m
                cts = []
                for i, x in enumerate(inputs):
                    if type(x) is not Variable or not x.requires_grad:
                        continue
                    if prim.sparse_vjp:    # indexing: same dtype, no masks, added up later
                        cts.append((x, _Sparse(g, attrs["index"], x._value.shape), None))
                        continue
                    if prim.variadic:
                        ct = prim.vjp[0](o, g, outv, i, *args, **(attrs or {}))
                    else:
                        rule = prim.vjp[i]
                        if rule is None:
                            continue
                        ct = rule(o, g, outv, *args, **attrs) if attrs else rule(o, g, outv, *args)
                    if ct is None:
                        continue
                    if ct.dtype is not x._value.dtype and ct.dtype != x._value.dtype:
                        ct = o.cast(ct, x._value.dtype)
                    cts.append((x, ct, _input_mask(prim, attrs, i, m, x, out) if special else None))
                if m is not None:
                    o._zero_mask = None
                for x, ct, mask in cts:    # all cotangents first, then accumulate in input order
                    old = grads.get(x)
                    if old is None:
                        grads[x] = ct
                        if mask is not None:
                            masks[x] = mask
                    else:
                        grads[x] = self._accumulate(o, old, ct)
                        if masks:
                            before = masks.pop(x, None)
                            if before is not None and mask is not None:
                                masks[x] = before & mask
        for v, g in grads.items():
            if type(g) is _Sparse:
                grads[v] = self._densify(o, g)
        return grads

    def _accumulate(self, o: Any, old: Any, new: Any) -> Any:
        """existing + new, keeping indexing reads sparse until they are needed."""
        if type(new) is _Sparse:
            if type(old) is _Sparse:
                old.grads.extend(new.grads)
                old.indices.extend(new.indices)
                if new.dense is not None:
                    old.dense = (new.dense if old.dense is None
                                 else self._add_existing(o, old.dense, new.dense))
                return old
            new.dense = old
            return new
        if type(old) is _Sparse:
            old.dense = new if old.dense is None else self._add_existing(o, old.dense, new)
            return old
        return self._add_existing(o, old, new)

    def _add_existing(self, o: Any, old: Any, new: Any) -> Any:
        total = o.add(old, new)
        if o is self:
            self._accumulations.add(total._pos)
        return total

    def _densify(self, o: Any, s: _Sparse) -> Any:
        dense = o.scatter_add(s.grads, s.indices, s.shape)
        return dense if s.dense is None else self._add_existing(o, s.dense, dense)

    # ------------------------------------------------------------ forward mode

    def jvp(self, y: Variable, xs: Variable | Sequence[Variable], tangents: Any,
            create_graph: bool = True) -> Variable:
        """The tangent of y along ``tangents`` of ``xs``, by a forward sweep of recorded jvps."""
        single = isinstance(xs, Variable) or not isinstance(xs, Iterable)
        xs = [xs] if single else list(xs)
        tangents = [tangents] if single else list(tangents)
        self._check_target("jvp", y)
        if len(xs) != len(tangents):
            raise ArgumentError(f"jvp: {len(xs)} inputs but {len(tangents)} tangents")
        recording = bool(create_graph) and self._recording
        for x in xs:
            self._check_wrt("jvp", x)
        values = [self._seed_value("jvp", x, t) for x, t in zip(xs, tangents)]
        start = min(x._pos if x.prim is None else x._pos + 1 for x in xs)
        with self._sweeping():
            if recording:
                o = self
                self._mark("jvp_begin", (y, xs))
                known = {x: t if isinstance(t, Variable) else self._leaf(v, None, True, "seed")
                         for x, t, v in zip(xs, tangents, values)}
            else:
                o = VALUES
                known = dict(zip(xs, values))
            tape = self._tape
            for pos in self._ancestors(y, start):
                out = tape[pos]
                inputs = out.inputs
                ts = [known.get(x) if type(x) is Variable else None for x in inputs]
                if all(t is None for t in ts):
                    continue
                attrs = out.attrs or {}
                if recording:
                    t = out.prim.jvp(o, ts, out, *inputs, **attrs)
                else:
                    t = out.prim.jvp(o, ts, out._value,
                                     *[getattr(x, "_value", x) for x in inputs], **attrs)
                if t is not None:
                    if dtype_of(t) != out._value.dtype:
                        t = o.cast(t, out._value.dtype)
                    known[out] = t
            t = known.get(y)
            if t is None:
                return self._zeros(y, recording)
            if recording:
                self._mark("jvp_end", (y, t))
                return t
        return self._unrecorded(np.asarray(t), f"t{y.name}")

    def _ancestors(self, y: Variable, start: int) -> list[int]:
        """Positions, oldest first, of the entries at or after ``start`` that lead to y."""
        seen: set[int] = set()
        stack = [y]
        while stack:
            v = stack.pop()
            if v.prim is None or v._pos < start or v._pos in seen:
                continue
            seen.add(v._pos)
            stack.extend(x for x in v.inputs if type(x) is Variable)
        return sorted(seen)

    # ------------------------------------------------------------ checks and helpers

    def _check_target(self, op: str, L: Any) -> None:
        if not isinstance(L, Variable):
            raise ArgumentError(f"{op}: expected a Variable to differentiate, got "
                                f"{type(L).__name__}")
        if L.ops is not self:
            raise GraphError(f"{op}: {L.name} belongs to another Ops")

    def _check_wrt(self, op: str, w: Any) -> None:
        if not isinstance(w, Variable):
            raise ArgumentError(f"{op}: wrt must be Variables, got {type(w).__name__}")
        if w.ops is not self:
            raise GraphError(f"{op}: {w.name} belongs to another Ops")
        if not w.requires_grad:
            raise GraphError(f"{op}: {w.name} does not require grad (created with "
                             "requires_grad=False, detached, or computed without recording)")

    def _seed_value(self, op: str, L: Variable, seed: Any) -> np.ndarray:
        if seed is None:
            if L._value.size != 1:
                raise ShapeError(f"{op}: {L.name} has shape {L.shape}, not a scalar: pass "
                                 f"seed= of that shape or reduce it with .sum()")
            return np.ones(L.shape, dtype=L.dtype)
        if isinstance(seed, Variable) and seed.ops is not self:
            raise GraphError(f"{op}: the seed {seed.name} belongs to another Ops")
        arr = np.asarray(value_of(seed))
        if arr.shape != L.shape:
            raise ShapeError(f"{op}: seed has shape {arr.shape} but {L.name} has shape {L.shape}")
        if arr.dtype.kind not in "biuf":
            raise DTypeError(f"{op}: seed of dtype {arr.dtype} is not supported")
        return np.array(arr, dtype=L.dtype)

    def _zeros(self, w: Variable, recording: bool) -> Variable:
        z = np.zeros(w.shape, dtype=w.dtype)
        if recording:
            return self._leaf(z, None, True, "zeros")
        z.flags.writeable = False
        return self._unrecorded(z)


def _input_mask(prim: Primitive, attrs: dict | None, i: int, m: np.ndarray | None,
                x: Variable, out: Variable) -> np.ndarray | None:
    """Where input i's cotangent is zero by construction: what the primitive declares (where's
    untaken side), or the incoming mask carried through an elementwise entry of equal shape."""
    shape = out._value.shape
    if x._value.shape != shape:
        return None
    if prim.zero_masks is not None:
        own = np.broadcast_to(prim.zero_masks(attrs, i), shape)
        return own if m is None else own | m
    return m if prim.elementwise else None


def _float_array(value: Any, name: str | None) -> np.ndarray:
    """A fresh float array from user data; bool and int become float64."""
    if isinstance(value, Variable):
        value = value._value
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
