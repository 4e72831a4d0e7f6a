"""Implicit functions: ``custom_root`` (JAX's ``lax.custom_root``) and ``fixed_point``,
differentiated by the implicit function theorem instead of through the solver.

A root z(theta) of F(z, theta) = 0 is recorded as ONE entry of a ``custom_jvp`` function of the
parameters theta; the solver runs on values inside its forward, so its iterations never enter
the tape. The entry's tangent rule is the implicit function theorem,
    F_z dz = -F_theta dtheta,
written with simplegrad's own transforms at the recorded root: ``jvp`` of F in theta for the
right side, the linear map u -> F_z u (a ``jvp`` in z) handed to the tangent solve. The rule
calls the root function again for the root it linearizes at, so differentiating the rule
differentiates that entry again by the same rule: second, third, ... derivatives come from the
recorded rule, in forward mode and (by its transpose, custom.py) in reverse mode.

``custom_root``'s f reads its parameters through its closure (as in JAX): they are found on the
tape by recording f once at the initial guess (the inputs of its entries that it did not
compute), and f becomes a program of (z, *parameters) (``Ops.program``), replayed on
values inside the solver and recorded on the Ops inside the rule. Under ``sg.vmap`` f may read
batched values through its closure too: f is then traced on a scratch Ops where each Variable
it reads is a leaf (loops.py's tracing of user functions), those Variables become the root's
arguments, and vmap records the root's entry once per example, as it does ``fixed_point``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine.batching import Batched
from ..engine.ops import Ops
from ..engine.reverse import as_variable
from ..engine.tape import ancestors
from ..engine.variable import Entry, Variable
from ..errors import ArgumentError
from ..pytree import tree_flatten
from .arguments import around, check_callable
from .custom import custom_jvp
from .forward import jvp
from .loops import _trace_user


def custom_root(f: Callable, initial_guess: Any, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False) -> Any:
    """A root z of ``f`` (``f(z) = 0``) found by ``solve(f, initial_guess)``, differentiable in
    whatever f reads through its closure by the implicit function theorem:
    ``tangent_solve(g, y)`` solves the linear ``g(u) = y`` (g is u -> df/dz u). With
    ``has_aux``, ``solve`` returns ``(root, aux)`` and aux is returned undifferentiated."""
    for name, fn in (("f", f), ("solve", solve), ("tangent_solve", tangent_solve)):
        _check(name, fn)
    guess = _example(initial_guess)
    ops = around()
    params, residual = ([], None) if ops is None else _closure(ops, f, guess)
    if not params:      # nothing to differentiate in: the solver's answer
        return _solved(solve, f, guess, has_aux)

    aux_box: list = []

    def forward(start: Any, *ps: Any) -> Any:
        vals = [_raw(p) for p in ps]
        out = _solved(solve, lambda z: residual(z, *vals), np.asarray(_raw(start)), has_aux)
        if has_aux:
            out, aux = out
            aux_box[:] = [aux]
        return np.asarray(out)

    root = _implicit(residual, forward, tangent_solve, "custom_root")
    z = root(_guess(initial_guess), *params)
    return (z, aux_box[0] if aux_box else None) if has_aux else z


def fixed_point(f: Callable, x0: Any, *params: Any, tol: float = 1e-10,
                max_iter: int = 1000) -> Any:
    """z with z = f(z, *params), by iterating z <- f(z, *params) from ``x0`` until successive
    iterates differ by at most ``tol`` (max-norm); differentiable in ``params`` to any order by
    the implicit function theorem (the iterations are not recorded)."""
    check_callable("fixed_point", f)
    if not (isinstance(max_iter, (int, np.integer)) and max_iter >= 1):
        raise ArgumentError(f"fixed_point: max_iter must be a positive int, not {max_iter!r}")
    def forward(start: Any, *ps: Any) -> Any:
        vals = [_raw(p) for p in ps]
        z = np.asarray(_raw(start), dtype=float)
        for _ in range(max_iter):
            new = np.asarray(_raw(f(z, *vals)), dtype=float)
            if np.shape(new) != np.shape(z):
                raise ArgumentError(f"fixed_point: f maps an iterate of shape {np.shape(z)} "
                                    f"to shape {np.shape(new)}")
            if np.max(np.abs(new - z), initial=0.0) <= tol:
                return new
            z = new
        return z

    def residual(z: Any, *ps: Any) -> Any:
        return f(z, *ps) - z

    return _implicit(residual, forward, dense_solve, "fixed_point")(_guess(x0), *params)


def dense_solve(g: Callable, y: Any) -> Any:
    """u with g(u) = y for a linear g: its matrix built column by column (g of each basis
    vector) and solved by ``np.linalg.solve`` (both recorded, so the solution differentiates
    again)."""
    shape = tuple(y.shape) if isinstance(y, Variable) else np.shape(y)
    n = int(np.prod(shape))
    basis = np.eye(n)
    cols = [np.reshape(g(basis[i].reshape(shape)), (n,)) for i in range(n)]
    a = np.stack(cols, axis=1)
    return np.reshape(np.linalg.solve(a, np.reshape(y, (n,))), shape)


# ---------------------------------------------------------------- the recorded rule


def _implicit(residual: Callable, forward: Callable, tangent_solve: Callable,
              label: str) -> Callable:
    """The root of ``residual(z, *params)`` as a function of (the solver's start, *params):
    ``forward`` computes it on values, the implicit function theorem is its tangent rule (the
    start moves nothing)."""
    def root(*ps: Any) -> Any:
        return forward(*ps)
    root.__name__ = root.__qualname__ = label
    fn = custom_jvp(root)

    @fn.defjvp
    def rule(primals: tuple, tangents: tuple) -> tuple:
        z = fn(*primals)
        ps = tuple(primals[1:])
        b = jvp(lambda *ps: residual(z, *ps), ps, tuple(tangents[1:]))[1]
        dz = tangent_solve(lambda u: jvp(lambda w: residual(w, *ps), (z,), (u,))[1], -b)
        return z, dz
    return fn


def _closure(ops: Ops, f: Callable, guess: np.ndarray) -> tuple[list[Variable], Callable]:
    """The Variables of ``ops`` that f reads through its closure and f as a function of
    (z, *those) (a program, replayed on values or recorded): f recorded once at the guess, the
    inputs of its entries that f did not compute (nor its argument). When f reads values
    batched by a vmap around the call, f is traced again on a scratch Ops where each Variable
    it reads is a leaf (one example's value of a batched one): the root's entry takes those
    batched values as arguments, and vmap records it per example."""
    probe = ops.var(guess)
    y = f(probe)
    if not isinstance(y, Variable) or y.rec is not ops:
        return [], None
    if type(y) is Batched:
        program, outdef, _, reads, _ = _trace_user("custom_root", f, [tree_flatten(guess)[1]],
                                                   [[guess]])
        if outdef.num_leaves != 1:
            raise ArgumentError(f"custom_root: f must return one array, not {outdef}")
        return reads, _replayed(program, lambda z, ps: (*ps, z), True)
    path = ancestors(y.node, probe.position)
    inside = set(path)
    inside.add(probe.node)
    seen: dict = {}     # (a leaf shares its position with the entry after it: keep the order)
    for out in path:
        for i in out.inputs:
            if type(i) is Entry and i not in inside and i.requires_grad:
                seen.setdefault(i, None)
    params = [as_variable(ops, e) for e in seen]
    return params, _replayed(ops.program([probe, *params], y), lambda z, ps: (z, *ps), False)


def _replayed(program: Any, order: Callable, listed: bool) -> Callable:
    """``residual(z, *ps)``: the program at (z, *ps) in its inputs' ``order``, recorded on the
    Ops of a Variable among them, else on values (``listed``: it gives a list of one)."""
    def residual(z: Any, *ps: Any) -> Any:
        args = order(z, ps)
        if any(isinstance(a, Variable) for a in args):
            rec = next(a.rec for a in args if isinstance(a, Variable))
            out = program.record(rec, *args)
        else:
            out = program(*args)
        return out[0] if listed else out
    return residual


def _solved(solve: Callable, f: Callable, guess: np.ndarray, has_aux: bool) -> Any:
    out = solve(f, guess)
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ArgumentError("custom_root: with has_aux=True, solve must return "
                                "(root, aux)")
        return _raw(out[0]), out[1]
    return _raw(out)


def _example(a: Any) -> np.ndarray:
    """One example's value of ``a`` (the first, when vmap batches it): where a probe starts."""
    if type(a) is Batched:
        levels = 0
        while type(a) is Batched:
            a, levels = a.inner, levels + 1
        return np.asarray(a.raw[(0,) * levels])
    return np.asarray(_raw(a))


def _guess(a: Any) -> Any:
    """The solver's start as an input of the root's entry: a Variable stays one (vmap gives
    each example its own), anything else an array; it takes no gradient."""
    return a if isinstance(a, Variable) else np.asarray(a, dtype=float)


def _raw(a: Any) -> Any:
    return a.raw if isinstance(a, Variable) else a


def _check(name: str, fn: Any) -> None:
    if not callable(fn):
        raise ArgumentError(f"custom_root: {name} must be a function, got {type(fn).__name__}")
