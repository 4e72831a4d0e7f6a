"""Shared by the benchmarks: medians measured round-robin, so machine noise hits all runs alike."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def interleaved_medians(runs: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median seconds of each run, after one warm-up call each, measured in turns."""
    for fn in runs.values():
        fn()
    times: dict[str, list[float]] = {label: [] for label in runs}
    for _ in range(repeat):
        for label, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - t0)
    return {label: statistics.median(ts) for label, ts in times.items()}
