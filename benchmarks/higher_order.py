"""Higher-order cost: a 100x100 Hessian and one Hessian-vector product, relative to one gradient.

f(x) = sum(tanh(A x))^2 with a fixed 100x100 matrix A, x of 100 entries.
Every measurement is a full transform call on numpy arrays (a fresh Ops each
time), measured round-robin so machine noise hits all alike; medians and their
ratios to the gradient are printed.
Run: python benchmarks/higher_order.py [--n 100] [--repeat 15]
"""

from __future__ import annotations

import argparse

import numpy as np
from timing import interleaved_medians

import simplegrad as sg


def make_f(A: np.ndarray):
    """The smooth scalar test function sum(tanh(A x))^2."""
    def f(x):
        return (A @ x).tanh().sum() ** 2
    return f


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    n = args.n
    rng = np.random.default_rng(0)
    A = rng.normal(size=(n, n)) / np.sqrt(n)
    x = rng.normal(size=n)
    v = rng.normal(size=n)
    f = make_f(A)
    grad_f, hess_f = sg.grad(f), sg.hessian(f)

    # closed form, as a sanity check: s = sum(tanh(Ax)), d = 1 - tanh(Ax)^2
    t = np.tanh(A @ x)
    s, d = t.sum(), 1 - t ** 2
    w = A.T @ d
    H_closed = 2 * np.outer(w, w) + 2 * s * (A.T * (-2 * t * d)) @ A
    H = hess_f(x)
    print(f"max |H - closed form| = {np.abs(H - H_closed).max():.2e}, "
          f"max |hvp - H v| = {np.abs(sg.hvp(f, x, v) - H @ v).max():.2e}")

    runs = {
        "grad": lambda: grad_f(x),
        "hvp (forward-over-reverse)": lambda: sg.hvp(f, x, v),
        f"hessian {n}x{n} (forward-over-reverse)": lambda: hess_f(x),
    }
    medians = interleaved_medians(runs, args.repeat)
    base = medians["grad"]
    print(f"f(x) = sum(tanh(A x))^2, A {n}x{n}; median of {args.repeat} round-robin runs")
    print(f"{'measurement':42s} {'ms':>9s} {'x grad':>8s}")
    for label, t in medians.items():
        print(f"{label:42s} {t * 1e3:9.3f} {t / base:8.1f}")


if __name__ == "__main__":
    main()
