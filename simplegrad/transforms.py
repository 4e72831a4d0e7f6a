"""Functional transforms: grad, value_and_grad, vjp, jvp, jacobian, hessian, hvp, derivative.

Every transform is a thin layer over ``Ops.grad`` (the reverse sweep) and
``Ops.jvp`` (the forward sweep), so whatever it computes is recorded by the
same primitives as any other program.

Nesting rule. If any argument is a Variable, the transform records on that
Variable's Ops and returns Variables, which an enclosing transform (or
``op.grad``) can differentiate again. Otherwise it makes its own Ops and
returns numpy arrays; nothing can differentiate those, so its outermost
derivative pass runs on values only (``create_graph=False``).

A Variable argument enters ``f`` through one identity entry,
``x.reshape(x.shape)``. Derivatives are taken with respect to that entry, so
they count only the paths through ``f``'s use of its argument and not a
closure's use of the same Variable (``grad(lambda y: x * y)(x)`` is ``x``,
not ``2 * x``). The reverse sweep stops at that entry (``Ops.grad`` never
sweeps entries older than its oldest ``wrt``), so the caller's graph is not
differentiated again.
Arguments not named by ``argnums`` reach ``f`` unchanged (arrays stay arrays).

Arguments, results, cotangents and tangents may be pytrees (nested dicts, lists and tuples;
see pytree.py): every leaf of a differentiated argument is a primal, and derivatives come back
in the argument's structure, as with JAX.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from . import batched_transforms as batched
from . import batching
from .accumulation import prefers_forward
from .errors import ArgumentError, GraphError, ShapeError
from .pytree import tree_flatten, tree_unflatten
from .sweeps import gradient_values
from .tape import Ops
from .taylor_mode import derivative_entry as taylor_derivative_entry
from .transform_args import (
    argnums_kind,
    check_callable,
    concat_flat,
    context,
    flat,
    leaf_shape,
    leaves_like,
    output,
    outputs,
    own,
    param_names,
    primals,
    regroup,
    resolve,
    result,
    results,
    scalar,
    split_rows,
)
from .variable import Variable

ArgNums = int | tuple[int, ...]
Result = Any        # a Variable when nested, a numpy array otherwise

# ---------------------------------------------------------------- public transforms


def grad(f: Callable, argnums: ArgNums = 0) -> Callable:
    """The function computing the gradient of scalar-valued ``f`` in the ``argnums`` arguments."""
    value_and_grad_f = value_and_grad(f, argnums)

    @functools.wraps(f)
    def grad_f(*args: Any) -> Any:
        return value_and_grad_f(*args)[1]
    return grad_f


def value_and_grad(f: Callable, argnums: ArgNums = 0) -> Callable:
    """The function computing ``(f(*args), gradient of f in the argnums arguments)``."""
    check_callable("value_and_grad", f)
    single = argnums_kind("value_and_grad", argnums)

    @functools.wraps(f)
    def value_and_grad_f(*args: Any) -> tuple[Result, Any]:
        if batched.has_batched(args):      # inside vmap: per-example results
            return batched.value_and_grad(f, argnums, args)
        ops, nested = context("grad", args)
        with own(ops, nested):
            nums = resolve("grad", argnums, len(args))
            call, trees = primals(ops, args, nums)
            y = scalar("grad", output("grad", ops, f(*call)))
            xs = flat(trees)
            if not xs:
                gs = []
            elif nested:
                gs = ops.grad(y, xs)
            else:
                gs = gradient_values(ops, y, xs)
            y, *gs = results(nested, [y, *gs])
            gs = regroup(trees, gs)
            return y, gs[0] if single else gs
    return value_and_grad_f


def vjp(f: Callable, *xs: Any) -> tuple[Result, Callable]:
    """``(f(*xs), vjp_fn)`` where ``vjp_fn(u)`` gives one cotangent ``u^T J`` per primal.

    Primals, the output and ``u`` may be pytrees; ``u`` has the output's structure.
    """
    check_callable("vjp", f)
    if batched.has_batched(xs):
        return batched.vjp(f, xs)
    ops, nested = context("vjp", xs, borrow=False)     # its tape lives as long as vjp_fn
    call, trees = primals(ops, xs, range(len(xs)))
    prims = flat(trees)
    ys, out_def = outputs("vjp", ops, f(*call))

    def vjp_fn(u: Any) -> tuple:
        """The cotangents of the primals for the output cotangent ``u``."""
        us = leaves_like("vjp", "the cotangent", "f's output", out_def, u)
        for y, uk in zip(ys, us):
            if isinstance(uk, Variable) and uk.ops is not ops:
                where = "its own Ops (the primals were arrays)" if not nested else "another Ops"
                raise GraphError(f"vjp: the cotangent {uk.name} belongs to {where}; pass an "
                                 "array, or a Variable of the primals' Ops")
            if leaf_shape(uk) != y.shape:
                raise ShapeError(f"vjp: the cotangent has shape {leaf_shape(uk)} but f's output "
                                 f"has shape {y.shape}")
        if len(ys) == 1:
            gs = ops.grad(ys[0], prims, seed=us[0], create_graph=nested)
        else:       # several outputs: the gradient of sum_k <u_k, y_k>
            pairing = functools.reduce(ops.add, [ops.sum(ops.mul(y, uk))
                                                 for y, uk in zip(ys, us)])
            gs = ops.grad(pairing, prims, create_graph=nested)
        return regroup(trees, results(nested, gs))
    if not nested:      # our own tape lives as long as vjp_fn does, then is released
        weakref.finalize(vjp_fn, ops.release)
    # (copies: the tape that vjp_fn sweeps keeps these arrays)
    return tree_unflatten(out_def, [y if nested else np.array(y.raw) for y in ys]), vjp_fn


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
    if batched.has_batched((*xs, *vs)):
        return batched.jvp(f, xs, vs)
    tangents = []
    for i, (x, v) in enumerate(zip(xs, vs)):
        x_leaves, x_def = tree_flatten(x)
        for xl, vl in zip(x_leaves, leaves_like("jvp", f"tangent {i}", "its primal", x_def, v)):
            if leaf_shape(xl) != leaf_shape(vl):
                raise ShapeError(f"jvp: tangent {i} has shape {leaf_shape(vl)} but its primal has "
                                 f"shape {leaf_shape(xl)}")
            tangents.append(vl)
    ops, nested = context("jvp", (*xs, *vs))
    with own(ops, nested):
        call, trees = primals(ops, xs, range(len(xs)))
        prims = flat(trees)
        ys, out_def = outputs("jvp", ops, f(*call))
        if prims:
            ts = [ops.jvp(y, prims, tangents, create_graph=nested) for y in ys]
        else:
            ts = [ops.zeros_like(y, nested) for y in ys]
        both = results(nested, [*ys, *ts])
        return (tree_unflatten(out_def, both[:len(ys)]),
                tree_unflatten(out_def, both[len(ys):]))


def jacobian(f: Callable, argnums: ArgNums = 0,
             mode: Literal["auto", "rev", "fwd"] = "auto") -> Callable:
    """The function computing the Jacobian of ``f``, shaped ``out.shape + in.shape`` per input.

    ``rev`` builds it a row at a time with vjps, ``fwd`` a column at a time
    with jvps; ``auto`` takes ``fwd`` when forward vertex elimination needs fewer
    multiplications than reverse (``sg.jacobian_cost``), else the sizes decide. With pytrees
    the result is the output's structure holding, for each output leaf, the input's structure
    (as ``jax.jacobian``).
    """
    check_callable("jacobian", f)
    single = argnums_kind("jacobian", argnums)
    if mode not in ("auto", "rev", "fwd"):
        raise ArgumentError(f"jacobian: mode must be 'auto', 'rev' or 'fwd', not {mode!r}")

    @functools.wraps(f)
    def jacobian_f(*args: Any) -> Any:
        if batched.has_batched(args):
            return batched.jacobian(f, argnums, args)
        ops, nested = context("jacobian", args)
        with own(ops, nested):
            nums = resolve("jacobian", argnums, len(args))
            call, trees = primals(ops, args, nums)
            xs = flat(trees)
            ys, out_def = outputs("jacobian", ops, f(*call))
            forward = mode == "fwd" or (mode == "auto" and prefers_forward(xs, ys))
            jac = _jac_fwd if forward else _jac_rev
            per_output = []
            for y in ys:
                jacs = regroup(trees, jac(ops, y, xs, nested))
                per_output.append(jacs[0] if single else jacs)
            return tree_unflatten(out_def, per_output)
    return jacobian_f


def hessian(f: Callable, argnums: ArgNums = 0) -> Callable:
    """The function computing the Hessian of scalar ``f``, shaped ``x.shape + x.shape``.

    Forward-over-reverse: every basis tangent pushed through the recorded gradient in one
    batched jvp sweep. For pytree
    arguments block ``[i][j]`` has shape ``x_i.shape + x_j.shape``, nested as ``jax.hessian``.
    """
    check_callable("hessian", f)
    single = argnums_kind("hessian", argnums)

    @functools.wraps(f)
    def hessian_f(*args: Any) -> Any:
        if batched.has_batched(args):
            return batched.hessian(f, argnums, args)
        ops, nested = context("hessian", args)
        with own(ops, nested):
            nums = resolve("hessian", argnums, len(args))
            call, trees = primals(ops, args, nums)
            xs = flat(trees)
            y = scalar("hessian", output("hessian", ops, f(*call)))
            gs = ops.grad(y, xs, create_graph=True)
            if len(xs) == 1:
                blocks = [[_jac_fwd(ops, gs[0], xs, nested)[0]]]
            else:
                g = concat_flat(ops, gs)
                cols = [_jac_fwd(ops, g, [x], nested)[0] for x in xs]
                blocks = [[split_rows(ops, nested, c, xs, i, xj.shape) for c, xj in zip(cols, xs)]
                          for i in range(len(xs))]
            rows = [regroup(trees, row) for row in blocks]
            rows = [r[0] if single else r for r in rows]
            out = regroup(trees, rows)
            return out[0] if single else out
    return hessian_f


def hvp(f: Callable, *xv: Any) -> Any:
    """The Hessian-vector product H(x) v of scalar ``f``, without forming H.

    ``hvp(f, x, v)`` computes it; ``hvp(f)`` is the function ``(x, v) -> H(x) v``. ``x``
    may be a pytree (a dict of parameters, say) and ``v`` then has the same structure.
    """
    check_callable("hvp", f)
    if not xv:
        @functools.wraps(f)
        def hvp_f(x: Any, v: Any) -> Any:
            return _hvp(f, x, v)
        return hvp_f
    if len(xv) != 2:
        raise ArgumentError(f"hvp: call it as hvp(f, x, v) or hvp(f)(x, v), not with "
                            f"{len(xv)} argument(s) after f")
    return _hvp(f, *xv)


def _hvp(f: Callable, x: Any, v: Any) -> Any:
    if batched.has_batched((x, v)):
        return batched.hvp(f, x, v)
    x_leaves, x_def = tree_flatten(x)
    vs = leaves_like("hvp", "v", "x", x_def, v)
    for xl, vl in zip(x_leaves, vs):
        if leaf_shape(xl) != leaf_shape(vl):
            raise ShapeError(f"hvp: v has shape {leaf_shape(vl)} but x has shape {leaf_shape(xl)}")
    ops, nested = context("hvp", (x, v))
    with own(ops, nested):
        call, trees = primals(ops, (x,), (0,))
        xs = flat(trees)
        y = scalar("hvp", output("hvp", ops, f(*call)))
        # reverse over forward: H v is the gradient of the directional derivative <grad f, v>;
        # tangents given as arrays are leaves that need no gradient of their own
        ts = [t if isinstance(t, Variable) else ops.var(getattr(t, "raw", t),
                                                        requires_grad=False) for t in vs]
        d = ops.jvp(y, xs, ts, create_graph=True)
        hs = ops.grad(d, xs, create_graph=nested)
        return tree_unflatten(x_def, results(nested, hs))


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
        if batched.has_batched((x,)):
            return batched.derivative(f, order, x)
        ops, nested = context("derivative", (x,))
        with own(ops, nested):
            call, trees = primals(ops, (x,), (0,))
            (xv,) = flat(trees)
            y = output("derivative", ops, f(*call))
            if order > 1:
                d = taylor_derivative_entry(ops, y, xv, order, nested)
                if d is not None:
                    return result(nested, d)
            ones = np.ones(xv.shape, dtype=xv.dtype)
            for k in range(order):
                y = ops.jvp(y, xv, ones, create_graph=nested or k < order - 1)
            return result(nested, y)
    return derivative_f


def trace(fn: Callable, *args: Any) -> Ops:
    """Run ``fn`` on fresh Variables holding ``args`` and return the Ops it recorded on."""
    check_callable("trace", fn)
    ops = Ops()
    names = param_names(fn, len(args))
    fn(*[ops.var(getattr(a, "raw", a), name=n) for a, n in zip(args, names)])
    return ops

# ---------------------------------------------------------------- Jacobians


def _jac_rev(ops: Ops, y: Variable, xs: list[Variable], nested: bool) -> list[Result]:
    """One reverse sweep per output entry; row k is the gradient of y[k]."""
    if y.size == 0 or any(x.size == 0 for x in xs):
        return [_zeros(ops, nested, y.shape + x.shape, y.dtype) for x in xs]
    rows: list[list[Variable]] = [[] for _ in xs]
    for k in range(y.size):
        seed = _unit(k, y.shape, y.dtype)
        for row, g in zip(rows, ops.grad(y, xs, seed=seed, create_graph=nested)):
            row.append(g)
    return [_assemble(ops, nested, row, 0, y.shape + x.shape) for row, x in zip(rows, xs)]


def _jac_fwd(ops: Ops, y: Variable, xs: list[Variable], nested: bool) -> list[Result]:
    """Per input, every basis tangent pushed through one batched forward sweep (batching.py)."""
    jacs = []
    for x in xs:
        if y.size == 0 or x.size == 0:
            jacs.append(_zeros(ops, nested, y.shape + x.shape, y.dtype))
            continue
        jacs.append(result(nested, batching.jacobian_fwd_batched(ops, y, x)))
    return jacs


def _assemble(ops: Ops, nested: bool, parts: list[Variable], axis: int, shape: tuple) -> Result:
    """Stack rows (axis 0) or columns (last axis) and give the Jacobian its full shape."""
    if nested:
        return ops.reshape(ops.stack(parts, axis=axis), shape)
    return np.stack([p.raw for p in parts], axis=axis).reshape(shape)


def _unit(k: int, shape: tuple, dtype: np.dtype) -> np.ndarray:
    e = np.zeros(int(np.prod(shape)), dtype=dtype)
    e[k] = 1
    return e.reshape(shape)


def _zeros(ops: Ops, nested: bool, shape: tuple, dtype: np.dtype) -> Result:
    z = np.zeros(shape, dtype=dtype)
    return ops.var(z, requires_grad=False) if nested else z

