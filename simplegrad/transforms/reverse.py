"""Reverse mode: grad, value_and_grad, elementwise_grad and vjp, over ``Ops.grad`` (the
reverse sweep).

How a transform picks its Ops, stands for its arguments and returns its results (the nesting
rule) is told in arguments.py.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine.ops import Ops
from ..engine.params import FREE
from ..engine.reverse import gradient_values
from ..engine.variable import Variable
from ..errors import ShapeError
from ..program.core import Program, extract
from ..pytree import tree_unflatten
from .arguments import (
    ArgNums,
    Result,
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
    recording_ops,
    regroup,
    resolve,
    results,
    run_paused,
    running,
    scalar,
    split_aux,
    values_only,
)
from .conventions import (
    Convention,
    check_convention,
    check_inputs,
    check_output,
    conjugated,
    is_complex,
)

# ---------------------------------------------------------------- public transforms


def grad(f: Callable, argnums: ArgNums = 0, has_aux: bool = False, holomorphic: bool = False,
         convention: Convention = "jax") -> Callable:
    """The function computing the gradient of scalar-valued ``f`` in the ``argnums`` arguments
    (with ``has_aux``: ``(gradient, aux)``; complex inputs: conventions.py)."""
    value_and_grad_f = value_and_grad(f, argnums, has_aux, holomorphic, convention)

    @functools.wraps(f)
    def grad_f(*args: Any, **kwargs: Any) -> Any:
        value, g = value_and_grad_f(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return grad_f


def value_and_grad(f: Callable, argnums: ArgNums = 0, has_aux: bool = False,
                   holomorphic: bool = False, convention: Convention = "jax") -> Callable:
    """The function computing ``(f(*args), gradient of f in the argnums arguments)``
    (with ``has_aux``: ``((value, aux), gradient)``; complex inputs: conventions.py, JAX's
    ``dL/dx - i dL/dy`` by default, PyTorch's ``dL/dx + i dL/dy`` with ``convention="torch"``,
    ``f'(z)`` with ``holomorphic=True``)."""
    check_callable("value_and_grad", f)
    convention = check_convention("grad", convention)
    holomorphic = bool(holomorphic)
    single = argnums_kind("value_and_grad", argnums)
    has_aux = check_has_aux("value_and_grad", has_aux)

    @functools.wraps(f)
    def value_and_grad_f(*args: Any, **kwargs: Any) -> tuple[Result, Any]:
        ops, nested = context("grad", everything(args, kwargs), keep_values=False)
        if nested is None:
            return paused(ops, value_and_grad(f, argnums, has_aux, holomorphic, convention),
                          args, kwargs)
        final = nested and values_only(ops)
        with own(ops, nested):
            nums = resolve("grad", argnums, len(args))
            call, trees = primals(ops, args, nums)
            out, aux = split_aux("grad", f(*call, **kwargs), has_aux)
            y = scalar("grad", output("grad", ops, out))
            xs = flat(trees)
            check_inputs("grad", xs, holomorphic)
            check_output("grad", y, holomorphic)
            if not xs:
                gs = []
            elif nested:        # (values only: nothing can differentiate the gradient)
                gs = ops.grad(y, xs, create_graph=not final)
            else:
                gs = gradient_values(ops, y, xs, last=True)     # (its own Ops, done after)
            if xs:
                disconnected("grad", f, ops, [y])
            gs = conjugated(ops, nested, list(gs), convention)
            y, *gs = results(nested, [y, *gs])
            gs = regroup(trees, gs)
            if has_aux:
                y = (y, aux_result(nested, aux))
            return y, gs[0] if single else gs
    return value_and_grad_f


def elementwise_grad(fun: Callable, argnum: ArgNums = 0) -> Callable:
    """autograd's elementwise_grad: the gradient of ``sum(fun(*args))`` in the ``argnum``
    arguments (the vjp of a ones seed; for an elementwise ``fun``, its derivative entry by
    entry)."""
    check_callable("elementwise_grad", fun)

    @functools.wraps(fun)
    def summed(*args: Any, **kwargs: Any) -> Any:
        return np.sum(fun(*args, **kwargs))
    return grad(summed, argnum)


def vjp(f: Callable, *xs: Any, has_aux: bool = False, convention: Convention = "jax") -> tuple:
    """``(f(*xs), vjp_fn)`` where ``vjp_fn(u)`` gives one cotangent ``u^T J`` per primal
    (with ``has_aux``: ``(out, vjp_fn, aux)``).

    Primals, the output and ``u`` may be pytrees; ``u`` has the output's structure. Complex
    values: ``u J`` unconjugated (JAX's), or with ``convention="torch"`` PyTorch's
    ``conj(conj(u) J)`` (conventions.py).
    """
    check_callable("vjp", f)
    convention = check_convention("vjp", convention)
    has_aux = check_has_aux("vjp", has_aux)
    ops, nested = context("vjp", xs, borrow=False,   # its tape lives as long as vjp_fn
                          keep_values=False)
    if nested is None:
        return run_paused(ops, lambda *a: vjp(f, *a, has_aux=has_aux, convention=convention),
                          xs)
    call, trees = primals(ops, xs, range(len(xs)))
    prims = flat(trees)
    with running(ops):
        out, aux = split_aux("vjp", f(*call), has_aux)
    ys, out_def = outputs("vjp", ops, out)

    pulled: list[Program] = []      # the pullback as a program of u, made on first use

    def vjp_fn(u: Any) -> tuple:
        """The cotangents of the primals for the output cotangent ``u``."""
        us = leaves_like("vjp", "the cotangent", "f's output", out_def, u)
        if convention == "torch":       # conj(jax_vjp(conj(u)))
            us = [np.conj(uk) if is_complex(uk) else uk for uk in us]
        for y, uk in zip(ys, us):
            shape = uk.shape if isinstance(uk, Variable) else leaf_shape(uk)
            if shape != y.shape:
                raise ShapeError(f"vjp: the cotangent has shape {shape} but f's output "
                                 f"has shape {y.shape}")
        elsewhere = recording_ops("vjp", us)
        if elsewhere is not None and elsewhere is not ops and elsewhere is not FREE:
            # u is recorded by another transform (grad, vmap, ...): the pullback, linear in
            # u, is replayed there, f's values at the primals held as constants
            if not pulled:
                pulled.append(_pullback(ops, ys, prims))
            gs = pulled[0].record(elsewhere, *us)
        else:
            swept, gs = _pulled(ops, ys, us, prims, nested)
            disconnected("vjp", f, ops, [swept])
            gs = results(nested, gs)
        return regroup(trees, conjugated(ops, False, list(gs), convention))

    if not nested:      # our own tape lives as long as vjp_fn does, then is released
        weakref.finalize(vjp_fn, ops.release)
    # (copies: the tape that vjp_fn sweeps keeps these arrays)
    out = tree_unflatten(out_def, [y if nested else np.array(y.raw) for y in ys])
    return (out, vjp_fn, aux_result(nested, aux)) if has_aux else (out, vjp_fn)



def _pullback(ops: Ops, ys: list[Variable], prims: list[Variable]) -> Program:
    """The cotangents of ``prims`` as a Program of the output cotangents (one input per y)."""
    us = [ops.var(np.zeros(y.shape, y.dtype)) for y in ys]
    _, gs = _pulled(ops, ys, us, prims, True)
    return extract(us, list(gs))


def _pulled(ops: Ops, ys: list[Variable], us: list, prims: list[Variable],
            create_graph: bool) -> tuple[Variable, list]:
    """The output swept and the cotangents of ``prims`` for the output cotangents ``us``
    (several outputs: the gradient of sum_k <u_k, y_k>)."""
    if len(ys) == 1:
        return ys[0], ops.grad(ys[0], prims, seed=us[0], create_graph=create_graph)
    pairing = functools.reduce(ops.add, [ops.sum(ops.mul(y, uk)) for y, uk in zip(ys, us)])
    return pairing, ops.grad(pairing, prims, create_graph=create_graph)
