"""Expression swell: entries of nested derivatives, plain and simplified, with time per order.

For the n-th derivative of tanh(x) and of x sin(x) exp(x) by nested op.grad, and for the
gradient and the Hessian-vector product of an MLP loss, prints the entries of
  tape      the plain tape (everything recorded so far),
  program   op.program(inputs, derivative): the entries the derivative needs,
  simplify  sg.simplify of that program,
  Ops(simplify=True)  the tape of a simplifying Ops ("n/a" until simplegrad has one),
and the time of each (one run each, in ms): recording order n on the plain tape, sg.simplify,
recording order n on the simplifying Ops.

Checks (exit status 1 if one fails): at n = 8 for tanh each simplified form has at most half
the plain tape's entries; no two entries of a simplified program share a CSE key; every
simplified value equals the plain one (1e-12 relative) at the recording point and at new
points; the plain derivatives match closed forms (tanh: the derivative polynomials of t =
tanh(x); x sin(x) exp(x): Leibniz's rule) and the MLP's Hessian-vector product matches central
differences of its replayed gradient program.
Run: python benchmarks/swell.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import numpy as np

import simplegrad as sg

RTOL = 1e-12


def simplifying_ops() -> sg.Ops | None:
    """An Ops that simplifies while recording, or None when simplegrad has none yet."""
    try:
        return sg.Ops(simplify=True)
    except TypeError:
        return None


# ---------------------------------------------------------------- the three families


def nested(f: Callable, x0: float, orders: int, op: sg.Ops) -> list[tuple]:
    """Per order n: (inputs, n-th derivative, seconds to record order n, tape size then)."""
    x = op.var(x0, name="x")
    y = f(x)
    rows = []
    for _ in range(orders):
        t0 = time.perf_counter()
        y = op.grad(y, x)
        rows.append(([x], y, time.perf_counter() - t0, len(op.tape)))
    return rows


def mlp(op: sg.Ops, quick: bool) -> tuple[list[tuple], list[np.ndarray]]:
    """Order 1: the gradient of an MLP loss; order 2: its Hessian-vector product along the
    directions returned with the rows."""
    rng = np.random.default_rng(0)
    n_in, n_hidden, n_out, batch = (4, 8, 2, 16) if quick else (8, 32, 4, 64)
    X, Y = rng.normal(size=(batch, n_in)), rng.normal(size=(batch, n_out))
    shapes = [(n_in, n_hidden), (n_hidden,), (n_hidden, n_out), (n_out,)]
    params = [op.var(rng.normal(size=s) / np.sqrt(s[0]), name=nm)
              for s, nm in zip(shapes, ["W1", "b1", "W2", "b2"])]
    W1, b1, W2, b2 = params
    t0 = time.perf_counter()
    loss = op.mean(((X @ W1 + b1).tanh() @ W2 + b2 - Y) ** 2)
    grads = op.grad(loss, params)
    t1 = time.perf_counter()
    size = len(op.tape)
    vs = [rng.normal(size=s) for s in shapes]
    hv = op.grad(sum((g * v).sum() for g, v in zip(grads, vs)), params)
    t2 = time.perf_counter()
    return [(params, list(grads), t1 - t0, size), (params, list(hv), t2 - t1, len(op.tape))], vs


# ---------------------------------------------------------------- closed forms


def tanh_derivatives(x: float, orders: int) -> list[float]:
    """d^n/dx^n tanh(x), n = 1..orders: P_{n+1}(t) = P_n'(t) (1 - t^2), P_0(t) = t."""
    p = np.polynomial.Polynomial([0.0, 1.0])
    one_minus = np.polynomial.Polynomial([1.0, 0.0, -1.0])
    out = []
    for _ in range(orders):
        p = p.deriv() * one_minus
        out.append(float(p(np.tanh(x))))
    return out


def xsinexp_derivatives(x: float, orders: int) -> list[float]:
    """d^n/dx^n x sin(x) e^x = x g_n + n g_{n-1}, g_n = 2^(n/2) e^x sin(x + n pi / 4)."""
    def g(n):
        return 2 ** (n / 2) * np.exp(x) * np.sin(x + n * np.pi / 4)
    return [float(x * g(n) + n * g(n - 1)) for n in range(1, orders + 1)]


# ---------------------------------------------------------------- one table


