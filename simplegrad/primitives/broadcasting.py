"""Broadcasting in rules: undone for cotangents (``unbroadcast``), tangents (``broadcast_to``)
and structural-zero masks; and the vjp, masked vjp and jvp that an elementwise primitive gets
from one derivative rule per input (``elementwise``, in elementwise.py, registers with them).

Broadcasting is undone inside the rules with recorded ``sum`` and ``reshape``, so the gradient
of a broadcast input has that input's shape, at every order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .core import JvpRule, MaskedVjpRule, VjpRule, shape_of

if TYPE_CHECKING:
    from . import PrimitiveMethods

# ---------------------------------------------------------------- cotangents and tangents


def unbroadcast(o: PrimitiveMethods, g: Any, shape: tuple, reduce: str = "sum") -> Any:
    """Sum a cotangent down to ``shape``, undoing numpy broadcasting with recorded ops.

    ``reduce="all"`` does the same to a bool mask: an entry is masked when all its copies are.
    """
    gshape = shape_of(g)
    if gshape == shape:
        return g
    fold = o.sum if reduce == "sum" else o.all
    if shape == ():
        return fold(g)
    if gshape[1:] == shape:     # one new leading axis (a bias over a batch): sum it away
        return fold(g, axis=0)
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, n in enumerate(shape) if n == 1 and gshape[i + lead] != 1)
    if lead == 0:
        return fold(g, axis=_one(axes), keepdims=True)
    summed = fold(g, axis=_one(axes))
    return summed if shape_of(summed) == shape else o.reshape(summed, shape)


def broadcast_to(o: PrimitiveMethods, t: Any, shape: tuple) -> Any:
    """Expand a tangent to ``shape`` when broadcasting left it smaller."""
    return t if shape_of(t) == shape else o.expand(t, shape)


def _one(axes: tuple) -> int | tuple:
    return axes[0] if len(axes) == 1 else axes


# ---------------------------------------------------------------- structural zeros
#
# A cotangent entry can be zero by construction: the untaken side of ``where``. The reverse
# sweep keeps, per cotangent, a bool mask of those entries, computed by recorded primitives
# (so the recorded gradient is the same program at any input). Elementwise vjps below a mask
# zero their result there (``where(m, 0, c)``), so an infinite or undefined local derivative
# (``sqrt`` or ``log`` at 0 on the untaken side) contributes 0, not nan; shape primitives and
# reductions carry the mask to their inputs.

def zero_masked(o: PrimitiveMethods, c: Any, mask: Any) -> Any:
    """c with exact zeros where ``mask`` holds (the mask broadcasts to c's shape)."""
    return o.where(mask, 0, c)


def full_mask(o: PrimitiveMethods, m: Any, shape: tuple) -> Any:
    """A mask broadcast to ``shape``."""
    return m if shape_of(m) == shape else o.expand(m, shape)


def mask_down(o: PrimitiveMethods, m: Any, out_shape: tuple, shape: tuple) -> Any:
    """The mask of an input of ``shape`` that broadcasting took to ``out_shape``."""
    if shape == out_shape:
        return m
    return unbroadcast(o, full_mask(o, m, out_shape), shape, reduce="all")


def elementwise_mask(o: PrimitiveMethods, m: Any, i: int, out: Any, *xs: Any, **attrs: Any) -> Any:
    """Mask rule of elementwise primitives: the output's mask, undone for broadcasting."""
    return None if m is None else mask_down(o, m, shape_of(out), shape_of(xs[i]))


# ---------------------------------------------------------------- rules from derivative rules


def broadcast_vjp(rule: VjpRule | None, i: int, nin: int) -> VjpRule | None:
    """The vjp of input i of ``nin`` from its derivative rule: the rule, then unbroadcast."""
    if rule is None or nin == 1:
        return rule
    if nin == 2:    # the common form, without packing the inputs (every sweep's hot path)
        def binary(o: PrimitiveMethods, g, out, x, y, **attrs):
            c = rule(o, g, out, x, y, **attrs) if attrs else rule(o, g, out, x, y)
            shape = y.shape if i else x.shape
            return c if c.shape == shape else unbroadcast(o, c, shape)
        return binary

    def vjp(o: PrimitiveMethods, g, out, *xs, **attrs):
        c = rule(o, g, out, *xs, **attrs)
        shape = xs[i].shape     # inputs that get cotangents are Variables or arrays
        return c if c.shape == shape else unbroadcast(o, c, shape)
    return vjp


def masked_vjp(rule: VjpRule | None, i: int, nin: int) -> MaskedVjpRule | None:
    """The vjp used below a ``where``: zero where the mask m holds, then unbroadcast."""
    if rule is None:
        return None

    def vjp(o: PrimitiveMethods, g, out, m, *xs, **attrs):
        c = zero_masked(o, rule(o, g, out, *xs, **attrs), m)
        return c if nin == 1 else unbroadcast(o, c, xs[i].shape)
    return vjp


def summed_jvp(rules: Sequence[VjpRule | None]) -> JvpRule:
    """The jvp from one derivative rule per input: the rules on the tangents, summed and
    broadcast to the output's shape."""
    def jvp(o: PrimitiveMethods, ts, out, *xs, **attrs):
        acc = None
        for rule, t in zip(rules, ts):
            if t is not None and rule is not None:
                c = rule(o, t, out, *xs, **attrs)
                acc = c if acc is None else o.add(acc, c)
        return None if acc is None else broadcast_to(o, acc, shape_of(out))
    return jvp
