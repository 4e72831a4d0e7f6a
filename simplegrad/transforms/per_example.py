"""Transforms called inside a running ``sg.vmap``: per-example derivatives.

Examples are independent, so a derivative of the batched program taken on the stacked values
gives every example's derivative at once. The transforms (reverse.py, forward.py,
jacobians.py) hand a call made while a vmap's f runs here (``has_batched``), passing the
transform it runs again on the stacked values as the first argument
(``_lift`` makes the function of stacks that f computes example by example, with the
arguments it does not differentiate and any closure as they are), and its results are wrapped
again. While it runs on the stacks, a plain frame of the vmap's Ops is the innermost of the
stack of running transforms (arguments.py), so that call is the ordinary transform; f itself
runs under a vmap frame again, so transforms inside it are per example in their turn.
Differentiated arguments shared by the examples enter expanded along the batch (a zero-stride
view), so each example gets its own derivative.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..engine.batched import FINAL, Batched, is_int, wrap
from ..engine.ops import Ops
from ..engine.variable import Variable
from ..errors import ArgumentError, ShapeError
from ..pytree import tree_flatten, tree_leaves, tree_unflatten
from .arguments import inside, mapping, primal, resolve, running
from .vmap import leafwise


def has_batched(args: Sequence[Any]) -> bool:
    """True inside the f of a running vmap: every transform called there is per example,
    whether the batched values reach f's arguments or only a closure (``args`` are not
    needed)."""
    return mapping() is not None


def _top() -> tuple[int, int, Any]:
    """The innermost running vmap's level, batch size and Ops."""
    return mapping()


def _stack(ops: Ops, tree: Any, level: int, n: int) -> Any:
    """``_stacked`` leaf by leaf."""
    return leafwise(lambda a: _stacked(ops, a, level, n), tree)


def _wrap(tree: Any, level: int) -> Any:
    """Each leaf (a batch) wrapped as a Batched at ``level``."""
    return leafwise(lambda v: wrap(v, level), tree)


def _stacked(ops: Ops, a: Any, level: int, n: int) -> Any:
    """The batch behind ``a``: its inner value at ``level``, or a shared value expanded along
    the batch (a zero-stride view: differentiating in it gives each example its own cotangent,
    and nothing is copied)."""
    if type(a) is Batched and a.level == level:
        return a.inner
    if not isinstance(a, Variable):
        a = ops.var(a)
    return ops.expand(a, (n,) + a.shape)


def _lift(f: Callable, args: Sequence[Any], nums: Sequence[int], level: int, n: int,
          ops: Ops) -> Callable:
    """The function of the stacks of arguments ``nums`` that f computes example by example."""
    def lifted(*stacks: Any) -> Any:
        call = list(args)
        for i, s in zip(nums, stacks):
            call[i] = _wrap(s, level)
        # f runs per example again, marked as inside a per-example transform (``inside``)
        with running(ops, hides=level), running(ops, (level, n)):
            out = f(*call)
        return _stack(ops, out, level, n)
    return lifted


def _summed(g: Callable, ops: Ops) -> Callable:
    """The sum over examples of a lifted scalar function (its Hessian is block diagonal)."""
    def total(*stacks: Any) -> Any:
        return ops.sum(_scalar(g(*stacks)))
    return total


def _no_trees(what: str, args: Sequence[Any]) -> None:
    if any(isinstance(a, (dict, list, tuple)) for a in args):
        raise ArgumentError(f"{what} under vmap: differentiate arrays, not pytrees (use grad, "
                            "vjp, jvp or hvp for a pytree of parameters)")


def _scalar(y: Any) -> Any:
    """y, checked to be one Variable holding a scalar per example."""
    if not isinstance(y, Variable) or int(np.prod(y.shape[1:])) != 1:
        shape = tuple(y.shape[1:]) if isinstance(y, Variable) else type(y).__name__
        raise ShapeError(f"grad under vmap: f returned {shape} per example, not a scalar")
    return y


def value_and_grad(vjp: Callable, f: Callable, argnums: Any, args: Sequence[Any]) -> tuple:
    """``value_and_grad(f, argnums)(*args)`` with Batched arguments: per-example results."""
    level, n, ops = _top()
    nums = resolve("grad", argnums, len(args))
    stacks = [_stack(ops, args[i], level, n) for i in nums]
    lifted = _lift(f, args, nums, level, n, ops)
    leaves, treedef = (stacks, None) if all(type(s) is Variable for s in stacks) else \
        tree_flatten(stacks)
    if level in FINAL and not inside(ops) and all(
            type(s) is Variable for s in leaves):
        # nothing can differentiate the gradient (vmap's own Ops, no transform around this
        # one): one reverse sweep on values, as sg.grad of arrays does
        prims = [primal(ops, s) for s in leaves]
        y = _scalar(lifted(*(prims if treedef is None else tree_unflatten(treedef, prims))))
        gs = ops.grad(y, prims, seed=np.ones(y.shape, y.dtype), create_graph=False)
        gs = gs if treedef is None else tree_unflatten(treedef, gs)
    else:
        with running(ops, hides=level):
            y, pull = vjp(lifted, *stacks)
        gs = pull(np.ones(_scalar(y).shape, y.dtype))
    gs = tuple(_wrap(g, level) for g in gs)
    return wrap(y, level), gs[0] if is_int(argnums) else gs


