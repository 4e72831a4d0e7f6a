"""Functional updates, JAX's ``x.at[index]``: ``.set(y)``, ``.add(y)``, ``.multiply(y)``,
``.min(y)``, ``.max(y)`` and ``.get()``. None changes x; each returns a new Variable.

Two records: ``at_set`` (x with y written at index, each position written once) and ``at_add``
(x with y added at index, repeated positions accumulating as ``np.add.at``). Both are linear in
x and y jointly, and their rules are getitem, scatter_add and themselves: the cotangent of x is
``g.at[index].set(0.0)`` (set) or ``g`` (add), that of y ``g[index]`` summed to y's shape.
multiply, min and max are ``x.at[index].set(f(x[index], y))`` with f ``mul``, ``minimum`` or
``maximum``: exact, so every order holds, and a tie sends half the gradient to each side as
``maximum`` does.

Repeated positions follow numpy, where JAX leaves the order unspecified: ``set`` keeps the last
write (numpy's ``x[index] = y``); ``multiply``, ``min`` and ``max`` apply every write in index
order (``np.multiply.at``, ``np.minimum.at``, ``np.maximum.at``), recorded as one ``at_set``
per round of repetition on the positions written that round (``x.at[[0, 1]]``, then
``.at[[0]]``). An index holding recorded integers (an ``argmax``, vmap's per-example index)
gathers flat positions with it and writes through ``scatter_add_along_axis`` and ``where``.
Out-of-bounds indices raise ``IndexError`` as numpy does (JAX's ``mode`` clips, drops or fills:
refused here, as is ``fill_value``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, OutOfBoundsError
from .core import (
    JOINTLY,
    ON_ENTRIES,
    Case,
    Primitive,
    align,
    batch_size,
    broadcast_to,
    error,
    is_constant,
    register,
    shape_of,
    unbroadcast,
)
from .indexing import _batch_axis_of, add_at, normalize_index, render_index
from .lazy import whole
from .schema import INDEX, attrs, need
from .shape_rules import index_shape, updated
from .taylor import linear
from .traced_index import is_traced

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

# ---------------------------------------------------------------- the two records


def _copy(x, y):
    return np.array(x, dtype=np.result_type(x, y), copy=True)


def _set_numpy(x, y, index):
    out = _copy(x, y)
    out[index] = y
    return out


def _add_numpy(x, y, index):
    out = _copy(x, y)
    add_at(out, index, y)
    return out


def _set(x, y, index):
    return whole(_set_numpy, np.shape(x), np.result_type(x, y), x, y, index=index)


def _add(x, y, index):
    return whole(_add_numpy, np.shape(x), np.result_type(x, y), x, y, index=index)


def _fmt(verb: str):
    return lambda args, attrs, render: \
        f"{args[0]}.at[{render_index(attrs['index'])}].{verb}({args[1]})"


def _run(o: PrimitiveMethods, prim: Primitive, x: Any, y: Any, index: tuple) -> Any:
    return o.apply(prim, (x, y), {"index": index})


def _scatter(o: PrimitiveMethods, t, index, shape):
    """zeros(shape) with t (broadcast to what index selects) added at index."""
    return o.scatter_add([broadcast_to(o, t, index_shape(shape, index))], [index], shape)


def _set_jvp(o: PrimitiveMethods, ts, out, x, y, index):
    tx, ty = ts
    if tx is None and ty is None:
        return None
    if tx is None:          # zeros with ty written: each position is written once
        return _scatter(o, ty, index, shape_of(out))
    return _run(o, AT_SET, tx, 0.0 if ty is None else ty, index)


def _add_jvp(o: PrimitiveMethods, ts, out, x, y, index):
    tx, ty = ts
    if ty is None:
        return tx
    if tx is None:
        return _scatter(o, ty, index, shape_of(out))
    return _run(o, AT_ADD, tx, ty, index)


def _y_vjp(o: PrimitiveMethods, g, out, x, y, index):
    return unbroadcast(o, o.getitem(g, index), shape_of(y))


def _batch(name: str):
    """x.at[:, *index] on the batched values, y's batch axis where that index puts it."""
    def rule(o: PrimitiveMethods, xs, batched, index):
        x, y = xs
        n = batch_size(xs, batched)
        shape = shape_of(x)[1:] if batched[0] else shape_of(x)
        if not batched[0]:
            x = np.broadcast_to(x, (n,) + shape) if is_constant(x) else o.expand(
                o.reshape(x, (1,) + shape), (n,) + shape)
        region = index_shape(shape, tuple(index))
        at, _ = _batch_axis_of(shape, tuple(index))
        if batched[1] or at:
            if not batched[1]:
                y = np.reshape(y, (1,) + np.shape(y)) if is_constant(y) else \
                    o.reshape(y, (1,) + shape_of(y))
            y = align(o, [y], [True], len(region))[0]
            y = np.broadcast_to(y, (n,) + region) if is_constant(y) else \
                o.expand(y, (n,) + region)
            if at:
                y = np.moveaxis(y, 0, at) if is_constant(y) else o.moveaxis(y, 0, at)
        return _run(o, REGISTRY_OF[name], x, y, (slice(None),) + tuple(index))
    return rule


