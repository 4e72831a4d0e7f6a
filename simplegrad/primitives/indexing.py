"""Indexing and its adjoint: getitem (``x[index]``) and scatter_add, each the other's vjp.

An index is a constant attribute, normalized once (integer arrays become read-only int64
arrays, bool masks their nonzero indices); ``render_index`` prints it as numpy's ``x[...]``
text. Under vmap, both find where numpy's indexing rules put the batch axis.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    error,
    full_mask,
    is_constant,
    register,
    shape_of,
)
from .lazy import dask_array, per_block, refuse, whole
from .schema import INDEX, INDICES, SHAPE, attrs, need
from .shape import shape_tuple
from .shape_rules import indexed, scattered
from .taylor import linear
from .traced_index import is_traced, traced_getitem

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

# ---------------------------------------------------------------- indexing


def _has_array(index: tuple) -> bool:
    return any(isinstance(i, np.ndarray) for i in index)


def _getitem(x, index):
    try:
        return x[index]
    except NotImplementedError:         # dask indexes with one array at a time
        if dask_array(x) is None:
            raise
        return _getitem_trailing(x, index)


def _getitem_trailing(x, index):
    """x[index] on a dask array for an index ``(..., items)`` that dask refuses: numpy's
    indexing per block, the indexed trailing axes whole (MaterializeError for another)."""
    items = index[1:] if isinstance(index, tuple) and index and index[0] is Ellipsis else None
    if items is None or any(i is None or i is Ellipsis for i in items):
        refuse("getitem", x, reason="dask takes one index array at a time")
    core = np.shape(x)[len(np.shape(x)) - len(items):]
    shape = np.empty(core)[index].shape
    ins = ",".join(f"a{k}" for k in range(len(core)))
    outs = ",".join(f"b{k}" for k in range(len(shape)))
    return per_block(_index_block, f"({ins})->({outs})", x, dtypes=x.dtype,
                     sizes={f"b{k}": n for k, n in enumerate(shape)}, index=index)


def _index_block(x, index):
    return x[index]


def _scatter_add(*gs, indices, shape):
    if len(gs) == 1 and dask_array(*gs) is not None:
        axis = _segment_axis(indices[0])
        if axis is not None:
            return _segment_sum(gs[0], indices[0][axis], axis, shape)
    return whole(_scatter_add_numpy, shape, np.result_type(*gs), *gs, indices=indices,
                 shape=shape)


def _segment_axis(index: Any) -> int | None:
    """The axis of an index ``(:, ..., :, ints)`` (one 1-D integer array after full slices),
    or None for any other."""
    items = index if isinstance(index, tuple) else (index,)
    *lead, last = items
    if not isinstance(last, np.ndarray) or last.ndim != 1 or last.dtype.kind not in "iu":
        return None
    full = all(isinstance(i, slice) and i == slice(None) for i in lead)
    return len(lead) if full else None


def _segment_sum(g, index, axis, shape):
    """The scatter of a dask g along ``axis`` as a segment sum: each chunk of g along the axis
    added into zeros of ``shape`` by its part of ``index``, the chunks' sums summed as a tree."""
    g = g.rechunk({d: -1 for d in range(g.ndim) if d != axis})
    starts = np.cumsum((0,) + g.chunks[axis])
    parts = [g.blocks[(0,) * axis + (k,)].map_blocks(
        _segment_block, index=index[starts[k]:starts[k + 1]], axis=axis, shape=shape,
        chunks=tuple(shape), dtype=g.dtype) for k in range(len(starts) - 1)]
    return dask_array(g).stack(parts).sum(axis=0, split_every=8)


def _segment_block(g, index, axis, shape):
    out = np.zeros(shape, dtype=g.dtype)
    np.add.at(out, (slice(None),) * axis + (index,), g)
    return out


def add_at(out: np.ndarray, index: tuple, g: Any) -> None:
    """``out[index] += g`` in place, repeated positions of an index array each added
    (``np.add.at``)."""
    if _has_array(index):
        np.add.at(out, index, g)
    else:
        out[index] += g


def _scatter_add_numpy(*gs, indices, shape):
    out = np.zeros(shape, dtype=np.result_type(*gs))
    for g, index in zip(gs, indices):
        add_at(out, index, g)
    return out


def _scatter_fmt(args, attrs, render):
    parts = "".join(f".at[{render_index(i)}].add({a})" for a, i in zip(args, attrs["indices"]))
    return f"zeros({render(attrs['shape'], 'shape')}){parts}"


