"""Fit the parameters of an ODE to noisy observations, differentiating through sg.odeint.

A damped oscillator y'' = -k y - c y' (as a first-order system) is observed at 40 times with
noise; starting from a wrong guess, damped Newton steps (the Hessian through the solve) on
the squared error recover (k, c).
The solve is one loop entry (a scan of adaptive Dormand-Prince steps, each interval a
while_loop), so its gradient is a loop too. Checked: the gradient against central finite
differences, the Hessian against finite differences of the gradient, and the fit against the
true parameters.

Run: python examples/ode_fit.py [--quick]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import simplegrad as sg


def oscillator(y, t, p):
    """[y, y'] -> [y', -k y - c y']."""
    return np.stack([y[1], -p[0] * y[0] - p[1] * y[1]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer observations and steps")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    times = np.linspace(0.0, 6.0, 16 if args.quick else 40)
    y0 = np.array([1.0, 0.0])
    truth = np.array([2.0, 0.3])
    method = "rk4" if args.quick else "dopri5"
    clean = sg.odeint(oscillator, y0, times, truth, method=method)[:, 0]
    observed = clean + 0.01 * rng.normal(size=times.shape)

    def loss(p):
        return ((sg.odeint(oscillator, y0, times, p, method=method)[:, 0] - observed) ** 2).sum()

    failures = []
    p = np.array([1.5, 0.5])
    g = sg.grad(loss)(p)
    eps = 1e-6
    fd = np.array([(loss(p + eps * e) - loss(p - eps * e)) / (2 * eps) for e in np.eye(2)])
    err = np.abs(g - fd).max() / np.abs(fd).max()
    print(f"gradient against finite differences: relative error {err:.1e}")
    if err > 1e-6:
        failures.append("gradient")
    H = sg.hessian(loss)(p)
    fdH = np.array([(sg.grad(loss)(p + eps * e) - sg.grad(loss)(p - eps * e)) / (2 * eps)
                    for e in np.eye(2)])
    err = np.abs(H - fdH).max() / np.abs(fdH).max()
    print(f"Hessian against finite differences of the gradient: relative error {err:.1e}")
    if err > 1e-5:
        failures.append("Hessian")
    damping, current = 1.0, loss(p)
    for _ in range(15 if args.quick else 25):   # damped Newton steps (Levenberg-Marquardt)
        g, H = sg.grad(loss)(p), sg.hessian(loss)(p)
        trial = p - np.linalg.solve(H + damping * np.eye(2), g)
        if loss(trial) < current:
            p, current, damping = trial, loss(trial), damping / 3
        else:
            damping *= 3
    print(f"fitted k = {p[0]:.4f}, c = {p[1]:.4f} (true {truth[0]}, {truth[1]}), "
          f"loss {loss(p):.2e}")
    if np.abs(p - truth).max() > 0.05:
        failures.append("fit")
    print("all checks passed" if not failures else f"FAILED: {', '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