def vjp(vjp: Callable, f: Callable, xs: Sequence[Any]) -> tuple:
    """``vjp(f, *xs)`` with Batched primals: the output, and a vjp_fn taking batched cotangents."""
    level, n, ops = _top()
    with running(ops, hides=level):
        y, pull = vjp(_lift(f, xs, range(len(xs)), level, n, ops),
                                 *[_stack(ops, x, level, n) for x in xs])

    def vjp_fn(u: Any) -> tuple:
        """The cotangents of the primals (per example) for the cotangent ``u``."""
        with running(ops, hides=level):
            return tuple(_wrap(c, level) for c in pull(_stack(ops, u, level, n)))
    return _wrap(y, level), vjp_fn


def jvp(jvp: Callable, f: Callable, xs: Sequence[Any], vs: Sequence[Any]) -> tuple:
    """``jvp(f, xs, vs)`` with Batched primals or tangents: per-example output and tangent."""
    level, n, ops = _top()
    with running(ops, hides=level):
        y, t = jvp(_lift(f, xs, range(len(xs)), level, n, ops),
                   [_stack(ops, x, level, n) for x in xs],
                   [_stack(ops, v, level, n) for v in vs])
    if not any(_at(x, level) for x in tree_leaves(list(xs))):
        # only the tangents are batched: the output is f at shared primals, the same for
        # every example unless f reads a batched value through a closure (vmap's out_axes=None)
        same = f(*[leafwise(lambda a: a if isinstance(a, Variable) else ops.var(a), x)
                   for x in xs])
        if not any(_at(v, level) for v in tree_leaves(same)):
            return same, _wrap(t, level)
    return _wrap(y, level), _wrap(t, level)


def _at(a: Any, level: int) -> bool:
    """Whether ``a`` is batched at ``level``."""
    return type(a) is Batched and a.level == level


def hvp(hvp: Callable, f: Callable, x: Any, v: Any) -> Any:
    """``hvp(f, x, v)`` with Batched arguments: each example's Hessian-vector product."""
    level, n, ops = _top()
    total = _summed(_lift(f, (x,), (0,), level, n, ops), ops)
    with running(ops, hides=level):
        return _wrap(hvp(total, _stack(ops, x, level, n), _stack(ops, v, level, n)),
                     level)


def derivative(derivative: Callable, f: Callable, order: int, x: Any) -> Batched:
    """``derivative(f, order)(x)`` with a Batched x: each example's derivative."""
    level, n, ops = _top()
    g = _lift(f, (x,), (0,), level, n, ops)
    with running(ops, hides=level):
        return wrap(derivative(g, order)(_stacked(ops, x, level, n)), level)


def taylor(taylor: Callable, f: Callable, x: Any, v: Any, order: int) -> list:
    """``taylor(f, x, v, order)`` inside vmap: each example's coefficients (x, v or a closure
    batched)."""
    level, n, ops = _top()
    g = _lift(f, (x,), (0,), level, n, ops)
    with running(ops, hides=level):
        coefs = taylor(g, _stacked(ops, x, level, n), _stacked(ops, v, level, n), order)
    return [wrap(c, level) for c in coefs]


def jacobian(vjp: Callable, f: Callable, argnums: Any, args: Sequence[Any]) -> Any:
    """``jacobian(f, argnums)(*args)`` with Batched arguments: each example's Jacobian, a row
    per output entry (one reverse sweep each over the whole batch)."""
    level, n, ops = _top()
    nums = resolve("jacobian", argnums, len(args))
    _no_trees("jacobian", [args[i] for i in nums])
    stacks = [_stacked(ops, args[i], level, n) for i in nums]
    with running(ops, hides=level):
        y, pull = vjp(_lift(f, args, nums, level, n, ops), *stacks)
    if not isinstance(y, Variable):
        raise ArgumentError("jacobian under vmap: f must return one array, not a pytree")
    out = tuple(y.shape[1:])
    rows: list[list] = [[] for _ in nums]
    for k in range(int(np.prod(out))):
        seed = np.zeros((n, int(np.prod(out))), dtype=y.dtype)
        seed[:, k] = 1
        with running(ops, hides=level):
            cs = pull(seed.reshape(y.shape))
        for row, c in zip(rows, cs):
            row.append(c)
    jacs = []
    for row, s in zip(rows, stacks):
        shape = (n,) + out + tuple(s.shape[1:])
        jacs.append(wrap(ops.reshape(ops.stack(row, axis=1), shape) if row else
                         ops.var(np.zeros(shape), requires_grad=False), level))
    return jacs[0] if is_int(argnums) else tuple(jacs)


def hessian(hvp: Callable, f: Callable, argnums: int, args: Sequence[Any]) -> Batched:
    """``hessian(f, argnums)(*args)`` with Batched arguments: each example's Hessian, a column
    per entry of the argument (one Hessian-vector product each over the whole batch)."""
    if not is_int(argnums):
        raise ArgumentError("hessian under vmap: argnums must be one int")
    level, n, ops = _top()
    (i,) = resolve("hessian", argnums, len(args))
    _no_trees("hessian", [args[i]])
    x = _stacked(ops, args[i], level, n)
    total = _summed(_lift(f, args, (i,), level, n, ops), ops)
    per = tuple(x.shape[1:])
    size = int(np.prod(per))
    cols = []
    for j in range(size):
        e = np.zeros((n, size), dtype=x.dtype)
        e[:, j] = 1
        with running(ops, hides=level):
            cols.append(hvp(total, x, e.reshape(x.shape)))
    return wrap(ops.reshape(ops.stack(cols, axis=-1), (n,) + per + per), level)
