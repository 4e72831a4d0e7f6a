"""The batched jvp: many tangents through one forward sweep of a recorded program (Jacobians
in one sweep), recorded or on stacks of values.

``batched_jvp`` runs each entry's jvp rule once, on Batched tangents (batching.py: the
primitives' batching rules do the work); ``jacobian_fwd_batched`` and ``hessian_batched``
(transforms/jacobians.py) are built on it. Given values batched by a vmap it runs on their
stacks, as the other sweeps do. ``batched_jvp_values`` is the same sweep when only the values
are wanted (a Jacobian handed back as an array): the tangents are ``Stack``s of numpy values
and ``STACKS`` runs each batching rule on them, recording nothing.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ShapeError
from ..primitives import REGISTRY, VALUES, Primitive, PrimitiveMethods
from ..primitives.core import JOINT, Unit
from .batching import (
    Batched,
    innermost,
    levels_of,
    loop,
    new_level,
    spread,
    stacked,
    union,
    unstack,
    wrap,
)
from .forward import forward_sweep
from .reverse import as_variable
from .tape import BlockBegin, BlockEnd
from .variable import UNARY, Entry, Variable, entry_of

if TYPE_CHECKING:
    from .ops import Ops

# ---------------------------------------------------------------- Jacobians in one sweep


def batched_jvp(ops: Ops, y: Variable, x: Variable, tangents: Any) -> Variable:
    """The tangents of y along K tangents of x stacked on a leading axis, shape (K,) + y.shape,
    from one forward sweep: each entry's jvp rule runs once, on Batched tangents. Given
    values batched by vmap (x at every level y is at), the sweep runs on their stacks."""
    if type(y) is Batched or type(x) is Batched:
        return _on_stacks(ops, y, x, tangents)
    level = new_level()
    tape = ops.tape
    if tape.keep or tape.listeners:
        tape.add(BlockBegin(tape.end, "jvp", y.node, (x.node,)))
    seed = tangents if isinstance(tangents, Variable) else ops.leaf(
        np.asarray(tangents, dtype=x.dtype), None, True, "seed")
    k = seed.shape[0]

    def step(out: Entry, ts: list) -> Any:
        if REGISTRY.get(out.prim.name) is out.prim:
            t = out.prim.jvp(ops, ts, out, *out.inputs, **(out.attrs or {}))
        else:       # a custom primitive's rule may sweep: one tangent at a time, stacked
            t = _jvp_each(ops, out, ts, k, level)
        if t is not None and t.dtype != out.dtype:
            t = ops.cast(t, out.dtype)
        return t

    t = forward_sweep(tape, y, (x,), {x.node: wrap(seed, level)}, step, True).get(y.node)
    if t is None:
        t = ops.var(np.zeros((k,) + y.shape, dtype=y.dtype), requires_grad=False)
    elif type(t) is Batched:
        t = t.inner
    else:
        t = ops.expand(t, (k,) + y.shape)
    if type(t) is Entry:
        t = as_variable(ops, t)
    if tape.keep or tape.listeners:
        tape.add(BlockEnd(tape.end, "jvp", y.node, {y.node: entry_of(t)}))
    return t


def _on_stacks(ops: Ops, y: Variable, x: Variable, tangents: Any) -> Variable:
    """``batched_jvp`` of values batched by vmap: on the stacks, the K tangents (per example,
    or the same for every example) spread along x's levels, the result wrapped back."""
    levels = levels_of(x)
    full = union(levels, levels_of(y))
    k = np.shape(getattr(tangents, "raw", tangents))[0]
    per = tuple(x.shape)
    t = tangents
    if type(t) is Batched:
        t = stacked(ops, t, levels, "the tangent")      # K on each example's first axis
        t = ops.moveaxis(t, len(levels), 0)
    else:
        t = spread(ops, t, (k,) + (1,) * len(levels) + per,
                   (k,) + tuple(n for _, n in levels) + per)
    cols = batched_jvp(ops, stacked(ops, y, full, "the output"), innermost(x), t)
    return unstack(ops.moveaxis(cols, 0, len(full)), full)


def _jvp_each(ops: Ops, out: Entry, ts: list, k: int, level: int) -> Any:
    """The jvp rule of ``out`` run once per tangent of the batch, the results stacked."""
    cols = []
    for j in range(k):
        tj = [None if t is None else ops.getitem(t.inner, (j,)) if type(t) is Batched else t
              for t in ts]
        c = out.prim.jvp(ops, tj, out, *out.inputs, **(out.attrs or {}))
        cols.append(ops.zeros_like(out) if c is None else c)
    return wrap(ops.stack(cols, axis=0), level)


