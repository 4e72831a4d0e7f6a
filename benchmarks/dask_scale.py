"""Gradient throughput on Dask worker processes against one numpy process, the fixed cost of
one ``sg.map_chunks`` call, and the client's memory as the data grows.

The workload is one full-batch gradient of a logistic-regression loss on rows x 32 float64
data: the program (mean loss and its gradient in w and b) is recorded once on one chunk and
run on every chunk. Printed:
  - the fixed cost: the median time of many calls on 1 chunk of 10 rows on 1 worker process
    (build the graph, submit, run, gather), beside the floor of one ``client.submit`` round
    trip, and the CPU time the call costs all processes together (client, scheduler, worker;
    load on the machine stretches wall time more than CPU time);
  - throughput on 200,000 rows in 10 chunks (and 4,000,000 in 40 without ``--quick``) for
    numpy (one process, the same program replayed chunk after chunk on arrays in memory, the
    outputs averaged: the unit) and ``sg.map_chunks`` on a ``distributed.LocalCluster`` of
    1 and 2 worker processes (4 too when the machine has 4 cores), one thread each, the data
    persisted on the workers first, so both sides time the gradient alone; numpy and dask
    alternate round by round, so each ratio is of the same moments; beside each, the same
    ratio of CPU times (this process and the cluster's, counted for both: on a machine whose
    other jobs keep the cores busy, waiting for a core stretches wall time, not CPU);
  - the peak resident memory of this (the client) process, sampled every 5 ms, while
    ``map_chunks`` computes the gradient of data generated lazily on the workers, for N and
    10 N rows: it stays flat (only the 33 numbers of the gradient come back), where holding
    the data would take N x 32 x 8 bytes.
Each line says the goal beside it (issue 32) and the machine's load average.

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


GOALS = {"fixed": 15.0, 200_000: 0.5, 4_000_000: 0.95, "2 workers": 1.8}


def main() -> None:
    p = peers.parser(__doc__)
    p.add_argument("--rows", type=int, default=None,
                   help="rows of the large case (default 4,000,000; none with --quick)")
    p.add_argument("--chunk", type=int, default=100_000, help="rows per chunk of the large case")
    p.add_argument("--memory-rows", type=int, default=None,
                   help="N of the memory check (default 2,000,000; 200,000 with --quick)")
    args = p.parse_args()
    try:
        import dask.array as da
        import distributed
    except ImportError:
        print("dask_scale needs dask: pip install 'simplegrad[dask]'", file=sys.stderr)
        sys.exit(1)
    repeat = peers.repeats(args, 5, 9)
    cases = [(200_000, 20_000)]
    if not args.quick or args.rows:
        cases.append((args.rows or 4_000_000, args.chunk))
    w, b = np.random.default_rng(2).normal(size=FEATURES) / 10, 0.1
    load = [os.getloadavg()[0]]
    workers = [1, 2] + ([4] if (os.cpu_count() or 1) >= 4 else [])
    ratios: dict[tuple[int, int], float] = {}
    cpu_ratios: dict[tuple[int, int], float] = {}
    fixed = {}
    for n in workers:
        with distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                      dashboard_address=":0") as cluster, \
                distributed.Client(cluster) as client:
            if n == 1:
                fixed = fixed_cost(da, distributed, client, w, b, 60 if args.quick else 120)
            for rows, chunk in cases:
                ratios[n, rows], cpu_ratios[n, rows] = throughput(
                    da, distributed, client, n, rows, chunk, w, b, repeat)
        load.append(os.getloadavg()[0])
    print(f"\nfixed cost of one call (1 chunk of 10 rows, 1 worker process): "
          f"{fixed['wall']:.1f} ms median (goal <= {GOALS['fixed']:.0f}); one client.submit "
          f"round trip {fixed['floor']:.1f} ms (the call: {fixed['wall'] / fixed['floor']:.1f} "
          f"of them); CPU of all processes {fixed['cpu']:.1f} ms per call")
    print(f"\n{'rows':>10s} {'chunks':>6s} {'workers':>7s} {'x numpy':>8s} {'goal':>8s} "
          f"{'CPU x numpy':>11s}")
    for (n, rows), ratio in ratios.items():
        goal = GOALS.get(rows) if n == 1 else None
        chunk = dict(cases)[rows]
        print(f"{rows:10,d} {rows // chunk:6d} {n:7d} {ratio:8.2f} "
              f"{'>= ' + format(goal, '.2f') if goal else '':>8s} {cpu_ratios[n, rows]:11.2f}")
    print("(x numpy: numpy's wall time over map_chunks'; CPU x numpy: the same of CPU times, "
          "this process and\nthe cluster's counted for both, which waiting for a busy core "
          "stretches less than wall time)")
    for rows, _ in cases:
        print(f"{rows:10,d} rows: 2 workers / 1 worker {ratios[2, rows] / ratios[1, rows]:.2f} "
              f"(goal >= {GOALS['2 workers']} when 2 cores are free)")
    print(f"load average (1 min) during the run: {min(load):.1f}-{max(load):.1f} on "
          f"{os.cpu_count()} cores")
    chunk = 20_000 if args.quick else args.chunk
    memory = client_memory(da, distributed, sg.compile(program(chunk)),
                           args.memory_rows or (200_000 if args.quick else 2_000_000), chunk,
                           w, b)
    peers.emit(args, [{"workload": "dask_scale", "unit": "numpy, 1 process",
                       "fixed cost ms": round(fixed["wall"], 1),
                       **{f"map_chunks {rows:,} rows, {n} worker(s)": round(r, 2)
                          for (n, rows), r in ratios.items()},
                       **{f"map_chunks {rows:,} rows, {n} worker(s), CPU": round(r, 2)
                          for (n, rows), r in cpu_ratios.items()},
                       "client peak MB": memory}])


def fixed_cost(da, distributed, client, w, b, calls: int) -> dict:
    """Median wall time and mean CPU time (all processes) of a call on 1 chunk of 10 rows,
    and the median of one trivial client.submit round trip."""
    prog = sg.compile(program(10))
    X, y = client.persist(list(lazy_data(da, 10, 10)))
    distributed.wait([X, y])
    run = lambda: client.compute(sg.map_chunks(prog, X, y, w, b, reduce="mean"), sync=True)  # noqa: E731
    submit = lambda: client.submit(int, 1, pure=False).result()  # noqa: E731
    run(), submit()
    times: dict[str, list] = {"wall": [], "floor": []}
    cpu = _cpu_seconds()
    for _ in range(calls):
        times["wall"].append(_seconds(run))
    cpu = (_cpu_seconds() - cpu) / calls
    for _ in range(calls):
        times["floor"].append(_seconds(submit))
    return {k: float(np.median(v) * 1e3) for k, v in times.items()} | {"cpu": cpu * 1e3}


def throughput(da, distributed, client, n: int, rows: int, chunk: int, w, b,
               repeat: int) -> tuple[float, float]:
    """numpy's median time over map_chunks' on n workers, the two run in alternation, and
    the same of their CPU times (all processes)."""
    prog = sg.compile(program(chunk))
    X, y = lazy_data(da, rows, chunk)
    Xp, yp = client.persist([X, y])
    distributed.wait([Xp, yp])
    Xn, yn = client.compute([Xp, yp], sync=True)

    def numpy_run() -> list:
        parts = [prog(Xn[k:k + chunk], yn[k:k + chunk], w, b) for k in range(0, rows, chunk)]
        return [sum(p[j] for p in parts) / len(parts) for j in range(3)]

    def dask_run() -> list:
        return client.compute(sg.map_chunks(prog, Xp, yp, w, b, reduce="mean"), sync=True)

    peers.check_agree(f"gradient, {rows:,} rows, {n} worker(s)",
                      {"numpy": numpy_run(), "dask": dask_run()}, rtol=1e-12, atol=1e-15)
    times: dict[str, list] = {"numpy": [], "dask": []}
    cpu: dict[str, list] = {"numpy": [], "dask": []}
    for _ in range(repeat):
        for name, run in (("numpy", numpy_run), ("dask", dask_run)):
            start = _cpu_seconds()
            times[name].append(_seconds(run))
            cpu[name].append(_cpu_seconds() - start)
    unit, t = np.median(times["numpy"]), np.median(times["dask"])
    cpu_unit, cpu_t = np.median(cpu["numpy"]), np.median(cpu["dask"])
    print(f"{rows:10,d} rows, {n} worker(s): numpy {unit * 1e3:8.1f} ms, map_chunks "
          f"{t * 1e3:8.1f} ms ({rows / t:,.0f} rows/s); CPU numpy {cpu_unit * 1e3:.1f} ms, "
          f"map_chunks {cpu_t * 1e3:.1f} ms", flush=True)
    return float(unit / t), float(cpu_unit / cpu_t)


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


def _cpu_seconds() -> float:
    """CPU time of this process and its children (the worker processes): to the nanosecond
    from each live thread's /proc schedstat where Linux has it, else user and system time in
    clock ticks."""
    import psutil
    me = psutil.Process()
    total = 0.0
    for proc in [me, *me.children(recursive=True)]:
        try:
            total += _thread_ns(proc.pid) / 1e9
        except OSError:
            try:
                times = proc.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
    return total


def _thread_ns(pid: int) -> int:
    """Nanoseconds on a CPU of every live thread of process ``pid`` (Linux schedstat)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:       # the thread ended
            continue
    return total


def _seconds(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
