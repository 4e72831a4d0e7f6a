"""Shape primitives: expand, reshape, transpose, indexing and its adjoint, joins, casts.

They come in adjoint pairs: the vjp of expand is a sum, of sum an expand;
reshape and transpose invert themselves; the vjp of indexing is
``scatter_add`` and the vjp of ``scatter_add`` is indexing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, DTypeError
from . import taylor as tr
from .core import (
    Case,
    Primitive,
    align,
    batch_size,
    dtype_of,
    error,
    full_mask,
    is_constant,
    mapped,
    mask_down,
    method_fmt,
    register,
    shape_of,
    shift_axis,
    unbroadcast,
)

if TYPE_CHECKING:
    from ..engine.variable import Variable

# ---------------------------------------------------------------- expand, reshape, transpose


def _expand(x, shape):
    if type(x) is not np.ndarray and isinstance(x, np.generic):
        x = np.asarray(x)
    if type(x) is np.ndarray and x.ndim == 0:   # one number everywhere: a read-only view
        out = np.ndarray(shape, x.dtype, x, 0, (0,) * len(shape))
        out.flags.writeable = False
        return out
    return np.broadcast_to(x, shape)


EXPAND = register(Primitive(
    "expand", _expand,
    [lambda o, g, out, x, shape: unbroadcast(o, g, shape_of(x))],
    lambda o, ts, out, x, shape: o.expand(ts[0], shape),
    "{0}.expand({shape})",
    mask=lambda o, m, i, out, x, shape: None if m is None else mask_down(o, m, shape, shape_of(x)),
    cases=[Case(((),), {"shape": (4,)}), Case(((3, 1),), {"shape": (3, 4)}),
     Case(((3,),), {"shape": (2, 3)}), Case(((1, 4),), {"shape": (2, 3, 4)})],
    batch=lambda o, xs, batched, shape: o.expand(
        align(o, xs, batched, len(shape))[0], (batch_size(xs, batched),) + tuple(shape)),
    taylor=tr.linear("expand"), numpy="np.broadcast_to({0}, {shape})"))


def _reshape(x, shape):
    if type(x) is np.ndarray:       # np.reshape's own work, without its dispatch layers
        return x.reshape(shape)
    return np.reshape(x, shape)


RESHAPE = register(Primitive(
    "reshape", _reshape,
    [lambda o, g, out, x, shape: o.reshape(g, shape_of(x))],
    lambda o, ts, out, x, shape: o.reshape(ts[0], shape),
    "{0}.reshape({shape})",
    mask=lambda o, m, i, out, x, shape:
        None if m is None else o.reshape(full_mask(o, m, shape_of(out)), shape_of(x)),
    cases=[Case(((),), {"shape": (1, 1)}), Case(((3, 4),), {"shape": (12,)}),
     Case(((2, 3, 4),), {"shape": (6, -1)}), Case(((3, 1),), {"shape": (3,)})],
    batch=lambda o, xs, batched, shape: o.reshape(xs[0], shape_of(xs[0])[:1] + tuple(shape)),
    taylor=tr.linear("reshape"), numpy="{0}.reshape({shape})"))


def _transpose(x, axes=None):
    if type(x) is np.ndarray:       # np.transpose's own work, without its dispatch layers
        return x.transpose(axes)
    return np.transpose(x, axes)


def _inverse(axes):
    return None if axes is None else tuple(int(i) for i in np.argsort(axes))


def _transpose_fmt(args, attrs, render):
    axes = attrs.get("axes")
    return f"{args[0]}.T" if axes is None else f"{args[0]}.transpose({render(axes, 'axes')})"


TRANSPOSE = register(Primitive(
    "transpose", _transpose,
    [lambda o, g, out, x, axes=None: o.transpose(g, _inverse(axes))],
    lambda o, ts, out, x, axes=None: o.transpose(ts[0], axes),
    _transpose_fmt,
    mask=lambda o, m, i, out, x, axes=None:
        None if m is None else o.transpose(full_mask(o, m, shape_of(out)), _inverse(axes)),
    cases=[Case(((3,),)), Case(((3, 4),)), Case(((2, 3, 4),), {"axes": (1, 0, 2)}),
     Case(((2, 3, 4),), {"axes": (2, 0, 1)})],
    batch=lambda o, xs, batched, axes=None: o.transpose(xs[0], _batch_axes(xs[0], axes)),
    taylor=tr.linear("transpose"), numpy="{0}.transpose({axes_arg})"))


def _batch_axes(x, axes):
    """The permutation of a batched transpose: the batch axis stays first."""
    nd = len(shape_of(x)) - 1
    per = tuple(range(nd))[::-1] if axes is None else axes
    return (0,) + tuple(int(a) % nd + 1 for a in per)

# ---------------------------------------------------------------- indexing


def _has_array(index: tuple) -> bool:
    return any(isinstance(i, np.ndarray) for i in index)


def _getitem(x, index):
    return x[index]


def _scatter_add(*gs, indices, shape):
    out = np.zeros(shape, dtype=np.result_type(*gs))
    for g, index in zip(gs, indices):
        if _has_array(index):
            np.add.at(out, index, g)
        else:
            out[index] += g
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
    lambda args, attrs, render: f"{args[0]}[{render_index(attrs['index'])}]",
    mask=lambda o, m, i, out, x, index: None if m is None else _read_mask(o, m, out, x, index),
    cases=[Case(((4,),), {"index": (1,)}), Case(((4,),), {"index": (slice(1, 3),)}),
     Case(((3, 4),), {"index": (np.array([0, 2, 2]),)}),
     Case(((3, 4),), {"index": (slice(None), np.array([3, 0, 3]))}),
     Case(((2, 3, 4),), {"index": (Ellipsis, None, slice(None, None, 2))})],
    sparse_vjp=True, batch=lambda o, xs, batched, index: _batch_getitem(o, xs[0], index),
    taylor=tr.linear("getitem"), numpy="{0}[{index}]"))


def _batch_getitem(o, x, index):
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


def _batch_scatter(o, gs, batched, indices, shape):
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


def _read_mask(o, m, out, x, index):
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
    variadic=True, batch=lambda o, gs, batched, indices, shape: _batch_scatter(
        o, gs, batched, indices, shape),
    taylor=tr.linear("scatter_add")))


def _scatter_jvp(o, ts, indices, shape):
    kept = [(t, i) for t, i in zip(ts, indices) if t is not None]
    if not kept:
        return None
    return o.scatter_add([t for t, _ in kept], [i for _, i in kept], shape)


def normalize_index(index: Any, shape: tuple) -> tuple:
    """An index as a tuple whose integer arrays are read-only int64 arrays (masks become arrays)."""
    items = index if isinstance(index, tuple) else (index,)
    out = []
    for i in items:
        if not is_constant(i):
            raise TypeError("an index must be a constant, not a Variable")
        if isinstance(i, (list, np.ndarray)):
            arr = np.asarray(i)
            if arr.dtype == bool:
                out.extend(np.nonzero(arr))
                continue
            if arr.dtype.kind not in "iu":
                raise TypeError(f"index arrays must hold integers, not {arr.dtype}")
            arr = arr.astype(np.int64, copy=True)
            arr.flags.writeable = False
            out.append(arr)
        elif isinstance(i, (int, np.integer)) and not isinstance(i, bool):
            out.append(int(i))
        elif isinstance(i, slice) or i is None or i is Ellipsis:
            out.append(i)
        else:
            raise TypeError(f"unsupported index {i!r}")
    for a in out:
        if isinstance(a, np.ndarray):
            a.flags.writeable = False
    return tuple(out)

# ---------------------------------------------------------------- joins


def _concatenate(*xs, axis=0):
    return np.concatenate(xs, axis=axis)


def _part(i: int, xs: Sequence, axis: int) -> tuple:
    """The index selecting input i of a concatenate along ``axis`` from its output."""
    ndim = len(shape_of(xs[0]))
    ax = axis % ndim
    start = sum(shape_of(x)[ax] for x in xs[:i])
    return (slice(None),) * ax + (slice(start, start + shape_of(xs[i])[ax]),)


def _zeros_for_missing(ts, xs):
    if all(t is None for t in ts):
        return None
    return [np.zeros(shape_of(x), dtype=dtype_of(x) or np.float64) if t is None else t
            for t, x in zip(ts, xs)]


def _join_fmt(fn):
    def fmt(args, attrs, render):
        return f"{fn}([{', '.join(args)}], axis={attrs.get('axis', 0)})"
    return fmt


def _concatenate_jvp(o, ts, out, *xs, axis=0):
    ts = _zeros_for_missing(ts, xs)
    return None if ts is None else o.concatenate(ts, axis=axis)


CONCATENATE = register(Primitive(
    "concatenate", _concatenate,
    [lambda o, g, out, i, *xs, axis=0: o.getitem(g, _part(i, xs, axis))],
    _concatenate_jvp, _join_fmt("concatenate"),
    [Case(((3,), (2,))), Case(((3, 4), (1, 4), (2, 4)), {"axis": 0}),
     Case(((2, 3), (2, 1)), {"axis": -1})],
    variadic=True, batch=lambda o, xs, batched, axis=0: o.concatenate(
        _all_batched(o, xs, batched), axis=shift_axis(axis, len(shape_of(xs[0])) - batched[0])),
    taylor=tr.linear("concatenate")))


def _all_batched(o, xs, batched):
    """The inputs with the shared ones expanded along the batch axis."""
    n = batch_size(xs, batched)
    return [x if b else o.expand(x, (n,) + shape_of(x)) for x, b in zip(xs, batched)]


def _stack(*xs, axis=0):
    return np.stack(xs, axis=axis)


def _stack_vjp(o, g, out, i, *xs, axis=0):
    ax = axis % len(shape_of(out))
    return o.getitem(g, (slice(None),) * ax + (i,))


def _stack_jvp(o, ts, out, *xs, axis=0):
    ts = _zeros_for_missing(ts, xs)
    return None if ts is None else o.stack(ts, axis=axis)


STACK = register(Primitive(
    "stack", _stack, [_stack_vjp], _stack_jvp, _join_fmt("stack"),
    [Case(((), ())), Case(((3,), (3,), (3,))), Case(((3, 4), (3, 4)), {"axis": 1}),
     Case(((2, 3), (2, 3)), {"axis": -1})],
    variadic=True, batch=lambda o, xs, batched, axis=0: o.stack(
        _all_batched(o, xs, batched),
        axis=shift_axis(axis, len(shape_of(xs[0])) - batched[0] + 1)),
    taylor=tr.linear("stack")))

# ---------------------------------------------------------------- dtype


def _cast(x, dtype):
    return x.astype(dtype)


CAST = register(Primitive(
    "cast", _cast,
    [lambda o, g, out, x, dtype: o.cast(g, dtype_of(x))],
    lambda o, ts, out, x, dtype: o.cast(ts[0], dtype),
    method_fmt("astype", "dtype"),
    [Case(((3,),), {"dtype": np.dtype(np.float64)})], batch=mapped("cast"),
    taylor=tr.linear("cast"), numpy="{0}.astype({dtype})"))


# ---------------------------------------------------------------- Ops methods

class ShapeOps:
    """The shape primitives as methods of an Ops."""

    def expand(self, x: Any, shape: Sequence[int], name: str | None = None) -> Variable:
        """Broadcast x to ``shape`` (numpy's broadcast_to)."""
        return self.apply(EXPAND, (x,), {"shape": _shape_tuple(shape)}, name)

    def reshape(self, x: Any, shape: Sequence[int], name: str | None = None) -> Variable:
        """x with a new shape holding the same number of entries (-1 infers one axis)."""
        return self.apply(RESHAPE, (x,), {"shape": _shape_tuple(shape)}, name)

    def transpose(self, x: Any, axes: Sequence[int] | None = None,
                  name: str | None = None) -> Variable:
        """x with its axes permuted; reversed when ``axes`` is None."""
        return self.apply(TRANSPOSE, (x,), {"axes": None if axes is None else
                                             _shape_tuple(axes)}, name)

    def getitem(self, x: Any, index: Any, name: str | None = None) -> Variable:
        """x[index] for ints, slices, None, Ellipsis, integer arrays and bool masks."""
        try:
            index = normalize_index(index, shape_of(x))
        except TypeError as e:
            raise error("getitem", (x,), str(e), ArgumentError) from None
        return self.apply(GETITEM, (x,), {"index": index}, name)

    def scatter_add(self, gs: Sequence[Any], indices: Sequence[tuple], shape: Sequence[int],
                    name: str | None = None) -> Variable:
        """zeros(shape) with each gs[k] added at indices[k] (repeated indices accumulate)."""
        indices = tuple(normalize_index(i, tuple(shape)) for i in indices)
        return self.apply(SCATTER_ADD, tuple(gs),
                           {"indices": indices, "shape": _shape_tuple(shape)}, name)

    def concatenate(self, xs: Sequence[Any], axis: int = 0, name: str | None = None) -> Variable:
        """Join arrays along an existing axis."""
        return self.apply(CONCATENATE, tuple(xs), {"axis": int(axis)}, name)

    def stack(self, xs: Sequence[Any], axis: int = 0, name: str | None = None) -> Variable:
        """Join arrays along a new axis."""
        return self.apply(STACK, tuple(xs), {"axis": int(axis)}, name)

    def cast(self, x: Any, dtype: Any, name: str | None = None) -> Variable:
        """x converted to a floating ``dtype`` (float16, float32 or float64)."""
        dtype = np.dtype(dtype)
        if dtype.kind != "f" or dtype.itemsize > 8:
            raise error("cast", (x,), f"cannot differentiate values of dtype {dtype}; "
                              "use float16, float32 or float64", DTypeError)
        return self.apply(CAST, (x,), {"dtype": dtype}, name)


def _shape_tuple(shape: Any) -> tuple:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(n) for n in shape)