def table(title: str, plain_rows: list, simplifying_rows: list | None, points: list,
          failures: list[str], check_half_at: int | None = None) -> list:
    """Print one family's rows and run the checks; returns the plain programs."""
    print(title)
    print(f"{'n':>3s} {'tape':>8s} {'program':>8s} {'simplify':>9s} {'Ops(simplify=True)':>19s}"
          f" {'record ms':>10s} {'simplify ms':>12s} {'simplifying ms':>15s}")
    programs = []
    for n, (xs, ys, seconds, tape) in enumerate(plain_rows, start=1):
        prog = xs[0].ops.program(xs, ys)
        t0 = time.perf_counter()
        simple = sg.simplify(prog)
        t_simplify = time.perf_counter() - t0
        programs.append(prog)
        other, t_other = "n/a", "n/a"
        if simplifying_rows is not None:
            sxs, sys_, st, size = simplifying_rows[n - 1]
            other, t_other = str(size), f"{st * 1e3:.1f}"
            repeated = sxs[0].ops.program(sxs, sys_).duplicates()
            if repeated:
                failures.append(f"{title} n={n}: Ops(simplify=True) entries share a CSE key: "
                                f"{repeated[:3]}")
            _same(f"{title} n={n} Ops(simplify=True)", _values(ys), _values(sys_), failures)
            if n == check_half_at and 2 * int(other) > tape:
                failures.append(f"{title} n={n}: Ops(simplify=True) has {other} entries, more "
                                f"than half the plain tape's {tape}")
        print(f"{n:3d} {tape:8d} {len(prog):8d} {len(simple):9d} {other:>19s}"
              f" {seconds * 1e3:10.1f} {t_simplify * 1e3:12.1f} {t_other:>15s}")
        if simple.duplicates():
            failures.append(f"{title} n={n}: entries share a CSE key: {simple.duplicates()[:3]}")
        for args in [[x.value for x in xs]] + points:
            _same(f"{title} n={n} sg.simplify", _as_list(prog(*args)), _as_list(simple(*args)),
                  failures)
        if n == check_half_at and 2 * len(simple) > tape:
            failures.append(f"{title} n={n}: sg.simplify left {len(simple)} entries, more than "
                            f"half the plain tape's {tape}")
    print()
    return programs


def _values(ys) -> list[np.ndarray]:
    return [y.value for y in ys] if isinstance(ys, list) else [ys.value]


def _as_list(out) -> list[np.ndarray]:
    return out if isinstance(out, list) else [out]


def _same(what: str, want: list, got: list, failures: list[str]) -> None:
    for a, b in zip(want, got):
        if not np.allclose(b, a, rtol=RTOL, atol=0, equal_nan=True):
            failures.append(f"{what}: values differ by {np.max(np.abs(b - a)):.3e}")
            return


def _closed(what: str, rows: list, want: list[float], failures: list[str]) -> None:
    for n, ((_, y, _, _), w) in enumerate(zip(rows, want), start=1):
        if not np.isclose(y.value.item(), w, rtol=1e-9, atol=1e-9):   # (no replay guard)
            failures.append(f"{what} n={n}: {y.value.item()!r} but the closed form gives {w!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer orders, a smaller MLP")
    args = parser.parse_args()
    failures: list[str] = []
    rng = np.random.default_rng(1)
    have_simplifying = simplifying_ops() is not None
    if not have_simplifying:
        print("Ops(simplify=True): n/a (this simplegrad has no simplifying Ops)\n")

    def both(record: Callable[[sg.Ops], list]) -> tuple[list, list | None]:
        return record(sg.Ops()), record(simplifying_ops()) if have_simplifying else None

    orders = 8 if args.quick else 10
    x0 = 0.3
    plain, simp = both(lambda op: nested(lambda x: x.tanh(), x0, orders, op))
    _closed("tanh", plain, tanh_derivatives(x0, orders), failures)
    table("n-th derivative of tanh(x), nested op.grad", plain, simp,
          [[np.array(v)] for v in rng.uniform(-2, 2, 2)], failures, check_half_at=8)

    orders = 6 if args.quick else 10
    plain, simp = both(lambda op: nested(lambda x: x * x.sin() * x.exp(), x0, orders, op))
    _closed("x sin(x) exp(x)", plain, xsinexp_derivatives(x0, orders), failures)
    table("n-th derivative of x * sin(x) * exp(x), nested op.grad", plain, simp,
          [[np.array(v)] for v in rng.uniform(-2, 2, 2)], failures)

    plain, vs = mlp(sg.Ops(), args.quick)
    simp = mlp(simplifying_ops(), args.quick)[0] if have_simplifying else None
    params = plain[0][0]
    points = [[p.value + rng.normal(scale=0.1, size=p.shape) for p in params]]
    grad_prog, _ = table("MLP loss: n = 1 its gradient, n = 2 a Hessian-vector product", plain,
                         simp, points, failures)
    _check_hvp(params, grad_prog, plain[1][1], vs, failures)

    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("checks passed: tanh n=8 halved; no repeated CSE keys; simplified values equal the "
          "plain ones (1e-12); closed forms and finite differences agree")
    return 0


def _check_hvp(params: list, grad_prog: sg.Program, hv: list, vs: list[np.ndarray],
               failures: list[str]) -> None:
    """The recorded Hessian-vector product against central differences (eps 1e-5, rtol 1e-5)
    of the replayed gradient program along the same direction."""
    eps = 1e-5
    p0 = [p.value for p in params]
    plus = grad_prog(*[p + eps * v for p, v in zip(p0, vs)])
    minus = grad_prog(*[p - eps * v for p, v in zip(p0, vs)])
    for k, (a, b, h) in enumerate(zip(plus, minus, hv)):
        fd = (a - b) / (2 * eps)
        if not np.allclose(h.value, fd, rtol=1e-5, atol=1e-7):
            failures.append(f"MLP hvp, parameter {k}: differs from central differences by "
                            f"{np.max(np.abs(h.value - fd)):.2e}")


if __name__ == "__main__":
    sys.exit(main())
