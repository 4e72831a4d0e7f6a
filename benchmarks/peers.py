"""Shared by the peer benchmarks: optional peers, the value check, the printed table, --json.

Peers (PyTorch, torch.func, HIPS autograd, JAX) are imported here inside ``try``: none is a
dependency. Each is pinned to one thread and float64 so the comparison is like for like.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from timing import MEASURING_ENV, interleaved_medians


def pin_environment() -> None:
    """Re-run this script in ``timing.MEASURING_ENV`` (BLAS on one thread, glibc's malloc
    thresholds fixed), unless it already runs there.

    Both are read once, when BLAS loads and when the process starts, so the only sure way is
    an environment set before the process starts.
    """
    if all(os.environ.get(k) == v for k, v in MEASURING_ENV.items()):
        return
    os.environ.update(MEASURING_ENV)
    if sys.argv and os.path.isfile(sys.argv[0]):    # a script run: start it again
        os.execv(sys.executable, [sys.executable, *sys.argv])


pin_environment()


def pin_one_core() -> None:
    """Pin this process to one of the cores it may use (the highest numbered), where the OS
    allows it."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})


def torch_or_none() -> Any:
    """PyTorch on one thread, or None when it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    return torch


def autograd_or_none() -> Any:
    """HIPS autograd (the package), or None."""
    try:
        import autograd
        import autograd.numpy  # noqa: F401
    except ImportError:
        return None
    return autograd


def jax_or_none() -> Any:
    """JAX with float64 on one CPU core, or None.

    XLA's CPU runtime splits a large fused loop across every core the process may use, whatever
    ``XLA_FLAGS`` say (measured: a 10^5-value elementwise program took 1.9 s of CPU time a
    second of wall time); only the process's CPU affinity bounds it. So the process is pinned to
    one core before JAX starts, and every peer in it (each already on one thread) runs there.
    """
    pin_one_core()
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                          "intra_op_parallelism_threads=1")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    return jax


def parser(doc: str) -> argparse.ArgumentParser:
    """The arguments every peer benchmark takes: --quick, --repeat, --json."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats (for run_all --quick)")
    p.add_argument("--repeat", type=int, default=None, help="round-robin rounds")
    p.add_argument("--json", default=None, help="append the headline rows to this file")
    return p


def repeats(args: argparse.Namespace, quick: int, full: int) -> int:
    return args.repeat or (quick if args.quick else full)


def as_numpy(x: Any) -> np.ndarray:
    """A peer's result (tensor, jax array, Variable, number) as a float64 numpy array."""
    if hasattr(x, "detach"):
        x = x.detach().numpy()
    return np.asarray(getattr(x, "value", x), dtype=np.float64)


def check_agree(what: str, results: dict[str, Any], rtol: float = 1e-8,
                atol: float = 1e-10) -> None:
    """Exit with status 1 unless every run's value equals the first run's."""
    items = [(k, [as_numpy(p) for p in (v if isinstance(v, (list, tuple)) else [v])])
             for k, v in results.items()]
    ref_label, ref = items[0]
    for label, got in items[1:]:
        for i, (g, r) in enumerate(zip(got, ref)):
            if g.shape != r.shape or not np.allclose(g, r, rtol=rtol, atol=atol):
                err = np.max(np.abs(g - r)) if g.shape == r.shape else f"shape {g.shape}"
                print(f"{what}: {label} disagrees with {ref_label} (part {i}: {err})")
                sys.exit(1)
    print(f"{what}: {len(items)} runs agree (rtol {rtol:g}) with {ref_label}")


def measure(runs: dict[str, Callable[[], object]], repeat: int,
            clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Median seconds per run, measured round-robin in this process (``clock``: see
    ``timing.interleaved_medians``)."""
    return interleaved_medians(runs, repeat, clock)


def show(title: str, medians: dict[str, float], unit: str, unit_seconds: float) -> None:
    """Print each run's median and its ratio to the unit, all from the same run."""
    print(title)
    print(f"{'run':46s} {'ms':>9s} {'x ' + unit:>14s}")
    for label, t in medians.items():
        print(f"{label:46s} {t * 1e3:9.3f} {t / unit_seconds:14.2f}")


def emit(args: argparse.Namespace, rows: list[dict]) -> None:
    """Append headline rows (workload, unit, target, ratios by column) for run_all's table."""
    if not args.json:
        return
    with open(args.json, "a") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
