"""Shape rules: each primitive's output shape and dtype from its inputs' shapes and dtypes and
its attributes alone (its abstract evaluation, as JAX's abstract_eval rules).

A shape rule is ``rule(shapes, dtypes, attrs) -> (shape, dtype)`` (schema.py), raising
``ShapeRuleError`` for inputs numpy would refuse. An input's dtype is a numpy dtype, or ``int`` or
``float`` for a Python number: numpy's own resolution (``ufunc.resolve_dtypes``,
``np.result_type``) treats those as NEP 50's weak scalars, as the forward does.

A dtype function maps the inputs' dtypes to the output's (``SAME``, ``BOOL_OUT``, ``ufunc_dtype``
...); a family rule combines one with a shape computation, so most primitives name their rule
in a word (``schema=attrs(shape_rule=ufunc(np.add))``). The sections: dtypes, shapes, the
family rules (elementwise, reductions, scans), shape operations, indexing (index arrays held as
attributes are read, their shapes and their values checked against the dimension they index,
as numpy raises IndexError, never made), and linear algebra (numpy.linalg computes in float32
when every input is float32, in float64 otherwise, and refuses float16: ``LINALG``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .schema import AXES_OR_NONE, BOOL, Schema, ShapeRule, ShapeRuleError, attrs, is_held_int

DtypeFn = Callable[[Sequence[Any]], np.dtype]

INDEX_DTYPE = np.dtype(np.intp)     # argmax, argsort, ...: numpy's index type
FLOAT64 = np.dtype(np.float64)

# ---------------------------------------------------------------- dtypes


def strong(d: Any) -> np.dtype:
    """A dtype as an array of it has: a Python number's default (int64, float64)."""
    return np.dtype(d)


def weak(d: Any) -> Any:
    """What numpy's resolution takes for an input: a dtype, or ``int`` / ``float`` /
    ``complex`` (weak)."""
    return d if d is int or d is float or d is complex else np.dtype(d)


def resolve(u: np.ufunc, *dtypes: Any) -> np.dtype:
    """The output dtype of ufunc ``u`` on inputs of ``dtypes`` (its loop's, NEP 50)."""
    return u.resolve_dtypes(tuple(weak(d) for d in dtypes) + (None,) * u.nout)[-1]


def promote(*dtypes: Any) -> np.dtype:
    """``np.result_type`` of the dtypes, Python numbers weak."""
    return np.result_type(*(d(0) if d is int or d is float or d is complex else np.dtype(d)
                            for d in dtypes))


def ufunc_dtype(*chain: np.ufunc) -> DtypeFn:
    """The dtype a chain of ufuncs gives: the first on the inputs, each next on the result."""
    def dtype(ds: Sequence[Any]) -> np.dtype:
        d = resolve(chain[0], *ds)
        for u in chain[1:]:
            d = resolve(u, d)
        return d
    return dtype


def SAME(ds: Sequence[Any]) -> np.dtype:  # noqa: N802 (read as a word)
    """The first input's dtype."""
    return strong(ds[0])


def BOOL_OUT(ds: Sequence[Any]) -> np.dtype:  # noqa: N802
    """bool (comparisons, any, all)."""
    return np.dtype(bool)


def INDEX_OUT(ds: Sequence[Any]) -> np.dtype:  # noqa: N802
    """numpy's index type (argmax, argsort, cumargmax)."""
    return INDEX_DTYPE


def FLOAT_OUT(ds: Sequence[Any]) -> np.dtype:  # noqa: N802
    """float64 whatever the inputs (forwards computing in float64)."""
    return FLOAT64


def FLOATING(ds: Sequence[Any]) -> np.dtype:  # noqa: N802
    """A float input's dtype, float64 for any other (erf, np.mean, np.var, np.linalg.norm)."""
    d = strong(ds[0])
    return d if d.kind == "f" else FLOAT64


def ACCUMULATING(ds: Sequence[Any]) -> np.dtype:  # noqa: N802
    """``np.add.reduce``'s: bool and integers narrower than int64 sum in (u)int64."""
    d = strong(ds[0])
    if d.kind == "b" or d.kind == "i" and d.itemsize < 8:
        return np.dtype(np.int64)
    return np.dtype(np.uint64) if d.kind == "u" and d.itemsize < 8 else d


