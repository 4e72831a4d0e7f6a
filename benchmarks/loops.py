"""Loops as one entry against the same loop unrolled in simplegrad: recorded entries and time.

Workloads (float64, same-run medians measured round-robin):
1. a 1,000-step scan of a 32-unit tanh RNN (h <- tanh(W h + U x_t), loss sum(h_T^2)): the
   entries the gradient records (``op.grad`` on an Ops) and the eager gradient's time
   (``sg.grad`` on arrays: a sweep on values), ``sg.scan`` against the Python loop unrolled;
2. the Hessian in 3 parameters of a 100-step RK4 solve of a damped pendulum
   (``sg.odeint(method="rk4")``) against the same steps unrolled: entries recorded by the
   Hessian (two recorded reverse sweeps on an Ops) and ``sg.hessian``'s time.
Run: PYTHONPATH=. python benchmarks/loops.py [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np
from timing import interleaved_medians

import simplegrad as sg


def rnn(steps: int, units: int):
    rng = np.random.default_rng(0)
    W = rng.normal(size=(units, units)) / np.sqrt(units)
    U = rng.normal(size=(units, 8)) / np.sqrt(8)
    xs = rng.normal(size=(steps, 8))
    h0 = np.zeros(units)

    def scanned(W):
        h, _ = sg.scan(lambda h, x: (np.tanh(W @ h + U @ x), None), h0, xs)
        return (h * h).sum()

    def unrolled(W):
        h = h0
        for t in range(steps):
            h = np.tanh(W @ h + U @ xs[t])
        return (h * h).sum()
    return W, scanned, unrolled


def pendulum(steps: int):
    t = np.linspace(0.0, 5.0, steps + 1)
    y0 = np.array([1.0, 0.0])

    def rhs(y, t, p):
        return np.stack([p[0] * y[1], -p[1] * np.sin(y[0]) - p[2] * y[1]])

    def scanned(p):
        return (sg.odeint(rhs, y0, t, p, method="rk4")[-1] ** 2).sum()

    def unrolled(p):
        y = y0
        for t0, t1 in zip(t[:-1], t[1:]):
            h = t1 - t0
            k1 = rhs(y, t0, p)
            k2 = rhs(y + k1 * (h / 2), t0 + h / 2, p)
            k3 = rhs(y + k2 * (h / 2), t0 + h / 2, p)
            k4 = rhs(y + k3 * h, t1, p)
            y = y + (k1 + k2 * 2.0 + k3 * 2.0 + k4) * (h / 6)
        return (y ** 2).sum()
    return np.array([1.0, 2.0, 0.3]), scanned, unrolled


def entries(f, x, order: int) -> int:
    op = sg.Ops()
    v = op.var(x)
    g = f(v)
    for _ in range(order):
        g = op.grad(g.sum() if g.shape else g, v)
    return len(op.tape)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    repeat = 3 if args.quick else 7
    W, scanned, unrolled = rnn(200 if args.quick else 1000, 32)
    assert np.allclose(sg.grad(scanned)(W), sg.grad(unrolled)(W), rtol=1e-12, atol=1e-14)
    e_scan, e_unrolled = entries(scanned, W, 1), entries(unrolled, W, 1)
    t = interleaved_medians({"scan": lambda: sg.grad(scanned)(W),
                             "unrolled": lambda: sg.grad(unrolled)(W)}, repeat)
    print(f"RNN gradient: entries scan {e_scan}, unrolled {e_unrolled} "
          f"({e_unrolled / e_scan:.0f}x); eager time scan {t['scan'] * 1e3:.1f} ms, unrolled "
          f"{t['unrolled'] * 1e3:.1f} ms (scan / unrolled {t['scan'] / t['unrolled']:.2f})")
    p, scanned, unrolled = pendulum(100)
    assert np.allclose(sg.hessian(scanned)(p), sg.hessian(unrolled)(p), rtol=1e-10)
    e_scan, e_unrolled = entries(scanned, p, 2), entries(unrolled, p, 2)
    t = interleaved_medians({"scan": lambda: sg.hessian(scanned)(p),
                             "unrolled": lambda: sg.hessian(unrolled)(p)}, repeat)
    print(f"RK4 Hessian: entries scan {e_scan}, unrolled {e_unrolled} "
          f"({e_unrolled / e_scan:.0f}x); time scan {t['scan'] * 1e3:.1f} ms, unrolled "
          f"{t['unrolled'] * 1e3:.1f} ms (scan / unrolled {t['scan'] / t['unrolled']:.2f})")


if __name__ == "__main__":
    main()
