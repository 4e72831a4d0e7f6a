"""Per-op overhead: a chain of elementwise ops on a length-4 vector, then its gradient.

Prints microseconds per recorded op (forward) and per op of forward+backward,
each as a ratio to the same chain in plain numpy measured in the same run.
If PyTorch is installed, its eager mode is measured on the same chain too.
Run: python benchmarks/overhead.py [--ops 1000] [--repeat 15]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import simplegrad as sg


def chain_numpy(x: np.ndarray, n: int) -> np.ndarray:
    for i in range(n):
        k = i % 4
        if k == 0:
            x = x * 0.999
        elif k == 1:
            x = x + 0.001
        elif k == 2:
            x = np.tanh(x)
        else:
            x = np.sin(x)
    return x


def chain_sg(x, n: int):
    for i in range(n):
        k = i % 4
        if k == 0:
            x = x * 0.999
        elif k == 1:
            x = x + 0.001
        elif k == 2:
            x = x.tanh()
        else:
            x = x.sin()
    return x


def interleaved_medians(runs: dict, repeat: int) -> dict:
    """Median time of each run, measured round-robin so machine noise hits all alike."""
    for fn in runs.values():    # warm up
        fn()
    times = {label: [] for label in runs}
    for _ in range(repeat):
        for label, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - t0)
    return {label: statistics.median(ts) for label, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    n, repeat = args.ops, args.repeat
    x0 = np.array([0.1, 0.2, 0.3, 0.4])

    def numpy_run():
        chain_numpy(x0, n)

    def forward():
        op = sg.Ops()
        x = op.var(x0)
        chain_sg(x, n).sum()

    def fwd_bwd(create_graph: bool):
        def run():
            op = sg.Ops()
            x = op.var(x0)
            op.grad(chain_sg(x, n).sum(), [x], create_graph=create_graph)
        return run

    runs = {
        "numpy forward": numpy_run,
        "simplegrad forward (recorded)": forward,
        "simplegrad fwd+bwd create_graph=True": fwd_bwd(True),
        "simplegrad fwd+bwd create_graph=False": fwd_bwd(False),
    }

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(1)

        def torch_run(create_graph: bool):
            def run():
                x = torch.tensor(x0, requires_grad=True)
                y = x
                for i in range(n):
                    k = i % 4
                    y = y * 0.999 if k == 0 else y + 0.001 if k == 1 else (
                        torch.tanh(y) if k == 2 else torch.sin(y))
                torch.autograd.grad(y.sum(), [x], create_graph=create_graph)
            return run
        runs["torch eager fwd+bwd create_graph=True"] = torch_run(True)
        runs["torch eager fwd+bwd create_graph=False"] = torch_run(False)

    rows = list(interleaved_medians(runs, repeat).items())
    base = rows[0][1]
    print(f"chain of {n} elementwise ops on a length-4 vector, median of {repeat} runs")
    print(f"{'measurement':42s} {'us/op':>8s} {'x numpy':>8s}")
    for label, t in rows:
        print(f"{label:42s} {t / n * 1e6:8.2f} {t / base:8.1f}")
    if torch is not None:
        table = dict(rows)
        for mode in ("True", "False"):
            ratio = (table[f"simplegrad fwd+bwd create_graph={mode}"]
                     / table[f"torch eager fwd+bwd create_graph={mode}"])
            print(f"simplegrad / torch, create_graph={mode}: {ratio:.2f}")


if __name__ == "__main__":
    main()
