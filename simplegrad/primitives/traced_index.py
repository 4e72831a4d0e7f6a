"""Indexing by recorded integers: ``x[i]``, ``x[:, i]``, ``x[i, j]`` and dynamic slices
``x[i:i + k]`` where ``i`` is an integer Variable (an ``argmax``, a vmapped index, ...).

The constant part of the index is applied first as ordinary indexing; each recorded part then
becomes a gather along its axis (``op.take`` with recorded indices: a ``take_along_axis``
entry), so the recorded program reads the position at replay time, gradients scatter back to
it, and under vmap each example reads its own position (take_along_axis's batching rule).

Integer arrays together (recorded ones with constant ones, integers or each other) follow
numpy's rules for advanced indexing (``_advanced``): the basic part of the index first, then
the indexed axes moved last and flattened into one, gathered at the flat position the indices
broadcast to, and the gathered axes put where numpy puts them (where the first of them was
when they are adjacent in the index, else first).

A dynamic slice has a static length, as JAX's ``lax.dynamic_slice``: ``stop - start`` is read
from the values when recorded (it must be the same for every example under vmap), and the
entry gathers ``start + step * arange(length)``; the slice must lie inside the axis at
recording time; it cannot be mixed with integer arrays (index in two steps), nor can a
constant bool mask be mixed with recorded indices.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, OutOfBoundsError
from .core import error, is_constant, shape_of, value_of

if TYPE_CHECKING:
    from . import PrimitiveMethods


def _traced(v: Any) -> bool:
    return v is not None and not is_constant(v)


def is_traced(index: Any) -> bool:
    """True when an index holds a Variable (an item, or a slice bound)."""
    items = index if isinstance(index, tuple) else (index,)
    return any(_traced(i) or isinstance(i, slice) and
               (_traced(i.start) or _traced(i.stop) or _traced(i.step)) for i in items)


def _int_entry(x: Any, v: Any, what: str, n: int | None = None) -> Any:
    """v checked to be an integer Variable (or constant), inside an axis of size n if given."""
    if not is_constant(v) and v.dtype == bool:
        raise error("getitem", (x, v), "a recorded bool mask selects a number of entries that "
                    "depends on the values; use op.where(mask, x, 0), or index with "
                    f"{v.name}.value (a constant mask)", ArgumentError)
    if not is_constant(v) and getattr(v, "dtype", np.dtype(float)).kind not in "iu":
        raise error("getitem", (x, v), f"{what} must be an integer Variable, not {v.dtype} "
                    "(cast it, or take its value)", ArgumentError)
    values = np.asarray(value_of(v))
    if n is not None and values.size and (values.min() < -n or values.max() >= n):
        raise error("getitem", (x, v), f"an index is out of bounds for an axis of size {n}",
                    OutOfBoundsError)
    return v


def traced_getitem(ops: PrimitiveMethods, x: Any, index: Any, name: str | None) -> Any:
    """x[index] where index holds integer Variables (see the module docstring)."""
    items = list(index) if isinstance(index, tuple) else [index]
    if sum(i is Ellipsis for i in items) > 1:
        raise error("getitem", (x,), "an index can only have a single ellipsis", ArgumentError)
    nd = len(shape_of(x))
    used = sum(1 for i in items if i is not None and i is not Ellipsis)
    if used > nd:
        raise error("getitem", (x,), f"too many indices for an array of {nd} dimension(s)",
                    OutOfBoundsError)
    if any(i is Ellipsis for i in items):
        at = next(k for k, i in enumerate(items) if i is Ellipsis)
        items[at:at + 1] = [slice(None)] * (nd - used)
    items += [slice(None)] * (nd - sum(1 for i in items if i is not None))
    arrays = [i for i in items if _traced(i) and len(shape_of(i)) > 0]
    constants = [i for i in items if not _traced(i) and isinstance(i, (list, np.ndarray))]
    if arrays and (len(arrays) > 1 or constants or any(
            _traced(i) and not len(shape_of(i)) or isinstance(i, (int, np.integer))
            for i in items)) or constants:
        if any(isinstance(i, slice) and any(_traced(b) for b in (i.start, i.stop, i.step))
               for i in items):
            raise error("getitem", (x,), "a dynamic slice cannot be mixed with integer arrays; "
                        "index in two steps", ArgumentError)
        if any(np.asarray(i).dtype == bool for i in constants):
            raise error("getitem", (x,), "a constant bool mask cannot be mixed with recorded "
                        "indices; index in two steps", ArgumentError)
        return _advanced(ops, x, items, name)
    # checked first (nothing recorded on an error); then the constant part, recorded parts kept
    # as full slices; then one gather per recorded part
    plain, later, axis, src = [], [], 0, 0
    for i in items:
        dynamic = _traced(i) or isinstance(i, slice) and any(
            _traced(b) for b in (i.start, i.stop, i.step))
        plain.append(slice(None) if dynamic else i)
        if dynamic:
            later.append((axis, _int_entry(x, i, "an index", shape_of(x)[src]) if _traced(i) else
                          _slice_plan(x, i, shape_of(x)[src])))
        if dynamic or i is None or isinstance(i, slice):
            axis += 1
        if i is not None:
            src += 1
    full = all(isinstance(p, slice) and p == slice(None) for p in plain)
    y = x if full else ops.getitem(x, tuple(plain))
    dropped = 0
    for k, (ax, i) in enumerate(later):
        last = name if k == len(later) - 1 else None
        ax -= dropped
        if isinstance(i, tuple):        # a dynamic slice: start + step * arange(length)
            start, offsets = i
            where = ops.add(start, offsets) if not is_constant(start) else start + offsets
            y = ops.take(y, where, axis=ax, name=last)
        else:
            y = ops.take(y, i, axis=ax, name=last)
            dropped += 1 - len(shape_of(i))
    return y


def _slice_plan(x: Any, s: slice, n: int) -> tuple[Any, np.ndarray]:
    """A dynamic slice of an axis of size n as (start, offsets): its length fixed now."""
    if _traced(s.step):
        raise error("getitem", (x, s.step), "a slice step must be a constant", ArgumentError)
    step = 1 if s.step is None else int(s.step)
    if step <= 0:
        raise error("getitem", (x,), "a dynamic slice needs a positive step", ArgumentError)
    start = 0 if s.start is None else s.start
    stop = n if s.stop is None else s.stop
    for b, what in ((start, "slice start"), (stop, "slice stop")):
        _int_entry(x, b, f"a {what}")
    lo, hi = np.asarray(value_of(start)), np.asarray(value_of(stop))
    lengths = np.unique(np.maximum(0, -(-(hi - lo) // step)))
    if lengths.size != 1:
        raise error("getitem", (x,), "a dynamic slice needs one length for every example "
                    "(stop - start, fixed when recorded, as in JAX's dynamic_slice)",
                    ArgumentError)
    length = int(lengths[0])
    if length and (np.any(lo < 0) or np.any(lo + step * (length - 1) >= n)):
        raise error("getitem", (x,), f"the dynamic slice [{lo.tolist()}:{hi.tolist()}] does not "
                    f"lie inside an axis of size {n}", OutOfBoundsError)
    return (int(start) if is_constant(start) else start,
            np.arange(length, dtype=np.int64) * step)


def _advanced(ops: PrimitiveMethods, x: Any, items: list, name: str | None) -> Any:
    """x[items] (Ellipsis expanded, every axis covered) by numpy's rules for advanced indices
    when they hold a recorded integer and an integer array (see the module docstring)."""
    shape = shape_of(x)
    basic, adv = [], []     # adv: (position in the index, axis of the basic result, size, index)
    src = 0
    for k, i in enumerate(items):
        if i is not None and not isinstance(i, slice):
            n = shape[src]
            adv.append((k, len(basic), n, _in_axis(ops, x, i, n)))
            i = slice(None)
        basic.append(i)
        if i is not None:
            src += 1
    full = all(isinstance(b, slice) and b == slice(None) for b in basic)
    y = x if full else ops.getitem(x, tuple(basic))
    axes = [a for _, a, _, _ in adv]
    rest = [a for a in range(len(shape_of(y))) if a not in axes]
    order = tuple(rest + axes)
    if order != tuple(range(len(order))):
        y = ops.transpose(y, order)
    kept = shape_of(y)[:len(rest)]
    y = ops.reshape(y, kept + (int(np.prod([n for _, _, n, _ in adv])),))
    flat, stride = None, 1
    for _, _, n, i in reversed(adv):    # the position in the flattened indexed axes
        term = i * stride if is_constant(i) else i if stride == 1 else ops.mul(i, stride)
        flat = term if flat is None else flat + term if is_constant(flat) and is_constant(
            term) else ops.add(flat, term)
        stride *= n
    out = ops.take(y, flat, axis=len(rest))
    r, b = len(rest), len(shape_of(flat))
    ks = [k for k, _, _, _ in adv]
    at = axes[0] if ks == list(range(ks[0], ks[0] + len(ks))) else 0
    order = tuple(range(at)) + tuple(range(r, r + b)) + tuple(range(at, r))
    if order != tuple(range(r + b)):
        out = ops.transpose(out, order, name=name)
    elif name is not None:
        out.name = name
    return out


def _in_axis(ops: PrimitiveMethods, x: Any, i: Any, n: int) -> Any:
    """An integer index into an axis of size n as positions 0..n-1 (a recorded one recorded
    as ``i mod n``, after its values are checked to lie in [-n, n))."""
    if _traced(i):
        return ops.mod(_int_entry(x, i, "an index", n), n)
    arr = np.asarray(i)
    if arr.dtype.kind not in "iu":
        raise error("getitem", (x,), f"index arrays must hold integers, not {arr.dtype}",
                    ArgumentError)
    if arr.size and (arr.min() < -n or arr.max() >= n):
        raise error("getitem", (x,), f"an index is out of bounds for an axis of size {n}",
                    OutOfBoundsError)
    return np.where(arr < 0, arr + n, arr).astype(np.int64)
