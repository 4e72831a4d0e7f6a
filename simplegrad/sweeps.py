"""The sweeps of an Ops: reverse (grad, backward) and forward (jvp) over recorded entries.

Every derivative is computed by calling primitives on ``o``: the Ops itself when the result is
to be recorded (so it can be printed and differentiated again), or a ``ValueOps`` when only
values are wanted (``create_graph=False``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from . import render
from .errors import ArgumentError, DTypeError, GraphError, ShapeError
from .primitives import VALUES, ValueOps
from .primitives.core import dtype_of, value_of
from .variable import Variable


class _Sparse:
    """Pending cotangent contributions of indexing reads: added into one dense array once."""

    __slots__ = ("dense", "grads", "indices", "shape")

    def __init__(self, g: Any, index: tuple, shape: tuple):
        self.dense = None
        self.grads = [g]
        self.indices = [index]
        self.shape = shape


class Sweeps:
    """The differentiation half of ``Ops`` (a mixin: the tape and recording live in tape.py)."""

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
        stop = min((w.position if w.prim is None else w.position + 1 for w in targets),
                   default=len(self._tape))
        grads = self._reverse(L, seed, recording, stop, keep=set(targets))
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
        grads = self._reverse(L, seed, recording, 0, keep=set())   # leaves are never swept
        for v, g in grads.items():
            if v.prim is not None or not v.requires_grad:
                continue
            if v.grad is None:
                v.grad = g if recording else self._unrecorded(g, f"d{L.name}_d{v.name}")
            elif recording:
                v.grad = self.add(v.grad, g)
            else:
                v.grad = self._unrecorded(v.grad.raw + g, f"d{L.name}_d{v.name}")

    def _reverse(self, L: Variable, seed: Any, recording: bool, stop: int,
                 keep: set | None = None) -> dict:
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
            grads = self._sweep(o, L, seed_var, recording, stop,
                                None if recording else keep)
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
        try:
            yield
        except BaseException:
            self._rollback(*state)
            raise
        finally:
            if collecting:
                gc.enable()

    def _rollback(self, entries: int, marks: int, counter: int) -> None:
        self._ancestry = None
        del self._tape[entries:]
        del self._marks[marks:]
        self._next = counter
        self._accumulations = {p for p in self._accumulations if p < entries}

    def _mark(self, kind: str, payload: Any) -> None:
        self._marks.append((len(self._tape), kind, payload))
        if self.echo:
            render.echo(self, self._marks[-1])

    def _sweep(self, o: Any, L: Variable, seed: Any, recording: bool, stop: int,
               keep: set | None = None) -> dict:
        """The reverse sweep: entries leading to L, newest first, each input's cotangent."""
        grads: dict[Variable, Any] = {L: seed}
        masks: dict[Variable, np.ndarray] = {}   # cotangent entries that are zero by construction
        tape = self._tape
        if L.prim is not None:
            for pos in range(L.position, stop - 1, -1):
                out = tape[pos]
                if keep is None:
                    g = grads.get(out)
                    if g is None:
                        continue
                else:               # values only: free each cotangent once it is pulled back
                    g = grads.pop(out, None)
                    if g is None:
                        continue
                    if out in keep:
                        grads[out] = g
                if type(g) is _Sparse:
                    g = grads[out] = self._densify(o, g)
                prim = out.prim
                inputs = out.inputs
                attrs = out.attrs
                if recording:
                    args, outv = inputs, out
                elif len(inputs) == 1:      # (the input of a recorded unary op is a Variable)
                    args, outv = (inputs[0].raw,), out.raw
                elif len(inputs) == 2:
                    a, b = inputs
                    args = (a.raw if type(a) is Variable else a,
                            b.raw if type(b) is Variable else b)
                    outv = out.raw
                else:
                    args = [x.raw if type(x) is Variable else x for x in inputs]
                    outv = out.raw
                m = masks.get(out) if masks else None
                special = prim.mask is not None and (m is not None or prim.mask_source)
                cts = []
                for i, x in enumerate(inputs):
                    if type(x) is not Variable or not x.requires_grad:
                        continue
                    if prim.sparse_vjp:    # indexing: same dtype, added up later
                        ct = _Sparse(g, attrs["index"], x.raw.shape)
                    elif prim.variadic:
                        ct = prim.vjp[0](o, g, outv, i, *args, **(attrs or {}))
                    elif m is not None and prim.vjp_masked is not None:
                        rule = prim.vjp_masked[i]
                        if rule is None:
                            continue
                        ct = rule(o, g, outv, m, *args, **attrs) if attrs else rule(
                            o, g, outv, m, *args)
                    else:
                        rule = prim.vjp[i]
                        if rule is None:
                            continue
                        ct = rule(o, g, outv, *args, **attrs) if attrs else rule(o, g, outv, *args)
                    if ct is None:
                        continue
                    if type(ct) is not _Sparse and ct.dtype is not x.raw.dtype and \
                            ct.dtype != x.raw.dtype:
                        ct = o.cast(ct, x.raw.dtype)
                    cts.append((x, ct, prim.mask(o, m, i, outv, *args, **(attrs or {}))
                                if special else None))
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
                                masks[x] = before if before is mask else o.logical_and(
                                    before, mask)
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
            self._accumulations.add(total.position)
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
        start = min(x.position if x.prim is None else x.position + 1 for x in xs)
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
            cached = self._ancestry     # a Jacobian asks the same y once per column
            if cached is not None and cached[0] is y and cached[1] == start:
                positions = cached[2]
            else:
                positions = self._ancestors(y, start)
                self._ancestry = (y, start, positions)
            for pos in positions:
                out = tape[pos]
                inputs = out.inputs
                ts = [known.get(x) if type(x) is Variable else None for x in inputs]
                if all(t is None for t in ts):
                    continue
                attrs = out.attrs or {}
                if recording:
                    t = out.prim.jvp(o, ts, out, *inputs, **attrs)
                else:
                    t = out.prim.jvp(o, ts, out.raw,
                                     *[getattr(x, "raw", x) for x in inputs], **attrs)
                if t is not None:
                    if dtype_of(t) != out.raw.dtype:
                        t = o.cast(t, out.raw.dtype)
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
            if v.prim is None or v.position < start or v.position in seen:
                continue
            seen.add(v.position)
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
            if L.raw.size != 1:
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
        if recording:       # the tangent of a bool or integer entry is a constant zero
            return self._leaf(z, None, w.dtype.kind == "f", "zeros")
        z.flags.writeable = False
        return self._unrecorded(z)
