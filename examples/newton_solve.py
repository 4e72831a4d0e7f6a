"""A Newton solve differentiated to order 3: the solution of an equation, found by
sg.while_loop until converged, is a function of the equation's parameters like any other.

1. The cube root x(a) of x^3 = a by Newton's iteration: dx/da, d2x/da2 and d3x/da3 against
   the closed forms a^(-2/3)/3, -2a^(-5/3)/9 and 10a^(-8/3)/27, at inputs that need
   different trip counts, from one recorded program replayed (the loop re-runs).
2. A system tanh(W x) + x = b solved by Newton steps with the Jacobian from sg.jacobian:
   dx/db against the implicit function theorem, (I + diag(1 - tanh(W x)^2) W)^-1.

Run: python examples/newton_solve.py [--quick]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import simplegrad as sg


def cube_root(a):
    """x with x^3 = a by Newton's iteration from a + 1, and the number of steps taken."""
    def step(c):
        x, n = c
        return x - (x ** 3 - a) / (3 * x ** 2), n + 1

    def unsettled(c):
        x, _ = c
        return abs(x ** 3 - a) > 1e-14 * a
    return sg.while_loop(unsettled, step, (a + 1.0, 0), max_steps=100)


def solve_system(W, b):
    """x with tanh(W x) + x = b by Newton steps."""
    residual = lambda x: np.tanh(W @ x) + x - b

    def step(x):
        return x - np.linalg.solve(sg.jacobian(residual)(x), residual(x))

    def unsettled(x):
        return np.abs(residual(x)).max() > 1e-13
    return sg.while_loop(unsettled, step, b * 1.0, max_steps=50)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer inputs")
    args = parser.parse_args()
    failures = []

    op = sg.Ops()
    a = op.var(2.0, name="a")
    x = cube_root(a)[0]
    d1 = op.grad(x, a)
    d2 = op.grad(d1, a)
    d3 = op.grad(d2, a)
    program = op.program([a], [x, d1, d2, d3])
    inputs = (2.0, 30.0) if args.quick else (0.5, 2.0, 30.0, 1e3, 1e5)
    for v in inputs:
        exact = [v ** (1 / 3), v ** (-2 / 3) / 3, -2 * v ** (-5 / 3) / 9,
                 10 * v ** (-8 / 3) / 27]
        got = program(np.array(v))
        err = max(abs(g - e) / abs(e) for g, e in zip(got, exact))
        print(f"a = {v:g}: {int(cube_root(v)[1])} Newton steps, derivatives to order 3 "
              f"within {err:.1e} of the closed forms")
        if err > 1e-8:
            failures.append(f"cube root at {v}")

    rng = np.random.default_rng(0)
    W = rng.normal(size=(3, 3)) * 0.5
    b = rng.normal(size=3)
    J = sg.jacobian(lambda b: solve_system(W, b))(b)
    xb = solve_system(W, b)
    implicit = np.linalg.inv(np.eye(3) + (1 - np.tanh(W @ xb) ** 2)[:, None] * W)
    err = np.abs(J - implicit).max()
    print(f"system: dx/db against the implicit function theorem: {err:.1e}")
    if err > 1e-10:
        failures.append("system")
    print("all checks passed" if not failures else f"FAILED: {', '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