_CASES_AT = [Case(((4,), ()), {"index": (1,)}),
             Case(((4,), (2,)), {"index": (slice(1, 3),)}),
             Case(((3, 4), (2, 4)), {"index": (np.array([2, 0]),)}),
             Case(((3, 4), (3, 1)), {"index": (slice(None), np.array([3, 0]))}),
             Case(((2, 3, 4), (3, 1, 2)), {"index": (Ellipsis, None, slice(None, None, 2))})]

AT_SET = register(Primitive(
    "at_set", _set,
    [lambda o, g, out, x, y, index: _run(o, AT_SET, g, 0.0, index), _y_vjp], _set_jvp,
    _fmt("set"), _CASES_AT, linear=JOINTLY, batch=_batch("at_set"), taylor=linear("at_set"),
    schema=attrs(shape_rule=updated, index=need(INDEX)), saves=()))

AT_ADD = register(Primitive(
    "at_add", _add,
    [lambda o, g, out, x, y, index: g, _y_vjp], _add_jvp,
    _fmt("add"), _CASES_AT + [Case(((3,), (3,)), {"index": (np.array([1, 1, 0]),)})],
    linear=JOINTLY, batch=_batch("at_add"), taylor=linear("at_add"), sympy=ON_ENTRIES,
    schema=attrs(shape_rule=updated, index=need(INDEX)), saves=()))

REGISTRY_OF = {"at_set": AT_SET, "at_add": AT_ADD}

# ---------------------------------------------------------------- the updates on an Ops

# the combination each update records at the positions it writes (set writes y itself)
_COMBINE = {"multiply": "mul", "min": "minimum", "max": "maximum"}


def _region(ops: PrimitiveMethods, verb: str, x: Any, index: tuple) -> np.ndarray:
    """The flat positions of x that ``x[index]`` reads, shaped as that read (numpy's bounds)."""
    shape = shape_of(x)
    try:
        return np.arange(math.prod(shape), dtype=np.int64).reshape(shape)[
            index if not isinstance(index, list) else np.asarray(index)]
    except IndexError as e:
        raise error(f"at[...].{verb}", (x,), str(e), OutOfBoundsError) from None


def _flat_index(shape: tuple, positions: np.ndarray) -> tuple:
    return normalize_index(np.unravel_index(positions, shape), shape)


def _rounds(region: np.ndarray) -> list[np.ndarray]:
    """The elements of the read (flat, in index order) grouped by round: round r holds the
    r-th write to each position, so no position repeats within a round."""
    flat = region.reshape(-1)
    _, inverse, counts = np.unique(flat, return_inverse=True, return_counts=True)
    rank = np.zeros(flat.size, dtype=np.int64)
    seen = np.zeros(counts.size, dtype=np.int64)
    for k, u in enumerate(inverse):
        rank[k] = seen[u]
        seen[u] += 1
    return [np.nonzero(rank == r)[0] for r in range(int(counts.max(initial=0)))]


def _last_writes(region: np.ndarray) -> np.ndarray:
    """The elements of the read (flat) that write a position last."""
    flat = region.reshape(-1)
    _, first_of_reversed = np.unique(flat[::-1], return_index=True)
    return np.sort(flat.size - 1 - first_of_reversed)


