"""The arguments and results of the functional transforms: contexts, primals, pytrees.

Helpers shared by ``transforms.py``: which Ops a transform records on, the primal Variables
that stand for (the leaves of) its differentiated arguments, and f's results as Variables.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..engine.ops import Ops
from ..engine.variable import Variable
from ..errors import ArgumentError, GraphError, ShapeError
from ..pytree import LEAF, TreeDef, tree_flatten, tree_leaves, tree_unflatten

ArgNums = int | tuple[int, ...]
Result = Any        # a Variable when nested, a numpy array otherwise

def context(fname: str, args: Sequence[Any], borrow: bool = True) -> tuple[Ops, bool]:
    """The Ops to record on, and whether it is the caller's (some argument is a Variable).

    A transform's own Ops borrows the caller's arrays (no copies): it is released before the
    call returns, and its results are copied out. ``borrow=False`` for one that outlives it.
    """
    for a in args:
        if type(a) is not np.ndarray:
            break
    else:           # arrays only (the common case): no tree to walk
        return Ops(borrow=borrow), False
    ops = first = None
    for a in tree_leaves(list(args)):
        if isinstance(a, Variable):
            if ops is None:
                ops, first = a.ops, a
            elif a.ops is not ops:
                raise GraphError(f"{fname}: the arguments belong to different Ops ({first.name} "
                                 f"and {a.name}); create them on one Ops, or pass arrays")
    if ops is None:
        return Ops(borrow=borrow), False
    if not ops.recording:
        raise GraphError(f"{fname}: the Ops of {first.name} is not recording (inside no_grad); "
                         "a transform of Variables must record its derivative")
    return ops, True


class own:  # noqa: N801 (used as ``with own(ops, nested):``)
    """Release a transform's own Ops when it is done (results are copied out as arrays); a
    plain context manager, not a generator: every transform call enters one."""

    __slots__ = ("ops", "nested")

    def __init__(self, ops: Ops, nested: bool) -> None:
        self.ops = ops
        self.nested = nested

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        if not self.nested:
            self.ops.release()


def primals(ops: Ops, args: Sequence[Any], nums: Sequence[int]) -> tuple[list, list]:
    """The arguments to call f with, and per differentiated argument its structure and the
    Variables standing for its leaves."""
    call = list(args)
    trees = []
    for i in nums:
        a = args[i]
        if type(a) is np.ndarray:       # one array: one leaf, no tree to walk
            call[i] = x = ops.var(a)
            trees.append((LEAF, [x]))
            continue
        leaves, treedef = tree_flatten(a)
        xs = [primal(ops, a) for a in leaves]
        call[i] = tree_unflatten(treedef, xs)
        trees.append((treedef, xs))
    return call, trees


def primal(ops: Ops, a: Any) -> Variable:
    """The Variable standing for one leaf of a differentiated argument."""
    if isinstance(a, Variable) and a.requires_grad:
        return ops.reshape(a, a.shape)      # identity entry: see the module docstring
    return ops.var(getattr(a, "raw", a))


def flat(trees: list) -> list[Variable]:
    """The primal Variables of every differentiated argument, in order."""
    return [x for _, xs in trees for x in xs]


def regroup(trees: list, flat: list) -> tuple:
    """``flat`` (one item per primal leaf) rebuilt as one pytree per differentiated argument."""
    out, k = [], 0
    for treedef, xs in trees:
        out.append(flat[k] if treedef is LEAF else tree_unflatten(treedef, flat[k:k + len(xs)]))
        k += len(xs)
    return tuple(out)


def leaves_like(fname: str, what: str, ref: str, treedef: TreeDef, tree: Any) -> list:
    """The leaves of ``tree``, which must have the structure ``treedef``."""
    if treedef.kind == "leaf":
        return [tree]
    leaves, other = tree_flatten(tree)
    if other != treedef:
        raise ArgumentError(f"{fname}: {what} has structure {other} but {ref} has {treedef}")
    return leaves


def leaf_shape(a: Any) -> tuple:
    """The shape of a Variable, an array or a number."""
    return np.shape(getattr(a, "raw", a))


def concat_flat(ops: Ops, gs: Sequence[Variable]) -> Variable:
    """The gradients of several leaves as one flat recorded vector."""
    return ops.concatenate([ops.reshape(g, (g.size,)) for g in gs])


def split_rows(ops: Ops, nested: bool, m: Any, xs: list[Variable], i: int, tail: tuple) -> Result:
    """The rows of ``m`` (first axis: the flattened leaves ``xs``) belonging to leaf ``i``."""
    lo = sum(x.size for x in xs[:i])
    rows = slice(lo, lo + xs[i].size)
    shape = xs[i].shape + tuple(tail)
    if nested:
        return ops.reshape(ops.getitem(m, rows), shape)
    return np.array(np.asarray(getattr(m, "raw", m))[rows].reshape(shape))


def output(fname: str, ops: Ops, out: Any) -> Variable:
    """f's result as a Variable of ``ops`` (a constant result becomes a leaf with no gradient)."""
    if isinstance(out, Variable):
        if out.ops is not ops:
            raise GraphError(f"{fname}: f returned {out.name}, a Variable of another Ops; "
                             "compute the result from f's arguments")
        return out
    if not isinstance(out, (np.ndarray, np.generic, int, float)):
        raise ArgumentError(f"{fname}: f must return one Variable or array, not "
                            f"{type(out).__name__}")
    return ops.var(out, requires_grad=False)