def EXP_SHIFTED(ds: Sequence[Any]) -> np.dtype:  # noqa: N802
    """exp(x - max(x)) (logsumexp, softmax): subtract, then exp (bool refused)."""
    return resolve(np.exp, resolve(np.subtract, ds[0], ds[0]))


def CLIPPED(ds: Sequence[Any]) -> np.dtype:  # noqa: N802
    """np.clip(x, lo, hi)'s: the three promoted together, x made an array first."""
    return promote(strong(ds[0]), ds[1], ds[2])


def RECTIFIED(ds: Sequence[Any]) -> np.dtype:  # noqa: N802
    """np.maximum(x, 0)'s (relu)."""
    return resolve(np.maximum, ds[0], int)


def CHOSEN(ds: Sequence[Any]) -> np.dtype:  # noqa: N802
    """np.where(c, x, y)'s: x's and y's promoted (the condition's any)."""
    return promote(ds[1], ds[2])


def rounded(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """np.round's: integers kept, bool rounded as np.rint rounds it (to 0 decimals only)."""
    d = strong(dtypes[0])
    if d.kind == "b" and attrs.get("decimals", 0):
        raise ShapeRuleError("bool cannot be rounded to a number of decimals")
    return broadcast_shapes(*shapes), d if d.kind in "iu" else resolve(np.rint, d)

# ---------------------------------------------------------------- shapes


def broadcast_shapes(*shapes: tuple) -> tuple:
    """numpy's broadcast shape of ``shapes``, in Python ints (no array is made)."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for k, n in enumerate(s, ndim - len(s)):
            if n != out[k] and out[k] != 1 and n != 1:
                raise ShapeRuleError(f"shapes {', '.join(map(str, shapes))} do not broadcast")
            out[k] = n if out[k] == 1 else out[k]
    return tuple(out)


def axes_of(axis: Any, ndim: int) -> tuple:
    """An axis attribute (None, an int or a tuple) as sorted axes, refusing one out of range
    or repeated."""
    if axis is None:
        return tuple(range(ndim))
    items = (axis,) if not isinstance(axis, tuple) else axis
    out = sorted({int(a) % ndim for a in items}) if ndim else []
    if len(out) != len(items) or any(not -ndim <= a < ndim for a in items):
        raise ShapeRuleError(f"axis {axis} does not fit {ndim} dimension(s)")
    return tuple(out)


def reduced(shape: tuple, axis: Any, keepdims: bool) -> tuple:
    """A reduction's output shape."""
    axes = axes_of(axis, len(shape))
    if keepdims:
        return tuple(1 if k in axes else n for k, n in enumerate(shape))
    return tuple(n for k, n in enumerate(shape) if k not in axes)

# ---------------------------------------------------------------- family rules


def broadcasting(dtype: DtypeFn) -> ShapeRule:
    """Broadcasting primitives: the inputs' broadcast shape, ``dtype`` of their dtypes."""
    def rule(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
        return broadcast_shapes(*shapes), dtype(dtypes)
    return rule


def ufunc(u: np.ufunc, *then: np.ufunc) -> ShapeRule:
    """A ufunc forward (then ``then`` on its result): broadcast, numpy's loop dtype."""
    return broadcasting(ufunc_dtype(u, *then))


def same_shape(dtype: DtypeFn) -> ShapeRule:
    """The first input's shape (flip, roll, softmax, ...)."""
    def rule(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
        return tuple(shapes[0]), dtype(dtypes)
    return rule


def _identity(shape: tuple, axis: Any) -> None:
    """A maximum, a minimum or an argmax over ``axis`` of ``shape``: none of those axes may be
    empty (numpy's reductions without an identity refuse them; a 0-d input has none)."""
    if shape and any(shape[a] == 0 for a in axes_of(axis, len(shape))):
        raise ShapeRuleError(f"a reduction without an identity (a maximum) over an empty axis "
                             f"of shape {shape}")


def reduction(dtype: DtypeFn, default: Any = None, most: int | None = None,
              identity: bool = True) -> ShapeRule:
    """Reductions over ``axis`` (``default`` when absent) with ``keepdims``; ``most``: the
    number of axes a tuple may hold (norm: 1 or 2); without ``identity`` (max, argmax), the
    reduced axes must not be empty."""
    def rule(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
        axis = attrs.get("axis", default)
        if most is not None and isinstance(axis, tuple) and not 1 <= len(axis) <= most:
            raise ShapeRuleError(f"1 to {most} axes, got {axis}")
        if not identity:
            _identity(shapes[0], axis)
        return reduced(shapes[0], axis, bool(attrs.get("keepdims", False))), dtype(dtypes)
    return rule


def scan(dtype: DtypeFn, default: Any = None, flat: bool = True) -> ShapeRule:
    """Scans along ``axis``: the input's shape. With ``flat`` (numpy's cumsum and argsort),
    axis=None scans the flattened input and a 0-d input reads as one entry; without (ufunc
    accumulations: cummax), both are refused but axis=None of a 1-D input."""
    def rule(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
        shape, axis = shapes[0], attrs.get("axis", default)
        if not flat and (not shape or axis is None and len(shape) > 1):
            raise ShapeRuleError(f"an accumulation of an array of shape {shape} needs an axis")
        if not shape:
            return (1,), dtype(dtypes)
        if axis is None:
            return (math.prod(shape),), dtype(dtypes)
        axes_of(axis, len(shape))
        return tuple(shape), dtype(dtypes)
    return rule


def reducing(dtype: DtypeFn, identity: bool = True) -> Schema:
    """The schema of a reduction: ``axis`` (None, an int or a tuple) and ``keepdims``."""
    return attrs(shape_rule=reduction(dtype, identity=identity), axis=AXES_OR_NONE,
                 keepdims=BOOL)

# ---------------------------------------------------------------- shape operations


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
    """cast: the input's shape, the ``dtype`` attribute (a Python number: shape ())."""
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
    dtype = strong(dtypes[0])
    fill = attrs.get("constant_values", 0)
    if type(fill) is int and dtype.kind in "iu":    # numpy's own conversion decides (a
        try:                                         # -1 wraps into uint8, 300 overflows int8)
            np.pad(np.zeros(1, dtype), 1, constant_values=fill)
        except OverflowError as e:
            raise ShapeRuleError(f"np.pad: constant_values {fill}: {e}") from None
    return tuple(n + b + a for n, (b, a) in zip(shapes[0], attrs["pad_width"])), dtype


def repeated(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """repeat: each entry along ``axis`` (of the flattened input for None) ``repeats`` times."""
    shape, r, ax = tuple(shapes[0]), attrs["repeats"], attrs.get("axis")
    if ax is None:
        shape, ax = (math.prod(shape),), 0
    ax = _axis(ax, len(shape))
    n = shape[ax]
    if is_held_int(r):
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
    if dtypes[0] is int or dtypes[0] is float or dtypes[0] is complex:
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


def updated(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """at_set and at_add: x's shape; y must broadcast to what the ``index`` attribute selects."""
    shape, y = tuple(shapes[0]), tuple(shapes[1])
    target = index_shape(shape, attrs["index"])
    if len(y) > len(target) or broadcast_shapes(y, target) != target:
        raise ShapeRuleError(f"values of shape {y} cannot be written at an index selecting "
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
    out = rest[:a] + (idx[a],) + rest[a + 1:]
    if x[a] == 0 and math.prod(out):
        raise ShapeRuleError(f"indices of shape {idx} into axis {a} of an input of shape {x}, "
                             "which is empty: no index is in bounds")
    return out, strong(dtypes[0])


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

# ---------------------------------------------------------------- linear algebra


def LINALG(ds: Sequence[Any]) -> np.dtype:  # noqa: N802 (read as a word)
    """numpy.linalg's dtype: float32 when every input is, float64 otherwise; float16
    refused."""
    out = np.dtype(np.float32)
    for d in map(strong, ds):
        if d == np.float16:
            raise ShapeRuleError("array type float16 is unsupported in linalg")
        out = out if d == np.float32 else FLOAT64
    return out


def _matrices(x: tuple, square: bool = False) -> tuple:
    """A stack of matrices (square ones when ``square``), or ShapeRuleError."""
    x = tuple(x)
    if len(x) < 2 or square and x[-1] != x[-2]:
        kind = "square matrices" if square else "matrices"
        raise ShapeRuleError(f"needs {kind} (at least two dimensions), got shape {x}")
    return x


def square(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """cholesky, inv: square matrices in, the same shape out."""
    return _matrices(shapes[0], square=True), LINALG(dtypes)


def powered(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """matrix_power: square matrices; the input's dtype, numpy.linalg's for n < 0 (inv)."""
    shape = _matrices(shapes[0], square=True)
    if attrs["n"] < 0:
        return shape, LINALG(dtypes)
    d = SAME(dtypes)
    return shape, d if attrs["n"] < 2 else resolve(np.matmul, d, d)


def determinant(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """det, slogdet: one number per square matrix."""
    return _matrices(shapes[0], square=True)[:-2], LINALG(dtypes)


def eigh(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """eigh: n eigenvalues or (n, n) eigenvectors per square matrix."""
    x = _matrices(shapes[0], square=True)
    return (x[:-1] if attrs["part"] == "eigenvalues" else x), LINALG(dtypes)


def pinv(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """pinv: (..., m, n) -> (..., n, m); numpy answers empty matrices in their own dtype."""
    x = _matrices(shapes[0])
    return x[:-2] + (x[-1], x[-2]), SAME(dtypes) if 0 in x[-2:] else LINALG(dtypes)


def qr(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """qr (reduced): Q (..., m, k), R (..., k, n) with k = min(m, n)."""
    x = _matrices(shapes[0])
    m, n = x[-2:]
    k = min(m, n)
    return x[:-2] + ((m, k) if attrs["part"] == "Q" else (k, n)), LINALG(dtypes)


def svd(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """svd (reduced): U (..., m, k), S (..., k), Vh (..., k, n) with k = min(m, n)."""
    x = _matrices(shapes[0])
    m, n = x[-2:]
    k = min(m, n)
    part = {"U": (m, k), "S": (k,), "Vh": (k, n)}[attrs["part"]]
    return x[:-2] + part, LINALG(dtypes)


def solve(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """numpy 2's solve: b is one vector when 1-D, otherwise stacked columns."""
    a, b = _matrices(shapes[0], square=True), tuple(shapes[1])
    if not b or b[-1 if len(b) == 1 else -2] != a[-1]:
        raise ShapeRuleError(f"a right-hand side of shape {b} for matrices of shape {a}")
    if len(b) == 1:
        return a[:-1], LINALG(dtypes)
    return broadcast_shapes(a[:-2], b[:-2]) + b[-2:], LINALG(dtypes)


def lstsq(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """lstsq of one (m, n) matrix and b of shape (m,) or (m, k): (n,) or (n, k)."""
    a, b = tuple(shapes[0]), tuple(shapes[1])
    if len(a) != 2 or len(b) not in (1, 2) or a[0] != b[0]:
        raise ShapeRuleError(f"lstsq needs a (m, n) matrix and b of (m,) or (m, k), got {a}, {b}")
    return (a[1],) + b[1:], LINALG(dtypes)


def matmul(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """numpy's matmul: stacked matrices, a 1-D operand read as a vector."""
    a, b = tuple(shapes[0]), tuple(shapes[1])
    if not a or not b:
        raise ShapeRuleError("matmul needs inputs of at least one dimension")
    a2, b2 = (1,) + a if len(a) == 1 else a, b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ShapeRuleError(f"shapes {a} and {b} do not multiply")
    out = broadcast_shapes(a2[:-2], b2[:-2]) + (a2[-2:-1] if len(a) > 1 else ()) + \
        (b2[-1:] if len(b) > 1 else ())
    return out, resolve(np.matmul, *(strong(d) for d in dtypes))


def einsum(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """einsum with explicit subscripts: the output letters' sizes (a size 1 broadcasts
    across operands; a letter repeated in one term needs one size)."""
    lhs, out = attrs["subscripts"].split("->")
    sizes: dict = {}
    for term, shape in zip(lhs.split(","), shapes):
        own: dict = {}
        for c, n in zip(term, shape):
            if own.setdefault(c, n) != n:
                raise ShapeRuleError(f"the letter {c!r} has sizes {own[c]} and {n} in one operand")
            sizes[c] = max(sizes.get(c, n), n)
    return tuple(sizes[c] for c in out), promote(*(strong(d) for d in dtypes))
