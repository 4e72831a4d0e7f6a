"""The cross product of 3-vectors, a primitive of its own (its einsum would carry the constant
Levi-Civita tensor): its vjp and jvp are crosses again. The recorded entry takes the vectors
along one axis counted from the end of both inputs; ``op.cross`` has numpy's whole signature
(``axisa``, ``axisb``, ``axisc``, ``axis``) and moves other axes into place with recorded
transposes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import AxisError, ShapeError
from .core import (
    EACH_ALONE,
    Case,
    Primitive,
    align,
    error,
    register,
    run,
    shape_of,
    shift_axis,
    unbroadcast,
)
from .lazy import dask_array, per_block
from .schema import AXIS, attrs
from .shape_rules import crossed
from .taylor import multilinear

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

# ---------------------------------------------------------------- the record


def _cross(x, y, axis=-1):
    if dask_array(x, y) is None:
        return np.cross(x, y, axis=axis)
    core = "(i)" if shape_of(x)[axis] == 3 or shape_of(y)[axis] == 3 else "()"
    return per_block(np.cross, f"(i),(i)->{core}", x, y, dtypes=np.result_type(x, y),
                     axes=[(axis,), (axis,)] + ([(axis,)] if core == "(i)" else [()]))


CROSS = register(Primitive(
    "cross", _cross,
    [lambda o, g, out, x, y, axis=-1: unbroadcast(o, o.cross(y, g, axis=axis), shape_of(x)),
     lambda o, g, out, x, y, axis=-1: unbroadcast(o, o.cross(g, x, axis=axis), shape_of(y))],
    lambda o, ts, out, x, y, axis=-1: _cross_jvp(o, ts, out, x, y, axis),
    lambda args, attrs, render: f"cross({args[0]}, {args[1]}" + (
        "" if attrs.get("axis", -1) == -1 else f", axis={attrs['axis']}") + ")",
    [Case(((3,), (3,))), Case(((2, 3), (3,))), Case(((3, 4), (3, 1)), {"axis": -2}),
     Case(((2, 3, 2), (2, 3, 2)), {"axis": -2})], linear=EACH_ALONE,
    batch=lambda o, xs, batched, axis=-1: _batch_cross(o, xs, batched, axis),
    taylor=multilinear("cross"), schema=attrs(shape_rule=crossed, axis=AXIS), saves=("inputs",)))


def _batch_cross(o: PrimitiveMethods, xs, batched, axis):
    """cross of aligned inputs, along the same axis counted from the end."""
    for x, b in zip(xs, batched):       # numpy checks the axis against each input
        shift_axis(axis, "cross", x, b)
    xs = align(o, xs, batched)
    rank = max(len(shape_of(x)) - b for x, b in zip(xs, batched))
    return run(o, "cross", xs, {"axis": axis - rank if axis >= 0 else axis})


def _cross_jvp(o: PrimitiveMethods, ts, out, x, y, axis):
    tx, ty = ts
    parts = [o.cross(tx, y, axis=axis) if tx is not None else None,
             o.cross(x, ty, axis=axis) if ty is not None else None]
    parts = [p for p in parts if p is not None]
    d = parts[0] if len(parts) == 1 else o.add(*parts)
    return d if shape_of(d) == shape_of(out) else o.expand(d, shape_of(out))


# ---------------------------------------------------------------- Ops methods


class CrossOps:
    """The cross product as a method of an Ops (numpy's signature)."""

    def cross(self, x: Any, y: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1,
              axis: int | None = None, name: str | None = None) -> Variable:
        """The cross product of the 3-vectors along ``axisa`` of x and ``axisb`` of y (broadcast),
        placed along ``axisc`` of the result; ``axis`` sets all three (numpy's signature)."""
        if axis is not None:
            axisa = axisb = axisc = axis
        axes = []
        for v, ax, label in ((x, axisa, "axisa"), (y, axisb, "axisb")):
            shape = shape_of(v)
            if isinstance(ax, bool) or not isinstance(ax, (int, np.integer)) or \
                    not -len(shape) <= ax < len(shape):
                raise error("cross", (x, y), f"{label}={ax!r} is out of range for an input of "
                            f"{len(shape)} dimension(s)", AxisError)
            if shape[ax] != 3:
                raise error("cross", (x, y), f"{label}={ax} must hold 3-vectors (numpy's "
                            "2-vectors are deprecated: pad them with a zero)", ShapeError)
            axes.append(int(ax) % len(shape) - len(shape))
        others = [shape_of(v)[:len(shape_of(v)) + a] + shape_of(v)[len(shape_of(v)) + a + 1:]
                  for v, a in zip((x, y), axes)]
        try:
            rank = len(np.broadcast_shapes(*others)) + 1
        except ValueError:
            raise error("cross", (x, y), "the inputs' other axes do not broadcast",
                        ShapeError) from None
        if isinstance(axisc, bool) or not isinstance(axisc, (int, np.integer)) or \
                not -rank <= axisc < rank:
            raise error("cross", (x, y), f"axisc={axisc!r} is out of range for the {rank}-d "
                        "result", AxisError)
        c = int(axisc) % rank - rank
        moved = [v if a == -1 else self.moveaxis(v, a, -1) for v, a in zip((x, y), axes)]
        if axes[0] == axes[1] == c:         # one axis counted from the end: one entry
            return self.apply(CROSS, (x, y), {"axis": c}, name)
        if c == -1:
            return self.apply(CROSS, tuple(moved), {"axis": -1}, name)
        return self.moveaxis(self.apply(CROSS, tuple(moved), {"axis": -1}), -1, c, name=name)
