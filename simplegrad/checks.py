"""Gradient checks: recorded derivatives against float64 central finite differences.

``check_grads`` compares, at every order up to ``order``, the reverse-mode
gradient (``op.grad``) and the forward-mode tangent (``op.jvp``) of a function
of Variables with central differences of its values. An order-k check runs
the order-1 check on the derivative function recorded with create_graph=True,
which is itself a function of Variables: reverse, (x, u) -> grad of <u, f(x)>;
forward, (x, v) -> jvp of f along v. The cotangent u and the tangent v are
arguments of the derivative function, so its derivatives with respect to them
are checked too: a rule that freezes the VALUE of its cotangent (or tangent)
is right at order 1 and caught at order 2, as is one that freezes the value of
an input. A rule that is right at order 1 but wrong when differentiated again
fails with a message naming "order 2". Each mode is
checked on both paths of the sweeps: recorded (create_graph=True) and value-only
(create_graph=False). Cotangents u and tangents v are standard normal draws from
``rng`` (a generator seeded with 0 when none is given, so failures reproduce).

Complex arguments and outputs are checked in JAX's convention (transforms/conventions.py):
the pairing is ``Re(sum(u * y))`` and the gradient of that real pairing in a complex argument
is compared with ``d/dx - i d/dy``, central differences in both real directions; cotangents
and tangents of complex values are complex normal draws.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .engine.ops import Ops
from .engine.variable import Variable
from .errors import ArgumentError, GradientCheckError
from .pytree import is_node, tree_flatten, tree_leaves, tree_unflatten
from .transforms.arguments import running

MODES = ("rev", "fwd")


# ---------------------------------------------------------------- public checks

def check_grads(f: Callable[..., Any], args: Sequence[Any], order: int = 2,
                modes: Sequence[str] = MODES, eps: float = 1e-6, atol: float = 1e-5,
                rtol: float = 1e-5, rng: np.random.Generator | None = None) -> None:
    """Check f's rev and fwd derivatives up to ``order`` against central differences."""
    modes = _modes(modes)
    if not isinstance(order, (int, np.integer)) or order < 1:
        raise ArgumentError(f"check_grads: order must be a positive int, got {order!r}")
    f, args = _on_leaves(f, args)
    xs = _arrays("check_grads", args)
    rng = np.random.default_rng(0) if rng is None else rng
    _check(f, xs, [f"argument {i}" for i in range(len(xs))], int(order), modes,
           _Tol(eps, atol, rtol), rng, ())


def check_jvp_vjp_consistency(f: Callable[..., Any], args: Sequence[Any],
                              rng: np.random.Generator | None = None,
                              atol: float = 1e-8, rtol: float = 1e-8) -> None:
    """Check <u, J v> from op.jvp equals <J^T u, v> from op.grad for random u and v."""
    xs = _arrays("check_jvp_vjp_consistency", args)
    rng = np.random.default_rng(0) if rng is None else rng
    op = Ops()
    ws = [op.var(x) for x in xs]
    outs = _run(f, ws)
    us = [_normal(rng, y.shape, y.dtype) for y in outs]
    vs = [_normal(rng, x.shape, x.dtype) for x in xs]
    grads = op.grad(_pairing(op, outs, us), ws, create_graph=False)
    vjp_side = sum(float(np.real(np.sum(g.value * v))) for g, v in zip(grads, vs))
    jvp_side = sum(float(np.real(np.sum(u * op.jvp(y, ws, vs, create_graph=False).value)))
                   for y, u in zip(outs, us))
    if abs(jvp_side - vjp_side) > atol + rtol * abs(vjp_side):
        raise GradientCheckError(
            f"jvp and vjp disagree: <u, J v> = {jvp_side!r} (op.jvp) but <J^T u, v> = "
            f"{vjp_side!r} (op.grad), difference {abs(jvp_side - vjp_side):.3g}; arguments "
            f"with shapes {_shapes(xs)}, outputs with shapes {_shapes(outs)}; "
            f"tolerances atol={atol:g}, rtol={rtol:g}")


# ---------------------------------------------------------------- the recursion

class _Tol:
    __slots__ = ("eps", "atol", "rtol")

    def __init__(self, eps: float, atol: float, rtol: float):
        self.eps, self.atol, self.rtol = float(eps), float(atol), float(rtol)


def _check(f: Callable, xs: list[np.ndarray], labels: list[str], order: int, modes: tuple,
           tol: _Tol, rng: np.random.Generator, path: tuple) -> None:
    """The order-1 checks of f in each mode, then the same on each derivative function.

    The derivative function of mode rev takes (x, u), that of mode fwd (x, v): the cotangents
    and tangents are differentiated at the next order like the arguments.
    """
    outs = _evaluate(f, xs)
    n = len(xs)
    for mode in modes:
        if mode == "rev":
            us = [_normal(rng, y.shape, y.dtype) for y in outs]
            _check_rev(f, xs, labels, us, tol, path)
            derivative = _vjp_function(f, n)
            extra, extra_labels = us, [f"the cotangent of output {k}" for k in range(len(us))]
        else:
            vs = [_normal(rng, x.shape, x.dtype) for x in xs]
            _check_fwd(f, xs, labels, vs, tol, path)
            derivative = _jvp_function(f, n)
            extra, extra_labels = vs, [f"the tangent of argument {i}" for i in range(n)]
        if order > 1:
            new = [f"argument {n + k} ({text})" for k, text in enumerate(extra_labels)]
            _check(derivative, xs + extra, labels + new, order - 1, modes, tol, rng,
                   path + (mode,))


