"""``sg.linearize``: f's output at the primals and the linear map of its tangents
(``jax.linearize``).

At top level f runs once; one forward sweep (``Ops.jvp``) over its recorded entries, with
fresh leaves standing for the tangents, records the tangent program, which is extracted as a
``Program`` of those leaves (f's values at the primals held as its constants) and the Ops is
released. ``jvp_fn(*tangents)`` then evaluates that program and never runs f again: on arrays,
on values; on Variables of another Ops (``jvp_fn`` inside ``grad`` or ``vmap``), recorded
there, so it is differentiable and batched like any other program.

Nested (the primals are Variables, or another transform runs around the call), f is recorded
on the caller's Ops and ``jvp_fn`` is a forward sweep of those recorded entries, recorded
there too: again f is not run again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ArgumentError, ShapeError
from ..program.core import extract
from ..pytree import tree_flatten, tree_unflatten
from .arguments import (
    aux_result,
    check_callable,
    check_has_aux,
    context,
    disconnected,
    flat,
    leaf_shape,
    leaves_like,
    outputs,
    own,
    primals,
    recording_ops,
    results,
    run_paused,
    split_aux,
)


def linearize(f: Callable, *xs: Any, has_aux: bool = False) -> tuple:
    """``(f(*xs), jvp_fn)``: ``jvp_fn(*tangents)`` is ``J v``, the tangent of f's output for
    one tangent per primal (each of its primal's structure), evaluated from the recorded
    linear map without running f again. ``has_aux=True`` (JAX's): f returns ``(output,
    aux)``, and the result is ``(output, jvp_fn, aux)``."""
    check_callable("linearize", f)
    has_aux = check_has_aux("linearize", has_aux)
    if not xs:
        raise ArgumentError("linearize: give at least one primal: linearize(f, *primals)")
    # its program outlives the call; recorded as the jvp rules write it, not simplified, so
    # that its transpose is the vjp's pullback entry for entry (docs/transforms.md)
    ops, nested = context("linearize", xs, borrow=False, simplify=False)
    if nested is None:
        return run_paused(ops, lambda *a: linearize(f, *a, has_aux=has_aux), xs)
    with own(ops, nested):
        call, trees = primals(ops, xs, range(len(xs)))
        prims = flat(trees)
        y, aux = split_aux("linearize", f(*call), has_aux)
        aux = aux_result(nested, aux)
        ys, out_def = outputs("linearize", ops, y)
        disconnected("linearize", f, None, ys)
        specs = [(x.shape, x.dtype) for x in prims]
        if nested:
            def tangent_of(ts: list) -> list:
                return [ops.jvp(y, prims, ts, create_graph=True) for y in ys]
            out = tree_unflatten(out_def, ys)
        else:
            leaves = [ops.var(np.zeros(s, d)) for s, d in specs]
            program = extract(leaves, [ops.jvp(y, prims, leaves, create_graph=True)
                                       for y in ys])

            def tangent_of(ts: list) -> list:
                where = recording_ops("linearize", ts)
                if where is None:
                    got = program(*[np.asarray(getattr(t, "raw", t), dtype=d)
                                    for t, (_, d) in zip(ts, specs)])
                    return results(False, got)
                return program.record(where, *ts)
            out = tree_unflatten(out_def, results(False, ys))

    x_trees = [tree_flatten(x)[1] for x in xs]

    def jvp_fn(*tangents: Any) -> Any:
        """The tangent of f's output for one tangent per primal (J v)."""
        if len(tangents) != len(xs):
            raise ArgumentError(f"linearize: jvp_fn takes one tangent per primal ({len(xs)}), "
                                f"got {len(tangents)}")
        ts = []
        for i, (v, treedef) in enumerate(zip(tangents, x_trees)):
            ts += leaves_like("linearize", f"tangent {i}", "its primal", treedef, v)
        for k, (t, (shape, _)) in enumerate(zip(ts, specs)):
            if tuple(leaf_shape(t)) != tuple(shape):
                raise ShapeError(f"linearize: tangent leaf {k} has shape {leaf_shape(t)} but its "
                                 f"primal has shape {tuple(shape)}")
        return tree_unflatten(out_def, tangent_of(ts))
    return (out, jvp_fn, aux) if has_aux else (out, jvp_fn)

