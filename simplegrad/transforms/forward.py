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

from ..engine.batching import Batched
from ..errors import ArgumentError, ShapeError
from ..pytree import tree_flatten, tree_leaves, tree_unflatten
from .arguments import (
    Result,
    active,
    argnums_kind,
    aux_result,
    check_callable,
    check_has_aux,
    context,
    disconnected,
    everything,
    flat,
    leaf_shape,
    leaves_like,
    output,
    outputs,
    own,
    paused,
    primals,
    resolve,
    result,
    results,
    run_paused,
    split_aux,
)
from .taylor import check_order
from .taylor import derivative_entry as taylor_derivative_entry


def jvp(f: Callable, xs: Sequence[Any], vs: Sequence[Any], has_aux: bool = False) -> tuple:
    """``(f(*xs), J v)``: the output and its tangent along the tangents ``vs`` of ``xs``
    (with ``has_aux``: ``(out, tangent, aux)``).

    Each primal may be a pytree, its tangent of the same structure; so may the output.
    """
    check_callable("jvp", f)
    has_aux = check_has_aux("jvp", has_aux)
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
        return run_paused(ops, lambda *a: jvp(f, a[:len(xs)], a[len(xs):], has_aux),
                          (*xs, *vs))
    with own(ops, nested):
        levels = active(ops) if nested else []
        # forward mode needs no lifting: primals that are the same for every example stay
        # so (the output too, unless f reads a batched value), whatever the tangents are
        lift = levels if _batched(xs) else []
        call, trees = primals(ops, xs, range(len(xs)), lift)
        out, aux = split_aux("jvp", f(*call), has_aux)
        ys, out_def = outputs("jvp", ops, out)
        if levels and not lift and _batched(tangents) and _batched(ys):
            call, trees = primals(ops, xs, range(len(xs)), levels)
            out, aux = split_aux("jvp", f(*call), has_aux)
            ys, out_def = outputs("jvp", ops, out)
        prims = flat(trees)
        if prims:
            ts = [ops.jvp(y, prims, tangents, create_graph=nested) for y in ys]
            disconnected("jvp", f, ops, ys)
        else:
            ts = [ops.zeros_like(y, nested) for y in ys]
        both = results(nested, [*ys, *ts])
        pair = (tree_unflatten(out_def, both[:len(ys)]), tree_unflatten(out_def, both[len(ys):]))
        return (*pair, aux_result(nested, aux)) if has_aux else pair


def derivative(f: Callable, order: int = 1, argnums: int = 0) -> Callable:
    """The function computing the ``order``-th derivative of ``f`` in its scalar argument
    ``argnums``, the other arguments held fixed.

    Along a unit tangent: for ``f`` acting elementwise on an array it gives the elementwise
    derivative. From order 2, by Taylor mode (one forward walk of truncated series) when every
    primitive between the argument and the result has a Taylor rule; else repeated jvps.
    """
    check_callable("derivative", f)
    order = check_order("derivative", order)
    if not argnums_kind("derivative", argnums):
        raise ArgumentError(f"derivative: argnums must be one int (the argument to "
                            f"differentiate in), not {argnums!r}")
    order = int(order)

    @functools.wraps(f)
    def derivative_f(*args: Any, **kwargs: Any) -> Result:
        ops, nested = context("derivative", everything(args, kwargs))
        if nested is None:
            return paused(ops, derivative(f, order, argnums), args, kwargs)
        with own(ops, nested):
            nums = resolve("derivative", argnums, len(args))
            call, trees = primals(ops, args, nums)
            (xv,) = flat(trees)
            y = output("derivative", ops, f(*call, **kwargs))
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
