"""Which mode ``sg.jacobian(mode="auto")`` picks, and what it costs against the faster one.

f(x) = tanh(W x) * 2 + W sin(x), R^n -> R^m, on tall (n << m), wide (n >> m) and square shapes.
Runs, interleaved per shape after checking that the three Jacobians agree with the closed form
J = diag(2 (1 - tanh(W x)^2)) W + W diag(cos x): ``mode="rev"`` (every output row in one
batched reverse sweep), ``mode="fwd"`` (every input direction in one batched forward sweep) and
``mode="auto"``. The ratio is auto's median over the faster explicit mode's, in the same run
(target <= 1.2). Each timed run calls the Jacobian as many times in a row as fill about 5 ms
of CPU (one call of 0.1 ms timed alone moves by 10-30% on a shared machine; a row of them
averages that out), and the medians are per call. The clock is the process's CPU time: the
three runs are single-threaded code compared with each other, and wall time on a busy machine
moves with whatever else runs (measured: the same run 0.4 ms and 2 ms within a minute).
Run: python benchmarks/jacobian_modes.py [--quick]
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import peers

import simplegrad as sg

SHAPES = [("tall", 10, 1000), ("wide", 1000, 10), ("square", 100, 100), ("square", 1000, 1000),
          ("scalar out", 200, 1), ("one in", 1, 200)]


def in_a_row(fn: Callable[[], object], seconds: float = 5e-3) -> tuple[Callable[[], None], int]:
    """``fn`` called k times in a row, k chosen so that the row takes about ``seconds`` of
    CPU."""
    fn()
    t0 = time.process_time()
    fn()
    k = max(1, round(seconds / max(time.process_time() - t0, 1e-6)))

    def row() -> None:
        for _ in range(k):
            fn()
    return row, k


def main() -> None:
    p = peers.parser(__doc__)
    args = p.parse_args()
    repeat = peers.repeats(args, 11, 21)
    rng = np.random.default_rng(0)
    rows, worst = [], 0.0
    print(f"{'shape':12s} {'n -> m':>12s} {'rev ms':>9s} {'fwd ms':>9s} {'auto ms':>9s} "
          f"{'picks':>6s} {'auto / faster':>14s}")
    for label, n, m in SHAPES:
        if args.quick and n * m > 200_000:
            continue
        W = rng.normal(size=(m, n)) / np.sqrt(n)
        x = rng.normal(size=n)

        def f(x, W=W):
            return (W @ x).tanh() * 2.0 + W @ x.sin()
        closed = (2 * (1 - np.tanh(W @ x) ** 2))[:, None] * W + W * np.cos(x)[None, :]
        runs = {mode: (lambda mode=mode, f=f, x=x: sg.jacobian(f, mode=mode)(x))
                for mode in ("rev", "fwd", "auto")}
        peers.check_agree(f"Jacobian {n} -> {m}", {"closed form": closed,
                                                   **{k: fn() for k, fn in runs.items()}},
                          rtol=1e-10, atol=1e-12)
        ops = sg.trace(sg.jacobian(f), x)
        picks = "fwd" if any(line.startswith("jvp ") for line in
                             ops.format_trace().splitlines()) else "rev"
        rows_of = {mode: in_a_row(fn) for mode, fn in runs.items()}
        med = peers.measure({mode: row for mode, (row, _) in rows_of.items()},
                            repeat if n * m <= 200_000 else max(3, repeat // 3),
                            time.process_time)
        med = {mode: t / rows_of[mode][1] for mode, t in med.items()}
        faster = min(med["rev"], med["fwd"])
        ratio = med["auto"] / faster
        worst = max(worst, ratio)
        print(f"{label:12s} {f'{n} -> {m}':>12s} {med['rev'] * 1e3:9.2f} {med['fwd'] * 1e3:9.2f} "
              f"{med['auto'] * 1e3:9.2f} {picks:>6s} {ratio:14.2f}")
        rows.append({"workload": f"  jacobian(mode='auto'), {label} {n} -> {m} (picks {picks})",
                     "unit": "the faster of rev and fwd", "target": "simplegrad <= 1.2",
                     "cols": {"simplegrad": ratio}})
    print(f"worst auto / faster mode: {worst:.2f}")
    peers.emit(args, rows)


if __name__ == "__main__":
    main()