# ---------------------------------------------------------------- values only


class Stack:
    """K values of one entry stacked on a leading axis (a value-only batched sweep): the
    per-example shape outside, as a ``Batched`` shows it, the numpy stack inside.

    A diagonal stack (``diag`` not None) is K vectors of K entries, example k being
    ``diag[k]`` times the k-th unit vector: the identity basis that seeds a Jacobian
    (``eye``, its diagonal all ones) and what the rules linear in it make of it (``2 * I``,
    ``I * cos(x)``). Those rules and the records' ``on_diagonal`` forms work on the K entries
    of the diagonal; any other rule reads ``inner``, built (K x K, zeros off the diagonal)
    the first time it is read.
    """

    # (no ``__getattr__``: a class with one is a slow read of every attribute in CPython)
    __slots__ = ("dense", "diag", "eye", "fresh")

    def __init__(self, inner: Any, fresh: bool = False):
        self.dense = inner      # the numpy stack; None for a diagonal stack until ``inner``
        self.fresh = fresh  # memory of the sweep's own (a ufunc's or matmul's output, or a view
        #                     of one): not a view of a recorded value, so it may be handed out
        self.diag = None
        self.eye = False

    @classmethod
    def diagonal(cls, diag: Any, eye: bool = False) -> Stack:
        """The diagonal stack of the K entries ``diag`` (a new array of the sweep's own)."""
        s = cls.__new__(cls)
        s.dense, s.diag, s.eye, s.fresh = None, diag, eye, not eye
        return s

    @classmethod
    def identity(cls, k: int, dtype: Any) -> Stack:
        """The identity basis of K vectors of K entries (the seed of a Jacobian's sweep)."""
        dtype = np.dtype(dtype)
        return cls.diagonal(_ones(k, dtype) if k * dtype.itemsize <= 1 << 20 else
                            np.ones(k, dtype), eye=True)

    @property
    def inner(self) -> Any:
        """The numpy stack (K, ...); of a diagonal stack, built (K x K) the first time."""
        dense = self.dense
        if dense is None:
            self.dense = dense = np.diag(self.diag)
        return dense

    @inner.setter
    def inner(self, value: Any) -> None:
        self.dense = value

    @property
    def shape(self) -> tuple:
        """Shape of one example."""
        d = self.diag
        return self.dense.shape[1:] if d is None else d.shape

    @property
    def ndim(self) -> int:
        """Number of dimensions of one example."""
        return self.dense.ndim - 1 if self.diag is None else 1

    @property
    def size(self) -> int:
        """Number of entries of one example."""
        d = self.diag
        return math.prod(self.dense.shape[1:]) if d is None else d.shape[0]

    @property
    def dtype(self) -> np.dtype:
        """dtype of the values."""
        d = self.diag
        return self.dense.dtype if d is None else d.dtype


@functools.lru_cache(maxsize=8)
def _ones(k: int, dtype: np.dtype) -> np.ndarray:
    """K ones, read-only: the identity basis's diagonal, kept for the next Jacobian of its size
    up to 1 MB (no rule writes a diagonal it was not handed as its own: ``fresh`` is False)."""
    ones = np.ones(k, dtype)
    ones.setflags(write=False)
    return ones


