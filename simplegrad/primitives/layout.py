"""Layout: numpy's re-arrangements of entries that are primitives of their own (those that
are a shape primitive in disguise: rearrange.py; sorting and gathering: gather.py).

They come in adjoint pairs: ``flip`` is its own vjp, ``roll`` rolls back, ``pad`` is undone by
a slice, ``repeat`` and ``tile`` sum over their copies. flip, roll and pad carry the
structural-zero masks of ``where`` to their input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, ShapeError
from .core import (
    JOINT,
    JOINTLY,
    Case,
    Linear,
    Primitive,
    along,
    error,
    full_mask,
    register,
    run,
    shape_of,
    shift_axis,
)
from .lazy import dask_array
from .rearrange import axes_of, flat
from .schema import (
    AXES,
    AXIS_OR_NONE,
    COUNTS,
    PAD_WIDTH,
    REAL,
    attrs,
    ints,
    need,
)
from .shape_rules import SAME, padded, repeated, rolled, same_shape, tiled
from .taylor import linear

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

# ---------------------------------------------------------------- flip and roll


def _flip(x, axis=None):
    return np.flip(x, axis=axis)


def _axis_text(axis: tuple) -> str:
    return str(axis[0]) if len(axis) == 1 else str(axis)


FLIP = register(Primitive(
    "flip", _flip,
    [lambda o, g, out, x, axis: o.flip(g, axis)],
    lambda o, ts, out, x, axis: o.flip(ts[0], axis),
    lambda args, attrs, render: f"flip({args[0]}, axis={_axis_text(attrs['axis'])})",
    [Case(((3,),), {"axis": (0,)}), Case(((3, 4),), {"axis": (1,)}),
     Case(((2, 3, 4),), {"axis": (0, 2)})], linear=JOINTLY,
    mask=lambda o, m, i, out, x, axis:
        None if m is None else o.flip(full_mask(o, m, shape_of(out)), axis),
    batch=along("flip"), taylor=linear("flip"),
    schema=attrs(shape_rule=same_shape(SAME), axis=need(AXES)), saves=()))


def _roll(x, shift, axis=None):
    return np.roll(x, shift, axis=axis)


def _roll_back(shift: tuple) -> tuple:
    return tuple(-s for s in shift)


ROLL = register(Primitive(
    "roll", _roll,
    [lambda o, g, out, x, shift, axis: o.roll(g, _roll_back(shift), axis)],
    lambda o, ts, out, x, shift, axis: o.roll(ts[0], shift, axis),
    lambda args, attrs, render: f"roll({args[0]}, {_axis_text(attrs['shift'])}, "
                                f"axis={_axis_text(attrs['axis'])})",
    [Case(((4,),), {"shift": (1,), "axis": (0,)}), Case(((3, 4),), {"shift": (-1,), "axis": (1,)}),
     Case(((2, 3, 4),), {"shift": (1, 5), "axis": (0, 2)})], linear=JOINTLY,
    mask=lambda o, m, i, out, x, shift, axis:
        None if m is None else o.roll(full_mask(o, m, shape_of(out)), _roll_back(shift), axis),
    batch=lambda o, xs, batched, shift, axis=None: _batch_roll(o, xs[0], shift, axis),
    taylor=linear("roll"),
    schema=attrs(shape_rule=rolled, shift=need(ints()), axis=need(AXES)), saves=()))


def _batch_roll(o: PrimitiveMethods, x, shift, axis):
    """roll past the batch axis; with no axis each example is rolled flat, then reshaped."""
    s = shape_of(x)
    if axis is not None:
        return run(o, "roll", [x], {"shift": shift, "axis": shift_axis(axis, "roll", x)})
    flat = run(o, "roll", [o.reshape(x, (s[0], -1))], {"shift": shift, "axis": 1})
    return o.reshape(flat, s)

# ---------------------------------------------------------------- pad, repeat, tile


def _pad(x, pad_width, mode="constant", constant_values=0.0):
    return np.pad(x, pad_width, constant_values=constant_values)


def _unpad(pad_width: tuple, shape: tuple) -> tuple:
    """The index that takes a padded array back to the original."""
    return tuple(slice(b, b + n) for (b, _), n in zip(pad_width, shape))


def _pad_fmt(args, attrs, render):
    value = attrs.get("constant_values", 0.0)
    extra = f", constant_values={value!r}" if value else ""
    return f"pad({args[0]}, {[list(p) for p in attrs['pad_width']]}{extra})"


def _zero_padded(attrs: dict) -> bool:
    """pad is linear only when it pads with zeros."""
    return attrs.get("constant_values", 0.0) == 0


PAD = register(Primitive(
    "pad", _pad,
    [lambda o, g, out, x, pad_width, constant_values=0.0:
        o.getitem(g, _unpad(pad_width, shape_of(x)))],
    lambda o, ts, out, x, pad_width, constant_values=0.0: o.pad(ts[0], pad_width),
    _pad_fmt,
    [Case(((3,),), {"pad_width": ((1, 2),)}),
     Case(((2, 3),), {"pad_width": ((0, 1), (2, 0)), "constant_values": 1.5})],
    linear=Linear(JOINT, when=_zero_padded),
    mask=lambda o, m, i, out, x, pad_width, constant_values=0.0: None if m is None else
        o.getitem(full_mask(o, m, shape_of(out)), _unpad(pad_width, shape_of(x))),
    batch=lambda o, xs, batched, pad_width, **attrs: run(
        o, "pad", xs, {"pad_width": ((0, 0),) + tuple(pad_width), **attrs}),
    taylor=linear("pad"),
    schema=attrs(shape_rule=padded, pad_width=need(PAD_WIDTH), constant_values=REAL), saves=()))


def _repeat(x, repeats, axis=None):
    if isinstance(repeats, int) or dask_array(x) is None:
        return np.repeat(x, repeats, axis=axis)
    if axis is None:                    # dask repeats by an int only: gather the copies
        x, axis = np.reshape(x, -1), 0
    source = np.repeat(np.arange(shape_of(x)[axis]), repeats)
    return x[(slice(None),) * (axis % len(shape_of(x))) + (source,)]


def _repeat_vjp(o: PrimitiveMethods, g, out, x, repeats, axis):
    shape = shape_of(x)
    if isinstance(repeats, int):        # (..., n * r, ...) -> (..., n, r, ...), sum the copies
        copies = shape[:axis] + (shape[axis], repeats) + shape[axis + 1:]
        return o.sum(o.reshape(g, copies), axis=axis + 1)
    source = np.repeat(np.arange(shape[axis]), repeats)     # which entry each copy came from
    return o.scatter_add([g], [(slice(None),) * axis + (source,)], shape)


REPEAT = register(Primitive(
    "repeat", _repeat, [_repeat_vjp],
    lambda o, ts, out, x, repeats, axis: o.repeat(ts[0], repeats, axis=axis),
    lambda args, attrs, render: f"{args[0]}.repeat({attrs['repeats']!r}, axis={attrs['axis']})",
    [Case(((3,),), {"repeats": 2, "axis": 0}), Case(((2, 3),), {"repeats": 3, "axis": 1}),
     Case(((3, 2),), {"repeats": (1, 0, 2), "axis": 0})],
     linear=JOINTLY, batch=along("repeat", flat=True),
    taylor=linear("repeat"),
    schema=attrs(shape_rule=repeated, repeats=need(COUNTS), axis=need(AXIS_OR_NONE)), saves=()))


def _tile(x, reps):
    return np.tile(x, reps)


def _tile_vjp(o: PrimitiveMethods, g, out, x, reps):
    shape = shape_of(x)
    full = (1,) * (len(reps) - len(shape)) + shape
    copies = tuple(n for pair in zip(reps, full) for n in pair)     # (r0, n0, r1, n1, ...)
    summed = tuple(range(0, 2 * len(reps), 2))
    d = o.sum(o.reshape(g, copies), axis=summed[0] if len(summed) == 1 else summed)
    return d if full == shape else o.reshape(d, shape)


TILE = register(Primitive(
    "tile", _tile, [_tile_vjp],
    lambda o, ts, out, x, reps: o.tile(ts[0], reps),
    lambda args, attrs, render: f"tile({args[0]}, {list(attrs['reps'])})",
    [Case(((3,),), {"reps": (2,)}), Case(((2, 3),), {"reps": (2, 1)}),
     Case(((3,),), {"reps": (2, 2)}), Case(((1, 2),), {"reps": (3, 1)})], linear=JOINTLY,
    batch=lambda o, xs, batched, reps: _batch_tile(o, xs[0], reps),
    taylor=linear("tile"), schema=attrs(shape_rule=tiled, reps=need(ints(lo=0))), saves=()))


def _batch_tile(o: PrimitiveMethods, x, reps):
    """tile with reps and the example brought to one rank, and 1 for the batch axis."""
    s = shape_of(x)
    nd, reps = len(s) - 1, tuple(reps)
    if len(reps) > nd:
        x = o.reshape(x, s[:1] + (1,) * (len(reps) - nd) + s[1:])
    return run(o, "tile", [x], {"reps": (1,) * (max(nd - len(reps), 0) + 1) + reps})

# ---------------------------------------------------------------- Ops methods


class LayoutOps:
    """The layout operations as methods of an Ops (numpy's names and signatures)."""

    def flip(self, x: Any, axis: Any = None, name: str | None = None) -> Variable:
        """x with the order of entries reversed along ``axis`` (every axis when None)."""
        return self.apply(FLIP, (x,), {"axis": axes_of(self, "flip", x, axis)}, name)

    def roll(self, x: Any, shift: Any, axis: Any = None, name: str | None = None) -> Variable:
        """x with entries shifted by ``shift`` along ``axis``, wrapping around."""
        if axis is None:
            if not isinstance(shift, (int, np.integer)):
                raise error("roll", (x,), "axis=None needs an int shift", ArgumentError)
            if len(shape_of(x)) != 1:
                rolled = self.roll(self.ravel(x), shift, 0)
                return self.reshape(rolled, shape_of(x), name=name)
            axis = 0
        shifts, axes = (np.atleast_1d(np.asarray(v)) for v in (shift, axis))
        if shifts.dtype.kind not in "iu" or shifts.ndim > 1 or len(shifts) not in (1, len(axes)):
            raise error("roll", (x,), f"shift {shift!r} must be an int or one int per axis",
                              ArgumentError)
        axes = axes_of(self, "roll", x, tuple(int(a) for a in axes), repeats=True)
        shifts = tuple(int(s) for s in np.broadcast_to(shifts, (len(axes),)))
        return self.apply(ROLL, (x,), {"shift": shifts, "axis": axes}, name)

    def pad(self, x: Any, pad_width: Any, mode: str = "constant", constant_values: float = 0.0,
            name: str | None = None) -> Variable:
        """x with ``pad_width`` entries of ``constant_values`` added before and after each axis."""
        if mode != "constant" or np.ndim(constant_values) != 0:
            raise error("pad", (x,), "only mode='constant' with one number is supported",
                              ArgumentError)
        nd = len(shape_of(x))
        try:
            widths = np.broadcast_to(np.asarray(pad_width), (nd, 2))
        except ValueError:
            raise error("pad", (x,), f"pad_width {pad_width!r} does not fit {nd} axes",
                              ShapeError) from None
        if widths.dtype.kind not in "iu" or np.any(widths < 0):
            raise error("pad", (x,), "pad_width must hold non-negative ints", ArgumentError)
        widths = tuple((int(b), int(a)) for b, a in widths)
        return self.apply(PAD, (x,), {"pad_width": widths,
                                       "constant_values": float(constant_values)}, name)

    def repeat(self, x: Any, repeats: Any, axis: int | None = None,
               name: str | None = None) -> Variable:
        """Each entry repeated ``repeats`` times along ``axis`` (flattened first when None)."""
        ax = None if axis is None else axes_of(self, "repeat", x, axis)[0]
        reps = np.asarray(repeats)
        n = int(np.prod(shape_of(x))) if ax is None else shape_of(x)[ax]
        if reps.dtype.kind not in "iu" or reps.ndim > 1 or np.any(reps < 0) or (
                reps.ndim == 1 and len(reps) not in (1, n)):
            raise error("repeat", (x,), f"repeats must be a non-negative int or {n} of "
                              "them", ArgumentError)
        reps = int(reps.flat[0]) if reps.size == 1 else tuple(int(r) for r in reps)
        if ax is None:
            x, ax = flat(self, x), 0
        return self.apply(REPEAT, (x,), {"repeats": reps, "axis": ax}, name)

    def tile(self, x: Any, reps: Any, name: str | None = None) -> Variable:
        """x repeated as a block ``reps`` times along each axis."""
        reps = np.atleast_1d(np.asarray(reps))
        if reps.dtype.kind not in "iu" or reps.ndim != 1 or np.any(reps < 0):
            raise error("tile", (x,), "reps must be non-negative ints", ArgumentError)
        nd = len(shape_of(x))
        reps = (1,) * (nd - len(reps)) + tuple(int(r) for r in reps)
        return self.apply(TILE, (x,), {"reps": reps}, name)


# ---------------------------------------------------------------- Variable methods

class LayoutMethods:
    """Variable methods of the layout primitives (numpy's ndarray names)."""

    __slots__ = ()

    def repeat(self, repeats: Any, axis: int | None = None) -> Variable:
        """Each entry repeated along ``axis``."""
        return self.rec.repeat(self, repeats, axis=axis)
