"""Shape rules, part two: shape operations, indexing, gathers and scatters (abstract.py says
what a shape rule is). Index arrays held as attributes are read (their shapes, and their values
checked against the dimension they index, as numpy raises IndexError), never made.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .abstract import broadcast_shapes, promote, resolve, strong
from .schema import ShapeRuleError, is_int


def _axis(a: int, ndim: int) -> int:
    if not -ndim <= a < ndim:
        raise ShapeRuleError(f"axis {a} is out of bounds for {ndim} dimension(s)")
    return int(a) % ndim


def expanded(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """expand (np.broadcast_to): the ``shape`` attribute, which the input must broadcast to."""
    x, shape = tuple(shapes[0]), tuple(attrs["shape"])
    if len(x) > len(shape) or broadcast_shapes(x, shape) != shape:
        raise ShapeRuleError(f"an input of shape {x} cannot be broadcast to {shape}")
    return shape, strong(dtypes[0])


def reshaped(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """reshape: the ``shape`` attribute, one -1 inferred; as many elements as the input."""
    size, shape = math.prod(shapes[0]), tuple(attrs["shape"])
    known = math.prod(n for n in shape if n != -1)
    if -1 in shape:
        if known == 0 or size % known:
            raise ShapeRuleError(f"cannot reshape {size} elements into {shape}")
        shape = tuple(size // known if n == -1 else n for n in shape)
    if math.prod(shape) != size:
        raise ShapeRuleError(f"cannot reshape {size} elements into {shape}")
    return shape, strong(dtypes[0])


def transposed(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """transpose: the axes permuted (reversed when ``axes`` is None)."""
    x, axes = shapes[0], attrs.get("axes")
    if axes is None:
        return tuple(reversed(x)), strong(dtypes[0])
    order = [_axis(a, len(x)) for a in axes]
    if len(axes) != len(x) or len(set(order)) != len(order):
        raise ShapeRuleError(f"axes {axes} are not a permutation of {len(x)} dimension(s)")
    return tuple(x[a] for a in order), strong(dtypes[0])


def joined(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """concatenate: equal shapes off ``axis`` (flattened inputs for None); Python numbers are
    weak, as in np.concatenate."""
    dtype = promote(*dtypes)
    axis = attrs.get("axis", 0)
    if axis is None:
        return (sum(math.prod(s) for s in shapes),), dtype
    first = shapes[0]
    if not first:
        raise ShapeRuleError("zero-dimensional inputs cannot be concatenated")
    a = _axis(axis, len(first))
    for s in shapes[1:]:
        if len(s) != len(first) or s[:a] + s[a + 1:] != first[:a] + first[a + 1:]:
            raise ShapeRuleError(f"shapes {', '.join(map(str, shapes))} differ off axis {axis}")
    return first[:a] + (sum(s[a] for s in shapes),) + first[a + 1:], dtype


def stacked(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """stack: equal shapes, a new axis of len(inputs) at ``axis``."""
    first = tuple(shapes[0])
    if any(tuple(s) != first for s in shapes):
        raise ShapeRuleError(f"shapes {', '.join(map(str, shapes))} differ")
    a = _axis(attrs.get("axis", 0), len(first) + 1)
    return first[:a] + (len(shapes),) + first[a:], promote(*(strong(d) for d in dtypes))


def cast(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """cast: the input's shape, the ``dtype`` attribute (of an array: ``x.astype``)."""
    if dtypes[0] is int or dtypes[0] is float:
        raise ShapeRuleError("cast takes an array or a numpy scalar, not a Python number")
    return tuple(shapes[0]), attrs["dtype"]


