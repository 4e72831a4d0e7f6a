"""``sg.odeint``: the solution of ``dy/dt = f(y, t, *args)`` at every time in ``t``, built on
the loops (JAX's ``odeint`` convention).

``method="rk4"`` takes one classical Runge-Kutta step per interval of ``t`` (a ``scan`` over
the intervals); ``method="dopri5"`` takes adaptive Dormand-Prince 5(4) steps inside each
interval (a ``while_loop`` per interval, inside the scan), a step accepted when its error
estimate is within ``atol + rtol * |y|`` (the root mean square over the entries). Either is
differentiable in both modes at every order, as any loop is: the derivative is that of the
recorded steps (the discrete adjoint), step-size control included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine.batching import Batched
from ..engine.variable import Variable
from ..errors import ArgumentError, SimplegradError
from ..pytree import tree_map
from .loops import scan, while_loop

__all__ = ["odeint"]

# Dormand-Prince 5(4): the stages' weights, the fifth-order weights (the last stage's row),
# and the fifth minus fourth order weights (the error estimate)
_A = [[], [1 / 5], [3 / 40, 9 / 40], [44 / 45, -56 / 15, 32 / 9],
      [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
      [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
      [35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84]]
_C = [0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0]
_B5 = _A[6] + [0.0]
_B4 = [5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40]
_E = [b5 - b4 for b5, b4 in zip(_B5, _B4)]


def _axpy(y: Any, h: Any, ks: list, weights: list) -> Any:
    """y + h * sum(w * k) over the stages of nonzero weight."""
    total = None
    for w, k in zip(weights, ks):
        if w:
            total = k * w if total is None else total + k * w
    return y if total is None else y + total * h


def _rk4_step(f: Callable, y: Any, t0: Any, t1: Any, args: tuple) -> Any:
    h = t1 - t0
    k1 = f(y, t0, *args)
    k2 = f(y + k1 * (h / 2), t0 + h / 2, *args)
    k3 = f(y + k2 * (h / 2), t0 + h / 2, *args)
    k4 = f(y + k3 * h, t1, *args)
    return y + (k1 + k2 * 2.0 + k3 * 2.0 + k4) * (h / 6)


def odeint(f: Callable, y0: Any, t: Any, *args: Any, method: str = "dopri5",
           rtol: float = 1.4e-8, atol: float = 1.4e-8, max_steps: int = 10000) -> Any:
    """The solution of ``dy/dt = f(y, t, *args)``, ``y(t[0]) = y0``, at every time in ``t``
    (stacked along a leading axis)."""
    if method not in ("dopri5", "rk4"):
        raise ArgumentError(f'odeint: method must be "dopri5" or "rk4", got {method!r}')
    if not callable(f):
        raise ArgumentError("odeint: f must be a function f(y, t, *args)")
    if np.ndim(t) != 1 or np.shape(t)[0] < 1:
        raise ArgumentError(f"odeint: t must be a 1-D array of times, got shape {np.shape(t)}")
    y0 = y0 if isinstance(y0, Variable) else np.asarray(y0, dtype=float)
    t = t if isinstance(t, Variable) else np.asarray(t, dtype=float)
    if np.shape(t)[0] == 1:
        return y0 * np.ones((1,) + tuple(np.shape(y0)))
    spans = (t[:-1], t[1:])
    if method == "rk4":
        def interval(y: Any, span: tuple) -> tuple:
            y = _rk4_step(f, y, span[0], span[1], args)
            return y, y
        _, ys = scan(interval, y0, spans)
    else:
        first = (t[1] - t[0]) * 1.0

        def interval(c: tuple, span: tuple) -> tuple:
            y, h = c
            t0, t1 = span

            def going(s: tuple) -> Any:
                return s[1] < t1

            def step(s: tuple) -> tuple:
                y, now, h = s
                hh = np.minimum(h, t1 - now)
                ks = [f(y, now, *args)]
                for i in range(1, 7):
                    ks.append(f(_axpy(y, hh, ks, _A[i]), now + hh * _C[i], *args))
                new = _axpy(y, hh, ks, _B5)
                e = _axpy(y * 0.0, hh, ks, _E)
                scale = atol + rtol * np.maximum(np.abs(y), np.abs(new))
                err = np.sqrt(np.mean((e / scale) ** 2))
                ok = err <= 1.0
                factor = np.clip(0.9 * np.maximum(err, 1e-10) ** -0.2, 0.2, 10.0)
                last = hh >= t1 - now
                return (np.where(ok, new, y),
                        np.where(ok, np.where(last, t1 * 1.0, now + hh), now),
                        hh * factor)
            y, reached, h = while_loop(going, step, (y, t0 * 1.0, h), max_steps=max_steps)
            return (y, h), (y, reached)
        _, (ys, reached) = scan(interval, (y0, first), spans)
        _check_reached(reached, spans[1], max_steps)
    y0s = tree_map(lambda a: a.reshape((1,) + tuple(np.shape(a))), y0)
    return np.concatenate([y0s, ys], axis=0)


def _check_reached(reached: Any, ends: Any, max_steps: int) -> None:
    """Raise when an interval's steps stopped at ``max_steps`` short of its end (checked where
    the values are known: when recorded or computed, not under vmap nor in a replay)."""
    if type(reached) is Batched or type(ends) is Batched:
        return
    r = np.asarray(getattr(reached, "raw", reached))
    e = np.asarray(getattr(ends, "raw", ends))
    short = np.flatnonzero(r < e)
    if short.size:
        k = short[0]
        raise SimplegradError(f"odeint: max_steps={max_steps} steps reached t = {r[k]!r}, "
                              f"short of t = {e[k]!r}; raise max_steps or loosen rtol and atol")