class StackValues(PrimitiveMethods):
    """The primitive methods on plain values, where a ``Stack`` input runs the primitive's
    batching rule on the stacks (as batching.py's ``apply`` does, with nothing recorded)."""

    def apply(self, prim: Primitive, inputs: Sequence[Any], attrs: dict | None = None,
              name: str | None = None) -> Any:
        """``prim`` on plain values and Stacks; a Stack out when any input is one."""
        elementwise = prim.elementwise and len(inputs) <= 2
        if elementwise:     # the common forms first (same results)
            out = _elementwise(prim, inputs, attrs)
            if out is not None:
                return out
        flags = [type(x) is Stack for x in inputs]
        if True not in flags:
            return prim.forward(*inputs, **attrs) if attrs else prim.forward(*inputs)
        if not elementwise:     # (_elementwise tried the diagonal already)
            for x, f in zip(inputs, flags):
                if f and x.diag is not None:    # a diagonal stack: on its diagonal if it can
                    out = _on_diagonal(prim, inputs, attrs)
                    if out is not None:
                        return out
                    break
        xs, size, rank = [], None, 0
        for x, f in zip(inputs, flags):
            if not f:
                xs.append(x)
                continue
            inner = x.inner
            if size is None:
                size, rank = inner.shape[0], inner.ndim
            elif inner.shape[0] != size:
                sizes = sorted({x.inner.shape[0] for x in inputs if type(x) is Stack})
                raise ShapeError(f"{prim.name}: stacked inputs of different sizes {sizes}")
            elif inner.ndim != rank:
                rank = -1       # stacks of different ranks: the rule aligns them
            xs.append(inner)
        if prim.on_stacks is not None:      # a direct form the record states (reshape, matmul)
            out = prim.on_stacks(inputs, xs, flags, rank, attrs or {}, Stack)
            if out is not None:
                return out
        unit = prim.unit
        if unit is not None and unit.exact and rank > 0:
            out = _by_unit(unit, inputs, xs, flags)
            if out is not None:
                return out
        if prim.elementwise and rank > 0 and all(
                f or (x.ndim if type(x) is np.ndarray else np.ndim(x)) < rank
                for x, f in zip(xs, flags)):
            # numpy broadcasting pairs the per-example axes already (pointwise's align
            # would insert no axis): the forward on the stacks as they are
            return Stack(prim.forward(*xs, **attrs) if attrs else prim.forward(*xs),
                         fresh=type(prim.forward) is np.ufunc)
        rule = prim.batch or functools.partial(loop, prim)
        return Stack(rule(self, xs, flags, **(attrs or {})))


STACKS = StackValues()


def _elementwise(prim: Primitive, inputs: Sequence[Any], attrs: dict | None) -> Any:
    """An elementwise primitive on plain values, on one stack, or on a stack and a plain value
    of lower rank: what ``StackValues.apply`` gives, with fewer checks (on a diagonal stack,
    ``_on_diagonal``). None: the general path decides."""
    a = inputs[0]
    if len(inputs) == 1:
        if type(a) is not Stack:
            return prim.forward(a, **attrs) if attrs else prim.forward(a)
        if a.diag is not None:
            return _on_diagonal(prim, inputs, attrs)
        return Stack(prim.forward(a.dense, **attrs) if attrs else prim.forward(a.dense),
                     fresh=type(prim.forward) is np.ufunc)
    b = inputs[1]
    sa, sb = type(a) is Stack, type(b) is Stack
    if sa is sb:
        if not sa:
            return prim.forward(a, b, **attrs) if attrs else prim.forward(a, b)
        if a.diag is not None or b.diag is not None:
            return _on_diagonal(prim, inputs, attrs)
        ia, ib = a.dense, b.dense       # two dense stacks of one rank: as the general path
        if ia.ndim != ib.ndim or ia.shape[0] != ib.shape[0]:
            return None
        return Stack(prim.forward(ia, ib, **attrs) if attrs else prim.forward(ia, ib),
                     fresh=type(prim.forward) is np.ufunc)
    s, p = (a, b) if sa else (b, a)
    if s.diag is not None:
        return _on_diagonal(prim, inputs, attrs)
    unit = prim.unit
    if unit is not None and unit.exact:
        out = _by_unit(unit, inputs, [a.dense if sa else a, b.dense if sb else b], [sa, sb])
        if out is not None:
            return out
    if (p.ndim if type(p) is np.ndarray else np.ndim(p)) >= s.dense.ndim:
        return None
    xs = (s.dense, p) if sa else (p, s.dense)
    return Stack(prim.forward(*xs, **attrs) if attrs else prim.forward(*xs),
                 fresh=type(prim.forward) is np.ufunc)