def outputs(fname: str, ops: Ops, out: Any) -> tuple[list[Variable], TreeDef]:
    """f's result, a pytree of Variables or arrays, as its leaves (Variables) and structure."""
    leaves, treedef = tree_flatten(out)
    if not leaves:
        raise ArgumentError(f"{fname}: f returned {out!r}, which holds no array")
    return [output(fname, ops, y) for y in leaves], treedef


def scalar(fname: str, y: Variable) -> Variable:
    """``y``, checked to have one entry."""
    if y.size != 1:
        raise ShapeError(f"{fname}: f returned shape {y.shape}, not a scalar; use sg.jacobian "
                         "for the full derivative or sg.vjp for a vector-Jacobian product")
    return y


def result(nested: bool, v: Variable) -> Result:
    """``v`` itself when nested, else an array of the caller's own (see ``results``)."""
    return results(nested, [v])[0]


def results(nested: bool, vs: list) -> list[Result]:
    """The Variables themselves when nested; else arrays the caller owns (``vs`` may hold
    arrays already: a value-only sweep's gradients).

    An array the transform's own Ops computed (it owns its memory, so it is nobody's view) is
    handed over as it is, made writable; anything else (a view of an argument or a constant,
    or an array handed over already) is copied.
    """
    if nested:
        return list(vs)
    out, given = [], set()
    for v in vs:
        arr = v.raw if type(v) is Variable else v
        if type(arr) is np.ndarray and arr.base is None and id(arr) not in given:
            if not arr.flags.writeable:
                arr.flags.writeable = True
            given.add(id(arr))
            out.append(arr)
        else:
            out.append(np.array(arr))
    return out


def argnums_kind(fname: str, argnums: Any) -> bool:
    """Check argnums' type; True when it is a single int."""
    if is_int(argnums):
        return True
    if (isinstance(argnums, tuple) and argnums and all(is_int(i) for i in argnums)
            and len(set(argnums)) == len(argnums)):
        return False
    raise ArgumentError(f"{fname}: argnums must be an int or a non-empty tuple of distinct "
                        f"ints, not {argnums!r}")


def resolve(fname: str, argnums: ArgNums, nargs: int) -> tuple[int, ...]:
    """argnums as a tuple of non-negative positions, checked against the call."""
    nums = (argnums,) if is_int(argnums) else argnums
    out = []
    for i in nums:
        if not -nargs <= i < nargs:
            raise ArgumentError(f"{fname}: argnums={argnums!r} is out of range for a call with "
                                f"{nargs} positional argument(s)")
        out.append(int(i) % nargs)
    if len(set(out)) != len(out):
        raise ArgumentError(f"{fname}: argnums={argnums!r} names one argument twice")
    return tuple(out)


def is_int(i: Any) -> bool:
    """True for an int (bool excluded)."""
    return isinstance(i, (int, np.integer)) and not isinstance(i, bool)


def check_callable(fname: str, f: Any) -> None:
    """Raise ArgumentError unless ``f`` is callable."""
    if not callable(f):
        raise ArgumentError(f"{fname}: expected a function, got {type(f).__name__}")


def param_names(fn: Callable, n: int) -> list[str | None]:
    """Names for the leaves of ``trace``: fn's positional parameter names where they exist."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names: list[str | None] = [p.name for p in params if p.kind in kinds][:n]
    names = [None if re.fullmatch(r"v\d+", s) else s for s in names]  # would look like v-numbers
    return names + [None] * (n - len(names))