def render_index(index: tuple) -> str:
    """An index tuple as the text inside ``x[...]``."""
    def one(i):
        if isinstance(i, slice):
            text = ("" if i.start is None else str(i.start)) + ":" + (
                "" if i.stop is None else str(i.stop))
            return text + ("" if i.step is None else f":{i.step}")
        if i is Ellipsis:
            return "..."
        if isinstance(i, np.ndarray):
            return str(i.tolist())
        return str(i)
    return ", ".join(one(i) for i in index) if index else "()"


GETITEM = register(Primitive(
    "getitem", _getitem,
    [lambda o, g, out, x, index: o.scatter_add([g], [index], shape_of(x))],
    lambda o, ts, out, x, index: o.getitem(ts[0], index),
    lambda args, attrs, render: f"{args[0]}[{render_index(attrs['index'])}]", linear=JOINTLY,
    mask=lambda o, m, i, out, x, index: None if m is None else _read_mask(o, m, out, x, index),
    cases=[Case(((4,),), {"index": (1,)}), Case(((4,),), {"index": (slice(1, 3),)}),
     Case(((3, 4),), {"index": (np.array([0, 2, 2]),)}),
     Case(((3, 4),), {"index": (slice(None), np.array([3, 0, 3]))}),
     Case(((2, 3, 4),), {"index": (Ellipsis, None, slice(None, None, 2))})],
    sparse_vjp=True, batch=lambda o, xs, batched, index: _batch_getitem(o, xs[0], index),
    taylor=linear("getitem"), numpy="{0}[{index}]", sympy=ON_ENTRIES,
    schema=attrs(shape_rule=indexed, index=need(INDEX)), saves=()))


def _batch_getitem(o: PrimitiveMethods, x, index):
    """x[:, *index] with the batch axis moved back to the front."""
    full = (slice(None),) + tuple(index)
    at, ndim = _batch_axis_of(shape_of(x)[1:], index)
    out = o.getitem(x, full)
    if at == 0:
        return out
    order = list(range(ndim))
    order.insert(0, order.pop(at))
    return o.transpose(out, tuple(order))


def _batch_axis_of(shape: tuple, index: tuple) -> tuple[int, int]:
    """Where ``x[:, *index]`` puts the batch axis of x (advanced indices that are not adjacent
    put their axes first), and the result's rank; x has per-example ``shape``. A zero-stride
    probe numbering two examples finds it."""
    probe = np.broadcast_to(np.arange(2).reshape((2,) + (1,) * len(shape)), (2,) + shape)
    seen = probe[(slice(None),) + tuple(index)]
    at = next(k for k in range(seen.ndim) if seen.shape[k] == 2 and
              not np.take(seen, 0, axis=k).any() and np.take(seen, 1, axis=k).all())
    return at, seen.ndim


def _batch_scatter(o: PrimitiveMethods, gs, batched, indices, shape):
    """zeros((B,) + shape) with each example's values added at ``(:, *index)``: every value
    is brought to its region's full per-example shape, the batch axis where that index puts
    it."""
    n = batch_size(gs, batched)
    shape = tuple(shape)
    parts = []
    for g, b, index in zip(gs, batched, indices):
        region = np.broadcast_to(np.zeros((), dtype=np.int8), shape)[tuple(index)].shape
        if not b:
            g = o.reshape(g, (1,) + shape_of(g))
        g = o.expand(align(o, [g], [True], len(region))[0], (n,) + region)
        at, _ = _batch_axis_of(shape, index)
        parts.append(g if at == 0 else o.moveaxis(g, 0, at))
    return o.scatter_add(parts, [(slice(None),) + tuple(i) for i in indices], (n,) + shape)


def _read_mask(o: PrimitiveMethods, m, out, x, index):
    """x's cotangent is zero where no unmasked entry of the output reads it."""
    unmasked = o.logical_not(full_mask(o, m, shape_of(out)))
    return o.logical_not(o.scatter_add([unmasked], [index], shape_of(x)))


SCATTER_ADD = register(Primitive(
    "scatter_add", _scatter_add,
    [lambda o, g, out, i, *gs, indices, shape: o.getitem(g, indices[i])],
    lambda o, ts, out, *gs, indices, shape: _scatter_jvp(o, ts, indices, shape),
    _scatter_fmt,
    [Case(((2,),), {"indices": ((slice(1, 3),),), "shape": (4,)}),
     Case(((3, 4), ()), {"indices": ((np.array([0, 2, 2]),), (1, 1)), "shape": (3, 4)}),
     Case(((3,), (3,)), {"indices": ((np.array([1, 1, 0]),), (np.array([0, 1, 1]),)),
                         "shape": (2,)})],
                         linear=JOINTLY, accumulation="indexing reads added into", sized="scatter",
    variadic=True, batch=lambda o, gs, batched, indices, shape: _batch_scatter(
        o, gs, batched, indices, shape),
    taylor=linear("scatter_add"), sympy=ON_ENTRIES,
    schema=attrs(shape_rule=scattered, indices=need(INDICES), shape=need(SHAPE)), saves=()))