def _check_values(verb: str, x: Any, y: Any, shape: tuple) -> None:
    """y must broadcast to the read's ``shape`` (numpy's rule for ``x[index] = y``)."""
    try:
        fits = np.broadcast_shapes(shape_of(y), shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise error(f"at[...].{verb}", (x, y), f"values of shape {shape_of(y)} cannot be "
                    f"broadcast to the indexed shape {shape}", ArgumentError)


def _flat_values(ops: PrimitiveMethods, y: Any, shape: tuple) -> Any:
    """y broadcast to the read's ``shape``, flattened."""
    k = math.prod(shape)
    if is_constant(y):
        return np.reshape(np.broadcast_to(y, shape), (k,))
    if shape_of(y) != shape:
        y = ops.broadcast_to(y, shape)
    return y if shape_of(y) == (k,) else ops.reshape(y, (k,))


class UpdateOps:
    """Functional updates as methods of an Ops (``x.at[index].<verb>(y)`` calls these)."""

    def at_set(self, x: Any, y: Any, index: Any, name: str | None = None) -> Variable:
        """x with y written at index (repeated positions: the last write wins, as numpy's)."""
        return _update(self, "set", x, y, index, name)

    def at_add(self, x: Any, y: Any, index: Any, name: str | None = None) -> Variable:
        """x with y added at index (repeated positions accumulate, as ``np.add.at``)."""
        return _update(self, "add", x, y, index, name)

    def at_multiply(self, x: Any, y: Any, index: Any, name: str | None = None) -> Variable:
        """x multiplied by y at index (repeated positions: every factor, ``np.multiply.at``)."""
        return _update(self, "multiply", x, y, index, name)

    def at_min(self, x: Any, y: Any, index: Any, name: str | None = None) -> Variable:
        """x with minimum(x, y) at index (``np.minimum.at``; a tie splits the gradient)."""
        return _update(self, "min", x, y, index, name)

    def at_max(self, x: Any, y: Any, index: Any, name: str | None = None) -> Variable:
        """x with maximum(x, y) at index (``np.maximum.at``; a tie splits the gradient)."""
        return _update(self, "max", x, y, index, name)


def _update(ops: PrimitiveMethods, verb: str, x: Any, y: Any, index: Any,
            name: str | None) -> Any:
    if is_constant(x):
        x = np.asarray(x)
    if is_traced(index):
        return _traced_update(ops, verb, x, y, index, name)
    try:
        normalized = normalize_index(index, shape_of(x))
    except TypeError as e:
        raise error(f"at[...].{verb}", (x,), str(e), ArgumentError) from None
    region = _region(ops, verb, x, index)       # numpy's checks on the index as given (masks)
    index = normalized
    shape = region.shape
    _check_values(verb, x, y, shape)        # checked before anything is recorded
    repeated = np.unique(region).size < region.size
    if verb == "add":
        return ops.apply(AT_ADD, (x, y), {"index": index}, name)
    if not repeated:
        if verb == "set":
            return ops.apply(AT_SET, (x, y), {"index": index}, name)
        combined = getattr(ops, _COMBINE[verb])(ops.getitem(x, index), y)
        return ops.apply(AT_SET, (x, combined), {"index": index}, name)
    # repeated positions: writes on flat positions, y flattened to the read's elements
    flat = region.reshape(-1)
    ys = _flat_values(ops, y, shape)
    rounds = [_last_writes(region)] if verb == "set" else _rounds(region)
    out = x
    for k, elements in enumerate(rounds):
        at = _flat_index(shape_of(x), flat[elements])
        part = ys[elements] if is_constant(ys) else ops.getitem(ys, (elements,))
        if verb != "set":
            part = getattr(ops, _COMBINE[verb])(ops.getitem(out, at), part)
        out = ops.apply(AT_SET, (out, part), {"index": at},
                        name if k == len(rounds) - 1 else None)
    return out


# ---------------------------------------------------------------- recorded indices


def _traced_update(ops: PrimitiveMethods, verb: str, x: Any, y: Any, index: Any,
                   name: str | None) -> Any:
    """The update at an index holding recorded integers: the flat positions it reads are
    gathered (a recorded integer entry, per example under vmap); y is added there with
    ``scatter_add_along_axis`` and ``where`` keeps x at the positions nothing writes."""
    shape = shape_of(x)
    n = math.prod(shape)
    positions = ops.getitem(np.arange(n, dtype=np.int64).reshape(shape), index)
    region = shape_of(positions)
    k = math.prod(region)
    _check_values(verb, x, y, region)
    ys = _flat_values(ops, y, region)
    at = ops.reshape(positions, (k,))
    xf = ops.reshape(x, (n,)) if not is_constant(x) else np.reshape(x, (n,))
    if verb == "add":
        return ops.reshape(ops.add(xf, ops.scatter_add_along_axis(ys, at, 0, (n,))), shape,
                           name=name)
    arrays = any(not is_constant(i) and shape_of(i) for i in
                 (index if isinstance(index, tuple) else (index,)))
    if verb == "set":
        if arrays:      # a recorded array may repeat a position: keep each one's last write
            later = ops.logical_and(ops.equal(ops.reshape(at, (k, 1)), ops.reshape(at, (1, k))),
                                    np.triu(np.ones((k, k), dtype=bool), 1))
            ys = ops.where(ops.any(later, axis=1), 0.0, ys)
        written = ops.greater(ops.scatter_add_along_axis(np.ones(k), at, 0, (n,)), 0.0)
        out = ops.where(written, ops.scatter_add_along_axis(ys, at, 0, (n,)), xf)
        return ops.reshape(out, shape, name=name)
    combine = getattr(ops, _COMBINE[verb])
    if arrays:          # writes in index order, one position at a time (np.multiply.at's)
        out = xf
        for e in range(k):
            one = ops.equal(np.arange(n), ops.getitem(at, e))
            out = ops.where(one, combine(out, ops.getitem(ys, e) if not is_constant(ys)
                                         else ys[e]), out)
        return ops.reshape(out, shape, name=name)
    written = ops.greater(ops.scatter_add_along_axis(np.ones(k), at, 0, (n,)), 0.0)
    values = ops.scatter_add_along_axis(ys, at, 0, (n,))
    return ops.reshape(ops.where(written, combine(xf, values), xf), shape, name=name)


# ---------------------------------------------------------------- x.at[index]

_MODES = (None, "promise_in_bounds")


class IndexUpdate:
    """``x.at[index]``: the updates at one index, each returning a new Variable."""

    __slots__ = ("x", "index")

    def __init__(self, x: Any, index: Any):
        self.x, self.index = x, index

    def __repr__(self) -> str:
        return f"{self.x.name}.at[{self.index!r}]"

    def _check(self, verb: str, mode: Any, fill_value: Any = None) -> None:
        if mode not in _MODES:
            raise error(f"at[...].{verb}", (self.x,), f"mode={mode!r} is not supported: "
                        "indices out of bounds raise IndexError, as numpy's do (clip them "
                        "with np.clip, or mask the update with op.where)", ArgumentError)
        if fill_value is not None:
            raise error(f"at[...].{verb}", (self.x,), "fill_value is not supported: indices "
                        "out of bounds raise IndexError, as numpy's do", ArgumentError)

    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: str | None = None, fill_value: Any = None) -> Variable:
        """x[index]."""
        self._check("get", mode, fill_value)
        return self.x.rec.getitem(self.x, self.index)

    def set(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | None = None) -> Variable:
        """x with values written at index (the last of repeated positions wins)."""
        self._check("set", mode)
        return self.x.rec.at_set(self.x, values, self.index)

    def add(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | None = None) -> Variable:
        """x with values added at index (repeated positions accumulate)."""
        self._check("add", mode)
        return self.x.rec.at_add(self.x, values, self.index)

    def multiply(self, values: Any, *, indices_are_sorted: bool = False,
                 unique_indices: bool = False, mode: str | None = None) -> Variable:
        """x multiplied by values at index (repeated positions take every factor)."""
        self._check("multiply", mode)
        return self.x.rec.at_multiply(self.x, values, self.index)

    def min(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | None = None) -> Variable:
        """x with minimum(x, values) at index."""
        self._check("min", mode)
        return self.x.rec.at_min(self.x, values, self.index)

    def max(self, values: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | None = None) -> Variable:
        """x with maximum(x, values) at index."""
        self._check("max", mode)
        return self.x.rec.at_max(self.x, values, self.index)


class At:
    """``x.at``: index it to get the updates at that index."""

    __slots__ = ("x",)

    def __init__(self, x: Any):
        self.x = x

    def __getitem__(self, index: Any) -> IndexUpdate:
        return IndexUpdate(self.x, index)


class UpdateMethods:
    """The Variable property ``x.at`` (JAX's functional updates)."""

    __slots__ = ()

    @property
    def at(self) -> At:
        """Functional updates: ``x.at[index].set(y)``, ``.add``, ``.multiply``, ``.min``,
        ``.max``, ``.get()``."""
        return At(self)
