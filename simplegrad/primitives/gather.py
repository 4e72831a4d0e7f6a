"""Sorting and gathering along an axis: argsort, sort, take, take_along_axis and its adjoint.

``sort`` records an ``argsort`` entry (integer, no gradient) and gathers with it,
``take_along_axis(x, v2, axis=-1)``; the indices are an input of the gather, so the recorded
gradient (``scatter_add_along_axis`` by the same entry) is the same program at any input: no
permutation is stored as a constant. argsort is stable: tied entries keep their order, so at a
tie the cotangent of the k-th sorted position goes to the k-th of the tied inputs in index
order (the derivative of that fixed permutation; any choice is a one-sided derivative there).
``take_along_axis`` (a gather) and ``scatter_add_along_axis`` (a scatter that adds) are each
other's vjp. Integer indices are an input when they are a recorded entry and an attribute when
they are a constant (as indexing keeps them), so they never pass through a float conversion;
the two gathers are therefore variadic (one or two inputs). ``take`` with constant indices
records indexing (``x[:, [2, 0]]``); with recorded indices, reshapes and a take_along_axis.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, AxisError, OutOfBoundsError, ShapeError
from .core import (
    JOINT,
    Case,
    Linear,
    Primitive,
    along,
    batch_size,
    error,
    is_constant,
    method_fmt,
    register,
    shape_of,
    shift_axis,
    value_of,
)
from .lazy import dask_array, per_block, whole
from .rearrange import axes_of, flat
from .schema import AXIS, AXIS_OR_NONE, SHAPE, attrs, int_array, need
from .shape_rules import INDEX_OUT, gathered, scan, scattered_along
from .taylor import linear

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

# ---------------------------------------------------------------- argsort


def _argsort_numpy(x, axis=-1):
    return np.argsort(x, axis=axis, kind="stable")


def _argsort(x, axis=-1):
    if dask_array(x) is None:
        return _argsort_numpy(x, axis=axis)
    if axis is None:
        x, axis = np.reshape(x, -1), -1
    return per_block(_argsort_numpy, "(i)->(i)", x, axes=[(axis,), (axis,)], dtypes=np.intp)


ARGSORT = register(Primitive(
    "argsort", _argsort, [None], lambda o, ts, out, x, axis=-1: None,
    method_fmt("argsort", "axis"),
    [Case(((4,),)), Case(((3, 4),), {"axis": 0}), Case(((2, 3, 4),), {"axis": -1})],
    differentiable=False, batch=along("argsort", default=-1, flat=True),
    schema=attrs(shape_rule=scan(INDEX_OUT, -1), axis=AXIS_OR_NONE), saves=()))


# ---------------------------------------------------------------- the gather and its adjoint


def _take_along_axis(x, indices, axis):
    if axis is None or dask_array(x, indices) is None:
        return np.take_along_axis(x, indices, axis=axis)
    return per_block(_take_along_last, "(i),(j)->(j)", x, indices, axes=[(axis,)] * 3,
                     dtypes=np.result_type(x))


def _take_along_last(x, indices):
    return np.take_along_axis(x, indices, axis=-1)


def _scatter_add_along_axis(g, indices, axis, shape):
    if not -len(shape) <= axis < len(shape):
        raise np.exceptions.AxisError(axis, len(shape))
    return whole(_scatter_along_numpy, shape, np.result_type(g), g, indices, axis=axis,
                 shape=shape)


def _scatter_along_numpy(g, indices, axis, shape):
    axis %= len(shape)
    grids = []
    gshape = np.shape(g)
    for d, n in enumerate(shape):
        if d == axis:
            grids.append(indices)
        else:           # a dimension x broadcast (size 1) collects every copy at 0
            step = np.zeros(gshape[d], dtype=np.intp) if n == 1 else np.arange(n)
            grids.append(step.reshape((-1,) + (1,) * (len(shape) - d - 1)))
    out = np.zeros(shape, dtype=np.result_type(g))
    np.add.at(out, tuple(grids), g)
    return out


def _take_fmt(args, attrs, render):
    index = args[1] if len(args) > 1 else render(attrs["indices"], "indices")
    return f"take_along_axis({args[0]}, {index}, axis={attrs['axis']})"


def _scatter_along_fmt(args, attrs, render):
    index = args[1] if len(args) > 1 else render(attrs["indices"], "indices")
    return (f"scatter_add_along_axis({args[0]}, {index}, axis={attrs['axis']}, "
            f"shape={list(attrs['shape'])})")


# Variadic: the indices are input 1 when recorded (an argsort entry), an attribute when constant.
TAKE_ALONG_AXIS = register(Primitive(
    "take_along_axis", _take_along_axis,
    [lambda o, g, out, i, x, indices, axis:
        o.scatter_add_along_axis(g, indices, axis, shape_of(x))],
    lambda o, ts, out, x, indices, axis: None if ts[0] is None else
        o.take_along_axis(ts[0], indices, axis),
    _take_fmt,
    [Case(((4,),), {"indices": np.array([3, 0, 0, 1]), "axis": 0}),
     Case(((3, 2),), {"indices": np.array([[2, 0], [2, 2]]), "axis": 0}),
     Case(((3, 1),), {"indices": np.array([[0, 0, -1]]).T, "axis": 1}),
     Case(((1, 3),), {"indices": np.array([[0, 2], [1, 1]]), "axis": 1})],
     linear=Linear(JOINT, (0,)),
    variadic=True, batch=lambda o, xs, batched, axis, indices=None: o.take_along_axis(
        xs[0] if batched[0] else o.reshape(xs[0], (1,) + shape_of(xs[0])),
        _batch_indices(o, xs, batched, indices),
        shift_axis(axis, "take_along_axis", xs[0], batched[0])),
    taylor=linear("take_along_axis"),
    schema=attrs(shape_rule=gathered, axis=need(AXIS), indices=int_array), saves=(1,)))

SCATTER_ADD_ALONG_AXIS = register(Primitive(
    "scatter_add_along_axis", _scatter_add_along_axis,
    [lambda o, g, out, i, h, indices, axis, shape: o.take_along_axis(g, indices, axis)],
    lambda o, ts, out, h, indices, axis, shape: None if ts[0] is None else
        o.scatter_add_along_axis(ts[0], indices, axis, shape),
    _scatter_along_fmt,
    [Case(((4,),), {"indices": np.array([3, 0, 0, 1]), "axis": 0, "shape": (4,)}),
     Case(((2, 2),), {"indices": np.array([[2, 0], [2, 2]]), "axis": 0, "shape": (3, 2)}),
     Case(((2, 2),), {"indices": np.array([[0, 2], [1, 1]]), "axis": 1, "shape": (1, 3)})],
     linear=Linear(JOINT, (0,)), sized="scatter_along",
    variadic=True, batch=lambda o, xs, batched, axis, shape, indices=None:
        o.scatter_add_along_axis(
            xs[0] if batched[0] else o.expand(xs[0], (batch_size(xs, batched),) +
                                              shape_of(xs[0])),
            _batch_indices(o, xs, batched, indices),
            shift_axis(axis, "scatter_add_along_axis", xs[0], batched[0]),
            (batch_size(xs, batched),) + tuple(shape)),
    taylor=linear("scatter_add_along_axis"),
    schema=attrs(shape_rule=scattered_along, axis=need(AXIS), indices=int_array,
                 shape=need(SHAPE)), saves=(1,)))


def _batch_indices(o: PrimitiveMethods, xs, batched, indices):
    """The indices of a batched gather or scatter: input 1 when recorded, else the attribute;
    shared ones get a leading axis of 1, which broadcasts along the batch."""
    if len(xs) > 1:
        return xs[1] if batched[1] else o.reshape(xs[1], (1,) + shape_of(xs[1]))
    return np.reshape(indices, (1,) + np.shape(indices))


# ---------------------------------------------------------------- Ops methods


class GatherOps:
    """Sorting and gathering as methods of an Ops (numpy's names and signatures)."""

    def argsort(self, x: Any, axis: int | None = -1, name: str | None = None) -> Variable:
        """Indices that sort x along ``axis`` (stable; an integer entry, no gradient)."""
        if axis is not None:
            (axis,) = axes_of(self, "argsort", x, axis)
        return self.apply(ARGSORT, (x,), {"axis": axis}, name)

    def sort(self, x: Any, axis: int | None = -1, name: str | None = None) -> Variable:
        """x sorted along ``axis``: an argsort entry, then take_along_axis with it."""
        if axis is None:
            x, axis = flat(self, x), 0
        return self.take_along_axis(x, self.argsort(x, axis=axis), axis, name=name)

    def take_along_axis(self, x: Any, indices: Any, axis: int | None = -1,
                        name: str | None = None) -> Variable:
        """Entries of x picked by integer ``indices`` along ``axis`` (numpy's take_along_axis)."""
        indices = _indices(self, "take_along_axis", x, indices)
        shape = (int(np.prod(shape_of(x))),) if axis is None else shape_of(x)
        ax = 0 if axis is None else axes_of(self, "take_along_axis", x, axis)[0]
        ishape = shape_of(indices)
        try:
            if len(ishape) != len(shape):
                raise ValueError("indices and x need the same number of dimensions")
            np.broadcast_shapes(shape[:ax] + shape[ax + 1:], ishape[:ax] + ishape[ax + 1:])
        except ValueError as e:
            raise error("take_along_axis", (x, indices), str(e), ShapeError) from None
        _check_bounds(self, "take_along_axis", x, indices, shape[ax])
        if axis is None:
            x = flat(self, x)
        axis = ax
        if is_constant(indices):
            return self.apply(TAKE_ALONG_AXIS, (x,), {"indices": indices, "axis": axis}, name)
        return self.apply(TAKE_ALONG_AXIS, (x, indices), {"axis": axis}, name)

    def scatter_add_along_axis(self, g: Any, indices: Any, axis: int, shape: Sequence[int],
                               name: str | None = None) -> Variable:
        """zeros(shape) with g added at ``indices`` along ``axis`` (take_along_axis's adjoint)."""
        indices = _indices(self, "scatter_add_along_axis", g, indices)
        shape = tuple(int(n) for n in shape)
        if not -len(shape) <= axis < len(shape):
            raise error("scatter_add_along_axis", (g,), f"axis {axis} is out of range "
                              f"for shape {shape}", AxisError)
        axis = int(axis) % len(shape)
        gshape, ishape = shape_of(g), shape_of(indices)
        if len(gshape) != len(shape) or len(ishape) != len(shape) or gshape[axis] != \
                ishape[axis] or np.broadcast_shapes(gshape, ishape) != gshape or any(
                n not in (1, m) for d, (n, m) in enumerate(zip(shape, gshape)) if d != axis):
            raise error("scatter_add_along_axis", (g, indices), f"cannot add values of "
                              f"shape {gshape} at indices of shape {ishape} into {shape}",
                              ShapeError)
        _check_bounds(self, "scatter_add_along_axis", g, indices, shape[axis])
        attrs = {"axis": axis, "shape": shape}
        if is_constant(indices):
            return self.apply(SCATTER_ADD_ALONG_AXIS, (g,), {"indices": indices, **attrs}, name)
        return self.apply(SCATTER_ADD_ALONG_AXIS, (g, indices), attrs, name)

    def take(self, x: Any, indices: Any, axis: int | None = None,
             name: str | None = None) -> Variable:
        """Entries of x at integer ``indices`` along ``axis`` (the flattened x when None)."""
        indices = _indices(self, "take", x, indices)
        n = int(np.prod(shape_of(x))) if axis is None else \
            shape_of(x)[axes_of(self, "take", x, axis)[0]]
        _check_bounds(self, "take", x, indices, n)
        if axis is None:
            x, axis = flat(self, x), 0
        (axis,) = axes_of(self, "take", x, axis)
        if is_constant(indices):
            return self.getitem(x, (slice(None),) * axis + (indices,), name=name)
        # a recorded index: x and the indices shaped so that take_along_axis broadcasts them
        shape, ishape = shape_of(x), shape_of(indices)
        k = max(len(ishape), 1)
        xs = shape[:axis + 1] + (1,) * (k - 1) + shape[axis + 1:]
        idx = (1,) * axis + (ishape or (1,)) + (1,) * (len(shape) - axis - 1)
        out = self.take_along_axis(x if xs == shape else self.reshape(x, xs),
                                   self.reshape(indices, idx), axis,
                                   name=name if ishape else None)
        return out if ishape else self.reshape(out, shape[:axis] + shape[axis + 1:], name=name)


def _indices(ops: PrimitiveMethods, op: str, x: Any, indices: Any) -> Any:
    """Integer indices: a recorded integer entry as it is, a constant as a read-only int64 array."""
    if not is_constant(indices):
        if indices.dtype.kind not in "iu":
            raise error(op, (x, indices), f"indices must be integers, not {indices.dtype}",
                             ArgumentError)
        return indices
    arr = np.asarray(indices)
    if arr.dtype.kind not in "iu":
        raise error(op, (x,), f"indices must be integers, not {arr.dtype}", ArgumentError)
    arr = arr.astype(np.int64)
    arr.setflags(write=False)
    return arr


def _check_bounds(ops: PrimitiveMethods, op: str, x: Any, indices: Any, n: int) -> None:
    """Raise before recording when an index falls outside an axis of length n."""
    values = value_of(indices)
    if np.size(values) and not (-n <= np.min(values) and np.max(values) < n):
        raise error(op, (x,) if is_constant(indices) else (x, indices),
                         f"an index is out of bounds for an axis of size {n}", OutOfBoundsError)


# ---------------------------------------------------------------- Variable methods

class GatherMethods:
    """Variable methods of sorting and gathering (numpy's ndarray names)."""

    __slots__ = ()

    def take(self, indices: Any, axis: int | None = None) -> Variable:
        """Entries at integer ``indices`` along ``axis``."""
        return self.rec.take(self, indices, axis=axis)

    def argsort(self, axis: int | None = -1) -> Variable:
        """Indices that sort along ``axis`` (stable; an integer entry)."""
        return self.rec.argsort(self, axis=axis)

    def sort(self, axis: int | None = -1) -> Variable:
        """A sorted copy along ``axis`` (numpy sorts in place; a Variable is never written)."""
        return self.rec.sort(self, axis=axis)
