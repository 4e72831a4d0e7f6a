"""Transforms called on Batched arguments (inside ``sg.vmap``): per-example derivatives.

Examples are independent, so a derivative of the batched program taken on the stacked values
gives every example's derivative at once. The transforms in transforms.py hand a call with a
Batched argument here; the same transform runs on the stacked values (``_lift`` makes the
function of stacks that f computes example by example), and its results are wrapped again.
Differentiated arguments shared by the examples enter expanded along the batch (a zero-stride
view), so each example gets its own derivative.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import transforms
from .batching import FINAL, Batched, is_int, wrap
from .errors import ArgumentError, ShapeError
from .transform_args import primal, resolve
from .variable import Variable

_INSIDE = threading.local()     # depth: how many batched transforms are running f here


def has_batched(args: Sequence[Any]) -> bool:
    """True when some argument is a Batched (a transform called inside vmap)."""
    return any(type(a) is Batched for a in args)


def _top(args: Sequence[Any]) -> tuple[int, int, Any]:
    """The highest level among the Batched arguments, its batch size and Ops."""
    top = max((a for a in args if type(a) is Batched), key=lambda a: a.level)
    return top.level, top.batch, top.ops


def _stacked(ops: Any, a: Any, level: int, n: int) -> Any:
    """The batch behind ``a``: its inner value at ``level``, or a shared value expanded along
    the batch (a zero-stride view: differentiating in it gives each example its own cotangent,
    and nothing is copied)."""
    if type(a) is Batched and a.level == level:
        return a.inner
    if not isinstance(a, Variable):
        a = ops.var(a)
    return ops.expand(a, (n,) + a.shape)


def _lift(f: Callable, args: Sequence[Any], nums: Sequence[int], level: int, n: int,
          ops: Any) -> Callable:
    """The function of the stacks of arguments ``nums`` that f computes example by example."""
    def lifted(*stacks: Any) -> Any:
        call = list(args)
        for i, s in zip(nums, stacks):
            call[i] = wrap(s, level)
        _INSIDE.depth = getattr(_INSIDE, "depth", 0) + 1
        try:
            out = f(*call)
        finally:
            _INSIDE.depth -= 1
        if isinstance(out, Variable) or not isinstance(out, (tuple, list)):
            return _stacked(ops, out, level, n)
        raise ArgumentError("grad under vmap: f must return one Variable or array")
    return lifted


def _summed(g: Callable, ops: Any, what: str) -> Callable:
    """The sum over examples of a lifted scalar function (its Hessian is block diagonal)."""
    def total(*stacks: Any) -> Any:
        y = g(*stacks)
        _check_scalar(what, y)
        return ops.sum(y)
    return total


def _check_scalar(what: str, y: Any) -> None:
    if int(np.prod(y.shape[1:])) != 1:
        raise ShapeError(f"{what}: f returned shape {tuple(y.shape[1:])} per example, not a "
                         "scalar")


def value_and_grad(f: Callable, argnums: Any, args: Sequence[Any]) -> tuple:
    """``value_and_grad(f, argnums)(*args)`` with Batched arguments: per-example results."""
    level, n, ops = _top(args)
    nums = resolve("grad", argnums, len(args))
    stacks = [_stacked(ops, args[i], level, n) for i in nums]
    lifted = _lift(f, args, nums, level, n, ops)
    if level in FINAL and not getattr(_INSIDE, "depth", 0) and all(
            type(s) is Variable for s in stacks):
        # nothing can differentiate the gradient (vmap's own Ops, no transform around this
        # one): one reverse sweep on values, as sg.grad of arrays does
        prims = [primal(ops, s) for s in stacks]
        y = lifted(*prims)
        _check_scalar("grad", y)
        gs = ops.grad(y, prims, seed=np.ones(y.shape, y.dtype), create_graph=False)
    else:
        y, pull = transforms.vjp(lifted, *stacks)
        _check_scalar("grad", y)
        gs = pull(np.ones(y.shape, y.dtype))
    gs = tuple(wrap(g, level) for g in gs)
    return wrap(y, level), gs[0] if is_int(argnums) else gs


def vjp(f: Callable, xs: Sequence[Any]) -> tuple:
    """``vjp(f, *xs)`` with Batched primals: the output, and a vjp_fn taking batched cotangents."""
    level, n, ops = _top(xs)
    nums = range(len(xs))
    y, pull = transforms.vjp(_lift(f, xs, nums, level, n, ops),
                             *[_stacked(ops, x, level, n) for x in xs])

    def vjp_fn(u: Any) -> tuple:
        """The cotangents of the primals (per example) for the cotangent ``u``."""
        return tuple(wrap(c, level) for c in pull(_stacked(ops, u, level, n)))
    return wrap(y, level), vjp_fn


def jvp(f: Callable, xs: Sequence[Any], vs: Sequence[Any]) -> tuple:
    """``jvp(f, xs, vs)`` with Batched primals or tangents: per-example output and tangent."""
    level, n, ops = _top((*xs, *vs))
    y, t = transforms.jvp(_lift(f, xs, range(len(xs)), level, n, ops),
                          [_stacked(ops, x, level, n) for x in xs],
                          [_stacked(ops, v, level, n) for v in vs])
    return wrap(y, level), wrap(t, level)


def hvp(f: Callable, x: Any, v: Any) -> Batched:
    """``hvp(f, x, v)`` with Batched arguments: each example's Hessian-vector product."""
    level, n, ops = _top((x, v))
    total = _summed(_lift(f, (x,), (0,), level, n, ops), ops, "hvp")
    return wrap(transforms.hvp(total, _stacked(ops, x, level, n), _stacked(ops, v, level, n)),
                level)