def _on_diagonal(prim: Primitive, inputs: Sequence[Any], attrs: dict | None) -> Stack | None:
    """``prim`` on inputs among which a diagonal stack, computed on the diagonal (K entries, not
    K x K): an elementwise primitive linear in its stacked inputs (the others constant, of
    at most one example's shape) keeps the stack diagonal, its diagonal the forward of the
    diagonals (bit for bit the dense stack's, whose zeros off the diagonal it keeps as zeros,
    where a dense 0 / 0 or 0 * inf would put nans); other primitives by the form their
    record states (``on_diagonal``: a matrix times the diagonal is a scaled copy of it).
    None: the dense stack decides."""
    if not prim.elementwise:
        rule = prim.on_diagonal
        return None if rule is None else rule(inputs, attrs or {}, Stack)
    linear = prim.linear
    where = None if linear is None else linear.at(len(inputs), attrs)
    if where is None:
        return None
    kind, positions = where
    args = []
    for i, x in enumerate(inputs):
        if type(x) is Stack:
            if x.diag is None or i not in positions:
                return None
            args.append(x.diag)
            continue
        if (x.ndim if type(x) is np.ndarray else np.ndim(x)) > 1 or \
                kind == JOINT and i in positions and np.any(x):
            return None     # (a constant beside the moving inputs: affine, unless it is 0)
        args.append(x)
    return Stack.diagonal(prim.forward(*args, **attrs) if attrs else prim.forward(*args))


def _by_unit(unit: Unit, inputs: Sequence[Any], xs: list, flags: list) -> Stack | None:
    """A stack times ones broadcast from one value (the expanded seed of a gradient through a
    sum), or with any exact ``unit`` of the record on the other side, is the stack itself:
    exact (x * 1 is x for every x, nan and -0 included), where the product would be a pass
    over the stacks. None: compute it."""
    (a, b), (fa, fb) = xs, flags
    if fa == fb or (0 if fa else 1) not in unit.kept:
        return None
    s, p = (inputs[0], b) if fa else (inputs[1], a)
    dense = s.inner     # (read once: a property)
    if type(p) is not np.ndarray or any(p.strides) or p.dtype != dense.dtype or \
            not p.size or p.flat[0] != unit.value:
        return None
    shape = dense.shape[1:]         # p broadcasts to one example's shape, not beyond
    if p.ndim > len(shape) or any(n != 1 and n != m for n, m in zip(p.shape[::-1],
                                                                     shape[::-1])):
        return None
    return s


class _CustomEntryError(Exception):
    """A primitive outside the registry on the path: the recorded sweep is needed."""


def batched_jvp_values(ops: Ops, y: Variable, x: Variable,
                       tangents: np.ndarray | Stack) -> np.ndarray | None:
    """``batched_jvp`` when only values are wanted: the tangents of y along K tangents of x,
    shape (K,) + y.shape, as a new array (never a view of a recorded value), each jvp rule run
    once on the stacks and nothing recorded (``tangents`` may be ``Stack.identity``, the basis
    of a 1-D x). Entries of primitives outside the registry (custom rules, which may sweep)
    need the recorded sweep: None then."""
    k = tangents.size if type(tangents) is Stack else tangents.shape[0]

    def step(out: Entry, ts: list) -> Any:
        prim, raw = out.prim, out.raw
        if REGISTRY.get(prim.name) is not prim:
            raise _CustomEntryError
        args = out.more         # the inputs' values (Entry.inputs, inlined: the hot path)
        if args is None:
            a, b = out.in0, out.in1
            a = a.raw if type(a) is Entry else a     # (an input is an entry or a constant)
            args = (a,) if b is UNARY else (a, b.raw if type(b) is Entry else b)
        else:
            args = [v.raw if type(v) is Entry else v for v in args]
        attrs = out.attrs
        t = prim.jvp(STACKS, ts, raw, *args, **attrs) if attrs else \
            prim.jvp(STACKS, ts, raw, *args)
        if t is not None:
            if type(t) is Stack:    # (Stack.dtype, inlined: a property)
                dtype = t.dense.dtype if t.diag is None else t.diag.dtype
            else:
                dtype = getattr(t, "dtype", None)
            if dtype is not raw.dtype and dtype != raw.dtype:
                t = STACKS.cast(t, raw.dtype)
        return t

    seed = tangents if type(tangents) is Stack else Stack(np.asarray(tangents, dtype=x.dtype))
    try:
        t = forward_sweep(ops.tape, y, (x,), {x.node: seed}, step).get(y.node)
    except _CustomEntryError:
        return None
    if type(t) is Stack:        # (a copy only of memory the sweep does not own: a view of W)
        return t.inner if t.fresh else t.inner.copy(order="K")
    shape = (k,) + tuple(y.shape)
    return np.zeros(shape, y.dtype) if t is None else \
        np.broadcast_to(VALUES.cast(t, y.dtype), shape).copy()
