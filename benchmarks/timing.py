"""Shared by the benchmarks: medians measured round-robin, so machine noise hits all runs alike."""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable

# The environment every measuring process runs in (run_all.py sets it; peers.py re-runs a
# script in it). BLAS on one thread: a multithreaded OpenBLAS on a shared 2-core machine can
# make a 100x100 matmul 500 times slower. glibc's malloc thresholds fixed: with its adaptive
# defaults, interleaving workloads of different sizes makes it hand heap pages back to the
# system and fault them in again, and whichever run comes next pays (measured 0 to 300 page
# faults per call of the MLP step, moving single ratios by up to 70%); fixed, every run sees
# the steady state of a loop that repeats one workload. SIMPLEGRAD_BENCH_MALLOC=default keeps
# glibc's defaults.
MEASURING_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
if os.environ.get("SIMPLEGRAD_BENCH_MALLOC") != "default":
    MEASURING_ENV.update({"MALLOC_MMAP_THRESHOLD_": str(64 << 20),
                          "MALLOC_TRIM_THRESHOLD_": str(256 << 20)})


def interleaved_medians(runs: dict[str, Callable[[], object]], repeat: int,
                        clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Median seconds of each run, after one warm-up call each, measured in turns.

    Each turn visits the runs in a fresh order (a seeded shuffle of this call's own): what a
    run leaves behind (BLAS threads spinning or asleep, allocator and cache state) changes the
    next run's time by up to 10% on a 2-core machine, so a fixed order would always hand one
    run the same neighbour's state. ``clock``: wall time, or ``time.process_time`` for runs on
    one thread compared with each other (the CPU they took, whatever else the machine runs).
    """
    for fn in runs.values():
        fn()
    times: dict[str, list[float]] = {label: [] for label in runs}
    order = list(runs.items())
    shuffle = random.Random(0).shuffle      # a local generator: the global seed is untouched
    for _ in range(repeat):
        shuffle(order)
        for label, fn in order:
            t0 = clock()
            fn()
            times[label].append(clock() - t0)
    return {label: statistics.median(ts) for label, ts in times.items()}