def _vjp_function(f: Callable, n: int) -> Callable:
    """(x, u) -> gradient of <u, f(x)> with respect to every x, recorded (u is a Variable too)."""
    def vjp_of_f(*ws: Variable) -> tuple:
        op = ws[0].rec
        xs, us = list(ws[:n]), list(ws[n:])
        return tuple(op.grad(_pairing(op, _run(f, xs), us), xs))
    return vjp_of_f


def _jvp_function(f: Callable, n: int) -> Callable:
    """(x, v) -> tangent of each output of f along v, recorded (v is a Variable too)."""
    def jvp_of_f(*ws: Variable) -> tuple:
        op = ws[0].rec
        xs, vs = list(ws[:n]), list(ws[n:])
        return tuple(op.jvp(y, xs, vs) for y in _run(f, xs))
    return jvp_of_f


def _check_rev(f: Callable, xs: list[np.ndarray], labels: list[str], us: list[np.ndarray],
               tol: _Tol, path: tuple) -> None:
    """op.grad of <u, f(x)> (recorded and value-only) against its central differences."""
    op = Ops()
    ws = [op.var(x) for x in xs]
    outs = _run(f, ws)
    s = _pairing(op, outs, us)
    recorded = [g.value for g in op.grad(s, ws)]
    plain = [g.value for g in op.grad(s, ws, create_graph=False)]

    def pairing(arrays: list[np.ndarray]) -> float:
        return sum(float(np.real(np.sum(y * u))) for y, u in zip(_evaluate(f, arrays), us))

    for i, x in enumerate(xs):
        numeric = np.zeros(x.shape, x.dtype)
        for j in np.ndindex(x.shape):
            numeric[j] = _central(pairing, xs, i, _unit(x.shape, j), tol.eps)[0]
            if x.dtype.kind == "c":     # JAX's convention: d/dx - i d/dy
                numeric[j] -= 1j * _central(pairing, xs, i, 1j * _unit(x.shape, j), tol.eps)[0]
        for mode, analytic in (("rev", recorded[i]), ("rev, create_graph=False", plain[i])):
            _compare(analytic, numeric, tol, path, mode,
                     f"{labels[i]} with shape {x.shape}", xs, outs)


def _check_fwd(f: Callable, xs: list[np.ndarray], labels: list[str], vs: list[np.ndarray],
               tol: _Tol, path: tuple) -> None:
    """op.jvp along v, one argument at a time (recorded and value-only), against differences."""
    op = Ops()
    ws = [op.var(x) for x in xs]
    outs = _run(f, ws)
    for i, x in enumerate(xs):
        numeric = _central(lambda arrays: _evaluate(f, arrays), xs, i, vs[i], tol.eps)
        for k, y in enumerate(outs):
            for mode, cg in (("fwd", True), ("fwd, create_graph=False", False)):
                analytic = op.jvp(y, [ws[i]], [vs[i]], create_graph=cg).value
                _compare(analytic, numeric[k], tol, path, mode,
                         f"{labels[i]} with shape {x.shape} (tangent along it), "
                         f"output {k} with shape {y.shape}", xs, outs)


# ---------------------------------------------------------------- helpers

def _on_leaves(f: Callable, args: Sequence[Any]) -> tuple[Callable, Sequence[Any]]:
    """f of pytree arguments and results (dicts, lists, tuples of arrays) on their leaves.

    A list or tuple of plain numbers (nested or not) stays one array argument, as before.
    """
    if not isinstance(args, (list, tuple)):
        return f, args
    if all(_numbers(a) for a in args):
        leaves, rebuild = args, list
    else:
        leaves, treedef = tree_flatten(list(args))
        rebuild = functools.partial(tree_unflatten, treedef)

    def on_leaves(*ws: Variable) -> Any:
        out = f(*rebuild(ws))
        return out if isinstance(out, Variable) else tuple(tree_leaves(out))
    return on_leaves, leaves


def _numbers(a: Any) -> bool:
    if isinstance(a, (list, tuple)):
        return all(not isinstance(b, np.ndarray) and _numbers(b) for b in a)
    return a is not None and not is_node(a)     # (a dict or a registered class: a tree)


def _modes(modes: Sequence[str]) -> tuple:
    modes = (modes,) if isinstance(modes, str) else tuple(modes)
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ArgumentError(f"check_grads: modes must be a non-empty selection of {MODES}, "
                            f"got {modes!r}")
    return modes


