"""Forward against reverse mode: Jacobians of R^n -> R^m when n >> m and when n << m.

Reverse mode builds a Jacobian a row at a time (one vjp per output), forward mode a column
at a time (one jvp per input), so reverse wins when outputs are few and forward when inputs
are few. For both shapes the script times ``sg.jacobian(f, mode=...)`` for "rev", "fwd" and
"auto" (median of several runs) and prints what "auto" picks: its cost model prices one
batched forward sweep of every input direction against one reverse sweep per output entry,
from the recorded entries between them (their count and sizes). Checks: the three Jacobians
agree to 1e-10 and equal the closed form J = diag(1 - tanh(Ax)^2) A scaled by the output map.

Run: python examples/forward_vs_reverse.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from rich.console import Console
from rich.table import Table

import simplegrad as sg
from simplegrad.transforms.jacobians import prefers_forward


def median_time(fn, x: np.ndarray, repeats: int) -> tuple[float, np.ndarray]:
    """Median wall time of fn(x) over ``repeats`` runs, and its last result."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn(x)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def main(argv: list[str] | None = None) -> int:
    """Time both modes on a wide and a tall function; exit 1 if the Jacobians disagree."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for the tests")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    big, small = (60, 3) if args.quick else (400, 4)
    repeats = 2 if args.quick else 5
    table = Table(title="Jacobian of f(x) = B tanh(A x), median seconds")
    for col in ("n -> m", "rev (m vjps)", "fwd (n jvps)", "auto", "auto picks", "max |rev-fwd|"):
        table.add_column(col, justify="right")
    failures = []
    for n, m in ((big, small), (small, big)):
        hidden = 32
        A = rng.normal(size=(hidden, n)) / np.sqrt(n)
        B = rng.normal(size=(m, hidden)) / np.sqrt(hidden)
        f = lambda x, A=A, B=B: B @ (A @ x).tanh()
        x = rng.normal(size=n)
        t_rev, J_rev = median_time(sg.jacobian(f, mode="rev"), x, repeats)
        t_fwd, J_fwd = median_time(sg.jacobian(f, mode="fwd"), x, repeats)
        t_auto, J_auto = median_time(sg.jacobian(f), x, repeats)
        closed = B @ ((1 - np.tanh(A @ x) ** 2)[:, None] * A)
        err = float(np.max(np.abs(J_rev - J_fwd)))
        op = sg.Ops()       # what auto decides, asked of its cost model on one recording
        xv = op.var(x)
        pick = "fwd" if prefers_forward([xv], [f(xv)]) else "rev"
        table.add_row(f"{n} -> {m}", f"{t_rev:.4f}", f"{t_fwd:.4f}", f"{t_auto:.4f}", pick,
                      f"{err:.1e}")
        for name, J in (("rev", J_rev), ("fwd", J_fwd), ("auto", J_auto)):
            if J.shape != (m, n) or np.max(np.abs(J - closed)) > 1e-10:
                failures.append(f"{name} Jacobian of R^{n} -> R^{m} differs from the closed form")
    Console(width=100, markup=False).print(table)      # (no [...] taken for markup)
    print("reverse mode costs one sweep per output, forward mode one batched sweep of every "
          "input direction: 'auto' prices both from the recorded entries")
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    print("all checks passed" if not failures else f"{len(failures)} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
