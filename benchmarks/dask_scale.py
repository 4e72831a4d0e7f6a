"""Gradient throughput on Dask worker processes against one numpy process, and the client's
memory as the data grows.

The workload is one full-batch gradient of a logistic-regression loss on rows x 32 float64
data: the program (mean loss and its gradient in w and b) is recorded once on one chunk and
run on every chunk. Throughput (rows per second, median of rounds) is measured for
  - numpy: one process, the same program replayed chunk after chunk on arrays in memory, the
    outputs averaged (the unit);
  - ``sg.map_chunks`` on a ``distributed.LocalCluster`` of 1 and 2 worker processes (4 too
    when the machine has 4 cores: 4 workers on 2 cores measured slower than 2), one thread
    each, the data persisted on the workers first, so both sides time the gradient alone.
Then the peak resident memory of this (the client) process, sampled every 5 ms, while
``map_chunks`` computes the gradient of data generated lazily on the workers, for N and 10 N
rows: it stays flat (only the 33 numbers of the gradient come back), where holding the data
would take N x 32 x 8 bytes.

Run: python benchmarks/dask_scale.py [--quick] [--rows N] [--chunk N] [--repeat K] [--json F]
"""

from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np
import peers

import simplegrad as sg

FEATURES = 32


def program(chunk: int) -> sg.Program:
    """The mean logistic loss and its gradient in (w, b), recorded on one chunk of rows."""
    rng = np.random.default_rng(0)
    op = sg.Ops()
    x = op.var(rng.normal(size=(chunk, FEATURES)))
    t = op.var((rng.random(chunk) < 0.5).astype(np.float64))
    w, b = op.var(np.zeros(FEATURES)), op.var(0.0)
    z = x @ w + b
    loss = op.mean(op.logaddexp(0.0, z) - t * z)
    return op.program([x, t, w, b], [loss, *op.grad(loss, [w, b])])


def lazy_data(da, rows: int, chunk: int):
    rng = da.random.default_rng(1)
    X = rng.standard_normal((rows, FEATURES), chunks=(chunk, FEATURES))
    return X, (rng.random(rows, chunks=chunk) < 0.5).astype(np.float64)


class PeakMemory:
    """The largest resident set of this process seen while the block runs, above its start."""

    def __init__(self) -> None:
        import psutil
        self.process = psutil.Process()
        self.peak = 0

    def __enter__(self) -> PeakMemory:
        self.start = self.process.memory_info().rss
        self.peak = self.start
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while not self.done.wait(0.005):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)

    @property
    def grown(self) -> int:
        return self.peak - self.start


def main() -> None:
    p = peers.parser(__doc__)
    p.add_argument("--rows", type=int, default=None, help="rows that fit (default 2,000,000)")
    p.add_argument("--chunk", type=int, default=None, help="rows per chunk (default 100,000)")
    args = p.parse_args()
    try:
        import dask.array as da
        import distributed
    except ImportError:
        print("dask_scale needs dask: pip install 'simplegrad[dask]'", file=sys.stderr)
        sys.exit(1)
    rows = args.rows or (200_000 if args.quick else 2_000_000)
    chunk = args.chunk or (20_000 if args.quick else 100_000)
    repeat = peers.repeats(args, 3, 7)
    prog = sg.compile(program(chunk))
    X, y = lazy_data(da, rows, chunk)
    Xn, yn = da.compute(X, y)
    w, b = np.random.default_rng(2).normal(size=FEATURES) / 10, 0.1

    def numpy_run() -> list:
        parts = [prog(Xn[k:k + chunk], yn[k:k + chunk], w, b) for k in range(0, rows, chunk)]
        return [sum(p[j] for p in parts) / len(parts) for j in range(3)]

    want = numpy_run()
    unit = np.median([_seconds(numpy_run) for _ in range(repeat)])
    results = {"numpy, 1 process": (unit, 1.0)}
    workers = [1, 2] + ([4] if (os.cpu_count() or 1) >= 4 else [])
    for n in workers:
        with distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                      dashboard_address=":0") as cluster, \
                distributed.Client(cluster) as client:
            Xp, yp = client.persist([X, y])
            distributed.wait([Xp, yp])

            def dask_run(Xp=Xp, yp=yp, client=client) -> list:
                return client.compute(sg.map_chunks(prog, Xp, yp, w, b, reduce="mean"),
                                      sync=True)

            peers.check_agree(f"gradient, {n} worker(s)", {"numpy": want, "dask": dask_run()},
                              rtol=1e-10, atol=1e-12)
            t = np.median([_seconds(dask_run) for _ in range(repeat)])
            results[f"map_chunks, {n} worker process(es)"] = (t, unit / t)
            del Xp, yp
    print(f"\nfull-batch gradient of logistic regression, {rows:,} x {FEATURES} float64, "
          f"{rows // chunk} chunks of {chunk:,} rows ({len(prog.program)} entries)")
    print(f"{'run':40s} {'ms':>9s} {'rows/s':>14s} {'x numpy':>9s}")
    for label, (t, speedup) in results.items():
        print(f"{label:40s} {t * 1e3:9.1f} {rows / t:14,.0f} {speedup:9.2f}")
    memory = client_memory(da, distributed, prog, rows, chunk, w, b)
    peers.emit(args, [{"workload": "dask_scale", "unit": "numpy, 1 process",
                       **{k: round(v[1], 2) for k, v in results.items()},
                       "client peak MB": memory}])


def client_memory(da, distributed, prog, rows: int, chunk: int, w, b) -> dict:
    """Peak growth of this process's memory while the gradient of N and 10 N lazy rows is
    computed on 2 worker processes."""
    out = {}
    print("\npeak memory of the client process (data generated on the workers)")
    print(f"{'rows':>12s} {'data MB':>9s} {'client peak MB':>15s}")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        for n in (rows, 10 * rows):
            X, y = lazy_data(da, n, chunk)
            graph = sg.map_chunks(prog, X, y, w, b, reduce="mean")
            with PeakMemory() as peak:
                client.compute(graph, sync=True)
            out[n] = round(peak.grown / 1e6, 1)
            print(f"{n:12,d} {X.nbytes / 1e6:9.0f} {peak.grown / 1e6:15.1f}")
    return out


def _seconds(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