def _scatter_jvp(o: PrimitiveMethods, ts, indices, shape):
    kept = [(t, i) for t, i in zip(ts, indices) if t is not None]
    if not kept:
        return None
    return o.scatter_add([t for t, _ in kept], [i for _, i in kept], shape)


def normalize_index(index: Any, shape: tuple) -> tuple:
    """An index as a tuple whose integer arrays are read-only int64 arrays (masks become arrays)."""
    kind = type(index)
    if kind is slice or kind is int:    # (the common index, as it is)
        return (index,)
    if kind is tuple:
        for i in index:
            kind = type(i)
            if kind is not slice and kind is not int:
                break
        else:
            return index    # (slices and ints: normalized already, as a rule hands it on)
    items = index if isinstance(index, tuple) else (index,)
    out = []
    masked = False
    for i in items:
        if not is_constant(i):
            raise TypeError("an index must be a constant, not a Variable")
        if isinstance(i, (list, np.ndarray)):
            arr = np.asarray(i)
            if arr.dtype == bool:
                masked = True
                out.extend(np.nonzero(arr))
                continue
            if arr.dtype.kind not in "iu":
                raise TypeError(f"index arrays must hold integers, not {arr.dtype}")
            arr = arr.astype(np.int64, copy=True)
            arr.setflags(write=False)
            out.append(arr)
        elif isinstance(i, (int, np.integer)) and not isinstance(i, bool):
            out.append(int(i))
        elif isinstance(i, slice) or i is None or i is Ellipsis:
            out.append(i)
        else:
            raise TypeError(f"unsupported index {i!r}")
    if masked:
        _check_masks(items, shape)
    for a in out:
        if isinstance(a, np.ndarray):
            a.setflags(write=False)
    return tuple(out)


def _check_masks(items: tuple, shape: tuple) -> None:
    """IndexError, in numpy's words, for a bool mask whose shape is not that of the axes it
    covers (numpy would raise it too; the nonzero positions alone would read other entries)."""
    masks = [isinstance(i, (list, np.ndarray)) and np.asarray(i).dtype == bool for i in items]
    if not any(masks):
        return
    spans = [np.ndim(i) if m else 0 if i is None or i is Ellipsis else 1
             for i, m in zip(items, masks)]
    ellipsis = next((k for k, i in enumerate(items) if i is Ellipsis), len(items))
    for k, (i, m) in enumerate(zip(items, masks)):
        if not m:
            continue
        start = sum(spans[:k]) if k < ellipsis else len(shape) - sum(spans[k:])
        mask_shape = np.shape(i)
        for j, n in enumerate(mask_shape):
            axis = start + j
            if 0 <= axis < len(shape) and shape[axis] != n:
                raise IndexError(f"boolean index did not match indexed array along axis {axis}; "
                                 f"size of axis is {shape[axis]} but size of corresponding "
                                 f"boolean axis is {n}")


# ---------------------------------------------------------------- Ops methods

class IndexingOps:
    """Indexing and its adjoint as methods of an Ops."""

    def getitem(self, x: Any, index: Any, name: str | None = None) -> Variable:
        """x[index] for ints, slices, None, Ellipsis, integer arrays and bool masks, and integer
        Variables (positions and dynamic slice starts: traced_index.py)."""
        if is_traced(index):
            return traced_getitem(self, x, index, name)
        try:
            index = normalize_index(index, shape_of(x))
        except TypeError as e:
            raise error("getitem", (x,), str(e), ArgumentError) from None
        except IndexError as e:
            raise error("getitem", (x,), str(e), OutOfBoundsError) from None
        return self.apply(GETITEM, (x,), {"index": index}, name)

    def scatter_add(self, gs: Sequence[Any], indices: Sequence[tuple], shape: Sequence[int],
                    name: str | None = None) -> Variable:
        """zeros(shape) with each gs[k] added at indices[k] (repeated indices accumulate)."""
        indices = tuple(normalize_index(i, tuple(shape)) for i in indices)
        return self.apply(SCATTER_ADD, tuple(gs),
                           {"indices": indices, "shape": shape_tuple(shape)}, name)
