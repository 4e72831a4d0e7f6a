"""Batching: ``Batched`` values (one example of a vmap's batch, holding the stack), their
levels, and primitives on them (the batching interpreter under ``sg.vmap``, transforms/vmap.py).

A ``Batched`` Variable stands for one example of a batch inside ``f``: it reports the
per-example shape (``x.shape``, ``x.ndim``, ``x.size``) while it holds ``inner``, the whole
batch with the examples along a leading axis. A primitive given a Batched input is handed
here by ``Ops.apply`` (the one recording path): the primitive's batching rule (``batch`` in
its record, see primitives/core.py) computes the batch at once with primitives called on the
real Ops, so the batched program is recorded and differentiable like any other. A primitive
without a rule loops over the examples and stacks.

Each running vmap has a level, drawn from its thread's own count (``new_level``: nothing is
shared between threads); nested vmaps wrap Batched in Batched, the highest level outermost,
around one stacked Variable whose leading axes are the levels' batches in order (the lowest
first). A primitive works on the innermost (highest) level first, its rule seeing the outer
levels' Batched values as ordinary per-example values, which batch again when the rule calls
primitives.

A sweep (``Ops.grad``, ``Ops.jvp``, ``batched_jvp``, Taylor's ``propagate``) given Batched
values runs on those stacks: examples are independent, so the sweep of the stacked program
with a stacked seed gives every example's derivative at once. ``stacked`` gives a value's
stack at some levels (a level it is not batched at expanded along that batch, a zero-stride
view; a level of batch size 1 is an axis all the same), ``unstack`` wraps a stack back. A seed
or tangent may be batched at levels the differentiated values are not (a pullback made inside
a vmap, called under another vmap inside it, as NTK-vector products do): the sweep, linear in
it, carries it as a batched value through the rules, whose batching rules do the rest.
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError, ShapeError
from ..primitives import Primitive, PrimitiveMethods
from ..primitives.core import batch_size
from .variable import Variable, leaf_entry

Level = tuple[int, int]     # (level, batch size)

_THREAD = threading.local()     # .levels: this thread's count of levels


def new_level() -> int:
    """A level higher than any this thread has handed out: a vmap's, or a batched sweep's."""
    count = getattr(_THREAD, "levels", None)
    if count is None:
        count = _THREAD.levels = itertools.count(1)
    return next(count)

# ---------------------------------------------------------------- the batched Variable


class Batched(Variable):
    """One example of a batch: per-example shape outside, the stacked ``inner`` inside."""

    __slots__ = ("inner", "level")

    inner: Any          # the batch: a Variable (or an outer level's Batched), examples first
    level: int          # which vmap it belongs to; nested vmaps have higher levels

    @property
    def shape(self) -> tuple:
        """Shape of one example."""
        return self.inner.shape[1:]

    @property
    def ndim(self) -> int:
        """Number of dimensions of one example."""
        return len(self.inner.shape) - 1

    @property
    def size(self) -> int:
        """Number of entries of one example."""
        return math.prod(self.shape)

    @property
    def batch(self) -> int:
        """Number of examples."""
        return self.inner.shape[0]

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError(f"len() of a 0-d variable {self.name}")
        return self.shape[0]

    @property
    def value(self) -> Any:
        """Refused: under vmap a Variable stands for every example at once, so it has no one
        value to read (as JAX's tracers: their concretization error)."""
        raise self._concrete(".value")

    def numpy(self) -> np.ndarray:
        """Refused, as ``.value`` is."""
        raise self._concrete(".numpy()")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise self._concrete("np.asarray()")

    def __bool__(self) -> bool:
        raise self._control("bool")

    def _one(self, what: str) -> Any:
        raise self._concrete(f"{what}()")

    def _control(self, what: str) -> Exception:
        return ArgumentError(f"vmap: {what}() of {self.name} needs one example's value, but "
                             "under vmap it stands for a batch of them; write the branch with "
                             "where() instead")

    def _concrete(self, what: str) -> Exception:
        return ArgumentError(
            f"vmap: {what} of {self.name} needs one example's value, but under vmap "
            f"{self.name} stands for every example of the batch at once (it has no one value); "
            f"keep the computation recorded with Variable operations ({self.name}.sum(), "
            f"np.sum({self.name}), where(...)), use sg.stop_gradient({self.name}) for a value "
            "no gradient flows through, or read the value outside the vmapped function")

    def __repr__(self) -> str:
        return f"Batched({self.name}: {self.batch} examples of shape {self.shape})"


def wrap(inner: Any, level: int) -> Batched:
    """A Batched at ``level`` standing for the batch ``inner`` (examples along axis 0)."""
    b = Batched()     # (a class call with no arguments: no argument tuple)
    b.inner, b.level = inner, level
    b.raw, b.rec, b.grad = inner.raw, inner.rec, None
    # (a leaf entry of its own: a Batched is no entry of the tape; its stack's is)
    b.node = leaf_entry(None, inner.label, inner.requires_grad, inner.position)
    return b

# ---------------------------------------------------------------- primitives on batches


def apply(o: PrimitiveMethods, prim: Primitive, inputs: Sequence[Any], attrs: dict | None,
          name: str | None) -> Batched:
    """``prim`` on inputs of which some are Batched: its batching rule, at the highest level."""
    level = 0
    for x in inputs:
        if type(x) is Batched and x.level > level:
            level = x.level
    xs, flags, size = [], [], None
    for x in inputs:
        mine = type(x) is Batched and x.level == level
        if mine:
            n = x.inner.shape[0]
            if size is not None and n != size:
                sizes = sorted({x.inner.shape[0] for x in inputs
                                if type(x) is Batched and x.level == level})
                raise ShapeError(f"{prim.name}: batched inputs of different batch sizes {sizes}")
            size = n
        xs.append(x.inner if mine else x)
        flags.append(mine)
    rule = prim.batch or functools.partial(loop, prim)
    out = rule(o, xs, flags, **(attrs or {}))
    if name is not None and isinstance(out, Variable):
        out.name = name
    return wrap(out, level)


def loop(prim: Primitive, o: PrimitiveMethods, xs: Sequence[Any], batched: Sequence[bool],
         **attrs: Any) -> Any:
    """The batching rule of a primitive that has none: one application per example, stacked."""
    outs = [o.apply(prim, [o.getitem(x, (k,)) if b else x for x, b in zip(xs, batched)],
                    attrs or None, None) for k in range(batch_size(xs, batched))]
    return o.stack(outs, axis=0)

# ---------------------------------------------------------------- stacks at levels


def levels_of(a: Any) -> list[Level]:
    """The levels ``a`` is batched at, with their batch sizes, outermost (lowest) first."""
    out = []
    while type(a) is Batched:
        out.append((a.level, a.inner.shape[0]))
        a = a.inner
    return out[::-1]


def innermost(a: Any) -> Any:
    """The stack behind a chain of Batched (``a`` itself when it is not batched)."""
    while type(a) is Batched:
        a = a.inner
    return a


def union(*groups: list[Level]) -> list[Level]:
    """The levels of several values, outermost first."""
    return sorted(set().union(*groups)) if len(groups) > 1 else list(groups[0])


def stacked(ops: Any, a: Any, levels: list[Level], what: str, carried: bool = False) -> Any:
    """``a``'s stack at ``levels`` (outermost first, holding ``a``'s own): one leading axis per
    level, a level ``a`` is not batched at expanded along its batch (a zero-stride view).
    Arrays stay arrays; Variables are expanded by recorded primitives of ``ops``.

    ``carried``: ``a`` is something a sweep is linear in (a seed, a tangent), and may be
    batched at levels beyond ``levels`` (a pullback made inside a vmap, called inside another
    one within it): it stays batched there, one example of those levels being the stack at
    ``levels`` (the sweep carries it through the rules, whose batching rules do the rest)."""
    if type(a) is not Batched:
        if not levels:
            return a
        own, inner = [], a
    else:
        own, inner = levels_of(a), innermost(a)
        if own == levels:
            return inner
    mine = {level for level, _ in own}
    asked = {level for level, _ in levels}
    beyond = [lv for lv in own if lv[0] not in asked]
    if beyond and not carried:
        raise ArgumentError(f"{what} is batched by a vmap that the values it is differentiated "
                            "in are not; call the transform (sg.grad, sg.jvp, ...) inside that "
                            "vmap's function, which gives each example its own derivative")
    full = union(own, levels) if beyond else levels
    per = tuple(np.shape(getattr(inner, "raw", inner)))[len(own):]
    ones = tuple(n if level in mine else 1 for level, n in full) + per
    out = spread(ops, inner, ones, tuple(n for _, n in full) + per)
    if not beyond:
        return out
    return unstack(_ordered(ops, out, full, beyond + levels), beyond)


def _ordered(ops: Any, v: Any, have: list[Level], want: list[Level]) -> Any:
    """A stack whose leading axes are the batches of ``have`` with those axes in the order of
    ``want`` (the same levels)."""
    if have == want:
        return v
    axes = [have.index(lv) for lv in want]
    return ops.transpose(v, axes + list(range(len(axes), len(v.shape))))


def lifted(ops: Any, a: Any, levels: list[Level]) -> Variable:
    """One leaf of a transform's differentiated argument at ``levels``: its stack, a Variable
    (an array becomes a leaf that requires grad, so that its expansion is a view)."""
    if not isinstance(a, Variable):
        a = ops.var(a)
    return stacked(ops, a, levels, a.name)


def spread(ops: Any, v: Any, ones: tuple, full: tuple) -> Any:
    """``v`` reshaped to ``ones`` (its axes, with singletons where it has none) and expanded to
    ``full``."""
    if isinstance(v, Variable):
        if v.shape == full:
            return v
        if v.shape != ones[len(ones) - v.ndim:] or any(n != 1 for n in ones[:len(ones) - v.ndim]):
            v = ops.reshape(v, ones)        # (expand prepends the leading axes)
        # (even where ones is full: a level of batch size 1 is an axis v lacks, not a broadcast)
        return v if v.shape == full else ops.expand(v, full)
    return np.broadcast_to(np.reshape(v, ones), full)


def unstack(v: Any, levels: list[Level]) -> Any:
    """A stack at ``levels`` wrapped back as one example (``v`` itself at no level). ``v`` may
    be batched at other levels still (what a sweep carried, see ``stacked``): the result is
    then batched at both, its levels in order."""
    if type(v) is Batched:
        beyond = levels_of(v)
        full = union(beyond, levels)
        v = _ordered(v.rec, innermost(v), beyond + levels, full)
        levels = full
    for level, _ in levels:
        v = wrap(v, level)
    return v