def derivative(f: Callable, order: int, x: Any) -> Batched:
    """``derivative(f, order)(x)`` with a Batched x: each example's derivative."""
    level, n, ops = _top((x,))
    g = _lift(f, (x,), (0,), level, n, ops)
    return wrap(transforms.derivative(g, order)(x.inner), level)


def jacobian(f: Callable, argnums: Any, args: Sequence[Any]) -> Any:
    """``jacobian(f, argnums)(*args)`` with Batched arguments: each example's Jacobian, a row
    per output entry (one reverse sweep each over the whole batch)."""
    level, n, ops = _top(args)
    nums = resolve("jacobian", argnums, len(args))
    stacks = [_stacked(ops, args[i], level, n) for i in nums]
    y, pull = transforms.vjp(_lift(f, args, nums, level, n, ops), *stacks)
    out = tuple(y.shape[1:])
    rows: list[list] = [[] for _ in nums]
    for k in range(int(np.prod(out))):
        seed = np.zeros((n, int(np.prod(out))), dtype=y.dtype)
        seed[:, k] = 1
        for row, c in zip(rows, pull(seed.reshape(y.shape))):
            row.append(c)
    jacs = []
    for row, s in zip(rows, stacks):
        shape = (n,) + out + tuple(s.shape[1:])
        jacs.append(wrap(ops.reshape(ops.stack(row, axis=1), shape) if row else
                         ops.var(np.zeros(shape), requires_grad=False), level))
    return jacs[0] if is_int(argnums) else tuple(jacs)


def hessian(f: Callable, argnums: int, args: Sequence[Any]) -> Batched:
    """``hessian(f, argnums)(*args)`` with Batched arguments: each example's Hessian, a column
    per entry of the argument (one Hessian-vector product each over the whole batch)."""
    if not is_int(argnums):
        raise ArgumentError("hessian under vmap: argnums must be one int")
    level, n, ops = _top(args)
    (i,) = resolve("hessian", argnums, len(args))
    x = _stacked(ops, args[i], level, n)
    total = _summed(_lift(f, args, (i,), level, n, ops), ops, "hessian")
    per = tuple(x.shape[1:])
    size = int(np.prod(per))
    cols = []
    for j in range(size):
        e = np.zeros((n, size), dtype=x.dtype)
        e[:, j] = 1
        cols.append(transforms.hvp(total, x, e.reshape(x.shape)))
    return wrap(ops.reshape(ops.stack(cols, axis=-1), (n,) + per + per), level)
