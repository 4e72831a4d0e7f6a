"""Shape rules, part one: the dtype functions and the elementwise, reduction and scan families.

A shape rule is ``rule(shapes, dtypes, attrs) -> (shape, dtype)`` (schema.py): a primitive's
output shape and dtype from its inputs' shapes and dtypes and its attributes alone, raising
``ShapeRuleError`` for inputs numpy would refuse. An input's dtype is a numpy dtype, or ``int`` or
``float`` for a Python number: numpy's own resolution (``ufunc.resolve_dtypes``,
``np.result_type``) treats those as NEP 50's weak scalars, as the forward does.

A dtype function maps the inputs' dtypes to the output's (``SAME``, ``BOOL_OUT``, ``ufunc_dtype``
...); a family rule combines one with a shape computation, so most primitives name their rule
in a word (``schema=attrs(shape_rule=ufunc(np.add))``). Shape operations and indexing are in
abstract_arrays.py, linear algebra in abstract_linalg.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .schema import AXES_OR_NONE, BOOL, Schema, ShapeRule, ShapeRuleError, attrs

DtypeFn = Callable[[Sequence[Any]], np.dtype]

INDEX_DTYPE = np.dtype(np.intp)     # argmax, argsort, ...: numpy's index type
FLOAT64 = np.dtype(np.float64)

# ---------------------------------------------------------------- dtypes


def strong(d: Any) -> np.dtype:
    """A dtype as an array of it has: a Python number's default (int64, float64)."""
    return np.dtype(d)


def weak(d: Any) -> Any:
    """What numpy's resolution takes for an input: a dtype, or ``int`` / ``float`` (weak)."""
    return d if d is int or d is float else np.dtype(d)


def resolve(u: np.ufunc, *dtypes: Any) -> np.dtype:
    """The output dtype of ufunc ``u`` on inputs of ``dtypes`` (its loop's, NEP 50)."""
    return u.resolve_dtypes(tuple(weak(d) for d in dtypes) + (None,) * u.nout)[-1]


def promote(*dtypes: Any) -> np.dtype:
    """``np.result_type`` of the dtypes, Python numbers weak."""
    return np.result_type(*(d(0) if d is int or d is float else np.dtype(d) for d in dtypes))


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
