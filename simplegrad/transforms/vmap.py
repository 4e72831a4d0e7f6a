"""``sg.vmap``: a function mapped over a batch axis of its arguments, recorded as one program.

A ``Batched`` Variable stands for one example of a batch inside ``f``: it reports the
per-example shape (``x.shape``, ``x.ndim``, ``x.size``) while it holds ``inner``, the whole
batch with the examples along a leading axis. A primitive given a Batched input is handed
by ``Ops.apply`` (the one recording path) to the engine's batched values: the primitive's
batching rule (``batch`` in its record, see primitives/core.py) computes the batch at once
with primitives called on the real Ops, so the batched program is recorded and
differentiable like any other. A primitive without a rule loops over the examples and stacks.

Each ``vmap`` call has its own level, drawn from its thread's count (engine/batching.py's
``new_level``), and its frame on this thread's stack of running transforms says whether it runs
on an Ops of its own (``final``): nothing is shared between threads. Nested vmaps wrap Batched
in Batched, and a primitive
works on the innermost (highest) level first, its rule seeing the outer levels' Batched
values as ordinary per-example values, which batch again when the rule calls primitives.

Transforms inside a running vmap (``vmap(grad(f))``, or grad of a closure over the example)
are the ordinary transforms: while f runs, the vmap has a frame on the stack of running
transforms (arguments.py, per thread), and a transform called there lifts its primals to
every running vmap's level (``primals``), so each example has its own; the sweeps given
Batched values run on their stacks (engine/batching.py): examples are independent, so one sweep
of the stacked program gives every example's derivative at once.

Axes follow JAX: ``in_axes`` is one prefix tree per positional argument (an int or None covers
a whole subtree; ``pytree.prefix_leaves``), keyword arguments are mapped over axis 0,
``out_axes`` is a prefix tree of the output, and ``axis_size`` gives the batch size when no
argument is mapped. An unbatched float or integer array (in_axes None) reaches f as a
constant Variable (``_unbatched``), so that batched indices and the batch rules reach it as
they reach the batched arguments.

Batched values also serve the engine's ``batched_jvp``, which pushes many tangents
through one forward sweep of a recorded program (each jvp rule runs once, on Batched
tangents); ``jacobian_fwd_batched`` and ``hessian_batched`` (jacobians.py) are built on it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine.batching import Batched, new_level, wrap
from ..engine.ops import Ops
from ..engine.variable import MASKED, Variable
from ..errors import ArgumentError, AxisError, ShapeError
from ..pytree import (
    LEAF,
    TreeDef,
    prefix_leaves,
    tree_flatten,
    tree_structure,
    tree_unflatten,
)
from .arguments import context, everything, is_int, running

# ---------------------------------------------------------------- vmap


def vmap(f: Callable, in_axes: Any = 0, out_axes: Any = 0,
         axis_size: int | None = None) -> Callable:
    """The function mapping ``f`` over a batch axis of its arguments.

    ``in_axes``: an int or None for every argument, or a tuple with one entry per positional
    argument, each a prefix tree of ints and None over that argument (tuples, lists, dicts,
    namedtuples, registered nodes); keyword arguments are mapped over axis 0. An unbatched
    float or integer array (None) reaches f as a constant Variable. ``out_axes``: a
    prefix tree of ints and None over f's output (None: an output the same for every
    example). ``axis_size``: the batch size, needed when no argument is mapped.
    """
    if not callable(f):
        raise ArgumentError(f"vmap: expected a function, got {type(f).__name__}")
    if axis_size is not None and (not is_int(axis_size) or axis_size < 0):
        raise ArgumentError(f"vmap: axis_size must be an int >= 0, not {axis_size!r}")

    @functools.wraps(f)
    def vmapped(*args: Any, **kwargs: Any) -> Any:
        per_arg = _per_argument(in_axes, len(args))
        flat = [([a], LEAF) if type(a) is np.ndarray or isinstance(a, Variable) else
                tree_flatten(a) for a in args]     # (one array: no tree to walk)
        axes = [prefix_axes(p, a, "in_axes", i) for i, (p, a) in enumerate(zip(per_arg, args))]
        kw_flat = {k: tree_flatten(v) for k, v in kwargs.items()}
        leaves = [(i, leaf, ax) for i, ((ls, _), axs) in enumerate(zip(flat, axes))
                  for leaf, ax in zip(ls, axs)]
        leaves += [(k, leaf, 0) for k, (ls, _) in kw_flat.items() for leaf in ls]
        n = _size(leaves, axis_size)
        ops, nested = context("vmap", everything(args, kwargs), borrow=False, derivative=False)
        level = new_level()
        frame = running(ops, (level, n), final=not nested)
        try:
            def batched(ls: list, axs: list, treedef: TreeDef) -> Any:
                xs = [_unbatched(ops, x) if ax is None else wrap(_leading(ops, x, ax), level)
                      for x, ax in zip(ls, axs)]
                return xs[0] if treedef is LEAF else tree_unflatten(treedef, xs)
            call = [batched(ls, axs, d) for (ls, d), axs in zip(flat, axes)]
            kw = {k: batched(ls, [0] * len(ls), d) for k, (ls, d) in kw_flat.items()}
            with frame:
                out = f(*call, **kw)
            if isinstance(out, Variable) and (out_axes is None or is_int(out_axes)):
                return _unbatch(ops, out, level, n, out_axes, nested, set())   # (one output)
            out_leaves, out_def = tree_flatten(out)
            oaxes = prefix_axes(out_axes, out, "out_axes", "the output")
            given: set[int] = set()
            return tree_unflatten(out_def, [_unbatch(ops, y, level, n, ax, nested, given)
                                            for y, ax in zip(out_leaves, oaxes)])
        finally:
            frame.final = False     # (a pullback called later runs as any other)
            if not nested:
                ops.release()
    return vmapped


def prefix_axes(prefix: Any, tree: Any, what: str, where: Any) -> list:
    """The axis of each leaf of ``tree`` (flattening order) from ``prefix``, a tree of ints and
    None that is a prefix of ``tree``'s structure (an int or None covers a whole subtree);
    ``where`` names the tree in errors (an int: that positional argument)."""
    if (prefix is None or is_int(prefix)) and (type(tree) is np.ndarray or
                                               isinstance(tree, Variable)):
        return [prefix]         # (the common case: one array, one axis)
    where = f"argument {where}" if is_int(where) else where
    axes = prefix_leaves(prefix, tree_structure(tree), lambda p: p is None or is_int(p),
                         f"vmap: {what} for {where}")
    for ax in axes:
        if not (ax is None or is_int(ax)):
            raise ArgumentError(f"vmap: {what} holds {ax!r} for {where}: expected an int, None "
                                "or a container of them")
    return axes


def _per_argument(axes: Any, count: int) -> list:
    """in_axes as one prefix tree per positional argument."""
    if axes is None or is_int(axes):
        return [axes] * count
    if isinstance(axes, (tuple, list)) and not hasattr(axes, "_fields") and len(axes) == count:
        return list(axes)
    raise ArgumentError(f"vmap: in_axes must be an int, None, or a tuple with one entry per "
                        f"positional argument ({count}), not {axes!r}")


def _size(leaves: list, axis_size: int | None) -> int:
    sizes: dict[str, set] = {}
    for where, leaf, ax in leaves:      # where: a position, or a keyword's name
        if ax is None:
            continue
        shape = leaf.shape if isinstance(leaf, Variable) else np.shape(leaf)
        if not -len(shape) <= ax < len(shape):
            raise AxisError(f"vmap: in_axes {ax} is out of bounds for {_named(where)} (a leaf "
                            f"of shape {tuple(shape)})")
        sizes.setdefault(where, set()).add(shape[ax])
    if not sizes:
        if axis_size is None:
            raise ArgumentError("vmap: no argument is batched (every in_axes is None); pass "
                                "axis_size= to map over a batch of that size")
        return int(axis_size)
    found = set().union(*sizes.values())
    if axis_size is not None:
        found.add(int(axis_size))
    if len(found) > 1:
        shown = {_named(w): sorted(v)[0] if len(v) == 1 else sorted(v)
                 for w, v in sizes.items()}
        given = "" if axis_size is None else f", axis_size={axis_size}"
        raise ShapeError(f"vmap: the batched arguments have different sizes along in_axes: "
                         f"{shown}{given}")
    return found.pop()


def _named(where: Any) -> str:
    return f"argument {where}" if is_int(where) else f"keyword argument {where!r}"


def _leading(ops: Ops, a: Any, ax: int) -> Any:
    """Argument ``a`` as a Variable of ``ops`` with its batch axis ``ax`` moved first."""
    a = ops.leaf_for(a) if isinstance(a, Variable) else _constant(ops, a)
    ax = ax % a.ndim
    return a if ax == 0 else ops.moveaxis(a, ax, 0)


_NUMBERS = tuple(np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int8, np.int16,
                                        np.int32, np.int64, np.uint8, np.uint16, np.uint32))


def _unbatched(ops: Ops, a: Any) -> Any:
    """An argument at in_axes None as f sees it: a float or integer array as a constant of
    ``ops``, so that a batched index can index it (``a[:, i]``: numpy's own indexing cannot
    take a Variable) and numpy functions dispatch on it, as they do on the batched arguments;
    bool arrays (masks), 0-d arrays, numbers and Variables as they are."""
    if type(a) is np.ndarray and a.ndim and a.dtype in _NUMBERS:
        return _constant(ops, a)
    return a


def _unbatch(ops: Ops, y: Any, level: int, n: int, ax: Any, nested: bool,
             given: set[int]) -> Any:
    """One leaf of f's output with the batch axis at ``ax`` (None: the output must be
    unbatched); an array unless ``nested`` (``given``: the buffers handed out already)."""
    if not isinstance(y, Variable):
        kind = getattr(getattr(y, "dtype", None), "kind", None)
        if not (type(y) in (bool, int, float) or kind is not None and kind in "biufc"):
            shown = type(y).__name__ + (f" of dtype {y.dtype}" if kind is not None else "")
            raise ArgumentError(f"vmap: f returned a value of type {shown}; it must return "
                                "arrays, numbers or Variables, or tuples, lists and dicts of "
                                "them")
    out = _moved(ops, y, level, n, ax)
    return out if nested else _array(getattr(out, "raw", out), given)


def _array(v: Any, given: set[int]) -> np.ndarray:
    """A computed value handed out as it is when it owns its writable buffer (a fresh result
    nothing else holds once vmap's Ops is released) or is a writable view of all of one (a
    gradient of a transposed weight, say, whose transposing copy would cost more than the
    sweep), and no other output was handed that buffer (``given``); else a copy."""
    if type(v) is np.ndarray and v.flags.writeable:
        base = v if v.flags.owndata else v.base
        if type(base) is np.ndarray and base.flags.owndata and base.flags.writeable and \
                base.size == v.size and id(base) not in given:
            given.add(id(base))
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
    if isinstance(a, np.ma.MaskedArray):
        raise ArgumentError(f"vmap: {MASKED}")
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
