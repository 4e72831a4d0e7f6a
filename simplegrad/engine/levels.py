"""Batched values and their levels: ``Batched`` (one example of a vmap's batch, holding the
stack) and the helpers that carry values across the boundary of a sweep.

Each running vmap has a level; a value batched by several is a chain of Batched, the highest
level outermost, around one stacked Variable whose leading axes are the levels' batches in
order (the lowest first). A sweep (``Ops.grad``, ``Ops.jvp``, ``batched_jvp``, Taylor's
``propagate``) given Batched values runs on those stacks: examples are independent, so the
sweep of the stacked program with a stacked seed gives every example's derivative at once.
``stacked`` gives a value's stack at some levels (a level it is not batched at expanded along
that batch, a zero-stride view), ``unstack`` wraps a stack back.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ArgumentError
from .variable import Variable

Level = tuple[int, int]     # (level, batch size)

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

    def __bool__(self) -> bool:
        raise self._control("bool")

    def _one(self, what: str) -> Any:
        raise self._control(what)

    def _control(self, what: str) -> Exception:
        return ArgumentError(f"vmap: {what}() of {self.name} needs one example's value, but "
                             "under vmap it stands for a batch of them; write the branch with "
                             "where() instead")

    def __repr__(self) -> str:
        return f"Batched({self.name}: {self.batch} examples of shape {self.shape})"


def wrap(inner: Any, level: int) -> Batched:
    """A Batched at ``level`` standing for the batch ``inner`` (examples along axis 0)."""
    b = object.__new__(Batched)
    b.inner, b.level = inner, level
    b.raw, b.rec, b.label = inner.raw, inner.rec, inner.label
    b.grad, b.requires_grad = None, inner.requires_grad
    b.prim, b.inputs, b.attrs, b.position = None, (), None, inner.position
    return b

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


def stacked(ops: Any, a: Any, levels: list[Level], what: str) -> Any:
    """``a``'s stack at ``levels`` (outermost first, holding ``a``'s own): one leading axis per
    level, a level ``a`` is not batched at expanded along its batch (a zero-stride view).
    Arrays stay arrays; Variables are expanded by recorded primitives of ``ops``."""
    if type(a) is not Batched:
        if not levels:
            return a
        own, inner = [], a
    else:
        own, inner = levels_of(a), innermost(a)
        if own == levels:
            return inner
    mine = {level for level, _ in own}
    if not mine <= {level for level, _ in levels}:
        raise ArgumentError(f"{what} is batched by a vmap that the values it is differentiated "
                            "in are not; call the transform (sg.grad, sg.jvp, ...) inside that "
                            "vmap's function, which gives each example its own derivative")
    per = tuple(np.shape(getattr(inner, "raw", inner)))[len(own):]
    ones = tuple(n if level in mine else 1 for level, n in levels) + per
    return spread(ops, inner, ones, tuple(n for _, n in levels) + per)


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
        if v.shape != ones[len(ones) - v.ndim:] or any(n != 1 for n in ones[:len(ones) - v.ndim]):
            v = ops.reshape(v, ones)        # (expand prepends the leading axes)
        return v if ones == full else ops.expand(v, full)
    return np.broadcast_to(np.reshape(v, ones), full)


def unstack(v: Any, levels: list[Level]) -> Any:
    """A stack at ``levels`` wrapped back as one example (``v`` itself at no level)."""
    for level, _ in levels:
        v = wrap(v, level)
    return v
