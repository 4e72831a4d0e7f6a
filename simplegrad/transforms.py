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
"""

from __future__ import annotations

import functools
import inspect
import re
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import numpy as np

from .errors import ArgumentError, GraphError, ShapeError
from .tape import Ops
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
    _check_callable("value_and_grad", f)
    single = _argnums_kind("value_and_grad", argnums)

    @functools.wraps(f)
    def value_and_grad_f(*args: Any) -> tuple[Result, Any]:
        ops, nested = _context("grad", args)
        with _own(ops, nested):
            nums = _resolve("grad", argnums, len(args))
            call, xs = _primals(ops, args, nums)
            y = _scalar("grad", _output("grad", ops, f(*call)))
            gs = ops.grad(y, xs, create_graph=nested)
            gs = tuple(_result(nested, g) for g in gs)
            return _result(nested, y), gs[0] if single else gs
    return value_and_grad_f


def vjp(f: Callable, *xs: Any) -> tuple[Result, Callable]:
    """``(f(*xs), vjp_fn)`` where ``vjp_fn(u)`` gives one cotangent ``u^T J`` per primal."""
    _check_callable("vjp", f)
    ops, nested = _context("vjp", xs)
    call, prims = _primals(ops, xs, range(len(xs)))
    y = _output("vjp", ops, f(*call))

    def vjp_fn(u: Any) -> tuple:
        """The cotangents of the primals for the output cotangent ``u``."""
        if isinstance(u, Variable) and u.ops is not ops:
            where = "its own Ops (the primals were arrays)" if not nested else "another Ops"
            raise GraphError(f"vjp: the cotangent {u.name} belongs to {where}; pass an array, "
                             "or a Variable of the primals' Ops")
        if np.shape(getattr(u, "raw", u)) != y.shape:
            raise ShapeError(f"vjp: the cotangent has shape {np.shape(getattr(u, 'raw', u))}"
                             f" but f's output has shape {y.shape}")
        gs = ops.grad(y, prims, seed=u, create_graph=nested)
        return tuple(_result(nested, g) for g in gs)
    if not nested:      # our own tape lives as long as vjp_fn does, then is released
        weakref.finalize(vjp_fn, ops.release)
    return _result(nested, y), vjp_fn


def jvp(f: Callable, xs: Sequence[Any], vs: Sequence[Any]) -> tuple[Result, Result]:
    """``(f(*xs), J v)``: the output and its tangent along the tangents ``vs`` of ``xs``."""
    _check_callable("jvp", f)
    if not isinstance(xs, (tuple, list)) or not isinstance(vs, (tuple, list)):
        raise ArgumentError("jvp: xs and vs must be tuples (one entry per argument of f), got "
                            f"{type(xs).__name__} and {type(vs).__name__}")
    if len(xs) != len(vs):
        raise ArgumentError(f"jvp: {len(xs)} primals but {len(vs)} tangents")
    for i, (x, v) in enumerate(zip(xs, vs)):
        xshape, vshape = np.shape(getattr(x, "raw", x)), np.shape(getattr(v, "raw", v))
        if xshape != vshape:
            raise ShapeError(f"jvp: tangent {i} has shape {vshape} but its primal has shape "
                             f"{xshape}")
    ops, nested = _context("jvp", (*xs, *vs))
    with _own(ops, nested):
        call, prims = _primals(ops, xs, range(len(xs)))
        y = _output("jvp", ops, f(*call))
        if not prims:
            return _result(nested, y), _result(nested, ops.zeros_like(y, nested))
        t = ops.jvp(y, prims, list(vs), create_graph=nested)
        return _result(nested, y), _result(nested, t)


def jacobian(f: Callable, argnums: ArgNums = 0,
             mode: Literal["auto", "rev", "fwd"] = "auto") -> Callable:
    """The function computing the Jacobian of ``f``, shaped ``out.shape + in.shape`` per input.

    ``rev`` builds it a row at a time with vjps, ``fwd`` a column at a time
    with jvps; ``auto`` takes ``fwd`` when the inputs have fewer entries than
    the output.
    """
    _check_callable("jacobian", f)
    single = _argnums_kind("jacobian", argnums)
    if mode not in ("auto", "rev", "fwd"):
        raise ArgumentError(f"jacobian: mode must be 'auto', 'rev' or 'fwd', not {mode!r}")

    @functools.wraps(f)
    def jacobian_f(*args: Any) -> Any:
        ops, nested = _context("jacobian", args)
        with _own(ops, nested):
            nums = _resolve("jacobian", argnums, len(args))
            call, xs = _primals(ops, args, nums)
            y = _output("jacobian", ops, f(*call))
            n_in = sum(x.size for x in xs)
            forward = mode == "fwd" or (mode == "auto" and n_in < y.size)
            jacs = _jac_fwd(ops, y, xs, nested) if forward else _jac_rev(ops, y, xs, nested)
            return jacs[0] if single else tuple(jacs)
    return jacobian_f


def hessian(f: Callable, argnums: int = 0) -> Callable:
    """The function computing the Hessian of scalar ``f``, shaped ``x.shape + x.shape``.

    Forward-over-reverse: one jvp per input entry through the recorded gradient.
    """
    _check_callable("hessian", f)
    if not _argnums_kind("hessian", argnums):
        raise ArgumentError("hessian: argnums must be one int (the Hessian of one argument)")

    @functools.wraps(f)
    def hessian_f(*args: Any) -> Result:
        ops, nested = _context("hessian", args)
        with _own(ops, nested):
            nums = _resolve("hessian", argnums, len(args))
            call, (x,) = _primals(ops, args, nums)
            y = _scalar("hessian", _output("hessian", ops, f(*call)))
            g = ops.grad(y, x, create_graph=True)
            return _jac_fwd(ops, g, [x], nested)[0]
    return hessian_f


def hvp(f: Callable, x: Any, v: Any) -> Result:
    """The Hessian-vector product H(x) v of scalar ``f``, without forming H."""
    _check_callable("hvp", f)
    xshape, vshape = np.shape(getattr(x, "raw", x)), np.shape(getattr(v, "raw", v))
    if xshape != vshape:
        raise ShapeError(f"hvp: v has shape {vshape} but x has shape {xshape}")
    ops, nested = _context("hvp", (x, v))
    with _own(ops, nested):
        call, (xv,) = _primals(ops, (x,), (0,))
        y = _scalar("hvp", _output("hvp", ops, f(*call)))
        g = ops.grad(y, xv, create_graph=True)
        return _result(nested, ops.jvp(g, xv, v, create_graph=nested))


def derivative(f: Callable, order: int = 1) -> Callable:
    """The function computing the ``order``-th derivative of ``f`` of one scalar argument.

    Repeated jvps with a unit tangent: for ``f`` acting elementwise on an
    array it gives the elementwise derivative.
    """
    _check_callable("derivative", f)
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 0:
        raise ArgumentError(f"derivative: order must be an int >= 0, not {order!r}")
    order = int(order)

    @functools.wraps(f)
    def derivative_f(x: Any) -> Result:
        ops, nested = _context("derivative", (x,))
        with _own(ops, nested):
            call, (xv,) = _primals(ops, (x,), (0,))
            y = _output("derivative", ops, f(*call))
            ones = np.ones(xv.shape, dtype=xv.dtype)
            for k in range(order):
                y = ops.jvp(y, xv, ones, create_graph=nested or k < order - 1)
            return _result(nested, y)
    return derivative_f


def trace(fn: Callable, *args: Any) -> Ops:
    """Run ``fn`` on fresh Variables holding ``args`` and return the Ops it recorded on."""
    _check_callable("trace", fn)
    ops = Ops()
    names = _param_names(fn, len(args))
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
    """One forward sweep per input entry; column j is the tangent along unit vector j."""
    jacs = []
    for x in xs:
        if y.size == 0 or x.size == 0:
            jacs.append(_zeros(ops, nested, y.shape + x.shape, y.dtype))
            continue
        cols = [ops.jvp(y, x, _unit(j, x.shape, x.dtype), create_graph=nested)
                for j in range(x.size)]
        jacs.append(_assemble(ops, nested, cols, y.ndim, y.shape + x.shape))
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

# ---------------------------------------------------------------- arguments and results


def _context(fname: str, args: Sequence[Any]) -> tuple[Ops, bool]:
    """The Ops to record on, and whether it is the caller's (some argument is a Variable)."""
    ops = first = None
    for a in args:
        if isinstance(a, Variable):
            if ops is None:
                ops, first = a.ops, a
            elif a.ops is not ops:
                raise GraphError(f"{fname}: the arguments belong to different Ops ({first.name} "
                                 f"and {a.name}); create them on one Ops, or pass arrays")
    if ops is None:
        return Ops(), False
    if not ops.recording:
        raise GraphError(f"{fname}: the Ops of {first.name} is not recording (inside no_grad); "
                         "a transform of Variables must record its derivative")
    return ops, True


