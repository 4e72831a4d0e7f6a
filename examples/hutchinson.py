"""Trace estimation: Hutchinson against Hutch++ against the exact trace, and a divergence.

Seed 003 asks why a divergence is expensive with autodiff (n Jacobian-vector products for
tr(df/dx)) and how Hutchinson's estimator and Hutch++ make it cheap. Part 1 estimates the
trace of a 200 x 200 matrix with a decaying spectrum from a growing budget of matrix-vector
products and reports the mean relative error of each estimator over repeated trials. Part 2
takes the divergence of a small neural vector field f: R^n -> R^n from jvps, exactly (n
products, checked against the trace of the full Jacobian) and with both estimators.

Checks: both estimators' errors shrink as the budget grows; Hutch++ beats Hutchinson at the
largest budget on the decaying spectrum; the exact divergence equals tr(J) to 1e-10; each
estimate of the divergence lies within 5 standard errors of the exact value. With
matplotlib installed, the errors are also plotted to a PNG (--plot PATH).

Run: python examples/hutchinson.py [--quick] [--plot hutchinson.png]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from rich.console import Console
from rich.table import Table

import simplegrad as sg


def relative_errors(A: np.ndarray, budgets: list[int], trials: int,
                    rng: np.random.Generator) -> dict[str, list[float]]:
    """Mean |estimate - tr(A)| / tr(A) per budget, for both estimators."""
    exact = np.trace(A)
    out: dict[str, list[float]] = {"hutchinson": [], "hutch++": []}
    for m in budgets:
        for name, fn in (("hutchinson", sg.hutchinson_trace), ("hutch++", sg.hutchpp_trace)):
            errs = [abs(fn(lambda v: A @ v, A.shape[0], samples=m, rng=rng) - exact) / exact
                    for _ in range(trials)]
            out[name].append(float(np.mean(errs)))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run both parts, print the tables, and exit 1 if a check fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer trials, for the tests")
    parser.add_argument("--plot", default="hutchinson.png",
                        help="where to save the PNG when matplotlib is installed")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    console = Console(width=100, markup=False)      # print [...] as written
    failures: list[str] = []

    # part 1: a 200 x 200 symmetric positive matrix with eigenvalues 1 / k^2
    n = 200
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    A = (Q * (1.0 / np.arange(1, n + 1) ** 2)) @ Q.T
    budgets = [6, 12, 24, 48, 96]
    trials = 30 if args.quick else 200
    errs = relative_errors(A, budgets, trials, rng)
    table = Table(title=f"relative error of tr(A) estimates, A {n}x{n} with eigenvalues 1/k^2 "
                        f"(mean of {trials} trials)")
    table.add_column("matvecs", justify="right")
    table.add_column("Hutchinson", justify="right")
    table.add_column("Hutch++", justify="right")
    for m, h, hpp in zip(budgets, errs["hutchinson"], errs["hutch++"]):
        table.add_row(str(m), f"{h:.2e}", f"{hpp:.2e}")
    console.print(table)
    for name, series in errs.items():
        if not series[-1] < series[0]:
            failures.append(f"{name}'s error did not shrink with the budget")
    if not errs["hutch++"][-1] < errs["hutchinson"][-1]:
        failures.append("Hutch++ did not beat Hutchinson at the largest budget")

    # part 2: the divergence of f(x) = tanh(W2 tanh(W1 x + b1) + b2), R^d -> R^d
    d, hidden = 40, 64
    W1, b1 = rng.normal(size=(hidden, d)) / np.sqrt(d), rng.normal(size=hidden)
    W2, b2 = rng.normal(size=(d, hidden)) / np.sqrt(hidden), rng.normal(size=d)
    field = lambda x: (W2 @ (W1 @ x + b1).tanh() + b2).tanh()
    x = rng.normal(size=d)
    exact = sg.divergence(field, x)
    jac_trace = float(np.trace(sg.jacobian(field)(x)))
    console.print(f"divergence of a {d}-dimensional neural vector field: exact (from {d} jvps) "
                  f"{exact:.6f}, trace of the full Jacobian {jac_trace:.6f}")
    if abs(exact - jac_trace) > 1e-10:
        failures.append("the exact divergence differs from the Jacobian's trace")
    samples, repeats = 12, 20 if args.quick else 100
    div_table = Table(title=f"divergence estimates from {samples} jvps ({repeats} repeats)")
    for col in ("method", "mean", "std error", "mean |error|"):
        div_table.add_column(col, justify="right")
    for method in ("hutchinson", "hutch++"):
        est = np.array([sg.divergence(field, x, method=method, samples=samples, rng=rng)
                        for _ in range(repeats)])
        se = est.std(ddof=1) / np.sqrt(repeats)
        div_table.add_row(method, f"{est.mean():.4f}", f"{se:.4f}",
                          f"{np.mean(np.abs(est - exact)):.4f}")
        if abs(est.mean() - exact) > 5 * se + 1e-12:
            failures.append(f"{method}'s divergence estimates are biased")
    console.print(div_table)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        console.print("matplotlib is not installed: no plot (pip install 'simplegrad[examples]')")
    else:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for name, series in errs.items():
            ax.loglog(budgets, series, "o-", label=name)
        ax.set_xlabel("matrix-vector products")
        ax.set_ylabel("mean relative error")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)
        plt.close(fig)
        console.print(f"plot saved to {args.plot}")

    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    print("all checks passed" if not failures else f"{len(failures)} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