def rolled(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """roll: the input's shape (at least one dimension); ``shift`` and ``axis`` pair up (one
    of them may be one long)."""
    shift, axis = attrs["shift"], attrs["axis"]
    if not shapes[0]:
        raise ShapeRuleError("np.roll along axes takes an array of at least one dimension")
    if len(shift) != len(axis) and 1 not in (len(shift), len(axis)):
        raise ShapeRuleError(f"shift {shift} and axis {axis} do not pair up")
    for a in axis:
        _axis(a, len(shapes[0]))
    return tuple(shapes[0]), strong(dtypes[0])


def padded(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """pad: each dimension (at least one) widened by its (before, after)."""
    if not shapes[0]:
        raise ShapeRuleError("np.pad takes an array of at least one dimension")
    return tuple(n + b + a for n, (b, a) in zip(shapes[0], attrs["pad_width"])), \
        strong(dtypes[0])


def repeated(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """repeat: each entry along ``axis`` (of the flattened input for None) ``repeats`` times."""
    shape, r, ax = tuple(shapes[0]), attrs["repeats"], attrs.get("axis")
    if ax is None:
        shape, ax = (math.prod(shape),), 0
    ax = _axis(ax, len(shape))
    n = shape[ax]
    if is_int(r):
        total = r * n
    elif len(r) == n:
        total = sum(r)
    elif len(r) == 1:
        total = r[0] * n
    else:
        raise ShapeRuleError(f"{len(r)} repeats for {n} entries")
    return shape[:ax] + (total,) + shape[ax + 1:], strong(dtypes[0])


def tiled(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """tile: shape and reps padded with leading ones to one length, then multiplied."""
    shape, reps = tuple(shapes[0]), tuple(attrs["reps"])
    d = max(len(shape), len(reps))
    shape, reps = (1,) * (d - len(shape)) + shape, (1,) * (d - len(reps)) + reps
    return tuple(n * r for n, r in zip(shape, reps)), strong(dtypes[0])


def diagonal(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """diagonal: axis1 and axis2 dropped, the diagonal's length appended."""
    x, k = shapes[0], attrs.get("offset", 0)
    if not -2**31 <= k < 2**31:
        raise ShapeRuleError(f"offset {k} does not fit numpy's C int")
    if len(x) < 2:
        raise ShapeRuleError(f"diagonal needs two dimensions, got shape {x}")
    a1, a2 = _axis(attrs.get("axis1", 0), len(x)), _axis(attrs.get("axis2", 1), len(x))
    if a1 == a2:
        raise ShapeRuleError("axis1 and axis2 are the same axis")
    n = max(0, min(x[a1], x[a2] - k) if k >= 0 else min(x[a1] + k, x[a2]))
    return tuple(m for i, m in enumerate(x) if i not in (a1, a2)) + (n,), strong(dtypes[0])


def triangle(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """tril, triu: the input's shape (a 1-D input makes an (n, n) matrix, as numpy's)."""
    x = tuple(shapes[0])
    if not x:
        raise ShapeRuleError("tril and triu need at least one dimension")
    return (x * 2 if len(x) == 1 else x), strong(dtypes[0])


def crossed(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """np.cross along ``axis`` of both inputs and of the output."""
    axis = attrs.get("axis", -1)
    moved = []
    for s in shapes:
        if not s:
            raise ShapeRuleError("cross needs inputs of at least one dimension")
        a = _axis(axis, len(s))
        moved.append(s[:a] + s[a + 1:] + s[a:a + 1])
    (x, y) = moved
    if x[-1] not in (2, 3) or y[-1] not in (2, 3):
        raise ShapeRuleError(f"cross needs vectors of 2 or 3 entries, got {x[-1]} and {y[-1]}")
    product = resolve(np.multiply, *(strong(d) for d in dtypes))
    dtype = resolve(np.subtract, product, product)
    rest = broadcast_shapes(x[:-1], y[:-1])
    if 3 in (x[-1], y[-1]):
        out = rest + (3,)
        a = _axis(axis, len(out))
        return out[:a] + (3,) + out[a:-1], dtype
    return rest, dtype              # two 2-vectors: one number each

# ---------------------------------------------------------------- indexing


def _in_range(values: Any, n: int, what: str) -> None:
    """Integer indices (an int or an int array) must lie in [-n, n)."""
    arr = np.asarray(values)
    if arr.size and not (-n <= arr.min() and arr.max() < n):
        raise ShapeRuleError(f"{what} out of range for a dimension of {n}")


def index_shape(shape: tuple, index: tuple) -> tuple:
    """The shape of ``x[index]`` for x of ``shape`` (numpy's basic and advanced indexing)."""
    def is_mask(i: Any) -> bool:
        return isinstance(i, np.ndarray) and i.dtype == bool

    taken = sum(i.ndim if is_mask(i) else 0 if i is None or i is Ellipsis else 1 for i in index)
    if taken > len(shape):
        raise ShapeRuleError(f"{taken} indices for an input of {len(shape)} dimension(s)")
    items: list = []
    for i in index:
        items.extend([slice(None)] * (len(shape) - taken) if i is Ellipsis else [i])
    if not any(i is Ellipsis for i in index):
        items.extend([slice(None)] * (len(shape) - taken))
    arrays = any(isinstance(i, np.ndarray) for i in items)
    pieces: list = []           # a dimension's size, or None where the advanced result goes
    advanced, where, ranges, d = [], [], [], 0
    for k, i in enumerate(items):
        if i is None:
            pieces.append(1)
        elif isinstance(i, slice):
            pieces.append(len(range(*i.indices(shape[d]))))
            d += 1
        elif is_mask(i):
            if i.shape != tuple(shape[d:d + i.ndim]):
                raise ShapeRuleError(f"a mask of shape {i.shape} for dimensions {shape[d:]}")
            advanced.append((int(np.count_nonzero(i)),))
            where.append(k)
            d += i.ndim
        else:
            ranges.append((i, shape[d]))
            d += 1
            if arrays:
                advanced.append(np.shape(i))
                where.append(k)
    block = broadcast_shapes(*advanced)
    for i, n in ranges:     # numpy checks every int, and an array's entries if it reads any
        if not isinstance(i, np.ndarray) or math.prod(block):
            _in_range(i, n, "index")
    if not advanced:
        return tuple(pieces)
    if where != list(range(where[0], where[0] + len(where))):
        return block + tuple(pieces)        # advanced indices apart: their result goes first
    first = sum(1 for k, i in enumerate(items) if k < where[0] and
                (i is None or isinstance(i, slice)))
    return tuple(pieces[:first]) + block + tuple(pieces[first:])


def indexed(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """getitem: numpy's indexing of the input (an array) by the ``index`` attribute."""
    if dtypes[0] is int or dtypes[0] is float:
        raise ShapeRuleError("a Python number cannot be indexed")
    return index_shape(tuple(shapes[0]), attrs["index"]), strong(dtypes[0])


def scattered(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """scatter_add: zeros of the ``shape`` attribute, each input added at its index (it must
    broadcast to what that index selects)."""
    shape = tuple(attrs["shape"])
    for g, index in zip(shapes, attrs["indices"]):
        target = index_shape(shape, index)
        if len(g) > len(target) or broadcast_shapes(g, target) != target:
            raise ShapeRuleError(f"an input of shape {g} cannot be added at an index selecting "
                           f"{target}")
    return shape, promote(*dtypes)


def _gather_indices(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """The indices' shape (input 1 when recorded, else the attribute), values checked."""
    if len(shapes) > 2:
        raise ShapeRuleError(f"{len(shapes)} inputs: the input and the indices at most")
    if len(shapes) > 1:
        if strong(dtypes[1]).kind not in "iu":
            raise ShapeRuleError(f"indices must be integers, got {strong(dtypes[1])}")
        return tuple(shapes[1]), None
    if "indices" not in attrs:
        raise ShapeRuleError("the indices are neither an input nor an attribute")
    return np.shape(attrs["indices"]), attrs["indices"]


def gathered(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """take_along_axis: the indices broadcast against the input off ``axis``."""
    x = tuple(shapes[0])
    idx, values = _gather_indices(shapes, dtypes, attrs)
    if len(idx) != len(x) or not x:
        raise ShapeRuleError(f"indices of shape {idx} for an input of shape {x}")
    a = _axis(attrs["axis"], len(x))
    if values is not None:
        _in_range(values, x[a], "take_along_axis index")
    rest = broadcast_shapes(x[:a] + (1,) + x[a + 1:], idx[:a] + (1,) + idx[a + 1:])
    return rest[:a] + (idx[a],) + rest[a + 1:], strong(dtypes[0])


def scattered_along(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """scatter_add_along_axis: zeros of the ``shape`` attribute, the input added along
    ``axis`` at the indices (the grid they make must take the input's shape)."""
    g, shape = tuple(shapes[0]), tuple(attrs["shape"])
    idx, values = _gather_indices(shapes, dtypes, attrs)
    a = _axis(attrs["axis"], len(shape))
    if len(g) != len(shape):
        raise ShapeRuleError(f"an input of shape {g} for an output of shape {shape}")
    if values is not None:
        _in_range(values, shape[a], "scatter_add_along_axis index")
    grids = [idx if d == a else ((g[d] if n == 1 else n),) + (1,) * (len(shape) - d - 1)
             for d, n in enumerate(shape)]
    target = broadcast_shapes(*grids)
    if len(g) > len(target) or broadcast_shapes(g, target) != target:
        raise ShapeRuleError(f"an input of shape {g} for indices selecting {target}")
    return shape, strong(dtypes[0])