@contextmanager
def _own(ops: Ops, nested: bool) -> Iterator[None]:
    """Release a transform's own Ops when it is done (results are copied out as arrays)."""
    try:
        yield
    finally:
        if not nested:
            ops.release()


def _primals(ops: Ops, args: Sequence[Any], nums: Sequence[int]) -> tuple[list, list[Variable]]:
    """The arguments to call f with, and the Variables standing for the differentiated ones."""
    call = list(args)
    xs = []
    for i in nums:
        a = args[i]
        if isinstance(a, Variable) and a.requires_grad:
            x = ops.reshape(a, a.shape)     # identity entry: see the module docstring
        else:
            x = ops.var(getattr(a, "raw", a))
        call[i] = x
        xs.append(x)
    return call, xs


def _output(fname: str, ops: Ops, out: Any) -> Variable:
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


def _scalar(fname: str, y: Variable) -> Variable:
    if y.size != 1:
        raise ShapeError(f"{fname}: f returned shape {y.shape}, not a scalar; use sg.jacobian "
                         "for the full derivative or sg.vjp for a vector-Jacobian product")
    return y


def _result(nested: bool, v: Variable) -> Result:
    return v if nested else np.array(v.raw)


def _argnums_kind(fname: str, argnums: Any) -> bool:
    """Check argnums' type; True when it is a single int."""
    if _is_int(argnums):
        return True
    if (isinstance(argnums, tuple) and argnums and all(_is_int(i) for i in argnums)
            and len(set(argnums)) == len(argnums)):
        return False
    raise ArgumentError(f"{fname}: argnums must be an int or a non-empty tuple of distinct "
                        f"ints, not {argnums!r}")


def _resolve(fname: str, argnums: ArgNums, nargs: int) -> tuple[int, ...]:
    """argnums as a tuple of non-negative positions, checked against the call."""
    nums = (argnums,) if _is_int(argnums) else argnums
    out = []
    for i in nums:
        if not -nargs <= i < nargs:
            raise ArgumentError(f"{fname}: argnums={argnums!r} is out of range for a call with "
                                f"{nargs} positional argument(s)")
        out.append(int(i) % nargs)
    if len(set(out)) != len(out):
        raise ArgumentError(f"{fname}: argnums={argnums!r} names one argument twice")
    return tuple(out)


def _is_int(i: Any) -> bool:
    return isinstance(i, (int, np.integer)) and not isinstance(i, bool)


def _check_callable(fname: str, f: Any) -> None:
    if not callable(f):
        raise ArgumentError(f"{fname}: expected a function, got {type(f).__name__}")


def _param_names(fn: Callable, n: int) -> list[str | None]:
    """Names for the leaves of ``trace``: fn's positional parameter names where they exist."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names: list[str | None] = [p.name for p in params if p.kind in kinds][:n]
    names = [None if re.fullmatch(r"v\d+", s) else s for s in names]  # would look like v-numbers
    return names + [None] * (n - len(names))
