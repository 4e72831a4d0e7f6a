"""Shared by the benchmarks: medians measured round-robin, so machine noise hits all runs alike."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable


def interleaved_medians(runs: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median seconds of each run, after one warm-up call each, measured in turns.

    Each turn visits the runs in a fresh order (a seeded shuffle of this call's own): what a
    run leaves behind (BLAS threads spinning or asleep, allocator and cache state) changes the
    next run's time by up to 10% on a 2-core machine, so a fixed order would always hand one
    run the same neighbour's state.
    """
    for fn in runs.values():
        fn()
    times: dict[str, list[float]] = {label: [] for label in runs}
    order = list(runs.items())
    shuffle = random.Random(0).shuffle      # a local generator: the global seed is untouched
    for _ in range(repeat):
        shuffle(order)
        for label, fn in order:
            t0 = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - t0)
    return {label: statistics.median(ts) for label, ts in times.items()}
