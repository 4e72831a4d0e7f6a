"""Cost per op as a chain grows: recording and the value-only gradient of 10^3 ... 10^6 ops.

The chain is the one ``tests/test_engine.py`` differentiates at 10^6 ops: a 2-value vector,
then ops alternating ``+ 1e-7`` and ``* 1.0000001``, then the sum; each run records it on a
fresh ``sg.Ops``, takes ``op.grad(L, x, create_graph=False)`` and drops everything (the
teardown is timed too). The lengths take turns in rounds (2 with ``--quick``, 5 without), each
with 10^5 ops of the shorter chains; microseconds per op are the medians for each length, and the
headline is the ratio of the cost per op at 10^6 to the cost per op at 10^3, in the same run:

- with Python's cycle collector as the user has it (on): what a script sees. A full collection
  walks every tracked object, and a recorded op is one (its Variable is its tape entry); the
  collections are spaced so that their cost per op stays bounded, but each walks a tape that
  has outgrown the caches;
- with the collector paused while timing (reference counting alone): the engine's own cost.

PyTorch (optional) runs the same chain with ``torch.autograd.grad`` beside it, for its own ratio
(its graph lives in C++, out of the collector's reach, and grows 2.3x dearer per op by 10^6
all the same: the memory a long tape occupies, faulted in and walked cold, costs per op too).
The gradient is checked against its closed form first: every ``* 1.0000001`` multiplies it.
Run: python benchmarks/chain_length.py [--quick]
"""

from __future__ import annotations

import gc
import statistics
import time

import numpy as np
import peers

import simplegrad as sg

FACTOR = 1.0000001
LENGTHS = (10**3, 10**4, 10**5, 10**6)


def run(n: int) -> tuple[float, np.ndarray]:
    """Seconds to record n ops, differentiate them and drop the tape; and the gradient."""
    t0 = time.perf_counter()
    op = sg.Ops()
    x = op.var([0.5, -0.25])
    y = x
    for i in range(n):
        y = y * FACTOR if i % 2 else y + 1e-7
    L = y.sum()
    g = op.grad(L, x, create_graph=False).value
    del op, x, y, L
    return time.perf_counter() - t0, g


def per_op(rounds: int, paused: bool) -> dict[int, float]:
    """Median microseconds per op at each length, the lengths taken in turn in each round (so
    that the machine's load drifts over all of them alike): 10^5 ops of short chains a round."""
    times: dict[int, list[float]] = {n: [] for n in LENGTHS}
    was = gc.isenabled()
    for _ in range(rounds):
        for n in LENGTHS:
            for _ in range(max(1, LENGTHS[-2] // n)):
                gc.collect()
                if paused:
                    gc.disable()
                try:
                    times[n].append(run(n)[0] / n * 1e6)
                finally:
                    if paused and was:
                        gc.enable()
    gc.collect()
    return {n: statistics.median(t) for n, t in times.items()}


def torch_per_op(torch: object, n: int, repeat: int) -> float:
    """Median microseconds per op of the same chain in PyTorch, forward and autograd.grad."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        x = torch.tensor([0.5, -0.25], dtype=torch.float64, requires_grad=True)
        y = x
        for i in range(n):
            y = y * FACTOR if i % 2 else y + 1e-7
        torch.autograd.grad(y.sum(), x)
        del x, y
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / n * 1e6


def main() -> None:
    args = peers.parser(__doc__).parse_args()
    n = LENGTHS[-1]
    g = run(n)[1]
    closed = np.full(2, FACTOR ** (n // 2))
    if not np.allclose(g, closed, rtol=1e-9):
        raise SystemExit(f"chain gradient {g} differs from the closed form {closed}")
    print(f"chain of {n} ops: gradient agrees with FACTOR ** (n / 2) (rtol 1e-9)")
    rows, ratios = [], {}
    for paused in (False, True):
        label = "collector paused" if paused else "collector on"
        costs = per_op(peers.repeats(args, 2, 5), paused)
        print(f"\n{label}: microseconds per op (record + gradient + teardown)")
        for length, c in costs.items():
            print(f"  {length:>9,d} ops  {c:6.2f} us  x{c / costs[LENGTHS[0]]:.2f}")
        ratios[label] = costs[n] / costs[LENGTHS[0]]
    torch = peers.torch_or_none()
    cols = {}
    if torch is not None:
        short = torch_per_op(torch, LENGTHS[0], 30)
        long = torch_per_op(torch, n, 1)
        print(f"\nPyTorch: {short:.2f} us per op at {LENGTHS[0]:,d}, {long:.2f} at {n:,d}: "
              f"x{long / short:.2f}")
        cols["torch eager"] = long / short
    rows.append({"workload": f"cost per op of a {n:,d}-op chain (record + gradient), "
                 "collector on", "unit": "its own cost per op at 10^3",
                 "target": "simplegrad <= 1.5",
                 "cols": {"simplegrad": ratios["collector on"], **cols}})
    rows.append({"workload": "  the same with the collector paused (reference counting alone)",
                 "unit": "its own cost per op at 10^3", "target": "simplegrad <= 1.5",
                 "cols": {"simplegrad": ratios["collector paused"]}})
    peers.emit(args, rows)


if __name__ == "__main__":
    main()