def _arrays(who: str, args: Sequence[Any]) -> list[np.ndarray]:
    if isinstance(args, np.ndarray) or not isinstance(args, (list, tuple)):
        raise ArgumentError(f"{who}: args must be a list or tuple of arrays, one per argument "
                            f"of f, got {type(args).__name__}")
    if not args:
        raise ArgumentError(f"{who}: f needs at least one argument to differentiate")
    return [np.array(a, dtype=_dtype(a)) for a in args]


def _dtype(a: Any) -> type:
    """float64, or complex128 for complex values."""
    return np.complex128 if np.iscomplexobj(a) else np.float64


def _run(f: Callable, ws: list[Variable]) -> list[Variable]:
    """f's outputs at the Variables ``ws``, with their Ops around f (so transforms inside f,
    closures included, record there)."""
    with running(ws[0].rec):
        return _outputs(f(*ws))


def _outputs(out: Any) -> list[Variable]:
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    for y in outs:
        if not isinstance(y, Variable):
            raise ArgumentError(f"the function checked must return Variables, got "
                                f"{type(y).__name__}")
    return outs


def _evaluate(f: Callable, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Values of f's outputs at ``arrays``, on a fresh Ops."""
    op = Ops()
    return [np.array(y.value, dtype=_dtype(y.value))
            for y in _run(f, [op.var(a) for a in arrays])]


def _pairing(op: Ops, outs: list[Variable], us: list[np.ndarray]) -> Variable:
    """The recorded scalar sum_k sum(outs[k] * us[k])."""
    s = None
    for y, u in zip(outs, us):
        term = op.sum(op.mul(y, u))
        if term.dtype.kind == "c":
            term = op.real(term)
        s = term if s is None else op.add(s, term)
    return s


def _central(fn: Callable, xs: list[np.ndarray], i: int, direction: np.ndarray,
             eps: float) -> Any:
    """(fn(x + eps d) - fn(x - eps d)) / (2 eps), moving only argument i; lists elementwise."""
    plus, minus = list(xs), list(xs)
    plus[i] = xs[i] + eps * direction
    minus[i] = xs[i] - eps * direction
    hi, lo = fn(plus), fn(minus)
    if isinstance(hi, list):
        return [(a - b) / (2 * eps) for a, b in zip(hi, lo)]
    return [(hi - lo) / (2 * eps)]


def _unit(shape: tuple, j: tuple) -> np.ndarray:
    e = np.zeros(shape)
    e[j] = 1.0
    return e


def _normal(rng: np.random.Generator, shape: tuple, dtype: Any = None) -> np.ndarray:
    if dtype is not None and np.dtype(dtype).kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) / np.sqrt(2)
    return np.asarray(rng.standard_normal(shape), dtype=np.float64)


def _compare(analytic: Any, numeric: np.ndarray, tol: _Tol, path: tuple, mode: str,
             where: str, xs: list[np.ndarray], outs: list[Variable]) -> None:
    """Raise GradientCheckError naming order, mode and position when the two disagree."""
    dtype = _dtype(numeric) if np.iscomplexobj(numeric) else _dtype(analytic)
    analytic = np.asarray(analytic, dtype=dtype)
    numeric = np.asarray(numeric, dtype=dtype)
    if analytic.shape != numeric.shape:
        raise GradientCheckError(
            f"{_order_text(path, mode)}: {where}: the derivative has shape {analytic.shape} "
            f"but finite differences give shape {numeric.shape}")
    error = np.abs(analytic - numeric)
    bound = tol.atol + tol.rtol * np.abs(numeric)
    bad = ~(error <= bound)     # also catches nan
    if not bad.any():
        return
    worst = np.unravel_index(np.argmax(np.where(bad, np.nan_to_num(error, nan=np.inf), -1.0)),
                             error.shape) if error.ndim else ()
    raise GradientCheckError(
        f"{_order_text(path, mode)}: {where} disagrees with central finite differences\n"
        f"  analytic: {_compact(analytic)}\n"
        f"  numeric:  {_compact(numeric)}\n"
        f"  {int(bad.sum())} of {bad.size} entries off; worst at index {tuple(map(int, worst))}: "
        f"analytic {analytic[worst]:.6g}, numeric {numeric[worst]:.6g}, "
        f"|difference| {error[worst]:.3g}\n"
        f"  tolerances: atol={tol.atol:g}, rtol={tol.rtol:g} (eps={tol.eps:g}); "
        f"arguments with shapes {_shapes(xs)}, outputs with shapes {_shapes(outs)}")


def _order_text(path: tuple, mode: str) -> str:
    text = f"order {len(path) + 1}, mode {mode}"
    if path:
        text += " applied to the " + " derivative of the ".join(reversed(path)) + " derivative"
    return text


def _compact(x: np.ndarray) -> str:
    text = np.array2string(x, precision=6, separator=", ", threshold=24, edgeitems=3,
                           max_line_width=10**6, suppress_small=False)
    return " ".join(text.split())


def _shapes(items: Sequence[Any]) -> list[tuple]:
    return [tuple(np.shape(getattr(a, "raw", a))) for a in items]
