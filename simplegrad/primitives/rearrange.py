"""numpy's re-arrangements that are a shape primitive in disguise: each records that
primitive, whose trace line says the same thing in the engine's own words.

``squeeze``, ``expand_dims``, ``ravel`` and ``flatten`` record ``reshape``; ``moveaxis`` and
``swapaxes`` ``transpose``; ``broadcast_to`` ``expand``; ``split`` and ``array_split`` one
indexing entry per part; ``hstack``, ``vstack``, ``row_stack`` and ``column_stack``
``concatenate`` (given one array, numpy joins its rows: a reshape or a transpose). So they
carry the structural-zero masks of ``where`` to their input as those primitives do.
``axes_of`` checks an axis argument as every re-arrangement does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, AxisError, ShapeError
from .core import error, is_constant, shape_of

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

# ---------------------------------------------------------------- Ops methods


class RearrangeOps:
    """The re-arrangements recorded as shape primitives, as methods of an Ops."""

    def squeeze(self, x: Any, axis: Any = None, name: str | None = None) -> Variable:
        """x without the size-1 axes named by ``axis`` (all of them when None)."""
        shape = shape_of(x)
        axes = tuple(i for i, n in enumerate(shape) if n == 1) if axis is None else \
            axes_of(self, "squeeze", x, axis)
        if any(shape[a] != 1 for a in axes):
            raise error("squeeze", (x,), f"axis {axis} does not have size 1", ShapeError)
        return self.reshape(x, tuple(n for i, n in enumerate(shape) if i not in axes), name=name)

    def expand_dims(self, x: Any, axis: Any, name: str | None = None) -> Variable:
        """x with new size-1 axes at the positions ``axis`` of the result."""
        shape = shape_of(x)
        count = 1 if isinstance(axis, (int, np.integer)) else len(tuple(axis))
        nd = len(shape) + count
        axes = []
        for a in (axis,) if count == 1 and isinstance(axis, (int, np.integer)) else tuple(axis):
            if not isinstance(a, (int, np.integer)) or not -nd <= a < nd:
                raise error("expand_dims", (x,), f"axis {a} is out of range for the "
                                  f"{nd}-d result", AxisError)
            axes.append(int(a) % nd)
        if len(set(axes)) != len(axes):
            raise error("expand_dims", (x,), f"repeated axis in {axis}", ArgumentError)
        it = iter(shape)
        return self.reshape(x, tuple(1 if i in axes else next(it) for i in range(nd)), name=name)

    def moveaxis(self, x: Any, source: Any, destination: Any,
                 name: str | None = None) -> Variable:
        """x with axes ``source`` moved to positions ``destination`` (a transpose)."""
        src = axes_of(self, "moveaxis", x, source, keep_order=True)
        dst = axes_of(self, "moveaxis", x, destination, keep_order=True)
        if len(src) != len(dst):
            raise error("moveaxis", (x,), "source and destination need as many axes",
                              ArgumentError)
        perm = [i for i in range(len(shape_of(x))) if i not in src]
        for d, s in sorted(zip(dst, src)):
            perm.insert(d, s)
        return self.transpose(x, tuple(perm), name=name)

    def swapaxes(self, x: Any, axis1: int, axis2: int, name: str | None = None) -> Variable:
        """x with two axes exchanged (a transpose)."""
        (a,), (b,) = axes_of(self, "swapaxes", x, axis1), axes_of(self, "swapaxes", x, axis2)
        perm = list(range(len(shape_of(x))))
        perm[a], perm[b] = b, a
        return self.transpose(x, tuple(perm), name=name)

    def ravel(self, x: Any, name: str | None = None) -> Variable:
        """x as a 1-D array (a reshape)."""
        return self.reshape(x, (int(np.prod(shape_of(x))),), name=name)

    def flatten(self, x: Any, name: str | None = None) -> Variable:
        """x as a 1-D array (a reshape; Variables are never written into, so no copy is needed)."""
        return self.ravel(x, name=name)

    def broadcast_to(self, x: Any, shape: Sequence[int], name: str | None = None) -> Variable:
        """x broadcast to ``shape`` (records expand)."""
        return self.expand(x, shape, name=name)

    def array_split(self, x: Any, indices_or_sections: Any, axis: int = 0) -> list[Variable]:
        """x cut along ``axis`` into that many near-equal parts, or at those indices."""
        return self._parts("array_split", x, indices_or_sections, axis)

    def _parts(self, op: str, x: Any, indices_or_sections: Any, axis: int) -> list[Variable]:
        (ax,) = axes_of(self, op, x, axis)
        n = shape_of(x)[ax]
        if isinstance(indices_or_sections, (int, np.integer)):
            parts = int(indices_or_sections)
            if parts <= 0:
                raise error(op, (x,), "the number of sections must be > 0",
                                  ArgumentError)
            each, extra = divmod(n, parts)
            sizes = [each + 1] * extra + [each] * (parts - extra)
            bounds = list(np.cumsum([0] + sizes))
        else:
            bounds = [0] + [int(i) for i in indices_or_sections] + [n]
        return [self.getitem(x, (slice(None),) * ax + (slice(a, max(a, b)),))
                for a, b in zip(bounds[:-1], bounds[1:])]

    def split(self, x: Any, indices_or_sections: Any, axis: int = 0) -> list[Variable]:
        """x cut along ``axis`` into that many equal parts, or at those indices."""
        if isinstance(indices_or_sections, (int, np.integer)):
            (ax,) = axes_of(self, "split", x, axis)
            if indices_or_sections <= 0 or shape_of(x)[ax] % indices_or_sections:
                raise error("split", (x,), f"{indices_or_sections} sections do not divide "
                                  f"axis {axis} equally; use array_split", ShapeError)
        return self._parts("split", x, indices_or_sections, axis)

    def hstack(self, xs: Sequence[Any], name: str | None = None) -> Variable:
        """Arrays joined along axis 1 (axis 0 for vectors; numbers count as vectors); one array
        is read as the sequence of its rows, as numpy does."""
        if _one_array(xs):
            s = shape_of(xs)
            if len(s) <= 2:                     # rows are numbers or vectors: one long vector
                return self.reshape(xs, (int(np.prod(s)),), name=name)
            rows = self.moveaxis(xs, 0, 1)      # rows joined along their axis 1
            return self.reshape(rows, (s[1], s[0] * s[2]) + s[3:], name=name)
        shapes = [shape_of(x) or (1,) for x in xs]
        axis = 0 if all(len(s) == 1 for s in shapes) else 1
        _check_join(self, "hstack", xs, shapes, axis)
        xs = [x if shape_of(x) else self.reshape(x, (1,)) for x in xs]
        return self.concatenate(xs, axis=axis, name=name)

    def vstack(self, xs: Sequence[Any], name: str | None = None) -> Variable:
        """Arrays joined along axis 0, vectors and numbers taken as rows; one array is read as
        the sequence of its rows, as numpy does."""
        if _one_array(xs):
            s = shape_of(xs)
            joined = (s[0], 1) if len(s) == 1 else (s[0] * s[1],) + s[2:] if len(s) > 2 else s
            return self.reshape(xs, joined, name=name)
        shapes = [shape_of(x) if len(shape_of(x)) >= 2 else (1, max(int(np.prod(shape_of(x))), 1))
                  for x in xs]
        _check_join(self, "vstack", xs, shapes, 0)
        xs = [x if len(shape_of(x)) >= 2 else self.reshape(x, (1, -1)) for x in xs]
        return self.concatenate(xs, axis=0, name=name)

    def row_stack(self, xs: Sequence[Any], name: str | None = None) -> Variable:
        """vstack under numpy's older name (deprecated in numpy 2, kept while numpy has it)."""
        return self.vstack(xs, name=name)

    def column_stack(self, xs: Sequence[Any], name: str | None = None) -> Variable:
        """Vectors as columns, and 2-D or higher arrays as they are, joined along axis 1; one
        array is read as the sequence of its rows, as numpy does."""
        if _one_array(xs):
            s = shape_of(xs)
            if len(s) == 1:                     # numbers: one row
                return self.reshape(xs, (1, s[0]), name=name)
            if len(s) == 2:                     # vectors: columns
                return self.transpose(xs, (1, 0), name=name)
            return self.hstack(xs, name=name)
        shapes = [shape_of(x) if len(shape_of(x)) >= 2 else (max(int(np.prod(shape_of(x))), 1), 1)
                  for x in xs]
        _check_join(self, "column_stack", xs, shapes, 1)
        xs = [x if len(shape_of(x)) >= 2 else self.reshape(x, s) for x, s in zip(xs, shapes)]
        return self.concatenate(xs, axis=1, name=name)


