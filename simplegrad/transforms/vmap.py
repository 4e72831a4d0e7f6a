"""``sg.vmap``: a function mapped over a batch axis of its arguments, recorded as one program.

A ``Batched`` Variable stands for one example of a batch inside ``f``: it reports the
per-example shape (``x.shape``, ``x.ndim``, ``x.size``) while it holds ``inner``, the whole
batch with the examples along a leading axis. A primitive given a Batched input is handed
by ``Ops.apply`` (the one recording path) to the engine's batched values: the primitive's
batching rule (``batch`` in its record, see primitives/core.py) computes the batch at once
with primitives called on the real Ops, so the batched program is recorded and
differentiable like any other. A primitive without a rule loops over the examples and stacks.

Each ``vmap`` call has its own level; nested vmaps wrap Batched in Batched, and a primitive
works on the innermost (highest) level first, its rule seeing the outer levels' Batched
values as ordinary per-example values, which batch again when the rule calls primitives.

Transforms inside a running vmap (``vmap(grad(f))``, or grad of a closure over the example)
are the ordinary transforms: while f runs, the vmap has a frame on the stack of running
transforms (arguments.py, per thread), and a transform called there lifts its primals to
every running vmap's level (``primals``), so each example has its own; the sweeps given
Batched values run on their stacks (engine/levels.py): examples are independent, so one sweep
of the stacked program gives every example's derivative at once.

Batched values also serve the engine's ``batched_jvp``, which pushes many tangents
through one forward sweep of a recorded program (each jvp rule runs once, on Batched
tangents); ``jacobian_fwd_batched`` and ``hessian_batched`` (jacobians.py) are built on it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..engine.batched import FINAL, Batched, _levels, is_int, wrap
from ..engine.ops import Ops
from ..engine.variable import Variable
from ..errors import ArgumentError, AxisError, ShapeError
from ..pytree import tree_leaves, tree_map
from .arguments import context, running

# ---------------------------------------------------------------- vmap


def vmap(f: Callable, in_axes: Any = 0, out_axes: Any = 0) -> Callable:
    """The function mapping ``f`` over a batch axis of its arguments (``in_axes``: an int or
    None for all, or one per argument, applying to every leaf of a pytree argument;
    ``out_axes``: an int or None, or one per output)."""
    if not callable(f):
        raise ArgumentError(f"vmap: expected a function, got {type(f).__name__}")

    @functools.wraps(f)
    def vmapped(*args: Any) -> Any:
        axes = _per_argument(in_axes, len(args))
        ops, nested = context("vmap", args, borrow=False, derivative=False)
        level = next(_levels)
        if not nested:
            FINAL.add(level)
        n = _size(args, axes)
        try:
            call = [a if ax is None else
                    leafwise(lambda x, ax=ax: wrap(_leading(ops, x, ax), level), a)
                    for a, ax in zip(args, axes)]
            with running(ops, (level, n)):
                out = f(*call)
            many = type(out) in (tuple, list)
            outs = list(out) if many else [out]
            oaxes = _per_argument(out_axes, len(outs), "out_axes")
            res = [leafwise(lambda y, ax=ax: _unbatch(ops, y, level, n, ax, nested), y)
                   for y, ax in zip(outs, oaxes)]
            return type(out)(res) if many else res[0]
        finally:
            FINAL.discard(level)
            if not nested:
                ops.release()
    return vmapped


def leafwise(fn: Callable, tree: Any) -> Any:
    """``fn`` on each leaf of a pytree (``tree_map``), or on the value itself when it is one
    leaf."""
    if tree is None or isinstance(tree, (dict, list, tuple)):
        return tree_map(fn, tree)
    return fn(tree)


def _per_argument(axes: Any, count: int, what: str = "in_axes") -> list:
    if axes is None or is_int(axes):
        return [axes] * count
    if isinstance(axes, (tuple, list)) and len(axes) == count and all(
            a is None or is_int(a) for a in axes):
        return list(axes)
    raise ArgumentError(f"vmap: {what} must be an int, None, or one of those per argument "
                        f"({count}), not {axes!r}")


def _size(args: Sequence[Any], axes: list) -> int:
    sizes = {}
    for i, (a, ax) in enumerate(zip(args, axes)):
        if ax is None:
            continue
        for leaf in tree_leaves(a):
            shape = leaf.shape if isinstance(leaf, Variable) else np.shape(leaf)
            if not -len(shape) <= ax < len(shape):
                raise AxisError(f"vmap: in_axes {ax} is out of bounds for argument {i} (a leaf "
                                f"of shape {tuple(shape)})")
            sizes.setdefault(i, set()).add(shape[ax])
    if not sizes:
        raise ArgumentError("vmap: no argument is batched (every in_axes is None)")
    found = set().union(*sizes.values())
    if len(found) > 1:
        shown = {i: sorted(v)[0] if len(v) == 1 else sorted(v) for i, v in sizes.items()}
        raise ShapeError(f"vmap: the batched arguments have different sizes along in_axes: "
                         f"{shown} (argument: size)")
    return found.pop()


def _leading(ops: Ops, a: Any, ax: int) -> Any:
    """Argument ``a`` as a Variable of ``ops`` with its batch axis ``ax`` moved first."""
    a = ops.leaf_for(a) if isinstance(a, Variable) else _constant(ops, a)
    ax = ax % a.ndim
    return a if ax == 0 else ops.moveaxis(a, ax, 0)


def _unbatch(ops: Ops, y: Any, level: int, n: int, ax: Any, nested: bool) -> Any:
    """One leaf of f's output with the batch axis at ``ax`` (None: the output must be
    unbatched); an array unless ``nested``."""
    out = _moved(ops, y, level, n, ax)
    return out if nested else _array(getattr(out, "raw", out))


def _array(v: Any) -> np.ndarray:
    """A computed value handed out as it is when it owns its writable buffer (a fresh result
    nothing else holds once vmap's Ops is released), else a copy."""
    if type(v) is np.ndarray and v.flags.owndata and v.flags.writeable:
        return v
    return np.array(v)


def _moved(ops: Ops, y: Any, level: int, n: int, ax: Any) -> Any:
    if type(y) is Batched and y.level == level:
        if ax is None:
            raise ArgumentError("vmap: out_axes=None needs an output that is the same for every "
                                f"example, but {y.name} depends on the batched arguments")
        inner = y.inner
        ax = _out_axis(ax, y.shape)
        return inner if ax == 0 else ops.moveaxis(inner, 0, ax)
    if ax is None:
        return y
    if not isinstance(y, Variable):
        y = _constant(ops, y)
    return ops.moveaxis(ops.expand(y, (n,) + y.shape), 0, _out_axis(ax, y.shape))


def _constant(ops: Ops, a: Any) -> Variable:
    """An array as a leaf of ``ops`` requiring no gradient, keeping its dtype (an int stays an
    int; floats are recorded as ``ops.var`` records them)."""
    arr = np.asarray(a)
    if arr.dtype.kind == "f":
        return ops.var(arr, requires_grad=False)
    return ops.leaf(np.array(arr), None, False)


def _out_axis(ax: int, shape: tuple) -> int:
    """Where out_axes puts the batch axis of an output whose examples have ``shape``."""
    if not -len(shape) - 1 <= ax <= len(shape):
        raise AxisError(f"vmap: out_axes {ax} is out of bounds for an output of dimension "
                        f"{len(shape) + 1} (examples of shape {tuple(shape)}, and the batch axis)")
    return ax % (len(shape) + 1)
