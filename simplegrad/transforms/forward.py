"""Forward mode: jvp and derivative, over ``Ops.jvp`` (the forward sweep); ``derivative``
of order 2 and up by Taylor mode (taylor.py) where every primitive on the way has a Taylor rule.

How a transform picks its Ops, stands for its arguments and returns its results (the nesting
rule) is told in arguments.py.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..engine.levels import Batched
from ..errors import ArgumentError, ShapeError
from ..pytree import tree_flatten, tree_leaves, tree_unflatten
from .arguments import (
    Result,
    active,
    check_callable,
    context,
    disconnected,
    flat,
    leaf_shape,
    leaves_like,
    output,
    outputs,
    own,
    primals,
    result,
    results,
    run_paused,
)
from .taylor import derivative_entry as taylor_derivative_entry


def jvp(f: Callable, xs: Sequence[Any], vs: Sequence[Any]) -> tuple[Result, Result]:
    """``(f(*xs), J v)``: the output and its tangent along the tangents ``vs`` of ``xs``.

    Each primal may be a pytree, its tangent of the same structure; so may the output.
    """
    check_callable("jvp", f)
    if not isinstance(xs, (tuple, list)) or not isinstance(vs, (tuple, list)):
        raise ArgumentError("jvp: xs and vs must be tuples (one entry per argument of f), got "
                            f"{type(xs).__name__} and {type(vs).__name__}")
    if len(xs) != len(vs):
        raise ArgumentError(f"jvp: {len(xs)} primals but {len(vs)} tangents")
    tangents = []
    for i, (x, v) in enumerate(zip(xs, vs)):
        x_leaves, x_def = tree_flatten(x)
        for xl, vl in zip(x_leaves, leaves_like("jvp", f"tangent {i}", "its primal", x_def, v)):
            if leaf_shape(xl) != leaf_shape(vl):
                raise ShapeError(f"jvp: tangent {i} has shape {leaf_shape(vl)} but its primal has "
                                 f"shape {leaf_shape(xl)}")
            tangents.append(vl)
    ops, nested = context("jvp", (*xs, *vs))
    if nested is None:
        return run_paused(ops, lambda *a: jvp(f, a[:len(xs)], a[len(xs):]), (*xs, *vs))
    with own(ops, nested):
        levels = active(ops) if nested else []
        # forward mode needs no lifting: primals that are the same for every example stay
        # so (the output too, unless f reads a batched value), whatever the tangents are
        lift = levels if _batched(xs) else []
        call, trees = primals(ops, xs, range(len(xs)), lift)
        ys, out_def = outputs("jvp", ops, f(*call))
        if levels and not lift and _batched(tangents) and _batched(ys):
            call, trees = primals(ops, xs, range(len(xs)), levels)
            ys, out_def = outputs("jvp", ops, f(*call))
        prims = flat(trees)
        if prims:
            ts = [ops.jvp(y, prims, tangents, create_graph=nested) for y in ys]
            disconnected("jvp", f, ops, ys)
        else:
            ts = [ops.zeros_like(y, nested) for y in ys]
        both = results(nested, [*ys, *ts])
        return (tree_unflatten(out_def, both[:len(ys)]),
                tree_unflatten(out_def, both[len(ys):]))


def derivative(f: Callable, order: int = 1) -> Callable:
    """The function computing the ``order``-th derivative of ``f`` of one scalar argument.

    Along a unit tangent: for ``f`` acting elementwise on an array it gives the elementwise
    derivative. From order 2, by Taylor mode (one forward walk of truncated series) when every
    primitive between the argument and the result has a Taylor rule; else repeated jvps.
    """
    check_callable("derivative", f)
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 0:
        raise ArgumentError(f"derivative: order must be an int >= 0, not {order!r}")
    order = int(order)

    @functools.wraps(f)
    def derivative_f(x: Any) -> Result:
        ops, nested = context("derivative", (x,))
        if nested is None:
            return run_paused(ops, derivative(f, order), (x,))
        with own(ops, nested):
            call, trees = primals(ops, (x,), (0,))
            (xv,) = flat(trees)
            y = output("derivative", ops, f(*call))
            disconnected("derivative", f, None, [y])
            if order > 1:
                d = taylor_derivative_entry(ops, y, xv, order, nested)
                if d is not None:
                    return result(nested, d)
            ones = np.ones(xv.shape, dtype=xv.dtype)
            for k in range(order):
                y = ops.jvp(y, xv, ones, create_graph=nested or k < order - 1)
            return result(nested, y)
    return derivative_f


def _batched(tree: Any) -> bool:
    """Whether a leaf of ``tree`` is batched by a running vmap."""
    return any(type(a) is Batched for a in tree_leaves(list(tree)))