def _one_array(xs: Any) -> bool:
    """True when a join was given one array (a Variable or a batched value), not a sequence:
    numpy then joins its rows; a 0-d one has none."""
    if isinstance(xs, (list, tuple)) or is_constant(xs):
        return False
    if not shape_of(xs):
        raise error("stack", (xs,), "a 0-d array has no rows to join; pass a list of arrays",
                    ArgumentError)
    return True


def _check_join(ops: PrimitiveMethods, op: str, xs: Sequence[Any], shapes: list[tuple],
                axis: int) -> None:
    """Raise before recording when the arrays cannot be joined along ``axis``."""
    if not xs:
        raise error(op, (), "needs at least one array", ArgumentError)
    first = shapes[0]
    for s in shapes[1:]:
        if len(s) != len(first) or s[:axis] + s[axis + 1:] != first[:axis] + first[axis + 1:]:
            raise error(op, tuple(xs), f"shapes {first} and {s} do not join along axis "
                             f"{axis}", ShapeError)


def axes_of(ops: PrimitiveMethods, op: str, x: Any, axis: Any, repeats: bool = False,
          keep_order: bool = False) -> tuple:
    """Axis argument (None, int or sequence) as non-negative axes; AxisError when out of range."""
    nd = len(shape_of(x))
    axes = tuple(range(nd)) if axis is None else (
        (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis))
    out = []
    for a in axes:
        if not isinstance(a, (int, np.integer)) or not -nd <= a < nd:
            raise error(op, (x,), f"axis {a} is out of range for {nd} dimension(s)",
                             AxisError)
        out.append(int(a) % nd)
    if not repeats and len(set(out)) != len(out):
        raise error(op, (x,), f"repeated axis in {axis}", ArgumentError)
    return tuple(out) if keep_order or repeats else tuple(sorted(out))


def flat(ops: PrimitiveMethods, x: Any) -> Any:
    """x as a vector: itself when it is one, else a recorded ravel."""
    return x if len(shape_of(x)) == 1 else ops.ravel(x)


# ---------------------------------------------------------------- Variable methods

class RearrangeMethods:
    """Variable methods of the re-arrangements (numpy's ndarray names)."""

    __slots__ = ()

    def squeeze(self, axis: Any = None) -> Variable:
        """Without the size-1 axes named by ``axis`` (all when None)."""
        return self.rec.squeeze(self, axis=axis)

    def ravel(self) -> Variable:
        """As a 1-D array."""
        return self.rec.ravel(self)

    def flatten(self) -> Variable:
        """As a 1-D array."""
        return self.rec.flatten(self)

    def swapaxes(self, axis1: int, axis2: int) -> Variable:
        """Two axes exchanged."""
        return self.rec.swapaxes(self, axis1, axis2)
